/*
 * import_test.h - what the importer tests share: a scratch pool and
 * directory, file writers, the "pool unchanged" snapshot, and the check
 * that a failed import named its file and field.
 */
#ifndef CXLP_IMPORT_TEST_H
#define CXLP_IMPORT_TEST_H

#include <fcntl.h>
#include <sys/stat.h>

#include "test.h"

static char scratch[256];
static char pool_spec[128];

/* Creates the scratch directory and a pool of size bytes. */
static inline cxlp_pool *setup(uint64_t size)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(scratch, sizeof scratch, "%s/cxlp_import.%d.XXXXXX", tmp && *tmp ? tmp : "/tmp",
             (int)getpid());
    CHECK(mkdtemp(scratch) != NULL);
    snprintf(pool_spec, sizeof pool_spec, "%s", test_name("imp"));
    cxlp_pool *p = NULL;
    CHECK_OK(cxlp_pool_create(pool_spec, size, NULL, &p));
    return p;
}

static inline void teardown(cxlp_pool *p)
{
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(pool_spec));
    char cmd[320];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", scratch);
    CHECK(system(cmd) == 0);
}

/* scratch/name in a rotating static buffer */
static inline const char *path_of(const char *name)
{
    static char buf[8][512];
    static int k;
    char *b = buf[k++ % 8];
    snprintf(b, 512, "%s/%s", scratch, name);
    return b;
}

static inline void write_file(const char *path, const void *data, uint64_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    CHECK(fd >= 0);
    const uint8_t *d = data;
    uint64_t done = 0;
    while (done < len) {
        ssize_t n = write(fd, d + done, len - done);
        CHECK(n > 0);
        done += (uint64_t)n;
    }
    CHECK(close(fd) == 0);
}

static inline uint8_t *read_file(const char *path, uint64_t *len)
{
    FILE *f = fopen(path, "rb");
    CHECK(f != NULL);
    CHECK(fseek(f, 0, SEEK_END) == 0);
    long n = ftell(f);
    CHECK(n >= 0);
    rewind(f);
    uint8_t *b = malloc((size_t)n + 1);
    CHECK(b != NULL);
    CHECK(fread(b, 1, (size_t)n, f) == (size_t)n);
    fclose(f);
    *len = (uint64_t)n;
    return b;
}

/* What a failed import must leave as it was. */
struct snap {
    uint64_t used, reserved, free_bytes;
    uint32_t n_datasets;
    size_t n;
    struct cxlp_dataset_info infos[16];
};

static inline void snap(cxlp_pool *p, struct snap *s)
{
    struct cxlp_pool_stat st;
    memset(s, 0, sizeof *s);
    CHECK_OK(cxlp_pool_stat(p, &st));
    s->used = st.used_bytes;
    s->reserved = st.reserved_bytes;
    s->free_bytes = st.free_bytes;
    s->n_datasets = st.n_datasets;
    CHECK_OK(cxlp_pool_list(p, s->infos, 16, &s->n));
}

static inline void same_snap(const struct snap *a, const struct snap *b)
{
    CHECK(a->used == b->used);
    CHECK(a->reserved == b->reserved);
    CHECK(a->free_bytes == b->free_bytes);
    CHECK(a->n_datasets == b->n_datasets);
    CHECK(a->n == b->n);
    for (size_t i = 0; i < a->n; i++) {
        CHECK(strcmp(a->infos[i].name, b->infos[i].name) == 0);
        CHECK(a->infos[i].version == b->infos[i].version);
    }
}

/* The import must fail with want, name needle1 (the file) and needle2 (the
 * field) in cxlp_errmsg(p), and leave the pool unchanged. */
static inline void import_fails(cxlp_pool *p, const char *name, const char *src,
                                const struct cxlp_import_opts *o, int want,
                                const char *needle1, const char *needle2, int line)
{
    struct snap before, after;
    snap(p, &before);
    int rc = cxlp_import(p, name, src, o);
    const char *msg = cxlp_errmsg(p);
    if (rc != want || !strstr(msg, needle1) || (needle2 && !strstr(msg, needle2))) {
        fprintf(stderr, "line %d: import %s: rc %d (%s), want %d (%s); msg '%s', want '%s' "
                "and '%s'\n", line, src, rc, cxlp_strerror(rc), want, cxlp_strerror(want), msg,
                needle1, needle2 ? needle2 : "");
        exit(1);
    }
    snap(p, &after);
    same_snap(&before, &after);
    cxlp_store *s = NULL;
    CHECK(cxlp_store_open(p, name, &s) == CXLP_ENOTFOUND);
}
#define IMPORT_FAILS(p, name, src, o, want, n1, n2) \
    import_fails(p, name, src, o, want, n1, n2, __LINE__)

#endif
