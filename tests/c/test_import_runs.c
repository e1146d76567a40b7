/* Megatron sequences move into the pool in runs (back-to-back stretches of
 * the .bin, one kernel copy each): a .bin with gaps, overlapping sequences,
 * empty ones, sequences larger than a run and larger than a shard, imported
 * into every kind of pool the importer writes differently (shm: splice from
 * another filesystem; file beside the source: copy_file_range; numa: read()
 * into the mapping), with small and default shards. Every record must equal
 * its bytes at its pointer, documents kept, checksums verified. */
#include <inttypes.h>

#include "import_test.h"

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

struct ds {
    uint64_t n, nd, bin_len;
    int32_t *lens;
    uint64_t *ptrs;
    int64_t *docs;
    uint8_t *bin;
};

/* n uint16 sequences laid out with gaps and overlaps (pointers still
 * non-decreasing, as the format requires). */
static void gen(struct ds *d, uint64_t n, uint64_t *seed)
{
    d->n = n;
    d->lens = calloc(n, sizeof *d->lens);
    d->ptrs = calloc(n, sizeof *d->ptrs);
    d->docs = calloc(n + 1, sizeof *d->docs);
    CHECK(d->lens && d->ptrs && d->docs);
    uint64_t end = 0, prev = 0, prev_bytes = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint64_t r = test_rand(seed) % 100, len;
        if (r < 5)
            len = 0;
        else if (r < 75)
            len = test_rand(seed) % 300;
        else if (r < 96)
            len = 300 + test_rand(seed) % 40000;
        else if (r < 99)
            len = 100000 + test_rand(seed) % 300000;   /* larger than a small shard */
        else
            len = 600000 + test_rand(seed) % 100000;   /* larger than a run (1 MiB) */
        uint64_t g = test_rand(seed) % 100, ptr;
        if (g < 70 || i == 0)
            ptr = i ? prev + prev_bytes : 0;           /* back to back */
        else if (g < 85)
            ptr = end + 1 + test_rand(seed) % 5000;    /* a gap, odd offsets too */
        else
            ptr = prev + (prev_bytes ? test_rand(seed) % prev_bytes : 0); /* overlap */
        d->lens[i] = (int32_t)len;
        d->ptrs[i] = ptr;
        prev = ptr;
        prev_bytes = 2 * len;
        end = ptr + prev_bytes > end ? ptr + prev_bytes : end;
    }
    d->bin_len = end + test_rand(seed) % 100;
    d->bin = malloc(d->bin_len + 1);
    CHECK(d->bin);
    for (uint64_t i = 0; i < d->bin_len; i += 8) {
        uint64_t v = test_rand(seed);
        memcpy(d->bin + i, &v, d->bin_len - i < 8 ? d->bin_len - i : 8);
    }
    d->nd = 0;
    d->docs[d->nd++] = 0;
    for (uint64_t i = 0; i < n;) {
        i += 1 + test_rand(seed) % 5;
        d->docs[d->nd++] = (int64_t)(i < n ? i : n);
    }
}

static void write_ds(const struct ds *d, const char *prefix)
{
    uint64_t sz = 34 + 12 * d->n + 8 * d->nd;
    uint8_t *b = malloc(sz);
    CHECK(b);
    memcpy(b, "MMIDIDX\0\0", 9);
    put64(b + 9, 1);
    b[17] = 8; /* uint16 */
    put64(b + 18, d->n);
    put64(b + 26, d->nd);
    for (uint64_t i = 0; i < d->n; i++) {
        uint32_t l = (uint32_t)d->lens[i];
        memcpy(b + 34 + 4 * i, &l, 4);
        put64(b + 34 + 4 * d->n + 8 * i, d->ptrs[i]);
    }
    for (uint64_t i = 0; i < d->nd; i++)
        put64(b + 34 + 12 * d->n + 8 * i, (uint64_t)d->docs[i]);
    char path[600];
    snprintf(path, sizeof path, "%s.idx", prefix);
    write_file(path, b, sz);
    snprintf(path, sizeof path, "%s.bin", prefix);
    write_file(path, d->bin, d->bin_len);
    free(b);
}

