/* Integrity and sharing on a pool of tiers, each found by fault injection:
 *   sums    a flipped byte of a shard's page of block sums in the home file
 *           is refused by every copy step (migrate, a miss, a loader's
 *           staging), naming shard and tier, before any copy is published
 *   enospc  the memory tier's storage full (a private tmpfs of 12 MiB under
 *           a tier of 62 MiB): misses and loaders read the home copy
 *   kept    a memory tier full of kept copies: batches read their records
 *           from the home in part, each batch's in one read a step
 *   ro      a pool of mode 0644 read by another user: no lease, no copy
 *           made or read, every record from the home copy, verified
 * Tests that need root (a mount namespace, another uid) skip without it. */
#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "test.h"
#include "records.h"
#include "pool/loc.h"
#include "pool/pool.h"
#include "store/fetch.h"
#include "store/store.h"
#include "store/unit.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)

static uint64_t seed;
static char pool[128], nvme_path[200];

static cxlp_pool *make_pool(const char *dram_size, uint32_t mode)
{
    snprintf(pool, sizeof pool, "%s", test_name("integ"));
    snprintf(nvme_path, sizeof nvme_path, "/tmp/cxlp-%s.tier", pool);
    char dram[200], nvme[300];
    snprintf(dram, sizeof dram, "dram=shm:%s.d:%s", pool, dram_size);
    snprintf(nvme, sizeof nvme, "nvme=file:%s:96M", nvme_path);
    const char *tiers[] = {dram, nvme};
    struct cxlp_pool_opts o = {.meta_bytes = 4 * MiB, .lease_slots = 16, .mode = mode};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 2, &o, &p));
    return p;
}

/* One block-order epoch of fixed 1 KiB records with lookahead: the loader's
 * code and stats; every record delivered once and intact when it is 0. */
static int epoch(cxlp_pool *p, const char *name, struct cxlp_loader_stats *st, char *msg,
                 size_t cap)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    uint64_t n = cxlp_store_count(s), R, bytes;
    CHECK_OK(store_unit_rule(s, 0, &R, &bytes));
    if (!R) {
        R = s->per_shard;
        bytes = s->loc[0].len;
    }
    uint64_t budget = attach_tier(s->a, 0)->data_len / 4 * 3;
    struct cxlp_sampler_config cfg = {.kind = CXLP_ORDER_BLOCK, .n = n, .seed = seed,
                                      .shard_size = R, .window = MAX(1, budget / 2 / bytes),
                                      .world = 1};
    struct cxlp_loader_opts o = {.batch_size = 64, .threads = 2};
    cxlp_sampler *sm;
    cxlp_loader *l;
    CHECK_OK(rec_loader(s, 1, &cfg, o, &sm, &l));
    uint8_t *seen = calloc(n, 1);
    uint64_t got;
    int rc = rec_drain(l, seen, n, 1, seed, &got, "epoch");
    CHECK(rc != 1);
    if (rc)
        snprintf(msg, cap, "%s", cxlp_errmsg(l));
    else
        CHECK(got == n);
    CHECK_OK(cxlp_loader_stats(l, st));
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
    CHECK_OK(cxlp_store_close(s));
    return rc;
}

/* Flips one byte at off of the home file. */
static void flip(uint64_t off, uint8_t bit)
{
    int fd = open(nvme_path, O_RDWR);
    CHECK(fd >= 0);
    uint8_t c;
    CHECK(pread(fd, &c, 1, (off_t)off) == 1);
    c ^= bit;
    CHECK(pwrite(fd, &c, 1, (off_t)off) == 1);
    close(fd);
}

