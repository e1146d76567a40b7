/* Running out: a pool with no extent large enough (CXLP_EFULL) and a
 * catalog slot with no room (CXLP_ECATFULL) both leave the pool exactly as
 * it was; publish refuses extents the caller does not hold. */
#include "test_pool_util.h"

#define MiB (1ull << 20)

static void same_stat(const struct cxlp_pool_stat *a, const struct cxlp_pool_stat *b)
{
    CHECK(a->generation == b->generation);
    CHECK(a->free_bytes == b->free_bytes && a->largest_free == b->largest_free);
    CHECK(a->used_bytes == b->used_bytes && a->reserved_bytes == b->reserved_bytes);
    CHECK(a->deferred_bytes == b->deferred_bytes && a->n_datasets == b->n_datasets);
}

static void pool_full(void)
{
    const char *name = test_name("full");
    struct cxlp_pool_opts o = {.catalog_bytes = 16384, .lease_slots = 4};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(name, 8 * MiB, &o, &p));
    struct cxlp_pool_stat st0, st;
    CHECK_OK(cxlp_pool_stat(p, &st0));
    CHECK(st0.data_bytes == 6 * MiB);
    struct pool_extent e;
    CHECK_RC(pool_reserve(p, 0, 7 * MiB, &e), CXLP_EARG); /* larger than the data area */
    CHECK_OK(tp_publish(p, "a", 2, 2 * MiB, NULL));
    CHECK_OK(cxlp_pool_stat(p, &st0));
    CHECK(st0.free_bytes == 2 * MiB - tp_meta(2)); /* and its shard table and states */
    CHECK_RC(pool_reserve(p, 0, 2 * MiB + 1, &e), CXLP_EFULL);
    const char *m = cxlp_errmsg(pool_obj(p));
    CHECK(strstr(m, name) && strstr(m, "no free extent"));
    CHECK_OK(cxlp_pool_stat(p, &st));
    same_stat(&st0, &st);
    /* a dataset that does not fit fails part way through its reservations
     * and the helper returns them: nothing changed but the generation */
    CHECK_RC(tp_publish(p, "b", 2, 1536 * 1024, NULL), CXLP_EFULL);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.free_bytes == st0.free_bytes && st.reserved_bytes == 0);
    tp_check(p);

    /* fragmentation: two 1 MiB holes do not make room for 2 MiB (each
     * dataset: a shard and its table and states, 1 MiB together) */
    CHECK_OK(cxlp_pool_remove(p, "a"));
    const uint64_t c_len = 1 * MiB - tp_meta(1);
    CHECK_OK(tp_publish(p, "c1", 1, c_len, NULL));
    CHECK_OK(tp_publish(p, "c2", 1, c_len, NULL));
    CHECK_OK(tp_publish(p, "c3", 1, c_len, NULL));
    CHECK_OK(tp_publish(p, "c4", 1, c_len, NULL));
    CHECK_OK(tp_publish(p, "c5", 1, c_len, NULL));
    CHECK_OK(tp_publish(p, "c6", 1, c_len, NULL));
    CHECK_OK(cxlp_pool_remove(p, "c2"));
    CHECK_OK(cxlp_pool_remove(p, "c4"));
    CHECK_OK(pool_reserve(p, 0, 4096, &e)); /* reclaims the removals */
    CHECK_OK(pool_unreserve(p, 0, e));
    CHECK_OK(cxlp_pool_stat(p, &st0));
    CHECK(st0.free_bytes == 2 * MiB && st0.largest_free == 1 * MiB);
    CHECK_RC(pool_reserve(p, 0, 2 * MiB, &e), CXLP_EFULL);
    CHECK_OK(cxlp_pool_stat(p, &st));
    same_stat(&st0, &st);
    /* removing the neighbour coalesces 3 MiB */
    CHECK_OK(cxlp_pool_remove(p, "c3"));
    CHECK_OK(pool_reserve(p, 0, 3 * MiB, &e));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.free_bytes == 0 && st.reserved_bytes == 3 * MiB);
    tp_check(p);
    CHECK_OK(pool_unreserve(p, 0, e));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(name));
}

