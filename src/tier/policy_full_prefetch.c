/*
 * policy_full_prefetch.c - full_prefetch: the whole dataset copied into
 * the memory tiers before the first batch, fastest tier first.
 *   place:  every shard, hottest first (access counts in the pool), into
 *           the fastest memory tier until it is full, then the next; kept
 *   want:   window shards whose only memory copy is in a slower memory
 *           tier: promoted into the staging tier as they come up
 *   victim: among the misses' and promotions' copies, the least recently
 *           used
 *   drop:   nothing
 * A dataset larger than the memory tiers keeps its coldest shards at home,
 * read through misses.
 */
#include "tier/policy.h"

static size_t want(const struct tier_view *v, uint64_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < v->n_window && n < max; i++) {
        uint64_t k = v->window[i];
        if (v->slow[k] && !v->resident[k] && !v->busy[k])
            out[n++] = k;
    }
    return n;
}

static size_t place(const struct tier_view *v, const uint64_t *caps, uint32_t n_tiers,
                    struct tier_place *out, size_t max)
{
    return policy_hot_place(v, caps, n_tiers, NULL, out, max);
}

const struct tier_policy_ops tier_policy_full_prefetch = {
    .name = "full_prefetch", .want = want, .victim = policy_lru_victim, .drop = policy_none,
    .place = place, .holds = 1,
};
