/*
 * pool.c - pool lifecycle (create, open, close, destroy), header
 * validation, and the read side of the public API (stat, list) and of
 * pool.h (lookup, accessors).
 *
 * Create touches only metadata: the header page, the lease table and the
 * first catalog blob (a few hundred bytes of slot 1). The data area stays a
 * hole in a sparse file, so a 1 TiB file pool creates in O(1). The magic is
 * written last, after everything else is durable: a create killed halfway
 * leaves an object that open refuses as "not a pool" (CXLP_EFORMAT).
 *
 * Open validates in this order, so each failure gets its own code:
 *   magic, version, header size -> CXLP_EFORMAT (not ours / not this format)
 *   layout signature            -> CXLP_ELAYOUT (ours, other ABI or build)
 *   header checksum             -> CXLP_ECORRUPT
 *   every area inside the media and non-overlapping -> CXLP_ECORRUPT
 *   the current catalog decodes -> CXLP_ECORRUPT
 * The validated geometry is copied into private memory (struct pool_layout)
 * and never re-read from the pool.
 *
 * Ownership: a pool opened for writing must belong to the effective uid,
 * even for root: a writer takes the pool's lock and reuses its extents, and
 * another user's pool should not be changed by accident (CXLP_EOWNER).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/atomic.h"
#include "common/flush.h"
#include "pool/host.h"

_Static_assert(sizeof(struct pool_hdr) <= POOL_HOST_OFF, "header overlaps the host registry");
_Static_assert(sizeof(struct pool_host) == 64, "registry entries are one cacheline");
_Static_assert(POOL_HOST_OFF + POOL_HOSTS * sizeof(struct pool_host) <= POOL_HDR_SIZE,
               "host registry outside the header page");
_Static_assert(sizeof(struct pool_lease) == POOL_LEASE_SIZE, "lease slots are one cacheline");

#define ERRLEN 384

uint64_t pool_layout_signature(void)
{
    const uint64_t facts[] = {
        sizeof(struct pool_hdr), offsetof(struct pool_hdr, checksum),
        offsetof(struct pool_hdr, tiers), offsetof(struct pool_hdr, objects),
        offsetof(struct pool_hdr, gen), offsetof(struct pool_hdr, wlock),
        offsetof(struct pool_hdr, clock), offsetof(struct pool_hdr, loc_epoch),
        offsetof(struct pool_hdr, ctr), sizeof(struct pool_tier), sizeof(struct pool_object),
        sizeof(struct pool_tier_ctr), sizeof(struct pool_objhdr), POOL_MAX_TIERS,
        POOL_MAX_OBJECTS, sizeof(struct pool_host), POOL_HOST_OFF, POOL_HOSTS,
        POOL_EPOCH_BITS, POOL_TICK_MS, offsetof(struct pool_lease, min_epoch),
        offsetof(struct pool_lease, host), offsetof(struct pool_lease, beat),
        sizeof(struct pool_lease), sizeof(struct cat_hdr), sizeof(struct cat_ds),
        sizeof(struct pool_dataset), offsetof(struct pool_dataset, schema),
        offsetof(struct pool_dataset, docs), offsetof(struct pool_dataset, n_shards),
        sizeof(struct cxlp_dataset_info), sizeof(struct cxlp_schema),
        sizeof(struct cxlp_field), CXLP_MAX_FIELDS, CXLP_MAX_DIMS, CXLP_NAME_MAX,
        sizeof(struct pool_shent), sizeof(struct pool_extent), sizeof(struct cat_free),
        sizeof(struct cat_resv), sizeof(struct cat_def), POOL_EXTENT_ALIGN, POOL_DATA_ALIGN,
        LOC_VER_SHIFT, LOC_PAGE_SHIFT,
    };
    return layout_signature(facts, sizeof facts / sizeof facts[0]);
}

static uint64_t hdr_checksum(const struct pool_hdr *h)
{
    return XXH3_64bits(h, offsetof(struct pool_hdr, checksum));
}

/* The tier and object tables of a header whose geometry is valid. */
static int tiers_validate(const struct pool_hdr *h, struct pool_layout *L, struct obj *o,
                          const char *path)
{
    if (h->n_tiers == 0 || h->n_tiers > POOL_MAX_TIERS || h->n_objects == 0 ||
        h->n_objects > POOL_MAX_OBJECTS || (h->home != POOL_NO_HOME && h->home >= h->n_tiers))
        return seterr(o, CXLP_ECORRUPT, "%s: %u tiers, %u objects, home tier %u: invalid", path,
                      h->n_tiers, h->n_objects, h->home);
    L->n_tiers = h->n_tiers;
    L->n_objects = h->n_objects;
    L->home = h->home;
    L->obj[0].size = L->size;
    for (uint32_t i = 1; i < h->n_objects; i++) {
        const struct pool_object *ob = &h->objects[i];
        uint64_t end;
        if (memchr(ob->spec, 0, sizeof ob->spec) == NULL || !ob->spec[0] ||
            ob->data_off % POOL_DATA_ALIGN || ob->data_off < POOL_EXTENT_ALIGN ||
            ob->data_len == 0 || ob->data_len % POOL_EXTENT_ALIGN ||
            add_overflow_u64(ob->data_off, ob->data_len, &end) || end > ob->size)
            return seterr(o, CXLP_ECORRUPT, "%s: object %u (%.64s): geometry invalid", path, i,
                          ob->spec);
        L->obj[i].size = ob->size;
        L->obj[i].data_off = ob->data_off;
        L->obj[i].data_len = ob->data_len;
    }
    for (uint32_t t = 0; t < h->n_tiers; t++) {
        const struct pool_tier *ti = &h->tiers[t];
        if (ti->object >= h->n_objects || ti->kind > CXLP_TIER_NVME ||
            ti->flags & ~(uint32_t)(TIER_PERSISTENT | TIER_STAGED | TIER_REMOTE) ||
            !(ti->kind == CXLP_TIER_REMOTE) != !(ti->flags & TIER_REMOTE) ||
            ((ti->flags & TIER_REMOTE) &&
             (ti->flags != (TIER_STAGED | TIER_REMOTE) ||
              h->objects[ti->object].media_kind != POOL_OBJ_REMOTE)) ||
            ti->capacity == 0 ||
            ti->capacity > L->obj[ti->object].data_len)
            return seterr(o, CXLP_ECORRUPT, "%s: tier %u: object %u, kind %u, flags %#x, capacity "
                          "%llu: invalid", path, t, ti->object, ti->kind, ti->flags,
                          (unsigned long long)ti->capacity);
        L->tiers[t] = *ti;
    }
    if (L->home != POOL_NO_HOME && !(L->tiers[L->home].flags & TIER_PERSISTENT))
        return seterr(o, CXLP_ECORRUPT, "%s: home tier %u is not persistent", path, L->home);
    return 0;
}

