/*
 * units.c - a dataset's staging units at the pool layer: their record in
 * the catalog, their words, and walking the copies those words name.
 *
 * Why units. A memory tier holds copies; until units, a copy was a whole
 * shard, so a dataset whose shards were larger than the staging budget
 * (256 MiB shards, the writer's default, behind a 256 MiB dram tier)
 * staged nothing and read every record from the home in part. A unit is
 * a run of one shard's records (pool_format.h, struct cat_units): its
 * copy holds only the blocks of those records (store/unit.c), so the
 * staging engine works in units of a few MiB whatever size the shards were
 * written at, by this build or an earlier one.
 *
 * Glossary
 *   units record  struct cat_units in the catalog, one per dataset that has
 *                 units; made once, by the first loader that stages the
 *                 dataset in units (pool_units_ensure), removed with the
 *                 dataset
 *   unit words    n_units * stride words in object 0: word 0 the bytes of a
 *                 copy of the unit, word 1 + t its location in tier t
 *   unit target   POOL_UNIT_TARGET | u in a reservation's or deferred
 *                 free's target_shard: the word it adopts, or frees
 *
 * Invariants (pool_check):
 *   a units record names a listed dataset (at most one record each)
 *   a present unit word names word 0 bytes (> 0, 4 KiB aligned) inside its
 *     tier's data area, in a memory tier (never the home: a unit's home copy
 *     is its shard's)
 *   the words extent is the dataset's metadata: removed with it as a
 *     deferred free, its copies as DEF_UCOPIES (walked when freed)
 *
 * Rejected: unit words in the dataset's states extent (it is sized at
 * publish for n_shards; a dataset published by an earlier build must stage
 * in units too, so the words are made later, by whoever needs them);
 * units as datasets of their own (they have no home copy: every invariant
 * of a dataset would need an exception).
 */
#include <errno.h>
#include <string.h>

#include "common/atomic.h"
#include "common/flush.h"
#include "pool/host.h"

int64_t cat_find_units(const struct cat *c, uint64_t states_off)
{
    for (uint64_t i = 0; i < c->n_units; i++)
        if (c->units[i].states_off == states_off)
            return (int64_t)i;
    return -1;
}

uint64_t *units_words(const struct attach *a, uint64_t words_off)
{
    return (uint64_t *)(attach_base(a) + words_off);
}

/* 0 when the n words at words_off lie in object 0's data area. */
static int words_in_data(const struct attach *a, uint64_t words_off, uint64_t n)
{
    const struct pool_layout *L = &a->L;
    uint64_t b;
    return mul_overflow_u64(n, attach_stride(a) * 8ull, &b) || words_off < L->obj[0].data_off ||
           !range_ok(words_off - L->obj[0].data_off, b, L->obj[0].data_len) || words_off % 8;
}

int units_walk(const struct attach *a, uint64_t words_off, uint64_t n_units,
               int (*fn)(void *ctx, uint64_t u, uint32_t tier, uint32_t object, uint64_t off,
                         uint64_t len),
               void *ctx)
{
    if (words_in_data(a, words_off, n_units))
        return CXLP_ECORRUPT;
    const uint64_t *w = units_words(a, words_off);
    const uint32_t stride = attach_stride(a);
    for (uint64_t u = 0; u < n_units; u++) {
        uint64_t len = host_load(a, &w[u * stride]); /* written before any location word */
        for (uint32_t t = 0; t < a->L.n_tiers; t++) {
            /* pairs with the release stores of place.c */
            uint64_t x = host_load(a, &w[u * stride + 1 + t]);
            if (!loc_present(x))
                continue;
            uint32_t obj = a->L.tiers[t].object;
            uint64_t off = loc_off(x);
            if (len == 0 || len % POOL_EXTENT_ALIGN || (a->L.tiers[t].flags & TIER_STAGED) ||
                off < a->L.obj[obj].data_off ||
                !range_ok(off - a->L.obj[obj].data_off, len, a->L.obj[obj].data_len))
                return CXLP_ECORRUPT;
            int rc = fn(ctx, u, t, obj, off, len);
            if (rc)
                return rc;
        }
    }
    return 0;
}

uint64_t *unit_target_words(const struct attach *a, const struct cat *c, uint64_t states_off,
                            uint64_t target, uint64_t *len)
{
    int64_t i = cat_find_units(c, states_off);
    uint64_t u = target & ~POOL_UNIT_TARGET;
    if (i < 0 || u >= c->units[i].n_units)
        return NULL;
    uint64_t *w = units_words(a, c->units[i].words.off) + u * attach_stride(a);
    *len = host_load(a, &w[0]);
    return w + 1;
}

