/* cxlp_store_hugepages puts a dataset of a shm pool on 2 MiB pages: after
 * the call this process maps the pool's records with 2 MiB entries, so does
 * another process that attaches read-only afterwards, and every record and
 * checksum is what was imported. Skips (77) where the kernel cannot collapse
 * (Linux < 6.1) or has no free 2 MiB pages right now. */
#include <sys/wait.h>

#include "smaps.h"
#include "test.h"

#define MiB (1ull << 20)

static void read_all(cxlp_store *s, const uint8_t *src, uint64_t rs)
{
    for (uint64_t i = 0; i < cxlp_store_count(s); i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(v.len == rs && memcmp(v.data, src + i * rs, rs) == 0);
    }
}

int main(void)
{
    uint64_t seed = test_seed();
    const uint64_t bytes = 12 * MiB, rs = 4096;
    uint8_t *src = test_random_bytes(&seed, bytes);
    char path[256];
    snprintf(path, sizeof path, "/tmp/%s.raw", test_name("huge_src"));
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(src, 1, bytes, f) == bytes && fclose(f) == 0);

    const char *spec = test_name("huge");
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 32 * MiB, NULL, &p));
    /* ingested onto 4 KiB pages (a fresh ingest is on 2 MiB pages already:
     * test_store_pages) */
    struct cxlp_import_opts o = {.format = CXLP_FMT_RAW, .dtype = -1, .record_size = rs,
                                 .no_hugepages = 1};
    CHECK_OK(cxlp_import(p, "d", path, &o));
    CHECK(unlink(path) == 0);
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    read_all(s, src, rs);
    uint64_t before = pmd_mapped_kb();

    int rc = cxlp_store_hugepages(s);
    if (rc == CXLP_EUNSUPPORTED || rc == -ENOMEM || rc == -EAGAIN) {
        printf("%s\n", cxlp_errmsg(NULL));
        cxlp_store_close(s);
        cxlp_pool_close(p);
        cxlp_pool_destroy(spec);
        SKIP("no 2 MiB pages for shm here");
    }
    CHECK_OK(rc);
    read_all(s, src, rs);
    uint64_t after = pmd_mapped_kb(), pb, ph;
    CHECK_OK(cxlp_store_pages(s, &pb, &ph));
    CHECK(ph >= 4 * 2 * MiB && ph <= pb);
    printf("ShmemPmdMapped: %llu kB before, %llu kB after\n", (unsigned long long)before,
           (unsigned long long)after);
    /* the 12 MiB shard holds at least four whole 2 MiB pieces */
    CHECK(after >= before + 4 * 2048);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_hugepages(s)); /* done already: still fine */

    /* another process attaching read-only later maps 2 MiB pages too */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        cxlp_pool *q;
        cxlp_store *t;
        struct cxlp_pool_opts ro = {.readonly = 1};
        if (cxlp_pool_open(spec, &ro, &q) || cxlp_store_open(q, "d", &t))
            _exit(2);
        uint64_t b = pmd_mapped_kb();
        read_all(t, src, rs);
        _exit(pmd_mapped_kb() >= b + 4 * 2048 ? 0 : 3);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
    if (WEXITSTATUS(st) != 0) {
        fprintf(stderr, "read-only attacher: exit %d (3: no 2 MiB mappings)\n", WEXITSTATUS(st));
        CHECK(0);
    }

    CHECK_OK(cxlp_store_close(s));
    CHECK(cxlp_store_hugepages(NULL) == CXLP_EARG);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    free(src);
    printf("ok\n");
    return 0;
}