int hdr_validate(const struct pool_hdr *hp, uint64_t media_size, struct pool_layout *L,
                 struct obj *o, const char *path)
{
    struct pool_hdr h;
    if (media_size < POOL_HDR_SIZE)
        return seterr(o, CXLP_EFORMAT, "%s: %llu bytes, too small for a pool header",
                      path, (unsigned long long)media_size);
    memcpy(&h, hp, offsetof(struct pool_hdr, gen));
    if (memcmp(h.magic, POOL_MAGIC, sizeof h.magic) != 0)
        return seterr(o, CXLP_EFORMAT, "%s: bad magic (not a cxlpool pool)", path);
    if (h.version == 1 || h.version == 2)
        return seterr(o, CXLP_EFORMAT,
                      "%s: format version %u (%s, a catalog that lists every shard), this "
                      "build reads format version %u (hosts and tiers: shard tables and "
                      "location words); no converter exists: recreate the pool with this build "
                      "and ingest the datasets again (cxlpool create, cxlpool ingest; "
                      "docs/pool-format.md)",
                      path, h.version, h.version == 1 ? "one host, one tier" : "hosts, one tier",
                      POOL_FORMAT_VERSION);
    if (h.version != POOL_FORMAT_VERSION)
        return seterr(o, CXLP_EFORMAT, "%s: format version %u, this build reads %u",
                      path, h.version, POOL_FORMAT_VERSION);
    if (h.hdr_size != POOL_HDR_SIZE)
        return seterr(o, CXLP_EFORMAT, "%s: header size %u, expected %u", path,
                      h.hdr_size, POOL_HDR_SIZE);
    uint64_t sig = pool_layout_signature();
    if (h.layout_sig != sig)
        return seterr(o, CXLP_ELAYOUT,
                      "%s: layout signature %#llx, this build has %#llx (built for another ABI)",
                      path, (unsigned long long)h.layout_sig, (unsigned long long)sig);
    if (hdr_checksum(&h) != h.checksum)
        return seterr(o, CXLP_ECORRUPT, "%s: header checksum mismatch", path);
    uint64_t lease_end, stage_end, cat_end, data_end, t;
    if (h.size > media_size || h.size < POOL_HDR_SIZE)
        return seterr(o, CXLP_ECORRUPT, "%s: header size field %llu, media has %llu bytes",
                      path, (unsigned long long)h.size, (unsigned long long)media_size);
    if (h.lease_off != POOL_HDR_SIZE || h.lease_slots == 0 || h.lease_slots > POOL_MAX_LEASES ||
        add_overflow_u64(h.lease_off, h.lease_slots * POOL_LEASE_SIZE, &lease_end))
        return seterr(o, CXLP_ECORRUPT, "%s: lease table at %#llx with %llu slots is invalid",
                      path, (unsigned long long)h.lease_off, (unsigned long long)h.lease_slots);
    if (h.stage_off != ALIGN_UP(lease_end, POOL_EXTENT_ALIGN) || h.stage_bytes % POOL_EXTENT_ALIGN ||
        h.stage_bytes > POOL_MAX_CAT_BYTES || add_overflow_u64(h.stage_off, h.stage_bytes, &stage_end))
        return seterr(o, CXLP_ECORRUPT, "%s: staging registry at %#llx of %llu bytes is invalid",
                      path, (unsigned long long)h.stage_off, (unsigned long long)h.stage_bytes);
    if (h.cat_off < stage_end || h.cat_off % POOL_EXTENT_ALIGN ||
        h.cat_bytes < POOL_MIN_CAT_BYTES || h.cat_bytes > POOL_MAX_CAT_BYTES ||
        h.cat_bytes % POOL_EXTENT_ALIGN || mul_overflow_u64(h.cat_bytes, 2, &t) ||
        add_overflow_u64(h.cat_off, t, &cat_end) || cat_end > h.size)
        return seterr(o, CXLP_ECORRUPT, "%s: catalog slots at %#llx of %llu bytes are invalid",
                      path, (unsigned long long)h.cat_off, (unsigned long long)h.cat_bytes);
    if (h.data_off < cat_end || h.data_off % POOL_DATA_ALIGN || h.data_len == 0 ||
        h.data_len % POOL_EXTENT_ALIGN || add_overflow_u64(h.data_off, h.data_len, &data_end) ||
        data_end > h.size || h.extent_align != POOL_EXTENT_ALIGN)
        return seterr(o, CXLP_ECORRUPT, "%s: data area %#llx+%llu is invalid (pool %llu bytes)",
                      path, (unsigned long long)h.data_off, (unsigned long long)h.data_len,
                      (unsigned long long)h.size);
    if (h.flags & ~POOL_F_NONCOHERENT || h.expiry_ms < POOL_MIN_EXPIRY_MS ||
        h.expiry_ms > POOL_MAX_EXPIRY_MS)
        return seterr(o, CXLP_ECORRUPT, "%s: flags %#x or expiry %llu ms invalid", path,
                      h.flags, (unsigned long long)h.expiry_ms);
    memset(L, 0, sizeof *L);
    L->size = h.size;
    L->lease_off = h.lease_off;
    L->lease_slots = h.lease_slots;
    L->stage_off = h.stage_off;
    L->stage_bytes = h.stage_bytes;
    L->cat_off = h.cat_off;
    L->cat_bytes = h.cat_bytes;
    L->obj[0].data_off = h.data_off;
    L->obj[0].data_len = h.data_len;
    L->flags = h.flags;
    L->expiry_ms = h.expiry_ms;
    return tiers_validate(&h, L, o, path);
}

