/*
 * reader.c - an open dataset: a private snapshot of its catalog record, one
 * validated struct shard per shard, and the O(1) record lookup the gather
 * engine calls for every sample.
 *
 * Lifetime: cxlp_store_open takes (through pool_lookup) a reference on the
 * pool's attachment and a lease pin on the catalog generation it read, so
 * the mapping stays and the extents are not reused while the store is open,
 * even after cxlp_pool_close or a cxlp_pool_remove of the dataset.
 *
 * Lookup: record idx lives in shard k with first[k] <= idx < first[k+1].
 *   per_shard != 0 (every shard but the last holds per_shard records, what
 *   the writer produces for fixed-size records): k = idx / per_shard.
 *   otherwise: binary search over the first[] array. It is contiguous, 8
 *   bytes per shard: a 100 TB dataset of 256 MiB shards has 4*10^5 shards,
 *   19 probes in an array that stays in cache. An interpolation table would
 *   add memory and a second validation for no measurable gain at that size.
 * Then shard_col_record (shard.h) turns the in-shard index into a view of
 * one column, with bounds checks on everything it loads from shared memory.
 *
 * Columns: shards of format 2 hold one column per field (cols[k * ncols +
 * f] is field f of shard k). A dataset written in format 1 has one column:
 * its records whole, a multi-field fixed-size record with its fields at
 * their offsets (rows = 1); cxlp_store_read_field cuts the field out of the
 * record there. Every shard of a dataset has the same format.
 *
 * Where a shard is. In a pool of one tier a shard never moves: every shard
 * header is validated at open and the read path touches nothing else. In a
 * tiered pool the read path loads the shard's location words (pool/loc.h)
 * under a location epoch pin, fastest memory tier first, and reads the copy
 * it finds. Every copy holds the same bytes (a copy is verified against the
 * shard's digest before its word is published), so the shard's geometry is
 * validated once, from the first copy read, and rebased onto the copy at
 * hand (shard_at): every access stays inside that copy's extent whatever
 * its bytes. A shard with no copy in a memory tier is fetched on demand
 * (fetch.c) by the callers that may wait.
 *
 * Pins. A view of a tiered dataset is valid while the epoch it was read
 * under is pinned. cxlp_store_read's views are promised until close, so the
 * first of them pins the epoch for the store's lifetime (copies evicted
 * meanwhile are then freed only at close); the gather engine and
 * cxlp_store_read_copy / cxlp_store_read_field_copy pin per batch or per
 * record instead (store_read_pinned).
 *
 * Thread safety: after open the handle changes only where noted (the
 * geometry of a shard validated lazily, under mu, published by its ready
 * flag; the lifetime pin, under mu); reads touch only it and the pool.
 * Errors on the read path go to the calling thread's message
 * (cxlp_errmsg(NULL)), not to the shared handle.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/atomic.h"
#include "common/fastdiv.h"
#include "common/flush.h"
#include "pool/loc.h"
#include "pool/pool.h"
#include "pool/pool_format.h"
#include "store/fetch.h"
#include "store/shard.h"
#include "store/remote_tier.h"
#include "store/store.h"
#include "store/unit.h"

static void store_free(cxlp_store *s)
{
    if (s->nc) /* the read path's closer look is for us no longer */
        at_fetch_sub_acq_rel(&read_alarm, 1);
    if (s->life_pinned)
        attach_unpin_epoch(s->a, s->life_pin);
    cxlp_pool_close(s->wp);
    if (s->a) {
        attach_unpin(s->a, s->gen);
        attach_unref(s->a);
    }
    if (s->home_io) {
        store_io_close(s->home_io);
        free(s->home_io);
    }
    store_remote_free(s);
    free(s->heads);
    free(s->sums);
    if (s->mu_init) {
        pthread_mutex_destroy(&s->mu);
        pthread_mutex_destroy(&s->home_mu);
        pthread_mutex_destroy(&s->heads_mu);
        pthread_mutex_destroy(&s->rt_mu);
        pthread_mutex_destroy(&s->rt_held_mu);
    }
    if (s->units)
        free(s->units->ufirst);
    free(s->units);
    free(s->first);
    free(s->shards);
    free(s->cols);
    free(s->ready);
    free(s->loc);
    s->obj.magic = 0;
    free(s);
}

static int open_fail(cxlp_store *s, cxlp_pool *p, int rc)
{
    seterr(pool_obj(p), rc, "%s", s->obj.err);
    store_free(s);
    return rc;
}

/* Checks shard k's columns against the schema: format 2, one column per
 * field of the field's kind and size; format 1, one column of whole records
 * (the first shard fixes which; every shard must agree). */
static int shard_matches(cxlp_store *s, const struct cxlp_schema *sc, const struct shard *sh,
                         uint64_t k, int settle, char *err, size_t errlen)
{
    (void)k;
    int v1 = sh->version == SHARD_VERSION_V1;
    /* pairs with the release store below (stagers check copies while a
     * reader settles the format under mu) */
    uint32_t have = at_load_acquire(&s->version);
    if (have == 0 && settle) { /* the first shard validated sets the format */
        at_store_relaxed(&s->rows, v1 && sc->n_fields > 1);
        at_store_release(&s->version, sh->version);
        have = sh->version;
    }
    if (have && sh->version != have) {
        snprintf(err, errlen, "format version %u differs from the dataset's other shards' (%u)",
                 sh->version, have);
        return CXLP_ECORRUPT;
    }
    if (v1) {
        const struct shard_col *c = &sh->col[0];
        if ((c->kind == SHARD_KIND_FIXED) != (sc->fixed != 0) ||
            (sc->fixed && c->record_size != sc->record_size) || (!sc->fixed && sc->n_fields != 1)) {
            snprintf(err, errlen, "record kind/size differ from the schema");
            return CXLP_ECORRUPT;
        }
        return 0;
    }
    if (sh->n_cols != sc->n_fields) {
        snprintf(err, errlen, "%u columns, the schema has %u fields", sh->n_cols, sc->n_fields);
        return CXLP_ECORRUPT;
    }
    for (uint32_t f = 0; f < sc->n_fields; f++) {
        uint64_t size = schema_field_size(&sc->fields[f]);
        const struct shard_col *c = &sh->col[f];
        if ((c->kind == SHARD_KIND_FIXED) != (size != 0) || (size && c->record_size != size)) {
            snprintf(err, errlen, "column %u: record kind/size differ from field %s", f,
                     sc->fields[f].name);
            return CXLP_ECORRUPT;
        }
    }
    return 0;
}

/* shard_open, after dropping stale lines of the header (with the column
 * directory) and the indexes on a non-coherent pool: the header first (it
 * says where the indexes are), then the indexes, then open again on fresh
 * lines. */
static int open_shard(const cxlp_store *s, struct shard *sh, struct shard_col *cols,
                      const uint8_t *p, uint64_t len, char *err, size_t errlen)
{
    if (!s->nc)
        return shard_open(sh, cols, s->ncols, p, len, err, errlen);
    cache_invalidate(p, MIN(len, (uint64_t)SHARD_DATA_OFF));
    int rc = shard_open(sh, cols, s->ncols, p, len, err, errlen);
    if (rc)
        return rc;
    int indexed = 0;
    for (uint32_t c = 0; c < sh->n_cols; c++)
        if (cols[c].index_len) {
            cache_invalidate(p + cols[c].index_off, cols[c].index_len);
            indexed = 1;
        }
    return indexed ? shard_open(sh, cols, s->ncols, p, len, err, errlen) : 0;
}

