/* Shard format over plain memory: fixed and variable round trips (format 1,
 * as earlier builds wrote it, and format 2 with several columns), every
 * delta width, empty records and shards, corruption of each part, and a
 * replay of the fuzz corpus. `test_store_format --write-seeds DIR` writes the fuzz
 * target's seed shards. */
#include <dirent.h>
#include <sys/mman.h>

#include "test.h"
#include <stddef.h>
#include <xxhash.h>

#include "store/shard.h"

static char err[512];
/* column storage of the shards the tests open (s, s2) */
static struct shard_col cols_s[SHARD_MAX_COLS], cols_s2[SHARD_MAX_COLS];
static struct shard s2_unused;

static uint8_t *alloc_buf(uint64_t cap)
{
    uint8_t *b = malloc(cap);
    CHECK(b);
    memset(b, 0xee, cap);
    return b;
}

/* Opens, reads every record, verifies: what the fuzz target does. */
static int scan(const uint8_t *buf, uint64_t len)
{
    struct shard s;
    int rc = shard_open(&s, cols_s, SHARD_MAX_COLS, buf, len, err, sizeof err);
    if (rc)
        return rc;
    for (uint32_t c = 0; c < s.n_cols; c++) {
        const struct shard_col *col = &s.col[c];
        for (uint64_t i = 0; i < s.n_records; i++) {
            const uint8_t *p;
            uint64_t l;
            rc = shard_col_record(col, i, &p, &l);
            if (rc)
                return rc;
            CHECK(p >= col->data && l <= col->data_len && (uint64_t)(p - col->data) <= col->data_len - l);
        }
    }
    rc = shard_verify(&s, err, sizeof err);
    if (!rc)
        rc = shard_verify_sum_pages(&s, 0, shard_sum_pages(&s), err, sizeof err);
    rc = rc || !s.n_bsums ? rc : shard_verify_blocks(&s, 0, s.n_bsums, err, sizeof err);
    return rc;
}

/* A format 2 shard of n records: a fixed int64 column, a variable column
 * of 0..300 bytes per record and a fixed 3-byte column. data[c], starts[c]
 * are what each column holds. */
struct cols3 {
    struct shard_col_in in[3];
    uint8_t *data[3];
    uint64_t *starts;
};

static void cols3_make(struct cols3 *t, uint64_t n, uint64_t *seed)
{
    memset(t, 0, sizeof *t);
    t->starts = malloc((n + 1) * sizeof *t->starts);
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        t->starts[i] = off;
        off += test_rand(seed) % 301;
    }
    t->starts[n] = off;
    uint64_t lens[3] = {8 * n, off, 3 * n};
    for (int c = 0; c < 3; c++) {
        t->data[c] = malloc(lens[c] + 1);
        for (uint64_t i = 0; i < lens[c]; i++)
            t->data[c][i] = (uint8_t)test_rand(seed);
    }
    t->in[0] = (struct shard_col_in){SHARD_KIND_FIXED, 8, 0, lens[0], NULL, NULL};
    t->in[1] = (struct shard_col_in){SHARD_KIND_VAR, 0, 0, lens[1], t->starts, NULL};
    t->in[2] = (struct shard_col_in){SHARD_KIND_FIXED, 3, 0, lens[2], NULL, NULL};
}

static void cols3_free(struct cols3 *t)
{
    for (int c = 0; c < 3; c++)
        free(t->data[c]);
    free(t->starts);
}

static uint8_t *cols3_build_v(struct cols3 *t, uint64_t n, uint64_t *cap, uint64_t *used,
                              uint32_t version)
{
    *cap = shard_cap_for(SHARD_DATA_OFF + t->in[0].data_len + t->in[1].data_len +
                         t->in[2].data_len + 3 * SHARD_COL_ALIGN +
                         shard_index_bound(n, UINT64_MAX) + 64, 3);
    uint8_t *buf = alloc_buf(*cap);
    const void *d[3] = {t->data[0], t->data[1], t->data[2]};
    CHECK_OK(shard_build2(buf, *cap, n, t->in, d, 3, version, used));
    return buf;
}

static uint8_t *cols3_build(struct cols3 *t, uint64_t n, uint64_t *cap, uint64_t *used)
{
    return cols3_build_v(t, n, cap, used, SHARD_VERSION);
}

/* Rewrites the version 2/3/4 header checksum after a test edited the
 * header, the directory or the block sums (page sums), so the check behind
 * it is reached. */
static void rehash2(uint8_t *buf)
{
    struct shard_hdr2 h;
    memcpy(&h, buf, sizeof h);
    uint64_t n = h.n_cols <= SHARD_MAX_COLS ? h.n_cols : SHARD_MAX_COLS;
    uint64_t nb = MIN(shard_head_sums(h.version, h.n_bsums, h.sums_off),
                      shard_bsum_cap((uint32_t)n));
    uint8_t tmp[SHARD_DATA_OFF];
    memcpy(tmp, buf, 120);
    memcpy(tmp + 120, buf + SHARD_HDR_BYTES, n * SHARD_COL_BYTES + nb * 8);
    h.hdr_checksum = XXH3_64bits(tmp, 120 + n * SHARD_COL_BYTES + nb * 8);
    memcpy(buf + 120, &h.hdr_checksum, 8);
}

