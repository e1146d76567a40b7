/* Staging for a pass before it starts: a loader given the next pass's
 * order (tier_next_fn) stages that pass's first shards once its own ids
 * are all in view, hands out none of them, and survives an error of that
 * source; a stager (cxlp_stager_create) stages a pass's first shards with
 * no loader at all. Both are checked on the location words: the shards of
 * the next pass's first horizon end up with a cache copy in the dram
 * tier, from a cold start. */
#include <time.h>

#include "test.h"
#include "records.h"

#define MiB (1ull << 20)
#define SHARD (64u * 1024)
#define PER (SHARD / REC_FIXED_SIZE)
#define BATCH 32u
#define HORIZON 8u /* batches */
#define WINDOW 4u  /* shards: one horizon of ids covers one window */

static char pool[128];

static cxlp_sampler *sampler(uint64_t n, uint64_t epoch)
{
    struct cxlp_sampler_config cfg = {.kind = CXLP_ORDER_BLOCK, .n = n, .seed = 5, .epoch = epoch,
                                      .shard_size = PER, .window = WINDOW, .world = 1};
    cxlp_sampler *sm;
    CHECK_OK(cxlp_sampler_create(&cfg, &sm));
    return sm;
}

/* The distinct shards of the first horizon of ids of epoch's order. */
static size_t first_shards(uint64_t n, uint64_t epoch, uint64_t *out)
{
    cxlp_sampler *sm = sampler(n, epoch);
    uint64_t ids[HORIZON * BATCH];
    size_t got = cxlp_sampler_next(sm, ids, HORIZON * BATCH), k = 0;
    CHECK(got == HORIZON * BATCH);
    for (size_t i = 0; i < got; i++) {
        uint64_t sh = ids[i] / PER;
        size_t j = 0;
        while (j < k && out[j] != sh)
            j++;
        if (j == k)
            out[k++] = sh;
    }
    cxlp_sampler_free(sm);
    return k;
}

/* 1 when the dram tier (tier 0) holds a copy of shard k: in these runs
 * nothing of the dataset is kept there, so a copy is the stagers'. */
static int cached(const cxlp_store *s, uint64_t k)
{
    uint32_t mask;
    CHECK_OK(cxlp_store_shard_tiers(s, k, &mask));
    return (int)(mask & 1u);
}

/* Waits until every shard of want has a cache copy in dram: the stagers
 * work on their own threads, so there is no instant to check at. A
 * minute is a bound on a hung or missing stage (a few ms of copies), not
 * a measure of speed. */
static void await_cached(const cxlp_store *s, const uint64_t *want, size_t nw, const char *what)
{
    for (int tries = 0; tries < 6000; tries++) {
        size_t in = 0;
        for (size_t i = 0; i < nw; i++)
            in += (size_t)cached(s, want[i]);
        if (in == nw)
            return;
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    }
    fprintf(stderr, "%s: the next pass's first shards were not staged\n", what);
    CHECK(0);
}

static void cold(cxlp_pool *p)
{
    CHECK_OK(cxlp_migrate(p, "fixed", "nvme", NULL, NULL));
}

/* An index source that gives an id past the dataset: an error. */
static int bad_fn(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    (void)max;
    out[0] = *(const uint64_t *)ctx;
    *n = 1;
    return 0;
}

/* One pass of epoch 0, with next_fn/next_ctx as the next pass; every
 * record once, intact, none of the next pass's. */
