/* RANDOM and SEQUENTIAL orders: every epoch is a permutation of [0, n) for
 * many n (0, 1, primes, powers of 4 and their neighbours, random values),
 * epochs and seeds differ, n = 2^40 and 2^63 are injective on samples and
 * invert exactly, next(), at() and epoch_at() agree. */
#include <math.h>

#include "sample/feistel.h"
#include "sample_util.h"

static void check_perm_n(uint64_t n, uint64_t seed, uint64_t *rng)
{
    cxlp_sampler *s = make(CXLP_ORDER_RANDOM, n, seed, 1, 0, 0, 0, 0);
    uint64_t *v;
    CHECK(cxlp_sampler_len(s) == n && cxlp_sampler_epoch_len(s) == n);
    uint64_t got = drain(s, &v, rng);
    CHECK(got == n);
    if (!is_perm(v, n)) {
        fprintf(stderr, "not a permutation: n %" PRIu64 " seed %" PRIu64 "\n", n, seed);
        exit(1);
    }
    for (int t = 0; t < 8 && n; t++) {
        uint64_t p = test_rand(rng) % n, id, back;
        CHECK_OK(cxlp_sampler_at(s, p, &id));
        CHECK(id == v[p]);
        CHECK_OK(cxlp_sampler_epoch_at(s, p, &id));
        CHECK(id == v[p]);
        CHECK_OK(cxlp_sampler_position(s, id, &back));
        CHECK(back == p);
    }
    uint64_t junk;
    CHECK_RC(cxlp_sampler_at(s, n, &junk), CXLP_ERANGE);
    CHECK_RC(cxlp_sampler_epoch_at(s, n, &junk), CXLP_ERANGE);
    free(v);
    cxlp_sampler_free(s);
}

static int is_prime(uint64_t x)
{
    if (x < 2)
        return 0;
    for (uint64_t d = 2; d * d <= x; d++)
        if (x % d == 0)
            return 0;
    return 1;
}

/* Sampled injectivity and inverse for a huge n. */
static void check_huge(uint64_t n, uint64_t seed, uint64_t *rng, int samples)
{
    cxlp_sampler *s = make(CXLP_ORDER_RANDOM, n, seed, 1, 0, 0, 0, 0);
    uint64_t *ids = malloc(samples * sizeof *ids);
    CHECK(ids);
    uint64_t p0 = test_rand(rng) % (n - samples);
    for (int i = 0; i < samples; i++) {
        /* half a contiguous run (structured input), half scattered */
        uint64_t p = i < samples / 2 ? p0 + i : test_rand(rng) % n, back;
        CHECK_OK(cxlp_sampler_epoch_at(s, p, &ids[i]));
        CHECK(ids[i] < n);
        CHECK_OK(cxlp_sampler_position(s, ids[i], &back));
        CHECK(back == p);
        uint64_t id = test_rand(rng) % n, q, fwd;
        CHECK_OK(cxlp_sampler_position(s, id, &q));
        CHECK(q < n);
        CHECK_OK(cxlp_sampler_epoch_at(s, q, &fwd));
        CHECK(fwd == id);
    }
    /* injective on the contiguous half: distinct positions, distinct ids */
    qsort(ids, samples / 2, sizeof *ids, cmp_u64);
    for (int i = 1; i < samples / 2; i++)
        CHECK(ids[i] != ids[i - 1]);
    /* next() reaches the same ids as epoch_at() */
    uint64_t buf[64], id;
    CHECK(cxlp_sampler_next(s, buf, 64) == 64);
    for (int i = 0; i < 64; i++) {
        CHECK_OK(cxlp_sampler_epoch_at(s, i, &id));
        CHECK(buf[i] == id);
    }
    free(ids);
    cxlp_sampler_free(s);
}

/* feistel_apply_n (next()'s path: AVX-512 lanes where the CPU has them)
 * gives feistel_apply's value (order_at's path, scalar) at every position,
 * for domains with and without cycle walking, blocks cut anywhere. */
