/* Several hosts on one pool (issue 8), emulated with namespaces
 * (host_emu.h: each host its own mount, PID and UTS namespace, boot id and
 * host id file; /dev/shm shared).
 *
 * 1. Host A reads and verifies two datasets while host B attaches, lists,
 *    stats, lists leases, removes other datasets, removes one A is reading
 *    and fills the freed space with zeros, writes the other one A is
 *    reading again in its place (cxlpool rewrite) and fills the freed space
 *    with zeros again, and ingests, for 6 s
 *    (CXLP_SLOW_TESTS=1: 60 s). A's data stays byte-exact and its lease is
 *    never dropped; B always sees A's lease live.
 * 2. Host A's writer stops (SIGSTOP, through the fault point
 *    publish-before-flip:stop) holding the cross-host writer lock, its
 *    catalog slot written. Host B's writes fail with CXLP_EBUSY naming host
 *    A and its pid until the expiry, then B takes over; A, continued, fails
 *    to publish ("writer lock lost"), nothing of it is visible, its space
 *    comes back, the pool verifies. Again with A stopped before it writes
 *    its slot (publish-before-slot): continued, it does not write it. And
 *    with A's migration of a pool of tiers stopped right before it stores a
 *    shard's location word (place-before-word): B migrates the dataset
 *    itself; A, continued, changes no word (a location change is fenced
 *    like a publish); one copy per tier, nothing leaks, the pool verifies.
 * 3. Containers: two PID namespaces on one host (same boot id and host id)
 *    do not judge each other by pid: B's transactions keep the lease of A's
 *    reader (pid 3 there, no pid 3 here) and the reservations of A's
 *    stopped ingest (pid 2 there and here), which then publishes.
 * 4. The reboot rule: a host killed while holding a lease, a reservation
 *    and the writer lock of a pool with a 60 s expiry comes back with a new
 *    boot id and the same host id: its first writer gets the lock at once,
 *    and the old lease and reservation are reclaimed. Another host had to
 *    wait (CXLP_EBUSY).
 * 5. `cxlpool leases --expire HOST` takes a stopped reader's lease; the
 *    reader, continued, is told so by its next read.
 * Skips (77) where namespaces cannot be made (not root). */
#include <poll.h>
#include <sys/time.h>

#include "host_emu.h"
#include "records.h"
#include "pool/host.h"

static const char *bin;      /* the cxlpool CLI */
static char dir[256];        /* scratch: data files, host id files */
static char spec[128];
static uint64_t expiry_ms = 5000;

static void strlcpy_t(char *dst, const char *src, size_t cap)
{
    size_t n = strnlen(src, cap - 1);
    memcpy(dst, src, n);
    dst[n] = 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs the CLI with args (NULL-terminated); stdout+stderr into out. */
static int cli(char *out, size_t cap, ...)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = bin;
    va_list ap;
    va_start(ap, cap);
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < 31)
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    int fds[2];
    CHECK(pipe(fds) == 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 1);
        dup2(fds[1], 2);
        close(fds[0]);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    size_t k = 0;
    ssize_t r;
    char sink[4096];
    while ((r = read(fds[0], k + 1 < cap ? out + k : sink,
                     k + 1 < cap ? cap - 1 - k : sizeof sink)) > 0)
        if (k + 1 < cap)
            k += (size_t)r;
    close(fds[0]);
    out[k] = 0;
    return emu_wait(pid);
}

static void write_file(const char *path, uint64_t bytes, int zeros)
{
    FILE *f = fopen(path, "wb");
    CHECK(f);
    uint8_t buf[65536];
    uint64_t s = 7;
    for (uint64_t done = 0; done < bytes; done += sizeof buf) {
        for (size_t i = 0; i < sizeof buf; i++)
            buf[i] = zeros ? 0 : (uint8_t)test_rand(&s);
        CHECK(fwrite(buf, 1, sizeof buf, f) == sizeof buf);
    }
    CHECK(fclose(f) == 0);
}

/* Every record of dataset name (rec_ingest's, fixed, seed) is intact. */
static int verify_ds(cxlp_store *s, uint64_t seed)
{
    uint64_t n = cxlp_store_count(s);
    for (uint64_t i = 0; i < n; i++) {
        struct cxlp_view v;
        if (cxlp_store_read(s, i, &v) || !rec_ok(v.data, v.len, 1, seed, i))
            return 0;
    }
    return n > 0;
}

