/* Writers killed at the instants that matter: holding the lock with a
 * published reservation, after writing the new catalog slot but before the
 * flip, right after the flip; then at random instants of a publish/remove
 * loop. After each kill the next writer proceeds (robust lock), the pool
 * checks clean, and the dead writer's reservations come back. */
#include <signal.h>

#include "test_pool_util.h"

#define MiB (1ull << 20)

static int run_child(const char *spec, const char *fault, int what)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        cxlp_pool *p;
        if (cxlp_pool_open(spec, NULL, &p))
            _exit(2);
        setenv("CXLP_FAULT", fault, 1);
        struct pool_extent e;
        if (what == 0)
            pool_reserve(p, 0, 1 * MiB, &e);
        else
            tp_publish(p, "crashy", 3, 64 * 1024, NULL);
        _exit(3); /* the fault point did not fire */
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return st;
}

static void expect_killed(int st)
{
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL))
        fprintf(stderr, "child status %#x\n", st);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static void settle(cxlp_pool *p)
{
    /* any write transaction reclaims; this one must not block on the dead
     * holder's lock */
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 0, 4096, &e));
    CHECK_OK(pool_unreserve(p, 0, e));
}

static void fixed_points(void)
{
    const char *name = test_name("crash");
    struct cxlp_pool_opts o = {.catalog_bytes = 16384, .lease_slots = 8};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(name, 16 * MiB, &o, &p));
    struct cxlp_pool_stat st0, st;
    CHECK_OK(cxlp_pool_stat(p, &st0));

    /* killed holding the lock, reservation already published */
    expect_killed(run_child(name, "reserve-locked", 0));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 1 * MiB);
    CHECK(st.generation == st0.generation + 1);
    tp_check(p);
    struct pool_extent mine;
    CHECK_OK(pool_reserve(p, 0, 8192, &mine));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 8192); /* the child's MiB is back */
    CHECK_OK(pool_unreserve(p, 0, mine));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.free_bytes == st.data_bytes && st.largest_free == st.data_bytes);

    /* killed with the new catalog written but not flipped */
    expect_killed(run_child(name, "publish-before-flip", 1));
    struct pool_dataset d;
    struct pool_shard *sh;
    struct attach *a;
    uint64_t gen;
    CHECK_RC(pool_lookup(p, "crashy", &d, &sh, &a, &gen), CXLP_ENOTFOUND);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.n_datasets == 0 && st.reserved_bytes == 3 * 64 * 1024);
    tp_check(p);
    settle(p);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 0 && st.free_bytes == st.data_bytes);
    tp_check(p);

    /* killed right after the flip: the dataset is there, whole */
    expect_killed(run_child(name, "publish-after-flip", 1));
    CHECK_OK(pool_lookup(p, "crashy", &d, &sh, &a, &gen));
    CHECK(tp_verify(a, &d, sh) == 0);
    CHECK(d.info.version == gen);
    attach_unpin(a, gen);
    attach_unref(a);
    free(sh);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.n_datasets == 1 && st.reserved_bytes == 0 && st.used_bytes == 3 * 64 * 1024 + tp_meta(3));
    settle(p);
    tp_check(p);
    /* the fault points are on the publish path only */
    CHECK_OK(cxlp_pool_remove(p, "crashy"));
    settle(p);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.free_bytes == st.data_bytes);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(name));
}

/* a child publishing and removing in a loop, killed at a random instant */
static void random_kills(void)
{
    uint64_t seed = test_seed();
    const char *name = test_name("rkill");
    struct cxlp_pool_opts o = {.catalog_bytes = 16384, .lease_slots = 8};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(name, 16 * MiB, &o, &p));
    int rounds = test_sanitized() ? 4 : 10;
    for (int r = 0; r < rounds; r++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            cxlp_pool *c;
            if (cxlp_pool_open(name, NULL, &c))
                _exit(2);
            char nm[32];
            for (int i = 0;; i++) {
                snprintf(nm, sizeof nm, "r%d.%d", r, i);
                if (tp_publish(c, nm, 2, 8192, NULL))
                    _exit(4);
                if (i > 0) {
                    snprintf(nm, sizeof nm, "r%d.%d", r, i - 1);
                    if (cxlp_pool_remove(c, nm))
                        _exit(5);
                }
            }
        }
        usleep((useconds_t)(1000 + test_rand(&seed) % 20000));
        int st;
        CHECK(kill(pid, SIGKILL) == 0);
        CHECK(waitpid(pid, &st, 0) == pid);
        if (!WIFSIGNALED(st))
            fprintf(stderr, "round %d: child exited %d before the kill\n", r, WEXITSTATUS(st));
        CHECK(WIFSIGNALED(st));
        tp_check(p);
        settle(p);
        tp_check(p);
        /* whatever got published is whole; drop it */
        struct cxlp_dataset_info inf[8];
        size_t n;
        CHECK_OK(cxlp_pool_list(p, inf, 8, &n));
        CHECK(n <= 2);
        for (size_t i = 0; i < n; i++) {
            struct pool_dataset d;
            struct pool_shard *sh;
            struct attach *a;
            uint64_t gen;
            CHECK_OK(pool_lookup(p, inf[i].name, &d, &sh, &a, &gen));
            CHECK(tp_verify(a, &d, sh) == 0);
            attach_unpin(a, gen);
            attach_unref(a);
            free(sh);
            CHECK_OK(cxlp_pool_remove(p, inf[i].name));
        }
        settle(p);
        struct cxlp_pool_stat s;
        CHECK_OK(cxlp_pool_stat(p, &s));
        CHECK(s.free_bytes == s.data_bytes && s.n_datasets == 0);
    }
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(name));
}

int main(void)
{
    fixed_points();
    random_kills();
    printf("ok\n");
    return 0;
}
