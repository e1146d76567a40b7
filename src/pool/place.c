/*
 * place.c - where copies of shards go: reserving room for a copy, publishing
 * it in its location word, dropping copies. The tier layer (staging,
 * eviction, migration) and the store layer's fetch are built on these three.
 *
 * Glossary
 *   copy      a complete, verified image of a shard in one tier's object,
 *             named by the shard's location word for that tier (loc.h)
 *   target    (states extent, shard, tier): the word a reservation was made
 *             for, or a deferred free was taken from
 *   epoch     the pool's location epoch; grows after a word stops naming a
 *             copy; readers pin it while they use copies (loc.h)
 *
 * Invariants (pool_check and reclaim hold them):
 *   every shard of a listed dataset has >= 1 copy, and one in the home tier
 *     when the pool has one (a drop never takes the last or the home copy)
 *   a tier holds at most one copy of a shard (one word per tier)
 *   an extent is exactly one of: free, reserved, a listed dataset's copy or
 *     metadata, deferred
 *   a deferred copy is freed only when freed <= min over live leases of
 *     min_epoch (no reader that could have loaded its word still reads)
 *
 * Order of a placement, under the writer lock, and why each crash is safe:
 *   1. the new copy's word is stored (release)   crash: its reservation's
 *      owner is dead and the target word names it: reclaim adopts it
 *   2. the catalog flips: the reservation goes, dropped copies become
 *      deferred frees that name their words    crash: those words still name
 *      the copies: reclaim cancels the frees (the copies stay)
 *   3. the dropped words are cleared
 *   4. the epoch grows                          crash: the frees wait for
 *      readers pinned at or before the old epoch, as they should
 * A reservation made for a target is also a claim: a second process that
 * wants to copy the same shard into the same tier gets CXLP_EBUSY and waits
 * for the word instead of reading the shard twice (one copy per host).
 *
 * Across hosts (host.c, docs/hosts.md). A word is changed only by the holder
 * of the cross-host writer lock, and fenced like a catalog publish: right
 * before each word store the writer checks that the lock word is still its
 * own and its beat fresh (host_lock_check), and the store is a CAS from the
 * word it read under the lock, so a writer deposed while stopped changes no
 * location when it resumes (its flip then fails at the generation CAS, and
 * a word stored in step 1 goes back). Reservations and the leases whose
 * epoch pins hold dropped copies name their domain and expire by the
 * heartbeat rule like any other. On a non-coherent pool the copy's bytes are
 * written back and fenced before step 1, every word store is written back,
 * and readers invalidate a word before loading it and the copy's lines
 * before reading them (store layer).
 *
 * Rejected: a copy-on-write catalog entry per placement (the catalog would
 * grow with the number of copies and every staged shard would copy it);
 * copies tracked only in private memory of the process that staged them
 * (other processes could neither read nor evict them, and a crash would
 * leak them).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/flush.h"
#include "pool/host.h"

/* The words of shard k (or unit: k = POOL_UNIT_TARGET | u), or NULL when
 * the dataset (or its units) is gone or k is out of range. *len: a copy's
 * bytes (a unit's word 0: 0 before its first copy). */
static uint64_t *words_of(struct txn *t, uint64_t states_off, uint64_t k, uint64_t *len)
{
    if (k & POOL_UNIT_TARGET)
        return unit_target_words(t->p->a, &t->c, states_off, k, len);
    int64_t i = cat_find_states(&t->c, states_off);
    if (i < 0 || k >= t->c.ds[i].d.n_shards)
        return NULL;
    struct attach *a = t->p->a;
    const struct pool_shent *tab =
        (const struct pool_shent *)(attach_base(a) + t->c.ds[i].table.off);
    *len = ALIGN_UP(tab[k].len, POOL_EXTENT_ALIGN);
    return attach_states(a, states_off) + k * attach_stride(a) + 1;
}

/* 1 when the location word of (states extent, shard, tier) still names the
 * copy at off: a reservation or deferred free taken for it belongs to it. */
