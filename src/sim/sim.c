/*
 * sim.c - the simulator: a discrete-event model of a cluster feeding its
 * GPUs through the staging engine, at shard granularity, driven by the
 * loader's own code: the block order or the hosts order of src/sample (the
 * shard order and the windows, through the sampler's functions), the placement policies'
 * table (tier/policy.h: want, victim, drop, place, called exactly as the
 * engine calls them) and the engine's sizing rules (tier/sizing.h).
 *
 * Glossary (sim.h has the rest)
 *   event      (time, sequence) in a binary heap: a copy that completes, a
 *              part of a segment that ends; ties go by sequence, so a run is a pure
 *              function of its configuration (byte-identical output)
 *   link       one instance of a tier: `concurrency` transfers at once, each
 *              waiting its latency, their bytes through one pipe of the
 *              tier's bandwidth in order of request
 *   global window  g = the windows of epoch 0, then of epoch 1, ...
 *
 * The model at shard granularity. In the block order window w's positions
 * touch exactly its shards, each read whole inside it, its records spread
 * uniformly over the window's positions (order.c). A host's ranks read
 * 1/hosts of each shard's records, so a shard's first read by a host comes
 * about window/(S/hosts) positions into the window (S records a shard): a
 * segment needs its window's shards at its start, and holds them to its
 * end. What the records would add is that offset, hosts/S of a window:
 * under 1/1000 once a host reads 1000 records or more of each shard (the
 * design cluster: 1/131072); fewer records a shard are simulated with that
 * error. Within a segment the rank reads at its demand rate, or slower
 * where the links of the tiers its shards are in cannot keep up; it reads
 * in parts (at most horizon/8 of its ids each) so that the plans see it
 * move.
 *
 * Invariants (per domain)
 *   used = sum of len over resident shards <= budget, except while misses
 *          stretch it (as in the engine: a batch's shards are a must)
 *   busy[k] = stages of k in flight + segments of the domain reading k:
 *          never a victim
 *   waitmask[k] = the domain's ranks waiting for k (bit = rank in domain)
 *
 * Where it differs from the engine (docs/sim.md): one engine per domain
 * stands for the engines of its ranks (they see the same windows; the
 * pool's claims make one copy a host); its copies at a time are stagers x
 * ranks; a plan is made when the domain's slowest or fastest rank moves a
 * part (horizon/8 ids at most) or a window, not every horizon/32 ids; the candidates keep the policy's order (the
 * engine's reordering into file-order spans applies to windows of adjacent
 * units, which a block order of shards does not make); the pool's heat
 * starts at zero (a fresh pool).
 *
 * The hosts order (order.kind "hosts", src/sample/hosts.c): each host's
 * stream is the block order over its share; the run's windows are cut
 * where any host's stream enters a window of its own, and a window holds,
 * per host of the order, the shards of the windows its stream is in there
 * (cxlp_sampler_host_block). A domain stages only its hosts' lists. What a
 * rank reads from each host's list is its draws in the window, walked
 * through its own sampler (cxlp_sampler_at, cxlp_sampler_host_of): every
 * round of a window of at most K rounds (K = max(64, min(32768 / ranks,
 * 5 x 10^7 / (ranks x the most windows of an epoch)))), else
 * K of them drawn one from each of K strata (deterministic: keyed by the
 * seed). Its own hosts' shards it waits for as in the block order; another
 * host's it reads from that host's memory over the peer tier while the
 * host holds the shard, else from the home, and never waits for them. The
 * epoch's local, peer and home are then where reads are served from, as
 * `cxlpool order --kind hosts --stats` counts them.
 *
 * Rejected: simulating records (10^11 events an epoch for the design's
 * cluster; shards give the same answer, above); a copy of the policies
 * ("same code" is the point: a test swaps a decision and sees the output
 * move).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cxlpool.h"
#include "pool/pool_format.h"
#include "sample/sample.h"
#include "sim/sim.h"
#include "tier/sizing.h"

#define PLAN_MAX 256u
#define WCACHE 512u
#define SRC_LOCAL 0u
#define SRC_HOME 1u
#define SRC_PEER 2u
#define FRESH_NONE UINT32_MAX

/* without libm: the shared library links only what it needs */
static inline double dmax(double a, double b)
{
    return a > b ? a : b;
}

static inline double dmin(double a, double b)
{
    return a < b ? a : b;
}

/* ------------------------------------------------------------ events */

enum { EV_STAGED, EV_PART_END };

struct ev {
    double t;
    uint64_t seq;
    uint32_t type, a;        /* a: domain (EV_STAGED) or rank (EV_PART_END) */
    uint64_t k;              /* shard */
    uint32_t miss, src;
};

struct heap {
    struct ev *v;
    size_t n, cap;
    uint64_t seq;
};

static int ev_less(const struct ev *x, const struct ev *y)
{
    return x->t < y->t || (x->t == y->t && x->seq < y->seq);
}

static int heap_push(struct heap *h, struct ev e)
{
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 1024;
        struct ev *v = realloc(h->v, nc * sizeof *v);
        if (!v)
            return -1;
        h->v = v;
        h->cap = nc;
    }
    e.seq = h->seq++;
    size_t i = h->n++;
    while (i && ev_less(&e, &h->v[(i - 1) / 2])) {
        h->v[i] = h->v[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h->v[i] = e;
    return 0;
}

static struct ev heap_pop(struct heap *h)
{
    struct ev top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && ev_less(&h->v[c + 1], &h->v[c]))
            c++;
        if (!ev_less(&h->v[c], &last))
            break;
        h->v[i] = h->v[c];
        i = c;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}

/* ------------------------------------------------------------ links */

struct link {
    double bw, lat;
    uint32_t conc;
    double *slot;            /* when each of conc transfers frees */
    double pipe;             /* when the pipe is free */
    struct sim_tier_stats *st;
};

/* A transfer of bytes asked for at t: when it completes. */
static double xfer(struct link *l, double t, uint64_t bytes, int write)
{
    uint32_t best = 0;
    for (uint32_t i = 1; i < l->conc; i++)
        if (l->slot[i] < l->slot[best])
            best = i;
    double start = dmax(t, l->slot[best]);
    double go = dmax(start + l->lat, l->pipe);
    double done = go + (double)bytes / l->bw;
    l->pipe = done;
    l->slot[best] = done;
    double q = go - t - l->lat;
    l->st->queue_s += q;
    if (q > l->st->queue_max_s)
        l->st->queue_max_s = q;
    l->st->transfers++;
    if (write)
        l->st->bytes_written += bytes;
    else
        l->st->bytes_read += bytes;
    return done;
}

/* A rank's record read of bytes at t from another host's share (the hosts
 * order): when it completes. It takes the link's latency and its bytes at
 * the link's bandwidth, and the pipe is busy that much longer, but it
 * passes the copies queued there (a device serves a 2 KiB read beside the
 * chunks of a 1 GiB copy; in xfer's order it would wait for all of them). */
static double xfer_record(struct link *l, double t, uint64_t bytes)
{
    double dur = (double)bytes / l->bw;
    l->pipe = dmax(l->pipe, t) + dur;
    l->st->transfers++;
    l->st->bytes_read += bytes;
    return t + l->lat + dur;
}

/* ------------------------------------------------------------ state */

struct dom {
    uint32_t host;           /* its first host */
    uint64_t lists;          /* the window's lists it stages (bit = list) */
    uint32_t *ranks, nranks;
    uint8_t *resident, *kept, *slow, *staging;
    uint8_t *where;          /* memory tiers (bit = index among them) with a copy */
    uint32_t *busy, *respos, *fresh;
    double *ready;           /* when a copy being staged lands */
    uint64_t *next_use, *last_use, *res_list, *window, *touched, *waitmask;
    size_t n_res, n_window, n_touched, cap_touched;
    uint64_t used, budget, clock;
    uint64_t cand[PLAN_MAX];
    size_t n_cand, cand_i;
    uint32_t active;         /* prefetch copies in flight */
    uint64_t key_lo, key_hi; /* the ranks' windows at the last plan */
};

