/*
 * check.c - pool_check: the full structural check of a pool.
 *
 * Beyond what open and every snapshot already validate (header, catalog
 * checksum, bounds of each record), it proves the extent map of every
 * object:
 *   the extents of all datasets (metadata extents and every copy their
 *   states name), free lists, reservations and deferred frees (a removed
 *   dataset's copies walked from its states) are pairwise disjoint, and
 *   sum(free) + sum(used) + sum(reserved) + sum(deferred) = data_len
 * per object. It also checks that dataset names are unique, that every shard
 * has a copy (one in the home tier when there is one) and that every copy
 * lies in its tier, and reports the lease table.
 * The inactive catalog slot may legitimately hold garbage (a writer killed
 * while writing it), so it is reported, never an error.
 *
 * Cost: O(n log n) in the number of extents (copies included). It runs on a
 * private snapshot and takes no lock (a read-only handle checks too), so a
 * copy placed or dropped meanwhile (a loader staging, a migration) may show
 * as an overlap or a loss. Location words change only under the writer
 * lock, and every take of the lock grows the gen word's epoch: a problem
 * found while no writer held the lock at the start or the end and none
 * took it between (a quiet window) is the pool's; one found otherwise is
 * checked again, up to CHECK_TRIES times or CHECK_TRY_S seconds. After
 * that a writable handle checks once more holding the writer lock itself
 * (quiet by construction; writers wait for it, as for any writer), so
 * writers that never leave a window as long as the check (a pool with
 * copies placed all the time) cannot make a sound pool look broken; a
 * read-only handle reports what it found, saying that writers were busy.
 * A check that passes is reported as it ran.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/atomic.h"
#include "pool/host.h"
#include "pool/pool_internal.h"

#define CHECK_TRIES 200   /* tries of a check that found a problem outside a quiet window */
#define CHECK_TRY_S 10    /* and no new try after this many seconds */

int pool_check_tries = CHECK_TRIES; /* tests lower it to reach the locked check */

struct tagged {
    uint64_t off, len;
    uint32_t object;
    const char *kind;
    uint64_t idx;
};

