/*
 * extent.c - the extent allocator over the catalog's free lists, and the
 * footprints the accounting checks.
 *
 * The free list is an array of extents sorted by (object, offset) with no
 * two of one object touching (coalesced on every free). Allocation is best
 * fit within the object: the smallest free extent that holds the request,
 * lowest offset on ties, carved from its start. Shards are large and of
 * similar size; best fit keeps the largest holes intact for the next big
 * shard, where first fit would nibble at the front of the one big extent a
 * fresh pool starts with and leave the tail fragmented after removals. The
 * list is short (one entry per hole), so a linear scan per allocation costs
 * nothing next to the catalog flip.
 *
 * Accounting (what pool_check verifies), per object o:
 *   sum(free_o) + sum(footprints of datasets in o) + sum(reservations_o)
 *     + sum(deferred frees in o) = data_len_o
 * with all those extents pairwise disjoint. A dataset's footprint is its
 * metadata extents (docs, shard table, states: object 0) and every copy its
 * states name (in the objects of their tiers), each widened to
 * POOL_EXTENT_ALIGN; a removed dataset's copies stay deferred (DEF_COPIES)
 * until no lease can see it.
 *
 * Rejected: a bitmap of 4 KiB pages. A 1 TiB pool would need 32 MiB of
 * bitmap per catalog slot, copied on every publish.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic.h"
#include "pool/pool_internal.h"

int ext_cmp(const void *a, const void *b)
{
    const struct pool_extent *x = a, *y = b;
    return x->off < y->off ? -1 : x->off > y->off;
}

static int fr_before(const struct cat_free *f, uint32_t object, uint64_t off)
{
    return f->object < object || (f->object == object && f->off < off);
}

int ext_free(struct cat *c, uint32_t object, uint64_t off, uint64_t len)
{
    if (len == 0)
        return 0;
    uint64_t end = off + len;
    /* first entry at or after (object, off) */
    uint64_t lo = 0, hi = c->n_fr;
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (fr_before(&c->fr[mid], object, off))
            lo = mid + 1;
        else
            hi = mid;
    }
    struct cat_free *prev = lo > 0 && c->fr[lo - 1].object == object ? &c->fr[lo - 1] : NULL;
    struct cat_free *next = lo < c->n_fr && c->fr[lo].object == object ? &c->fr[lo] : NULL;
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
        struct cat_free e = {.off = off, .len = len, .object = object};
        if (arr_push(&c->fr, &c->n_fr, &c->cap_fr, sizeof e, &e))
            return -ENOMEM;
        memmove(&c->fr[lo + 1], &c->fr[lo], (c->n_fr - 1 - lo) * sizeof e);
        c->fr[lo] = e;
    }
    return 0;
}

int ext_alloc(struct cat *c, uint32_t object, uint64_t len, uint64_t *off)
{
    uint64_t best = UINT64_MAX;
    for (uint64_t i = 0; i < c->n_fr; i++)
        if (c->fr[i].object == object && c->fr[i].len >= len &&
            (best == UINT64_MAX || c->fr[i].len < c->fr[best].len))
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

uint64_t ext_free_bytes(const struct cat *c, uint32_t object, uint64_t *largest,
                        uint64_t *n_extents)
{
    uint64_t sum = 0, big = 0, n = 0;
    for (uint64_t i = 0; i < c->n_fr; i++) {
        if (c->fr[i].object != object)
            continue;
        sum += c->fr[i].len;
        big = MAX(big, c->fr[i].len);
        n++;
    }
    if (largest)
        *largest = big;
    if (n_extents)
        *n_extents = n;
    return sum;
}

static int push(struct oext **v, uint64_t *n, uint64_t *cap, uint32_t object, uint64_t off,
                uint64_t len)
{
    if (len == 0)
        return 0;
    uint64_t s = off & ~(uint64_t)(POOL_EXTENT_ALIGN - 1);
    struct oext e = {s, ALIGN_UP(off + len, POOL_EXTENT_ALIGN) - s, object};
    return arr_push(v, n, cap, sizeof e, &e);
}

struct pushing {
    struct oext **v;
    uint64_t *n, *cap;
};

static int push_copy(void *ctx, uint64_t u, uint32_t tier, uint32_t object, uint64_t off,
                     uint64_t len)
{
    (void)u;
    (void)tier;
    struct pushing *p = ctx;
    return push(p->v, p->n, p->cap, object, off, len);
}

int units_extents(const struct attach *a, uint64_t words_off, uint64_t n_units,
                  struct oext **v, uint64_t *n, uint64_t *cap)
{
    struct pushing p = {v, n, cap};
    return units_walk(a, words_off, n_units, push_copy, &p);
}

int ds_extents(const struct attach *a, const struct cat *c, uint64_t i, struct oext **v,
               uint64_t *n, uint64_t *cap)
{
    const struct cat_ds *d = &c->ds[i];
    if (push(v, n, cap, 0, d->d.docs.off, d->d.docs.len) ||
        push(v, n, cap, 0, d->table.off, d->table.len) ||
        push(v, n, cap, 0, d->states.off, d->states.len))
        return -ENOMEM;
    if (d->d.n_shards == 0)
        return 0;
    int64_t ui = cat_find_units(c, d->states.off);
    if (ui >= 0) {
        const struct cat_units *u = &c->units[ui];
        int rc = push(v, n, cap, 0, u->words.off, u->words.len);
        if (rc || (rc = units_extents(a, u->words.off, u->n_units, v, n, cap)))
            return rc;
    }
    const struct pool_shent *tab = (const struct pool_shent *)(attach_base(a) + d->table.off);
    const uint64_t *st = attach_states(a, d->states.off);
    const uint32_t stride = attach_stride(a);
    for (uint64_t k = 0; k < d->d.n_shards; k++) {
        uint64_t len = at_load_relaxed(&tab[k].len);
        for (uint32_t t = 0; t < a->L.n_tiers; t++) {
            uint64_t w = at_load_acquire(&st[k * stride + 1 + t]); /* pairs with place.c */
            if (!loc_present(w))
                continue;
            uint32_t obj = a->L.tiers[t].object;
            uint64_t off = loc_off(w);
            if (off < a->L.obj[obj].data_off ||
                !range_ok(off - a->L.obj[obj].data_off, len, a->L.obj[obj].data_len))
                return CXLP_ECORRUPT;
            if (push(v, n, cap, obj, off, len))
                return -ENOMEM;
        }
    }
    return 0;
}

static int oext_cmp(const void *a, const void *b)
{
    const struct oext *x = a, *y = b;
    if (x->object != y->object)
        return x->object < y->object ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

void oext_merge(struct oext *v, uint64_t *n)
{
    if (*n == 0)
        return;
    qsort(v, *n, sizeof *v, oext_cmp);
    uint64_t w = 0;
    for (uint64_t r = 0; r < *n; r++) {
        if (w > 0 && v[w - 1].object == v[r].object && v[r].off <= v[w - 1].off + v[w - 1].len) {
            uint64_t end = MAX(v[w - 1].off + v[w - 1].len, v[r].off + v[r].len);
            v[w - 1].len = end - v[w - 1].off;
        } else {
            v[w++] = v[r];
        }
    }
    *n = w;
}
