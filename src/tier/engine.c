/*
 * engine.c - the staging engine: between a loader and a dataset of a pool
 * of tiers, it holds the ids of the next batches, copies the shards they
 * need into a memory tier before the gather threads get there, evicts by a
 * placement policy (policy.h), and makes every batch's shards resident and
 * pinned while it is gathered.
 *
 * Glossary
 *   item       what the engine stages, places and evicts: a shard, or for a
 *              dataset whose shards are larger than its staging budget calls
 *              for, a staging unit (a run of one shard's records, store/unit.c):
 *              the policies (policy.h) see items and call them shards
 *   position   index in this rank's id stream; pos = ids handed to the
 *              loader so far
 *   queue      ids read from the index source but not yet handed out: the
 *              window, up to horizon batches
 *   in flight  the ids handed out whose batches have not begun: the last
 *              pos - begun of them, and a batch more (gather threads begin
 *              batches in about the order they were planned, not exactly);
 *              their items count as needed now (next_use 0), never evicted
 *              by this engine; from batch_begin to batch_end the batch
 *              holds its items (busy). Counting from the batches that
 *              ended instead let a batch that ended early, ahead of an
 *              earlier one, hide the earlier one's items: they were
 *              evicted before it began and fetched again
 *   staging tier  the memory tier copies are made in
 *   cache copy a copy the engine (or any rank's engine, or a miss) made:
 *              evictable, counted in the budget; so is a copy kept there by
 *              a migration or by another loader's placement (it takes the
 *              room the budget is made of); the copies this engine's own
 *              placement keeps (hot_first, full_prefetch) are neither
 *   batch map  the shards of the batch a gather thread works on, resolved
 *              once under the location epoch pin (thread-local)
 *
 * Invariants
 *   used = sum of len over resident items <= budget, except by one item
 *          while a miss is fetched into a full budget (misses never wait
 *          for room that only the batch's own shards hold)
 *   a shard with next_use 0 (recent) is never evicted by this engine;
 *   a batch reads only through its map: a copy another process evicts
 *          meanwhile stays readable (the pin keeps its memory) until the
 *          batch ends
 *   one copier per shard and tier on the host (pool claims, place.c):
 *          an engine that finds another process copying waits for it
 *   a batch never fails for want of room: a shard that no memory tier can
 *          take (full of kept copies, or of dropped ones readers still pin)
 *          is read into the batch's own memory, verified, and freed at
 *          batch_end (a private read)
 *   where a private read would read a whole shard (format 3 or 4), the batch
 *          reads only the blocks of its records, each verified against
 *          its block sum, into its own sparse memory, freed at batch_end
 *          (a partial read; fetch.h)
 *
 * Threads: the loader's planning thread calls engine_next (under the
 * loader's lock); gather threads call batch_begin / batch_end; stagers
 * (tier_stagers threads) plan and copy. Everything shared is under mu;
 * copies and drops run outside it.
 *
 * Rejected: staging inside the gather threads only (a miss per shard, no
 * overlap of I/O and gathering: that is what the lru policy measures);
 * one engine per host in a daemon (a process to deploy and to keep alive;
 * the pool's claims and the registry give one copy per host without it);
 * resolving location words per record (a word load and a check per record;
 * the batch map resolves each shard once per batch).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic.h"
#include "media/media.h"
#include "pool/loc.h"
#include "pool/pool_format.h"
#include "store/fetch.h"
#include "store/store.h"
#include "store/unit.h"
#include "tier/policy.h"
#include "tier/registry.h"
#include "tier/sizing.h"
#include "tier/tier.h"

#define FULL_NS (UINT64_C(100) * 1000000u) /* how long a full tier is believed full */
#define MAX_STAGERS CXLP_MAX_STAGERS
#define PLAN_MAX 256u

struct tier_engine {
    cxlp_store *s;             /* borrowed: the loader's */
    cxlp_pool *wp;             /* the store's writable handle */
    struct attach *wa;         /* its attachment */
    const struct tier_policy_ops *ops;
    int policy;
    int units;                 /* the items are staging units, not shards */
    uint64_t *kshard;          /* units: each unit's shard */
    uint32_t tier;             /* staging tier */
    uint32_t rank;             /* its rank among the pool's memory tiers */
    uint64_t budget;
    uint64_t batch, horizon;   /* ids per batch; ids held ahead */
    uint64_t full_until;       /* atomic: until then (now_ns) a miss finds the
                                  tiers full and reads from the home at once:
                                  a batch that found no room spares the next
                                  ones its wait for room, item by item */
    int gone;                  /* atomic: the dataset was removed or replaced
                                  (cxlp_pool_rewrite) since the store opened:
                                  no copy can be placed for it, so nothing
                                  more is staged and a miss reads the home
                                  copy, which the store's lease keeps */
    int in_part;               /* tier_read_in_part: copies only into room
                                  (none evicted); a shard not in memory is
                                  read in part by its batch
                                  (cleared for a dataset whose shards have
                                  no block sums: under mu, an atomic store,
                                  as gather threads read it unlocked) */
    uint64_t sparse_rec;       /* bytes a partial read takes per record (its
                                  bytes rounded up to the block), for the
                                  sparse rule (engine_sparse); 0: no rule
                                  (no block sums, reading in part anyway,
                                  or a process that places no copies) */
    uint64_t payload_pm;       /* of a copy's bytes, the records' (per 1024) */
    uint64_t *states_rw;       /* the dataset's words, writable (heat) */
    cxlp_index_fn src;
    void *src_ctx;
    cxlp_index_fn nsrc;        /* the next pass's ids (planning only), or NULL */
    void *nsrc_ctx;

    pthread_mutex_t mu;
    pthread_cond_t cv_work;    /* stagers: the queue moved, or stop */
    pthread_cond_t cv_done;    /* a copy finished */
    uint64_t *q;               /* queue ring */
    size_t q_cap, q_head, q_len;
    size_t q_next;             /* the last q_next ids queued are the next pass's */
    uint64_t next_from;        /* the last plan's next uses above it are the next pass's */
    int src_end, src_rc, nsrc_end;
    uint64_t pos, begun;       /* ids handed out; ids whose batches began */
    uint64_t *recent;          /* ring of the last ids handed out */
    size_t recent_cap, recent_head, recent_n;

    uint64_t n;                /* shards */
    uint64_t *len, *next_use, *last_use, *heat;
    uint8_t *resident, *kept, *slow;
    uint8_t *mine;             /* kept by this engine's own placement */
    uint8_t *foreign;          /* resident, and kept by someone else */
    uint32_t *busy;            /* stagings in progress + batches holding it */
    uint8_t *staging;          /* a stage of it is in progress here */
    uint64_t *res_list;
    size_t n_res;
    uint64_t used;
    uint64_t copying;          /* bytes of the copies stage() is making */
    uint32_t *hcount;          /* per item: this rank's ids of it in view
                                  (the queue's first horizon of ids, and
                                  those in flight) at the last plan */
    uint8_t *others;           /* per item: other engines of the host whose
                                  need lists name it (registry_merge) */
    uint16_t *seen;            /* registry_merge's scratch */
    uint8_t *sparse;           /* per item: too sparse to stage (mark_sparse) */
    uint8_t *away;             /* n_shards bits: shards of another host's share
                                  (tier_away), never staged here; NULL: none */
    uint64_t *dense_until;     /* per item: judged dense by a plan: not sparse
                                  until pos passes this (a horizon later) */
    uint64_t *window, *wdist, *touched;
    size_t n_window, n_touched, cap_touched;
    uint64_t plans;            /* planning rounds (residency rescans) */
    uint64_t cand[PLAN_MAX];   /* what the policy wants, in order */
    size_t n_cand, cand_i;     /* candidates; the next to take */
    uint64_t plan_pos, replan; /* pos at the last plan; ids between plans */
    int replan_now;

    uint8_t *reg_area;
    uint64_t reg_bytes;
    int reg;

    struct cxlp_loader_stats st;
    int stop;
    uint32_t n_stagers;
    pthread_t th[MAX_STAGERS];
};

