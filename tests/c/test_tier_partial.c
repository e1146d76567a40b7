/* Partial reads (shard formats 3 and 4): a shard homed on an nvme tier read in
 * part, only the blocks of the records asked for, each verified against its
 * block sum; the right records, fewer bytes than the shard, nothing staged.
 * A corrupt block or a wrong sum fails the reads that need it, named, and
 * nothing else; a shard of format 2 (no block sums) is not read in part and
 * still reads and verifies whole (every shard of a dataset has one format).
 * Through the loader: with no room for a copy, batches read in part where
 * they read whole private copies before. */
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#include <xxhash.h>

#include "test.h"
#include "records.h"
#include "shard_util.h"
#include "pool/loc.h"
#include "pool/pool_internal.h"
#include "store/fetch.h"
#include "store/shard.h"
#include "store/store.h"

#define MiB (1ull << 20)
#define KiB (1ull << 10)
#define SHARD_B MiB

static char pool[128], nvme_path[256];
static const uint64_t seed = 5;

static uint64_t home_off(cxlp_store *s, uint64_t k)
{
    uint64_t w = __atomic_load_n(&s->states[k * s->stride + 1 + attach_home(s->a)], __ATOMIC_ACQUIRE);
    CHECK(loc_present(w));
    return loc_off(w);
}

static int in_memory(cxlp_store *s, uint64_t k)
{
    return loc_present(__atomic_load_n(&s->states[k * s->stride + 1 + 0], __ATOMIC_ACQUIRE));
}

/* Flips the bits of mask in the byte at offset at of the nvme tier's file. */
static void flip(uint64_t at, uint8_t mask)
{
    int fd = open(nvme_path, O_RDWR);
    CHECK(fd >= 0);
    uint8_t c;
    CHECK(pread(fd, &c, 1, (off_t)at) == 1);
    c ^= mask;
    CHECK(pwrite(fd, &c, 1, (off_t)at) == 1);
    fsync(fd);
    close(fd);
}

/* The test pool and dataset name in it. */
static void open_ds(const char *name, cxlp_pool **p, cxlp_store **s)
{
    CHECK_OK(cxlp_pool_open(pool, NULL, p));
    CHECK_OK(cxlp_store_open(*p, name, s));
}

/* Records rec[0..n) of shard k, read in part into buf (blen bytes)
 * described by g, are the ones written. */
static void part_right(cxlp_store *s, int fixed, uint64_t k, const struct shard *g,
                       const uint8_t *buf, uint64_t blen, const uint64_t *rec, size_t n)
{
    CHECK(g->version == SHARD_VERSION && g->n_bsums > 1 && g->base == buf);
    CHECK(blen == ALIGN_UP(s->loc[k].len, 4096));
    for (size_t i = 0; i < n; i++) {
        const uint8_t *p;
        uint64_t len;
        CHECK_OK(shard_col_record(&g->col[0], rec[i], &p, &len));
        CHECK(rec_ok(p, len, fixed, seed, s->first[k] + rec[i]));
    }
}

/* Reads records rec[0..n) of shard k in part and checks them; returns the
 * bytes read. */
static uint64_t partial_ok(cxlp_store *s, int fixed, uint64_t k, const uint64_t *rec, size_t n)
{
    struct store_io io = {0};
    uint8_t *buf;
    uint64_t blen, bytes;
    struct shard g;
    struct shard_col cols[SHARD_MAX_COLS];
    int rc = store_read_partial(s, k, rec, n, &io, &buf, &blen, &g, cols, &bytes);
    if (rc)
        fprintf(stderr, "partial read: %s\n", cxlp_errmsg(NULL));
    CHECK_OK(rc);
    part_right(s, fixed, k, &g, buf, blen, rec, n);
    munmap(buf, blen);
    store_io_close(&io);
    CHECK(!in_memory(s, k)); /* nothing staged */
    return bytes;
}