/* 1 while this process's lease in p is its own and was never taken. */
static int lease_held(cxlp_pool *p, uint64_t owner)
{
    struct attach *a = pool_attach(p);
    return a->lease && __atomic_load_n(&a->lease->owner, __ATOMIC_ACQUIRE) == owner &&
           !__atomic_load_n(&a->lease_lost, __ATOMIC_RELAXED);
}

static uint64_t own_lease(cxlp_pool *p)
{
    struct attach *a = pool_attach(p);
    return (a->lease_seq << 32) | (uint64_t)getpid();
}

/* ---------------------------------------------------------------- 1 */

struct phase1 {
    double seconds;
    int result[2];           /* pipe: roles report a line */
    int ready[2];            /* pipe: A says it has attached */
    int done[2];             /* pipe: B says it has finished */
};

static void report(int fd, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (write(fd, line, (size_t)k) != k)
        _exit(80);
}

static int reader_a(void *arg)
{
    struct phase1 *ph = arg;
    struct cxlp_pool_opts ro = {.readonly = 1};
    cxlp_pool *p;
    cxlp_store *s1, *s2;
    if (cxlp_pool_open(spec, &ro, &p) || cxlp_store_open(p, "a-data", &s1) ||
        cxlp_store_open(p, "a-pinned", &s2)) {
        report(ph->result[1], "A: open: %s\n", cxlp_errmsg(NULL));
        return 1;
    }
    uint64_t owner = own_lease(p);
    char r = 'r';
    if (write(ph->ready[1], &r, 1) != 1)
        return 1;
    double end = now_s() + ph->seconds;
    uint64_t passes = 0, bad = 0, dropped = 0;
    int b_done = 0;
    while (now_s() < end || !b_done) { /* until B's last command too */
        bad += !verify_ds(s1, 101);
        bad += !verify_ds(s2, 102);
        dropped += !lease_held(p, owner);
        passes++;
        struct pollfd pf = {ph->done[0], POLLIN, 0};
        b_done = b_done || poll(&pf, 1, 0) == 1;
    }
    report(ph->result[1], "A: %" PRIu64 " passes over both datasets, %" PRIu64
           " bad, lease dropped %" PRIu64 " times\n", passes, bad, dropped);
    cxlp_store_close(s1);
    cxlp_store_close(s2);
    cxlp_pool_close(p);
    return bad || dropped || passes < 2;
}

/* "live": true in the JSON object of `leases --json` naming host */
static int lease_listed_live(const char *json, const char *host)
{
    char key[64];
    snprintf(key, sizeof key, "\"host\": \"%s\"", host);
    const char *p = strstr(json, key);
    if (!p)
        return 0;
    const char *end = strchr(p, '}');
    const char *live = strstr(p, "\"live\": true");
    return live && end && live < end;
}