/* Stagers unless tier_stagers says: as many copies at a time as keep two
 * readers' queues of reads in flight (2 x MEDIA_IO_DEPTH x MEDIA_IO_CHUNK,
 * 16 MiB), 2 to 4. A copy of a shard of 8 MiB or more fills one reader's
 * queue, and two overlap one's reserve, check and publish with the
 * other's read; smaller copies need more at a time. Measured on this
 * project's VM (docs/benchmarks.md, "Stagers"): with 8 MiB shards 2 were
 * 7-11% faster than 4 (more streams of random reads), with 1 MiB shards 4
 * were 3-5% faster than 2. */
static uint32_t def_stagers(const cxlp_store *s, uint64_t unit_bytes)
{
    uint64_t q = (uint64_t)MEDIA_IO_DEPTH * MEDIA_IO_CHUNK;
    uint64_t per = unit_bytes ? unit_bytes : s->n_shards ? s->ds.info.stored_bytes / s->n_shards : q;
    per = MIN(MAX(per, 1), q);
    return (uint32_t)MIN(MAX(2 * q / per, 2), 4);
}

/* ------------------------------------------------------------ items */

/* The item of record id. */
static inline uint64_t item_of(const struct tier_engine *e, uint64_t id)
{
    return e->units ? store_unit_of(e->s, id) : store_shard_of(e->s, id);
}

/* Item i's shard. */
static inline uint64_t item_shard(const struct tier_engine *e, uint64_t i)
{
    return e->units ? e->kshard[i] : i;
}

/* Item i's location word in tier t. */
static inline uint64_t item_word(const struct tier_engine *e, uint64_t i, uint32_t t)
{
    return e->units ? store_unit_word(e->s, i, t) : store_word(e->s, i, t);
}

/* Item i as the pool's placement functions name it. */
static inline uint64_t item_target(const struct tier_engine *e, uint64_t i)
{
    return e->units ? POOL_UNIT_TARGET | i : i;
}

/* Makes item i's copy in the staging tier (or, placing, tier t) as
 * store_copy and store_unit_copy do. */
static int item_copy(struct tier_engine *e, uint64_t i, uint32_t t, unsigned flags,
                     struct store_io *io, struct copy_stat *cs)
{
    return e->units ? store_unit_copy(e->s, i, t, flags, 0, io, cs)
                    : store_copy(e->s, i, t, flags, 0, io, cs);
}

/* ------------------------------------------------------------ residency */

static void set_resident(struct tier_engine *e, uint64_t k, int r)
{
    if (e->resident[k] == r)
        return;
    e->resident[k] = (uint8_t)r;
    if (r) {
        e->res_list[e->n_res++] = k;
        e->used += e->len[k];
        return;
    }
    for (size_t i = 0; i < e->n_res; i++)
        if (e->res_list[i] == k) {
            e->res_list[i] = e->res_list[--e->n_res];
            break;
        }
    e->used -= e->len[k];
}

/* Reads item k's words: a copy in the staging tier (resident: a cache
 * copy, or one kept there by someone else), a copy this engine placed
 * there or one kept in a faster memory tier (kept: nothing to stage), or
 * only a copy in a slower memory tier. A unit whose shard has a whole copy
 * in a memory tier no slower than the staging tier is kept too (its
 * records are read there). */
static void refresh(struct tier_engine *e, uint64_t k)
{
    const cxlp_store *s = e->s;
    uint64_t w = item_word(e, k, e->tier);
    int here = loc_present(w), cache = here && (w & LOC_CACHE);
    int res = here && (cache || !e->mine[k]), keep = here && !res;
    int faster = 0, slower = 0;
    for (uint32_t i = 0; i < s->n_mem; i++) {
        uint32_t t = s->mem[i];
        uint64_t x = item_word(e, k, t);
        if (e->units && loc_present(store_word(s, e->kshard[k], t))) {
            if (i <= e->rank)
                keep = 1; /* its shard whole in memory as fast: read there */
            else
                slower = 1;
        }
        if (t == e->tier || !loc_present(x))
            continue;
        if (!(x & LOC_CACHE) && i < e->rank)
            keep = 1; /* kept in a faster tier: nothing to stage */
        if (i < e->rank)
            faster = 1;
        else
            slower = 1;
    }
    if (res && keep)
        res = 0; /* a copy here we need not hold: left alone */
    if (!res && e->units && !e->resident[k])
        e->len[k] = store_unit_bytes(s, k); /* exact once a copy was made */
    set_resident(e, k, res);
    e->foreign[k] = (uint8_t)(res && !cache);
    e->kept[k] = (uint8_t)keep;
    e->slow[k] = (uint8_t)(!res && !keep && !faster && slower);
}

static void rescan(struct tier_engine *e)
{
    for (uint64_t k = 0; k < e->n; k++)
        refresh(e, k);
    if (e->states_rw)
        for (uint64_t k = 0; k < e->n; k++)
            e->heat[k] = at_load_relaxed(&e->states_rw[item_shard(e, k) * e->s->stride]);
}

/* 1 when a memory tier holds a copy of item k now (of a unit: of the unit
 * or of its whole shard). */
static int readable(const struct tier_engine *e, uint64_t k)
{
    if (e->s->unpinned)
        return 0; /* no copy is ours to read */
    for (uint32_t i = 0; i < e->s->n_mem; i++)
        if (loc_present(item_word(e, k, e->s->mem[i])) ||
            (e->units && loc_present(store_word(e->s, e->kshard[k], e->s->mem[i]))))
            return 1;
    return 0;
}

/* ------------------------------------------------------------ the future */

/* Reads up to the queue's free room from fn into its tail (under mu); the
 * count read, 0 at the source's end, or a negative code (also for an id
 * past the dataset, after which nothing read is kept). */
static ssize_t pull(struct tier_engine *e, cxlp_index_fn fn, void *ctx)
{
    size_t room = e->q_cap - e->q_len, tail = (e->q_head + e->q_len) % e->q_cap;
    size_t chunk = MIN(room, e->q_cap - tail), got = 0;
    int rc = fn(ctx, e->q + tail, chunk, &got);
    if (rc)
        return rc;
    for (size_t i = 0; i < got; i++)
        if (e->q[tail + i] >= e->s->count)
            return seterr(NULL, CXLP_ERANGE, "index source gave id %" PRIu64 " past the "
                          "dataset's %" PRIu64 " records", e->q[tail + i], e->s->count);
    e->q_len += got;
    return (ssize_t)got;
}

/* Pulls ids from the index source until the queue holds the horizon or the
 * source ends, then from the next pass's source (under mu): those are
 * planned for (their shards staged when the room is there, after this
 * pass's) and never handed out. An error of the next pass's source ends
 * its ids, not this pass. */
static void refill(struct tier_engine *e)
{
    while (!e->src_end && e->q_len < e->horizon) {
        ssize_t got = pull(e, e->src, e->src_ctx);
        if (got <= 0) {
            e->src_rc = (int)got;
            e->src_end = 1;
        }
    }
    while (e->src_end && !e->src_rc && e->nsrc && !e->nsrc_end && e->q_len < e->horizon) {
        ssize_t got = pull(e, e->nsrc, e->nsrc_ctx);
        if (got <= 0)
            e->nsrc_end = 1;
        else
            e->q_next += (size_t)got;
    }
}

/* The dataset in the registry: engines staging its units publish unit
 * numbers, engines staging whole shards shard numbers; each listens only
 * to its own kind (states_off is a multiple of 8: the low bit is free). */
static uint64_t reg_key(const struct tier_engine *e)
{
    return e->s->ds.states_off | (uint64_t)(e->units != 0);
}

/* Item k is needed d positions from now; counted among the ids in view
 * when count is set. */
static void touch(struct tier_engine *e, uint64_t k, uint64_t d, int count)
{
    if (e->next_use[k] == TIER_NEVER) {
        if (e->n_touched == e->cap_touched)
            return; /* cannot undo it later: leave it unknown */
        e->touched[e->n_touched++] = k;
    }
    if (d < e->next_use[k])
        e->next_use[k] = d;
    if (count)
        e->hcount[k] += e->hcount[k] < UINT32_MAX;
}

