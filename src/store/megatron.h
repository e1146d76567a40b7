/*
 * megatron.h - the Megatron-LM indexed dataset (.idx) parser: a pure
 * function over the bytes of the .idx and the length of the matching .bin.
 *
 * Errors come back as a code and a message in a caller-supplied buffer; the
 * message names the file(s) passed in, the field and its byte offset.
 */
#ifndef CXLP_MEGATRON_H
#define CXLP_MEGATRON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define MEGATRON_MAGIC "MMIDIDX\x00\x00"
#define MEGATRON_MAGIC_LEN 9
#define MEGATRON_HEADER_LEN 34   /* magic 9 + version 8 + dtype 1 + 2 counts x 8 */

/* A validated .idx. The arrays point into the caller's buffer (borrowed: valid
 * while it is) and are not aligned: read them with the accessors below. */
struct megatron_idx {
    uint8_t code;            /* Megatron's DType code, 1..8 */
    int dtype;               /* enum cxlp_dtype */
    int itemsize;
    uint64_t n_seqs;         /* sequence_count */
    uint64_t n_doc_entries;  /* document_count: n_docs + 1 (leading 0) */
    int multimodal;          /* an int8 mode per sequence follows (ignored) */
    uint64_t total_bytes;    /* sum of sequence lengths * itemsize */
    int contiguous;          /* pointers[0] = 0 and each sequence starts where
                                the previous one ends: the .bin is one run */
    const uint8_t *lengths;  /* int32 LE [n_seqs] */
    const uint8_t *pointers; /* int64 LE [n_seqs], byte offsets into the .bin */
    const uint8_t *docs;     /* int64 LE [n_doc_entries] */
};

/* Validates everything: magic, version == 1, dtype code, counts against the
 * .idx size (no overflow), each length >= 0, pointers non-decreasing with
 * pointer + length*itemsize <= bin_len, document indices non-decreasing in
 * [0, n_seqs] with first 0 and last n_seqs. Returns 0, CXLP_EBADINPUT or
 * CXLP_EUNSUPPORTED (version) with a message naming idx_name (and bin_name
 * when the .bin is too short), the field and the byte offset. */
int megatron_idx_parse(const uint8_t *buf, uint64_t len, uint64_t bin_len,
                       const char *idx_name, const char *bin_name,
                       struct megatron_idx *out, char *err, size_t errcap);

/* Megatron DType code -> enum cxlp_dtype (and *itemsize), -1 for an unknown
 * code. The parsers carry their own sizes so they stand alone (fuzzing). */
int megatron_dtype(int code, int *itemsize);

static inline int64_t megatron_rd64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return (int64_t)v;
}

static inline int32_t megatron_seq_len(const struct megatron_idx *m, uint64_t i)
{
    const uint8_t *p = m->lengths + 4 * i;
    return (int32_t)((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                     ((uint32_t)p[3] << 24));
}

static inline int64_t megatron_seq_ptr(const struct megatron_idx *m, uint64_t i)
{
    return megatron_rd64(m->pointers + 8 * i);
}

static inline int64_t megatron_doc(const struct megatron_idx *m, uint64_t i)
{
    return megatron_rd64(m->docs + 8 * i);
}

#endif
