/* Four reader processes read every record of one dataset, each checking the
 * record's self-check and content, while a fifth process ingests another
 * dataset into the same pool. Readers keep passing over the dataset until
 * the ingest has finished (at least one full pass each), so reads overlap
 * the writer's reserves, seals and catalog flip. All must pass. */
#include <sys/mman.h>
#include <sys/wait.h>

#include "test.h"
#include "records.h"

struct shared {
    uint64_t ingest_done;     /* set by the ingester after its commit */
    uint64_t checked[4];      /* records checked by each reader */
    uint64_t passes[4];
};

static int reader(const char *spec, int r, uint64_t seed, struct shared *sh)
{
    cxlp_pool *p;
    cxlp_store *s;
    if (cxlp_pool_open(spec, NULL, &p) || cxlp_store_open(p, "base", &s)) {
        fprintf(stderr, "reader %d: %s\n", r, cxlp_errmsg(NULL));
        return 2;
    }
    uint64_t n = cxlp_store_count(s), rng = seed + (uint64_t)r;
    do {
        /* each pass starts elsewhere and strides differently */
        uint64_t start = test_rand(&rng) % n, stride = 1 + 2 * (uint64_t)r;
        while (n % stride == 0 || stride % 2 == 0)
            stride++;
        for (uint64_t k = 0; k < n; k++) {
            uint64_t i = (start + k * stride) % n;
            struct cxlp_view v;
            if (cxlp_store_read(s, i, &v) || !rec_ok(v.data, v.len, 0, seed, i)) {
                fprintf(stderr, "reader %d: record %" PRIu64 " bad: %s\n", r, i, cxlp_errmsg(NULL));
                return 1;
            }
            __atomic_fetch_add(&sh->checked[r], 1, __ATOMIC_RELAXED);
        }
        sh->passes[r]++;
    } while (!__atomic_load_n(&sh->ingest_done, __ATOMIC_ACQUIRE)); /* pairs with the ingester's release */
    cxlp_store_close(s);
    cxlp_pool_close(p);
    return 0;
}

int main(void)
{
    uint64_t seed = test_seed();
    int san = test_sanitized();
    uint64_t base_bytes = san ? 8 << 20 : 64 << 20, new_bytes = san ? 16 << 20 : 64 << 20;
    const char *spec = test_name("conc");
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, base_bytes + new_bytes + (64 << 20), NULL, &p));
    uint64_t n_base, n_new = 0;
    CHECK_OK(rec_ingest(p, "base", 0, seed, base_bytes, 1 << 20, &n_base, NULL));

    struct shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(sh != MAP_FAILED);
    memset(sh, 0, sizeof *sh);
    pid_t pids[5];
    for (int r = 0; r < 4; r++) {
        pids[r] = fork();
        CHECK(pids[r] >= 0);
        if (pids[r] == 0)
            _exit(reader(spec, r, seed, sh));
    }
    pids[4] = fork();
    CHECK(pids[4] >= 0);
    if (pids[4] == 0) {
        cxlp_pool *q;
        uint64_t n;
        int rc = cxlp_pool_open(spec, NULL, &q);
        if (!rc)
            rc = rec_ingest(q, "fresh", 1, seed + 1, new_bytes, 256 << 10, &n, NULL);
        if (rc)
            fprintf(stderr, "ingester: %s\n", cxlp_errmsg(NULL));
        __atomic_store_n(&sh->ingest_done, 1, __ATOMIC_RELEASE);
        cxlp_pool_close(q);
        _exit(rc ? 1 : 0);
    }
    int fails = 0;
    for (int k = 0; k < 5; k++) {
        int st;
        CHECK(waitpid(pids[k], &st, 0) == pids[k]);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "process %d failed (status %#x)\n", k, st);
            fails++;
        }
    }
    CHECK(fails == 0);
    for (int r = 0; r < 4; r++) {
        printf("reader %d: %" PRIu64 " records checked in %" PRIu64 " passes\n", r,
               sh->checked[r], sh->passes[r]);
        CHECK(sh->checked[r] >= n_base && sh->passes[r] >= 1);
    }

    /* the ingested dataset is whole */
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "fresh", &s));
    n_new = cxlp_store_count(s);
    CHECK(n_new == rec_count(1, seed + 1, new_bytes));
    for (uint64_t i = 0; i < n_new; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(rec_ok(v.data, v.len, 1, seed + 1, i));
    }
    CHECK_OK(cxlp_store_close(s));
    printf("base: %" PRIu64 " records; ingested alongside: %" PRIu64 " records\n", n_base, n_new);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    printf("ok\n");
    return 0;
}