/* The items a copy does not pay for (under mu, after the next uses):
 *  - too sparse in view (engine_sparse), and those of the queue past the
 *    horizon (judged when they enter it);
 *  - the ones past the budget when the items in view are ranked densest
 *    first (engine_density; the step where the budget runs out still
 *    fits): a view of more items than the budget holds (a host reading
 *    other hosts' blocks besides its own windows, test_hosts3.sh) would
 *    otherwise evict copies before their reads are done and stage them
 *    again, and again. Where the view fits the budget (a window="auto"
 *    order: the horizon is 5/8 of the budget) no item is past it.
 * Either is staged only into room (sparse_no_room). An item with enough
 * ids in view (the first test) keeps passing it for a horizon of ids: the
 * ids in view of an item being read only fall (a window's items are read
 * side by side, each a part at a time), and one not staged yet would turn
 * sparse halfway through. The ranking is made afresh at every plan. */
static void mark_sparse(struct tier_engine *e)
{
    uint64_t bytes[ENGINE_DENSITY_STEPS] = {0};
    for (size_t i = 0; i < e->n_touched; i++) {
        uint64_t k = e->touched[i];
        if (e->hcount[k])
            bytes[engine_density(e->hcount[k] * (e->others[k] + 1) * e->sparse_rec,
                                 e->len[k])] += e->len[k];
    }
    uint32_t cut = 0; /* steps below cut: past the budget */
    uint64_t acc = 0;
    for (uint32_t d = ENGINE_DENSITY_STEPS; d-- > 0;) {
        acc += bytes[d];
        if (acc > e->budget) {
            cut = d;
            break;
        }
    }
    for (size_t i = 0; i < e->n_touched; i++) {
        uint64_t k = e->touched[i];
        uint64_t need = e->hcount[k] * (e->others[k] + 1) * e->sparse_rec;
        int few = engine_sparse(e->hcount[k], e->others[k], e->sparse_rec, e->len[k],
                                e->payload_pm, e->horizon);
        if (!few)
            e->dense_until[k] = e->pos + e->horizon;
        e->sparse[k] = (few && e->dense_until[k] <= e->pos) ||
                       engine_density(need, e->len[k]) < cut;
    }
}

/* The window, next uses (own, recent, other ranks') and the need list we
 * publish (under mu). */
static void plan(struct tier_engine *e)
{
    for (size_t i = 0; i < e->n_touched; i++) {
        uint64_t k = e->touched[i];
        e->next_use[k] = TIER_NEVER;
        e->hcount[k] = 0;
        e->others[k] = 0;
        e->seen[k] = 0;
        e->sparse[k] = 0;
    }
    e->n_touched = 0;
    e->n_window = 0;
    if (e->plans++ % 64 == 0 || e->n <= 65536)
        rescan(e); /* other ranks' copies and evictions */
    uint64_t flight = MIN(e->recent_n, e->pos - MIN(e->begun, e->pos) + e->batch);
    for (size_t i = 0; i < flight; i++) {
        size_t at = (e->recent_head + e->recent_cap - 1 - i) % e->recent_cap;
        touch(e, item_of(e, e->recent[at]), 0, 1);
    }
    e->next_from = e->q_len - e->q_next;
    for (size_t i = 0; i < e->q_len; i++) {
        uint64_t k = item_of(e, e->q[(e->q_head + i) % e->q_cap]);
        if (e->next_use[k] == TIER_NEVER && e->n_window < e->cap_touched) {
            e->window[e->n_window] = k;
            e->wdist[e->n_window++] = i + 1;
        }
        /* the ids in view for the sparse rule: the horizon's (the queue
         * reads ahead of it by up to 4096) */
        touch(e, k, i + 1, i < e->horizon);
    }
    registry_publish(e->reg_area, e->reg, e->window, e->wdist, e->n_window);
    uint64_t why[REG_WHY_N] = {0};
    why[REG_WHY_BUDGET] = e->budget;
    why[REG_WHY_UNIT] = e->units ? e->st.unit_bytes
                        : e->s->n_shards ? e->s->ds.info.stored_bytes / e->s->n_shards : 0;
    for (size_t i = 0; i < e->n_res; i++)
        why[REG_WHY_KEPT] += e->foreign[e->res_list[i]] ? e->len[e->res_list[i]] : 0;
    why[REG_WHY_HITS] = e->st.hits;
    why[REG_WHY_MISSES] = e->st.misses;
    why[REG_WHY_NO_ROOM] = e->st.no_room;
    why[REG_WHY_POLICY] = (uint64_t)e->policy;
    why[REG_WHY_STALL_NS] = e->st.stall_ns;
    why[REG_WHY_STAGED] = e->st.bytes_staged;
    registry_publish_why(e->reg_area, e->reg, why);
    e->n_touched += registry_merge(e->reg_area, e->reg_bytes, e->reg, reg_key(e),
                                   attach_domain(e->wa), e->n, e->next_use,
                                   e->touched + e->n_touched, e->cap_touched - e->n_touched,
                                   e->others, e->seen);
    if (e->sparse_rec)
        mark_sparse(e);
}

static struct tier_view view(const struct tier_engine *e)
{
    return (struct tier_view){
        .n_shards = e->n, .resident = e->resident, .kept = e->kept, .busy = e->busy,
        .slow = e->slow, .next_use = e->next_use, .last_use = e->last_use, .heat = e->heat,
        .len = e->len, .window = e->window, .n_window = e->n_window, .res_list = e->res_list,
        .n_res = e->n_res, .budget = e->budget, .used = e->used, .horizon = e->horizon,
    };
}

/* ------------------------------------------------------------ copies */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 1 while a recent miss found no room in any memory tier. */
static int full_now(const struct tier_engine *e)
{
    return now_ns() < at_load_relaxed(&e->full_until);
}

/* Drops item k's copy from the staging tier (mu held on entry and exit;
 * released around the drop): a cache copy, or one kept there by someone
 * else (a resident item's copy is one or the other). */
static void evict(struct tier_engine *e, uint64_t k)
{
    if (!e->wp)
        return; /* an engine that may not write the pool holds nothing */
    e->busy[k]++;
    int foreign = e->foreign[k];
    pthread_mutex_unlock(&e->mu);
    uint64_t bytes = 0;
    int rc = pool_copy_drop(e->wp, e->s->ds.states_off, item_target(e, k), 1u << e->tier,
                            !foreign, &bytes);
    pthread_mutex_lock(&e->mu);
    e->busy[k]--;
    if (!rc && bytes) {
        e->st.evictions++;
        e->st.bytes_evicted += bytes;
        e->st.kept_evicted += foreign ? bytes : 0;
    }
    refresh(e, k);
    pthread_cond_broadcast(&e->cv_done);
}

/* Makes room in the budget for shard k (mu held): evicts the policy's
 * victims. 0, or 1 when the policy will not evict for it. A miss (miss = 1)
 * fetches anyway when nothing may go: the budget is a target, a batch's
 * shards are a must. */
static int room(struct tier_engine *e, uint64_t k, int miss)
{
    while (e->used + e->len[k] > e->budget) {
        struct tier_view v = view(e);
        uint64_t x = e->ops->victim(&v, miss ? TIER_NONE : k);
        if (x == TIER_NONE)
            return miss ? 0 : 1;
        evict(e, x);
        if (e->resident[x])
            return miss ? 0 : 1; /* the drop failed: not now */
    }
    return 0;
}

/* Copies shard k into the staging tier (mu held; released around the
 * copy). Returns the store_copy code (CXLP_EEXIST: someone else had). */
static int stage(struct tier_engine *e, uint64_t k, int miss, struct store_io *io)
{
    /* needed only by the next pass's ids (the queue's last q_next when
     * the next uses were planned) */
    const int for_next = e->next_use[k] != TIER_NEVER && e->next_use[k] > e->next_from;
    e->busy[k]++;
    e->staging[k] = 1;
    e->copying += e->len[k];
    pthread_mutex_unlock(&e->mu);
    struct copy_stat cs = {0};
    int rc = item_copy(e, k, e->tier, FETCH_WAIT, io, &cs);
    pthread_mutex_lock(&e->mu);
    e->busy[k]--;
    e->staging[k] = 0;
    e->copying -= e->len[k];
    if (rc == CXLP_ENOTFOUND)
        at_store_relaxed(&e->gone, 1);
    if (rc == 0) {
        e->st.bytes_staged += cs.bytes;
        e->st.next_pass_bytes += for_next ? cs.bytes : 0;
        if (miss)
            e->st.fetched++;
        else
            e->st.prefetched++;
        /* a copy just made counts as used now: least recently used is
         * not "made and not read yet" */
        e->last_use[k] = MAX(e->begun, 1);
    }
    refresh(e, k);
    pthread_cond_broadcast(&e->cv_done);
    return rc;
}

