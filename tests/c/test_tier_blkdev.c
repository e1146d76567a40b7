/* An nvme tier on a block device (file:/dev/X), here a loop device over a
 * file in /var/tmp: the size comes from the device (BLKGETSIZE64), create
 * claims it and refuses one that holds a pool or tier object or that is
 * claimed, destroy zeroes only a first page of ours and never removes the
 * device node, the tier is read with O_DIRECT, and an epoch through the
 * staging engine reads every record once and intact. Needs root and a
 * loop device; skips with the reason otherwise. */
#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "test.h"
#include "records.h"
#include "media/media.h"
#include "store/store.h"

#define MiB (1ull << 20)
#define DEV_BYTES (32 * MiB)

static char backing[200], dev[64];
static int loop_fd = -1;

static void detach(void)
{
    if (loop_fd >= 0) {
        ioctl(loop_fd, LOOP_CLR_FD, 0);
        close(loop_fd);
        loop_fd = -1;
    }
    unlink(backing);
}

/* A free loop device over a new 32 MiB file; skips where there is none. */
static void attach(void)
{
    if (geteuid() != 0)
        SKIP("needs root to set up a loop device\n");
    snprintf(backing, sizeof backing, "/var/tmp/%s.img", test_name("tblk"));
    int bfd = open(backing, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(bfd >= 0 && ftruncate(bfd, DEV_BYTES) == 0);
    int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
    if (ctl < 0) {
        close(bfd);
        unlink(backing);
        SKIP("no /dev/loop-control: %s\n", strerror(errno));
    }
    /* another process may take the device we were told is free: retry */
    for (int tries = 0; tries < 20 && loop_fd < 0; tries++) {
        int nr = ioctl(ctl, LOOP_CTL_GET_FREE);
        if (nr < 0)
            break;
        snprintf(dev, sizeof dev, "/dev/loop%d", nr);
        int fd = open(dev, O_RDWR | O_CLOEXEC);
        if (fd >= 0 && ioctl(fd, LOOP_SET_FD, bfd) == 0)
            loop_fd = fd;
        else if (fd >= 0)
            close(fd);
    }
    close(ctl);
    close(bfd);
    if (loop_fd < 0) {
        unlink(backing);
        SKIP("no free loop device could be attached\n");
    }
    atexit(detach);
    printf("loop device %s over %s\n", dev, backing);
}

static void media_level(void)
{
    char spec[96], err[256];
    struct media m;
    snprintf(spec, sizeof spec, "file:%s", dev);
    CHECK(media_file_is_blk(dev) && !media_file_is_blk(backing));
    /* size 0: the device's; a size larger than it is refused by name */
    CHECK_OK(media_parse(&m, spec, err, sizeof err));
    CHECK_OK(media_probe(&m, 0, err, sizeof err));
    CHECK_RC(media_probe(&m, DEV_BYTES + 4096, err, sizeof err), CXLP_EARG);
    CHECK(strstr(err, dev) && strstr(err, "device holds"));
    CHECK_RC(media_create(&m, spec, DEV_BYTES + 4096, 0, err, sizeof err), CXLP_EARG);
    CHECK_OK(media_create(&m, spec, 0, 0, err, sizeof err));
    CHECK(m.blkdev && m.size == DEV_BYTES && m.emulated);
    /* claimed: a second create is refused while we hold it open O_EXCL */
    struct media m2;
    CHECK_RC(media_create(&m2, spec, 0, 0, err, sizeof err), CXLP_EBUSY);
    CHECK(strstr(err, "in use"));
    memcpy(m.base, "CXLPOBJ", 8);
    memcpy((uint8_t *)m.base + DEV_BYTES - 4096, "tail", 5);
    CHECK_OK(media_sync(&m, 0, DEV_BYTES));
    CHECK_OK(media_prepare(&m, 0, DEV_BYTES)); /* nothing to allocate on a device */
    media_close(&m);
    /* now it holds a tier object: probe and create refuse it */
    CHECK_RC(media_probe(&m, 0, err, sizeof err), CXLP_EEXIST);
    CHECK_RC(media_create(&m, spec, 0, 0, err, sizeof err), CXLP_EEXIST);
    CHECK(strstr(err, "already holds"));
    CHECK_OK(media_open(&m, spec, 0, err, sizeof err));
    CHECK(m.size == DEV_BYTES && memcmp((uint8_t *)m.base + DEV_BYTES - 4096, "tail", 5) == 0);
    media_close(&m);
    /* the bytes went to the device: the backing file has them */
    int bfd = open(backing, O_RDONLY);
    char head[8];
    CHECK(bfd >= 0 && pread(bfd, head, 8, 0) == 8 && memcmp(head, "CXLPOBJ", 8) == 0);
    /* destroy wipes our first page and leaves the device node */
    CHECK_OK(media_destroy(spec, err, sizeof err));
    struct stat st;
    CHECK(stat(dev, &st) == 0 && S_ISBLK(st.st_mode));
    CHECK(pread(bfd, head, 8, 0) == 8 && memcmp(head, "\0\0\0\0\0\0\0\0", 8) == 0);
    /* a device that holds something else is not wiped */
    CHECK_OK(media_create(&m, spec, 4 * MiB, 0, err, sizeof err));
    CHECK(m.size == 4 * MiB);
    memcpy(m.base, "a disk!", 8);
    CHECK_OK(media_sync(&m, 0, 4096));
    media_close(&m);
    CHECK_RC(media_destroy(spec, err, sizeof err), CXLP_ENOTFOUND);
    CHECK(strstr(err, "no pool or tier object"));
    CHECK(pread(bfd, head, 8, 0) == 8 && memcmp(head, "a disk!", 8) == 0);
    close(bfd);
    /* the staged tier's reader opens the device with O_DIRECT */
    struct media_reader *r;
    CHECK_OK(media_reader_open(&r, dev, err, sizeof err));
    CHECK(media_reader_direct(r));
    static uint8_t buf[8192] __attribute__((aligned(4096)));
    int direct = 0;
    CHECK_OK(media_read(r, 0, 8192, buf, &direct));
    CHECK(direct && memcmp(buf, "a disk!", 8) == 0);
    media_reader_close(r);
    printf("media: a %llu-byte device claimed, refused twice, read O_DIRECT, wiped only when "
           "ours\n", (unsigned long long)DEV_BYTES);
}

/* A pool whose home is the device, sized by it; an epoch through the
 * staging engine; cxlpool destroy leaves the device. */
static void tier_level(void)
{
    char pool[128], dram[192], nvme[96];
    snprintf(pool, sizeof pool, "%s", test_name("tblk"));
    snprintf(dram, sizeof dram, "dram=shm:%s.d:4M", pool);
    snprintf(nvme, sizeof nvme, "nvme=file:%s", dev);
    /* a first page that is not ours ("a disk!") does not stop a claim: the
     * device was named; a mounted or claimed one is refused (O_EXCL) */
    const char *tiers[] = {dram, nvme};
    struct cxlp_pool_opts po = {.meta_bytes = 4 * MiB};
    cxlp_pool *p;
    int excl = open(dev, O_RDONLY | O_EXCL);
    CHECK(excl >= 0);
    CHECK_RC(cxlp_pool_create_tiered(pool, tiers, 2, &po, &p), CXLP_EBUSY);
    CHECK(strstr(cxlp_errmsg(NULL), "tier 1") && strstr(cxlp_errmsg(NULL), dev));
    close(excl);
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 2, &po, &p));
    struct cxlp_tier_info ti[2];
    size_t nt;
    CHECK_OK(cxlp_pool_tiers(p, ti, 2, &nt));
    CHECK(nt == 2 && ti[1].home && ti[1].staged && ti[1].media == CXLP_MEDIA_FILE);
    CHECK(ti[1].capacity == DEV_BYTES - 2 * MiB && !strcmp(ti[1].path, dev));
    uint64_t seed = 29, n;
    CHECK_OK(rec_ingest(p, "d", 1, seed, 12 * MiB, 256 * 1024, &n, NULL));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "d", &s));
    uint64_t shards = (n + s->per_shard - 1) / s->per_shard;
    struct cxlp_sampler_config cfg = {.kind = CXLP_ORDER_BLOCK, .n = n, .seed = 3,
                                      .shard_size = s->per_shard, .window = 2, .world = 1};
    struct cxlp_loader_opts o = {.batch_size = 64, .threads = 2,
                                 .tier_policy = CXLP_POLICY_LOOKAHEAD, .tier_budget = 2 * MiB};
    cxlp_sampler *sm;
    cxlp_loader *l;
    CHECK_OK(rec_loader(s, 1, &cfg, o, &sm, &l));
    uint8_t *seen = calloc(n, 1);
    uint64_t records = 0, bad = 0;
    struct cxlp_batch *b;
    for (;;) {
        CHECK_OK(cxlp_loader_next(l, &b));
        if (!b)
            break;
        CHECK(rec_batch_ok(b, seen, n, 1, seed, &bad));
        records += b->rows;
        cxlp_loader_release(l, b);
    }
    struct cxlp_loader_stats ls;
    CHECK_OK(cxlp_loader_stats(l, &ls));
    CHECK(records == n && shards > 8 && ls.prefetched + ls.fetched >= shards);
    printf("tier: %llu records of %llu shards read once and intact from %s (%llu shards "
           "staged ahead, %llu on a miss)\n", (unsigned long long)n, (unsigned long long)shards,
           dev,
           (unsigned long long)ls.prefetched, (unsigned long long)ls.fetched);
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
    cxlp_store_close(s);
    cxlp_pool_close(p);
    CHECK_OK(cxlp_pool_destroy(pool));
    struct stat st;
    CHECK(stat(dev, &st) == 0 && S_ISBLK(st.st_mode));
    char err[256];
    char spec[96];
    snprintf(spec, sizeof spec, "file:%s", dev);
    CHECK_RC(media_destroy(spec, err, sizeof err), CXLP_ENOTFOUND); /* wiped already */
}

int main(void)
{
    attach();
    media_level();
    tier_level();
    printf("ok\n");
    return 0;
}