static void test_columns(uint64_t *seed)
{
    uint64_t n = 1 + test_rand(seed) % 500, cap, used;
    struct cols3 t;
    cols3_make(&t, n, seed);
    uint8_t *buf = cols3_build(&t, n, &cap, &used);
    struct shard s;
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK(s.version == SHARD_VERSION && s.n_cols == 3 && s.n_records == n);
    for (int c = 0; c < 3; c++)
        CHECK((uintptr_t)s.col[c].data % SHARD_COL_ALIGN == (uintptr_t)buf % SHARD_COL_ALIGN);
    for (uint64_t i = 0; i < n; i++) {
        const uint8_t *p;
        uint64_t l;
        CHECK_OK(shard_col_record(&s.col[0], i, &p, &l));
        CHECK(l == 8 && memcmp(p, t.data[0] + 8 * i, 8) == 0);
        CHECK_OK(shard_col_record(&s.col[1], i, &p, &l));
        CHECK(l == t.starts[i + 1] - t.starts[i] && memcmp(p, t.data[1] + t.starts[i], l) == 0);
        CHECK_OK(shard_col_record(&s.col[2], i, &p, &l));
        CHECK(l == 3 && memcmp(p, t.data[2] + 3 * i, 3) == 0);
    }
    CHECK_OK(shard_verify(&s, err, sizeof err));
    /* fewer column slots than the shard has: refused, not overrun */
    CHECK_RC(shard_open(&s2_unused, cols_s2, 2, buf, used, err, sizeof err), CXLP_ECORRUPT);
    /* a byte of column 2: structure fine, that column's checksum not */
    uint64_t at = s.col[2].data_off + test_rand(seed) % s.col[2].data_len;
    buf[at] ^= 0x21;
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK_RC(shard_verify(&s, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "column 2"));
    buf[at] ^= 0x21;
    /* the directory is under the header checksum */
    uint64_t ent1 = SHARD_HDR_BYTES + SHARD_COL_BYTES;
    buf[ent1 + offsetof(struct shard_dirent2, data_len) + 5] ^= 1; /* +2^40 */
    CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "header checksum"));
    /* with the checksum made right, the structure checks refuse it */
    rehash2(buf);
    CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "column 1"));
    buf[ent1 + offsetof(struct shard_dirent2, data_len) + 5] ^= 1; /* +2^40 */
    uint64_t doff;
    memcpy(&doff, buf + ent1 + offsetof(struct shard_dirent2, data_off), 8);
    doff += 8; /* misaligned */
    memcpy(buf + ent1 + offsetof(struct shard_dirent2, data_off), &doff, 8);
    rehash2(buf);
    CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "aligned"));
    doff -= 8;
    memcpy(buf + ent1 + offsetof(struct shard_dirent2, data_off), &doff, 8);
    rehash2(buf);
    CHECK_OK(scan(buf, used));
    /* a column past the bytes the header says the shard uses */
    CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used - 1, err, sizeof err), CXLP_ECORRUPT);
    /* an unknown version: EFORMAT naming both it and what is read */
    uint32_t v9 = 9;
    memcpy(buf + 8, &v9, 4);
    CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_EFORMAT);
    CHECK(strstr(err, "version 9") && strstr(err, "reads 1 to 4"));
    free(buf);
    /* the sealer refuses overlapping columns */
    buf = alloc_buf(cap);
    t.in[0].data_off = SHARD_DATA_OFF;
    t.in[1].data_off = SHARD_DATA_OFF;
    t.in[2].data_off = SHARD_DATA_OFF + ALIGN_UP(t.in[0].data_len + t.in[1].data_len, 64);
    CHECK_RC(shard_seal2(buf, cap, n, t.in, 3, &used), t.in[1].data_len ? CXLP_EARG : 0);
    free(buf);
    cols3_free(&t);
}

static void test_fixed(uint64_t *seed)
{
    uint64_t rs = 1 + test_rand(seed) % 40, n = 1 + test_rand(seed) % 3000;
    uint8_t *ref = malloc(rs * n);
    for (uint64_t i = 0; i < rs * n; i++)
        ref[i] = (uint8_t)test_rand(seed);
    uint64_t cap = shard_extent_need(rs * n, 0), used;
    uint8_t *buf = alloc_buf(cap);
    CHECK_RC(shard_build(buf, cap - 1, SHARD_KIND_FIXED, rs, ref, rs * n, NULL, n, &used), CXLP_EARG);
    CHECK_OK(shard_build(buf, cap, SHARD_KIND_FIXED, rs, ref, rs * n, NULL, n, &used));
    CHECK(used == cap);
    struct shard s;
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK(s.n_records == n && s.col[0].record_size == rs);
    CHECK((uintptr_t)s.col[0].data % 4096 == (uintptr_t)buf % 4096);
    for (int k = 0; k < 5000; k++) {
        uint64_t i = test_rand(seed) % n;
        const uint8_t *p;
        uint64_t l;
        CHECK_OK(shard_record(&s, i, &p, &l));
        CHECK(l == rs && memcmp(p, ref + i * rs, rs) == 0);
    }
    CHECK_OK(shard_verify(&s, err, sizeof err));
    /* one data byte flipped: structure fine, checksum not */
    buf[SHARD_DATA_OFF + test_rand(seed) % (rs * n)] ^= 0x10;
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK_RC(shard_verify(&s, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "checksum mismatch"));
    /* truncated extent */
    CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used - 1, err, sizeof err), CXLP_ECORRUPT);
    free(buf);
    free(ref);
}

/* Variable-size records with lengths drawn from sizes (0 allowed). */
struct var {
    uint8_t *data;
    uint64_t *starts;
    uint64_t n, len;
};

