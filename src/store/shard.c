/*
 * shard.c - shard header, column directory and index: validation,
 * checksums, sealing.
 *
 * The format is described in shard.h and docs/store-format.md. This file
 * holds the parts that are not on the read hot path: shard_open (every header
 * field, directory entry and index block checked against the extent, in an
 * order where each check only relies on fields checked before it),
 * shard_verify, and the encoders.
 *
 * Invariants a column that passes shard_open satisfies (version 1: the one
 * column the header describes):
 *   SHARD_HDR_BYTES <= data_off,  data_off + data_len <= index_off,
 *   index_off + index_len <= extent_len,  index_off % 8 == 0
 *   fixed: record_size > 0, n_records * record_size == data_len, index_len == 0
 *   var:   n_blocks == ceil(n_records / 64),
 *          n_blocks * 16 <= every block's delta position,
 *          delta position + count * width <= index_len,
 *          anchors non-decreasing and <= data_len
 * (fixed: the index fields are zero, and version 1's index_off is not used)
 * and in version 2 also: data_off >= SHARD_DATA_OFF, data_off % 64 == 0,
 * 1 <= n_cols <= SHARD_MAX_COLS, every column inside the bytes the header
 * says the shard uses. The read path re-checks what it loads from an index
 * directory, so these hold for the entries it uses even if the shard changes
 * after open.
 */
#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>
#ifdef CXLP_HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h> /* XXH3 at the CPU's widest vectors: same sums */
#endif

#include "store/shard.h"

#define HDR_SUM_BYTES offsetof(struct shard_hdr, hdr_checksum)
_Static_assert(offsetof(struct shard_hdr2, hdr_checksum) == HDR_SUM_BYTES,
               "both versions keep the header checksum at byte 120");

uint64_t shard_layout_v1(void)
{
    /* exactly the facts version 1 was written with: shards of earlier
     * builds carry this value */
    const uint64_t facts[] = {
        sizeof(struct shard_hdr),
        offsetof(struct shard_hdr, n_records),
        offsetof(struct shard_hdr, checksum),
        offsetof(struct shard_hdr, hdr_checksum),
        SHARD_DATA_OFF, SHARD_BLOCK, SHARD_DIRENT_BYTES, 56 /* width shift */,
    };
    return layout_signature(facts, sizeof facts / sizeof facts[0]);
}

/* version selects the facts: version 2 shards carry the signature of
 * exactly the facts they were written with */
uint64_t shard_layout_of(uint32_t version)
{
    const uint64_t facts[] = {
        2 /* version */,
        sizeof(struct shard_hdr2),
        offsetof(struct shard_hdr2, n_records),
        offsetof(struct shard_hdr2, used),
        offsetof(struct shard_hdr2, hdr_checksum),
        sizeof(struct shard_dirent2),
        offsetof(struct shard_dirent2, data_off),
        offsetof(struct shard_dirent2, checksum),
        SHARD_DATA_OFF, SHARD_BLOCK, SHARD_DIRENT_BYTES, 56 /* width shift */,
        SHARD_MAX_COLS, SHARD_COL_ALIGN,
        /* version 3 adds the block sums */
        3, offsetof(struct shard_hdr2, bsum_shift), offsetof(struct shard_hdr2, n_bsums),
        SHARD_BSUM_SHIFT, SHARD_BSUM_SHIFT_MAX,
        /* version 4: smaller blocks, and the sums area */
        4, offsetof(struct shard_hdr2, sums_off), SHARD_BSUM_SHIFT4, SHARD_SUMS_PAGE,
    };
    size_t n = sizeof facts / sizeof facts[0];
    return layout_signature(facts, version == SHARD_VERSION_V2 ? n - 9
                                   : version == SHARD_VERSION_V3 ? n - 4 : n);
}

uint64_t shard_layout(void)
{
    return shard_layout_of(SHARD_VERSION);
}

#define FAIL(rc, ...) (snprintf(err, errlen, __VA_ARGS__), (rc))
#define HOFF(f) ((unsigned)offsetof(struct shard_hdr, f))

/* What a column's description says, before it is trusted. where names the
 * header (v1) or the directory entry (v2) in messages. */
struct col_desc {
    uint32_t kind;
    uint64_t record_size, data_off, data_len, index_off, index_len;
    uint64_t n_blocks;        /* v1: from the header; v2: derived */
    uint64_t checksum;
};

/* walk: check every index directory entry (reads the index bytes); 0: the
 * header's fields only (shard_open_head). */
