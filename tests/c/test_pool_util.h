/*
 * test_pool_util.h - fake datasets for the pool tests: the pool layer does
 * not know the store format, so tests fill struct pool_dataset / pool_shard
 * themselves and stamp each shard extent with a pattern derived from the
 * dataset name, so readers can tell whether the bytes under a pinned
 * snapshot were reused.
 */
#ifndef CXLP_TEST_POOL_UTIL_H
#define CXLP_TEST_POOL_UTIL_H

#include <sys/wait.h>
#include <xxhash.h>

#include "test.h"
#include "pool/pool.h"
#include "pool/pool_format.h"

/* Bytes of object 0 a dataset of n shards holds for its shard table and
 * states in a pool of one tier (two words a shard: heat, location). */
static inline uint64_t tp_meta(uint64_t n)
{
    uint64_t t = n * sizeof(struct pool_shent), s = n * 16;
    return (t + 4095) / 4096 * 4096 + (s + 4095) / 4096 * 4096;
}

static inline uint64_t tp_tag(const char *name, uint64_t shard)
{
    return XXH3_64bits_withSeed(name, strlen(name), shard + 1);
}

/* Reserves n_shards extents of shard_len bytes, stamps them, publishes
 * dataset name. Returns pool_reserve/pool_publish's rc. */
static inline int tp_publish(cxlp_pool *p, const char *name, uint32_t n_shards,
                             uint64_t shard_len, struct pool_dataset *out)
{
    struct pool_dataset ds;
    memset(&ds, 0, sizeof ds);
    snprintf(ds.info.name, sizeof ds.info.name, "%s", name);
    struct pool_shard *sh = calloc(n_shards ? n_shards : 1, sizeof *sh);
    CHECK(sh);
    uint8_t *base = pool_base_rw(p, 0);
    uint64_t first = 0;
    for (uint32_t i = 0; i < n_shards; i++) {
        struct pool_extent e;
        int rc = pool_reserve(p, 0, shard_len, &e);
        if (rc) {
            for (uint32_t k = 0; k < i; k++) {
                struct pool_extent r = {sh[k].off, sh[k].len};
                CHECK_OK(pool_unreserve(p, 0, r));
            }
            free(sh);
            return rc;
        }
        sh[i].off = e.off;
        sh[i].len = shard_len;
        sh[i].first_record = first;
        sh[i].n_records = 10 + i;
        first += sh[i].n_records;
        uint64_t tag = tp_tag(name, i);
        uint64_t words = shard_len / 8 < 64 ? shard_len / 8 : 64;
        for (uint64_t w = 0; w < words; w++)
            memcpy(base + e.off + 8 * w, &tag, 8);
        CHECK_OK(pool_sync(p, 0, e.off, shard_len));
    }
    ds.n_shards = n_shards;
    ds.info.n_shards = n_shards;
    ds.info.n_records = first;
    ds.info.data_bytes = shard_len * n_shards;
    ds.info.stored_bytes = shard_len * n_shards;
    ds.info.fixed = 1;
    ds.info.record_size = 8;
    ds.schema.fixed = 1;
    ds.schema.record_size = 8;
    ds.schema.n_fields = 1;
    snprintf(ds.schema.fields[0].name, sizeof ds.schema.fields[0].name, "x");
    ds.schema.fields[0].dtype = CXLP_DT_U64;
    int rc = pool_publish(p, &ds, sh);
    if (rc) {
        for (uint32_t k = 0; k < n_shards; k++) {
            struct pool_extent r = {sh[k].off, sh[k].len};
            CHECK_OK(pool_unreserve(p, 0, r));
        }
    }
    free(sh);
    if (rc == 0 && out)
        *out = ds;
    return rc;
}

/* 0 when dataset ds/sh (a lookup result) is what tp_publish wrote. */
static inline int tp_verify(const struct attach *a, const struct pool_dataset *ds,
                            const struct pool_shard *sh)
{
    const uint8_t *base = attach_base(a);
    uint64_t first = 0;
    if (ds->n_shards != ds->info.n_shards)
        return 1;
    for (uint32_t i = 0; i < ds->n_shards; i++) {
        if (sh[i].first_record != first || sh[i].n_records != 10 + i)
            return 2;
        first += sh[i].n_records;
        if (sh[i].off + sh[i].len > attach_size(a))
            return 3;
        uint64_t tag = tp_tag(ds->info.name, i), w0;
        uint64_t words = sh[i].len / 8 < 64 ? sh[i].len / 8 : 64;
        for (uint64_t w = 0; w < words; w++) {
            memcpy(&w0, base + sh[i].off + 8 * w, 8);
            if (w0 != tag)
                return 4;
        }
    }
    return first == ds->info.n_records ? 0 : 5;
}

static void tp_report(void *ctx, const char *line)
{
    (void)ctx;
    (void)line;
}

/* pool_check must pass */
static inline void tp_check(cxlp_pool *p)
{
    int rc = pool_check(p, tp_report, NULL);
    if (rc)
        fprintf(stderr, "pool_check: %s\n", cxlp_errmsg(pool_obj(p)));
    CHECK_OK(rc);
}

#endif
