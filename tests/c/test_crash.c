/* Crash safety of ingest. A child process ingests a dataset of many small
 * shards (many reserve / seal steps, one publish); the parent SIGKILLs it at
 * random instants (seeded) and, through CXLP_FAULT, at the instants random
 * kills rarely hit: while it holds the writer lock (reserve-locked), just
 * before and just after the catalog flip, and in the middle of a shard.
 * After every kill:
 *   - cxlp_pool_verify passes;
 *   - each dataset is absent or complete (count and every record's content);
 *   - the next ingest succeeds, and then nothing is left reserved: the killed
 *     ingest's extents are reclaimed;
 *   - free + used + deferred == the data area.
 * The variable-size datasets alternate between streamed (size unknown) and
 * announced (expected_bytes and the record count, as the Megatron importer
 * does: shard extents reserved for what is still to come, the last one
 * sized for it).
 * Then the cross-host case (emulated hosts, host_emu.h; skipped without
 * root): the writer runs on host A and is killed at each forced point;
 * this process is host B, which cannot judge A's pid: what A held (the
 * writer lock, reservations) stays held until A's heartbeat expires, then
 * B recovers it all, and verify passes.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "host_emu.h"
#include "records.h"
#include "pool/pool.h"
#include "store/store.h"

static uint64_t ingest_bytes, shard_bytes;
static volatile uint64_t *progress; /* shared with the child */

/* rec_ingest's variable-size records, their bytes and count announced. */
static int ingest_announced(cxlp_pool *p, const char *name, uint64_t seed)
{
    uint64_t total = 0, n = rec_count(0, seed, ingest_bytes);
    for (uint64_t i = 0; i < n; i++)
        total += rec_len(0, seed, i);
    struct cxlp_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.n_fields = 1;
    strcpy(sc.fields[0].name, "bytes");
    sc.fields[0].dtype = CXLP_DT_U8;
    struct cxlp_writer_opts o = {.shard_bytes = shard_bytes, .expected_bytes = total};
    cxlp_writer *w;
    int rc = cxlp_writer_begin(p, name, &sc, &o, &w);
    if (rc)
        return rc;
    writer_expect_records(w, n);
    static uint8_t buf[REC_VAR_MAX];
    uint64_t done = 0;
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        uint64_t len = rec_len(0, seed, i);
        rec_fill(buf, len, seed, i);
        rc = cxlp_writer_append(w, buf, len);
        done += len;
        __atomic_store_n(progress, done, __ATOMIC_RELAXED);
    }
    if (rc) {
        cxlp_writer_abort(w);
        return rc;
    }
    rc = cxlp_writer_commit(w);
    if (rc == 0)
        __atomic_store_n(progress, UINT64_MAX, __ATOMIC_RELAXED);
    return rc;
}

static pid_t spawn(const char *spec, const char *name, int fixed, int announce, uint64_t seed,
                   const char *fault)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (fault)
            setenv("CXLP_FAULT", fault, 1);
        cxlp_pool *p;
        if (cxlp_pool_open(spec, NULL, &p)) {
            fprintf(stderr, "child open: %s\n", cxlp_errmsg(NULL));
            _exit(2);
        }
        uint64_t n;
        if (announce ? ingest_announced(p, name, seed)
                     : rec_ingest(p, name, fixed, seed, ingest_bytes, shard_bytes, &n, progress)) {
            fprintf(stderr, "child ingest: %s\n", cxlp_errmsg(NULL));
            _exit(3);
        }
        cxlp_pool_close(p);
        _exit(0);
    }
    return pid;
}

static void check_complete(cxlp_pool *p, const char *name, int fixed, uint64_t seed)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    uint64_t n = cxlp_store_count(s);
    CHECK(n == rec_count(fixed, seed, ingest_bytes));
    for (uint64_t i = 0; i < n; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(rec_ok(v.data, v.len, fixed, seed, i));
    }
    CHECK_OK(cxlp_store_close(s));
}

