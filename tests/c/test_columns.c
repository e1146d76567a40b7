/* Multi-field records through the public API on a real shm pool: a schema
 * of a token sequence, a label, a caption and image bytes written
 * column-wise in batches of random size over many small shards; every field
 * of every record read back alone; bad batches refused (offsets, UTF-8)
 * with the writer still usable; one column damaged leaves the others
 * readable and verify names the column; the gather engine collating chosen
 * fields (STACK, PAD, PACK); datasets concatenated in one catalog flip; and
 * a format 1 dataset (rows of several fields, as earlier builds wrote them)
 * still read. */
#include "test.h"
#include "pool/pool.h"
#include "store/shard.h"
#include "store/store.h"

#define N 3000

/* record i: tokens int32 [i % 97 elements] = i*1000+j; label int64 = i*7-3;
 * caption str "r<i>:é" repeated; image uint8 [i % 13 * 11] = (i+j)&0xff */
static uint64_t ntok(uint64_t i) { return i % 97; }
static uint64_t nimg(uint64_t i) { return i % 13 * 11; }
static int cap_of(uint64_t i, char *out)
{
    int n = 0;
    for (uint64_t r = 0; r <= i % 4; r++)
        n += sprintf(out + n, "r%llu:\xc3\xa9", (unsigned long long)i);
    return n;
}

static struct cxlp_schema four_fields(void)
{
    struct cxlp_schema s;
    memset(&s, 0, sizeof s);
    s.n_fields = 4;
    const char *names[4] = {"tokens", "label", "caption", "image"};
    int dts[4] = {CXLP_DT_I32, CXLP_DT_I64, CXLP_DT_STR, CXLP_DT_U8};
    for (int k = 0; k < 4; k++) {
        strcpy(s.fields[k].name, names[k]);
        s.fields[k].dtype = dts[k];
        s.fields[k].ndim = k == 1 ? 0 : 1; /* shape[0] == 0: variable length */
    }
    return s;
}

/* records [a, b) as columns; the caller frees the buffers */
struct batch {
    int32_t *tok;
    int64_t *lab;
    char *cap;
    uint8_t *img;
    int64_t *o_tok, *o_cap, *o_img;
    struct cxlp_column cols[4];
};

static void batch_make(struct batch *b, uint64_t a, uint64_t e, int64_t skew)
{
    uint64_t n = e - a, nt = 0, nc = 0, ni = 0;
    char tmp[256];
    for (uint64_t i = a; i < e; i++) {
        nt += ntok(i);
        nc += (uint64_t)cap_of(i, tmp);
        ni += nimg(i);
    }
    /* skew: offsets start past a prefix of junk, as an Arrow slice does */
    b->tok = malloc((nt + skew) * 4 + 4);
    b->lab = malloc(n * 8 + 8);
    b->cap = malloc(nc + skew + 1);
    b->img = malloc(ni + skew + 1);
    b->o_tok = malloc((n + 1) * 8);
    b->o_cap = malloc((n + 1) * 8);
    b->o_img = malloc((n + 1) * 8);
    int64_t t = skew, c = skew, m = skew;
    for (uint64_t i = a; i < e; i++) {
        uint64_t r = i - a;
        b->o_tok[r] = t;
        b->o_cap[r] = c;
        b->o_img[r] = m;
        for (uint64_t j = 0; j < ntok(i); j++)
            b->tok[t++] = (int32_t)(i * 1000 + j);
        b->lab[r] = (int64_t)i * 7 - 3;
        c += cap_of(i, b->cap + c);
        for (uint64_t j = 0; j < nimg(i); j++)
            b->img[m++] = (uint8_t)(i + j);
    }
    b->o_tok[n] = t;
    b->o_cap[n] = c;
    b->o_img[n] = m;
    b->cols[0] = (struct cxlp_column){b->tok, (uint64_t)t * 4, b->o_tok};
    b->cols[1] = (struct cxlp_column){b->lab, n * 8, NULL};
    b->cols[2] = (struct cxlp_column){b->cap, (uint64_t)c, b->o_cap};
    b->cols[3] = (struct cxlp_column){b->img, (uint64_t)m, b->o_img};
}

