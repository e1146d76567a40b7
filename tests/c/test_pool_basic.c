/* Pool lifecycle and the reserve -> publish -> lookup -> remove cycle, with
 * a deferred free held back by a live pin and reclaimed after unpin. */
#include <sys/stat.h>

#include "test_pool_util.h"

#define MiB (1ull << 20)

static void roundtrip(void)
{
    const char *name = test_name("basic");
    cxlp_pool *p, *q;
    CHECK_OK(cxlp_pool_create(name, 16 * MiB, NULL, &p));
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.size == 16 * MiB);
    CHECK(st.data_bytes > 0 && st.data_bytes < 16 * MiB);
    CHECK(st.free_bytes == st.data_bytes && st.largest_free == st.data_bytes);
    CHECK(st.used_bytes == 0 && st.reserved_bytes == 0 && st.deferred_bytes == 0);
    CHECK(st.n_datasets == 0);
    CHECK(st.live_leases == 1);
    CHECK(st.lease_slots == 256);
    CHECK(st.media == CXLP_MEDIA_SHM && st.emulated == 1 && st.numa_node == -1);
    CHECK(st.format_version == 3 && st.n_tiers == 1);
    CHECK(strstr(st.path, name) != NULL);
    uint8_t zero[16] = {0};
    CHECK(memcmp(st.uuid, zero, 16) != 0);
    uint64_t gen0 = st.generation;

    /* a second attachment sees the same pool and takes its own lease */
    CHECK_OK(cxlp_pool_open(name, NULL, &q));
    struct cxlp_pool_stat st2;
    CHECK_OK(cxlp_pool_stat(q, &st2));
    CHECK(memcmp(st.uuid, st2.uuid, 16) == 0);
    CHECK(st2.live_leases == 2);
    CHECK(pool_size(q) == 16 * MiB);
    CHECK(pool_writable(q) && pool_base_rw(q, 0) != NULL);
    CHECK_OK(cxlp_pool_close(q));
    CHECK_OK(cxlp_pool_stat(p, &st2));
    CHECK(st2.live_leases == 1);
    tp_check(p);

    /* read-only handle: reads work, writes refused */
    struct cxlp_pool_opts ro = {.readonly = 1};
    CHECK_OK(cxlp_pool_open(name, &ro, &q));
    CHECK(!pool_writable(q) && pool_base_rw(q, 0) == NULL);
    struct pool_extent e;
    CHECK_RC(pool_reserve(q, 0, 4096, &e), CXLP_EREADONLY);
    CHECK_RC(cxlp_pool_remove(q, "x"), CXLP_EREADONLY);
    CHECK_OK(cxlp_pool_stat(q, &st2));
    CHECK(st2.live_leases == 2); /* root may write the object: ro still leases */
    CHECK_OK(cxlp_pool_close(q));

    /* create over an existing pool */
    CHECK_RC(cxlp_pool_create(name, 16 * MiB, NULL, &q), CXLP_EEXIST);
    CHECK_OK(cxlp_pool_stat(p, &st2));
    CHECK(st2.generation == gen0);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_close(NULL));
    CHECK_OK(cxlp_pool_destroy(name));
    CHECK_RC(cxlp_pool_open(name, NULL, &p), CXLP_ENOTFOUND);
    CHECK(strstr(cxlp_errmsg(NULL), name) != NULL);
    CHECK_RC(cxlp_pool_destroy(name), CXLP_ENOTFOUND);
}

