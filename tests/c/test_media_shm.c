/* shm backend: exclusive create, 0600, shared pages across mappings,
 * read-only attach, prepare (fallocate), destroy. */
#include <numaif.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include "test.h"
#include "common/common.h"
#include "media/media.h"

int main(void)
{
    char spec[160], err[256];
    snprintf(spec, sizeof spec, "shm:%s", test_name("tmedia"));
    struct media a, b, c;
    CHECK_OK(media_create(&a, spec, 8 << 20, 0, err, sizeof err));
    CHECK(a.kind == CXLP_MEDIA_SHM && a.emulated == 1 && a.size == (8u << 20));
    struct stat st;
    CHECK(stat(a.path, &st) == 0);
    CHECK((st.st_mode & 0777) == 0600);
    CHECK(st.st_blocks == 0); /* nothing touched yet */

    /* exclusive */
    CHECK_RC(media_create(&b, spec, 8 << 20, 0, err, sizeof err), CXLP_EEXIST);
    CHECK(strstr(err, a.path));

    /* a second mapping sees writes of the first */
    CHECK_OK(media_open(&b, spec, 1, err, sizeof err));
    CHECK(b.size == a.size);
    memcpy((char *)a.base + (5 << 20), "hello", 6);
    CHECK(strcmp((char *)b.base + (5 << 20), "hello") == 0);

    /* prepare backs the range with memory now */
    CHECK_OK(media_prepare(&a, 1 << 20, 2 << 20));
    CHECK(stat(a.path, &st) == 0);
    CHECK((uint64_t)st.st_blocks * 512 >= (2u << 20));
    CHECK_RC(media_prepare(&a, (8 << 20) - 4096, 8192), CXLP_ERANGE);
    CHECK_OK(media_sync(&a, 0, 4096));

    /* read-only attach maps PROT_READ */
    CHECK_OK(media_open(&c, spec, 0, err, sizeof err));
    CHECK(!c.writable && strcmp((char *)c.base + (5 << 20), "hello") == 0);
    media_close(&c);

    /* a custom mode is kept despite the umask */
    char spec2[160];
    snprintf(spec2, sizeof spec2, "shm:%s", test_name("tmedia"));
    CHECK_OK(media_create(&c, spec2, 1 << 20, 0644, err, sizeof err));
    CHECK(stat(c.path, &st) == 0 && (st.st_mode & 0777) == 0644);
    media_close(&c);
    CHECK_OK(media_destroy(spec2, err, sizeof err));

    media_close(&b);
    media_close(&a);
    media_close(&a); /* idempotent */
    CHECK_OK(media_destroy(spec, err, sizeof err));
    CHECK_RC(media_open(&a, spec, 0, err, sizeof err), CXLP_ENOTFOUND);
    CHECK(strstr(err, "no such pool"));
    CHECK_RC(media_destroy(spec, err, sizeof err), CXLP_ENOTFOUND);
    CHECK_RC(media_create(&a, spec, 0, 0, err, sizeof err), CXLP_EARG);

    /* more than the tmpfs can ever hold (512 TB here): refused at create,
     * naming the size and the limit, and nothing is left behind */
    struct statvfs vs;
    CHECK(statvfs("/dev/shm", &vs) == 0);
    if (vs.f_blocks) {
        CHECK_RC(media_create(&a, spec, UINT64_C(512000000000000), 0, err, sizeof err), CXLP_EARG);
        CHECK(strstr(err, "size 512000000000000 bytes is more than /dev/shm can hold"));
        char cap[64];
        snprintf(cap, sizeof cap, "(%llu bytes, its tmpfs size)",
                 (unsigned long long)vs.f_blocks * vs.f_frsize);
        CHECK(strstr(err, cap));
        CHECK_RC(media_open(&a, spec, 0, err, sizeof err), CXLP_ENOTFOUND);
    }

    /* the nodes of a shm object's memory: those of its resident pages */
    CHECK_OK(media_create(&a, spec, 8 << 20, 0, err, sizeof err));
    memset(a.base, 7, 4096);
    CHECK(stat(a.path, &st) == 0);
    blkcnt_t before = st.st_blocks; /* one page, or a 2 MiB one where shmem THP is on */
    uint32_t w[MEDIA_MAX_NODES];
    int nodes = media_nodes(&a, w);
    int here = -1;
    CHECK(get_mempolicy(&here, NULL, 0, a.base, MPOL_F_NODE | MPOL_F_ADDR) == 0);
    CHECK(nodes >= 1 && w[here] >= 1);
    CHECK(stat(a.path, &st) == 0 && st.st_blocks == before); /* looking filled no hole */
    media_close(&a);
    CHECK_OK(media_destroy(spec, err, sizeof err));
    printf("ok\n");
    return 0;
}