/* ------------------------------------------------------------ stagers */

/* 1 when a copy of item k would need an eviction (the budget has no room
 * for it), or the policy does not hold copies (mu held). */
static int no_room_for(const struct tier_engine *e, uint64_t k)
{
    return !e->ops->holds || e->used + e->copying + e->len[k] > e->budget;
}

/* 1 when item k is too sparse to stage as the last plan saw it
 * (engine_sparse) and no_room_for it (mu held): its batches read it in
 * part. */
static int sparse_no_room(const struct tier_engine *e, uint64_t k)
{
    return e->sparse_rec && e->sparse[k] && no_room_for(e, k);
}

/* The same for a batch with recs records of item k (mu held): the ids of
 * it in view are at least the batch's (the last plan may not have counted
 * a batch that began before others that began after it). */
static int sparse_now(const struct tier_engine *e, uint64_t k, uint64_t recs)
{
    return e->sparse_rec && no_room_for(e, k) &&
           ((e->hcount[k] && e->sparse[k]) ||
            (e->dense_until[k] <= e->pos &&
             engine_sparse(MAX(e->hcount[k], recs), e->others[k], e->sparse_rec, e->len[k],
                           e->payload_pm, e->horizon)));
}

/* 1 when item k is of a shard of another host's share (tier_away): never
 * staged here; its batches read it in part, from the peer that has it in
 * memory (store/fetch.c) or the home. */
static int away(const struct tier_engine *e, uint64_t k)
{
    uint64_t sh = item_shard(e, k);
    return e->away && ((e->away[sh / 8] >> (sh % 8)) & 1);
}

struct cand_key {
    uint64_t span, item;
};

static int cmp_cand(const void *a, const void *b)
{
    const struct cand_key *x = a, *y = b;
    if (x->span != y->span)
        return (x->span > y->span) - (x->span < y->span);
    return (x->item > y->item) - (x->item < y->item);
}

/* A plan is stale once the loader has taken replan ids since it was made
 * (new shards may have entered the window), after a drop, or once its
 * candidates are used up (under mu). */
static int stale(const struct tier_engine *e)
{
    return e->replan_now || e->pos - e->plan_pos >= e->replan;
}

/* Plans again: window, next uses, what the policy drops (evicted here) and
 * wants (kept as the candidates the stagers take in turn). */
static void replan(struct tier_engine *e)
{
    refill(e);
    plan(e);
    e->plan_pos = e->pos;
    e->replan_now = 0;
    struct tier_view v = view(e);
    uint64_t drop[PLAN_MAX];
    /* reading in part: see stager(); gone: no copy of the dataset can be
     * dropped through the catalog any more (its copies go with it) */
    size_t nd = e->in_part || at_load_relaxed(&e->gone) ? 0 : e->ops->drop(&v, drop, PLAN_MAX);
    for (size_t i = 0; i < nd && !e->stop; i++)
        if (e->resident[drop[i]] && !e->busy[drop[i]])
            evict(e, drop[i]);
    v = view(e);
    e->n_cand = e->ops->want(&v, e->cand, PLAN_MAX);
    e->cand_i = 0;
    /* the items the next batches need first, in the policy's order; the
     * rest, when most of them lie next to another of them (a window made
     * of runs of adjacent items: a block order's blocks of several units,
     * store/probe.c), in spans of a quarter of the horizon of next uses,
     * each span in file order (item numbers), so that the home is read one
     * run at a time, sequentially: a block order's window is needed by its
     * first few batches (its units' first uses lie within a few units'
     * worth of ids), so its units share a span, and the spans keep what is
     * needed later behind what is needed sooner. Without runs the policy's
     * order stands: reordered, copies staged early are dropped again
     * before their use (1.09x the dataset read, test_tier_units) */
    size_t urgent = 0;
    while (urgent < e->n_cand && e->next_use[e->cand[urgent]] <= 2 * e->batch)
        urgent++;
    /* and only what fits together: the room left (the budget less the
     * copies held and being made, plus the copies no one needs in the
     * horizon, which any policy's victim takes first) covers the urgent
     * items and the reordered ones. A copy staged ahead of its turn is
     * then never the victim of one needed before it: without that bound
     * (the small windows of a ramp, several of them to a span), lookahead
     * with runs read 1.101x the dataset an epoch, 1.047x with it (1 GiB
     * over 256 MiB, bench/bench_home_bytes.py) */
    uint64_t free_b = e->budget > e->used + e->copying ? e->budget - e->used - e->copying : 0;
    for (size_t i = 0; i < e->n_res; i++) {
        uint64_t k = e->res_list[i];
        free_b += e->next_use[k] == TIER_NEVER && !e->busy[k] ? e->len[k] : 0;
    }
    size_t fit = 0;
    for (uint64_t acc = 0; fit < e->n_cand && acc + e->len[e->cand[fit]] <= free_b; fit++)
        acc += e->len[e->cand[fit]];
    struct cand_key key[PLAN_MAX];
    size_t nk = fit > urgent ? fit - urgent : 0, adjacent = 0;
    for (size_t i = 0; i < nk; i++)
        key[i] = (struct cand_key){0, e->cand[urgent + i]};
    qsort(key, nk, sizeof *key, cmp_cand);
    for (size_t i = 1; i < nk; i++)
        adjacent += key[i].item == key[i - 1].item + 1;
    if (nk < 4 || adjacent * 2 < nk)
        return;
    uint64_t span = MAX(e->horizon / 4, 1);
    for (size_t i = 0; i < nk; i++)
        key[i] = (struct cand_key){e->next_use[e->cand[urgent + i]] / span, e->cand[urgent + i]};
    qsort(key, nk, sizeof *key, cmp_cand);
    for (size_t i = 0; i < nk; i++)
        e->cand[urgent + i] = key[i].item;
}

static void *stager(void *arg)
{
    struct tier_engine *e = arg;
    struct store_io io = {0};
    pthread_mutex_lock(&e->mu);
    while (!e->stop) {
        if (stale(e))
            replan(e);
        uint64_t k = TIER_NONE;
        while (!at_load_relaxed(&e->gone) && e->cand_i < e->n_cand && k == TIER_NONE) {
            uint64_t c = e->cand[e->cand_i++];
            /* an item too sparse to pay for a copy only into room: none is
             * evicted for it (its batches read it in part) */
            if (!e->staging[c] && !e->resident[c] && !e->kept[c] && !sparse_no_room(e, c) &&
                !away(e, c))
                k = c;
        }
        /* reading in part, a copy is made only while the budget has room
         * and none is evicted for it: in a full shuffle every shard is as
         * likely next as any, so the copies held serve as well as any
         * others would, and a copy made for a record or two is what
         * reading in part avoids */
        int no_room = k != TIER_NONE && (e->in_part ? e->used + e->copying + e->len[k] > e->budget
                                                    : room(e, k, 0));
        if (k == TIER_NONE || no_room) {
            if (k != TIER_NONE)
                e->cand_i--; /* no room yet: the same shard next time */
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 50 * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            if (pthread_cond_timedwait(&e->cv_work, &e->mu, &ts) == ETIMEDOUT)
                e->replan_now = 1; /* other ranks' needs and copies move too */
            continue;
        }
        int rc = stage(e, k, 0, &io);
        if (rc == CXLP_EFULL) {
            /* the tier is full of copies others hold (kept ones, other
             * processes' or their readers' pins): the same shard later */
            e->cand_i--;
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 20 * 1000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000;
            }
            pthread_cond_timedwait(&e->cv_done, &e->mu, &ts);
        }
    }
    pthread_mutex_unlock(&e->mu);
    store_io_close(&io);
    return NULL;
}

/* ------------------------------------------------------------ the loader's side */

