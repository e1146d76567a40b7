/* The lease table: one slot per attachment, a dead holder's slot and pins
 * are reclaimed, a table full of live holders refuses with CXLP_EBUSY. */
#include <signal.h>
#include <sys/prctl.h>

#include "test_pool_util.h"
#include "pool/host.h"

#define MiB (1ull << 20)

/* forks a child that opens spec (and looks up ds when given), reports on
 * the pipe and waits to be killed */
static pid_t holder(const char *spec, const char *ds)
{
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* no orphans when a CHECK fails */
        close(fds[0]);
        cxlp_pool *p;
        char ok = 'y';
        if (cxlp_pool_open(spec, NULL, &p))
            ok = 'n';
        struct pool_dataset d;
        struct pool_shard *sh;
        struct attach *a;
        uint64_t gen;
        if (ok == 'y' && ds && pool_lookup(p, ds, &d, &sh, &a, &gen))
            ok = 'l';
        if (write(fds[1], &ok, 1) != 1)
            _exit(2);
        for (;;)
            pause();
    }
    close(fds[1]);
    char c = 0;
    CHECK(read(fds[0], &c, 1) == 1);
    close(fds[0]);
    CHECK(c == 'y');
    return pid;
}

static void kill_wait(pid_t pid)
{
    int st;
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

static uint32_t live(cxlp_pool *p)
{
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    return st.live_leases;
}

static uint64_t slots_naming(cxlp_pool *p, pid_t pid)
{
    struct attach *a = pool_attach(p);
    uint64_t n = 0;
    for (uint64_t i = 0; i < a->L.lease_slots; i++)
        if ((a->leases[i].owner & 0xffffffffu) == (uint64_t)pid)
            n++;
    return n;
}

static void table(void)
{
    const char *name = test_name("lease");
    struct cxlp_pool_opts o = {.catalog_bytes = 16384, .lease_slots = 8};
    cxlp_pool *p, *h[8];
    CHECK_OK(cxlp_pool_create(name, 8 * MiB, &o, &p));
    for (int i = 0; i < 7; i++)
        CHECK_OK(cxlp_pool_open(name, NULL, &h[i]));
    CHECK(live(p) == 8);
    CHECK(slots_naming(p, getpid()) == 8);
    CHECK_RC(cxlp_pool_open(name, NULL, &h[7]), CXLP_EBUSY);
    CHECK(strstr(cxlp_errmsg(NULL), "lease table full") != NULL);
    CHECK(strstr(cxlp_errmsg(NULL), name) != NULL);
    struct cxlp_pool_opts ro = {.readonly = 1};
    CHECK_RC(cxlp_pool_open(name, &ro, &h[7]), CXLP_EBUSY);
    /* a slot freed by close is reused */
    CHECK_OK(cxlp_pool_close(h[6]));
    CHECK(live(p) == 7);
    CHECK_OK(cxlp_pool_open(name, NULL, &h[6]));
    CHECK(live(p) == 8);

    /* a dead holder: its slot counts as free for the next attach */
    CHECK_OK(cxlp_pool_close(h[5]));
    CHECK_OK(cxlp_pool_close(h[6]));
    pid_t child = holder(name, NULL);
    CHECK(live(p) == 7);
    CHECK(slots_naming(p, child) == 1);
    kill_wait(child);
    CHECK(live(p) == 6);
    CHECK(slots_naming(p, child) == 1); /* not yet cleared */
    CHECK_OK(cxlp_pool_open(name, NULL, &h[5]));
    CHECK_OK(cxlp_pool_open(name, NULL, &h[6])); /* needs the dead slot */
    CHECK(slots_naming(p, child) == 0);
    CHECK(live(p) == 8);
    CHECK_RC(cxlp_pool_open(name, NULL, &h[7]), CXLP_EBUSY);

    /* a writer clears dead slots too */
    CHECK_OK(cxlp_pool_close(h[6]));
    child = holder(name, NULL);
    kill_wait(child);
    CHECK(slots_naming(p, child) == 1);
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 0, 4096, &e));
    CHECK(slots_naming(p, child) == 0);
    CHECK_OK(pool_unreserve(p, 0, e));
    for (int i = 0; i < 6; i++)
        CHECK_OK(cxlp_pool_close(h[i]));
    CHECK(live(p) == 1);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(name));
}

