/*
 * txn.c - write transactions: reserve, unreserve, publish, remove, concat.
 *
 * Every transaction is
 *   lock -> snapshot current catalog (gen g) -> reclaim -> change the
 *   private copy -> commit (write slot (g+1)&1, sync, store gen = g+1 with
 *   release, sync) -> unlock.
 * Readers never see a half-written catalog: slot (g+1)&1 is invisible until
 * the generation store. A writer killed anywhere leaves gen at g or g+1,
 * each naming a complete slot. A failed transaction (EFULL, EEXIST,
 * ECATFULL...) publishes nothing, so the pool is exactly as before.
 *
 * The lock is a robust process-shared mutex in the header. A holder that
 * died returns EOWNERDEAD to the next locker, which marks the mutex
 * consistent and carries on: the only state the lock guards is the
 * inactive catalog slot, which the next commit rewrites whole.
 *
 * Reclaim (start of every transaction), each step justified by:
 *   lease slot of a dead process         -> cleared (it can read nothing)
 *   reservation of a dead process        -> free (its ingest can never
 *                                           publish; nothing else refers to it)
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
#include <time.h>
#include <unistd.h>

#include "common/atomic.h"
#include "pool/pool_internal.h"

struct txn {
    cxlp_pool *p;
    struct cat c;
    uint64_t gen;              /* generation the transaction started from */
};

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

/* How long a writer waits for the lock. The lock is held only while a
 * catalog is written (never during an ingest's data copy), so a wait this
 * long means a live holder is stuck: fail with CXLP_EBUSY rather than hang.
 * CXLP_LOCK_TIMEOUT_MS overrides it (tests). */
static uint64_t lock_timeout_ms(void)
{
    const char *e = getenv("CXLP_LOCK_TIMEOUT_MS");
    if (e && *e) {
        char *end;
        unsigned long long v = strtoull(e, &end, 10);
        if (*end == 0)
            return v;
    }
    return 30000;
}

static int lock_pool(cxlp_pool *p)
{
    uint64_t ms = lock_timeout_ms();
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)(ms / 1000);
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    int rc = pthread_mutex_timedlock(&p->a->hdr->lock, &ts);
    if (rc == EOWNERDEAD) {
        /* the dead holder can only have been writing the inactive slot */
        pthread_mutex_consistent(&p->a->hdr->lock);
        return 0;
    }
    if (rc == ETIMEDOUT)
        return seterr(&p->obj, CXLP_EBUSY,
                      "%s: writer lock not available after %llu ms (held by a live, stuck "
                      "writer?)", p->a->m.path, (unsigned long long)ms);
    if (rc)
        return seterr(&p->obj, -rc, "%s: writer lock: %s", p->a->m.path, strerror(rc));
    return 0;
}

static void unlock_pool(cxlp_pool *p)
{
    pthread_mutex_unlock(&p->a->hdr->lock);
}

