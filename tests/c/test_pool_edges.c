/* Edges of the pool that an adversary or a large ingest reached (issue 12),
 * each through the public API (and the CLI where the exit code is the
 * point), so the same test runs against any build:
 *   item 6   a hostile writer shrinks the pool object under a reader;
 *   item 8   an ingest of many shards into a fragmented pool, and one that
 *            cannot fit, counted in catalog transactions (generations);
 *   item 9   extents are preallocated outside the writer lock;
 *   item 16  verify exits 3 for an impossible shard media value. */
#include <fcntl.h>
#include <signal.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "test.h"
#include "pool/pool_internal.h"

#define MiB (1ull << 20)

static uint64_t gen_of(cxlp_pool *p)
{
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    return st.generation;
}

/* Fixed records of rs bytes: one uint8 field. */
static void bytes_schema(struct cxlp_schema *sc, uint64_t rs)
{
    memset(sc, 0, sizeof *sc);
    sc->fixed = 1;
    sc->n_fields = 1;
    strcpy(sc->fields[0].name, "b");
    sc->fields[0].dtype = CXLP_DT_U8;
    sc->fields[0].ndim = 1;
    sc->fields[0].shape[0] = rs;
}

/* Fixed records of rs bytes, record i filled with (uint8_t)(i + k). */
static int ingest_fixed(cxlp_pool *p, const char *name, uint64_t rs, uint64_t n,
                        uint64_t shard_bytes, int announce)
{
    struct cxlp_schema sc;
    bytes_schema(&sc, rs);
    struct cxlp_writer_opts o = {.shard_bytes = shard_bytes,
                                 .expected_bytes = announce ? n * rs : 0};
    cxlp_writer *w;
    int rc = cxlp_writer_begin(p, name, &sc, &o, &w);
    if (rc)
        return rc;
    uint8_t *rec = malloc(rs);
    CHECK(rec);
    for (uint64_t i = 0; i < n && rc == 0; i++) {
        for (uint64_t k = 0; k < rs; k++)
            rec[k] = (uint8_t)(i + k);
        rc = cxlp_writer_append(w, rec, rs);
    }
    free(rec);
    if (rc) {
        cxlp_writer_abort(w);
        return rc;
    }
    return cxlp_writer_commit(w);
}

static int rec_good(const uint8_t *b, uint64_t rs, uint64_t i)
{
    for (uint64_t k = 0; k < rs; k++)
        if (b[k] != (uint8_t)(i + k))
            return 0;
    return 1;
}

static int next_index(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    uint64_t *pos = ctx;
    size_t k = 0;
    while (k < max && *pos < 2048)
        out[k++] = (*pos)++;
    *n = k;
    return 0;
}

/* issue 12 item 6: shrinking the pool object (any process that may write
 * it can `truncate -s 8M /dev/shm/cxlp.NAME`) must not kill a reader with
 * SIGBUS: the touch of a lost page reads zeros, and from then on the
 * library's calls on that pool fail with CXLP_ECORRUPT naming the object;
 * the gather engine fails the batch it was filling. */