int word_names(const struct attach *a, const struct cat *c, uint64_t states_off,
                      uint64_t shard, uint32_t tier, uint64_t off)
{
    if (shard & POOL_UNIT_TARGET) {
        uint64_t len;
        const uint64_t *w = tier < a->L.n_tiers ? unit_target_words(a, c, states_off, shard, &len)
                                                : NULL;
        uint64_t x = w ? host_load(a, &w[tier]) : 0; /* pairs with the release stores of place.c */
        return loc_present(x) && loc_off(x) == off;
    }
    int64_t i = cat_find_states(c, states_off);
    if (i < 0 || shard >= c->ds[i].d.n_shards || tier >= a->L.n_tiers)
        return 0;
    const uint64_t *st = attach_states(a, states_off);
    /* pairs with the release stores of place.c */
    uint64_t w = host_load(a, &st[shard * attach_stride(a) + 1 + tier]);
    return loc_present(w) && loc_off(w) == off;
}

/* 1 when a tier holds a copy of the unit whose location words are w. */
static int unit_copies(const struct attach *a, const uint64_t *w)
{
    for (uint32_t d = 0; d < a->L.n_tiers; d++)
        if (loc_present(host_load(a, &w[d]))) /* pairs with the release stores of this file */
            return 1;
    return 0;
}

static void word_sync(struct attach *a, const uint64_t *w)
{
    (void)media_sync(&a->m, (uint64_t)((const uint8_t *)w - (const uint8_t *)a->m.base), 8);
}

/* The fenced change of a location word, under the writer lock: 0 when the
 * word went from old to new; CXLP_EBUSY when the lock was lost (a writer
 * deposed while stopped changes nothing) or the word moved (which only a
 * writer that took the lock from us can have done). Release order and, on a
 * non-coherent pool, write-back (host_cas); durable on file media. */
static int word_set(struct txn *t, uint64_t *w, uint64_t old, uint64_t new)
{
    struct attach *a = t->p->a;
    int rc = host_lock_check(a, &t->lock, &t->p->obj);
    if (rc)
        return rc;
    /* pairs with the acquire loads of readers (store_word) */
    if (!host_cas(a, w, &old, new))
        return seterr(&t->p->obj, CXLP_EBUSY, "%s: a location word changed under the writer "
                      "lock (another writer took it over): nothing changed", a->m.path);
    word_sync(a, w);
    return 0;
}

static void ctr_add(struct attach *a, uint32_t t, size_t field, uint64_t v)
{
    struct pool_tier_ctr *c = attach_ctr(a, t);
    if (c && v)
        at_fetch_add_relaxed((uint64_t *)((uint8_t *)c + field), v);
}

static int gone(cxlp_pool *p, uint64_t states_off, uint64_t k)
{
    return seterr(&p->obj, CXLP_ENOTFOUND, "%s: no dataset with states at %#llx holds shard %llu "
                  "(removed?)", p->a->m.path, (unsigned long long)states_off,
                  (unsigned long long)k);
}

/* How a placement call starts: a writable handle, a tier of the pool, the
 * writer lock and a snapshot of the catalog. */
static int begin(cxlp_pool *p, uint32_t tier, const char *what, struct txn *t)
{
    int rc = writable_handle(p, what);
    if (rc)
        return rc;
    if (tier >= p->a->L.n_tiers)
        return seterr(&p->obj, CXLP_EARG, "%s: tier %u of %u", what, tier, p->a->L.n_tiers);
    return txn_begin(t, p);
}

