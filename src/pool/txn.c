/*
 * txn.c - write transactions: reserve, unreserve, publish, remove, concat.
 *
 * Every transaction is
 *   lock -> snapshot current catalog (gen g) -> reclaim -> change the
 *   private copy -> commit (write slot (g+1)&1, sync, write back, fence,
 *   CAS gen word (g, epoch) -> (g+1, epoch), sync) -> unlock.
 * Readers never see a half-written catalog: slot (g+1)&1 is invisible until
 * the generation changes. A writer killed anywhere leaves gen at g or g+1,
 * each naming a complete slot. A failed transaction (EFULL, EEXIST,
 * ECATFULL...) publishes nothing, so the pool is exactly as before.
 *
 * The lock is the cross-host writer lock of host.c: a word in the header
 * taken by CAS. A holder that died is replaced at once by a writer of its
 * domain (pid check), by any other once its beat expired; the only state
 * the lock guards is the inactive catalog slot, which the next commit
 * rewrites whole. Every acquisition changes the epoch in the gen word and
 * the commit is a CAS from exactly (g, our epoch): a holder deposed while
 * stopped cannot publish when it resumes.
 *
 * Reclaim (start of every transaction), each step justified by:
 *   lease slot of a dead or expired owner -> cleared (it can read nothing,
 *                                            or is told its lease is gone)
 *   reservation of a dead or expired owner -> free (its ingest can never
 *                                            publish: its lease is gone or
 *                                            its process is), unless the
 *                                            location word it was taken for
 *                                            names it: then it is that copy
 *                                            (its owner died between the
 *                                            word and the flip)
 *   deferred copy whose word still names it
 *                                        -> dropped, not freed (its owner
 *                                           died between the flip and the
 *                                           word: the copy is still live)
 *   deferred free with freed <= min over live leases of the pin of its
 *   clock (generation or location epoch) -> free (no live reader can still
 *                                           reach it); a removed dataset's
 *                                           copies are walked from its states
 *
 * Conservation across a transaction (checked by pool_check), per object:
 *   free + used + reserved + deferred = data_len
 * reserve moves free -> reserved; publish moves reserved -> used (and the
 * unused rest of the publishing reservations -> free; the shard table and
 * states are carved from free space of object 0); remove moves used ->
 * deferred; concat moves a dataset's copies to the new dataset (its table
 * and states are written anew; the parts' go to deferred); reclaim moves
 * reserved/deferred -> free. Placement (place.c) moves reserved -> used (a
 * copy) and used -> deferred (a dropped copy).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/atomic.h"
#include "common/flush.h"
#include "pool/host.h"

int writable_handle(cxlp_pool *p, const char *what)
{
    if (!p || p->obj.magic != OBJ_MAGIC)
        return seterr(NULL, CXLP_EARG, "%s: not a pool handle", what);
    if (p->obj.panic)
        return seterr(&p->obj, CXLP_EPANIC, "pool handle poisoned: %s", p->obj.err);
    if (!p->writable)
        return seterr(&p->obj, CXLP_EREADONLY, "%s: %s: pool handle is read-only", what,
                      p->a->m.path);
    return 0;
}

/* Owners already judged in this transaction: liveness may cost a /proc
 * read, and is asked once per distinct owner, not once per reservation (an
 * ingest of N shards once held N reservations, and asking for each in each
 * of its N transactions made the ingest quadratic: issue 12 item 8). */
#define JUDGED_MAX 16
struct judged {
    struct cat_resv who[JUDGED_MAX]; /* off and len unused */
    int alive[JUDGED_MAX];
    int n;
};

static int owner_alive(struct attach *a, struct judged *j, const struct cat_resv *r,
                       uint64_t clock)
{
    for (int i = 0; i < j->n; i++) {
        const struct cat_resv *w = &j->who[i];
        if (w->pid == r->pid && w->starttime == r->starttime && w->host == r->host &&
            w->lease == r->lease)
            return j->alive[i];
    }
    int alive = host_resv_live(a, r->pid, r->starttime, r->host, r->lease, clock);
    if (j->n < JUDGED_MAX) {
        j->who[j->n] = *r;
        j->alive[j->n++] = alive;
    }
    return alive;
}

/* Frees every copy a removed dataset's states name (DEF_COPIES). Words or
 * table entries that do not check out are skipped: pool_check reports the
 * space they hold. */
static void free_copies(struct attach *a, struct cat *c, const struct cat_def *d)
{
    const struct pool_layout *L = &a->L;
    uint64_t n = d->len, stride = attach_stride(a), tb, sb;
    uint64_t toff = d->target_shard, soff = d->off;
    if (mul_overflow_u64(n, sizeof(struct pool_shent), &tb) || mul_overflow_u64(n, stride * 8, &sb) ||
        toff < L->obj[0].data_off || !range_ok(toff - L->obj[0].data_off, tb, L->obj[0].data_len) ||
        !range_ok(soff - L->obj[0].data_off, sb, L->obj[0].data_len))
        return;
    const struct pool_shent *tab = (const struct pool_shent *)(attach_base(a) + toff);
    const uint64_t *st = attach_states(a, soff);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t len = ALIGN_UP(tab[k].len, POOL_EXTENT_ALIGN);
        for (uint32_t t = 0; t < L->n_tiers; t++) {
            uint64_t w = at_load_acquire(&st[k * stride + 1 + t]); /* pairs with place.c */
            uint32_t obj = L->tiers[t].object;
            uint64_t off = loc_off(w);
            if (loc_present(w) && off >= L->obj[obj].data_off &&
                range_ok(off - L->obj[obj].data_off, len, L->obj[obj].data_len))
                (void)ext_free(c, obj, off, len);
        }
    }
}

static int free_one(void *ctx, uint64_t u, uint32_t tier, uint32_t object, uint64_t off,
                    uint64_t len)
{
    (void)u;
    (void)tier;
    (void)ext_free(ctx, object, off, len);
    return 0;
}

