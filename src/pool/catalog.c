/*
 * catalog.c - the catalog blob: encoding, validation of untrusted copies,
 * and the lock-free reader protocol.
 *
 * Readers never lock. The writer publishes generation g+1 by writing slot
 * (g+1)&1 completely and then changing the gen word to (g+1, epoch) by a
 * CAS with release order (txn.c txn_commit, host.c). A reader:
 *   1. g = generation of load_acquire(gen word)    pairs with that release
 *   2. [pin g in its lease; fence; recheck gen == g]    (pool_lookup only)
 *   3. copy slot g&1 to private memory
 *   4. fence; recheck gen == g
 * Slot g&1 is rewritten only for generation g+2, whose writer has already
 * stored g+1, so an unchanged gen after the copy proves the copy was not
 * torn. A changed gen means "try again" (bounded: CXLP_ECORRUPT after
 * SNAP_TRIES). A copy taken while gen stood still and that fails validation
 * is real corruption. Everything is then validated on the private copy:
 * a concurrent (or hostile) writer cannot change bytes after the check.
 *
 * Invariants of a valid blob (cat_decode):
 *   bytes = sizeof(cat_hdr) + n_ds*|cat_ds| + n_free*|cat_free|
 *           + n_resv*|cat_resv| + n_def*|cat_def|
 *           [+ 8 + n_units*|cat_units|: magic CAT_MAGIC_UNITS or
 *           CAT_MAGIC_INGEST, the count then the records]
 *           [+ 8 + n_ingest*|cat_ingest|: magic CAT_MAGIC_INGEST only]
 *   a units record names a listed dataset, at most one per dataset, and
 *   its words hold n_units * (1 + n_tiers) words in object 0
 *   an ingest record names a listed dataset with shards, at most one per
 *   dataset, of known flags, n_source = the dataset's record count
 *   gen(blob) = gen(header) that selected the slot
 *   every extent lies inside the data area of the object it names
 *   (n_objects of them); metadata extents (docs, shard table, states) in
 *   object 0; a dataset's table holds n_shards entries and its states
 *   n_shards * (1 + n_tiers) words
 *   names are NUL-terminated and non-empty
 * Overlaps between extents are a pool_check matter (check.c), not a decode
 * one: decoding is on every lookup and stays O(n) in the catalog's size,
 * which no longer grows with the number of shards.
 */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "common/atomic.h"
#include "common/flush.h"
#include "pool/host.h"

#define SNAP_TRIES 100000

void cat_free(struct cat *c)
{
    free(c->ds);
    free(c->fr);
    free(c->resv);
    free(c->def);
    free(c->units);
    free(c->ingest);
    memset(c, 0, sizeof *c);
}

/* 1 when the blob must say CAT_MAGIC_UNITS: it lists units or their
 * deferred copies. */
static int has_units(const struct cat *c)
{
    if (c->n_units)
        return 1;
    for (uint64_t i = 0; i < c->n_def; i++)
        if (c->def[i].kind == DEF_UCOPIES)
            return 1;
    return 0;
}

/* 1 when ingest record i names a dataset of c: records of datasets removed
 * or replaced are dropped as the catalog is written. */
static int ingest_live(const struct cat *c, uint64_t i)
{
    int64_t d = cat_find_states(c, c->ingest[i].states_off);
    return d >= 0 && c->ds[d].d.n_shards;
}

static uint64_t n_ingest_live(const struct cat *c)
{
    uint64_t n = 0;
    for (uint64_t i = 0; i < c->n_ingest; i++)
        n += (uint64_t)ingest_live(c, i);
    return n;
}

int arr_push(void *arrp, uint64_t *n, uint64_t *cap, size_t elsz, const void *el)
{
    void **arr = arrp;
    if (*n == *cap) {
        uint64_t nc = *cap ? *cap * 2 : 8;
        void *p = realloc(*arr, nc * elsz);
        if (!p)
            return -ENOMEM;
        *arr = p;
        *cap = nc;
    }
    memcpy((uint8_t *)*arr + *n * elsz, el, elsz);
    (*n)++;
    return 0;
}