enum { R_WAIT, R_READ, R_BARRIER, R_DONE };

struct rk {
    uint32_t host, dom, bit;
    uint64_t g;              /* its window */
    uint32_t part, nparts;   /* the part of its segment it reads */
    int state;
    uint32_t nmissing;
    double t_wait, stall, end;
    double mark_stall, mark_t; /* stall and time when it entered its epoch */
    uint64_t samples, mine;  /* samples read; of its segment */
};

/* A window of the run: its positions, and its shards as lists (one in the
 * block order; in the hosts order one a host of the order, the shards of
 * that host's windows its stream is in over these positions), with the
 * draws walked (hosts: cnt[h * nl + g] of the ranks of host h from host
 * g's stream, over the rounds walked). */
struct win {
    uint64_t g, start, count, nsh, cap;
    uint64_t rounds;         /* hosts: the rounds (draws a rank) in it */
    uint32_t nl;
    uint64_t *sh, *off;      /* off: nl + 1 */
    uint64_t *cnt;           /* hosts: nl * nl */
};

struct sim {
    const struct sim_config *c;
    const struct tier_policy_ops *ops;
    struct sim_result *r;
    uint64_t n, S, M, W, world, horizon, stagers, shard_len, last_len;
    double demand;
    uint32_t n_mem, mem[SIM_MAX_TIERS];  /* memory tiers, fastest first */
    uint32_t srank;                      /* the staging tier's index among them */
    int stier, home, peer;               /* tier indices (peer: -1 none) */
    struct link *link[SIM_MAX_TIERS];    /* per tier: 1 (shared) or hosts */
    cxlp_sampler *smp[SIM_MAX_EPOCHS];
    uint64_t nwin[SIM_MAX_EPOCHS], gfirst[SIM_MAX_EPOCHS + 1];
    uint64_t elen;                       /* a run position's epoch stride: n, or
                                            rounds x world (hosts) */
    /* the hosts order */
    int hosts;
    uint32_t nl;                         /* lists a window: 1, or the order's hosts */
    uint32_t *label;                     /* world: each rank's host in the order */
    uint32_t *holder;                    /* nl: the domain that stages a list */
    cxlp_sampler **rs;                   /* world: a sampler a rank (its draws) */
    uint64_t *cut[SIM_MAX_EPOCHS];       /* the windows' first rounds, nwin + 1 */
    uint64_t q, K;                       /* rounds an epoch; rounds walked a window */
    struct win wc[WCACHE];
    uint64_t *len;
    struct dom *dom;
    uint32_t n_dom;
    struct rk *rank;
    struct heap h;
    uint64_t barrier_g;
    uint64_t kept_bytes;                 /* placed copies in the staging tiers */
    uint32_t barrier_n;
    int oom;
};

static struct link *link_of(struct sim *s, int tier, uint32_t host)
{
    return &s->link[tier][s->c->tier[tier].shared ? 0 : host];
}

static uint64_t rank_share(uint64_t a, uint64_t cnt, uint64_t world, uint64_t r)
{
    /* positions p in [a, a + cnt) with p mod world = r: rank r's draws
     * (sampler.c: pos(j) = base + rank + j * world, base 0) */
    uint64_t b = a + cnt;
    uint64_t fb = b / world + (b % world > r), fa = a / world + (a % world > r);
    return fb - fa;
}

static uint32_t epoch_of(const struct sim *s, uint64_t g)
{
    uint32_t e = 0;
    while (e + 1 < s->c->epochs && s->gfirst[e + 1] <= g)
        e++;
    return e;
}

static void push(struct sim *s, struct win *w, uint64_t k)
{
    if (w->nsh == w->cap) {
        uint64_t nc = w->cap ? w->cap * 2 : 256;
        uint64_t *v = realloc(w->sh, nc * sizeof *v);
        if (!v) {
            s->oom = 1;
            return;
        }
        w->sh = v;
        w->cap = nc;
    }
    w->sh[w->nsh++] = k;
}

/* The hosts order's window [ra, rb) (rounds) of epoch e: each host's
 * shards (the windows of its stream over those positions:
 * cxlp_sampler_host_block, as a host stages them) and the draws of every
 * rank in it, through each rank's own sampler (cxlp_sampler_at, then
 * cxlp_sampler_host_of: whose share the id is): every round when there are
 * at most K (hosts_setup), else K rounds, one drawn by the seed from each
 * of K equal strata. */
static void hosts_window(struct sim *s, struct win *w, uint32_t e, uint64_t ra, uint64_t rb)
{
    const cxlp_sampler *smp = s->smp[e];
    uint64_t a = MIN(ra * s->world, s->n), b = MIN(rb * s->world, s->n), W = smp->block.W;
    w->rounds = rb - ra;
    for (uint32_t g = 0; g < s->nl; g++) {
        w->off[g] = w->nsh;
        uint64_t Ng, Mg;
        cxlp_sampler_host_share(smp, g, &Ng, &Mg);
        uint64_t i0 = hosts_count(smp, g, a), i1 = hosts_count(smp, g, b);
        if (i1 <= i0 || !Mg)
            continue;
        uint64_t w0 = hosts_window_of(smp, g, i0), w1 = hosts_window_of(smp, g, i1 - 1);
        /* a window of which this one holds under an eighth: a cut merged
         * into a nearby one (hosts_setup); its few reads go to the other */
        if (w1 > w0 && (hosts_window_start(smp, g, w0 + 1) - i0) * 8 < i1 - i0)
            w0++;
        if (w1 > w0 && (i1 - hosts_window_start(smp, g, w1)) * 8 < i1 - i0)
            w1--;
        for (uint64_t k = w0 * W; k < MIN((w1 + 1) * W, Mg); k++) {
            uint64_t blk = 0;
            cxlp_sampler_host_block(smp, g, k, &blk);
            push(s, w, blk);
        }
    }
    w->off[s->nl] = w->nsh;
    memset(w->cnt, 0, (size_t)s->nl * s->nl * sizeof *w->cnt);
    uint64_t n = rb - ra, walk = MIN(n, s->K);
    for (uint64_t r = 0; r < s->world; r++) {
        cxlp_sampler *rs = s->rs[r];
        if (rs->epoch != e)
            cxlp_sampler_set_epoch(rs, e);
        for (uint64_t i = 0; i < walk; i++) {
            uint64_t j = ra + i, id = 0, idx;
            if (walk < n) {
                uint64_t lo = n * i / walk, hi = n * (i + 1) / walk;
                j = ra + lo + mix64(s->c->seed ^ mix64(e * 0x9e3779b97f4a7c15ull + ra + i)) %
                                  (hi - lo);
            }
            uint32_t g = 0;
            if (cxlp_sampler_at(rs, j, &id) || cxlp_sampler_host_of(rs, id, &g, &idx))
                continue; /* not reached: j < the rank's draws */
            w->cnt[(uint64_t)s->label[r] * s->nl + g]++;
        }
    }
}

/* Global window g: its geometry and shards, from the sampler's code. */
static struct win *window(struct sim *s, uint64_t g)
{
    CXLP_ASSERT(g < s->gfirst[s->c->epochs]);
    struct win *w = &s->wc[g % WCACHE];
    if (w->g == g)
        return w;
    uint32_t e = epoch_of(s, g);
    w->g = g;
    w->nsh = 0;
    w->nl = s->nl;
    if (s->hosts) {
        uint64_t i = g - s->gfirst[e], ra = s->cut[e][i], rb = s->cut[e][i + 1];
        w->start = ra * s->world + (uint64_t)e * s->elen;
        w->count = (rb - ra) * s->world;
        hosts_window(s, w, e, ra, rb);
        return w;
    }
    struct window bw;
    block_window(s->smp[e], g - s->gfirst[e], &bw, 1);
    w->start = bw.start + (uint64_t)e * s->elen; /* a position of the whole run */
    w->count = bw.count;
    w->off[0] = 0;
    for (uint64_t i = 0; i < bw.nsh; i++)
        push(s, w, block_slot_shard(s->smp[e], &bw, i));
    w->off[1] = w->nsh;
    return w;
}

