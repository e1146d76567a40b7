/*
 * tiers.c - pools made of tiers: parsing tier specs, creating a tiered pool
 * (its tier objects first, the pool object's magic last), opening the tier
 * objects of a pool, destroying them, and the per-tier report.
 *
 * A tier spec is KIND=MEDIA, the same string in the CLI (--tier) and in
 * Python (tiers=[...]):
 *   dram=shm:SIZE            dram=shm:NAME:SIZE
 *   cxl=numa:NODE:SIZE       cxl=numa:NODE:NAME:SIZE
 *   cxl=devdax:/dev/daxX.Y[:SIZE]
 *   nvme=file:PATH:SIZE      nvme=file:/dev/BLOCKDEV[:SIZE]
 * A shm or numa object without a NAME is named after the pool:
 * /dev/shm/cxlp.POOLNAME.KIND (KIND2, KIND3... for a second tier of a kind).
 * Tiers are listed fastest first (dram, cxl, nvme); the slowest nvme tier is
 * the home: every shard has its copy there, ingests write there, and memory
 * tiers hold copies. A pool without an nvme tier has no home: a shard's
 * copies move between its tiers, one of them always present.
 *
 * Every spec is checked before anything is created (the kind, the order,
 * the media, sizes, that no two tiers share an object, that numa nodes and
 * devices exist, that a file's filesystem has room), so a bad spec leaves
 * nothing behind; create then makes the tier objects, each stamped with the
 * pool's uuid, and the pool object last, its magic written last of all.
 *
 * Rejected: tiers as separate pools (a catalog per tier, datasets copied
 * between them): a location change would then be a publish in two catalogs,
 * and a reader would have to know which pool holds a shard now. Tiers of one
 * pool share one catalog and one set of location words.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "common/atomic.h"
#include "net/net.h"
#include "pool/pool_internal.h"

#define ERRLEN 384
/* Staging registry of a tiered pool (tier layer): 64 slots of 16 KiB. */
#define STAGE_BYTES (UINT64_C(1) << 20)
/* Metadata area of a tiered pool's object 0 when opts->meta_bytes is 0: room
 * for the shard tables and states of 10^6 shards. */
#define DEF_META_BYTES (UINT64_C(128) << 20)

const char *cxlp_tier_name(int kind)
{
    switch (kind) {
    case CXLP_TIER_DRAM: return "dram";
    case CXLP_TIER_CXL: return "cxl";
    case CXLP_TIER_REMOTE: return "remote";
    case CXLP_TIER_NVME: return "nvme";
    default: return "?";
    }
}

int cxlp_tier_parse(const char *name)
{
    for (int k = CXLP_TIER_DRAM; k <= CXLP_TIER_NVME; k++)
        if (name && strcmp(name, cxlp_tier_name(k)) == 0)
            return k;
    return -1;
}

int tier_kind_of(const struct media *m)
{
    switch (m->kind) {
    case CXLP_MEDIA_NUMA: return m->emulated ? CXLP_TIER_DRAM : CXLP_TIER_CXL;
    case CXLP_MEDIA_DEVDAX: return CXLP_TIER_CXL;
    default: return CXLP_TIER_DRAM;
    }
}

/* One parsed tier spec. */
struct tspec {
    int kind;
    char spec[POOL_SPEC_MAX];  /* media spec of its object */
    uint64_t size;             /* 0: the device's (devdax) */
    struct media m;            /* parsed */
};

/* The name that objects of a tiered pool are named after. */
static void pool_base_name(const struct media *m, char *out, size_t cap)
{
    const char *p = m->path, *s = strrchr(p, '/');
    s = s ? s + 1 : p;
    if (m->kind == CXLP_MEDIA_SHM || m->kind == CXLP_MEDIA_NUMA)
        s += strlen("cxlp."); /* /dev/shm/cxlp.NAME */
    strlcpy0(out, s, cap);
}

static int bad(char *err, const char *tier, int i, int rc, const char *why)
{
    return errbuf_set(err, ERRLEN, rc, "tier %d ('%s'): %s", i, tier, why);
}

