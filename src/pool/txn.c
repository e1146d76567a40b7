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
 *                                            its process is)
 *   deferred free with freed_gen <= min over live leases of min_gen
 *                                        -> free (no live reader holds a
 *                                           catalog where it was in use)
 *
 * Conservation across a transaction (checked by pool_check):
 *   free + used + reserved + deferred = data_len
 * reserve moves free -> reserved; publish moves reserved -> used (and the
 * unused rest of the publishing reservations -> free); remove moves used ->
 * deferred; concat moves used extents from its parts to the new dataset;
 * reclaim moves reserved/deferred -> free.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/flush.h"
#include "pool/host.h"

static int writable_handle(cxlp_pool *p, const char *what)
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

static void reclaim(struct txn *t)
{
    struct cat *c = &t->c;
    struct attach *a = t->p->a;
    uint64_t min_gen, clock = host_clock(a);
    struct judged j = {.n = 0};
    lease_scan(a, 1, &min_gen, NULL);
    for (uint64_t i = 0, w = 0, n = c->n_resv; i < n; i++) {
        struct cat_resv r = c->resv[i];
        if (!owner_alive(a, &j, &r, clock) && ext_free(c, r.off, r.len) == 0) {
            c->n_resv--;
            continue;
        }
        c->resv[w++] = r;
    }
    for (uint64_t i = 0; i < c->n_def;) {
        struct cat_def d = c->def[i];
        if (d.freed_gen <= min_gen && ext_free(c, d.off, d.len) == 0) {
            arr_del(c->def, &c->n_def, sizeof *c->def, i);
            continue;
        }
        i++;
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
                      "%s: catalog needs %llu bytes (%llu datasets, %llu shards, %llu free, "
                      "%llu reserved, %llu deferred), slot holds %llu",
                      a->m.path, (unsigned long long)sz, (unsigned long long)t->c.n_ds,
                      (unsigned long long)t->c.n_sh, (unsigned long long)t->c.n_fr,
                      (unsigned long long)t->c.n_resv, (unsigned long long)t->c.n_def,
                      (unsigned long long)a->L.cat_bytes);
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
    return 0;
}

int pool_reserve_many(cxlp_pool *p, const uint64_t *lens, uint64_t n, int huge,
                      struct pool_extent *out)
{
    int rc = writable_handle(p, "pool_reserve");
    if (rc)
        return rc;
    if (n == 0)
        return 0;
    if (!lens || !out)
        return seterr(&p->obj, CXLP_EARG, "pool_reserve: lens or out is NULL");
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++) {
        if (lens[i] == 0 || lens[i] > p->a->L.data_len ||
            add_overflow_u64(total, ALIGN_UP(lens[i], POOL_EXTENT_ALIGN), &total))
            return seterr(&p->obj, CXLP_EARG,
                          "pool_reserve: length %llu invalid (data area %llu)",
                          (unsigned long long)lens[i], (unsigned long long)p->a->L.data_len);
    }
    struct pool_extent *e = malloc(n * sizeof *e);
    if (!e)
        return seterr(&p->obj, -ENOMEM, "pool_reserve: out of memory");
    struct txn t;
    if ((rc = txn_begin(&t, p))) {
        free(e);
        return rc;
    }
    pid_t pid = getpid();
    uint64_t st = proc_starttime(pid);
    struct attach *a = p->a;
    uint64_t lease = ((uint64_t)(a->lease - a->leases) << 32) | a->lease_seq;
    for (uint64_t i = 0; i < n; i++) {
        e[i].len = ALIGN_UP(lens[i], POOL_EXTENT_ALIGN);
        if (ext_alloc(&t.c, e[i].len, &e[i].off)) {
            /* all or nothing: the private copy is dropped, the pool unchanged */
            uint64_t largest, fr = ext_free_bytes(&t.c, &largest);
            if (n == 1)
                rc = seterr(&p->obj, CXLP_EFULL,
                            "%s: no free extent of %llu bytes (free %llu in %llu extents, "
                            "largest %llu)", p->a->m.path, (unsigned long long)e[i].len,
                            (unsigned long long)fr, (unsigned long long)t.c.n_fr,
                            (unsigned long long)largest);
            else
                rc = seterr(&p->obj, CXLP_EFULL,
                            "%s: no room for %llu extents of %llu bytes in all: extent %llu "
                            "of %llu bytes does not fit (free %llu in %llu extents, largest "
                            "%llu)", p->a->m.path, (unsigned long long)n,
                            (unsigned long long)total, (unsigned long long)i,
                            (unsigned long long)e[i].len, (unsigned long long)fr,
                            (unsigned long long)t.c.n_fr, (unsigned long long)largest);
            goto out;
        }
        struct cat_resv r = {e[i].off, e[i].len, (uint64_t)pid, st, a->self.key, lease};
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
        /* each gives its range back on failure */
        int prc = huge ? media_prepare_huge(&p->a->m, e[i].off, e[i].len)
                       : media_prepare(&p->a->m, e[i].off, e[i].len);
        if (prc) {
            rc = seterr(&p->obj, prc, "%s: cannot back %llu bytes at %#llx: %s", p->a->m.path,
                        (unsigned long long)e[i].len, (unsigned long long)e[i].off,
                        cxlp_strerror(prc));
            char msg[ERRMSG_MAX];
            strlcpy0(msg, p->obj.err, sizeof msg);
            (void)pool_unreserve_many(p, e, n);
            seterr(&p->obj, rc, "%s", msg);
        }
    }
    if (rc == 0)
        memcpy(out, e, n * sizeof *e);
    free(e);
    return rc;
}

