/*
 * policy_lookahead.c - lookahead: stage what the host's ranks read next,
 * evict what they read last (Belady's MIN, over the known future).
 *
 * The order of every sampler is a pure function of (seed, epoch, position,
 * world size), so the engine holds the ids of the next `horizon` batches of
 * its rank, and every rank of the host publishes the shards its window
 * needs (registry.c). Then:
 *   want:   the window's shards not in memory, in order of first use
 *   victim: among resident shards not being read, the one whose next use
 *           (over every rank) is farthest, shards no rank needs first
 *           (then the least recently used of them); and only if that is
 *           farther than the next use of the shard to bring in: evicting a
 *           shard needed sooner than the one staged would only move the
 *           miss earlier (Belady)
 *           For a miss (for = TIER_NONE) only a shard no rank needs within
 *           its window goes: the engine stretches the budget by the missing
 *           shard rather than evict one the window is about to read
 *   drop:   nothing: a shard stays while nothing farther needs its room
 *
 * Rejected: frequency or recency estimates (what lru and hot_first do):
 * with the future known they can only be as good, and are worse whenever
 * the order is not the past repeated.
 */
#include "tier/policy.h"

static size_t want(const struct tier_view *v, uint64_t *out, size_t max)
{
    return policy_window_missing(v, out, max);
}

static uint64_t victim(const struct tier_view *v, uint64_t for_shard)
{
    /* a miss: only what nobody needs soon */
    uint64_t need = for_shard == TIER_NONE ? TIER_NEVER - 1 : v->next_use[for_shard];
    uint64_t best = TIER_NONE, far = 0, when = UINT64_MAX;
    for (size_t i = 0; i < v->n_res; i++) {
        uint64_t k = v->res_list[i], nu = v->next_use[k];
        if (nu == 0 || v->busy[k] || nu <= need)
            continue;
        if (best == TIER_NONE || nu > far || (nu == far && v->last_use[k] < when)) {
            best = k;
            far = nu;
            when = v->last_use[k];
        }
    }
    return best;
}

const struct tier_policy_ops tier_policy_lookahead = {
    .name = "lookahead", .want = want, .victim = victim, .drop = policy_none, .place = NULL,
    .holds = 1,
};
