/*
 * loader.h - the gather engine's private seam: where records come from.
 *
 * cxlp_loader_create reads from a cxlp_store; tests (and, later, remote or
 * tiered sources) plug in any reader with the same contract.
 */
#ifndef CXLP_LOADER_H
#define CXLP_LOADER_H

#include "common/common.h"

struct rec_src {
    /* Record id as a view valid for the loader's lifetime. Thread-safe.
     * Used when read_fields is NULL: a source of one field described by
     * fixed, record_size and dtype. */
    int (*read)(const void *ctx, uint64_t id, struct cxlp_view *v);
    const void *ctx;
    int fixed;               /* 1: every record is record_size bytes */
    uint64_t record_size;
    int dtype;               /* element type of variable-size records */
    /* A source of several fields: fields f[0..n) of record id into v[0..n)
     * (one lookup of the record), and the schema that describes them. */
    int (*read_fields)(const void *ctx, uint64_t id, const uint32_t *f, uint32_t n,
                       struct cxlp_view *v);
    const struct cxlp_schema *schema;
    /* Optional: fields f[0..nf) of records ids[0..n) at once, record i's
     * field j into out[i * nf + j] (one call per batch instead of one per
     * record); on failure the code of the first bad id and its index in
     * *bad, out[0 .. *bad * nf) holding the views of the ids before it.
     * NULL: read_fields (or read) per id. Thread-safe. */
    int (*resolve)(const void *ctx, const uint64_t *ids, size_t n, const uint32_t *f,
                   uint32_t nf, struct cxlp_view *out, size_t *bad);
    /* After a batch during which read_alarm moved: 0 when the source is
     * still intact, else the code (thread's message says why). May be NULL. */
    int (*check)(const void *ctx);
    int node;                /* NUMA node the records live on; -1 unknown */
    struct tier_engine *tier;/* tiered datasets: batches are made resident and
                                pinned by it (tier/engine.c); the loader owns it */
    uint64_t nt_ring;        /* tests: ring bytes from which STACK stores are
                                non-temporal; 0: 3/4 of the last level cache */
};

int loader_create_src(const struct rec_src *src, const struct cxlp_loader_opts *opts,
                      cxlp_index_fn index_fn, void *index_ctx, cxlp_loader **out);

/* The CPUs gather threads of a loader would run on (the process's
 * affinity, narrowed to node's CPUs when node >= 0 and it has any) and the
 * node chosen for a source on src_node (-1: none): a CPU-less node, as CXL
 * memory appears, gives the nearest node with CPUs by the firmware's
 * distances. For tests and the loader only. */
int loader_cpus(int node, int src_node, int *chosen_node);

/* Sleeps of the consumer that its own timer ended (loader.c, the
 * hand-off). For tests. */
uint64_t loader_timeouts(const cxlp_loader *l);

#endif
