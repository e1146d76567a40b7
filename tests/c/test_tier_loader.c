/* The staging engine under the gather engine: a dataset homed on an nvme
 * tier, read through a dram tier smaller than it, one full epoch per
 * policy: every record delivered exactly once and intact, the shards
 * fetched about once each where the order allows it, the budget held; the
 * same under a fully random order (heavy eviction), with packed variable
 * records, and with two processes sharing one copy per shard. */
#include <sys/wait.h>

#include "test.h"
#include "records.h"

#define MiB (1ull << 20)
#define SHARD (64u * 1024)

static char pool[128];

struct epoch {
    uint64_t records;
    struct cxlp_loader_stats st;
};

/* One epoch of order kind over dataset name with policy; checks every
 * record once, intact. */
static struct epoch run_threads(const char *name, int fixed, int kind, uint64_t window,
                                int policy, uint64_t budget, uint64_t seed, uint32_t threads)
{
    /* a random order needs a batch's shards at once: small batches */
    uint32_t batch = kind == CXLP_ORDER_RANDOM ? 8 : 32;
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    CHECK(cxlp_store_tiered(s));
    uint64_t n = cxlp_store_count(s);
    struct cxlp_dataset_info in;
    CHECK_OK(cxlp_store_info(s, &in));
    uint64_t per = fixed ? SHARD / REC_FIXED_SIZE : n / in.n_shards + 1;
    struct cxlp_sampler_config cfg = {.kind = kind, .n = n, .seed = 11, .shard_size = per,
                                      .window = window, .world = 1};
    struct cxlp_loader_opts o = {.batch_size = batch, .threads = threads, .tier_policy = policy,
                                 .tier_budget = budget, .tier_horizon = 8};
    cxlp_sampler *sm;
    cxlp_loader *l;
    CHECK_OK(rec_loader(s, fixed, &cfg, o, &sm, &l));
    uint8_t *seen = calloc(n, 1);
    struct epoch ep = {0};
    int lrc = rec_drain(l, seen, n, fixed, seed, &ep.records, cxlp_policy_name(policy));
    if (lrc < 0)
        fprintf(stderr, "loader: %s\n", cxlp_errmsg(l));
    CHECK_OK(lrc);
    CHECK(ep.records == n);
    CHECK_OK(cxlp_loader_stats(l, &ep.st));
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    printf("%-13s %-6s window %3llu: %llu records, hits %llu misses %llu, prefetched %llu "
           "fetched %llu placed %llu, evicted %llu, %.1f MiB staged\n",
           cxlp_policy_name(policy), kind == CXLP_ORDER_RANDOM ? "random" : "block",
           (unsigned long long)window, (unsigned long long)ep.records,
           (unsigned long long)ep.st.hits, (unsigned long long)ep.st.misses,
           (unsigned long long)ep.st.prefetched, (unsigned long long)ep.st.fetched,
           (unsigned long long)ep.st.placed, (unsigned long long)ep.st.evictions,
           (double)ep.st.bytes_staged / MiB);
    return ep;
}

static struct epoch run(const char *name, int fixed, int kind, uint64_t window, int policy,
                        uint64_t budget, uint64_t seed)
{
    return run_threads(name, fixed, kind, window, policy, budget, seed,
                       kind == CXLP_ORDER_RANDOM ? 1 : 2);
}