static void direct(const char *name, int fixed)
{
    cxlp_pool *p;
    cxlp_store *s;
    open_ds(name, &p, &s);
    CHECK(s->n_shards >= 3);
    uint64_t k = 1, nr = s->loc[k].n_records;
    const uint64_t rec[] = {2, nr / 2, nr - 1, 2};
    uint64_t bytes = partial_ok(s, fixed, k, rec, 4);
    const uint64_t whole = ALIGN_UP(s->loc[k].len, 4096);
    printf("%s: 3 records of shard %llu (%llu bytes) in part: %llu bytes read\n", name,
           (unsigned long long)k, (unsigned long long)whole, (unsigned long long)bytes);
    /* the header page and at most two more 4 KiB blocks per distinct
     * record (a variable-size record may straddle a block), plus the
     * index */
    CHECK(bytes >= 2 * SHARD_DATA_OFF && bytes < whole / 2);
    /* fixed: records 2 (block 1, the first past the header page), nr / 2
     * (block 129) and nr - 1 (the last block, the 4 KiB past 1 MiB), each
     * of 1 KiB inside one block: the header page and exactly those */
    if (fixed)
        CHECK(nr == SHARD_B / REC_FIXED_SIZE && bytes == SHARD_DATA_OFF + 3 * 4 * KiB);
    /* the same records again: the header page is the store's, kept from
     * the read above, so only the blocks are read */
    CHECK(partial_ok(s, fixed, k, rec, 4) == bytes - SHARD_DATA_OFF);
    /* no records: nothing (fixed), the index's blocks (variable size) */
    uint64_t b0 = partial_ok(s, fixed, k, rec, 0);
    CHECK(b0 < bytes);
    if (fixed)
        CHECK(b0 == 0);
    /* another handle keeps its own pages: the header page is read again */
    cxlp_store *s2;
    CHECK_OK(cxlp_store_open(p, name, &s2));
    uint64_t b1 = partial_ok(s2, fixed, k, rec, 0);
    CHECK(b1 == b0 + SHARD_DATA_OFF);
    CHECK_OK(cxlp_store_close(s2));
    /* a record past the shard */
    struct store_io io = {0};
    uint8_t *buf;
    uint64_t blen, got;
    struct shard g;
    struct shard_col cols[SHARD_MAX_COLS];
    const uint64_t past = nr;
    CHECK_RC(store_read_partial(s, k, &past, 1, &io, &buf, &blen, &g, cols, &got), CXLP_ERANGE);
    store_io_close(&io);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(p));
}

/* Several shards in one partial read (store_read_parts, as a batch reads
 * the shards of its records): each shard's records right, each read the
 * bytes a read of it alone reads but the header page the store kept from
 * that read, nothing staged. */
static void several(const char *name, int fixed)
{
    cxlp_pool *p;
    cxlp_store *s;
    open_ds(name, &p, &s);
    CHECK(s->n_shards >= 4);
    enum { NS = 3 };
    uint64_t rec[NS][3], alone = 0;
    struct shard g[NS];
    struct shard_col cols[NS][SHARD_MAX_COLS];
    struct store_part v[NS];
    for (int i = 0; i < NS; i++) {
        uint64_t k = (uint64_t)i + 1, nr = s->loc[k].n_records;
        rec[i][0] = (uint64_t)i * 7 % nr;
        rec[i][1] = nr / 3 + (uint64_t)i;
        rec[i][2] = nr - 1;
        alone += partial_ok(s, fixed, k, rec[i], 3);
        v[i] = (struct store_part){.k = k, .rec = rec[i], .n = 3, .g = &g[i], .cols = cols[i]};
    }
    struct store_io io = {0};
    uint64_t bytes;
    CHECK_OK(store_read_parts(s, v, NS, &io, &bytes));
    CHECK(bytes == alone - NS * SHARD_DATA_OFF); /* the header pages kept from those reads */
    printf("%s: 3 records of each of 3 shards in one partial read: %llu bytes\n", name,
           (unsigned long long)bytes);
    for (int i = 0; i < NS; i++) {
        part_right(s, fixed, v[i].k, &g[i], v[i].buf, v[i].buf_len, rec[i], 3);
        munmap(v[i].buf, v[i].buf_len);
        CHECK(!in_memory(s, v[i].k));
    }
    /* a record past its shard in one of them: refused, nothing mapped */
    rec[1][2] = s->loc[2].n_records;
    CHECK_RC(store_read_parts(s, v, NS, &io, &bytes), CXLP_ERANGE);
    CHECK(strstr(cxlp_errmsg(NULL), "shard 2: record"));
    for (int i = 0; i < NS; i++)
        CHECK(v[i].buf == NULL && v[i].buf_len == 0);
    store_io_close(&io);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(p));
}

