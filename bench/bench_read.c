/*
 * bench_read.c - the per-record cost of the read path alone: cxlp_store_read
 * of random ids (a 4096-entry table, so the ids stay in L1) with no copy,
 * the part of a gather that does not scale with record size. Prints the
 * best of ROUNDS passes of N reads in ns per read.
 *
 * usage: bench_read POOL NAME [N=20000000] [ROUNDS=5]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cxlpool.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: bench_read POOL NAME [N] [ROUNDS]\n");
        return 2;
    }
    uint64_t n_reads = argc > 3 ? strtoull(argv[3], NULL, 0) : 20000000;
    int rounds = argc > 4 ? atoi(argv[4]) : 5;
    cxlp_pool *p;
    cxlp_store *s;
    if (cxlp_pool_open(argv[1], NULL, &p) || cxlp_store_open(p, argv[2], &s)) {
        fprintf(stderr, "bench_read: %s\n", cxlp_errmsg(NULL));
        return 1;
    }
    uint64_t n = cxlp_store_count(s), x = 42, acc = 0, ids[4096];
    if (n == 0) {
        fprintf(stderr, "bench_read: %s has no records\n", argv[2]);
        return 1;
    }
    for (int i = 0; i < 4096; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        ids[i] = (x >> 11) % n;
    }
    double best = 1e300;
    for (int r = 0; r < rounds; r++) {
        double t0 = now();
        for (uint64_t i = 0; i < n_reads; i++) {
            struct cxlp_view v;
            if (cxlp_store_read(s, ids[i & 4095], &v))
                return 1;
            acc += (uintptr_t)v.data + v.len;
        }
        double ns = (now() - t0) / (double)n_reads * 1e9;
        best = ns < best ? ns : best;
    }
    printf("%s/%s: %" PRIu64 " records, best of %d x %" PRIu64 " reads: %.2f ns/read (%" PRIu64 ")\n",
           argv[1], argv[2], n, rounds, n_reads, best, acc & 1);
    cxlp_store_close(s);
    cxlp_pool_close(p);
    return 0;
}