static void catalog_full(void)
{
    const char *name = test_name("catfull");
    struct cxlp_pool_opts o = {.catalog_bytes = 4096, .lease_slots = 4};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(name, 8 * MiB, &o, &p));
    char nm[32];
    int i, rc = 0;
    for (i = 0; i < 100; i++) {
        snprintf(nm, sizeof nm, "d%d", i);
        if ((rc = tp_publish(p, nm, 1, 4096, NULL)))
            break;
    }
    CHECK_RC(rc, CXLP_ECATFULL);
    CHECK(i >= 1);
    CHECK(strstr(cxlp_errmsg(pool_obj(p)), "catalog needs") != NULL);
    struct cxlp_pool_stat st0, st;
    CHECK_OK(cxlp_pool_stat(p, &st0));
    CHECK(st0.n_datasets == (uint32_t)i && st0.reserved_bytes == 0);
    /* the failed publish changed nothing; the catalog still works */
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 0, 4096, &e));
    struct pool_dataset ds;
    memset(&ds, 0, sizeof ds);
    snprintf(ds.info.name, sizeof ds.info.name, "late");
    struct pool_shard sh = {.off = e.off, .len = 4096, .n_records = 1};
    ds.n_shards = 1;
    CHECK_OK(cxlp_pool_stat(p, &st0));
    CHECK_RC(pool_publish(p, &ds, &sh), CXLP_ECATFULL);
    CHECK_OK(cxlp_pool_stat(p, &st));
    same_stat(&st0, &st);
    CHECK_OK(pool_unreserve(p, 0, e));
    /* room comes back with a removal */
    CHECK_OK(cxlp_pool_remove(p, "d0"));
    CHECK_OK(tp_publish(p, "late", 1, 4096, NULL));
    tp_check(p);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(name));
}

static void bad_publish(void)
{
    const char *name = test_name("badpub");
    struct cxlp_pool_opts o = {.catalog_bytes = 16384, .lease_slots = 4};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(name, 8 * MiB, &o, &p));
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 0, 8192, &e));
    struct pool_dataset ds;
    memset(&ds, 0, sizeof ds);
    struct pool_shard sh = {.off = e.off, .len = 8192, .n_records = 1};
    ds.n_shards = 1;
    CHECK_RC(pool_publish(p, &ds, &sh), CXLP_EARG); /* empty name */
    memset(ds.info.name, 'n', sizeof ds.info.name);
    CHECK_RC(pool_publish(p, &ds, &sh), CXLP_EARG); /* unterminated */
    snprintf(ds.info.name, sizeof ds.info.name, "x");
    struct pool_shard out = {.off = e.off + 4096, .len = 8192};
    CHECK_RC(pool_publish(p, &ds, &out), CXLP_EARG); /* runs past the reservation */
    CHECK(strstr(cxlp_errmsg(pool_obj(p)), "not inside a reservation") != NULL);
    out.off = 0;
    CHECK_RC(pool_publish(p, &ds, &out), CXLP_EARG); /* the header page */
    ds.docs.off = e.off + 8192;
    ds.docs.len = 8;
    CHECK_RC(pool_publish(p, &ds, &sh), CXLP_EARG); /* docs outside */
    /* a shard and the docs may share a reservation, not a page (a copy of
     * a shard is freed alone when it moves) */
    ds.docs.off = e.off + 5000;
    ds.docs.len = 16;
    sh.len = 5000;
    CHECK_RC(pool_publish(p, &ds, &sh), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(pool_obj(p)), "share") != NULL);
    sh.len = 4096; /* unaligned docs inside the next page */
    struct cxlp_pool_stat st;
    CHECK_OK(pool_publish(p, &ds, &sh));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.used_bytes == 8192 + tp_meta(1) && st.reserved_bytes == 0);
    tp_check(p);
    /* the unused tail of a reservation goes back to free space */
    CHECK_OK(pool_reserve(p, 0, 64 * 1024, &e));
    struct pool_dataset d2;
    memset(&d2, 0, sizeof d2);
    snprintf(d2.info.name, sizeof d2.info.name, "y");
    struct pool_shard s2[2] = {{.off = e.off, .len = 4096}, {.off = e.off + 16384, .len = 100}};
    d2.n_shards = 2;
    CHECK_OK(pool_publish(p, &d2, s2));
    CHECK(d2.info.version > 0);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.used_bytes == 8192 + 2 * 4096 + tp_meta(1) + tp_meta(2) && st.reserved_bytes == 0);
    tp_check(p);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(name));
}

int main(void)
{
    pool_full();
    catalog_full();
    bad_publish();
    printf("ok\n");
    return 0;
}
