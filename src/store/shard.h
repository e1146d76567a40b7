/*
 * shard.h - the store's shard format, encoded and decoded over plain memory.
 *
 * A shard is one pool extent (or any byte buffer: the fuzz target and the
 * importers' tests use plain memory) holding the records of a run of global
 * ids, stored column-wise: one column per schema field, so that one field
 * reads without touching the others (the design's vertical partitioning).
 *
 * Version 4 (what the writer produces; versions 2 and 3 are still read):
 *
 *   [0, 128)                       struct shard_hdr2
 *   [128, 128 + 64 * n_cols)       column directory: struct shard_dirent2 each
 *   [.., + 8 * n_bsums)            the block sums (see shard_bsum_off), or
 *                                  when they do not fit the header page,
 *                                  the page sums of the sums area below
 *   [SHARD_DATA_OFF, ...)          each column's data, at a 64-byte aligned
 *                                  offset, then each variable column's index
 *   [sums_off, + 8 * n_bsums)      version 4, sums not in the header page:
 *                                  the sums area, 4 KiB aligned, in pages of
 *                                  512 block sums under one page sum each
 *
 * Version 3 is version 4 with blocks of 64 KiB and more and the sums always
 * in the header page: a block of a large shard was 1 MiB (at 256 MiB), so a
 * partial read of one 8 KiB record read 1 MiB. Version 4 keeps 4 KiB blocks
 * up to shards of 976 MiB (one column), at 8 bytes of sums per 4 KiB; a
 * partial read of a large shard reads the page of sums its blocks need
 * beside them. Version 2 is version 3 without block sums.
 *
 * A column is exactly what a whole version-1 shard held: fixed-size records
 * (record i is [i*record_size, (i+1)*record_size) of the column's data, no
 * index) or variable-size records with a block index. Version 1 (one column
 * holding whole records, fields at offsets inside a fixed-size record) is
 * still read: shard_open turns it into a shard of one column.
 *
 *   [0, 128)                      struct shard_hdr (version 1)
 *   [data_off, data_off+data_len) the records, back to back
 *   [index_off, index_off+index_len) the index (variable-size records only)
 *
 * Variable-size records: blocks of SHARD_BLOCK (64) records. The index opens
 * with a directory of n_blocks = ceil(n_records / 64) entries of 16 bytes
 *   anchor     u64  data offset of the block's first record
 *   pos_width  u64  bits 0..55: index offset of the block's deltas,
 *                   bits 56..63: delta width w in bytes (1, 2, 4 or 8)
 * followed by the deltas: per record j of the block, start(j) - anchor packed
 * at w bytes (little-endian). Record i ends where record i+1 starts; the last
 * record ends at data_len. So
 *   start(i) = anchor[i/64] + delta[i/64][i%64]
 *   end(i)   = i+1 < n ? start(i+1) : data_len
 * and a read touches one directory entry and two deltas: O(1). The width is
 * chosen per block (the smallest that holds the block's largest delta), so a
 * block of short token sequences costs 1-2 bytes per record whatever the
 * shard's size, and no size or offset has a 32-bit limit.
 *
 * Checksums: per column, XXH3-64 over its data bytes followed by its index
 * bytes (one stream: the writer hashes each chunk of records right after it
 * lands, then the index at seal). Version 2: hdr_checksum = XXH3-64 of header
 * bytes [0, 120) followed by the column directory, so one check covers every
 * offset and column checksum (version 3: then the block sums); version 1:
 * XXH3-64 of header bytes [0, 120). Version 3's block sums let a reader
 * verify a few blocks of a shard it did not read whole (a partial read).
 *
 * Trust: a shard lives in shared memory that another process may scribble
 * on. shard_open copies the header and directory into private memory after
 * checking every field against the extent, and checks every index directory
 * entry; the read path re-checks the directory entry and deltas it loads (a
 * few compares), so a corrupt or concurrently modified shard yields
 * CXLP_ECORRUPT, never an access outside a column's [data, data + data_len).
 *
 * Alternatives rejected: a flat u64 offset per record (8 bytes per record:
 * for 10^11 short sequences that is 800 GB of index); Elias-Fano (smaller but
 * a select per read is slower than one unaligned load); one global width per
 * shard (a single long record would widen the whole index); rows with fields
 * interleaved for multi-field records (reading one field drags the others
 * through the cache and the memory bus; version 1 did that for fixed-size
 * fields only); one shard per field (the catalog would hold a shard list per
 * field, and the fields of a record could drift apart across shards).
 */
