/*
 * attach.c - attachments (a mapping + a lease, refcounted) and the lease
 * table.
 *
 * A lease slot says "process (pid, starttime) of domain host may still read
 * catalog generations >= min_gen". Writers free a deferred extent only when
 *   freed_gen <= min over live leases of min_gen
 * i.e. no live reader can hold a catalog in which the extent was still in
 * use. Each slot is one cacheline, written only by its owner, except that a
 * writer clears the slot of a dead owner by CAS on the owner word. Whether
 * an owner is live is host.c's judgement: by pid inside its domain (same
 * host, boot and PID namespace), by the age of its beat elsewhere.
 *
 * owner = (seq << 32) | pid. Claim: store beat = pool clock, CAS (seq|0) ->
 * (seq+1|pid), then write min_gen, host, starttime and st_seq = seq+1
 * (release). A scanner trusts host and starttime only when st_seq matches
 * the owner's seq; a claim in progress is judged by its beat (fresh, since
 * it was stamped before the CAS), so a claimer that died between its CAS
 * and its st_seq store is reclaimed once its beat expires. Clearing a dead
 * slot CASes the exact owner word it judged, so a slot re-claimed meanwhile
 * (new seq) is safe.
 *
 * Pins: an attachment counts pins per generation in private memory; the
 * slot's min_gen is the smallest pinned generation (UINT64_MAX if none).
 * Location epoch pins (loc.h) work the same way in min_epoch.
 * Publishing a pin is store; seq_cst fence; reload the gen word
 * (catalog.c): the writer does CAS of the gen word; ...; seq_cst fence;
 * scan. One of the two sees the other (Dekker), so a pin that survives the
 * reload is seen by every writer that could free what it protects.
 *
 * Read-only handles map the pool read-only; when the OS lets this process
 * write the object they carry a second, writable mapping only to hold their
 * lease and heartbeat (its pages are the same shared pages). When it does
 * not, the handle is leaseless: it still reads, but its pins protect nothing
 * (documented in docs/pool-format.md).
 *
 * Rejected: one lease per process shared by all handles. Handles of one
 * process come and go independently (stores outlive the pool handle) and a
 * per-attachment slot makes the refcount the only bookkeeping.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic.h"
#include "pool/host.h"

#define PID_MASK 0xffffffffull

/* Smallest pinned value of a pin list; UINT64_MAX when none. */
static uint64_t pins_min(const struct pins *ps)
{
    uint64_t m = UINT64_MAX;
    for (size_t i = 0; i < ps->n; i++)
        m = MIN(m, ps->v[i].gen);
    return m;
}

static void publish_min(struct attach *a, struct pins *ps, uint64_t *slot_word)
{
    if (!a->lease)
        return;
    /* pairs with the acquire loads of min_gen / min_epoch in lease_scan */
    host_store(a, slot_word, pins_min(ps));
    at_fence_seq_cst();
}

/* Adds one pin of v to ps and republishes the slot's word (under a->mu). */
static void pins_add(struct attach *a, struct pins *ps, uint64_t *slot_word, uint64_t v)
{
    size_t i;
    for (i = 0; i < ps->n && ps->v[i].gen != v; i++)
        ;
    if (i == ps->n) {
        if (ps->n == ps->cap) {
            size_t nc = ps->cap ? ps->cap * 2 : 8;
            struct pin *p = realloc(ps->v, nc * sizeof *p);
            if (!p) {
                /* cannot record it: pin the slot at the lowest value we can
                 * express so nothing is freed under the caller */
                if (a->lease)
                    host_store(a, slot_word, 0);
                at_fence_seq_cst();
                return;
            }
            ps->v = p;
            ps->cap = nc;
        }
        ps->v[i].gen = v;
        ps->v[i].count = 0;
        ps->n++;
    }
    ps->v[i].count++;
    publish_min(a, ps, slot_word);
}