/* Parses tier i's spec str into t. */
static int tspec_parse(const char *str, int i, const char *base, int nth, struct tspec *t,
                       char *err)
{
    char buf[512], why[ERRLEN];
    memset(t, 0, sizeof *t);
    if (!str || strlen(str) >= sizeof buf)
        return bad(err, str ? str : "(null)", i, CXLP_EARG, "missing or too long");
    strlcpy0(buf, str, sizeof buf);
    char *eq = strchr(buf, '=');
    if (!eq)
        return bad(err, str, i, CXLP_EARG, "expected KIND=MEDIA, e.g. dram=shm:1G, "
                   "cxl=numa:1:8G, nvme=file:/data/x.tier:2T");
    *eq = 0;
    t->kind = cxlp_tier_parse(buf);
    if (t->kind < 0)
        return bad(err, str, i, CXLP_EARG, "unknown kind (dram, cxl, remote, nvme)");
    if (t->kind == CXLP_TIER_REMOTE) {
        if (!cxlp_remote_available())
            return bad(err, str, i, CXLP_EUNSUPPORTED, "remote tiers read other hosts' pools "
                       "over UCX, and this build has no UCX (built with CXLP_UCX=OFF)");
        /* remote=ucx://HOST:PORT/POOL[,ucx://...]: the peers, each checked */
        const char *urls = eq + 1;
        if (strlen(urls) >= sizeof t->spec)
            return bad(err, str, i, CXLP_EARG, "the list of peers is too long");
        char list[POOL_SPEC_MAX], *save = NULL;
        strlcpy0(list, urls, sizeof list);
        int n_urls = 0;
        for (char *u = strtok_r(list, ",", &save); u; u = strtok_r(NULL, ",", &save)) {
            char host[256], pool[WIRE_NAME_MAX + 1], why[ERRLEN];
            int port;
            if (net_url_parse(u, host, sizeof host, &port, pool, why, sizeof why))
                return bad(err, str, i, CXLP_EARG, why);
            n_urls++;
        }
        if (!n_urls || urls[0] == ',' || urls[strlen(urls) - 1] == ',' || strstr(urls, ",,"))
            return bad(err, str, i, CXLP_EARG, "expected remote=ucx://HOST:PORT/POOL"
                       "[,ucx://HOST:PORT/POOL...]");
        strlcpy0(t->spec, urls, sizeof t->spec);
        strlcpy0(t->m.path, urls, sizeof t->m.path);
        return 0;
    }
    char *med = eq + 1, *last = strrchr(med, ':');
    uint64_t size = 0;
    int has_size = last && cxlp_size_parse(last + 1, &size) == 0;
    if (has_size)
        *last = 0;
    char kind[32];
    if (nth > 1)
        snprintf(kind, sizeof kind, "%s%d", cxlp_tier_name(t->kind), nth);
    else
        snprintf(kind, sizeof kind, "%s", cxlp_tier_name(t->kind));
    int n;
    if (strcmp(med, "shm") == 0) {
        n = snprintf(t->spec, sizeof t->spec, "shm:%s.%s", base, kind);
    } else if (strncmp(med, "shm:", 4) == 0) {
        n = snprintf(t->spec, sizeof t->spec, "%s", med);
    } else if (strncmp(med, "numa:", 5) == 0) {
        char *node_end = strchr(med + 5, ':');
        if (!node_end) /* numa:NODE */
            n = snprintf(t->spec, sizeof t->spec, "%s:%s.%s", med, base, kind);
        else
            n = snprintf(t->spec, sizeof t->spec, "%s", med);
    } else if (strncmp(med, "file:", 5) == 0 || strncmp(med, "devdax:", 7) == 0) {
        n = snprintf(t->spec, sizeof t->spec, "%s", med);
    } else {
        return bad(err, str, i, CXLP_EARG, "unknown media (shm:SIZE, numa:NODE:SIZE, "
                   "file:PATH:SIZE, devdax:/dev/daxX.Y)");
    }
    if (n < 0 || (size_t)n >= sizeof t->spec)
        return bad(err, str, i, CXLP_EARG, "media spec too long");
    int rc = media_parse(&t->m, t->spec, why, sizeof why);
    if (rc)
        return bad(err, str, i, rc, why);
    /* a device's size is its own (devdax, a block device), or SIZE of it */
    if (!has_size && t->m.kind != CXLP_MEDIA_DEVDAX &&
        !(t->m.kind == CXLP_MEDIA_FILE && media_file_is_blk(t->m.path)))
        return bad(err, str, i, CXLP_EARG, "no size (append :SIZE, e.g. :8G)");
    if (t->kind == CXLP_TIER_NVME && t->m.kind != CXLP_MEDIA_FILE)
        return bad(err, str, i, CXLP_EARG, "an nvme tier is a file on storage or a block "
                   "device (nvme=file:PATH:SIZE, nvme=file:/dev/nvme0n1[:SIZE])");
    if (t->kind != CXLP_TIER_NVME && t->m.kind == CXLP_MEDIA_FILE)
        return bad(err, str, i, CXLP_EARG, "a memory tier is shm, numa or devdax memory; "
                   "a file is an nvme tier");
    if (has_size && size < POOL_DATA_ALIGN + POOL_EXTENT_ALIGN)
        return bad(err, str, i, CXLP_EARG, "smaller than a tier's header and one extent "
                   "(2 MiB + 4 KiB)");
    t->size = size;
    return 0;
}