static void reclaim(struct txn *t)
{
    struct cat *c = &t->c;
    struct attach *a = t->p->a;
    uint64_t min_gen, min_epoch, clock = host_clock(a);
    struct judged j = {.n = 0};
    lease_scan(a, 1, &min_gen, &min_epoch, NULL);
    for (uint64_t i = 0, w = 0, n = c->n_resv; i < n; i++) {
        struct cat_resv r = c->resv[i];
        if (!owner_alive(a, &j, &r, clock) &&
            ((r.target_states &&
              word_names(a, c, r.target_states, r.target_shard, r.tier, r.off)) ||
             ext_free(c, r.object, r.off, r.len) == 0)) {
            c->n_resv--;
            continue;
        }
        c->resv[w++] = r;
    }
    /* copies first: they are read from states and tables freed in this pass */
    for (int pass = 0; pass < 2; pass++) {
        for (uint64_t i = 0; i < c->n_def;) {
            struct cat_def d = c->def[i];
            int copies = d.kind == DEF_COPIES || d.kind == DEF_UCOPIES;
            if (copies != (pass == 0)) {
                i++;
                continue;
            }
            if (d.kind == DEF_EXTENT && d.target_states &&
                word_names(a, c, d.target_states, d.target_shard, d.tier, d.off)) {
                arr_del(c->def, &c->n_def, sizeof *c->def, i); /* still that copy */
                continue;
            }
            uint64_t pin = d.clock == CLOCK_EPOCH ? min_epoch : min_gen;
            if (d.freed <= pin) {
                int ok = 1;
                if (d.kind == DEF_COPIES)
                    free_copies(a, c, &d);
                else if (d.kind == DEF_UCOPIES) /* words that do not check out: pool_check says */
                    (void)units_walk(a, d.off, d.len, free_one, c);
                else
                    ok = ext_free(c, d.object, d.off, d.len) == 0;
                if (ok) {
                    arr_del(c->def, &c->n_def, sizeof *c->def, i);
                    continue;
                }
            }
            i++;
        }
    }
}

/* Locks, snapshots, reclaims. On failure the lock is not held. */
int txn_begin(struct txn *t, cxlp_pool *p)
{
    memset(t, 0, sizeof *t);
    t->p = p;
    int rc = attach_lost(p->a, &p->obj);
    if (rc)
        return rc;
    if ((rc = host_lock(p->a, &t->lock, &p->obj)))
        return rc;
    rc = cat_snapshot(p->a, &t->c, 0, &t->gen, &p->obj);
    /* after our epoch bump nobody else can publish: the snapshot is the
     * generation our commit CAS expects */
    if (!rc && t->gen != gen_of(t->lock.gen_word))
        rc = seterr(&p->obj, CXLP_ECORRUPT, "%s: generation moved under the writer lock",
                    p->a->m.path);
    if (rc) {
        cat_free(&t->c);
        host_unlock(p->a, &t->lock);
        return rc;
    }
    reclaim(t);
    return 0;
}

void txn_end(struct txn *t)
{
    cat_free(&t->c);
    host_unlock(t->p->a, &t->lock);
}

/* Publishes t->c as generation gen+1. faults names the crash points of
 * pool_publish (0 elsewhere). */
int txn_commit(struct txn *t, int faults)
{
    struct attach *a = t->p->a;
    t->c.gen = t->gen + 1;
    uint64_t sz = cat_encoded_size(&t->c);
    if (sz > a->L.cat_bytes)
        return seterr(&t->p->obj, CXLP_ECATFULL,
                      "%s: catalog needs %llu bytes (%llu datasets, %llu free, %llu reserved, "
                      "%llu deferred), slot holds %llu",
                      a->m.path, (unsigned long long)sz, (unsigned long long)t->c.n_ds,
                      (unsigned long long)t->c.n_fr, (unsigned long long)t->c.n_resv,
                      (unsigned long long)t->c.n_def, (unsigned long long)a->L.cat_bytes);
    uint8_t *buf = malloc(sz);
    if (!buf)
        return seterr(&t->p->obj, -ENOMEM, "%s: catalog of %llu bytes: out of memory",
                      a->m.path, (unsigned long long)sz);
    cat_encode(&t->c, buf);
    if (faults)
        fault_point("publish-before-slot");
    /* a writer stopped past the expiry must not start on the slot a new
     * holder may be writing (docs/hosts.md: what fencing covers) */
    int rc = host_lock_check(a, &t->lock, &t->p->obj);
    if (rc) {
        free(buf);
        return rc;
    }
    uint64_t slot_off = a->L.cat_off + (t->c.gen & 1) * a->L.cat_bytes;
    memcpy((uint8_t *)a->m.base + slot_off, buf, sz);
    free(buf);
    rc = media_sync(&a->m, slot_off, sz);
    if (rc)
        return seterr(&t->p->obj, rc, "%s: sync of catalog slot %llu: %s", a->m.path,
                      (unsigned long long)(t->c.gen & 1), cxlp_strerror(rc));
    if (a->noncoherent) {
        /* the slot reaches memory before the generation names it */
        cache_writeback((uint8_t *)a->m.base + slot_off, sz);
        cache_fence();
    }
    if (faults)
        fault_point("publish-before-flip");
    /* the fenced flip: CAS from exactly (gen, our epoch); pairs with the
     * acquire load of the gen word in cat_snapshot */
    rc = host_publish_gen(a, &t->lock, t->c.gen, &t->p->obj);
    if (rc)
        return rc;
    rc = media_sync(&a->m, offsetof(struct pool_hdr, gen), sizeof(uint64_t));
    if (faults)
        fault_point("publish-after-flip");
    if (rc)
        return seterr(&t->p->obj, rc, "%s: sync of catalog generation: %s", a->m.path,
                      cxlp_strerror(rc));
    t->gen = t->c.gen;
    return 0;
}