int pool_copy_reserve(cxlp_pool *p, uint64_t states_off, uint64_t k, uint32_t tier,
                      uint64_t want, struct pool_extent *out)
{
    struct attach *a = p->a;
    struct txn t;
    int rc = begin(p, tier, "pool_copy_reserve", &t);
    if (rc)
        return rc;
    const uint32_t obj = a->L.tiers[tier].object;
    uint64_t off = 0;
    uint64_t len;
    uint64_t *w = words_of(&t, states_off, k, &len);
    if (!w) {
        rc = gone(p, states_off, k);
        goto out;
    }
    if (k & POOL_UNIT_TARGET) {
        /* a unit's copy is as long as its caller laid it out; every copy of
         * it has the bytes of the first (word 0) */
        if (want == 0 || want % POOL_EXTENT_ALIGN || (len != want && unit_copies(a, w)) ||
            tier == a->L.home || (a->L.tiers[tier].flags & TIER_STAGED)) {
            rc = seterr(&p->obj, CXLP_EARG, "pool_copy_reserve: unit %llu: %llu bytes into tier "
                        "%u (its copies have %llu; units go to memory tiers)",
                        (unsigned long long)(k & ~POOL_UNIT_TARGET), (unsigned long long)want,
                        tier, (unsigned long long)len);
            goto out;
        }
        len = want;
    }
    /* pairs with the release stores below */
    if (loc_present(host_load(a, &w[tier]))) {
        rc = CXLP_EEXIST; /* nothing to do: the caller reads the copy */
        goto out;
    }
    for (uint64_t i = 0; i < t.c.n_resv; i++) {
        const struct cat_resv *r = &t.c.resv[i];
        if (r->target_states == states_off && r->target_shard == k && r->tier == tier) {
            rc = seterr(&p->obj, CXLP_EBUSY, "%s: pid %llu is copying %s %llu into tier %u",
                        a->m.path, (unsigned long long)r->pid,
                        k & POOL_UNIT_TARGET ? "unit" : "shard",
                        (unsigned long long)(k & ~POOL_UNIT_TARGET), tier);
            goto out;
        }
    }
    if (ext_alloc(&t.c, obj, len, &off)) {
        uint64_t largest, n_fr, fr = ext_free_bytes(&t.c, obj, &largest, &n_fr), def = 0, res = 0;
        for (uint64_t i = 0; i < t.c.n_def; i++)
            if (t.c.def[i].kind == DEF_EXTENT && t.c.def[i].object == obj)
                def += t.c.def[i].len;
        for (uint64_t i = 0; i < t.c.n_resv; i++)
            if (t.c.resv[i].object == obj)
                res += t.c.resv[i].len;
        rc = seterr(&p->obj, CXLP_EFULL, "%s: tier %u (%s) has no free extent of %llu bytes "
                    "(free %llu in %llu extents, largest %llu; %llu reserved, %llu dropped "
                    "but still pinned by readers)", a->m.path, tier,
                    cxlp_tier_name((int)a->L.tiers[tier].kind), (unsigned long long)len,
                    (unsigned long long)fr, (unsigned long long)n_fr,
                    (unsigned long long)largest, (unsigned long long)res, (unsigned long long)def);
        goto out;
    }
    struct cat_resv r = resv_mine(a, off, len, obj, tier);
    r.target_states = states_off;
    r.target_shard = k;
    if (arr_push(&t.c.resv, &t.c.n_resv, &t.c.cap_resv, sizeof r, &r)) {
        rc = seterr(&p->obj, -ENOMEM, "pool_copy_reserve: out of memory");
        goto out;
    }
    if ((rc = txn_commit(&t, 0)))
        goto out;
    fault_point("copy-reserved");
    *out = (struct pool_extent){off, len};
out:
    txn_end(&t);
    /* backed outside the writer lock, as the writer's reservations are
     * (txn.c): the other stagers' placements do not wait for a fallocate */
    if (rc == 0 && (rc = pool_back(p, attach_media(a, obj), off, len, 0))) {
        char msg[ERRMSG_MAX];
        strlcpy0(msg, p->obj.err, sizeof msg);
        (void)pool_unreserve(p, (int)tier, *out);
        /* the tier's storage itself is full (its tmpfs, its disk): no room
         * for a copy, as a full extent map is; readers read the home copy */
        if (rc == -ENOSPC || rc == -ENOMEM || rc == -EDQUOT)
            rc = CXLP_EFULL;
        seterr(&p->obj, rc, "%s", msg);
    }
    return rc;
}

/* Adds the deferred frees of the copies in drop_mask (never the home's or
 * the last one; with only_cache, only copies staged as cache), and returns
 * the mask of words to clear after the flip and their bytes. */