void arr_del(void *arr, uint64_t *n, size_t elsz, uint64_t i)
{
    uint8_t *a = arr;
    memmove(a + i * elsz, a + (i + 1) * elsz, (*n - i - 1) * elsz);
    (*n)--;
}

static uint64_t cat_checksum(const struct cat_hdr *h, const uint8_t *body, uint64_t body_len)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, h, offsetof(struct cat_hdr, checksum));
    XXH3_64bits_update(&st, body, body_len);
    return XXH3_64bits_digest(&st);
}

uint64_t cat_encoded_size(const struct cat *c)
{
    const uint64_t ni = n_ingest_live(c);
    return sizeof(struct cat_hdr) + c->n_ds * sizeof(struct cat_ds) +
           c->n_fr * sizeof(struct cat_free) + c->n_resv * sizeof(struct cat_resv) +
           c->n_def * sizeof(struct cat_def) +
           (has_units(c) || ni ? sizeof(uint64_t) + c->n_units * sizeof(struct cat_units) : 0) +
           (ni ? sizeof(uint64_t) + ni * sizeof(struct cat_ingest) : 0);
}

static uint8_t *put(uint8_t *p, const void *src, uint64_t n)
{
    if (n)
        memcpy(p, src, n);
    return p + n;
}

void cat_encode(const struct cat *c, uint8_t *buf)
{
    const uint64_t ni = n_ingest_live(c);
    const int units = has_units(c) || ni;
    struct cat_hdr h = {
        .magic = ni ? CAT_MAGIC_INGEST : units ? CAT_MAGIC_UNITS : CAT_MAGIC, .gen = c->gen,
        .bytes = cat_encoded_size(c),
        .n_ds = c->n_ds, .n_free = c->n_fr,
        .n_resv = c->n_resv, .n_def = c->n_def,
    };
    uint8_t *body = buf + sizeof h, *p = body;
    p = put(p, c->ds, c->n_ds * sizeof *c->ds);
    p = put(p, c->fr, c->n_fr * sizeof *c->fr);
    p = put(p, c->resv, c->n_resv * sizeof *c->resv);
    p = put(p, c->def, c->n_def * sizeof *c->def);
    if (units) {
        p = put(p, &c->n_units, sizeof c->n_units);
        p = put(p, c->units, c->n_units * sizeof *c->units);
    }
    if (ni) {
        p = put(p, &ni, sizeof ni);
        for (uint64_t i = 0; i < c->n_ingest; i++)
            if (ingest_live(c, i))
                p = put(p, &c->ingest[i], sizeof *c->ingest);
    }
    h.checksum = cat_checksum(&h, body, (uint64_t)(p - body));
    memcpy(buf, &h, sizeof h);
}

static int in_data(const struct pool_layout *L, uint32_t object, uint64_t off, uint64_t len)
{
    return object < L->n_objects && off >= L->obj[object].data_off &&
           range_ok(off - L->obj[object].data_off, len, L->obj[object].data_len);
}

/* Copies n records of size elsz from *p into a fresh array. */
static int take(const uint8_t **p, uint64_t n, size_t elsz, void *arrp, uint64_t *cap)
{
    void **arr = arrp;
    *arr = NULL;
    *cap = n;
    if (n == 0)
        return 0;
    *arr = malloc(n * elsz);
    if (!*arr)
        return -ENOMEM;
    memcpy(*arr, *p, n * elsz);
    *p += n * elsz;
    return 0;
}

/* The units section: past its count (read by the caller), n records. */
static int take_units(const uint8_t **p, int units, uint64_t n, struct cat *c)
{
    if (!units)
        return 0;
    *p += sizeof(uint64_t);
    return take(p, n, sizeof *c->units, &c->units, &c->cap_units);
}

/* The ingest section: past its count (read by the caller), n records. */
static int take_ingest(const uint8_t **p, int ingest, uint64_t n, struct cat *c)
{
    if (!ingest)
        return 0;
    *p += sizeof(uint64_t);
    return take(p, n, sizeof *c->ingest, &c->ingest, &c->cap_ingest);
}