/* Drops every memory copy: the next epoch starts from the home tier. */
static void cold(const char *name)
{
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    CHECK_OK(cxlp_migrate(p, name, "nvme", NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
}

int main(void)
{
    uint64_t seed = 3;
    snprintf(pool, sizeof pool, "%s", test_name("tierld"));
    cxlp_pool *p;
    CHECK_OK(rec_tier_pool(pool, "6M", "48M", 32, &p)); /* 4 MiB of dram for copies */
    uint64_t nf, nv;
    CHECK_OK(rec_ingest(p, "fixed", 1, seed, 12 * MiB, SHARD, &nf, NULL));
    CHECK_OK(rec_ingest(p, "var", 0, seed, 4 * MiB, SHARD, &nv, NULL));
    CHECK_OK(rec_ingest(p, "small", 1, seed, 2 * MiB, SHARD, &nv, NULL));
    CHECK_OK(cxlp_pool_close(p));
    const uint64_t shards = 12 * MiB / SHARD, budget = 2 * MiB;

    /* block order: every shard read in one window; lookahead stages each
     * once, ahead; lru fetches each on its first miss */
    struct epoch la = run("fixed", 1, CXLP_ORDER_BLOCK, 4, CXLP_POLICY_LOOKAHEAD, budget, seed);
    /* Belady: a prefetch never evicts a copy needed before the shard it
     * brings, so none is staged twice by prefetching. A miss (the gather
     * threads ahead of the stagers: a loaded machine) must fetch, and the
     * copy it evicts (one: the shards are all one size) may still be read:
     * at most one stage beyond the first of each shard per fetch on a
     * miss: prefetched + fetched <= shards + fetched. Without misses,
     * exactly Belady's once per shard. */
    CHECK(la.st.prefetched + la.st.fetched <= shards + la.st.fetched);
    CHECK(la.st.hits + la.st.misses == la.records);
    cold("fixed");
    struct epoch lru = run("fixed", 1, CXLP_ORDER_BLOCK, 4, CXLP_POLICY_LRU, budget, seed);
    CHECK(lru.st.prefetched == 0 && lru.st.fetched >= shards - 1);
    cold("fixed");
    struct epoch st = run("fixed", 1, CXLP_ORDER_BLOCK, 4, CXLP_POLICY_STREAMING, budget, seed);
    CHECK(st.st.evictions >= shards / 2);
    cold("fixed");
    struct epoch hf = run("fixed", 1, CXLP_ORDER_BLOCK, 4, CXLP_POLICY_HOT_FIRST, budget, seed);
    CHECK(hf.st.placed >= 1 && hf.st.placed <= shards / 10 + 1);
    cold("fixed");
    struct epoch fp = run("fixed", 1, CXLP_ORDER_BLOCK, 4, CXLP_POLICY_FULL_PREFETCH, budget, seed);
    CHECK(fp.st.placed >= budget / 4 / SHARD - 2); /* a quarter of the budget, kept */
    cold("fixed");
    /* a random order over the whole dataset: shards come back again and
     * again, and the budget holds a sixth of them */
    run("fixed", 1, CXLP_ORDER_RANDOM, 1, CXLP_POLICY_LOOKAHEAD, budget, seed);
    cold("fixed");
    run("fixed", 1, CXLP_ORDER_RANDOM, 1, CXLP_POLICY_LRU, budget, seed);
    cold("fixed");
    /* a budget larger than the dram tier (the tier, not the budget, is
     * full): a miss makes room from the engine's own copies (lru: the
     * least recently read) instead of waiting for room and reading the
     * shard in part; one gather thread, so no other batch's pin holds the
     * room the eviction frees. Shard by shard: each fetched once. */
    {
        struct epoch f = run_threads("fixed", 1, CXLP_ORDER_BLOCK, 1, CXLP_POLICY_LRU,
                                     100 * MiB, seed, 1);
        CHECK(f.st.partial_reads == 0 && f.st.private_reads == 0);
        CHECK(f.st.fetched == shards && f.st.evictions >= shards - 60);
        cold("fixed");
    }
    /* variable-size records, padded */
    run("var", 0, CXLP_ORDER_BLOCK, 2, CXLP_POLICY_LOOKAHEAD, budget, seed);
    cold("var");
    /* a dram tier full of kept copies (a migration that ran out of room):
     * no copy fits, batches read private copies (or, lookahead, the blocks
     * of their records: partial reads), every record arrives */
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    CHECK(cxlp_migrate(p, "fixed", "dram", NULL, NULL) == CXLP_EFULL);
    {
        /* a record read one at a time (ds[i]) has no batch to read into:
         * from the home copy, its verified blocks, every 97th record */
        cxlp_store *vs;
        CHECK_OK(cxlp_store_open(p, "var", &vs));
        uint64_t nvar = cxlp_store_count(vs), copies[2];
        size_t nt2;
        static uint8_t rec[REC_VAR_MAX];
        for (uint64_t i = 0; i < nvar; i += 97) {
            uint64_t len;
            CHECK_OK(cxlp_store_read_copy(vs, i, rec, sizeof rec, &len));
            CHECK(rec_ok(rec, len, 0, seed, i));
        }
        CHECK_OK(cxlp_store_copies(vs, copies, 2, &nt2));
        CHECK(copies[0] == 0); /* nothing of "var" in dram: read from home */
        CHECK_OK(cxlp_store_close(vs));
    }
    CHECK_OK(cxlp_pool_close(p));
    struct epoch pr = run("var", 0, CXLP_ORDER_BLOCK, 2, CXLP_POLICY_LOOKAHEAD, budget, seed);
    CHECK(pr.st.private_reads + pr.st.partial_reads > 0 &&
          pr.st.hits + pr.st.misses == pr.records);
    cold("fixed");
    cold("var");
    /* a dram tier two thirds full of another dataset's cache copies (misses
     * of record reads): a migration there drops as many as it needs */
    {
        CHECK_OK(cxlp_pool_open(pool, NULL, &p));
        cxlp_store *s;
        CHECK_OK(cxlp_store_open(p, "fixed", &s));
        uint64_t per = SHARD / REC_FIXED_SIZE, len;
        uint8_t rec[REC_FIXED_SIZE];
        for (uint64_t k = 0; k < 40; k++)
            CHECK_OK(cxlp_store_read_copy(s, k * per, rec, sizeof rec, &len));
        uint64_t before[2], after[2], small[2];
        size_t nt;
        CHECK_OK(cxlp_store_copies(s, before, 2, &nt));
        CHECK(before[0] == 40);
        CHECK_OK(cxlp_migrate(p, "small", "dram", NULL, NULL));
        CHECK_OK(cxlp_store_copies(s, after, 2, &nt));
        cxlp_store *ss;
        CHECK_OK(cxlp_store_open(p, "small", &ss));
        CHECK_OK(cxlp_store_copies(ss, small, 2, &nt));
        printf("migration into a tier of cache copies: %llu of 40 dropped, %llu shards placed\n",
               (unsigned long long)(before[0] - after[0]), (unsigned long long)small[0]);
        CHECK(small[0] == cxlp_store_count(ss) / (SHARD / REC_FIXED_SIZE) && after[0] < 40);
        CHECK_OK(cxlp_store_close(ss));
        CHECK_OK(cxlp_store_close(s));
        CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
        CHECK_OK(cxlp_pool_close(p));
        cold("small");
        cold("fixed");
    }

    /* two processes reading the same order, room for the whole dataset: one
     * copy per shard on the host, made once (the second process finds it,
     * or waits for the first's claim): fetches == shards exactly */
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    struct cxlp_tier_info ti[2];
    size_t nt;
    CHECK_OK(cxlp_pool_tiers(p, ti, 2, &nt));
    uint64_t f0 = ti[0].fetches, ti0_evictions = ti[0].evictions;
    pid_t kids[2];
    for (int i = 0; i < 2; i++) {
        kids[i] = fork();
        CHECK(kids[i] >= 0);
        if (kids[i] == 0) {
            run("small", 1, CXLP_ORDER_BLOCK, 4, CXLP_POLICY_LOOKAHEAD, 4 * MiB, seed);
            _exit(0);
        }
    }
    for (int i = 0; i < 2; i++) {
        int status;
        CHECK(waitpid(kids[i], &status, 0) == kids[i]);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    CHECK_OK(cxlp_pool_tiers(p, ti, 2, &nt));
    const uint64_t small_shards = 2 * MiB / SHARD;
    printf("two processes: %llu shards fetched for %llu shards\n",
           (unsigned long long)(ti[0].fetches - f0), (unsigned long long)small_shards);
    CHECK(ti[0].fetches - f0 == small_shards);
    CHECK(ti[0].evictions == ti0_evictions);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(pool));
    printf("ok\n");
    return 0;
}
