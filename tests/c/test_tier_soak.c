/* Migration under live readers. One migrator moves a dataset round and
 * round between the tiers of a pool (dram, cxl, nvme home) while four
 * readers verify every record's contents over and over: two read records
 * one by one (cxlp_store_read_copy: a pin per record, a fetch when no
 * memory tier holds the shard), two read whole epochs through a loader
 * whose lookahead engine stages and evicts under a small budget (every
 * third epoch a full shuffle read in part, tier_read_in_part: partial
 * reads of the home copies, copies only into the budget's room; and every
 * third a full shuffle of a second dataset, "a", whose 3 MiB shards keep
 * their block sums in sums areas (shard format 4): partial reads of its
 * blocks and pages of sums, none copied, the pages kept and shared by the
 * gather threads). Readers count every record they checked; any mismatch,
 * error or crash fails.
 *
 * Processes by default (separate address spaces, as ranks are); with
 * --threads (how the TSan build runs it) the readers and the migrator are
 * threads of one process, so ThreadSanitizer sees every access to the
 * shared words and pins. CXLP_SOAK_SECONDS sets the duration (default 4;
 * CXLP_SLOW_TESTS=1 makes it 600, the soak the documentation reports). */
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "test.h"
#include "records.h"
#include "pool/pool_internal.h"

#define MiB (1ull << 20)

static char pool[128];
static uint64_t seed = 5, n_rec, n_rec_a;
static double seconds;

struct counts {
    uint64_t records, mismatches, errors, migrations, epochs;
};
static struct counts *cnt; /* shared memory, one per role */

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void bad(struct counts *c, const char *what)
{
    fprintf(stderr, "soak: %s: %s\n", what, cxlp_errmsg(NULL));
    __atomic_fetch_add(&c->errors, 1, __ATOMIC_RELAXED);
}

/* Why a migration found its tier full: every lease's pins, the location
 * epoch, and the deferred frees of the catalog with the pin they wait for. */
static void explain_full(cxlp_pool *p)
{
    struct attach *a = pool_attach(p);
    fprintf(stderr, "soak: loc_epoch %llu, gen %llu\n",
            (unsigned long long)__atomic_load_n(&a->hdr->loc_epoch, __ATOMIC_ACQUIRE),
            (unsigned long long)__atomic_load_n(&a->hdr->gen, __ATOMIC_ACQUIRE));
    for (uint64_t i = 0; i < a->L.lease_slots; i++) {
        const struct pool_lease *l = &a->leases[i];
        uint64_t o = __atomic_load_n(&l->owner, __ATOMIC_ACQUIRE);
        if (o & 0xffffffffu)
            fprintf(stderr, "soak: lease %llu pid %llu min_gen %lld min_epoch %lld\n",
                    (unsigned long long)i, (unsigned long long)(o & 0xffffffffu),
                    (long long)__atomic_load_n(&l->min_gen, __ATOMIC_ACQUIRE),
                    (long long)__atomic_load_n(&l->min_epoch, __ATOMIC_ACQUIRE));
    }
    struct cat c;
    if (cat_snapshot(a, &c, 0, NULL, pool_obj(p)))
        return;
    for (uint64_t i = 0; i < c.n_def; i++)
        fprintf(stderr, "soak: deferred object %u %#llx+%llu freed %llu clock %u kind %u\n",
                c.def[i].object, (unsigned long long)c.def[i].off, (unsigned long long)c.def[i].len,
                (unsigned long long)c.def[i].freed, c.def[i].clock, c.def[i].kind);
    cat_free(&c);
}

static void migrator(struct counts *c, double end)
{
    cxlp_pool *p;
    if (cxlp_pool_open(pool, NULL, &p))
        return bad(c, "migrator open");
    const char *to[] = {"dram", "cxl", "nvme", "cxl", "dram", "nvme"};
    for (int i = 0; now() < end; i = (i + 1) % 6) {
        if (cxlp_migrate(p, "d", to[i], NULL, NULL)) {
            bad(c, "migrate");
            explain_full(p);
            break;
        }
        __atomic_fetch_add(&c->migrations, 1, __ATOMIC_RELAXED);
    }
    cxlp_pool_close(p);
}