static int defer_drops(struct txn *t, uint64_t states_off, uint64_t k, const uint64_t *w,
                       uint64_t len, uint32_t keep, uint32_t drop_mask, int only_cache,
                       uint32_t *clear, uint64_t *bytes)
{
    struct attach *a = t->p->a;
    uint32_t present = 0;
    for (uint32_t d = 0; d < a->L.n_tiers; d++)
        if (loc_present(host_load(a, &w[d]))) /* pairs with the release stores below */
            present |= 1u << d;
    if (keep < a->L.n_tiers)
        present |= 1u << keep;
    if (k & POOL_UNIT_TARGET) /* its shard's copies hold it: any copy of it may go */
        present |= 1u << POOL_MAX_TIERS;
    /* pairs with the release store of hdr->loc_epoch below; writers are serialized */
    const uint64_t freed = host_load(a, &a->hdr->loc_epoch) + 1;
    *clear = 0;
    *bytes = 0;
    for (uint32_t d = 0; d < a->L.n_tiers; d++) {
        uint64_t wd = host_load(a, &w[d]);
        if (!(drop_mask >> d & 1) || d == keep || d == a->L.home ||
            (a->L.tiers[d].flags & TIER_REMOTE) || !loc_present(wd) ||
            (only_cache && !(wd & LOC_CACHE)))
            continue;
        if ((present & ~(1u << d)) == 0)
            continue; /* the last copy stays */
        struct cat_def def = {.off = loc_off(wd), .len = len, .freed = freed,
                              .object = a->L.tiers[d].object, .kind = DEF_EXTENT,
                              .clock = CLOCK_EPOCH, .tier = d, .target_states = states_off,
                              .target_shard = k};
        if (arr_push(&t->c.def, &t->c.n_def, &t->c.cap_def, sizeof def, &def))
            return -ENOMEM;
        present &= ~(1u << d);
        *clear |= 1u << d;
        *bytes += len;
    }
    return 0;
}

/* Grows the location epoch after words stopped naming copies. */
static void epoch_grow(struct attach *a)
{
    /* pairs with the acquire load of hdr->loc_epoch in attach_pin_epoch */
    host_store(a, &a->hdr->loc_epoch, host_load(a, &a->hdr->loc_epoch) + 1);
    at_fence_seq_cst();
    (void)media_sync(&a->m, offsetof(struct pool_hdr, loc_epoch), 8);
}

/* After the flip: clears the dropped words, grows the epoch. A writer
 * deposed since its flip clears nothing: the frees it deferred name words
 * that still name their copies, so the next writer's reclaim cancels them
 * and the copies stay (consistent; pool_check agrees). */
static void apply_drops(struct txn *t, uint64_t *w, uint32_t clear, uint64_t len)
{
    struct attach *a = t->p->a;
    if (!clear)
        return;
    fault_point("drop-after-flip");
    for (uint32_t d = 0; d < a->L.n_tiers; d++) {
        if (!(clear >> d & 1))
            continue;
        uint64_t old = host_load(a, &w[d]);
        if (word_set(t, &w[d], old, loc_next_absent(old)))
            return;
        ctr_add(a, d, offsetof(struct pool_tier_ctr, bytes_out), len);
        ctr_add(a, d, offsetof(struct pool_tier_ctr, evictions), 1);
    }
    fault_point("drop-after-clear");
    epoch_grow(a);
}

void pool_words_retire(struct txn *t, uint64_t states_off, uint64_t n_shards)
{
    struct attach *a = t->p->a;
    uint64_t *st = attach_states(a, states_off);
    const uint32_t stride = attach_stride(a);
    int changed = 0;
    for (uint64_t k = 0; k < n_shards; k++)
        for (uint32_t d = 0; d < a->L.n_tiers; d++) {
            uint64_t *w = &st[k * stride + 1 + d], old = host_load(a, w);
            if (d == a->L.home || (a->L.tiers[d].flags & TIER_REMOTE) || !loc_present(old))
                continue;
            if (word_set(t, w, old, loc_next_absent(old)))
                return;
            changed = 1;
        }
    if (changed)
        epoch_grow(a);
}

