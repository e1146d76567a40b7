/* Tiered pools: create, ingest into the home (an nvme file), read through
 * a miss that stages the shard into the dram tier with io_uring, copies and
 * drops between tiers, and verify. */
#include <fcntl.h>
#include <sys/stat.h>

#include "test.h"
#include "records.h"
#include "pool/loc.h"
#include "pool/pool_internal.h"
#include "store/fetch.h"
#include "store/store.h"

#define MiB (1ull << 20)

static char pool[128], dram[160], nvme[256];

static void names(void)
{
    snprintf(pool, sizeof pool, "%s", test_name("tier"));
    snprintf(dram, sizeof dram, "dram=shm:%s.d:4M", pool);
    snprintf(nvme, sizeof nvme, "nvme=file:/tmp/cxlp-%s.tier:32M", pool);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static uint64_t word(cxlp_store *s, uint64_t k, uint32_t t)
{
    return __atomic_load_n(&s->states[k * s->stride + 1 + t], __ATOMIC_ACQUIRE);
}

static void basic(void)
{
    names();
    const char *tiers[] = {dram, nvme};
    struct cxlp_pool_opts o = {.meta_bytes = 4 * MiB, .lease_slots = 16};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 2, &o, &p));
    struct cxlp_tier_info ti[4];
    size_t nt;
    CHECK_OK(cxlp_pool_tiers(p, ti, 4, &nt));
    CHECK(nt == 2);
    CHECK(ti[0].kind == CXLP_TIER_DRAM && !ti[0].home && !ti[0].staged && ti[0].media == CXLP_MEDIA_SHM);
    CHECK(ti[1].kind == CXLP_TIER_NVME && ti[1].home && ti[1].staged && ti[1].media == CXLP_MEDIA_FILE);
    CHECK(ti[0].capacity == 2 * MiB && ti[1].capacity == 30 * MiB);
    CHECK(!ti[0].emulated && !ti[1].emulated); /* DRAM is DRAM, a file is storage */
    CHECK(pool_ingest_tier(p) == 1);

    /* ingest: the shards land in the home tier */
    uint64_t seed = 7, n;
    CHECK_OK(rec_ingest(p, "d", 1, seed, 4 * MiB, 256 * 1024, &n, NULL));
    CHECK_OK(cxlp_pool_tiers(p, ti, 4, &nt));
    CHECK(ti[1].copies == 16 && ti[0].copies == 0);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));

    /* a read of a shard only the nvme tier holds: a miss, staged into dram */
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    CHECK(cxlp_store_count(s) == n && s->tiered && s->n_mem == 1 && s->mem[0] == 0);
    CHECK(!loc_present(word(s, 3, 0)) && loc_present(word(s, 3, 1)));
    uint64_t idx = 3 * s->per_shard + 5;
    struct cxlp_view v;
    CHECK_OK(cxlp_store_read(s, idx, &v));
    CHECK(rec_ok(v.data, v.len, 1, seed, idx));
    uint64_t w = word(s, 3, 0);
    CHECK(loc_present(w) && (w & LOC_CACHE));
    const struct attach_tier *t0 = attach_tier(s->a, 0);
    CHECK((const uint8_t *)v.data >= t0->base + t0->data_off &&
          (const uint8_t *)v.data < t0->base + t0->data_off + t0->data_len);
    CHECK_OK(cxlp_pool_tiers(p, ti, 4, &nt));
    CHECK(ti[0].copies == 1 && ti[0].misses == 1 && ti[0].fetches == 1);
    CHECK(ti[0].bytes_in == ALIGN_UP(s->loc[3].len, 4096));
    /* the same record again: no second fetch */
    CHECK_OK(cxlp_store_read(s, idx + 1, &v));
    CHECK(rec_ok(v.data, v.len, 1, seed, idx + 1));
    CHECK_OK(cxlp_pool_tiers(p, ti, 4, &nt));
    CHECK(ti[0].fetches == 1);

    /* store_copy of a copy that is there: EEXIST; into the staged tier: refused */
    struct copy_stat cs;
    CHECK_RC(store_copy(s, 3, 0, 0, 0, NULL, &cs), CXLP_EEXIST);
    CHECK_RC(store_copy(s, 4, 1, 0, 0, NULL, &cs), CXLP_EARG);
    /* a fresh copy with O_DIRECT from the file */
    CHECK_OK(store_copy(s, 4, 0, FETCH_KEEP, 0, NULL, &cs));
    CHECK(cs.bytes == ALIGN_UP(s->loc[4].len, 4096));
    printf("staged %llu bytes, %llu with O_DIRECT\n", (unsigned long long)cs.bytes,
           (unsigned long long)cs.direct_bytes);
    CHECK(loc_present(word(s, 4, 0)) && !(word(s, 4, 0) & LOC_CACHE));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));

    /* drops: never the home copy; a dropped copy is deferred while the
     * store's views (its lifetime pin) may see it */
    cxlp_pool *wp;
    CHECK_OK(store_pool_rw(s, &wp));
    uint64_t bytes;
    CHECK_OK(pool_copy_drop(wp, s->ds.states_off, 3, 3u, 0, &bytes));
    CHECK(bytes == ALIGN_UP(s->loc[3].len, 4096));
    CHECK(!loc_present(word(s, 3, 0)) && loc_present(word(s, 3, 1)));
    CHECK_OK(pool_copy_drop(wp, s->ds.states_off, 3, 3u, 0, &bytes));
    CHECK(bytes == 0); /* the home copy stays */
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.deferred_bytes == ALIGN_UP(s->loc[3].len, 4096));
    /* the earlier view still reads the old copy: pinned */
    CHECK(rec_ok(v.data, v.len, 1, seed, idx + 1));
    uint64_t shard4_len = s->loc[4].len;
    CHECK_OK(cxlp_store_close(s));
    /* cache-only drop keeps the kept copy of shard 4 */
    CHECK_OK(cxlp_store_open(p, "d", &s));
    CHECK_OK(store_pool_rw(s, &wp));
    CHECK_OK(pool_copy_drop(wp, s->ds.states_off, 4, 1u, 1, &bytes));
    CHECK(bytes == 0 && loc_present(word(s, 4, 0)));
    CHECK_OK(pool_copy_drop(wp, s->ds.states_off, 4, 1u, 0, &bytes));
    CHECK(bytes == ALIGN_UP(shard4_len, 4096));
    /* nothing pins now: the next transaction frees both */
    CHECK_OK(cxlp_store_close(s));
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 0, 4096, &e));
    CHECK_OK(pool_unreserve(p, 0, e));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.deferred_bytes == 0);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));

    /* every record through misses, in a dram tier smaller than the dataset:
     * plain cxlp_store_read fills it and then says so */
    CHECK_OK(cxlp_store_open(p, "d", &s));
    int full = 0;
    for (uint64_t i = 0; i < n && !full; i += 64) {
        int rc = cxlp_store_read(s, i, &v);
        if (rc == CXLP_EFULL) {
            full = 1;
            CHECK(strstr(cxlp_errmsg(NULL), "no memory tier has room") != NULL);
            break;
        }
        CHECK_OK(rc);
        CHECK(rec_ok(v.data, v.len, 1, seed, i));
    }
    CHECK(full); /* 4 MiB of shards, 2 MiB of dram, nothing evicts */
    CHECK_OK(cxlp_store_close(s));

    /* removal frees every copy in every tier once unpinned */
    CHECK_OK(cxlp_pool_remove(p, "d"));
    CHECK_OK(pool_reserve(p, 0, 4096, &e));
    CHECK_OK(pool_unreserve(p, 0, e));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.n_datasets == 0 && st.deferred_bytes == 0 && st.used_bytes == 0);
    CHECK_OK(cxlp_pool_tiers(p, ti, 4, &nt));
    CHECK(ti[0].used == 0 && ti[1].used == 0);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));

    /* reopen: objects found by their specs; destroy removes them all */
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(pool));
    char path[300];
    snprintf(path, sizeof path, "/tmp/cxlp-%s.tier", pool);
    CHECK(!exists(path));
    snprintf(path, sizeof path, "/dev/shm/cxlp.%s.d", pool);
    CHECK(!exists(path));
}