static int writer_b(void *arg)
{
    struct phase1 *ph = arg;
    char out[65536], f2m[300], name[32], prev[32] = "", zeros[300];
    snprintf(f2m, sizeof f2m, "%s/b.raw", dir);
    snprintf(zeros, sizeof zeros, "%s/zeros.raw", dir);
    char r;
    if (read(ph->ready[0], &r, 1) != 1) /* A is attached and reading */
        return 1;
    double end = now_s() + ph->seconds;
    int fails = 0, k = 0, unseen = 0, pinned_removed = 0, data_rewritten = 0;
    const char *what = "";
#define B_RUN(...)                                                                   \
    do {                                                                             \
        int rc_ = cli(out, sizeof out, __VA_ARGS__, (char *)NULL);                   \
        if (rc_ != 0) {                                                              \
            fails++;                                                                 \
            fprintf(stderr, "B: %s exited %d: %s\n", what, rc_, out);                \
        }                                                                            \
    } while (0)
    for (; now_s() < end || k < 3; k++) {
        what = "ls";
        B_RUN("ls", spec);
        what = "stat";
        B_RUN("stat", spec);
        what = "leases";
        B_RUN("leases", spec, "--json");
        if (!lease_listed_live(out, "hostA")) {
            unseen++;
            fprintf(stderr, "B: A's lease not listed live: %s\n", out);
        }
        snprintf(name, sizeof name, "b%d", k);
        what = "ingest";
        B_RUN("ingest", spec, name, f2m, "--record-size", "4096", "--no-progress");
        if (prev[0]) {
            what = "rm";
            B_RUN("rm", spec, prev);
        }
        snprintf(prev, sizeof prev, "%s", name);
        /* A pins the generation it opened at: whatever B removes stays
         * deferred until A closes, so B keeps a pace the pool can hold */
        usleep(200000);
        if (k == 1 || k == 2) {
            /* remove what A reads (k 1), or write the other dataset A
             * reads again in its place (k 2: cxlpool rewrite), then fill
             * free bytes with zeros */
            if (k == 1) {
                what = "rm a-pinned";
                B_RUN("rm", spec, "a-pinned");
                pinned_removed = 1;
            } else {
                what = "rewrite a-data";
                B_RUN("rewrite", spec, "a-data", "--no-progress");
                data_rewritten = 1;
            }
            cxlp_pool *p;
            struct cxlp_pool_stat st;
            if (cxlp_pool_open(spec, NULL, &p) || cxlp_pool_stat(p, &st)) {
                fails++;
                continue;
            }
            cxlp_pool_close(p);
            /* A's extents are deferred, not free: zeros land only where
             * nothing is pinned (and stay deferred too, as A pins every
             * generation since it opened: the second fill is smaller, so
             * the 60 s run's ingests keep their room) */
            uint64_t fill = st.free_bytes / (k == 1 ? 2 : 8) / 65536 * 65536;
            write_file(zeros, fill, 1);
            what = "ingest zeros";
            B_RUN("ingest", spec, "zeros", zeros, "--record-size", "65536", "--shard-bytes", "1M",
                  "--no-progress");
            what = "rm zeros";
            B_RUN("rm", spec, "zeros");
        }
    }
    char d = 'd';
    if (write(ph->done[1], &d, 1) != 1)
        fails++;
    report(ph->result[1], "B: %d rounds of ls/stat/leases/ingest/rm, %d failed commands, "
           "A's lease not listed live %d times, a-pinned removed under A: %s, a-data rewritten "
           "under A: %s\n", k, fails, unseen, pinned_removed ? "yes" : "no",
           data_rewritten ? "yes" : "no");
    return fails || unseen || !pinned_removed || !data_rewritten;
}

/* A deposed host's reservations come back at the next transaction: one
 * reserve and unreserve runs it, then nothing is reserved and the pool
 * verifies; closes p. */
static void space_back_and_close(cxlp_pool *p)
{
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 0, 4096, &e));
    CHECK_OK(pool_unreserve(p, 0, e));
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 0);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
}

static void phase1(struct emu_host *A, struct emu_host *B)
{
    struct phase1 ph = {.seconds = getenv("CXLP_SLOW_TESTS") ? 60 : 6};
    CHECK(pipe(ph.result) == 0 && pipe(ph.ready) == 0 && pipe(ph.done) == 0);
    printf("phase 1: host A reads while host B writes, %.0f s\n", ph.seconds);
    pid_t a = emu_spawn(A, reader_a, &ph);
    pid_t b = emu_spawn(B, writer_b, &ph);
    int ra = emu_wait(a), rb = emu_wait(b);
    for (int i = 0; i < 2; i++) {
        close(ph.ready[i]);
        close(ph.done[i]);
    }
    close(ph.result[1]);
    char buf[2048];
    ssize_t k = read(ph.result[0], buf, sizeof buf - 1);
    buf[k > 0 ? k : 0] = 0;
    close(ph.result[0]);
    printf("%s", buf);
    CHECK(ra == 0 && rb == 0);
    /* A chose its host id at its first attach and kept it */
    struct stat st;
    CHECK(stat(A->idfile, &st) == 0 && stat(B->idfile, &st) == 0);
}

/* ---------------------------------------------------------------- 2 */

static int stopped_writer_a(void *arg)
{
    const char *where = arg;
    setenv("CXLP_FAULT", where, 1);
    cxlp_pool *p;
    if (cxlp_pool_open(spec, NULL, &p))
        return 2;
    uint64_t n;
    int rc = rec_ingest(p, "a-stopped", 1, 103, 1 << 20, 256 << 10, &n, NULL);
    const char *msg = cxlp_errmsg(NULL);
    printf("A (continued): ingest returned %d: %s\n", rc, msg);
    cxlp_pool_close(p);
    return rc == CXLP_EBUSY && strstr(msg, "writer lock lost") ? 0 : 1;
}