int engine_next(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    struct tier_engine *e = ctx;
    /* a batch at a time: what is handed out is in flight (its shards may
     * not be evicted), and the loader asks for much more than a batch */
    max = MIN(max, e->batch);
    pthread_mutex_lock(&e->mu);
    if (e->q_len == e->q_next)
        refill(e);
    max = MIN(max, e->q_len - e->q_next);
    size_t k = 0;
    for (; k < max; k++) {
        uint64_t id = e->q[(e->q_head + k) % e->q_cap];
        out[k] = id;
        e->recent[e->recent_head] = id;
        e->recent_head = (e->recent_head + 1) % e->recent_cap;
        if (e->recent_n < e->recent_cap)
            e->recent_n++;
    }
    e->q_head = (e->q_head + k) % e->q_cap;
    e->q_len -= k;
    e->pos += k;
    int rc = k == 0 ? e->src_rc : 0;
    if (e->pos - e->plan_pos >= e->replan)
        pthread_cond_signal(&e->cv_work);
    pthread_mutex_unlock(&e->mu);
    *n = k;
    return rc;
}

/* The items of one batch, resolved under one pin: open addressing. */
struct bslot {
    uint64_t k;                /* item + 1; 0 empty */
    uint64_t shard;            /* its shard */
    uint64_t records;
    struct shard sh;
    struct shard_col cols[SHARD_MAX_COLS]; /* sh's */
    uint8_t *priv;             /* a private copy (no tier had room), or NULL */
    uint64_t priv_map;         /* 0: priv is malloc'ed; else a partial read's
                                  mapping of this many bytes */
    int home;                  /* to be read from the home copy this round */
    size_t roff;               /* its records' place in rec[] */
};
struct tier_batch {
    const struct tier_engine *e;
    uint64_t pin;
    struct bslot *m;
    size_t cap, n;
    uint64_t *keys;            /* the distinct shards, in insertion order */
    size_t n_ids;
    uint64_t *rec;             /* the partial reads' records, by item (cap entries) */
    struct store_part *parts;  /* the partial reads of a round (cap entries) */
    uint64_t *pkey;            /* the item of each of them */
};

static __thread struct tier_batch *cur;

/* What a gather thread keeps between batches (its batch map, its readers of
 * staged tiers), freed when the thread exits. */
struct tls {
    struct tier_batch tb;
    struct store_io io;
};
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_free(void *p)
{
    struct tls *t = p;
    free(t->tb.m);
    free(t->tb.keys);
    free(t->tb.rec);
    free(t->tb.parts);
    free(t->tb.pkey);
    store_io_close(&t->io);
    free(t);
}

static void tls_init(void)
{
    pthread_key_create(&tls_key, tls_free);
}

static struct tls *tls_get(void)
{
    pthread_once(&tls_once, tls_init);
    struct tls *t = pthread_getspecific(tls_key);
    if (!t && (t = calloc(1, sizeof *t)) && pthread_setspecific(tls_key, t)) {
        free(t);
        t = NULL;
    }
    return t;
}

static struct bslot *bfind(struct tier_batch *b, uint64_t k)
{
    size_t i = (size_t)(k * 0x9e3779b97f4a7c15ull) & (b->cap - 1);
    while (b->m[i].k && b->m[i].k != k + 1)
        i = (i + 1) & (b->cap - 1);
    return &b->m[i];
}

static int batch_index(struct tier_batch *b, const struct tier_engine *e, const uint64_t *ids,
                       size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    if (cap > b->cap) {
        free(b->m);
        free(b->keys);
        free(b->rec);
        free(b->parts);
        free(b->pkey);
        b->m = malloc(cap * sizeof *b->m);
        b->keys = malloc(cap * sizeof *b->keys);
        b->rec = malloc(cap * sizeof *b->rec);
        b->parts = malloc(cap * sizeof *b->parts);
        b->pkey = malloc(cap * sizeof *b->pkey);
        if (!b->m || !b->keys || !b->rec || !b->parts || !b->pkey) {
            free(b->m);
            free(b->keys);
            free(b->rec);
            free(b->parts);
            free(b->pkey);
            b->m = NULL;
            b->keys = NULL;
            b->rec = NULL;
            b->parts = NULL;
            b->pkey = NULL;
            b->cap = 0;
            return -ENOMEM;
        }
        b->cap = cap;
    }
    for (size_t i = 0; i < b->cap; i++)
        b->m[i].k = 0;
    b->n = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t k = item_of(e, ids[i]);
        struct bslot *x = bfind(b, k);
        if (!x->k) {
            x->k = k + 1;
            x->shard = item_shard(e, k);
            x->records = 0;
            x->priv = NULL;
            x->priv_map = 0;
            x->home = 0;
            b->keys[b->n++] = k;
        }
        x->records++;
    }
    return 0;
}

/* Fetches shard k for a batch that needs it now (no pin held; the batch
 * holds k, so this engine does not evict it meanwhile), unless it is too
 * sparse to pay for a copy with the batch's recs records of it (recs 0:
 * fetched whatever it is): FETCH_SPARSE, the batch reads it in part. */
#define FETCH_SPARSE 1
static int fetch_now(struct tier_engine *e, uint64_t k, uint64_t recs, struct store_io *io)
{
    pthread_mutex_lock(&e->mu);
    int rc = 0, evicted = 0;
    for (int waits = 0; !readable(e, k);) {
        if (e->staging[k]) {
            pthread_cond_wait(&e->cv_done, &e->mu);
            continue;
        }
        /* the victims of a miss by the future as it is now: a plan made a
         * few batches ago still counts the last window's items as in
         * flight (never victims), and lru evicted this window's instead */
        if (e->pos - e->plan_pos >= e->batch && !e->stop)
            replan(e);
        if (recs && (away(e, k) || sparse_now(e, k, recs))) {
            rc = FETCH_SPARSE;
            break;
        }
        room(e, k, 1);
        rc = stage(e, k, 1, io);
        if (rc == CXLP_EEXIST || rc == 0) {
            rc = 0;
            continue;
        }
        if (rc != CXLP_EFULL)
            break;
        /* the tier is full: room from one of our own copies, the one the
         * policy gives up for a shard needed now (lookahead: the copy
         * needed farthest ahead, Belady's rule for a miss; lru: the least
         * recently read), none a batch holds. Without it a window of more
         * shards than the tier holds waited here for room on every batch
         * and read its shards in part, 1.2 to 5 times the dataset
         * (docs/benchmarks.md). One only: when that did not make room,
         * the room is held by others (below), and dropping more of ours
         * would only drop shards needed later. */
        if (!evicted) {
            struct tier_view v = view(e);
            uint64_t x = e->ops->victim(&v, k);
            if (x != TIER_NONE) {
                evicted = 1;
                evict(e, x);
                rc = 0;
                continue;
            }
        }
        /* full of copies others hold (kept copies; dropped ones that
         * readers' pins hold until their batches end): a moment, then the
         * batch reads a private copy */
        if (++waits > 10)
            break;
        pthread_mutex_unlock(&e->mu);
        usleep(1000);
        pthread_mutex_lock(&e->mu);
        rc = 0;
    }
    pthread_mutex_unlock(&e->mu);
    return rc;
}

/* Frees the batch's private and partial copies. */
static void free_priv(struct tier_batch *b)
{
    for (size_t i = 0; i < b->n; i++) {
        struct bslot *x = bfind(b, b->keys[i]);
        store_home_free(x->priv, x->priv_map);
        x->priv = NULL;
        x->priv_map = 0;
    }
}

/* The shards of batch b (ids[0..n)) marked home, read from their home
 * copies into the batch's own memory: only the blocks of the batch's
 * records, all the shards' reads of a step in one call (format 3 or 4), else
 * each whole (x->priv_map 0). Counts them in *parts and *priv. */