/* A bad tier spec is refused with its tier named, before anything exists. */
static void refuse(const char *const *tiers, size_t n, int want, const char *msg)
{
    cxlp_pool *p;
    struct cxlp_pool_opts o = {.meta_bytes = 4 * MiB};
    int rc = cxlp_pool_create_tiered(pool, tiers, n, &o, &p);
    if (rc != want || !strstr(cxlp_errmsg(NULL), msg)) {
        fprintf(stderr, "got %d '%s', want %d with '%s'\n", rc, cxlp_errmsg(NULL), want, msg);
        CHECK(0);
    }
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/cxlp.%s", pool);
    CHECK(!exists(path));
    snprintf(path, sizeof path, "/tmp/cxlp-%s.tier", pool);
    CHECK(!exists(path));
    snprintf(path, sizeof path, "/dev/shm/cxlp.%s.d", pool);
    CHECK(!exists(path));
}

static void bad_input(void)
{
    names();
    char big[300], shm_nvme[200], same[300], small[200], remote[64];
    snprintf(big, sizeof big, "nvme=file:/tmp/cxlp-%s.tier:100P", pool);
    snprintf(shm_nvme, sizeof shm_nvme, "nvme=shm:%s.x:8M", pool);
    snprintf(same, sizeof same, "cxl=shm:%s.d:8M", pool);
    snprintf(small, sizeof small, "dram=shm:%s.d:1M", pool);
    snprintf(remote, sizeof remote, "remote=shm:8M");
    const char *order[] = {nvme, dram};
    refuse(order, 2, CXLP_EARG, "fastest first");
    const char *dup[] = {dram, same};
    refuse(dup, 2, CXLP_EARG, "same object as tier 0");
    char self[200];
    snprintf(self, sizeof self, "dram=shm:%s:8M", pool);
    const char *own[] = {self, nvme};
    refuse(own, 2, CXLP_EARG, "pool's own object");
    const char *tiny[] = {small, nvme};
    refuse(tiny, 2, CXLP_EARG, "smaller than a tier");
    const char *full[] = {dram, big};
    refuse(full, 2, CXLP_EFULL, "free on its filesystem");
    const char *nv[] = {dram, shm_nvme};
    refuse(nv, 2, CXLP_EARG, "an nvme tier is a file");
    const char *rem[] = {dram, remote};
    if (cxlp_remote_available())
        refuse(rem, 2, CXLP_EARG, "ucx://");
    else
        refuse(rem, 2, CXLP_EUNSUPPORTED, "no UCX");
    const char *rem_only[] = {"remote=ucx://127.0.0.1:1/p"};
    if (cxlp_remote_available())
        refuse(rem_only, 1, CXLP_EARG, "memory tier of this host");
    const char *nonode[] = {"cxl=numa:999:8M", nvme};
    refuse(nonode, 2, CXLP_ENODEV, "999");
    const char *nodev[] = {"cxl=devdax:/dev/dax97.3", nvme};
    refuse(nodev, 2, CXLP_ENODEV, "dax97.3");
    const char *nosize[] = {"dram=shm", nvme};
    refuse(nosize, 2, CXLP_EARG, "no size");
    const char *junk[] = {"ssd=file:/x:1G"};
    refuse(junk, 1, CXLP_EARG, "unknown kind");
    /* a metadata area too small for anything */
    cxlp_pool *p;
    const char *ok[] = {dram, nvme};
    struct cxlp_pool_opts o = {.meta_bytes = 4096};
    CHECK_RC(cxlp_pool_create_tiered(pool, ok, 2, &o, &p), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "meta_bytes") != NULL);
    /* an object left from before: EEXIST, and the other objects made for
     * this create are removed again */
    int fd = open("/dev/shm/cxlp.tierclash.d", O_CREAT | O_RDWR, 0600);
    CHECK(fd >= 0);
    close(fd);
    snprintf(pool, sizeof pool, "tierclash");
    snprintf(dram, sizeof dram, "dram=shm:tierclash.d:4M");
    const char *clash[] = {dram, nvme};
    o.meta_bytes = 4 * MiB;
    CHECK_RC(cxlp_pool_create_tiered(pool, clash, 2, &o, &p), CXLP_EEXIST);
    unlink("/dev/shm/cxlp.tierclash.d");
}