int pool_reserve_pages(cxlp_pool *p, uint64_t len, int huge, struct pool_extent *out)
{
    return pool_reserve_many(p, &len, 1, huge, out);
}

int pool_reserve(cxlp_pool *p, uint64_t len, struct pool_extent *out)
{
    return pool_reserve_pages(p, len, 0, out);
}

/* Index of this process's reservation containing [off, off+len), or -1.
 * A process is its pid in its domain: the same pid in another PID
 * namespace or on another host is someone else. */
static int64_t find_own_resv(const struct attach *a, const struct cat *c, uint64_t off,
                             uint64_t len)
{
    uint64_t pid = (uint64_t)getpid(), end;
    if (add_overflow_u64(off, len, &end))
        return -1;
    for (uint64_t i = 0; i < c->n_resv; i++) {
        const struct cat_resv *r = &c->resv[i];
        if (r->pid == pid && r->host == a->self.key && off >= r->off && end <= r->off + r->len)
            return (int64_t)i;
    }
    return -1;
}

/* Moves [ext.off, ext.off + len) of one of this process's reservations in
 * the private catalog back to free space, keeping what of the reservation
 * lies before and after it reserved. */
static int unreserve_one(cxlp_pool *p, struct cat *c, struct pool_extent ext)
{
    if (ext.off % POOL_EXTENT_ALIGN)
        return seterr(&p->obj, CXLP_EARG, "pool_unreserve: offset %#llx not %u-aligned",
                      (unsigned long long)ext.off, POOL_EXTENT_ALIGN);
    uint64_t len = ALIGN_UP(ext.len, POOL_EXTENT_ALIGN);
    int64_t i = find_own_resv(p->a, c, ext.off, len);
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
    if (ext_free(c, ext.off, len))
        return seterr(&p->obj, CXLP_ECORRUPT, "%s: reservation %#llx+%llu overlaps free space",
                      p->a->m.path, (unsigned long long)ext.off, (unsigned long long)len);
    return 0;
}

int pool_unreserve_many(cxlp_pool *p, const struct pool_extent *ext, uint64_t n)
{
    int rc = writable_handle(p, "pool_unreserve");
    if (rc)
        return rc;
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
            rc = unreserve_one(p, &t.c, ext[i]);
    if (rc == 0)
        rc = txn_commit(&t, 0);
    txn_end(&t);
    return rc;
}

int pool_unreserve(cxlp_pool *p, struct pool_extent ext)
{
    return pool_unreserve_many(p, &ext, 1);
}

/* Checks one extent of the dataset being published; marks its reservation. */
static int check_ds_extent(cxlp_pool *p, const struct cat *c, uint8_t *used_resv,
                           const char *name, const char *what, uint64_t k,
                           uint64_t off, uint64_t len)
{
    int64_t i = len ? find_own_resv(p->a, c, off, len) : -1;
    if (i < 0)
        return seterr(&p->obj, CXLP_EARG,
                      "pool_publish '%s': %s %llu at %#llx+%llu is not inside a reservation "
                      "of this process", name, what, (unsigned long long)k,
                      (unsigned long long)off, (unsigned long long)len);
    used_resv[i] = 1;
    return 0;
}