static int read_home(struct tier_engine *e, struct tier_batch *b, const uint64_t *ids, size_t n,
                     struct store_io *io, uint64_t *bytes, uint64_t *parts, uint64_t *priv)
{
    cxlp_store *s = e->s;
    size_t np = 0, at = 0;
    for (size_t i = 0; i < b->n; i++) {
        struct bslot *x = bfind(b, b->keys[i]);
        if (!x->home)
            continue;
        x->roff = at;
        b->parts[np++] = (struct store_part){.k = x->shard, .rec = b->rec + at, .n = 0,
                                             .g = &x->sh, .cols = x->cols};
        b->pkey[np - 1] = b->keys[i];
        at += x->records;
    }
    if (!np)
        return 0;
    for (size_t i = 0; i < n; i++) {
        struct bslot *x = bfind(b, item_of(e, ids[i]));
        if (x->home)
            b->rec[x->roff++] = ids[i] - s->first[x->shard];
    }
    for (size_t j = 0; j < np; j++)
        b->parts[j].n = bfind(b, b->pkey[j])->records;
    uint64_t got = 0;
    size_t whole;
    int rc = store_read_home(s, b->parts, np, io, &got, &whole);
    *bytes += got;
    for (size_t j = 0; j < np; j++) {
        struct bslot *x = bfind(b, b->pkey[j]);
        x->home = 0;
        x->priv = b->parts[j].buf; /* NULL on failure */
        x->priv_map = b->parts[j].buf_len;
    }
    *parts += rc ? 0 : np - whole;
    *priv += rc ? 0 : whole;
    return rc;
}

static void release_hold(struct tier_engine *e, struct tier_batch *b)
{
    free_priv(b);
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < b->n; i++)
        e->busy[b->keys[i]]--;
    pthread_cond_broadcast(&e->cv_work);
    pthread_mutex_unlock(&e->mu);
}

int engine_batch_begin(struct tier_engine *e, const uint64_t *ids, size_t n)
{
    struct tls *tl = tls_get();
    if (!tl)
        return seterr(NULL, -ENOMEM, "staging: out of memory");
    struct tier_batch *b = &tl->tb;
    struct store_io *io = &tl->io;
    b->e = e;
    b->n_ids = n;
    int rc = batch_index(b, e, ids, n);
    if (rc)
        return seterr(NULL, rc, "staging: out of memory for a batch of %zu", n);
    uint64_t t0 = now_ns(), hits = 0, misses = 0, priv = 0, parts = 0, part_bytes = 0, no_room = 0;
    uint64_t sparse = 0, sparse_priv = 0;
    const uint64_t peer0 = io->peer_parts, peer_rec0 = io->peer_records;
    int first = 1, waited = 0;
    /* the batch holds its shards: this engine evicts none of them until
     * batch_end (other processes may: then they are fetched again) */
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < b->n; i++)
        e->busy[b->keys[i]]++;
    e->begun += n;
    pthread_mutex_unlock(&e->mu);
    for (;;) {
        int missing = 0, in_part = at_load_relaxed(&e->in_part);
        for (size_t i = 0; i < b->n; i++) {
            uint64_t k = b->keys[i];
            struct bslot *x = bfind(b, k);
            if (x->priv)
                continue;
            int r = readable(e, k);
            if (first)
                *(r ? &hits : &misses) += x->records;
            if (!r) {
                missing = 1;
                waited = 1;
                /* read in part (tier_read_in_part), or the tiers are full
                 * of copies others hold (found by this batch or one just
                 * before: no item waits for room again), or this process
                 * may not place copies: ours alone, below */
                int gone = at_load_relaxed(&e->gone), full = !e->wp || full_now(e), sp = 0;
                rc = in_part || gone || full ? CXLP_EFULL : fetch_now(e, k, x->records, io);
                if (rc == FETCH_SPARSE) {
                    /* too sparse to pay for a copy (engine_sparse): in part */
                    sp = 1;
                    rc = CXLP_EFULL;
                }
                if (rc == CXLP_EFULL && !in_part && !gone && !full && !sp)
                    at_store_relaxed(&e->full_until, now_ns() + FULL_NS);
                if (rc == CXLP_EFULL || rc == CXLP_ENOTFOUND) {
                    x->home = 1;
                    no_room += rc == CXLP_EFULL && !in_part && !gone && !sp;
                    sparse += sp;
                    rc = 0;
                }
                if (rc) {
                    release_hold(e, b);
                    return rc;
                }
            }
        }
        /* of the blocks of our records (format 3 or 4), every shard's in one
         * read a step, else each whole shard */
        uint64_t priv0 = priv;
        if (missing && (rc = read_home(e, b, ids, n, io, &part_bytes, &parts, &priv))) {
            release_hold(e, b);
            return rc;
        }
        if (sparse && priv > priv0 && !sparse_priv) {
            /* read whole after all (a tier that cannot read in part):
             * sparse items are staged again from the next batch on */
            sparse_priv = 1;
            pthread_mutex_lock(&e->mu);
            e->sparse_rec = 0;
            pthread_mutex_unlock(&e->mu);
        }
        if (in_part && priv) {
            /* the dataset's shards have no block sums: staged as without
             * tier_read_in_part from the next batch on */
            pthread_mutex_lock(&e->mu);
            at_store_relaxed(&e->in_part, 0); /* gather threads read it unlocked */
            e->st.read_in_part = 0;
            pthread_cond_broadcast(&e->cv_work);
            pthread_mutex_unlock(&e->mu);
        }
        first = 0;
        if (missing)
            continue; /* check again: a fetch may have evicted a neighbour */
        b->pin = attach_pin_epoch(e->s->a);
        int gone = 0;
        for (size_t i = 0; i < b->n && !gone; i++) {
            uint32_t t;
            struct bslot *x = bfind(b, b->keys[i]);
            if (x->priv)
                continue;
            rc = store_locate(e->s, x->shard, &x->sh, x->cols, &t);
            if (rc == CXLP_ENOTFOUND && e->units)
                rc = store_unit_locate(e->s, b->keys[i], &x->sh, x->cols, &t);
            if (rc == CXLP_ENOTFOUND)
                gone = 1; /* evicted since we looked: again */
            else if (rc) {
                attach_unpin_epoch(e->s->a, b->pin);
                release_hold(e, b);
                return rc;
            }
        }
        if (!gone)
            break;
        attach_unpin_epoch(e->s->a, b->pin);
    }
    uint64_t stall = waited ? now_ns() - t0 : 0;
    pthread_mutex_lock(&e->mu);
    e->st.hits += hits;
    e->st.misses += misses;
    e->st.stall_ns += stall;
    e->st.private_reads += priv;
    e->st.partial_reads += parts;
    e->st.partial_bytes += part_bytes;
    e->st.no_room += no_room;
    e->st.sparse_reads += sparse;
    e->st.peer_reads += io->peer_parts - peer0;
    e->st.peer_records += io->peer_records - peer_rec0;
    for (size_t i = 0; i < b->n; i++)
        e->last_use[b->keys[i]] = e->begun; /* >= 1: the batch began */
    pthread_mutex_unlock(&e->mu);
    struct pool_tier_ctr *c = attach_ctr(e->wa, e->tier);
    if (c) {
        at_fetch_add_relaxed(&c->hits, hits);
        at_fetch_add_relaxed(&c->misses, misses);
        at_fetch_add_relaxed(&c->stall_ns, stall);
    }
    cur = b;
    return 0;
}

void engine_batch_end(struct tier_engine *e, uint64_t records)
{
    struct tier_batch *b = cur;
    cur = NULL;
    if (!b || b->e != e)
        return;
    attach_unpin_epoch(e->s->a, b->pin);
    free_priv(b);
    /* heat: accesses counted in the pool (per shard), where hot_first reads them */
    if (e->states_rw)
        for (size_t i = 0; i < b->n; i++) {
            const struct bslot *x = bfind(b, b->keys[i]);
            at_fetch_add_relaxed(&e->states_rw[x->shard * e->s->stride], x->records);
        }
    pthread_mutex_lock(&e->mu);
    for (size_t i = 0; i < b->n; i++)
        e->busy[b->keys[i]]--;
    e->st.batches++;
    e->st.records += records;

    pthread_cond_broadcast(&e->cv_work);
    pthread_mutex_unlock(&e->mu);
}

int engine_check(const void *ctx)
{
    return store_check(((const struct tier_engine *)ctx)->s);
}

