/*
 * feistel.h - a keyed bijection of [0, n) for any n <= 2^63, O(1) memory.
 *
 * Shape: a Feistel network on the mixed-radix domain Z_a x Z_b with
 * b = 2^h, h = bitlen(n-1) / 2, a = ceil(n / b), so a * b >= n and
 * a * b - n < b <= sqrt(2n). Cycle walking (apply the network again while the
 * result is >= n) maps [0, n) onto itself; its expected cost is
 * a*b/n < 1 + sqrt(2/n) applications, i.e. free, where a balanced network
 * on the smallest even bit-width 2^(2k) >= n would walk up to 4 times.
 *
 * Round pair i (L in Z_a, R in Z_b):
 *   t = (L + range_a(F(R ^ k_2i))) mod a          t in Z_a
 *   u = (R + range_b(F(t ^ k_2i+1))) mod b        u in Z_b
 *   (L, R) <- (t, u)
 * F is the splitmix64 finalizer (a bijective 64-bit mixer with full
 * avalanche); range_m(x) = floor(x * m / 2^64) maps it onto [0, m) without a
 * division, and b being a power of two makes split and join shifts. Each
 * round is invertible for any F (mod-add of a function of the other half),
 * so the network is a bijection whatever the keys. Rounds by domain size
 * a*b: 6 above 2^16 (three pairs; Luby-Rackoff needs 4 for a strong PRP with
 * a random round function, 2 more are margin for the very structured inputs
 * 0, 1, 2, ... at 1.5x the cost of 4: about 97 vs 143 million indices per
 * second per core), 12 up to 2^16 and 24 up to 2^8, because a Feistel
 * network mixes a small domain slowly: with 6 rounds the position of an id
 * over 2*10^5 epochs was far from uniform (Pearson chi-square of the n x n
 * (id, position) table: 1429 for n = 7 and 926 for n = 5, where a uniform
 * shuffle gives n(n-1) = 42 and 20).
 * n <= FEISTEL_TINY: no network at all; the permutation is a keyed
 * Fisher-Yates shuffle recomputed on the stack at each call (O(n) work,
 * exactly uniform up to the hash), since no round count makes a 2x3 domain
 * uniform.
 *
 * Rejected: a stored permutation (O(n) memory); an LCG or xorshift over a
 * power-of-two domain (weak: low bits cycle, consecutive outputs correlate);
 * a balanced binary Feistel on 2^(2k) (cycle walking up to 4x); division
 * based mixed-radix split (a 64-bit divide per index costs more than the
 * whole network).
 */
#ifndef CXLP_SAMPLE_FEISTEL_H
#define CXLP_SAMPLE_FEISTEL_H

#include <stddef.h>
#include <stdint.h>

#define FEISTEL_MAX_ROUNDS 24
#define FEISTEL_TINY 32

struct feistel {
    uint64_t n;              /* domain [0, n) */
    uint64_t a;              /* high radix: a = ceil(n / b) */
    uint32_t h;              /* b = 2^h */
    uint64_t bmask;          /* b - 1 */
    uint64_t key;
    int rounds;              /* even, <= FEISTEL_MAX_ROUNDS */
    uint64_t rk[FEISTEL_MAX_ROUNDS];
};

static inline uint64_t mix64(uint64_t z)
{
    z ^= z >> 30;
    z *= 0xbf58476d1ce4e5b9ULL;
    z ^= z >> 27;
    z *= 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* floor(x * m / 2^64): uniform-ish map of a 64-bit hash onto [0, m). */
static inline uint64_t range_u64(uint64_t x, uint64_t m)
{
    return (uint64_t)(((unsigned __int128)x * m) >> 64);
}

/* Derives a 64-bit key from four words (seed, epoch, purpose tag, extra). */
uint64_t derive_key(uint64_t seed, uint64_t epoch, uint64_t tag, uint64_t extra);

/* Sets f to the permutation of [0, n) chosen by key. n = 0 and 1 are fine. */
void feistel_init(struct feistel *f, uint64_t n, uint64_t key);

/* One pass of the network over [0, a*b). */
static inline uint64_t feistel_round_trip(const struct feistel *f, uint64_t x)
{
    uint64_t L = x >> f->h, R = x & f->bmask, a = f->a, b = f->bmask + 1;
    for (int i = 0; i < f->rounds; i += 2) {
        uint64_t t = L + range_u64(mix64(R ^ f->rk[i]), a);
        if (t >= a)
            t -= a;
        uint64_t u = R + range_u64(mix64(t ^ f->rk[i + 1]), b);
        if (u >= b)
            u -= b;
        L = t;
        R = u;
    }
    return (L << f->h) | R;
}

/* Four independent round trips in lockstep. One index is a serial chain of
 * 6 rounds of multiply latency; four chains side by side keep the multiplier
 * busy (next()'s fast path; about 1.5-2x the throughput of one chain). */
static inline void feistel_round_trip4(const struct feistel *f, uint64_t x[4])
{
    uint64_t L[4], R[4], a = f->a, b = f->bmask + 1;
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++) {
        L[k] = x[k] >> f->h;
        R[k] = x[k] & f->bmask;
    }
    for (int i = 0; i < f->rounds; i += 2) {
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            uint64_t t = L[k] + range_u64(mix64(R[k] ^ f->rk[i]), a);
            L[k] = t >= a ? t - a : t;
        }
#pragma GCC unroll 4
        for (int k = 0; k < 4; k++) {
            uint64_t u = R[k] + range_u64(mix64(L[k] ^ f->rk[i + 1]), b);
            R[k] = u >= b ? u - b : u;
        }
    }
#pragma GCC unroll 4
    for (int k = 0; k < 4; k++)
        x[k] = (L[k] << f->h) | R[k];
}

/* n <= FEISTEL_TINY: image (inverse = 0) or preimage (inverse = 1) of x. */
uint64_t feistel_tiny(const struct feistel *f, uint64_t x, int inverse);

/* The permutation: x in [0, n) -> [0, n). Cycle walking ends because x's
 * cycle under the network contains x itself, which is < n. */
static inline uint64_t feistel_apply(const struct feistel *f, uint64_t x)
{
    if (f->n <= FEISTEL_TINY)
        return f->n <= 1 ? x : feistel_tiny(f, x, 0);
    do
        x = feistel_round_trip(f, x);
    while (x >= f->n);
    return x;
}

/* feistel_apply on four values at once. */
static inline void feistel_apply4(const struct feistel *f, uint64_t x[4])
{
    if (f->n <= FEISTEL_TINY) {
        for (int k = 0; k < 4; k++)
            x[k] = feistel_apply(f, x[k]);
        return;
    }
    feistel_round_trip4(f, x);
    for (int k = 0; k < 4; k++)
        while (x[k] >= f->n) /* rare: a*b - n < sqrt(2n) */
            x[k] = feistel_round_trip(f, x[k]);
}

/* feistel_apply on x[0..n) in place: the same values, computed 64 at a
 * time (eight AVX-512 vectors of eight lanes) where the CPU has AVX-512 F
 * and DQ (feistel.c), four at a time otherwise. */
void feistel_apply_n(const struct feistel *f, uint64_t *x, size_t n);

/* 1 when feistel_apply_n takes the AVX-512 path for f (tests report it). */
int feistel_simd(const struct feistel *f);

/* The inverse permutation. */
uint64_t feistel_invert(const struct feistel *f, uint64_t y);

#endif
