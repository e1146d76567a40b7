/*
 * feistel.c - key schedule and inverse of the keyed bijection (feistel.h
 * holds the forward path inline: it is the sampler's inner loop).
 */
#include <xxhash.h>

#include "sample/feistel.h"

uint64_t derive_key(uint64_t seed, uint64_t epoch, uint64_t tag, uint64_t extra)
{
    const uint64_t w[4] = {seed, epoch, tag, extra};
    return XXH3_64bits(w, sizeof w);
}

static uint32_t bitlen(uint64_t x)
{
    return x ? 64 - (uint32_t)__builtin_clzll(x) : 0;
}

void feistel_init(struct feistel *f, uint64_t n, uint64_t key)
{
    f->n = n;
    f->h = n > 1 ? bitlen(n - 1) / 2 : 0;
    f->bmask = (UINT64_C(1) << f->h) - 1;
    /* a = ceil(n / b); n <= 2^63 so n + b - 1 does not overflow */
    f->a = n > 1 ? (n + f->bmask) >> f->h : 1;
    f->key = key;
    uint64_t dom = f->a << f->h;
    f->rounds = dom <= (1u << 8) ? 24 : dom <= (1u << 16) ? 12 : 6;
    for (int i = 0; i < f->rounds; i++)
        f->rk[i] = mix64(key + (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ULL);
}

static uint64_t round_trip_inverse(const struct feistel *f, uint64_t y)
{
    uint64_t L = y >> f->h, R = y & f->bmask, a = f->a, b = f->bmask + 1;
    for (int i = f->rounds - 2; i >= 0; i -= 2) {
        /* (L, R) = (t, u): undo u = R0 + F(t), then t = L0 + F(R0) */
        uint64_t fu = range_u64(mix64(L ^ f->rk[i + 1]), b);
        uint64_t r0 = R >= fu ? R - fu : R + b - fu;
        uint64_t ft = range_u64(mix64(r0 ^ f->rk[i]), a);
        uint64_t l0 = L >= ft ? L - ft : L + a - ft;
        L = l0;
        R = r0;
    }
    return (L << f->h) | R;
}

uint64_t feistel_tiny(const struct feistel *f, uint64_t x, int inverse)
{
    uint8_t perm[FEISTEL_TINY];
    uint64_t n = f->n;
    for (uint64_t i = 0; i < n; i++)
        perm[i] = (uint8_t)i;
    for (uint64_t i = n - 1; i > 0; i--) {
        uint64_t j = range_u64(mix64(f->key ^ (i * 0x9e3779b97f4a7c15ULL)), i + 1);
        uint8_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    if (!inverse)
        return perm[x];
    for (uint64_t i = 0; i < n; i++)
        if (perm[i] == x)
            return i;
    return x; /* unreachable: perm is a permutation of [0, n) */
}

uint64_t feistel_invert(const struct feistel *f, uint64_t y)
{
    if (f->n <= FEISTEL_TINY)
        return f->n <= 1 ? y : feistel_tiny(f, y, 1);
    do
        y = round_trip_inverse(f, y);
    while (y >= f->n);
    return y;
}
