/* BLOCK order: every epoch is a permutation; at any position at most W
 * shards are active (between their first and last sample); W = 1 reads each
 * shard as one contiguous run; samples of a window are mixed across its
 * shards; the shard order changes with the epoch. With the ramp, epoch 0's
 * windows grow from one shard (1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15...: at
 * most 5/4 of the one before, at least one more) up to W, and the other
 * epochs are those of the order without it. */
#include "sample_util.h"

static cxlp_sampler *make_ramp(uint64_t n, uint64_t seed, uint64_t S, uint64_t W, int ramp,
                               uint64_t epoch)
{
    struct cxlp_sampler_config c = {.kind = CXLP_ORDER_BLOCK, .n = n, .seed = seed, .world = 1,
                                    .shard_size = S, .window = W, .ramp = ramp, .epoch = epoch};
    cxlp_sampler *s = NULL;
    CHECK_OK(cxlp_sampler_create(&c, &s));
    return s;
}

/* Epoch 0 with the ramp: window i's positions hold exactly its shards,
 * window 0 one, then the ramp's sizes, then W each; a permutation; the
 * same epoch 1 as without the ramp; states restore only into a ramp. */
static void check_ramp(uint64_t n, uint64_t S, uint64_t W, uint64_t seed, uint64_t *rng)
{
    cxlp_sampler *s = make_ramp(n, seed, S, W, 1, 0);
    uint64_t *v, got = drain(s, &v, rng);
    CHECK(got == n && is_perm(v, n));
    uint64_t M = n ? (n - 1) / S + 1 : 0, Wc = MINU(W, M ? M : 1), at = 0, sz = 1;
    uint64_t *win = malloc((M + 1) * sizeof *win), left = M;
    for (uint64_t j = 0; j <= M; j++)
        win[j] = UINT64_MAX;
    for (uint64_t w = 0; at < n; w++) {
        uint64_t want = MINU(sz, left), distinct = 0, len = 0;
        /* window w: the positions of its want shards, none of an earlier
         * window's */
        while (at + len < n) {
            uint64_t sh = v[at + len] / S;
            if (win[sh] == UINT64_MAX) {
                if (distinct == want)
                    break;
                win[sh] = w;
                distinct++;
            }
            CHECK(win[sh] == w);
            len++;
        }
        CHECK(distinct == want);
        left -= distinct;
        at += len;
        sz = sz < Wc ? MINU(Wc, sz + 1 > sz * 5 / 4 ? sz + 1 : sz * 5 / 4) : Wc;
    }
    free(win);
    for (int t = 0; t < 5 && n; t++) {
        uint64_t p = test_rand(rng) % n, id;
        CHECK_OK(cxlp_sampler_epoch_at(s, p, &id));
        CHECK(id == v[p]);
    }
    /* resume inside epoch 0 */
    if (n > 10) {
        cxlp_sampler *r = make_ramp(n, seed, S, W, 1, 0), *plain = make_ramp(n, seed, S, W, 0, 0);
        uint64_t k = 1 + test_rand(rng) % (n - 1), x;
        uint64_t tmp[1];
        for (uint64_t i = 0; i < k; i++)
            CHECK(cxlp_sampler_next(r, tmp, 1) == 1);
        struct cxlp_sampler_state st;
        CHECK_OK(cxlp_sampler_state(r, &st));
        cxlp_sampler *r2 = make_ramp(n, seed, S, W, 1, 0);
        CHECK_OK(cxlp_sampler_restore(r2, &st));
        CHECK(cxlp_sampler_next(r2, &x, 1) == 1 && x == v[k]);
        CHECK(cxlp_sampler_restore(plain, &st) == CXLP_EARG);
        cxlp_sampler_free(r);
        cxlp_sampler_free(r2);
        cxlp_sampler_free(plain);
    }
    /* epoch 1: no ramp, the plain order's */
    cxlp_sampler *a = make_ramp(n, seed, S, W, 1, 1), *b = make_ramp(n, seed, S, W, 0, 1);
    uint64_t *va, *vb;
    CHECK(drain(a, &va, rng) == n && drain(b, &vb, rng) == n);
    CHECK(n == 0 || memcmp(va, vb, n * sizeof *va) == 0);
    free(va);
    free(vb);
    cxlp_sampler_free(a);
    cxlp_sampler_free(b);
    free(v);
    cxlp_sampler_free(s);
}

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
    for (int t = 0; t < trials / 3; t++) {
        uint64_t n = test_rand(&rng) % 30000;
        uint64_t S = 1 + test_rand(&rng) % (t % 3 ? 300 : 5);
        uint64_t W = 1 + test_rand(&rng) % (t % 2 ? 6 : 60);
        check_ramp(n, S, W, test_rand(&rng), &rng);
    }
    check_ramp(0, 5, 8, seed, &rng);
    check_ramp(100003, 1000, 48, seed, &rng);
    check_ramp(512 * 2048, 2048, 24, seed, &rng);

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