#ifndef CXLP_SHARD_H
#define CXLP_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "common/common.h"

#define SHARD_MAGIC "CXLPSHD1"
#define SHARD_VERSION 4u          /* what the writer produces */
#define SHARD_VERSION_V3 3u       /* still read: block sums in the header page only */
#define SHARD_VERSION_V2 2u       /* still read: version 3 without block sums */
#define SHARD_VERSION_V1 1u       /* still read */
#define SHARD_KIND_FIXED 0u
#define SHARD_KIND_VAR 1u
#define SHARD_HDR_BYTES 128u
#define SHARD_DATA_OFF 4096u
#define SHARD_BLOCK 64u
#define SHARD_DIRENT_BYTES 16u
#define SHARD_POS_MASK ((UINT64_C(1) << 56) - 1)
#define SHARD_MAX_COLS CXLP_MAX_FIELDS
#define SHARD_COL_BYTES 64u
#define SHARD_COL_ALIGN 64u       /* every column's data starts 64-byte aligned */
#define SHARD_BSUM_SHIFT 16u      /* version 3: smallest block of a block sum, 64 KiB */
#define SHARD_BSUM_SHIFT4 12u     /* version 4: smallest block, 4 KiB */
#define SHARD_SUMS_PAGE 4096u     /* version 4: a page of the sums area, under one page sum */
#define SHARD_PAGE_SUMS (SHARD_SUMS_PAGE / 8u) /* block sums a page holds */
#define SHARD_BSUM_SHIFT_MAX 40u  /* largest (1 TiB): bounds the field at open */

/* Version 1 header: one column. */
struct shard_hdr {
    char magic[8];           /* "CXLPSHD1" */
    uint32_t version;        /* SHARD_VERSION_V1 */
    uint32_t kind;           /* SHARD_KIND_FIXED / SHARD_KIND_VAR */
    uint64_t layout;         /* shard_layout_v1(): ABI facts of this layout */
    uint64_t record_size;    /* fixed: bytes per record; var: 0 */
    uint64_t n_records;
    uint64_t data_off;
    uint64_t data_len;
    uint64_t index_off;
    uint64_t index_len;
    uint64_t block_records;  /* var: SHARD_BLOCK; fixed: 0 */
    uint64_t n_blocks;       /* var: ceil(n_records / block_records) */
    uint64_t checksum;       /* XXH3-64 of data then index */
    uint64_t reserved[3];    /* zero */
    uint64_t hdr_checksum;   /* XXH3-64 of bytes [0, 120) */
};
_Static_assert(sizeof(struct shard_hdr) == SHARD_HDR_BYTES, "shard header is 128 bytes");

/* Version 2 header: n_cols columns described by the directory after it. */
struct shard_hdr2 {
    char magic[8];           /* "CXLPSHD1" (the magic names the family) */
    uint32_t version;        /* SHARD_VERSION */
    uint32_t n_cols;         /* 1..SHARD_MAX_COLS, one per schema field */
    uint64_t layout;         /* shard_layout() */
    uint64_t n_records;      /* records in this shard (every column has them all) */
    uint64_t dir_off;        /* SHARD_HDR_BYTES */
    uint64_t used;           /* bytes of the extent the shard occupies */
    uint32_t bsum_shift;     /* version 3, 4: log2 of the block of a block sum; 2: 0 */
    uint32_t n_bsums;        /* version 3, 4: ceil(end of the blocks / block); 2: 0 */
    uint64_t sums_off;       /* version 4: the sums area's offset (4 KiB
                              * aligned, where the blocks end), 0 when the
                              * sums lie in the header page; else 0 */
    uint64_t reserved[7];    /* zero */
    uint64_t hdr_checksum;   /* XXH3-64 of bytes [0, 120), the directory, the
                              * block sums or the page sums (version 3, 4) */
};
_Static_assert(sizeof(struct shard_hdr2) == SHARD_HDR_BYTES, "shard header is 128 bytes");