static void truncated_pool(void)
{
    const char *spec = test_name("trunc");
    char path[300];
    snprintf(path, sizeof path, "/dev/shm/cxlp.%s", spec);
    struct cxlp_pool_opts po = {.lease_slots = 8, .catalog_bytes = 64 << 10};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 48 * MiB, &po, &p));
    const uint64_t rs = 16384, n = 2048; /* 32 MiB in shards of 4 MiB */
    CHECK_OK(ingest_fixed(p, "d", rs, n, 4 * MiB, 1));
    CHECK_OK(cxlp_pool_close(p));

    int go[2], ready[2];
    CHECK(pipe(go) == 0 && pipe(ready) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        struct cxlp_pool_opts ro = {.readonly = 1};
        cxlp_pool *c;
        cxlp_store *s;
        struct cxlp_view v;
        if (cxlp_pool_open(spec, &ro, &c) || cxlp_store_open(c, "d", &s) ||
            cxlp_store_read(s, n - 1, &v) || !rec_good(v.data, rs, n - 1))
            _exit(2);
        char b = 'r';
        if (write(ready[1], &b, 1) != 1 || read(go[0], &b, 1) != 1)
            _exit(3);
        /* the object is 8 MiB now: this record's pages are gone */
        volatile uint64_t sum = 0;
        for (uint64_t k = 0; k < rs; k += 64)
            sum += ((const volatile uint8_t *)v.data)[k];
        (void)sum;
        int rc = cxlp_store_read(s, 5, &v);
        if (rc != CXLP_ECORRUPT || !strstr(cxlp_errmsg(NULL), path) ||
            !strstr(cxlp_errmsg(NULL), "shrank")) {
            fprintf(stderr, "read after truncation: %d (%s)\n", rc, cxlp_errmsg(NULL));
            _exit(4);
        }
        /* the gather engine: an error for the batch, not a death */
        struct cxlp_loader_opts lo = {.batch_size = 64, .threads = 2};
        uint64_t pos = 0;
        cxlp_loader *l;
        if (cxlp_loader_create(s, &lo, next_index, &pos, &l))
            _exit(5);
        struct cxlp_batch *bt = NULL;
        rc = cxlp_loader_next(l, &bt);
        cxlp_loader_free(l);
        if (rc != CXLP_ECORRUPT) {
            fprintf(stderr, "loader after truncation: %d (%s)\n", rc, cxlp_errmsg(NULL));
            _exit(6);
        }
        /* the page-size census maps the shards anew and touches them: it
         * returns, whatever it counts */
        uint64_t by, hb;
        rc = cxlp_store_pages(s, &by, &hb);
        if (rc != 0 && rc != CXLP_ECORRUPT)
            _exit(7);
        cxlp_store_close(s);
        cxlp_pool_close(c);
        _exit(0);
    }
    char b;
    CHECK(read(ready[0], &b, 1) == 1 && b == 'r');
    CHECK(truncate(path, 8 * MiB) == 0); /* the hostile writer */
    CHECK(write(go[1], &b, 1) == 1);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (WIFSIGNALED(status))
        fprintf(stderr, "reader died of signal %d (%s)\n", WTERMSIG(status),
                strsignal(WTERMSIG(status)));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    /* a new attach refuses the shrunk object */
    CHECK_RC(cxlp_pool_open(spec, NULL, &p), CXLP_ECORRUPT);
    CHECK_OK(cxlp_pool_destroy(spec));
    for (int i = 0; i < 2; i++) {
        close(go[i]);
        close(ready[i]);
    }
    printf("item 6: a reader of a shrunk pool got CXLP_ECORRUPT, no SIGBUS\n");
}

/* issue 12 item 8: one catalog transaction per shard made an ingest of N
 * shards into a fragmented pool quadratic, and a full pool took minutes to
 * say CXLP_EFULL. Counted in generations (one per committed transaction):
 * a 480-shard ingest that fits only in two holes takes a handful; one that
 * cannot fit fails before committing any. */
