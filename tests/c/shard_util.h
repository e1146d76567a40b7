/* shard_util.h - the tests' edits of shard header pages: a header page
 * rehashed after a field was changed, and a shard turned into the version
 * an earlier build wrote (its columns are the same bytes in versions 2 to
 * 4; only the header page differs while the sums fit it). */
#ifndef CXLP_TEST_SHARD_UTIL_H
#define CXLP_TEST_SHARD_UTIL_H

#include <string.h>
#include <xxhash.h>

#include "test.h"
#include "store/shard.h"

/* Writes the header checksum of the header page of a shard of version 2,
 * 3 or 4: XXH3-64 of header bytes [0, 120), the directory, the block sums
 * (the page sums of a sums area). */
static inline void shard_rehash_page(uint8_t *page)
{
    struct shard_hdr2 h;
    memcpy(&h, page, sizeof h);
    size_t dir = (size_t)h.n_cols * SHARD_COL_BYTES;
    size_t sums = (size_t)shard_head_sums(h.version, h.n_bsums, h.sums_off) * 8;
    uint8_t tmp[SHARD_DATA_OFF];
    memcpy(tmp, page, 120);
    memcpy(tmp + 120, page + SHARD_HDR_BYTES, dir + sums);
    h.hdr_checksum = XXH3_64bits(tmp, 120 + dir + sums);
    memcpy(page + 120, &h.hdr_checksum, 8);
}

/* The version 4 shard at base, its sums in the header page, made the
 * version an earlier build wrote: 3 (block sums of 64 KiB blocks; reads
 * the shard's bytes) or 2 (no block sums; touches the header page only). */
static inline void shard_downgrade(uint8_t *base, uint32_t version)
{
    struct shard_hdr2 h;
    memcpy(&h, base, sizeof h);
    CHECK(h.version == SHARD_VERSION && h.sums_off == 0 && h.n_bsums > 0);
    CHECK(version == SHARD_VERSION_V3 || version == SHARD_VERSION_V2);
    uint8_t *sums = base + shard_bsum_off(h.n_cols);
    memset(sums, 0, (size_t)h.n_bsums * 8);
    h.version = version;
    h.layout = shard_layout_of(version);
    h.bsum_shift = h.n_bsums = 0;
    if (version == SHARD_VERSION_V3) {
        const uint64_t blk = 1ull << SHARD_BSUM_SHIFT;
        h.bsum_shift = SHARD_BSUM_SHIFT;
        h.n_bsums = (uint32_t)((h.used + blk - 1) / blk);
        CHECK(h.n_bsums <= shard_bsum_cap(h.n_cols));
        for (uint64_t b = 0; b < h.n_bsums; b++) {
            uint64_t lo = b * blk < SHARD_DATA_OFF ? SHARD_DATA_OFF : b * blk;
            uint64_t hi = (b + 1) * blk < h.used ? (b + 1) * blk : h.used;
            uint64_t v = XXH3_64bits(base + lo, hi > lo ? hi - lo : 0);
            memcpy(sums + b * 8, &v, 8);
        }
    }
    memcpy(base, &h, sizeof h);
    shard_rehash_page(base);
}

#endif