/* One column in the version 2 directory (offsets from the extent start). */
struct shard_dirent2 {
    uint32_t kind;           /* SHARD_KIND_FIXED / SHARD_KIND_VAR */
    uint32_t reserved0;      /* zero */
    uint64_t record_size;    /* fixed: bytes per record; var: 0 */
    uint64_t data_off;       /* >= SHARD_DATA_OFF, multiple of SHARD_COL_ALIGN */
    uint64_t data_len;
    uint64_t index_off;      /* var: multiple of 8; fixed: 0 */
    uint64_t index_len;      /* var: index bytes; fixed: 0 */
    uint64_t checksum;       /* XXH3-64 of data then index */
    uint64_t reserved1;      /* zero */
};
_Static_assert(sizeof(struct shard_dirent2) == SHARD_COL_BYTES, "column entry is 64 bytes");

/* A validated column: private copies of its description plus pointers into
 * the extent. Immutable after shard_open, so any thread may read through it.
 *
 * Windows. A reader may hold only some ranges of a shard: a staging unit's
 * copy (store/unit.c) holds the blocks of a run of records, and its index
 * entries, not the whole shard. The read path touches a column only
 * through three windows, each a range of offsets and where its first byte
 * is in memory:
 *   data   column bytes [lo, hi) at data (byte x at data + (x - lo))
 *   dir    index bytes [dir_lo, dir_hi) at index (the block directory)
 *   dl     index bytes [dl_lo, dl_hi) at dl (the deltas)
 * A whole shard's windows are the whole column and the whole index (lo 0,
 * hi data_len; both index windows 0..index_len, dl == index), so data and
 * index point at the column's and the index's first bytes as they always
 * did. A read outside a window is CXLP_ECORRUPT, like one outside the
 * column. */
struct shard_col {
    uint32_t kind;
    uint64_t n_records;      /* the shard's, repeated for the inline checks */
    const uint8_t *data;     /* column byte lo */
    uint64_t data_off;
    uint64_t data_len;
    uint64_t record_size;    /* fixed only */
    const uint8_t *index;    /* var only: index byte dir_lo */
    uint64_t index_off;
    uint64_t index_len;
    uint64_t n_blocks;
    uint64_t checksum;
    uint64_t lo, hi;         /* data window */
    uint64_t dir_lo, dir_hi; /* index window of the block directory */
    const uint8_t *dl;       /* index byte dl_lo */
    uint64_t dl_lo, dl_hi;   /* index window of the deltas */
};

/* A validated shard: its columns live in storage the caller gave
 * shard_open (so a reader keeps the columns of all its shards in one flat
 * array). */
struct shard {
    const uint8_t *base;
    uint64_t extent_len;
    uint32_t version;
    uint32_t n_cols;
    uint64_t n_records;
    struct shard_col *col;
    uint64_t used;           /* version 2+: bytes the shard occupies */
    uint64_t bend;           /* version 3, 4: where the blocks end (used, or sums_off) */
    uint64_t sums_off;       /* version 4: the sums area; 0: sums at shard_bsum_off */
    uint32_t bsum_shift;     /* version 3, 4: log2 of the block; else 0 */
    uint32_t n_bsums;        /* version 3, 4: block sums; else 0 */
};

/* Signatures of this build's shard layouts (struct sizes, constants). */
uint64_t shard_layout(void);
uint64_t shard_layout_v1(void);
/* Of version 2 or 3 (what a shard of that version carries). */
uint64_t shard_layout_of(uint32_t version);

/* Validates the header, directory and index bounds of the shard at base
 * (extent_len bytes) and fills *s, with its columns in cols[0..max_cols).
 * Returns 0, CXLP_EFORMAT (magic, or a version this build does not read),
 * CXLP_ELAYOUT, or CXLP_ECORRUPT (including more columns than max_cols), with
 * a message naming the field and its offset inside the extent in err. Does
 * not read the records. */
int shard_open(struct shard *s, struct shard_col *cols, uint32_t max_cols, const void *base,
               uint64_t extent_len, char *err, size_t errlen);

/* shard_open without reading the indexes: header, directory, block sums and
 * every bound the header's fields give, but no index directory entry. What
 * a partial read opens from the header page alone, to learn which blocks
 * hold the indexes; shard_open follows once they are read and verified.
 * Nothing may read records through *s before that. */