/* where (a tier or POOL_META) as an object index, with a message if bad. */
static int where_checked(cxlp_pool *p, int where, const char *what)
{
    int o = where_object(&p->a->L, where);
    if (o < 0)
        return seterr(&p->obj, CXLP_EARG, "%s: tier %d: the pool has %u tiers", what, where,
                      p->a->L.n_tiers);
    return o;
}

int pool_back(cxlp_pool *p, struct media *m, uint64_t off, uint64_t len, int huge)
{
    if (m->kind < 0)
        return 0; /* a remote tier's addresses: nothing to back */
    /* gives the range back on failure */
    int rc = huge ? media_prepare_huge(m, off, len) : media_prepare(m, off, len);
    if (rc)
        return seterr(&p->obj, rc, "%s: cannot back %llu bytes at %#llx: %s", m->path,
                      (unsigned long long)len, (unsigned long long)off, cxlp_strerror(rc));
    return 0;
}

struct cat_resv resv_mine(const struct attach *a, uint64_t off, uint64_t len, uint32_t object,
                          uint32_t tier)
{
    pid_t pid = getpid();
    return (struct cat_resv){.off = off, .len = len, .pid = (uint64_t)pid,
                             .starttime = proc_starttime(pid), .host = a->self.key,
                             .lease = ((uint64_t)(a->lease - a->leases) << 32) | a->lease_seq,
                             .object = object, .tier = tier};
}

int pool_reserve_many(cxlp_pool *p, int where, const uint64_t *lens, uint64_t n, int huge,
                      struct pool_extent *out)
{
    int rc = writable_handle(p, "pool_reserve");
    if (rc)
        return rc;
    int obj = where_checked(p, where, "pool_reserve");
    if (obj < 0)
        return obj;
    if (n == 0)
        return 0;
    if (!lens || !out)
        return seterr(&p->obj, CXLP_EARG, "pool_reserve: lens or out is NULL");
    const uint64_t dlen = p->a->L.obj[obj].data_len;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (lens[i] == 0 || lens[i] > dlen ||
            add_overflow_u64(total, ALIGN_UP(lens[i], POOL_EXTENT_ALIGN), &total))
            return seterr(&p->obj, CXLP_EARG,
                          "pool_reserve: length %llu invalid (data area %llu)",
                          (unsigned long long)lens[i], (unsigned long long)dlen);
    }
    struct pool_extent *e = malloc(n * sizeof *e);
    if (!e)
        return seterr(&p->obj, -ENOMEM, "pool_reserve: out of memory");
    struct txn t;
    if ((rc = txn_begin(&t, p))) {
        free(e);
        return rc;
    }
    struct attach *a = p->a;
    struct media *m = attach_media(a, (uint32_t)obj);
    for (uint64_t i = 0; i < n; i++) {
        e[i].len = ALIGN_UP(lens[i], POOL_EXTENT_ALIGN);
        if (ext_alloc(&t.c, (uint32_t)obj, e[i].len, &e[i].off)) {
            /* all or nothing: the private copy is dropped, the pool unchanged */
            uint64_t largest, n_fr, fr = ext_free_bytes(&t.c, (uint32_t)obj, &largest, &n_fr);
            if (n == 1)
                rc = seterr(&p->obj, CXLP_EFULL,
                            "%s: no free extent of %llu bytes (free %llu in %llu extents, "
                            "largest %llu)", m->path, (unsigned long long)e[i].len,
                            (unsigned long long)fr, (unsigned long long)n_fr,
                            (unsigned long long)largest);
            else
                rc = seterr(&p->obj, CXLP_EFULL,
                            "%s: no room for %llu extents of %llu bytes in all: extent %llu "
                            "of %llu bytes does not fit (free %llu in %llu extents, largest "
                            "%llu)", m->path, (unsigned long long)n,
                            (unsigned long long)total, (unsigned long long)i,
                            (unsigned long long)e[i].len, (unsigned long long)fr,
                            (unsigned long long)n_fr, (unsigned long long)largest);
            goto out;
        }
        struct cat_resv r = resv_mine(a, e[i].off, e[i].len, (uint32_t)obj,
                                      where < 0 ? UINT32_MAX : (uint32_t)where);
        if (arr_push(&t.c.resv, &t.c.n_resv, &t.c.cap_resv, sizeof r, &r)) {
            rc = seterr(&p->obj, -ENOMEM, "pool_reserve: out of memory");
            goto out;
        }
    }
    rc = txn_commit(&t, 0);
    if (rc)
        goto out;
    /* crash point for tests: reservation published, lock still held */
    fault_point("reserve-locked");
out:
    txn_end(&t);
    /* Back the extents now, outside the writer lock (issue 12 item 9: a
     * fallocate takes 0.4 s per 256 MiB of tmpfs, and a writer stopped
     * there blocked every other writer): a full disk or /dev/shm is an
     * error here, not a SIGBUS when the ingest first touches the page. The
     * extents are reservations of this process, so nothing else touches
     * them meanwhile; a failure gives them all back. */
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        rc = pool_back(p, m, e[i].off, e[i].len, huge);
        if (rc) {
            char msg[ERRMSG_MAX];
            strlcpy0(msg, p->obj.err, sizeof msg);
            (void)pool_unreserve_many(p, where, e, n);
            seterr(&p->obj, rc, "%s", msg);
        }
    }
    if (rc == 0)
        memcpy(out, e, n * sizeof *e);
    free(e);
    return rc;
}

int pool_reserve_pages(cxlp_pool *p, int where, uint64_t len, int huge, struct pool_extent *out)
{
    return pool_reserve_many(p, where, &len, 1, huge, out);
}

int pool_reserve(cxlp_pool *p, int where, uint64_t len, struct pool_extent *out)
{
    return pool_reserve_pages(p, where, len, 0, out);
}

