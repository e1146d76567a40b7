/*
 * order_quality.h - shuffle-quality figures of an epoch order, shared by
 * `cxlpool order --quality` and bench/bench_sample.c so that both report the
 * same numbers by the same code.
 */
#ifndef CXLPOOL_ORDER_QUALITY_H
#define CXLPOOL_ORDER_QUALITY_H

#include <stdint.h>

struct order_quality {
    double shards_per_batch; /* mean distinct shards in a full batch */
    double expected_shards;  /* the same for a uniform shuffle */
    double spearman;         /* rank correlation of position vs id */
    double chi2;             /* Pearson statistic of the G x G table */
    uint32_t grid;           /* G; degrees of freedom (G-1)^2 */
    double chi2_crit;        /* p = 0.001 critical value for (G-1)^2 df */
};

/* Figures for v[0..n), a permutation of [0, n) (an epoch order), with ids
 * stored in shards of S consecutive ids and batches of B positions:
 *   shards/batch  mean number of distinct shards per full batch;
 *   spearman      1 - 6 sum (v[p] - p)^2 / (n (n^2 - 1));
 *   chi2          Pearson's statistic of the G x G contingency table of
 *                 (id bucket, position bucket), G = 32 or less so that each
 *                 cell expects at least 5 (G >= 2; needs n >= 20); under a
 *                 uniformly random permutation it is about chi-square with
 *                 (G-1)^2 degrees of freedom, and the order passes when
 *                 chi2 < chi2_crit.
 * 0, -EINVAL (n < 20, S or B zero), -ENOMEM. */
int order_quality(const uint64_t *v, uint64_t n, uint64_t S, uint64_t B,
                  struct order_quality *q);

/* Wilson-Hilferty approximation of the chi-square critical value for df
 * degrees of freedom at upper-tail normal quantile z (3.0902: p = 0.001). */
double order_chi2_crit(double df, double z);

#endif