/* A shard of 40 MiB: more 4 KiB blocks than the header page holds sums
 * for, so they lie in a sums area after the records, under page sums in
 * the header page. The header page is read first, then the blocks of the
 * records and the pages of sums those blocks need (each once, in the same
 * read): records in each read right. A byte of one page of sums flipped on
 * the tier: a read needing that page fails naming it, one needing others
 * does not. */
static void big(void)
{
    cxlp_pool *p;
    cxlp_store *s;
    open_ds("big", &p, &s);
    CHECK(s->n_shards == 1);
    uint64_t nr = s->loc[0].n_records;
    /* records 0 and 100 (at 4,096 and 106,496: blocks 1 and 26, page 0 of
     * the sums); nr / 2 and nr - 1 (pages 10 and 20) */
    const uint64_t rec[] = {0, 100, nr / 2, nr - 1};
    struct store_io io = {0};
    uint8_t *buf;
    uint64_t blen, bytes;
    struct shard g;
    struct shard_col cols[SHARD_MAX_COLS];
    CHECK_OK(store_read_partial(s, 0, rec, 4, &io, &buf, &blen, &g, cols, &bytes));
    CHECK(g.bsum_shift == 12 && g.sums_off && shard_sum_pages(&g) == 21);
    uint32_t fmt;
    uint64_t block;
    int area;
    CHECK_OK(cxlp_store_format(s, &fmt, &block, &area)); /* the home copy's header */
    CHECK(fmt == 4 && block == 4096 && area == 1);
    for (size_t i = 0; i < 4; i++) {
        const uint8_t *q;
        uint64_t len;
        CHECK_OK(shard_col_record(&g.col[0], rec[i], &q, &len));
        CHECK(rec_ok(q, len, 1, seed, rec[i]));
    }
    printf("big: 4 records of a %llu-byte shard of 4 KiB blocks (%llu pages of sums): %llu "
           "bytes read\n", (unsigned long long)blen, (unsigned long long)shard_sum_pages(&g),
           (unsigned long long)bytes);
    /* the header page, four blocks, three pages of sums */
    CHECK(bytes == SHARD_DATA_OFF + 4 * 4 * KiB + 3 * SHARD_SUMS_PAGE);
    const uint64_t page10 = home_off(s, 0) + g.sums_off + 10 * SHARD_SUMS_PAGE + 24;
    munmap(buf, blen);
    /* again: the header page and the pages of sums are the store's, kept
     * from that read (each verified again), so only the blocks are read */
    CHECK_OK(store_read_partial(s, 0, rec, 4, &io, &buf, &blen, &g, cols, &bytes));
    CHECK(bytes == 4 * 4 * KiB);
    for (size_t i = 0; i < 4; i++) {
        const uint8_t *q;
        uint64_t len;
        CHECK_OK(shard_col_record(&g.col[0], rec[i], &q, &len));
        CHECK(rec_ok(q, len, 1, seed, rec[i]));
    }
    munmap(buf, blen);
    /* the corrupt page below is seen by a handle that kept none */
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_store_open(p, "big", &s));
    flip(page10, 0x40);
    CHECK_RC(store_read_partial(s, 0, &rec[2], 1, &io, &buf, &blen, &g, cols, &bytes),
             CXLP_ECORRUPT);
    printf("big: corrupt page of sums: %s\n", cxlp_errmsg(NULL));
    CHECK(strstr(cxlp_errmsg(NULL), "dataset big shard 0") &&
          strstr(cxlp_errmsg(NULL), "page 10 of the block sums"));
    CHECK_OK(store_read_partial(s, 0, rec, 2, &io, &buf, &blen, &g, cols, &bytes));
    munmap(buf, blen);
    CHECK_RC(cxlp_store_verify(s), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(s), "page 10 of the block sums"));
    flip(page10, 0x40);
    CHECK_OK(store_read_partial(s, 0, &rec[2], 1, &io, &buf, &blen, &g, cols, &bytes));
    munmap(buf, blen);
    store_io_close(&io);
    CHECK(!in_memory(s, 0));
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(p));
}