/* store_shard_check and store_head_check: whole (the indexes walked) or
 * the header page's fields alone. */
static int check_shard(cxlp_store *s, uint64_t k, const uint8_t *base, struct shard *g,
                       struct shard_col *cols, int settle, const char *where, int whole)
{
    char err[ERRMSG_MAX];
    const struct pool_shard *l = &s->loc[k];
    int rc;
    if (whole) {
        rc = open_shard(s, g, cols, base, l->len, err, sizeof err);
    } else {
        if (s->nc)
            cache_invalidate(base, SHARD_DATA_OFF);
        rc = shard_open_head(g, cols, s->ncols, base, l->len, err, sizeof err);
    }
    if (rc == CXLP_EFORMAT && strstr(err, "version"))
        return seterr(NULL, rc, "dataset %s shard %" PRIu64 " (%s): %s: written by a newer "
                      "build; open it with that build, or re-ingest the source", s->name, k,
                      where, err);
    if (rc)
        return seterr(NULL, rc, "dataset %s shard %" PRIu64 " (%s): %s", s->name, k, where, err);
    uint64_t data_len, checksum;
    shard_digest(g, &data_len, &checksum);
    if (g->n_records != l->n_records || data_len != l->data_len || checksum != l->checksum)
        return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 " (%s): header holds %" PRIu64
                      " records, %" PRIu64 " bytes, checksum %016" PRIx64 "; the shard table "
                      "%" PRIu64 ", %" PRIu64 ", %016" PRIx64, s->name, k, where, g->n_records,
                      data_len, checksum, l->n_records, l->data_len, l->checksum);
    if ((rc = shard_matches(s, &s->ds.schema, g, k, settle, err, sizeof err)))
        return seterr(NULL, rc, "dataset %s shard %" PRIu64 " (%s): %s", s->name, k, where, err);
    return 0;
}

int store_shard_check(cxlp_store *s, uint64_t k, const uint8_t *base, struct shard *g,
                      struct shard_col *cols, int settle, const char *where)
{
    return check_shard(s, k, base, g, cols, settle, where, 1);
}

int store_head_check(cxlp_store *s, uint64_t k, const uint8_t *page, struct shard *g,
                     struct shard_col *cols, int settle, const char *where)
{
    return check_shard(s, k, page, g, cols, settle, where, 0);
}

/* Checks the catalog record and the shard table; in a pool of one tier
 * also every shard header. */
static int store_validate(cxlp_store *s)
{
    const uint8_t *base = attach_base(s->a);
    uint64_t size = attach_size(s->a);
    const struct pool_dataset *ds = &s->ds;
    char err[ERRMSG_MAX];
    struct cxlp_schema norm;
    int rc = schema_normalize(&ds->schema, &norm, err, sizeof err);
    if (rc || norm.fixed != ds->info.fixed || (norm.fixed && norm.record_size != ds->info.record_size))
        return seterr(&s->obj, CXLP_ECORRUPT, "dataset %s: catalog schema is invalid: %s", s->name,
                      rc ? err : "kind or record_size differ from the dataset record");
    s->ds.schema = norm;
    uint64_t next = 0, bytes = 0;
    for (uint64_t k = 0; k < s->n_shards; k++) {
        const struct pool_shard *l = &s->loc[k];
        s->first[k] = next;
        /* a hostile table may hold anything: check the sums */
        if (l->len == 0 || add_overflow_u64(next, l->n_records, &next) ||
            add_overflow_u64(bytes, l->data_len, &bytes))
            return seterr(&s->obj, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": empty, or record "
                          "or byte count overflows", s->name, k);
        if (s->tiered)
            continue;
        const struct attach_tier *t = attach_tier(s->a, 0);
        if (l->off < t->data_off || !range_ok(l->off - t->data_off, l->len, t->data_len) ||
            !range_ok(l->off, l->len, size))
            return seterr(&s->obj, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": extent [%" PRIu64 ", +%" PRIu64 ") "
                          "outside the pool's data area", s->name, k, l->off, l->len);
        char where[64];
        snprintf(where, sizeof where, "pool offset %" PRIu64, l->off);
        rc = store_shard_check(s, k, base + l->off, &s->shards[k], &s->cols[k * s->ncols], 1,
                               where);
        if (rc)
            return seterr(&s->obj, rc, "%s", cxlp_errmsg(NULL));
    }
    if (next != ds->info.n_records || bytes != ds->info.data_bytes)
        return seterr(&s->obj, CXLP_ECORRUPT, "dataset %s: shards hold %" PRIu64 " records / %" PRIu64 " bytes, "
                      "the catalog says %" PRIu64 " / %" PRIu64, s->name, next, bytes,
                      ds->info.n_records, ds->info.data_bytes);
    s->count = next;

    /* shard = idx / per_shard when the writer's equal-shard layout holds */
    if (s->n_shards > 0) {
        uint64_t per = s->loc[0].n_records;
        int equal = per > 0;
        for (uint64_t k = 0; equal && k + 1 < s->n_shards; k++)
            equal = s->loc[k].n_records == per;
        if (equal && s->loc[s->n_shards - 1].n_records <= per &&
            s->loc[s->n_shards - 1].n_records > 0) {
            s->per_shard = per;
            s->per_div = fastdiv_init(per);
        }
    }

    if (ds->info.n_docs || ds->docs.len) {
        uint64_t want;
        if (ds->info.n_docs == UINT64_MAX ||
            mul_overflow_u64(ds->info.n_docs + 1, sizeof(int64_t), &want) || want != ds->docs.len ||
            !range_ok(ds->docs.off, ds->docs.len, size) || ds->docs.off % 8)
            return seterr(&s->obj, CXLP_ECORRUPT, "dataset %s: document index [%" PRIu64 ", +%" PRIu64 ") "
                          "does not hold %" PRIu64 "+1 entries inside the pool", s->name, ds->docs.off,
                          ds->docs.len, ds->info.n_docs);
        const int64_t *d = (const int64_t *)(base + ds->docs.off);
        if (s->nc)
            cache_invalidate(d, ds->docs.len);
        int64_t prev = 0;
        for (uint64_t i = 0; i <= ds->info.n_docs; i++) {
            int64_t v = d[i];
            if (v < prev || (uint64_t)v > s->count || (i == 0 && v != 0))
                return seterr(&s->obj, CXLP_ECORRUPT, "dataset %s: document index entry %" PRIu64 " (pool offset %" PRIu64 ") "
                              "is %" PRId64 ", outside [%" PRId64 ", %" PRIu64 "]", s->name, i,
                              ds->docs.off + i * 8, v, prev, s->count);
            prev = v;
        }
        s->docs = d;
    }
    return 0;
}

/* Tiered pools: the memory tiers to look in, fastest first. */
static void tiers_init(cxlp_store *s)
{
    struct attach *a = s->a;
    s->tiered = attach_n_tiers(a) > 1;
    s->remote = -1;
    if (!s->tiered)
        return;
    s->unpinned = !attach_leased(a);
    s->states = attach_states(a, s->ds.states_off);
    s->stride = attach_stride(a);
    for (uint32_t t = 0; t < attach_n_tiers(a); t++)
        if (!(attach_tier(a, t)->flags & TIER_STAGED))
            s->mem[s->n_mem++] = t;
    s->remote = store_remote_of(s);
}