static void copier(struct counts *c, double end, uint64_t k)
{
    cxlp_pool *p;
    struct cxlp_pool_opts ro = {.readonly = 1};
    cxlp_store *s;
    if (cxlp_pool_open(pool, &ro, &p) || cxlp_store_open(p, "d", &s))
        return bad(c, "reader open");
    cxlp_pool_close(p);
    uint8_t buf[REC_FIXED_SIZE];
    uint64_t x = k * 7919 + 1;
    while (now() < end) {
        for (int i = 0; i < 512; i++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            uint64_t id = (x >> 17) % n_rec, len;
            if (cxlp_store_read_copy(s, id, buf, sizeof buf, &len)) {
                bad(c, "read_copy");
                goto out;
            }
            if (!rec_ok(buf, len, 1, seed, id))
                __atomic_fetch_add(&c->mismatches, 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&c->records, 1, __ATOMIC_RELAXED);
        }
    }
out:
    cxlp_store_close(s);
}

static void streamer(struct counts *c, double end, uint64_t k)
{
    cxlp_pool *p;
    struct cxlp_pool_opts ro = {.readonly = 1};
    cxlp_store *sd, *sa;
    if (cxlp_pool_open(pool, &ro, &p) || cxlp_store_open(p, "d", &sd) ||
        cxlp_store_open(p, "a", &sa))
        return bad(c, "loader open");
    cxlp_pool_close(p);
    for (uint64_t epoch = 0; now() < end; epoch++) {
        int part = epoch % 3 != 0, area = epoch % 3 == 2;
        cxlp_store *s = area ? sa : sd;
        struct cxlp_sampler_config cfg = {.kind = part ? CXLP_ORDER_RANDOM : CXLP_ORDER_BLOCK,
                                          .n = area ? n_rec_a : n_rec, .seed = k,
                                          .epoch = epoch, .shard_size = 64, .window = 3,
                                          .world = 1};
        cxlp_sampler *sm;
        cxlp_loader *l;
        struct cxlp_loader_opts o = {.batch_size = 16, .threads = 2,
                                     .tier_policy = CXLP_POLICY_LOOKAHEAD,
                                     .tier_budget = 2 * MiB, .tier_horizon = 4, .numa_node = -1,
                                     .tier_read_in_part = part};
        if (cxlp_sampler_create(&cfg, &sm) || cxlp_loader_create(s, &o, rec_sampler_fn, sm, &l)) {
            bad(c, "loader create");
            break;
        }
        struct cxlp_batch *b;
        int rc;
        while ((rc = cxlp_loader_next(l, &b)) == 0 && b && now() < end + 30) {
            for (uint32_t r = 0; r < b->rows; r++) {
                if (!rec_ok((const uint8_t *)b->data + (uint64_t)r * b->row_bytes, b->row_bytes,
                            1, seed, b->ids[r]))
                    __atomic_fetch_add(&c->mismatches, 1, __ATOMIC_RELAXED);
            }
            __atomic_fetch_add(&c->records, b->rows, __ATOMIC_RELAXED);
            cxlp_loader_release(l, b);
        }
        if (rc)
            fprintf(stderr, "soak: loader: %s\n", cxlp_errmsg(l));
        if (rc)
            __atomic_fetch_add(&c->errors, 1, __ATOMIC_RELAXED);
        cxlp_loader_free(l);
        cxlp_sampler_free(sm);
        __atomic_fetch_add(&c->epochs, 1, __ATOMIC_RELAXED);
        if (rc)
            break;
    }
    cxlp_store_close(sa);
    cxlp_store_close(sd);
}

static void role(int i, double end)
{
    if (i == 0)
        migrator(&cnt[0], end);
    else if (i <= 2)
        copier(&cnt[i], end, (uint64_t)i);
    else
        streamer(&cnt[i], end, (uint64_t)i);
}

struct targ {
    int i;
    double end;
};

static void *thread_main(void *p)
{
    struct targ *t = p;
    role(t->i, t->end);
    return NULL;
}