static void loader(const char *name, int fixed, int old, int corrupt);
static void loader_on(cxlp_pool *p, cxlp_store *s, const char *name, int fixed, int old,
                      int corrupt);

/* One byte of one block of shard 1 on the nvme tier flipped: the partial
 * reads that need that block fail naming dataset, shard and block; the
 * others (other blocks of the shard, other shards) do not; verify names it. */
static void corrupt(void)
{
    cxlp_pool *p;
    cxlp_store *s;
    open_ds("fixed", &p, &s);
    const uint64_t k = 1, blk = 80;
    uint64_t at = home_off(s, k) + blk * 4 * KiB + 100;
    flip(at, 0x10);
    /* the record holding byte blk * 4 KiB + 100 of the shard */
    const uint64_t bad = (blk * 4 * KiB + 100 - SHARD_DATA_OFF) / REC_FIXED_SIZE;
    const uint64_t good[] = {0, bad + 80, s->loc[k].n_records - 1};
    struct store_io io = {0};
    uint8_t *buf;
    uint64_t blen, got;
    struct shard g;
    struct shard_col cols[SHARD_MAX_COLS];
    CHECK_RC(store_read_partial(s, k, &bad, 1, &io, &buf, &blen, &g, cols, &got), CXLP_ECORRUPT);
    const char *m = cxlp_errmsg(NULL);
    printf("corrupt block: %s\n", m);
    CHECK(strstr(m, "dataset fixed shard 1") && strstr(m, "block 80 ") && strstr(m, nvme_path));
    /* the same record among other shards' in one read: named alike */
    {
        struct shard g3[3];
        struct shard_col c3[3][SHARD_MAX_COLS];
        const uint64_t r0 = 0;
        struct store_part v[3] = {{.k = 0, .rec = &r0, .n = 1, .g = &g3[0], .cols = c3[0]},
                                  {.k = k, .rec = &bad, .n = 1, .g = &g3[1], .cols = c3[1]},
                                  {.k = k + 1, .rec = &r0, .n = 1, .g = &g3[2], .cols = c3[2]}};
        CHECK_RC(store_read_parts(s, v, 3, &io, &got), CXLP_ECORRUPT);
        CHECK(strstr(cxlp_errmsg(NULL), "dataset fixed shard 1 ") &&
              strstr(cxlp_errmsg(NULL), "block 80 "));
        CHECK(v[0].buf == NULL && v[1].buf == NULL && v[2].buf == NULL);
    }
    store_io_close(&io);
    partial_ok(s, 1, k, good, 3);
    partial_ok(s, 1, k + 1, good, 3);
    CHECK_RC(cxlp_store_verify(s), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(s), "shard 1"));
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(p));
    /* through a loader: the epoch fails on that block; every batch before
     * the failure held intact records */
    loader("fixed", 1, 0, 1);
    flip(at, 0x10);
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    /* a wrong sum with the header checksum made right (the data and the
     * column checksums intact): verify and the partial read of that block
     * name it */
    CHECK_OK(cxlp_store_open(p, "fixed", &s));
    uint64_t sum_at = home_off(s, k) + shard_bsum_off(1) + blk * 8;
    uint8_t page[SHARD_DATA_OFF], orig[SHARD_DATA_OFF];
    int fd = open(nvme_path, O_RDWR);
    CHECK(fd >= 0);
    CHECK(pread(fd, orig, sizeof orig, (off_t)home_off(s, k)) == (ssize_t)sizeof orig);
    memcpy(page, orig, sizeof page);
    page[sum_at - home_off(s, k)] ^= 1;
    shard_rehash_page(page);
    CHECK(pwrite(fd, page, sizeof page, (off_t)home_off(s, k)) == (ssize_t)sizeof page);
    CHECK_RC(cxlp_store_verify(s), CXLP_ECORRUPT);
    printf("wrong block sum: %s\n", cxlp_errmsg(s));
    CHECK(strstr(cxlp_errmsg(s), "shard 1") && strstr(cxlp_errmsg(s), "block 80 "));
    CHECK_RC(store_read_partial(s, k, &bad, 1, &io, &buf, &blen, &g, cols, &got), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(NULL), "block 80 "));
    store_io_close(&io);
    partial_ok(s, 1, k, good, 3);
    CHECK(pwrite(fd, orig, sizeof orig, (off_t)home_off(s, k)) == (ssize_t)sizeof orig);
    close(fd);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
}

