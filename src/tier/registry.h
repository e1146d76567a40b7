/*
 * registry.h - the host's need lists in the pool's staging registry
 * (registry.c).
 */
#ifndef CXLP_TIER_REGISTRY_H
#define CXLP_TIER_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define REG_SLOT_BYTES 16384u
#define REG_ENTRIES ((REG_SLOT_BYTES - 128) / 8)
#define REG_DIST_MAX ((UINT64_C(1) << 24) - 1)

/* Claims a slot of the registry (area: bytes of the pool's stage area,
 * writable) for an engine of liveness domain domain (attach_domain) reading
 * the dataset of states_off; -1 when none is free (the engine then evicts
 * by its own window only). */
int registry_claim(uint8_t *area, uint64_t bytes, uint64_t states_off, uint64_t domain);
void registry_release(uint8_t *area, int slot);
/* Replaces the slot's need list: shards[i] is needed dist[i] positions
 * from now (at most REG_ENTRIES; distances saturate at REG_DIST_MAX). */
void registry_publish(uint8_t *area, int slot, const uint64_t *shards, const uint64_t *dist,
                      size_t n);
/* What an engine says of its misses (cxlp_pool_stagers, cxlpool top):
 * counters since it began, written by its owner, read without the seqlock
 * (a display, never a decision). */
enum {
    REG_WHY_BUDGET,      /* bytes its copies may hold */
    REG_WHY_UNIT,        /* bytes of its staging unit (a shard, or a unit) */
    REG_WHY_KEPT,        /* bytes of kept copies (others') in the budget */
    REG_WHY_HITS,        /* records found in memory */
    REG_WHY_MISSES,      /* records whose item was not */
    REG_WHY_NO_ROOM,     /* items read from the home: no room for a copy */
    REG_WHY_POLICY,      /* enum cxlp_policy */
    REG_WHY_STALL_NS,    /* time batches waited */
    REG_WHY_STAGED,      /* bytes copied from the home */
    REG_WHY_N
};
void registry_publish_why(uint8_t *area, int slot, const uint64_t why[REG_WHY_N]);
/* The live slots of domain's engines in a registry mapped read-only:
 * owner pid, reg key (the dataset's states_off | 1 for units), why words.
 * Returns how many were written (at most cap). */
struct reg_info {
    uint32_t pid;
    uint64_t key;
    uint64_t why[REG_WHY_N];
};
size_t registry_list(const uint8_t *area, uint64_t bytes, uint64_t domain, struct reg_info *out,
                     size_t cap);
/* Lowers next_use[shard] to the distance other live engines of the same
 * dataset and domain need it at; shards whose next_use was UINT64_MAX
 * before are appended to touched (up to cap); returns how many were
 * appended. others (or NULL): per shard, how many of those engines name it
 * (saturating at 255), counted only for shards with a next use (in
 * touched); seen: per shard, scratch for it (the slot that counted it
 * last, + 1), reset by the caller with others. */
size_t registry_merge(uint8_t *area, uint64_t bytes, int self, uint64_t states_off,
                      uint64_t domain, uint64_t n_shards, uint64_t *next_use,
                      uint64_t *touched, size_t cap, uint8_t *others, uint16_t *seen);

#endif