static void batch_free(struct batch *b)
{
    free(b->tok);
    free(b->lab);
    free(b->cap);
    free(b->img);
    free(b->o_tok);
    free(b->o_cap);
    free(b->o_img);
}

static void write_four(cxlp_pool *p, const char *name, uint64_t a, uint64_t e, uint64_t *seed)
{
    struct cxlp_schema sc = four_fields();
    struct cxlp_writer_opts o = {.shard_bytes = 48 << 10};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, name, &sc, &o, &w));
    uint64_t i = a;
    while (i < e) {
        uint64_t r = 1 + test_rand(seed) % 300, k = MIN(e - i, r);
        struct batch b;
        batch_make(&b, i, i + k, (int64_t)(test_rand(seed) % 3));
        CHECK_OK(cxlp_writer_append_columns(w, k, b.cols));
        batch_free(&b);
        i += k;
    }
    CHECK_OK(cxlp_writer_commit(w));
}

static void check_record(const cxlp_store *s, uint64_t idx, uint64_t i)
{
    struct cxlp_view v;
    char tmp[256];
    CHECK_OK(cxlp_store_read_field(s, idx, 0, &v));
    CHECK(v.len == ntok(i) * 4 && (uintptr_t)v.data % 4 == 0);
    for (uint64_t j = 0; j < ntok(i); j++)
        CHECK(((const int32_t *)v.data)[j] == (int32_t)(i * 1000 + j));
    CHECK_OK(cxlp_store_read_field(s, idx, 1, &v));
    CHECK(v.len == 8 && *(const int64_t *)v.data == (int64_t)i * 7 - 3);
    CHECK_OK(cxlp_store_read_field(s, idx, 2, &v));
    int n = cap_of(i, tmp);
    CHECK(v.len == (uint64_t)n && memcmp(v.data, tmp, (size_t)n) == 0);
    CHECK_OK(cxlp_store_read_field(s, idx, 3, &v));
    CHECK(v.len == nimg(i));
    for (uint64_t j = 0; j < nimg(i); j++)
        CHECK(((const uint8_t *)v.data)[j] == (uint8_t)(i + j));
    /* the copying read gives the same bytes, and says how many a short
     * buffer needs */
    uint64_t len = 0;
    CHECK(cxlp_store_read_field_copy(s, idx, 2, tmp, 0, &len) == CXLP_ERANGE &&
          len == (uint64_t)n);
    CHECK_OK(cxlp_store_read_field_copy(s, idx, 1, tmp, sizeof tmp, &len));
    CHECK(len == 8 && memcmp(tmp, &(int64_t){(int64_t)i * 7 - 3}, 8) == 0);
    CHECK(cxlp_store_read_field_copy(s, idx, 4, tmp, sizeof tmp, &len) == CXLP_ERANGE);
}