int cat_decode(const uint8_t *blob, uint64_t len, const struct pool_layout *L,
               uint64_t gen, struct cat *out, struct obj *o)
{
    struct cat_hdr h;
    memset(out, 0, sizeof *out);
    if (len < sizeof h)
        return seterr(o, CXLP_ECORRUPT, "catalog gen %llu: %llu bytes, shorter than its header",
                      (unsigned long long)gen, (unsigned long long)len);
    memcpy(&h, blob, sizeof h);
    if (h.magic != CAT_MAGIC && h.magic != CAT_MAGIC_UNITS && h.magic != CAT_MAGIC_INGEST)
        return seterr(o, CXLP_ECORRUPT, "catalog slot %llu: bad magic %#llx",
                      (unsigned long long)(gen & 1), (unsigned long long)h.magic);
    const int ingest = h.magic == CAT_MAGIC_INGEST;
    const int units = h.magic == CAT_MAGIC_UNITS || ingest;
    if (h.gen != gen)
        return seterr(o, CXLP_ECORRUPT, "catalog slot %llu: holds gen %llu, header says %llu",
                      (unsigned long long)(gen & 1), (unsigned long long)h.gen,
                      (unsigned long long)gen);
    /* counts must add up to the length without overflow */
    const uint64_t cnt[4] = {h.n_ds, h.n_free, h.n_resv, h.n_def};
    const uint64_t sz[4] = {sizeof(struct cat_ds), sizeof(struct cat_free),
                            sizeof(struct cat_resv), sizeof(struct cat_def)};
    uint64_t total = sizeof h;
    for (int i = 0; i < 4; i++) {
        uint64_t b;
        if (mul_overflow_u64(cnt[i], sz[i], &b) || add_overflow_u64(total, b, &total))
            return seterr(o, CXLP_ECORRUPT, "catalog gen %llu: record counts overflow",
                          (unsigned long long)gen);
    }
    uint64_t n_units = 0;
    if (units) {
        /* the units' count follows the four sections */
        uint64_t b;
        if (add_overflow_u64(total, sizeof n_units, &b) || b > len || b > h.bytes)
            return seterr(o, CXLP_ECORRUPT, "catalog gen %llu: no room for its units' count",
                          (unsigned long long)gen);
        memcpy(&n_units, blob + total, sizeof n_units);
        if (mul_overflow_u64(n_units, sizeof(struct cat_units), &b) ||
            add_overflow_u64(total, sizeof n_units, &total) || add_overflow_u64(total, b, &total))
            return seterr(o, CXLP_ECORRUPT, "catalog gen %llu: unit record count overflows",
                          (unsigned long long)gen);
    }
    uint64_t n_ingest = 0;
    if (ingest) {
        /* the ingest records' count follows the units */
        uint64_t b;
        if (add_overflow_u64(total, sizeof n_ingest, &b) || b > len || b > h.bytes)
            return seterr(o, CXLP_ECORRUPT, "catalog gen %llu: no room for its ingest records' "
                          "count", (unsigned long long)gen);
        memcpy(&n_ingest, blob + total, sizeof n_ingest);
        if (mul_overflow_u64(n_ingest, sizeof(struct cat_ingest), &b) ||
            add_overflow_u64(total, sizeof n_ingest, &total) || add_overflow_u64(total, b, &total))
            return seterr(o, CXLP_ECORRUPT, "catalog gen %llu: ingest record count overflows",
                          (unsigned long long)gen);
    }
    if (total != h.bytes || h.bytes > len)
        return seterr(o, CXLP_ECORRUPT,
                      "catalog gen %llu: counts need %llu bytes, blob says %llu, slot has %llu",
                      (unsigned long long)gen, (unsigned long long)total,
                      (unsigned long long)h.bytes, (unsigned long long)len);
    const uint8_t *body = blob + sizeof h;
    if (cat_checksum(&h, body, h.bytes - sizeof h) != h.checksum)
        return seterr(o, CXLP_ECORRUPT, "catalog gen %llu: checksum mismatch",
                      (unsigned long long)gen);

    struct cat c = {.gen = gen, .n_ds = h.n_ds, .n_fr = h.n_free, .n_resv = h.n_resv,
                    .n_def = h.n_def, .n_units = n_units, .n_ingest = n_ingest};
    const uint8_t *p = body;
    int rc = 0;
    if ((rc = take(&p, c.n_ds, sizeof *c.ds, &c.ds, &c.cap_ds)) ||
        (rc = take(&p, c.n_fr, sizeof *c.fr, &c.fr, &c.cap_fr)) ||
        (rc = take(&p, c.n_resv, sizeof *c.resv, &c.resv, &c.cap_resv)) ||
        (rc = take(&p, c.n_def, sizeof *c.def, &c.def, &c.cap_def)) ||
        (rc = take_units(&p, units, c.n_units, &c)) ||
        (rc = take_ingest(&p, ingest, c.n_ingest, &c))) {
        cat_free(&c);
        return seterr(o, rc, "catalog gen %llu: out of memory", (unsigned long long)gen);
    }

    const uint64_t stride = states_stride(L->n_tiers);
    for (uint64_t i = 0; i < c.n_ds; i++) {
        const struct cat_ds *d = &c.ds[i];
        const char *nm = d->d.info.name;
        uint64_t want_t, want_s;
        if (memchr(nm, 0, sizeof d->d.info.name) == NULL || nm[0] == 0) {
            rc = seterr(o, CXLP_ECORRUPT, "catalog gen %llu: dataset %llu: name not terminated or empty",
                        (unsigned long long)gen, (unsigned long long)i);
            goto bad;
        }
        int none = d->d.n_shards == 0; /* an empty dataset owns no table */
        if (d->d.info.n_shards != d->d.n_shards ||
            mul_overflow_u64(d->d.n_shards, sizeof(struct pool_shent), &want_t) ||
            mul_overflow_u64(d->d.n_shards, stride * 8, &want_s) || d->table.len != want_t ||
            d->states.len != want_s ||
            (!none && (!in_data(L, 0, d->table.off, d->table.len) ||
                       !in_data(L, 0, d->states.off, d->states.len) || d->states.off % 8)) ||
            (none && (d->table.off || d->states.off))) {
            rc = seterr(o, CXLP_ECORRUPT,
                        "catalog gen %llu: dataset '%s': shard table %#llx+%llu or states "
                        "%#llx+%llu do not hold its %u shards inside object 0's data area",
                        (unsigned long long)gen, nm, (unsigned long long)d->table.off,
                        (unsigned long long)d->table.len, (unsigned long long)d->states.off,
                        (unsigned long long)d->states.len, d->d.n_shards);
            goto bad;
        }
        if (d->d.schema.n_fields > CXLP_MAX_FIELDS) {
            rc = seterr(o, CXLP_ECORRUPT, "catalog gen %llu: dataset '%s': %u fields",
                        (unsigned long long)gen, nm, d->d.schema.n_fields);
            goto bad;
        }
        if (d->d.docs.len && !in_data(L, 0, d->d.docs.off, d->d.docs.len)) {
            rc = seterr(o, CXLP_ECORRUPT,
                        "catalog gen %llu: dataset '%s': docs extent %#llx+%llu outside the data area",
                        (unsigned long long)gen, nm, (unsigned long long)d->d.docs.off,
                        (unsigned long long)d->d.docs.len);
            goto bad;
        }
    }
    for (uint64_t i = 0; i < c.n_fr + c.n_resv + c.n_def; i++) {
        const char *what;
        uint64_t off, len, k;
        uint32_t obj;
        if (i < c.n_fr) {
            what = "free extent", k = i, off = c.fr[k].off, len = c.fr[k].len, obj = c.fr[k].object;
        } else if (i < c.n_fr + c.n_resv) {
            what = "reservation", k = i - c.n_fr, off = c.resv[k].off, len = c.resv[k].len;
            obj = c.resv[k].object;
        } else {
            what = "deferred free", k = i - c.n_fr - c.n_resv;
            off = c.def[k].off, len = c.def[k].len, obj = c.def[k].object;
            if (c.def[k].kind == DEF_COPIES || (units && c.def[k].kind == DEF_UCOPIES)) {
                /* names a removed dataset's states and table, or unit
                 * words: checked where they are walked (extent.c, units.c) */
                if (c.def[k].clock != CLOCK_GEN || !in_data(L, 0, off, 8) || off % 8)
                    goto bad_ext;
                continue;
            }
            if (c.def[k].kind != DEF_EXTENT || c.def[k].clock > CLOCK_EPOCH)
                goto bad_ext;
        }
        if (!in_data(L, obj, off, len) || len == 0 || off % POOL_EXTENT_ALIGN ||
            len % POOL_EXTENT_ALIGN) {
        bad_ext:
            rc = seterr(o, CXLP_ECORRUPT,
                        "catalog gen %llu: %s %llu: extent %#llx+%llu of object %u outside its "
                        "data area, unaligned or of an unknown kind",
                        (unsigned long long)gen, what, (unsigned long long)k,
                        (unsigned long long)off, (unsigned long long)len, obj);
            goto bad;
        }
    }
    for (uint64_t i = 0; i < c.n_units; i++) {
        const struct cat_units *u = &c.units[i];
        uint64_t want;
        int64_t d = cat_find_states(&c, u->states_off);
        int twice = 0;
        for (uint64_t j = 0; j < i; j++)
            twice |= c.units[j].states_off == u->states_off;
        if (d < 0 || twice || !c.ds[d].d.n_shards || u->n_units == 0 || u->per_unit == 0 ||
            mul_overflow_u64(u->n_units, stride * 8, &want) || u->words.len != want ||
            !in_data(L, 0, u->words.off, u->words.len) || u->words.off % 8) {
            rc = seterr(o, CXLP_ECORRUPT,
                        "catalog gen %llu: units %llu (states %#llx): %s", (unsigned long long)gen,
                        (unsigned long long)i, (unsigned long long)u->states_off,
                        d < 0 || !c.ds[d].d.n_shards ? "no such dataset"
                        : twice ? "a second record for its dataset"
                        : "words outside object 0's data area or not n_units per tier");
            goto bad;
        }
    }
    for (uint64_t i = 0; i < c.n_ingest; i++) {
        const struct cat_ingest *e = &c.ingest[i];
        int64_t d = cat_find_states(&c, e->states_off);
        int twice = 0;
        for (uint64_t j = 0; j < i; j++)
            twice |= c.ingest[j].states_off == e->states_off;
        if (d < 0 || twice || !c.ds[d].d.n_shards || e->flags != INGEST_SHUFFLED ||
            e->n_source != c.ds[d].d.info.n_records) {
            rc = seterr(o, CXLP_ECORRUPT,
                        "catalog gen %llu: ingest record %llu (states %#llx): %s",
                        (unsigned long long)gen, (unsigned long long)i,
                        (unsigned long long)e->states_off,
                        d < 0 || !c.ds[d].d.n_shards ? "no such dataset"
                        : twice ? "a second record for its dataset"
                        : e->flags != INGEST_SHUFFLED ? "unknown flags"
                        : "n_source is not the dataset's record count");
            goto bad;
        }
    }
    /* the allocator relies on a sorted, coalesced free list */
    for (uint64_t i = 1; i < c.n_fr; i++) {
        const struct cat_free *x = &c.fr[i - 1], *y = &c.fr[i];
        if (x->object > y->object || (x->object == y->object && x->off + x->len >= y->off)) {
            rc = seterr(o, CXLP_ECORRUPT,
                        "catalog gen %llu: free list not sorted/coalesced at entry %llu (%#llx)",
                        (unsigned long long)gen, (unsigned long long)i,
                        (unsigned long long)y->off);
            goto bad;
        }
    }
    *out = c;
    return 0;
bad:
    cat_free(&c);
    return rc;
}