int where_object(const struct pool_layout *L, int where)
{
    if (where == POOL_META)
        return 0;
    if (where < 0 || (uint32_t)where >= L->n_tiers)
        return -1;
    return (int)L->tiers[where].object;
}

int compute_layout_staged(uint64_t size, const struct cxlp_pool_opts *opts,
                          struct pool_layout *L, const char *spec, uint64_t stage_bytes)
{
    uint64_t slots = opts && opts->lease_slots ? opts->lease_slots : POOL_DEF_LEASES;
    uint64_t cb = opts && opts->catalog_bytes ? opts->catalog_bytes : POOL_DEF_CAT_BYTES;
    if (slots > POOL_MAX_LEASES)
        return seterr(NULL, CXLP_EARG, "%s: lease_slots %llu exceeds %u", spec,
                      (unsigned long long)slots, POOL_MAX_LEASES);
    if (cb < POOL_MIN_CAT_BYTES || cb > POOL_MAX_CAT_BYTES)
        return seterr(NULL, CXLP_EARG, "%s: catalog_bytes %llu outside [%llu, %llu]", spec,
                      (unsigned long long)cb, POOL_MIN_CAT_BYTES, POOL_MAX_CAT_BYTES);
    cb = ALIGN_UP(cb, POOL_EXTENT_ALIGN);
    uint64_t expiry = opts && opts->expiry_ms ? opts->expiry_ms : POOL_DEF_EXPIRY_MS;
    if (expiry < POOL_MIN_EXPIRY_MS || expiry > POOL_MAX_EXPIRY_MS)
        return seterr(NULL, CXLP_EARG, "%s: expiry_ms %llu outside [%u, %u]", spec,
                      (unsigned long long)expiry, POOL_MIN_EXPIRY_MS, POOL_MAX_EXPIRY_MS);
    uint32_t flags = opts && opts->noncoherent ? POOL_F_NONCOHERENT : 0;
    if (flags && !cache_available())
        return seterr(NULL, CXLP_EUNSUPPORTED, "%s: a non-coherent pool needs cache write-back "
                      "instructions (x86-64 clflush) this CPU or build lacks", spec);
    memset(L, 0, sizeof *L);
    L->flags = flags;
    L->expiry_ms = expiry;
    L->lease_off = POOL_HDR_SIZE;
    L->lease_slots = slots;
    L->stage_off = ALIGN_UP(L->lease_off + slots * POOL_LEASE_SIZE, POOL_EXTENT_ALIGN);
    L->stage_bytes = stage_bytes;
    L->cat_off = L->stage_off + L->stage_bytes;
    L->cat_bytes = cb;
    L->obj[0].data_off = ALIGN_UP(L->cat_off + 2 * cb, POOL_DATA_ALIGN);
    L->size = size;
    L->obj[0].size = size;
    if (size < L->obj[0].data_off + POOL_EXTENT_ALIGN || size > (UINT64_MAX >> 1))
        return seterr(NULL, CXLP_EARG,
                      "%s: size %llu too small: metadata needs %llu bytes plus at least one "
                      "%u-byte extent", spec, (unsigned long long)size,
                      (unsigned long long)L->obj[0].data_off, POOL_EXTENT_ALIGN);
    L->obj[0].data_len = (size - L->obj[0].data_off) & ~(uint64_t)(POOL_EXTENT_ALIGN - 1);
    L->n_objects = 1;
    return 0;
}

void pool_make_uuid(uint8_t uuid[16])
{
    if (getrandom(uuid, 16, 0) != 16) {
        /* getrandom fails only without entropy at early boot; time+pid still
         * distinguishes pools on one machine */
        uint64_t x[2] = {(uint64_t)time(NULL), (uint64_t)getpid()};
        XXH128_hash_t r = XXH3_128bits(x, sizeof x);
        memcpy(uuid, &r, 16);
    }
}

/* Writes every metadata structure of a new pool into object 0 (m); magic
 * last. objs[i] describes object i (objs[0]: the pool object itself). The
 * mutable words start at zero (clock, writer lock, registry) except the
 * generation (1, epoch 0) and the location epoch (1). */