static void bad_args(void)
{
    cxlp_pool *p;
    CHECK_RC(cxlp_pool_create("bogus:thing", 16 * MiB, NULL, &p), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "bogus:thing") != NULL);
    CHECK_RC(cxlp_pool_create("", 16 * MiB, NULL, &p), CXLP_EARG);
    CHECK_RC(cxlp_pool_create(NULL, 16 * MiB, NULL, &p), CXLP_EARG);
    CHECK_RC(cxlp_pool_create("a/b", 16 * MiB, NULL, &p), CXLP_EARG);
    CHECK_RC(cxlp_pool_create(test_name("tiny"), 4096, NULL, &p), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "too small") != NULL);
    CHECK_RC(cxlp_pool_create(test_name("zero"), 0, NULL, &p), CXLP_EARG);
    struct cxlp_pool_opts o = {.catalog_bytes = 100};
    CHECK_RC(cxlp_pool_create(test_name("cat"), 16 * MiB, &o, &p), CXLP_EARG);
    o = (struct cxlp_pool_opts){.lease_slots = 1u << 30};
    CHECK_RC(cxlp_pool_create(test_name("leases"), 16 * MiB, &o, &p), CXLP_EARG);
    CHECK_RC(cxlp_pool_open("nosuch.pool.xyz", NULL, &p), CXLP_ENOTFOUND);
    CHECK_RC(cxlp_pool_open("file:/nonexistent/dir/pool", NULL, &p), CXLP_ENOTFOUND);
    CHECK_RC(cxlp_pool_stat(NULL, NULL), CXLP_EARG);
}

