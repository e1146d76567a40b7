/* The pool's structural check (the first part of cxlp_pool_verify), from a
 * read-only handle, while another thread places and drops copies (a
 * migration back and forth; a loader staging between passes does the
 * same): every placement and drop changes location words the check reads
 * twice (as a copy, then as the reservation or deferred free it was), and
 * a copy in flight must not be reported as lost or overlapping. */
#include <pthread.h>

#include "test.h"
#include "records.h"
#include "pool/pool.h"

#define MiB (1ull << 20)

static char pool[128];

/* Migrates dataset "small" between the tiers until stop. */
struct mover {
    const char *pool;
    int stop, rounds, rc;
};

static void *move_loop(void *arg)
{
    struct mover *m = arg;
    cxlp_pool *p;
    if ((m->rc = cxlp_pool_open(m->pool, NULL, &p)))
        return NULL;
    while (!__atomic_load_n(&m->stop, __ATOMIC_ACQUIRE) && !m->rc) {
        m->rc = cxlp_migrate(p, "small", m->rounds % 2 ? "nvme" : "dram", NULL, NULL);
        __atomic_add_fetch(&m->rounds, 1, __ATOMIC_RELAXED);
    }
    cxlp_pool_close(p);
    return NULL;
}

/* The pool's structural check (cxlp_pool_verify's first part), read-only,
 * while another thread migrates: each of its placements and drops changes
 * words the check reads twice (as a copy, then as the reservation or free
 * it was). */
static void verify_under_migration(void)
{
    struct mover m = {.pool = pool};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, move_loop, &m) == 0);
    cxlp_pool *ro;
    CHECK_OK(cxlp_pool_open(pool, &(struct cxlp_pool_opts){.readonly = 1}, &ro));
    int checks = 0;
    while (__atomic_load_n(&m.rounds, __ATOMIC_RELAXED) < 30 && !m.rc) {
        int rc = pool_check(ro, NULL, NULL);
        if (rc)
            fprintf(stderr, "verify under migration: %s\n", cxlp_errmsg(NULL));
        CHECK_OK(rc);
        checks++;
    }
    __atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CHECK_OK(m.rc);
    CHECK_OK(cxlp_pool_close(ro));
    printf("verify under migration: %d checks passed during %d migrations\n", checks, m.rounds);
    CHECK(checks > 0);
}

static void count_locked(void *ctx, const char *line)
{
    if (strstr(line, "checked holding the writer lock"))
        ++*(int *)ctx;
}

/* The same from a writable handle with one unlocked try: every check that
 * finds a problem outside a quiet window is made again holding the writer
 * lock, so no sound pool is reported broken however busy its writers. */
static void verify_writable_locks(void)
{
    struct mover m = {.pool = pool};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, move_loop, &m) == 0);
    cxlp_pool *rw;
    CHECK_OK(cxlp_pool_open(pool, NULL, &rw));
    int tries = pool_check_tries;
    pool_check_tries = 1;
    int checks = 0, locked = 0;
    while (__atomic_load_n(&m.rounds, __ATOMIC_RELAXED) < 30 && !m.rc) {
        int rc = pool_check(rw, count_locked, &locked);
        if (rc)
            fprintf(stderr, "writable verify under migration: %s\n", cxlp_errmsg(NULL));
        CHECK_OK(rc);
        checks++;
    }
    pool_check_tries = tries;
    __atomic_store_n(&m.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    CHECK_OK(m.rc);
    CHECK_OK(cxlp_pool_close(rw));
    printf("writable verify under migration, one unlocked try: %d checks passed during %d "
           "migrations, %d of them under the writer lock\n", checks, m.rounds, locked);
    CHECK(checks > 0);
}

int main(void)
{
    snprintf(pool, sizeof pool, "%s", test_name("chklive"));
    cxlp_pool *p;
    CHECK_OK(rec_tier_pool(pool, "4M", "16M", 16, &p));
    uint64_t n;
    CHECK_OK(rec_ingest(p, "small", 1, 3, 1 * MiB, 64 * 1024, &n, NULL));
    verify_under_migration();
    verify_writable_locks();
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(pool));
    printf("ok\n");
    return 0;
}