static void pins_del(struct attach *a, struct pins *ps, uint64_t *slot_word, uint64_t v)
{
    for (size_t i = 0; i < ps->n; i++) {
        if (ps->v[i].gen == v) {
            if (--ps->v[i].count == 0)
                ps->v[i] = ps->v[--ps->n];
            break;
        }
    }
    publish_min(a, ps, slot_word);
}

void attach_pin(struct attach *a, uint64_t gen)
{
    pthread_mutex_lock(&a->mu);
    pins_add(a, &a->gens, a->lease ? &a->lease->min_gen : NULL, gen);
    pthread_mutex_unlock(&a->mu);
}

void attach_unpin(struct attach *a, uint64_t gen)
{
    pthread_mutex_lock(&a->mu);
    pins_del(a, &a->gens, a->lease ? &a->lease->min_gen : NULL, gen);
    pthread_mutex_unlock(&a->mu);
}

/* The handshake of the generation pins, for the location epoch: the pin is
 * published (store; seq_cst fence) before the caller loads any location
 * word, and a writer that changes a word stores it, grows the epoch, fences
 * and then scans the pins (place.c). A pin of an epoch older than the
 * current one only protects more, so no re-check is needed: a reader that
 * loaded epoch e and pinned it either is seen by the scan, or (Dekker)
 * loads its words after the writer's stores and sees the new words. */
uint64_t attach_pin_epoch(struct attach *a)
{
    pthread_mutex_lock(&a->mu);
    /* pairs with the release store of hdr->loc_epoch in place.c */
    uint64_t e = host_load(a, &a->hdr->loc_epoch);
    pins_add(a, &a->epochs, a->lease ? &a->lease->min_epoch : NULL, e);
    pthread_mutex_unlock(&a->mu);
    return e;
}

void attach_unpin_epoch(struct attach *a, uint64_t e)
{
    pthread_mutex_lock(&a->mu);
    pins_del(a, &a->epochs, a->lease ? &a->lease->min_epoch : NULL, e);
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
    host_store(a, &a->lease->min_gen, UINT64_MAX);
    host_store(a, &a->lease->min_epoch, UINT64_MAX);
    uint64_t mine = (a->lease_seq << 32) | (uint64_t)getpid();
    /* fails when a scanner judged us dead (a forked child; expired while
     * stopped): the slot is not ours any more, leave it */
    host_cas(a, &a->lease->owner, &mine, a->lease_seq << 32);
    a->lease = NULL;
}

void attach_unref(struct attach *a)
{
    if (!a || at_fetch_sub_acq_rel(&a->refs, 1) != 1)
        return;
    host_unwatch(a);
    lease_release(a);
    media_close(&a->lm);
    media_close(&a->m);
    for (uint32_t i = 1; i < POOL_MAX_OBJECTS; i++)
        media_close(&a->om[i]);
    pthread_mutex_destroy(&a->mu);
    free(a->gens.v);
    free(a->epochs.v);
    free(a);
}

struct media *attach_media(struct attach *a, uint32_t i)
{
    return i == 0 ? &a->m : &a->om[i];
}

uint64_t attach_domain(const struct attach *a)
{
    return a->self.key;
}

uint32_t attach_n_tiers(const struct attach *a)
{
    return a->L.n_tiers;
}

const struct attach_tier *attach_tier(const struct attach *a, uint32_t t)
{
    return t < a->L.n_tiers ? &a->t[t] : NULL;
}

uint32_t attach_home(const struct attach *a)
{
    return a->L.home;
}

uint64_t *attach_states(const struct attach *a, uint64_t states_off)
{
    return (uint64_t *)((uint8_t *)a->m.base + states_off);
}

uint32_t attach_stride(const struct attach *a)
{
    return states_stride(a->L.n_tiers);
}

