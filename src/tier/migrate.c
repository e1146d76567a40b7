/*
 * migrate.c - cxlp_migrate: a dataset's shards moved to one tier while
 * readers keep reading.
 *
 * Migrating to a memory tier makes each shard's copy there (a kept copy,
 * not evictable by placement policies) and drops its copies in the other
 * tiers, except the home's, and every copy of its staging units (store/
 * unit.c; a whole copy holds what they held): every shard stays readable at every instant,
 * from the old copy until the new one's word is published, from the new
 * one after. Migrating to the home tier drops every other copy. Shards go
 * one at a time, each a crash-safe step of its own (store/fetch.c,
 * pool/place.c): a migration killed at any instant leaves every shard with
 * its old copies, its new one, or both, and no space held by nobody.
 *
 * Threads work on disjoint shards (an atomic cursor): copies from an nvme
 * tier are reads with queue depth per thread, from a memory tier memcpy.
 *
 * A target tier without room: while dropped copies that readers still pin
 * hold space there, the copy waits for them (they go as the readers'
 * batches end; up to 30 s); then cache copies of other datasets there
 * (staged by loaders, evictable by definition) are dropped. (This
 * dataset's own cache copies become its kept copies: dropping them gains
 * nothing.) Only a tier full of what stays (kept copies, pins held past
 * the wait) fails: CXLP_EFULL.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/atomic.h"
#include "pool/pool_format.h"
#include "store/fetch.h"
#include "store/remote_tier.h"
#include "store/store.h"
#include "store/unit.h"
#include "tier/tier.h"

#define ROOM_WAIT_NS (UINT64_C(30) * 1000000000u)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct mig {
    cxlp_store *s;
    uint32_t tier, drop;
    unsigned flags;
    const struct cxlp_migrate_opts *o;
    uint64_t next, done;       /* atomic: shard cursor, shards finished */
    pthread_mutex_t mu;        /* first error; progress callback */
    int rc;
    char err[ERRMSG_MAX];
    struct cxlp_migrate_stat st;
};

/* Room in tier t (after a store_copy found none): waits a moment for
 * dropped copies that readers pin, or drops another dataset's cache copy.
 * 1: try again; 0: the tier is full for good. */
static int make_room(struct mig *m, uint32_t t, uint64_t t0)
{
    cxlp_pool *wp;
    uint64_t deferred = 0, bytes = 0;
    if (store_pool_rw(m->s, &wp) || pool_tier_deferred(wp, t, &deferred))
        return 0;
    if (deferred && now_ns() - t0 < ROOM_WAIT_NS) {
        struct timespec ts = {0, 2 * 1000000};
        nanosleep(&ts, NULL);
        return 1;
    }
    return pool_drop_one_cache(wp, t, m->s->ds.states_off, &bytes) == 0 && bytes;
}

/* Drops every copy of shard k's staging units (the dataset has units):
 * a whole copy in the target, or the home alone, serves their records. */
static int drop_units(struct mig *m, uint64_t k, uint64_t *dropped)
{
    const struct store_units *su = m->s->units;
    cxlp_pool *wp;
    int rc = store_pool_rw(m->s, &wp);
    for (uint64_t u = su->ufirst[k]; !rc && u < su->ufirst[k + 1]; u++) {
        uint64_t b = 0;
        rc = pool_copy_drop(wp, m->s->ds.states_off, POOL_UNIT_TARGET | u, m->drop | (1u << m->tier),
                            0, &b);
        *dropped += b;
    }
    if (rc)
        seterr(NULL, rc, "dataset %s shard %" PRIu64 ": dropping copies of its units: %s",
               m->s->name, k, cxlp_errmsg(NULL));
    return rc;
}

