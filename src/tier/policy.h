/*
 * policy.h - placement policies: one table of functions the staging engine
 * (engine.c) calls, each policy in its own file (policy_*.c) that reads
 * what the engine shows it (struct tier_view) and calls nothing above it.
 *
 * Glossary (all positions count record ids of this rank's stream)
 *   window     the ids the engine holds ahead of the loader: the next
 *              horizon batches of this rank; their distinct shards in order
 *              of first use are v->window
 *   next_use   per shard, how many positions from now its next use is:
 *              from this rank's window, from the recently handed out ids
 *              (being gathered: 0) and from the need lists other ranks of
 *              the host publish (their distance, in their own positions);
 *              TIER_NEVER when none of them needs it within its window
 *   resident   the shard has an evictable (cache) copy in the staging tier
 *   kept       the shard has a copy there placed by migration or by a
 *              placement policy: readable, never evicted, not counted in
 *              the budget
 *   budget     bytes of cache copies of this dataset the staging tier may
 *              hold (every rank's engine counts the same copies)
 *
 * A policy answers three questions; the engine does the copying, the
 * eviction, the waiting and the accounting:
 *   want    which shards to stage now, most urgent first (only shards
 *           neither resident nor kept)
 *   victim  which resident shard to evict to make room for shard `for`
 *           (TIER_NONE: room for a miss), or TIER_NONE: evict nothing
 *   drop    resident shards to evict now although there is room
 * place (optional) is asked once, before the first batch: copies to make
 * and keep in the memory tiers (hot_first, full_prefetch).
 * Whatever a policy wants, the engine does not stage an item too sparse to
 * pay for a copy (sizing.h, engine_sparse) where that needs an eviction
 * (or ever, for a policy that does not hold copies): its batches read it
 * in part.
 */
#ifndef CXLP_TIER_POLICY_H
#define CXLP_TIER_POLICY_H

#include <stddef.h>
#include <stdint.h>

#define TIER_NEVER UINT64_MAX
#define TIER_NONE UINT64_MAX

struct tier_view {
    uint64_t n_shards;
    const uint8_t *resident;     /* per shard: 1 = a cache copy in the staging tier */
    const uint8_t *kept;         /* per shard: 1 = a kept copy in a memory tier */
    const uint32_t *busy;        /* per shard: nonzero = being staged now, or held
                                    by a batch being gathered: never a victim */
    const uint8_t *slow;         /* per shard: readable only from a memory tier
                                    slower than the staging tier */
    const uint64_t *next_use;    /* per shard: distance to the next use, TIER_NEVER */
    const uint64_t *last_use;    /* per shard: when it was last read or copied (ids of
                                    batches begun by then), 0 never */
    const uint64_t *heat;        /* per shard: accesses counted in the pool (or NULL) */
    const uint64_t *len;         /* per shard: bytes of a copy */
    const uint64_t *window;      /* distinct shards of the window, first use first */
    size_t n_window;
    const uint64_t *res_list;    /* the resident shards */
    size_t n_res;
    uint64_t budget, used;       /* bytes of cache copies allowed, held */
    uint64_t horizon;            /* positions the window spans when full */
};

/* A copy to make before the first batch: shard into the tier at rank
 * `tier` among the pool's memory tiers (0 = fastest). */
struct tier_place {
    uint64_t shard;
    uint32_t tier;
};

struct tier_policy_ops {
    const char *name;
    size_t (*want)(const struct tier_view *v, uint64_t *out, size_t max);
    uint64_t (*victim)(const struct tier_view *v, uint64_t for_shard);
    size_t (*drop)(const struct tier_view *v, uint64_t *out, size_t max);
    /* caps[i]: bytes memory tier i may take; NULL op: places nothing */
    size_t (*place)(const struct tier_view *v, const uint64_t *caps, uint32_t n_tiers,
                    struct tier_place *out, size_t max);
    /* 1: a copy stays until its room is needed, so the engine stages an
     * item too sparse to pay for a copy (engine_sparse) while the budget
     * has room for it without evicting (its later reads find it); 0
     * (streaming, which drops what the window no longer needs): never */
    int holds;
};

extern const struct tier_policy_ops tier_policy_lookahead;
extern const struct tier_policy_ops tier_policy_lru;
extern const struct tier_policy_ops tier_policy_streaming;
extern const struct tier_policy_ops tier_policy_hot_first;
extern const struct tier_policy_ops tier_policy_full_prefetch;
/* The table of enum cxlp_policy `policy` (lookahead for DEFAULT or an
 * unknown value): what the staging engine and the simulator both call. */
const struct tier_policy_ops *tier_policy_of(int policy);

/* Shared by the policies that stage the window in order (lookahead,
 * streaming): the window's shards neither resident, kept nor busy. */
size_t policy_window_missing(const struct tier_view *v, uint64_t *out, size_t max);
/* A want or drop that names no shard. */
size_t policy_none(const struct tier_view *v, uint64_t *out, size_t max);
/* The resident shard used longest ago (LRU), or TIER_NONE. */
uint64_t policy_lru_victim(const struct tier_view *v, uint64_t for_shard);
/* Shards ranked by heat (hottest first, ties: lower shard) into the memory
 * tiers in order: tier i takes the next permille[i] / 1000 of the ranking
 * (permille NULL: whatever fits, tier after tier), within caps[i] bytes. */
size_t policy_hot_place(const struct tier_view *v, const uint64_t *caps, uint32_t n_tiers,
                        const uint32_t *permille, struct tier_place *out, size_t max);

#endif
