/* Staging units (store/unit.c, pool/units.c): a dataset whose shards are
 * larger than its pool's memory tier stages in runs of records. Every
 * record read through copies of units, of fixed-size, variable-size and
 * three-field datasets; no whole shard copied; the copies verified, dropped,
 * removed with the dataset and accounted for; a flipped byte of a block or
 * of a page of sums refused before any copy is published; shards without
 * block sums staged whole as before. */
#include <fcntl.h>
#include <sys/stat.h>

#include "test.h"
#include "records.h"
#include "shard_util.h"
#include "pool/loc.h"
#include "pool/pool_internal.h"
#include "store/fetch.h"
#include "store/store.h"
#include "store/unit.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)

static uint64_t seed;
static char pool[128], dram[160], nvme[300], nvme_path[200];

static cxlp_pool *make_pool(const char *dram_size)
{
    snprintf(pool, sizeof pool, "%s", test_name("unit"));
    snprintf(dram, sizeof dram, "dram=shm:%s.d:%s", pool, dram_size);
    snprintf(nvme_path, sizeof nvme_path, "/tmp/cxlp-%s.tier", pool);
    snprintf(nvme, sizeof nvme, "nvme=file:%s:96M", nvme_path);
    const char *tiers[] = {dram, nvme};
    struct cxlp_pool_opts o = {.meta_bytes = 4 * MiB, .lease_slots = 16};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 2, &o, &p));
    return p;
}

static void drop_pool(cxlp_pool *p)
{
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(pool_check(p, NULL, NULL));
    cxlp_pool_close(p);
    CHECK_OK(cxlp_pool_destroy(pool));
}

static uint64_t shard_word(cxlp_store *s, uint64_t k, uint32_t t)
{
    return __atomic_load_n(&s->states[k * s->stride + 1 + t], __ATOMIC_ACQUIRE);
}

/* Copies of units and of whole shards in tier t. */
static void copies(cxlp_store *s, uint32_t t, uint64_t *units, uint64_t *shards)
{
    *units = *shards = 0;
    for (uint64_t k = 0; k < s->n_shards; k++)
        *shards += loc_present(shard_word(s, k, t));
    for (uint64_t u = 0; s->units && u < s->units->pu.n_units; u++)
        *units += loc_present(store_unit_word(s, u, t));
}

/* Every id maps to the unit whose span holds it; spans tile each shard. */
static void check_spans(cxlp_store *s)
{
    const struct store_units *su = s->units;
    CHECK(su && su->pu.n_units >= s->n_shards);
    uint64_t id = 0;
    for (uint64_t u = 0; u < su->pu.n_units; u++) {
        uint64_t k, r0, r1;
        store_unit_span(s, u, &k, &r0, &r1);
        CHECK(r0 < r1 && s->first[k] + r0 == id);
        CHECK(r1 - r0 <= su->pu.per_unit);
        for (; id < s->first[k] + r1; id++)
            CHECK(store_unit_of(s, id) == u);
    }
    CHECK(id == s->count);
}

/* The three kinds of dataset, each in shards far larger than the tier's
 * staging unit, read whole through copies of units. */
