/* Crash safety of migration and staging. A child migrates a dataset round
 * and round between the tiers of a pool (dram, cxl, nvme home): every shard
 * copied, verified, published, its other copies dropped; or (every other
 * random attempt) reads it with a loader whose lookahead engine stages and
 * evicts shards under a small budget, every other epoch a full shuffle
 * read in part (tier_read_in_part: copies only into the budget's room,
 * partial reads of the home copies). The parent SIGKILLs it at
 * the instants random kills rarely hit, through CXLP_FAULT (a copy's room
 * reserved; its word stored before the catalog flip; the flip of a drop
 * done but its words not cleared; the words cleared but the epoch not
 * grown; a copy written but not placed), then at seeded random instants.
 * After every kill:
 *   - cxlp_pool_verify passes: structure, every copy in every tier checksummed;
 *   - every shard has a copy in the home tier, at most one per tier (one
 *     word per tier), and every record reads back intact;
 *   - after the next writer's reclaim nothing is reserved and the extent
 *     accounting is exact (pool_check: free + used + deferred = data);
 *   - migrating everything home again leaves the memory tiers empty: no
 *     copy, reservation or deferred free of the killed process survives.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "test.h"
#include "records.h"
#include "pool/pool.h"

#define MiB (1ull << 20)

static char pool[128];
static volatile uint64_t *progress; /* shards the child finished */

static void bump(void *ctx, uint64_t done, uint64_t total)
{
    (void)ctx;
    (void)done;
    (void)total;
    __atomic_fetch_add(progress, 1, __ATOMIC_RELAXED);
}

/* Epochs of a loader with the lookahead engine until killed: the block
 * order, then a full shuffle read in part, in turn. */
static void read_forever(cxlp_pool *p)
{
    cxlp_store *s;
    if (cxlp_store_open(p, "d", &s))
        _exit(4);
    for (uint64_t epoch = 0;; epoch++) {
        int part = (int)(epoch % 2);
        struct cxlp_sampler_config cfg = {.kind = part ? CXLP_ORDER_RANDOM : CXLP_ORDER_BLOCK,
                                          .n = cxlp_store_count(s), .seed = 3, .epoch = epoch,
                                          .shard_size = 64, .window = 2, .world = 1};
        cxlp_sampler *sm;
        cxlp_loader *l;
        struct cxlp_loader_opts o = {.batch_size = 16, .threads = 2,
                                     .tier_policy = CXLP_POLICY_LOOKAHEAD,
                                     .tier_budget = 1 * MiB, .tier_horizon = 4,
                                     .tier_read_in_part = part};
        if (cxlp_sampler_create(&cfg, &sm) || cxlp_loader_create(s, &o, rec_sampler_fn, sm, &l))
            _exit(5);
        struct cxlp_batch *b;
        while (cxlp_loader_next(l, &b) == 0 && b) {
            __atomic_fetch_add(progress, 1, __ATOMIC_RELAXED);
            cxlp_loader_release(l, b);
        }
        cxlp_loader_free(l);
        cxlp_sampler_free(sm);
    }
}

static pid_t spawn(const char *fault, int reader)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (fault)
            setenv("CXLP_FAULT", fault, 1);
        cxlp_pool *p;
        if (cxlp_pool_open(pool, NULL, &p))
            _exit(2);
        if (reader)
            read_forever(p);
        struct cxlp_migrate_opts o = {.threads = 2, .progress = bump};
        const char *to[] = {"dram", "cxl", "nvme", "cxl", "dram", "nvme"};
        for (int i = 0;; i = (i + 1) % 6)
            if (cxlp_migrate(p, "d", to[i], &o, NULL)) {
                fprintf(stderr, "child migrate: %s\n", cxlp_errmsg(p));
                _exit(3);
            }
    }
    return pid;
}