/* Index of this process's reservation in obj containing [off, off+len), or
 * -1. A process is its pid in its domain: the same pid in another PID
 * namespace or on another host is someone else. */
static int64_t find_own_resv(const struct attach *a, const struct cat *c, uint32_t obj,
                             uint64_t off, uint64_t len)
{
    uint64_t pid = (uint64_t)getpid(), end;
    if (add_overflow_u64(off, len, &end))
        return -1;
    for (uint64_t i = 0; i < c->n_resv; i++) {
        const struct cat_resv *r = &c->resv[i];
        if (r->pid == pid && r->host == a->self.key && r->object == obj && off >= r->off &&
            end <= r->off + r->len)
            return (int64_t)i;
    }
    return -1;
}

/* Moves [ext.off, ext.off + len) of one of this process's reservations in
 * obj in the private catalog back to free space, keeping what of the
 * reservation lies before and after it reserved. */
static int unreserve_one(cxlp_pool *p, struct cat *c, uint32_t obj, struct pool_extent ext)
{
    if (ext.off % POOL_EXTENT_ALIGN)
        return seterr(&p->obj, CXLP_EARG, "pool_unreserve: offset %#llx not %u-aligned",
                      (unsigned long long)ext.off, POOL_EXTENT_ALIGN);
    uint64_t len = ALIGN_UP(ext.len, POOL_EXTENT_ALIGN);
    int64_t i = find_own_resv(p->a, c, obj, ext.off, len);
    if (i < 0)
        return seterr(&p->obj, CXLP_EARG,
                      "pool_unreserve: %#llx+%llu is not inside a reservation of this process",
                      (unsigned long long)ext.off, (unsigned long long)ext.len);
    struct cat_resv r = c->resv[i];
    arr_del(c->resv, &c->n_resv, sizeof r, (uint64_t)i);
    struct cat_resv head = r, tail = r;
    head.len = ext.off - r.off;
    tail.off = ext.off + len;
    tail.len = r.off + r.len - tail.off;
    if ((head.len && arr_push(&c->resv, &c->n_resv, &c->cap_resv, sizeof head, &head)) ||
        (tail.len && arr_push(&c->resv, &c->n_resv, &c->cap_resv, sizeof tail, &tail)))
        return seterr(&p->obj, -ENOMEM, "pool_unreserve: out of memory");
    if (ext_free(c, obj, ext.off, len))
        return seterr(&p->obj, CXLP_ECORRUPT, "%s: reservation %#llx+%llu overlaps free space",
                      p->a->m.path, (unsigned long long)ext.off, (unsigned long long)len);
    return 0;
}

int pool_unreserve_many(cxlp_pool *p, int where, const struct pool_extent *ext, uint64_t n)
{
    int rc = writable_handle(p, "pool_unreserve");
    if (rc)
        return rc;
    int obj = where_checked(p, where, "pool_unreserve");
    if (obj < 0)
        return obj;
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++)
        k += ext[i].len != 0;
    if (k == 0)
        return 0;
    struct txn t;
    if ((rc = txn_begin(&t, p)))
        return rc;
    for (uint64_t i = 0; i < n && rc == 0; i++)
        if (ext[i].len)
            rc = unreserve_one(p, &t.c, (uint32_t)obj, ext[i]);
    if (rc == 0)
        rc = txn_commit(&t, 0);
    txn_end(&t);
    return rc;
}

int pool_unreserve(cxlp_pool *p, int where, struct pool_extent ext)
{
    return pool_unreserve_many(p, where, &ext, 1);
}

/* Checks one extent of the dataset being published; marks its reservation. */
static int check_ds_extent(cxlp_pool *p, const struct cat *c, uint8_t *used_resv, uint32_t obj,
                           const char *name, const char *what, uint64_t k,
                           uint64_t off, uint64_t len)
{
    int64_t i = len ? find_own_resv(p->a, c, obj, off, len) : -1;
    if (i < 0)
        return seterr(&p->obj, CXLP_EARG,
                      "pool_publish '%s': %s %llu at %#llx+%llu is not inside a reservation "
                      "of this process", name, what, (unsigned long long)k,
                      (unsigned long long)off, (unsigned long long)len);
    used_resv[i] = 1;
    return 0;
}

/* Writes the shard table and the states of a new dataset into extents
 * carved from object 0 (free in the committed catalog, so nobody reads them
 * before the flip, and a crash before it leaves them free). */
static int meta_alloc(struct txn *t, const struct cat_ds *rec, struct pool_shent **tabp,
                      uint64_t **stp)
{
    cxlp_pool *p = t->p;
    struct attach *a = p->a;
    const uint64_t n = rec->d.n_shards, stride = attach_stride(a);
    uint64_t tl = n * sizeof(struct pool_shent), sl = n * stride * 8;
    uint64_t toff, soff;
    if (ext_alloc(&t->c, 0, ALIGN_UP(tl, POOL_EXTENT_ALIGN), &toff))
        return seterr(&p->obj, CXLP_EFULL, "%s: no room for the shard table of '%s' (%llu bytes)",
                      a->m.path, rec->d.info.name, (unsigned long long)tl);
    if (ext_alloc(&t->c, 0, ALIGN_UP(sl, POOL_EXTENT_ALIGN), &soff))
        return seterr(&p->obj, CXLP_EFULL, "%s: no room for the shard states of '%s' (%llu bytes)",
                      a->m.path, rec->d.info.name, (unsigned long long)sl);
    int rc = media_prepare(&a->m, toff, ALIGN_UP(tl, POOL_EXTENT_ALIGN));
    if (!rc)
        rc = media_prepare(&a->m, soff, ALIGN_UP(sl, POOL_EXTENT_ALIGN));
    if (rc)
        return seterr(&p->obj, rc, "%s: cannot back the shard table and states of '%s': %s",
                      a->m.path, rec->d.info.name, cxlp_strerror(rc));
    uint8_t *base = a->m.base;
    *tabp = (struct pool_shent *)(base + toff);
    *stp = (uint64_t *)(base + soff);
    memset(*stp, 0, sl);
    return 0;
}