/* Rewrites every shard of dataset name on the nvme tier as format 2 (as
 * an earlier build wrote it): no block sums; the columns and their
 * checksums are the same bytes. */
static void to_format2(const char *name)
{
    cxlp_pool *p;
    cxlp_store *s;
    open_ds(name, &p, &s);
    for (uint64_t k = 0; k < s->n_shards; k++) {
        uint64_t off = home_off(s, k);
        int fd = open(nvme_path, O_RDWR);
        CHECK(fd >= 0);
        uint8_t page[SHARD_DATA_OFF];
        CHECK(pread(fd, page, sizeof page, (off_t)off) == (ssize_t)sizeof page);
        shard_downgrade(page, SHARD_VERSION_V2);
        CHECK(pwrite(fd, page, sizeof page, (off_t)off) == (ssize_t)sizeof page);
        fsync(fd);
        close(fd);
    }
    const uint64_t k = 1;
    CHECK_OK(cxlp_store_close(s));
    /* a fresh handle: not read in part (1), read whole, verified */
    CHECK_OK(cxlp_store_open(p, name, &s));
    struct store_io io = {0};
    uint8_t *buf;
    uint64_t blen, got;
    struct shard g;
    struct shard_col cols[SHARD_MAX_COLS];
    const uint64_t r0 = 1;
    CHECK(store_read_partial(s, k, &r0, 1, &io, &buf, &blen, &g, cols, &got) == 1);
    CHECK(buf == NULL);
    store_io_close(&io);
    /* what cxlpool stat says of it: format 2, no blocks */
    uint32_t fmt;
    uint64_t block;
    int area;
    CHECK_OK(cxlp_store_format(s, &fmt, &block, &area));
    CHECK(fmt == 2 && block == 0 && area == 0);
    struct cxlp_view v;
    CHECK_OK(cxlp_store_read(s, s->first[k] + 1, &v));
    CHECK(rec_ok(v.data, v.len, 1, seed, s->first[k] + 1));
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_migrate(p, name, "nvme", NULL, NULL)); /* cold again */
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
}

/* One block-order epoch with lookahead while the dram tier has no room
 * for a copy: where a batch would read a private copy of a whole shard, it
 * reads its records' blocks in part (old: format 2, no block sums: a
 * private read of the whole shard, as before). corrupt: a block of shard 1
 * is corrupt: the epoch fails there, naming it, after intact batches. */
