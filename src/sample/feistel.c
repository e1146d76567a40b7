/*
 * feistel.c - key schedule and inverse of the keyed bijection (feistel.h
 * holds the forward path inline: it is the sampler's inner loop), and the
 * forward path over blocks of ids in AVX-512 lanes (feistel_apply_n), chosen
 * at run time. Hand-written: the network is this project's own (its ids are
 * the documented order), so no SIMD library computes it; the lanes must give
 * feistel_round_trip's values bit for bit (tests/c/test_sample_perm.c).
 */
#include <xxhash.h>

#include "sample/feistel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define FEISTEL_AVX512 1

/* The network on 8 lanes, the same arithmetic as feistel_round_trip:
 * mix64's multiplies are 64-bit low products (vpmullq), and range_u64(x, m)
 * for m < 2^32 is ((x_hi * m) + (x_lo * m >> 32)) >> 32 with two 32x32->64
 * products (vpmuludq): floor(x * m / 2^64) exactly, since the dropped low
 * half only ever adds a fraction below one before the last shift, and the
 * sum stays below 2^64. NVEC vectors (64 ids) in lockstep: one alone is a
 * serial chain of multiply latency per round (8 measured 1.3x the ids per
 * second of 4, 2x those of 2, bench_sample). */
#define NVEC 8
__attribute__((target("avx512f,avx512dq"))) static inline __m512i mix64_v(__m512i z)
{
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 30));
    z = _mm512_mullo_epi64(z, _mm512_set1_epi64((long long)0xbf58476d1ce4e5b9ULL));
    z = _mm512_xor_si512(z, _mm512_srli_epi64(z, 27));
    z = _mm512_mullo_epi64(z, _mm512_set1_epi64((long long)0x94d049bb133111ebULL));
    return _mm512_xor_si512(z, _mm512_srli_epi64(z, 31));
}

/* (h + range_u64(mix64(src ^ key), m)) mod m, for h < m < 2^32 */
__attribute__((target("avx512f,avx512dq"))) static inline __m512i
round_v(__m512i h, __m512i src, __m512i key, __m512i m)
{
    __m512i x = mix64_v(_mm512_xor_si512(src, key));
    __m512i lo = _mm512_mul_epu32(x, m), hi = _mm512_mul_epu32(_mm512_srli_epi64(x, 32), m);
    __m512i r = _mm512_srli_epi64(_mm512_add_epi64(hi, _mm512_srli_epi64(lo, 32)), 32);
    __m512i t = _mm512_add_epi64(h, r);
    return _mm512_mask_sub_epi64(t, _mm512_cmpge_epu64_mask(t, m), t, m);
}

/* x[0 .. 8 NVEC) through one round trip of the network; 1 when a result is
 * outside [0, n) (cycle walking goes on). */
__attribute__((target("avx512f,avx512dq"))) static int round_trip_v(const struct feistel *f,
                                                                    uint64_t *x)
{
    const __m512i n = _mm512_set1_epi64((long long)f->n);
    __mmask8 out = 0;
    const __m512i a = _mm512_set1_epi64((long long)f->a);
    const __m512i b = _mm512_set1_epi64((long long)(f->bmask + 1));
    const __m512i bm = _mm512_set1_epi64((long long)f->bmask);
    __m512i L[NVEC], R[NVEC];
    for (int k = 0; k < NVEC; k++) {
        __m512i v = _mm512_loadu_si512(x + 8 * k);
        L[k] = _mm512_srli_epi64(v, f->h);
        R[k] = _mm512_and_si512(v, bm);
    }
    for (int i = 0; i < f->rounds; i += 2) {
        const __m512i k0 = _mm512_set1_epi64((long long)f->rk[i]);
        const __m512i k1 = _mm512_set1_epi64((long long)f->rk[i + 1]);
        for (int k = 0; k < NVEC; k++)
            L[k] = round_v(L[k], R[k], k0, a);
        for (int k = 0; k < NVEC; k++)
            R[k] = round_v(R[k], L[k], k1, b);
    }
    for (int k = 0; k < NVEC; k++) {
        __m512i y = _mm512_or_si512(_mm512_slli_epi64(L[k], f->h), R[k]);
        out |= _mm512_cmpge_epu64_mask(y, n);
        _mm512_storeu_si512(x + 8 * k, y);
    }
    return out != 0;
}

static int cpu_avx512(void)
{
    static int have = -1; /* racy but idempotent: every thread computes the same */
    int h = __atomic_load_n(&have, __ATOMIC_RELAXED);
    if (h < 0) {
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
        __atomic_store_n(&have, h, __ATOMIC_RELAXED);
    }
    return h;
}
#endif

int feistel_simd(const struct feistel *f)
{
#ifdef FEISTEL_AVX512
    /* the lanes' range_u64 needs a < 2^32 (b = 2^h, h <= 31 always) */
    return f->n > FEISTEL_TINY && f->a <= UINT32_MAX && cpu_avx512();
#else
    (void)f;
    return 0;
#endif
}

void feistel_apply_n(const struct feistel *f, uint64_t *x, size_t n)
{
    size_t i = 0;
#ifdef FEISTEL_AVX512
    if (feistel_simd(f)) {
        for (; i + 8 * NVEC <= n; i += 8 * NVEC) {
            if (round_trip_v(f, x + i))
                for (size_t k = i; k < i + 8 * NVEC; k++)
                    while (x[k] >= f->n) /* rare: a*b - n < sqrt(2n) */
                        x[k] = feistel_round_trip(f, x[k]);
        }
    }
#endif
    for (; i + 4 <= n; i += 4)
        feistel_apply4(f, x + i);
    for (; i < n; i++)
        x[i] = feistel_apply(f, x[i]);
}

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
