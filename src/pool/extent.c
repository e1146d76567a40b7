/*
 * extent.c - the extent allocator over the catalog's free list.
 *
 * The free list is an array of extents sorted by offset with no two touching
 * (coalesced on every free). Allocation is best fit: the smallest free
 * extent that holds the request, lowest offset on ties, carved from its
 * start. Shards are large and of similar size; best fit keeps the largest
 * holes intact for the next big shard, where first fit would nibble at the
 * front of the one big extent a fresh pool starts with and leave the tail
 * fragmented after removals. The list is short (one entry per hole), so a
 * linear scan per allocation costs nothing next to the catalog flip.
 *
 * Accounting (what pool_check verifies):
 *   sum(free) + sum(footprints of datasets) + sum(reservations)
 *     + sum(deferred frees) = data_len
 * with all those extents pairwise disjoint. A dataset's footprint is the
 * union of its shard and docs extents, each widened to POOL_EXTENT_ALIGN.
 *
 * Rejected: a bitmap of 4 KiB pages. A 1 TiB pool would need 32 MiB of
 * bitmap per catalog slot, copied on every publish.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool_internal.h"

int ext_cmp(const void *a, const void *b)
{
    const struct pool_extent *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

int ext_free(struct cat *c, uint64_t off, uint64_t len)
{
    if (len == 0)
        return 0;
    uint64_t end = off + len;
    /* first entry at or after off */
    uint64_t lo = 0, hi = c->n_fr;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (c->fr[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    struct pool_extent *prev = lo > 0 ? &c->fr[lo - 1] : NULL;
    struct pool_extent *next = lo < c->n_fr ? &c->fr[lo] : NULL;
    if ((prev && prev->off + prev->len > off) || (next && next->off < end))
        return CXLP_ECORRUPT; /* freeing something already free */
    int join_prev = prev && prev->off + prev->len == off;
    int join_next = next && next->off == end;
    if (join_prev && join_next) {
        prev->len += len + next->len;
        arr_del(c->fr, &c->n_fr, sizeof *c->fr, lo);
    } else if (join_prev) {
        prev->len += len;
    } else if (join_next) {
        next->off = off;
        next->len += len;
    } else {
        struct pool_extent e = {off, len};
        if (arr_push(&c->fr, &c->n_fr, &c->cap_fr, sizeof e, &e))
            return -ENOMEM;
        memmove(&c->fr[lo + 1], &c->fr[lo], (c->n_fr - 1 - lo) * sizeof e);
        c->fr[lo] = e;
    }
    return 0;
}

int ext_alloc(struct cat *c, uint64_t len, uint64_t *off)
{
    uint64_t best = UINT64_MAX;
    for (uint64_t i = 0; i < c->n_fr; i++)
        if (c->fr[i].len >= len && (best == UINT64_MAX || c->fr[i].len < c->fr[best].len))
            best = i;
    if (best == UINT64_MAX)
        return CXLP_EFULL;
    *off = c->fr[best].off;
    c->fr[best].off += len;
    c->fr[best].len -= len;
    if (c->fr[best].len == 0)
        arr_del(c->fr, &c->n_fr, sizeof *c->fr, best);
    return 0;
}

uint64_t ext_free_bytes(const struct cat *c, uint64_t *largest)
{
    uint64_t sum = 0, big = 0;
    for (uint64_t i = 0; i < c->n_fr; i++) {
        sum += c->fr[i].len;
        big = MAX(big, c->fr[i].len);
    }
    if (largest)
        *largest = big;
    return sum;
}

int ds_footprint(const struct cat *c, uint64_t i, struct pool_extent **out, uint64_t *n)
{
    const struct cat_ds *d = &c->ds[i];
    uint64_t k = d->d.n_shards + (d->d.docs.len ? 1 : 0);
    struct pool_extent *e = malloc((k ? k : 1) * sizeof *e);
    if (!e)
        return -ENOMEM;
    uint64_t m = 0;
    for (uint64_t s = 0; s < d->d.n_shards; s++) {
        const struct pool_shard *sh = &c->sh[d->first_shard + s];
        e[m].off = sh->off & ~(uint64_t)(POOL_EXTENT_ALIGN - 1);
        e[m].len = ALIGN_UP(sh->off + sh->len, POOL_EXTENT_ALIGN) - e[m].off;
        m++;
    }
    if (d->d.docs.len) {
        e[m].off = d->d.docs.off & ~(uint64_t)(POOL_EXTENT_ALIGN - 1);
        e[m].len = ALIGN_UP(d->d.docs.off + d->d.docs.len, POOL_EXTENT_ALIGN) - e[m].off;
        m++;
    }
    qsort(e, m, sizeof *e, ext_cmp);
    uint64_t w = 0;
    for (uint64_t r = 0; r < m; r++) {
        if (w > 0 && e[r].off <= e[w - 1].off + e[w - 1].len) {
            uint64_t end = MAX(e[w - 1].off + e[w - 1].len, e[r].off + e[r].len);
            e[w - 1].len = end - e[w - 1].off;
        } else {
            e[w++] = e[r];
        }
    }
    *out = e;
    *n = w;
    return 0;
}