static void read_all(void)
{
    cxlp_pool *p = make_pool("8M"); /* 6 MiB of data: units of 256 KiB */
    uint64_t n_fx, n_vr, n_mv = 60000;
    CHECK_OK(rec_ingest(p, "fx", 1, seed, 8 * MiB, 4 * MiB, &n_fx, NULL));
    CHECK_OK(rec_ingest(p, "vr", 0, seed, 8 * MiB, 4 * MiB, &n_vr, NULL));
    CHECK_OK(mv_write(p, "mv", n_mv, seed, 2 * MiB));
    const char *names[] = {"fx", "vr", "mv"};
    for (int d = 0; d < 3; d++) {
        cxlp_store *s;
        CHECK_OK(cxlp_store_open(p, names[d], &s));
        uint64_t R, bytes;
        CHECK_OK(store_unit_rule(s, 0, &R, &bytes));
        /* a 4.5 MiB budget: units of 64 KiB */
        CHECK(R > 0 && bytes >= 48 * KiB && bytes <= 96 * KiB);
        if (d == 0) /* equal shards of 4096 records: units divide them */
            CHECK(R == 64 && s->per_shard % R == 0);
        printf("%s: units of %" PRIu64 " records, about %" PRIu64 " bytes\n", names[d], R, bytes);
        CHECK(!s->units);
        /* ds[i]: a miss makes the units record, then copies of units */
        if (d < 2) {
            uint64_t n = d ? n_vr : n_fx;
            static uint8_t buf[REC_VAR_MAX];
            for (uint64_t i = 0; i < n; i++) {
                uint64_t len;
                CHECK_OK(cxlp_store_read_copy(s, i, buf, sizeof buf, &len));
                CHECK(rec_ok(buf, len, d == 0, seed, i));
            }
        } else {
            CHECK(mv_read_ok(s, 0, n_mv, seed) == n_mv);
        }
        CHECK(s->units && s->units->pu.per_unit == R);
        check_spans(s);
        uint64_t nu, ns;
        copies(s, 0, &nu, &ns);
        printf("%s: %" PRIu64 " shards, %" PRIu64 " units of %" PRIu64 " records, %" PRIu64
               " in dram, no whole shard\n", names[d], s->n_shards, s->units->pu.n_units, R, nu);
        CHECK(ns == 0 && nu > 0);
        /* views held until close read through copies of units too */
        struct cxlp_view v;
        if (d < 2) {
            CHECK_OK(cxlp_store_read(s, 5, &v));
            CHECK(rec_ok(v.data, v.len, d == 0, seed, 5));
        }
        uint64_t n_copies;
        CHECK_OK(store_units_verify(s, NULL, NULL, &n_copies));
        CHECK(n_copies == nu);
        /* a second store of the dataset finds the units the first made */
        cxlp_store *s2;
        CHECK_OK(cxlp_store_open(p, names[d], &s2));
        CHECK_OK(store_units_use(s2, 0, 0));
        CHECK(s2->units->pu.n_units == s->units->pu.n_units);
        CHECK_OK(cxlp_store_close(s2));
        /* its copies dropped: the next dataset's have the tier */
        cxlp_pool *wp;
        CHECK_OK(store_pool_rw(s, &wp));
        uint64_t dropped = 0;
        for (uint64_t u = 0; u < s->units->pu.n_units; u++) {
            uint64_t b;
            CHECK_OK(pool_copy_drop(wp, s->ds.states_off, POOL_UNIT_TARGET | u, 1u, 1, &b));
            dropped += b;
        }
        CHECK(dropped >= nu * 4096);
        copies(s, 0, &nu, &ns);
        CHECK(nu == 0);
        CHECK_OK(cxlp_store_close(s));
        CHECK_OK(pool_check(p, NULL, NULL));
    }
    CHECK_OK(pool_check(p, NULL, NULL));
    /* the catalog lists units now: it says so by its magic */
    CHECK(*(const uint64_t *)(attach_base(pool_attach(p)) + pool_attach(p)->L.cat_off +
                              (pool_attach(p)->hdr->gen >> POOL_EPOCH_BITS & 1) *
                                  pool_attach(p)->L.cat_bytes) == CAT_MAGIC_UNITS);
    /* removed with its units: the copies and words freed once nothing can
     * see them, every byte accounted for at each step */
    struct cxlp_pool_stat a0, a1;
    CHECK_OK(cxlp_pool_stat(p, &a0));
    for (int d = 0; d < 3; d++) {
        CHECK_OK(cxlp_pool_remove(p, names[d]));
        CHECK_OK(pool_check(p, NULL, NULL));
    }
    struct pool_extent e; /* a transaction: the reclaim frees what no lease pins */
    CHECK_OK(pool_reserve(p, 0, 4096, &e));
    CHECK_OK(pool_unreserve(p, 0, e));
    CHECK_OK(cxlp_pool_stat(p, &a1));
    CHECK(a1.deferred_bytes == 0 && a1.reserved_bytes == 0 && a1.free_bytes == a1.data_bytes);
    printf("removed: %llu bytes free of %llu again\n", (unsigned long long)a1.free_bytes,
           (unsigned long long)a1.data_bytes);
    /* and the catalog is one a build without units reads again */
    CHECK(*(const uint64_t *)(attach_base(pool_attach(p)) + pool_attach(p)->L.cat_off +
                              (pool_attach(p)->hdr->gen >> POOL_EPOCH_BITS & 1) *
                                  pool_attach(p)->L.cat_bytes) == CAT_MAGIC);
    drop_pool(p);
}