struct phase2 {
    int result[2];
};

static int takeover_b(void *arg)
{
    struct phase2 *ph = arg;
    char out[4096], first[1024] = "";
    setenv("CXLP_LOCK_TIMEOUT_MS", "300", 1);
    double t0 = now_s();
    int busy = 0, other = 0, rc;
    for (;;) {
        rc = cli(out, sizeof out, "rm", spec, "a-data", (char *)NULL);
        if (rc == 0)
            break;
        if (strstr(out, "CXLP_EBUSY") && strstr(out, "writer lock held by host hostA") &&
            strstr(out, "pid 2")) {
            if (!busy++)
                strlcpy_t(first, out, sizeof first);
        } else {
            other++;
            fprintf(stderr, "B: unexpected: %s\n", out);
        }
        if (now_s() - t0 > 60 || other > 3)
            break;
    }
    double took = now_s() - t0;
    report(ph->result[1], "%d %.3f %d %s", busy, took, rc, first);
    return rc != 0 || other > 0;
}

static void phase2(struct emu_host *A, struct emu_host *B)
{
    printf("phase 2: host A's writer stops holding the writer lock\n");
    pid_t a = emu_spawn(A, stopped_writer_a, "publish-before-flip:stop");
    pid_t role = emu_role(a);
    CHECK(role > 0);
    CHECK(emu_wait_stopped(role));
    double t_stop = now_s();
    struct phase2 ph;
    CHECK(pipe(ph.result) == 0);
    pid_t b = emu_spawn(B, takeover_b, &ph);
    CHECK(emu_wait(b) == 0);
    close(ph.result[1]);
    char buf[2048];
    ssize_t k = read(ph.result[0], buf, sizeof buf - 1);
    buf[k > 0 ? k : 0] = 0;
    close(ph.result[0]);
    int busy, rc;
    double took;
    int used;
    CHECK(sscanf(buf, "%d %lf %d %n", &busy, &took, &rc, &used) == 3);
    double since_stop = now_s() - t_stop;
    printf("B: %d attempts got CXLP_EBUSY, the first said: %s", busy, buf + used);
    printf("B: took the lock %.2f s after it started trying (%.2f s after A stopped; "
           "expiry %.1f s)\n", took, since_stop, expiry_ms / 1000.0);
    CHECK(busy >= 2);
    /* never before the expiry (the clock moves at most a tick per 100 ms) */
    CHECK(since_stop >= expiry_ms / 1000.0 - 0.5);
    CHECK(kill(role, SIGCONT) == 0);
    CHECK(emu_wait(a) == 0);
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    struct cxlp_dataset_info inf[16];
    size_t n;
    CHECK_OK(cxlp_pool_list(p, inf, 16, &n));
    for (size_t i = 0; i < n; i++)
        CHECK(strcmp(inf[i].name, "a-stopped") != 0 && strcmp(inf[i].name, "a-data") != 0);
    /* A's reservations come back once a transaction reclaims them */
    space_back_and_close(p);
    printf("phase 2: A's publish failed cleanly, its space came back, the pool verifies\n");
}

static int takeover_quiet(void *arg)
{
    (void)arg;
    cxlp_pool *p;
    if (cxlp_pool_open(spec, NULL, &p))
        return 2;
    int rc = cxlp_pool_remove(p, "b-slot"); /* waits out the expiry */
    cxlp_pool_close(p);
    return rc;
}

static void phase2b(struct emu_host *A, struct emu_host *B)
{
    printf("phase 2b: host A's writer stops before writing its catalog slot (expiry 1 s)\n");
    char saved[128];
    snprintf(saved, sizeof saved, "%s", spec);
    snprintf(spec, sizeof spec, "%s", test_name("slot"));
    struct cxlp_pool_opts o = {.lease_slots = 16, .catalog_bytes = 256 << 10, .expiry_ms = 1000};
    cxlp_pool *p;
    uint64_t n;
    CHECK_OK(cxlp_pool_create(spec, 32 << 20, &o, &p));
    CHECK_OK(rec_ingest(p, "b-slot", 1, 108, 256 << 10, 64 << 10, &n, NULL));
    CHECK_OK(cxlp_pool_close(p));
    pid_t a = emu_spawn(A, stopped_writer_a, "publish-before-slot:stop");
    pid_t role = emu_role(a);
    CHECK(role > 0 && emu_wait_stopped(role));
    CHECK(emu_wait(emu_spawn(B, takeover_quiet, NULL)) == 0);
    CHECK(kill(role, SIGCONT) == 0);
    CHECK(emu_wait(a) == 0);
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.n_datasets == 0);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    snprintf(spec, sizeof spec, "%s", saved);
}

