/* pci backend: a fixed-size memory region that is a file (a PCI BAR in
 * sysfs; here a plain 16 MiB file standing in for one, as the backend
 * treats any regular file). A pool is made in it and used without the
 * region ever being resized, created or removed; destroy wipes only the
 * header page; a region that holds a pool is not formatted again. The
 * two-kernel run on a real ivshmem BAR is scripts/qemu-numa-check.sh
 * --hosts. */
#include <fcntl.h>
#include <sys/stat.h>

#include "test.h"

#define MiB (1ull << 20)

static uint64_t file_size(const char *path)
{
    struct stat st;
    CHECK(stat(path, &st) == 0);
    return (uint64_t)st.st_size;
}

int main(void)
{
    char path[256], spec[300];
    snprintf(path, sizeof path, "/var/tmp/%s.region", test_name("pci"));
    snprintf(spec, sizeof spec, "pci:%s", path);
    int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
    CHECK(fd >= 0);
    CHECK(ftruncate(fd, 16 * MiB) == 0);
    /* a marker past the pool's end must survive everything */
    CHECK(pwrite(fd, "tail", 4, 16 * MiB - 4) == 4);
    close(fd);

    struct cxlp_pool_opts o = {.lease_slots = 8, .catalog_bytes = 64 << 10};
    cxlp_pool *p;
    CHECK_RC(cxlp_pool_create(spec, 32 * MiB, &o, &p), CXLP_EARG); /* larger than the region */
    CHECK(strstr(cxlp_errmsg(NULL), "exceeds the region") != NULL);
    CHECK_OK(cxlp_pool_create(spec, 12 * MiB, &o, &p));
    CHECK(file_size(path) == 16 * MiB);
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.media == CXLP_MEDIA_PCI && st.emulated == 2 && st.size == 12 * MiB); /* a plain file */
    CHECK(strcmp(cxlp_media_name(st.media), "pci") == 0);

    struct cxlp_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.fixed = 1;
    sc.n_fields = 1;
    strcpy(sc.fields[0].name, "v");
    sc.fields[0].dtype = CXLP_DT_U64;
    sc.fields[0].ndim = 1;
    sc.fields[0].shape[0] = 4;
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "d", &sc, NULL, &w));
    for (uint64_t i = 0; i < 10000; i++) {
        uint64_t r[4] = {i, i * 3, ~i, 42};
        CHECK_OK(cxlp_writer_append(w, r, sizeof r));
    }
    CHECK_OK(cxlp_writer_commit(w));
    CHECK_OK(cxlp_pool_close(p));
    CHECK(file_size(path) == 16 * MiB);

    /* a region that holds a pool is not formatted again */
    CHECK_RC(cxlp_pool_create(spec, 12 * MiB, &o, &p), CXLP_EEXIST);
    struct cxlp_pool_opts ro = {.readonly = 1};
    CHECK_OK(cxlp_pool_open(spec, &ro, &p));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    CHECK(cxlp_store_count(s) == 10000);
    for (uint64_t i = 0; i < 10000; i += 7) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        const uint64_t *r = v.data;
        CHECK(r[0] == i && r[1] == i * 3 && r[2] == ~i && r[3] == 42);
    }
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));

    /* destroy wipes the header; the region stays, whole */
    CHECK_OK(cxlp_pool_destroy(spec));
    CHECK(file_size(path) == 16 * MiB);
    CHECK_RC(cxlp_pool_open(spec, NULL, &p), CXLP_EFORMAT);
    CHECK_RC(cxlp_pool_destroy(spec), CXLP_ENOTFOUND);
    char tail[4];
    fd = open(path, O_RDONLY);
    CHECK(fd >= 0 && pread(fd, tail, 4, 16 * MiB - 4) == 4 && memcmp(tail, "tail", 4) == 0);
    close(fd);
    /* and takes a new pool */
    CHECK_OK(cxlp_pool_create(spec, 16 * MiB, &o, &p));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    CHECK(unlink(path) == 0);

    char missing[300];
    snprintf(missing, sizeof missing, "pci:%s.absent", path);
    CHECK_RC(cxlp_pool_open(missing, NULL, &p), CXLP_ENODEV);
    CHECK_RC(cxlp_pool_create("pci:", MiB, NULL, &p), CXLP_EARG);
    printf("ok\n");
    return 0;
}
