/*
 * check.c - pool_check: the full structural check of a pool.
 *
 * Beyond what open and every snapshot already validate (header, catalog
 * checksum, bounds of each record), it proves the extent map:
 *   the extents of all datasets (footprints), free list, reservations and
 *   deferred frees are pairwise disjoint, and
 *   sum(free) + sum(used) + sum(reserved) + sum(deferred) = data_len.
 * It also checks that dataset names are unique, that shard ranges of
 * datasets do not share shard records, and reports the lease table.
 * The inactive catalog slot may legitimately hold garbage (a writer killed
 * while writing it), so it is reported, never an error.
 *
 * Cost: O(n log n) in the number of extents; it runs on a private snapshot
 * and takes no lock.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool_internal.h"

struct tagged {
    uint64_t off, len;
    const char *kind;
    uint64_t idx;
};

static int tagged_cmp(const void *a, const void *b)
{
    const struct tagged *x = a, *y = b;
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

static int push_t(struct tagged **v, uint64_t *n, uint64_t *cap, uint64_t off, uint64_t len,
                  const char *kind, uint64_t idx)
{
    struct tagged t = {off, len, kind, idx};
    return arr_push(v, n, cap, sizeof t, &t);
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
    say(report, ctx, "header: ok (size %llu, data %#llx+%llu, %llu lease slots, catalog 2 x %llu)",
        (unsigned long long)L.size, (unsigned long long)L.data_off,
        (unsigned long long)L.data_len, (unsigned long long)L.lease_slots,
        (unsigned long long)L.cat_bytes);

    struct cat c;
    uint64_t gen;
    rc = cat_snapshot(a, &c, 0, &gen, o);
    if (rc)
        return rc;
    say(report, ctx, "catalog gen %llu: ok (%llu datasets, %llu shards, %llu free, %llu reserved, %llu deferred)",
        (unsigned long long)gen, (unsigned long long)c.n_ds, (unsigned long long)c.n_sh,
        (unsigned long long)c.n_fr, (unsigned long long)c.n_resv, (unsigned long long)c.n_def);
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
    rc = 0;
    for (uint64_t i = 0; i < c.n_ds && rc == 0; i++) {
        const struct cat_ds *d = &c.ds[i];
        for (uint64_t k = i + 1; k < c.n_ds; k++)
            if (strcmp(d->d.info.name, c.ds[k].d.info.name) == 0) {
                rc = seterr(o, CXLP_ECORRUPT, "%s: catalog gen %llu: dataset '%s' listed twice",
                            a->m.path, (unsigned long long)gen, d->d.info.name);
                goto out;
            }
        for (uint64_t k = 0; k < c.n_ds; k++) {
            const struct cat_ds *e = &c.ds[k];
            if (k != i && d->d.n_shards && e->d.n_shards && d->first_shard < e->first_shard + e->d.n_shards &&
                e->first_shard < d->first_shard + d->d.n_shards) {
                rc = seterr(o, CXLP_ECORRUPT, "%s: datasets '%s' and '%s' share shard records",
                            a->m.path, d->d.info.name, e->d.info.name);
                goto out;
            }
        }
        struct pool_extent *fp;
        uint64_t nfp;
        if (ds_footprint(&c, i, &fp, &nfp)) {
            rc = seterr(o, -ENOMEM, "pool_check: out of memory");
            goto out;
        }
        for (uint64_t k = 0; k < nfp && rc == 0; k++)
            if (push_t(&v, &n, &cap, fp[k].off, fp[k].len, d->d.info.name, i))
                rc = seterr(o, -ENOMEM, "pool_check: out of memory");
        free(fp);
        say(report, ctx, "dataset '%s': %u shards, version %llu", d->d.info.name, d->d.n_shards,
            (unsigned long long)d->d.info.version);
    }
    for (uint64_t i = 0; i < c.n_fr && rc == 0; i++)
        if (push_t(&v, &n, &cap, c.fr[i].off, c.fr[i].len, "free extent", i))
            rc = seterr(o, -ENOMEM, "pool_check: out of memory");
    for (uint64_t i = 0; i < c.n_resv && rc == 0; i++)
        if (push_t(&v, &n, &cap, c.resv[i].off, c.resv[i].len, "reservation", i))
            rc = seterr(o, -ENOMEM, "pool_check: out of memory");
    for (uint64_t i = 0; i < c.n_def && rc == 0; i++)
        if (push_t(&v, &n, &cap, c.def[i].off, c.def[i].len, "deferred free", i))
            rc = seterr(o, -ENOMEM, "pool_check: out of memory");
    if (rc)
        goto out;
    qsort(v, n, sizeof *v, tagged_cmp);
    uint64_t sum = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (v[i].off < L.data_off || !range_ok(v[i].off - L.data_off, v[i].len, L.data_len)) {
            rc = seterr(o, CXLP_ECORRUPT, "%s: %s %llu: extent %#llx+%llu outside the data area",
                        a->m.path, v[i].kind, (unsigned long long)v[i].idx,
                        (unsigned long long)v[i].off, (unsigned long long)v[i].len);
            goto out;
        }
        if (i > 0 && v[i - 1].off + v[i - 1].len > v[i].off) {
            rc = seterr(o, CXLP_ECORRUPT,
                        "%s: extent %#llx+%llu (%s %llu) overlaps %#llx+%llu (%s %llu)",
                        a->m.path, (unsigned long long)v[i].off, (unsigned long long)v[i].len,
                        v[i].kind, (unsigned long long)v[i].idx,
                        (unsigned long long)v[i - 1].off, (unsigned long long)v[i - 1].len,
                        v[i - 1].kind, (unsigned long long)v[i - 1].idx);
            goto out;
        }
        sum += v[i].len;
    }
    if (sum != L.data_len) {
        rc = seterr(o, CXLP_ECORRUPT,
                    "%s: extents account for %llu bytes of a %llu-byte data area "
                    "(%llu bytes lost)", a->m.path, (unsigned long long)sum,
                    (unsigned long long)L.data_len, (unsigned long long)(L.data_len - sum));
        goto out;
    }
    say(report, ctx, "extent map: ok (%llu extents cover the %llu-byte data area)",
        (unsigned long long)n, (unsigned long long)L.data_len);
    uint32_t live;
    uint64_t min_gen;
    lease_scan(a, 0, &min_gen, &live);
    if (min_gen == UINT64_MAX)
        say(report, ctx, "leases: %u live of %llu, nothing pinned", live,
            (unsigned long long)L.lease_slots);
    else
        say(report, ctx, "leases: %u live of %llu, oldest pinned gen %llu", live,
            (unsigned long long)L.lease_slots, (unsigned long long)min_gen);
out:
    free(v);
    cat_free(&c);
    return rc;
}