/* 2c: a location change is fenced like a publish. A's migration stops
 * holding the writer lock right before it stores a shard's location word;
 * B takes the lock over after the expiry and migrates the dataset itself;
 * A, continued, must change no word. */
static int stopped_migration_a(void *arg)
{
    (void)arg;
    setenv("CXLP_FAULT", "place-before-word:stop", 1);
    cxlp_pool *p;
    if (cxlp_pool_open(spec, NULL, &p))
        return 2;
    struct cxlp_migrate_stat ms;
    int rc = cxlp_migrate(p, "m", "dram", NULL, &ms);
    char msg[1024];
    strlcpy_t(msg, cxlp_errmsg(p), sizeof msg);
    printf("A (continued): migrate returned %d: %s\n", rc, msg);
    cxlp_pool_close(p);
    return rc == CXLP_EBUSY && (strstr(msg, "writer lock lost") || strstr(msg, "lease")) ? 0 : 1;
}

static int migration_b(void *arg)
{
    (void)arg;
    cxlp_pool *p;
    if (cxlp_pool_open(spec, NULL, &p))
        return 2;
    struct cxlp_migrate_stat ms;
    int rc = cxlp_migrate(p, "m", "dram", NULL, &ms); /* waits out the expiry */
    if (rc)
        fprintf(stderr, "B: migrate: %s\n", cxlp_errmsg(p));
    cxlp_pool_close(p);
    return rc;
}

static void phase2c(struct emu_host *A, struct emu_host *B)
{
    printf("phase 2c: host A's migration stops before it stores a location word (expiry 1 s)\n");
    char saved[128], dram[300], nvme[300];
    snprintf(saved, sizeof saved, "%s", spec);
    snprintf(spec, sizeof spec, "%s", test_name("fence"));
    snprintf(dram, sizeof dram, "dram=shm:%s.d:8M", spec);
    snprintf(nvme, sizeof nvme, "nvme=file:%s/fence.tier:16M", dir);
    const char *tiers[] = {dram, nvme};
    struct cxlp_pool_opts o = {.lease_slots = 16, .catalog_bytes = 256 << 10,
                               .expiry_ms = 1000, .meta_bytes = 4 << 20};
    cxlp_pool *p;
    uint64_t n;
    CHECK_OK(cxlp_pool_create_tiered(spec, tiers, 2, &o, &p));
    CHECK_OK(rec_ingest(p, "m", 1, 109, 1 << 20, 64 << 10, &n, NULL));
    CHECK_OK(cxlp_pool_close(p));
    pid_t a = emu_spawn(A, stopped_migration_a, NULL);
    pid_t role = emu_role(a);
    CHECK(role > 0 && emu_wait_stopped(role));
    CHECK(emu_wait(emu_spawn(B, migration_b, NULL)) == 0);
    CHECK(kill(role, SIGCONT) == 0);
    CHECK(emu_wait(a) == 0);
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    /* B's copies, as B left them: counted and checked before any read
     * (a read would fetch a copy A had taken away) */
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "m", &s));
    uint64_t shards;
    CHECK_OK(cxlp_store_shards(s, &shards, NULL, NULL));
    struct cxlp_tier_info ti[2];
    size_t nt;
    CHECK_OK(cxlp_pool_tiers(p, ti, 2, &nt));
    printf("phase 2c: %llu shards; copies: dram %llu, nvme %llu\n", (unsigned long long)shards,
           (unsigned long long)ti[0].copies, (unsigned long long)ti[1].copies);
    CHECK(nt == 2 && ti[0].copies == shards && ti[1].copies == shards);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK(verify_ds(s, 109));
    CHECK_OK(cxlp_store_close(s));
    /* A's reservation (its lease expired) comes back at the next transaction */
    space_back_and_close(p);
    CHECK_OK(cxlp_pool_destroy(spec));
    snprintf(spec, sizeof spec, "%s", saved);
    printf("phase 2c: A changed no location word; one copy per tier; the pool verifies\n");
}