int pool_copy_place(cxlp_pool *p, uint64_t states_off, uint64_t k, uint32_t tier,
                    struct pool_extent ext, int cache, uint32_t drop_mask, uint64_t *dropped_out)
{
    if (dropped_out)
        *dropped_out = 0;
    struct attach *a = p->a;
    struct txn t;
    int rc = begin(p, tier, "pool_copy_place", &t);
    if (rc)
        return rc;
    const uint32_t obj = a->L.tiers[tier].object;
    int64_t ri = -1;
    for (uint64_t i = 0; i < t.c.n_resv; i++) {
        const struct cat_resv *r = &t.c.resv[i];
        if (r->pid == (uint64_t)getpid() && r->host == a->self.key && r->object == obj &&
            r->off == ext.off &&
            r->target_states == states_off && r->target_shard == k && r->tier == tier)
            ri = (int64_t)i;
    }
    if (ri < 0) {
        rc = seterr(&p->obj, CXLP_EARG, "pool_copy_place: %#llx is not this process's "
                    "reservation for shard %llu in tier %u", (unsigned long long)ext.off,
                    (unsigned long long)k, tier);
        goto out;
    }
    struct cat_resv r = t.c.resv[ri];
    arr_del(t.c.resv, &t.c.n_resv, sizeof r, (uint64_t)ri);
    uint64_t len;
    uint64_t *w = words_of(&t, states_off, k, &len);
    if (w && (k & POOL_UNIT_TARGET) && len != r.len && !unit_copies(a, w)) {
        /* the unit's first copy: its length, before any word names it (a
         * length no copy has is a build's that laid units out otherwise) */
        if ((rc = word_set(&t, &w[-1], len, r.len)))
            goto out;
        len = r.len;
    }
    /* pairs with the release stores of this file */
    if (!w || loc_present(host_load(a, &w[tier])) || len != r.len) {
        /* the dataset went, or the copy is there already: give the room back */
        rc = ext_free(&t.c, obj, r.off, r.len);
        if (!rc)
            rc = txn_commit(&t, 0);
        if (!rc)
            rc = !w ? gone(p, states_off, k) : CXLP_EEXIST;
        goto out;
    }
    uint32_t clear;
    uint64_t dropped;
    if (defer_drops(&t, states_off, k, w, len, tier, drop_mask, 0, &clear, &dropped)) {
        rc = seterr(&p->obj, -ENOMEM, "pool_copy_place: out of memory");
        goto out;
    }
    if (a->noncoherent) {
        /* the copy's bytes reach memory before any word names them */
        const struct media *m = attach_media(a, obj);
        if (m->base)
            cache_writeback((const uint8_t *)m->base + ext.off, len);
        cache_fence();
    }
    fault_point("place-before-word");
    /* 1: the copy is visible; its reservation still names it (adoption) */
    const uint64_t was = host_load(a, &w[tier]), now = loc_next_present(was, ext.off, cache);
    if ((rc = word_set(&t, &w[tier], was, now)))
        goto out;
    fault_point("place-before-flip");
    /* 2 */
    if ((rc = txn_commit(&t, 0))) {
        /* nothing flipped: the word goes back (if still ours to change), the
         * reservation stays ours */
        uint64_t cur = now;
        if (host_cas(a, &w[tier], &cur, loc_next_absent(now)))
            word_sync(a, &w[tier]);
        goto out;
    }
    ctr_add(a, tier, offsetof(struct pool_tier_ctr, bytes_in), len);
    ctr_add(a, tier, offsetof(struct pool_tier_ctr, fetches), 1);
    if (dropped_out)
        *dropped_out = dropped;
    /* 3, 4 */
    apply_drops(&t, w, clear, len);
out:
    txn_end(&t);
    return rc;
}

int pool_copy_drop(cxlp_pool *p, uint64_t states_off, uint64_t k, uint32_t drop_mask,
                   int only_cache, uint64_t *bytes)
{
    int rc = writable_handle(p, "pool_copy_drop");
    if (rc)
        return rc;
    struct txn t;
    if ((rc = txn_begin(&t, p)))
        return rc;
    uint64_t len, dropped = 0;
    uint64_t *w = words_of(&t, states_off, k, &len);
    if (!w) {
        rc = gone(p, states_off, k);
        goto out;
    }
    uint32_t clear;
    if (defer_drops(&t, states_off, k, w, len, UINT32_MAX, drop_mask, only_cache, &clear,
                    &dropped)) {
        rc = seterr(&p->obj, -ENOMEM, "pool_copy_drop: out of memory");
        goto out;
    }
    if (!clear)
        goto out; /* nothing to drop: no flip */
    if ((rc = txn_commit(&t, 0)))
        goto out;
    apply_drops(&t, w, clear, len);
out:
    if (!rc && bytes)
        *bytes = dropped;
    txn_end(&t);
    return rc;
}

