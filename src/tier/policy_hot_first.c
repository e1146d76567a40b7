/*
 * policy_hot_first.c - hot_first (the design's first policy): the hottest
 * shards kept in the fastest memory, by access counts that persist in the
 * pool (every read adds to its shard's count, word 0 of its states).
 *   place:  before the first batch, shards ranked by count (ties: lower
 *           shard first): the top 10% into the fastest memory tier, the
 *           next 30% into the next one (when the pool has it), each within
 *           what that tier may take; kept, never evicted
 *   want:   nothing: the rest is read from the home tier through misses
 *   victim: among the misses' copies, the least recently used
 *   drop:   nothing
 * Counts grow with use, so the next epoch (or the next job) places by the
 * epochs before it: heat, not the future.
 */
#include "tier/policy.h"

static size_t place(const struct tier_view *v, const uint64_t *caps, uint32_t n_tiers,
                    struct tier_place *out, size_t max)
{
    const uint32_t share[2] = {100, 300}; /* 10%, then 30% */
    return policy_hot_place(v, caps, n_tiers > 2 ? 2 : n_tiers, share, out, max);
}

const struct tier_policy_ops tier_policy_hot_first = {
    .name = "hot_first", .want = policy_none, .victim = policy_lru_victim, .drop = policy_none,
    .place = place, .holds = 1,
};