static void reclaim(struct txn *t)
{
    struct cat *c = &t->c;
    uint64_t min_gen;
    lease_scan(t->p->a, 1, &min_gen, NULL);
    for (uint64_t i = 0; i < c->n_resv;) {
        struct cat_resv r = c->resv[i];
        if (!proc_alive((pid_t)r.pid, r.starttime) && ext_free(c, r.off, r.len) == 0) {
            arr_del(c->resv, &c->n_resv, sizeof *c->resv, i);
            continue;
        }
        i++;
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
static int txn_begin(struct txn *t, cxlp_pool *p)
{
    memset(t, 0, sizeof *t);
    t->p = p;
    int rc = lock_pool(p);
    if (rc)
        return rc;
    rc = cat_snapshot(p->a, &t->c, 0, &t->gen, &p->obj);
    if (rc) {
        unlock_pool(p);
        return rc;
    }
    reclaim(t);
    return 0;
}

static void txn_end(struct txn *t)
{
    cat_free(&t->c);
    unlock_pool(t->p);
}

/* Publishes t->c as generation gen+1. fault names the crash points of
 * pool_publish (NULL elsewhere). */
static int txn_commit(struct txn *t, int faults)
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
    uint64_t slot_off = a->L.cat_off + (t->c.gen & 1) * a->L.cat_bytes;
    memcpy((uint8_t *)a->m.base + slot_off, buf, sz);
    free(buf);
    int rc = media_sync(&a->m, slot_off, sz);
    if (rc)
        return seterr(&t->p->obj, rc, "%s: sync of catalog slot %llu: %s", a->m.path,
                      (unsigned long long)(t->c.gen & 1), cxlp_strerror(rc));
    if (faults)
        fault_point("publish-before-flip");
    /* pairs with at_load_acquire(&hdr->gen) in cat_snapshot */
    at_store_release(&a->hdr->gen, t->c.gen);
    rc = media_sync(&a->m, offsetof(struct pool_hdr, gen), sizeof(uint64_t));
    if (faults)
        fault_point("publish-after-flip");
    if (rc)
        return seterr(&t->p->obj, rc, "%s: sync of catalog generation: %s", a->m.path,
                      cxlp_strerror(rc));
    return 0;
}

int pool_reserve(cxlp_pool *p, uint64_t len, struct pool_extent *out)
{
    return pool_reserve_pages(p, len, 0, out);
}

int pool_reserve_pages(cxlp_pool *p, uint64_t len, int huge, struct pool_extent *out)
{
    int rc = writable_handle(p, "pool_reserve");
    if (rc)
        return rc;
    if (len == 0 || len > p->a->L.data_len || !out)
        return seterr(&p->obj, CXLP_EARG, "pool_reserve: length %llu invalid (data area %llu)",
                      (unsigned long long)len, (unsigned long long)p->a->L.data_len);
    len = ALIGN_UP(len, POOL_EXTENT_ALIGN);
    struct txn t;
    if ((rc = txn_begin(&t, p)))
        return rc;
    uint64_t off;
    if (ext_alloc(&t.c, len, &off)) {
        uint64_t largest, fr = ext_free_bytes(&t.c, &largest);
        rc = seterr(&p->obj, CXLP_EFULL,
                    "%s: no free extent of %llu bytes (free %llu in %llu extents, largest %llu)",
                    p->a->m.path, (unsigned long long)len, (unsigned long long)fr,
                    (unsigned long long)t.c.n_fr, (unsigned long long)largest);
        goto out;
    }
    /* back the extent now: a full disk or /dev/shm is an error here, not a
     * SIGBUS when the ingest first touches the page */
    /* gives the range back on failure */
    rc = huge ? media_prepare_huge(&p->a->m, off, len) : media_prepare(&p->a->m, off, len);
    if (rc) {
        rc = seterr(&p->obj, rc, "%s: cannot back %llu bytes at %#llx: %s", p->a->m.path,
                    (unsigned long long)len, (unsigned long long)off, cxlp_strerror(rc));
        goto out;
    }
    pid_t pid = getpid();
    struct cat_resv r = {off, len, (uint64_t)pid, proc_starttime(pid)};
    if (arr_push(&t.c.resv, &t.c.n_resv, &t.c.cap_resv, sizeof r, &r)) {
        rc = seterr(&p->obj, -ENOMEM, "pool_reserve: out of memory");
        goto out;
    }
    rc = txn_commit(&t, 0);
    if (rc)
        goto out;
    /* crash point for tests: reservation published, lock still held */
    fault_point("reserve-locked");
    out->off = off;
    out->len = len;
out:
    txn_end(&t);
    return rc;
}

/* Index of this process's reservation containing [off, off+len), or -1. */
static int64_t find_own_resv(const struct cat *c, uint64_t off, uint64_t len)
{
    uint64_t pid = (uint64_t)getpid(), end;
    if (add_overflow_u64(off, len, &end))
        return -1;
    for (uint64_t i = 0; i < c->n_resv; i++) {
        const struct cat_resv *r = &c->resv[i];
        if (r->pid == pid && off >= r->off && end <= r->off + r->len)
            return (int64_t)i;
    }
    return -1;
}

int pool_unreserve(cxlp_pool *p, struct pool_extent ext)
{
    int rc = writable_handle(p, "pool_unreserve");
    if (rc)
        return rc;
    if (ext.len == 0)
        return 0;
    if (ext.off % POOL_EXTENT_ALIGN)
        return seterr(&p->obj, CXLP_EARG, "pool_unreserve: offset %#llx not %u-aligned",
                      (unsigned long long)ext.off, POOL_EXTENT_ALIGN);
    struct txn t;
    if ((rc = txn_begin(&t, p)))
        return rc;
    uint64_t len = ALIGN_UP(ext.len, POOL_EXTENT_ALIGN);
    int64_t i = find_own_resv(&t.c, ext.off, len);
    if (i < 0) {
        rc = seterr(&p->obj, CXLP_EARG,
                    "pool_unreserve: %#llx+%llu is not inside a reservation of this process",
                    (unsigned long long)ext.off, (unsigned long long)ext.len);
        goto out;
    }
    struct cat_resv r = t.c.resv[i];
    arr_del(t.c.resv, &t.c.n_resv, sizeof r, (uint64_t)i);
    /* keep the parts before and after the returned range reserved */
    struct cat_resv head = r, tail = r;
    head.len = ext.off - r.off;
    tail.off = ext.off + len;
    tail.len = r.off + r.len - tail.off;
    if ((head.len && arr_push(&t.c.resv, &t.c.n_resv, &t.c.cap_resv, sizeof head, &head)) ||
        (tail.len && arr_push(&t.c.resv, &t.c.n_resv, &t.c.cap_resv, sizeof tail, &tail))) {
        rc = seterr(&p->obj, -ENOMEM, "pool_unreserve: out of memory");
        goto out;
    }
    if ((rc = ext_free(&t.c, ext.off, len))) {
        rc = seterr(&p->obj, CXLP_ECORRUPT, "%s: reservation %#llx+%llu overlaps free space",
                    p->a->m.path, (unsigned long long)ext.off, (unsigned long long)len);
        goto out;
    }
    rc = txn_commit(&t, 0);
out:
    txn_end(&t);
    return rc;
}

/* Checks one extent of the dataset being published; marks its reservation. */
static int check_ds_extent(cxlp_pool *p, const struct cat *c, uint8_t *used_resv,
                           const char *name, const char *what, uint64_t k,
                           uint64_t off, uint64_t len)
{
    int64_t i = len ? find_own_resv(c, off, len) : -1;
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