static void many_shards(void)
{
    const char *spec = test_name("many");
    struct cxlp_pool_opts po = {.lease_slots = 8, .catalog_bytes = 1 * MiB};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 96 * MiB, &po, &p));
    /* two 24 MiB holes between small datasets; the rest of the pool full */
    const uint64_t rs = 4096;
    CHECK_OK(ingest_fixed(p, "a", rs, 6144, 0, 1));
    CHECK_OK(ingest_fixed(p, "s1", rs, 4, 0, 1));
    CHECK_OK(ingest_fixed(p, "b", rs, 6144, 0, 1));
    CHECK_OK(ingest_fixed(p, "s2", rs, 4, 0, 1));
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    /* what is left but the room of fill's shard table and states (format 3) */
    uint64_t rest = (st.free_bytes - 4 * 4096) / rs;
    rest -= rest / 512 + 2; /* and its shard's sums area: 8 bytes a 4 KiB block, a page */
    CHECK_OK(ingest_fixed(p, "fill", rs, rest, 0, 1));
    CHECK_OK(cxlp_pool_remove(p, "a"));
    CHECK_OK(cxlp_pool_remove(p, "b"));
    CHECK_OK(cxlp_pool_stat(p, &st)); /* the deferred frees go back at the next transaction */
    printf("item 8: free %" PRIu64 " bytes, largest hole %" PRIu64 ", deferred %" PRIu64 "\n",
           st.free_bytes, st.largest_free, st.deferred_bytes);

    /* 30 MiB in shards of 64 KiB: 480 shards, more than either hole */
    uint64_t g0 = gen_of(p);
    CHECK_OK(ingest_fixed(p, "big", rs, 7680, 64 << 10, 1));
    uint64_t g1 = gen_of(p);
    printf("item 8: 480 shards into two holes took %" PRIu64 " catalog transactions\n", g1 - g0);
    CHECK(g1 - g0 <= 8);
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "big", &s));
    CHECK(cxlp_store_count(s) == 7680);
    for (uint64_t i = 0; i < 7680; i += 97) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(rec_good(v.data, rs, i));
    }
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));

    /* the same streamed as variable-size records (no size announced):
     * shard extents are reserved in growing batches */
    CHECK_OK(cxlp_pool_remove(p, "big"));
    struct cxlp_schema vs;
    memset(&vs, 0, sizeof vs);
    vs.n_fields = 1;
    strcpy(vs.fields[0].name, "t");
    vs.fields[0].dtype = CXLP_DT_U8;
    struct cxlp_writer_opts vo = {.shard_bytes = 64 << 10};
    cxlp_writer *w;
    g0 = gen_of(p);
    CHECK_OK(cxlp_writer_begin(p, "var", &vs, &vo, &w));
    uint8_t rec[4000];
    for (uint64_t i = 0; i < 7680; i++) {
        memset(rec, (int)(i & 0xff), sizeof rec);
        CHECK_OK(cxlp_writer_append(w, rec, sizeof rec));
    }
    CHECK_OK(cxlp_writer_commit(w));
    g1 = gen_of(p);
    struct cxlp_dataset_info vi;
    CHECK_OK(cxlp_store_open(p, "var", &s));
    CHECK_OK(cxlp_store_info(s, &vi));
    CHECK_OK(cxlp_store_close(s));
    printf("item 8: 7680 streamed variable-size records (%u shards) took %" PRIu64
           " catalog transactions\n", vi.n_shards, g1 - g0);
    CHECK(vi.n_shards >= 400);
    CHECK(g1 - g0 <= 24);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_remove(p, "var"));

    /* more than the free space: CXLP_EFULL before any transaction commits,
     * announced (fixed, expected_bytes) or streamed */
    CHECK_OK(cxlp_pool_stat(p, &st));
    uint64_t too_many = (st.free_bytes + st.deferred_bytes) / rs + 16;
    g0 = gen_of(p);
    CHECK_RC(ingest_fixed(p, "toobig", rs, too_many, 64 << 10, 1), CXLP_EFULL);
    CHECK(gen_of(p) == g0);
    struct cxlp_pool_stat st2;
    CHECK_OK(cxlp_pool_stat(p, &st2));
    CHECK(st2.free_bytes == st.free_bytes && st2.deferred_bytes == st.deferred_bytes &&
          st2.reserved_bytes == 0);
    printf("item 8: an ingest that cannot fit: CXLP_EFULL after 0 transactions\n");
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
}

/* Runs the traced child pid up to the entry of its first fallocate(2) and
 * leaves it stopped there. 0 on success; -1 (with a reason printed) when
 * the child cannot be traced here or exits first. */
static int stop_at_fallocate(pid_t pid)
{
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
        return -1;
    if (ptrace(PTRACE_SETOPTIONS, pid, 0, PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL) != 0) {
        printf("item 9: ptrace options: %s\n", strerror(errno));
        return -1;
    }
    int sig = 0;
    for (;;) {
        if (ptrace(PTRACE_SYSCALL, pid, 0, sig) != 0)
            return -1;
        sig = 0;
        if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status))
            return -1;
        if (WSTOPSIG(status) != (SIGTRAP | 0x80)) {
            sig = WSTOPSIG(status) == SIGSTOP ? 0 : WSTOPSIG(status);
            continue;
        }
        struct __ptrace_syscall_info si;
        long k = ptrace(PTRACE_GET_SYSCALL_INFO, pid, sizeof si, &si);
        if (k <= 0) {
            printf("item 9: PTRACE_GET_SYSCALL_INFO: %s\n", strerror(errno));
            return -1;
        }
        if (si.op == PTRACE_SYSCALL_INFO_ENTRY && si.entry.nr == SYS_fallocate)
            return 0;
    }
}

/* issue 12 item 9: the writer lock was held while a reservation's extents
 * were preallocated (fallocate: 0.4 s per 256 MiB of tmpfs), so a writer
 * stopped there blocked every other writer. The child is stopped (ptrace) at
 * the entry of the fallocate of its reservation; another writer must get
 * the lock meanwhile (a 100 ms lock timeout). */