static void check_accounting(cxlp_pool *p)
{
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 0);
    CHECK(st.free_bytes + st.used_bytes + st.deferred_bytes == st.data_bytes);
}

struct cross {
    const char *spec, *name, *fault;
    uint64_t seed;
};

static int host_a_writer(void *arg)
{
    const struct cross *x = arg;
    setenv("CXLP_FAULT", x->fault, 1);
    cxlp_pool *p;
    if (cxlp_pool_open(x->spec, NULL, &p))
        return 2;
    uint64_t n;
    rec_ingest(p, x->name, 1, x->seed, 4 << 20, 256 << 10, &n, NULL);
    return 3; /* the fault point kills it first */
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void cross_host(uint64_t seed, const char *forced[], int n_forced)
{
    if (!emu_available()) {
        printf("cross-host case: SKIP (no namespaces: not root)\n");
        return;
    }
    const char *spec = test_name("xcrash");
    struct cxlp_pool_opts o = {.expiry_ms = 2000};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 64 << 20, &o, &p));
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/%s", test_name("cxlp-xcrash"));
    CHECK(mkdir(dir, 0700) == 0);
    struct emu_host A;
    emu_host_init(&A, "hostA", dir);
    for (int f = 0; f < n_forced; f++) {
        char name[32];
        snprintf(name, sizeof name, "x%d", f);
        struct cross x = {spec, name, forced[f], seed + 100 + (uint64_t)f};
        double t0 = now_s();
        CHECK(emu_wait(emu_spawn(&A, host_a_writer, &x)) == 128 + SIGKILL);
        /* at once: A's pid means nothing here, its holdings are live */
        setenv("CXLP_LOCK_TIMEOUT_MS", "200", 1);
        struct pool_extent e;
        int rc = pool_reserve(p, 0, 4096, &e);
        unsetenv("CXLP_LOCK_TIMEOUT_MS");
        struct cxlp_pool_stat st;
        if (rc == 0) {
            CHECK_OK(pool_unreserve(p, 0, e));
            CHECK_OK(cxlp_pool_stat(p, &st));
            CHECK(st.reserved_bytes > 0 || strcmp(forced[f], "publish-after-flip") == 0);
        } else {
            CHECK(rc == CXLP_EBUSY && strstr(cxlp_errmsg(pool_obj(p)), "host hostA"));
        }
        /* after the expiry host B gets everything back */
        CHECK_OK(pool_reserve(p, 0, 4096, &e));
        CHECK_OK(pool_unreserve(p, 0, e));
        double took = now_s() - t0;
        CHECK_OK(cxlp_pool_stat(p, &st));
        while (st.reserved_bytes) { /* the expiry has not passed yet */
            usleep(100000);
            CHECK_OK(pool_reserve(p, 0, 4096, &e));
            CHECK_OK(pool_unreserve(p, 0, e));
            CHECK_OK(cxlp_pool_stat(p, &st));
            took = now_s() - t0;
            CHECK(took < 60);
        }
        CHECK(st.free_bytes + st.used_bytes + st.deferred_bytes == st.data_bytes);
        /* never before the expiry: the pool clock moves at most a tick per
         * 100 ms, and A's last beat came after t0 */
        CHECK(took >= 1.95);
        CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
        struct cxlp_dataset_info inf[4];
        size_t n;
        CHECK_OK(cxlp_pool_list(p, inf, 4, &n));
        int here = n == 1;
        CHECK(here == (strcmp(forced[f], "publish-after-flip") == 0));
        if (here) {
            cxlp_store *s;
            CHECK_OK(cxlp_store_open(p, name, &s));
            for (uint64_t i = 0; i < cxlp_store_count(s); i++) {
                struct cxlp_view v;
                CHECK_OK(cxlp_store_read(s, i, &v));
                CHECK(rec_ok(v.data, v.len, 1, x.seed, i));
            }
            CHECK_OK(cxlp_store_close(s));
            CHECK_OK(cxlp_pool_remove(p, name));
        }
        printf("cross-host %-20s host A killed; host B: %s at once, all recovered after "
               "%.1f s (expiry 2.0 s), dataset %s\n", forced[f],
               rc ? "writer lock busy" : "its reservations held", took,
               here ? "complete" : "absent");
    }
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
}

