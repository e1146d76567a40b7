/*
 * policy_lru.c - lru: a cache with no knowledge of the future, the
 * baseline lookahead is measured against.
 *   want:   nothing: a shard is staged when a batch misses it
 *   victim: the resident shard read longest ago (not one being read)
 *   drop:   nothing
 */
#include "tier/policy.h"

const struct tier_policy_ops tier_policy_lru = {
    .name = "lru", .want = policy_none, .victim = policy_lru_victim, .drop = policy_none,
    .place = NULL, .holds = 1,
};