static void check_pool(uint64_t seed, uint64_t n)
{
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    CHECK(cxlp_store_count(s) == n);
    uint8_t buf[REC_FIXED_SIZE];
    for (uint64_t i = 0; i < n; i += 7) {
        uint64_t len;
        CHECK_OK(cxlp_store_read_copy(s, i, buf, sizeof buf, &len));
        CHECK(rec_ok(buf, len, 1, seed, i));
    }
    CHECK_OK(cxlp_store_close(s));
    /* the next writer reclaims what the dead one held */
    CHECK_OK(cxlp_migrate(p, "d", "nvme", NULL, NULL));
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 0);
    CHECK(st.free_bytes + st.used_bytes + st.deferred_bytes == st.data_bytes);
    /* nothing pins: the next transaction frees the deferred copies */
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 0, 4096, &e));
    CHECK_OK(pool_unreserve(p, 0, e));
    struct cxlp_tier_info ti[3];
    size_t nt;
    CHECK_OK(cxlp_pool_tiers(p, ti, 3, &nt));
    CHECK(ti[0].copies == 0 && ti[1].copies == 0 && ti[0].used == 0 && ti[1].used == 0);
    CHECK(ti[2].copies == ti[2].copies && ti[2].home);
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.deferred_bytes == 0 && st.reserved_bytes == 0);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
}

int main(void)
{
    uint64_t seed = test_seed();
    int san = test_sanitized();
    const char *slow = getenv("CXLP_SLOW_TESTS");
    const int n_random = slow && *slow == '1' ? 40 : 6; /* half of them migrating */
    snprintf(pool, sizeof pool, "%s", test_name("tiercrash"));
    char t0[160], t1[160], t2[256];
    snprintf(t0, sizeof t0, "dram=shm:%s.d:16M", pool);
    snprintf(t1, sizeof t1, "cxl=shm:%s.c:16M", pool);
    snprintf(t2, sizeof t2, "nvme=file:/tmp/cxlp-%s.tier:32M", pool);
    const char *tiers[] = {t0, t1, t2};
    struct cxlp_pool_opts po = {.meta_bytes = 4 * MiB, .lease_slots = 32};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 3, &po, &p));
    uint64_t n;
    CHECK_OK(rec_ingest(p, "d", 1, seed, san ? 4 * MiB : 8 * MiB, 64 * 1024, &n, NULL));
    CHECK_OK(cxlp_pool_close(p));
    const uint64_t shards = (san ? 4 * MiB : 8 * MiB) / (64 * 1024);

    progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(progress != MAP_FAILED);
    const char *forced[] = {"copy-reserved", "place-before-word", "place-before-flip",
                            "drop-after-flip", "drop-after-clear", "copy-before-place"};
    const int n_forced = 6;
    uint64_t rng = seed;
    int a, random_killed = 0;
    for (a = 0; a < n_forced || (random_killed < n_random && a < 100); a++) {
        const char *fault = a < n_forced ? forced[a] : NULL;
        *progress = 0;
        int reader = !fault && a % 2;
        pid_t pid = spawn(fault, reader);
        int status, reaped = 0;
        if (!fault) {
            /* a random instant: after a random number of shards moved (up
             * to three rounds of migration), plus up to 2 ms */
            uint64_t r = test_rand(&rng), at = r % (3 * shards) + 1;
            if (reader)
                at = r % (2 * n / 16) + 1; /* two epochs of batches */
            reaped = test_kill_at(pid, progress, at, (useconds_t)((r >> 32) % 2000), &status);
        }
        if (!reaped)
            CHECK(waitpid(pid, &status, 0) == pid);
        int was_killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        if (!was_killed)
            fprintf(stderr, "child status %#x\n", status);
        CHECK(was_killed); /* the child migrates until it is killed */
        random_killed += !fault;
        check_pool(seed, n);
        printf("attempt %2d %-18s killed after %llu %s: pool consistent, nothing leaked\n",
               a, fault ? fault : reader ? "random, staging" : "random, migrating",
               (unsigned long long)*progress, reader ? "batches" : "shards moved");
    }
    printf("%d kills (%d at random instants)\n", a, random_killed);
    CHECK(random_killed >= n_random);
    CHECK_OK(cxlp_pool_destroy(pool));
    printf("ok\n");
    return 0;
}