uint8_t *attach_stage(const struct attach *a, uint64_t *bytes)
{
    uint8_t *b = (uint8_t *)a->whdr;
    *bytes = a->L.stage_bytes;
    return b && a->L.stage_bytes ? b + a->L.stage_off : NULL;
}

const uint8_t *attach_stage_ro(const struct attach *a, uint64_t *bytes)
{
    *bytes = a->L.stage_bytes;
    return a->L.stage_bytes ? (const uint8_t *)a->hdr + a->L.stage_off : NULL;
}

struct pool_tier_ctr *attach_ctr(const struct attach *a, uint32_t t)
{
    if (t >= a->L.n_tiers)
        return NULL;
    /* counters are written by everyone who reads: through the writable
     * mapping a read-only handle keeps for its lease, when it has one */
    return a->whdr ? &a->whdr->ctr[t] : NULL;
}

const uint8_t *attach_base(const struct attach *a)
{
    return a->m.base;
}

uint64_t attach_size(const struct attach *a)
{
    return a->L.size;
}

int attach_lost(struct attach *a, struct obj *o)
{
    if (__builtin_expect(read_alarm_now() == 0, 1))
        return 0;
    char err[ERRMSG_MAX];
    int rc = media_guard_lost(&a->m, err, sizeof err);
    if (!rc && a->lm.base)
        rc = media_guard_lost(&a->lm, err, sizeof err);
    if (rc)
        return seterr(o, rc, "%s", err);
    if (at_load_relaxed(&a->lease_lost))
        return seterr(o, CXLP_EBUSY, "%s: the lease of this process was taken (expired after "
                      "%.1f s without a heartbeat: the process was stopped, or `cxlpool leases "
                      "--expire` was used): what it pinned may have been reused; reopen the pool",
                      a->m.path, a->expiry_ticks * POOL_TICK_MS / 1000.0);
    return 0;
}

int attach_noncoherent(const struct attach *a)
{
    return a->noncoherent;
}

int attach_leased(const struct attach *a)
{
    return a->lease != NULL;
}

int attach_private(struct attach *a, uint8_t **base)
{
    return media_map_private(&a->m, base);
}

int attach_collapse(struct attach *a, uint64_t off, uint64_t len)
{
    return media_collapse(&a->m, off, len);
}

void lease_scan(struct attach *a, int reclaim, uint64_t *min_gen, uint64_t *min_epoch,
                uint32_t *live)
{
    uint64_t mg = UINT64_MAX, me = UINT64_MAX, clock = host_clock(a);
    uint32_t n = 0;
    /* the writer side of the pin handshake (see top): after the gen CAS */
    at_fence_seq_cst();
    for (uint64_t i = 0; i < a->L.lease_slots; i++) {
        struct pool_lease *l = &a->leases[i];
        /* pairs with the claimer's CAS in try_claim */
        uint64_t o = host_load(a, &l->owner);
        if ((o & PID_MASK) == 0)
            continue;
        if (host_lease_live(a, l, o, clock)) {
            n++;
            /* pairs with the release stores of the slot words in publish_min */
            mg = MIN(mg, host_load(a, &l->min_gen));
            me = MIN(me, host_load(a, &l->min_epoch));
        } else if (reclaim) {
            host_cas(a, &l->owner, &o, o & ~PID_MASK);
        }
    }
    if (min_gen)
        *min_gen = mg;
    if (min_epoch)
        *min_epoch = me;
    if (live)
        *live = n;
}

static int try_claim(struct attach *a, uint64_t starttime, uint64_t clock)
{
    uint64_t pid = (uint64_t)getpid();
    for (uint64_t i = 0; i < a->L.lease_slots; i++) {
        struct pool_lease *l = &a->leases[i];
        uint64_t o = host_load(a, &l->owner);
        if (o & PID_MASK)
            continue;
        uint64_t seq = ((o >> 32) + 1) & PID_MASK;
        /* a claim in progress must look fresh to scanners (see top) */
        host_store(a, &l->beat, clock);
        if (!host_cas(a, &l->owner, &o, (seq << 32) | pid))
            continue;
        host_store(a, &l->min_gen, UINT64_MAX);
        host_store(a, &l->min_epoch, UINT64_MAX);
        host_store(a, &l->host, a->self.key);
        host_store(a, &l->starttime, starttime);
        /* pairs with the acquire load of st_seq in host_lease_live */
        host_store(a, &l->st_seq, seq);
        a->lease = l;
        a->lease_seq = seq;
        return 0;
    }
    return CXLP_EBUSY;
}

