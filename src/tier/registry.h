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
#define REG_ENTRIES ((REG_SLOT_BYTES - 64) / 8)
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
/* Lowers next_use[shard] to the distance other live engines of the same
 * dataset and domain need it at; shards whose next_use was UINT64_MAX
 * before are appended to touched (up to cap); returns how many were
 * appended. */
size_t registry_merge(uint8_t *area, uint64_t bytes, int self, uint64_t states_off,
                      uint64_t domain, uint64_t n_shards, uint64_t *next_use,
                      uint64_t *touched, size_t cap);

#endif