static void pass(cxlp_store *s, uint64_t n, uint64_t seed, int policy, cxlp_index_fn next_fn,
                 void *next_ctx)
{
    cxlp_sampler *sm = sampler(n, 0);
    struct cxlp_loader_opts o = {.batch_size = BATCH, .threads = 2, .tier_policy = policy,
                                 .tier_budget = 2 * MiB, .tier_horizon = HORIZON,
                                 .tier_next_fn = next_fn, .tier_next_ctx = next_ctx};
    cxlp_loader *l;
    CHECK_OK(cxlp_loader_create(s, &o, rec_sampler_fn, sm, &l));
    uint8_t *seen = calloc(n, 1);
    uint64_t records = 0;
    struct cxlp_batch *b;
    for (;;) {
        CHECK_OK(cxlp_loader_next(l, &b));
        if (!b)
            break;
        uint64_t bad;
        CHECK(rec_batch_ok(b, seen, n, 1, seed, &bad));
        records += b->rows;
        cxlp_loader_release(l, b);
    }
    CHECK(records == n);
    if (next_fn == rec_sampler_fn) {
        uint64_t want[HORIZON * BATCH];
        size_t nw = first_shards(n, 1, want);
        CHECK(nw >= 2); /* a window's worth: the check below says something */
        await_cached(s, want, nw, cxlp_policy_name(policy));
        struct cxlp_loader_stats st;
        CHECK_OK(cxlp_loader_stats(l, &st));
        printf("%s: epoch 1's first %zu shards staged during epoch 0 (%llu staged ahead in "
               "all, %llu of %llu bytes for epoch 1 alone)\n", cxlp_policy_name(policy), nw,
               (unsigned long long)st.prefetched, (unsigned long long)st.next_pass_bytes,
               (unsigned long long)st.bytes_staged);
        /* counted apart: what this pass staged for the next alone */
        CHECK(st.next_pass_bytes > 0 && st.next_pass_bytes < st.bytes_staged);
    } else {
        struct cxlp_loader_stats st;
        CHECK_OK(cxlp_loader_stats(l, &st));
        CHECK(st.next_pass_bytes == 0); /* no next pass's ids: nothing for it */
    }
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
}

