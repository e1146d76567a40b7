/*
 * store.h - the store layer's private interface: schema checks shared by the
 * writer and the reader, and what importers may use beyond the public writer
 * API.
 */
#ifndef CXLP_STORE_H
#define CXLP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

/* Checks a dataset name: 1..63 bytes, printable ASCII, no '/'. 0 or
 * CXLP_EARG with a message in err. */
int store_name_check(const char *name, char *err, size_t errlen);

/* Checks schema in and writes its normalized form to out: fixed-size field
 * offsets and record_size filled in where the caller left them 0; nonzero
 * values that disagree with the back-to-back layout are refused. 0 or
 * CXLP_EARG naming the field. in == out is allowed. */
int schema_normalize(const struct cxlp_schema *in, struct cxlp_schema *out,
                     char *err, size_t errlen);

/* Bytes of one element of a variable-size record (the schema's one field),
 * or record_size for fixed. */
uint64_t schema_unit(const struct cxlp_schema *s);

/* Fixed-size records: bytes that cxlp_writer_direct can hand out without
 * closing the current shard early (a multiple of record_size; 0 when the
 * writer failed). Importers size their read()s by it so that shards stay
 * equal and the reader finds a record's shard by one division. */
uint64_t writer_room(const cxlp_writer *w);

#endif