/* Copies of units dropped and placed again, kept, and a second tier's. */
static void place_drop(void)
{
    cxlp_pool *p = make_pool("8M");
    uint64_t n;
    CHECK_OK(rec_ingest(p, "fx", 1, seed, 8 * MiB, 4 * MiB, &n, NULL));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "fx", &s));
    CHECK_OK(store_units_use(s, 0, 1));
    cxlp_pool *wp;
    CHECK_OK(store_pool_rw(s, &wp));
    const uint64_t so = s->ds.states_off;
    struct copy_stat cs;
    CHECK_OK(store_unit_copy(s, 3, 0, 0, 0, NULL, &cs));
    uint64_t len = s->units->pu.words[3 * s->units->pu.stride];
    CHECK(len && cs.bytes > 0 && len % 4096 == 0);
    printf("unit 3: a copy of %" PRIu64 " bytes (%" PRIu64 " read, %" PRIu64 " with O_DIRECT)\n",
           len, cs.bytes, cs.direct_bytes);
    CHECK(loc_present(store_unit_word(s, 3, 0)) && (store_unit_word(s, 3, 0) & LOC_CACHE));
    CHECK_RC(store_unit_copy(s, 3, 0, 0, 0, NULL, &cs), CXLP_EEXIST);
    /* into the home: refused */
    CHECK_RC(store_unit_copy(s, 3, 1, 0, 0, NULL, &cs), CXLP_EARG);
    struct pool_extent e;
    CHECK_RC(pool_copy_reserve(wp, so, POOL_UNIT_TARGET | 4, 1, 8192, &e), CXLP_EARG);
    CHECK_RC(pool_copy_reserve(wp, so, POOL_UNIT_TARGET | 3, 0, len + 4096, &e), CXLP_EARG);
    /* kept: a cache-only drop leaves it */
    CHECK_RC(store_unit_copy(s, 3, 0, FETCH_KEEP, 0, NULL, &cs), CXLP_EEXIST);
    CHECK(!(store_unit_word(s, 3, 0) & LOC_CACHE));
    uint64_t bytes;
    CHECK_OK(pool_copy_drop(wp, so, POOL_UNIT_TARGET | 3, 1u, 1, &bytes));
    CHECK(bytes == 0 && loc_present(store_unit_word(s, 3, 0)));
    /* a unit's last copy may go: its shard's home copy holds it */
    CHECK_OK(pool_copy_drop(wp, so, POOL_UNIT_TARGET | 3, 3u, 0, &bytes));
    CHECK(bytes == len && !loc_present(store_unit_word(s, 3, 0)));
    CHECK_OK(pool_check(p, NULL, NULL));
    /* placed again: the same length, read from the store's kept header */
    CHECK_OK(store_unit_copy(s, 3, 0, 0, 0, NULL, &cs));
    CHECK(s->units->pu.words[3 * s->units->pu.stride] == len);
    /* a whole copy of the shard makes its units readable from it */
    uint64_t k, r0, r1;
    store_unit_span(s, 9, &k, &r0, &r1);
    CHECK_OK(store_copy(s, k, 0, FETCH_KEEP, 0, NULL, &cs));
    struct shard sh;
    struct shard_col cols[SHARD_MAX_COLS];
    uint32_t t;
    CHECK_RC(store_unit_locate(s, 9, &sh, cols, &t), CXLP_ENOTFOUND);
    struct cxlp_view v;
    uint64_t pin = attach_pin_epoch(s->a);
    CHECK_OK(store_read_pinned(s, s->first[k] + r0, NULL, 1, &v));
    CHECK(rec_ok(v.data, v.len, 1, seed, s->first[k] + r0));
    attach_unpin_epoch(s->a, pin);
    /* a unit copied from that memory copy: no I/O */
    CHECK_OK(pool_copy_drop(wp, so, k, 1u, 0, &bytes));
    CHECK_OK(store_copy(s, k, 0, 0, 0, NULL, &cs)); /* cache this time */
    CHECK_OK(store_unit_copy(s, 9, 0, FETCH_KEEP, 0, NULL, &cs));
    CHECK(cs.direct_bytes == 0 && cs.bytes > 0);
    CHECK_OK(store_unit_locate(s, 9, &sh, cols, &t));
    for (uint64_t r = r0; r < r1; r++) {
        CHECK_OK(store_fields_at(s, &sh, k, s->first[k] + r, NULL, 1, &v));
        CHECK(rec_ok(v.data, v.len, 1, seed, s->first[k] + r));
    }
    /* a record of another unit is outside this copy's windows */
    CHECK_RC(store_fields_at(s, &sh, k, s->first[k] + (r1 % s->per_shard), NULL, 1, &v),
             CXLP_ECORRUPT);
    uint64_t n_copies;
    CHECK_OK(store_units_verify(s, NULL, NULL, &n_copies));
    CHECK(n_copies == 2);
    CHECK_OK(cxlp_store_close(s));
    drop_pool(p);
}