int shard_open_head(struct shard *s, struct shard_col *cols, uint32_t max_cols,
                    const void *base, uint64_t extent_len, char *err, size_t errlen);

/* Recomputes every column's checksum over data and index: one pass over
 * every byte, what a whole copy needs (its blocks' sums serve partial reads
 * of the home copy: shard_verify_blocks). 0 or CXLP_ECORRUPT naming the
 * column. */
int shard_verify(const struct shard *s, char *err, size_t errlen);

/* What a copy of a shard is checked by before it is used (a staged or
 * migrated copy, a private read): every byte against the shard's own
 * sums, as cxlp_store_verify checks them. Version 3, 4: every page of the
 * sums area against its page sum, then every block against its sum (the
 * blocks cover every byte of data and index once, under the header
 * checksum, so the columns' checksums would hash every byte a second
 * time for nothing more); version 1, 2: the columns' checksums. 0 or
 * CXLP_ECORRUPT naming the column, the page or the block. */
int shard_verify_copy(const struct shard *s, char *err, size_t errlen);

/* Block sums (version 3, 4): block b covers the shard's bytes
 * [max(b << bsum_shift, SHARD_DATA_OFF), min((b + 1) << bsum_shift, bend)):
 * every byte of data and index, none of the header page (the header
 * checksum covers the header, the directory and the sums) nor of the sums
 * area. The sums lie right after the directory, inside the header page;
 * version 4's sums that do not fit it lie in the sums area at sums_off,
 * and the header page holds a page sum (XXH3-64) of each of its pages of
 * SHARD_PAGE_SUMS sums (the last one: of the sums it has). */
static inline uint64_t shard_bsum_off(uint32_t n_cols)
{
    return SHARD_HDR_BYTES + (uint64_t)n_cols * SHARD_COL_BYTES;
}
/* Block sums that fit the header page after a directory of n_cols. */
static inline uint64_t shard_bsum_cap(uint32_t n_cols)
{
    return (SHARD_DATA_OFF - shard_bsum_off(n_cols)) / 8;
}
/* Pages of SHARD_PAGE_SUMS that n block sums fill. */
static inline uint64_t shard_pages_for(uint64_t n)
{
    return (n + SHARD_PAGE_SUMS - 1) / SHARD_PAGE_SUMS;
}
/* The 8-byte sums the header page of a version v shard holds after its
 * directory, under the header checksum: its n_bsums block sums, or
 * (version 4 with a sums area at sums_off) one page sum per page of them;
 * none before version 3. From the header's fields alone. */
static inline uint64_t shard_head_sums(uint32_t v, uint64_t n_bsums, uint64_t sums_off)
{
    if (v != SHARD_VERSION && v != SHARD_VERSION_V3)
        return 0;
    return v == SHARD_VERSION && sums_off ? shard_pages_for(n_bsums) : n_bsums;
}
/* Pages of s's sums area (0: its sums lie in the header page). */
static inline uint64_t shard_sum_pages(const struct shard *s)
{
    return s->sums_off ? shard_pages_for(s->n_bsums) : 0;
}
/* The bytes [*lo, *hi) block b of s covers (b < n_bsums). */
static inline void shard_block_span(const struct shard *s, uint64_t b, uint64_t *lo,
                                    uint64_t *hi)
{
    uint64_t a = b << s->bsum_shift, e = a + (UINT64_C(1) << s->bsum_shift);
    *lo = a < SHARD_DATA_OFF ? SHARD_DATA_OFF : a;
    *hi = e < s->bend ? e : s->bend;
    if (*lo > *hi)
        *lo = *hi;
}
/* Verifies blocks [first, first + n) of s (n_bsums > 0) against their sums,
 * reading the bytes and the sums at s->base (in a sums area: pages the
 * caller verified with shard_verify_sum_pages). 0 or CXLP_ECORRUPT naming
 * the block and its byte range. */
int shard_verify_blocks(const struct shard *s, uint64_t first, uint64_t n, char *err,
                        size_t errlen);
/* Verifies pages [first, first + n) of s's sums area against their page
 * sums in the header page. 0 or CXLP_ECORRUPT naming the page. */
int shard_verify_sum_pages(const struct shard *s, uint64_t first, uint64_t n, char *err,
                           size_t errlen);