static int col_open(struct shard_col *c, const uint8_t *base, uint64_t extent_len,
                    uint64_t n_records, const struct col_desc *d, const char *where, int walk,
                    char *err, size_t errlen)
{
    if (d->kind != SHARD_KIND_FIXED && d->kind != SHARD_KIND_VAR)
        return FAIL(CXLP_ECORRUPT, "%s: record kind %u", where, d->kind);
    if (d->data_off < SHARD_HDR_BYTES || !range_ok(d->data_off, d->data_len, extent_len))
        return FAIL(CXLP_ECORRUPT, "%s: data [%" PRIu64 ", +%" PRIu64 ") outside extent of %" PRIu64 " bytes",
                    where, d->data_off, d->data_len, extent_len);
    /* version 1 places even a fixed-size shard's empty index after the
     * data; version 2 leaves a fixed column's index fields zero */
    if ((d->kind == SHARD_KIND_VAR || d->index_off != 0) &&
        (d->index_off % 8 || d->index_off < d->data_off + d->data_len ||
         !range_ok(d->index_off, d->index_len, extent_len)))
        return FAIL(CXLP_ECORRUPT, "%s: index [%" PRIu64 ", +%" PRIu64 ") outside extent of %" PRIu64 " bytes or overlapping data",
                    where, d->index_off, d->index_len, extent_len);
    memset(c, 0, sizeof *c);
    c->kind = d->kind;
    c->n_records = n_records;
    c->data = base + d->data_off;
    c->data_off = d->data_off;
    c->data_len = d->data_len;
    /* a fixed column has no index: point at the end of its data, so no
     * pointer is ever formed outside the extent */
    c->index = d->kind == SHARD_KIND_VAR ? base + d->index_off : c->data + d->data_len;
    c->index_off = d->kind == SHARD_KIND_VAR ? d->index_off : d->data_off + d->data_len;
    c->index_len = d->index_len;
    c->checksum = d->checksum;
    shard_col_whole(c);

    if (d->kind == SHARD_KIND_FIXED) {
        uint64_t total;
        if (d->record_size == 0 || mul_overflow_u64(n_records, d->record_size, &total) ||
            total != d->data_len)
            return FAIL(CXLP_ECORRUPT, "%s: fixed-size records: %" PRIu64 " records of %" PRIu64 " bytes do not make data_len %" PRIu64,
                        where, n_records, d->record_size, d->data_len);
        if (d->index_len != 0 || d->n_blocks != 0)
            return FAIL(CXLP_ECORRUPT, "%s: fixed-size records with an index", where);
        c->record_size = d->record_size;
        return 0;
    }
    if (d->record_size != 0)
        return FAIL(CXLP_ECORRUPT, "%s: variable-size records with record_size %" PRIu64,
                    where, d->record_size);
    uint64_t nb = n_records / SHARD_BLOCK + (n_records % SHARD_BLOCK != 0);
    if (d->n_blocks != nb || nb > d->index_len / SHARD_DIRENT_BYTES)
        return FAIL(CXLP_ECORRUPT, "%s: index of %" PRIu64 " blocks does not fit %" PRIu64 " records in %" PRIu64 " index bytes",
                    where, d->n_blocks, n_records, d->index_len);
    if (n_records == 0 && d->data_len != 0)
        return FAIL(CXLP_ECORRUPT, "%s: no records but %" PRIu64 " data bytes", where, d->data_len);
    c->n_blocks = nb;
    uint64_t prev = 0;
    for (uint64_t b = 0; walk && b < nb; b++) {
        const uint8_t *e = c->index + b * SHARD_DIRENT_BYTES;
        uint64_t anchor, pw;
        memcpy(&anchor, e, 8);
        memcpy(&pw, e + 8, 8);
        if (!shard_dirent_ok(c, b, anchor, pw) || anchor < prev)
            return FAIL(CXLP_ECORRUPT, "%s: index block %" PRIu64 " at offset %" PRIu64 ": anchor %" PRIu64 ", deltas at %" PRIu64 " width %u out of bounds",
                        where, b, d->index_off + b * SHARD_DIRENT_BYTES, anchor, pw & SHARD_POS_MASK,
                        (unsigned)(pw >> 56));
        prev = anchor;
    }
    return 0;
}

static int open_v1(struct shard *s, struct shard_col *cols, const uint8_t *base,
                   uint64_t extent_len, int walk, char *err, size_t errlen)
{
    struct shard_hdr h;
    memcpy(&h, base, sizeof h); /* one private copy: later checks cannot race */
    if (h.layout != shard_layout_v1())
        return FAIL(CXLP_ELAYOUT, "shard layout signature %016" PRIx64 " at offset %u, this build has %016" PRIx64 " for version 1",
                    h.layout, HOFF(layout), shard_layout_v1());
    uint64_t hs = XXH3_64bits(&h, HDR_SUM_BYTES);
    if (hs != h.hdr_checksum)
        return FAIL(CXLP_ECORRUPT, "shard header checksum mismatch at offset %u (stored %016" PRIx64 ", computed %016" PRIx64 ")",
                    HOFF(hdr_checksum), h.hdr_checksum, hs);
    if (h.kind == SHARD_KIND_VAR && h.block_records != SHARD_BLOCK)
        return FAIL(CXLP_ECORRUPT, "index block of %" PRIu64 " records at header offset %u, expected %u",
                    h.block_records, HOFF(block_records), SHARD_BLOCK);
    struct col_desc d = {
        .kind = h.kind, .record_size = h.kind == SHARD_KIND_VAR ? 0 : h.record_size,
        .data_off = h.data_off, .data_len = h.data_len, .index_off = h.index_off,
        .index_len = h.index_len, .n_blocks = h.n_blocks, .checksum = h.checksum,
    };
    s->n_cols = 1;
    return col_open(&cols[0], base, extent_len, h.n_records, &d, "shard header", walk, err,
                    errlen);
}

/* Blocks of 2^shift bytes ending at end. */
static uint64_t blocks_to(uint64_t end, uint32_t shift)
{
    uint64_t last = end > SHARD_DATA_OFF ? end - 1 : SHARD_DATA_OFF - 1;
    return (last >> shift) + 1;
}

/* Versions 2, 3 and 4 (3: version 2 with block sums; 4: smaller blocks,
 * and a sums area when their sums do not fit the header page). */
