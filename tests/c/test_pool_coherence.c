/* A pool declared non-coherent (issue 8, docs/hosts.md): the cache
 * maintenance really runs, in the order the memory model needs. One CPU
 * cannot show stale lines (x86 keeps its own caches coherent), so the test
 * watches the maintenance itself through the plug in common/flush.h, which
 * sees every range written back or invalidated and every fence:
 *   writer: every line of every published shard and of the catalog slot is
 *           written back, then a fence, then the generation word changes
 *           (and is written back);
 *   reader: the generation word and the catalog slot are invalidated before
 *           they are read, and each record's lines right before its view is
 *           returned, each field's of a dataset stored in columns too;
 *   a coherent pool does none of it. */
#include <pthread.h>

#include "test.h"
#include "records.h"
#include "common/flush.h"
#include "pool/host.h"

#define MiB (1ull << 20)

struct ev {
    enum cache_op op;
    uintptr_t p;
    size_t len;
};

static struct ev *evs;
static size_t n_ev, cap_ev;
static pthread_t me;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* the heartbeat thread's maintenance (lease beats) is not the writer's */
static void hook(void *ctx, enum cache_op op, const void *p, size_t len)
{
    (void)ctx;
    if (!pthread_equal(pthread_self(), me))
        return;
    pthread_mutex_lock(&mu);
    if (n_ev == cap_ev) {
        cap_ev = cap_ev ? 2 * cap_ev : 4096;
        evs = realloc(evs, cap_ev * sizeof *evs);
        CHECK(evs);
    }
    evs[n_ev++] = (struct ev){op, (uintptr_t)p, len};
    pthread_mutex_unlock(&mu);
}

/* lines of [p, p+len) all set in the bitmap (one bit per line of the pool) */
static int covered(const uint8_t *bits, uintptr_t base, uintptr_t p, size_t len)
{
    for (uintptr_t a = (p - base) / 64; a <= (p + len - 1 - base) / 64; a++)
        if (!(bits[a / 8] & (1u << (a % 8))))
            return 0;
    return 1;
}

/* Two fields stored in columns (shard format 2): tokens of i % 9 elements
 * and a label, record i. */
#define NF_RECS 500u
static void write_fields(cxlp_pool *p)
{
    struct cxlp_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.n_fields = 2;
    strcpy(sc.fields[0].name, "tokens");
    sc.fields[0].dtype = CXLP_DT_U16;
    sc.fields[0].ndim = 1;
    strcpy(sc.fields[1].name, "label");
    sc.fields[1].dtype = CXLP_DT_I64;
    struct cxlp_writer_opts wo = {.shard_bytes = 2048};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "f", &sc, &wo, &w));
    for (uint64_t i = 0; i < NF_RECS; i++) {
        uint16_t t[8];
        int64_t lab = -(int64_t)i;
        for (uint64_t j = 0; j < i % 9; j++)
            t[j] = (uint16_t)(i + j);
        int64_t o[2] = {0, (int64_t)(i % 9)};
        struct cxlp_column c[2] = {{t, (i % 9) * 2, o}, {&lab, 8, NULL}};
        CHECK_OK(cxlp_writer_append_columns(w, 1, c));
    }
    CHECK_OK(cxlp_writer_commit(w));
}

/* Each field read alone (cxlp_store_read_field, a column each) is
 * invalidated right before its view is returned. */
static void read_fields(cxlp_pool *p)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "f", &s));
    cache_hook_set(hook, NULL);
    for (uint64_t i = 0; i < NF_RECS; i += 7) {
        for (uint32_t f = 0; f < 2; f++) {
            n_ev = 0;
            struct cxlp_view v;
            CHECK_OK(cxlp_store_read_field(s, i, f, &v));
            CHECK(n_ev >= 1);
            const struct ev *e = &evs[n_ev - 1];
            CHECK(e->op == CACHE_INVALIDATE && e->p == (uintptr_t)v.data && e->len == v.len);
            if (f == 0) {
                CHECK(v.len == (i % 9) * 2);
                for (uint64_t j = 0; j < i % 9; j++)
                    CHECK(((const uint16_t *)v.data)[j] == (uint16_t)(i + j));
            } else {
                CHECK(v.len == 8 && *(const int64_t *)v.data == -(int64_t)i);
            }
        }
    }
    cache_hook_set(NULL, NULL);
    CHECK_OK(cxlp_store_close(s));
    printf("reader: each field of a dataset stored in columns invalidated before its view\n");
}