/* Writes the first page of tier object i: it belongs to the pool uuid. */
static int stamp_object(struct media *m, uint32_t i, const uint8_t uuid[16], char *err)
{
    int rc = media_prepare(m, 0, POOL_EXTENT_ALIGN);
    if (rc)
        return errbuf_set(err, ERRLEN, rc, "%s: cannot back its header: %s", m->path,
                          cxlp_strerror(rc));
    struct pool_objhdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, POOL_OBJ_MAGIC, sizeof h.magic);
    h.version = POOL_FORMAT_VERSION;
    h.index = i;
    memcpy(h.uuid, uuid, sizeof h.uuid);
    h.checksum = XXH3_64bits(&h, offsetof(struct pool_objhdr, checksum));
    memcpy(m->base, &h, sizeof h);
    rc = media_sync(m, 0, sizeof h);
    if (rc)
        return errbuf_set(err, ERRLEN, rc, "%s: sync of its header: %s", m->path,
                          cxlp_strerror(rc));
    return 0;
}

int cxlp_pool_create_tiered(const char *spec, const char *const *tiers, size_t n_tiers,
                            const struct cxlp_pool_opts *opts, cxlp_pool **out)
{
    char err[ERRLEN] = "";
    if (!out || !spec || (n_tiers && !tiers))
        return seterr(NULL, CXLP_EARG, "cxlp_pool_create_tiered: %s is NULL",
                      !out ? "out" : !spec ? "spec" : "tiers");
    if (n_tiers == 0 || n_tiers > POOL_MAX_TIERS)
        return seterr(NULL, CXLP_EARG, "%s: %zu tiers; a pool has 1 to %d", spec, n_tiers,
                      POOL_MAX_TIERS);
    struct media pm;
    int rc = media_parse(&pm, spec, err, sizeof err);
    if (rc)
        return seterr(NULL, rc, "%s", err);
    char base[128];
    pool_base_name(&pm, base, sizeof base);

    /* check everything before creating anything */
    struct tspec *ts = calloc(n_tiers, sizeof *ts);
    if (!ts)
        return seterr(NULL, -ENOMEM, "%s: out of memory", spec);
    int nth[CXLP_TIER_NVME + 1] = {0};
    for (size_t i = 0; i < n_tiers; i++) {
        const char *eq = tiers[i] ? strchr(tiers[i], '=') : NULL;
        char kind[16] = "";
        if (eq && (size_t)(eq - tiers[i]) < sizeof kind)
            memcpy(kind, tiers[i], (size_t)(eq - tiers[i]));
        int k = cxlp_tier_parse(kind);
        if ((rc = tspec_parse(tiers[i], (int)i, base, k >= 0 ? ++nth[k] : 1, &ts[i], err)))
            goto fail;
        if (i > 0 && ts[i].kind < ts[i - 1].kind) {
            rc = bad(err, tiers[i], (int)i, CXLP_EARG, "tiers are listed fastest first "
                     "(dram, cxl, remote, nvme)");
            goto fail;
        }
        if (strcmp(ts[i].m.path, pm.path) == 0) {
            rc = bad(err, tiers[i], (int)i, CXLP_EARG, "uses the pool's own object");
            goto fail;
        }
        for (size_t j = 0; j < i; j++)
            if (strcmp(ts[i].m.path, ts[j].m.path) == 0) {
                char why[ERRLEN];
                snprintf(why, sizeof why, "uses the same object as tier %zu (%s)", j, ts[j].m.path);
                rc = bad(err, tiers[i], (int)i, CXLP_EARG, why);
                goto fail;
            }
        char why[ERRLEN];
        if (ts[i].kind != CXLP_TIER_REMOTE && (rc = media_probe(&ts[i].m, ts[i].size, why, sizeof why))) {
            rc = bad(err, tiers[i], (int)i, rc, why);
            goto fail;
        }
    }
    int n_remote = 0, n_memory = 0;
    for (size_t i = 0; i < n_tiers; i++) {
        n_remote += ts[i].kind == CXLP_TIER_REMOTE;
        n_memory += ts[i].kind == CXLP_TIER_DRAM || ts[i].kind == CXLP_TIER_CXL;
    }
    if (n_remote && !n_memory) {
        rc = errbuf_set(err, sizeof err, CXLP_EARG, "a remote tier's shards are staged into a "
                        "memory tier of this host: add one (e.g. --tier dram=shm:1G)");
        goto fail;
    }
    struct pool_layout L;
    uint64_t meta = opts && opts->meta_bytes ? opts->meta_bytes : DEF_META_BYTES;
    struct cxlp_pool_opts o = opts ? *opts : (struct cxlp_pool_opts){0};
    uint64_t cb = o.catalog_bytes ? o.catalog_bytes : POOL_DEF_CAT_BYTES;
    uint64_t lslots = o.lease_slots ? o.lease_slots : POOL_DEF_LEASES;
    uint64_t need = ALIGN_UP(ALIGN_UP(POOL_HDR_SIZE + lslots * POOL_LEASE_SIZE, POOL_EXTENT_ALIGN) +
                             STAGE_BYTES + 2 * ALIGN_UP(cb, POOL_EXTENT_ALIGN), POOL_DATA_ALIGN);
    if (meta < POOL_DATA_ALIGN || meta > (UINT64_C(1) << 44)) {
        rc = errbuf_set(err, sizeof err, CXLP_EARG, "%s: meta_bytes %llu: the metadata area "
                        "holds the shard tables and states (48 bytes a shard with 3 tiers) "
                        "and is at least 2 MiB", spec, (unsigned long long)meta);
        goto fail;
    }
    rc = compute_layout_staged(need + meta, &o, &L, spec, STAGE_BYTES);
    if (rc) {
        free(ts);
        return rc;
    }
    L.n_tiers = (uint32_t)n_tiers;
    L.n_objects = (uint32_t)n_tiers + 1;
    L.home = POOL_NO_HOME;
    for (size_t i = 0; i < n_tiers; i++) {
        uint32_t ob = (uint32_t)i + 1;
        int nvme = ts[i].kind == CXLP_TIER_NVME, remote = ts[i].kind == CXLP_TIER_REMOTE;
        L.tiers[i] = (struct pool_tier){.kind = (uint32_t)ts[i].kind, .object = ob,
                                        .node = remote ? -1 : ts[i].m.numa_node,
                                        .flags = nvme     ? TIER_PERSISTENT | TIER_STAGED
                                                 : remote ? TIER_STAGED | TIER_REMOTE
                                                          : 0};
        if (nvme)
            L.home = (uint32_t)i;
    }

    /* create: tier objects, then the pool object */
    uint8_t uuid[16];
    pool_make_uuid(uuid);
    struct pool_object objs[POOL_MAX_OBJECTS];
    memset(objs, 0, sizeof objs);
    strlcpy0(objs[0].spec, spec, sizeof objs[0].spec);
    objs[0].media_kind = (uint32_t)pm.kind;
    size_t made = 0;
    struct media m;
    for (; made < n_tiers; made++) {
        uint32_t ob = (uint32_t)made + 1;
        if (ts[made].kind == CXLP_TIER_REMOTE) {
            /* no object: a span of addresses for the shards of peers */
            L.obj[ob].size = POOL_DATA_ALIGN + POOL_REMOTE_SPAN;
            L.obj[ob].data_off = POOL_DATA_ALIGN;
            L.obj[ob].data_len = POOL_REMOTE_SPAN;
            L.tiers[made].capacity = POOL_REMOTE_SPAN;
            strlcpy0(objs[ob].spec, ts[made].spec, sizeof objs[ob].spec);
            objs[ob].media_kind = POOL_OBJ_REMOTE;
            continue;
        }
        /* size 0: a device's whole size */
        rc = media_create(&m, ts[made].spec, ts[made].size, o.mode, err, sizeof err);
        if (!rc && m.size < POOL_DATA_ALIGN + POOL_EXTENT_ALIGN)
            rc = errbuf_set(err, sizeof err, CXLP_EARG, "%s: %llu bytes, smaller than a "
                            "tier", m.path, (unsigned long long)m.size);
        if (!rc)
            rc = stamp_object(&m, ob, uuid, err);
        if (rc) {
            if (m.base)
                media_close(&m);
            if (rc != CXLP_EEXIST)
                media_destroy(ts[made].spec, NULL, 0);
            goto undo;
        }
        L.obj[ob].size = m.size;
        L.obj[ob].data_off = POOL_DATA_ALIGN;
        L.obj[ob].data_len = (m.size - POOL_DATA_ALIGN) & ~(uint64_t)(POOL_EXTENT_ALIGN - 1);
        L.tiers[made].capacity = L.obj[ob].data_len;
        strlcpy0(objs[ob].spec, ts[made].spec, sizeof objs[ob].spec);
        objs[ob].media_kind = (uint32_t)m.kind;
        if (m.kind == CXLP_MEDIA_NUMA && !m.emulated && ts[made].kind == CXLP_TIER_DRAM)
            L.tiers[made].node = m.numa_node;
        media_close(&m);
    }
    rc = pool_create_object0(spec, &L, objs, uuid, o.mode, out);
    if (rc == 0) {
        free(ts);
        return 0;
    }
    strlcpy0(err, cxlp_errmsg(NULL), sizeof err);
undo:
    for (size_t i = 0; i < made; i++)
        if (ts[i].kind != CXLP_TIER_REMOTE)
            media_destroy(ts[i].spec, NULL, 0);
fail:
    free(ts);
    return seterr(NULL, rc, "%s: %s", spec, err);
}