static int open_v2(struct shard *s, struct shard_col *cols, uint32_t max_cols,
                   const uint8_t *base, uint64_t extent_len, int walk, char *err, size_t errlen)
{
    struct shard_hdr2 h;
    memcpy(&h, base, sizeof h);
    if (h.layout != shard_layout_of(h.version))
        return FAIL(CXLP_ELAYOUT, "shard layout signature %016" PRIx64 " at offset %u, this build has %016" PRIx64 " for version %u",
                    h.layout, (unsigned)offsetof(struct shard_hdr2, layout), shard_layout_of(h.version),
                    h.version);
    if (h.n_cols == 0 || h.n_cols > SHARD_MAX_COLS || h.n_cols > max_cols ||
        h.dir_off != SHARD_HDR_BYTES)
        return FAIL(CXLP_ECORRUPT, "shard of %u columns (header offset %u), directory at %" PRIu64 ": at most %u columns, directory at %u",
                    h.n_cols, (unsigned)offsetof(struct shard_hdr2, n_cols), h.dir_off,
                    MIN(max_cols, (uint32_t)SHARD_MAX_COLS), SHARD_HDR_BYTES);
    uint64_t dir_len = (uint64_t)h.n_cols * SHARD_COL_BYTES;
    if (extent_len < SHARD_HDR_BYTES + dir_len)
        return FAIL(CXLP_ECORRUPT, "extent of %" PRIu64 " bytes is shorter than the header and a directory of %u columns",
                    extent_len, h.n_cols);
    struct shard_dirent2 dir[SHARD_MAX_COLS];
    memcpy(dir, base + SHARD_HDR_BYTES, (size_t)dir_len);
    /* the block sums: in the header page after the directory (or there
     * the page sums of the sums area), so their bounds need only the
     * header's fields */
    const int v4 = h.version == SHARD_VERSION;
    uint64_t n_bsums = h.version >= SHARD_VERSION_V3 ? h.n_bsums : 0;
    uint64_t sums_off = v4 ? h.sums_off : 0;
    if (h.version == SHARD_VERSION_V2 && (h.bsum_shift || h.n_bsums))
        return FAIL(CXLP_ECORRUPT, "version 2 shard with block sums (header offset %u)",
                    (unsigned)offsetof(struct shard_hdr2, bsum_shift));
    if (h.version == SHARD_VERSION_V3 && h.sums_off)
        return FAIL(CXLP_ECORRUPT, "version 3 shard with a sums area (header offset %u)",
                    (unsigned)offsetof(struct shard_hdr2, sums_off));
    /* what the header page holds: the block sums, or the page sums */
    uint64_t n_hsums = shard_head_sums(h.version, n_bsums, sums_off);
    uint32_t min_shift = v4 ? SHARD_BSUM_SHIFT4 : SHARD_BSUM_SHIFT;
    if (n_bsums &&
        (h.bsum_shift < min_shift || h.bsum_shift > SHARD_BSUM_SHIFT_MAX ||
         n_hsums > shard_bsum_cap(h.n_cols) || extent_len < SHARD_DATA_OFF))
        return FAIL(CXLP_ECORRUPT, "block sums: %" PRIu64 " of blocks of 2^%u bytes (header offset %u)%s: block of 2^%u..2^%u bytes, at most %" PRIu64 " sums in the header page, in an extent of at least %u bytes (it has %" PRIu64 ")",
                    n_bsums, h.bsum_shift, (unsigned)offsetof(struct shard_hdr2, bsum_shift),
                    sums_off ? " in a sums area" : "", min_shift, SHARD_BSUM_SHIFT_MAX,
                    shard_bsum_cap(h.n_cols), SHARD_DATA_OFF, extent_len);
    if (h.version >= SHARD_VERSION_V3 && n_bsums == 0)
        return FAIL(CXLP_ECORRUPT, "version %u shard without block sums (header offset %u)",
                    h.version, (unsigned)offsetof(struct shard_hdr2, n_bsums));
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &h, HDR_SUM_BYTES);
    XXH3_64bits_update(&st, dir, (size_t)dir_len);
    XXH3_64bits_update(&st, base + shard_bsum_off(h.n_cols), (size_t)n_hsums * 8);
    uint64_t hs = XXH3_64bits_digest(&st);
    if (hs != h.hdr_checksum)
        return FAIL(CXLP_ECORRUPT, "shard header checksum mismatch at offset %u (stored %016" PRIx64 ", computed %016" PRIx64 " over the header, the directory of %u columns and %" PRIu64 " %s sums)",
                    (unsigned)HDR_SUM_BYTES, h.hdr_checksum, hs, h.n_cols, n_hsums,
                    sums_off ? "page" : "block");
    if (h.used > extent_len || h.used < SHARD_DATA_OFF)
        return FAIL(CXLP_ECORRUPT, "shard uses %" PRIu64 " bytes (header offset %u) of an extent of %" PRIu64,
                    h.used, (unsigned)offsetof(struct shard_hdr2, used), extent_len);
    /* the blocks end where the shard does, or where its sums area starts */
    uint64_t bend = h.used;
    if (sums_off && (sums_off % SHARD_SUMS_PAGE || sums_off < SHARD_DATA_OFF ||
                     n_bsums > (h.used - SHARD_DATA_OFF) / 8 ||
                     sums_off != h.used - n_bsums * 8))
        return FAIL(CXLP_ECORRUPT, "sums area at %" PRIu64 " (header offset %u): %" PRIu64 " sums must end where the shard's %" PRIu64 " bytes do, from a multiple of %u past the header page",
                    sums_off, (unsigned)offsetof(struct shard_hdr2, sums_off), n_bsums, h.used,
                    SHARD_SUMS_PAGE);
    if (sums_off)
        bend = sums_off;
    if (n_bsums && n_bsums != blocks_to(bend, h.bsum_shift))
        return FAIL(CXLP_ECORRUPT, "%" PRIu64 " block sums of 2^%u bytes (header offset %u) do not cover the %" PRIu64 " bytes the %s",
                    n_bsums, h.bsum_shift, (unsigned)offsetof(struct shard_hdr2, n_bsums), bend,
                    sums_off ? "sums area starts at" : "shard uses");
    s->used = h.used;
    s->bend = bend;
    s->sums_off = sums_off;
    s->bsum_shift = n_bsums ? h.bsum_shift : 0;
    s->n_bsums = (uint32_t)n_bsums;
    s->n_cols = h.n_cols;
    for (uint32_t c = 0; c < h.n_cols; c++) {
        const struct shard_dirent2 *e = &dir[c];
        char where[96];
        snprintf(where, sizeof where, "column %u (directory entry at offset %" PRIu64 ")", c,
                 (uint64_t)SHARD_HDR_BYTES + (uint64_t)c * SHARD_COL_BYTES);
        if (e->data_off < SHARD_DATA_OFF || e->data_off % SHARD_COL_ALIGN)
            return FAIL(CXLP_ECORRUPT, "%s: data offset %" PRIu64 " is before %u or not %u-byte aligned",
                        where, e->data_off, SHARD_DATA_OFF, SHARD_COL_ALIGN);
        if (e->kind == SHARD_KIND_FIXED && (e->index_off != 0 || e->index_len != 0))
            return FAIL(CXLP_ECORRUPT, "%s: fixed-size records with an index", where);
        struct col_desc d = {
            .kind = e->kind, .record_size = e->record_size, .data_off = e->data_off,
            .data_len = e->data_len,
            .index_off = e->index_off,
            .index_len = e->index_len,
            .n_blocks = e->kind == SHARD_KIND_VAR ? (h.n_records + SHARD_BLOCK - 1) / SHARD_BLOCK : 0,
            .checksum = e->checksum,
        };
        int rc = col_open(&cols[c], base, extent_len, h.n_records, &d, where, walk, err, errlen);
        if (rc)
            return rc;
        /* bend: the shard's bytes before its sums area */
        if (d.index_off + d.index_len > bend && e->kind == SHARD_KIND_VAR)
            return FAIL(CXLP_ECORRUPT, "%s: index ends past byte %" PRIu64 " (where the shard's %s)", where, bend,
                        sums_off ? "sums area starts" : "bytes end");
        if (e->data_off + e->data_len > bend)
            return FAIL(CXLP_ECORRUPT, "%s: data ends past byte %" PRIu64 " (where the shard's %s)", where, bend,
                        sums_off ? "sums area starts" : "bytes end");
    }
    return 0;
}