static void cycle(void)
{
    const char *name = test_name("cycle");
    struct cxlp_pool_opts o = {.catalog_bytes = 64 * 1024, .lease_slots = 16};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(name, 32 * MiB, &o, &p));
    struct cxlp_pool_stat st0, st;
    CHECK_OK(cxlp_pool_stat(p, &st0));

    /* a reservation is durable and accounted as reserved */
    struct pool_extent e;
    CHECK_RC(pool_reserve(p, 0, 0, &e), CXLP_EARG);
    CHECK_OK(pool_reserve(p, 0, 5000, &e));
    CHECK(e.len == 8192 && e.off % 4096 == 0);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 8192 && st.free_bytes == st0.free_bytes - 8192);
    CHECK(st.generation == st0.generation + 1);
    tp_check(p);
    /* unreserve the tail, then the rest */
    struct pool_extent tail = {e.off + 4096, 4096};
    CHECK_OK(pool_unreserve(p, 0, tail));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 4096);
    CHECK_RC(pool_unreserve(p, 0, tail), CXLP_EARG); /* no longer ours */
    struct pool_extent odd = {e.off + 1, 10};
    CHECK_RC(pool_unreserve(p, 0, odd), CXLP_EARG);
    struct pool_extent head = {e.off, 4096};
    CHECK_OK(pool_unreserve(p, 0, head));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 0 && st.free_bytes == st0.free_bytes);
    CHECK(st.largest_free == st0.largest_free); /* coalesced back */

    /* publish two datasets, look them up */
    struct pool_dataset ds;
    CHECK_OK(tp_publish(p, "alpha", 3, 100000, &ds));
    CHECK(ds.info.version > st.generation);
    CHECK_OK(tp_publish(p, "beta", 2, 4096, NULL));
    CHECK_RC(tp_publish(p, "alpha", 1, 4096, NULL), CXLP_EEXIST);
    CHECK(strstr(cxlp_errmsg(pool_obj(p)), "alpha") != NULL);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.n_datasets == 2 && st.reserved_bytes == 0);
    /* 100000 bytes occupy 25 pages */
    CHECK(st.used_bytes == 3 * 102400 + 2 * 4096 + tp_meta(3) + tp_meta(2));
    CHECK(st.free_bytes + st.used_bytes == st.data_bytes);
    tp_check(p);

    struct cxlp_dataset_info infos[4];
    size_t n;
    CHECK_OK(cxlp_pool_list(p, infos, 4, &n));
    CHECK(n == 2);
    CHECK(strcmp(infos[0].name, "alpha") == 0 && strcmp(infos[1].name, "beta") == 0);
    CHECK(infos[0].n_shards == 3 && infos[0].version == ds.info.version);
    CHECK_OK(cxlp_pool_list(p, infos, 1, &n));
    CHECK(n == 2);
    CHECK_OK(cxlp_pool_list(p, NULL, 0, &n));
    CHECK(n == 2);

    struct pool_dataset got;
    struct pool_shard *sh;
    struct attach *a;
    uint64_t gen;
    CHECK_OK(pool_lookup(p, "alpha", &got, &sh, &a, &gen));
    CHECK(got.n_shards == 3 && strcmp(got.info.name, "alpha") == 0);
    CHECK(got.info.version == ds.info.version);
    CHECK(tp_verify(a, &got, sh) == 0);
    CHECK(gen == st.generation);
    CHECK_RC(pool_lookup(p, "gamma", &got, &sh, &a, &gen), CXLP_ENOTFOUND);
    CHECK(strstr(cxlp_errmsg(pool_obj(p)), "gamma") != NULL);

    /* remove while "alpha" is pinned: its extents stay deferred */
    CHECK_OK(cxlp_pool_remove(p, "alpha"));
    CHECK_RC(cxlp_pool_remove(p, "alpha"), CXLP_ENOTFOUND);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.n_datasets == 1);
    CHECK(st.deferred_bytes == 3 * 102400 + tp_meta(3));
    CHECK(st.used_bytes == 2 * 4096 + tp_meta(2));
    tp_check(p);
    /* writes by others do not reclaim it while pinned */
    struct pool_extent e2;
    CHECK_OK(pool_reserve(p, 0, 4096, &e2));
    CHECK_OK(pool_unreserve(p, 0, e2));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.deferred_bytes == 3 * 102400 + tp_meta(3));
    CHECK(tp_verify(a, &got, sh) == 0); /* the snapshot still reads fine */

    /* the lookup's attachment outlives the pool handle */
    attach_unpin(a, gen);
    CHECK_OK(pool_reserve(p, 0, 4096, &e2)); /* reclaims */
    CHECK_OK(pool_unreserve(p, 0, e2));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.deferred_bytes == 0);
    CHECK(st.free_bytes + st.used_bytes == st.data_bytes);
    tp_check(p);
    free(sh);

    /* pin survives closing the pool handle; the mapping stays valid */
    CHECK_OK(pool_lookup(p, "beta", &got, &sh, &a, &gen));
    CHECK_OK(cxlp_pool_close(p));
    CHECK(tp_verify(a, &got, sh) == 0);
    attach_unpin(a, gen);
    attach_unref(a);
    free(sh);
    /* the lookup reference from "alpha" */
    attach_unref(a);

    CHECK_OK(cxlp_pool_open(name, NULL, &p));
    CHECK_OK(cxlp_pool_remove(p, "beta"));
    CHECK_OK(pool_reserve(p, 0, 4096, &e2));
    CHECK_OK(pool_unreserve(p, 0, e2));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.free_bytes == st.data_bytes && st.largest_free == st.data_bytes);
    CHECK(st.n_datasets == 0);
    tp_check(p);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(name));
}

static void file_mode(void)
{
    char path[256];
    snprintf(path, sizeof path, "file:/tmp/%s", test_name("cxlp-mode"));
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(path, 16 * MiB, NULL, &p));
    struct stat sb;
    CHECK(stat(path + 5, &sb) == 0);
    CHECK((sb.st_mode & 0777) == 0600);
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.media == CXLP_MEDIA_FILE);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(path));
    struct cxlp_pool_opts o = {.mode = 0640};
    CHECK_OK(cxlp_pool_create(path, 16 * MiB, &o, &p));
    CHECK(stat(path + 5, &sb) == 0);
    CHECK((sb.st_mode & 0777) == 0640);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(path));
    const char *shm = test_name("mode");
    CHECK_OK(cxlp_pool_create(shm, 16 * MiB, NULL, &p));
    char sp[300];
    snprintf(sp, sizeof sp, "/dev/shm/cxlp.%s", shm);
    CHECK(stat(sp, &sb) == 0);
    CHECK((sb.st_mode & 0777) == 0600);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(shm));
}

int main(void)
{
    roundtrip();
    bad_args();
    cycle();
    file_mode();
    printf("ok\n");
    return 0;
}