/* A flipped byte in a block of the home copy, or in a page of its sums:
 * the copy of the unit that needs it is refused, naming the block or page,
 * and nothing is published; other units stage. */
static void corrupt(void)
{
    cxlp_pool *p = make_pool("8M");
    uint64_t n;
    CHECK_OK(rec_ingest(p, "fx", 1, seed, 8 * MiB, 4 * MiB, &n, NULL));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "fx", &s));
    CHECK_OK(store_units_use(s, 0, 1));
    /* shard 1's home copy: a byte of unit ua's records, a byte of the page
     * of sums unit ub's blocks need (a page of 512 sums serves 2 MiB) */
    const uint64_t u1 = s->units->ufirst[1], ua = u1 + 4, ub = u1 + 40;
    uint64_t home = loc_off(shard_word(s, 1, 1)), k, r0, r1;
    struct shard g;
    struct shard_col gc[SHARD_MAX_COLS];
    uint8_t *page;
    CHECK(posix_memalign((void **)&page, 4096, 4096) == 0);
    CHECK_OK(store_read_head(s, 1, page, &g, gc));
    CHECK(g.sums_off); /* 4 MiB shards of 4 KiB blocks: a sums area */
    store_unit_span(s, ua, &k, &r0, &r1);
    CHECK(k == 1);
    uint64_t at_rec = gc[0].data_off + (r0 + 1) * REC_FIXED_SIZE + 100;
    store_unit_span(s, ub, &k, &r0, &r1);
    CHECK(k == 1 && (gc[0].data_off + r0 * REC_FIXED_SIZE) >> g.bsum_shift >= SHARD_PAGE_SUMS);
    uint64_t b = (gc[0].data_off + r0 * REC_FIXED_SIZE) >> g.bsum_shift;
    uint64_t at_sum = g.sums_off + b * 8 + 3;
    int fd = open(nvme_path, O_RDWR);
    CHECK(fd >= 0);
    uint8_t c;
    CHECK(pread(fd, &c, 1, (off_t)(home + at_rec)) == 1);
    c ^= 0x10;
    CHECK(pwrite(fd, &c, 1, (off_t)(home + at_rec)) == 1);
    CHECK(pread(fd, &c, 1, (off_t)(home + at_sum)) == 1);
    c ^= 0x01;
    CHECK(pwrite(fd, &c, 1, (off_t)(home + at_sum)) == 1);
    close(fd);
    struct copy_stat cs;
    CHECK_RC(store_unit_copy(s, ua, 0, 0, 0, NULL, &cs), CXLP_ECORRUPT);
    printf("refused: %s\n", cxlp_errmsg(NULL));
    CHECK(strstr(cxlp_errmsg(NULL), "block") && strstr(cxlp_errmsg(NULL), "shard 1"));
    CHECK_RC(store_unit_copy(s, ub, 0, 0, 0, NULL, &cs), CXLP_ECORRUPT);
    printf("refused: %s\n", cxlp_errmsg(NULL));
    CHECK(strstr(cxlp_errmsg(NULL), "page") && strstr(cxlp_errmsg(NULL), "sums"));
    CHECK(!loc_present(store_unit_word(s, ua, 0)) && !loc_present(store_unit_word(s, ub, 0)));
    /* the rest of the shard stages */
    CHECK_OK(store_unit_copy(s, u1 + 1, 0, 0, 0, NULL, &cs));
    /* a read of the bad record fails naming it; nothing is left reserved */
    uint8_t buf[REC_FIXED_SIZE];
    uint64_t len;
    store_unit_span(s, ua, &k, &r0, &r1);
    CHECK_RC(cxlp_store_read_copy(s, s->first[1] + r0 + 1, buf, sizeof buf, &len), CXLP_ECORRUPT);
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 0);
    free(page);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(pool_check(p, NULL, NULL));
    cxlp_pool_close(p);
    CHECK_OK(cxlp_pool_destroy(pool));
}