static void test_roundtrip(cxlp_pool *p, uint64_t *seed)
{
    write_four(p, "four", 0, N, seed);
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "four", &s));
    CHECK(cxlp_store_count(s) == N);
    const struct cxlp_schema *sc = cxlp_store_schema(s);
    CHECK(!sc->fixed && sc->n_fields == 4 && CXLP_FIELD_VAR(&sc->fields[0]) &&
          !CXLP_FIELD_VAR(&sc->fields[1]) && sc->fields[2].dtype == CXLP_DT_STR);
    CHECK(cxlp_schema_field(sc, "caption") == 2 && cxlp_schema_field(sc, "nope") == -1);
    struct cxlp_dataset_info in;
    CHECK_OK(cxlp_store_info(s, &in));
    CHECK(in.n_shards > 4);
    uint64_t bytes = 0;
    char tmp[256];
    for (uint64_t i = 0; i < N; i++) {
        check_record(s, i, i);
        bytes += ntok(i) * 4 + 8 + (uint64_t)cap_of(i, tmp) + nimg(i);
    }
    CHECK(in.data_bytes == bytes);
    struct cxlp_view v;
    CHECK_RC(cxlp_store_read(s, 0, &v), CXLP_EARG);
    CHECK_OK(cxlp_store_verify(s));

    /* one column damaged: the others still read; verify names the column */
    struct pool_dataset ds;
    struct pool_shard *sh;
    struct attach *a;
    uint64_t gen;
    CHECK_OK(pool_lookup(p, "four", &ds, &sh, &a, &gen));
    uint8_t *base = pool_base_rw(p, 0) + sh[1].off;
    struct shard sd;
    struct shard_col cols[SHARD_MAX_COLS];
    char err[512];
    CHECK_OK(shard_open(&sd, cols, SHARD_MAX_COLS, base, sh[1].len, err, sizeof err));
    CHECK(sd.n_cols == 4 && cols[3].data_len > 0);
    base[cols[3].data_off] ^= 0x5a;
    for (uint64_t i = sh[1].first_record; i < sh[1].first_record + sh[1].n_records; i++) {
        struct cxlp_view t;
        CHECK_OK(cxlp_store_read_field(s, i, 0, &t));
        CHECK(t.len == ntok(i) * 4);
    }
    CHECK_RC(cxlp_store_verify(s), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(s), "column 3") && strstr(cxlp_errmsg(s), "shard 1"));
    base[cols[3].data_off] ^= 0x5a;
    CHECK_OK(cxlp_store_verify(s));
    /* a shard of a format this build does not know: refused, with advice */
    base[8] = 9;
    cxlp_store *s2;
    CHECK_RC(cxlp_store_open(p, "four", &s2), CXLP_EFORMAT);
    CHECK(strstr(cxlp_errmsg(p), "version 9") && strstr(cxlp_errmsg(p), "newer build"));
    base[8] = SHARD_VERSION;
    free(sh);
    attach_unpin(a, gen);
    attach_unref(a);
    CHECK_OK(cxlp_store_close(s));
}

static void test_refused(cxlp_pool *p)
{
    struct cxlp_schema sc = four_fields();
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "bad", &sc, NULL, &w));
    struct batch b;
    batch_make(&b, 10, 20, 0);
    /* invalid UTF-8 in record 3 of the batch: named, nothing written */
    b.cap[b.o_cap[3] + 1] = (char)0xff;
    CHECK_RC(cxlp_writer_append_columns(w, 10, b.cols), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(w), "caption") && strstr(cxlp_errmsg(w), "record 3") &&
          strstr(cxlp_errmsg(w), "UTF-8"));
    /* a character cut between two records is invalid in both */
    batch_free(&b);
    batch_make(&b, 10, 20, 0);
    b.o_cap[5] -= 1; /* record 4 loses the last byte of its "é" */
    CHECK_RC(cxlp_writer_append_columns(w, 10, b.cols), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(w), "record 4"));
    b.o_cap[5] += 1;
    /* offsets going backwards, or past the data */
    int64_t keep = b.o_tok[4];
    b.o_tok[4] = b.o_tok[3] - 1;
    CHECK_RC(cxlp_writer_append_columns(w, 10, b.cols), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(w), "tokens") && strstr(cxlp_errmsg(w), "record 3"));
    b.o_tok[4] = keep;
    b.cols[3].len -= 1;
    CHECK_RC(cxlp_writer_append_columns(w, 10, b.cols), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(w), "image"));
    b.cols[3].len += 1;
    b.cols[1].len = 72; /* 9 labels for 10 records */
    CHECK_RC(cxlp_writer_append_columns(w, 10, b.cols), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(w), "label"));
    b.cols[1].len = 80;
    CHECK_RC(cxlp_writer_append(w, "x", 1), CXLP_EARG);
    /* still usable: the good batch goes in */
    CHECK_OK(cxlp_writer_append_columns(w, 10, b.cols));
    batch_free(&b);
    CHECK_OK(cxlp_writer_commit(w));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "bad", &s));
    CHECK(cxlp_store_count(s) == 10);
    for (uint64_t i = 0; i < 10; i++)
        check_record(s, i, 10 + i);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_remove(p, "bad"));

    /* schemas refused */
    struct cxlp_schema x = four_fields();
    x.fixed = 1;
    CHECK_RC(cxlp_writer_begin(p, "x", &x, NULL, &w), CXLP_EARG);
    x = four_fields();
    x.fields[2].ndim = 0; /* a str scalar */
    CHECK_RC(cxlp_writer_begin(p, "x", &x, NULL, &w), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(p), "caption") && strstr(cxlp_errmsg(p), "str"));
    x = four_fields();
    strcpy(x.fields[3].name, "tokens");
    CHECK_RC(cxlp_writer_begin(p, "x", &x, NULL, &w), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(p), "both named"));
    x = four_fields();
    x.fields[0].ndim = 2; /* only a 1-D field may vary */
    CHECK_RC(cxlp_writer_begin(p, "x", &x, NULL, &w), CXLP_EARG);
}