int attach_lease_claim(struct attach *a, struct obj *o)
{
    uint64_t st = proc_starttime(getpid()), clock = host_clock(a);
    if (try_claim(a, st, clock) == 0)
        return 0;
    uint32_t live;
    lease_scan(a, 1, NULL, NULL, &live);
    if (try_claim(a, st, clock) == 0)
        return 0;
    return seterr(o, CXLP_EBUSY, "%s: lease table full: %u live holders in %llu slots",
                  a->m.path, live, (unsigned long long)a->L.lease_slots);
}

/* ------------------------------------------------------- public: leases */

static int usable(cxlp_pool *p, const char *what)
{
    if (!p || p->obj.magic != OBJ_MAGIC)
        return seterr(NULL, CXLP_EARG, "%s: not a pool handle", what);
    if (p->obj.panic)
        return seterr(&p->obj, CXLP_EPANIC, "pool handle poisoned: %s", p->obj.err);
    return 0;
}

int cxlp_pool_leases(cxlp_pool *p, struct cxlp_lease_info *out, size_t cap, size_t *n)
{
    int rc = usable(p, "cxlp_pool_leases");
    if (rc)
        return rc;
    if (!n || (cap && !out))
        return seterr(&p->obj, CXLP_EARG, "cxlp_pool_leases: %s is NULL", n ? "out" : "n");
    struct attach *a = p->a;
    uint64_t clock = host_clock(a);
    size_t k = 0;
    for (uint64_t i = 0; i < a->L.lease_slots; i++) {
        const struct pool_lease *l = &a->leases[i];
        uint64_t o = host_load(a, &l->owner);
        if ((o & PID_MASK) == 0)
            continue;
        if (k < cap) {
            struct cxlp_lease_info *e = &out[k];
            memset(e, 0, sizeof *e);
            e->slot = (uint32_t)i;
            e->pid = (uint32_t)(o & PID_MASK);
            int fields = host_load(a, &l->st_seq) == o >> 32;
            e->domain = fields ? host_load(a, &l->host) : 0;
            const struct pool_host *h = host_find(a, e->domain);
            if (h) {
                e->host_id = host_load(a, &h->host_id);
                memcpy(e->host, h->name, sizeof e->host);
                e->host[sizeof e->host - 1] = 0;
            }
            e->same_domain = e->domain == a->self.key && a->self.pid_checks;
            e->this_process = l == a->lease;
            e->live = host_lease_live(a, l, o, clock);
            uint64_t b = host_load(a, &l->beat);
            e->age_s = (clock > b ? clock - b : 0) * POOL_TICK_MS / 1000.0;
            e->pinned_gen = host_load(a, &l->min_gen);
        }
        k++;
    }
    *n = k;
    return 0;
}

int cxlp_pool_expire_host(cxlp_pool *p, const char *host, uint32_t *n_expired)
{
    int rc = usable(p, "cxlp_pool_expire_host");
    if (rc)
        return rc;
    if (!host || !*host || !n_expired)
        return seterr(&p->obj, CXLP_EARG, "cxlp_pool_expire_host: host or n_expired is NULL");
    if (!p->writable)
        return seterr(&p->obj, CXLP_EREADONLY, "cxlp_pool_expire_host: %s: pool handle is "
                      "read-only", p->a->m.path);
    return host_expire(p->a, host, n_expired, &p->obj);
}