int pool_publish(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards)
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
    struct txn t;
    if ((rc = txn_begin(&t, p)))
        return rc;
    struct cat *c = &t.c;
    uint8_t *used = NULL;
    if (cat_find(c, name) >= 0) {
        rc = seterr(&p->obj, CXLP_EEXIST, "%s: dataset '%s' already published", p->a->m.path, name);
        goto out;
    }
    used = calloc(c->n_resv ? c->n_resv : 1, 1);
    if (!used) {
        rc = seterr(&p->obj, -ENOMEM, "pool_publish: out of memory");
        goto out;
    }
    for (uint64_t s = 0; s < ds->n_shards; s++)
        if ((rc = check_ds_extent(p, c, used, name, "shard", s, shards[s].off, shards[s].len)))
            goto out;
    if (ds->docs.len &&
        (rc = check_ds_extent(p, c, used, name, "docs extent", 0, ds->docs.off, ds->docs.len)))
        goto out;

    /* append the dataset; its footprint tells what of the reservations it keeps */
    struct cat_ds rec;
    memset(&rec, 0, sizeof rec);
    rec.d = *ds;
    rec.d.info.n_shards = ds->n_shards;
    rec.d.info.version = t.gen + 1;
    rec.first_shard = c->n_sh;
    for (uint64_t s = 0; s < ds->n_shards; s++)
        if (arr_push(&c->sh, &c->n_sh, &c->cap_sh, sizeof shards[s], &shards[s]))
            goto nomem;
    if (arr_push(&c->ds, &c->n_ds, &c->cap_ds, sizeof rec, &rec))
        goto nomem;
    struct pool_extent *fp;
    uint64_t nfp;
    if (ds_footprint(c, c->n_ds - 1, &fp, &nfp))
        goto nomem;
    /* footprint pieces are disjoint and sorted; within one reservation they
     * leave gaps that go back to free space */
    for (uint64_t i = 0; i < c->n_resv; i++) {
        if (!used[i])
            continue;
        uint64_t pos = c->resv[i].off, end = c->resv[i].off + c->resv[i].len;
        for (uint64_t k = 0; k < nfp && rc == 0; k++) {
            uint64_t fs = MAX(fp[k].off, pos), fe = MIN(fp[k].off + fp[k].len, end);
            if (fs >= fe)
                continue;
            if (fs > pos)
                rc = ext_free(c, pos, fs - pos);
            pos = fe;
        }
        if (rc == 0 && pos < end)
            rc = ext_free(c, pos, end - pos);
        if (rc) {
            free(fp);
            rc = seterr(&p->obj, CXLP_ECORRUPT, "%s: reservation %#llx overlaps free space",
                        p->a->m.path, (unsigned long long)c->resv[i].off);
            goto out;
        }
    }
    free(fp);
    for (uint64_t i = c->n_resv; i-- > 0;)
        if (used[i])
            arr_del(c->resv, &c->n_resv, sizeof *c->resv, i);
    rc = txn_commit(&t, 1);
    if (rc == 0)
        ds->info.version = t.gen + 1;
    goto out;
nomem:
    rc = seterr(&p->obj, -ENOMEM, "pool_publish: out of memory");
out:
    free(used);
    txn_end(&t);
    return rc;
}

/* Drops dataset i and its shard records from c (its extents are the
 * caller's to account); later datasets' shard indexes shift down. */
static void drop_ds(struct cat *c, uint64_t i)
{
    uint64_t first = c->ds[i].first_shard, n = c->ds[i].d.n_shards;
    memmove(&c->sh[first], &c->sh[first + n], (c->n_sh - first - n) * sizeof *c->sh);
    c->n_sh -= n;
    for (uint64_t k = 0; k < c->n_ds; k++)
        if (c->ds[k].first_shard > first)
            c->ds[k].first_shard -= n;
    arr_del(c->ds, &c->n_ds, sizeof *c->ds, i);
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
        goto out;
    }
    struct pool_extent *fp;
    uint64_t nfp;
    if (ds_footprint(c, (uint64_t)i, &fp, &nfp)) {
        rc = seterr(&p->obj, -ENOMEM, "cxlp_pool_remove: out of memory");
        goto out;
    }
    for (uint64_t k = 0; k < nfp; k++) {
        struct cat_def d = {fp[k].off, fp[k].len, t.gen + 1};
        if (arr_push(&c->def, &c->n_def, &c->cap_def, sizeof d, &d)) {
            free(fp);
            rc = seterr(&p->obj, -ENOMEM, "cxlp_pool_remove: out of memory");
            goto out;
        }
    }
    free(fp);
    drop_ds(c, (uint64_t)i);
    rc = txn_commit(&t, 0);
