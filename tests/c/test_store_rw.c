/* Writer and reader through the public API on a real shm pool: fixed and
 * variable records over many shards, direct writes, empty datasets, very long
 * records, document indexes, names and schemas refused, reads after the pool
 * handle is closed or the dataset removed, and the pool left as it was after
 * an abort or a failed commit. */
#include <pthread.h>

#include "test.h"
#include "pool/pool.h"
#include "store/store.h"

static struct cxlp_schema fixed_schema(void)
{
    struct cxlp_schema s;
    memset(&s, 0, sizeof s);
    s.fixed = 1;
    s.n_fields = 2;
    strcpy(s.fields[0].name, "id");
    s.fields[0].dtype = CXLP_DT_U64;
    strcpy(s.fields[1].name, "vec");
    s.fields[1].dtype = CXLP_DT_F32;
    s.fields[1].ndim = 2;
    s.fields[1].shape[0] = 2;
    s.fields[1].shape[1] = 3; /* 8 + 24 = 32 bytes */
    return s;
}

static struct cxlp_schema var_schema(int dtype)
{
    struct cxlp_schema s;
    memset(&s, 0, sizeof s);
    s.n_fields = 1;
    strcpy(s.fields[0].name, "tokens");
    s.fields[0].dtype = dtype;
    return s;
}

/* The same 32-byte records as one field: what importers write, and what
 * cxlp_writer_direct takes. */
static struct cxlp_schema row_schema(void)
{
    struct cxlp_schema s;
    memset(&s, 0, sizeof s);
    s.fixed = 1;
    s.n_fields = 1;
    strcpy(s.fields[0].name, "row");
    s.fields[0].dtype = CXLP_DT_U8;
    s.fields[0].ndim = 1;
    s.fields[0].shape[0] = 32;
    return s;
}

/* Record i of a fixed_schema() dataset in its row form, from its columns. */
static void read_row(const cxlp_store *s, uint64_t i, uint8_t row[32])
{
    struct cxlp_view v;
    CHECK_OK(cxlp_store_read_field(s, i, 0, &v));
    CHECK(v.len == 8);
    memcpy(row, v.data, 8);
    CHECK_OK(cxlp_store_read_field(s, i, 1, &v));
    CHECK(v.len == 24);
    memcpy(row + 8, v.data, 24);
}

static void fill_fixed(uint8_t rec[32], uint64_t i)
{
    memcpy(rec, &i, 8);
    for (int k = 8; k < 32; k++)
        rec[k] = (uint8_t)(i * 7 + (uint64_t)k);
}

/* var record i: length from the seed, content from i */
static uint64_t var_len(uint64_t i, uint64_t seed)
{
    uint64_t s = seed ^ (i * 0x9e3779b97f4a7c15ULL);
    uint64_t r = test_rand(&s);
    return 2 * (r % 10 == 0 ? 0 : r % 100 < 95 ? r % 200 : r % 20000);
}

static void fill_var(uint8_t *b, uint64_t len, uint64_t i)
{
    for (uint64_t k = 0; k < len; k++)
        b[k] = (uint8_t)(i + k * 13);
}

static void check_stat_equal(const struct cxlp_pool_stat *a, const struct cxlp_pool_stat *b)
{
    CHECK(a->used_bytes == b->used_bytes);
    CHECK(a->reserved_bytes == b->reserved_bytes);
    CHECK(a->free_bytes == b->free_bytes);
    CHECK(a->largest_free == b->largest_free);
    CHECK(a->n_datasets == b->n_datasets);
    CHECK(a->deferred_bytes == b->deferred_bytes);
}

static void check_list_equal(cxlp_pool *p, const struct cxlp_dataset_info *before, size_t nb)
{
    struct cxlp_dataset_info after[16];
    size_t na;
    CHECK_OK(cxlp_pool_list(p, after, 16, &na));
    CHECK(na == nb);
    for (size_t i = 0; i < na; i++)
        CHECK(memcmp(&after[i], &before[i], sizeof after[i]) == 0);
}