static int open_any(struct shard *s, struct shard_col *cols, uint32_t max_cols,
                    const void *base, uint64_t extent_len, int walk, char *err, size_t errlen)
{
    char magic[8];
    uint32_t version;
    if (extent_len < SHARD_HDR_BYTES)
        return FAIL(CXLP_ECORRUPT, "extent of %" PRIu64 " bytes is shorter than a shard header",
                    extent_len);
    if (max_cols == 0)
        return FAIL(CXLP_EARG, "no room for columns");
    memcpy(magic, base, 8);
    memcpy(&version, (const uint8_t *)base + 8, 4);
    if (memcmp(magic, SHARD_MAGIC, 8) != 0)
        return FAIL(CXLP_EFORMAT, "bad shard magic at offset 0");
    memset(s, 0, sizeof *s);
    s->base = base;
    s->extent_len = extent_len;
    s->col = cols;
    s->version = version;
    int rc;
    if (version == SHARD_VERSION_V1)
        rc = open_v1(s, cols, base, extent_len, walk, err, errlen);
    else if (version == SHARD_VERSION_V2 || version == SHARD_VERSION_V3 ||
             version == SHARD_VERSION)
        rc = open_v2(s, cols, max_cols, base, extent_len, walk, err, errlen);
    else
        return FAIL(CXLP_EFORMAT, "shard format version %u at offset %u, this build reads %u to %u",
                    version, HOFF(version), SHARD_VERSION_V1, SHARD_VERSION);
    if (rc == 0)
        s->n_records = cols[0].n_records;
    return rc;
}

int shard_open(struct shard *s, struct shard_col *cols, uint32_t max_cols, const void *base,
               uint64_t extent_len, char *err, size_t errlen)
{
    return open_any(s, cols, max_cols, base, extent_len, 1, err, errlen);
}

int shard_open_head(struct shard *s, struct shard_col *cols, uint32_t max_cols,
                    const void *base, uint64_t extent_len, char *err, size_t errlen)
{
    return open_any(s, cols, max_cols, base, extent_len, 0, err, errlen);
}

int shard_verify(const struct shard *s, char *err, size_t errlen)
{
    for (uint32_t k = 0; k < s->n_cols; k++) {
        const struct shard_col *c = &s->col[k];
        XXH3_state_t st;
        XXH3_64bits_reset(&st);
        XXH3_64bits_update(&st, c->data, c->data_len);
        XXH3_64bits_update(&st, c->index, c->index_len);
        uint64_t h = XXH3_64bits_digest(&st);
        if (h != c->checksum)
            return FAIL(CXLP_ECORRUPT, "shard checksum mismatch over data [%" PRIu64 ", +%" PRIu64 ") and index [%" PRIu64 ", +%" PRIu64 ") of column %u: stored %016" PRIx64 ", computed %016" PRIx64,
                        c->data_off, c->data_len, c->index_off, c->index_len, k, c->checksum, h);
    }
    return 0;
}

int shard_verify_copy(const struct shard *s, char *err, size_t errlen)
{
    if (!s->n_bsums)
        return shard_verify(s, err, errlen);
    int rc = shard_verify_sum_pages(s, 0, shard_sum_pages(s), err, errlen);
    return rc ? rc : shard_verify_blocks(s, 0, s->n_bsums, err, errlen);
}

int shard_verify_blocks(const struct shard *s, uint64_t first, uint64_t n, char *err,
                        size_t errlen)
{
    const uint8_t *sums = s->base + (s->sums_off ? s->sums_off : shard_bsum_off(s->n_cols));
    for (uint64_t b = first; b < first + n && b < s->n_bsums; b++) {
        uint64_t lo, hi, want;
        shard_block_span(s, b, &lo, &hi);
        memcpy(&want, sums + b * 8, 8);
        uint64_t h = XXH3_64bits(s->base + lo, hi - lo);
        if (h != want)
            return FAIL(CXLP_ECORRUPT, "block %" PRIu64 " (bytes [%" PRIu64 ", %" PRIu64 ")) checksum mismatch: stored %016" PRIx64 ", computed %016" PRIx64,
                        b, lo, hi, want, h);
    }
    return 0;
}

