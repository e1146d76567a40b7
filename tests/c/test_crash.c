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
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "test.h"
#include "records.h"

static uint64_t ingest_bytes, shard_bytes;
static volatile uint64_t *progress; /* shared with the child */

static pid_t spawn(const char *spec, const char *name, int fixed, uint64_t seed, const char *fault)
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
        if (rec_ingest(p, name, fixed, seed, ingest_bytes, shard_bytes, &n, progress)) {
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
        int fixed = a % 2;
        uint64_t dseed = seed + (uint64_t)a;
        const char *fault = a < n_forced ? forced[a] : NULL;
        *progress = 0;
        pid = spawn(spec, name, fixed, dseed, fault);
        int reaped = 0;
        if (!fault) {
            /* A random instant: once the child has appended a random number
             * of bytes (so instants spread over the whole ingest whatever
             * the machine's speed), plus a random delay of up to 2 ms; one
             * in five waits for the last append, to land in the final seal
             * and publish. */
            uint64_t r = test_rand(&rng);
            uint64_t at = (r >> 48) % 5 == 0 ? ingest_bytes : r % ingest_bytes;
            while (!reaped && __atomic_load_n(progress, __ATOMIC_RELAXED) < at)
                reaped = waitpid(pid, &status, WNOHANG) == pid ? 1 : (usleep(50), 0);
            if (!reaped) {
                usleep((useconds_t)((r >> 32) % 2000));
                kill(pid, SIGKILL);
            }
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
        printf("attempt %2d %-20s %s, dataset %s\n", a, fault ? fault : "random",
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
    printf("ok\n");
    return 0;
}