/* ---------------------------------------------------------------- 3 */

struct phase3 {
    int ready[2];
    int go[2];
};

static int container_x(void *arg)
{
    struct phase3 *ph = arg;
    /* a reader at pid 3 (no pid 3 exists in the other container) */
    pid_t r = fork();
    if (r < 0)
        return 2;
    if (r == 0) {
        cxlp_pool *p;
        cxlp_store *s;
        if (cxlp_pool_open(spec, NULL, &p) || cxlp_store_open(p, "c-data", &s))
            _exit(3);
        uint64_t owner = own_lease(p);
        char c = 'r';
        if (write(ph->ready[1], &c, 1) != 1 || read(ph->go[0], &c, 1) != 1)
            _exit(4);
        int ok = verify_ds(s, 104) && lease_held(p, owner);
        printf("X reader (pid %d): lease %s, data %s\n", (int)getpid(),
               lease_held(p, owner) ? "kept" : "LOST", ok ? "intact" : "BAD");
        cxlp_store_close(s);
        cxlp_pool_close(p);
        fflush(NULL);
        _exit(ok ? 0 : 5);
    }
    /* and an ingest at pid 2 that stops with reservations made */
    setenv("CXLP_FAULT", "writer-mid-shard:stop", 1);
    cxlp_pool *p;
    if (cxlp_pool_open(spec, NULL, &p))
        return 6;
    uint64_t n;
    int rc = rec_ingest(p, "x-data", 1, 105, 2 << 20, 256 << 10, &n, NULL);
    if (rc)
        printf("X ingest (pid %d): %s\n", (int)getpid(), cxlp_errmsg(NULL));
    cxlp_store *s;
    int ok = rc == 0 && cxlp_store_open(p, "x-data", &s) == 0 && verify_ds(s, 105);
    if (rc == 0 && ok)
        cxlp_store_close(s);
    cxlp_pool_close(p);
    int rr = emu_wait(r);
    printf("X ingest (pid %d): %s after the other container's transactions\n", (int)getpid(),
           ok ? "published" : "FAILED");
    return ok && rr == 0 ? 0 : 7;
}

static int container_y(void *arg)
{
    (void)arg;
    cxlp_pool *p;
    if (cxlp_pool_open(spec, NULL, &p))
        return 2;
    uint64_t n;
    int bad = 0;
    for (int i = 0; i < 5; i++) {
        char name[16];
        snprintf(name, sizeof name, "y%d", i);
        bad += rec_ingest(p, name, 1, 200 + (uint64_t)i, 256 << 10, 64 << 10, &n, NULL) != 0;
        bad += cxlp_pool_remove(p, name) != 0;
    }
    printf("Y (pid %d): 10 transactions, %d failed\n", (int)getpid(), bad);
    cxlp_pool_close(p);
    return bad;
}

static void phase3(const char *idfile)
{
    /* its own pool, expiry 60 s: the stopped ingest of X must be judged by
     * its domain, not expire while Y works */
    printf("phase 3: two containers (PID namespaces) on one host\n");
    char saved[128];
    snprintf(saved, sizeof saved, "%s", spec);
    snprintf(spec, sizeof spec, "%s", test_name("containers"));
    struct cxlp_pool_opts o = {.lease_slots = 16, .catalog_bytes = 256 << 10,
                               .expiry_ms = 60000};
    cxlp_pool *q;
    uint64_t n;
    CHECK_OK(cxlp_pool_create(spec, 32 << 20, &o, &q));
    CHECK_OK(rec_ingest(q, "c-data", 1, 104, 1 << 20, 256 << 10, &n, NULL));
    CHECK_OK(cxlp_pool_close(q));
    struct emu_host X = {.name = "hostC"}, Y = {.name = "hostC"};
    strlcpy_t(X.idfile, idfile, sizeof X.idfile);
    strlcpy_t(Y.idfile, idfile, sizeof Y.idfile);
    struct phase3 ph;
    CHECK(pipe(ph.ready) == 0 && pipe(ph.go) == 0);
    pid_t x = emu_spawn(&X, container_x, &ph);
    char c;
    CHECK(read(ph.ready[0], &c, 1) == 1);
    pid_t xr = emu_role(x);
    CHECK(xr > 0 && emu_wait_stopped(xr)); /* mid-shard, reservations held */
    cxlp_pool *p;
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    CHECK_OK(cxlp_pool_stat(p, &st));
    uint64_t reserved = st.reserved_bytes;
    CHECK(reserved > 0);
    CHECK(emu_wait(emu_spawn(&Y, container_y, NULL)) == 0);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == reserved); /* X's reservations were not reclaimed */
    CHECK_OK(cxlp_pool_close(p));
    CHECK(write(ph.go[1], &c, 1) == 1);
    CHECK(kill(xr, SIGCONT) == 0);
    CHECK(emu_wait(x) == 0);
    for (int i = 0; i < 2; i++) {
        close(ph.ready[i]);
        close(ph.go[i]);
    }
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    snprintf(spec, sizeof spec, "%s", saved);
}

