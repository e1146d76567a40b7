/* file backend: a sparse 1 TiB pool costs no disk until touched; writes
 * reach the file; msync; a non-dax filesystem is labelled emulated. */
#include <fcntl.h>
#include <sys/stat.h>
#include "test.h"
#include "common/common.h"
#include "media/media.h"

int main(void)
{
    char path[200], spec[220], err[256];
    snprintf(path, sizeof path, "/var/tmp/%s.pool", test_name("tmedia"));
    snprintf(spec, sizeof spec, "file:%s", path);
    uint64_t tib = 1ULL << 40;
    struct media m;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = media_create(&m, spec, tib, 0, err, sizeof err);
    if (rc == -EFBIG || rc == -ENOSPC)
        SKIP("filesystem of /var/tmp refuses a 1 TiB sparse file: %s", err);
    CHECK_OK(rc);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("1 TiB sparse file created and mapped in %.3f ms\n",
           (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
    CHECK(m.size == tib && m.emulated == 1);
    struct stat st;
    CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == tib);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_blocks < 1024); /* sparse */

    /* touch the far end: one page gets a block */
    memcpy((char *)m.base + tib - 4096, "tail", 5);
    CHECK_OK(media_sync(&m, tib - 4096, 4096));
    int fd = open(path, O_RDONLY);
    char buf[5];
    CHECK(pread(fd, buf, 5, (off_t)(tib - 4096)) == 5 && strcmp(buf, "tail") == 0);
    close(fd);
    CHECK_RC(media_sync(&m, tib - 4096, 8192), CXLP_ERANGE);
    CHECK_RC(media_migrate(&m, 0, 4096, 0, NULL), -EOPNOTSUPP);
    media_close(&m);

    CHECK_OK(media_open(&m, spec, 0, err, sizeof err));
    CHECK(strcmp((char *)m.base + tib - 4096, "tail") == 0);
    media_close(&m);
    CHECK_RC(media_create(&m, spec, 4096, 0, err, sizeof err), CXLP_EEXIST);
    CHECK_OK(media_destroy(spec, err, sizeof err));
    CHECK(stat(path, &st) < 0 && errno == ENOENT);

    /* an empty file is not a pool; a missing directory names the path */
    int efd = open(path, O_CREAT | O_WRONLY, 0600);
    close(efd);
    CHECK_RC(media_open(&m, spec, 0, err, sizeof err), CXLP_EFORMAT);
    unlink(path);
    CHECK(media_create(&m, "file:/nonexistent-dir/x", 4096, 0, err, sizeof err) == -ENOENT);
    CHECK(strstr(err, "/nonexistent-dir/x"));
    printf("ok\n");
    return 0;
}
