/* Host identity and the domain registry (src/pool/host.c, docs/hosts.md),
 * without namespaces: children told apart by CXLP_HOST_ID are different
 * hosts to the pool.
 *   - the host id file is made at the first attach, concurrent first
 *     attaches agree on one id, later ones read it; CXLP_HOST_ID wins; an
 *     id file that cannot be written falls back to /etc/machine-id;
 *   - a process whose /proc shows another PID namespace is a domain of its
 *     own (needs root to make one; skipped otherwise);
 *   - the registry holds 48 domains; a 49th gets CXLP_EBUSY while the others
 *     are fresh, and takes the entry of one silent for twice the expiry. */
#include <sched.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test.h"
#include "pool/host.h"

static int wait_ok(pid_t pid)
{
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void id_file(void)
{
    char path[256];
    snprintf(path, sizeof path, "/tmp/%s/host-id", test_name("cxlp-hostid"));
    setenv("CXLP_HOST_ID_FILE", path, 1);
    unsetenv("CXLP_HOST_ID");
    int fds[2];
    CHECK(pipe(fds) == 0);
    /* eight first attaches at once */
    pid_t kids[8];
    for (int i = 0; i < 8; i++) {
        kids[i] = fork();
        CHECK(kids[i] >= 0);
        if (kids[i] == 0) {
            struct host_self s;
            host_identity(&s);
            if (write(fds[1], &s.host_id, 8) != 8)
                _exit(1);
            _exit(0);
        }
    }
    uint64_t first = 0;
    for (int i = 0; i < 8; i++) {
        uint64_t id;
        CHECK(read(fds[0], &id, 8) == 8);
        CHECK(id != 0 && (first == 0 || id == first));
        first = id;
        CHECK(wait_ok(kids[i]));
    }
    struct host_self s;
    host_identity(&s);
    CHECK(s.host_id == first && strstr(s.id_source, path) && !strstr(s.id_source, "created"));
    char text[64];
    FILE *f = fopen(path, "r");
    CHECK(f && fgets(text, sizeof text, f));
    fclose(f);
    CHECK(strtoull(text, NULL, 16) == first);
    printf("host id %016" PRIx64 " made once by 8 concurrent first attaches, kept in %s\n",
           first, path);
    /* the environment wins */
    setenv("CXLP_HOST_ID", "abc123", 1);
    host_identity(&s);
    CHECK(s.host_id == 0xabc123 && strcmp(s.id_source, "CXLP_HOST_ID") == 0);
    unsetenv("CXLP_HOST_ID");
    /* a file that cannot be made: machine-id */
    setenv("CXLP_HOST_ID_FILE", "/proc/cxlp-no-such-dir/host-id", 1);
    host_identity(&s);
    struct stat st;
    if (stat("/etc/machine-id", &st) == 0 && st.st_size > 8)
        CHECK(strstr(s.id_source, "/etc/machine-id") != NULL);
    printf("fallback: %s\n", s.id_source);
    unsetenv("CXLP_HOST_ID_FILE");
    unlink(path);
    *strrchr(path, '/') = 0;
    rmdir(path);
}

static void foreign_proc(void)
{
    struct host_self me;
    host_identity(&me);
    CHECK(me.pid_checks);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) {
        if (unshare(CLONE_NEWPID) != 0)
            _exit(77);
        pid_t g = fork(); /* pid 1 of the new namespace, with our /proc */
        if (g < 0)
            _exit(2);
        if (g == 0) {
            struct host_self s;
            host_identity(&s);
            /* /proc says another pid: no pid checks, a domain of its own */
            _exit(!s.pid_checks && s.key != me.key && s.host_id == me.host_id ? 0 : 3);
        }
        _exit(wait_ok(g) ? 0 : 4);
    }
    int st;
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) {
        printf("foreign /proc: SKIP (unshare needs root)\n");
        return;
    }
    CHECK(WEXITSTATUS(st) == 0);
    printf("a process whose /proc is another namespace's judges no pid and is judged by none\n");
}

/* Attaches spec as host id host; with hold, stays attached until a byte
 * arrives on hold (after writing one to ready). */
static int attach_as(const char *spec, uint64_t host, int ready, int hold)
{
    char id[32];
    snprintf(id, sizeof id, "%" PRIx64, host);
    setenv("CXLP_HOST_ID", id, 1);
    cxlp_pool *p;
    int rc = cxlp_pool_open(spec, NULL, &p);
    char c = 'r';
    if (rc == 0 && hold >= 0 && (write(ready, &c, 1) != 1 || read(hold, &c, 1) != 1))
        rc = -1;
    if (rc == 0)
        cxlp_pool_close(p);
    return rc;
}

static void registry(void)
{
    const char *spec = test_name("registry");
    struct cxlp_pool_opts o = {.lease_slots = 64, .catalog_bytes = 16384, .expiry_ms = 500};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 8 << 20, &o, &p)); /* our domain: one entry */
    int ready[2], hold[2];
    CHECK(pipe(ready) == 0 && pipe(hold) == 0);
    pid_t kids[POOL_HOSTS];
    for (uint64_t h = 1; h < POOL_HOSTS; h++) {
        kids[h] = fork();
        CHECK(kids[h] >= 0);
        if (kids[h] == 0)
            _exit(attach_as(spec, 0x1000 + h, ready[1], hold[0]) == 0 ? 0 : 1);
        char c;
        CHECK(read(ready[0], &c, 1) == 1);
    }
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.hosts == POOL_HOSTS);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) {
        int rc = attach_as(spec, 0x9999, -1, -1);
        _exit(rc == CXLP_EBUSY && strstr(cxlp_errmsg(NULL), "host registry full") ? 0 : 1);
    }
    CHECK(wait_ok(c));
    printf("registry: %u domains attached; a 49th: CXLP_EBUSY\n", POOL_HOSTS);
    for (uint64_t h = 1; h < POOL_HOSTS; h++) {
        char b = 'g';
        CHECK(write(hold[1], &b, 1) == 1);
    }
    for (uint64_t h = 1; h < POOL_HOSTS; h++)
        CHECK(wait_ok(kids[h]));
    /* our heartbeat moves the clock: twice the expiry later, one is reused */
    usleep(1300 * 1000);
    c = fork();
    CHECK(c >= 0);
    if (c == 0)
        _exit(attach_as(spec, 0x9999, -1, -1) == 0 ? 0 : 1);
    CHECK(wait_ok(c));
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.hosts <= POOL_HOSTS);
    printf("registry: after twice the expiry the 49th domain got a silent one's entry\n");
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
}

int main(void)
{
    id_file();
    foreign_proc();
    registry();
    printf("ok\n");
    return 0;
}