static void loader_on(cxlp_pool *p, cxlp_store *s, const char *name, int fixed, int old,
                      int corrupt)
{
    uint64_t n = cxlp_store_count(s);
    struct cxlp_sampler_config cfg = {.kind = CXLP_ORDER_BLOCK, .n = n, .seed = 11,
                                      .shard_size = s->loc[0].n_records, .window = 2, .world = 1};
    struct cxlp_loader_opts o = {.batch_size = 16, .threads = 2,
                                 .tier_policy = CXLP_POLICY_LOOKAHEAD,
                                 .tier_budget = 256 * KiB, .tier_horizon = 4};
    cxlp_sampler *sm;
    cxlp_loader *l;
    CHECK_OK(rec_loader(s, fixed, &cfg, o, &sm, &l));
    uint8_t *seen = calloc(n, 1);
    uint64_t got = 0;
    struct cxlp_batch *b;
    for (;;) {
        int rc = cxlp_loader_next(l, &b);
        if (rc && corrupt) {
            printf("%s: loader stopped after %llu records: %s\n", name, (unsigned long long)got,
                   cxlp_errmsg(l));
            CHECK(rc == CXLP_ECORRUPT && strstr(cxlp_errmsg(l), "shard 1") &&
                  strstr(cxlp_errmsg(l), "block 80 "));
            break;
        }
        if (rc)
            fprintf(stderr, "loader: %s\n", cxlp_errmsg(l));
        CHECK_OK(rc);
        if (!b)
            break;
        uint64_t bad;
        CHECK(rec_batch_ok(b, seen, n, fixed, seed, &bad));
        got += b->rows;
        cxlp_loader_release(l, b);
    }
    CHECK(corrupt ? got < n : got == n);
    struct cxlp_loader_stats st;
    CHECK_OK(cxlp_loader_stats(l, &st));
    printf("%s: lookahead, no room for a copy: %llu records, %llu partial reads, %.1f MiB "
           "read in part, %llu private reads, %llu staged\n", name, (unsigned long long)got,
           (unsigned long long)st.partial_reads, (double)st.partial_bytes / MiB,
           (unsigned long long)st.private_reads, (unsigned long long)(st.prefetched + st.fetched));
    if (old) {
        /* the header of the first shard tried (one per gather thread at
         * most), then whole reads */
        CHECK(st.partial_reads == 0 && st.private_reads >= s->n_shards);
        CHECK(st.partial_bytes > 0 && st.partial_bytes <= o.threads * 64 * KiB);
    } else {
        /* (a last shard smaller than the room left may be staged) */
        CHECK(st.partial_reads > 0 && st.partial_bytes > 0 && st.private_reads == 0);
        if (!corrupt)
            CHECK(st.partial_reads >= s->n_shards - 1 && st.misses + st.hits == n);
    }
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
    if (!corrupt)
        CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
}

static void loader(const char *name, int fixed, int old, int corrupt)
{
    cxlp_pool *p;
    cxlp_store *s;
    open_ds(name, &p, &s);
    loader_on(p, s, name, fixed, old, corrupt);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(p));
}

/* A full shuffle with tier_read_in_part (the Python loader's default for a
 * full shuffle of a dataset larger than the budget), room in the dram
 * tier for one shard: copies made only into the budget's room, none
 * evicted, none fetched for a batch; batches read the other shards'
 * records in part; every record comes once and intact. old (format 2, no
 * block sums): the first batches find it out and read whole, and the
 * engine stages from then on as without the option (the dram tier's 2 MiB
 * hold one shard at a time, so the other shards of a batch are read whole
 * privately). */