static void test_fixed(cxlp_pool *p)
{
    struct cxlp_schema sc = fixed_schema();
    struct cxlp_writer_opts o = {.shard_bytes = 64 << 10};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "fixed", &sc, &o, &w));
    const uint64_t n = 10000;
    uint8_t rec[32], batch[32 * 100];
    uint64_t i = 0;
    while (i < n) {
        if (i % 3 == 0 && i + 100 <= n) {
            for (int k = 0; k < 100; k++)
                fill_fixed(batch + 32 * k, i + (uint64_t)k);
            CHECK_OK(cxlp_writer_append_fixed(w, batch, 100));
            i += 100;
        } else {
            fill_fixed(rec, i++);
            CHECK_OK(cxlp_writer_append(w, rec, 32));
        }
    }
    CHECK_RC(cxlp_writer_append(w, rec, 31), CXLP_EARG);
    CHECK(strstr(cxlp_writer_errmsg(w), "record_size"));
    CHECK_OK(cxlp_writer_commit(w));

    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "fixed", &s));
    struct cxlp_dataset_info in;
    CHECK_OK(cxlp_store_info(s, &in));
    CHECK(cxlp_store_count(s) == n && in.n_records == n && in.fixed && in.record_size == 32);
    CHECK(in.data_bytes == n * 32);
    CHECK(in.n_shards == (n + 2047) / 2048); /* 64 KiB / 32 = 2048 per shard */
    const struct cxlp_schema *rs = cxlp_store_schema(s);
    CHECK(rs->n_fields == 2 && rs->fields[1].offset == 8 && rs->record_size == 32);
    /* stored column-wise: each field reads alone; no whole-record form */
    for (i = 0; i < n; i++) {
        struct cxlp_view v;
        fill_fixed(rec, i);
        for (uint32_t f = 0; f < 2; f++) {
            uint64_t size = f ? 24 : 8;
            CHECK_OK(cxlp_store_read_field(s, i, f, &v));
            CHECK(v.len == size && memcmp(v.data, rec + rs->fields[f].offset, size) == 0);
            CHECK((uintptr_t)v.data % 8 == 0);
        }
    }
    struct cxlp_view v;
    CHECK_RC(cxlp_store_read(s, 0, &v), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cxlp_store_read_field"));
    CHECK_RC(cxlp_store_read_field(s, 0, 2, &v), CXLP_ERANGE);
    CHECK_RC(cxlp_store_read_field(s, n, 0, &v), CXLP_ERANGE);
    CHECK(strstr(cxlp_errmsg(NULL), "fixed"));
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
}

/* Importer-style: expected_bytes known, read()-sized direct chunks. */
static void test_direct(cxlp_pool *p)
{
    struct cxlp_schema sc = row_schema();
    const uint64_t n = 5000;
    struct cxlp_writer_opts o = {.shard_bytes = 40 << 10, .expected_bytes = n * 32};
    struct cxlp_pool_stat st0, st1;
    CHECK_OK(cxlp_pool_stat(p, &st0));
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "direct", &sc, &o, &w));
    CHECK_OK(cxlp_pool_stat(p, &st1));
    /* one reservation for everything, exactly enough */
    uint64_t per = (40 << 10) / 32, shards = (n + per - 1) / per;
    uint64_t exact = shards * 4096 + n * 32;
    CHECK(st1.reserved_bytes >= exact && st1.reserved_bytes < exact + shards * 4096 + (2 << 20));
    uint64_t i = 0;
    void *dst;
    CHECK_RC(cxlp_writer_direct(w, 33, &dst), CXLP_EARG);
    while (i < n) {
        uint64_t chunk = MIN(writer_room(w), 32 * 300);
        chunk = MIN(chunk, (n - i) * 32);
        CHECK(chunk > 0 && chunk % 32 == 0);
        CHECK_OK(cxlp_writer_direct(w, chunk, &dst));
        for (uint64_t k = 0; k < chunk / 32; k++)
            fill_fixed((uint8_t *)dst + 32 * k, i + k);
        /* a short read commits less than it asked for */
        uint64_t got = i % 2 ? chunk : chunk - (chunk > 32 ? 32 : 0);
        CHECK_OK(cxlp_writer_commit_direct(w, got));
        i += got / 32;
    }
    CHECK_RC(cxlp_writer_commit_direct(w, 32), CXLP_EARG);
    CHECK_OK(cxlp_writer_commit(w));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "direct", &s));
    struct cxlp_dataset_info in;
    CHECK_OK(cxlp_store_info(s, &in));
    CHECK(in.n_records == n && in.n_shards == shards);
    uint8_t rec[32];
    for (i = 0; i < n; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        fill_fixed(rec, i);
        CHECK(v.len == 32 && memcmp(v.data, rec, 32) == 0);
    }
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_stat(p, &st1));
    CHECK(st1.reserved_bytes == 0);
}

