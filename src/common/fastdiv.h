/*
 * fastdiv.h - exact unsigned 64-bit division by a divisor fixed at run time,
 * as one multiply-high, a subtract and two shifts (Granlund and Montgomery,
 * "Division by invariant integers using multiplication", 1994, fig. 4.1).
 *
 * Invariant: for every d >= 1 and every n < 2^64,
 *   fastdiv(n, fastdiv_init(d)) == n / d
 * with m = floor(2^64 * (2^l - d) / d) + 1 < 2^64, l = ceil(log2 d),
 * s1 = min(l, 1), s2 = max(l - 1, 0).
 *
 * Why: the record lookup divides every sample id by the records per shard;
 * a 64-bit div is 10..90 cycles depending on the core, this is about 4.
 * Rejected: a power-of-two shard size (the record count per shard follows
 * the record size, which users choose); floating-point reciprocals (inexact
 * past 2^53, needs a correction step that reads memory).
 */
#ifndef CXLP_FASTDIV_H
#define CXLP_FASTDIV_H

#include <stdint.h>

struct fastdiv {
    uint64_t m;
    unsigned s1, s2;
};

static inline struct fastdiv fastdiv_init(uint64_t d)
{
    struct fastdiv f = {1, 0, 0}; /* d <= 1: n / 1 == n */
    if (d > 1) {
        unsigned l = 64 - (unsigned)__builtin_clzll(d - 1);
        uint64_t r = (l == 64 ? 0 : (UINT64_C(1) << l)) - d; /* 2^l - d mod 2^64 */
        f.m = (uint64_t)((((unsigned __int128)r) << 64) / d) + 1;
        f.s1 = 1;
        f.s2 = l - 1;
    }
    return f;
}

static inline uint64_t fastdiv(uint64_t n, struct fastdiv f)
{
    uint64_t t = (uint64_t)(((unsigned __int128)n * f.m) >> 64);
    return (t + ((n - t) >> f.s1)) >> f.s2;
}

#endif