int engine_read_fields(const void *ctx, uint64_t id, const uint32_t *f, uint32_t n,
                       struct cxlp_view *v)
{
    const struct tier_engine *e = ctx;
    const cxlp_store *s = e->s;
    if (id >= s->count)
        return seterr(NULL, CXLP_ERANGE, "dataset %s: record %" PRIu64 " past the end", s->name, id);
    struct tier_batch *b = cur;
    if (b && b->e == e) {
        struct bslot *x = bfind(b, item_of(e, id));
        if (x->k)
            return store_fields_at(s, &x->sh, x->shard, id, f, n, v);
    }
    /* outside a batch (the planner reading a length): a pin for the read
     * only; the caller uses v->len, not the bytes */
    struct tls *tl = tls_get();
    if (!tl)
        return seterr(NULL, -ENOMEM, "staging: out of memory");
    for (int tries = 0; tries < 100; tries++) {
        uint64_t pin = attach_pin_epoch(s->a);
        int rc = store_read_pinned(s, id, f, n, v);
        attach_unpin_epoch(s->a, pin);
        if (rc != CXLP_ENOTFOUND)
            return rc;
        if ((rc = fetch_now((struct tier_engine *)e, item_of(e, id), 0, &tl->io)))
            return rc;
    }
    return seterr(NULL, CXLP_EBUSY, "dataset %s: record %" PRIu64 ": its shard was evicted every "
                  "time it was fetched", s->name, id);
}

/* ------------------------------------------------------------ placement */

/* hot_first, full_prefetch: the copies to keep before the first batch. */
static int place(struct tier_engine *e)
{
    if (!e->ops->place || !e->wp)
        return 0;
    const cxlp_store *s = e->s;
    uint64_t caps[POOL_MAX_TIERS] = {0}, maxlen = 0;
    for (uint64_t k = 0; k < e->n; k++)
        maxlen = MAX(maxlen, e->len[k]);
    for (uint32_t i = 0; i < s->n_mem; i++) {
        const struct attach_tier *at = attach_tier(s->a, s->mem[i]);
        caps[i] = at->data_len;
    }
    /* kept copies take at most a quarter of the staging tier's budget:
     * the rest is the misses' (the items of the batches in flight, a
     * window of the block order: window="auto" sizes it to half the
     * budget, and a miss must not evict an item its window still needs) */
    caps[e->rank] = MIN(caps[e->rank], engine_place_cap(e->budget));
    struct tier_place *pl = malloc((e->n ? e->n : 1) * sizeof *pl);
    if (!pl)
        return -ENOMEM;
    rescan(e);
    struct tier_view v = view(e);
    size_t np = e->ops->place(&v, caps, s->n_mem, pl, e->n);
    struct store_io io = {0};
    int rc = 0;
    uint64_t placed_bytes = 0;
    for (size_t i = 0; i < np && !rc; i++) {
        struct copy_stat cs = {0};
        if (away(e, pl[i].shard))
            continue; /* another host's: read in part from there */
        rc = item_copy(e, pl[i].shard, s->mem[pl[i].tier], FETCH_WAIT | FETCH_KEEP, &io, &cs);
        if (rc == CXLP_EEXIST || rc == 0)
            e->mine[pl[i].shard] = 1;
        if (rc == CXLP_EEXIST)
            rc = 0;
        if (rc == CXLP_ENOTFOUND)
            at_store_relaxed(&e->gone, 1);
        if (rc == CXLP_EFULL || rc == CXLP_ENOTFOUND) {
            rc = 0; /* the tier is fuller than its capacity says (what
                     * fits), or the dataset went (e->gone) */
            break;
        }
        e->st.placed++;
        e->st.bytes_staged += cs.bytes;
        if (s->mem[pl[i].tier] == e->tier)
            placed_bytes += e->len[pl[i].shard];
    }
    store_io_close(&io);
    free(pl);
    /* the budget left is the misses' */
    e->budget = engine_budget_after_place(e->budget, placed_bytes, maxlen);
    rescan(e);
    return rc;
}

/* ------------------------------------------------------------ lifetime */

void engine_free(struct tier_engine *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    e->stop = 1;
    pthread_cond_broadcast(&e->cv_work);
    pthread_mutex_unlock(&e->mu);
    for (uint32_t i = 0; i < e->n_stagers; i++)
        pthread_join(e->th[i], NULL);
    registry_release(e->reg_area, e->reg);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv_work);
    pthread_cond_destroy(&e->cv_done);
    free(e->q);
    free(e->recent);
    free(e->len);
    free(e->next_use);
    free(e->last_use);
    free(e->heat);
    free(e->resident);
    free(e->kept);
    free(e->mine);
    free(e->foreign);
    free(e->kshard);
    free(e->busy);
    free(e->staging);
    free(e->slow);
    free(e->res_list);
    free(e->window);
    free(e->wdist);
    free(e->touched);
    free(e->hcount);
    free(e->others);
    free(e->seen);
    free(e->sparse);
    free(e->away);
    free(e->dense_until);
    free(e);
}

uint64_t engine_memory(uint64_t n, uint64_t horizon, uint64_t batch)
{
    uint64_t q_cap = engine_q_cap(horizon), recent_cap = engine_recent_cap(batch);
    uint64_t cap_touched = MIN(horizon + recent_cap + REG_ENTRIES, n + 1);
    /* len, next_use, last_use, heat, res_list; resident, kept, mine,
     * foreign, staging, slow; busy; hcount, others, seen, sparse,
     * dense_until (the allocations below) */
    uint64_t per = 6 * sizeof(uint64_t) + 6 + 2 * sizeof(uint32_t) + 1 + sizeof(uint16_t) + 1;
    return sizeof(struct tier_engine) + n * per + (q_cap + recent_cap + 3 * cap_touched) * 8;
}