/* Shards of an earlier format: 3 (blocks of 64 KiB and more) stage in
 * units; 2 (no block sums) in whole shards, as before. */
static void formats(void)
{
    cxlp_pool *p = make_pool("8M");
    uint64_t n;
    /* shards of 1.5 MiB: sums in the header page, as shard_downgrade needs */
    CHECK_OK(rec_ingest(p, "v3", 0, seed, 6 * MiB, 1536 * KiB, &n, NULL));
    CHECK_OK(rec_ingest(p, "v2", 0, seed, 3 * MiB, 1536 * KiB, &n, NULL));
    const char *names[] = {"v3", "v2"};
    for (int d = 0; d < 2; d++) {
        cxlp_store *s;
        CHECK_OK(cxlp_store_open(p, names[d], &s));
        for (uint64_t k = 0; k < s->n_shards; k++) {
            uint64_t w = shard_word(s, k, 1);
            /* the nvme tier is a file: rewrite the shard in its file */
            int fd = open(nvme_path, O_RDWR);
            CHECK(fd >= 0);
            uint64_t len = s->loc[k].len;
            uint8_t *sh = malloc(ALIGN_UP(len, 4096));
            CHECK(pread(fd, sh, len, (off_t)loc_off(w)) == (ssize_t)len);
            shard_downgrade(sh, d == 0 ? SHARD_VERSION_V3 : SHARD_VERSION_V2);
            CHECK(pwrite(fd, sh, len, (off_t)loc_off(w)) == (ssize_t)len);
            close(fd);
            free(sh);
        }
        CHECK_OK(cxlp_store_close(s));
        CHECK_OK(cxlp_store_open(p, names[d], &s));
        uint64_t R, bytes;
        CHECK_OK(store_unit_rule(s, 0, &R, &bytes));
        CHECK(d == 0 ? R > 0 : R == 0);
        static uint8_t buf[REC_VAR_MAX];
        for (uint64_t i = 0; i < s->count; i++) {
            uint64_t len;
            CHECK_OK(cxlp_store_read_copy(s, i, buf, sizeof buf, &len));
            CHECK(rec_ok(buf, len, 0, seed, i));
        }
        CHECK(d == 0 ? s->units != NULL : s->units == NULL);
        printf("format %d: %s\n", d == 0 ? 3 : 2, d == 0 ? "units" : "whole shards or home reads");
        CHECK_OK(cxlp_store_close(s));
    }
    drop_pool(p);
}


/* One epoch of dataset name (fixed 1 KiB records or variable ones) in a
 * block order of blocks of per records, window W, under policy: every
 * record once and intact. The loader's stats in *st, the bytes the home
 * tier gave in *home. */
static void epoch(cxlp_pool *p, const char *name, int fixed, uint64_t per, uint64_t W,
                  int policy, uint64_t ep, struct cxlp_loader_stats *st, uint64_t *home)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    uint64_t n = cxlp_store_count(s);
    struct cxlp_sampler_config cfg = {.kind = CXLP_ORDER_BLOCK, .n = n, .seed = seed,
                                      .epoch = ep, .shard_size = per, .window = W, .world = 1};
    struct cxlp_loader_opts o = {.batch_size = 32, .threads = 2, .tier_policy = policy};
    struct cxlp_tier_info t0[2], t1[2];
    size_t nt;
    CHECK_OK(cxlp_pool_tiers(p, t0, 2, &nt));
    cxlp_sampler *sm;
    cxlp_loader *l;
    CHECK_OK(rec_loader(s, fixed, &cfg, o, &sm, &l));
    uint8_t *seen = calloc(n, 1);
    uint64_t got;
    char what[96];
    snprintf(what, sizeof what, "%s (%s)", name, cxlp_policy_name(policy));
    int rc = rec_drain(l, seen, n, fixed, seed, &got, what);
    if (rc < 0)
        fprintf(stderr, "loader: %s\n", cxlp_errmsg(l));
    CHECK_OK(rc);
    CHECK(got == n);
    CHECK_OK(cxlp_loader_stats(l, st));
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
    CHECK_OK(cxlp_pool_tiers(p, t1, 2, &nt));
    /* what the home gave: copies' reads and partial reads */
    (void)t0;
    (void)t1;
    *home = st->bytes_staged + st->partial_bytes;
    CHECK_OK(cxlp_store_close(s));
}

