/*
 * registry.c - what the ranks of a host tell each other about the future:
 * each staging engine publishes the shards its window needs and how soon
 * (its need list), in the pool's staging registry, so that an engine that
 * evicts from the memory tier they share picks the shard no rank needs
 * soonest (Belady over the host, not over one rank).
 *
 * The registry is the pool object's stage area (tiered pools), REG_SLOTS
 * slots of REG_SLOT_BYTES. A slot is claimed like a lease slot (CAS of
 * (seq << 32) | pid on a free owner word, start time and liveness domain
 * after it) and cleared when its owner is found dead. Only processes of the
 * owner's domain (host, boot, PID namespace: docs/hosts.md) judge it by pid
 * or read its needs: a loader of another host neither steals the slot of a
 * live process it cannot see nor lets that host's needs steer its evictions. Its owner writes it under a seqlock (seq
 * odd while writing); readers copy it word by word and retry when seq
 * moved. Everything read is checked (entry count, shard numbers): a slot is
 * pool memory any process can scribble on.
 *
 *   entry = (shard << 24) | min(distance, 2^24 - 1)
 * distance counts positions of the owner's stream from its now.
 *
 * Rejected: each engine computing the other ranks' futures from their
 * sampler parameters (every engine would redo every rank's sampler work,
 * and orders given as id arrays would have no parameters to share).
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic.h"
#include "tier/registry.h"

struct reg_slot {
    uint64_t owner;            /* (seq << 32) | pid; pid 0: free */
    uint64_t starttime;
    uint64_t states_off;       /* the dataset */
    uint64_t seq;              /* seqlock */
    uint64_t n;                /* entries */
    uint64_t domain;           /* the owner's liveness domain key */
    uint64_t why[10];          /* REG_WHY_*, the rest 0 */
    uint64_t need[REG_ENTRIES];
};
_Static_assert(sizeof(struct reg_slot) == REG_SLOT_BYTES, "a registry slot is 16 KiB");
_Static_assert(REG_WHY_N <= 10, "the why words fit their slot header");

#define PID_MASK 0xffffffffull

static struct reg_slot *slot_at(uint8_t *area, int i)
{
    return (struct reg_slot *)(area + (size_t)i * REG_SLOT_BYTES);
}

/* 1 when slot s (owner word o) belongs to a live process, or to another
 * domain (not ours to judge). */
static int slot_taken(const struct reg_slot *s, uint64_t o, uint64_t domain)
{
    if (at_load_relaxed(&s->domain) != domain)
        return 1;
    return proc_alive((pid_t)(o & PID_MASK), at_load_relaxed(&s->starttime));
}

int registry_claim(uint8_t *area, uint64_t bytes, uint64_t states_off, uint64_t domain)
{
    if (!area)
        return -1;
    int n = (int)(bytes / REG_SLOT_BYTES);
    uint64_t pid = (uint64_t)getpid(), st = proc_starttime(getpid());
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < n; i++) {
            struct reg_slot *s = slot_at(area, i);
            uint64_t o = at_load_acquire(&s->owner); /* pairs with the CAS below */
            if (o & PID_MASK) {
                if (pass == 0 || slot_taken(s, o, domain))
                    continue;
                /* a dead owner's slot: free it first */
                if (!at_cas_acq_rel(&s->owner, &o, (o >> 32) << 32))
                    continue;
                o = (o >> 32) << 32;
            }
            uint64_t seq = ((o >> 32) + 1) & PID_MASK;
            if (!at_cas_acq_rel(&s->owner, &o, (seq << 32) | pid))
                continue;
            at_store_relaxed(&s->starttime, st);
            at_store_relaxed(&s->domain, domain);
            at_store_relaxed(&s->n, 0);
            for (int w = 0; w < 10; w++)
                at_store_relaxed(&s->why[w], 0);
            at_store_release(&s->states_off, states_off);
            return i;
        }
    }
    return -1; /* full: this engine shares nothing, and evicts by its own window */
}

void registry_release(uint8_t *area, int i)
{
    if (!area || i < 0)
        return;
    struct reg_slot *s = slot_at(area, i);
    at_store_release(&s->n, 0);
    uint64_t o = at_load_acquire(&s->owner);
    if ((o & PID_MASK) == (uint64_t)getpid())
        at_cas_acq_rel(&s->owner, &o, (o >> 32) << 32);
}