static void var_make(struct var *v, uint64_t n, uint64_t (*size)(uint64_t *, uint64_t),
                     uint64_t *seed)
{
    v->n = n;
    v->starts = malloc((n + 1) * sizeof *v->starts);
    uint64_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        v->starts[i] = off;
        off += size(seed, i);
    }
    v->starts[n] = off;
    v->len = off;
    v->data = malloc(off + 1);
    for (uint64_t i = 0; i < off; i++)
        v->data[i] = (uint8_t)(i * 131 + (i >> 9));
}

static void var_free(struct var *v)
{
    free(v->data);
    free(v->starts);
}

static uint8_t *var_build(const struct var *v, uint64_t *used)
{
    uint64_t cap = shard_extent_need(v->len, shard_index_bound(v->n, v->len));
    uint8_t *buf = alloc_buf(cap);
    CHECK_OK(shard_build(buf, cap, SHARD_KIND_VAR, 0, v->data, v->len, v->starts, v->n, used));
    CHECK(*used <= cap);
    CHECK(*used == shard_extent_need(v->len, shard_index_len(v->starts, v->n)));
    return buf;
}

static void var_check_all(const struct var *v, const struct shard *s)
{
    CHECK(s->n_records == v->n && s->col[0].data_len == v->len);
    for (uint64_t i = 0; i < v->n; i++) {
        const uint8_t *p;
        uint64_t l;
        CHECK_OK(shard_record(s, i, &p, &l));
        CHECK(l == v->starts[i + 1] - v->starts[i]);
        CHECK(p == s->col[0].data + v->starts[i]);
        CHECK(l == 0 || memcmp(p, v->data + v->starts[i], l) == 0);
    }
}

static unsigned block_width(const struct shard *s, uint64_t b)
{
    uint64_t pw;
    memcpy(&pw, s->col[0].index + b * SHARD_DIRENT_BYTES + 8, 8);
    return (unsigned)(pw >> 56);
}

static uint64_t size_random(uint64_t *seed, uint64_t i)
{
    (void)i;
    uint64_t r = test_rand(seed) % 100;
    return r < 10 ? 0 : r < 90 ? test_rand(seed) % 64 : test_rand(seed) % 5000;
}

/* block 0: tiny (width 1); block 1: one 300-byte record (width 2);
 * block 2: one 70000-byte record (width 4); block 3: empty records only */
static uint64_t size_widths(uint64_t *seed, uint64_t i)
{
    (void)seed;
    if (i == 64 + 5)
        return 300;
    if (i == 128 + 7)
        return 70000;
    if (i >= 192)
        return 0;
    return 3;
}