static void prealloc_unlocked(void)
{
    const char *spec = test_name("prealloc");
    struct cxlp_pool_opts po = {.lease_slots = 8, .catalog_bytes = 64 << 10};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 256 * MiB, &po, &p));
    CHECK_OK(ingest_fixed(p, "x", 4096, 4, 0, 1));
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (ptrace(PTRACE_TRACEME, 0, 0, 0) != 0)
            _exit(9);
        raise(SIGSTOP);
        cxlp_pool *c;
        if (cxlp_pool_open(spec, NULL, &c))
            _exit(2);
        struct cxlp_schema sc;
        bytes_schema(&sc, 1 * MiB);
        struct cxlp_writer_opts o = {.shard_bytes = 128 * MiB, .expected_bytes = 64 * MiB};
        cxlp_writer *w;
        if (cxlp_writer_begin(c, "big", &sc, &o, &w))
            _exit(3);
        cxlp_writer_abort(w);
        cxlp_pool_close(c);
        _exit(0);
    }
    int status;
    if (stop_at_fallocate(pid) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        CHECK_OK(cxlp_pool_close(p));
        CHECK_OK(cxlp_pool_destroy(spec));
        printf("item 9: SKIP: cannot trace a child to its fallocate here\n");
        return;
    }
    setenv("CXLP_LOCK_TIMEOUT_MS", "100", 1);
    int rc = cxlp_pool_remove(p, "x");
    unsetenv("CXLP_LOCK_TIMEOUT_MS");
    if (rc)
        fprintf(stderr, "remove during the preallocation: %s\n", cxlp_errmsg(p));
    CHECK(ptrace(PTRACE_DETACH, pid, 0, 0) == 0);
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(rc);
    printf("item 9: a writer took the lock while another was stopped in its preallocation\n");
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
}

/* issue 12 item 16: a shard location no pool can have is corruption:
 * `cxlpool verify` exits 3 and store_open says CXLP_ECORRUPT. In pool
 * format 3 a shard's place is its location word (pool/loc.h), so the word
 * is made to name a copy far outside the tier. */
static void impossible_media(void)
{
    const char *bin = getenv("CXLPOOL_BIN");
    char spec[300];
    snprintf(spec, sizeof spec, "file:/tmp/%s", test_name("cxlp-media"));
    struct cxlp_pool_opts po = {.lease_slots = 8, .catalog_bytes = 64 << 10};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 16 * MiB, &po, &p));
    CHECK_OK(ingest_fixed(p, "d", 4096, 64, 64 << 10, 1));
    struct attach *a = pool_attach(p);
    struct cat c;
    uint64_t gen;
    CHECK_OK(cat_snapshot(a, &c, 0, &gen, pool_obj(p)));
    CHECK(c.n_ds == 1 && c.ds[0].d.n_shards >= 1);
    uint64_t *w = attach_states(a, c.ds[0].states.off) + 1; /* shard 0, tier 0 */
    *w = loc_next_present(*w, LOC_MAX_OFF & ~(uint64_t)4095, 0);
    cat_free(&c);
    cxlp_store *s;
    CHECK_RC(cxlp_store_open(p, "d", &s), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(p), "shard 0") != NULL);
    CHECK_OK(cxlp_pool_close(p));
    if (bin) {
        char cmd[800];
        snprintf(cmd, sizeof cmd, "'%s' verify '%s' --quiet", bin, spec);
        int st = system(cmd);
        CHECK(WIFEXITED(st));
        printf("item 16: verify of an impossible shard location exited %d\n",
               WEXITSTATUS(st));
        CHECK(WEXITSTATUS(st) == 3);
    }
    CHECK_OK(cxlp_pool_destroy(spec));
}

int main(int argc, char **argv)
{
    /* an argument runs one item: "6", "8", "9" or "16" */
    const char *only = argc > 1 ? argv[1] : NULL;
    if (!only || !strcmp(only, "6"))
        truncated_pool();
    if (!only || !strcmp(only, "8"))
        many_shards();
    if (!only || !strcmp(only, "9"))
        prealloc_unlocked();
    if (!only || !strcmp(only, "16"))
        impossible_media();
    printf("ok\n");
    return 0;
}