static void in_part(const char *name, int fixed, int old)
{
    cxlp_pool *p;
    cxlp_store *s;
    open_ds(name, &p, &s);
    uint64_t n = cxlp_store_count(s);
    struct cxlp_sampler_config cfg = {.kind = CXLP_ORDER_RANDOM, .n = n, .seed = 5, .world = 1};
    struct cxlp_loader_opts o = {.batch_size = 16, .threads = 2,
                                 .tier_policy = CXLP_POLICY_LOOKAHEAD,
                                 .tier_budget = 2 * MiB, .tier_read_in_part = 1};
    cxlp_sampler *sm;
    cxlp_loader *l;
    CHECK_OK(rec_loader(s, fixed, &cfg, o, &sm, &l));
    uint8_t *seen = calloc(n, 1);
    uint64_t got = 0, bad;
    struct cxlp_batch *b;
    while (cxlp_loader_next(l, &b) == 0 && b) {
        CHECK(rec_batch_ok(b, seen, n, fixed, seed, &bad));
        got += b->rows;
        cxlp_loader_release(l, b);
    }
    CHECK(got == n);
    struct cxlp_loader_stats st;
    CHECK_OK(cxlp_loader_stats(l, &st));
    printf("%s: full shuffle, read in part: %llu records, %llu partial reads, %.1f MiB read in "
           "part, %llu private reads, %llu staged, in part at the end: %d\n", name,
           (unsigned long long)got, (unsigned long long)st.partial_reads,
           (double)st.partial_bytes / MiB, (unsigned long long)st.private_reads,
           (unsigned long long)(st.prefetched + st.fetched), st.read_in_part);
    CHECK(st.misses + st.hits == n);
    if (old) {
        CHECK(!st.read_in_part && st.partial_reads == 0 && st.private_reads >= 1);
        CHECK(st.prefetched + st.fetched > 0);
    } else {
        CHECK(st.read_in_part && st.fetched == 0 && st.evictions == 0);
        CHECK(st.bytes_staged <= o.tier_budget);
        CHECK(st.private_reads == 0 && st.misses > n / 2 && st.partial_reads >= n / 16);
    }
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_migrate(p, name, "nvme", NULL, NULL)); /* cold again */
    CHECK_OK(cxlp_pool_close(p));
}

/* Records copied out one at a time (cxlp_store_read_copy, what ds[i]
 * calls) with no room in any memory tier: each read in part from its
 * home copy. Three threads at once (the store keeps one set of readers
 * of the tier's file for one call at a time; a call that finds it in use
 * makes its own): every record right, nothing staged. */
struct copier {
    cxlp_store *s;
    uint64_t first, fails;
};

static void *copy_records(void *arg)
{
    struct copier *c = arg;
    uint64_t n = cxlp_store_count(c->s);
    uint8_t rec[REC_FIXED_SIZE];
    for (uint64_t i = 0; i < 64; i++) {
        uint64_t idx = (c->first + i * 977) % n, len = 0;
        if (cxlp_store_read_copy(c->s, idx, rec, sizeof rec, &len) ||
            !rec_ok(rec, len, 1, seed, idx))
            c->fails++;
    }
    return NULL;
}

static void copies_home(void)
{
    cxlp_pool *p;
    cxlp_store *s;
    open_ds("fixed", &p, &s);
    struct copier c[3];
    pthread_t th[3];
    for (int i = 0; i < 3; i++) {
        c[i] = (struct copier){.s = s, .first = (uint64_t)i * 131};
        CHECK(pthread_create(&th[i], NULL, copy_records, &c[i]) == 0);
    }
    for (int i = 0; i < 3; i++) {
        pthread_join(th[i], NULL);
        CHECK(c[i].fails == 0);
    }
    for (uint64_t k = 0; k < s->n_shards; k++)
        CHECK(!in_memory(s, k));
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(p));
}

/* The format 2 dataset written again in format 4 on this pool of tiers
 * (cxlp_pool_rewrite): the old shards read from their home copies on the
 * nvme tier, the new ones written there. A store opened before still reads format 2,
 * record by record and through a loader, from the old home copies (no copy
 * can be placed for a dataset that is no longer in the catalog). */
