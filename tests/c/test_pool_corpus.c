/* Seed images for fuzz/fuzz_pool.c: small valid pools (empty; one dataset
 * with docs; two datasets plus a live reservation and a deferred free). The
 * test checks each seed is a valid pool, runs the fuzz target's body on it,
 * and replays the committed corpus. CXLP_WRITE_SEEDS=DIR writes the seeds
 * (how fuzz/corpus/fuzz_pool/ was made). */
#include <fcntl.h>
#include <sys/stat.h>

#include "test_pool_util.h"
#include "../../fuzz/fuzz_pool.c"

#define MiB (1ull << 20)

/* the fuzz input for a pool file: its first FUZZ_META bytes (header,
 * leases, catalog) and the start of its data area (shard tables, states,
 * shards), trailing zeros cut (the fuzzer pads them back), then the flags */
static uint8_t *image(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    uint8_t *b = calloc(1, FUZZ_IMG);
    CHECK(b);
    CHECK(pread(fd, b, FUZZ_META, 0) == (ssize_t)FUZZ_META);
    CHECK(pread(fd, b + FUZZ_META, FUZZ_META, POOL_DATA_ALIGN) == (ssize_t)FUZZ_META);
    close(fd);
    size_t n = 2 * FUZZ_META;
    while (n > FUZZ_META && b[n - 1] == 0)
        n--;
    b[n] = 7; /* fuzz flags: re-sign header, tables and catalog after mutation */
    *len = n + 1;
    return b;
}

static void seed(int kind, const char *outdir)
{
    char spec[300];
    snprintf(spec, sizeof spec, "file:/dev/shm/%s", test_name("cxlp-seed"));
    struct cxlp_pool_opts o = {.catalog_bytes = 4096, .lease_slots = 4};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, FUZZ_IMG, &o, &p));
    struct pool_dataset d;
    struct pool_shard *sh = NULL;
    struct attach *a = NULL;
    uint64_t gen = 0;
    if (kind >= 1) {
        CHECK_OK(tp_publish(p, "tokens", 2, 4096, NULL));
        /* docs extent in its own reservation */
        struct pool_extent e;
        CHECK_OK(pool_reserve(p, 0, 4096, &e));
        struct pool_extent s;
        CHECK_OK(pool_reserve(p, 0, 4096, &s));
        struct pool_dataset ds;
        memset(&ds, 0, sizeof ds);
        snprintf(ds.info.name, sizeof ds.info.name, "docs");
        ds.n_shards = ds.info.n_shards = 1;
        ds.docs.off = e.off;
        ds.docs.len = 24;
        struct pool_shard one = {.off = s.off, .len = 4096, .n_records = 2};
        CHECK_OK(pool_publish(p, &ds, &one));
    }
    if (kind >= 2) {
        struct pool_extent e;
        CHECK_OK(pool_reserve(p, 0, 8192, &e)); /* an ingest in progress */
        CHECK_OK(pool_lookup(p, "tokens", &d, &sh, &a, &gen));
        CHECK_OK(cxlp_pool_remove(p, "tokens")); /* deferred: we pin it */
    }
    tp_check(p);
    size_t len;
    uint8_t *img = image(spec + 5, &len);
    if (a) {
        attach_unpin(a, gen);
        attach_unref(a);
        free(sh);
    }
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    printf("seed %d: %zu bytes\n", kind, len);
    CHECK(len < 2 * FUZZ_META);
    unsigned before = fuzz_opens;
    CHECK(LLVMFuzzerTestOneInput(img, len) == 0);
    CHECK(fuzz_opens == before + 2); /* read-only and writable */
    /* a flipped byte in the catalog is caught unless the flags re-sign it */
    struct pool_hdr h;
    memcpy(&h, img, sizeof h);
    uint64_t at = h.cat_off + ((h.gen >> POOL_EPOCH_BITS) & 1) * h.cat_bytes + sizeof(struct cat_hdr) + 8;
    CHECK(at < len - 1);
    img[at] ^= 0x40;
    img[len - 1] = 1;
    before = fuzz_opens;
    CHECK(LLVMFuzzerTestOneInput(img, len) == 0);
    CHECK(fuzz_opens == before);
    img[at] ^= 0x40;
    img[len - 1] = 7;
    if (outdir) {
        char path[512];
        snprintf(path, sizeof path, "%s/seed-%d", outdir, kind);
        FILE *f = fopen(path, "wb");
        CHECK(f);
        CHECK(fwrite(img, 1, len, f) == len);
        fclose(f);
    }
    free(img);
}

static void replay_one(const char *name, const uint8_t *buf, size_t len, void *ctx)
{
    (void)ctx;
    unsigned before = fuzz_opens;
    CHECK(LLVMFuzzerTestOneInput(buf, len) == 0);
    if (strncmp(name, "seed-", 5) == 0)
        CHECK(fuzz_opens == before + 2);
}

static void replay(void)
{
    CHECK(test_corpus_each(__FILE__, "fuzz_pool", FUZZ_IMG, replay_one, NULL) >= 3);
}

int main(void)
{
    const char *out = getenv("CXLP_WRITE_SEEDS");
    for (int k = 0; k < 3; k++)
        seed(k, out);
    /* the target survives nothing, garbage and a bare header */
    CHECK(LLVMFuzzerTestOneInput(NULL, 0) == 0);
    uint8_t junk[8192];
    uint64_t s = 42;
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)test_rand(&s);
    CHECK(LLVMFuzzerTestOneInput(junk, sizeof junk) == 0);
    memcpy(junk, "CXLPOOL", 8);
    CHECK(LLVMFuzzerTestOneInput(junk, sizeof junk) == 0);
    replay();
    printf("ok\n");
    return 0;
}