/* What a pool's shard table keeps of a shard, to check a copy of it without
 * reading its records: payload bytes (every column's data) and one checksum
 * (a one-column shard's own; else XXH3-64 of the columns' checksums in
 * order). Covers data and indexes, as the columns' checksums do. */
void shard_digest(const struct shard *s, uint64_t *data_len, uint64_t *checksum);

/* The records of variable-length column c of s as element offsets, the
 * form cxlp_writer_append_columns takes: off[i] = start(i) / elem for each
 * record i, off[n_records] = data_len / elem (n_records + 1 entries).
 * Reads every index entry through the read path's checks. 0, or
 * CXLP_ECORRUPT with err naming the column and record (an entry the read
 * path refuses, a start before the previous one or not a multiple of elem,
 * data not a multiple of elem). */
int shard_col_offsets(const struct shard *s, uint32_t c, uint64_t elem, int64_t *off, char *err,
                      size_t errlen);

/* Describes why shard_col_record(&s->col[c], i) failed: which index entry, at
 * which offset of the extent. Cold path for messages. */
void shard_explain(const struct shard *s, uint32_t c, uint64_t i, char *err, size_t errlen);

static inline uint64_t shard_load_le(const uint8_t *p, unsigned w)
{
    /* memcpy into a zeroed u64 is one unaligned load on x86 and arm64 for
     * each constant width; the switch keeps the width constant per arm. */
    uint64_t v = 0;
    switch (w) {
    case 1: v = p[0]; break;
    case 2: { uint16_t x; memcpy(&x, p, 2); v = x; break; }
    case 4: { uint32_t x; memcpy(&x, p, 4); v = x; break; }
    case 8: memcpy(&v, p, 8); break;
    default: break;
    }
    return v;
}

/* Checks one index directory entry (already loaded) of block b against the
 * column. 1 when usable. */
static inline int shard_dirent_ok(const struct shard_col *s, uint64_t b, uint64_t anchor,
                                  uint64_t pw)
{
    unsigned w = (unsigned)(pw >> 56);
    uint64_t pos = pw & SHARD_POS_MASK;
    uint64_t first = b * SHARD_BLOCK;
    uint64_t cnt = s->n_records - first < SHARD_BLOCK ? s->n_records - first : SHARD_BLOCK;
    return (w == 1 || w == 2 || w == 4 || w == 8) && anchor <= s->data_len &&
           pos >= s->n_blocks * SHARD_DIRENT_BYTES && range_ok(pos, cnt * w, s->index_len);
}

/* Start of record i of a var column; i < n_records. 0 or CXLP_ECORRUPT
 * (also for an entry or a delta outside the column's index windows). */
static inline int shard_var_start(const struct shard_col *s, uint64_t i, uint64_t *start)
{
    uint64_t b = i / SHARD_BLOCK, at = b * SHARD_DIRENT_BYTES;
    if (at < s->dir_lo || at + SHARD_DIRENT_BYTES > s->dir_hi)
        return CXLP_ECORRUPT;
    const uint8_t *e = s->index + (at - s->dir_lo);
    uint64_t anchor, pw, d;
    memcpy(&anchor, e, 8);
    memcpy(&pw, e + 8, 8);
    if (!shard_dirent_ok(s, b, anchor, pw))
        return CXLP_ECORRUPT;
    unsigned w = (unsigned)(pw >> 56);
    uint64_t dp = (pw & SHARD_POS_MASK) + (i % SHARD_BLOCK) * w; /* < index_len: dirent_ok */
    if (dp < s->dl_lo || dp + w > s->dl_hi)
        return CXLP_ECORRUPT;
    d = shard_load_le(s->dl + (dp - s->dl_lo), w);
    if (add_overflow_u64(anchor, d, start))
        return CXLP_ECORRUPT;
    return 0;
}

/* Record i (< n_records) of a column as a pointer and length inside the
 * column's data. The hot path: no allocation, no locks; 0 or CXLP_ECORRUPT.
 * Always inlined: the reader calls it from a few places, and a call per
 * record costs what the lookup itself does. */
