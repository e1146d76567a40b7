/* BLOCK order: every epoch is a permutation; at any position at most W
 * shards are active (between their first and last sample); W = 1 reads each
 * shard as one contiguous run; samples of a window are mixed across its
 * shards; the shard order changes with the epoch. */
#include "sample_util.h"

static void check_block(uint64_t n, uint64_t S, uint64_t W, uint64_t seed, uint64_t *rng)
{
    cxlp_sampler *s = make(CXLP_ORDER_BLOCK, n, seed, 1, 0, 0, S, W);
    uint64_t *v, got = drain(s, &v, rng);
    CHECK(got == n);
    if (!is_perm(v, n)) {
        fprintf(stderr, "block: not a permutation n %" PRIu64 " S %" PRIu64 " W %" PRIu64
                "\n", n, S, W);
        exit(1);
    }
    uint64_t M = n ? (n - 1) / S + 1 : 0;
    uint64_t *first = malloc((M + 1) * sizeof *first), *last = malloc((M + 1) * sizeof *last);
    int64_t *delta = calloc(n + 2, sizeof *delta);
    for (uint64_t j = 0; j < M; j++)
        first[j] = UINT64_MAX;
    for (uint64_t p = 0; p < n; p++) {
        uint64_t sh = v[p] / S;
        if (first[sh] == UINT64_MAX)
            first[sh] = p;
        last[sh] = p;
    }
    for (uint64_t j = 0; j < M; j++) {
        delta[first[j]]++;
        delta[last[j] + 1]--;
        if (W == 1) /* one shard at a time: each shard is one run */
            CHECK(last[j] - first[j] + 1 == MINU(S, n - j * S));
    }
    int64_t active = 0;
    for (uint64_t p = 0; p < n; p++) {
        active += delta[p];
        if (active > (int64_t)W) {
            fprintf(stderr, "block: %" PRId64 " shards active at %" PRIu64 " (W %" PRIu64
                    ", n %" PRIu64 ", S %" PRIu64 ")\n", active, p, W, n, S);
            exit(1);
        }
    }
    /* a window of several shards interleaves them */
    if (W >= 4 && S >= 64 && M >= 4) {
        uint64_t switches = 0, span = MINU(W * S, n);
        for (uint64_t p = 1; p < span; p++)
            switches += v[p] / S != v[p - 1] / S;
        CHECK(switches > span / 4);
    }
    for (int t = 0; t < 5 && n; t++) {
        uint64_t p = test_rand(rng) % n, id;
        CHECK_OK(cxlp_sampler_epoch_at(s, p, &id));
        CHECK(id == v[p]);
    }
    free(first);
    free(last);
    free(delta);
    free(v);
    cxlp_sampler_free(s);
}

int main(void)
{
    uint64_t seed = test_seed(), rng = seed;
    int trials = test_sanitized() ? 100 : 600;
    for (int t = 0; t < trials; t++) {
        uint64_t n = test_rand(&rng) % 20000;
        uint64_t S = 1 + test_rand(&rng) % (t % 3 ? 300 : 5);
        uint64_t W = 1 + test_rand(&rng) % (t % 2 ? 4 : 40);
        check_block(n, S, W, test_rand(&rng), &rng);
    }
    check_block(0, 5, 2, seed, &rng);
    check_block(1, 5, 2, seed, &rng);
    check_block(1000, 1000, 1, seed, &rng);
    check_block(1000, 5000, 3, seed, &rng);
    check_block(100000, 1000, 1, seed, &rng);
    check_block(100003, 1000, 8, seed, &rng);
    check_block(100003, 1, 1000, seed, &rng);

    /* epochs permute the shards differently */
    {
        cxlp_sampler *s = make(CXLP_ORDER_BLOCK, 100000, seed, 1, 0, 0, 1000, 1);
        uint64_t a[1000], b[1000];
        CHECK(cxlp_sampler_next(s, a, 1000) == 1000);
        CHECK_OK(cxlp_sampler_set_epoch(s, 1));
        CHECK(cxlp_sampler_next(s, b, 1000) == 1000);
        CHECK(a[0] / 1000 != b[0] / 1000 || a[1] != b[1]);
        cxlp_sampler_free(s);
    }
    /* huge n: O(1) memory, ids inside the first window's shards */
    {
        uint64_t n = UINT64_C(1) << 50, S = UINT64_C(1) << 20, W = 4;
        cxlp_sampler *s = make(CXLP_ORDER_BLOCK, n, seed, 8, 3, 1, S, W);
        uint64_t v[4096], shards[8] = {0}, ns = 0;
        CHECK(cxlp_sampler_next(s, v, 4096) == 4096);
        for (int i = 0; i < 4096; i++) {
            CHECK(v[i] < n);
            uint64_t sh = v[i] / S, k;
            for (k = 0; k < ns && shards[k] != sh; k++)
                ;
            if (k == ns) {
                CHECK(ns < W);
                shards[ns++] = sh;
            }
        }
        cxlp_sampler_free(s);
    }
    printf("ok\n");
    return 0;
}
