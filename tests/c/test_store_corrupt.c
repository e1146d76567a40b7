/* One byte of a shard changed in the pool (found through pool.h): the data,
 * the index, the header. cxlp_store_verify and cxlp_pool_verify return
 * CXLP_ECORRUPT naming the dataset and the shard; reads never leave the
 * shard; restoring the byte makes everything pass again. */
#include "test.h"
#include "pool/pool.h"
#include "store/shard.h"

struct lines {
    int n, bad;
    char last_bad[1024];
};

static void collect(void *ctx, const char *line)
{
    struct lines *l = ctx;
    l->n++;
    if (strstr(line, "FAILED")) {
        l->bad++;
        snprintf(l->last_bad, sizeof l->last_bad, "%s", line);
    }
}

static void make(cxlp_pool *p, const char *name, int fixed)
{
    struct cxlp_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.fixed = fixed;
    sc.n_fields = 1;
    strcpy(sc.fields[0].name, "x");
    sc.fields[0].dtype = CXLP_DT_U8;
    if (fixed) {
        sc.fields[0].ndim = 1;
        sc.fields[0].shape[0] = 100;
    }
    struct cxlp_writer_opts o = {.shard_bytes = 32 << 10};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, name, &sc, &o, &w));
    uint8_t rec[300];
    for (int i = 0; i < 1000; i++) {
        memset(rec, i, sizeof rec);
        CHECK_OK(cxlp_writer_append(w, rec, fixed ? 100 : (uint64_t)(i % 300)));
    }
    CHECK_OK(cxlp_writer_commit(w));
}

/* Pool offset of shard k of name, and its length. */
static void locate(cxlp_pool *p, const char *name, uint64_t k, uint64_t *off, uint64_t *len)
{
    struct pool_dataset ds;
    struct pool_shard *sh;
    struct attach *a;
    uint64_t gen;
    CHECK_OK(pool_lookup(p, name, &ds, &sh, &a, &gen));
    CHECK(k < ds.n_shards);
    *off = sh[k].off;
    *len = sh[k].len;
    free(sh);
    attach_unpin(a, gen);
    attach_unref(a);
}

static void expect_verify_fails(cxlp_pool *p, const char *name, const char *shard_word,
                                int open_fails)
{
    cxlp_store *s;
    int rc = cxlp_store_open(p, name, &s);
    if (open_fails) {
        CHECK_RC(rc, CXLP_ECORRUPT);
        CHECK(strstr(cxlp_errmsg(p), name) && strstr(cxlp_errmsg(p), shard_word));
    } else {
        CHECK_OK(rc);
        CHECK_RC(cxlp_store_verify(s), CXLP_ECORRUPT);
        CHECK(strstr(cxlp_errmsg(s), name) && strstr(cxlp_errmsg(s), shard_word));
        printf("store_verify: %s\n", cxlp_errmsg(s));
        /* every read stays inside the shard or fails cleanly */
        for (uint64_t i = 0; i < cxlp_store_count(s); i++) {
            struct cxlp_view v;
            int r = cxlp_store_read(s, i, &v);
            CHECK(r == 0 || r == CXLP_ECORRUPT);
        }
        CHECK_OK(cxlp_store_close(s));
    }
    struct lines l = {0};
    CHECK_RC(cxlp_pool_verify(p, collect, &l), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(p), name) && strstr(cxlp_errmsg(p), shard_word));
    CHECK(l.bad == 1 && strstr(l.last_bad, name));
    CHECK(l.n >= 3);
    printf("pool_verify: %s\n", cxlp_errmsg(p));
}

int main(void)
{
    uint64_t seed = test_seed();
    const char *spec = test_name("storecorrupt");
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 64 << 20, NULL, &p));
    make(p, "fixed", 1);
    make(p, "var", 0);
    make(p, "other", 0);
    struct lines l = {0};
    CHECK_OK(cxlp_pool_verify(p, collect, &l));
    CHECK(l.bad == 0);
    uint8_t *base = pool_base_rw(p, 0);

    for (int round = 0; round < 2; round++) {
        const char *name = round ? "var" : "fixed";
        uint64_t off, len;
        locate(p, name, 1, &off, &len);
        struct shard sh;
        struct shard_col cols[SHARD_MAX_COLS];
        char err[512];
        CHECK_OK(shard_open(&sh, cols, SHARD_MAX_COLS, base + off, len, err, sizeof err));

        /* a data byte */
        uint64_t at = off + SHARD_DATA_OFF + test_rand(&seed) % cols[0].data_len;
        base[at] ^= 0x40;
        expect_verify_fails(p, name, "shard 1", 0);
        base[at] ^= 0x40;
        CHECK_OK(cxlp_pool_verify(p, NULL, NULL));

        /* a header byte */
        at = off + offsetof(struct shard_hdr2, used);
        base[at] ^= 0x01;
        expect_verify_fails(p, name, "shard 1", 1);
        base[at] ^= 0x01;

        if (round == 1) {
            /* an index byte: a delta (read path and checksum) and a
             * directory entry (refused at open) */
            at = off + cols[0].index_off + cols[0].index_len - 1;
            base[at] ^= 0xff;
            expect_verify_fails(p, name, "shard 1", 0);
            base[at] ^= 0xff;
            at = off + cols[0].index_off + 15; /* width byte of block 0 */
            base[at] ^= 0x80;
            expect_verify_fails(p, name, "shard 1", 1);
            base[at] ^= 0x80;
        }
        CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    }

    /* random damage anywhere in a shard of either dataset: every call ends
     * in 0 or an error code (under ASan: without touching memory outside
     * the shard), and restoring the bytes restores a clean verify */
    int caught = 0, rounds = test_sanitized() ? 100 : 400;
    for (int r = 0; r < rounds; r++) {
        const char *name = r % 2 ? "var" : "fixed";
        uint64_t off, len;
        locate(p, name, test_rand(&seed) % 3, &off, &len);
        uint64_t at[4];
        uint8_t old[4];
        int nb = 1 + (int)(test_rand(&seed) % 4);
        for (int k = 0; k < nb; k++) {
            /* half the hits in the header and index, where structure lives */
            uint64_t h = test_rand(&seed);
            at[k] = off + (h % 2 ? (h >> 1) % 128 : (h >> 1) % len);
            if (h % 4 == 3)
                at[k] = off + len - 1 - (h >> 2) % MIN(len, 600);
            old[k] = base[at[k]];
            base[at[k]] ^= (uint8_t)(1 + (h >> 8) % 255);
        }
        cxlp_store *s;
        int rc = cxlp_store_open(p, name, &s);
        if (rc == 0) {
            for (uint64_t i = 0; i < cxlp_store_count(s); i++) {
                struct cxlp_view v;
                int r2 = cxlp_store_read(s, i, &v);
                CHECK(r2 == 0 || r2 == CXLP_ECORRUPT);
            }
            rc = cxlp_store_verify(s);
            CHECK_OK(cxlp_store_close(s));
        }
        CHECK(rc == 0 || rc == CXLP_ECORRUPT || rc == CXLP_EFORMAT || rc == CXLP_ELAYOUT);
        caught += rc != 0;
        for (int k = nb; k-- > 0;)
            base[at[k]] = old[k];
    }
    printf("random damage: %d of %d rounds caught (the rest hit padding)\n", caught, rounds);
    CHECK(caught > rounds / 2);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    printf("ok\n");
    return 0;
}