/* The loader: tokens padded/packed with per-token labels (a second var
 * field of equal length) and a scalar per row/segment. */
static struct cxlp_schema sft_fields(void)
{
    struct cxlp_schema s;
    memset(&s, 0, sizeof s);
    s.n_fields = 3;
    strcpy(s.fields[0].name, "input_ids");
    s.fields[0].dtype = CXLP_DT_U16;
    s.fields[0].ndim = 1;
    strcpy(s.fields[1].name, "labels");
    s.fields[1].dtype = CXLP_DT_I64;
    s.fields[1].ndim = 1;
    strcpy(s.fields[2].name, "score");
    s.fields[2].dtype = CXLP_DT_F32;
    return s;
}

static uint64_t nsft(uint64_t i) { return (i * 37) % 41; }

struct order {
    uint64_t pos, n;
};

static int seq_fn(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    struct order *o = ctx;
    size_t k = 0;
    while (k < max && o->pos < o->n)
        out[k++] = (o->pos++ * 7919) % o->n; /* a permutation: n is not a multiple of 7919 */
    *n = k;
    return 0;
}

static void test_loader(cxlp_pool *p)
{
    const uint64_t n = 700;
    struct cxlp_schema sc = sft_fields();
    struct cxlp_writer_opts wo = {.shard_bytes = 16 << 10};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "sft", &sc, &wo, &w));
    for (uint64_t i = 0; i < n; i++) {
        uint16_t ids[64];
        int64_t lab[64];
        float score = (float)i / 4;
        for (uint64_t j = 0; j < nsft(i); j++) {
            ids[j] = (uint16_t)(i * 50 + j);
            lab[j] = -(int64_t)(i * 50 + j);
        }
        int64_t o[2] = {0, (int64_t)nsft(i)};
        struct cxlp_column c[3] = {{ids, nsft(i) * 2, o}, {lab, nsft(i) * 8, o}, {&score, 4, NULL}};
        CHECK_OK(cxlp_writer_append_columns(w, 1, c));
    }
    CHECK_OK(cxlp_writer_commit(w));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "sft", &s));

    /* PAD, fields chosen in another order than the schema's */
    struct order ord = {0, n};
    struct cxlp_loader_opts lo = {.batch_size = 16, .threads = 2, .collate = CXLP_COLLATE_PAD,
                                  .seq_len = 24, .pad_value = 9, .n_fields = 3,
                                  .fields = {2, 0, 1}};
    cxlp_loader *l;
    CHECK_OK(cxlp_loader_create(s, &lo, seq_fn, &ord, &l));
    uint64_t seen = 0;
    struct cxlp_batch *b;
    while (cxlp_loader_next(l, &b) == 0 && b) {
        CHECK(b->n_fields == 3 && b->field_row_bytes[0] == 4 && b->field_row_bytes[1] == 48 &&
              b->field_row_bytes[2] == 192 && b->data == b->field_data[0]);
        for (uint32_t r = 0; r < b->rows; r++) {
            uint64_t i = b->ids[r], k = MIN(nsft(i), 24);
            const float *sco = b->field_data[0];
            const uint16_t *ids = (const uint16_t *)b->field_data[1] + r * 24;
            const int64_t *lab = (const int64_t *)b->field_data[2] + r * 24;
            CHECK(sco[r] == (float)i / 4 && (uint64_t)b->lengths[r] == k);
            for (uint64_t j = 0; j < 24; j++) {
                CHECK(ids[j] == (j < k ? (uint16_t)(i * 50 + j) : 9));
                CHECK(lab[j] == (j < k ? -(int64_t)(i * 50 + j) : 9));
            }
            CHECK(((uintptr_t)b->field_data[2]) % 64 == 0);
        }
        seen += b->rows;
        cxlp_loader_release(l, b);
    }
    CHECK(seen == n);
    cxlp_loader_free(l);

    /* PACK: the fixed field per segment, the var fields packed alike */
    ord = (struct order){0, n};
    lo = (struct cxlp_loader_opts){.batch_size = 4, .threads = 2, .collate = CXLP_COLLATE_PACK,
                                   .seq_len = 32, .n_fields = 3, .fields = {0, 1, 2}};
    CHECK_OK(cxlp_loader_create(s, &lo, seq_fn, &ord, &l));
    uint64_t elems = 0, want = 0;
    for (uint64_t i = 0; i < n; i++)
        want += nsft(i);
    while (cxlp_loader_next(l, &b) == 0 && b) {
        const float *sco = b->field_data[2];
        for (uint64_t g = 0; g < b->n_segments; g++) {
            uint64_t i = b->ids[g];
            CHECK(sco[g] == (float)i / 4);
            for (int64_t j = 0; j < b->seg_len[g]; j++) {
                uint64_t col = (uint64_t)(b->seg_start[g] + j), row = (uint64_t)b->seg_row[g];
                uint64_t e = (uint64_t)(b->seg_offset[g] + j);
                CHECK(((const uint16_t *)b->field_data[0])[row * 32 + col] == (uint16_t)(i * 50 + e));
                CHECK(((const int64_t *)b->field_data[1])[row * 32 + col] == -(int64_t)(i * 50 + e));
            }
            elems += (uint64_t)b->seg_len[g];
        }
        cxlp_loader_release(l, b);
    }
    CHECK(elems == want);
    cxlp_loader_free(l);

    /* one field of several: the tokens alone, as a one-field loader */
    ord = (struct order){0, n};
    lo = (struct cxlp_loader_opts){.batch_size = 8, .collate = CXLP_COLLATE_PAD, .seq_len = 8,
                                   .n_fields = 1, .fields = {0}};
    CHECK_OK(cxlp_loader_create(s, &lo, seq_fn, &ord, &l));
    CHECK_OK(cxlp_loader_next(l, &b));
    CHECK(b && b->n_fields == 1 && b->row_bytes == 16);
    cxlp_loader_release(l, b);
    cxlp_loader_free(l);

    /* refused: STACK over a var field, a field twice, a field past the end,
     * PAD/PACK with only fixed fields */
    lo = (struct cxlp_loader_opts){.batch_size = 8, .collate = CXLP_COLLATE_STACK,
                                   .n_fields = 1, .fields = {0}};
    CHECK_RC(cxlp_loader_create(s, &lo, seq_fn, &ord, &l), CXLP_EARG);
    lo = (struct cxlp_loader_opts){.batch_size = 8, .collate = CXLP_COLLATE_PAD, .seq_len = 8,
                                   .n_fields = 2, .fields = {0, 0}};
    CHECK_RC(cxlp_loader_create(s, &lo, seq_fn, &ord, &l), CXLP_EARG);
    lo.fields[1] = 3;
    CHECK_RC(cxlp_loader_create(s, &lo, seq_fn, &ord, &l), CXLP_EARG);
    lo = (struct cxlp_loader_opts){.batch_size = 8, .collate = CXLP_COLLATE_PAD, .seq_len = 8,
                                   .n_fields = 1, .fields = {2}};
    CHECK_RC(cxlp_loader_create(s, &lo, seq_fn, &ord, &l), CXLP_EARG);
    /* STACK of the scalar alone works */
    lo = (struct cxlp_loader_opts){.batch_size = 8, .collate = CXLP_COLLATE_STACK,
                                   .n_fields = 1, .fields = {2}};
    ord = (struct order){0, n};
    CHECK_OK(cxlp_loader_create(s, &lo, seq_fn, &ord, &l));
    CHECK_OK(cxlp_loader_next(l, &b));
    for (uint32_t r = 0; r < b->rows; r++)
        CHECK(((const float *)b->data)[r] == (float)b->ids[r] / 4);
    cxlp_loader_release(l, b);
    cxlp_loader_free(l);
    CHECK_OK(cxlp_store_close(s));

    /* PAD with var fields of unequal lengths: the gather names the record */
    CHECK_OK(cxlp_writer_begin(p, "uneq", &sc, NULL, &w));
    uint16_t ids[3] = {1, 2, 3};
    int64_t lab[2] = {4, 5};
    float score = 0;
    int64_t o3[2] = {0, 3}, o2[2] = {0, 2};
    struct cxlp_column c[3] = {{ids, 6, o3}, {lab, 16, o2}, {&score, 4, NULL}};
    CHECK_OK(cxlp_writer_append_columns(w, 1, c));
    CHECK_OK(cxlp_writer_commit(w));
    CHECK_OK(cxlp_store_open(p, "uneq", &s));
    ord = (struct order){0, 1};
    lo = (struct cxlp_loader_opts){.batch_size = 1, .collate = CXLP_COLLATE_PAD, .seq_len = 4};
    CHECK_OK(cxlp_loader_create(s, &lo, seq_fn, &ord, &l));
    CHECK_RC(cxlp_loader_next(l, &b), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(l), "record 0") && strstr(cxlp_errmsg(l), "equal lengths"));
    cxlp_loader_free(l);
    /* PACK checks the same in the gather, before any copy (pack_lookup) */
    ord = (struct order){0, 1};
    lo.collate = CXLP_COLLATE_PACK;
    CHECK_OK(cxlp_loader_create(s, &lo, seq_fn, &ord, &l));
    CHECK_RC(cxlp_loader_next(l, &b), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(l), "record 0") && strstr(cxlp_errmsg(l), "equal lengths"));
    cxlp_loader_free(l);
    CHECK_OK(cxlp_store_close(s));
}