int main(void)
{
    uint64_t seed = 9, n;
    snprintf(pool, sizeof pool, "%s", test_name("tiernx"));
    cxlp_pool *p;
    CHECK_OK(rec_tier_pool(pool, "6M", "48M", 16, &p));
    CHECK_OK(rec_ingest(p, "fixed", 1, seed, 12 * MiB, SHARD, &n, NULL));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "fixed", &s));

    /* the next epoch's first window, staged as this one ends: lookahead
     * (Belady: after this pass's shards) and streaming (the window in
     * order, across the pass's end) */
    int pols[] = {CXLP_POLICY_LOOKAHEAD, CXLP_POLICY_STREAMING};
    for (size_t i = 0; i < 2; i++) {
        cold(p);
        cxlp_sampler *next = sampler(n, 1);
        pass(s, n, seed, pols[i], rec_sampler_fn, next);
        cxlp_sampler_free(next);
    }
    /* the next pass's source fails (an id past the dataset): this pass
     * still delivers every record, without an error */
    cold(p);
    uint64_t past = n + 7;
    pass(s, n, seed, CXLP_POLICY_LOOKAHEAD, bad_fn, &past);

    /* a stager: the first window of epoch 2 from a cold start, no loader;
     * then the loader of that pass finds them in memory: with lru (which
     * stages nothing ahead) its first batch is all hits */
    cold(p);
    cxlp_sampler *sm = sampler(n, 2);
    struct cxlp_loader_opts o = {.batch_size = BATCH, .tier_budget = 2 * MiB,
                                 .tier_horizon = HORIZON};
    cxlp_stager *st;
    CHECK_OK(cxlp_stager_create(s, &o, rec_sampler_fn, sm, &st));
    uint64_t want[HORIZON * BATCH];
    size_t nw = first_shards(n, 2, want);
    await_cached(s, want, nw, "stager");
    struct cxlp_loader_stats ss;
    CHECK_OK(cxlp_stager_stats(st, &ss));
    CHECK(ss.prefetched >= nw && ss.batches == 0 && ss.records == 0);
    CHECK(ss.stagers == 4); /* the default for 64 KiB shards (engine.c def_stagers) */
    cxlp_stager_free(st);
    cxlp_sampler_free(sm);
    sm = sampler(n, 2);
    o.tier_policy = CXLP_POLICY_LRU;
    o.threads = 1;
    o.tier_stagers = CXLP_MAX_STAGERS + 1;
    cxlp_loader *l;
    CHECK(cxlp_loader_create(s, &o, rec_sampler_fn, sm, &l) == CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "tier_stagers 9: at most 8"));
    o.tier_stagers = 1;
    CHECK_OK(cxlp_loader_create(s, &o, rec_sampler_fn, sm, &l));
    struct cxlp_batch *b;
    CHECK_OK(cxlp_loader_next(l, &b));
    CHECK(b && b->rows == BATCH);
    uint8_t *seen = calloc(n, 1);
    uint64_t bad;
    CHECK(rec_batch_ok(b, seen, n, 1, seed, &bad));
    cxlp_loader_release(l, b);
    struct cxlp_loader_stats ls;
    CHECK_OK(cxlp_loader_stats(l, &ls));
    CHECK(ls.stagers == 1);
    printf("stager: %zu shards staged before the pass; its first batches: %llu hits, %llu "
           "misses\n", nw, (unsigned long long)ls.hits, (unsigned long long)ls.misses);
    /* the first horizon's records (those shards) are hits; a gather
     * thread that ran further ahead may miss after them */
    uint64_t first = (uint64_t)HORIZON * BATCH;
    CHECK(ls.hits >= (ls.records < first ? ls.records : first));
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);

    cold(p);

    /* one shard of 8 MiB fills a reader's queue: 2 stagers by default
     * (under a budget that stages it whole); behind this small tier's
     * default budget it is staged in units of a few hundred KiB: 4 */
    {
        cxlp_store *bs;
        uint64_t nb;
        CHECK_OK(rec_ingest(p, "big", 1, seed, 8 * MiB, 8 * MiB, &nb, NULL));
        CHECK_OK(cxlp_store_open(p, "big", &bs));
        cxlp_sampler *bsm = sampler(nb, 0);
        struct cxlp_loader_opts bo = {.batch_size = BATCH, .tier_budget = 768 * MiB};
        CHECK_OK(cxlp_stager_create(bs, &bo, rec_sampler_fn, bsm, &st));
        CHECK_OK(cxlp_stager_stats(st, &ss));
        CHECK(ss.stagers == 2 && ss.unit_records == 0);
        cxlp_stager_free(st);
        bo.tier_budget = 0;
        CHECK_OK(cxlp_stager_create(bs, &bo, rec_sampler_fn, bsm, &st));
        CHECK_OK(cxlp_stager_stats(st, &ss));
        CHECK(ss.stagers == 4 && ss.unit_records > 0 && ss.unit_bytes <= MiB);
        cxlp_stager_free(st);
        cxlp_sampler_free(bsm);
        CHECK_OK(cxlp_store_close(bs));
    }

    /* bad arguments */
    CHECK(cxlp_stager_create(s, &o, NULL, NULL, &st) == CXLP_EARG);
    CHECK(cxlp_stager_create(NULL, &o, rec_sampler_fn, NULL, &st) == CXLP_EARG);
    cxlp_stager_free(NULL);

    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(pool));

    /* a pool of one tier: nothing to stage into, refused by name */
    char one[160];
    snprintf(one, sizeof one, "%s1", pool);
    CHECK_OK(cxlp_pool_create(one, 32 * MiB, NULL, &p));
    CHECK_OK(rec_ingest(p, "fixed", 1, seed, 1 * MiB, SHARD, &n, NULL));
    CHECK_OK(cxlp_store_open(p, "fixed", &s));
    uint32_t mask;
    CHECK_OK(cxlp_store_shard_tiers(s, 0, &mask));
    CHECK(mask == 1); /* one tier holds every shard */
    CHECK(cxlp_store_shard_tiers(s, 1u << 20, &mask) == CXLP_ERANGE);
    sm = sampler(n, 0);
    CHECK(cxlp_stager_create(s, &o, rec_sampler_fn, sm, &st) == CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "pool of tiers") != NULL);
    cxlp_sampler_free(sm);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(one));
    printf("ok\n");
    return 0;
}