int cxlp_store_open(cxlp_pool *p, const char *name, cxlp_store **out)
{
    char err[ERRMSG_MAX];
    if (!p || !out)
        return seterr(NULL, CXLP_EARG, "store_open: %s is NULL", p ? "out" : "pool");
    int rc = store_name_check(name, err, sizeof err);
    if (rc)
        return seterr(pool_obj(p), rc, "%s", err);
    cxlp_store *s = calloc(1, sizeof *s);
    if (!s)
        return seterr(pool_obj(p), -ENOMEM, "dataset %s: out of memory", name);
    obj_init(&s->obj);
    rc = pool_lookup_ingest(p, name, &s->ds, &s->loc, &s->a, &s->gen, &s->ingest);
    if (rc == CXLP_ENOTFOUND && pool_has_remote(p)) {
        /* a dataset of a peer of the remote tier: mirrored, then opened */
        char msg[ERRMSG_MAX];
        strlcpy0(msg, cxlp_errmsg(pool_obj(p)), sizeof msg);
        int r2 = pool_remote_mirror(p, name);
        if (r2 == 0)
            rc = pool_lookup_ingest(p, name, &s->ds, &s->loc, &s->a, &s->gen, &s->ingest);
        else /* pool_remote_mirror says which peers and why */
            rc = seterr(pool_obj(p), r2, "%s (%s)", msg, cxlp_errmsg(NULL));
    }
    if (rc) {
        free(s);
        return rc; /* the pool layer's message names the dataset */
    }
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->home_mu, NULL);
    pthread_mutex_init(&s->heads_mu, NULL);
    pthread_mutex_init(&s->rt_mu, NULL);
    pthread_mutex_init(&s->rt_held_mu, NULL);
    s->mu_init = 1;
    s->name = s->ds.info.name;
    s->ds.info.name[sizeof s->ds.info.name - 1] = '\0';
    if (s->ingest.flags & INGEST_SHUFFLED)
        ingest_perm(&s->shuf, s->ds.info.n_records, s->ingest.seed);
    s->nc = attach_noncoherent(s->a);
    if (s->nc) /* every read of this store takes the closer look */
        at_fetch_add_acq_rel(&read_alarm, 1);
    s->n_shards = s->ds.n_shards;
    if (s->n_shards != s->ds.info.n_shards) {
        seterr(&s->obj, CXLP_ECORRUPT, "dataset %s: %u shards listed, %u in the record", s->name,
               s->ds.n_shards, s->ds.info.n_shards);
        return open_fail(s, p, CXLP_ECORRUPT);
    }
    /* format 2 shards carry one column per field, format 1 one column; the
     * room for n_fields covers both (shard_open refuses more) */
    s->ncols = s->ds.schema.n_fields >= 1 && s->ds.schema.n_fields <= CXLP_MAX_FIELDS
               ? s->ds.schema.n_fields : 1;
    s->first = malloc((s->n_shards ? s->n_shards : 1) * sizeof *s->first);
    s->shards = malloc((s->n_shards ? s->n_shards : 1) * sizeof *s->shards);
    s->cols = calloc((s->n_shards ? s->n_shards : 1) * s->ncols, sizeof *s->cols);
    s->ready = calloc(s->n_shards ? s->n_shards : 1, 1);
    tiers_init(s);
    if (!s->first || !s->shards || !s->cols || !s->ready) {
        seterr(&s->obj, -ENOMEM, "dataset %s: out of memory for %" PRIu64 " shards", s->name, s->n_shards);
        return open_fail(s, p, -ENOMEM);
    }
    rc = store_validate(s);
    if (rc)
        return open_fail(s, p, rc);
    *out = s;
    return 0;
}

int cxlp_store_close(cxlp_store *s)
{
    if (!s)
        return 0;
    if (s->obj.magic != OBJ_MAGIC)
        return seterr(NULL, CXLP_EARG, "store_close: not a store handle");
    store_free(s);
    return 0;
}

uint64_t cxlp_store_count(const cxlp_store *s)
{
    return s ? s->count : 0;
}

int cxlp_store_info(const cxlp_store *s, struct cxlp_dataset_info *info)
{
    if (!s || !info)
        return seterr(NULL, CXLP_EARG, "store_info: NULL argument");
    *info = s->ds.info;
    return 0;
}

const struct cxlp_schema *cxlp_store_schema(const cxlp_store *s)
{
    return s ? &s->ds.schema : NULL;
}

__attribute__((cold, noinline)) static int read_corrupt_at(const cxlp_store *s,
                                                         const struct shard *sh, uint64_t k,
                                                         uint32_t c, uint64_t idx)
{
    char err[ERRMSG_MAX];
    shard_explain(sh, c, idx - s->first[k], err, sizeof err);
    if (s->tiered)
        return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": %s", s->name, k, err);
    return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 " (pool offset %" PRIu64 "): %s",
                  s->name, k, s->loc[k].off, err);
}

static int read_corrupt(const cxlp_store *s, uint64_t k, uint32_t c, uint64_t idx)
{
    return read_corrupt_at(s, &s->shards[k], k, c, idx);
}

__attribute__((cold, noinline)) static int read_range(const cxlp_store *s, uint64_t idx)
{
    return seterr(NULL, CXLP_ERANGE, "dataset %s: record %" PRIu64 " past the end (%" PRIu64 " records)",
                  s->name, idx, s->count);
}