/* Fixed-size fields only, appended in their row form: stored as columns,
 * STACK gives each field its own region. */
static void test_fixed_rows(cxlp_pool *p)
{
    struct cxlp_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.fixed = 1;
    sc.n_fields = 2;
    strcpy(sc.fields[0].name, "x");
    sc.fields[0].dtype = CXLP_DT_F32;
    sc.fields[0].ndim = 1;
    sc.fields[0].shape[0] = 5;
    strcpy(sc.fields[1].name, "y");
    sc.fields[1].dtype = CXLP_DT_I16;
    struct cxlp_writer_opts wo = {.shard_bytes = 8 << 10, .expected_bytes = 1000 * 22};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "rows", &sc, &wo, &w));
    uint8_t rec[22 * 10];
    for (uint64_t i = 0; i < 1000; i += 10) {
        for (uint64_t k = 0; k < 10; k++) {
            for (int j = 0; j < 5; j++) {
                float f = (float)((i + k) * 10 + (uint64_t)j);
                memcpy(rec + k * 22 + 4 * (uint64_t)j, &f, 4);
            }
            int16_t y = (int16_t)(i + k);
            memcpy(rec + k * 22 + 20, &y, 2);
        }
        CHECK_OK(cxlp_writer_append_fixed(w, rec, 10));
    }
    CHECK_OK(cxlp_writer_commit(w));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "rows", &s));
    struct cxlp_dataset_info in;
    CHECK_OK(cxlp_store_info(s, &in));
    CHECK(in.n_records == 1000 && in.data_bytes == 22000 && in.n_shards == (1000 + 371) / 372);
    struct order ord = {0, 1000};
    struct cxlp_loader_opts lo = {.batch_size = 64, .threads = 2};
    cxlp_loader *l;
    CHECK_OK(cxlp_loader_create(s, &lo, seq_fn, &ord, &l));
    struct cxlp_batch *b;
    while (cxlp_loader_next(l, &b) == 0 && b) {
        CHECK(b->n_fields == 2 && b->field_row_bytes[0] == 20 && b->field_row_bytes[1] == 2);
        for (uint32_t r = 0; r < b->rows; r++) {
            uint64_t i = b->ids[r];
            CHECK(((const float *)b->field_data[0])[r * 5 + 3] == (float)(i * 10 + 3));
            CHECK(((const int16_t *)b->field_data[1])[r] == (int16_t)i);
        }
        cxlp_loader_release(l, b);
    }
    cxlp_loader_free(l);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
}