/* ---------------------------------------------------------------- 4 */

static char spec2[128];

static int doomed_host(void *arg)
{
    (void)arg;
    cxlp_pool *p;
    cxlp_store *s;
    struct pool_extent e;
    if (cxlp_pool_open(spec2, NULL, &p) || cxlp_store_open(p, "r-data", &s))
        return 2;
    /* a lease pinning r-data; a reservation; and a stop holding the writer
     * lock, right after that reservation's commit */
    setenv("CXLP_FAULT", "reserve-locked:stop", 1);
    pool_reserve(p, 0, 1 << 20, &e);
    return 3; /* killed before */
}

static int other_host_waits(void *arg)
{
    (void)arg;
    setenv("CXLP_LOCK_TIMEOUT_MS", "500", 1);
    cxlp_pool *p;
    if (cxlp_pool_open(spec2, NULL, &p))
        return 2;
    int rc = cxlp_pool_remove(p, "r-other");
    printf("another host, 500 ms into a 60 s expiry: %s\n", cxlp_errmsg(p));
    cxlp_pool_close(p);
    return rc == CXLP_EBUSY ? 0 : 1;
}

static int rebooted_host(void *arg)
{
    (void)arg;
    setenv("CXLP_LOCK_TIMEOUT_MS", "5000", 1);
    cxlp_pool *p;
    if (cxlp_pool_open(spec2, NULL, &p))
        return 2;
    double t0 = now_s();
    int rc = cxlp_pool_remove(p, "r-other");
    double took = now_s() - t0;
    struct cxlp_pool_stat st;
    struct cxlp_lease_info li[8];
    size_t n = 0;
    if (rc == 0)
        rc = cxlp_pool_stat(p, &st) || cxlp_pool_leases(p, li, 8, &n);
    printf("the same host after a reboot: lock in %.2f s, %zu lease(s) left, %" PRIu64
           " bytes reserved, %" PRIu64 " deferred\n", took, n, st.reserved_bytes,
           st.deferred_bytes);
    cxlp_pool_close(p);
    /* the old boot's lease, reservation and lock are gone; r-data was never
     * removed (that remove did not publish) */
    return rc || n != 1 || st.reserved_bytes != 0 || st.n_datasets != 1;
}

static void phase4(void)
{
    printf("phase 4: a host reboots with its pool (expiry 60 s)\n");
    snprintf(spec2, sizeof spec2, "%s", test_name("reboot"));
    struct cxlp_pool_opts o = {.lease_slots = 16, .catalog_bytes = 256 << 10,
                               .expiry_ms = 60000};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec2, 32 << 20, &o, &p));
    uint64_t n;
    CHECK_OK(rec_ingest(p, "r-data", 1, 106, 1 << 20, 256 << 10, &n, NULL));
    CHECK_OK(rec_ingest(p, "r-other", 1, 107, 1 << 20, 256 << 10, &n, NULL));
    CHECK_OK(cxlp_pool_close(p)); /* nobody else attached: the host is the pool's only one */
    struct emu_host R, R2, O;
    emu_host_init(&R, "hostR", dir);
    emu_host_init(&O, "hostO", dir);
    pid_t r = emu_spawn(&R, doomed_host, NULL);
    pid_t rr = emu_role(r);
    CHECK(rr > 0 && emu_wait_stopped(rr));
    CHECK(emu_wait(emu_spawn(&O, other_host_waits, NULL)) == 0);
    CHECK(kill(rr, SIGKILL) == 0); /* the host goes down */
    CHECK(emu_wait(r) == 128 + SIGKILL);
    R2 = R;
    emu_host_init(&R2, "hostR", dir); /* same id file, new boot id */
    CHECK(strcmp(R2.boot, R.boot) != 0 && strcmp(R2.idfile, R.idfile) == 0);
    CHECK(emu_wait(emu_spawn(&R2, rebooted_host, NULL)) == 0);
    CHECK_OK(cxlp_pool_open(spec2, NULL, &p));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec2));
}

