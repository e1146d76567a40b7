/* Replays the committed fuzz seed corpora through the parsers the fuzz
 * targets drive: the valid seeds are accepted (the fortran-order and
 * structured .npy seeds are refused as unsupported), so a parser change that
 * rejects real numpy or Megatron output fails here, not only under fuzzing. */
#include <dirent.h>
#include <libgen.h>

#include "test.h"
#include "common/common.h"
#include "store/megatron.h"
#include "store/npy.h"

static uint8_t *slurp(const char *path, uint64_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    rewind(f);
    uint8_t *b = malloc((size_t)n + 1);
    CHECK(b && fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (uint64_t)n;
    return b;
}

int main(void)
{
    const char *data = getenv("CXLP_TEST_DATA");
    if (!data)
        SKIP("CXLP_TEST_DATA not set (run under ctest)");
    char root[1024];
    snprintf(root, sizeof root, "%s", data);
    char *src = dirname(dirname(root)); /* tests/data -> repository root */
    char err[ERRMSG_MAX];
    int seen[2] = {0, 0};
    for (int t = 0; t < 2; t++) {
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/fuzz/corpus/%s", src,
                 t == 0 ? "fuzz_npy" : "fuzz_megatron_idx");
        DIR *dd = opendir(dir);
        CHECK(dd != NULL);
        struct dirent *e;
        while ((e = readdir(dd))) {
            if (e->d_name[0] == '.')
                continue;
            char path[1500];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            uint64_t len;
            uint8_t *b = slurp(path, &len);
            int rc;
            if (t == 0) {
                struct npy_header h;
                rc = npy_parse(b, len, e->d_name, &h, err, sizeof err);
                if (!rc)
                    rc = npy_check_size(&h, len, e->d_name, err, sizeof err);
                int want = strstr(e->d_name, "fortran") || strstr(e->d_name, "structured")
                               ? CXLP_EUNSUPPORTED : 0;
                if (rc != want)
                    fprintf(stderr, "%s: %d %s\n", path, rc, err);
                CHECK(rc == want);
            } else {
                CHECK(len >= 8);
                uint64_t bin_len = 0;
                memcpy(&bin_len, b, 8);
                struct megatron_idx m;
                rc = megatron_idx_parse(b + 8, len - 8, bin_len, e->d_name, "bin", &m, err,
                                        sizeof err);
                if (rc)
                    fprintf(stderr, "%s: %d %s\n", path, rc, err);
                CHECK(rc == 0 && m.total_bytes == bin_len);
            }
            seen[t]++;
            free(b);
        }
        closedir(dd);
    }
    CHECK(seen[0] >= 10 && seen[1] >= 8);
    printf("replayed %d npy and %d idx seeds\n", seen[0], seen[1]);
    return 0;
}
