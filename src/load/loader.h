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
    /* Record id as a view valid for the loader's lifetime. Thread-safe. */
    int (*read)(const void *ctx, uint64_t id, struct cxlp_view *v);
    const void *ctx;
    int fixed;               /* 1: every record is record_size bytes */
    uint64_t record_size;
    int dtype;               /* element type of variable-size records */
    /* After a batch during which read_alarm moved: 0 when the source is
     * still intact, else the code (thread's message says why). May be NULL. */
    int (*check)(const void *ctx);
};

int loader_create_src(const struct rec_src *src, const struct cxlp_loader_opts *opts,
                      cxlp_index_fn index_fn, void *index_ctx, cxlp_loader **out);

#endif