static void writer_side(void)
{
    const char *spec = test_name("nc");
    struct cxlp_pool_opts o = {.lease_slots = 8, .catalog_bytes = 64 << 10, .noncoherent = 1};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 16 * MiB, &o, &p));
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(!st.coherent);
    printf("non-coherent pool, cache instructions: %s\n", cache_insns());

    struct cache_stats s0, s1;
    cache_stats_get(&s0);
    n_ev = 0;
    cache_hook_set(hook, NULL);
    uint64_t n;
    CHECK_OK(rec_ingest(p, "d", 0, 7, 1 * MiB, 128 << 10, &n, NULL)); /* variable-size */
    cache_hook_set(NULL, NULL);
    cache_stats_get(&s1);
    printf("ingest of 1 MiB: %" PRIu64 " lines written back, %" PRIu64 " invalidated, %" PRIu64
           " fences\n", s1.wb_lines - s0.wb_lines, s1.inval_lines - s0.inval_lines,
           s1.fences - s0.fences);
    CHECK(s1.wb_lines - s0.wb_lines >= (1 * MiB) / 64);

    /* the publish: the last write-back of the gen word's line */
    struct attach *a = pool_attach(p);
    uintptr_t base = (uintptr_t)pool_base_rw(p, POOL_META), genp = (uintptr_t)&a->hdr->gen;
    size_t flip = SIZE_MAX, fence = SIZE_MAX;
    for (size_t i = 0; i < n_ev; i++)
        if (evs[i].op == CACHE_WRITEBACK && evs[i].p <= genp && genp < evs[i].p + evs[i].len)
            flip = i;
    CHECK(flip != SIZE_MAX);
    for (size_t i = flip; i-- > 0 && fence == SIZE_MAX;)
        if (evs[i].op == CACHE_FENCE)
            fence = i;
    CHECK(fence != SIZE_MAX);
    uint8_t *bits = calloc(16 * MiB / 64 / 8, 1);
    CHECK(bits);
    for (size_t i = 0; i < fence; i++)
        if (evs[i].op == CACHE_WRITEBACK && evs[i].p >= base && evs[i].p < base + 16 * MiB)
            for (uintptr_t l = (evs[i].p - base) / 64; l <= (evs[i].p + evs[i].len - 1 - base) / 64;
                 l++)
                bits[l / 8] |= (uint8_t)(1u << (l % 8));
    /* what the new generation names: every shard, and the catalog slot */
    struct pool_dataset ds;
    struct pool_shard *sh;
    struct attach *la;
    uint64_t gen;
    CHECK_OK(pool_lookup(p, "d", &ds, &sh, &la, &gen));
    CHECK(ds.n_shards >= 4);
    for (uint32_t k = 0; k < ds.n_shards; k++)
        CHECK(covered(bits, base, base + sh[k].off, sh[k].len));
    const uint8_t *slot = (const uint8_t *)base + a->L.cat_off + (gen & 1) * a->L.cat_bytes;
    uint64_t blob;
    memcpy(&blob, slot + 16, 8); /* cat_hdr.bytes */
    CHECK(covered(bits, base, (uintptr_t)slot, blob));
    CHECK(gen_of(a->hdr->gen) == gen);
    printf("publish of gen %" PRIu64 ": %u shards and the %" PRIu64 "-byte catalog written "
           "back, fence (event %zu), then the generation (event %zu)\n", gen, ds.n_shards, blob,
           fence, flip);
    attach_unpin(la, gen);
    attach_unref(la);
    free(sh);
    free(bits);
    write_fields(p);
    CHECK_OK(cxlp_pool_close(p));

    /* reader: invalidations before each load */
    struct cxlp_pool_opts ro = {.readonly = 1};
    CHECK_OK(cxlp_pool_open(spec, &ro, &p));
    a = pool_attach(p);
    genp = (uintptr_t)&a->hdr->gen;
    n_ev = 0;
    cache_hook_set(hook, NULL);
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    int gen_inval = 0, slot_inval = 0;
    slot = (const uint8_t *)a->hdr + a->L.cat_off;
    for (size_t i = 0; i < n_ev; i++) {
        if (evs[i].op != CACHE_INVALIDATE)
            continue;
        gen_inval |= evs[i].p <= genp && genp < evs[i].p + evs[i].len;
        slot_inval |= evs[i].p >= (uintptr_t)slot && evs[i].len >= 72 &&
                      evs[i].p < (uintptr_t)slot + 2 * a->L.cat_bytes;
    }
    CHECK(gen_inval && slot_inval);
    for (uint64_t i = 0; i < n; i += 13) {
        n_ev = 0;
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(n_ev >= 1);
        const struct ev *e = &evs[n_ev - 1];
        CHECK(e->op == CACHE_INVALIDATE && e->p == (uintptr_t)v.data && e->len == v.len);
        CHECK(rec_ok(v.data, v.len, 0, 7, i));
    }
    /* verify recomputes checksums over lines invalidated first */
    n_ev = 0;
    CHECK_OK(cxlp_store_verify(s));
    cache_hook_set(NULL, NULL);
    struct pool_dataset vds;
    struct pool_shard *vsh;
    struct attach *va;
    uint64_t vgen;
    CHECK_OK(pool_lookup(p, "d", &vds, &vsh, &va, &vgen));
    base = (uintptr_t)a->hdr;
    for (uint32_t k = 0; k < vds.n_shards; k++) {
        int seen = 0;
        for (size_t i = 0; i < n_ev && !seen; i++)
            seen = evs[i].op == CACHE_INVALIDATE && evs[i].p == base + vsh[k].off &&
                   evs[i].len == vsh[k].len;
        CHECK(seen);
    }
    attach_unpin(va, vgen);
    attach_unref(va);
    free(vsh);
    printf("reader: gen word and catalog slot invalidated at open; each record's own lines "
           "before its view; each whole shard before verify\n");
    CHECK_OK(cxlp_store_close(s));
    read_fields(p);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
}

static void coherent_side(void)
{
    const char *spec = test_name("coh");
    struct cxlp_pool_opts o = {.lease_slots = 8, .catalog_bytes = 64 << 10};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 16 * MiB, &o, &p));
    struct cache_stats s0, s1;
    cache_stats_get(&s0);
    uint64_t n;
    CHECK_OK(rec_ingest(p, "d", 0, 7, 1 * MiB, 128 << 10, &n, NULL));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    for (uint64_t i = 0; i < n; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
    }
    CHECK_OK(cxlp_store_close(s));
    cache_stats_get(&s1);
    CHECK(s1.wb_lines == s0.wb_lines && s1.inval_lines == s0.inval_lines &&
          s1.fences == s0.fences);
    printf("coherent pool: no cache maintenance\n");
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
}

int main(void)
{
    if (!cache_available())
        SKIP("no cache write-back instructions on this CPU");
    me = pthread_self();
    coherent_side();
    writer_side();
    printf("ok\n");
    return 0;
}