static const uint8_t *slot_addr(const struct attach *a, uint64_t gen)
{
    return (const uint8_t *)a->m.base + a->L.cat_off + (gen & 1) * a->L.cat_bytes;
}

/* Copies the blob in the slot of gen: its header's length, bounded by the
 * slot size, decides how much. *blob is malloc'd. */
static int copy_slot(const struct attach *a, uint64_t gen, uint8_t **blob, uint64_t *len)
{
    const uint8_t *s = slot_addr(a, gen);
    struct cat_hdr h;
    /* non-coherent pool: drop stale lines before each load (docs/hosts.md) */
    if (a->noncoherent)
        cache_invalidate(s, sizeof h);
    memcpy(&h, s, sizeof h);
    uint64_t n = h.bytes;
    if (n < sizeof h || n > a->L.cat_bytes)
        n = sizeof h; /* decode reports it */
    *blob = malloc(n);
    if (!*blob)
        return -ENOMEM;
    if (a->noncoherent)
        cache_invalidate(s, n);
    memcpy(*blob, s, n);
    *len = n;
    return 0;
}

/* Prefixes the decode message with the pool's path. */
static int with_path(const struct attach *a, struct obj *o, int rc)
{
    char m[ERRMSG_MAX];
    strlcpy0(m, cxlp_errmsg(o), sizeof m);
    return seterr(o, rc, "%s: %s", a->m.path, m);
}