/* Geometry of shard k, validated from the copy at base (slow path, once). */
__attribute__((cold, noinline)) static int make_ready(const cxlp_store *s, uint64_t k,
                                                     const uint8_t *base, uint32_t t)
{
    cxlp_store *m = (cxlp_store *)s; /* the lazily filled part: under mu */
    pthread_mutex_lock(&m->mu);
    int rc = 0;
    if (!at_load_acquire(&m->ready[k])) {
        char where[64];
        snprintf(where, sizeof where, "copy in tier %u", t);
        rc = store_shard_check(m, k, base, &m->shards[k], &m->cols[k * m->ncols], 1, where);
        if (!rc)
            at_store_release(&m->ready[k], 1); /* pairs with the acquire in store_locate */
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

int store_locate(const cxlp_store *s, uint64_t k, struct shard *sh, struct shard_col *cols,
                 uint32_t *tier)
{
    const uint64_t len = s->loc[k].len;
    for (uint32_t i = 0; i < s->n_mem; i++) {
        uint32_t t = s->mem[i];
        uint64_t w = store_word(s, k, t);
        if (!loc_present(w))
            continue;
        const struct attach_tier *at = attach_tier(s->a, t);
        uint64_t off = loc_off(w);
        if (off < at->data_off || !range_ok(off - at->data_off, len, at->data_len))
            return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": tier %u word names "
                          "%#" PRIx64 "+%" PRIu64 ", outside the tier", s->name, k, t, off, len);
        const uint8_t *base = at->base + off;
        /* pairs with at_store_release(&ready[k]) in make_ready */
        if (!at_load_acquire(&s->ready[k])) {
            int rc = make_ready(s, k, base, t);
            if (rc)
                return rc;
        }
        shard_at(&s->shards[k], base, sh, cols);
        *tier = t;
        return 0;
    }
    return CXLP_ENOTFOUND;
}

static int not_resident(const cxlp_store *s, uint64_t k)
{
    return seterr(NULL, CXLP_ENOTFOUND, "dataset %s shard %" PRIu64 ": no copy in a memory "
                  "tier", s->name, k);
}

int store_fields_at(const cxlp_store *s, const struct shard *sh, uint64_t k, uint64_t idx,
                    const uint32_t *fields, uint32_t n, struct cxlp_view *v)
{
    const uint64_t i = idx - s->first[k];
    const int rows = at_load_relaxed(&s->rows); /* settled before any copy was read (store.h) */
    if (!fields && s->ncols != 1 && !rows)
        return seterr(NULL, CXLP_EARG, "dataset %s stores its %u fields in columns: read them with "
                      "cxlp_store_read_field", s->name, s->ncols);
    for (uint32_t j = 0; j < n; j++) {
        const uint8_t *p;
        uint64_t len;
        uint32_t c = !fields || rows ? 0 : fields[j];
        if (shard_col_record(&sh->col[c], i, &p, &len))
            return read_corrupt_at(s, sh, k, c, idx);
        if (fields && rows) { /* format 1: the field inside the whole record */
            const struct cxlp_field *f = &s->ds.schema.fields[fields[j]];
            uint64_t fs = schema_field_size(f);
            if (!range_ok(f->offset, fs, len))
                return read_corrupt_at(s, sh, k, 0, idx);
            p += f->offset;
            len = fs;
        }
        if (s->tiered && s->nc) /* the copy may be new since our caches saw its lines */
            cache_invalidate(p, len);
        v[j].data = p;
        v[j].len = len;
    }
    return 0;
}

int store_read_pinned(const cxlp_store *s, uint64_t idx, const uint32_t *fields, uint32_t n,
                      struct cxlp_view *v)
{
    if (__builtin_expect(idx >= s->count, 0))
        return read_range(s, idx);
    uint64_t k = store_shard_of(s, idx);
    if (!s->tiered)
        return store_fields_at(s, &s->shards[k], k, idx, fields, n, v);
    if (s->unpinned)
        return not_resident(s, k);
    struct shard sh;
    struct shard_col cols[SHARD_MAX_COLS];
    uint32_t t;
    int rc = store_locate(s, k, &sh, cols, &t);
    /* no whole copy in memory: a copy of its staging unit, if any */
    if (rc == CXLP_ENOTFOUND && at_load_acquire(&s->units))
        rc = store_unit_locate(s, store_unit_of(s, idx), &sh, cols, &t);
    if (rc)
        return rc == CXLP_ENOTFOUND ? not_resident(s, k) : rc;
    return store_fields_at(s, &sh, k, idx, fields, n, v);
}

int store_fetch_record(cxlp_store *s, uint64_t idx)
{
    /* a record of a shard larger than a quarter of the fastest memory tier:
     * its staging unit, the dataset's units made if need be; else its
     * shard, unless the dataset has units already */
    uint64_t k = store_shard_of(s, idx);
    if (!at_load_acquire(&s->units)) {
        int big = s->n_mem && s->loc[k].len > attach_tier(s->a, s->mem[0])->data_len / 4;
        int rc = store_units_use(s, 0, big);
        if (rc && rc != CXLP_ENOTFOUND)
            return rc;
    }
    if (at_load_acquire(&s->units))
        return store_unit_fetch(s, store_unit_of(s, idx), FETCH_WAIT);
    return store_fetch(s, k, FETCH_WAIT);
}

/* The read path of a tiered dataset: its first view pins the epoch for the
 * store's lifetime (views last until close), and a shard with no copy in
 * memory is fetched on demand. */
__attribute__((cold, noinline)) static int read_tiered(const cxlp_store *s, uint64_t idx,
                                                       const uint32_t *fields, uint32_t n,
                                                       struct cxlp_view *v)
{
    if (!at_load_acquire(&s->life_pinned)) {
        cxlp_store *m = (cxlp_store *)s;
        pthread_mutex_lock(&m->mu);
        if (!m->life_pinned) {
            m->life_pin = attach_pin_epoch(m->a);
            at_store_release(&m->life_pinned, 1); /* pairs with the acquire above */
        }
        pthread_mutex_unlock(&m->mu);
    }
    if (s->unpinned && idx < s->count)
        return seterr(NULL, CXLP_EREADONLY, "dataset %s: this process may not write the pool, so "
                      "it holds no lease and its views would be unprotected: it reads copies of "
                      "records out (cxlp_store_read_copy, ds[i] in Python), from the home copy",
                      s->name);
    int rc = store_read_pinned(s, idx, fields, n, v);
    if (rc == CXLP_ENOTFOUND && idx < s->count) {
        /* fetch on demand, then read under the lifetime pin */
        rc = store_fetch_record((cxlp_store *)s, idx);
        if (rc == 0)
            rc = store_read_pinned(s, idx, fields, n, v);
    }
    return rc;
}

/* Column c of record idx (< count): the hot path of every read. */
static inline __attribute__((always_inline)) int read_col(const cxlp_store *s, uint64_t idx,
                                                          uint32_t c, struct cxlp_view *v)
{
    uint64_t k = store_shard_of(s, idx);
    const uint8_t *p;
    uint64_t len;
    if (__builtin_expect(shard_col_record(&s->cols[k * s->ncols + c], idx - s->first[k], &p, &len),
                         0))
        return read_corrupt(s, k, c, idx);
    v->data = p;
    v->len = len;
    return 0;
}

/* Record idx whole (its one column): the read path proper. */
static inline __attribute__((always_inline)) int read_record(const cxlp_store *s, uint64_t idx,
                                                             struct cxlp_view *v)
{
    if (__builtin_expect(s->tiered, 0))
        return read_tiered(s, idx, NULL, 1, v);
    if (__builtin_expect(idx >= s->count, 0))
        return read_range(s, idx);
    if (__builtin_expect(s->ncols != 1 && !s->rows, 0))
        return seterr(NULL, CXLP_EARG, "dataset %s stores its %u fields in columns: read them with "
                      "cxlp_store_read_field", s->name, s->ncols);
    return read_col(s, idx, 0, v);
}

/* Fields fields[0..n) of record idx: the read path proper. */
static inline __attribute__((always_inline)) int read_fields(const cxlp_store *s, uint64_t idx,
                                                             const uint32_t *fields, uint32_t n,
                                                             struct cxlp_view *v)
{
    if (__builtin_expect(s->tiered, 0))
        return read_tiered(s, idx, fields, n, v);
    if (__builtin_expect(idx >= s->count, 0))
        return read_range(s, idx);
    if (n == 1 && !s->rows) /* one column: what the loader reads for one field */
        return read_col(s, idx, fields[0], v);
    uint64_t k = store_shard_of(s, idx), i = idx - s->first[k];
    const struct shard_col *cols = &s->cols[k * s->ncols];
    for (uint32_t j = 0; j < n; j++) {
        const uint8_t *p;
        uint64_t len;
        uint32_t c = s->rows ? 0 : fields[j];
        if (__builtin_expect(shard_col_record(&cols[c], i, &p, &len), 0))
            return read_corrupt(s, k, c, idx);
        if (s->rows) { /* format 1: the field inside the whole record */
            const struct cxlp_field *f = &s->ds.schema.fields[fields[j]];
            uint64_t fs = schema_field_size(f);
            if (!range_ok(f->offset, fs, len))
                return read_corrupt(s, k, 0, idx);
            p += f->offset;
            len = fs;
        }
        v[j].data = p;
        v[j].len = len;
    }
    return 0;
}

/* The read path's rare cases, out of line so the common one keeps a lean
 * frame; taken whenever read_alarm is raised: the object shrank under the
 * mapping, or the lease was lost (attach_lost says so), or some store of a
 * non-coherent pool is open (if this is one: the record's lines may be stale
 * in our caches, an extent reused since we last read it). fields NULL: the
 * whole record (n 1). */
__attribute__((cold, noinline)) static int read_guarded(const cxlp_store *s, uint64_t idx,
                                                        const uint32_t *fields, uint32_t n,
                                                        struct cxlp_view *v)
{
    int rc = attach_lost(s->a, NULL);
    if (rc)
        return rc;
    struct cxlp_view w[CXLP_MAX_FIELDS];
    if ((rc = fields ? read_fields(s, idx, fields, n, w) : read_record(s, idx, w)))
        return rc;
    for (uint32_t j = 0; j < n; j++) {
        if (s->nc)
            cache_invalidate(w[j].data, w[j].len);
        v[j] = w[j];
    }
    return 0;
}

int cxlp_store_read(const cxlp_store *s, uint64_t idx, struct cxlp_view *v)
{
    /* one compare of a global more than a plain read */
    if (__builtin_expect(read_alarm_now() != 0, 0))
        return read_guarded(s, idx, NULL, 1, v);
    return read_record(s, idx, v);
}

int store_read_fields(const cxlp_store *s, uint64_t idx, const uint32_t *fields, uint32_t n,
                      struct cxlp_view *v)
{
    if (__builtin_expect(read_alarm_now() != 0, 0))
        return read_guarded(s, idx, fields, n, v);
    return read_fields(s, idx, fields, n, v);
}

int store_check(const void *s)
{
    return attach_lost(((const cxlp_store *)s)->a, NULL);
}

int cxlp_store_spans(const cxlp_store *s, uint64_t first, uint64_t n, struct cxlp_span *out,
                     size_t cap, size_t *n_out)
{
    if (!s || s->obj.magic != OBJ_MAGIC || !n_out || (cap && !out))
        return seterr(NULL, CXLP_EARG, "store_spans: NULL argument or not a store handle");
    if (s->tiered)
        return seterr(NULL, CXLP_EUNSUPPORTED, "dataset %s: its copies move between tiers; "
                      "spans (pool offsets) are for datasets of a pool of one tier", s->name);
    uint64_t end;
    if (add_overflow_u64(first, n, &end) || end > s->count)
        return seterr(NULL, CXLP_ERANGE, "dataset %s: records [%" PRIu64 ", +%" PRIu64 ") are not "
                      "inside its %" PRIu64 " records", s->name, first, n, s->count);
    if (s->ncols != 1 && !s->rows)
        return seterr(NULL, CXLP_EUNSUPPORTED, "dataset %s stores its %u fields in columns: "
                      "its records are not byte ranges of the pool", s->name, s->ncols);
    size_t k_out = 0;
    /* records are back to back inside a shard's column (shard.h), so the
     * part of the range in one shard is the bytes from its first record's
     * start to its last record's end */
    for (uint64_t idx = first; idx < end;) {
        uint64_t k = store_shard_of(s, idx);
        const struct shard *sh = &s->shards[k];
        const struct shard_col *col = &s->cols[k];
        uint64_t last = s->first[k] + sh->n_records; /* past the shard's last record */
        uint64_t stop = end < last ? end : last;
        const uint8_t *a, *b;
        uint64_t alen, blen;
        if (shard_col_record(col, idx - s->first[k], &a, &alen))
            return read_corrupt(s, k, 0, idx);
        if (shard_col_record(col, stop - 1 - s->first[k], &b, &blen) || b < a)
            return read_corrupt(s, k, 0, stop - 1);
        if (k_out < cap)
            out[k_out] = (struct cxlp_span){
                .off = s->loc[k].off + (uint64_t)(a - sh->base),
                .len = (uint64_t)(b - a) + blen,
                .first = idx,
                .count = stop - idx,
            };
        k_out++;
        idx = stop;
    }
    *n_out = k_out;
    return 0;
}

/* Where field j of every record is, when every chosen field is fixed-shape:
 * column col[j], at byte off[j] of a record of stride[j] bytes, len[j] long. */
struct fixed_fields {
    uint32_t col[CXLP_MAX_FIELDS];
    uint64_t off[CXLP_MAX_FIELDS], len[CXLP_MAX_FIELDS], stride[CXLP_MAX_FIELDS];
};

/* Fixed-shape fields in equal shards: the shard is one multiply-high away
 * and each field one multiply into its column; shard_open checked
 * n_records * record_size == data_len of every fixed column, shard_matches
 * that every shard's columns have the schema's sizes, and id < count keeps
 * the in-shard index below the shard's count, so no other check is needed.
 * The loop has no call and no branch per record but the range check, so
 * the copies' loads can start early. Inlined with every field constant for
 * datasets of one column of whole records. */
static inline __attribute__((always_inline)) int
resolve_fixed(const cxlp_store *s, const struct fixed_fields *ff, const uint64_t *ids, size_t n,
              uint32_t nf, uint64_t nc, struct cxlp_view *out, size_t *bad)
{
    const uint64_t per = s->per_shard, cnt = s->count;
    const struct shard_col *cols = s->cols;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = ids[i];
        if (__builtin_expect(id >= cnt, 0)) {
            *bad = i;
            return read_range(s, id);
        }
        uint64_t k = fastdiv(id, s->per_div), r = id - k * per;
        for (uint32_t j = 0; j < nf; j++) {
            out[i * nf + j].data = cols[k * nc + ff->col[j]].data + r * ff->stride[j] + ff->off[j];
            out[i * nf + j].len = ff->len[j];
        }
    }
    return 0;
}