static void test_var(uint64_t *seed)
{
    struct var v;
    struct shard s;
    uint64_t used;

    var_make(&v, 1 + test_rand(seed) % 5000, size_random, seed);
    uint8_t *buf = var_build(&v, &used);
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    var_check_all(&v, &s);
    for (int k = 0; k < 20000; k++) {
        uint64_t i = test_rand(seed) % v.n;
        const uint8_t *p;
        uint64_t l;
        CHECK_OK(shard_record(&s, i, &p, &l));
        CHECK(l == v.starts[i + 1] - v.starts[i] && p == s.col[0].data + v.starts[i]);
    }
    CHECK_OK(shard_verify(&s, err, sizeof err));

    /* an index byte changed: the checksum covers the index too */
    uint8_t *ix = buf + s.col[0].index_off;
    uint64_t last_delta = s.col[0].index_len - 1;
    ix[last_delta] ^= 1;
    CHECK_RC(shard_verify(&s, err, sizeof err), CXLP_ECORRUPT);
    ix[last_delta] ^= 1;

    /* a directory entry pointing outside the index: refused at open, and on
     * read when it changes after open */
    uint64_t pw;
    memcpy(&pw, ix + 8, 8);
    uint64_t bad = (pw & ~SHARD_POS_MASK) | (s.col[0].index_len + 1000);
    memcpy(ix + 8, &bad, 8);
    struct shard s2;
    CHECK_RC(shard_open(&s2, cols_s2, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "index block 0"));
    const uint8_t *p;
    uint64_t l;
    CHECK_RC(shard_record(&s, 0, &p, &l), CXLP_ECORRUPT);
    shard_explain(&s, 0, 0, err, sizeof err);
    CHECK(strstr(err, "index block 0") && strstr(err, "out of bounds"));
    /* width 3 is not a width */
    bad = (pw & SHARD_POS_MASK) | ((uint64_t)3 << 56);
    memcpy(ix + 8, &bad, 8);
    CHECK_RC(shard_open(&s2, cols_s2, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
    memcpy(ix + 8, &pw, 8);
    CHECK_OK(shard_open(&s2, cols_s2, SHARD_MAX_COLS, buf, used, err, sizeof err));
    /* an anchor past the data */
    uint64_t anchor, big = v.len + 1;
    memcpy(&anchor, ix, 8);
    memcpy(ix, &big, 8);
    CHECK_RC(shard_open(&s2, cols_s2, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
    memcpy(ix, &anchor, 8);
    /* a delta making a record end before it starts (or past the data) */
    if (v.n >= 2 && block_width(&s, 0) == 1) {
        uint64_t pos = pw & SHARD_POS_MASK;
        uint8_t old = ix[pos + 1];
        ix[pos + 1] = 0xff;
        /* start(1) = 255: record 0 then ends past a short data area */
        int rc0 = shard_record(&s, 0, &p, &l);
        if (v.len < 255)
            CHECK(rc0 == CXLP_ECORRUPT);
        else
            CHECK(rc0 == 0 && l == 255);
        ix[pos + 1] = old;
    }
    CHECK_OK(shard_verify(&s, err, sizeof err));

    /* header damage */
    uint8_t keep[SHARD_HDR_BYTES];
    memcpy(keep, buf, sizeof keep);
    buf[offsetof(struct shard_hdr, n_records)] ^= 1;
    CHECK_RC(shard_open(&s2, cols_s2, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "header checksum"));
    memcpy(buf, keep, sizeof keep);
    buf[0] = 'X';
    CHECK_RC(shard_open(&s2, cols_s2, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_EFORMAT);
    memcpy(buf, keep, sizeof keep);
    buf[offsetof(struct shard_hdr, layout)] ^= 1;
    CHECK_RC(shard_open(&s2, cols_s2, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ELAYOUT);
    memcpy(buf, keep, sizeof keep);
    buf[offsetof(struct shard_hdr, version)] = 9;
    CHECK_RC(shard_open(&s2, cols_s2, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_EFORMAT);
    memcpy(buf, keep, sizeof keep);
    CHECK_OK(scan(buf, used));
    /* every truncation of the extent is refused at open */
    for (uint64_t cut = 0; cut < used; cut += 1 + used / 50)
        CHECK(shard_open(&s2, cols_s2, SHARD_MAX_COLS, buf, cut, err, sizeof err) < 0);
    free(buf);
    var_free(&v);

    /* widths 1, 2, 4 and empty records */
    var_make(&v, 256, size_widths, seed);
    buf = var_build(&v, &used);
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK(s.col[0].n_blocks == 4);
    CHECK(block_width(&s, 0) == 1 && block_width(&s, 1) == 2 && block_width(&s, 2) == 4);
    CHECK(block_width(&s, 3) == 1);
    var_check_all(&v, &s);
    CHECK_OK(shard_verify(&s, err, sizeof err));
    free(buf);
    var_free(&v);
}

/* Width 8 needs a block spanning more than 4 GiB of data: a sparse anonymous
 * mapping (untouched pages read as zero and cost no memory). */
static void test_width8(void)
{
    uint64_t big = (UINT64_C(1) << 32) + 5;
    uint64_t starts[3] = {0, 10, 10 + big};
    uint64_t data_len = 10 + big + 3;
    /* and the sums area: 128 Ki + 1 blocks of 32 KiB */
    uint64_t cap = shard_cap_for(shard_extent_need(data_len, shard_index_len(starts, 3)), 1);
    uint8_t *buf = mmap(NULL, cap, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (buf == MAP_FAILED)
        SKIP("cannot map %" PRIu64 " bytes", cap);
    memcpy(buf + SHARD_DATA_OFF, "0123456789", 10);
    buf[SHARD_DATA_OFF + 10 + big - 1] = 'Z';
    memcpy(buf + SHARD_DATA_OFF + 10 + big, "abc", 3);
    uint64_t used;
    struct shard_col_in col = {SHARD_KIND_VAR, 0, SHARD_DATA_OFF, data_len, starts, NULL};
    CHECK_OK(shard_seal2(buf, cap, 3, &col, 1, &used));
    struct shard s;
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK(block_width(&s, 0) == 8);
    CHECK(s.bsum_shift == 15 && s.sums_off && s.n_bsums == (1u << 17) + 1 && shard_sum_pages(&s) == 257);
    const uint8_t *p;
    uint64_t l;
    CHECK_OK(shard_record(&s, 0, &p, &l));
    CHECK(l == 10 && memcmp(p, "0123456789", 10) == 0);
    CHECK_OK(shard_record(&s, 1, &p, &l));
    CHECK(l == big && p[big - 1] == 'Z');
    CHECK_OK(shard_record(&s, 2, &p, &l));
    CHECK(l == 3 && memcmp(p, "abc", 3) == 0);
    munmap(buf, cap);
}

static void test_empty(void)
{
    uint64_t used;
    uint8_t *buf = alloc_buf(SHARD_DATA_OFF);
    struct shard s;
    CHECK_OK(shard_build(buf, SHARD_DATA_OFF, SHARD_KIND_VAR, 0, NULL, 0, NULL, 0, &used));
    CHECK(used == SHARD_DATA_OFF);
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK(s.n_records == 0 && s.col[0].data_len == 0);
    CHECK_OK(shard_verify(&s, err, sizeof err));
    CHECK_OK(shard_build(buf, SHARD_DATA_OFF, SHARD_KIND_FIXED, 8, NULL, 0, NULL, 0, &used));
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK(s.n_records == 0);
    /* all records empty */
    uint64_t starts[100] = {0};
    CHECK_RC(shard_build(buf, SHARD_DATA_OFF, SHARD_KIND_VAR, 0, NULL, 0, starts, 100, &used), CXLP_EARG);
    free(buf);
    buf = alloc_buf(8192);
    CHECK_OK(shard_build(buf, 8192, SHARD_KIND_VAR, 0, NULL, 0, starts, 100, &used));
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    for (uint64_t i = 0; i < 100; i++) {
        const uint8_t *p;
        uint64_t l;
        CHECK_OK(shard_record(&s, i, &p, &l));
        CHECK(l == 0);
    }
    /* inconsistent encoder input is refused */
    uint64_t desc[2] = {5, 2};
    CHECK_RC(shard_build(buf, SHARD_DATA_OFF, SHARD_KIND_VAR, 0, "abcdef", 6, desc, 2, &used), CXLP_EARG);
    CHECK_RC(shard_build(buf, SHARD_DATA_OFF, SHARD_KIND_FIXED, 0, NULL, 0, NULL, 0, &used), CXLP_EARG);
    CHECK_RC(shard_build(buf, SHARD_DATA_OFF, SHARD_KIND_FIXED, 4, "abcdef", 6, NULL, 2, &used), CXLP_EARG);
    free(buf);
}

/* A version 3 shard of one fixed column of 8-byte records over about four
 * 64 KiB blocks: record i holds i. */
#define BLK_RECS (3 * 8192 + 100)
static uint8_t *v3_blocks_build(uint64_t *used)
{
    uint64_t cap = SHARD_DATA_OFF + BLK_RECS * 8 + 64;
    uint64_t *d = malloc(BLK_RECS * 8);
    CHECK(d);
    for (uint64_t i = 0; i < BLK_RECS; i++)
        d[i] = i;
    uint8_t *buf = alloc_buf(cap);
    struct shard_col_in in = {SHARD_KIND_FIXED, 8, 0, BLK_RECS * 8, NULL, NULL};
    const void *dp[1] = {d};
    CHECK_OK(shard_build2(buf, cap, BLK_RECS, &in, dp, 1, SHARD_VERSION_V3, used));
    free(d);
    return buf;
}

/* Version 3's block sums: one per 64 KiB of the shard, a corrupt block
 * named, every field of the table bounds-checked, the block grown when the
 * sums would not fit the header page; version 2 still read and verified. */
static void test_blocks(void)
{
    uint64_t used;
    uint8_t *buf = v3_blocks_build(&used);
    struct shard s;
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK(s.version == 3 && s.bsum_shift == 16 && s.n_bsums == (used + 65535) / 65536);
    CHECK(s.n_bsums == 4 && s.used == used);
    CHECK_OK(shard_verify(&s, err, sizeof err));
    CHECK_OK(shard_verify_blocks(&s, 0, s.n_bsums, err, sizeof err));
    uint64_t lo, hi;
    shard_block_span(&s, 0, &lo, &hi);
    CHECK(lo == SHARD_DATA_OFF && hi == 65536);
    shard_block_span(&s, 3, &lo, &hi);
    CHECK(lo == 3 * 65536 && hi == used);
    /* one byte of block 2: that block fails, named; the others pass */
    buf[2 * 65536 + 77] ^= 4;
    CHECK_RC(shard_verify_blocks(&s, 2, 1, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "block 2 ") && strstr(err, "[131072, 196608)"));
    CHECK_OK(shard_verify_blocks(&s, 0, 2, err, sizeof err));
    CHECK_OK(shard_verify_blocks(&s, 3, 1, err, sizeof err));
    CHECK_RC(shard_verify(&s, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "column 0"));
    buf[2 * 65536 + 77] ^= 4;
    /* the sums are under the header checksum */
    uint64_t so = shard_bsum_off(1);
    buf[so + 8 + 3] ^= 1;
    CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "header checksum") && strstr(err, "4 block sums"));
    rehash2(buf); /* a wrong sum with a right header: the block fails */
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK_RC(shard_verify_blocks(&s, 1, 1, err, sizeof err), CXLP_ECORRUPT);
    buf[so + 8 + 3] ^= 1;
    rehash2(buf);
    /* each header field of the table, with the checksum made right */
    struct shard_hdr2 h0, h;
    memcpy(&h0, buf, sizeof h0);
    CHECK(h0.bsum_shift == 16 && h0.n_bsums == 4);
    const uint32_t bad[][2] = {{0, 4}, {15, 4}, {41, 4}, {17, 4}, {16, 0}, {16, 3}, {16, 5},
                               {16, (uint32_t)shard_bsum_cap(1) + 1}, {16, UINT32_MAX}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        h = h0;
        h.bsum_shift = bad[k][0];
        h.n_bsums = bad[k][1];
        memcpy(buf, &h, sizeof h);
        rehash2(buf);
        CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
        CHECK(strstr(err, "block sums"));
    }
    /* a version 2 header may not carry them */
    h = h0;
    h.version = SHARD_VERSION_V2;
    memcpy(buf, &h, sizeof h);
    rehash2(buf);
    CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ELAYOUT);
    memcpy(buf, &h0, sizeof h0);
    CHECK_OK(scan(buf, used));
    free(buf);

    /* more blocks of 64 KiB than the header page holds: 128 KiB blocks */
    uint64_t big = 64 * 65536 * 8, cap = SHARD_DATA_OFF + big + 64;
    uint8_t *d = malloc(big);
    CHECK(d);
    for (uint64_t i = 0; i < big; i++)
        d[i] = (uint8_t)(i * 7);
    buf = alloc_buf(cap);
    struct shard_col_in in = {SHARD_KIND_FIXED, 64, 0, big, NULL, NULL};
    const void *dp[1] = {d};
    CHECK_OK(shard_build2(buf, cap, big / 64, &in, dp, 1, SHARD_VERSION_V3, &used));
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK(s.bsum_shift == 17 && s.n_bsums <= shard_bsum_cap(1) &&
          (uint64_t)s.n_bsums << 17 >= used);
    CHECK_OK(shard_verify(&s, err, sizeof err));
    CHECK_OK(shard_verify_blocks(&s, 0, s.n_bsums, err, sizeof err));
    /* version 2, as earlier builds wrote it: no sums, reads and verifies */
    CHECK_OK(shard_build2(buf, cap, big / 64, &in, dp, 1, SHARD_VERSION_V2, &used));
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK(s.version == 2 && s.n_bsums == 0 && s.bsum_shift == 0);
    CHECK_OK(shard_verify(&s, err, sizeof err));
    buf[SHARD_DATA_OFF + 12345] ^= 1;
    CHECK_RC(shard_verify(&s, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "column 0"));
    free(buf);
    free(d);
}

/* Version 4: 4 KiB blocks, their sums in a sums area once they do not fit
 * the header page (pages of 512 sums, each under a page sum there); a
 * corrupt page or block named, every field of the area bounds-checked;
 * a small shard built with an area on purpose reads the same. */
static void test_sums_area(void)
{
    const uint64_t n = 4 * 65536 + 77; /* 8-byte records: 2 MiB + 616 bytes */
    uint64_t *d = malloc(n * 8), used;
    CHECK(d);
    for (uint64_t i = 0; i < n; i++)
        d[i] = i * 0x9e3779b97f4a7c15u;
    uint64_t cap = shard_cap_for(SHARD_DATA_OFF + n * 8, 1);
    CHECK(shard_room(cap, 1) >= SHARD_DATA_OFF + n * 8 && cap > SHARD_DATA_OFF + n * 8);
    uint8_t *buf = alloc_buf(cap);
    struct shard_col_in in = {SHARD_KIND_FIXED, 8, 0, n * 8, NULL, NULL};
    const void *dp[1] = {d};
    CHECK_OK(shard_build2(buf, cap, n, &in, dp, 1, SHARD_VERSION, &used));
    struct shard s;
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    uint64_t bend = ALIGN_UP(SHARD_DATA_OFF + n * 8, SHARD_SUMS_PAGE);
    CHECK(s.version == 4 && s.bsum_shift == 12 && s.sums_off == bend && s.bend == bend);
    CHECK(s.n_bsums == bend / 4096 && used == bend + 8 * s.n_bsums && used <= cap);
    CHECK(shard_sum_pages(&s) == 2); /* 514 sums: a page of 512 and one of 2 */
    CHECK_OK(scan(buf, used));
    uint64_t lo, hi;
    shard_block_span(&s, s.n_bsums - 1, &lo, &hi);
    CHECK(hi == bend && lo == bend - 4096);
    shard_block_span(&s, 0, &lo, &hi);
    CHECK(lo == hi); /* block 0 is the header page: covers nothing */
    /* a byte of the second page of sums: that page fails, named */
    buf[bend + 512 * 8 + 3] ^= 2;
    CHECK_OK(shard_verify_sum_pages(&s, 0, 1, err, sizeof err));
    CHECK_RC(shard_verify_sum_pages(&s, 1, 1, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "page 1 of the block sums"));
    buf[bend + 512 * 8 + 3] ^= 2;
    /* a byte of a block: its sum names it */
    buf[300 * 4096 + 5] ^= 1;
    CHECK_RC(shard_verify_blocks(&s, 300, 1, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "block 300 "));
    CHECK_OK(shard_verify_blocks(&s, 299, 1, err, sizeof err));
    buf[300 * 4096 + 5] ^= 1;
    /* the page sums are under the header checksum */
    buf[shard_bsum_off(1) + 8] ^= 1;
    CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "header checksum") && strstr(err, "2 page sums"));
    buf[shard_bsum_off(1) + 8] ^= 1;
    /* each field of the area, with the checksum made right */
    struct shard_hdr2 h0, h;
    memcpy(&h0, buf, sizeof h0);
    struct { uint64_t sums_off, used; uint32_t shift, n; const char *what; } bad[] = {
        {bend + 8, used + 8, 12, h0.n_bsums, "sums area"},      /* not page aligned */
        {bend, used, 12, h0.n_bsums + 1, "sums area"},          /* more sums than room */
        {bend - 4096, used - 4096, 12, h0.n_bsums, "cover"},    /* blocks past the area */
        {bend, used, 13, h0.n_bsums, "cover"},
        {bend, used, 11, h0.n_bsums, "block sums"},              /* below 4 KiB */
        {0, used, 12, h0.n_bsums, "block sums"},                 /* 514 do not fit the page */
        {2048, used, 12, h0.n_bsums, "sums area"},               /* inside the header page */
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        h = h0;
        h.sums_off = bad[k].sums_off;
        h.used = bad[k].used;
        h.bsum_shift = bad[k].shift;
        h.n_bsums = bad[k].n;
        memcpy(buf, &h, sizeof h);
        rehash2(buf);
        CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, cap, err, sizeof err), CXLP_ECORRUPT);
        if (!strstr(err, bad[k].what))
            fprintf(stderr, "case %zu: %s\n", k, err);
        CHECK(strstr(err, bad[k].what));
    }
    /* a version 3 header may not name an area */
    h = h0;
    h.version = SHARD_VERSION_V3;
    h.layout = shard_layout_of(SHARD_VERSION_V3);
    memcpy(buf, &h, sizeof h);
    rehash2(buf);
    CHECK_RC(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err), CXLP_ECORRUPT);
    CHECK(strstr(err, "version 3 shard with a sums area"));
    memcpy(buf, &h0, sizeof h0);
    CHECK_OK(scan(buf, used));
    /* the same records as version 3: 64 KiB blocks in the header page */
    uint64_t used3;
    CHECK_OK(shard_build2(buf, cap, n, &in, dp, 1, SHARD_VERSION_V3, &used3));
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used3, err, sizeof err));
    CHECK(s.version == 3 && s.bsum_shift == 16 && s.sums_off == 0 && used3 < used);
    CHECK_OK(scan(buf, used3));
    free(buf);
    /* a small shard with an area on purpose (fuzz seeds): one page */
    buf = alloc_buf(3 * 4096 + 64 * 8 + 64);
    in.data_len = 64 * 8;
    CHECK_OK(shard_build2(buf, 3 * 4096 + 64 * 8 + 64, 64, &in, dp, 1, SHARD_BUILD_V4_AREA,
                         &used));
    CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, buf, used, err, sizeof err));
    CHECK(s.version == 4 && s.sums_off == 8192 && s.n_bsums == 2 && used == 8192 + 16);
    CHECK(shard_sum_pages(&s) == 1);
    CHECK_OK(scan(buf, used));
    free(buf);
    free(d);
}