/* Metadata that does not grow with the catalog: a dataset of 10^5 shards
 * costs the catalog one record; its table and states are 56 bytes a shard
 * (two tiers); a location change flips a catalog of the same small size
 * and leaves the table and states extents where they are. */
static void meta_scale(void)
{
    names();
    const uint64_t n = 100000;
    char big[256];
    snprintf(big, sizeof big, "nvme=file:/tmp/cxlp-%s.tier:%llu", pool,
             (unsigned long long)(n * 4096 + (8 << 20)));
    const char *tiers[] = {dram, big};
    struct cxlp_pool_opts o = {.meta_bytes = 16 * MiB};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 2, &o, &p));
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 1, n * 4096, &e));
    struct pool_shard *sh = calloc(n, sizeof *sh);
    CHECK(sh);
    for (uint64_t k = 0; k < n; k++)
        sh[k] = (struct pool_shard){.off = e.off + k * 4096, .len = 4096, .n_records = 1};
    struct pool_dataset ds;
    memset(&ds, 0, sizeof ds);
    snprintf(ds.info.name, sizeof ds.info.name, "wide");
    ds.n_shards = ds.info.n_shards = (uint32_t)n;
    ds.info.n_records = n;
    CHECK_OK(pool_publish(p, &ds, sh));
    free(sh);
    struct cat c;
    uint64_t gen;
    CHECK_OK(cat_snapshot(pool_attach(p), &c, 0, &gen, pool_obj(p)));
    CHECK(c.n_ds == 1 && cat_encoded_size(&c) < 4096);
    CHECK(c.ds[0].table.len == n * 32 && c.ds[0].states.len == n * 3 * 8);
    struct cat_ds rec = c.ds[0];
    uint64_t before = cat_encoded_size(&c);
    cat_free(&c);
    /* a location change: a copy of shard 7 in dram, then dropped */
    struct pool_extent ce;
    CHECK_OK(pool_copy_reserve(p, rec.states.off, 7, 0, 0, &ce));
    CHECK_OK(pool_copy_place(p, rec.states.off, 7, 0, ce, 1, 0, NULL));
    uint64_t *w = attach_states(pool_attach(p), rec.states.off) + 7 * 3;
    CHECK(loc_present(w[1]) && loc_off(w[1]) == ce.off && loc_present(w[2]));
    CHECK_OK(cat_snapshot(pool_attach(p), &c, 0, &gen, pool_obj(p)));
    CHECK(cat_encoded_size(&c) <= before + sizeof(struct cat_def));
    CHECK(c.ds[0].table.off == rec.table.off && c.ds[0].states.off == rec.states.off);
    cat_free(&c);
    uint64_t bytes;
    CHECK_OK(pool_copy_drop(p, rec.states.off, 7, 1u, 0, &bytes));
    CHECK(bytes == 4096 && !loc_present(w[1]));
    CHECK_OK(pool_check(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(pool));
    printf("10^5 shards: catalog %llu bytes, table and states %llu bytes\n",
           (unsigned long long)before, (unsigned long long)(rec.table.len + rec.states.len));
}