static inline __attribute__((always_inline)) int
shard_col_record(const struct shard_col *s, uint64_t i, const uint8_t **p, uint64_t *len)
{
    if (s->kind == SHARD_KIND_FIXED) {
        /* n*record_size == data_len checked at open: no overflow for i < n */
        uint64_t at = i * s->record_size;
        if (__builtin_expect(at < s->lo || at + s->record_size > s->hi, 0))
            return CXLP_ECORRUPT;
        *p = s->data + (at - s->lo);
        *len = s->record_size;
        return 0;
    }
    uint64_t start, end;
    if (shard_var_start(s, i, &start))
        return CXLP_ECORRUPT;
    if (i + 1 == s->n_records)
        end = s->data_len;
    else if (shard_var_start(s, i + 1, &end))
        return CXLP_ECORRUPT;
    if (start > end || start < s->lo || end > s->hi)
        return CXLP_ECORRUPT;
    *p = s->data + (start - s->lo);
    *len = end - start;
    return 0;
}

/* Record i of column 0: the whole record of a one-column shard. */
static inline int shard_record(const struct shard *s, uint64_t i, const uint8_t **p,
                               uint64_t *len)
{
    return shard_col_record(&s->col[0], i, p, len);
}

/* The shard g (validated at one copy) as seen at another copy of the same
 * bytes at base, its columns in cols[0..g->n_cols): every pointer moved by
 * the same amount. Reads through *out stay inside [base, base + extent_len)
 * as they did in g. */
static inline void shard_at(const struct shard *g, const uint8_t *base, struct shard *out,
                            struct shard_col *cols)
{
    *out = *g;
    out->base = base;
    out->col = cols;
    for (uint32_t c = 0; c < g->n_cols; c++) {
        cols[c] = g->col[c];
        cols[c].data = base + g->col[c].data_off;
        cols[c].index = base + g->col[c].index_off;
        cols[c].dl = cols[c].index;
    }
}

/* A column's windows set to the whole column and index (what shard_open
 * gives every column). */
static inline void shard_col_whole(struct shard_col *c)
{
    c->lo = 0;
    c->hi = c->data_len;
    c->dir_lo = c->dl_lo = 0;
    c->dir_hi = c->dl_hi = c->index_len;
    c->dl = c->index;
}

/* ---- encoding ---------------------------------------------------------- */

/* Delta width that holds v. */
static inline unsigned shard_width_for(uint64_t v)
{
    return v <= 0xff ? 1 : v <= 0xffff ? 2 : v <= 0xffffffffu ? 4 : 8;
}

/* Exact index bytes for n var records whose starts (data offsets, ascending,
 * starts[0] == 0) are given. */
uint64_t shard_index_len(const uint64_t *starts, uint64_t n);

/* Upper bound of the index bytes of n var records in a data area of at most
 * data_cap bytes (every delta fits the width of data_cap). */
static inline uint64_t shard_index_bound(uint64_t n, uint64_t data_cap)
{
    uint64_t nb = (n + SHARD_BLOCK - 1) / SHARD_BLOCK;
    return nb * SHARD_DIRENT_BYTES + n * shard_width_for(data_cap);
}

/* Total extent bytes a one-column shard needs: header page, data, index. */
static inline uint64_t shard_extent_need(uint64_t data_len, uint64_t index_len)
{
    return ALIGN_UP((uint64_t)SHARD_DATA_OFF + data_len, 8) + index_len;
}

/* One column to seal: its records already lie at base + data_off. */
struct XXH3_state_s;
struct shard_col_in {
    uint32_t kind;           /* SHARD_KIND_FIXED / SHARD_KIND_VAR */
    uint64_t record_size;    /* fixed: bytes per record */
    uint64_t data_off;       /* >= SHARD_DATA_OFF + ..., SHARD_COL_ALIGN aligned */
    uint64_t data_len;
    const uint64_t *starts;  /* var: n_records record starts (starts[0] == 0) */
    struct XXH3_state_s *hash; /* state that absorbed exactly the data bytes, or NULL */
};

/* The block size (log2) of a version 4 shard whose blocks end at end
 * (n_cols columns): from 4 KiB, the smallest whose sums fit the header page
 * or whose page sums do. Grows with end, so a block size taken from an
 * extent's capacity is never smaller than the one its shard ends with. */
uint32_t shard_bsum_shift_for(uint64_t end, uint32_t n_cols);
/* Bytes of an extent of cap bytes that data and indexes may fill: what is
 * left once the sums area a shard of that size may need (and its 4 KiB
 * alignment) is set aside; cap itself when the sums fit the header page. */