int cat_read_slot(struct attach *a, uint64_t slot, struct cat *out, struct obj *o)
{
    uint8_t *blob;
    uint64_t len;
    if (copy_slot(a, slot, &blob, &len))
        return seterr(o, -ENOMEM, "catalog slot copy: out of memory");
    struct cat_hdr h;
    memcpy(&h, blob, sizeof h);
    if ((h.gen & 1) != (slot & 1)) {
        free(blob);
        return seterr(o, CXLP_ECORRUPT, "catalog slot %llu holds gen %llu of the other slot",
                      (unsigned long long)(slot & 1), (unsigned long long)h.gen);
    }
    int rc = cat_decode(blob, len, &a->L, h.gen, out, o);
    free(blob);
    return rc ? with_path(a, o, rc) : 0;
}

uint64_t cat_generation(const struct attach *a)
{
    return gen_of(host_load(a, &a->hdr->gen));
}

int cat_snapshot(struct attach *a, struct cat *out, int pin, uint64_t *gen, struct obj *o)
{
    int lost = attach_lost(a, o);
    if (lost)
        return lost;
    for (int tries = 0; tries < SNAP_TRIES; tries++) {
        if (tries > 8)
            sched_yield();
        /* pairs with the CAS of the gen word in host_publish_gen */
        uint64_t g = gen_of(host_load(a, &a->hdr->gen));
        if (pin) {
            attach_pin(a, g);
            at_fence_seq_cst();
            /* pairs with the gen CAS in host_publish_gen: if the generation
             * is still g, any writer that frees extents of g scans the
             * leases after our pin is visible. */
            if (gen_of(host_load(a, &a->hdr->gen)) != g) {
                attach_unpin(a, g);
                continue;
            }
        }
        uint8_t *blob;
        uint64_t len;
        if (copy_slot(a, g, &blob, &len)) {
            if (pin)
                attach_unpin(a, g);
            return seterr(o, -ENOMEM, "catalog snapshot: out of memory");
        }
        at_fence_seq_cst();
        /* pairs with the gen CAS in host_publish_gen: an unchanged
         * generation means slot g&1 was not rewritten while we copied it
         * (a lock acquisition changes only the epoch bits). */
        if (gen_of(host_load(a, &a->hdr->gen)) != g) {
            free(blob);
            if (pin)
                attach_unpin(a, g);
            continue;
        }
        int rc = cat_decode(blob, len, &a->L, g, out, o);
        free(blob);
        if (rc) {
            if (pin)
                attach_unpin(a, g);
            return with_path(a, o, rc);
        }
        if (gen)
            *gen = g;
        return 0;
    }
    return seterr(o, CXLP_ECORRUPT, "%s: catalog generation kept changing during %d snapshot tries",
                  a->m.path, SNAP_TRIES);
}

int64_t cat_find(const struct cat *c, const char *name)
{
    for (uint64_t i = 0; i < c->n_ds; i++)
        if (strncmp(c->ds[i].d.info.name, name, sizeof c->ds[i].d.info.name) == 0)
            return (int64_t)i;
    return -1;
}

int64_t cat_find_states(const struct cat *c, uint64_t off)
{
    for (uint64_t i = 0; i < c->n_ds; i++)
        if (c->ds[i].states.off == off)
            return (int64_t)i;
    return -1;
}