/* Makes the table and states meta_alloc gave (now filled) durable and, on a
 * non-coherent pool, written back, and names them in rec. */
static int meta_seal(struct txn *t, struct cat_ds *rec, struct pool_shent *tab, uint64_t *st)
{
    cxlp_pool *p = t->p;
    struct attach *a = p->a;
    const uint64_t n = rec->d.n_shards, stride = attach_stride(a);
    uint64_t tl = n * sizeof(struct pool_shent), sl = n * stride * 8;
    const uint8_t *base = a->m.base;
    uint64_t toff = (uint64_t)((const uint8_t *)tab - base), soff = (uint64_t)((uint8_t *)st - base);
    int rc = media_sync(&a->m, toff, tl);
    if (!rc)
        rc = media_sync(&a->m, soff, sl);
    if (rc)
        return seterr(&p->obj, rc, "%s: sync of the shard table of '%s': %s", a->m.path,
                      rec->d.info.name, cxlp_strerror(rc));
    if (a->noncoherent) { /* in memory before the commit's fence and flip */
        cache_writeback(tab, tl);
        cache_writeback(st, sl);
    }
    rec->table = (struct pool_extent){toff, tl};
    rec->table_checksum = XXH3_64bits(tab, tl);
    rec->states = (struct pool_extent){soff, sl};
    return 0;
}

static int write_meta(struct txn *t, struct cat_ds *rec, const struct pool_shard *shards,
                      uint32_t ingest)
{
    const uint64_t n = rec->d.n_shards, stride = attach_stride(t->p->a);
    if (n == 0)
        return 0;
    struct pool_shent *tab;
    uint64_t *st;
    int rc = meta_alloc(t, rec, &tab, &st);
    if (rc)
        return rc;
    for (uint64_t k = 0; k < n; k++) {
        tab[k] = (struct pool_shent){.len = shards[k].len, .n_records = shards[k].n_records,
                                     .data_len = shards[k].data_len,
                                     .checksum = shards[k].checksum};
        st[k * stride + 1 + ingest] = loc_next_present(0, shards[k].off, 0);
    }
    return meta_seal(t, rec, tab, st);
}

static int push_def(struct cat *c, struct cat_def d)
{
    return arr_push(&c->def, &c->n_def, &c->cap_def, sizeof d, &d);
}

/* Defers everything dataset i of c holds to generation g: its copies
 * (walked from its states when freed, so a dataset of any size costs the
 * catalog one record), its shard table, states and document index. What a
 * lease pinning an older generation may still read stays until then. */
static int defer_dataset(struct cat *c, int64_t i, uint64_t g)
{
    const struct cat_ds *d = &c->ds[i];
    struct cat_def meta[3] = {
        {.off = d->d.docs.off, .len = d->d.docs.len},
        {.off = d->table.off, .len = d->table.len},
        {.off = d->states.off, .len = d->states.len},
    };
    if (d->d.n_shards &&
        push_def(c, (struct cat_def){.off = d->states.off, .len = d->d.n_shards, .freed = g,
                                     .kind = DEF_COPIES, .clock = CLOCK_GEN,
                                     .target_shard = d->table.off}))
        return -ENOMEM;
    if (units_defer(c, d->states.off, g))
        return -ENOMEM;
    for (int k = 0; k < 3; k++) {
        if (meta[k].len == 0)
            continue;
        uint64_t s0 = meta[k].off & ~(uint64_t)(POOL_EXTENT_ALIGN - 1);
        struct cat_def e = {.off = s0, .len = ALIGN_UP(meta[k].off + meta[k].len, POOL_EXTENT_ALIGN) - s0,
                            .freed = g, .kind = DEF_EXTENT, .clock = CLOCK_GEN};
        if (push_def(c, e))
            return -ENOMEM;
    }
    return 0;
}

int pool_publish(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards)
{
    return pool_publish_over(p, ds, shards, 0);
}

static int publish(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards,
                   uint64_t replaces, uint32_t ingest, const struct pool_ingest *ing);

int pool_publish_over(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards,
                      uint64_t replaces)
{
    return publish(p, ds, shards, replaces, (uint32_t)pool_ingest_tier(p), NULL);
}

int pool_publish_ingest(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards,
                        uint64_t replaces, const struct pool_ingest *ing)
{
    if (ing && ing->flags & ~(uint64_t)INGEST_SHUFFLED)
        return seterr(&p->obj, CXLP_EARG, "pool_publish: ingest flags %#llx",
                      (unsigned long long)ing->flags);
    return publish(p, ds, shards, replaces, (uint32_t)pool_ingest_tier(p), ing);
}

int pool_publish_in(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards,
                    uint32_t tier)
{
    if (tier >= p->a->L.n_tiers)
        return seterr(&p->obj, CXLP_EARG, "pool_publish: tier %u of %u", tier, p->a->L.n_tiers);
    return publish(p, ds, shards, 0, tier, NULL);
}