int main(void)
{
    uint64_t seed = test_seed();
    int san = test_sanitized();
    ingest_bytes = san ? 12 << 20 : 64 << 20;
    shard_bytes = san ? 64 << 10 : 256 << 10;
    const int n_random = 20;
    const char *forced[] = {"reserve-locked", "publish-before-flip", "publish-after-flip",
                            "writer-mid-shard"};
    const int n_forced = 4;

    const char *spec = test_name("crash");
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 3 * ingest_bytes + (64 << 20), NULL, &p));

    progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(progress != MAP_FAILED);
    pid_t pid;
    int status;

    uint64_t rng = seed;
    int killed = 0, random_killed = 0, finished = 0, present = 0, a;
    /* random instants until 20 of them hit a live ingest (a kill after the
     * child finished is checked too, but does not count) */
    for (a = 0; a < n_forced || (random_killed < n_random && a < 100); a++) {
        char name[64], next[64];
        snprintf(name, sizeof name, "crash%d", a);
        snprintf(next, sizeof next, "next%d", a);
        int fixed = a % 2, announce = !fixed && (a / 2) % 2 == 1;
        uint64_t dseed = seed + (uint64_t)a;
        const char *fault = a < n_forced ? forced[a] : NULL;
        *progress = 0;
        pid = spawn(spec, name, fixed, announce, dseed, fault);
        int reaped = 0;
        if (!fault) {
            /* A random instant: once the child has appended a random number
             * of bytes (so instants spread over the whole ingest whatever
             * the machine's speed), plus a random delay of up to 2 ms; one
             * in five waits for the last append, to land in the final seal
             * and publish. */
            uint64_t r = test_rand(&rng);
            uint64_t at = (r >> 48) % 5 == 0 ? ingest_bytes : r % ingest_bytes;
            reaped = test_kill_at(pid, progress, at, (useconds_t)((r >> 32) % 2000), &status);
        }
        if (!reaped)
            CHECK(waitpid(pid, &status, 0) == pid);
        int was_killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        if (fault)
            CHECK(was_killed); /* the fault point fired */
        else
            CHECK(was_killed || (WIFEXITED(status) && WEXITSTATUS(status) == 0));
        killed += was_killed;
        random_killed += was_killed && !fault;
        finished += !was_killed;

        CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
        struct cxlp_dataset_info infos[8];
        size_t n;
        CHECK_OK(cxlp_pool_list(p, infos, 8, &n));
        CHECK(n <= 1);
        int here = n == 1;
        if (here) {
            CHECK(strcmp(infos[0].name, name) == 0);
            check_complete(p, name, fixed, dseed);
            present++;
        }
        if (fault && strcmp(fault, "publish-after-flip") == 0)
            CHECK(here);
        else if (fault)
            CHECK(!here);
        if (!was_killed)
            CHECK(here);

        /* the next writer gets the lock and the space back */
        uint64_t nn;
        CHECK_OK(rec_ingest(p, next, 0, dseed, 2 << 20, 256 << 10, &nn, NULL));
        check_accounting(p);
        CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
        CHECK_OK(cxlp_pool_remove(p, next));
        if (here)
            CHECK_OK(cxlp_pool_remove(p, name));
        printf("attempt %2d %-20s %-9s %s, dataset %s\n", a, fault ? fault : "random",
               fixed ? "fixed" : announce ? "announced" : "streamed",
               was_killed ? "killed" : "finished", here ? "complete" : "absent");
    }
    check_accounting(p);
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.n_datasets == 0);
    printf("%d attempts: %d killed (%d at random instants), %d finished first, "
           "%d datasets published\n", a, killed, random_killed, finished, present);
    CHECK(random_killed >= n_random);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    cross_host(seed, forced, n_forced);
    printf("ok\n");
    return 0;
}