/* ---------------------------------------------------------------- 5 */

static int stopped_reader(void *arg)
{
    (void)arg;
    cxlp_pool *p;
    cxlp_store *s;
    struct cxlp_pool_opts ro = {.readonly = 1};
    if (cxlp_pool_open(spec, &ro, &p) || cxlp_store_open(p, "c-data", &s) || !verify_ds(s, 104))
        return 2;
    raise(SIGSTOP);
    /* continued: the heartbeat notices within a tick or two */
    int rc = 0;
    for (int i = 0; i < 100 && rc == 0; i++) {
        struct cxlp_view v;
        rc = cxlp_store_read(s, 0, &v);
        usleep(20000);
    }
    printf("E (continued): read returned %d: %s\n", rc, cxlp_errmsg(NULL));
    int ok = rc == CXLP_EBUSY && strstr(cxlp_errmsg(NULL), "lease of this process was taken");
    cxlp_store_close(s);
    cxlp_pool_close(p);
    return ok ? 0 : 1;
}

static void phase5(void)
{
    printf("phase 5: cxlpool leases --expire\n");
    struct emu_host E;
    emu_host_init(&E, "hostE", dir);
    pid_t e = emu_spawn(&E, stopped_reader, NULL);
    pid_t er = emu_role(e);
    CHECK(er > 0 && emu_wait_stopped(er));
    char out[8192];
    CHECK(cli(out, sizeof out, "leases", spec, (char *)NULL) == 0);
    printf("%s", out);
    CHECK(strstr(out, "hostE") != NULL);
    CHECK(cli(out, sizeof out, "leases", spec, "--expire", "hostE", (char *)NULL) == 0);
    printf("%s", out);
    CHECK(strstr(out, "warning") && strstr(out, "expired 1 lease of hostE"));
    CHECK(cli(out, sizeof out, "leases", spec, (char *)NULL) == 0);
    CHECK(strstr(out, "hostE") == NULL);
    CHECK(cli(out, sizeof out, "leases", spec, "--expire", "nosuchhost", (char *)NULL) == 4);
    CHECK(kill(er, SIGCONT) == 0);
    CHECK(emu_wait(e) == 0);
}

int main(void)
{
    bin = getenv("CXLPOOL_BIN");
    if (!bin)
        SKIP("CXLPOOL_BIN not set");
    if (!emu_available())
        SKIP("cannot make emulated hosts here (unshare of mount/PID/UTS namespaces needs root)");
    snprintf(dir, sizeof dir, "/tmp/%s", test_name("cxlp-hosts"));
    CHECK(mkdir(dir, 0700) == 0);
    char f[300];
    snprintf(f, sizeof f, "%s/b.raw", dir);
    write_file(f, 256 << 10, 0);
    snprintf(spec, sizeof spec, "%s", test_name("hosts"));
    struct cxlp_pool_opts o = {.lease_slots = 32, .catalog_bytes = 256 << 10,
                               .expiry_ms = (uint32_t)expiry_ms};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 192 << 20, &o, &p));
    uint64_t n;
    CHECK_OK(rec_ingest(p, "a-data", 1, 101, 4 << 20, 512 << 10, &n, NULL));
    CHECK_OK(rec_ingest(p, "a-pinned", 1, 102, 4 << 20, 512 << 10, &n, NULL));
    CHECK_OK(cxlp_pool_close(p));

    struct emu_host A, B;
    emu_host_init(&A, "hostA", dir);
    emu_host_init(&B, "hostB", dir);
    phase1(&A, &B);
    phase2(&A, &B);
    phase2b(&A, &B);
    phase2c(&A, &B);
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    CHECK_OK(rec_ingest(p, "c-data", 1, 104, 1 << 20, 256 << 10, &n, NULL));
    CHECK_OK(cxlp_pool_close(p));
    char cid[300];
    snprintf(cid, sizeof cid, "%s/hostC.host-id", dir);
    phase3(cid);
    phase4();
    phase5();

    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    CHECK(system(cmd) == 0);
    printf("ok\n");
    return 0;
}
