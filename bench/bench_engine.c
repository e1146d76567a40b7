/*
 * bench_engine.c - the gather engine alone (no Python) against a plain C
 * gather of the same records in the same order, in one process, rounds
 * paired: what the engine costs per batch beyond the copies.
 *
 * Engine: cxlp_loader_create over a RANDOM sampler of (seed 1, epoch r),
 * the consumer takes each batch and releases it at once. Plain: the same
 * permutation drawn before the clock, memcpy(buf + i*size, base + id*size,
 * size) per record (fixed-size records in one shard, as bench_sweep.py
 * ingests them), into BUFS batch buffers used in turn (1: one buffer that
 * stays in cache; the engine's ring depth: as much memory as the engine
 * writes into). Prints wall and CPU microseconds per batch of each and the
 * ratios.
 *
 * usage: bench_engine POOL NAME BATCH [THREADS=0] [ROUNDS=3] [BUFS=1]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cxlpool.h"

static double clock_s(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int index_fn(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    *n = cxlp_sampler_next(ctx, out, max);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: bench_engine POOL NAME BATCH [THREADS] [ROUNDS] [BUFS]\n");
        return 2;
    }
    cxlp_pool *p;
    cxlp_store *s;
    struct cxlp_pool_opts ro = {.readonly = 1};
    if (cxlp_pool_open(argv[1], &ro, &p) || cxlp_store_open(p, argv[2], &s)) {
        fprintf(stderr, "bench_engine: %s\n", cxlp_errmsg(NULL));
        return 1;
    }
    uint32_t bs = (uint32_t)atoi(argv[3]), th = argc > 4 ? (uint32_t)atoi(argv[4]) : 0;
    int rounds = argc > 5 ? atoi(argv[5]) : 3, nbuf = argc > 6 ? atoi(argv[6]) : 1;
    const struct cxlp_schema *sc = cxlp_store_schema(s);
    uint64_t n = cxlp_store_count(s), rs = sc->record_size;
    struct cxlp_view v0;
    if (!sc->fixed || bs == 0 || nbuf < 1 || n == 0 || cxlp_store_read(s, 0, &v0)) {
        fprintf(stderr, "bench_engine: needs fixed-size records, BATCH >= 1, BUFS >= 1\n");
        return 2;
    }
    struct cxlp_view vl;
    if (cxlp_store_read(s, n - 1, &vl) || (const uint8_t *)vl.data != (const uint8_t *)v0.data +
                                              (n - 1) * rs) {
        fprintf(stderr, "bench_engine: the records are not in one shard (ingest with a "
                        "--shard-bytes larger than the dataset)\n");
        return 2;
    }
    const uint8_t *base = v0.data;
    size_t bsz = (size_t)((bs * rs + 4095) & ~(uint64_t)4095);
    uint64_t *ord = malloc(n * sizeof *ord);
    uint8_t *bufs = aligned_alloc(4096, bsz * (size_t)nbuf);
    if (!ord || !bufs)
        return 1;
    memset(bufs, 0, bsz * (size_t)nbuf);
    uint64_t acc = 0;
    for (int r = 0; r < rounds; r++) {
        cxlp_sampler *smp;
        struct cxlp_sampler_config c = {.kind = CXLP_ORDER_RANDOM, .n = n, .seed = 1,
                                        .epoch = (uint64_t)r};
        if (cxlp_sampler_create(&c, &smp))
            return 1;
        cxlp_sampler_next(smp, ord, n);
        cxlp_sampler_set_epoch(smp, (uint64_t)r);

        double t0 = clock_s(CLOCK_MONOTONIC), c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        uint64_t nb = 0;
        for (uint64_t k = 0; k < n; k += bs, nb++) {
            uint8_t *buf = bufs + (nb % (uint64_t)nbuf) * bsz;
            uint64_t m = n - k < bs ? n - k : bs;
            for (uint64_t j = 0; j < m; j++)
                memcpy(buf + j * rs, base + ord[k + j] * rs, rs);
            acc += buf[0];
        }
        double pw = clock_s(CLOCK_MONOTONIC) - t0, pc = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;

        struct cxlp_loader_opts o = {.batch_size = bs, .threads = th, .numa_node = -1};
        cxlp_loader *l;
        if (cxlp_loader_create(s, &o, index_fn, smp, &l)) {
            fprintf(stderr, "bench_engine: %s\n", cxlp_errmsg(NULL));
            return 1;
        }
        t0 = clock_s(CLOCK_MONOTONIC);
        c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
        struct cxlp_batch *b;
        uint64_t eb = 0;
        while (cxlp_loader_next(l, &b) == 0 && b) {
            acc += ((const uint8_t *)b->data)[0];
            eb++;
            cxlp_loader_release(l, b);
        }
        double ew = clock_s(CLOCK_MONOTONIC) - t0, ec = clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0;
        printf("batch %u, %u threads, %u slots: engine %.2f us/batch (CPU %.2f) | plain into %d "
               "buffer(s) %.2f us/batch (CPU %.2f) | engine/plain: speed %.2f, CPU %.2f\n",
               bs, cxlp_loader_threads(l), cxlp_loader_slots(l, 0, NULL, NULL, 0),
               ew / (double)eb * 1e6, ec / (double)eb * 1e6, nbuf, pw / (double)nb * 1e6,
               pc / (double)nb * 1e6, pw / ew, ec / pc);
        cxlp_loader_free(l);
        cxlp_sampler_free(smp);
    }
    free(ord);
    free(bufs);
    cxlp_store_close(s);
    cxlp_pool_close(p);
    return (int)(acc & 0); /* the copies are used */
}
