/* fastdiv (src/common/fastdiv.h) equals the hardware division for every
 * divisor class the record lookup meets: 1, powers of two and their
 * neighbours, the largest values, and random divisors and dividends of every
 * width, including dividends near 2^64 where an inexact reciprocal fails. */
#include "common/fastdiv.h"
#include "test.h"

static void check(uint64_t n, uint64_t d)
{
    uint64_t got = fastdiv(n, fastdiv_init(d)), want = n / d;
    if (got != want) {
        fprintf(stderr, "%" PRIu64 " / %" PRIu64 ": got %" PRIu64 ", want %" PRIu64 "\n", n, d,
                got, want);
        exit(1);
    }
}

static void around(uint64_t d, uint64_t *seed)
{
    static const uint64_t fixed[] = {0, 1, 2, 3, UINT64_MAX, UINT64_MAX - 1, UINT64_MAX / 2,
                                     UINT64_MAX / 2 + 1, UINT64_C(1) << 53,
                                     (UINT64_C(1) << 53) + 1};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        check(fixed[i], d);
    /* multiples of d and their neighbours: where a quotient steps */
    for (int i = 0; i < 64; i++) {
        uint64_t q = test_rand(seed) >> (test_rand(seed) % 64);
        unsigned __int128 n = (unsigned __int128)q * d;
        if (n >> 64)
            continue;
        check((uint64_t)n, d);
        if (n)
            check((uint64_t)n - 1, d);
        if ((uint64_t)n != UINT64_MAX)
            check((uint64_t)n + 1, d);
    }
    for (int i = 0; i < 64; i++)
        check(test_rand(seed) >> (test_rand(seed) % 64), d);
}

int main(void)
{
    uint64_t seed = test_seed();
    for (uint64_t d = 1; d < 5000; d++)
        around(d, &seed);
    for (int b = 1; b < 64; b++) {
        uint64_t p = UINT64_C(1) << b;
        around(p - 1, &seed);
        around(p, &seed);
        around(p + 1, &seed);
    }
    around(UINT64_MAX, &seed);
    around(UINT64_MAX - 1, &seed);
    for (int i = 0; i < 20000; i++) {
        uint64_t d = test_rand(&seed) >> (test_rand(&seed) % 64);
        around(d ? d : 1, &seed);
    }
    printf("ok\n");
    return 0;
}