int shard_verify_sum_pages(const struct shard *s, uint64_t first, uint64_t n, char *err,
                           size_t errlen)
{
    const uint8_t *tops = s->base + shard_bsum_off(s->n_cols);
    for (uint64_t p = first; p < first + n && p < shard_sum_pages(s); p++) {
        uint64_t cnt = MIN((uint64_t)SHARD_PAGE_SUMS, s->n_bsums - p * SHARD_PAGE_SUMS), want;
        uint64_t at = s->sums_off + p * SHARD_SUMS_PAGE;
        memcpy(&want, tops + p * 8, 8);
        uint64_t h = XXH3_64bits(s->base + at, (size_t)cnt * 8);
        if (h != want)
            return FAIL(CXLP_ECORRUPT, "page %" PRIu64 " of the block sums (bytes [%" PRIu64 ", %" PRIu64 ")) checksum mismatch: stored %016" PRIx64 ", computed %016" PRIx64,
                        p, at, at + cnt * 8, want, h);
    }
    return 0;
}

int shard_col_offsets(const struct shard *s, uint32_t c, uint64_t elem, int64_t *off, char *err,
                      size_t errlen)
{
    const struct shard_col *col = &s->col[c];
    if (elem == 0 || col->data_len % elem)
        return errbuf_set(err, errlen, CXLP_ECORRUPT, "column %u: %" PRIu64 " bytes of data, not "
                          "a multiple of its %" PRIu64 "-byte elements", c, col->data_len, elem);
    uint64_t prev = 0;
    for (uint64_t i = 0; i < col->n_records; i++) {
        const uint8_t *p;
        uint64_t len;
        if (shard_col_record(col, i, &p, &len)) {
            shard_explain(s, c, i, err, errlen);
            return CXLP_ECORRUPT;
        }
        uint64_t st = (uint64_t)(p - col->data);
        if (st < prev || st % elem)
            return errbuf_set(err, errlen, CXLP_ECORRUPT, "column %u record %" PRIu64 ": starts "
                              "at byte %" PRIu64 " of its data, %s", c, i, st,
                              st < prev ? "before the record ahead of it" : "inside an element");
        off[i] = (int64_t)(st / elem);
        prev = st;
    }
    off[col->n_records] = (int64_t)(col->data_len / elem);
    return 0;
}

void shard_explain(const struct shard *s, uint32_t c, uint64_t i, char *err, size_t errlen)
{
    const struct shard_col *col = &s->col[c];
    if (i >= col->n_records) {
        snprintf(err, errlen, "record %" PRIu64 " past the shard's %" PRIu64, i, col->n_records);
        return;
    }
    if (col->kind == SHARD_KIND_FIXED) {
        snprintf(err, errlen, "column %u record %" PRIu64 ": bytes [%" PRIu64 ", +%" PRIu64
                 ") outside the copy's [%" PRIu64 ", %" PRIu64 ") of the column", c, i,
                 i * col->record_size, col->record_size, col->lo, col->hi);
        return;
    }
    uint64_t b = i / SHARD_BLOCK, at = b * SHARD_DIRENT_BYTES;
    uint64_t eoff = col->index_off + at;
    if (at < col->dir_lo || at + SHARD_DIRENT_BYTES > col->dir_hi) {
        snprintf(err, errlen, "column %u record %" PRIu64 ": index block %" PRIu64 " at offset %"
                 PRIu64 " outside the copy's [%" PRIu64 ", %" PRIu64 ") of the index", c, i, b,
                 eoff, col->dir_lo, col->dir_hi);
        return;
    }
    uint64_t anchor, pw;
    memcpy(&anchor, col->index + (at - col->dir_lo), 8);
    memcpy(&pw, col->index + (at - col->dir_lo) + 8, 8);
    if (!shard_dirent_ok(col, b, anchor, pw)) {
        snprintf(err, errlen, "column %u record %" PRIu64 ": index block %" PRIu64 " at offset %" PRIu64 " out of bounds (anchor %" PRIu64 ", deltas at %" PRIu64 " width %u)",
                 c, i, b, eoff, anchor, pw & SHARD_POS_MASK, (unsigned)(pw >> 56));
        return;
    }
    unsigned w = (unsigned)(pw >> 56);
    uint64_t doff = col->index_off + (pw & SHARD_POS_MASK) + (i % SHARD_BLOCK) * w;
    snprintf(err, errlen, "column %u record %" PRIu64 ": offsets from index block %" PRIu64 " (delta at offset %" PRIu64 ") fall outside the data area of %" PRIu64 " bytes%s",
             c, i, b, doff, col->data_len,
             col->lo || col->hi != col->data_len || col->dl_lo || col->dl_hi != col->index_len
                 ? ", or outside the part of it or of the index this copy holds" : "");
}

uint64_t shard_index_len(const uint64_t *starts, uint64_t n)
{
    uint64_t len = 0;
    for (uint64_t f = 0; f < n; f += SHARD_BLOCK) {
        uint64_t cnt = MIN(SHARD_BLOCK, n - f);
        len += SHARD_DIRENT_BYTES + cnt * shard_width_for(starts[f + cnt - 1] - starts[f]);
    }
    return len;
}