/* The room the writer leaves for a sums area is enough wherever a shard
 * ends, up to its extent: the block size sealing picks from where the
 * blocks end (shard_bsum_shift_for) may be smaller than the extent's, with
 * more sums. Checked by arithmetic around the sizes where the block grows
 * (976 MiB, 1952 MiB: 488 pages of 512 sums of one column), no buffer. */
static void test_room(void)
{
    const uint64_t grow = (uint64_t)shard_bsum_cap(1) * SHARD_PAGE_SUMS << 12;
    const uint64_t ends[] = {SHARD_DATA_OFF, 1 << 20, 2 << 20, 64 << 20, 256ull << 20,
                             grow - 8192, grow - 4096, grow - 8, grow, grow + 8, grow + 4096,
                             2 * grow - 4096, 2 * grow, 2 * grow + 4096, 7 * grow + 12345};
    for (size_t i = 0; i < sizeof ends / sizeof ends[0]; i++) {
        uint64_t cap = shard_cap_for(ends[i], 1);
        CHECK(shard_room(cap, 1) >= ends[i]);
        for (uint64_t end = ends[i] > 8192 ? ends[i] - 8192 : SHARD_DATA_OFF;
             end <= shard_room(cap, 1); end += 4093) {
            /* what seal does with a shard whose data and indexes end at end */
            uint64_t inline_n = (end - 1) / 4096 + 1;
            if (inline_n <= shard_bsum_cap(1))
                continue; /* the sums in the header page */
            uint64_t bend = ALIGN_UP(end, SHARD_SUMS_PAGE);
            uint32_t shift = shard_bsum_shift_for(bend, 1);
            uint64_t n = ((bend - 1) >> shift) + 1;
            CHECK(shard_pages_for(n) <= shard_bsum_cap(1));
            CHECK(bend + 8 * n <= cap);
        }
    }
    CHECK(shard_bsum_shift_for(grow, 1) == 12 && shard_bsum_shift_for(grow + 4096, 1) == 13);
}