int pool_units_get(struct attach *a, uint64_t states_off, struct pool_units *out)
{
    struct cat c;
    int rc = cat_snapshot(a, &c, 0, NULL, NULL);
    if (rc)
        return rc;
    int64_t i = cat_find_units(&c, states_off);
    if (i < 0) {
        rc = CXLP_ENOTFOUND;
    } else {
        const struct cat_units *u = &c.units[i];
        *out = (struct pool_units){.words = units_words(a, u->words.off),
                                   .per_unit = u->per_unit, .n_units = u->n_units,
                                   .stride = attach_stride(a)};
    }
    cat_free(&c);
    return rc;
}

int pool_units_ensure(cxlp_pool *p, uint64_t states_off, uint64_t per_unit, uint64_t n_units,
                      struct pool_units *out)
{
    int rc = writable_handle(p, "pool_units_ensure");
    if (rc)
        return rc;
    struct attach *a = p->a;
    if (per_unit == 0 || n_units == 0 || a->L.n_tiers < 2)
        return seterr(&p->obj, CXLP_EARG, "pool_units_ensure: %llu units of %llu records in a "
                      "pool of %u tiers", (unsigned long long)n_units,
                      (unsigned long long)per_unit, a->L.n_tiers);
    struct txn t;
    if ((rc = txn_begin(&t, p)))
        return rc;
    struct cat *c = &t.c;
    int64_t d = cat_find_states(c, states_off);
    int64_t i = cat_find_units(c, states_off);
    const uint64_t stride = attach_stride(a);
    uint64_t bytes;
    if (d < 0) {
        rc = seterr(&p->obj, CXLP_ENOTFOUND, "%s: no dataset with states at %#llx (removed?)",
                    a->m.path, (unsigned long long)states_off);
    } else if (i < 0) {
        /* the first to ask: its geometry is the dataset's from now on */
        uint64_t off;
        if (mul_overflow_u64(n_units, stride * 8, &bytes) ||
            ext_alloc(c, 0, ALIGN_UP(bytes, POOL_EXTENT_ALIGN), &off)) {
            rc = seterr(&p->obj, CXLP_EFULL, "%s: dataset '%s': no room in the pool object's "
                        "metadata area for the words of %llu staging units (%llu bytes; "
                        "--meta-bytes sets it at create)", a->m.path, c->ds[d].d.info.name,
                        (unsigned long long)n_units, (unsigned long long)n_units * stride * 8);
        } else if ((rc = media_prepare(&a->m, off, ALIGN_UP(bytes, POOL_EXTENT_ALIGN)))) {
            rc = seterr(&p->obj, rc, "%s: cannot back the words of %llu staging units: %s",
                        a->m.path, (unsigned long long)n_units, cxlp_strerror(rc));
        } else {
            memset((uint8_t *)a->m.base + off, 0, bytes);
            if (!(rc = media_sync(&a->m, off, bytes)) && a->noncoherent)
                cache_writeback((uint8_t *)a->m.base + off, bytes);
            struct cat_units rec = {.states_off = states_off, .words = {off, bytes},
                                    .per_unit = per_unit, .n_units = n_units};
            if (!rc && arr_push(&c->units, &c->n_units, &c->cap_units, sizeof rec, &rec))
                rc = seterr(&p->obj, -ENOMEM, "pool_units_ensure: out of memory");
            if (!rc && (rc = txn_commit(&t, 0)) == 0)
                i = (int64_t)c->n_units - 1;
        }
    }
    if (!rc)
        *out = (struct pool_units){.words = units_words(a, c->units[i].words.off),
                                   .per_unit = c->units[i].per_unit,
                                   .n_units = c->units[i].n_units, .stride = (uint32_t)stride};
    txn_end(&t);
    return rc;
}

int units_defer(struct cat *c, uint64_t states_off, uint64_t g)
{
    int64_t i = cat_find_units(c, states_off);
    if (i < 0)
        return 0;
    const struct cat_units u = c->units[i];
    struct cat_def copies = {.off = u.words.off, .len = u.n_units, .freed = g,
                             .kind = DEF_UCOPIES, .clock = CLOCK_GEN,
                             .target_states = states_off};
    struct cat_def words = {.off = u.words.off, .len = ALIGN_UP(u.words.len, POOL_EXTENT_ALIGN),
                            .freed = g, .kind = DEF_EXTENT, .clock = CLOCK_GEN};
    if (arr_push(&c->def, &c->n_def, &c->cap_def, sizeof copies, &copies) ||
        arr_push(&c->def, &c->n_def, &c->cap_def, sizeof words, &words))
        return -ENOMEM;
    arr_del(c->units, &c->n_units, sizeof *c->units, (uint64_t)i);
    return 0;
}