int store_resolve(const cxlp_store *s, const uint64_t *ids, size_t n, const uint32_t *fields,
                  uint32_t nf, struct cxlp_view *out, size_t *bad)
{
    /* read_alarm raised: each record through store_read_fields' guarded path */
    if (__builtin_expect(read_alarm_now() != 0, 0) || s->tiered)
        goto each;
    if (s->per_shard && nf == 1 && s->ncols == 1 && !s->rows &&
        s->cols[0].kind == SHARD_KIND_FIXED) { /* one column of whole records */
        const uint64_t rs = s->cols[0].record_size;
        const struct fixed_fields whole = {.stride = {rs}, .len = {rs}}; /* col, off: 0 */
        return resolve_fixed(s, &whole, ids, n, 1, 1, out, bad);
    }
    struct fixed_fields ff;
    int fixed = s->per_shard != 0 && s->n_shards > 0;
    for (uint32_t j = 0; fixed && j < nf; j++) {
        const struct cxlp_field *f = &s->ds.schema.fields[fields[j]];
        ff.col[j] = s->rows ? 0 : fields[j];
        ff.stride[j] = s->cols[ff.col[j]].record_size;
        /* as store_read_fields: a format 1 row cut at the field, else the
         * column's whole record (the normalized schema keeps fields inside
         * record_size, which shard_matches checked every shard against) */
        ff.off[j] = s->rows ? f->offset : 0;
        ff.len[j] = s->rows ? schema_field_size(f) : ff.stride[j];
        fixed = s->cols[ff.col[j]].kind == SHARD_KIND_FIXED;
    }
    if (fixed)
        return resolve_fixed(s, &ff, ids, n, nf, s->ncols, out, bad);
    if (nf == 1 && !s->rows) { /* one column (variable-length records): no call per record */
        for (size_t i = 0; i < n; i++) {
            int rc = __builtin_expect(ids[i] >= s->count, 0) ? read_range(s, ids[i])
                                                              : read_col(s, ids[i], fields[0], &out[i]);
            if (rc) {
                *bad = i;
                return rc;
            }
        }
        return 0;
    }
each:
    for (size_t i = 0; i < n; i++) {
        int rc = store_read_fields(s, ids[i], fields, nf, &out[i * nf]);
        if (rc) {
            *bad = i;
            return rc;
        }
    }
    return 0;
}