static void sums(void)
{
    cxlp_pool *p = make_pool("64M", 0);
    uint64_t n;
    /* shards of 2.5 MiB: whole in a 46 MiB budget, their sums in a sums area */
    CHECK_OK(rec_ingest(p, "d", 1, seed, 20 * MiB, 2560 * KiB, &n, NULL));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    uint64_t R, bytes;
    CHECK_OK(store_unit_rule(s, 0, &R, &bytes));
    CHECK(R == 0); /* whole shards */
    const uint64_t k = 2;
    uint8_t *page;
    CHECK(posix_memalign((void **)&page, 4096, 4096) == 0);
    struct shard g;
    struct shard_col gc[SHARD_MAX_COLS];
    CHECK_OK(store_read_head(s, k, page, &g, gc));
    CHECK(g.sums_off != 0);
    uint64_t home = loc_off(s->states[k * s->stride + 1 + 1]);
    CHECK_OK(cxlp_store_close(s));
    free(page);
    flip(home + g.sums_off + 5 * 8 + 2, 0x04); /* sum of block 5, in page 0 */
    /* migrate: refused at that shard, naming it and the tier */
    struct cxlp_migrate_stat ms;
    int rc = cxlp_migrate(p, "d", "dram", NULL, &ms);
    printf("migrate: %s\n", cxlp_errmsg(p));
    CHECK(rc == CXLP_ECORRUPT && strstr(cxlp_errmsg(p), "shard 2") &&
          strstr(cxlp_errmsg(p), "page 0 of the block sums"));
    CHECK_OK(cxlp_store_open(p, "d", &s));
    CHECK(!loc_present(s->states[k * s->stride + 1 + 0]));
    /* a miss on it: refused as well; the other shards read */
    uint8_t buf[REC_FIXED_SIZE];
    uint64_t len;
    CHECK_RC(cxlp_store_read_copy(s, s->first[k] + 7, buf, sizeof buf, &len), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(NULL), "shard 2") && strstr(cxlp_errmsg(NULL), "page 0"));
    CHECK(!loc_present(s->states[k * s->stride + 1 + 0]));
    CHECK_OK(cxlp_store_read_copy(s, s->first[k + 1] + 7, buf, sizeof buf, &len));
    CHECK(rec_ok(buf, len, 1, seed, s->first[k + 1] + 7));
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_migrate(p, "d", "nvme", NULL, NULL));
    /* a loader: its batch that needs the shard fails naming it; no copy */
    struct cxlp_loader_stats st;
    char msg[ERRMSG_MAX] = "";
    CHECK_RC(epoch(p, "d", &st, msg, sizeof msg), CXLP_ECORRUPT);
    printf("loader: %s\n", msg);
    CHECK(strstr(msg, "shard 2") && strstr(msg, "block sums"));
    CHECK_OK(cxlp_store_open(p, "d", &s));
    CHECK(!loc_present(s->states[k * s->stride + 1 + 0]));
    CHECK_OK(cxlp_store_close(s));
    /* verify names the home copy's page */
    CHECK_RC(cxlp_pool_verify(p, NULL, NULL), CXLP_ECORRUPT);
    cxlp_pool_close(p);
    CHECK_OK(cxlp_pool_destroy(pool));
}

/* In a child: a private mount namespace whose /dev/shm is a tmpfs of 96
 * MiB, filled by another file once the pool is made until 8 MiB are left:
 * the dram tier of 64 MiB runs out of storage long before its extent map
 * does. Exit 0 when every read and epoch came through. */
static int enospc_child(void)
{
    if (unshare(CLONE_NEWNS) || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) ||
        mount("tmpfs", "/dev/shm", "tmpfs", 0, "size=96m,mode=1777"))
        return 77;
    cxlp_pool *p = make_pool("64M", 0);
    uint64_t n;
    CHECK_OK(rec_ingest(p, "d", 1, seed, 32 * MiB, MiB, &n, NULL));
    struct statvfs vfs;
    CHECK(statvfs("/dev/shm", &vfs) == 0);
    uint64_t fill = (uint64_t)vfs.f_bavail * vfs.f_frsize - 8 * MiB;
    int fd = open("/dev/shm/filler", O_RDWR | O_CREAT, 0600);
    CHECK(fd >= 0 && posix_fallocate(fd, 0, (off_t)fill) == 0);
    close(fd);
    struct cxlp_loader_stats st;
    char msg[ERRMSG_MAX] = "";
    int rc = epoch(p, "d", &st, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "epoch: %s\n", msg);
    CHECK_OK(rc);
    printf("enospc: epoch whole and intact; %llu items staged, %llu read from the home for no "
           "room (%llu partial reads)\n", (unsigned long long)(st.prefetched + st.fetched),
           (unsigned long long)st.no_room, (unsigned long long)st.partial_reads);
    CHECK(st.no_room > 0 && st.partial_reads > 0);
    /* ds[i]: the same, record by record */
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    uint8_t buf[REC_FIXED_SIZE];
    for (uint64_t i = 0; i < n; i += 97) {
        uint64_t len;
        CHECK_OK(cxlp_store_read_copy(s, i, buf, sizeof buf, &len));
        CHECK(rec_ok(buf, len, 1, seed, i));
    }
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    cxlp_pool_close(p);
    CHECK_OK(cxlp_pool_destroy(pool));
    return 0;
}

static void enospc(void)
{
    if (geteuid() != 0) {
        printf("enospc: SKIP (a private tmpfs needs root)\n");
        return;
    }
    fflush(stdout);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) {
        int r = enospc_child();
        fflush(stdout);
        _exit(r);
    }
    int st;
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st));
    if (WEXITSTATUS(st) == 77)
        printf("enospc: SKIP (no mount namespace here)\n");
    else
        CHECK(WEXITSTATUS(st) == 0);
}