int pool_format(struct media *m, const struct pool_layout *L, const struct pool_object *objs,
                const uint8_t uuid[16])
{
    uint8_t *base = m->base;
    struct pool_hdr *h = (struct pool_hdr *)base;
    int rc = media_prepare(m, 0, L->cat_off + 2 * L->cat_bytes);
    if (rc)
        return seterr(NULL, rc, "%s: cannot back pool metadata: %s", m->path, cxlp_strerror(rc));
    /* devdax memory is not zeroed for us; a fresh file or shm object is */
    memset(h, 0, POOL_HDR_SIZE);
    memset(base + L->lease_off, 0, L->stage_off + L->stage_bytes - L->lease_off);
    struct pool_lease *l = (struct pool_lease *)(base + L->lease_off);
    for (uint64_t i = 0; i < L->lease_slots; i++) {
        l[i].min_gen = UINT64_MAX;
        l[i].min_epoch = UINT64_MAX;
    }

    struct cat_free all[POOL_MAX_OBJECTS];
    for (uint32_t i = 0; i < L->n_objects; i++)
        all[i] = (struct cat_free){.off = L->obj[i].data_off, .len = L->obj[i].data_len, .object = i};
    struct cat c = {.gen = 1, .fr = all, .n_fr = L->n_objects};
    uint8_t *slot = base + L->cat_off + (c.gen & 1) * L->cat_bytes;
    cat_encode(&c, slot);

    h->version = POOL_FORMAT_VERSION;
    h->hdr_size = POOL_HDR_SIZE;
    h->layout_sig = pool_layout_signature();
    memcpy(h->uuid, uuid, sizeof h->uuid);
    h->size = L->size;
    h->lease_off = L->lease_off;
    h->lease_slots = L->lease_slots;
    h->stage_off = L->stage_off;
    h->stage_bytes = L->stage_bytes;
    h->cat_off = L->cat_off;
    h->cat_bytes = L->cat_bytes;
    h->data_off = L->obj[0].data_off;
    h->data_len = L->obj[0].data_len;
    h->extent_align = POOL_EXTENT_ALIGN;
    h->created_unix = (uint64_t)time(NULL);
    h->media_kind = (uint32_t)m->kind;
    h->flags = L->flags;
    h->expiry_ms = L->expiry_ms;
    h->n_tiers = L->n_tiers;
    h->n_objects = L->n_objects;
    h->home = L->home;
    for (uint32_t t = 0; t < L->n_tiers; t++)
        h->tiers[t] = L->tiers[t];
    for (uint32_t i = 0; i < L->n_objects; i++) {
        h->objects[i] = objs[i];
        h->objects[i].size = L->obj[i].size;
        h->objects[i].data_off = L->obj[i].data_off;
        h->objects[i].data_len = L->obj[i].data_len;
    }
    memcpy(h->magic, POOL_MAGIC, sizeof h->magic);
    h->checksum = hdr_checksum(h);
    memset(h->magic, 0, sizeof h->magic);
    h->gen = UINT64_C(1) << POOL_EPOCH_BITS;
    h->loc_epoch = 1;
    if (L->flags & POOL_F_NONCOHERENT)
        cache_writeback(base, L->cat_off + 2 * L->cat_bytes);
    rc = media_sync(m, 0, L->cat_off + 2 * L->cat_bytes);
    if (rc)
        return seterr(NULL, rc, "%s: sync of pool metadata: %s", m->path, cxlp_strerror(rc));
    memcpy(h->magic, POOL_MAGIC, sizeof h->magic);
    if (L->flags & POOL_F_NONCOHERENT)
        cache_writeback(h->magic, sizeof h->magic);
    rc = media_sync(m, 0, POOL_HDR_SIZE);
    if (rc)
        return seterr(NULL, rc, "%s: sync of pool header: %s", m->path, cxlp_strerror(rc));
    return 0;
}

/* Fills a->t from the layout and the mapped objects. */
static void tiers_view(struct attach *a)
{
    for (uint32_t t = 0; t < a->L.n_tiers; t++) {
        const struct pool_tier *ti = &a->L.tiers[t];
        const struct media *m = attach_media(a, ti->object);
        a->t[t] = (struct attach_tier){
            .base = m->base, .size = a->L.obj[ti->object].size,
            .data_off = a->L.obj[ti->object].data_off,
            .data_len = a->L.obj[ti->object].data_len, .kind = (int)ti->kind,
            .node = ti->node, .flags = ti->flags, .object = ti->object, .fd = m->fd,
            .media = m->kind, .path = m->path,
        };
    }
}

/* Second half of create and open: validate, map the tier objects and the
 * lease, take it. On failure a is freed (with its media). */
static int attach_finish(struct attach *a, int want_lease, cxlp_pool **out)
{
    struct obj tmp;
    obj_init(&tmp);
    int rc = hdr_validate(a->m.base, a->m.size, &a->L, &tmp, a->m.path);
    if (rc)
        goto fail;
    a->noncoherent = (a->L.flags & POOL_F_NONCOHERENT) != 0;
    a->expiry_ticks = (a->L.expiry_ms + POOL_TICK_MS - 1) / POOL_TICK_MS;
    if (a->noncoherent && !cache_available()) {
        rc = seterr(&tmp, CXLP_EUNSUPPORTED, "%s: pool is non-coherent and this CPU has no "
                    "cache write-back instructions this build uses (x86-64 clflush)", a->m.path);
        goto fail;
    }
    a->hdr = a->m.base;
    a->whdr = a->m.writable ? a->m.base : NULL;
    rc = pool_objects_open(a, &tmp);
    if (rc)
        goto fail;
    tiers_view(a);
    a->leases = (struct pool_lease *)((uint8_t *)a->m.base + a->L.lease_off);
    if (!a->m.writable && a->lm.base) {
        if (a->lm.size < a->L.size) {
            media_close(&a->lm);
        } else {
            a->whdr = a->lm.base;
            a->leases = (struct pool_lease *)((uint8_t *)a->lm.base + a->L.lease_off);
        }
    }
    host_identity(&a->self);
    rc = host_register(a, &tmp);
    if (rc)
        goto fail;
    if (want_lease && a->whdr) {
        rc = attach_lease_claim(a, &tmp);
        if (rc)
            goto fail;
        host_watch(a);
    }
    struct cat c;
    rc = cat_snapshot(a, &c, 0, NULL, &tmp);
    if (rc)
        goto fail;
    cat_free(&c);

    cxlp_pool *p = calloc(1, sizeof *p);
    if (!p) {
        rc = seterr(&tmp, -ENOMEM, "%s: out of memory", a->m.path);
        goto fail;
    }
    obj_init(&p->obj);
    p->a = a;
    p->writable = a->m.writable;
    *out = p;
    return 0;
fail:
    attach_unref(a);
    return rc;
}