struct reader_arg {
    const cxlp_store *s;
    uint64_t seed, big_at, big_len, checked;
    int bad;
};

/* Several threads share one store handle: reads are thread-safe. */
static void *read_all(void *arg)
{
    struct reader_arg *r = arg;
    uint8_t *buf = malloc(r->big_len);
    uint64_t n = cxlp_store_count(r->s);
    for (uint64_t k = 0; k < n; k++) {
        uint64_t i = (k * 7919 + r->checked) % n;
        uint64_t len = i == r->big_at ? r->big_len : var_len(i, r->seed);
        struct cxlp_view v;
        fill_var(buf, len, i);
        if (cxlp_store_read(r->s, i, &v) || v.len != len || (len && memcmp(v.data, buf, len)))
            r->bad++;
    }
    r->checked = n;
    free(buf);
    return NULL;
}

static void test_var(cxlp_pool *p, uint64_t seed)
{
    struct cxlp_schema sc = var_schema(CXLP_DT_U16);
    struct cxlp_writer_opts o = {.shard_bytes = 64 << 10};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "var", &sc, &o, &w));
    const uint64_t n = 3000, big_at = 1234, big_len = 3 << 20; /* longer than 40 shards */
    uint8_t *buf = malloc(big_len);
    uint64_t total = 0;
    CHECK_RC(cxlp_writer_append(w, buf, 3), CXLP_EARG); /* not whole uint16 elements */
    CHECK(strstr(cxlp_writer_errmsg(w), "uint16"));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len = i == big_at ? big_len : var_len(i, seed);
        fill_var(buf, len, i);
        CHECK_OK(cxlp_writer_append(w, buf, len));
        total += len;
    }
    int64_t docs[4] = {0, 10, 10, (int64_t)n};
    CHECK_OK(cxlp_writer_set_docs(w, docs, 3));
    CHECK_OK(cxlp_writer_commit(w));

    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "var", &s));
    struct cxlp_dataset_info in;
    CHECK_OK(cxlp_store_info(s, &in));
    CHECK(in.n_records == n && !in.fixed && in.data_bytes == total && in.n_shards > 10);
    CHECK(in.n_docs == 3);
    CHECK(in.stored_bytes > total);
    const int64_t *d;
    uint64_t nd;
    CHECK_OK(cxlp_store_docs(s, &d, &nd));
    CHECK(nd == 3 && memcmp(d, docs, sizeof docs) == 0);
    uint64_t s2 = seed;
    for (int k = 0; k < 3 * (int)n; k++) {
        uint64_t i = k < (int)n ? (uint64_t)k : test_rand(&s2) % n;
        uint64_t len = i == big_at ? big_len : var_len(i, seed);
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(v.len == len);
        fill_var(buf, len, i);
        CHECK(len == 0 || memcmp(v.data, buf, len) == 0);
    }
    CHECK_OK(cxlp_store_verify(s));
    pthread_t th[4];
    struct reader_arg ra[4];
    for (int t = 0; t < 4; t++) {
        ra[t] = (struct reader_arg){.s = s, .seed = seed, .big_at = big_at, .big_len = big_len,
                                    .checked = (uint64_t)t * 101};
        CHECK(pthread_create(&th[t], NULL, read_all, &ra[t]) == 0);
    }
    for (int t = 0; t < 4; t++) {
        CHECK(pthread_join(th[t], NULL) == 0);
        CHECK(ra[t].bad == 0 && ra[t].checked == n);
    }
    CHECK_OK(cxlp_store_close(s));
    free(buf);
}