/* Loaders over datasets in shards 8x the staging budget: the engine stages
 * units, every policy delivers every record once and intact, reading about
 * the dataset from the home per epoch, and no whole shard is copied. */
static void loaders(void)
{
    cxlp_pool *p = make_pool("32M"); /* budget 22.5 MiB: units of 256 KiB */
    uint64_t n_fx, n_vr;
    CHECK_OK(rec_ingest(p, "fx", 1, seed, 48 * MiB, 16 * MiB, &n_fx, NULL));
    CHECK_OK(rec_ingest(p, "vr", 0, seed, 24 * MiB, 12 * MiB, &n_vr, NULL));
    const char *names[] = {"fx", "vr"};
    const int policies[] = {CXLP_POLICY_LOOKAHEAD, CXLP_POLICY_STREAMING, CXLP_POLICY_LRU,
                            CXLP_POLICY_HOT_FIRST, CXLP_POLICY_FULL_PREFETCH};
    for (int d = 0; d < 2; d++) {
        cxlp_store *s;
        CHECK_OK(cxlp_store_open(p, names[d], &s));
        uint64_t R, bytes, stored = s->ds.info.stored_bytes;
        CHECK_OK(store_unit_rule(s, 0, &R, &bytes));
        uint64_t budget = attach_tier(s->a, 0)->data_len / 4 * 3, W = budget / 2 / bytes;
        CHECK_OK(cxlp_store_close(s));
        for (size_t k = 0; k < sizeof policies / sizeof *policies; k++) {
            for (uint64_t ep = 0; ep < 2; ep++) {
                struct cxlp_loader_stats st;
                uint64_t home;
                epoch(p, names[d], d == 0, R, W, policies[k], ep, &st, &home);
                printf("%s %s epoch %llu: units of %llu records, %llu staged ahead, %llu on a "
                       "miss, %llu placed, %llu partial reads; home read %.2fx the dataset\n",
                       names[d], cxlp_policy_name(policies[k]), (unsigned long long)ep,
                       (unsigned long long)st.unit_records, (unsigned long long)st.prefetched,
                       (unsigned long long)st.fetched, (unsigned long long)st.placed,
                       (unsigned long long)st.partial_reads, (double)home / (double)stored);
                CHECK(st.unit_records == R && st.records == (d ? n_vr : n_fx));
                /* each unit once, with its blocks' pages of sums and its
                 * records' index entries: a few KiB of 256 KiB; and the
                 * few a miss evicts before their use and stages again, as
                 * many as the consumer's timing makes (2 CPUs shared by
                 * both loaders' threads: up to 1.05x seen, 1.11x with
                 * other work on them) */
                CHECK(home <= stored * 115 / 100);
                if (policies[k] == CXLP_POLICY_LOOKAHEAD || policies[k] == CXLP_POLICY_STREAMING)
                    CHECK(st.prefetched > st.fetched || st.prefetched + st.fetched < 8);
            }
            cxlp_store *c;
            CHECK_OK(cxlp_store_open(p, names[d], &c));
            uint64_t nu, ns;
            CHECK_OK(store_units_use(c, 0, 0));
            copies(c, 0, &nu, &ns);
            CHECK(ns == 0 && (nu > 0 || policies[k] == CXLP_POLICY_STREAMING));
            CHECK_OK(cxlp_store_close(c));
            CHECK_OK(cxlp_migrate(p, names[d], "nvme", NULL, NULL)); /* cold again */
        }
    }
    drop_pool(p);
}

/* How many items a stager (a staging engine no loader reads from) of
 * lookahead stages ahead of a block order's first ids once it has stopped. */