int cxlp_store_read_field(const cxlp_store *s, uint64_t idx, uint32_t field, struct cxlp_view *v)
{
    if (__builtin_expect(field >= s->ds.schema.n_fields, 0))
        return seterr(NULL, CXLP_ERANGE, "dataset %s: field %u past its %u fields", s->name, field,
                      s->ds.schema.n_fields);
    return store_read_fields(s, idx, &field, 1, v);
}

/* The view v of record idx copied into buf (cap bytes), its length in *len. */
static int copy_out(const cxlp_store *s, uint64_t idx, const struct cxlp_view *v, void *buf,
                    uint64_t cap, uint64_t *len)
{
    *len = v->len;
    if (v->len > cap)
        return seterr(NULL, CXLP_ERANGE, "dataset %s: record %" PRIu64 " is %" PRIu64
                      " bytes, the buffer %" PRIu64, s->name, idx, v->len, cap);
    memcpy(buf, v->data, v->len);
    return 0;
}

/* Record idx (field as read_copy) read from its shard's home copy, where no
 * memory tier has room for a copy of the shard (full of kept copies, or of
 * dropped ones readers still pin) or none can be placed (the dataset was
 * removed or rewritten since the store opened; its lease keeps the home
 * copy): as a batch would (engine.c), only the
 * verified blocks of the record (shard format 3 or 4), else the whole shard,
 * checked and verified, into private memory freed here. Nothing in the
 * pool changes. The store keeps its readers of the tier's file between
 * calls (opening one, an io_uring among them, cost a third of such a
 * read); a call that finds them in use by another thread makes its own. */
static int read_copy_home(const cxlp_store *s, uint64_t idx, const uint32_t *field, void *buf,
                          uint64_t cap, uint64_t *len)
{
    cxlp_store *m = (cxlp_store *)s;
    uint64_t k = store_shard_of(s, idx), rec = idx - s->first[k], bytes;
    struct shard sh;
    struct shard_col cols[SHARD_MAX_COLS];
    struct store_io own = {0}, *io = &own;
    int kept = pthread_mutex_trylock(&m->home_mu) == 0;
    if (kept && !m->home_io)
        m->home_io = calloc(1, sizeof *m->home_io);
    if (kept && m->home_io)
        io = m->home_io;
    struct store_part part = {.k = k, .rec = &rec, .n = 1, .g = &sh, .cols = cols};
    size_t whole;
    int rc = store_read_home(m, &part, 1, io, &bytes, &whole);
    if (rc == 0) {
        struct cxlp_view v;
        rc = store_fields_at(s, &sh, k, idx, field, 1, &v);
        if (rc == 0)
            rc = copy_out(s, idx, &v, buf, cap, len);
    }
    store_home_free(part.buf, part.buf_len);
    store_io_close(&own);
    if (kept)
        pthread_mutex_unlock(&m->home_mu);
    return rc;
}

/* Record idx whole (field NULL) or its field *field copied into buf, as
 * cxlp_store_read_copy says. */
static int read_copy(const cxlp_store *s, uint64_t idx, const uint32_t *field, void *buf,
                     uint64_t cap, uint64_t *len)
{
    struct cxlp_view v;
    int rc = 0;
    if (s->unpinned && idx < s->count) /* no copy is ours to read or make */
        return read_copy_home(s, idx, field, buf, cap, len);
    /* a pool of one tier: nothing moves, no pin; else a copy evicted between
     * the fetch and the read is fetched again */
    for (int tries = 0; tries < 100; tries++) {
        uint64_t pin = s->tiered ? attach_pin_epoch(s->a) : 0;
        rc = store_read_pinned(s, idx, field, 1, &v);
        if (rc == 0)
            rc = copy_out(s, idx, &v, buf, cap, len);
        if (s->tiered)
            attach_unpin_epoch(s->a, pin);
        if (rc != CXLP_ENOTFOUND || !s->tiered || idx >= s->count)
            return rc;
        rc = store_fetch_record((cxlp_store *)s, idx);
        /* no room for a copy, or the dataset was removed or replaced since
         * the store opened (no copy can be placed for it; its home copy
         * stays while the store's lease pins it) */
        if (rc == CXLP_EFULL || rc == CXLP_ENOTFOUND)
            return read_copy_home(s, idx, field, buf, cap, len);
        if (rc)
            return rc;
    }
    return seterr(NULL, CXLP_EBUSY, "dataset %s: record %" PRIu64 ": its shard was evicted "
                  "every time it was fetched", s->name, idx);
}

int cxlp_store_read_copy(const cxlp_store *s, uint64_t idx, void *buf, uint64_t cap,
                         uint64_t *len)
{
    if (!s || (cap && !buf) || !len)
        return seterr(NULL, CXLP_EARG, "store_read_copy: NULL argument");
    return read_copy(s, idx, NULL, buf, cap, len);
}

int cxlp_store_read_field_copy(const cxlp_store *s, uint64_t idx, uint32_t field, void *buf,
                               uint64_t cap, uint64_t *len)
{
    if (!s || (cap && !buf) || !len)
        return seterr(NULL, CXLP_EARG, "store_read_field_copy: NULL argument");
    if (field >= s->ds.schema.n_fields)
        return seterr(NULL, CXLP_ERANGE, "dataset %s: field %u past its %u fields", s->name, field,
                      s->ds.schema.n_fields);
    return read_copy(s, idx, &field, buf, cap, len);
}

int cxlp_store_shards(const cxlp_store *s, uint64_t *n_shards, uint64_t *per_shard,
                      uint64_t *max_bytes)
{
    if (!s)
        return seterr(NULL, CXLP_EARG, "store_shards: store is NULL");
    const uint64_t m = ALIGN_UP(store_max_shard(s), 4096);
    if (n_shards)
        *n_shards = s->n_shards;
    if (per_shard)
        *per_shard = s->per_shard;
    if (max_bytes)
        *max_bytes = m;
    return 0;
}

int cxlp_store_copies(const cxlp_store *s, uint64_t *copies, size_t cap, size_t *n)
{
    if (!s || !n || (cap && !copies))
        return seterr(NULL, CXLP_EARG, "store_copies: NULL argument");
    uint32_t nt = attach_n_tiers(s->a);
    for (size_t t = 0; t < cap; t++)
        copies[t] = 0;
    if (!s->tiered) {
        if (cap)
            copies[0] = s->n_shards;
    } else {
        for (uint64_t k = 0; k < s->n_shards; k++)
            for (uint32_t t = 0; t < nt && t < cap; t++)
                copies[t] += loc_present(store_word(s, k, t));
    }
    *n = nt;
    return 0;
}