/* j over the indices of w->sh of the shards domain d stages: every list in
 * the block order, its hosts' in the hosts order */
#define OWN(d_, w_, j_)                                                                        \
    for (uint32_t l_ = 0; l_ < (w_)->nl; l_++)                                                 \
        for (uint64_t j_ = ((d_)->lists >> l_ & 1) ? (w_)->off[l_] : (w_)->off[l_ + 1];        \
             j_ < (w_)->off[l_ + 1]; j_++)

/* ------------------------------------------------------------ residency */

static void set_resident(struct sim *s, struct dom *d, uint64_t k, int res)
{
    if (d->resident[k] == res)
        return;
    d->resident[k] = (uint8_t)res;
    if (res) {
        d->respos[k] = (uint32_t)d->n_res;
        d->res_list[d->n_res++] = k;
        d->used += s->len[k];
        d->where[k] |= (uint8_t)(1u << s->srank);
        return;
    }
    /* as the engine: the last one takes its place */
    uint32_t i = d->respos[k];
    d->res_list[i] = d->res_list[--d->n_res];
    d->respos[d->res_list[i]] = i;
    d->used -= s->len[k];
    d->where[k] &= (uint8_t)~(1u << s->srank);
}

static struct tier_view view(const struct sim *s, const struct dom *d)
{
    return (struct tier_view){
        .n_shards = s->M, .resident = d->resident, .kept = d->kept, .busy = d->busy,
        .slow = d->slow, .next_use = d->next_use, .last_use = d->last_use, .heat = NULL,
        .len = s->len, .window = d->window, .n_window = d->n_window, .res_list = d->res_list,
        .n_res = d->n_res, .budget = d->budget, .used = d->used, .horizon = s->horizon,
    };
}

static void evict(struct sim *s, struct dom *d, uint64_t k)
{
    set_resident(s, d, k, 0);
    d->fresh[k] = FRESH_NONE;
    s->r->evictions++;
}

/* Room for k in the budget (as engine.c's room()): 0, or 1 when the policy
 * evicts nothing for it (a miss then stretches the budget: 0). */
static int room(struct sim *s, struct dom *d, uint64_t k, int miss)
{
    while (d->used + s->len[k] > d->budget) {
        struct tier_view v = view(s, d);
        uint64_t x = s->ops->victim(&v, miss ? TIER_NONE : k);
        if (x == TIER_NONE || x >= s->M || !d->resident[x])
            return miss ? 0 : 1;
        evict(s, d, x);
    }
    return 0;
}

/* Where a copy of k for domain d comes from: a slower memory tier of the
 * domain; with a peer tier (the remote tier of the design, modelled here,
 * not built), another domain's copy, once it lands where it is being
 * staged (*at: not before); else the home. */
static int source(struct sim *s, struct dom *d, uint64_t k, uint32_t *src, double *at)
{
    for (uint32_t i = s->srank + 1; i < s->n_mem; i++)
        if (d->where[k] & (1u << i)) {
            *src = SRC_LOCAL;
            return (int)s->mem[i];
        }
    if (s->peer >= 0) {
        double best = INFINITY;
        for (uint32_t o = 0; o < s->n_dom; o++) {
            const struct dom *x = &s->dom[o];
            if (x == d)
                continue;
            double when = x->where[k] ? *at : x->staging[k] ? dmax(*at, x->ready[k]) : INFINITY;
            best = dmin(best, when);
        }
        if (best < INFINITY) {
            *src = SRC_PEER;
            *at = best;
            return s->peer;
        }
    }
    *src = SRC_HOME;
    return s->home;
}

static void stage(struct sim *s, struct dom *d, uint64_t k, int miss, double t)
{
    uint32_t src;
    double at = t;
    int from = source(s, d, k, &src, &at);
    double a = xfer(link_of(s, from, d->host), at, s->len[k], 0);
    double b = xfer(link_of(s, s->stier, d->host), at, s->len[k], 1);
    d->ready[k] = dmax(a, b);
    if (from == s->home || from == s->peer) {
        uint64_t g = UINT64_MAX;
        for (uint32_t i = 0; i < d->nranks; i++)
            g = MIN(g, s->rank[d->ranks[i]].g);
        g = MIN(g, s->gfirst[s->c->epochs] - 1);
        if (from == s->home)
            s->r->epoch[epoch_of(s, g)].home_moved += s->len[k];
        else
            s->r->epoch[epoch_of(s, g)].peer_moved += s->len[k];
    }
    d->busy[k]++;
    d->staging[k] = 1;
    if (!miss)
        d->active++;
    s->r->stages++;
    struct ev e = {.t = dmax(a, b), .type = EV_STAGED, .a = (uint32_t)(d - s->dom), .k = k,
                   .miss = (uint32_t)miss, .src = src};
    if (heap_push(&s->h, e))
        s->oom = 1;
}

/* Takes the policy's candidates in turn while copies may start (as the
 * engine's stagers do), asking the policy again when they run out. */
static void fill(struct sim *s, struct dom *d, double t)
{
    int asked = 0;
    while (d->active < s->stagers) {
        if (d->cand_i >= d->n_cand) {
            if (asked)
                return;
            struct tier_view v = view(s, d);
            d->n_cand = s->ops->want(&v, d->cand, PLAN_MAX);
            d->cand_i = 0;
            asked = 1;
            continue;
        }
        uint64_t k = d->cand[d->cand_i++];
        if (k >= s->M || d->staging[k] || d->resident[k] || d->kept[k])
            continue;
        if (room(s, d, k, 0)) {
            d->cand_i--; /* no room yet: the same shard next time */
            return;
        }
        stage(s, d, k, 0, t);
    }
}

static void touch(struct dom *d, uint64_t k, uint64_t dist)
{
    if (d->next_use[k] == TIER_NEVER) {
        if (d->n_touched == d->cap_touched)
            return;
        d->touched[d->n_touched++] = k;
    }
    if (dist < d->next_use[k])
        d->next_use[k] = dist;
}

/* The domain's window and next uses (engine.c's plan()): the shards of the
 * windows its ranks are in (distance 1: needed now) and of the windows
 * ahead within the horizon (their distance in the rank's own positions),
 * the window list from its first rank; then what the policy drops. */
static void plan(struct sim *s, struct dom *d)
{
    for (size_t i = 0; i < d->n_touched; i++)
        d->next_use[d->touched[i]] = TIER_NEVER;
    d->n_touched = 0;
    d->n_window = 0;
    uint64_t G = s->gfirst[s->c->epochs];
    int first = 1; /* the window list is the first running rank's */
    for (uint32_t i = 0; i < d->nranks; i++) {
        struct rk *r = &s->rank[d->ranks[i]];
        if (r->state == R_DONE || r->g >= G)
            continue; /* done, or waiting at the last barrier */
        /* where the rank is: its window's start and the parts it read */
        struct win *cw = window(s, r->g);
        uint64_t pos = cw->start + cw->count / MAX(r->nparts, 1) * r->part;
        for (uint64_t g = r->g; g < G; g++) {
            struct win *w = window(s, g);
            uint64_t dist = g == r->g ? 1 : w->start > pos ? (w->start - pos) / s->world : 1;
            if (g > r->g && dist > s->horizon)
                break;
            dist = MAX(dist, 1);
            OWN(d, w, j) {
                uint64_t k = w->sh[j];
                if (first && d->next_use[k] == TIER_NEVER && d->n_window < d->cap_touched)
                    d->window[d->n_window++] = k;
                touch(d, k, dist);
            }
        }
        first = 0;
    }
    struct tier_view v = view(s, d);
    uint64_t drop[PLAN_MAX];
    size_t nd = s->ops->drop(&v, drop, PLAN_MAX);
    for (size_t i = 0; i < nd; i++)
        if (drop[i] < s->M && d->resident[drop[i]] && !d->busy[drop[i]])
            evict(s, d, drop[i]);
    d->n_cand = d->cand_i = 0; /* the policy is asked again */
}