static int publish(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards,
                   uint64_t replaces, uint32_t ingest, const struct pool_ingest *ing)
{
    int rc = writable_handle(p, "pool_publish");
    if (rc)
        return rc;
    if (!ds || (ds->n_shards && !shards))
        return seterr(&p->obj, CXLP_EARG, "pool_publish: NULL dataset or shards");
    const char *name = ds->info.name;
    size_t nl = strnlen(name, sizeof ds->info.name);
    if (nl == 0 || nl == sizeof ds->info.name)
        return seterr(&p->obj, CXLP_EARG, "pool_publish: dataset name empty or longer than %zu",
                      sizeof ds->info.name - 1);
    const uint32_t iobj = p->a->L.tiers[ingest].object;
    for (uint32_t s = 0; s < ds->n_shards; s++)
        if (shards[s].off % POOL_EXTENT_ALIGN || shards[s].len == 0 || shards[s].off > LOC_MAX_OFF)
            return seterr(&p->obj, CXLP_EARG,
                          "pool_publish '%s': shard %u at %#llx+%llu: a shard starts on a %u-byte "
                          "boundary and is not empty", name, s,
                          (unsigned long long)shards[s].off, (unsigned long long)shards[s].len,
                          POOL_EXTENT_ALIGN);
    struct txn t;
    if ((rc = txn_begin(&t, p)))
        return rc;
    struct cat *c = &t.c;
    uint8_t *used = NULL;
    struct oext *fp = NULL;
    uint64_t nfp = 0, cfp = 0;
    const int64_t old = cat_find(c, name);
    if (!replaces && old >= 0) {
        rc = seterr(&p->obj, CXLP_EEXIST, "%s: dataset '%s' already published", p->a->m.path, name);
        goto out;
    }
    if (replaces && (old < 0 || c->ds[old].d.info.version != replaces)) {
        rc = seterr(&p->obj, old < 0 ? CXLP_ENOTFOUND : CXLP_EBUSY,
                    "%s: dataset '%s' was %s while it was being rewritten; nothing replaced",
                    p->a->m.path, name, old < 0 ? "removed"
                    : "replaced (published again, or rewritten by another writer)");
        goto out;
    }
    used = calloc(c->n_resv ? c->n_resv : 1, 1);
    if (!used) {
        rc = seterr(&p->obj, -ENOMEM, "pool_publish: out of memory");
        goto out;
    }
    for (uint64_t s = 0; s < ds->n_shards; s++)
        if ((rc = check_ds_extent(p, c, used, iobj, name, "shard", s, shards[s].off, shards[s].len)))
            goto out;
    if (ds->docs.len &&
        (rc = check_ds_extent(p, c, used, 0, name, "docs extent", 0, ds->docs.off, ds->docs.len)))
        goto out;

    /* the pages the dataset keeps: each copy and the docs, which must not
     * share a page (a copy is freed alone when it moves) */
    for (uint64_t s = 0; s < ds->n_shards; s++) {
        struct oext e = {shards[s].off, ALIGN_UP(shards[s].len, POOL_EXTENT_ALIGN), iobj};
        if (arr_push(&fp, &nfp, &cfp, sizeof e, &e))
            goto nomem;
    }
    if (ds->docs.len) {
        uint64_t s0 = ds->docs.off & ~(uint64_t)(POOL_EXTENT_ALIGN - 1);
        struct oext e = {s0, ALIGN_UP(ds->docs.off + ds->docs.len, POOL_EXTENT_ALIGN) - s0, 0};
        if (arr_push(&fp, &nfp, &cfp, sizeof e, &e))
            goto nomem;
    }
    uint64_t nraw = nfp;
    oext_merge(fp, &nfp);
    uint64_t sum = 0;
    for (uint64_t k = 0; k < nfp; k++)
        sum += fp[k].len;
    if (nfp != nraw) {
        /* merging joined touching extents too: only overlap is an error */
        uint64_t want = 0;
        for (uint64_t s = 0; s < ds->n_shards; s++)
            want += ALIGN_UP(shards[s].len, POOL_EXTENT_ALIGN);
        if (ds->docs.len)
            want += ALIGN_UP(ds->docs.off + ds->docs.len, POOL_EXTENT_ALIGN) -
                    (ds->docs.off & ~(uint64_t)(POOL_EXTENT_ALIGN - 1));
        if (want != sum) {
            rc = seterr(&p->obj, CXLP_EARG,
                        "pool_publish '%s': two of its shards (or a shard and the docs) share "
                        "a %u-byte page", name, POOL_EXTENT_ALIGN);
            goto out;
        }
    }

    struct cat_ds rec;
    memset(&rec, 0, sizeof rec);
    rec.d = *ds;
    rec.d.info.n_shards = ds->n_shards;
    rec.d.info.version = t.gen + 1;
    rec.d.states_off = 0;
    if (old >= 0) /* replacing: the dataset's placement policy stays */
        rec.d.policy = c->ds[old].d.policy;
    if ((rc = write_meta(&t, &rec, shards, ingest)))
        goto out;
    /* the ingest record: the caller's, else the replaced dataset's (whose
     * own is dropped with it when the catalog is written) */
    struct cat_ingest ie = {.states_off = rec.states.off, .flags = ing ? ing->flags : 0,
                            .seed = ing ? ing->seed : 0, .n_source = rec.d.info.n_records};
    for (uint64_t i = 0; !ie.flags && old >= 0 && i < c->n_ingest; i++)
        if (c->ingest[i].states_off == c->ds[old].states.off &&
            c->ingest[i].n_source == ie.n_source) {
            ie.flags = c->ingest[i].flags;
            ie.seed = c->ingest[i].seed;
        }
    if (ie.flags && rec.d.n_shards &&
        arr_push(&c->ingest, &c->n_ingest, &c->cap_ingest, sizeof ie, &ie))
        goto nomem;
    /* footprint pieces are disjoint and sorted; within one reservation they
     * leave gaps that go back to free space */
    for (uint64_t i = 0; i < c->n_resv; i++) {
        if (!used[i])
            continue;
        const uint32_t obj = c->resv[i].object;
        uint64_t pos = c->resv[i].off, end = c->resv[i].off + c->resv[i].len;
        for (uint64_t k = 0; k < nfp && rc == 0; k++) {
            if (fp[k].object != obj)
                continue;
            uint64_t fs = MAX(fp[k].off, pos), fe = MIN(fp[k].off + fp[k].len, end);
            if (fs >= fe)
                continue;
            if (fs > pos)
                rc = ext_free(c, obj, pos, fs - pos);
            pos = fe;
        }
        if (rc == 0 && pos < end)
            rc = ext_free(c, obj, pos, end - pos);
        if (rc) {
            rc = seterr(&p->obj, CXLP_ECORRUPT, "%s: reservation %#llx overlaps free space",
                        p->a->m.path, (unsigned long long)c->resv[i].off);
            goto out;
        }
    }
    for (uint64_t i = c->n_resv; i-- > 0;)
        if (used[i])
            arr_del(c->resv, &c->n_resv, sizeof *c->resv, i);
    if (old >= 0) {
        /* the dataset it replaces goes as cxlp_pool_remove takes it; the
         * new one takes its place in the list */
        if (defer_dataset(c, old, t.gen + 1))
            goto nomem;
        c->ds[old] = rec;
    } else if (arr_push(&c->ds, &c->n_ds, &c->cap_ds, sizeof rec, &rec)) {
        goto nomem;
    }
    rc = txn_commit(&t, 1);
    if (rc == 0)
        ds->info.version = t.gen;
    goto out;
nomem:
    rc = seterr(&p->obj, -ENOMEM, "pool_publish: out of memory");
out:
    free(used);
    free(fp);
    txn_end(&t);
    return rc;
}

