/*
 * policy_streaming.c - streaming: shards flow through a small memory
 * window in sampler order and are not retained.
 *   want:   the window's shards not in memory, in order of first use (as
 *           lookahead; the budget is the window's size)
 *   victim: only a shard no rank needs within its window
 *   drop:   every resident shard no rank needs within its window, at once,
 *           even with room left: memory holds what is about to be read and
 *           nothing else (a second epoch reads everything again)
 *   holds:  0: an item too sparse to pay for a copy is never staged, even
 *           into room (its copy would be dropped after its few reads)
 */
#include "tier/policy.h"

static size_t want(const struct tier_view *v, uint64_t *out, size_t max)
{
    return policy_window_missing(v, out, max);
}

static uint64_t victim(const struct tier_view *v, uint64_t for_shard)
{
    (void)for_shard;
    for (size_t i = 0; i < v->n_res; i++) {
        uint64_t k = v->res_list[i];
        if (v->next_use[k] == TIER_NEVER && !v->busy[k])
            return k;
    }
    return TIER_NONE;
}

static size_t drop(const struct tier_view *v, uint64_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < v->n_res && n < max; i++) {
        uint64_t k = v->res_list[i];
        if (v->next_use[k] == TIER_NEVER && !v->busy[k])
            out[n++] = k;
    }
    return n;
}

const struct tier_policy_ops tier_policy_streaming = {
    .name = "streaming", .want = want, .victim = victim, .drop = drop, .place = NULL,
    .holds = 0,
};