static void plan_if_moved(struct sim *s, struct dom *d)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint32_t i = 0; i < d->nranks; i++) {
        struct rk *r = &s->rank[d->ranks[i]];
        if (r->state == R_DONE)
            continue;
        lo = MIN(lo, r->g * 65 + r->part);
        hi = MAX(hi, r->g * 65 + r->part);
    }
    if (lo == d->key_lo && hi == d->key_hi)
        return;
    d->key_lo = lo;
    d->key_hi = hi;
    plan(s, d);
}

/* ------------------------------------------------------------ ranks */

static int fastest(const struct sim *s, const struct dom *d, uint64_t k)
{
    for (uint32_t i = 0; i < s->n_mem; i++)
        if (d->where[k] & (1u << i))
            return (int)s->mem[i];
    return -1;
}

/* Rank r has its window's shards: it reads part r->part of its segment
 * (a segment is read in parts so that the plans see the rank move, as the
 * engine's plans see its ids go every horizon/32). */
static void consume(struct sim *s, struct rk *r, double t)
{
    struct dom *d = &s->dom[r->dom];
    struct win *w = window(s, r->g);
    uint32_t e = epoch_of(s, r->g);
    if (r->part == 0) {
        r->mine = s->hosts ? w->rounds
                           : rank_share(w->start - (uint64_t)e * s->elen, w->count, s->world,
                                        (uint64_t)(r - s->rank));
        uint64_t step = MAX(s->horizon / 8, 1), ids = r->mine;
        r->nparts = (uint32_t)MIN(MAX((ids + step - 1) / step, 1), 64);
    }
    uint64_t mine = r->mine / r->nparts + (r->part + 1 == r->nparts ? r->mine % r->nparts : 0);
    double bytes = (double)mine * (double)s->c->sample_bytes;
    double by_tier[SIM_MAX_TIERS] = {0}, other[SIM_MAX_TIERS] = {0};
    struct sim_epoch_stats *es = &s->r->epoch[e];
    const uint64_t *cnt = s->hosts ? w->cnt + (uint64_t)s->label[r - s->rank] * w->nl : NULL;
    uint64_t tot = 0;
    for (uint32_t l = 0; cnt && l < w->nl; l++)
        tot += cnt[l];
    for (uint32_t l = 0; l < w->nl; l++) {
        /* the rank's bytes from list l, over its shards */
        double part = !cnt ? bytes : tot ? bytes * (double)cnt[l] / (double)tot : 0;
        uint64_t nsh = w->off[l + 1] - w->off[l];
        if (!(part > 0))
            continue;
        if (!nsh) {
            other[s->home] += part; /* padding past the epoch's end */
            es->home_bytes += part;
            continue;
        }
        double per = part / (double)nsh;
        if (!(d->lists >> l & 1)) {
            /* another host's share: from its memory (a peer tier) while
             * it holds the shard, else from the home */
            const struct dom *x = &s->dom[s->holder[l]];
            for (uint64_t j = w->off[l]; j < w->off[l + 1]; j++) {
                int held = s->peer >= 0 && fastest(s, x, w->sh[j]) >= 0;
                other[held ? s->peer : s->home] += per;
                if (held)
                    es->peer_bytes += per;
                else
                    es->home_bytes += per;
            }
            continue;
        }
        for (uint64_t j = w->off[l]; j < w->off[l + 1]; j++) {
            uint64_t k = w->sh[j];
            int ti = fastest(s, d, k);
            by_tier[ti >= 0 ? ti : s->home] += per;
            /* the source of the copy read: fetched for this epoch, or older */
            if (d->fresh[k] != FRESH_NONE && (d->fresh[k] >> 2) == 0x3fffffffu) {
                d->fresh[k] = (e << 2) | (d->fresh[k] & 3u);
                if ((d->fresh[k] & 3u) == SRC_HOME)
                    es->home_read += s->len[k];
            }
            uint32_t src = d->fresh[k] != FRESH_NONE && (d->fresh[k] >> 2) == e
                               ? d->fresh[k] & 3u
                               : SRC_LOCAL;
            if (s->hosts)
                src = SRC_LOCAL; /* the hosts order counts where a read is served */
            if (ti < 0)
                src = SRC_HOME;
            if (src == SRC_HOME)
                es->home_bytes += per;
            else if (src == SRC_PEER)
                es->peer_bytes += per;
            else
                es->local_bytes += per;
        }
    }
    if (by_tier[s->home] + other[s->home] > 0)
        es->home_moved += (uint64_t)(by_tier[s->home] + 0.5) + (uint64_t)(other[s->home] + 0.5);
    double need = (double)mine * (double)s->c->sample_bytes / s->demand, end = t + need;
    for (uint32_t i = 0; i < s->c->n_tiers; i++) {
        if (by_tier[i] > 0)
            end = dmax(end, xfer(link_of(s, (int)i, r->host), t, (uint64_t)(by_tier[i] + 0.5),
                                 0));
        if (other[i] > 0)
            end = dmax(end, xfer_record(link_of(s, (int)i, r->host), t,
                                        (uint64_t)(other[i] + 0.5)));
    }
    r->stall += end - t - need;
    r->samples += mine;
    r->state = R_READ;
    struct ev ev = {.t = end, .type = EV_PART_END, .a = (uint32_t)(r - s->rank)};
    if (heap_push(&s->h, ev))
        s->oom = 1;
}

/* Rank r enters epoch e (e = epochs: it is done) at t: what it stalled
 * and spent in the epoch before goes to that epoch. */
static void epoch_mark(struct sim *s, struct rk *r, uint32_t e, double t)
{
    if (e > 0) {
        s->r->epoch[e - 1].stall_s += r->stall - r->mark_stall;
        s->r->epoch[e - 1].rank_s += t - r->mark_t;
    }
    r->mark_stall = r->stall;
    r->mark_t = t;
}

/* A point of the timeline: window g begins at t. */
static void point(struct sim *s, uint64_t g, double t)
{
    struct sim_point *p = &s->r->timeline[s->r->n_timeline++];
    p->window = g;
    p->t = t;
    p->staged_bytes = 0;
    for (uint32_t i = 0; i < s->n_dom; i++) {
        const struct dom *d = &s->dom[i];
        p->staged_bytes += d->used;
    }
    p->staged_bytes += s->kept_bytes;
    double st = 0;
    for (uint64_t i = 0; i < s->world; i++) {
        const struct rk *r = &s->rank[i];
        /* a rank waiting now has stalled since it began to wait */
        st += r->stall + (r->state == R_WAIT || r->state == R_BARRIER ? t - r->t_wait : 0);
    }
    p->stall_s = st / (double)s->world;
}

/* Rank r enters its window r->g at t: its shards busy, hits counted,
 * misses fetched. */
static void begin(struct sim *s, struct rk *r, double t)
{
    struct dom *d = &s->dom[r->dom];
    if (r->g >= s->gfirst[s->c->epochs]) {
        epoch_mark(s, r, s->c->epochs, t);
        r->state = R_DONE;
        r->end = t;
        plan_if_moved(s, d);
        return;
    }
    uint32_t e = epoch_of(s, r->g);
    if (e > 0 && r->g == s->gfirst[e])
        epoch_mark(s, r, e, t); /* epoch 0 begins at 0: placement is in it */
    if (r->g % s->r->every == 0 && (s->r->n_timeline == 0 ||
                                     s->r->timeline[s->r->n_timeline - 1].window < r->g))
        point(s, r->g, t);
    struct win *w = window(s, r->g);
    r->state = R_WAIT;
    r->part = 0;
    r->nparts = 1;
    r->nmissing = 0;
    r->t_wait = t;
    OWN(d, w, j)
        d->busy[w->sh[j]]++;
    d->clock++;
    plan_if_moved(s, d);
    w = window(s, r->g); /* planning may have reused the cache slot */
    OWN(d, w, j) {
        uint64_t k = w->sh[j];
        d->last_use[k] = d->clock;
        int ti = fastest(s, d, k);
        if (ti >= 0) {
            s->r->tier[ti].hits++;
            continue;
        }
        s->r->tier[s->stier].misses++;
        d->waitmask[k] |= UINT64_C(1) << r->bit;
        r->nmissing++;
        if (!d->staging[k]) {
            room(s, d, k, 1);
            stage(s, d, k, 1, t);
        }
    }
    if (!r->nmissing)
        consume(s, r, t);
    fill(s, d, t);
}