/* A cxl tier on shm memory stands in for CXL: said so. */
static void emulation(void)
{
    names();
    char cxl[160];
    snprintf(cxl, sizeof cxl, "cxl=shm:%s.c:4M", pool);
    const char *tiers[] = {cxl, nvme};
    struct cxlp_pool_opts o = {.meta_bytes = 4 * MiB, .lease_slots = 16};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 2, &o, &p));
    struct cxlp_tier_info ti[2];
    size_t nt;
    CHECK_OK(cxlp_pool_tiers(p, ti, 2, &nt));
    CHECK(nt == 2 && ti[0].kind == CXLP_TIER_CXL && ti[0].emulated && !ti[1].emulated);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(pool));
}

/* cxlp_pool_concat on a pool of tiers: the parts' copies (a memory copy of
 * one part's shards, the home copies of all) become the new dataset's
 * without a byte moved; a store of a part opened before reads no stale
 * memory copy afterwards (its copies of records come from the home
 * copies, as do a store's of a dataset removed while it is open); verify
 * passes, nothing leaks. */
static void concat_tiered(void)
{
    names();
    snprintf(dram, sizeof dram, "dram=shm:%s.d:8M", pool); /* room for every shard */
    const char *tiers[] = {dram, nvme};
    struct cxlp_pool_opts o = {.meta_bytes = 4 * MiB, .lease_slots = 16};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 2, &o, &p));
    uint64_t na, nb;
    CHECK_OK(rec_ingest(p, "a", 1, 11, 1 * MiB, 256 * 1024, &na, NULL));
    CHECK_OK(rec_ingest(p, "b", 1, 11, 1 * MiB, 256 * 1024, &nb, NULL));
    CHECK_OK(cxlp_migrate(p, "a", "dram", NULL, NULL)); /* a's shards also in dram */
    cxlp_store *old;
    CHECK_OK(cxlp_store_open(p, "a", &old));
    size_t nt;
    uint64_t ca[2];
    CHECK_OK(cxlp_store_copies(old, ca, 2, &nt));
    CHECK(ca[0] == 4 && ca[1] == 4);
    const char *parts[] = {"a", "b"};
    CHECK_OK(cxlp_pool_concat(p, "ab", parts, 2));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "ab", &s));
    uint64_t c[2];
    CHECK_OK(cxlp_store_copies(s, c, 2, &nt));
    CHECK(c[0] == 4 && c[1] == 8); /* a's dram copies came along */
    CHECK(cxlp_store_count(s) == na + nb);
    uint8_t buf[4096];
    for (uint64_t i = 0; i < na + nb; i += 7) {
        uint64_t len;
        CHECK_OK(cxlp_store_read_copy(s, i, buf, sizeof buf, &len));
        CHECK(rec_ok(buf, len, 1, 11, i < na ? i : i - na));
    }
    /* the old store of "a" names no memory copy any more, and can place
     * none: a view of a record is refused, a copy of it is read from its
     * home copy (which the store's lease keeps) */
    CHECK_OK(cxlp_store_copies(old, ca, 2, &nt));
    CHECK(ca[0] == 0 && ca[1] == 4);
    struct cxlp_view v;
    CHECK_RC(cxlp_store_read(old, 5, &v), CXLP_ENOTFOUND);
    CHECK(strstr(cxlp_errmsg(NULL), "removed?"));
    for (uint64_t i = 0; i < na; i += 5) {
        uint64_t len;
        CHECK_OK(cxlp_store_read_copy(old, i, buf, sizeof buf, &len));
        CHECK(rec_ok(buf, len, 1, 11, i));
    }
    CHECK_OK(cxlp_store_copies(old, ca, 2, &nt));
    CHECK(ca[0] == 0 && ca[1] == 4);
    CHECK_OK(cxlp_store_close(old));
    /* "ab" removed while s has it open: the same, its records from home */
    CHECK_OK(cxlp_migrate(p, "ab", "nvme", NULL, NULL));
    CHECK_OK(cxlp_pool_remove(p, "ab"));
    for (uint64_t i = 3; i < na + nb; i += 11) {
        uint64_t len;
        CHECK_OK(cxlp_store_read_copy(s, i, buf, sizeof buf, &len));
        CHECK(rec_ok(buf, len, 1, 11, i < na ? i : i - na));
    }
    CHECK_RC(cxlp_store_read(s, 3, &v), CXLP_ENOTFOUND);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(pool));
    printf("concat on a pool of tiers: copies kept, old words retired\n");
}

int main(void)
{
    basic();
    emulation();
    bad_input();
    meta_scale();
    concat_tiered();
    printf("ok\n");
    return 0;
}