static void *worker(void *arg)
{
    struct mig *m = arg;
    struct store_io io = {0};
    for (;;) {
        uint64_t k = at_fetch_add_acq_rel(&m->next, 1);
        if (k >= m->s->n_shards || at_load_acquire(&m->rc))
            break;
        struct copy_stat cs = {0};
        int rc = 0;
        uint64_t dropped = 0;
        if (m->s->units)
            rc = drop_units(m, k, &dropped);
        if (rc) {
            /* said */
        } else if (m->flags == 0) {
            /* to the home tier: drop the rest */
            cxlp_pool *wp;
            rc = store_pool_rw(m->s, &wp);
            uint64_t b = 0;
            if (!rc)
                rc = pool_copy_drop(wp, m->s->ds.states_off, k, m->drop, 0, &b);
            dropped += b;
            if (rc)
                seterr(NULL, rc, "dataset %s shard %" PRIu64 ": %s", m->s->name, k,
                       cxlp_errmsg(NULL));
        } else {
            uint64_t t0 = now_ns();
            while ((rc = store_copy(m->s, k, m->tier, m->flags, m->drop, &io, &cs)) == CXLP_EFULL) {
                char msg[ERRMSG_MAX];
                strlcpy0(msg, cxlp_errmsg(NULL), sizeof msg);
                if (!make_room(m, m->tier, t0)) {
                    seterr(NULL, rc, "%s", msg);
                    break;
                }
            }
        }
        pthread_mutex_lock(&m->mu);
        if (rc == CXLP_EEXIST) {
            m->st.already++;
            m->st.bytes_dropped += cs.dropped + dropped;
            rc = 0;
        } else if (!rc) {
            m->st.copied += cs.bytes ? 1 : 0;
            m->st.bytes_copied += cs.bytes;
            m->st.direct_bytes += cs.direct_bytes;
            m->st.bytes_dropped += dropped + cs.dropped;
        }
        if (rc && !m->rc) {
            strlcpy0(m->err, cxlp_errmsg(NULL), sizeof m->err);
            at_store_release(&m->rc, rc);
        }
        uint64_t d = ++m->done;
        if (m->o && m->o->progress && !rc)
            m->o->progress(m->o->progress_ctx, d, m->s->n_shards);
        pthread_mutex_unlock(&m->mu);
    }
    store_io_close(&io);
    return NULL;
}

/* tier as a name ("dram", "cxl", "nvme": the first tier of that kind) or an
 * index; -1 with a message. */
int tier_lookup(struct attach *a, const char *tier)
{
    uint32_t n = attach_n_tiers(a);
    char *end;
    unsigned long v = strtoul(tier, &end, 10);
    if (*tier && !*end)
        return v < n ? (int)v : -1;
    int kind = cxlp_tier_parse(tier);
    for (uint32_t t = 0; kind >= 0 && t < n; t++)
        if (attach_tier(a, t)->kind == kind)
            return (int)t;
    return -1;
}

int cxlp_migrate(cxlp_pool *p, const char *name, const char *tier,
                 const struct cxlp_migrate_opts *o, struct cxlp_migrate_stat *out)
{
    if (!p || !name || !tier)
        return seterr(NULL, CXLP_EARG, "cxlp_migrate: %s is NULL",
                      !p ? "pool" : !name ? "name" : "tier");
    struct attach *a = pool_attach(p);
    int t = tier_lookup(a, tier);
    if (t < 0)
        return seterr(pool_obj(p), CXLP_EARG, "cxlp_migrate: tier '%s': the pool's tiers are "
                      "0..%u (dram, cxl, nvme by kind)", tier, attach_n_tiers(a) - 1);
    if (attach_n_tiers(a) < 2)
        return seterr(pool_obj(p), CXLP_EARG, "cxlp_migrate: the pool has one tier: nothing "
                      "to migrate between");
    const struct attach_tier *at = attach_tier(a, (uint32_t)t);
    uint32_t threads = o && o->threads ? o->threads : 1;
    if (threads > 64)
        return seterr(pool_obj(p), CXLP_EARG, "cxlp_migrate: threads %u is more than 64", threads);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct mig m;
    memset(&m, 0, sizeof m);
    int rc = cxlp_store_open(p, name, &m.s);
    if (rc)
        return rc;
    /* the dataset's home: the pool's, or the remote tier of a mirror */
    uint32_t home = store_home(m.s);
    if ((at->flags & TIER_STAGED) && (uint32_t)t != home) {
        cxlp_store_close(m.s);
        return seterr(pool_obj(p), CXLP_EUNSUPPORTED, "cxlp_migrate: tier %d is a staged tier "
                      "(%s) that is not the home of %s: copies go to memory tiers or back home",
                      t, cxlp_tier_name(at->kind), name);
    }
    (void)store_units_use(m.s, 0, 0); /* its units' copies go too, if it has units */
    m.tier = (uint32_t)t;
    m.o = o;
    m.drop = ((1u << attach_n_tiers(a)) - 1) & ~(1u << t);
    m.flags = (uint32_t)t == home ? 0 : FETCH_KEEP | FETCH_WAIT;
    pthread_mutex_init(&m.mu, NULL);
    pthread_t th[64];
    uint32_t started = 0;
    for (; started < threads; started++)
        if (pthread_create(&th[started], NULL, worker, &m))
            break;
    if (started == 0)
        worker(&m);
    for (uint32_t i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    m.st.shards = m.s->n_shards;
    m.st.seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    rc = m.rc;
    cxlp_store_close(m.s);
    pthread_mutex_destroy(&m.mu);
    if (rc)
        return seterr(pool_obj(p), rc, "migrating %s to tier %d: %s", name, t, m.err);
    if (out)
        *out = m.st;
    return 0;
}