static void test_concat(cxlp_pool *p, uint64_t *seed)
{
    struct cxlp_pool_stat st0, st1;
    write_four(p, "part.a", 0, 500, seed);
    write_four(p, "part.b", 500, 1234, seed);
    write_four(p, "part.c", 1234, 1235, seed);
    CHECK_OK(cxlp_pool_stat(p, &st0));
    const char *parts[3] = {"part.a", "part.b", "part.c"};
    const char *bad[2] = {"part.a", "nope"};
    CHECK_RC(cxlp_pool_concat(p, "whole", bad, 2), CXLP_ENOTFOUND);
    CHECK(strstr(cxlp_errmsg(p), "nope"));
    const char *twice[2] = {"part.a", "part.a"};
    CHECK_RC(cxlp_pool_concat(p, "whole", twice, 2), CXLP_EARG);
    const char *other[2] = {"part.a", "sft"};
    CHECK_RC(cxlp_pool_concat(p, "whole", other, 2), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(p), "schema"));
    CHECK_RC(cxlp_pool_concat(p, "four", parts, 3), CXLP_EEXIST);
    CHECK_OK(cxlp_pool_stat(p, &st1));
    CHECK(st1.generation == st0.generation && st1.n_datasets == st0.n_datasets);

    CHECK_OK(cxlp_pool_concat(p, "whole", parts, 3));
    CHECK_OK(cxlp_pool_stat(p, &st1));
    /* no shard moved: two datasets fewer; the only new bytes in use are the
     * new dataset's shard table and states (pool format 3), the parts'
     * wait as deferred frees for their readers */
    uint64_t meta = st0.free_bytes - st1.free_bytes;
    CHECK(st1.free_bytes <= st0.free_bytes && meta <= (64 << 10) &&
          st1.used_bytes + st1.deferred_bytes == st0.used_bytes + st0.deferred_bytes + meta &&
          st1.n_datasets == st0.n_datasets - 2);
    cxlp_store *s;
    CHECK_RC(cxlp_store_open(p, "part.b", &s), CXLP_ENOTFOUND);
    CHECK_OK(cxlp_store_open(p, "whole", &s));
    CHECK(cxlp_store_count(s) == 1235);
    for (uint64_t i = 0; i < 1235; i++)
        check_record(s, i, i);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
}