/* Importer-style variable records: runs of records written in place. */
static void test_direct_var(cxlp_pool *p, uint64_t seed)
{
    struct cxlp_schema sc = var_schema(CXLP_DT_U16);
    struct cxlp_writer_opts o = {.shard_bytes = 128 << 10};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "dvar", &sc, &o, &w));
    const uint64_t n = 20000;
    uint64_t lens[512], i = 0;
    void *dst;
    CHECK_RC(cxlp_writer_direct(w, 64, &dst), CXLP_EARG); /* fixed-only call */
    while (i < n) {
        uint64_t k = 1 + (i % 500), bytes = 0;
        if (i + k > n)
            k = n - i;
        for (uint64_t j = 0; j < k; j++)
            bytes += lens[j] = var_len(i + j, seed);
        CHECK_OK(writer_direct_var(w, bytes, k, &dst));
        CHECK_RC(cxlp_writer_append(w, "ab", 2), CXLP_EARG); /* grant outstanding */
        uint8_t *d = dst;
        for (uint64_t j = 0; j < k; j++) {
            fill_var(d, lens[j], i + j);
            d += lens[j];
        }
        if (k > 1 && i % 3 == 0) { /* commit fewer than announced */
            CHECK_RC(writer_commit_var(w, lens, k + 1), CXLP_EARG);
            k--;
        }
        CHECK_OK(writer_commit_var(w, lens, k));
        i += k;
    }
    CHECK_RC(writer_commit_var(w, lens, 1), CXLP_EARG); /* nothing granted */
    CHECK_OK(cxlp_writer_commit(w));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "dvar", &s));
    CHECK(cxlp_store_count(s) == n);
    uint8_t buf[40000];
    for (i = 0; i < n; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        uint64_t len = var_len(i, seed);
        fill_var(buf, len, i);
        CHECK(v.len == len && (len == 0 || memcmp(v.data, buf, len) == 0));
    }
    struct cxlp_dataset_info in;
    CHECK_OK(cxlp_store_info(s, &in));
    CHECK(in.n_shards > 10);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
}

static void test_empty(cxlp_pool *p)
{
    struct cxlp_pool_stat st0, st1;
    CHECK_OK(cxlp_pool_stat(p, &st0));
    struct cxlp_schema sc = var_schema(CXLP_DT_I32);
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "empty", &sc, NULL, &w));
    CHECK_OK(cxlp_writer_commit(w));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "empty", &s));
    CHECK(cxlp_store_count(s) == 0);
    struct cxlp_view v;
    CHECK_RC(cxlp_store_read(s, 0, &v), CXLP_ERANGE);
    CHECK_OK(cxlp_store_verify(s));
    const int64_t *d;
    uint64_t nd;
    CHECK_OK(cxlp_store_docs(s, &d, &nd));
    CHECK(d == NULL && nd == 0);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_stat(p, &st1));
    CHECK(st1.n_datasets == st0.n_datasets + 1);
    CHECK(st1.reserved_bytes == 0 && st1.used_bytes == st0.used_bytes);
}

