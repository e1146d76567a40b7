/*
 * tier.h - the tier layer's private interface: naming tiers, and what the
 * gather engine asks of the staging engine (stage.c).
 */
#ifndef CXLP_TIER_H
#define CXLP_TIER_H

#include "common/common.h"
#include "pool/pool.h"

/* A tier named by kind ("dram", "cxl", "nvme": the first tier of that
 * kind) or by index; -1 when the pool has no such tier. */
int tier_lookup(struct attach *a, const char *tier);

/* The staging engine of a loader on a tiered dataset (engine.c). It wraps
 * the loader's index source: engine_next is the loader's source, and
 * engine_read_fields its record reader (rec_src). */
struct tier_engine;
int engine_create(cxlp_store *s, const struct cxlp_loader_opts *o, cxlp_index_fn src,
                  void *src_ctx, struct tier_engine **out);
/* Stops the stagers and frees the engine; the loader's threads are done. */
void engine_free(struct tier_engine *e);
int engine_next(void *ctx, uint64_t *out, size_t max, size_t *n);
int engine_read_fields(const void *ctx, uint64_t id, const uint32_t *f, uint32_t n,
                       struct cxlp_view *v);
/* store_check of the engine's store (the gather's check after a batch
 * during which read_alarm moved). */
int engine_check(const void *ctx);
/* Around one batch's gather, in the gathering thread: makes the shards of
 * ids[0..n) readable (fetching what is missing: a miss), pins them and
 * resolves each once; batch_end unpins and counts the batch's records. */
int engine_batch_begin(struct tier_engine *e, const uint64_t *ids, size_t n);
void engine_batch_end(struct tier_engine *e, uint64_t records);
void engine_stats(struct tier_engine *e, struct cxlp_loader_stats *st);

#endif