static void check_lanes(uint64_t n, uint64_t key, uint64_t *rng)
{
    struct feistel f;
    feistel_init(&f, n, key);
    uint64_t m = n < 5000 ? n : 5000, *x = malloc((m + 1) * sizeof *x);
    CHECK(x);
    uint64_t p0 = n > m ? test_rand(rng) % (n - m) : 0;
    for (uint64_t i = 0; i < m; i++)
        x[i] = p0 + i;
    for (uint64_t i = 0; i < m;) { /* uneven pieces: the lanes' tails too */
        uint64_t r = 1 + test_rand(rng) % 200, k = MINU(m - i, r);
        feistel_apply_n(&f, x + i, (size_t)k);
        i += k;
    }
    for (uint64_t i = 0; i < m; i++)
        if (x[i] != feistel_apply(&f, p0 + i)) {
            fprintf(stderr, "feistel_apply_n: n %" PRIu64 " position %" PRIu64 ": %" PRIu64
                    ", scalar %" PRIu64 " (simd %d)\n", n, p0 + i, x[i],
                    feistel_apply(&f, p0 + i), feistel_simd(&f));
            exit(1);
        }
    free(x);
}

int main(void)
{
    uint64_t seed = test_seed(), rng = seed;
    int scale = test_sanitized() ? 4 : 1;

    {
        struct feistel f;
        feistel_init(&f, 1000, 1);
        printf("feistel_apply_n: %s\n", feistel_simd(&f) ? "AVX-512 lanes" : "scalar");
        /* 2^(2k) + 1: a*b is near 2n, so about half the values walk again */
        for (uint64_t k = 3; k <= 31; k++)
            for (int d = -1; d <= 1; d++)
                check_lanes((UINT64_C(1) << (2 * k)) + (uint64_t)d, test_rand(&rng), &rng);
        for (int i = 0; i < 300 / scale; i++)
            check_lanes(33 + test_rand(&rng) % 5000, test_rand(&rng), &rng);
        for (int i = 0; i < 100 / scale; i++)
            check_lanes(1 + (test_rand(&rng) >> (1 + test_rand(&rng) % 63)), test_rand(&rng),
                        &rng);
        check_lanes(UINT64_C(1) << 63, seed, &rng); /* a = 2^32: the scalar path */
    }

    /* every n up to 1500, then primes, powers of 4 and their neighbours */
    for (uint64_t n = 0; n <= (uint64_t)(1500 / scale); n++)
        check_perm_n(n, test_rand(&rng), &rng);
    int primes = 0;
    for (uint64_t n = 1501; primes < 200 / scale; n += 1 + test_rand(&rng) % 300)
        if (is_prime(n)) {
            check_perm_n(n, test_rand(&rng), &rng);
            primes++;
        }
    for (uint64_t p = 4; p <= (UINT64_C(1) << 20); p *= 4)
        for (int d = -1; d <= 1; d++)
            check_perm_n(p + d, test_rand(&rng), &rng);
    for (int i = 0; i < 400 / scale; i++)
        check_perm_n(1 + test_rand(&rng) % 100000, test_rand(&rng), &rng);
    check_perm_n(3000017, seed, &rng);

    /* small n: over many epochs every id is equally likely at every position
     * (Pearson chi-square of the n x n (id, position) table has mean n(n-1)
     * for a uniform shuffle; a Feistel network with few rounds on a tiny
     * domain lands far above it) */
    {
        static const uint64_t ns[] = {2, 3, 5, 7, 10, 17, 33, 64, 100};
        static double cnt[100][100];
        for (size_t t = 0; t < sizeof ns / sizeof ns[0]; t++) {
            uint64_t n = ns[t], epochs = test_sanitized() ? 20000 : 40000;
            memset(cnt, 0, sizeof cnt);
            cxlp_sampler *s = make(CXLP_ORDER_RANDOM, n, seed, 1, 0, 0, 0, 0);
            uint64_t v[100];
            for (uint64_t e = 0; e < epochs; e++) {
                CHECK_OK(cxlp_sampler_set_epoch(s, e));
                CHECK(cxlp_sampler_next(s, v, n) == n);
                for (uint64_t p = 0; p < n; p++)
                    cnt[v[p]][p]++;
            }
            double E = (double)epochs / (double)n, x2 = 0, mean = (double)(n * (n - 1));
            for (uint64_t i = 0; i < n; i++)
                for (uint64_t p = 0; p < n; p++)
                    x2 += (cnt[i][p] - E) * (cnt[i][p] - E) / E;
            if (x2 > mean + 6 * sqrt(2 * mean) + 10) {
                fprintf(stderr, "position uniformity: n %" PRIu64 " chi2 %.1f, mean %.0f\n",
                        n, x2, mean);
                exit(1);
            }
            cxlp_sampler_free(s);
        }
    }

    /* epochs and seeds give different orders; the same ones repeat exactly */
    {
        const uint64_t n = 1000;
        uint64_t a[1000], b[1000], c[1000], d[1000];
        cxlp_sampler *s = make(CXLP_ORDER_RANDOM, n, seed, 1, 0, 0, 0, 0);
        CHECK(cxlp_sampler_next(s, a, n) == n);
        CHECK_OK(cxlp_sampler_set_epoch(s, 1));
        CHECK(cxlp_sampler_next(s, b, n) == n);
        CHECK_OK(cxlp_sampler_set_epoch(s, 0));
        CHECK(cxlp_sampler_next(s, c, n) == n);
        CHECK(memcmp(a, c, sizeof a) == 0);
        cxlp_sampler *t = make(CXLP_ORDER_RANDOM, n, seed + 1, 1, 0, 0, 0, 0);
        CHECK(cxlp_sampler_next(t, d, n) == n);
        int same_ab = 0, same_ad = 0;
        for (uint64_t i = 0; i < n; i++) {
            same_ab += a[i] == b[i];
            same_ad += a[i] == d[i];
        }
        /* a random permutation fixes 1 point of another on average */
        CHECK(same_ab < 20 && same_ad < 20);
        cxlp_sampler_free(s);
        cxlp_sampler_free(t);
    }

    /* the order is not the identity or a shift: consecutive outputs jump */
    {
        cxlp_sampler *s = make(CXLP_ORDER_RANDOM, 1 << 20, seed, 1, 0, 0, 0, 0);
        uint64_t v[4096];
        CHECK(cxlp_sampler_next(s, v, 4096) == 4096);
        int near = 0;
        for (int i = 1; i < 4096; i++)
            near += (v[i] > v[i - 1] ? v[i] - v[i - 1] : v[i - 1] - v[i]) < 1024;
        CHECK(near < 40); /* expected about 4096 * 2/1024 = 8 */
        cxlp_sampler_free(s);
    }

    /* avalanche over 2^40: positions one bit apart give ids about 20 bits
     * apart, for every bit (a network cut to 2 rounds moves high input bits
     * into only a few output bits) */
    {
        cxlp_sampler *s = make(CXLP_ORDER_RANDOM, UINT64_C(1) << 40, seed, 1, 0, 0, 0, 0);
        for (int bit = 0; bit < 40; bit++) {
            uint64_t dist = 0, trials = 2000;
            for (uint64_t t = 0; t < trials; t++) {
                uint64_t p = test_rand(&rng) & ((UINT64_C(1) << 40) - 1), a, b;
                CHECK_OK(cxlp_sampler_epoch_at(s, p, &a));
                CHECK_OK(cxlp_sampler_epoch_at(s, p ^ (UINT64_C(1) << bit), &b));
                dist += (uint64_t)__builtin_popcountll(a ^ b);
            }
            double mean = (double)dist / (double)trials;
            if (mean < 19 || mean > 21) {
                fprintf(stderr, "avalanche: bit %d moves %.2f output bits\n", bit, mean);
                exit(1);
            }
        }
        cxlp_sampler_free(s);
    }

    check_huge(UINT64_C(1) << 40, seed, &rng, 200000 / scale);
    check_huge(UINT64_C(1000000000000), seed, &rng, 20000 / scale);
    check_huge(CXLP_SAMPLER_MAX_N, seed, &rng, 20000 / scale);
    check_huge(CXLP_SAMPLER_MAX_N - 12345, seed, &rng, 20000 / scale);

    /* sequential is the identity; it has no randomness to key */
    {
        cxlp_sampler *s = make(CXLP_ORDER_SEQUENTIAL, 777, seed, 1, 0, 0, 0, 0);
        uint64_t *v, p;
        CHECK(drain(s, &v, &rng) == 777);
        for (uint64_t i = 0; i < 777; i++)
            CHECK(v[i] == i);
        CHECK_OK(cxlp_sampler_position(s, 5, &p));
        CHECK(p == 5);
        free(v);
        cxlp_sampler_free(s);
    }
    printf("ok\n");
    return 0;
}