out:
    txn_end(&t);
    return rc;
}

int pool_sync(cxlp_pool *p, uint64_t off, uint64_t len)
{
    if (!p || !p->writable)
        return 0;
    if (!range_ok(off, len, p->a->L.size))
        return seterr(&p->obj, CXLP_ERANGE, "pool_sync: %#llx+%llu outside the pool",
                      (unsigned long long)off, (unsigned long long)len);
    int rc = media_sync(&p->a->m, off, len);
    if (rc)
        return seterr(&p->obj, rc, "%s: sync %#llx+%llu: %s", p->a->m.path,
                      (unsigned long long)off, (unsigned long long)len, cxlp_strerror(rc));
    /* non-coherent: the bytes reach memory before any generation names
     * them (the commit's fence orders these write-backs before its CAS) */
    if (p->a->noncoherent)
        cache_writeback((uint8_t *)p->a->m.base + off, len);
    return 0;
}

int pool_concat(cxlp_pool *p, const char *name, const char *const *parts, size_t n_parts)
{
    int rc = writable_handle(p, "pool_concat");
    if (rc)
        return rc;
    if (!name || !parts || n_parts == 0 || n_parts > UINT32_MAX)
        return seterr(&p->obj, CXLP_EARG, "pool_concat: no name or no parts");
    int64_t *idx = calloc(n_parts, sizeof *idx);
    if (!idx)
        return seterr(&p->obj, -ENOMEM, "pool_concat: out of memory");
    struct pool_shard *sh = NULL;
    struct txn t;
    if ((rc = txn_begin(&t, p))) {
        free(idx);
        return rc;
    }
    struct cat *c = &t.c;
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
        n_sh += d->n_shards;
    }
    if (n_sh > UINT32_MAX) {
        rc = seterr(&p->obj, CXLP_EUNSUPPORTED, "concat '%s': %llu shards, the catalog holds at most %u",
                    name, (unsigned long long)n_sh, UINT32_MAX);
        goto out;
    }
    sh = malloc((n_sh ? n_sh : 1) * sizeof *sh);
    if (!sh)
        goto nomem;
    /* the new record: the parts' shards in order, records renumbered */
    struct cat_ds rec;
    memset(&rec, 0, sizeof rec);
    rec.d.schema = c->ds[idx[0]].d.schema;
    rec.d.info.fixed = c->ds[idx[0]].d.info.fixed;
    rec.d.info.record_size = c->ds[idx[0]].d.info.record_size;
    uint64_t at = 0, first = 0;
    for (size_t k = 0; k < n_parts; k++) {
        const struct cat_ds *d = &c->ds[idx[k]];
        for (uint64_t s = 0; s < d->d.n_shards; s++) {
            sh[at] = c->sh[d->first_shard + s];
            sh[at++].first_record = first + c->sh[d->first_shard + s].first_record;
        }
        first += d->d.info.n_records;
        rec.d.info.data_bytes += d->d.info.data_bytes;
        rec.d.info.stored_bytes += d->d.info.stored_bytes;
    }
    strlcpy0(rec.d.info.name, name, sizeof rec.d.info.name);
    rec.d.info.n_records = first;
    rec.d.info.n_shards = (uint32_t)n_sh;
    rec.d.n_shards = (uint32_t)n_sh;
    rec.d.info.created_unix = (uint64_t)time(NULL);
    rec.d.info.version = t.gen + 1;
    /* drop the parts, highest index first so the others stay put */
    for (size_t done = 0; done < n_parts; done++) {
        size_t hi = 0;
        for (size_t k = 1; k < n_parts; k++)
            if (idx[k] > idx[hi])
                hi = k;
        drop_ds(c, (uint64_t)idx[hi]);
        idx[hi] = -1;
    }
    rec.first_shard = c->n_sh;
    for (uint64_t s = 0; s < n_sh; s++)
        if (arr_push(&c->sh, &c->n_sh, &c->cap_sh, sizeof sh[s], &sh[s]))
            goto nomem;
    if (arr_push(&c->ds, &c->n_ds, &c->cap_ds, sizeof rec, &rec))
        goto nomem;
    rc = txn_commit(&t, 0);
    goto out;
nomem:
    rc = seterr(&p->obj, -ENOMEM, "pool_concat: out of memory");
out:
    free(sh);
    free(idx);
    txn_end(&t);
    return rc;
}