/* The two fields of every record of test_format1's dataset. */
static void v1rows_fields_ok(cxlp_store *s)
{
    for (uint32_t i = 0; i < 100; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read_field(s, i, 1, &v));
        CHECK(v.len == 4 && ((const uint16_t *)v.data)[0] == i + 1 &&
              ((const uint16_t *)v.data)[1] == (uint16_t)(i * 3));
        CHECK_OK(cxlp_store_read_field(s, i, 0, &v));
        CHECK(v.len == 4 && *(const uint32_t *)v.data == i);
    }
}

/* A dataset as an earlier build wrote it: one format 1 shard holding rows
 * of two fixed-size fields, published through the pool layer by hand. */
static void test_format1(cxlp_pool *p)
{
    struct cxlp_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.fixed = 1;
    sc.n_fields = 2;
    strcpy(sc.fields[0].name, "id");
    sc.fields[0].dtype = CXLP_DT_U32;
    strcpy(sc.fields[1].name, "v");
    sc.fields[1].dtype = CXLP_DT_U16;
    sc.fields[1].ndim = 1;
    sc.fields[1].shape[0] = 2;
    sc.fields[1].offset = 4;
    sc.record_size = 8;
    uint8_t rows[8 * 100];
    for (uint32_t i = 0; i < 100; i++) {
        uint16_t v[2] = {(uint16_t)(i + 1), (uint16_t)(i * 3)};
        memcpy(rows + 8 * i, &i, 4);
        memcpy(rows + 8 * i + 4, v, 4);
    }
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 0, 8192, &e));
    uint64_t used;
    CHECK_OK(shard_build(pool_base_rw(p, 0) + e.off, e.len, SHARD_KIND_FIXED, 8, rows, 800, NULL,
                         100, &used));
    /* the shard table keeps its digest (pool format 3) */
    struct shard built;
    struct shard_col bcols[SHARD_MAX_COLS];
    char berr[256];
    uint64_t dlen, dsum;
    CHECK_OK(shard_open(&built, bcols, SHARD_MAX_COLS, pool_base_rw(p, 0) + e.off, used, berr,
                        sizeof berr));
    shard_digest(&built, &dlen, &dsum);
    struct pool_dataset ds;
    memset(&ds, 0, sizeof ds);
    strcpy(ds.info.name, "v1rows");
    ds.info.n_records = 100;
    ds.info.data_bytes = 800;
    ds.info.stored_bytes = used;
    ds.info.n_shards = 1;
    ds.info.fixed = 1;
    ds.info.record_size = 8;
    ds.schema = sc;
    ds.n_shards = 1;
    struct pool_shard sh = {.off = e.off, .len = used, .first_record = 0, .n_records = 100,
                            .data_len = dlen, .checksum = dsum};
    CHECK_OK(pool_publish(p, &ds, &sh));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "v1rows", &s));
    for (uint32_t i = 0; i < 100; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(v.len == 8 && memcmp(v.data, rows + 8 * i, 8) == 0);
    }
    v1rows_fields_ok(s);
    struct order ord = {0, 100};
    struct cxlp_loader_opts lo = {.batch_size = 10, .n_fields = 1, .fields = {1}};
    cxlp_loader *l;
    CHECK_OK(cxlp_loader_create(s, &lo, seq_fn, &ord, &l));
    struct cxlp_batch *b;
    CHECK_OK(cxlp_loader_next(l, &b));
    for (uint32_t r = 0; r < b->rows; r++)
        CHECK(((const uint16_t *)b->data)[2 * r] == b->ids[r] + 1);
    cxlp_loader_release(l, b);
    cxlp_loader_free(l);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
    /* written again in format 4 (cxlp_pool_rewrite): its fields become
     * columns; every field of every record reads the same */
    CHECK_OK(cxlp_pool_rewrite(p, "v1rows", NULL));
    CHECK_OK(cxlp_store_open(p, "v1rows", &s));
    uint32_t fmt;
    CHECK_OK(cxlp_store_format(s, &fmt, NULL, NULL));
    CHECK(fmt == 4 && s->ncols == 2 && !s->rows);
    v1rows_fields_ok(s);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
}

int main(void)
{
    uint64_t seed = test_seed();
    const char *spec = test_name("columns");
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 256 << 20, NULL, &p));
    test_roundtrip(p, &seed);
    test_refused(p);
    test_loader(p);
    test_fixed_rows(p);
    test_concat(p, &seed);
    test_format1(p);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    printf("ok\n");
    return 0;
}
