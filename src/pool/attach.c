/*
 * attach.c - attachments (a mapping + a lease, refcounted) and the lease
 * table.
 *
 * A lease slot says "process (pid, starttime) may still read catalog
 * generations >= min_gen". Writers free a deferred extent only when
 *   freed_gen <= min over live leases of min_gen
 * i.e. no live reader can hold a catalog in which the extent was still in
 * use. Each slot is one cacheline, written only by its owner, except that a
 * writer clears the slot of a dead owner by CAS on the owner word.
 *
 * owner = (seq << 32) | pid. Claim: CAS (seq|0) -> (seq+1|pid), then write
 * starttime and st_seq = seq+1 (release). A scanner trusts starttime only
 * when st_seq matches the owner's seq; otherwise it asks only whether pid
 * exists (a claimer that died between its CAS and the starttime store is
 * then reclaimed once the pid is gone). Clearing a dead slot CASes the exact
 * owner word it judged, so a slot re-claimed meanwhile (new seq) is safe.
 *
 * Pins: an attachment counts pins per generation in private memory; the
 * slot's min_gen is the smallest pinned generation (UINT64_MAX if none).
 * Publishing a pin is store; seq_cst fence; reload hdr->gen (catalog.c):
 * the writer does store hdr->gen; ...; seq_cst fence; scan. One of the two
 * sees the other (Dekker), so a pin that survives the reload is seen by
 * every writer that could free what it protects.
 *
 * Read-only handles map the pool read-only; when the OS lets this process
 * write the object they carry a second, writable mapping only to hold their
 * lease (its pages are the same shared pages). When it does not, the handle
 * is leaseless: it still reads, but its pins protect nothing (documented in
 * docs/pool-format.md).
 *
 * Rejected: one lease per process shared by all handles. Handles of one
 * process come and go independently (stores outlive the pool handle) and a
 * per-attachment slot makes the refcount the only bookkeeping.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "common/atomic.h"
#include "pool/pool_internal.h"

#define PID_MASK 0xffffffffull

static void publish_min(struct attach *a)
{
    if (!a->lease)
        return;
    uint64_t m = UINT64_MAX;
    for (size_t i = 0; i < a->n_pins; i++)
        m = MIN(m, a->pins[i].gen);
    /* pairs with at_load_acquire(&min_gen) in lease_scan */
    at_store_release(&a->lease->min_gen, m);
    at_fence_seq_cst();
}

void attach_pin(struct attach *a, uint64_t gen)
{
    pthread_mutex_lock(&a->mu);
    size_t i;
    for (i = 0; i < a->n_pins && a->pins[i].gen != gen; i++)
        ;
    if (i == a->n_pins) {
        if (a->n_pins == a->cap_pins) {
            size_t nc = a->cap_pins ? a->cap_pins * 2 : 8;
            struct pin *p = realloc(a->pins, nc * sizeof *p);
            if (!p) {
                /* cannot record it: pin the slot at the lowest gen we can
                 * express so nothing is freed under the caller */
                if (a->lease)
                    at_store_release(&a->lease->min_gen, 0);
                at_fence_seq_cst();
                pthread_mutex_unlock(&a->mu);
                return;
            }
            a->pins = p;
            a->cap_pins = nc;
        }
        a->pins[i].gen = gen;
        a->pins[i].count = 0;
        a->n_pins++;
    }
    a->pins[i].count++;
    publish_min(a);
    pthread_mutex_unlock(&a->mu);
}

void attach_unpin(struct attach *a, uint64_t gen)
{
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->n_pins; i++) {
        if (a->pins[i].gen == gen) {
            if (--a->pins[i].count == 0)
                a->pins[i] = a->pins[--a->n_pins];
            break;
        }
    }
    publish_min(a);
    pthread_mutex_unlock(&a->mu);
}

void attach_ref(struct attach *a)
{
    at_fetch_add_acq_rel(&a->refs, 1);
}

static void lease_release(struct attach *a)
{
    if (!a->lease)
        return;
    at_store_release(&a->lease->min_gen, UINT64_MAX);
    uint64_t mine = (a->lease_seq << 32) | (uint64_t)getpid();
    /* fails only if a scanner judged us dead (forked child): leave it */
    at_cas_acq_rel(&a->lease->owner, &mine, a->lease_seq << 32);
    a->lease = NULL;
}

void attach_unref(struct attach *a)
{
    if (!a || at_fetch_sub_acq_rel(&a->refs, 1) != 1)
        return;
    lease_release(a);
    media_close(&a->lm);
    media_close(&a->m);
    pthread_mutex_destroy(&a->mu);
    free(a->pins);
    free(a);
}

const uint8_t *attach_base(const struct attach *a)
{
    return a->m.base;
}

uint64_t attach_size(const struct attach *a)
{
    return a->L.size;
}

int attach_private(struct attach *a, uint8_t **base)
{
    return media_map_private(&a->m, base);
}