/* Block sums taken as the bytes land (shard_bsums, what the writer does)
 * seal the same shard, byte for byte, as sums taken at seal: fed in pieces
 * of any size up to any point, at the block size of the exact extent and of
 * one twice as large, for a shard whose sums fit the header page and one
 * with a sums area. (A larger block size than the shard ends with, taken
 * again at seal, needs extents past 976 MiB in version 4.) */
static void test_bsums_streamed(uint64_t *seed)
{
    const uint64_t ns[] = {2000, 230000};
    for (size_t k = 0; k < sizeof ns / sizeof ns[0]; k++) {
        struct cols3 t;
        uint64_t n = ns[k], cap, used;
        cols3_make(&t, n, seed);
        uint8_t *ref = cols3_build(&t, n, &cap, &used);
        XXH3_state_t *st = XXH3_createState();
        CHECK(st);
        for (uint64_t mult = 1; mult <= 2; mult++) {
            uint64_t bcap = cap * mult, bused;
            uint8_t *buf = alloc_buf(bcap);
            for (int c = 0; c < 3; c++)
                memcpy(buf + t.in[c].data_off, t.data[c], t.in[c].data_len);
            struct shard_bsums *bs = calloc(1, sizeof *bs);
            CHECK(bs);
            CHECK_OK(shard_bsums_begin(bs, st, bcap, 3));
            CHECK(bs->shift == shard_bsum_shift_for(bcap, 3));
            uint64_t stop = t.in[1].data_off + test_rand(seed) % (t.in[1].data_len + 1);
            for (uint64_t at = SHARD_DATA_OFF; at < stop;) {
                /* drawn outside MIN: the macro evaluates its arguments twice */
                uint64_t step = 1 + test_rand(seed) % 200000;
                at = MIN(stop, at + step);
                shard_bsums_update(bs, buf, at);
                CHECK(bs->at == at);
            }
            CHECK_OK(shard_seal2_sums(buf, bcap, n, t.in, 3, bs, &bused));
            CHECK(bused == used && memcmp(buf, ref, used) == 0);
            shard_bsums_free(bs);
            free(bs);
            free(buf);
        }
        struct shard s;
        CHECK_OK(shard_open(&s, cols_s, SHARD_MAX_COLS, ref, used, err, sizeof err));
        /* 4 KiB blocks both: the small one's sums in the header page, the
         * large one's (36 MB: 9,000 blocks) in a sums area */
        CHECK(s.bsum_shift == SHARD_BSUM_SHIFT4 && s.version == SHARD_VERSION);
        CHECK(k ? s.sums_off == s.bend && shard_sum_pages(&s) > 1 : s.sums_off == 0);
        CHECK_OK(scan(ref, used));
        XXH3_freeState(st);
        free(ref);
        cols3_free(&t);
    }
}

