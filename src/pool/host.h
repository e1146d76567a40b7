/*
 * host.h - what the pool needs to be shared by several hosts (host.c):
 * who we are, who else is alive, the cross-host writer lock, and the
 * coherence discipline for the pool's shared words.
 *
 * Glossary:
 *   host id     a 64-bit id chosen at the first attach on a host and kept
 *               (docs/hosts.md says where); survives reboots
 *   domain      processes that can judge each other by pid: same host id,
 *               same boot, same PID namespace. Its key is a hash of the
 *               three. Leases and reservations name their domain's key.
 *   pool clock  hdr->clock, advanced one tick when it has not moved for
 *               POOL_TICK_MS on the clock of some live attacher; it stands
 *               still when no attacher runs, so a silence is never
 *               measured while nobody could have heard
 *   beat        the pool clock value a process last stamped into its lease
 *               (and into the lock word while it holds it); a beat older
 *               than the expiry (in ticks) means the owner stopped or died
 *   epoch       low bits of the gen word, changed at every acquisition of
 *               the writer lock: the fence that keeps a deposed holder from
 *               publishing
 *
 * Invariants:
 *   a lease or reservation of my domain is live iff its process is
 *     (pid + start time), when pids can be judged here at all;
 *   any other is live iff its beat is within the expiry, except those of a
 *     previous boot of my host (same host id, other boot id, silent for 3
 *     ticks), which are dead at once: the reboot rule;
 *   one writer holds the lock word at a time; it publishes generation G+1
 *     only by CAS of the gen word from exactly (G, its epoch).
 */
#ifndef CXLP_POOL_HOST_H
#define CXLP_POOL_HOST_H

#include <stdint.h>

#include "pool/pool_internal.h"

/* Fills s for the calling process (host id file, boot id, PID namespace).
 * Never fails: a host id that cannot be stored falls back as documented. */
void host_identity(struct host_self *s);

/* Finds or claims the registry entry of our domain (a->host_idx). CXLP_EBUSY
 * when the registry is full of live domains. Needs a writable header. */
int host_register(struct attach *a, struct obj *o);

/* The pool clock now (after advancing it if it is due). */
uint64_t host_clock(struct attach *a);

/* Liveness judgements; clock is host_clock's value. */
int host_lease_live(struct attach *a, const struct pool_lease *l, uint64_t owner,
                    uint64_t clock);
int host_resv_live(struct attach *a, uint64_t pid, uint64_t starttime, uint64_t host,
                   uint64_t lease, uint64_t clock);
/* The registry entry of domain key, or NULL. */
const struct pool_host *host_find(const struct attach *a, uint64_t key);
/* Entries in use in the registry. */
uint32_t host_count(const struct attach *a);

/* The cross-host writer lock, for any writer (txn.c uses it; so may
 * migration). Waits up to the lock timeout (CXLP_LOCK_TIMEOUT_MS, default
 * 30 s): CXLP_EBUSY naming the holder's host and pid and the age of its
 * heartbeat. A holder of our domain that died is replaced at once; any
 * other only once its beat expired. On success the epoch was bumped and
 * l->gen_word is the header's gen word. */
int host_lock(struct attach *a, struct wlock *l, struct obj *o);
/* 0 while l is still ours and its beat fresh; CXLP_EBUSY ("lost") else. */
int host_lock_check(struct attach *a, const struct wlock *l, struct obj *o);
/* The fenced publish: gen word (G, epoch) -> (gen, epoch) by CAS, with
 * write-back on a non-coherent pool. CXLP_EBUSY when the lock was lost
 * (another writer took over): nothing became visible. */
int host_publish_gen(struct attach *a, struct wlock *l, uint64_t gen, struct obj *o);
void host_unlock(struct attach *a, struct wlock *l);

/* Heartbeats: a process-wide thread stamps the beat of every watched
 * attachment every POOL_TICK_MS / 2, renews the lock word while held, and
 * notices a lease taken from us (expired while stopped). */
void host_watch(struct attach *a);
void host_unwatch(struct attach *a);

/* Forces the expiry of every lease (and the writer lock) of the domains
 * that match who: a host name, a host id or a domain key (hex). *n gets the
 * number of leases expired. CXLP_ENOTFOUND when nothing matches. */
int host_expire(struct attach *a, const char *who, uint32_t *n, struct obj *o);

/* Loads and stores of the pool's shared words through the coherence
 * discipline: on a non-coherent pool a load first invalidates the word's
 * line and a store (or CAS) writes it back after. */
uint64_t host_load(const struct attach *a, const uint64_t *p);
void host_store(const struct attach *a, uint64_t *p, uint64_t v);
int host_cas(const struct attach *a, uint64_t *p, uint64_t *expected, uint64_t desired);

/* The generation in a gen word. */
static inline uint64_t gen_of(uint64_t word)
{
    return word >> POOL_EPOCH_BITS;
}

#endif