int main(int argc, char **argv)
{
    int threads = argc > 1 && strcmp(argv[1], "--threads") == 0;
    const char *e = getenv("CXLP_SOAK_SECONDS"), *slow = getenv("CXLP_SLOW_TESTS");
    seconds = e && *e ? atof(e) : slow && *slow == '1' ? 600 : 4;
    snprintf(pool, sizeof pool, "%s", test_name("tiersoak"));
    char t0[160], t1[160], t2[256];
    snprintf(t0, sizeof t0, "dram=shm:%s.d:16M", pool);
    snprintf(t1, sizeof t1, "cxl=shm:%s.c:16M", pool);
    snprintf(t2, sizeof t2, "nvme=file:/tmp/cxlp-%s.tier:32M", pool);
    const char *tiers[] = {t0, t1, t2};
    struct cxlp_pool_opts po = {.meta_bytes = 4 * MiB, .lease_slots = 64};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 3, &po, &p));
    CHECK_OK(rec_ingest(p, "d", 1, seed, 8 * MiB, 64 * 1024, &n_rec, NULL));
    CHECK_OK(rec_ingest(p, "a", 1, seed, 6 * MiB, 3 * MiB, &n_rec_a, NULL));
    CHECK_OK(cxlp_migrate(p, "a", "nvme", NULL, NULL)); /* read from its home only */
    CHECK_OK(cxlp_pool_close(p));

    cnt = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(cnt != MAP_FAILED);
    double t0s = now(), end = t0s + seconds;
    enum { ROLES = 5 };
    if (threads) {
        pthread_t th[ROLES];
        struct targ ta[ROLES];
        for (int i = 0; i < ROLES; i++) {
            ta[i] = (struct targ){i, end};
            CHECK(pthread_create(&th[i], NULL, thread_main, &ta[i]) == 0);
        }
        for (int i = 0; i < ROLES; i++)
            pthread_join(th[i], NULL);
    } else {
        pid_t pid[ROLES];
        for (int i = 0; i < ROLES; i++) {
            pid[i] = fork();
            CHECK(pid[i] >= 0);
            if (pid[i] == 0) {
                role(i, end);
                _exit(0);
            }
        }
        for (int i = 0; i < ROLES; i++) {
            int status;
            CHECK(waitpid(pid[i], &status, 0) == pid[i]);
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                fprintf(stderr, "role %d: status %#x\n", i, status);
            CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0); /* no crash */
        }
    }
    uint64_t recs = 0, mism = 0, errs = 0;
    for (int i = 0; i < ROLES; i++) {
        recs += cnt[i].records;
        mism += cnt[i].mismatches;
        errs += cnt[i].errors;
    }
    printf("%.0f s, %s: %llu migrations of %llu records, %llu records verified by 4 readers "
           "(%llu loader epochs), %llu mismatches, %llu errors\n", now() - t0s,
           threads ? "threads" : "processes", (unsigned long long)cnt[0].migrations,
           (unsigned long long)n_rec, (unsigned long long)recs,
           (unsigned long long)(cnt[3].epochs + cnt[4].epochs), (unsigned long long)mism,
           (unsigned long long)errs);
    CHECK(mism == 0 && errs == 0);
    CHECK(cnt[0].migrations >= 1 && recs > 0);
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    /* nobody reads now: a writer's reclaim (at the start of its next
     * transaction: here a reservation given back) frees every dropped copy */
    CHECK_OK(cxlp_migrate(p, "d", "nvme", NULL, NULL));
    struct pool_extent ext;
    CHECK_OK(pool_reserve(p, 0, 4096, &ext));
    CHECK_OK(pool_unreserve(p, 0, ext));
    struct cxlp_pool_stat ps;
    CHECK_OK(cxlp_pool_stat(p, &ps));
    if (ps.deferred_bytes || ps.reserved_bytes)
        explain_full(p);
    CHECK(ps.deferred_bytes == 0 && ps.reserved_bytes == 0);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(pool));
    printf("ok\n");
    return 0;
}