static void write_file(const char *dir, const char *name, const uint8_t *b, uint64_t n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f && fwrite(b, 1, n, f) == n && fclose(f) == 0);
}

/* Seeds for fuzz_shard: small valid shards of each kind. The data offset is
 * one page, so seeds are ~4 KiB plus a little. */
static int write_seeds(const char *dir)
{
    uint64_t seed = 1, used;
    struct var v;
    var_make(&v, 70, size_random, &seed);
    uint8_t *buf = var_build(&v, &used);
    write_file(dir, "var-70-random", buf, used);
    free(buf);
    var_free(&v);
    var_make(&v, 130, size_widths, &seed);
    buf = var_build(&v, &used);
    write_file(dir, "var-130-widths", buf, used);
    free(buf);
    var_free(&v);
    uint8_t recs[96];
    for (int i = 0; i < 96; i++)
        recs[i] = (uint8_t)i;
    buf = alloc_buf(8192);
    CHECK_OK(shard_build(buf, 8192, SHARD_KIND_FIXED, 12, recs, 96, NULL, 8, &used));
    write_file(dir, "fixed-8x12", buf, used);
    CHECK_OK(shard_build(buf, 8192, SHARD_KIND_VAR, 0, NULL, 0, NULL, 0, &used));
    write_file(dir, "var-empty", buf, used);
    free(buf);
    /* format 2 */
    struct cols3 t;
    uint64_t cap;
    cols3_make(&t, 90, &seed);
    buf = cols3_build_v(&t, 90, &cap, &used, SHARD_VERSION_V2);
    write_file(dir, "cols-3-mixed", buf, used);
    free(buf);
    cols3_free(&t);
    struct shard_col_in one = {SHARD_KIND_VAR, 0, 0, 96, v.starts, NULL};
    uint64_t starts[8] = {0, 0, 5, 17, 17, 40, 80, 95};
    one.starts = starts;
    const void *d[1] = {recs};
    buf = alloc_buf(8192);
    CHECK_OK(shard_build2(buf, 8192, 8, &one, d, 1, SHARD_VERSION_V2, &used));
    write_file(dir, "cols-1-var", buf, used);
    /* format 3 as earlier builds wrote it, format 4: the same shards with
     * block sums, and one of several blocks */
    CHECK_OK(shard_build2(buf, 8192, 8, &one, d, 1, SHARD_VERSION_V3, &used));
    write_file(dir, "v3-cols-1-var", buf, used);
    CHECK_OK(shard_build2(buf, 8192, 8, &one, d, 1, SHARD_VERSION, &used));
    write_file(dir, "v4-cols-1-var", buf, used);
    free(buf);
    cols3_make(&t, 90, &seed);
    buf = cols3_build_v(&t, 90, &cap, &used, SHARD_VERSION_V3);
    write_file(dir, "v3-cols-3-mixed", buf, used);
    free(buf);
    buf = cols3_build(&t, 90, &cap, &used);
    write_file(dir, "v4-cols-3-mixed", buf, used);
    free(buf);
    cols3_free(&t);
    buf = v3_blocks_build(&used);
    write_file(dir, "v3-blocks-4", buf, used);
    free(buf);
    /* format 4 with a sums area (small: built so on purpose) */
    buf = alloc_buf(3 * 4096 + 96);
    one.starts = starts;
    CHECK_OK(shard_build2(buf, 3 * 4096 + 96, 8, &one, d, 1, SHARD_BUILD_V4_AREA, &used));
    write_file(dir, "v4-area-1-var", buf, used);
    free(buf);
    return 0;
}

