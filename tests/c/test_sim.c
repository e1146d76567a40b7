/* The simulator (src/sim): the same configuration gives the same JSON
 * bytes; a policy decision changed through the policy table changes the
 * result (it runs the table, not a copy); its windows are the sampler's
 * (the shards of every window's positions, drawn through the sampler's
 * public functions); every sample of every epoch is read once; a home too
 * slow for the demand bounds samples/s by its bandwidth, a fast one gives
 * no stall; the shard size (at the same window bytes) leaves the stall
 * as it is; a peer tier serves shards another host holds; hot_first's
 * placement is made before the first batch and read as hits; the timeline
 * rises with the windows. */
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

int main(void)
{
    test_determinism();
    test_policy_table();
    test_windows();
    test_conservation_and_bounds();
    test_granularity();
    test_peer_and_place();
    printf("test_sim: ok\n");
    return 0;
}