static struct attach *attach_alloc(void)
{
    struct attach *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    pthread_mutex_init(&a->mu, NULL);
    a->refs = 1;
    a->m.fd = -1;
    a->lm.fd = -1;
    for (int i = 0; i < POOL_MAX_OBJECTS; i++)
        a->om[i].fd = -1;
    a->host_idx = POOL_HOSTS;
    return a;
}

int pool_create_object0(const char *spec, struct pool_layout *L, struct pool_object *objs,
                        const uint8_t uuid[16], uint32_t mode, cxlp_pool **out)
{
    char err[ERRLEN] = "";
    struct attach *a = attach_alloc();
    if (!a)
        return seterr(NULL, -ENOMEM, "%s: out of memory", spec);
    int rc = media_create(&a->m, spec, L->size, mode, err, sizeof err);
    if (rc) {
        attach_unref(a);
        return seterr(NULL, rc, "%s", err);
    }
    if (a->m.size < L->size) {
        rc = seterr(NULL, CXLP_EARG, "%s: media has %llu bytes, %llu requested", a->m.path,
                    (unsigned long long)a->m.size, (unsigned long long)L->size);
        goto undo;
    }
    if (L->n_tiers == 0) {
        /* one tier: the pool object itself, ingested into and read in place */
        L->n_tiers = 1;
        L->tiers[0] = (struct pool_tier){
            .kind = (uint32_t)tier_kind_of(&a->m), .object = 0, .node = a->m.numa_node,
            .flags = a->m.kind == CXLP_MEDIA_FILE ? TIER_PERSISTENT : 0,
            .capacity = L->obj[0].data_len};
        L->home = L->tiers[0].flags & TIER_PERSISTENT ? 0 : POOL_NO_HOME;
    }
    strlcpy0(objs[0].spec, spec, sizeof objs[0].spec);
    objs[0].media_kind = (uint32_t)a->m.kind;
    rc = pool_format(&a->m, L, objs, uuid);
    if (rc)
        goto undo;
    rc = attach_finish(a, 1, out);
    if (rc)
        media_destroy(spec, err, sizeof err);
    return rc;
undo:
    attach_unref(a);
    media_destroy(spec, err, sizeof err);
    return rc;
}

int cxlp_pool_create(const char *spec, uint64_t size, const struct cxlp_pool_opts *opts,
                     cxlp_pool **out)
{
    char err[ERRLEN] = "";
    struct pool_layout L;
    if (!out)
        return seterr(NULL, CXLP_EARG, "cxlp_pool_create: out is NULL");
    if (!spec)
        return seterr(NULL, CXLP_EARG, "cxlp_pool_create: spec is NULL");
    struct media probe;
    int rc = media_parse(&probe, spec, err, sizeof err);
    if (rc)
        return seterr(NULL, rc, "%s", err);
    rc = compute_layout_staged(size, opts, &L, spec, 0);
    if (rc)
        return rc;
    struct pool_object objs[1];
    memset(objs, 0, sizeof objs);
    uint8_t uuid[16];
    pool_make_uuid(uuid);
    return pool_create_object0(spec, &L, objs, uuid, opts ? opts->mode : 0, out);
}

int cxlp_pool_open(const char *spec, const struct cxlp_pool_opts *opts, cxlp_pool **out)
{
    char err[ERRLEN] = "";
    if (!out)
        return seterr(NULL, CXLP_EARG, "cxlp_pool_open: out is NULL");
    if (!spec)
        return seterr(NULL, CXLP_EARG, "cxlp_pool_open: spec is NULL");
    int ro = opts && opts->readonly;
    struct attach *a = attach_alloc();
    if (!a)
        return seterr(NULL, -ENOMEM, "%s: out of memory", spec);
    int rc = media_open(&a->m, spec, !ro, err, sizeof err);
    if (rc) {
        attach_unref(a);
        if (rc == -EACCES && !strstr(err, "ermission"))
            return seterr(NULL, rc, "%s: permission denied", err);
        return seterr(NULL, rc, "%s", err);
    }
    if (!ro && a->m.owner != geteuid()) {
        rc = seterr(NULL, CXLP_EOWNER,
                    "%s: pool is owned by uid %u, not by this process's uid %u; "
                    "open it read-only or as its owner",
                    a->m.path, (unsigned)a->m.owner, (unsigned)geteuid());
        attach_unref(a);
        return rc;
    }
    /* read-only: a writable second mapping for the lease, if permitted */
    if (ro && media_open(&a->lm, spec, 1, err, sizeof err) != 0)
        media_close(&a->lm);
    return attach_finish(a, 1, out);
}