/* Rank r is ready for its next window at t: with sync, once every rank is. */
static void arrive(struct sim *s, struct rk *r, double t)
{
    if (!s->c->sync) {
        begin(s, r, t);
        return;
    }
    r->state = R_BARRIER;
    r->t_wait = t;
    if (++s->barrier_n < s->world)
        return;
    s->barrier_n = 0;
    for (uint64_t i = 0; i < s->world; i++) {
        s->rank[i].stall += t - s->rank[i].t_wait;
        s->rank[i].t_wait = t;
        begin(s, &s->rank[i], t);
    }
}

static void on_staged(struct sim *s, const struct ev *e)
{
    struct dom *d = &s->dom[e->a];
    uint64_t k = e->k;
    d->busy[k]--;
    d->staging[k] = 0;
    if (!e->miss)
        d->active--;
    set_resident(s, d, k, 1);
    d->last_use[k] = MAX(d->clock, 1);
    d->fresh[k] = (0x3fffffffu << 2) | e->src;
    uint64_t m = d->waitmask[k];
    d->waitmask[k] = 0;
    for (uint32_t b = 0; m; b++, m >>= 1) {
        if (!(m & 1))
            continue;
        struct rk *r = &s->rank[d->ranks[b]];
        if (--r->nmissing == 0) {
            r->stall += e->t - r->t_wait;
            consume(s, r, e->t);
        }
    }
    fill(s, d, e->t);
}

static void on_part_end(struct sim *s, const struct ev *e)
{
    struct rk *r = &s->rank[e->a];
    struct dom *d = &s->dom[r->dom];
    if (++r->part < r->nparts) {
        plan_if_moved(s, d);
        consume(s, r, e->t);
        fill(s, d, e->t);
        return;
    }
    struct win *w = window(s, r->g);
    OWN(d, w, j)
        d->busy[w->sh[j]]--;
    uint32_t ep = epoch_of(s, r->g);
    if (e->t > s->r->epoch[ep].end_s)
        s->r->epoch[ep].end_s = e->t;
    r->g++;
    arrive(s, r, e->t);
    fill(s, d, e->t);
}

/* ------------------------------------------------------------ setup */

/* hot_first, full_prefetch: the policy's copies before the first batch
 * (engine.c's place()), made from the home; when the domain's ranks may
 * start. */
static double place(struct sim *s, struct dom *d)
{
    if (!s->ops->place)
        return 0;
    uint64_t caps[SIM_MAX_TIERS] = {0};
    for (uint32_t i = 0; i < s->n_mem; i++)
        caps[i] = s->c->tier[s->mem[i]].capacity;
    caps[s->srank] = MIN(caps[s->srank], engine_place_cap(d->budget));
    struct tier_place *pl = malloc(s->M * sizeof *pl);
    if (!pl) {
        s->oom = 1;
        return 0;
    }
    struct tier_view v = view(s, d);
    size_t np = s->ops->place(&v, caps, s->n_mem, pl, s->M);
    double ready = 0;
    uint64_t placed = 0;
    for (size_t i = 0; i < np; i++) {
        uint64_t k = pl[i].shard;
        uint32_t t = pl[i].tier;
        if (k >= s->M || t >= s->n_mem)
            continue;
        /* a tier all hosts share holds one copy: the first domain's (every
         * domain's placement is the same list: the same view) */
        int copied = s->c->tier[s->mem[t]].shared && d != s->dom &&
                     (s->dom[0].where[k] & (1u << t));
        if (!copied) {
            double a = xfer(link_of(s, s->home, d->host), 0, s->len[k], 0);
            double b = xfer(link_of(s, (int)s->mem[t], d->host), 0, s->len[k], 1);
            ready = dmax(ready, dmax(a, b));
            s->r->epoch[0].home_moved += s->len[k];
        }
        d->where[k] |= (uint8_t)(1u << t);
        d->fresh[k] = (0x3fffffffu << 2) | SRC_HOME;
        if (t <= s->srank)
            d->kept[k] = 1; /* as fast as the staging tier: nothing to stage */
        else
            d->slow[k] = 1;
        placed += t == s->srank ? s->len[k] : 0;
        s->kept_bytes += t == s->srank ? s->len[k] : 0;
        s->r->placed++;
    }
    free(pl);
    uint64_t maxlen = MAX(s->shard_len, s->last_len);
    d->budget = engine_budget_after_place(d->budget, placed, maxlen);
    return ready;
}

static void freeall(struct sim *s)
{
    for (uint32_t e = 0; e < SIM_MAX_EPOCHS; e++) {
        cxlp_sampler_free(s->smp[e]);
        free(s->cut[e]);
    }
    for (uint64_t r = 0; s->rs && r < s->world; r++)
        cxlp_sampler_free(s->rs[r]);
    free(s->rs);
    free(s->label);
    free(s->holder);
    for (uint32_t i = 0; i < WCACHE; i++) {
        free(s->wc[i].sh);
        free(s->wc[i].off);
        free(s->wc[i].cnt);
    }
    for (uint32_t t = 0; t < SIM_MAX_TIERS; t++) {
        if (!s->link[t])
            continue;
        uint32_t ni = s->c->tier[t].shared ? 1 : s->c->hosts;
        for (uint32_t i = 0; i < ni; i++)
            free(s->link[t][i].slot);
        free(s->link[t]);
    }
    for (uint32_t i = 0; s->dom && i < s->n_dom; i++) {
        struct dom *d = &s->dom[i];
        free(d->ranks);
        free(d->resident);
        free(d->kept);
        free(d->slow);
        free(d->staging);
        free(d->where);
        free(d->busy);
        free(d->respos);
        free(d->fresh);
        free(d->ready);
        free(d->next_use);
        free(d->last_use);
        free(d->res_list);
        free(d->window);
        free(d->touched);
        free(d->waitmask);
    }
    free(s->dom);
    free(s->rank);
    free(s->len);
    free(s->h.v);
}

static int is_mem(int kind)
{
    return kind == SIM_DRAM || kind == SIM_CXL_LOCAL || kind == SIM_CXL_SWITCH;
}

/* Shards a window of the block order: order.window, or half the staging
 * budget (window="auto" of the Python samplers). */
static uint64_t window_shards(const struct sim_config *c, uint64_t budget, uint64_t shard_len)
{
    return c->window ? c->window : MAX(budget / 2 / shard_len, 1);
}

static uint64_t budget_of(const struct sim_config *c)
{
    for (uint32_t i = 0; i < c->n_tiers; i++)
        if (is_mem(c->tier[i].kind) &&
            (c->staging[0] ? strcmp(c->staging, c->tier[i].name) == 0 : 1))
            return c->budget ? c->budget : engine_default_budget(c->tier[i].capacity);
    return c->budget;
}