int pool_objects_open(struct attach *a, struct obj *o)
{
    const struct pool_hdr *h = a->hdr;
    char err[ERRLEN];
    for (uint32_t i = 1; i < a->L.n_objects; i++) {
        struct media *m = &a->om[i];
        const char *spec = h->objects[i].spec; /* validated: terminated */
        if (h->objects[i].media_kind == POOL_OBJ_REMOTE) {
            /* a remote tier: the peers' urls, read over the network */
            memset(m, 0, sizeof *m);
            m->kind = -1;
            m->fd = -1;
            m->numa_node = -1;
            m->size = a->L.obj[i].size;
            strlcpy0(m->path, spec, sizeof m->path);
            continue;
        }
        int rc = media_open(m, spec, a->m.writable, err, sizeof err);
        if (rc)
            return seterr(o, rc, "%s: tier object %u: %s", a->m.path, i, err);
        struct pool_objhdr oh;
        if (m->size < a->L.obj[i].size || m->size < sizeof oh)
            return seterr(o, CXLP_ECORRUPT, "%s: tier object %s holds %llu bytes, the pool "
                          "says %llu", a->m.path, m->path, (unsigned long long)m->size,
                          (unsigned long long)a->L.obj[i].size);
        memcpy(&oh, m->base, sizeof oh);
        if (memcmp(oh.magic, POOL_OBJ_MAGIC, sizeof oh.magic) != 0 ||
            oh.version != POOL_FORMAT_VERSION || oh.index != i ||
            memcmp(oh.uuid, h->uuid, sizeof oh.uuid) != 0 ||
            oh.checksum != XXH3_64bits(&oh, offsetof(struct pool_objhdr, checksum)))
            return seterr(o, CXLP_ECORRUPT, "%s: %s is not object %u of this pool (magic, "
                          "uuid or checksum differ)", a->m.path, m->path, i);
    }
    return 0;
}