int cxlp_pool_close(cxlp_pool *p)
{
    if (!p)
        return 0;
    attach_unref(p->a);
    p->obj.magic = 0;
    free(p);
    return 0;
}

int cxlp_pool_destroy(const char *spec)
{
    char err[ERRLEN] = "";
    if (!spec)
        return seterr(NULL, CXLP_EARG, "cxlp_pool_destroy: spec is NULL");
    pool_destroy_objects(spec);
    int rc = media_destroy(spec, err, sizeof err);
    if (rc)
        return seterr(NULL, rc, "%s", err);
    return 0;
}

struct attach *pool_attach(cxlp_pool *p)
{
    return p->a;
}

struct obj *pool_obj(cxlp_pool *p)
{
    return &p->obj;
}

int pool_writable(const cxlp_pool *p)
{
    return p->writable;
}

uint8_t *pool_base_rw(cxlp_pool *p, int where)
{
    int o = where_object(&p->a->L, where);
    return p->writable && o >= 0 ? attach_media(p->a, (uint32_t)o)->base : NULL;
}

int pool_has_remote(const cxlp_pool *p)
{
    for (uint32_t t = 0; t < p->a->L.n_tiers; t++)
        if (p->a->L.tiers[t].flags & TIER_REMOTE)
            return 1;
    return 0;
}

int pool_ingest_tier(const cxlp_pool *p)
{
    const struct pool_layout *L = &p->a->L;
    if (L->home != POOL_NO_HOME)
        return (int)L->home;
    /* the slowest tier of this host: never a remote one (a peer's pool) */
    int t = (int)L->n_tiers - 1;
    while (t > 0 && (L->tiers[t].flags & TIER_REMOTE))
        t--;
    return t;
}

uint64_t pool_size(const cxlp_pool *p)
{
    return p->a->L.size;
}

int pool_write_fd(cxlp_pool *p, int where)
{
    int o = where_object(&p->a->L, where);
    return p->writable && o >= 0 ? media_write_fd(attach_media(p->a, (uint32_t)o)) : -1;
}

static int check_handle(cxlp_pool *p)
{
    if (!p || p->obj.magic != OBJ_MAGIC)
        return seterr(NULL, CXLP_EARG, "not a pool handle");
    if (p->obj.panic)
        return seterr(&p->obj, CXLP_EPANIC, "pool handle poisoned: %s", p->obj.err);
    return 0;
}

/* Bytes the copies of a removed dataset still hold (DEF_COPIES), by walking
 * its states like the reclaim will. */
static uint64_t copies_bytes(const struct attach *a, const struct cat_def *d)
{
    const struct pool_layout *L = &a->L;
    uint64_t n = d->len, stride = states_stride(L->n_tiers), tb, sb, sum = 0;
    if (mul_overflow_u64(n, sizeof(struct pool_shent), &tb) || mul_overflow_u64(n, stride * 8, &sb) ||
        d->target_shard < L->obj[0].data_off || d->off < L->obj[0].data_off ||
        !range_ok(d->target_shard - L->obj[0].data_off, tb, L->obj[0].data_len) ||
        !range_ok(d->off - L->obj[0].data_off, sb, L->obj[0].data_len))
        return 0;
    const struct pool_shent *tab = (const struct pool_shent *)(attach_base(a) + d->target_shard);
    const uint64_t *st = attach_states(a, d->off);
    for (uint64_t k = 0; k < n; k++)
        for (uint32_t t = 0; t < L->n_tiers; t++)
            if (loc_present(at_load_acquire(&st[k * stride + 1 + t]))) /* pairs with place.c */
                sum += ALIGN_UP(tab[k].len, POOL_EXTENT_ALIGN);
    return sum;
}

static int sum_copy(void *ctx, uint64_t u, uint32_t tier, uint32_t object, uint64_t off,
                    uint64_t len)
{
    (void)u;
    (void)tier;
    (void)object;
    (void)off;
    *(uint64_t *)ctx += len;
    return 0;
}

/* Bytes a removed dataset's copies of units still hold (DEF_UCOPIES). */
static uint64_t ucopies_bytes(const struct attach *a, const struct cat_def *d)
{
    uint64_t sum = 0;
    return units_walk(a, d->off, d->len, sum_copy, &sum) ? 0 : sum;
}