int cxlp_store_shard_tiers(const cxlp_store *s, uint64_t k, uint32_t *mask)
{
    if (!s || !mask)
        return seterr(NULL, CXLP_EARG, "store_shard_tiers: NULL argument");
    if (k >= s->n_shards)
        return seterr(NULL, CXLP_ERANGE, "dataset %s: shard %" PRIu64 " of %" PRIu64, s->name,
                      k, s->n_shards);
    *mask = 0;
    if (!s->tiered) {
        *mask = 1;
        return 0;
    }
    for (uint32_t t = 0, nt = attach_n_tiers(s->a); t < nt; t++)
        *mask |= (uint32_t)loc_present(store_word(s, k, t)) << t;
    return 0;
}

int cxlp_store_locate(const cxlp_store *s, uint64_t idx, struct cxlp_record_loc *out)
{
    if (!s || s->obj.magic != OBJ_MAGIC || !out)
        return seterr(NULL, CXLP_EARG, "store_locate: NULL argument or not a store handle");
    if (idx >= s->count)
        return seterr(NULL, CXLP_ERANGE, "dataset %s: record %" PRIu64 " of %" PRIu64, s->name,
                      idx, s->count);
    uint64_t k = store_shard_of(s, idx);
    uint64_t end = k + 1 < s->n_shards ? s->first[k + 1] : s->count;
    *out = (struct cxlp_record_loc){
        .shard = k,
        .index = idx - s->first[k],
        .shard_records = end - s->first[k],
        .version = s->ds.info.version,
    };
    /* word 0 of a shard's states is its heat: engine_batch_end adds to it */
    if (s->tiered && s->states)
        out->heat = at_load_relaxed(&s->states[k * s->stride]);
    return cxlp_store_shard_tiers(s, k, &out->tiers);
}

int cxlp_store_tiered(const cxlp_store *s)
{
    return s ? s->tiered : 0;
}

int store_numa_node(const cxlp_store *s)
{
    /* a tiered dataset is read from its fastest memory tier */
    if (s->tiered)
        return s->n_mem ? attach_tier(s->a, s->mem[0])->node : -1;
    return attach_media(s->a, 0)->numa_node;
}

int cxlp_store_hugepages(cxlp_store *s)
{
    if (!s || s->obj.magic != OBJ_MAGIC)
        return seterr(NULL, CXLP_EARG, "store_hugepages: not a store handle");
    if (s->tiered)
        return seterr(NULL, CXLP_EUNSUPPORTED, "dataset %s: its copies move between tiers; "
                      "2 MiB pages are for datasets of a pool of one tier", s->name);
    int first = 0;
    uint64_t failed_at = 0;
    for (uint64_t k = 0; k < s->n_shards; k++) {
        int rc = attach_collapse(s->a, s->loc[k].off, s->loc[k].len);
        if (rc == -EOPNOTSUPP)
            return seterr(NULL, CXLP_EUNSUPPORTED, "dataset %s: this kernel or media cannot put "
                          "pool memory on 2 MiB pages (MADV_COLLAPSE)", s->name);
        if (rc && !first) {
            first = rc;
            failed_at = k;
        }
    }
    if (first)
        return seterr(NULL, first, "dataset %s: shard %" PRIu64 " (pool offset %" PRIu64 ") and "
                      "maybe others stay on 4 KiB pages: %s", s->name, failed_at,
                      s->loc[failed_at].off, cxlp_strerror(first));
    return 0;
}

int cxlp_store_pages(const cxlp_store *s, uint64_t *bytes, uint64_t *huge_bytes)
{
    if (!s || s->obj.magic != OBJ_MAGIC || !bytes || !huge_bytes)
        return seterr(NULL, CXLP_EARG, "store_pages: NULL argument or not a store handle");
    if (s->tiered)
        return seterr(NULL, CXLP_EUNSUPPORTED, "dataset %s: its copies move between tiers; "
                      "page sizes are reported for datasets of a pool of one tier", s->name);
    struct media_range *r = malloc((s->n_shards ? s->n_shards : 1) * sizeof *r);
    if (!r)
        return seterr(NULL, -ENOMEM, "dataset %s: out of memory", s->name);
    uint64_t total = 0, whole;
    for (uint64_t k = 0; k < s->n_shards; k++) {
        r[k] = (struct media_range){s->loc[k].off, s->loc[k].len};
        total += s->loc[k].len;
    }
    int rc = media_huge_bytes(attach_media(s->a, 0), r, s->n_shards, &whole, huge_bytes);
    free(r);
    if (!rc)
        *bytes = total;
    if (rc)
        return seterr(NULL, rc, "dataset %s: reading the page sizes of its shards: %s", s->name,
                      cxlp_strerror(rc));
    return 0;
}

int cxlp_store_format(cxlp_store *s, uint32_t *format, uint64_t *block_bytes, int *sums_area)
{
    if (!s || s->obj.magic != OBJ_MAGIC)
        return seterr(NULL, CXLP_EARG, "store_format: not a store handle");
    struct shard head = {0}; /* no shard, no format */
    const struct shard *g = &head;
    if (s->n_shards && !s->tiered) {
        g = &s->shards[0]; /* checked at open */
    } else if (s->n_shards) {
        /* no copy is checked at open on a pool of tiers: the first
         * shard's header page, from its fastest copy (O_DIRECT: aligned) */
        struct shard_col cols[SHARD_MAX_COLS];
        void *page = NULL;
        if (posix_memalign(&page, 4096, SHARD_DATA_OFF))
            return seterr(&s->obj, -ENOMEM, "dataset %s: out of memory", s->name);
        int rc = store_read_head(s, 0, page, &head, cols);
        free(page);
        if (rc)
            return seterr(&s->obj, rc, "%s", cxlp_errmsg(NULL));
    }
    if (format)
        *format = g->version;
    if (block_bytes)
        *block_bytes = g->n_bsums ? UINT64_C(1) << g->bsum_shift : 0;
    if (sums_area)
        *sums_area = g->sums_off != 0;
    return 0;
}

int cxlp_store_private(const cxlp_store *s, const void *data, uint64_t len, void **out)
{
    if (!s || s->obj.magic != OBJ_MAGIC || !out)
        return seterr(NULL, CXLP_EARG, "store_private: %s", out ? "not a store handle" : "out is NULL");
    if (s->tiered)
        return seterr(NULL, CXLP_EUNSUPPORTED, "dataset %s: its copies move between tiers; "
                      "read a record with cxlp_store_read_copy", s->name);
    const uint8_t *base = attach_base(s->a);
    uint64_t off = (uint64_t)((uintptr_t)data - (uintptr_t)base);
    if ((uintptr_t)data < (uintptr_t)base || !range_ok(off, len, attach_size(s->a)))
        return seterr(NULL, CXLP_ERANGE, "dataset %s: store_private: %" PRIu64 " bytes at %p are not "
                      "inside the pool mapping", s->name, len, data);
    uint8_t *priv;
    int rc = attach_private(s->a, &priv);
    if (rc)
        return seterr(NULL, rc, "dataset %s: no private copy-on-write mapping of the pool: %s",
                      s->name, rc == -EINVAL ? "the media refuses private mappings (devdax)"
                                             : cxlp_strerror(rc));
    *out = priv + off;
    return 0;
}

int cxlp_store_docs(const cxlp_store *s, const int64_t **docs, uint64_t *n_docs)
{
    if (!s || !docs || !n_docs)
        return seterr(NULL, CXLP_EARG, "store_docs: NULL argument");
    *docs = s->docs;
    *n_docs = s->docs ? s->ds.info.n_docs : 0;
    return 0;
}