/* Every committed seed still scans clean; other corpus entries (findings
 * kept as regressions) must scan without crashing. */
static void replay_corpus(void)
{
    const char *td = getenv("CXLP_TEST_DATA");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/../../fuzz/corpus/fuzz_shard", td ? td : "tests/data");
    DIR *d = opendir(dir);
    if (!d) {
        printf("no corpus at %s\n", dir);
        return;
    }
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        CHECK(f);
        fseek(f, 0, SEEK_END);
        long len = ftell(f);
        fseek(f, 0, SEEK_SET);
        uint8_t *b = malloc(len > 0 ? (size_t)len : 1);
        CHECK(fread(b, 1, (size_t)len, f) == (size_t)len);
        fclose(f);
        int rc = scan(b, (uint64_t)len);
        if (strncmp(e->d_name, "var-", 4) == 0 || strncmp(e->d_name, "fixed-", 6) == 0 ||
            strncmp(e->d_name, "cols-", 5) == 0 || strncmp(e->d_name, "v3-", 3) == 0)
            CHECK_OK(rc);
        free(b);
        n++;
    }
    closedir(d);
    printf("replayed %d corpus files\n", n);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
        return write_seeds(argv[2]);
    uint64_t seed = test_seed();
    for (int k = 0; k < 20; k++) {
        test_fixed(&seed);
        test_var(&seed);
        test_columns(&seed);
    }
    test_empty();
    test_width8();
    test_blocks();
    test_sums_area();
    test_room();
    test_bsums_streamed(&seed);
    replay_corpus();
    printf("ok\n");
    return 0;
}
