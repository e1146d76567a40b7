/*
 * policy_lru.c - lru: a cache with no knowledge of the future, the
 * baseline lookahead is measured against.
 *   want:   nothing: a shard is staged when a batch misses it
 *   victim: the resident shard read longest ago (not one being read)
 *   drop:   nothing
 */
#include "tier/policy.h"

static size_t want(const struct tier_view *v, uint64_t *out, size_t max)
{
    (void)v;
    (void)out;
    (void)max;
    return 0;
}

static size_t drop(const struct tier_view *v, uint64_t *out, size_t max)
{
    (void)v;
    (void)out;
    (void)max;
    return 0;
}

const struct tier_policy_ops tier_policy_lru = {
    .name = "lru", .want = want, .victim = policy_lru_victim, .drop = drop, .place = NULL,
};
