/*
 * order_quality.c - shuffle-quality figures of an epoch order (see
 * order_quality.h). One pass per figure over the drawn order; memory is the
 * order itself (the caller's) plus one byte per shard.
 *
 * The chi-square grid shrinks for small n so that every cell expects at
 * least 5 (the usual validity rule of Pearson's test); at n >= 5120 it is
 * the 32 x 32 table the bench has always used.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "order_quality.h"

double order_chi2_crit(double df, double z)
{
    double a = 2.0 / (9.0 * df);
    double c = 1 - a + z * sqrt(a);
    return df * c * c * c;
}

int order_quality(const uint64_t *v, uint64_t n, uint64_t S, uint64_t B,
                  struct order_quality *q)
{
    if (n < 20 || !S || !B)
        return -EINVAL;
    memset(q, 0, sizeof *q);
    uint64_t M = n / S + (n % S != 0);
    uint8_t *mark = calloc(M, 1);
    uint32_t G = 32;
    while (G > 2 && (uint64_t)G * G * 5 > n)
        G--;
    uint64_t *cell = calloc((size_t)G * G, sizeof *cell);
    if (!mark || !cell) {
        free(mark);
        free(cell);
        return -ENOMEM;
    }
    uint64_t nb = 0, total = 0;
    for (uint64_t b0 = 0; b0 + B <= n; b0 += B, nb++) {
        for (uint64_t i = b0; i < b0 + B; i++) {
            uint64_t sh = v[i] / S;
            total += !mark[sh];
            mark[sh] = 1;
        }
        for (uint64_t i = b0; i < b0 + B; i++)
            mark[v[i] / S] = 0;
    }
    q->shards_per_batch = nb ? (double)total / (double)nb : 0;
    /* a batch of B uniform positions misses a given shard of size s with
     * probability about (1 - s/n)^B; exact enough for the shards we use */
    q->expected_shards = (double)M * (1 - pow(1 - (double)S / (double)n, (double)(B < n ? B : n)));
    /* output position and id are both ranks 0..n-1 */
    long double d2 = 0;
    for (uint64_t p = 0; p < n; p++) {
        long double d = (long double)v[p] - (long double)p;
        d2 += d * d;
    }
    long double nn = (long double)n;
    q->spearman = (double)(1 - 6 * d2 / (nn * (nn * nn - 1)));
    for (uint64_t p = 0; p < n; p++) {
        uint64_t i = (uint64_t)((unsigned __int128)v[p] * G / n);
        uint64_t j = (uint64_t)((unsigned __int128)p * G / n);
        cell[i * G + j]++;
    }
    /* cells differ in size by one id or position when G does not divide n:
     * use each cell's own expectation (row share x column share x n) */
    double x2 = 0;
    for (uint32_t i = 0; i < G; i++) {
        uint64_t ri = (uint64_t)(((unsigned __int128)(i + 1) * n + G - 1) / G) -
                      (uint64_t)(((unsigned __int128)i * n + G - 1) / G);
        for (uint32_t j = 0; j < G; j++) {
            double e = (double)ri * (double)((uint64_t)(((unsigned __int128)(j + 1) * n + G - 1) / G) -
                                             (uint64_t)(((unsigned __int128)j * n + G - 1) / G)) /
                       (double)n;
            double o = (double)cell[(size_t)i * G + j] - e;
            x2 += o * o / e;
        }
    }
    q->chi2 = x2;
    q->grid = G;
    q->chi2_crit = order_chi2_crit((double)(G - 1) * (G - 1), 3.0902);
    free(mark);
    free(cell);
    return 0;
}
