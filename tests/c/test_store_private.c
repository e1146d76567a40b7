/* cxlp_store_private: writes through the private copy-on-write view of a
 * record change what this view shows and nothing else: the shared view, a
 * second reader, a child process and the checksums all keep the stored
 * bytes; reading through the private view shares the pool's pages (it adds
 * no resident anonymous memory until a page is written). */
#include <sys/wait.h>

#include "smaps.h"
#include "test.h"

#define N 512
#define RS 4096

/* kB of anonymous (private, written) memory this process has resident. */
static uint64_t anon_kb(void)
{
    return smaps_rollup_kb("Anonymous");
}

static uint8_t rec_byte(uint64_t i, uint64_t k)
{
    return (uint8_t)(i * 7 + k);
}

int main(void)
{
    const char *spec = test_name("private");
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 16 << 20, NULL, &p));
    struct cxlp_schema sc = {.fixed = 1, .record_size = RS, .n_fields = 1,
                             .fields = {{.name = "x", .dtype = CXLP_DT_U8, .ndim = 1,
                                         .shape = {RS}}}};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "d", &sc, NULL, &w));
    uint8_t *rec = malloc(RS);
    CHECK(rec);
    for (uint64_t i = 0; i < N; i++) {
        for (uint64_t k = 0; k < RS; k++)
            rec[k] = rec_byte(i, k);
        CHECK_OK(cxlp_writer_append(w, rec, RS));
    }
    CHECK_OK(cxlp_writer_commit(w));
    cxlp_pool_close(p);

    struct cxlp_pool_opts ro = {.readonly = 1};
    CHECK_OK(cxlp_pool_open(spec, &ro, &p));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));

    /* reading every record through the private view: same bytes, shared pages */
    uint64_t a0 = anon_kb();
    void *first = NULL;
    for (uint64_t i = 0; i < N; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        void *q;
        CHECK_OK(cxlp_store_private(s, v.data, v.len, &q));
        CHECK(q != v.data && memcmp(q, v.data, RS) == 0);
        if (i == 0)
            first = q;
    }
    uint64_t a1 = anon_kb();
    printf("anonymous memory: %llu kB before reading %u KiB privately, %llu kB after\n",
           (unsigned long long)a0, N * RS / 1024, (unsigned long long)a1);
    CHECK(a1 < a0 + N * RS / 1024 / 4); /* nothing near a copy of the data */

    /* a write lands in this process's own copy of the page */
    struct cxlp_view v3;
    CHECK_OK(cxlp_store_read(s, 3, &v3));
    uint8_t *q3;
    CHECK_OK(cxlp_store_private(s, v3.data, v3.len, (void **)&q3));
    memset(q3, 0xAB, RS);
    CHECK(q3[0] == 0xAB && ((const uint8_t *)v3.data)[0] == rec_byte(3, 0));
    CHECK(((uint8_t *)first)[0] == rec_byte(0, 0)); /* the neighbour record is untouched */
    void *again;
    CHECK_OK(cxlp_store_private(s, v3.data, 1, &again));
    CHECK(again == q3); /* one mapping per attachment */
    CHECK_OK(cxlp_store_verify(s));

    /* another reader, in another process, sees the stored bytes */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        cxlp_pool *p2;
        cxlp_store *s2;
        struct cxlp_view v;
        void *q;
        if (cxlp_pool_open(spec, &ro, &p2) || cxlp_store_open(p2, "d", &s2) ||
            cxlp_store_read(s2, 3, &v) || cxlp_store_private(s2, v.data, v.len, &q))
            _exit(2);
        _exit(((uint8_t *)q)[0] == rec_byte(3, 0) && ((const uint8_t *)v.data)[0] == rec_byte(3, 0)
                  ? 0 : 1);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);

    /* memory outside the pool mapping is refused */
    void *q;
    CHECK_RC(cxlp_store_private(s, rec, RS, &q), CXLP_ERANGE);
    CHECK_RC(cxlp_store_private(s, v3.data, UINT64_MAX, &q), CXLP_ERANGE);
    CHECK(strstr(cxlp_errmsg(NULL), "not inside the pool mapping"));

    /* the private view outlives the pool handle, as the store's views do */
    CHECK_OK(cxlp_pool_close(p));
    CHECK(q3[1] == 0xAB && ((uint8_t *)first)[5] == rec_byte(0, 5));
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_destroy(spec));
    free(rec);
    printf("ok\n");
    return 0;
}
