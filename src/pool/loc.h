/*
 * loc.h - location words: where the copies of a shard are, one word per
 * tier, updated in place (pool_format.h, "shard states").
 *
 *   bit 63      present: the tier holds a complete, verified copy
 *   bit 62      cache: the copy was staged by a placement policy and may be
 *               evicted; clear for a copy placed by migration (kept until
 *               the next migration) and for the home copy
 *   bits 40..61 version: grows by one at every change of the word (22 bits,
 *               wrapping); a word never returns to a value it held before
 *               a wrap, so a writer's compare-and-swap from the word it read
 *               fails if anything happened meanwhile
 *   bits 0..39  page: offset of the copy in the tier's object / 4096
 *               (4 PiB per object)
 *
 * A copy's length is its shard's table entry's len: every copy of a shard
 * holds the same bytes.
 *
 * Protocol (place.c writes, readers read):
 *   a word goes from absent to present only after the copy was written and
 *   its checksum verified: store with release order, paired with the
 *   reader's acquire load, so a reader that sees the word sees the bytes;
 *   a word goes from present to absent (or to another copy) and THEN the
 *   pool's location epoch grows; the old copy is freed once
 *     min over live leases of min_epoch >= the epoch after the change,
 *   i.e. once no reader that might have loaded the old word is still
 *   reading. A reader pins the epoch (pool.h: attach_pin_epoch) before it
 *   loads words and unpins after its last access to the copy.
 */
#ifndef CXLP_POOL_LOC_H
#define CXLP_POOL_LOC_H

#include <stdint.h>

#define LOC_PRESENT (UINT64_C(1) << 63)
#define LOC_CACHE (UINT64_C(1) << 62)
#define LOC_VER_SHIFT 40
#define LOC_VER_MASK ((UINT64_C(1) << 22) - 1)
#define LOC_PAGE_MASK ((UINT64_C(1) << 40) - 1)
#define LOC_PAGE_SHIFT 12

static inline int loc_present(uint64_t w)
{
    return (w & LOC_PRESENT) != 0;
}

static inline uint64_t loc_off(uint64_t w)
{
    return (w & LOC_PAGE_MASK) << LOC_PAGE_SHIFT;
}

static inline uint64_t loc_version(uint64_t w)
{
    return (w >> LOC_VER_SHIFT) & LOC_VER_MASK;
}

/* The word after w: a present copy at off (4 KiB aligned, < 4 PiB). */
static inline uint64_t loc_next_present(uint64_t w, uint64_t off, int cache)
{
    uint64_t v = (loc_version(w) + 1) & LOC_VER_MASK;
    return LOC_PRESENT | (cache ? LOC_CACHE : 0) | (v << LOC_VER_SHIFT) |
           ((off >> LOC_PAGE_SHIFT) & LOC_PAGE_MASK);
}

/* The word after w: no copy. */
static inline uint64_t loc_next_absent(uint64_t w)
{
    uint64_t v = (loc_version(w) + 1) & LOC_VER_MASK;
    return v << LOC_VER_SHIFT;
}

/* Largest offset a word can name. */
#define LOC_MAX_OFF (LOC_PAGE_MASK << LOC_PAGE_SHIFT)

#endif