static void test_refused(cxlp_pool *p)
{
    struct cxlp_schema sc = fixed_schema();
    cxlp_writer *w = NULL;
    CHECK_RC(cxlp_writer_begin(p, "fixed", &sc, NULL, &w), CXLP_EEXIST);
    CHECK(strstr(cxlp_errmsg(p), "fixed") && strstr(cxlp_errmsg(NULL), "already exists"));
    const char *bad[] = {"", "a/b", "tab\there", "0123456789012345678901234567890123456789012345678901234567890123"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        CHECK_RC(cxlp_writer_begin(p, bad[k], &sc, NULL, &w), CXLP_EARG);
    CHECK_OK(cxlp_writer_begin(p, "012345678901234567890123456789012345678901234567890123456789012", &sc, NULL, &w));
    cxlp_writer_abort(w);

    struct cxlp_schema b = sc;
    b.fields[1].dtype = 99;
    CHECK_RC(cxlp_writer_begin(p, "x", &b, NULL, &w), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "vec") && strstr(cxlp_errmsg(NULL), "dtype"));
    b = sc;
    b.fields[1].shape[1] = 0;
    CHECK_RC(cxlp_writer_begin(p, "x", &b, NULL, &w), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "vec") && strstr(cxlp_errmsg(NULL), "shape"));
    b = sc;
    b.record_size = 31;
    CHECK_RC(cxlp_writer_begin(p, "x", &b, NULL, &w), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "record_size"));
    b = sc;
    b.fields[1].offset = 4;
    CHECK_RC(cxlp_writer_begin(p, "x", &b, NULL, &w), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "vec") && strstr(cxlp_errmsg(NULL), "offset"));
    b = var_schema(CXLP_DT_U8);
    b.fields[0].ndim = 1;
    b.fields[0].shape[0] = 4;
    CHECK_RC(cxlp_writer_begin(p, "x", &b, NULL, &w), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "tokens"));
    b = var_schema(CXLP_DT_U8);
    b.n_fields = 2;
    CHECK_RC(cxlp_writer_begin(p, "x", &b, NULL, &w), CXLP_EARG);
    CHECK_RC(cxlp_writer_begin(p, "x", NULL, NULL, &w), CXLP_EARG);
    cxlp_store *s;
    CHECK_RC(cxlp_store_open(p, "nosuch", &s), CXLP_ENOTFOUND);

    /* a document index that does not match the records fails the commit and
     * leaves nothing behind */
    struct cxlp_pool_stat st0, st1;
    CHECK_OK(cxlp_pool_stat(p, &st0));
    b = var_schema(CXLP_DT_U8);
    CHECK_OK(cxlp_writer_begin(p, "baddocs", &b, NULL, &w));
    CHECK_OK(cxlp_writer_append(w, "abc", 3));
    int64_t docs[2] = {0, 5};
    CHECK_OK(cxlp_writer_set_docs(w, docs, 1));
    CHECK_RC(cxlp_writer_commit(w), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "baddocs") && strstr(cxlp_errmsg(NULL), "document"));
    CHECK_RC(cxlp_store_open(p, "baddocs", &s), CXLP_ENOTFOUND);
    CHECK_OK(cxlp_pool_stat(p, &st1));
    check_stat_equal(&st0, &st1);
}

/* A store keeps its pool mapped and its extents pinned. */
static void test_lifetime(const char *spec)
{
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "fixed", &s));
    CHECK_OK(cxlp_pool_close(p));
    uint8_t rec[32];
    for (uint64_t i = 0; i < cxlp_store_count(s); i += 7) {
        uint8_t got[32];
        read_row(s, i, got);
        fill_fixed(rec, i);
        CHECK(memcmp(got, rec, 32) == 0);
    }
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));

    /* removed while open: still readable until closed */
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    CHECK_OK(cxlp_store_open(p, "direct", &s));
    CHECK_OK(cxlp_pool_remove(p, "direct"));
    cxlp_store *s2;
    CHECK_RC(cxlp_store_open(p, "direct", &s2), CXLP_ENOTFOUND);
    /* new data must not land on the removed dataset's pinned extents */
    struct cxlp_schema sc = fixed_schema();
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "after", &sc, NULL, &w));
    memset(rec, 0xab, sizeof rec);
    for (int k = 0; k < 4000; k++)
        CHECK_OK(cxlp_writer_append(w, rec, 32));
    CHECK_OK(cxlp_writer_commit(w));
    for (uint64_t i = 0; i < cxlp_store_count(s); i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        fill_fixed(rec, i);
        CHECK(memcmp(v.data, rec, 32) == 0);
    }
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(p));
}

/* A read-only handle reads; it cannot write. A file pool takes the sync
 * path of the writer. */
