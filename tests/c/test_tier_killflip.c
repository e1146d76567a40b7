/* Kill and flip over a pool of tiers (dram before an nvme home file). Each
 * round a child does one of four things over and over, and is SIGKILLed at
 * a random instant (up to 40 ms after it opened the pool):
 *   ingest   publishes a second dataset and removes it again;
 *   migrate  moves dataset d to the dram tier and home again;
 *   loader   reads epochs of d with the lookahead engine (staging units:
 *            d's shards are larger than a sixteenth of the budget), checking
 *            every record it is given, and exits 9 on a wrong one;
 *   rewrite  writes d again (cxlp_pool_rewrite).
 * Every other round, before the child starts, one byte of a record of a
 * random shard of d is flipped in the home file. After the kill:
 *   - with a flip, cxlp_pool_verify fails naming that shard, and every
 *     record of d reads back intact or is refused (CXLP_ECORRUPT), only in
 *     that shard: never a wrong byte;
 *   - the byte is put back; then cxlp_pool_verify passes: no copy in any
 *     tier holds the flipped byte (every copy is checksummed), so no copy
 *     was made from it;
 *   - migrating d home leaves nothing reserved and the extent accounting
 *     exact.
 * CXLP_KILLFLIP_ROUNDS sets the rounds (default 12; the acceptance run of
 * docs/tiers.md, "Integrity": 120, so 120 kills and 60 flips).
 */
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test.h"
#include "records.h"
#include "pool/loc.h"
#include "pool/pool.h"
#include "store/fetch.h"
#include "store/store.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)

static char pool[128], home_path[200];
static volatile uint64_t *progress;
static uint64_t seed;

enum { ACT_INGEST, ACT_MIGRATE, ACT_LOADER, ACT_REWRITE, N_ACT };
static const char *const act_name[] = {"ingest", "migrate", "loader", "rewrite"};

static void bump(void *ctx, uint64_t done, uint64_t total)
{
    (void)ctx;
    (void)done;
    (void)total;
    __atomic_fetch_add(progress, 1, __ATOMIC_RELAXED);
}

/* One block-order epoch of d with lookahead, a small budget; every record
 * given is checked (exit 9 on a wrong one); an error (the flipped shard)
 * ends the epoch. */
static void loader_epoch(cxlp_store *s, uint64_t epoch)
{
    uint64_t n = cxlp_store_count(s);
    struct cxlp_sampler_config cfg = {.kind = CXLP_ORDER_BLOCK, .n = n, .seed = seed,
                                      .epoch = epoch, .shard_size = 256, .window = 4,
                                      .world = 1};
    struct cxlp_loader_opts o = {.batch_size = 32, .threads = 2,
                                 .tier_policy = CXLP_POLICY_LOOKAHEAD, .tier_budget = 3 * MiB};
    cxlp_sampler *sm;
    cxlp_loader *l;
    if (rec_loader(s, 1, &cfg, o, &sm, &l))
        return;
    uint8_t *seen = calloc(n, 1);
    struct cxlp_batch *b;
    while (cxlp_loader_next(l, &b) == 0 && b) {
        uint64_t bad;
        if (!rec_batch_ok(b, seen, n, 1, seed, &bad)) {
            fprintf(stderr, "loader child: record %llu wrong\n", (unsigned long long)bad);
            _exit(9);
        }
        cxlp_loader_release(l, b);
        bump(NULL, 0, 0);
    }
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
}

static void child(int act)
{
    cxlp_pool *p;
    if (cxlp_pool_open(pool, NULL, &p))
        _exit(3);
    __atomic_store_n(progress, 1, __ATOMIC_RELAXED);
    for (uint64_t round = 0;; round++) {
        switch (act) {
        case ACT_INGEST: {
            uint64_t n;
            (void)cxlp_pool_remove(p, "x"); /* a killed round may have left it */
            if (rec_ingest(p, "x", 1, seed + 1, 3 * MiB, 512 * KiB, &n, NULL) == 0)
                (void)cxlp_pool_remove(p, "x");
            break;
        }
        case ACT_MIGRATE: {
            struct cxlp_migrate_opts o = {.progress = bump};
            (void)cxlp_migrate(p, "d", "dram", &o, NULL);
            (void)cxlp_migrate(p, "d", "nvme", &o, NULL);
            break;
        }
        case ACT_LOADER: {
            cxlp_store *s;
            if (cxlp_store_open(p, "d", &s) == 0) {
                loader_epoch(s, round);
                cxlp_store_close(s);
            }
            break;
        }
        case ACT_REWRITE:
            (void)cxlp_pool_rewrite(p, "d", NULL);
            bump(NULL, 0, 0);
            break;
        }
    }
}

/* Flips one byte of a random record of a random shard of d in the home
 * file: *shard and the file offset. */
static void flip(uint64_t *rng, uint64_t *shard, uint64_t *off)
{
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    uint64_t k = test_rand(rng) % s->n_shards;
    uint8_t *page;
    CHECK(posix_memalign((void **)&page, 4096, SHARD_DATA_OFF) == 0);
    struct shard g;
    struct shard_col gc[SHARD_MAX_COLS];
    CHECK_OK(store_read_head(s, k, page, &g, gc));
    uint64_t home = loc_off(s->states[k * s->stride + 1 + 1]); /* tier 1: the home */
    CHECK(gc[0].data_len > 0);
    *off = home + gc[0].data_off + test_rand(rng) % gc[0].data_len;
    *shard = k;
    free(page);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(p));
    int fd = open(home_path, O_RDWR);
    CHECK(fd >= 0);
    uint8_t c;
    CHECK(pread(fd, &c, 1, (off_t)*off) == 1);
    c ^= 0x10;
    CHECK(pwrite(fd, &c, 1, (off_t)*off) == 1);
    CHECK(fsync(fd) == 0);
    close(fd);
}