int cxlp_pool_remove(cxlp_pool *p, const char *name)
{
    int rc = writable_handle(p, "cxlp_pool_remove");
    if (rc)
        return rc;
    if (!name)
        return seterr(&p->obj, CXLP_EARG, "cxlp_pool_remove: name is NULL");
    struct txn t;
    if ((rc = txn_begin(&t, p)))
        return rc;
    struct cat *c = &t.c;
    int64_t i = cat_find(c, name);
    if (i < 0) {
        rc = seterr(&p->obj, CXLP_ENOTFOUND, "%s: no dataset '%s'", p->a->m.path, name);
    } else if (defer_dataset(c, i, t.gen + 1)) {
        rc = seterr(&p->obj, -ENOMEM, "cxlp_pool_remove: out of memory");
    } else {
        arr_del(c->ds, &c->n_ds, sizeof *c->ds, (uint64_t)i);
        rc = txn_commit(&t, 0);
    }
    txn_end(&t);
    return rc;
}

int pool_set_policy(cxlp_pool *p, const char *name, uint32_t policy)
{
    int rc = writable_handle(p, "pool_set_policy");
    if (rc)
        return rc;
    struct txn t;
    if ((rc = txn_begin(&t, p)))
        return rc;
    int64_t i = cat_find(&t.c, name);
    if (i < 0)
        rc = seterr(&p->obj, CXLP_ENOTFOUND, "%s: no dataset '%s'", p->a->m.path, name);
    else if (t.c.ds[i].d.policy != policy) {
        t.c.ds[i].d.policy = policy;
        rc = txn_commit(&t, 0);
    }
    txn_end(&t);
    return rc;
}

int pool_sync(cxlp_pool *p, int where, uint64_t off, uint64_t len)
{
    if (!p || !p->writable)
        return 0;
    int obj = where_object(&p->a->L, where);
    if (obj < 0)
        return seterr(&p->obj, CXLP_EARG, "pool_sync: tier %d does not exist", where);
    struct media *m = attach_media(p->a, (uint32_t)obj);
    if (!range_ok(off, len, m->size))
        return seterr(&p->obj, CXLP_ERANGE, "pool_sync: %#llx+%llu outside %s",
                      (unsigned long long)off, (unsigned long long)len, m->path);
    int rc = media_sync(m, off, len);
    if (rc)
        return seterr(&p->obj, rc, "%s: sync %#llx+%llu: %s", m->path,
                      (unsigned long long)off, (unsigned long long)len, cxlp_strerror(rc));
    /* non-coherent: the bytes reach memory before any generation names
     * them (the commit's fence orders these write-backs before its CAS) */
    if (p->a->noncoherent)
        cache_writeback((uint8_t *)m->base + off, len);
    return 0;
}

