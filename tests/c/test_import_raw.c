/* Raw fixed-size record import through cxlp_import: every record read back
 * equal across chunk and shard boundaries, the schema, progress per chunk,
 * and each bad input (code, message naming file and field, pool unchanged). */
#include "import_test.h"

struct prog {
    uint64_t calls, last, total;
    int monotone;
};

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    struct prog *g = ctx;
    if (done < g->last || done > total)
        g->monotone = 0;
    g->calls++;
    g->last = done;
    g->total = total;
}

static void check_records(cxlp_pool *p, const char *name, const uint8_t *data, uint64_t n,
                          uint64_t rs)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    CHECK(cxlp_store_count(s) == n);
    struct cxlp_dataset_info info;
    CHECK_OK(cxlp_store_info(s, &info));
    CHECK(info.fixed == 1 && info.record_size == rs && info.n_records == n);
    CHECK(info.data_bytes == n * rs && info.n_docs == 0);
    for (uint64_t i = 0; i < n; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(v.len == rs);
        if (memcmp(v.data, data + i * rs, rs) != 0) {
            fprintf(stderr, "%s: record %" PRIu64 " differs\n", name, i);
            CHECK(0);
        }
    }
    struct cxlp_view v;
    CHECK_RC(cxlp_store_read(s, n, &v), CXLP_ERANGE);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
}