void registry_publish(uint8_t *area, int i, const uint64_t *shards, const uint64_t *dist,
                      size_t n)
{
    if (!area || i < 0)
        return;
    struct reg_slot *s = slot_at(area, i);
    if (n > REG_ENTRIES)
        n = REG_ENTRIES;
    uint64_t q = at_load_relaxed(&s->seq);
    at_store_relaxed(&s->seq, q + 1);
    at_fence_seq_cst(); /* the odd seq is seen before any entry changes */
    for (size_t k = 0; k < n; k++) {
        uint64_t d = dist[k] > REG_DIST_MAX ? REG_DIST_MAX : dist[k];
        at_store_relaxed(&s->need[k], (shards[k] << 24) | d);
    }
    at_store_relaxed(&s->n, n);
    /* pairs with the acquire loads of seq in registry_merge */
    at_store_release(&s->seq, q + 2);
}

void registry_publish_why(uint8_t *area, int i, const uint64_t why[REG_WHY_N])
{
    if (!area || i < 0)
        return;
    struct reg_slot *s = slot_at(area, i);
    for (int w = 0; w < REG_WHY_N; w++)
        at_store_relaxed(&s->why[w], why[w]);
}

size_t registry_list(const uint8_t *area, uint64_t bytes, uint64_t domain, struct reg_info *out,
                     size_t cap)
{
    size_t n = 0;
    if (!area)
        return 0;
    int slots = (int)(bytes / REG_SLOT_BYTES);
    for (int i = 0; i < slots && n < cap; i++) {
        struct reg_slot *s = slot_at((uint8_t *)(uintptr_t)area, i);
        uint64_t o = at_load_acquire(&s->owner);
        if (!(o & PID_MASK) || at_load_relaxed(&s->domain) != domain || !slot_taken(s, o, domain))
            continue;
        out[n].pid = (uint32_t)(o & PID_MASK);
        out[n].key = at_load_acquire(&s->states_off);
        for (int w = 0; w < REG_WHY_N; w++)
            out[n].why[w] = at_load_relaxed(&s->why[w]);
        n++;
    }
    return n;
}

size_t registry_merge(uint8_t *area, uint64_t bytes, int self, uint64_t states_off,
                      uint64_t domain, uint64_t n_shards, uint64_t *next_use,
                      uint64_t *touched, size_t cap, uint8_t *others, uint16_t *seen)
{
    if (!area)
        return 0;
    size_t nt = 0;
    int slots = (int)(bytes / REG_SLOT_BYTES);
    for (int i = 0; i < slots; i++) {
        if (i == self)
            continue;
        struct reg_slot *s = slot_at(area, i);
        uint64_t o = at_load_acquire(&s->owner); /* pairs with the claim's CAS */
        if (!(o & PID_MASK) || at_load_acquire(&s->states_off) != states_off ||
            at_load_relaxed(&s->domain) != domain || !slot_taken(s, o, domain))
            continue;
        for (int tries = 0; tries < 8; tries++) {
            /* pairs with at_store_release(&seq) in registry_publish */
            uint64_t q = at_load_acquire(&s->seq);
            if (q & 1)
                continue;
            uint64_t n = at_load_relaxed(&s->n);
            if (n > REG_ENTRIES)
                break; /* scribbled on: ignore the slot */
            size_t nt0 = nt;
            for (uint64_t k = 0; k < n; k++) {
                uint64_t e = at_load_relaxed(&s->need[k]), sh = e >> 24, d = e & REG_DIST_MAX;
                if (sh >= n_shards)
                    continue;
                int known = next_use[sh] != UINT64_MAX;
                if (!known && nt < cap) {
                    touched[nt++] = sh;
                    known = 1;
                }
                if (d < next_use[sh])
                    next_use[sh] = d;
                /* once per slot, a torn copy read again included; only
                 * shards in touched, where the caller resets them */
                if (others && known && seen[sh] != (uint16_t)(i + 1)) {
                    seen[sh] = (uint16_t)(i + 1);
                    others[sh] += others[sh] < 255;
                }
            }
            at_fence_seq_cst();
            if (at_load_relaxed(&s->seq) == q)
                break;
            (void)nt0; /* a torn copy only makes some shards look needed sooner: kept, not lost */
        }
    }
    return nt;
}