static void kept(void)
{
    cxlp_pool *p = make_pool("16M", 0);
    uint64_t n, m;
    CHECK_OK(rec_ingest(p, "fill", 1, seed, 24 * MiB, 256 * KiB, &m, NULL));
    CHECK_OK(rec_ingest(p, "d", 1, seed, 16 * MiB, 4 * MiB, &n, NULL));
    CHECK_RC(cxlp_migrate(p, "fill", "dram", NULL, NULL), CXLP_EFULL);
    struct cxlp_loader_stats st;
    char msg[ERRMSG_MAX] = "";
    CHECK_OK(epoch(p, "d", &st, msg, sizeof msg));
    printf("kept: %llu batches, %llu items read from the home for no room in %llu partial reads, "
           "%llu staged\n", (unsigned long long)st.batches, (unsigned long long)st.no_room,
           (unsigned long long)st.partial_reads, (unsigned long long)(st.prefetched + st.fetched));
    /* every record from the home in part, a batch's items together */
    CHECK(st.misses == n && st.no_room > 0 && st.partial_reads == st.no_room);
    cxlp_pool_close(p);
    CHECK_OK(cxlp_pool_destroy(pool));
}

/* The cxlpool binary beside this test's. */
static void cxlpool_path(char *out, size_t cap)
{
    char self[400];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0);
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    snprintf(out, cap, "%s/cxlpool", self);
}

static int ro_child(uint64_t n)
{
    if (setgid(65534) || setuid(65534))
        return 77;
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_open(pool, &(struct cxlp_pool_opts){.readonly = 1}, &p));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    uint8_t buf[REC_FIXED_SIZE];
    for (uint64_t i = 0; i < n; i += 7) {
        uint64_t len;
        CHECK_OK(cxlp_store_read_copy(s, i, buf, sizeof buf, &len));
        CHECK(rec_ok(buf, len, 1, seed, i));
    }
    /* a view: refused, saying why and what to use */
    struct cxlp_view v;
    CHECK_RC(cxlp_store_read(s, 3, &v), CXLP_EREADONLY);
    printf("ro: %s\n", cxlp_errmsg(NULL));
    CHECK(strstr(cxlp_errmsg(NULL), "cxlp_store_read_copy"));
    CHECK_OK(cxlp_store_close(s));
    struct cxlp_loader_stats st;
    char msg[ERRMSG_MAX] = "";
    int rc = epoch(p, "d", &st, msg, sizeof msg);
    if (rc)
        fprintf(stderr, "epoch: %s\n", msg);
    CHECK_OK(rc);
    printf("ro: epoch whole and intact from the home: %llu partial reads, %llu staged\n",
           (unsigned long long)st.partial_reads, (unsigned long long)(st.prefetched + st.fetched));
    CHECK(st.prefetched + st.fetched == 0 && st.partial_reads > 0 && st.stagers == 0);
    cxlp_pool_close(p);
    /* the CLI too: cat reads a record, or says what went wrong */
    char cli[512], cmd[1400];
    cxlpool_path(cli, sizeof cli);
    snprintf(cmd, sizeof cmd, "%s cat %s d 5 --format raw | cmp -n %d - /dev/null >/dev/null 2>&1; "
             "%s cat %s d 5 --format raw | wc -c", cli, pool, REC_FIXED_SIZE, cli, pool);
    FILE *f = popen(cmd, "r");
    CHECK(f);
    unsigned long got = 0;
    CHECK(fscanf(f, "%lu", &got) == 1);
    pclose(f);
    CHECK(got == REC_FIXED_SIZE);
    return 0;
}

static void ro(void)
{
    if (geteuid() != 0) {
        printf("ro: SKIP (another uid needs root)\n");
        return;
    }
    cxlp_pool *p = make_pool("16M", 0644);
    uint64_t n;
    CHECK_OK(rec_ingest(p, "d", 1, seed, 8 * MiB, 2 * MiB, &n, NULL));
    struct cxlp_tier_info t0[2], t1[2];
    size_t nt;
    CHECK_OK(cxlp_pool_tiers(p, t0, 2, &nt));
    fflush(stdout);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) {
        int r = ro_child(n);
        fflush(stdout);
        _exit(r);
    }
    int st;
    CHECK(waitpid(c, &st, 0) == c && WIFEXITED(st));
    if (WEXITSTATUS(st) == 77)
        printf("ro: SKIP (cannot become uid 65534)\n");
    else
        CHECK(WEXITSTATUS(st) == 0);
    CHECK_OK(cxlp_pool_tiers(p, t1, 2, &nt));
    CHECK(t1[0].copies == t0[0].copies && t1[0].bytes_in == t0[0].bytes_in); /* nothing placed */
    cxlp_pool_close(p);
    CHECK_OK(cxlp_pool_destroy(pool));
}

int main(void)
{
    seed = test_seed();
    sums();
    enospc();
    kept();
    ro();
    printf("ok\n");
    return 0;
}