int pool_tier_deferred(cxlp_pool *p, uint32_t tier, uint64_t *bytes)
{
    struct attach *a = p->a;
    if (tier >= a->L.n_tiers)
        return seterr(&p->obj, CXLP_EARG, "pool_tier_deferred: tier %u of %u", tier, a->L.n_tiers);
    struct cat c;
    int rc = cat_snapshot(a, &c, 0, NULL, &p->obj);
    if (rc)
        return rc;
    uint64_t sum = 0;
    for (uint64_t i = 0; i < c.n_def; i++)
        if (c.def[i].kind == DEF_EXTENT && c.def[i].object == a->L.tiers[tier].object)
            sum += c.def[i].len;
    cat_free(&c);
    *bytes = sum;
    return 0;
}

int pool_drop_one_cache(cxlp_pool *p, uint32_t tier, uint64_t skip_states, uint64_t *bytes)
{
    struct attach *a = p->a;
    *bytes = 0;
    if (tier >= a->L.n_tiers)
        return seterr(&p->obj, CXLP_EARG, "pool_drop_one_cache: tier %u of %u", tier,
                      a->L.n_tiers);
    struct cat c;
    int rc = cat_snapshot(a, &c, 0, NULL, &p->obj);
    if (rc)
        return rc;
    const uint32_t stride = attach_stride(a);
    for (uint64_t i = 0; i < c.n_ds && !*bytes && !rc; i++) {
        const struct cat_ds *d = &c.ds[i];
        if (d->states.off == skip_states || !d->d.n_shards)
            continue;
        const uint64_t *st = attach_states(a, d->states.off);
        for (uint64_t k = 0; k < d->d.n_shards && !*bytes && !rc; k++) {
            uint64_t w = host_load(a, &st[k * stride + 1 + tier]); /* pairs with the stores here */
            if (loc_present(w) && (w & LOC_CACHE)) {
                rc = pool_copy_drop(p, d->states.off, k, 1u << tier, 1, bytes);
                if (rc == CXLP_ENOTFOUND)
                    rc = 0; /* removed meanwhile: look on */
            }
        }
        int64_t ui = cat_find_units(&c, d->states.off);
        const uint64_t *uw = ui < 0 ? NULL : units_words(a, c.units[ui].words.off);
        for (uint64_t u = 0; uw && u < c.units[ui].n_units && !*bytes && !rc; u++) {
            uint64_t w = host_load(a, &uw[u * stride + 1 + tier]); /* pairs with the stores here */
            if (loc_present(w) && (w & LOC_CACHE)) {
                rc = pool_copy_drop(p, d->states.off, POOL_UNIT_TARGET | u, 1u << tier, 1, bytes);
                if (rc == CXLP_ENOTFOUND)
                    rc = 0;
            }
        }
    }
    cat_free(&c);
    return rc;
}

int pool_copy_keep(cxlp_pool *p, uint64_t states_off, uint64_t k, uint32_t tier, int cache)
{
    struct txn t;
    int rc = begin(p, tier, "pool_copy_keep", &t);
    if (rc)
        return rc;
    uint64_t len;
    uint64_t *w = words_of(&t, states_off, k, &len);
    if (!w) {
        rc = gone(p, states_off, k);
    } else if (!loc_present(host_load(p->a, &w[tier]))) {
        rc = CXLP_ENOTFOUND; /* no copy there (evicted meanwhile) */
    } else {
        uint64_t old = host_load(p->a, &w[tier]);
        if (!!(old & LOC_CACHE) != !!cache) /* same copy, new version: either word reads it */
            rc = word_set(&t, &w[tier], old, loc_next_present(old, loc_off(old), cache));
    }
    txn_end(&t);
    return rc;
}