static int tagged_cmp(const void *a, const void *b)
{
    const struct tagged *x = a, *y = b;
    if (x->object != y->object)
        return x->object < y->object ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

static void say(void (*report)(void *, const char *), void *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(void (*report)(void *, const char *), void *ctx, const char *fmt, ...)
{
    if (!report)
        return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    report(ctx, line);
}

static int push_t(struct tagged **v, uint64_t *n, uint64_t *cap, uint32_t object, uint64_t off,
                  uint64_t len, const char *kind, uint64_t idx)
{
    struct tagged t = {off, len, object, kind, idx};
    return arr_push(v, n, cap, sizeof t, &t);
}

/* Checks a dataset's states: a word per tier, each naming a copy inside its
 * tier's data area; one copy at least. */
static int check_states(cxlp_pool *p, const struct cat_ds *d, uint64_t gen)
{
    struct attach *a = p->a;
    if (!d->d.n_shards)
        return 0;
    const struct pool_shent *tab = (const struct pool_shent *)(attach_base(a) + d->table.off);
    const uint64_t *st = attach_states(a, d->states.off);
    const uint32_t stride = attach_stride(a);
    for (uint64_t k = 0; k < d->d.n_shards; k++) {
        int copies = 0;
        for (uint32_t t = 0; t < a->L.n_tiers; t++) {
            uint64_t w = at_load_acquire(&st[k * stride + 1 + t]); /* pairs with place.c */
            if (!loc_present(w))
                continue;
            copies++;
            uint32_t obj = a->L.tiers[t].object;
            uint64_t off = loc_off(w);
            if (off < a->L.obj[obj].data_off ||
                !range_ok(off - a->L.obj[obj].data_off, tab[k].len, a->L.obj[obj].data_len))
                return seterr(&p->obj, CXLP_ECORRUPT, "%s: catalog gen %llu: dataset '%s' shard "
                              "%llu: tier %u copy at %#llx+%llu outside its data area",
                              a->m.path, (unsigned long long)gen, d->d.info.name,
                              (unsigned long long)k, t, (unsigned long long)off,
                              (unsigned long long)tab[k].len);
        }
        if (!copies)
            return seterr(&p->obj, CXLP_ECORRUPT, "%s: catalog gen %llu: dataset '%s' shard %llu: "
                          "no copy in any tier", a->m.path, (unsigned long long)gen,
                          d->d.info.name, (unsigned long long)k);
        /* a dataset mirrored from a peer has its home there: its remote
         * tier's word (docs/remote.md) */
        int remote_home = 0;
        for (uint32_t t = 0; t < a->L.n_tiers; t++)
            if ((a->L.tiers[t].flags & TIER_REMOTE) &&
                loc_present(at_load_acquire(&st[k * stride + 1 + t])))
                remote_home = 1;
        if (a->L.home != POOL_NO_HOME && !remote_home &&
            !loc_present(at_load_acquire(&st[k * stride + 1 + a->L.home])))
            return seterr(&p->obj, CXLP_ECORRUPT, "%s: catalog gen %llu: dataset '%s' shard %llu: "
                          "no copy in the home tier %u", a->m.path, (unsigned long long)gen,
                          d->d.info.name, (unsigned long long)k, a->L.home);
    }
    return 0;
}

/* The report lines of one try, given to the caller once the try counts. */
struct lines {
    char *buf;
    size_t len, cap;
};

static void keep_line(void *ctx, const char *line)
{
    struct lines *l = ctx;
    size_t n = strlen(line) + 1;
    if (l->len + n > l->cap) {
        size_t cap = MAX(l->cap * 2, l->len + n + 4096);
        char *b = realloc(l->buf, cap);
        if (!b)
            return; /* a line lost from the report, not from the check */
        l->buf = b;
        l->cap = cap;
    }
    memcpy(l->buf + l->len, line, n);
    l->len += n;
}

static int check_catalog(cxlp_pool *p, void (*report)(void *ctx, const char *line), void *ctx);

/* The check once more, holding the writer lock: no copy moves meanwhile. */
static int check_locked(cxlp_pool *p, void (*report)(void *ctx, const char *line), void *ctx,
                        int tries)
{
    struct wlock lk;
    int rc = host_lock(p->a, &lk, &p->obj);
    if (rc)
        return rc;
    say(report, ctx, "no quiet window in %d tries: checked holding the writer lock", tries);
    rc = check_catalog(p, report, ctx);
    host_unlock(p->a, &lk);
    return rc;
}

int pool_check(cxlp_pool *p, void (*report)(void *ctx, const char *line), void *ctx)
{
    if (!p || p->obj.magic != OBJ_MAGIC)
        return seterr(NULL, CXLP_EARG, "pool_check: not a pool handle");
    struct attach *a = p->a;
    struct obj *o = &p->obj;
    struct pool_layout L;
    int rc = hdr_validate(a->hdr, a->m.size, &L, o, a->m.path);
    if (rc)
        return rc;
    if (memcmp(&L, &a->L, sizeof L) != 0)
        return seterr(o, CXLP_ECORRUPT, "%s: header geometry changed since open", a->m.path);
    say(report, ctx, "header: ok (size %llu, data %#llx+%llu, %llu lease slots, catalog 2 x %llu, "
        "%u tiers)", (unsigned long long)L.size, (unsigned long long)L.obj[0].data_off,
        (unsigned long long)L.obj[0].data_len, (unsigned long long)L.lease_slots,
        (unsigned long long)L.cat_bytes, L.n_tiers);
    for (uint32_t t = 0; t < L.n_tiers; t++)
        say(report, ctx, "tier %u: %s on object %u (%s), %llu bytes%s", t,
            cxlp_tier_name((int)L.tiers[t].kind), L.tiers[t].object,
            attach_media(a, L.tiers[t].object)->path, (unsigned long long)L.tiers[t].capacity,
            L.home == t ? ", home" : "");

    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int tries = 1;; tries++) {
        struct lines l = {0};
        uint64_t w0 = host_load(a, &a->hdr->wlock), g0 = host_load(a, &a->hdr->gen);
        rc = check_catalog(p, report ? keep_line : NULL, &l);
        uint64_t w1 = host_load(a, &a->hdr->wlock), g1 = host_load(a, &a->hdr->gen);
        int quiet = w0 == 0 && w1 == 0 && g0 == g1;
        clock_gettime(CLOCK_MONOTONIC, &t);
        int last = tries >= pool_check_tries || t.tv_sec - t0.tv_sec >= CHECK_TRY_S;
        int suspect = rc && rc != -ENOMEM && !quiet; /* found while writers were busy */
        if (last && suspect && p->writable && !a->wlock_word) {
            /* no quiet window came: make one */
            free(l.buf);
            return check_locked(p, report, ctx, tries);
        }
        if (rc == 0 || rc == -ENOMEM || quiet || last) {
            for (size_t at = 0; at < l.len; at += strlen(l.buf + at) + 1)
                report(ctx, l.buf + at);
            free(l.buf);
            if (suspect)
                say(report, ctx, "found in %d tries while writers were busy (no quiet window); "
                    "a check from a writable handle takes the writer lock", tries);
            return rc;
        }
        free(l.buf);
        nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
    }
}

/* The catalog, the states and the extent map, once. */
static int check_catalog(cxlp_pool *p, void (*report)(void *ctx, const char *line), void *ctx)
{
    struct attach *a = p->a;
    struct obj *o = &p->obj;
    const struct pool_layout L = a->L; /* pool_check: the header's, validated */
    int rc;
    struct cat c;
    uint64_t gen;
    rc = cat_snapshot(a, &c, 0, &gen, o);
    if (rc)
        return rc;
    say(report, ctx, "catalog gen %llu: ok (%llu datasets, %llu free, %llu reserved, %llu deferred)",
        (unsigned long long)gen, (unsigned long long)c.n_ds, (unsigned long long)c.n_fr,
        (unsigned long long)c.n_resv, (unsigned long long)c.n_def);
    struct cat old;
    struct obj tmp;
    obj_init(&tmp);
    if (gen > 1 && cat_read_slot(a, gen - 1, &old, &tmp) == 0) {
        say(report, ctx, "catalog slot %llu: gen %llu, ok", (unsigned long long)((gen - 1) & 1),
            (unsigned long long)old.gen);
        cat_free(&old);
    } else if (gen > 1) {
        say(report, ctx, "catalog slot %llu: not a complete catalog (%s); unused",
            (unsigned long long)((gen - 1) & 1), tmp.err);
    }

    struct tagged *v = NULL;
    uint64_t n = 0, cap = 0;
    struct oext *e = NULL;
    uint64_t ne = 0, ce = 0;
    rc = 0;
    for (uint64_t i = 0; i < c.n_ds && rc == 0; i++) {
        const struct cat_ds *d = &c.ds[i];
        for (uint64_t k = i + 1; k < c.n_ds; k++)
            if (strcmp(d->d.info.name, c.ds[k].d.info.name) == 0) {
                rc = seterr(o, CXLP_ECORRUPT, "%s: catalog gen %llu: dataset '%s' listed twice",
                            a->m.path, (unsigned long long)gen, d->d.info.name);
                goto out;
            }
        if ((rc = check_states(p, d, gen)))
            goto out;
        ne = 0;
        rc = ds_extents(a, &c, i, &e, &ne, &ce);
        if (rc) {
            rc = seterr(o, rc == -ENOMEM ? rc : CXLP_ECORRUPT, "%s: dataset '%s': %s", a->m.path,
                        d->d.info.name, rc == -ENOMEM ? "out of memory" : "a copy outside its tier");
            goto out;
        }
        /* a dataset's own extents may touch (docs beside a shard); overlap
         * with another dataset or the free list is the error */
        oext_merge(e, &ne);
        for (uint64_t k = 0; k < ne && rc == 0; k++)
            if (push_t(&v, &n, &cap, e[k].object, e[k].off, e[k].len, d->d.info.name, i))
                rc = seterr(o, -ENOMEM, "pool_check: out of memory");
        int64_t ui = cat_find_units(&c, d->states.off);
        if (ui < 0)
            say(report, ctx, "dataset '%s': %u shards, version %llu", d->d.info.name,
                d->d.n_shards, (unsigned long long)d->d.info.version);
        else
            say(report, ctx, "dataset '%s': %u shards, version %llu; %llu staging units of %llu "
                "records", d->d.info.name, d->d.n_shards, (unsigned long long)d->d.info.version,
                (unsigned long long)c.units[ui].n_units, (unsigned long long)c.units[ui].per_unit);
    }
    for (uint64_t i = 0; i < c.n_fr && rc == 0; i++)
        if (push_t(&v, &n, &cap, c.fr[i].object, c.fr[i].off, c.fr[i].len, "free extent", i))
            rc = seterr(o, -ENOMEM, "pool_check: out of memory");
    /* a reservation whose word names it is that copy (a placement between
     * its word and its flip, or a dead owner's, adopted at the next
     * reclaim); a deferred copy whose word still names it is still that
     * copy (a drop between its flip and its word, cancelled likewise):
     * counted once, as the copy */
    for (uint64_t i = 0; i < c.n_resv && rc == 0; i++)
        if (!(c.resv[i].target_states && word_names(a, &c, c.resv[i].target_states,
                                                    c.resv[i].target_shard, c.resv[i].tier,
                                                    c.resv[i].off)) &&
            push_t(&v, &n, &cap, c.resv[i].object, c.resv[i].off, c.resv[i].len, "reservation", i))
            rc = seterr(o, -ENOMEM, "pool_check: out of memory");
    for (uint64_t i = 0; i < c.n_def && rc == 0; i++) {
        const struct cat_def *d = &c.def[i];
        if (d->kind == DEF_EXTENT && d->target_states &&
            word_names(a, &c, d->target_states, d->target_shard, d->tier, d->off))
            continue;
        if (d->kind == DEF_EXTENT) {
            if (push_t(&v, &n, &cap, d->object, d->off, d->len, "deferred free", i))
                rc = seterr(o, -ENOMEM, "pool_check: out of memory");
            continue;
        }
        if (d->kind == DEF_UCOPIES) {
            /* a removed dataset's copies of units: walked like the reclaim will */
            ne = 0;
            rc = units_extents(a, d->off, d->len, &e, &ne, &ce);
            if (rc) {
                rc = seterr(o, rc == -ENOMEM ? rc : CXLP_ECORRUPT, "%s: deferred copies of units "
                            "%llu: %s", a->m.path, (unsigned long long)i,
                            rc == -ENOMEM ? "out of memory"
                                          : "words outside object 0 or a copy outside its tier");
                goto out;
            }
            for (uint64_t k = 0; k < ne && rc == 0; k++)
                if (push_t(&v, &n, &cap, e[k].object, e[k].off, e[k].len, "deferred copy of a "
                           "unit", i))
                    rc = seterr(o, -ENOMEM, "pool_check: out of memory");
            continue;
        }
        /* a removed dataset's copies: walked like the reclaim will */
        struct cat one = {.n_ds = 1};
        struct cat_ds rec;
        memset(&rec, 0, sizeof rec);
        rec.d.n_shards = (uint32_t)MIN(d->len, UINT32_MAX);
        rec.table = (struct pool_extent){d->target_shard, 0}; /* deferred on its own */
        rec.states = (struct pool_extent){d->off, 0};
        one.ds = &rec;
        uint64_t tb, sb;
        if (d->len > UINT32_MAX || mul_overflow_u64(d->len, sizeof(struct pool_shent), &tb) ||
            mul_overflow_u64(d->len, attach_stride(a) * 8ull, &sb) ||
            d->target_shard < L.obj[0].data_off ||
            !range_ok(d->target_shard - L.obj[0].data_off, tb, L.obj[0].data_len) ||
            !range_ok(d->off - L.obj[0].data_off, sb, L.obj[0].data_len)) {
            rc = seterr(o, CXLP_ECORRUPT, "%s: deferred copies %llu: table or states outside "
                        "the data area", a->m.path, (unsigned long long)i);
            goto out;
        }
        ne = 0;
        rc = ds_extents(a, &one, 0, &e, &ne, &ce);
        if (rc) {
            rc = seterr(o, rc == -ENOMEM ? rc : CXLP_ECORRUPT, "%s: deferred copies %llu: %s",
                        a->m.path, (unsigned long long)i,
                        rc == -ENOMEM ? "out of memory" : "a copy outside its tier");
            goto out;
        }
        for (uint64_t k = 0; k < ne && rc == 0; k++)
            if (push_t(&v, &n, &cap, e[k].object, e[k].off, e[k].len, "deferred copy", i))
                rc = seterr(o, -ENOMEM, "pool_check: out of memory");
    }
    if (rc)
        goto out;
    qsort(v, n, sizeof *v, tagged_cmp);
    uint64_t sum[POOL_MAX_OBJECTS] = {0};
    for (uint64_t i = 0; i < n; i++) {
        uint32_t ob = v[i].object;
        if (ob >= L.n_objects || v[i].off < L.obj[ob].data_off ||
            !range_ok(v[i].off - L.obj[ob].data_off, v[i].len, L.obj[ob].data_len)) {
            rc = seterr(o, CXLP_ECORRUPT, "%s: %s %llu: extent %#llx+%llu outside object %u's "
                        "data area", a->m.path, v[i].kind, (unsigned long long)v[i].idx,
                        (unsigned long long)v[i].off, (unsigned long long)v[i].len, ob);
            goto out;
        }
        if (i > 0 && v[i - 1].object == ob && v[i - 1].off + v[i - 1].len > v[i].off) {
            rc = seterr(o, CXLP_ECORRUPT,
                        "%s: object %u: extent %#llx+%llu (%s %llu) overlaps %#llx+%llu (%s %llu)",
                        a->m.path, ob, (unsigned long long)v[i].off, (unsigned long long)v[i].len,
                        v[i].kind, (unsigned long long)v[i].idx,
                        (unsigned long long)v[i - 1].off, (unsigned long long)v[i - 1].len,
                        v[i - 1].kind, (unsigned long long)v[i - 1].idx);
            goto out;
        }
        sum[ob] += v[i].len;
    }
    for (uint32_t ob = 0; ob < L.n_objects; ob++) {
        if (sum[ob] != L.obj[ob].data_len) {
            rc = seterr(o, CXLP_ECORRUPT,
                        "%s: object %u: extents account for %llu bytes of a %llu-byte data area "
                        "(%llu bytes lost)", a->m.path, ob, (unsigned long long)sum[ob],
                        (unsigned long long)L.obj[ob].data_len,
                        (unsigned long long)(L.obj[ob].data_len - sum[ob]));
            goto out;
        }
        say(report, ctx, "extent map of object %u: ok (the %llu-byte data area is accounted for)",
            ob, (unsigned long long)L.obj[ob].data_len);
    }
    uint32_t live;
    uint64_t min_gen, min_epoch;
    lease_scan(a, 0, &min_gen, &min_epoch, &live);
    if (min_gen == UINT64_MAX)
        say(report, ctx, "leases: %u live of %llu, nothing pinned", live,
            (unsigned long long)L.lease_slots);
    else
        say(report, ctx, "leases: %u live of %llu, oldest pinned gen %llu", live,
            (unsigned long long)L.lease_slots, (unsigned long long)min_gen);
out:
    free(v);
    free(e);
    cat_free(&c);
    return rc;
}