int cxlp_store_ingest_shuffle(const cxlp_store *s, uint64_t *seed)
{
    if (!s)
        return seterr(NULL, CXLP_EARG, "store_ingest_shuffle: NULL store");
    int shuffled = (s->ingest.flags & INGEST_SHUFFLED) != 0;
    if (seed)
        *seed = shuffled ? s->ingest.seed : 0;
    return shuffled;
}

int cxlp_store_source_index(const cxlp_store *s, uint64_t idx, uint64_t *src)
{
    if (!s || !src)
        return seterr(NULL, CXLP_EARG, "store_source_index: NULL argument");
    if (idx >= s->ds.info.n_records)
        return seterr(NULL, CXLP_ERANGE, "dataset %s: record %llu of %llu", s->name,
                      (unsigned long long)idx, (unsigned long long)s->ds.info.n_records);
    *src = s->ingest.flags & INGEST_SHUFFLED ? feistel_apply(&s->shuf, idx) : idx;
    return 0;
}

int cxlp_store_record_of_source(const cxlp_store *s, uint64_t src, uint64_t *idx)
{
    if (!s || !idx)
        return seterr(NULL, CXLP_EARG, "store_record_of_source: NULL argument");
    if (src >= s->ds.info.n_records)
        return seterr(NULL, CXLP_ERANGE, "dataset %s: input record %llu of %llu", s->name,
                      (unsigned long long)src, (unsigned long long)s->ds.info.n_records);
    *idx = s->ingest.flags & INGEST_SHUFFLED ? feistel_invert(&s->shuf, src) : src;
    return 0;
}

int store_copy_open(cxlp_store *s, uint64_t k, uint32_t t, uint64_t off, const uint8_t *base,
                    uint8_t *buf, struct store_io *io, int verify, struct shard *g,
                    struct shard_col *cols)
{
    const uint64_t len = s->loc[k].len;
    char where[96], err[ERRMSG_MAX];
    if (s->tiered)
        snprintf(where, sizeof where, "tier %u copy at %#" PRIx64, t, off);
    else
        snprintf(where, sizeof where, "pool offset %" PRIu64, off);
    if (!base) {
        uint64_t al = ALIGN_UP(len, 4096);
        struct media_reader *r;
        int rc = store_tier_reader(s, k, t, io, &r);
        if (!rc)
            rc = media_read(r, off, al, buf, NULL);
        if (rc) {
            strlcpy0(err, cxlp_errmsg(NULL), sizeof err);
            return seterr(&s->obj, rc, "dataset %s shard %" PRIu64 " (%s): read: %s", s->name, k,
                          where, rc < 0 && rc > -4096 && !(attach_tier(s->a, t)->flags & TIER_REMOTE)
                          ? strerror(-rc) : err);
        }
        base = buf;
    } else if (s->nc) { /* the whole copy is read: fresh lines */
        cache_invalidate(base, len);
    }
    int rc = store_shard_check(s, k, base, g, cols, 0, where);
    if (rc)
        return seterr(&s->obj, rc, "%s", cxlp_errmsg(NULL));
    if (!verify)
        return 0;
    /* formats 3 and 4: the block sums too (and the pages of a sums area),
     * which partial reads trust */
    if ((rc = shard_verify(g, err, sizeof err)) ||
        (rc = shard_verify_sum_pages(g, 0, shard_sum_pages(g), err, sizeof err)) ||
        (g->n_bsums && (rc = shard_verify_blocks(g, 0, g->n_bsums, err, sizeof err))))
        return seterr(&s->obj, rc, "dataset %s shard %" PRIu64 " (%s, %" PRIu64 " bytes): %s",
                      s->name, k, where, len, err);
    return 0;
}

int store_copy_in(const cxlp_store *s, uint64_t k, uint32_t t, uint64_t *off,
                  const uint8_t **base)
{
    uint64_t w = store_word(s, k, t);
    if (!loc_present(w))
        return CXLP_ENOTFOUND;
    const struct attach_tier *at = attach_tier(s->a, t);
    *off = loc_off(w);
    if (*off < at->data_off || !range_ok(*off - at->data_off, s->loc[k].len, at->data_len))
        return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": tier %u copy at %#"
                      PRIx64 " outside the tier", s->name, k, t, *off);
    *base = at->flags & TIER_STAGED ? NULL : at->base + *off;
    return 0;
}

uint64_t store_max_shard(const cxlp_store *s)
{
    uint64_t m = 0;
    for (uint64_t k = 0; k < s->n_shards; k++)
        m = MAX(m, s->loc[k].len);
    return m;
}

/* Verifies one copy: header against the table, checksum. A staged tier's
 * copy (base NULL) is read into buf (4 KiB aligned, room for the longest
 * shard) through io's reader of its tier. */
static int verify_copy(cxlp_store *s, uint64_t k, uint32_t t, uint64_t off, const uint8_t *base,
                       uint8_t *buf, struct store_io *io)
{
    struct shard sh;
    struct shard_col cols[SHARD_MAX_COLS];
    return store_copy_open(s, k, t, off, base, buf, io, 1, &sh, cols);
}

int cxlp_store_verify(cxlp_store *s)
{
    if (!s || s->obj.magic != OBJ_MAGIC)
        return seterr(NULL, CXLP_EARG, "store_verify: not a store handle");
    int rc = attach_lost(s->a, &s->obj);
    if (rc)
        return rc;
    if (!s->tiered) {
        const uint8_t *base = attach_base(s->a);
        for (uint64_t k = 0; k < s->n_shards && !rc; k++)
            rc = verify_copy(s, k, 0, s->loc[k].off, base + s->loc[k].off, NULL, NULL);
    } else {
        /* every copy in every tier, each shard's under a pin so none is
         * freed meanwhile (a pin per shard: one held for the whole run
         * would hold back the frees of every copy dropped meanwhile) */
        uint8_t *buf = NULL;
        const uint64_t maxlen = store_max_shard(s);
        struct store_io io = {0};
        for (uint64_t k = 0; k < s->n_shards && !rc; k++) {
            uint64_t pin = attach_pin_epoch(s->a);
            for (uint32_t t = 0; t < attach_n_tiers(s->a) && !rc; t++) {
                uint64_t off;
                const uint8_t *at = NULL;
                rc = store_copy_in(s, k, t, &off, &at);
                if (rc == CXLP_ENOTFOUND) {
                    rc = 0;
                    continue;
                }
                if (rc) {
                    rc = seterr(&s->obj, rc, "%s", cxlp_errmsg(NULL));
                    break;
                }
                if (!buf && !at && posix_memalign((void **)&buf, 4096, ALIGN_UP(maxlen, 4096))) {
                    rc = seterr(&s->obj, -ENOMEM, "dataset %s: out of memory", s->name);
                    break;
                }
                rc = verify_copy(s, k, t, off, at, buf, &io);
            }
            attach_unpin_epoch(s->a, pin);
        }
        store_io_close(&io);
        free(buf);
    }
    if (rc)
        return rc;
    if (s->docs) {
        if (s->nc)
            cache_invalidate(s->docs, s->ds.docs.len);
        uint64_t h = XXH3_64bits(s->docs, s->ds.docs.len);
        if (h != s->ds.docs_checksum)
            return seterr(&s->obj, CXLP_ECORRUPT, "dataset %s: document index (pool offset %" PRIu64 ", %" PRIu64 " bytes): "
                          "checksum mismatch: stored %016" PRIx64 ", computed %016" PRIx64,
                          s->name, s->ds.docs.off, s->ds.docs.len, s->ds.docs_checksum, h);
    }
    return 0;
}
