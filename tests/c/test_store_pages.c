/* Records land on 2 MiB pages at ingest, with no copy after it: a fresh
 * ingest into a shm pool has every whole 2 MiB piece of its shards on a 2
 * MiB page, as cxlp_store_pages reports and as the page tables of a process
 * that attaches afterwards show (ShmemPmdMapped); no_hugepages leaves them
 * on 4 KiB pages; both hold exactly the imported bytes. A fixed-size raw
 * import and a Megatron import (variable-size records) both. Skips (77)
 * where the kernel cannot collapse shm into 2 MiB pages (Linux < 6.1) or
 * has none free now. */
#include <sys/wait.h>

#include "smaps.h"
#include "test.h"

#define MiB (1ull << 20)

static void write_file(const char *path, const void *data, uint64_t n)
{
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n && fclose(f) == 0);
}

/* A child attaches read-only, reads every record of name, checks them
 * against src (back to back, records of rs bytes, or of lens[i] bytes),
 * and exits 0 when its 2 MiB mappings grew by at least want_kb (3 if
 * not, 4 on a bad byte). */
static int child_reads(const char *spec, const char *name, const uint8_t *src, uint64_t rs,
                       const uint64_t *lens, uint64_t want_kb)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        cxlp_pool *q;
        cxlp_store *t;
        struct cxlp_pool_opts ro = {.readonly = 1};
        if (cxlp_pool_open(spec, &ro, &q) || cxlp_store_open(q, name, &t))
            _exit(2);
        uint64_t b = pmd_mapped_kb(), off = 0;
        for (uint64_t i = 0; i < cxlp_store_count(t); i++) {
            struct cxlp_view v;
            uint64_t len = lens ? lens[i] : rs;
            if (cxlp_store_read(t, i, &v) || v.len != len || memcmp(v.data, src + off, len))
                _exit(4);
            off += len;
        }
        _exit(pmd_mapped_kb() >= b + want_kb ? 0 : 3);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
    return WEXITSTATUS(st);
}

static void megatron(const char *prefix, const uint8_t *tokens, const uint64_t *lens,
                     uint64_t n)
{
    char p[300];
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += lens[i];
    snprintf(p, sizeof p, "%s.bin", prefix);
    write_file(p, tokens, total);
    snprintf(p, sizeof p, "%s.idx", prefix);
    FILE *f = fopen(p, "wb");
    CHECK(f);
    uint64_t version = 1, docs = n + 1;
    uint8_t code = 8; /* uint16 */
    CHECK(fwrite("MMIDIDX\0\0", 1, 9, f) == 9 && fwrite(&version, 8, 1, f) == 1 &&
          fwrite(&code, 1, 1, f) == 1 && fwrite(&n, 8, 1, f) == 1 && fwrite(&docs, 8, 1, f) == 1);
    int64_t ptr = 0;
    for (uint64_t i = 0; i < n; i++) {
        int32_t l = (int32_t)(lens[i] / 2);
        CHECK(fwrite(&l, 4, 1, f) == 1);
    }
    for (uint64_t i = 0; i < n; i++) {
        CHECK(fwrite(&ptr, 8, 1, f) == 1);
        ptr += (int64_t)lens[i];
    }
    for (int64_t d = 0; d <= (int64_t)n; d++)
        CHECK(fwrite(&d, 8, 1, f) == 1);
    CHECK(fclose(f) == 0);
}

int main(void)
{
    uint64_t seed = test_seed();
    const uint64_t bytes = 24 * MiB, rs = 4096;
    uint8_t *src = test_random_bytes(&seed, bytes);
    char raw[256], prefix[256];
    snprintf(raw, sizeof raw, "/tmp/%s.raw", test_name("pages_src"));
    snprintf(prefix, sizeof prefix, "/tmp/%s", test_name("pages_meg"));
    write_file(raw, src, bytes);
    /* uint16 token sequences of 2..8000 bytes covering the same bytes */
    uint64_t *lens = malloc(bytes / 2 * sizeof *lens), n = 0, at = 0;
    CHECK(lens);
    while (at < bytes) {
        uint64_t l = 2 * (1 + test_rand(&seed) % 4000);
        l = l < bytes - at ? l : bytes - at;
        lens[n++] = l;
        at += l;
    }
    megatron(prefix, src, lens, n);

    const char *spec = test_name("pages");
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 128 * MiB, NULL, &p));
    /* the opted-out ingests first: free space an ingest backed with 2 MiB
     * pages and gave back (the unused tail of a reservation) keeps them */
    struct cxlp_import_opts o = {.format = CXLP_FMT_RAW, .dtype = -1, .record_size = rs,
                                 .no_hugepages = 1};
    CHECK_OK(cxlp_import(p, "small", raw, &o));
    struct cxlp_import_opts m = {.format = CXLP_FMT_MEGATRON, .dtype = -1, .no_hugepages = 1};
    CHECK_OK(cxlp_import(p, "tokens_small", prefix, &m));
    o.no_hugepages = m.no_hugepages = 0;
    CHECK_OK(cxlp_import(p, "huge", raw, &o));
    CHECK_OK(cxlp_import(p, "tokens", prefix, &m));

    const char *names[] = {"huge", "small", "tokens", "tokens_small"};
    for (int i = 0; i < 4; i++) {
        cxlp_store *s;
        uint64_t b, h;
        CHECK_OK(cxlp_store_open(p, names[i], &s));
        CHECK_OK(cxlp_store_pages(s, &b, &h));
        CHECK_OK(cxlp_store_verify(s));
        CHECK_OK(cxlp_store_close(s));
        printf("%-12s %llu of %llu bytes on 2 MiB pages\n", names[i], (unsigned long long)h,
               (unsigned long long)b);
        CHECK(b >= bytes && h <= b);
        int small = strstr(names[i], "small") != NULL;
        if (!small && h == 0) {
            /* the kernel gave none: nothing here can be tested */
            cxlp_pool_close(p);
            cxlp_pool_destroy(spec);
            SKIP("no 2 MiB pages for shm on this kernel or at this moment");
        }
        if (small) {
            CHECK(h == 0);
            CHECK(child_reads(spec, names[i], src, rs, i == 3 ? lens : NULL, 0) == 0);
        } else {
            /* one shard of 24 MiB: all but its partial 2 MiB ends */
            CHECK(h >= b - 4 * MiB);
            /* what the pages say is what a reader's page tables get */
            CHECK(child_reads(spec, names[i], src, rs, i == 2 ? lens : NULL,
                              (h >> 10) - 2048) == 0);
        }
    }
    CHECK(cxlp_store_pages(NULL, NULL, NULL) == CXLP_EARG);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    char path[300];
    snprintf(path, sizeof path, "%s.bin", prefix);
    unlink(path);
    snprintf(path, sizeof path, "%s.idx", prefix);
    unlink(path);
    unlink(raw);
    free(lens);
    free(src);
    printf("ok\n");
    return 0;
}