int engine_create(cxlp_store *s, const struct cxlp_loader_opts *o, cxlp_index_fn src,
                  void *src_ctx, struct tier_engine **out)
{
    if (!s->tiered || s->n_mem == 0)
        return seterr(NULL, CXLP_EARG, "dataset %s: staging needs a pool of tiers with a "
                      "memory tier", s->name);
    struct tier_engine *e = calloc(1, sizeof *e);
    if (!e)
        return seterr(NULL, -ENOMEM, "staging: out of memory");
    e->s = s;
    e->src = src;
    e->src_ctx = src_ctx;
    e->nsrc = o->tier_next_fn;
    e->nsrc_ctx = o->tier_next_ctx;
    e->reg = -1;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv_work, NULL);
    pthread_cond_init(&e->cv_done, NULL);
    int rc = 0;
    if (s->unpinned) {
        /* a process that may not write the pool (no lease: its pins would
         * protect nothing): it neither places nor reads copies, and every
         * batch reads its records from the home copy in part */
        e->wa = s->a;
    } else if ((rc = store_pool_rw(s, &e->wp))) {
        engine_free(e);
        return rc;
    } else {
        e->wa = pool_attach(e->wp);
        e->states_rw = attach_states(e->wa, s->ds.states_off);
    }
    e->policy = o->tier_policy ? o->tier_policy : cxlp_store_policy(s);
    if (!e->policy)
        e->policy = CXLP_POLICY_LOOKAHEAD;
    if (e->policy < CXLP_POLICY_LOOKAHEAD || e->policy > CXLP_POLICY_FULL_PREFETCH) {
        engine_free(e);
        return seterr(NULL, CXLP_EARG, "loader: tier_policy %d is not a policy", o->tier_policy);
    }
    e->ops = tier_policy_of(e->policy);
    e->tier = s->mem[0];
    e->rank = 0;
    if (o->tier_target > 0) {
        e->tier = UINT32_MAX;
        for (uint32_t i = 0; i < s->n_mem; i++)
            if (s->mem[i] == (uint32_t)o->tier_target) {
                e->tier = s->mem[i];
                e->rank = i;
            }
        if (e->tier == UINT32_MAX) {
            engine_free(e);
            return seterr(NULL, CXLP_EARG, "loader: tier_target %d is not a memory tier of the "
                          "pool", o->tier_target);
        }
    }
    const struct attach_tier *at = attach_tier(s->a, e->tier);
    e->budget = o->tier_budget ? o->tier_budget : engine_default_budget(at->data_len);
    e->batch = o->batch_size ? o->batch_size : 1;
    /* by default, hold as many ids ahead as 5/8 of the budget holds
     * records: a window of a block order that fills half the budget
     * (window="auto") is then in view whole before it starts, and the
     * rest of the current one stays in view between two plans (the queue
     * shrinks by up to horizon/32 between them): a window's item with its
     * last records past the queue's end looked unneeded, was dropped by
     * streaming and fetched again */
    uint64_t rec = s->count ? MAX(1, s->ds.info.stored_bytes / s->count) : 1;
    e->horizon = engine_horizon(o->tier_horizon, e->batch, e->budget, rec);
    e->replan = engine_replan(e->batch, e->horizon);
    e->replan_now = 1;
    if (o->tier_stagers > MAX_STAGERS) {
        engine_free(e);
        return seterr(NULL, CXLP_EARG, "loader: tier_stagers %u: at most %u", o->tier_stagers,
                      MAX_STAGERS);
    }
    /* the items: staging units where the dataset has them, or its shards
     * are too large for the budget (made now), else its shards */
    uint64_t unit_records = 0, unit_bytes = 0;
    rc = store_unit_rule(s, e->budget, &unit_records, &unit_bytes);
    if (!rc && unit_records)
        rc = store_units_use(s, e->budget, 1);
    e->units = rc == 0 && unit_records && s->units;
    if (rc && rc != CXLP_ENOTFOUND && rc != CXLP_EFULL) {
        /* no room for the units' words: whole shards, as before units */
        engine_free(e);
        return rc;
    }
    if (e->units) {
        e->st.unit_records = s->units->pu.per_unit;
        e->st.unit_bytes = unit_bytes;
    }
    e->n_stagers = o->tier_stagers ? o->tier_stagers : def_stagers(s, e->units ? unit_bytes : 0);
    if (!e->wp)
        e->n_stagers = 0;
    e->in_part = e->st.read_in_part = !!o->tier_read_in_part || s->unpinned;
    /* the sparse rule (engine_sparse) where asked for (tier_sparse) and a
     * batch can read in part: the shards have block sums (read from the
     * first shard's header). Off by default: on one host's block order it
     * staged 2-4% more than without (docs/benchmarks.md, "Sparse items") */
    uint64_t block = 0;
    const struct cxlp_dataset_info *in = &s->ds.info;
    uint64_t payload = in->n_records ? MAX(1, in->data_bytes / in->n_records) : 1;
    if (o->tier_sparse && !e->in_part && e->wp && cxlp_store_format(s, NULL, &block, NULL) == 0 &&
        block) {
        e->sparse_rec = (payload + block - 1) / block * block;
        e->payload_pm = in->stored_bytes ? MIN(1024, in->data_bytes / (in->stored_bytes / 1024 + 1))
                                         : 1024;
    }
    e->n = e->units ? s->units->pu.n_units : s->n_shards;
    e->q_cap = engine_q_cap(e->horizon);
    e->recent_cap = engine_recent_cap(e->batch);
    /* touched and window hold distinct shards */
    e->cap_touched = MIN(e->horizon + e->recent_cap + REG_ENTRIES, e->n + 1);
    uint64_t nn = e->n ? e->n : 1;
    e->q = malloc(e->q_cap * sizeof *e->q);
    e->recent = malloc(e->recent_cap * sizeof *e->recent);
    e->len = malloc(nn * sizeof *e->len);
    e->next_use = malloc(nn * sizeof *e->next_use);
    e->last_use = calloc(nn, sizeof *e->last_use);
    e->heat = calloc(nn, sizeof *e->heat);
    e->resident = calloc(nn, 1);
    e->kept = calloc(nn, 1);
    e->mine = calloc(nn, 1);
    e->foreign = calloc(nn, 1);
    e->kshard = e->units ? malloc(nn * sizeof *e->kshard) : NULL;
    e->busy = calloc(nn, sizeof *e->busy);
    e->staging = calloc(nn, 1);
    e->slow = calloc(nn, 1);
    e->res_list = malloc(nn * sizeof *e->res_list);
    e->window = malloc(e->cap_touched * sizeof *e->window);
    e->wdist = malloc(e->cap_touched * sizeof *e->wdist);
    e->touched = malloc(e->cap_touched * sizeof *e->touched);
    e->hcount = calloc(nn, sizeof *e->hcount);
    e->others = calloc(nn, 1);
    e->seen = calloc(nn, sizeof *e->seen);
    e->sparse = calloc(nn, 1);
    e->dense_until = calloc(nn, sizeof *e->dense_until);
    if (o->tier_away && e->sparse_rec && (e->away = malloc(s->n_shards / 8 + 1)))
        memcpy(e->away, o->tier_away, s->n_shards / 8 + (s->n_shards % 8 != 0));
    if (!e->hcount || !e->others || !e->seen || !e->sparse || !e->dense_until ||
        (o->tier_away && e->sparse_rec && !e->away) ||
        !e->q || !e->recent || !e->len || !e->next_use || !e->last_use || !e->heat ||
        !e->resident || !e->kept || !e->busy || !e->staging || !e->slow || !e->res_list || !e->window ||
        !e->wdist || !e->touched || !e->mine || !e->foreign || (e->units && !e->kshard)) {
        engine_free(e);
        return seterr(NULL, -ENOMEM, "staging: out of memory for %" PRIu64 " shards", e->n);
    }
    for (uint64_t k = 0; k < e->n; k++) {
        if (e->units) {
            uint64_t r0, r1;
            store_unit_span(s, k, &e->kshard[k], &r0, &r1);
            e->len[k] = store_unit_bytes(s, k);
        } else {
            e->len[k] = ALIGN_UP(s->loc[k].len, POOL_EXTENT_ALIGN);
        }
        e->next_use[k] = TIER_NEVER;
    }
    e->reg_area = e->wp ? attach_stage(e->wa, &e->reg_bytes) : NULL;
    e->reg = registry_claim(e->reg_area, e->reg_bytes, reg_key(e), attach_domain(e->wa));
    e->st.policy = e->policy;
    e->st.tier = (int)e->tier;
    if ((rc = place(e))) {
        engine_free(e);
        return seterr(NULL, rc, "dataset %s: placing for %s: %s", s->name, e->ops->name,
                      cxlp_errmsg(NULL));
    }
    e->st.budget = e->budget;
    for (uint32_t i = 0; i < e->n_stagers; i++) {
        if (pthread_create(&e->th[i], NULL, stager, e)) {
            e->n_stagers = i;
            break;
        }
        pthread_setname_np(e->th[i], "cxlp-stage");
    }
    e->st.stagers = e->n_stagers;
    *out = e;
    return 0;
}

void engine_stats(struct tier_engine *e, struct cxlp_loader_stats *st)
{
    pthread_mutex_lock(&e->mu);
    *st = e->st;
    st->sparse = e->sparse_rec != 0;
    st->kept_bytes = 0;
    for (size_t i = 0; i < e->n_res; i++)
        st->kept_bytes += e->foreign[e->res_list[i]] ? e->len[e->res_list[i]] : 0;
    pthread_mutex_unlock(&e->mu);
}

/* ------------------------------------------------------------ staging ahead */

/* A stager is an engine no loader reads from: its queue fills to the
 * horizon and stays there, so its stagers stage the order's first shards
 * and then wait. */
struct cxlp_stager {
    struct tier_engine *e;
};

int cxlp_stager_create(cxlp_store *s, const struct cxlp_loader_opts *opts, cxlp_index_fn index_fn,
                       void *index_ctx, cxlp_stager **out)
{
    if (!s || !opts || !index_fn || !out)
        return seterr(NULL, CXLP_EARG, "cxlp_stager_create: NULL argument");
    cxlp_stager *st = calloc(1, sizeof *st);
    if (!st)
        return seterr(NULL, -ENOMEM, "staging: out of memory");
    int rc = engine_create(s, opts, index_fn, index_ctx, &st->e);
    if (rc) {
        free(st);
        return rc;
    }
    *out = st;
    return 0;
}

int cxlp_stager_stats(cxlp_stager *st, struct cxlp_loader_stats *out)
{
    if (!st || !out)
        return seterr(NULL, CXLP_EARG, "cxlp_stager_stats: NULL argument");
    engine_stats(st->e, out);
    return 0;
}

void cxlp_stager_free(cxlp_stager *st)
{
    if (!st)
        return;
    engine_free(st->e);
    free(st);
}