static void many(void)
{
    const char *name = test_name("many");
    enum { N = 64 };
    struct cxlp_pool_opts o = {.catalog_bytes = 16384, .lease_slots = N};
    cxlp_pool *h[N];
    CHECK_OK(cxlp_pool_create(name, 8 * MiB, &o, &h[0]));
    for (int i = 1; i < N; i++)
        CHECK_OK(cxlp_pool_open(name, NULL, &h[i]));
    CHECK(live(h[0]) == N);
    /* every attachment owns a different slot */
    for (int i = 0; i < N; i++)
        for (int k = i + 1; k < N; k++)
            CHECK(pool_attach(h[i])->lease != pool_attach(h[k])->lease);
    cxlp_pool *x;
    CHECK_RC(cxlp_pool_open(name, NULL, &x), CXLP_EBUSY);
    for (int i = N - 1; i >= 1; i--)
        CHECK_OK(cxlp_pool_close(h[i]));
    CHECK(live(h[0]) == 1);
    CHECK_OK(cxlp_pool_close(h[0]));
    CHECK_OK(cxlp_pool_destroy(name));
}

/* pins: a live reader's pin holds a deferred free back; its death
 * releases it */
static void pins(void)
{
    const char *name = test_name("pins");
    struct cxlp_pool_opts o = {.catalog_bytes = 16384, .lease_slots = 8};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(name, 8 * MiB, &o, &p));
    CHECK_OK(tp_publish(p, "d", 2, 8192, NULL));
    pid_t child = holder(name, "d");
    struct attach *a = pool_attach(p);
    CHECK(a->lease->min_gen == UINT64_MAX); /* we pin nothing */
    CHECK_OK(cxlp_pool_remove(p, "d"));
    struct cxlp_pool_stat st;
    struct pool_extent e;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(pool_reserve(p, 0, 4096, &e));
        CHECK_OK(pool_unreserve(p, 0, e));
        CHECK_OK(cxlp_pool_stat(p, &st));
        CHECK(st.deferred_bytes == 16384 + tp_meta(2));
    }
    tp_check(p);
    kill_wait(child);
    CHECK_OK(pool_reserve(p, 0, 4096, &e));
    CHECK_OK(pool_unreserve(p, 0, e));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.deferred_bytes == 0 && st.free_bytes == st.data_bytes);

    /* nested pins of one attachment: the minimum is published */
    attach_pin(a, 5);
    attach_pin(a, 3);
    attach_pin(a, 5);
    CHECK(a->lease->min_gen == 3);
    attach_unpin(a, 3);
    CHECK(a->lease->min_gen == 5);
    attach_unpin(a, 5);
    CHECK(a->lease->min_gen == 5);
    attach_unpin(a, 5);
    CHECK(a->lease->min_gen == UINT64_MAX);
    tp_check(p);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(name));
}

/* a live writer that keeps the lock: others give up with CXLP_EBUSY */
static void stuck_writer(void)
{
    const char *name = test_name("stuck");
    struct cxlp_pool_opts o = {.catalog_bytes = 16384, .lease_slots = 4};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(name, 8 * MiB, &o, &p));
    int fds[2];
    CHECK(pipe(fds) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        cxlp_pool *c;
        struct wlock l;
        if (cxlp_pool_open(name, NULL, &c) || host_lock(pool_attach(c), &l, NULL))
            _exit(2);
        char ok = 'y';
        if (write(fds[1], &ok, 1) != 1)
            _exit(3);
        for (;;)
            pause();
    }
    char c;
    CHECK(read(fds[0], &c, 1) == 1 && c == 'y');
    setenv("CXLP_LOCK_TIMEOUT_MS", "200", 1);
    struct pool_extent e;
    CHECK_RC(pool_reserve(p, 0, 4096, &e), CXLP_EBUSY);
    char who[64];
    snprintf(who, sizeof who, "writer lock held by pid %d of this host", (int)pid);
    if (!strstr(cxlp_errmsg(pool_obj(p)), who))
        fprintf(stderr, "message: %s\n", cxlp_errmsg(pool_obj(p)));
    CHECK(strstr(cxlp_errmsg(pool_obj(p)), who) != NULL);
    CHECK_RC(cxlp_pool_remove(p, "x"), CXLP_EBUSY);
    /* readers are not affected */
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    /* once the holder dies the lock is recovered */
    kill_wait(pid);
    CHECK_OK(pool_reserve(p, 0, 4096, &e));
    CHECK_OK(pool_unreserve(p, 0, e));
    unsetenv("CXLP_LOCK_TIMEOUT_MS");
    close(fds[0]);
    close(fds[1]);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(name));
}

int main(void)
{
    stuck_writer();
    table();
    many();
    pins();
    printf("ok\n");
    return 0;
}