static void unflip(uint64_t off)
{
    int fd = open(home_path, O_RDWR);
    CHECK(fd >= 0);
    uint8_t c;
    CHECK(pread(fd, &c, 1, (off_t)off) == 1);
    c ^= 0x10;
    CHECK(pwrite(fd, &c, 1, (off_t)off) == 1);
    CHECK(fsync(fd) == 0);
    close(fd);
}

/* After a kill: what the pool says and gives, with the flip (if any) in
 * place; then without it. Returns the records refused. */
static uint64_t check(int flipped, uint64_t k, uint64_t off, uint64_t n)
{
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    uint64_t refused = 0;
    if (flipped) {
        char want[48];
        snprintf(want, sizeof want, "shard %llu", (unsigned long long)k);
        int rc = cxlp_pool_verify(p, NULL, NULL);
        if (rc != CXLP_ECORRUPT || !strstr(cxlp_errmsg(p), want))
            fprintf(stderr, "verify with shard %llu flipped: rc %d, %s\n",
                    (unsigned long long)k, rc, cxlp_errmsg(p));
        CHECK(rc == CXLP_ECORRUPT && strstr(cxlp_errmsg(p), want));
    }
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    CHECK(cxlp_store_count(s) == n);
    uint8_t buf[REC_FIXED_SIZE];
    for (uint64_t i = 0; i < n; i++) {
        uint64_t len;
        /* a refused read tries its copy again, whole: in the flipped
         * shard, after a refusal, every 64th record */
        if (refused && i % 64 && store_shard_of(s, i) == k)
            continue;
        int rc = cxlp_store_read_copy(s, i, buf, sizeof buf, &len);
        if (rc == CXLP_ECORRUPT && flipped && store_shard_of(s, i) == k) {
            refused++;
            continue;
        }
        if (rc)
            fprintf(stderr, "record %llu (shards of %llu records; shard %llu flipped: %d)\n",
                    (unsigned long long)i, (unsigned long long)s->per_shard,
                    (unsigned long long)k, flipped);
        CHECK_OK(rc);
        CHECK(rec_ok(buf, len, 1, seed, i));
    }
    CHECK_OK(cxlp_store_close(s));
    if (flipped)
        unflip(off);
    /* every copy of every tier checksummed: none holds the flipped byte */
    int rc = cxlp_pool_verify(p, NULL, NULL);
    if (rc)
        fprintf(stderr, "verify after the flip was undone: %s\n", cxlp_errmsg(p));
    CHECK_OK(rc);
    CHECK_OK(cxlp_migrate(p, "d", "nvme", NULL, NULL));
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 0);
    CHECK(st.free_bytes + st.used_bytes + st.deferred_bytes == st.data_bytes);
    CHECK_OK(cxlp_pool_close(p));
    return refused;
}

int main(void)
{
    seed = test_seed();
    const char *e = getenv("CXLP_KILLFLIP_ROUNDS");
    const int rounds = e && atoi(e) > 0 ? atoi(e) : 12;
    snprintf(pool, sizeof pool, "%s", test_name("killflip"));
    snprintf(home_path, sizeof home_path, "/tmp/cxlp-%s.tier", pool);
    char t0[200], t1[300];
    snprintf(t0, sizeof t0, "dram=shm:%s.d:16M", pool);
    snprintf(t1, sizeof t1, "nvme=file:%s:64M", home_path);
    const char *tiers[] = {t0, t1};
    struct cxlp_pool_opts po = {.meta_bytes = 4 * MiB, .lease_slots = 32};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 2, &po, &p));
    uint64_t n;
    /* shards of 2 MiB: more than a sixteenth of a 12 MiB budget (units) */
    CHECK_OK(rec_ingest(p, "d", 1, seed, 8 * MiB, 2 * MiB, &n, NULL));
    CHECK_OK(cxlp_pool_close(p));
    progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(progress != MAP_FAILED);
    uint64_t rng = seed, kills = 0, flips = 0, refused = 0, per_act[N_ACT] = {0};
    for (int r = 0; r < rounds; r++) {
        int act = r % N_ACT, flipped = r % 2 == 0;
        uint64_t k = 0, off = 0;
        if (flipped)
            flip(&rng, &k, &off);
        *progress = 0;
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0)
            child(act);
        int status, reaped = test_kill_at(pid, progress, 1,
                                          (useconds_t)(test_rand(&rng) % 40000), &status);
        if (!reaped)
            CHECK(waitpid(pid, &status, 0) == pid);
        if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
            fprintf(stderr, "%s child ended with status %#x\n", act_name[act], status);
        CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
        kills++;
        uint64_t ref = check(flipped, k, off, n);
        flips += flipped;
        refused += ref;
        per_act[act]++;
        printf("round %3d %-8s killed after %llu steps%s\n", r, act_name[act],
               (unsigned long long)*progress,
               flipped ? ", with a byte of its shard flipped: caught" : "");
    }
    printf("%llu kills (ingest %llu, migrate %llu, loader %llu, rewrite %llu), %llu flips, "
           "%llu reads refused, 0 wrong bytes\n",
           (unsigned long long)kills, (unsigned long long)per_act[0],
           (unsigned long long)per_act[1], (unsigned long long)per_act[2],
           (unsigned long long)per_act[3], (unsigned long long)flips,
           (unsigned long long)refused);
    CHECK_OK(cxlp_pool_destroy(pool));
    printf("ok\n");
    return 0;
}