int attach_collapse(struct attach *a, uint64_t off, uint64_t len)
{
    return media_collapse(&a->m, off, len);
}

const struct media *attach_media(const struct attach *a)
{
    return &a->m;
}

void lease_scan(struct attach *a, int reclaim, uint64_t *min_gen, uint32_t *live)
{
    uint64_t mg = UINT64_MAX;
    uint32_t n = 0;
    /* the writer side of the pin handshake (see top): after the gen store */
    at_fence_seq_cst();
    for (uint64_t i = 0; i < a->L.lease_slots; i++) {
        struct pool_lease *l = &a->leases[i];
        /* pairs with the claimer's CAS in attach_lease_claim */
        uint64_t o = at_load_acquire(&l->owner);
        pid_t pid = (pid_t)(o & PID_MASK);
        if (pid == 0)
            continue;
        uint64_t seq = o >> 32;
        /* pairs with at_store_release(&st_seq) in attach_lease_claim */
        uint64_t st = at_load_acquire(&l->st_seq) == seq ? at_load_relaxed(&l->starttime) : 0;
        if (proc_alive(pid, st)) {
            n++;
            /* pairs with at_store_release(&min_gen) in publish_min */
            mg = MIN(mg, at_load_acquire(&l->min_gen));
        } else if (reclaim) {
            at_cas_acq_rel(&l->owner, &o, seq << 32);
        }
    }
    if (min_gen)
        *min_gen = mg;
    if (live)
        *live = n;
}

static int try_claim(struct attach *a, uint64_t starttime)
{
    uint64_t pid = (uint64_t)getpid();
    for (uint64_t i = 0; i < a->L.lease_slots; i++) {
        struct pool_lease *l = &a->leases[i];
        uint64_t o = at_load_acquire(&l->owner);
        if (o & PID_MASK)
            continue;
        uint64_t seq = ((o >> 32) + 1) & PID_MASK;
        if (!at_cas_acq_rel(&l->owner, &o, (seq << 32) | pid))
            continue;
        at_store_relaxed(&l->min_gen, UINT64_MAX);
        at_store_relaxed(&l->starttime, starttime);
        at_store_release(&l->st_seq, seq);
        a->lease = l;
        a->lease_seq = seq;
        return 0;
    }
    return CXLP_EBUSY;
}

int attach_lease_claim(struct attach *a, struct obj *o)
{
    uint64_t st = proc_starttime(getpid());
    if (try_claim(a, st) == 0)
        return 0;
    uint32_t live;
    lease_scan(a, 1, NULL, &live);
    if (try_claim(a, st) == 0)
        return 0;
    return seterr(o, CXLP_EBUSY, "%s: lease table full: %u live holders in %llu slots",
                  a->m.path, live, (unsigned long long)a->L.lease_slots);
}

/* After a reboot a file or devdax pool still holds the old boot's mutex
 * state and leases, whose pids mean nothing now. The first writable
 * attachment of the new boot reinitializes them, serialized by flock on the
 * backing object (shm objects do not survive reboots, so never get here). */
void attach_boot_check(struct attach *a)
{
    uint8_t now[16];
    uint64_t cur[2];
    boot_id(now);
    memcpy(cur, now, 16);
    struct pool_hdr *h = a->hdr;
    /* pairs with at_store_release(&boot[1]) below */
    if (at_load_acquire(&h->boot[1]) == cur[1] && at_load_relaxed(&h->boot[0]) == cur[0])
        return;
    struct media *w = a->m.writable ? &a->m : (a->lm.base ? &a->lm : NULL);
    if (!w)
        return;
    struct pool_hdr *wh = (struct pool_hdr *)w->base;
    int locked = flock(w->fd, LOCK_EX) == 0;
    if (!(at_load_acquire(&wh->boot[1]) == cur[1] && at_load_relaxed(&wh->boot[0]) == cur[0])) {
        pthread_mutexattr_t ma;
        pthread_mutexattr_init(&ma);
        pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
        pthread_mutexattr_setrobust(&ma, PTHREAD_MUTEX_ROBUST);
        pthread_mutex_init(&wh->lock, &ma);
        pthread_mutexattr_destroy(&ma);
        struct pool_lease *l = (struct pool_lease *)((uint8_t *)w->base + a->L.lease_off);
        for (uint64_t i = 0; i < a->L.lease_slots; i++) {
            at_store_relaxed(&l[i].owner, 0);
            at_store_relaxed(&l[i].min_gen, UINT64_MAX);
        }
        at_store_relaxed(&wh->boot[0], cur[0]);
        /* pairs with the at_load_acquire(&boot[1]) above */
        at_store_release(&wh->boot[1], cur[1]);
        media_sync(w, 0, a->L.lease_off + a->L.lease_slots * POOL_LEASE_SIZE);
    }
    if (locked)
        flock(w->fd, LOCK_UN);
}