static void store_le(uint8_t *p, uint64_t v, unsigned w)
{
    for (unsigned k = 0; k < w; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

/* Checks a var column's starts against its data length. */
static int starts_ok(const uint64_t *starts, uint64_t n, uint64_t data_len)
{
    for (uint64_t i = 0; i < n; i++)
        if (starts[i] > data_len || (i && starts[i] < starts[i - 1]))
            return 0;
    return n ? starts[0] == 0 : data_len == 0;
}

/* Writes the block index of n records at ix (shard_index_len bytes). */
static void write_index(uint8_t *ix, const uint64_t *starts, uint64_t n)
{
    uint64_t nb = (n + SHARD_BLOCK - 1) / SHARD_BLOCK;
    uint64_t pos = nb * SHARD_DIRENT_BYTES;
    for (uint64_t b = 0; b < nb; b++) {
        uint64_t f = b * SHARD_BLOCK, cnt = MIN(SHARD_BLOCK, n - f);
        unsigned w = shard_width_for(starts[f + cnt - 1] - starts[f]);
        uint64_t pw = pos | ((uint64_t)w << 56);
        memcpy(ix + b * SHARD_DIRENT_BYTES, &starts[f], 8);
        memcpy(ix + b * SHARD_DIRENT_BYTES + 8, &pw, 8);
        for (uint64_t j = 0; j < cnt; j++)
            store_le(ix + pos + j * w, starts[f + j] - starts[f], w);
        pos += cnt * w;
    }
}

/* Finishes a column's checksum: data (unless hash already holds it), then
 * the index. */
static uint64_t col_checksum(const uint8_t *data, uint64_t data_len, const uint8_t *ix,
                             uint64_t index_len, XXH3_state_t *hash)
{
    XXH3_state_t local;
    XXH3_state_t *st = hash;
    if (!st) {
        st = &local;
        XXH3_64bits_reset(st);
        XXH3_64bits_update(st, data, data_len);
    }
    XXH3_64bits_update(st, ix, index_len);
    return XXH3_64bits_digest(st);
}

/* Version 3's block size: from 64 KiB, the smallest whose sums fit the
 * header page (the encoder of version 3 shards, for tests, uses it). */
static uint32_t shift_v3(uint64_t used, uint32_t n_cols)
{
    uint32_t shift = SHARD_BSUM_SHIFT;
    while (shift < 63 && blocks_to(used, shift) > shard_bsum_cap(n_cols))
        shift++;
    return shift;
}

uint32_t shard_bsum_shift_for(uint64_t end, uint32_t n_cols)
{
    uint32_t shift = SHARD_BSUM_SHIFT4;
    uint64_t cap = shard_bsum_cap(n_cols);
    while (shift < 63 && shard_pages_for(blocks_to(end, shift)) > cap)
        shift++;
    return shift;
}

uint64_t shard_room(uint64_t cap, uint32_t n_cols)
{
    if (blocks_to(cap, SHARD_BSUM_SHIFT4) <= shard_bsum_cap(n_cols))
        return cap; /* the sums fit the header page */
    /* the most sums a shard ending anywhere up to cap can have: a shard
     * ending short of cap may take a smaller block than cap's, but never
     * more pages than the header page holds page sums for */
    uint64_t nb = MIN(blocks_to(cap, SHARD_BSUM_SHIFT4),
                      shard_bsum_cap(n_cols) * SHARD_PAGE_SUMS);
    uint64_t area = SHARD_SUMS_PAGE + nb * 8; /* the alignment, then the sums */
    return cap > area ? cap - area : 0;
}

uint64_t shard_cap_for(uint64_t end, uint32_t n_cols)
{
    uint64_t cap = end;
    while (shard_room(cap, n_cols) < end)
        cap += end - shard_room(cap, n_cols);
    return cap;
}

int shard_bsums_begin(struct shard_bsums *bs, struct XXH3_state_s *st, uint64_t cap,
                      uint32_t n_cols)
{
    bs->shift = shard_bsum_shift_for(cap, n_cols);
    bs->at = SHARD_DATA_OFF;
    bs->limit = cap;
    bs->st = st;
    XXH3_64bits_reset(st);
    uint64_t need = blocks_to(cap, bs->shift);
    if (need > bs->cap_sum) {
        uint64_t *p = realloc(bs->sum, need * sizeof *p);
        if (!p)
            return -ENOMEM;
        bs->sum = p;
        bs->cap_sum = need;
    }
    /* blocks inside the header page (block 0 of 4 KiB blocks) cover no
     * byte: the sum of nothing */
    for (uint64_t b = 0; b < (SHARD_DATA_OFF >> bs->shift) && b < need; b++)
        bs->sum[b] = XXH3_64bits(NULL, 0);
    return 0;
}

void shard_bsums_free(struct shard_bsums *bs)
{
    free(bs->sum);
    bs->sum = NULL;
    bs->cap_sum = 0;
}

void shard_bsums_update(struct shard_bsums *bs, const uint8_t *base, uint64_t upto)
{
    uint64_t mask = (UINT64_C(1) << bs->shift) - 1;
    upto = MIN(upto, bs->limit);
    while (bs->at < upto) {
        /* b < cap_sum: at < limit, whose blocks begin sized the array */
        uint64_t b = bs->at >> bs->shift, end = MIN((bs->at | mask) + 1, upto);
        if ((bs->at & mask) == 0 && end - bs->at == mask + 1) {
            /* a whole block at once: the one-shot hash, without the
             * streaming state's buffering (4 KiB blocks: 64 per 256 KiB
             * piece the writer feeds) */
            bs->sum[b] = XXH3_64bits(base + bs->at, (size_t)(mask + 1));
            bs->at = end;
            continue;
        }
        XXH3_64bits_update(bs->st, base + bs->at, (size_t)(end - bs->at));
        bs->at = end;
        if ((end & mask) == 0) {
            bs->sum[b] = XXH3_64bits_digest(bs->st);
            XXH3_64bits_reset(bs->st);
        }
    }
}

static int seal(uint8_t *base, uint64_t cap, uint64_t n_records,
                const struct shard_col_in *cols, uint32_t n_cols, uint32_t version,
                struct shard_bsums *bs, uint64_t *used)
{
    const int force_area = version == SHARD_BUILD_V4_AREA;
    if (force_area)
        version = SHARD_VERSION;
    if (n_cols == 0 || n_cols > SHARD_MAX_COLS)
        return CXLP_EARG;
    uint64_t end = SHARD_DATA_OFF;
    for (uint32_t c = 0; c < n_cols; c++) {
        const struct shard_col_in *in = &cols[c];
        uint64_t e;
        if (in->data_off < SHARD_DATA_OFF || in->data_off % SHARD_COL_ALIGN ||
            add_overflow_u64(in->data_off, in->data_len, &e) || e > cap)
            return CXLP_EARG;
        if (in->kind == SHARD_KIND_FIXED) {
            uint64_t total;
            if (in->record_size == 0 || mul_overflow_u64(n_records, in->record_size, &total) ||
                total != in->data_len)
                return CXLP_EARG;
        } else if (in->kind != SHARD_KIND_VAR || !starts_ok(in->starts, n_records, in->data_len)) {
            return CXLP_EARG;
        }
        for (uint32_t o = 0; o < c; o++) /* columns must not overlap */
            if (in->data_off < cols[o].data_off + cols[o].data_len &&
                cols[o].data_off < e)
                return CXLP_EARG;
        end = MAX(end, e);
    }
    struct shard_dirent2 dir[SHARD_MAX_COLS];
    memset(dir, 0, sizeof dir);
    uint64_t pos = ALIGN_UP(end, 8);
    if (pos > cap)
        return CXLP_EARG;
    memset(base + end, 0, pos - end);
    for (uint32_t c = 0; c < n_cols; c++) {
        const struct shard_col_in *in = &cols[c];
        uint64_t ilen = 0;
        struct shard_dirent2 *d = &dir[c];
        d->kind = in->kind;
        d->data_off = in->data_off;
        d->data_len = in->data_len;
        if (in->kind == SHARD_KIND_VAR) {
            ilen = shard_index_len(in->starts, n_records);
            if (ilen > cap - pos)
                return CXLP_EARG;
            write_index(base + pos, in->starts, n_records);
            d->index_off = pos;
            d->index_len = ilen;
            uint64_t next = ALIGN_UP(pos + ilen, 8);
            if (next > cap)
                return CXLP_EARG;
            memset(base + pos + ilen, 0, next - pos - ilen);
            pos = next;
        } else {
            d->record_size = in->record_size;
        }
        d->checksum = col_checksum(base + in->data_off, in->data_len, base + d->index_off,
                                   ilen, in->hash);
    }
    struct shard_hdr2 h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, SHARD_MAGIC, 8);
    h.version = version;
    h.n_cols = n_cols;
    h.layout = shard_layout_of(version);
    h.n_records = n_records;
    h.dir_off = SHARD_HDR_BYTES;
    h.used = pos;
    /* block sums: the smallest block (version 4: from 4 KiB; 3: from
     * 64 KiB) whose sums, or their page sums, fit the header page. The
     * caller's sums (bs) hold the bytes it wrote, hashed as they landed,
     * when taken at this block size; what follows them (the staged
     * columns, padding and indexes just written) is absorbed here.
     * Otherwise one pass over the whole shard. */
    uint64_t none = 0, bend = pos, n_hsums = 0;
    const uint64_t *sums = &none, *hsums = &none;
    uint64_t tops[SHARD_DATA_OFF / 8];
    struct shard_bsums own = {0};
    XXH3_state_t own_st;
    if (version >= SHARD_VERSION_V3) {
        h.bsum_shift = version == SHARD_VERSION ? SHARD_BSUM_SHIFT4 : shift_v3(pos, n_cols);
        if (version == SHARD_VERSION &&
            (force_area || blocks_to(pos, h.bsum_shift) > shard_bsum_cap(n_cols))) {
            /* a sums area: the blocks end at its 4 KiB aligned start, and
             * their size is the one that end takes (the page sums fit) */
            bend = ALIGN_UP(pos, SHARD_SUMS_PAGE);
            if (bend > cap)
                return CXLP_EARG;
            memset(base + pos, 0, bend - pos);
            h.sums_off = bend;
            h.bsum_shift = shard_bsum_shift_for(bend, n_cols);
        }
        h.n_bsums = (uint32_t)blocks_to(bend, h.bsum_shift);
        if (!bs || bs->shift != h.bsum_shift || bs->at > bend || bs->limit < bend) {
            int rc = shard_bsums_begin(&own, &own_st, bend, n_cols);
            if (rc) {
                shard_bsums_free(&own);
                return rc;
            }
            /* version 3's own rule: larger blocks than begin's, so fewer
             * sums than it made room for (and block 0 is not empty) */
            own.shift = h.bsum_shift;
            bs = &own;
        }
        shard_bsums_update(bs, base, bend);
        if (bend & ((UINT64_C(1) << h.bsum_shift) - 1)) /* the last block is partial */
            bs->sum[h.n_bsums - 1] = XXH3_64bits_digest(bs->st);
        sums = hsums = bs->sum;
        n_hsums = h.n_bsums;
        if (h.sums_off) {
            if ((uint64_t)h.n_bsums * 8 > cap - bend) {
                shard_bsums_free(&own);
                return CXLP_EARG;
            }
            n_hsums = shard_pages_for(h.n_bsums);
            for (uint64_t p = 0; p < n_hsums; p++)
                tops[p] = XXH3_64bits(sums + p * SHARD_PAGE_SUMS,
                                      (size_t)MIN((uint64_t)SHARD_PAGE_SUMS,
                                                  h.n_bsums - p * SHARD_PAGE_SUMS) * 8);
            hsums = tops;
            memcpy(base + bend, sums, (size_t)h.n_bsums * 8);
            pos = bend + (uint64_t)h.n_bsums * 8;
            h.used = pos;
        }
    }
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &h, HDR_SUM_BYTES);
    XXH3_64bits_update(&st, dir, (size_t)n_cols * SHARD_COL_BYTES);
    XXH3_64bits_update(&st, hsums, (size_t)n_hsums * 8);
    h.hdr_checksum = XXH3_64bits_digest(&st);
    /* header page last: the directory and sums first, then the header that
     * checks them */
    memset(base + sizeof h, 0, SHARD_DATA_OFF - sizeof h);
    memcpy(base + SHARD_HDR_BYTES, dir, (size_t)n_cols * SHARD_COL_BYTES);
    memcpy(base + shard_bsum_off(n_cols), hsums, (size_t)n_hsums * 8);
    memcpy(base, &h, sizeof h);
    shard_bsums_free(&own);
    *used = pos;
    return 0;
}