static void check_ds(cxlp_pool *p, const char *name, const struct ds *d)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    CHECK(cxlp_store_count(s) == d->n);
    uint64_t total = 0;
    for (uint64_t i = 0; i < d->n; i++) {
        struct cxlp_view v;
        uint64_t bytes = 2 * (uint64_t)d->lens[i];
        CHECK_OK(cxlp_store_read(s, i, &v));
        if (v.len != bytes || (bytes && memcmp(v.data, d->bin + d->ptrs[i], bytes))) {
            fprintf(stderr, "%s: sequence %" PRIu64 " (%" PRIu64 " bytes at %" PRIu64
                    ") differs\n", name, i, bytes, d->ptrs[i]);
            CHECK(0);
        }
        total += bytes;
    }
    struct cxlp_dataset_info info;
    CHECK_OK(cxlp_store_info(s, &info));
    CHECK(info.data_bytes == total && info.n_docs == d->nd - 1);
    const int64_t *docs;
    uint64_t nd;
    CHECK_OK(cxlp_store_docs(s, &docs, &nd));
    for (uint64_t i = 0; i <= nd; i++)
        CHECK(docs[i] == d->docs[i]);
    CHECK_OK(cxlp_store_verify(s)); /* the writer hashed what the kernel copied */
    CHECK_OK(cxlp_store_close(s));
}

/* Progress that watches the pool's reservations during the import. */
struct resv_watch {
    cxlp_pool *p;
    uint64_t peak;
};

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    struct resv_watch *r = ctx;
    struct cxlp_pool_stat st;
    (void)done, (void)total;
    CHECK_OK(cxlp_pool_stat(r->p, &st));
    if (st.reserved_bytes > r->peak)
        r->peak = st.reserved_bytes;
}

static void import_all(cxlp_pool *p, const char *what, const char *prefix, const struct ds *d)
{
    uint64_t data = 0;
    for (uint64_t i = 0; i < d->n; i++)
        data += 2 * (uint64_t)d->lens[i];
    static const uint64_t shard_bytes[] = {256u << 10, 0};
    for (size_t k = 0; k < 2; k++) {
        struct resv_watch rw = {p, 0};
        struct cxlp_import_opts o = {.format = CXLP_FMT_MEGATRON, .dtype = -1,
                                     .shard_bytes = shard_bytes[k], .progress = on_progress,
                                     .progress_ctx = &rw};
        char name[64];
        snprintf(name, sizeof name, "%s_%zu", what, k);
        CHECK_OK(cxlp_import(p, name, prefix, &o));
        /* reservations stay near the data: a run larger than a shard gets
         * one extent of its size, never a batch of them (a batch of 64
         * such extents held a 256 MiB pool for 56 MB of data) */
        printf("%s: reserved at most %" PRIu64 " bytes for %" PRIu64 " bytes of data\n", name,
               rw.peak, data);
        CHECK(rw.peak <= data / 2 * 3 + (8u << 20));
        check_ds(p, name, d);
        struct cxlp_pool_stat st;
        CHECK_OK(cxlp_pool_stat(p, &st));
        CHECK(st.reserved_bytes == 0);
        CHECK_OK(cxlp_pool_remove(p, name));
    }
    printf("%s: ok\n", what);
}

int main(void)
{
    uint64_t seed = test_seed();
    cxlp_pool *p = setup(256ull << 20);
    struct ds d;
    gen(&d, test_sanitized() ? 300 : 1200, &seed);
    const char *pre = path_of("runs");
    write_ds(&d, pre);
    printf("%" PRIu64 " sequences, .bin %" PRIu64 " bytes\n", d.n, d.bin_len);

    import_all(p, "shm", pre, &d);

    /* a file pool beside the source: same filesystem */
    char spec[600];
    snprintf(spec, sizeof spec, "file:%s", path_of("pool"));
    cxlp_pool *q;
    CHECK_OK(cxlp_pool_create(spec, 256ull << 20, NULL, &q));
    import_all(q, "file", pre, &d);
    CHECK_OK(cxlp_pool_close(q));
    CHECK_OK(cxlp_pool_destroy(spec));

    snprintf(spec, sizeof spec, "numa:0:%s", test_name("runs"));
    int rc = cxlp_pool_create(spec, 256ull << 20, NULL, &q);
    if (rc == 0) {
        import_all(q, "numa", pre, &d);
        CHECK_OK(cxlp_pool_close(q));
        CHECK_OK(cxlp_pool_destroy(spec));
    } else {
        printf("numa: skipped, %s\n", cxlp_errmsg(NULL));
    }

    free(d.lens);
    free(d.ptrs);
    free(d.docs);
    free(d.bin);
    teardown(p);
    printf("ok\n");
    return 0;
}
