/*
 * bench_tier_meta.c - the metadata of a pool at 10^6 shards: how many bytes
 * the catalog and the locations take, how long publishing a dataset of 10^6
 * shards takes, how many catalog bytes a location change writes, and how
 * long 10^4 single-shard migrations take in such a pool.
 *
 * The 10^6-shard dataset is a pool-layer dataset of 4 KiB extents (its
 * shards hold no records: the pool layer neither knows nor reads the store
 * format; what is measured is the pool's bookkeeping), on a file tier whose
 * space is fallocated, not written. The 10^4 migrations are of a real
 * dataset (one record a shard, written by the store writer) from the nvme
 * tier to the dram tier, each one shard read with io_uring, verified and
 * published, in the same pool.
 *
 * usage: bench_tier_meta DIR [N_SHARDS=1000000] [N_MIGRATE=10000] [--json]
 *   DIR holds the nvme tier file (removed at the end).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "pool/pool_internal.h"
#include "store/store.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define DIE(...) do { fprintf(stderr, "bench_tier_meta: " __VA_ARGS__); fprintf(stderr, ": %s\n", cxlp_errmsg(NULL)); exit(1); } while (0)

static uint64_t catalog_bytes(cxlp_pool *p)
{
    struct cat c;
    uint64_t gen;
    if (cat_snapshot(pool_attach(p), &c, 0, &gen, pool_obj(p)))
        DIE("snapshot");
    uint64_t b = cat_encoded_size(&c);
    cat_free(&c);
    return b;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_tier_meta DIR [N_SHARDS] [N_MIGRATE] [--json]\n");
        return 2;
    }
    const char *dir = argv[1];
    uint64_t n = argc > 2 ? strtoull(argv[2], NULL, 0) : 1000000;
    uint64_t nm = argc > 3 ? strtoull(argv[3], NULL, 0) : 10000;
    int json = argc > 4 && strcmp(argv[4], "--json") == 0;
    char pool[64], t0[128], t1[512];
    snprintf(pool, sizeof pool, "bmeta.%d", (int)getpid());
    uint64_t nvme_bytes = n * 4096 + nm * 8192 + (256ull << 20);
    snprintf(t0, sizeof t0, "dram=shm:%s.dram:%llu", pool, (unsigned long long)(nm * 8192 + (64ull << 20)));
    snprintf(t1, sizeof t1, "nvme=file:%s/%s.tier:%llu", dir, pool, (unsigned long long)nvme_bytes);
    const char *tiers[] = {t0, t1};
    struct cxlp_pool_opts o = {.meta_bytes = 192ull << 20};
    cxlp_pool *p;
    if (cxlp_pool_create_tiered(pool, tiers, 2, &o, &p))
        DIE("create");

    /* a dataset of n shards of one 4 KiB page each, reserved in one piece */
    struct pool_extent e;
    double t = now();
    if (pool_reserve(p, 1, n * 4096, &e))
        DIE("reserve %" PRIu64 " bytes", n * 4096);
    double t_reserve = now() - t;
    struct pool_shard *sh = malloc(n * sizeof *sh);
    for (uint64_t k = 0; k < n; k++)
        sh[k] = (struct pool_shard){.off = e.off + k * 4096, .len = 4096, .n_records = 1,
                                    .data_len = 8, .checksum = k};
    struct pool_dataset ds;
    memset(&ds, 0, sizeof ds);
    snprintf(ds.info.name, sizeof ds.info.name, "million");
    ds.n_shards = ds.info.n_shards = (uint32_t)n;
    ds.info.n_records = n;
    ds.info.data_bytes = 8 * n;
    ds.info.fixed = 1;
    ds.info.record_size = 8;
    ds.schema.fixed = 1;
    ds.schema.record_size = 8;
    ds.schema.n_fields = 1;
    ds.schema.fields[0].dtype = CXLP_DT_U64;
    t = now();
    if (pool_publish(p, &ds, sh))
        DIE("publish");
    double t_publish = now() - t;
    free(sh);
    struct cat c;
    uint64_t gen;
    if (cat_snapshot(pool_attach(p), &c, 0, &gen, pool_obj(p)))
        DIE("snapshot");
    uint64_t cat = cat_encoded_size(&c), table = 0, states = 0;
    for (uint64_t i = 0; i < c.n_ds; i++) {
        table += ALIGN_UP(c.ds[i].table.len, 4096);
        states += ALIGN_UP(c.ds[i].states.len, 4096);
    }
    cat_free(&c);

    /* a looked-up snapshot of it: what a reader pays at open */
    struct pool_dataset got;
    struct pool_shard *gs;
    struct attach *a;
    t = now();
    if (pool_lookup(p, "million", &got, &gs, &a, &gen))
        DIE("lookup");
    double t_lookup = now() - t;
    free(gs);
    attach_unpin(a, gen);
    attach_unref(a);
    t = now();
    if (pool_check(p, NULL, NULL))
        DIE("check");
    double t_check = now() - t;

    /* a real dataset of nm shards, one 8-byte record each */
    struct cxlp_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.fixed = 1;
    sc.n_fields = 1;
    strcpy(sc.fields[0].name, "i");
    sc.fields[0].dtype = CXLP_DT_U64;
    struct cxlp_writer_opts wo = {.shard_bytes = 8, .expected_bytes = 8 * nm};
    cxlp_writer *w;
    if (cxlp_writer_begin(p, "small", &sc, &wo, &w))
        DIE("writer");
    for (uint64_t i = 0; i < nm; i++)
        if (cxlp_writer_append(w, &i, 8))
            DIE("append");
    if (cxlp_writer_commit(w))
        DIE("commit");
    uint64_t cat_before = catalog_bytes(p);
    struct cxlp_migrate_stat ms, back;
    if (cxlp_migrate(p, "small", "dram", NULL, &ms))
        DIE("migrate to dram");
    uint64_t cat_after = catalog_bytes(p);
    if (cxlp_migrate(p, "small", "nvme", NULL, &back))
        DIE("migrate back");
    if (pool_check(p, NULL, NULL))
        DIE("check after migrations");
    cxlp_store *s;
    if (cxlp_store_open(p, "small", &s) || cxlp_store_verify(s))
        DIE("verify small");
    cxlp_store_close(s);
    cxlp_pool_close(p);
    cxlp_pool_destroy(pool);

    double mib = 1024.0 * 1024.0;
    if (json) {
        printf("{\"shards\": %" PRIu64 ", \"catalog_bytes\": %" PRIu64 ", \"table_bytes\": %" PRIu64
               ", \"states_bytes\": %" PRIu64 ", \"metadata_mib\": %.2f, \"reserve_s\": %.4f"
               ", \"publish_s\": %.4f, \"lookup_s\": %.4f, \"check_s\": %.4f"
               ", \"migrations\": %" PRIu64 ", \"migrate_s\": %.4f, \"migrate_back_s\": %.4f"
               ", \"catalog_bytes_before\": %" PRIu64 ", \"catalog_bytes_after\": %" PRIu64 "}\n",
               n, cat, table, states, (double)(cat + table + states) / mib, t_reserve, t_publish,
               t_lookup, t_check, ms.shards, ms.seconds, back.seconds, cat_before, cat_after);
        return 0;
    }
    printf("pool with one dataset of %" PRIu64 " shards:\n", n);
    printf("  catalog %" PRIu64 " B, shard table %.2f MiB, states (heat + %u locations) %.2f MiB: "
           "metadata %.2f MiB\n", cat, (double)table / mib, 2, (double)states / mib,
           (double)(cat + table + states) / mib);
    printf("  reserve %.3f s, publish %.3f s, lookup (table copied, checksummed) %.3f s, "
           "structural check %.3f s\n", t_reserve, t_publish, t_lookup, t_check);
    printf("%" PRIu64 " single-shard migrations nvme -> dram: %.3f s (%.0f us each), back: %.3f s\n",
           ms.shards, ms.seconds, 1e6 * ms.seconds / (double)ms.shards, back.seconds);
    printf("  catalog before %" PRIu64 " B, after %" PRIu64 " B (each location change flips a "
           "catalog of this size; no shard table or states are copied)\n", cat_before, cat_after);
    return 0;
}