static uint64_t staged_ahead(cxlp_pool *p, const char *name, uint64_t per, uint64_t W,
                             struct cxlp_loader_stats *ss)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    struct cxlp_sampler_config cfg = {.kind = CXLP_ORDER_BLOCK, .n = cxlp_store_count(s),
                                      .seed = seed, .shard_size = per, .window = W, .world = 1};
    cxlp_sampler *sm;
    CHECK_OK(cxlp_sampler_create(&cfg, &sm));
    struct cxlp_loader_opts o = {.batch_size = 32, .tier_policy = CXLP_POLICY_LOOKAHEAD};
    cxlp_stager *st;
    CHECK_OK(cxlp_stager_create(s, &o, rec_sampler_fn, sm, &st));
    uint64_t last = UINT64_MAX;
    for (int still = 0; still < 5;) { /* stopped: no change for 0.5 s */
        usleep(100 * 1000);
        CHECK_OK(cxlp_stager_stats(st, ss));
        still = ss->prefetched == last ? still + 1 : 0;
        last = ss->prefetched;
    }
    cxlp_stager_free(st);
    cxlp_sampler_free(sm);
    CHECK_OK(cxlp_store_close(s));
    return last;
}

/* A policy's kept copies, then lookahead: the copies another loader kept
 * in the staging tier count in the budget and go when lookahead needs the
 * room, so it stages as far ahead as on a clean tier (before units, a
 * tier full of full_prefetch's kept copies let lookahead stage 6 shards
 * ahead instead of 44). migrate's dropped bytes are right. */
static void kept(void)
{
    cxlp_pool *p = make_pool("8M");
    uint64_t n;
    CHECK_OK(rec_ingest(p, "fx", 1, seed, 24 * MiB, 8 * MiB, &n, NULL));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "fx", &s));
    uint64_t R, bytes;
    CHECK_OK(store_unit_rule(s, 0, &R, &bytes));
    uint64_t budget = attach_tier(s->a, 0)->data_len / 4 * 3, W = budget / 2 / bytes;
    CHECK_OK(cxlp_store_close(s));
    struct cxlp_loader_stats clean, fp, after;
    uint64_t home;
    /* an epoch first, so that both stagers know every unit's length */
    epoch(p, "fx", 1, R, W, CXLP_POLICY_LOOKAHEAD, 0, &clean, &home);
    CHECK_OK(cxlp_migrate(p, "fx", "nvme", NULL, NULL));
    uint64_t a0 = staged_ahead(p, "fx", R, W, &clean);
    epoch(p, "fx", 1, R, W, CXLP_POLICY_FULL_PREFETCH, 0, &fp, &home);
    CHECK(fp.placed > 0);
    uint64_t a1 = staged_ahead(p, "fx", R, W, &after);
    printf("lookahead stages %llu units ahead on a clean tier; after full_prefetch kept %llu, "
           "%llu ahead (%llu bytes of their kept copies counted, %llu evicted)\n",
           (unsigned long long)a0, (unsigned long long)fp.placed, (unsigned long long)a1,
           (unsigned long long)after.kept_bytes, (unsigned long long)after.kept_evicted);
    CHECK(a0 > 2 * W / 3 && after.kept_evicted > 0);
    /* as far, within what timing moves it (0.9 seen; before, 0.14) */
    CHECK(a1 * 10 >= a0 * 7 && a1 * 10 <= a0 * 13);
    /* migrate: to the home; it says what it dropped, copies of units too */
    CHECK_OK(cxlp_store_open(p, "fx", &s));
    CHECK_OK(store_units_use(s, 0, 0));
    uint64_t nu, ns;
    copies(s, 0, &nu, &ns);
    uint64_t unit_bytes = 0;
    for (uint64_t u = 0; u < s->units->pu.n_units; u++)
        if (loc_present(store_unit_word(s, u, 0)))
            unit_bytes += s->units->pu.words[u * s->units->pu.stride];
    CHECK(nu > 0 && unit_bytes > 0);
    struct cxlp_migrate_stat ms;
    CHECK_OK(cxlp_migrate(p, "fx", "nvme", NULL, &ms));
    CHECK(ms.bytes_dropped == unit_bytes);
    copies(s, 0, &nu, &ns);
    CHECK(nu == 0 && ns == 0);
    CHECK_OK(cxlp_store_close(s));
    drop_pool(p);
}

int main(void)
{
    seed = test_seed();
    loaders();
    kept();
    read_all();
    place_drop();
    corrupt();
    formats();
    printf("ok\n");
    return 0;
}