int shard_seal2(uint8_t *base, uint64_t cap, uint64_t n_records,
                const struct shard_col_in *cols, uint32_t n_cols, uint64_t *used)
{
    return seal(base, cap, n_records, cols, n_cols, SHARD_VERSION, NULL, used);
}

int shard_seal2_sums(uint8_t *base, uint64_t cap, uint64_t n_records,
                     const struct shard_col_in *cols, uint32_t n_cols, struct shard_bsums *bs,
                     uint64_t *used)
{
    return seal(base, cap, n_records, cols, n_cols, SHARD_VERSION, bs, used);
}

int shard_build2(uint8_t *buf, uint64_t cap, uint64_t n_records, struct shard_col_in *cols,
                 const void *const *data, uint32_t n_cols, uint32_t version, uint64_t *used)
{
    if (version != SHARD_VERSION && version != SHARD_VERSION_V3 &&
        version != SHARD_VERSION_V2 && version != SHARD_BUILD_V4_AREA)
        return CXLP_EARG;
    uint64_t off = SHARD_DATA_OFF;
    if (n_cols == 0 || n_cols > SHARD_MAX_COLS)
        return CXLP_EARG;
    for (uint32_t c = 0; c < n_cols; c++) {
        uint64_t e;
        if (add_overflow_u64(off, cols[c].data_len, &e) || e > cap)
            return CXLP_EARG;
        cols[c].data_off = off;
        cols[c].hash = NULL;
        if (cols[c].data_len)
            memmove(buf + off, data[c], cols[c].data_len);
        off = ALIGN_UP(e, SHARD_COL_ALIGN);
    }
    return seal(buf, cap, n_records, cols, n_cols, version, NULL, used);
}