int pool_destroy_objects(const char *spec)
{
    /* the header alone, not an open: a pool one of whose tier objects is
     * gone (a deleted tier file) must still lose the others */
    struct media m;
    char err[ERRLEN];
    if (media_open(&m, spec, 0, err, sizeof err) != 0)
        return 0;
    char specs[POOL_MAX_OBJECTS][POOL_SPEC_MAX];
    uint32_t n = 0;
    const struct pool_hdr *h = (const struct pool_hdr *)m.base;
    if (m.size >= sizeof *h && memcmp(h->magic, POOL_MAGIC, sizeof h->magic) == 0 &&
        h->version == POOL_FORMAT_VERSION && h->n_objects <= POOL_MAX_OBJECTS &&
        h->checksum == XXH3_64bits(h, offsetof(struct pool_hdr, checksum))) {
        n = h->n_objects;
        for (uint32_t i = 1; i < n; i++) {
            memcpy(specs[i], h->objects[i].spec, POOL_SPEC_MAX);
            specs[i][POOL_SPEC_MAX - 1] = '\0';
            if (h->objects[i].media_kind == POOL_OBJ_REMOTE)
                specs[i][0] = '\0'; /* a peer's pool: nothing of ours to remove */
        }
    }
    media_close(&m);
    for (uint32_t i = 1; i < n; i++)
        if (specs[i][0])
            media_destroy(specs[i], NULL, 0);
    return 0;
}

