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

/* Bytes per record of a fixed-shape field of a normalized schema; 0 for a
 * variable-length one. */
uint64_t schema_field_size(const struct cxlp_field *f);

/* Offset of the first byte of p[0..len) that is not valid UTF-8, or len. */
uint64_t utf8_check(const uint8_t *p, uint64_t len);

/* Fields fields[0..n) of record idx in one lookup of its shard (the gather
 * engine reads several fields of each record). Thread-safe; as
 * cxlp_store_read_field, with field numbers trusted (checked by the
 * caller). */
int store_read_fields(const cxlp_store *s, uint64_t idx, const uint32_t *fields, uint32_t n,
                      struct cxlp_view *v);

/* Fixed-size records: bytes that cxlp_writer_direct can hand out without
 * closing the current shard early (a multiple of record_size; 0 when the
 * writer failed). Importers size their read()s by it so that shards stay
 * equal and the reader finds a record's shard by one division. */
uint64_t writer_room(const cxlp_writer *w);

/* reader.c: 0 while the store's pool mapping and lease are intact, else
 * attach_lost's code and message (thread's message). For the gather
 * engine, after a batch during which read_alarm moved. */
int store_check(const void *store);

/* Variable-size records without a bounce buffer (e.g. a run of Megatron
 * sequences, contiguous in the .bin, read() straight into the pool):
 * writer_direct_var returns room for n records totalling bytes at *dst;
 * writer_commit_var(lens, n) then makes the first n (<= the announced n)
 * records of lens[i] bytes each out of what was written there (sum(lens) <=
 * bytes). A run larger than a shard gets a shard of its own size, so callers
 * keep runs near the ~1-4 MiB they read at once. CXLP_EARG on misuse. */
int writer_direct_var(cxlp_writer *w, uint64_t bytes, uint64_t n, void **dst);
int writer_commit_var(cxlp_writer *w, const uint64_t *lens, uint64_t n);

/* Fields fields[0..nf) of records ids[0..n), record i's field j into
 * out[i * nf + j] (what store_read_fields gives for each, without a call
 * per record where the layout allows: fixed-shape fields in equal shards).
 * 0, or the first failure's code with *bad its index in ids and the message
 * in cxlp_errmsg(NULL). Field numbers trusted, as store_read_fields.
 * Thread-safe. */
int store_resolve(const cxlp_store *s, const uint64_t *ids, size_t n, const uint32_t *fields,
                  uint32_t nf, struct cxlp_view *out, size_t *bad);
/* NUMA node the dataset's memory is bound to (numa pools), else -1. */
int store_numa_node(const cxlp_store *s);

#endif