int sim_window(const struct sim_config *c, uint64_t epoch, uint64_t w, uint64_t *start,
               uint64_t *count, uint64_t *shards, uint64_t cap, uint64_t *nsh)
{
    struct cxlp_sampler_config sc = {0};
    sc.kind = CXLP_ORDER_BLOCK;
    sc.n = c->samples;
    sc.seed = c->seed;
    sc.epoch = epoch;
    sc.shard_size = c->shard_bytes / c->sample_bytes;
    sc.window = window_shards(c, budget_of(c), sc.shard_size * c->sample_bytes);
    sc.ramp = c->ramp;
    cxlp_sampler *smp = NULL;
    if (cxlp_sampler_create(&sc, &smp))
        return -1;
    if (w >= smp->block.nwin) {
        cxlp_sampler_free(smp);
        return -1;
    }
    struct window bw;
    block_window(smp, w, &bw, 1);
    *start = bw.start;
    *count = bw.count;
    *nsh = bw.nsh;
    for (uint64_t i = 0; i < bw.nsh && i < cap; i++)
        shards[i] = block_slot_shard(smp, &bw, i);
    cxlp_sampler_free(smp);
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The hosts order: a sampler an epoch (rank 0's: the hosts' streams) and
 * one a rank (their draws), as DistributedCXLSampler(topology=...) makes
 * them: rank r on the order's host r / ranks_per_host, the weights given
 * (or equal), keep_blocks. The windows of the run are cut where any host's
 * stream enters a window of its own (in rounds, cuts closer than an eighth
 * of the mean window merged: the window then holds both of that host's
 * windows). 0 or -1 (err). */
static int hosts_setup(struct sim *s, char *err, size_t errlen)
{
    const struct sim_config *c = s->c;
    uint32_t H = sim_order_hosts(c), k = c->ranks_per_host ? c->ranks_per_host : c->gpus;
    uint64_t wt[SIM_MAX_HOSTS];
    for (uint32_t h = 0; h < H; h++)
        wt[h] = c->n_weights == 0 ? 1 : c->host_weights[c->n_weights == 1 ? 0 : h];
    s->hosts = 1;
    s->nl = H;
    s->label = malloc(s->world * sizeof *s->label);
    s->rs = calloc(s->world, sizeof *s->rs);
    if (!s->label || !s->rs)
        goto oom;
    for (uint64_t r = 0; r < s->world; r++)
        s->label[r] = (uint32_t)(r / k);
    struct cxlp_hosts hh = {.n_hosts = H, .weight = wt, .rank_host = s->label,
                            .keep = c->keep_blocks};
    struct cxlp_sampler_config sc = {0};
    sc.kind = CXLP_ORDER_HOSTS;
    sc.n = s->n;
    sc.seed = c->seed;
    sc.shard_size = s->S;
    sc.window = s->W;
    sc.world = (uint32_t)s->world;
    for (uint64_t r = 0; r < s->world; r++) {
        sc.rank = (uint32_t)r;
        if (cxlp_sampler_create_hosts(&sc, &hh, &s->rs[r])) {
            snprintf(err, errlen, "%s: the hosts order: %s", c->name, cxlp_errmsg(NULL));
            return -1;
        }
    }
    sc.rank = 0;
    for (uint32_t e = 0; e < c->epochs; e++) {
        sc.epoch = e;
        if (cxlp_sampler_create_hosts(&sc, &hh, &s->smp[e])) {
            snprintf(err, errlen, "%s: the hosts order: %s", c->name, cxlp_errmsg(NULL));
            return -1;
        }
        const cxlp_sampler *smp = s->smp[e];
        s->q = cxlp_sampler_len(smp);
        s->elen = s->q * s->world;
        uint64_t n = 2;
        for (uint32_t h = 0; h < H; h++)
            n += hosts_nwin(smp, h);
        uint64_t *cut = malloc(n * sizeof *cut);
        if (!cut)
            goto oom;
        s->cut[e] = cut;
        uint64_t m = 0;
        cut[m++] = 0;
        cut[m++] = s->q;
        for (uint32_t h = 0; h < H; h++)
            for (uint64_t w = 1; w < hosts_nwin(smp, h); w++) {
                /* the first position where host h's stream is in window w */
                uint64_t i = hosts_window_start(smp, h, w), lo = 0, hi = s->n;
                while (lo < hi) {
                    uint64_t mid = lo + (hi - lo) / 2;
                    if (hosts_count(smp, h, mid + 1) > i)
                        hi = mid;
                    else
                        lo = mid + 1;
                }
                cut[m++] = MIN(lo / s->world, s->q);
            }
        qsort(cut, m, sizeof *cut, cmp_u64);
        uint64_t gap = MAX(s->q / m / 8, 1), u = 1;
        for (uint64_t i = 1; i + 1 < m; i++)
            if (cut[i] >= cut[u - 1] + gap && cut[i] + gap <= s->q)
                cut[u++] = cut[i];
        cut[u++] = s->q; /* the epoch's end (q > 0: n >= 1) */
        s->nwin[e] = u - 1;
        s->gfirst[e + 1] = s->gfirst[e] + s->nwin[e];
    }
    /* rounds walked a window: 32768 draws, or fewer where an epoch's
     * windows would walk more than 5 x 10^7 (the time of a run), at least
     * 64 rounds */
    uint64_t most = 1;
    for (uint32_t e = 0; e < c->epochs; e++)
        most = MAX(most, s->nwin[e]);
    s->K = MAX(64, MIN(32768 / s->world, 50000000 / (s->world * most)));
    return 0;
oom:
    snprintf(err, errlen, "%s: out of memory for the hosts order", c->name);
    return -1;
}

int sim_run(const struct sim_config *c, const struct tier_policy_ops *ops, struct sim_result *r,
            char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    if (sim_config_check(c, c->name, err, errlen))
        return -1;
    struct sim *s = calloc(1, sizeof *s);
    if (!s) {
        snprintf(err, errlen, "sim: out of memory");
        return -1;
    }
    s->c = c;
    s->r = r;
    s->ops = ops ? ops : tier_policy_of(c->policy);
    s->n = c->samples;
    s->S = c->shard_bytes / c->sample_bytes;
    s->M = (s->n - 1) / s->S + 1;
    s->world = (uint64_t)c->hosts * c->gpus;
    s->demand = c->demand_samples > 0 ? c->demand_samples * (double)c->sample_bytes : c->demand;
    s->shard_len = s->S * c->sample_bytes;
    s->last_len = (s->n - (s->M - 1) * s->S) * c->sample_bytes;
    s->peer = s->home = s->stier = -1;
    for (uint32_t i = 0; i < c->n_tiers; i++) {
        if (is_mem(c->tier[i].kind)) {
            if (c->staging[0] ? strcmp(c->staging, c->tier[i].name) == 0 : s->stier < 0) {
                s->stier = (int)i;
                s->srank = s->n_mem;
            }
            s->mem[s->n_mem++] = i;
        }
        if (c->tier[i].home)
            s->home = (int)i;
        if (c->tier[i].kind == SIM_PEER && s->peer < 0)
            s->peer = (int)i;
    }
    int rc = -1;
    const struct sim_tier *st = &c->tier[s->stier];
    uint64_t budget0 = budget_of(c);
    s->W = window_shards(c, budget0, s->shard_len);
    s->horizon = engine_horizon(c->horizon, c->batch, budget0, c->sample_bytes);
    r->n_tiers = c->n_tiers;
    r->n_ranks = (uint32_t)s->world;
    r->n_epochs = c->epochs;
    r->shards = s->M;
    r->shard_samples = s->S;
    r->horizon = s->horizon;
    r->rank = calloc(s->world, sizeof *r->rank);
    s->len = malloc(s->M * sizeof *s->len);
    s->rank = calloc(s->world, sizeof *s->rank);
    if (!r->rank || !s->len || !s->rank)
        goto oom;
    for (uint64_t k = 0; k < s->M; k++)
        s->len[k] = k + 1 == s->M ? s->last_len : s->shard_len;
    /* the order: one sampler an epoch, of the whole run's positions */
    s->gfirst[0] = 0;
    s->elen = s->n;
    s->nl = 1;
    if (c->order == SIM_ORDER_HOSTS) {
        if (hosts_setup(s, err, errlen))
            goto out;
    }
    for (uint32_t e = 0; !s->hosts && e < c->epochs; e++) {
        struct cxlp_sampler_config sc = {0};
        sc.kind = CXLP_ORDER_BLOCK;
        sc.n = s->n;
        sc.seed = c->seed;
        sc.epoch = e;
        sc.shard_size = s->S;
        sc.window = s->W;
        sc.ramp = c->ramp;
        if (cxlp_sampler_create(&sc, &s->smp[e])) {
            snprintf(err, errlen, "%s: the block order: %s", c->name, cxlp_errmsg(NULL));
            goto out;
        }
        s->nwin[e] = s->smp[e]->block.nwin;
        s->gfirst[e + 1] = s->gfirst[e] + s->nwin[e];
    }
    r->windows = s->gfirst[c->epochs];
    r->order_hosts = s->hosts ? s->nl : 0;
    r->sampled_rounds = s->hosts ? s->K : 0;
    r->every = MAX((r->windows + 511) / 512, 1);
    if (!(r->timeline = calloc(r->windows / r->every + 2, sizeof *r->timeline)))
        goto oom;
    for (uint32_t i = 0; i < WCACHE; i++) {
        struct win *w = &s->wc[i];
        w->g = UINT64_MAX;
        w->cap = MIN(s->W, s->M) * (s->hosts ? 2 : 1);
        w->sh = malloc(w->cap * sizeof *w->sh);
        w->off = malloc((s->nl + 1) * sizeof *w->off);
        w->cnt = s->hosts ? malloc((size_t)s->nl * s->nl * sizeof *w->cnt) : NULL;
        if (!w->sh || !w->off || (s->hosts && !w->cnt))
            goto oom;
    }
    /* links */
    for (uint32_t t = 0; t < c->n_tiers; t++) {
        uint32_t ni = c->tier[t].shared ? 1 : c->hosts;
        if (!(s->link[t] = calloc(ni, sizeof **s->link)))
            goto oom;
        for (uint32_t i = 0; i < ni; i++) {
            struct link *l = &s->link[t][i];
            l->bw = c->tier[t].bandwidth;
            l->lat = c->tier[t].latency_ns * 1e-9;
            l->conc = c->tier[t].concurrency;
            l->st = &r->tier[t];
            if (!(l->slot = calloc(l->conc, sizeof *l->slot)))
                goto oom;
        }
    }
    /* domains: a host each, or one for all behind a shared staging tier */
    s->n_dom = st->shared ? 1 : c->hosts;
    r->n_domains = s->n_dom;
    s->stagers = (uint64_t)c->stagers * (s->world / s->n_dom);
    if (!(s->dom = calloc(s->n_dom, sizeof *s->dom)))
        goto oom;
    uint64_t cap_touched = MIN(s->horizon + engine_recent_cap(c->batch) + 4096, s->M + 1);
    for (uint32_t i = 0; i < s->n_dom; i++) {
        struct dom *d = &s->dom[i];
        d->host = st->shared ? 0 : i;
        d->budget = budget0;
        d->cap_touched = cap_touched;
        d->key_lo = d->key_hi = UINT64_MAX;
        d->ranks = calloc(s->world, sizeof *d->ranks);
        d->resident = calloc(s->M, 1);
        d->kept = calloc(s->M, 1);
        d->slow = calloc(s->M, 1);
        d->staging = calloc(s->M, 1);
        d->where = calloc(s->M, 1);
        d->busy = calloc(s->M, sizeof *d->busy);
        d->respos = calloc(s->M, sizeof *d->respos);
        d->fresh = malloc(s->M * sizeof *d->fresh);
        d->ready = calloc(s->M, sizeof *d->ready);
        d->next_use = malloc(s->M * sizeof *d->next_use);
        d->last_use = calloc(s->M, sizeof *d->last_use);
        d->res_list = malloc(s->M * sizeof *d->res_list);
        d->window = malloc(cap_touched * sizeof *d->window);
        d->touched = malloc(cap_touched * sizeof *d->touched);
        d->waitmask = calloc(s->M, sizeof *d->waitmask);
        if (!d->ranks || !d->resident || !d->kept || !d->slow || !d->staging || !d->where ||
            !d->busy || !d->respos || !d->fresh || !d->ready || !d->next_use || !d->last_use ||
            !d->res_list || !d->window || !d->touched || !d->waitmask)
            goto oom;
        for (uint64_t k = 0; k < s->M; k++) {
            d->next_use[k] = TIER_NEVER;
            d->fresh[k] = FRESH_NONE;
        }
    }
    for (uint64_t i = 0; i < s->world; i++) {
        struct rk *rr = &s->rank[i];
        rr->host = (uint32_t)(i / c->gpus);
        rr->dom = st->shared ? 0 : rr->host;
        struct dom *d = &s->dom[rr->dom];
        rr->bit = d->nranks;
        d->ranks[d->nranks++] = (uint32_t)i;
        d->lists |= UINT64_C(1) << (s->hosts ? s->label[i] : 0);
    }
    if (s->hosts) {
        if (!(s->holder = calloc(s->nl, sizeof *s->holder)))
            goto oom;
        for (uint32_t l = 0; l < s->nl; l++)
            for (uint32_t i = s->n_dom; i-- > 0;)
                if (s->dom[i].lists >> l & 1)
                    s->holder[l] = i; /* the first domain that stages it */
    }
    r->budget = s->dom[0].budget;
    double ready[SIM_MAX_HOSTS] = {0};
    for (uint32_t i = 0; i < s->n_dom; i++)
        ready[i] = place(s, &s->dom[i]);
    if (s->oom)
        goto oom;
    r->budget = s->dom[0].budget;
    /* every rank enters window 0 once its domain's placement is done */
    double t0 = 0;
    for (uint32_t i = 0; i < s->n_dom; i++)
        t0 = dmax(t0, ready[i]);
    r->placement_s = t0;
    /* the placement's time is the ranks' wait */
    for (uint64_t i = 0; i < s->world; i++) {
        struct rk *rr = &s->rank[i];
        double at = c->sync ? t0 : ready[rr->dom];
        if (c->sync)
            arrive(s, rr, at);
        else
            begin(s, rr, at);
        rr->stall += at;
    }
    if (s->oom)
        goto oom;
    while (s->h.n && !s->oom) {
        struct ev e = heap_pop(&s->h);
        r->events++;
        if (e.type == EV_STAGED)
            on_staged(s, &e);
        else
            on_part_end(s, &e);
    }
    if (s->oom)
        goto oom;
    for (uint64_t i = 0; i < s->world; i++) {
        struct rk *rr = &s->rank[i];
        if (rr->state != R_DONE) {
            snprintf(err, errlen, "%s: rank %llu stopped in window %llu (a simulator bug)",
                     c->name, (unsigned long long)i, (unsigned long long)rr->g);
            goto out;
        }
        r->rank[i] = (struct sim_rank_stats){rr->host, rr->samples, rr->end, rr->stall};
        r->end_s = dmax(r->end_s, rr->end);
    }
    /* what a host holds: a sampler and an engine per rank, the catalog once */
    r->sampler_bytes = (uint64_t)c->gpus * sizeof(struct cxlp_sampler);
    r->engine_bytes = (uint64_t)c->gpus * engine_memory(s->M, s->horizon, c->batch);
    uint32_t pool_tiers = s->n_mem + 1;
    r->catalog_bytes = s->M * (sizeof(struct pool_shent) + 8 * (1 + (uint64_t)pool_tiers));
    rc = 0;
    goto out;
oom:
    snprintf(err, errlen, "%s: out of memory for %llu shards", c->name,
             (unsigned long long)s->M);
out:
    freeall(s);
    free(s);
    if (rc)
        sim_result_free(r);
    return rc;
}

void sim_result_free(struct sim_result *r)
{
    free(r->rank);
    r->rank = NULL;
    free(r->timeline);
    r->timeline = NULL;
}

/* ------------------------------------------------------------ output */

static void jstr(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

void sim_write_json(FILE *f, const struct sim_config *c, const struct sim_result *r)
{
    fprintf(f, "{\n  \"config\": ");
    jstr(f, c->name);
    fprintf(f, ",\n  \"note\": \"a simulation: tier figures are the configuration's (the "
               "presets' CXL figures are published ones, shared/CXL.md), not measurements\",\n");
    fprintf(f, "  \"policy\": \"%s\",\n  \"seed\": %llu,\n", cxlp_policy_name(c->policy),
            (unsigned long long)c->seed);
    if (r->order_hosts) {
        fprintf(f, "  \"order\": {\"kind\": \"hosts\", \"hosts\": %u, \"ranks_per_host\": %u, "
                   "\"host_weights\": [", r->order_hosts,
                c->ranks_per_host ? c->ranks_per_host : c->gpus);
        for (uint32_t h = 0; h < r->order_hosts; h++)
            fprintf(f, "%s%llu", h ? ", " : "",
                    (unsigned long long)(c->n_weights == 0   ? 1
                                         : c->n_weights == 1 ? c->host_weights[0]
                                                             : c->host_weights[h]));
        fprintf(f, "], \"keep_blocks\": %s, \"rounds_walked_per_window\": %llu, \"epoch_reads\": "
                   "\"local: from the rank's host's memory (its share, staged there); peer: "
                   "another host's share from that host's memory (a peer tier) while it holds "
                   "it; home: the rest, from the home\"},\n",
                c->keep_blocks ? "true" : "false", (unsigned long long)r->sampled_rounds);
    } else {
        fprintf(f, "  \"order\": {\"kind\": \"block\", \"epoch_reads\": \"by the source of "
                   "the copy read: fetched from the home or a peer in the epoch, or local\"},\n");
    }
    fprintf(f, "  \"granularity\": {\"unit\": \"shard\", \"shards\": %llu, \"samples_per_shard\": "
               "%llu, \"windows\": %llu, \"why\": \"%s\"},\n",
            (unsigned long long)r->shards, (unsigned long long)r->shard_samples,
            (unsigned long long)r->windows,
            r->order_hosts
                ? "a host's window reads each of its shards whole, its records spread over "
                  "the window; a window of the run holds each host's windows its stream is "
                  "in there, and the ranks' draws in it walked through each rank's sampler"
                : "a block-order window reads each of its shards whole, its records spread "
                  "over the window: a shard is needed from the window's start to its end; "
                  "records would move its first use by about window/(samples_per_shard/hosts) "
                  "positions");
    fprintf(f, "  \"hosts\": %u, \"ranks\": %u, \"domains\": %u, \"epochs\": %u,\n", c->hosts,
            r->n_ranks, r->n_domains, r->n_epochs);
    fprintf(f, "  \"budget_bytes\": %llu, \"horizon_ids\": %llu,\n",
            (unsigned long long)r->budget, (unsigned long long)r->horizon);
    fprintf(f, "  \"events\": %llu, \"stages\": %llu, \"evictions\": %llu, \"placed\": %llu,\n",
            (unsigned long long)r->events, (unsigned long long)r->stages,
            (unsigned long long)r->evictions, (unsigned long long)r->placed);
    fprintf(f, "  \"sim_seconds\": %.9g, \"placement_s\": %.9g,\n", r->end_s, r->placement_s);
    uint64_t mh = 0, mm = 0;
    fprintf(f, "  \"tiers\": [\n");
    for (uint32_t i = 0; i < r->n_tiers; i++) {
        const struct sim_tier_stats *t = &r->tier[i];
        const struct sim_tier *ct = &c->tier[i];
        if (ct->kind == SIM_DRAM || ct->kind == SIM_CXL_LOCAL || ct->kind == SIM_CXL_SWITCH) {
            mh += t->hits;
            mm += t->misses;
        }
        fprintf(f, "    {\"name\": ");
        jstr(f, ct->name);
        fprintf(f, ", \"kind\": \"%s\"%s%s, \"hits\": %llu, \"misses\": %llu, \"bytes_read\": "
                   "%llu, \"bytes_written\": %llu, \"transfers\": %llu, \"queue_s\": %.9g, "
                   "\"queue_mean_s\": %.9g, \"queue_max_s\": %.9g}%s\n",
                sim_kind_name(ct->kind), ct->home ? ", \"home\": true" : "",
                ct->kind == SIM_PEER ? ", \"modelled_not_built\": true" : "",
                (unsigned long long)t->hits, (unsigned long long)t->misses,
                (unsigned long long)t->bytes_read, (unsigned long long)t->bytes_written,
                (unsigned long long)t->transfers, t->queue_s,
                t->transfers ? t->queue_s / (double)t->transfers : 0.0, t->queue_max_s,
                i + 1 < r->n_tiers ? "," : "");
    }
    fprintf(f, "  ],\n  \"memory_hit_rate\": %.9g,\n",
            mh + mm ? (double)mh / (double)(mh + mm) : 0.0);
    double stall = 0, sps = 0;
    fprintf(f, "  \"ranks\": [\n");
    for (uint32_t i = 0; i < r->n_ranks; i++) {
        const struct sim_rank_stats *k = &r->rank[i];
        double fr = k->time_s > 0 ? k->stall_s / k->time_s : 0;
        double rate = k->time_s > 0 ? (double)k->samples / k->time_s : 0;
        stall += fr;
        sps += rate;
        fprintf(f, "    {\"rank\": %u, \"host\": %u, \"samples\": %llu, \"seconds\": %.9g, "
                   "\"stall_fraction\": %.9g, \"samples_per_s\": %.9g}%s\n",
                i, k->host, (unsigned long long)k->samples, k->time_s, fr, rate,
                i + 1 < r->n_ranks ? "," : "");
    }
    fprintf(f, "  ],\n  \"stall_fraction\": %.9g,\n  \"samples_per_s\": %.9g,\n",
            r->n_ranks ? stall / r->n_ranks : 0.0, sps);
    fprintf(f, "  \"epochs\": [\n");
    for (uint32_t e = 0; e < r->n_epochs; e++) {
        const struct sim_epoch_stats *x = &r->epoch[e];
        double all = x->local_bytes + x->peer_bytes + x->home_bytes;
        fprintf(f, "    {\"epoch\": %u, \"end_s\": %.9g, \"local\": %.9g, \"peer\": %.9g, "
                   "\"home\": %.9g, \"home_bytes_read\": %llu, \"home_bytes_moved\": %llu, "
                   "\"peer_bytes_moved\": %llu, \"stall_fraction\": %.9g}%s\n",
                e, x->end_s, all > 0 ? x->local_bytes / all : 0, all > 0 ? x->peer_bytes / all : 0,
                all > 0 ? x->home_bytes / all : 0, (unsigned long long)x->home_read,
                (unsigned long long)x->home_moved, (unsigned long long)x->peer_moved, x->rank_s > 0 && x->stall_s > 0 ? x->stall_s / x->rank_s : 0.0,
                e + 1 < r->n_epochs ? "," : "");
    }
    fprintf(f, "  ],\n  \"timeline\": {\"every_windows\": %llu, \"points\": [",
            (unsigned long long)r->every);
    for (size_t i = 0; i < r->n_timeline; i++) {
        const struct sim_point *p = &r->timeline[i];
        fprintf(f, "%s\n    [%llu, %.9g, %llu, %.9g]", i ? "," : "", (unsigned long long)p->window,
                p->t, (unsigned long long)p->staged_bytes, p->stall_s);
    }
    fprintf(f, "\n  ], \"columns\": [\"window\", \"t_s\", \"staged_bytes\", "
               "\"mean_stall_s\"]},\n");
    fprintf(f, "  \"per_host\": {\"sampler_bytes\": %llu, \"engine_bytes\": %llu, "
               "\"catalog_bytes\": %llu}\n}\n",
            (unsigned long long)r->sampler_bytes, (unsigned long long)r->engine_bytes,
            (unsigned long long)r->catalog_bytes);
}
