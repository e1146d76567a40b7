/*
 * remote_tier.h - a pool's remote tier (remote_tier.c; docs/remote.md):
 * datasets of peers mirrored into the catalog, and the reader that reads
 * their shards from the peers.
 */
#ifndef CXLP_STORE_REMOTE_TIER_H
#define CXLP_STORE_REMOTE_TIER_H

#include <stdint.h>

#include "cxlpool.h"
#include "media/media.h"

/* The remote tier holding store s's dataset (a mirror: its home is there),
 * or -1. */
int store_remote_of(const cxlp_store *s);
/* The tier that holds every shard of s: the remote tier of a mirror, else
 * the pool's home (POOL_NO_HOME when none). */
uint32_t store_home(const cxlp_store *s);
/* A reader of remote tier u for store s (one thread's): addresses of its
 * shards read from a peer that holds the same shard table. 0 or an error
 * with its message. */
int store_remote_reader(const cxlp_store *s, uint32_t u, struct media_reader **out);
/* The remote tier with words for s's shards: a mirror's home, or a tier
 * naming peers that hold a dataset of this pool too; UINT32_MAX: none. */
uint32_t store_remote_tier(const cxlp_store *s);
/* A peer of the store's remote tier (its index in the tier's list) that
 * has shard k whole in a memory tier, by the peers' answers to HELD (each
 * asked again when its answer is 200 ms old, or 20 ms for a shard none of
 * them has while some peer has shards in memory; one that did not answer
 * after 10 s, an ask waiting at most 500 ms); -1 when none does, or the
 * store has no remote tier or is a server's (local_only). Thread-safe. */
int store_peer_memory(cxlp_store *s, uint64_t k);
/* Closes the store's idle connections (store_free, once no reader is
 * open). */
void store_remote_free(cxlp_store *s);

#endif