uint64_t shard_room(uint64_t cap, uint32_t n_cols);
/* The smallest extent whose shard_room holds end bytes. */
uint64_t shard_cap_for(uint64_t end, uint32_t n_cols);

/* Block sums computed while a shard's bytes are written, in order from
 * SHARD_DATA_OFF: the writer feeds each chunk right after it lands (still
 * in cache), so sealing re-reads nothing but the tail it writes itself.
 * The block size is fixed up front from the extent's capacity
 * (shard_bsum_shift_for(cap)): XXH3 sums of small blocks do not combine
 * into a larger block's sum, so the size cannot grow later. Zero-initialize;
 * shard_bsums_free releases the sums. */
struct shard_bsums {
    uint32_t shift;            /* block size the sums are taken at */
    uint64_t at;               /* bytes [SHARD_DATA_OFF, at) absorbed */
    uint64_t limit;            /* at never passes it (the extent's capacity) */
    struct XXH3_state_s *st;   /* the block at `at`: its bytes before `at` */
    uint64_t *sum;             /* sums of the blocks before at's */
    uint64_t cap_sum;          /* entries sum has room for */
};

/* Starts sums at the block size for a shard of at most cap bytes; st is a
 * state the caller owns. 0, or -ENOMEM (room for the sums). */
int shard_bsums_begin(struct shard_bsums *bs, struct XXH3_state_s *st, uint64_t cap,
                      uint32_t n_cols);
void shard_bsums_free(struct shard_bsums *bs);
/* Absorbs the shard's bytes [bs->at, upto) at base (clamped to limit). */
void shard_bsums_update(struct shard_bsums *bs, const uint8_t *base, uint64_t upto);

/* Seals a version 4 shard: writes each var column's index (in column order,
 * 8-aligned, after the end of the last column's data), finishes each
 * column's checksum, computes the block sums (and the sums area, when they
 * do not fit the header page), then the directory and the header. The
 * columns' data must not overlap. cap is the extent size; *used receives
 * the bytes the shard occupies. CXLP_EARG when it does not fit or the input
 * is inconsistent (our bug, or the caller's); -ENOMEM. */
int shard_seal2(uint8_t *base, uint64_t cap, uint64_t n_records,
                const struct shard_col_in *cols, uint32_t n_cols, uint64_t *used);
/* shard_seal2 with block sums begun over the same bytes (bs, begun with
 * this cap and n_cols, absorbed bytes that are final): sealing absorbs
 * only the rest (the bytes it writes and any the caller wrote after
 * bs->at). When the shard ends smaller than its extent by enough that its
 * own block size is smaller than bs's, the sums are taken again in a pass
 * over the whole shard (a dataset's last shard, mostly): the block size
 * stays what shard_seal2 chooses, so both write the same shard. */
int shard_seal2_sums(uint8_t *base, uint64_t cap, uint64_t n_records,
                     const struct shard_col_in *cols, uint32_t n_cols, struct shard_bsums *bs,
                     uint64_t *used);

/* One-shot encoder for tests and seed generators: copies each column's
 * data[k] (data_len in cols[k]) to 64-aligned offsets after the header
 * page, then seals a shard of version (SHARD_VERSION, or SHARD_VERSION_V3
 * or SHARD_VERSION_V2 as earlier builds wrote them). */
#define SHARD_BUILD_V4_AREA 0x104u /* shard_build2: version 4 with its sums in a sums
                                    * area even when they fit the header page (a
                                    * small shard of that layout: tests, fuzz seeds) */
int shard_build2(uint8_t *buf, uint64_t cap, uint64_t n_records, struct shard_col_in *cols,
                 const void *const *data, uint32_t n_cols, uint32_t version, uint64_t *used);

/* Version 1 encoder (one column), kept so the tests and the fuzz corpus hold
 * shards as earlier builds wrote them: the reader must go on reading those.
 * Copies data into buf and seals; starts as for shard_col_in (ignored when
 * fixed). The writer never produces version 1. */
int shard_build(uint8_t *buf, uint64_t cap, uint32_t kind, uint64_t record_size,
                const void *data, uint64_t data_len, const uint64_t *starts,
                uint64_t n_records, uint64_t *used);

#endif