int cxlp_pool_stat(cxlp_pool *p, struct cxlp_pool_stat *st)
{
    int rc = check_handle(p);
    if (rc)
        return rc;
    if (!st)
        return seterr(&p->obj, CXLP_EARG, "cxlp_pool_stat: st is NULL");
    struct attach *a = p->a;
    struct cat c;
    uint64_t gen;
    rc = cat_snapshot(a, &c, 0, &gen, &p->obj);
    if (rc)
        return rc;
    struct cxlp_pool_stat s;
    memset(&s, 0, sizeof s);
    s.size = a->L.size;
    for (uint32_t i = 0; i < a->L.n_objects; i++) {
        uint64_t big;
        if (i && attach_media(a, i)->kind < 0)
            continue; /* a remote tier: addresses of a peer's shards, no memory here */
        s.data_bytes += a->L.obj[i].data_len;
        s.free_bytes += ext_free_bytes(&c, i, &big, NULL);
        s.largest_free = MAX(s.largest_free, big);
    }
    uint64_t clock = host_clock(a);
    for (uint64_t i = 0; i < c.n_resv; i++) {
        const struct cat_resv *r = &c.resv[i];
        s.reserved_bytes += r->len;
        /* the judgement the next writer's reclaim makes (txn.c) */
        if (!host_resv_live(a, r->pid, r->starttime, r->host, r->lease, clock))
            s.reserved_dead_bytes += r->len;
    }
    for (uint64_t i = 0; i < c.n_def; i++)
        s.deferred_bytes += c.def[i].kind == DEF_COPIES    ? copies_bytes(a, &c.def[i])
                            : c.def[i].kind == DEF_UCOPIES ? ucopies_bytes(a, &c.def[i])
                                                           : c.def[i].len;
    uint64_t other = s.free_bytes + s.reserved_bytes + s.deferred_bytes;
    s.used_bytes = s.data_bytes > other ? s.data_bytes - other : 0;
    s.generation = gen;
    s.n_datasets = (uint32_t)MIN(c.n_ds, UINT32_MAX);
    lease_scan(a, 0, NULL, NULL, &s.live_leases);
    s.lease_slots = (uint32_t)a->L.lease_slots;
    s.media = a->m.kind;
    s.emulated = a->m.emulated;
    s.numa_node = a->m.kind == CXLP_MEDIA_NUMA ? a->m.numa_node : -1;
    s.numa_interleave = a->m.kind == CXLP_MEDIA_NUMA && a->m.numa_interleave;
    {
        uint32_t w[MEDIA_MAX_NODES];
        unsigned long mask[MEDIA_NODE_WORDS] = {0};
        const size_t W = 8 * sizeof(unsigned long);
        media_nodes(&a->m, w);
        for (int n = 0; n < MEDIA_MAX_NODES; n++)
            mask[n / W] |= (unsigned long)(w[n] > 0) << (n % W);
        media_nodes_text(mask, s.numa_nodes, sizeof s.numa_nodes);
        s.near_node = media_nearest_cpu_node(w);
    }
    s.format_version = POOL_FORMAT_VERSION;
    s.n_tiers = a->L.n_tiers;
    memcpy(s.uuid, a->hdr->uuid, sizeof s.uuid);
    strlcpy0(s.path, a->m.path, sizeof s.path);
    s.coherent = !a->noncoherent;
    s.expiry_ms = a->expiry_ticks * POOL_TICK_MS;
    s.host_id = a->self.host_id;
    strlcpy0(s.host_id_source, a->self.id_source, sizeof s.host_id_source);
    s.hosts = host_count(a);
    cat_free(&c);
    *st = s;
    return 0;
}

int cxlp_pool_list(cxlp_pool *p, struct cxlp_dataset_info *infos, size_t cap, size_t *n_out)
{
    int rc = check_handle(p);
    if (rc)
        return rc;
    /* a pool with a remote tier lists its peers' datasets too: each is
     * mirrored into the catalog the first time (a peer that does not
     * answer adds nothing, and is no error here) */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u + 1;
    uint64_t last = at_load_relaxed(&p->remote_asked_ms);
    if (pool_has_remote(p) && (!last || now - last > 1000)) { /* a count and a fill ask once */
        at_store_relaxed(&p->remote_asked_ms, now);
        (void)pool_remote_mirror(p, NULL);
    }
    return pool_list_local(p, infos, cap, n_out);
}

int pool_list_local(cxlp_pool *p, struct cxlp_dataset_info *infos, size_t cap, size_t *n_out)
{
    int rc = check_handle(p);
    if (rc)
        return rc;
    if (!n_out || (cap && !infos))
        return seterr(&p->obj, CXLP_EARG, "cxlp_pool_list: %s is NULL", n_out ? "infos" : "n_out");
    struct cat c;
    rc = cat_snapshot(p->a, &c, 0, NULL, &p->obj);
    if (rc)
        return rc;
    for (uint64_t i = 0; i < c.n_ds && i < cap; i++)
        infos[i] = c.ds[i].d.info;
    *n_out = (size_t)c.n_ds;
    cat_free(&c);
    return 0;
}

static int list_local(void *p, struct cxlp_dataset_info *infos, size_t cap, size_t *n)
{
    return pool_list_local(p, infos, cap, n);
}

static int list_mirrored(void *p, struct cxlp_dataset_info *infos, size_t cap, size_t *n)
{
    return cxlp_pool_list(p, infos, cap, n);
}

int pool_list_all(cxlp_pool *p, int local, struct cxlp_dataset_info **out, size_t *n)
{
    return list_all(local ? list_local : list_mirrored, p, out, n);
}

/* The dataset's shard table, copied to private memory and checked against
 * its checksum in the record; first_record filled in, off from the ingest
 * tier's word. */