int pool_concat(cxlp_pool *p, const char *name, const char *const *parts, size_t n_parts)
{
    int rc = writable_handle(p, "pool_concat");
    if (rc)
        return rc;
    if (!name || !parts || n_parts == 0 || n_parts > UINT32_MAX)
        return seterr(&p->obj, CXLP_EARG, "pool_concat: no name or no parts");
    size_t nl = strnlen(name, CXLP_NAME_MAX);
    if (nl == 0 || nl == CXLP_NAME_MAX)
        return seterr(&p->obj, CXLP_EARG, "pool_concat: name empty or longer than %d",
                      CXLP_NAME_MAX - 1);
    int64_t *idx = calloc(n_parts, sizeof *idx);
    if (!idx)
        return seterr(&p->obj, -ENOMEM, "pool_concat: out of memory");
    struct attach *a = p->a;
    struct txn t;
    if ((rc = txn_begin(&t, p))) {
        free(idx);
        return rc;
    }
    struct cat *c = &t.c;
    uint64_t *old_states = NULL, *old_n = NULL;
    if (cat_find(c, name) >= 0) {
        rc = seterr(&p->obj, CXLP_EEXIST, "%s: dataset '%s' already published", p->a->m.path, name);
        goto out;
    }
    uint64_t n_sh = 0;
    for (size_t k = 0; k < n_parts; k++) {
        idx[k] = parts[k] ? cat_find(c, parts[k]) : -1;
        if (idx[k] < 0) {
            rc = seterr(&p->obj, CXLP_ENOTFOUND, "%s: concat '%s': no part '%s'", p->a->m.path,
                        name, parts[k] ? parts[k] : "(null)");
            goto out;
        }
        const struct pool_dataset *d = &c->ds[idx[k]].d, *d0 = &c->ds[idx[0]].d;
        for (size_t j = 0; j < k; j++)
            if (idx[j] == idx[k]) {
                rc = seterr(&p->obj, CXLP_EARG, "concat '%s': part '%s' given twice", name, parts[k]);
                goto out;
            }
        if (memcmp(&d->schema, &d0->schema, sizeof d->schema) != 0) {
            rc = seterr(&p->obj, CXLP_EARG, "concat '%s': part '%s' has another schema than '%s'",
                        name, parts[k], parts[0]);
            goto out;
        }
        if (d->docs.len) {
            rc = seterr(&p->obj, CXLP_EUNSUPPORTED, "concat '%s': part '%s' has a document index",
                        name, parts[k]);
            goto out;
        }
        /* a peer holds a part by its name (docs/remote.md): the new name
         * would read nothing there */
        const uint64_t *st = c->ds[idx[k]].d.n_shards
                             ? attach_states(p->a, c->ds[idx[k]].states.off) : NULL;
        for (uint32_t t = 0; st && t < p->a->L.n_tiers; t++)
            if ((p->a->L.tiers[t].flags & TIER_REMOTE) && loc_present(host_load(p->a, &st[1 + t]))) {
                rc = seterr(&p->obj, CXLP_EUNSUPPORTED, "concat '%s': part '%s' is held by a "
                            "peer of remote tier %u, which knows it by its name", name, parts[k], t);
                goto out;
            }
        n_sh += d->n_shards;
    }
    if (n_sh > UINT32_MAX) {
        rc = seterr(&p->obj, CXLP_EUNSUPPORTED, "concat '%s': %llu shards, a dataset holds at "
                    "most %u", name, (unsigned long long)n_sh, UINT32_MAX);
        goto out;
    }
    /* the new record: the parts' shard tables and states (every copy's
     * location, read under the writer lock, which every location change
     * holds) back to back in extents of its own */
    struct cat_ds rec;
    memset(&rec, 0, sizeof rec);
    const struct pool_dataset *d0 = &c->ds[idx[0]].d;
    rec.d.schema = d0->schema;
    rec.d.policy = d0->policy;
    rec.d.info.fixed = d0->info.fixed;
    rec.d.info.record_size = d0->info.record_size;
    strlcpy0(rec.d.info.name, name, sizeof rec.d.info.name);
    rec.d.n_shards = (uint32_t)n_sh;
    rec.d.info.n_shards = (uint32_t)n_sh;
    rec.d.info.created_unix = (uint64_t)time(NULL);
    rec.d.info.version = t.gen + 1;
    const uint64_t stride = attach_stride(a);
    old_states = calloc(n_parts, sizeof *old_states);
    old_n = calloc(n_parts, sizeof *old_n);
    if (!old_states || !old_n)
        goto nomem;
    if (n_sh) {
        struct pool_shent *tab;
        uint64_t *st;
        if ((rc = meta_alloc(&t, &rec, &tab, &st)))
            goto out;
        uint64_t at = 0;
        for (size_t k = 0; k < n_parts; k++) {
            const struct cat_ds *d = &c->ds[idx[k]];
            const uint64_t n = d->d.n_shards;
            if (!n)
                continue;
            memcpy(tab + at, attach_base(a) + d->table.off, n * sizeof *tab);
            const uint64_t *ost = attach_states(a, d->states.off);
            for (uint64_t w = 0; w < n * stride; w++)
                st[at * stride + w] = host_load(a, &ost[w]);
            at += n;
        }
        if ((rc = meta_seal(&t, &rec, tab, st)))
            goto out;
    }
    for (size_t k = 0; k < n_parts; k++) {
        const struct cat_ds *d = &c->ds[idx[k]];
        rec.d.info.n_records += d->d.info.n_records;
        rec.d.info.data_bytes += d->d.info.data_bytes;
        rec.d.info.stored_bytes += d->d.info.stored_bytes;
        old_states[k] = d->states.off;
        old_n[k] = d->d.n_shards;
    }
    /* the parts go; their copies are the new dataset's now, their tables
     * and states wait for the readers of older generations */
    const uint64_t g = t.gen + 1;
    for (size_t done = 0; done < n_parts; done++) {
        size_t hi = 0;
        for (size_t k = 1; k < n_parts; k++)
            if (idx[k] > idx[hi])
                hi = k;
        const struct cat_ds *d = &c->ds[idx[hi]];
        /* copies of units are not carried over (the new dataset's units
         * are other record runs): they go with the part */
        if (units_defer(c, d->states.off, g))
            goto nomem;
        struct pool_extent meta[2] = {d->table, d->states};
        for (int m = 0; m < 2; m++) {
            if (meta[m].len == 0)
                continue;
            struct cat_def e = {.off = meta[m].off, .len = ALIGN_UP(meta[m].len, POOL_EXTENT_ALIGN),
                                .freed = g, .kind = DEF_EXTENT, .clock = CLOCK_GEN};
            if (push_def(c, e))
                goto nomem;
        }
        arr_del(c->ds, &c->n_ds, sizeof *c->ds, (uint64_t)idx[hi]);
        idx[hi] = -1;
    }
    if (arr_push(&c->ds, &c->n_ds, &c->cap_ds, sizeof rec, &rec))
        goto nomem;
    if ((rc = txn_commit(&t, 0)))
        goto out;
    /* stores of the parts opened before (in any process) still load their
     * old words; those would go stale as the new dataset's copies move, so
     * they stop naming memory copies now (their readers fetch, and are told
     * the dataset is gone) */
    for (size_t k = 0; k < n_parts && a->L.n_tiers > 1; k++)
        pool_words_retire(&t, old_states[k], old_n[k]);
    goto out;
nomem:
    rc = seterr(&p->obj, -ENOMEM, "pool_concat: out of memory");
out:
    free(old_states);
    free(old_n);
    free(idx);
    txn_end(&t);
    return rc;
}