int main(void)
{
    uint64_t seed = test_seed();
    int small = test_sanitized();
    cxlp_pool *p = setup(256ull << 20);

    /* several chunks and, with 1 MiB shards, several shards; the record size
     * divides neither the chunk nor the shard size */
    uint64_t rs = 1000, n = small ? 6000 : 13000;
    uint8_t *data = malloc(n * rs);
    CHECK(data != NULL);
    for (uint64_t i = 0; i < n * rs; i += 8) {
        uint64_t r = test_rand(&seed);
        memcpy(data + i, &r, n * rs - i < 8 ? n * rs - i : 8);
    }
    const char *f = path_of("records.dat");
    write_file(f, data, n * rs);
    struct prog g = {.monotone = 1};
    struct cxlp_import_opts o = {.format = CXLP_FMT_RAW, .record_size = rs, .dtype = -1,
                                 .progress = on_progress, .progress_ctx = &g};
    CHECK_OK(cxlp_import(p, "raw", f, &o));
    check_records(p, "raw", data, n, rs);
    CHECK(g.calls >= (n * rs) / (4u << 20) && g.monotone);
    CHECK(g.last == n * rs && g.total == n * rs);

    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "raw", &s));
    const struct cxlp_schema *sc = cxlp_store_schema(s);
    CHECK(sc->fixed == 1 && sc->n_fields == 1 && sc->record_size == rs);
    CHECK(strcmp(sc->fields[0].name, "data") == 0);
    CHECK(sc->fields[0].dtype == CXLP_DT_U8 && sc->fields[0].ndim == 1);
    CHECK(sc->fields[0].shape[0] == rs);
    CHECK_OK(cxlp_store_close(s));

    o.shard_bytes = 1u << 20;
    o.progress = NULL;
    CHECK_OK(cxlp_import(p, "raw_sharded", f, &o));
    check_records(p, "raw_sharded", data, n, rs);

    /* element dtype: 12-byte records of float32 are 3-vectors; AUTO picks raw */
    const char *f2 = path_of("vec.f32");
    write_file(f2, data, 1200);
    struct cxlp_import_opts o2 = {.record_size = 12, .dtype = CXLP_DT_F32};
    CHECK_OK(cxlp_import(p, "vec", f2, &o2));
    check_records(p, "vec", data, 100, 12);
    CHECK_OK(cxlp_store_open(p, "vec", &s));
    sc = cxlp_store_schema(s);
    CHECK(sc->fields[0].dtype == CXLP_DT_F32 && sc->fields[0].ndim == 1 &&
          sc->fields[0].shape[0] == 3);
    CHECK_OK(cxlp_store_close(s));

    /* one record larger than the 4 MiB read chunk */
    uint64_t big = (5u << 20) + 8;
    const char *f3 = path_of("big.dat");
    uint8_t *bigdata = malloc(2 * big);
    CHECK(bigdata != NULL);
    for (uint64_t i = 0; i < 2 * big; i++)
        bigdata[i] = (uint8_t)(i * 131 + (i >> 12));
    write_file(f3, bigdata, 2 * big);
    struct cxlp_import_opts o3 = {.format = CXLP_FMT_RAW, .record_size = big, .dtype = -1};
    CHECK_OK(cxlp_import(p, "big", f3, &o3));
    check_records(p, "big", bigdata, 2, big);
    free(bigdata);

    /* bad input: code, file and field named, pool unchanged */
    struct cxlp_import_opts bad = {.format = CXLP_FMT_RAW, .record_size = 0, .dtype = -1};
    IMPORT_FAILS(p, "x", f, &bad, CXLP_EARG, f, "record_size");
    bad.format = CXLP_FMT_AUTO;
    IMPORT_FAILS(p, "x", f, &bad, CXLP_EARG, f, "record_size");
    bad.record_size = 999;
    IMPORT_FAILS(p, "x", f, &bad, CXLP_EBADINPUT, f, "is not a multiple of record size 999");
    char want[128];
    snprintf(want, sizeof want, "size %" PRIu64 " is not a multiple", n * rs);
    IMPORT_FAILS(p, "x", f, &bad, CXLP_EBADINPUT, f, want);
    bad.record_size = 10;
    bad.dtype = CXLP_DT_F64;
    IMPORT_FAILS(p, "x", f, &bad, CXLP_EARG, "record_size", "itemsize");
    bad.dtype = 99;
    IMPORT_FAILS(p, "x", f, &bad, CXLP_EARG, f, "dtype");
    bad.dtype = -1;
    const char *missing = path_of("no_such_file.dat");
    IMPORT_FAILS(p, "x", missing, &bad, -ENOENT, missing, "open");
    bad.format = 42;
    IMPORT_FAILS(p, "x", f, &bad, CXLP_EARG, f, "format");
    IMPORT_FAILS(p, "x", scratch, &o, -EISDIR, scratch, "directory");

    /* the name is taken: refused, the existing dataset untouched */
    struct snap before, after;
    snap(p, &before);
    CHECK_RC(cxlp_import(p, "vec", f2, &o2), CXLP_EEXIST);
    CHECK(strstr(cxlp_errmsg(p), f2) != NULL);
    snap(p, &after);
    same_snap(&before, &after);
    check_records(p, "vec", data, 100, 12);

    /* empty file: no records, refused (issue 12 item 16); an empty dataset
     * only when asked for */
    const char *fe = path_of("empty.dat");
    write_file(fe, "", 0);
    IMPORT_FAILS(p, "empty", fe, &o2, CXLP_EBADINPUT, fe, "no records");
    struct cxlp_import_opts oe = o2;
    oe.allow_empty = 1;
    CHECK_OK(cxlp_import(p, "empty", fe, &oe));
    check_records(p, "empty", data, 0, 12);

    /* a pool too small, found out after shards were written: the writer is
     * aborted and the pool is as it was */
    const char *small_spec = test_name("imp_small");
    cxlp_pool *q;
    CHECK_OK(cxlp_pool_create(small_spec, 14u << 20, NULL, &q));
    struct cxlp_import_opts o4 = {.format = CXLP_FMT_RAW, .record_size = rs,
                                  .shard_bytes = 1u << 20};
    IMPORT_FAILS(q, "toobig", f, &o4, CXLP_EFULL, f, "");
    struct cxlp_pool_stat qs;
    CHECK_OK(cxlp_pool_stat(q, &qs));
    CHECK(qs.used_bytes == 0 && qs.reserved_bytes == 0 && qs.n_datasets == 0);
    /* and the space is really back: a dataset that fits still goes in */
    struct cxlp_import_opts o5 = {.format = CXLP_FMT_RAW, .record_size = rs};
    const char *f5 = path_of("fits.dat");
    write_file(f5, data, 2000 * rs);
    CHECK_OK(cxlp_import(q, "fits", f5, &o5));
    check_records(q, "fits", data, 2000, rs);
    CHECK_OK(cxlp_pool_close(q));
    CHECK_OK(cxlp_pool_destroy(small_spec));

    /* other media: a file pool (the kernel copies into the file's page
     * cache) and a numa pool (read() into the mapping, so pages follow the
     * mapping's node policy) hold the same records */
    char specs[2][600];
    snprintf(specs[0], sizeof specs[0], "file:%s", path_of("pool.file"));
    snprintf(specs[1], sizeof specs[1], "numa:0:%s", test_name("imp_numa"));
    for (int k = 0; k < 2; k++) {
        cxlp_pool *m;
        int rc = cxlp_pool_create(specs[k], 64u << 20, NULL, &m);
        if (rc == CXLP_ENODEV || rc == -EOPNOTSUPP || rc == -ENOSYS) {
            printf("%s: %s, not tested\n", specs[k], cxlp_strerror(rc));
            continue;
        }
        CHECK_OK(rc);
        struct cxlp_import_opts om = {.format = CXLP_FMT_RAW, .record_size = rs,
                                      .shard_bytes = 4u << 20};
        CHECK_OK(cxlp_import(m, "raw", f, &om));
        check_records(m, "raw", data, n, rs);
        CHECK_OK(cxlp_pool_verify(m, NULL, NULL));
        CHECK_OK(cxlp_pool_close(m));
        CHECK_OK(cxlp_pool_destroy(specs[k]));
    }

    /* format names */
    CHECK(cxlp_format_parse("raw") == CXLP_FMT_RAW);
    CHECK(cxlp_format_parse("npy") == CXLP_FMT_NPY);
    CHECK(cxlp_format_parse("megatron") == CXLP_FMT_MEGATRON);
    CHECK(cxlp_format_parse("auto") == CXLP_FMT_AUTO);
    CHECK(cxlp_format_parse("csv") == CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "csv") != NULL);
    CHECK(cxlp_format_parse(NULL) == CXLP_EARG);

    free(data);
    teardown(p);
    printf("ok\n");
    return 0;
}
