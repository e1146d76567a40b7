/* cxlp_store_spans: for random record ranges of a file: pool's datasets
 * (fixed- and variable-size records, several shards), reading each span's
 * bytes from the file with pread at its offset gives exactly the records'
 * bytes as cxlp_store_read shows them, in order; one span per shard crossed;
 * a range outside the dataset is CXLP_ERANGE; a short out array still
 * reports how many spans are needed. */
#include <fcntl.h>

#include "test.h"

#define N 1000
#define RS 96          /* fixed record size: not a divisor of the shard size */
#define SHARD (16 << 10)

static uint8_t byte_of(uint64_t i, uint64_t k)
{
    return (uint8_t)(i * 131 + k * 7 + 1);
}

/* The records [lo, hi) as the reader shows them, concatenated. */
static uint8_t *expected(cxlp_store *s, uint64_t lo, uint64_t hi, uint64_t *len)
{
    uint64_t total = 0;
    for (uint64_t i = lo; i < hi; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        total += v.len;
    }
    uint8_t *buf = malloc(total ? total : 1), *p = buf;
    CHECK(buf);
    for (uint64_t i = lo; i < hi; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        memcpy(p, v.data, v.len);
        p += v.len;
    }
    *len = total;
    return buf;
}

static void check_range(cxlp_store *s, int fd, uint64_t lo, uint64_t hi)
{
    struct cxlp_span sp[64];
    size_t n;
    CHECK_OK(cxlp_store_spans(s, lo, hi - lo, sp, 64, &n));
    CHECK(n <= 64);
    uint64_t want_len;
    uint8_t *want = expected(s, lo, hi, &want_len);
    uint8_t *got = malloc(want_len ? want_len : 1);
    CHECK(got);
    uint64_t at = 0, next = lo;
    for (size_t k = 0; k < n; k++) {
        CHECK(sp[k].first == next && sp[k].count > 0); /* in record order, no gap */
        next += sp[k].count;
        CHECK(at + sp[k].len <= want_len);
        CHECK(pread(fd, got + at, sp[k].len, (off_t)sp[k].off) == (ssize_t)sp[k].len);
        at += sp[k].len;
        if (k > 0) /* a new span only where a new shard starts: a header lies between */
            CHECK(sp[k].off >= sp[k - 1].off + sp[k - 1].len + 128 ||
                  sp[k].off + sp[k].len <= sp[k - 1].off);
    }
    CHECK(next == hi && at == want_len);
    CHECK(memcmp(got, want, want_len) == 0);
    free(got);
    free(want);
}

int main(void)
{
    uint64_t seed = test_seed();
    char path[256];
    snprintf(path, sizeof path, "/tmp/%s", test_name("spans"));
    char spec[300];
    snprintf(spec, sizeof spec, "file:%s", path);
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 32 << 20, NULL, &p));

    /* fixed-size records in shards of SHARD bytes */
    struct cxlp_schema fx = {.fixed = 1, .record_size = RS, .n_fields = 1,
                             .fields = {{.name = "x", .dtype = CXLP_DT_U8, .ndim = 1,
                                         .shape = {RS}}}};
    struct cxlp_writer_opts wo = {.shard_bytes = SHARD};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "fixed", &fx, &wo, &w));
    uint8_t rec[1024];
    for (uint64_t i = 0; i < N; i++) {
        for (uint64_t k = 0; k < RS; k++)
            rec[k] = byte_of(i, k);
        CHECK_OK(cxlp_writer_append(w, rec, RS));
    }
    CHECK_OK(cxlp_writer_commit(w));

    /* variable-size records (0..199 bytes of uint8) */
    struct cxlp_schema vs = {.fixed = 0, .n_fields = 1,
                             .fields = {{.name = "tokens", .dtype = CXLP_DT_U8}}};
    CHECK_OK(cxlp_writer_begin(p, "var", &vs, &wo, &w));
    uint64_t rng = seed;
    for (uint64_t i = 0; i < N; i++) {
        uint64_t len = test_rand(&rng) % 200;
        for (uint64_t k = 0; k < len; k++)
            rec[k] = byte_of(i, k);
        CHECK_OK(cxlp_writer_append(w, rec, len));
    }
    CHECK_OK(cxlp_writer_commit(w));
    CHECK_OK(cxlp_pool_close(p));

    struct cxlp_pool_opts ro = {.readonly = 1};
    CHECK_OK(cxlp_pool_open(spec, &ro, &p));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0);
    const char *names[] = {"fixed", "var"};
    for (int d = 0; d < 2; d++) {
        cxlp_store *s;
        CHECK_OK(cxlp_store_open(p, names[d], &s));
        struct cxlp_dataset_info info;
        CHECK_OK(cxlp_store_info(s, &info));
        CHECK(info.n_shards > 3);
        /* the whole dataset: one span per shard */
        struct cxlp_span all[64];
        size_t n;
        CHECK_OK(cxlp_store_spans(s, 0, N, all, 64, &n));
        CHECK(n == info.n_shards);
        check_range(s, fd, 0, N);
        for (int t = 0; t < 200; t++) {
            uint64_t lo = test_rand(&rng) % N, hi = lo + 1 + test_rand(&rng) % (N - lo);
            check_range(s, fd, lo, hi);
        }
        check_range(s, fd, N - 1, N);
        /* no records: no spans */
        CHECK_OK(cxlp_store_spans(s, N, 0, NULL, 0, &n));
        CHECK(n == 0);
        /* too small an array: as many as fit are written, the count is whole */
        struct cxlp_span one[1] = {{0}};
        CHECK_OK(cxlp_store_spans(s, 0, N, one, 1, &n));
        CHECK(n == info.n_shards && one[0].off == all[0].off && one[0].len == all[0].len);
        CHECK_OK(cxlp_store_spans(s, 0, N, NULL, 0, &n));
        CHECK(n == info.n_shards);
        /* outside the dataset, and a count that wraps */
        CHECK_RC(cxlp_store_spans(s, N - 1, 2, all, 64, &n), CXLP_ERANGE);
        CHECK(strstr(cxlp_errmsg(NULL), "not inside"));
        CHECK_RC(cxlp_store_spans(s, 1, UINT64_MAX, all, 64, &n), CXLP_ERANGE);
        CHECK_RC(cxlp_store_spans(s, 0, 1, NULL, 1, &n), CXLP_EARG);
        CHECK_RC(cxlp_store_spans(NULL, 0, 1, all, 1, &n), CXLP_EARG);
        CHECK_OK(cxlp_store_close(s));
    }
    close(fd);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    printf("ok\n");
    return 0;
}