static void rewrite_old(void)
{
    cxlp_pool *p;
    cxlp_store *s0, *s1;
    open_ds("old", &p, &s0);
    /* room in the dram tier, so only the dataset's going keeps the loader
     * below from staging */
    CHECK_OK(cxlp_migrate(p, "fill", "nvme", NULL, NULL));
    CHECK_OK(cxlp_pool_rewrite(p, "old", NULL));
    loader_on(p, s0, "old, replaced", 1, 1, 0);
    CHECK_OK(cxlp_store_open(p, "old", &s1));
    /* new shards: only their home copies, and no access counts yet (the
     * old dataset's loader above added to its own) */
    size_t nt;
    uint64_t c1[2];
    CHECK_OK(cxlp_store_copies(s1, c1, 2, &nt));
    CHECK(nt == 2 && c1[0] == 0 && c1[1] == s1->n_shards);
    uint64_t heat0 = 0;
    for (uint64_t k = 0; k < s1->n_shards; k++) {
        CHECK(__atomic_load_n(&s1->states[k * s1->stride], __ATOMIC_RELAXED) == 0);
        heat0 += __atomic_load_n(&s0->states[k * s0->stride], __ATOMIC_RELAXED);
    }
    CHECK(heat0 > 0);
    uint32_t f0, f1;
    uint64_t block;
    CHECK_OK(cxlp_store_format(s0, &f0, NULL, NULL));
    CHECK_OK(cxlp_store_format(s1, &f1, &block, NULL));
    CHECK(f0 == 2 && f1 == 4 && block == 4 * KiB && s1->n_shards == s0->n_shards);
    uint8_t buf[REC_FIXED_SIZE];
    for (uint64_t i = 0; i < cxlp_store_count(s0); i++) {
        uint64_t len;
        CHECK_OK(cxlp_store_read_copy(s1, i, buf, sizeof buf, &len));
        CHECK(rec_ok(buf, len, 1, seed, i));
        CHECK_OK(cxlp_store_read_copy(s0, i, buf, sizeof buf, &len));
        CHECK(rec_ok(buf, len, 1, seed, i));
    }
    for (uint64_t k = 0; k < s1->n_shards; k++)
        CHECK(home_off(s1, k) != home_off(s0, k));
    CHECK_OK(cxlp_store_verify(s1));
    CHECK_OK(cxlp_store_close(s1));
    CHECK_OK(cxlp_store_close(s0));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK(cxlp_migrate(p, "fill", "dram", NULL, NULL) == CXLP_EFULL); /* full again */
    CHECK_OK(cxlp_pool_close(p));
}

int main(void)
{
    snprintf(pool, sizeof pool, "%s", test_name("tierpr"));
    snprintf(nvme_path, sizeof nvme_path, "/tmp/cxlp-%s.tier", pool);
    cxlp_pool *p;
    CHECK_OK(rec_tier_pool(pool, "4M", "96M", 16, &p)); /* its nvme file: nvme_path */
    uint64_t nf, nv;
    CHECK_OK(rec_ingest(p, "fixed", 1, seed, 4 * MiB, SHARD_B, &nf, NULL));
    CHECK_OK(rec_ingest(p, "var", 0, seed, 4 * MiB, SHARD_B, &nv, NULL));
    CHECK_OK(rec_ingest(p, "old", 1, seed, 3 * MiB, SHARD_B, &nv, NULL));
    CHECK_OK(rec_ingest(p, "big", 1, seed, 40 * MiB, 40 * MiB, &nv, NULL));
    CHECK_OK(rec_ingest(p, "fill", 1, seed, 8 * MiB, SHARD_B, &nv, NULL));
    CHECK_OK(cxlp_pool_close(p));
    direct("fixed", 1);
    direct("var", 0);
    several("fixed", 1);
    several("var", 0);
    big();
    in_part("fixed", 1, 0);
    in_part("var", 0, 0);
    to_format2("old");
    in_part("old", 1, 1);
    /* the dram tier full of kept copies (a migration that ran out of
     * room): no miss can make a copy, where a batch read private copies
     * it reads in part */
    CHECK_OK(cxlp_pool_open(pool, NULL, &p));
    CHECK(cxlp_migrate(p, "fill", "dram", NULL, NULL) == CXLP_EFULL);
    CHECK_OK(cxlp_pool_close(p));
    corrupt();
    copies_home();
    loader("fixed", 1, 0, 0);
    loader("var", 0, 0, 0);
    loader("old", 1, 1, 0); /* format 2: private reads of whole shards, as before */
    rewrite_old();
    loader("old", 1, 0, 0); /* now format 4: read in part */
    CHECK_OK(cxlp_pool_destroy(pool));
    printf("ok\n");
    return 0;
}