struct counts {
    uint64_t *bytes, *copies;
};

static int count_one(void *ctx, uint64_t u, uint32_t tier, uint32_t object, uint64_t off,
                     uint64_t len)
{
    (void)u;
    (void)object;
    (void)off;
    struct counts *k = ctx;
    k->copies[tier]++;
    k->bytes[tier] += len;
    return 0;
}

/* Bytes held by copies in each tier, and their number, from every dataset's
 * states and unit words (a copy of a unit counts as a copy). */
static void count_copies(const struct attach *a, const struct cat *c, uint64_t *bytes,
                         uint64_t *copies)
{
    struct counts k = {bytes, copies};
    for (uint64_t i = 0; i < c->n_units; i++)
        (void)units_walk(a, c->units[i].words.off, c->units[i].n_units, count_one, &k);
    const uint32_t stride = attach_stride(a);
    for (uint64_t i = 0; i < c->n_ds; i++) {
        const struct cat_ds *d = &c->ds[i];
        if (!d->d.n_shards)
            continue;
        const struct pool_shent *tab = (const struct pool_shent *)(attach_base(a) + d->table.off);
        const uint64_t *st = attach_states(a, d->states.off);
        for (uint64_t k = 0; k < d->d.n_shards; k++)
            for (uint32_t t = 0; t < a->L.n_tiers; t++)
                if (loc_present(at_load_acquire(&st[k * stride + 1 + t]))) { /* pairs with place.c */
                    copies[t]++;
                    bytes[t] += ALIGN_UP(tab[k].len, POOL_EXTENT_ALIGN);
                }
    }
}

int cxlp_pool_tiers(cxlp_pool *p, struct cxlp_tier_info *out, size_t cap, size_t *n_out)
{
    if (!p || p->obj.magic != OBJ_MAGIC || !n_out || (cap && !out))
        return seterr(p && p->obj.magic == OBJ_MAGIC ? &p->obj : NULL, CXLP_EARG,
                      "cxlp_pool_tiers: NULL argument");
    struct attach *a = p->a;
    struct cat c;
    int rc = cat_snapshot(a, &c, 0, NULL, &p->obj);
    if (rc)
        return rc;
    uint64_t bytes[POOL_MAX_TIERS] = {0}, copies[POOL_MAX_TIERS] = {0};
    count_copies(a, &c, bytes, copies);
    for (uint32_t t = 0; t < a->L.n_tiers && t < cap; t++) {
        const struct attach_tier *at = &a->t[t];
        const struct media *m = attach_media(a, at->object);
        struct cxlp_tier_info ti;
        memset(&ti, 0, sizeof ti);
        ti.kind = at->kind;
        ti.media = at->flags & TIER_REMOTE ? CXLP_MEDIA_UCX : m->kind;
        /* a shm dram tier is DRAM and a file nvme tier is storage; only a
         * cxl tier on shm or file memory stands in for something, and so
         * does the one tier of a pool of one tier: the pool is emulated CXL
         * (cxlp_pool_stat's emulated) */
        ti.emulated = (at->kind == CXLP_TIER_CXL || a->L.n_tiers == 1) && m->emulated;
        ti.numa_node = m->kind == CXLP_MEDIA_NUMA ? m->numa_node : -1;
        ti.home = a->L.home == t;
        ti.staged = (at->flags & TIER_STAGED) != 0;
        strlcpy0(ti.path, m->path, sizeof ti.path);
        ti.capacity = a->L.tiers[t].capacity;
        uint64_t fr = ext_free_bytes(&c, at->object, NULL, NULL);
        ti.used = a->L.obj[at->object].data_len - MIN(fr, a->L.obj[at->object].data_len);
        ti.copy_bytes = bytes[t];
        ti.copies = copies[t];
        const struct pool_tier_ctr *k = &a->hdr->ctr[t];
        ti.hits = at_load_relaxed(&k->hits);
        ti.misses = at_load_relaxed(&k->misses);
        ti.bytes_in = at_load_relaxed(&k->bytes_in);
        ti.bytes_out = at_load_relaxed(&k->bytes_out);
        ti.stall_ns = at_load_relaxed(&k->stall_ns);
        ti.fetches = at_load_relaxed(&k->fetches);
        ti.evictions = at_load_relaxed(&k->evictions);
        out[t] = ti;
    }
    *n_out = a->L.n_tiers;
    cat_free(&c);
    return 0;
}
