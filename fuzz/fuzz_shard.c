/*
 * fuzz_shard.c - libFuzzer target for the shard header, column directory
 * and index parser (formats 1 to 4: the block sums of 3 and 4 too, and
 * version 4's sums area).
 *
 * The input bytes are one shard extent, as a pool would hold it: open its
 * header alone and verify every page of sums and every block sum (a
 * partial read's first steps, versions 3 and 4), then validate it whole, read every record of every column
 * (each view must lie inside its column's data), turn each variable-length
 * column into the element offsets a rewrite hands the writer (ascending,
 * inside the data), verify the checksums. Any
 * input must end in 0 or an error code, never in a crash or an access
 * outside the buffer. Seeds:
 * fuzz/corpus/fuzz_shard/ (written by `test_store_format --write-seeds DIR`:
 * format 1, 2 and 3 shards as earlier builds wrote them, format 4 shards of
 * one and three columns, and one with its sums in a sums area).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "store/shard.h"

static void scan(uint8_t *buf, size_t size)
{
    char err[512];
    struct shard s;
    struct shard_col cols[SHARD_MAX_COLS];
    /* what a partial read opens first (the header's fields only), then
     * every block sum against its block, as a partial read verifies them */
    if (shard_open_head(&s, cols, SHARD_MAX_COLS, buf, size, err, sizeof err) == 0 && s.n_bsums &&
        shard_verify_sum_pages(&s, 0, shard_sum_pages(&s), err, sizeof err) == 0)
        (void)shard_verify_blocks(&s, 0, s.n_bsums, err, sizeof err);
    if (shard_open(&s, cols, SHARD_MAX_COLS, buf, size, err, sizeof err) == 0) {
        uint64_t sum = 0;
        for (uint32_t c = 0; c < s.n_cols; c++) {
            const struct shard_col *col = &s.col[c];
            for (uint64_t i = 0; i < s.n_records; i++) {
                const uint8_t *p;
                uint64_t len;
                if (shard_col_record(col, i, &p, &len) != 0) {
                    shard_explain(&s, c, i, err, sizeof err);
                    continue;
                }
                if (p < col->data || len > col->data_len ||
                    (uint64_t)(p - col->data) > col->data_len - len)
                    abort();
                if (len)
                    sum += p[0] + p[len - 1];
            }
        }
        /* the offsets a rewrite hands the writer (cxlp_pool_rewrite), in
         * 1- and 8-byte elements: ascending, inside the data */
        int64_t *off = malloc((size_t)(s.n_records + 1) * sizeof *off);
        for (uint32_t c = 0; c < s.n_cols && off && s.n_records < (1u << 24); c++) {
            if (s.col[c].kind != SHARD_KIND_VAR)
                continue;
            for (uint64_t elem = 1; elem <= 8; elem *= 8) {
                if (shard_col_offsets(&s, c, elem, off, err, sizeof err))
                    continue;
                for (uint64_t i = 0; i < s.n_records; i++)
                    if (off[i] > off[i + 1] || (uint64_t)off[i + 1] * elem > s.col[c].data_len)
                        abort();
            }
        }
        free(off);
        (void)shard_verify(&s, err, sizeof err);
        if (s.n_bsums && shard_verify_sum_pages(&s, 0, shard_sum_pages(&s), err, sizeof err) == 0)
            (void)shard_verify_blocks(&s, 0, s.n_bsums, err, sizeof err);
        (void)sum;
    }
}

/* Writes the header checksum the input's version expects (format 1: the
 * header; format 2: the header and the column directory it names; formats 3
 * and 4: and the block sums or page sums it names, when they lie inside the
 * input). */
static void rehash(uint8_t *buf, size_t size)
{
    uint32_t version, n_cols, n_bsums;
    memcpy(&version, buf + 8, 4);
    memcpy(&n_cols, buf + 12, 4);
    memcpy(&n_bsums, buf + offsetof(struct shard_hdr2, n_bsums), 4);
    uint64_t h;
    uint64_t sums_off;
    memcpy(&sums_off, buf + offsetof(struct shard_hdr2, sums_off), 8);
    if ((version == SHARD_VERSION || version == SHARD_VERSION_V3 || version == SHARD_VERSION_V2) &&
        n_cols <= SHARD_MAX_COLS && size >= SHARD_HDR_BYTES + (uint64_t)n_cols * SHARD_COL_BYTES) {
        uint64_t nb = shard_head_sums(version, n_bsums, sums_off);
        if (shard_bsum_off(n_cols) + nb * 8 > size)
            nb = 0;
        XXH3_state_t st;
        XXH3_64bits_reset(&st);
        XXH3_64bits_update(&st, buf, 120);
        XXH3_64bits_update(&st, buf + SHARD_HDR_BYTES, (size_t)n_cols * SHARD_COL_BYTES);
        XXH3_64bits_update(&st, buf + shard_bsum_off(n_cols), (size_t)nb * 8);
        h = XXH3_64bits_digest(&st);
    } else {
        h = XXH3_64bits(buf, offsetof(struct shard_hdr, hdr_checksum));
    }
    memcpy(buf + offsetof(struct shard_hdr, hdr_checksum), &h, 8);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy at an allocation of exactly size bytes, so ASan flags
     * any read past the extent */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    scan(buf, size);
    /* Mutations rarely keep the header checksum right, which would stop
     * them at the first check: scan again with it recomputed, so the field,
     * directory and index checks behind it are explored too. */
    if (size >= sizeof(struct shard_hdr)) {
        rehash(buf, size);
        scan(buf, size);
    }
    free(buf);
    return 0;
}