int shard_build(uint8_t *buf, uint64_t cap, uint32_t kind, uint64_t record_size,
                const void *data, uint64_t data_len, const uint64_t *starts,
                uint64_t n_records, uint64_t *used)
{
    uint64_t index_len = 0, nb = 0;
    if (data_len > UINT64_MAX / 2 || SHARD_DATA_OFF + data_len > cap)
        return CXLP_EARG;
    if (kind == SHARD_KIND_FIXED) {
        uint64_t total;
        if (record_size == 0 || mul_overflow_u64(n_records, record_size, &total) ||
            total != data_len)
            return CXLP_EARG;
    } else if (kind == SHARD_KIND_VAR) {
        if (!starts_ok(starts, n_records, data_len))
            return CXLP_EARG;
        index_len = shard_index_len(starts, n_records);
        nb = (n_records + SHARD_BLOCK - 1) / SHARD_BLOCK;
    } else {
        return CXLP_EARG;
    }
    uint64_t need = shard_extent_need(data_len, index_len);
    if (need > cap)
        return CXLP_EARG;
    if (data_len)
        memmove(buf + SHARD_DATA_OFF, data, data_len);
    uint64_t data_end = SHARD_DATA_OFF + data_len;
    uint64_t index_off = ALIGN_UP(data_end, 8);
    memset(buf + data_end, 0, index_off - data_end);
    if (kind == SHARD_KIND_VAR)
        write_index(buf + index_off, starts, n_records);

    struct shard_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, SHARD_MAGIC, 8);
    h.version = SHARD_VERSION_V1;
    h.kind = kind;
    h.layout = shard_layout_v1();
    h.record_size = kind == SHARD_KIND_FIXED ? record_size : 0;
    h.n_records = n_records;
    h.data_off = SHARD_DATA_OFF;
    h.data_len = data_len;
    h.index_off = index_off;
    h.index_len = index_len;
    h.block_records = kind == SHARD_KIND_VAR ? SHARD_BLOCK : 0;
    h.n_blocks = nb;
    h.checksum = col_checksum(buf + SHARD_DATA_OFF, data_len, buf + index_off, index_len, NULL);
    h.hdr_checksum = XXH3_64bits(&h, HDR_SUM_BYTES);
    memset(buf + sizeof h, 0, SHARD_DATA_OFF - sizeof h);
    memcpy(buf, &h, sizeof h);
    *used = need;
    return 0;
}

void shard_digest(const struct shard *s, uint64_t *data_len, uint64_t *checksum)
{
    uint64_t bytes = 0, sums[SHARD_MAX_COLS];
    for (uint32_t c = 0; c < s->n_cols && c < SHARD_MAX_COLS; c++) {
        bytes += s->col[c].data_len;
        sums[c] = s->col[c].checksum;
    }
    *data_len = bytes;
    *checksum = s->n_cols == 1 ? sums[0] : XXH3_64bits(sums, s->n_cols * sizeof sums[0]);
}