static int read_table(cxlp_pool *p, const struct cat_ds *d, struct pool_shard **out)
{
    struct attach *a = p->a;
    const uint64_t n = d->d.n_shards;
    struct pool_shard *sh = malloc((n ? n : 1) * sizeof *sh);
    struct pool_shent *tab = malloc(n ? d->table.len : 1);
    if (!sh || !tab) {
        free(sh);
        free(tab);
        return seterr(&p->obj, -ENOMEM, "dataset '%s': out of memory for %llu shards",
                      d->d.info.name, (unsigned long long)n);
    }
    if (n) {
        memcpy(tab, attach_base(a) + d->table.off, d->table.len);
        if (XXH3_64bits(tab, d->table.len) != d->table_checksum) {
            free(sh);
            free(tab);
            return seterr(&p->obj, CXLP_ECORRUPT, "%s: dataset '%s': shard table at %#llx: "
                          "checksum mismatch", a->m.path, d->d.info.name,
                          (unsigned long long)d->table.off);
        }
    }
    const uint32_t ingest = (uint32_t)pool_ingest_tier(p), stride = attach_stride(a);
    const uint64_t *st = attach_states(a, d->states.off);
    uint64_t first = 0;
    for (uint64_t k = 0; k < n; k++) {
        uint64_t w = at_load_acquire(&st[k * stride + 1 + ingest]); /* pairs with place.c */
        const struct attach_tier *it = &a->t[ingest];
        if (loc_present(w) && (loc_off(w) < it->data_off ||
                               !range_ok(loc_off(w) - it->data_off, tab[k].len, it->data_len))) {
            uint64_t len = tab[k].len;
            free(sh);
            free(tab);
            return seterr(&p->obj, CXLP_ECORRUPT, "%s: dataset '%s' shard %llu: copy at %#llx+%llu "
                          "outside tier %u", a->m.path, d->d.info.name, (unsigned long long)k,
                          (unsigned long long)loc_off(w), (unsigned long long)len, ingest);
        }
        sh[k] = (struct pool_shard){.off = loc_present(w) ? loc_off(w) : 0, .len = tab[k].len,
                                    .first_record = first, .n_records = tab[k].n_records,
                                    .data_len = tab[k].data_len, .checksum = tab[k].checksum};
        if (add_overflow_u64(first, tab[k].n_records, &first)) {
            free(sh);
            free(tab);
            return seterr(&p->obj, CXLP_ECORRUPT, "%s: dataset '%s': shard table: record "
                          "counts overflow at shard %llu", a->m.path, d->d.info.name,
                          (unsigned long long)k);
        }
    }
    free(tab);
    *out = sh;
    return 0;
}

int cxlp_pool_ingest_shuffle(cxlp_pool *p, const char *name, uint64_t *seed)
{
    int rc = check_handle(p);
    if (rc)
        return rc;
    if (!name)
        return seterr(&p->obj, CXLP_EARG, "pool_ingest_shuffle: name is NULL");
    if (seed)
        *seed = 0;
    struct cat c;
    if ((rc = cat_snapshot(p->a, &c, 0, NULL, &p->obj)))
        return rc;
    int64_t i = cat_find(&c, name);
    if (i < 0) {
        cat_free(&c);
        return seterr(&p->obj, CXLP_ENOTFOUND, "%s: no dataset '%s'", p->a->m.path, name);
    }
    int shuffled = 0;
    for (uint64_t k = 0; c.ds[i].d.n_shards && k < c.n_ingest; k++)
        if (c.ingest[k].states_off == c.ds[i].states.off &&
            (c.ingest[k].flags & INGEST_SHUFFLED)) {
            shuffled = 1;
            if (seed)
                *seed = c.ingest[k].seed;
        }
    cat_free(&c);
    return shuffled;
}

int pool_lookup(cxlp_pool *p, const char *name, struct pool_dataset *ds,
                struct pool_shard **shards, struct attach **ap, uint64_t *genp)
{
    struct pool_ingest ing;
    return pool_lookup_ingest(p, name, ds, shards, ap, genp, &ing);
}

int pool_lookup_ingest(cxlp_pool *p, const char *name, struct pool_dataset *ds,
                       struct pool_shard **shards, struct attach **ap, uint64_t *genp,
                       struct pool_ingest *ing)
{
    int rc = check_handle(p);
    if (rc)
        return rc;
    if (!name || !ds || !shards || !ap || !genp || !ing)
        return seterr(&p->obj, CXLP_EARG, "pool_lookup: NULL argument");
    *ing = (struct pool_ingest){0};
    struct cat c;
    uint64_t gen;
    rc = cat_snapshot(p->a, &c, 1, &gen, &p->obj);
    if (rc)
        return rc;
    int64_t i = cat_find(&c, name);
    if (i < 0) {
        cat_free(&c);
        attach_unpin(p->a, gen);
        return seterr(&p->obj, CXLP_ENOTFOUND, "%s: no dataset '%s'", p->a->m.path, name);
    }
    const struct cat_ds *d = &c.ds[i];
    struct pool_shard *sh = NULL;
    rc = read_table(p, d, &sh);
    if (rc) {
        cat_free(&c);
        attach_unpin(p->a, gen);
        return rc;
    }
    *ds = d->d;
    ds->states_off = d->states.off;
    for (uint64_t k = 0; d->d.n_shards && k < c.n_ingest; k++)
        if (c.ingest[k].states_off == d->states.off)
            *ing = (struct pool_ingest){.flags = c.ingest[k].flags, .seed = c.ingest[k].seed};
    *shards = sh;
    attach_ref(p->a);
    *ap = p->a;
    *genp = gen;
    cat_free(&c);
    return 0;
}

int pool_open_writable(struct attach *a, cxlp_pool **out)
{
    const struct media *m = &a->m;
    char spec[MEDIA_PATH_MAX + 32];
    const char *name = strncmp(m->path, "/dev/shm/cxlp.", 14) == 0 ? m->path + 14 : m->path;
    switch (m->kind) {
    case CXLP_MEDIA_SHM: snprintf(spec, sizeof spec, "shm:%s", name); break;
    case CXLP_MEDIA_NUMA: snprintf(spec, sizeof spec, "numa:%d:%s", m->numa_node, name); break;
    case CXLP_MEDIA_FILE: snprintf(spec, sizeof spec, "file:%s", m->path); break;
    default: snprintf(spec, sizeof spec, "devdax:%s", m->path); break;
    }
    int rc = cxlp_pool_open(spec, NULL, out);
    if (rc == 0 && memcmp((*out)->a->hdr->uuid, a->hdr->uuid, 16) != 0) {
        cxlp_pool_close(*out);
        return seterr(NULL, CXLP_ENOTFOUND, "%s: the pool at this path is another pool now", spec);
    }
    return rc;
}