static void test_readonly_and_file(const char *spec)
{
    struct cxlp_pool_opts ro = {.readonly = 1};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_open(spec, &ro, &p));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "var", &s));
    CHECK(cxlp_store_count(s) == 3000);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
    struct cxlp_schema sc = fixed_schema();
    cxlp_writer *w;
    CHECK_RC(cxlp_writer_begin(p, "nope", &sc, NULL, &w), CXLP_EREADONLY);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));

    char fspec[256];
    snprintf(fspec, sizeof fspec, "file:/tmp/%s", test_name("storefile"));
    CHECK_OK(cxlp_pool_create(fspec, 64 << 20, NULL, &p));
    struct cxlp_writer_opts o = {.shard_bytes = 16 << 10};
    CHECK_OK(cxlp_writer_begin(p, "f", &sc, &o, &w));
    uint8_t rec[32];
    for (uint64_t i = 0; i < 2000; i++) {
        fill_fixed(rec, i);
        CHECK_OK(cxlp_writer_append(w, rec, 32));
    }
    CHECK_OK(cxlp_writer_commit(w));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_open(fspec, NULL, &p));
    CHECK_OK(cxlp_store_open(p, "f", &s));
    for (uint64_t i = 0; i < 2000; i++) {
        uint8_t got[32];
        read_row(s, i, got);
        fill_fixed(rec, i);
        CHECK(memcmp(got, rec, 32) == 0);
    }
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(fspec));
}

static void test_full(void)
{
    const char *spec = test_name("storefull");
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 32 << 20, NULL, &p));
    struct cxlp_schema sc = var_schema(CXLP_DT_U8);
    cxlp_writer *w;
    /* a dataset already there must survive untouched */
    CHECK_OK(cxlp_writer_begin(p, "keep", &sc, NULL, &w));
    CHECK_OK(cxlp_writer_append(w, "hello", 5));
    CHECK_OK(cxlp_writer_commit(w));
    struct cxlp_pool_stat st0, st1;
    struct cxlp_dataset_info l0[16];
    size_t n0;
    CHECK_OK(cxlp_pool_stat(p, &st0));
    CHECK_OK(cxlp_pool_list(p, l0, 16, &n0));

    struct cxlp_writer_opts o = {.shard_bytes = 1 << 20};
    CHECK_OK(cxlp_writer_begin(p, "toobig", &sc, &o, &w));
    uint8_t buf[4096];
    memset(buf, 1, sizeof buf);
    int rc = 0;
    uint64_t k;
    for (k = 0; k < 100000 && rc == 0; k++)
        rc = cxlp_writer_append(w, buf, sizeof buf);
    CHECK_RC(rc, CXLP_EFULL);
    CHECK(strstr(cxlp_writer_errmsg(w), "toobig"));
    CHECK_RC(cxlp_writer_append(w, buf, 1), CXLP_EFULL); /* stays failed */
    CHECK_RC(cxlp_writer_commit(w), CXLP_EFULL);
    CHECK_OK(cxlp_pool_stat(p, &st1));
    check_stat_equal(&st0, &st1);
    check_list_equal(p, l0, n0);

    /* abort mid-way also gives everything back */
    CHECK_OK(cxlp_writer_begin(p, "aborted", &sc, &o, &w));
    for (k = 0; k < 500; k++)
        CHECK_OK(cxlp_writer_append(w, buf, sizeof buf));
    cxlp_writer_abort(w);
    CHECK_OK(cxlp_pool_stat(p, &st1));
    check_stat_equal(&st0, &st1);

    /* known size that cannot fit: refused at begin */
    struct cxlp_schema fs = fixed_schema();
    struct cxlp_writer_opts big = {.expected_bytes = 64 << 20, .shard_bytes = 64 << 20};
    CHECK_RC(cxlp_writer_begin(p, "huge", &fs, &big, &w), CXLP_EFULL);
    CHECK(strstr(cxlp_errmsg(p), "huge"));
    CHECK_OK(cxlp_pool_stat(p, &st1));
    check_stat_equal(&st0, &st1);
    check_list_equal(p, l0, n0);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
}

int main(void)
{
    uint64_t seed = test_seed();
    const char *spec = test_name("storerw");
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 256 << 20, NULL, &p));
    test_fixed(p);
    test_direct(p);
    test_var(p, seed);
    test_direct_var(p, seed);
    test_empty(p);
    test_refused(p);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    test_lifetime(spec);
    test_readonly_and_file(spec);
    test_full();
    CHECK_OK(cxlp_pool_destroy(spec));
    printf("ok\n");
    return 0;
}
