/*
 * engine_count.c - the gather engine alone over any dataset and collation,
 * with a C consumer that takes each batch and releases it at once: a
 * program to count the engine's instructions under valgrind, which a
 * shared, loaded machine does not disturb where timing cannot tell a few
 * percent apart (two builds, one change: the count of each).
 *
 * One gather thread, a RANDOM order (seed 1, epoch 0), one epoch.
 *
 *   usage: engine_count POOL NAME BATCH [stack|pad|pack] [SEQ_LEN] [FIELDS]
 *     FIELDS: collate the dataset's first FIELDS fields (0: every field)
 *
 *   valgrind --tool=callgrind --callgrind-out-file=OUT build/engine_count ...
 *   callgrind_annotate --inclusive=yes OUT | grep 'loader.c:worker '
 *
 * gives the gather thread's instructions (planning, lookups, copies); the
 * consumer's are in cxlp_loader_next.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cxlpool.h"

static int index_fn(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    *n = cxlp_sampler_next(ctx, out, max);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: engine_count POOL NAME BATCH [stack|pad|pack] [SEQ_LEN] [FIELDS]\n");
        return 2;
    }
    const char *collate = argc > 4 ? argv[4] : "stack";
    struct cxlp_loader_opts o = {.batch_size = (uint32_t)atoi(argv[3]), .threads = 1,
                                 .numa_node = -1,
                                 .collate = !strcmp(collate, "pack") ? CXLP_COLLATE_PACK
                                            : !strcmp(collate, "pad") ? CXLP_COLLATE_PAD
                                                                      : CXLP_COLLATE_STACK,
                                 .seq_len = argc > 5 ? strtoull(argv[5], NULL, 10) : 0};
    o.n_fields = argc > 6 ? (uint32_t)atoi(argv[6]) : 0;
    for (uint32_t k = 0; k < o.n_fields && k < CXLP_MAX_FIELDS; k++)
        o.fields[k] = k;
    cxlp_pool *p;
    cxlp_store *s;
    struct cxlp_pool_opts ro = {.readonly = 1};
    cxlp_sampler *smp = NULL;
    cxlp_loader *l = NULL;
    if (cxlp_pool_open(argv[1], &ro, &p) || cxlp_store_open(p, argv[2], &s)) {
        fprintf(stderr, "engine_count: %s\n", cxlp_errmsg(NULL));
        return 1;
    }
    struct cxlp_sampler_config c = {.kind = CXLP_ORDER_RANDOM, .n = cxlp_store_count(s),
                                    .seed = 1};
    if (cxlp_sampler_create(&c, &smp) || cxlp_loader_create(s, &o, index_fn, smp, &l)) {
        fprintf(stderr, "engine_count: %s\n", cxlp_errmsg(NULL));
        return 1;
    }
    struct cxlp_batch *b;
    uint64_t batches = 0, rows = 0;
    int rc;
    while ((rc = cxlp_loader_next(l, &b)) == 0 && b) {
        batches++;
        rows += b->rows;
        cxlp_loader_release(l, b);
    }
    if (rc)
        fprintf(stderr, "engine_count: %s\n", cxlp_errmsg(l));
    printf("%llu batches, %llu rows, %u gather thread(s)\n", (unsigned long long)batches,
           (unsigned long long)rows, cxlp_loader_threads(l));
    cxlp_loader_free(l);
    cxlp_sampler_free(smp);
    cxlp_store_close(s);
    cxlp_pool_close(p);
    return rc ? 1 : 0;
}
