/* Helpers shared by the sampler tests. */
#ifndef CXLP_TEST_SAMPLE_UTIL_H
#define CXLP_TEST_SAMPLE_UTIL_H

#include "test.h"

#define MINU(a, b) ((a) < (b) ? (a) : (b))

/* Draws everything left for s with random batch sizes; returns the count and
 * sets *out to a malloc'd array. */
static inline uint64_t drain(cxlp_sampler *s, uint64_t **out, uint64_t *rng)
{
    uint64_t cap = cxlp_sampler_len(s) + 1, n = 0;
    uint64_t *v = malloc(cap * sizeof *v);
    CHECK(v);
    for (;;) {
        size_t want = 1 + test_rand(rng) % 300;
        if (n + want > cap)
            want = cap - n;
        size_t k = cxlp_sampler_next(s, v + n, want);
        n += k;
        if (!k)
            break;
    }
    CHECK(n == cxlp_sampler_len(s));
    *out = v;
    return n;
}

static inline cxlp_sampler *make(int kind, uint64_t n, uint64_t seed, uint32_t world,
                                 uint32_t rank, int drop_last, uint64_t S, uint64_t W)
{
    struct cxlp_sampler_config c = {.kind = kind, .n = n, .seed = seed, .world = world,
                                    .rank = rank, .drop_last = drop_last,
                                    .shard_size = S, .window = W};
    cxlp_sampler *s = NULL;
    CHECK_OK(cxlp_sampler_create(&c, &s));
    return s;
}

/* 1 when v[0..n) is a permutation of [0, n). */
static inline int is_perm(const uint64_t *v, uint64_t n)
{
    uint8_t *seen = calloc(n ? n : 1, 1);
    CHECK(seen);
    int ok = 1;
    for (uint64_t i = 0; i < n && ok; i++) {
        if (v[i] >= n || seen[v[i]])
            ok = 0;
        else
            seen[v[i]] = 1;
    }
    free(seen);
    return ok;
}

static inline int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

#endif
