/* The simulator (src/sim): the same configuration gives the same JSON
 * bytes; a policy decision changed through the policy table changes the
 * result (it runs the table, not a copy); its windows are the sampler's
 * (the shards of every window's positions, drawn through the sampler's
 * public functions); every sample of every epoch is read once; a home too
 * slow for the demand bounds samples/s by its bandwidth, a fast one gives
 * no stall; the shard size (at the same window bytes) leaves the stall
 * as it is; a peer tier serves shards another host holds; hot_first's
 * placement is made before the first batch and read as hits; the timeline
 * rises with the windows. The hosts order: its reads are the order's own
 * count (cxlp_sampler_host_reads), its decisions (weights, ranks per host,
 * keep_blocks) move the result, and its output is deterministic too. */
#include <math.h>

#include "test.h"
#include "sim/sim.h"
#include "tier/policy.h"

/* A small cluster: 2 hosts x 2 ranks, 4096 samples of 4 KiB in shards of
 * 64 samples (64 shards), windows of 4 shards, a dram tier of 32 shards'
 * room (24 in the budget), a home of `home_bw` bytes/s. */
static void small(struct sim_config *c, double home_bw)
{
    CHECK(sim_preset("this-machine", c) == 0);
    snprintf(c->name, sizeof c->name, "small");
    c->hosts = 2;
    c->gpus = 2;
    c->epochs = 2;
    c->samples = 4096;
    c->sample_bytes = 4096;
    c->shard_bytes = 64 * 4096;
    c->window = 4;
    c->demand = 64e6;
    c->batch = 16;
    c->n_tiers = 2;
    c->tier[0] = (struct sim_tier){"dram", SIM_DRAM, 32 * 64 * 4096ull, 100, 10e9, 8, 0, 0};
    c->tier[1] = (struct sim_tier){"nvme", SIM_NVME, 1ull << 30, 100000, home_bw, 16, 1, 1};
    char err[256];
    if (sim_config_check(c, "small", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        CHECK(0);
    }
}

static char *run_json(const struct sim_config *c, const struct tier_policy_ops *ops,
                      struct sim_result *keep)
{
    struct sim_result r;
    char err[256], *buf = NULL;
    size_t len = 0;
    if (sim_run(c, ops, &r, err, sizeof err)) {
        fprintf(stderr, "sim_run: %s\n", err);
        CHECK(0);
    }
    FILE *f = open_memstream(&buf, &len);
    CHECK(f);
    sim_write_json(f, c, &r);
    CHECK(fclose(f) == 0);
    if (keep)
        *keep = r;
    else
        sim_result_free(&r);
    return buf;
}

static uint64_t misses(const struct sim_result *r)
{
    return r->tier[0].misses;
}

static double stall(const struct sim_result *r)
{
    double s = 0;
    for (uint32_t i = 0; i < r->n_ranks; i++)
        s += r->rank[i].stall_s / r->rank[i].time_s;
    return s / r->n_ranks;
}

/* lookahead with one decision changed: evict the least recently used */
static const struct tier_policy_ops *lookahead_lru_victim(void)
{
    static struct tier_policy_ops o;
    o = tier_policy_lookahead;
    o.victim = policy_lru_victim;
    return &o;
}

/* lookahead that stages nothing ahead */
static const struct tier_policy_ops *lookahead_no_want(void)
{
    static struct tier_policy_ops o;
    o = tier_policy_lookahead;
    o.want = policy_none;
    return &o;
}

/* the epochs' stall and time are the ranks' */
static void check_epochs(const struct sim_result *r)
{
    double st = 0, tt = 0, est = 0, ett = 0;
    for (uint32_t i = 0; i < r->n_ranks; i++) {
        st += r->rank[i].stall_s;
        tt += r->rank[i].time_s;
    }
    for (uint32_t e = 0; e < r->n_epochs; e++) {
        est += r->epoch[e].stall_s;
        ett += r->epoch[e].rank_s;
        CHECK(r->epoch[e].rank_s > 0);
    }
    CHECK(fabs(est - st) <= 1e-9 * tt && fabs(ett - tt) <= 1e-9 * tt);
}

static void test_determinism(void)
{
    struct sim_config c;
    small(&c, 1e9);
    char *a = run_json(&c, NULL, NULL), *b = run_json(&c, NULL, NULL);
    CHECK(strcmp(a, b) == 0);
    c.seed = 2; /* another order: another result */
    char *d = run_json(&c, NULL, NULL);
    CHECK(strcmp(a, d) != 0);
    free(a);
    free(b);
    free(d);
}

static void test_policy_table(void)
{
    struct sim_config c;
    small(&c, 200e6);
    struct sim_result base, nowant, lruv, byname;
    char *ja = run_json(&c, NULL, &base);
    char *jb = run_json(&c, lookahead_no_want(), &nowant);
    char *jc = run_json(&c, lookahead_lru_victim(), &lruv);
    /* staging nothing ahead: every shard is a miss the batch waits for */
    CHECK(misses(&nowant) > misses(&base));
    CHECK(stall(&nowant) > stall(&base));
    /* another victim: another run */
    CHECK(strcmp(ja, jc) != 0);
    CHECK(strcmp(ja, jb) != 0);
    /* the policy by name runs its table: lru stages nothing ahead either */
    c.policy = CXLP_POLICY_LRU;
    char *jd = run_json(&c, NULL, &byname);
    CHECK(misses(&byname) > misses(&base));
    CHECK(strstr(jd, "\"policy\": \"lru\""));
    free(ja);
    free(jb);
    free(jc);
    free(jd);
    sim_result_free(&base);
    sim_result_free(&nowant);
    sim_result_free(&lruv);
    sim_result_free(&byname);
}

/* sim_window's shards of window w are those the sampler's ids at its
 * positions come from, and the windows tile the epoch */
static void test_windows(void)
{
    struct sim_config c;
    small(&c, 1e9);
    c.samples = 4000; /* a short last shard */
    c.ramp = 1;
    uint64_t S = c.shard_bytes / c.sample_bytes;
    for (uint64_t e = 0; e < 2; e++) {
        struct cxlp_sampler_config sc = {.kind = CXLP_ORDER_BLOCK, .n = c.samples, .seed = c.seed,
                                         .epoch = e, .shard_size = S, .window = c.window,
                                         .ramp = 1, .world = 1};
        cxlp_sampler *smp = NULL;
        CHECK_OK(cxlp_sampler_create(&sc, &smp));
        uint64_t at = 0;
        for (uint64_t w = 0; at < c.samples; w++) {
            uint64_t start, count, nsh, sh[64];
            CHECK(sim_window(&c, e, w, &start, &count, sh, 64, &nsh) == 0);
            CHECK(start == at && count > 0 && nsh <= c.window);
            uint8_t in[64] = {0}, seen[64] = {0};
            for (uint64_t i = 0; i < nsh; i++)
                in[sh[i]] = 1;
            for (uint64_t p = start; p < start + count; p++) {
                uint64_t id;
                CHECK_OK(cxlp_sampler_epoch_at(smp, p, &id));
                CHECK(in[id / S]);
                seen[id / S] = 1;
            }
            for (uint64_t i = 0; i < nsh; i++)
                CHECK(seen[sh[i]]);
            at += count;
        }
        CHECK(at == c.samples);
        cxlp_sampler_free(smp);
    }
}

static void test_conservation_and_bounds(void)
{
    struct sim_config c;
    small(&c, 1e9);
    c.demand = 16e6;
    struct sim_result r;
    char *j = run_json(&c, NULL, &r);
    uint64_t all = 0;
    for (uint32_t i = 0; i < r.n_ranks; i++)
        all += r.rank[i].samples;
    CHECK(all == c.samples * c.epochs);
    /* a home far faster than the demand: no stall to speak of (the first
     * window's copies only) */
    CHECK(stall(&r) < 0.02);
    free(j);
    sim_result_free(&r);
    /* a home slower than the demand: the first epoch reads every shard
     * from it on each host, and no run is shorter than the home's bytes
     * over its bandwidth */
    small(&c, 50e6);
    c.demand = 1e9;
    j = run_json(&c, NULL, &r);
    CHECK(r.epoch[0].home_read == c.hosts * c.samples * c.sample_bytes);
    CHECK(r.tier[1].bytes_read >= r.epoch[0].home_read + r.epoch[1].home_read);
    CHECK(r.end_s >= (double)r.tier[1].bytes_read / 50e6 * 0.999);
    /* the timeline: a point every window here, time and stall rising, the
     * staging tiers never over their budgets but while misses stretch them */
    CHECK(r.every == 1 && r.n_timeline == r.windows);
    for (size_t i = 1; i < r.n_timeline; i++) {
        CHECK(r.timeline[i].window > r.timeline[i - 1].window);
        CHECK(r.timeline[i].t >= r.timeline[i - 1].t);
        CHECK(r.timeline[i].stall_s >= r.timeline[i - 1].stall_s);
        CHECK(r.timeline[i].staged_bytes > 0);
    }
    CHECK(r.timeline[r.n_timeline - 1].t <= r.end_s);
    check_epochs(&r);
    /* what the home sent, by epoch, is what it read */
    CHECK(r.epoch[0].home_moved + r.epoch[1].home_moved == r.tier[1].bytes_read);
    CHECK(stall(&r) > 0.5);
    free(j);
    sim_result_free(&r);
}

/* shards of half and twice the size, windows of the same bytes: the same
 * stall (what the granularity must not change), home-bound or not */
static void test_granularity(void)
{
    for (int bound = 0; bound < 2; bound++) {
        double first = -1;
        for (uint64_t f = 1; f <= 4; f *= 2) {
            struct sim_config c;
            small(&c, bound ? 50e6 : 1e9);
            c.demand = bound ? 1e9 : 64e6;
            c.samples = bound ? 4096 : 65536;
            c.tier[1].capacity = 1ull << 34;
            c.shard_bytes = 131072 * f;
            c.window = 8 / f;
            struct sim_result r;
            free(run_json(&c, NULL, &r));
            double st = stall(&r);
            if (first < 0)
                first = st;
            CHECK(fabs(st - first) < 0.01);
            sim_result_free(&r);
        }
    }
}

static void test_peer_and_place(void)
{
    struct sim_config c;
    small(&c, 100e6);
    c.sync = 0;
    c.hosts = 3;
    c.tier[2] = c.tier[1];
    c.tier[1] = (struct sim_tier){"rdma", SIM_PEER, 0, 2000, 5e9, 8, 0, 0};
    c.n_tiers = 3;
    struct sim_result r;
    char *j = run_json(&c, NULL, &r);
    CHECK(strstr(j, "\"modelled_not_built\": true"));
    CHECK(r.tier[1].bytes_read > 0);
    CHECK(r.epoch[0].peer_bytes > 0);
    CHECK(r.placement_s == 0); /* lookahead places nothing */
    free(j);
    sim_result_free(&r);

    small(&c, 100e6);
    c.policy = CXLP_POLICY_HOT_FIRST;
    j = run_json(&c, NULL, &r);
    /* 10% of the shards, within a quarter of the budget, on each host */
    CHECK(r.placed == 2 * 6);
    CHECK(r.tier[0].hits > 0);
    /* the placement's time, before window 0: 12 shards through the home's
     * one shared link at least */
    CHECK(r.placement_s >= 12.0 * (double)c.shard_bytes / c.tier[1].bandwidth);
    CHECK(r.placement_s < r.end_s);
    CHECK(strstr(j, "\"placement_s\": "));
    check_epochs(&r); /* the placement's wait is epoch 0's */
    free(j);
    sim_result_free(&r);

    /* the next 30% into a pool the hosts share behind a switch: one copy */
    small(&c, 100e6);
    c.policy = CXLP_POLICY_HOT_FIRST;
    c.tier[2] = c.tier[1];
    c.tier[1] = (struct sim_tier){"pool", SIM_CXL_SWITCH, 1ull << 30, 300, 5e9, 8, 1, 0};
    c.n_tiers = 3;
    j = run_json(&c, NULL, &r);
    CHECK(r.placed == 2 * (6 + 19));
    CHECK(r.tier[1].bytes_written >= 19 * c.shard_bytes);
    CHECK(r.tier[1].bytes_written < 2 * 19 * c.shard_bytes);
    CHECK(r.tier[1].hits > 0);
    free(j);
    sim_result_free(&r);
}

/* ------------------------------------------------------------ the hosts order */

/* hosts x gpus ranks on the hosts order (weights: H of them, or NULL for
 * equal ones), n samples of 4 KiB in blocks of S, windows of W blocks a
 * host, memory that holds twice the dataset, a peer tier (peer: 1) and a
 * home fast enough that nothing waits long. */
static void hosts_cfg(struct sim_config *c, uint32_t hosts, uint32_t gpus, const uint64_t *wt,
                      uint32_t nw, uint64_t n, uint64_t S, uint64_t W, int peer)
{
    CHECK(sim_preset("this-machine", c) == 0);
    snprintf(c->name, sizeof c->name, "hosts");
    c->hosts = hosts;
    c->gpus = gpus;
    c->epochs = 2;
    c->samples = n;
    c->sample_bytes = 4096;
    c->shard_bytes = S * 4096;
    c->window = W;
    c->demand = 100e6;
    c->batch = 16;
    c->order = SIM_ORDER_HOSTS;
    c->n_weights = nw;
    for (uint32_t i = 0; i < nw; i++)
        c->host_weights[i] = wt[i];
    uint64_t bytes = n * 4096;
    c->n_tiers = 0;
    c->tier[c->n_tiers++] = (struct sim_tier){"dram", SIM_DRAM, 2 * bytes, 100, 10e9, 8, 0, 0};
    if (peer)
        c->tier[c->n_tiers++] = (struct sim_tier){"rdma", SIM_PEER, 0, 3000, 10e9, 16, 0, 0};
    c->tier[c->n_tiers++] = (struct sim_tier){"nvme", SIM_NVME, 2 * bytes, 100000, 10e9, 16, 1, 1};
    char err[256];
    if (sim_config_check(c, "hosts", err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        CHECK(0);
    }
}

static double frac(const struct sim_epoch_stats *x, int which)
{
    double all = x->local_bytes + x->peer_bytes + x->home_bytes;
    return (which == 0 ? x->local_bytes : which == 1 ? x->peer_bytes : x->home_bytes) / all;
}

/* The order's own count of epoch e's reads (cxlp_sampler_host_reads: every
 * draw of every rank walked, every host's share held): local, and read
 * from another host's share. */
static void exact_reads(const struct sim_config *c, uint64_t e, double *local, double *other)
{
    uint32_t world = c->hosts * c->gpus, k = c->ranks_per_host ? c->ranks_per_host : c->gpus;
    uint32_t H = sim_order_hosts(c), label[64];
    uint64_t wt[64];
    double mem[64];
    for (uint32_t r = 0; r < world; r++)
        label[r] = r / k;
    for (uint32_t h = 0; h < H; h++) {
        wt[h] = c->n_weights ? c->host_weights[c->n_weights == 1 ? 0 : h] : 1;
        mem[h] = 1;
    }
    struct cxlp_hosts hh = {.n_hosts = H, .weight = wt, .rank_host = label,
                            .keep = c->keep_blocks};
    struct cxlp_sampler_config sc = {0};
    sc.kind = CXLP_ORDER_HOSTS;
    sc.n = c->samples;
    sc.seed = c->seed;
    sc.epoch = e;
    sc.shard_size = c->shard_bytes / c->sample_bytes;
    sc.window = c->window;
    sc.world = world;
    uint64_t all[3] = {0, 0, 0};
    for (uint32_t r = 0; r < world; r++) {
        cxlp_sampler *s = NULL;
        sc.rank = r;
        CHECK(cxlp_sampler_create_hosts(&sc, &hh, &s) == 0);
        uint64_t cnt[3];
        CHECK(cxlp_sampler_host_reads(s, mem, cnt) == 0);
        for (int i = 0; i < 3; i++)
            all[i] += cnt[i];
        cxlp_sampler_free(s);
    }
    double t = (double)(all[0] + all[1] + all[2]);
    *local = (double)all[0] / t;
    *other = (double)(all[1] + all[2]) / t;
}

/* The simulated reads are the order's: with every round of a window walked
 * (at most rounds_walked_per_window rounds a window) the local and the
 * other-host fractions are the order's own count to rounding; with rounds
 * drawn (windows longer than that), within 0.005 (about 10^5 draws an
 * epoch: a standard error under 0.002). Every rank reads its draws (the
 * last round padded); the home's bytes are the epochs'. */
static void test_hosts_reads(void)
{
    static const uint64_t wt[3] = {5, 3, 1};
    struct sim_config c;
    /* 12 ranks: host 1's 4 ranks against a mean of 4 of its positions a
     * round, so rounds with 3 lose local reads that an estimate from the
     * epoch's shares (0.777 local) does not see */
    hosts_cfg(&c, 3, 4, wt, 3, 100003, 97, 7, 1);
    struct sim_result r;
    char *j = run_json(&c, NULL, &r);
    CHECK(strstr(j, "\"kind\": \"hosts\", \"hosts\": 3, \"ranks_per_host\": 4, "
                    "\"host_weights\": [5, 3, 1]"));
    uint64_t q = (c.samples + 11) / 12, home = 0;
    for (uint32_t i = 0; i < r.n_ranks; i++)
        CHECK(r.rank[i].samples == 2 * q);
    for (uint32_t e = 0; e < 2; e++) {
        double local, other;
        exact_reads(&c, e, &local, &other);
        CHECK(fabs(frac(&r.epoch[e], 0) - local) < 1e-9);
        CHECK(fabs(frac(&r.epoch[e], 1) + frac(&r.epoch[e], 2) - other) < 1e-9);
        CHECK(local < 0.77 && other > 0.23); /* the shares' estimate: 0.777 */
        home += r.epoch[e].home_moved;
    }
    /* memory holds every share: epoch 1 (staged ahead) reads no home */
    CHECK(frac(&r.epoch[1], 2) == 0 && frac(&r.epoch[1], 1) > 0.2);
    CHECK(home == r.tier[2].bytes_read);
    CHECK(r.order_hosts == 3);
    check_epochs(&r);
    free(j);
    sim_result_free(&r);

    /* windows of more rounds than are walked: drawn rounds */
    hosts_cfg(&c, 3, 4, wt, 3, 3000000, 1000, 100, 1);
    c.epochs = 1;
    j = run_json(&c, NULL, &r);
    double local, other;
    exact_reads(&c, 0, &local, &other);
    CHECK((c.samples / 12) / r.windows > 2 * r.sampled_rounds); /* rounds were drawn */
    CHECK(fabs(frac(&r.epoch[0], 0) - local) < 0.005);
    free(j);
    sim_result_free(&r);
}

/* The hosts order's decisions move the simulation: host weights (a host
 * with more blocks than ranks has its surplus read by other hosts' ranks,
 * from its memory over the peer tier), ranks per host (one host of 8 ranks
 * over two machines: each machine stages the whole dataset, twice the
 * home's bytes), keep_blocks (the shares stay: nothing moves between
 * hosts' memories after the first epoch). */
static void test_hosts_decisions(void)
{
    static const uint64_t eq[2] = {1, 1}, skew[2] = {3, 1};
    struct sim_config c;
    struct sim_result a, b;
    hosts_cfg(&c, 2, 4, eq, 2, 200000, 100, 10, 1);
    char *ja = run_json(&c, NULL, &a);
    hosts_cfg(&c, 2, 4, skew, 2, 200000, 100, 10, 1);
    char *jb = run_json(&c, NULL, &b);
    CHECK(strcmp(ja, jb) != 0);
    /* equal: every round has 4 positions of each host; 3:1: 6 and 2 */
    CHECK(frac(&a.epoch[1], 0) > 0.999 && frac(&a.epoch[1], 1) < 0.001);
    CHECK(fabs(frac(&b.epoch[1], 0) - 0.75) < 0.001 && fabs(frac(&b.epoch[1], 1) - 0.25) < 0.001);
    /* the peer link carries b's reads as well as the copies both stage
     * from a peer when the blocks are dealt again */
    CHECK(b.tier[1].bytes_read > a.tier[1].bytes_read);
    free(ja), free(jb);
    sim_result_free(&a), sim_result_free(&b);

    /* ranks per host: 2 hosts of the order, or 1 spanning both machines */
    hosts_cfg(&c, 2, 4, NULL, 0, 200000, 100, 10, 0);
    c.epochs = 1;
    ja = run_json(&c, NULL, &a);
    c.ranks_per_host = 8;
    jb = run_json(&c, NULL, &b);
    CHECK(strcmp(ja, jb) != 0 && a.order_hosts == 2 && b.order_hosts == 1);
    double bytes = 200000.0 * 4096;
    CHECK(fabs((double)a.tier[1].bytes_read / bytes - 1) < 0.01);
    CHECK(fabs((double)b.tier[1].bytes_read / bytes - 2) < 0.01);
    free(ja), free(jb);
    sim_result_free(&a), sim_result_free(&b);

    /* keep_blocks: nothing staged from a peer after the first deal */
    hosts_cfg(&c, 2, 4, NULL, 0, 200000, 100, 10, 1);
    ja = run_json(&c, NULL, &a);
    c.keep_blocks = 1;
    jb = run_json(&c, NULL, &b);
    uint64_t pa = 0, pb = 0;
    for (uint32_t e = 0; e < 2; e++) {
        pa += a.epoch[e].peer_moved;
        pb += b.epoch[e].peer_moved;
    }
    CHECK(pa > 0 && pb == 0);
    free(ja), free(jb);
    sim_result_free(&a), sim_result_free(&b);
}

/* The same configuration gives the same bytes; another seed others. */
static void test_hosts_determinism(void)
{
    static const uint64_t wt[3] = {5, 3, 1};
    struct sim_config c;
    hosts_cfg(&c, 3, 2, wt, 3, 300007, 1000, 5, 1);
    char *a = run_json(&c, NULL, NULL), *b = run_json(&c, NULL, NULL);
    CHECK(strcmp(a, b) == 0);
    c.seed = 7;
    char *d = run_json(&c, NULL, NULL);
    CHECK(strcmp(a, d) != 0);
    free(a), free(b), free(d);
}

int main(void)
{
    test_determinism();
    test_policy_table();
    test_windows();
    test_conservation_and_bounds();
    test_granularity();
    test_peer_and_place();
    test_hosts_reads();
    test_hosts_decisions();
    test_hosts_determinism();
    printf("test_sim: ok\n");
    return 0;
}
