/* Megatron-LM .bin/.idx import through cxlp_import: datasets written in C
 * following the real layout and by a Python replica of Megatron's
 * _IndexWriter; every sequence read back equal, document boundaries kept;
 * "PREFIX", "PREFIX.bin", "PREFIX.idx" and AUTO all accepted; and each bad
 * input (code, message naming file(s) and field, pool unchanged). */
#include "import_test.h"

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A dataset in memory: n sequences of lens[i] elements of itemsize bytes
 * back to back in bin, documents docs[0..nd). */
struct mds {
    uint8_t code;
    int itemsize;
    uint64_t n, nd;
    int32_t *lens;
    int64_t *docs;
    uint8_t *bin;
    uint64_t bin_len;
};

static void gen(struct mds *d, uint8_t code, int itemsize, uint64_t n, uint64_t *seed)
{
    d->code = code;
    d->itemsize = itemsize;
    d->n = n;
    d->lens = calloc(n + 1, sizeof *d->lens);
    d->docs = calloc(n + 2, sizeof *d->docs);
    CHECK(d->lens && d->docs);
    d->bin_len = 0;
    for (uint64_t i = 0; i < n; i++) {
        /* a few empty sequences, mostly short, some long */
        uint64_t r = test_rand(seed) % 100;
        d->lens[i] = r < 5 ? 0 : r < 90 ? (int32_t)(test_rand(seed) % 300)
                                        : (int32_t)(test_rand(seed) % 20000);
        d->bin_len += (uint64_t)d->lens[i] * (uint64_t)itemsize;
    }
    d->bin = malloc(d->bin_len + 1);
    CHECK(d->bin);
    for (uint64_t i = 0; i < d->bin_len; i++)
        d->bin[i] = (uint8_t)test_rand(seed);
    /* documents of 1..4 sequences, as IndexedDatasetBuilder.end_document */
    d->nd = 0;
    d->docs[d->nd++] = 0;
    for (uint64_t i = 0; i < n;) {
        i += 1 + test_rand(seed) % 4;
        d->docs[d->nd++] = (int64_t)(i < n ? i : n);
    }
}

static void free_mds(struct mds *d)
{
    free(d->lens);
    free(d->docs);
    free(d->bin);
}

/* The .idx exactly as _IndexWriter writes it; returns its bytes (malloc). */
static uint8_t *idx_bytes(const struct mds *d, uint64_t *len)
{
    uint64_t n = d->n, sz = 34 + 12 * n + 8 * d->nd;
    uint8_t *b = malloc(sz);
    CHECK(b);
    memcpy(b, "MMIDIDX\0\0", 9);
    put64(b + 9, 1);
    b[17] = d->code;
    put64(b + 18, n);
    put64(b + 26, d->nd);
    uint64_t ptr = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t l = (uint32_t)d->lens[i];
        memcpy(b + 34 + 4 * i, &l, 4);
        put64(b + 34 + 4 * n + 8 * i, ptr);
        ptr += (uint64_t)d->lens[i] * (uint64_t)d->itemsize;
    }
    for (uint64_t i = 0; i < d->nd; i++)
        put64(b + 34 + 12 * n + 8 * i, (uint64_t)d->docs[i]);
    *len = sz;
    return b;
}

static void write_mds(const struct mds *d, const char *prefix)
{
    char path[600];
    uint64_t len;
    uint8_t *idx = idx_bytes(d, &len);
    snprintf(path, sizeof path, "%s.idx", prefix);
    write_file(path, idx, len);
    snprintf(path, sizeof path, "%s.bin", prefix);
    write_file(path, d->bin, d->bin_len);
    free(idx);
}

static void check_mds(cxlp_pool *p, const char *name, const struct mds *d, int dtype)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    CHECK(cxlp_store_count(s) == d->n);
    const struct cxlp_schema *sc = cxlp_store_schema(s);
    CHECK(sc->fixed == 0 && sc->n_fields == 1 && sc->fields[0].dtype == dtype);
    struct cxlp_dataset_info info;
    CHECK_OK(cxlp_store_info(s, &info));
    CHECK(info.fixed == 0 && info.n_records == d->n && info.data_bytes == d->bin_len);
    CHECK(info.n_docs == d->nd - 1);
    uint64_t off = 0;
    for (uint64_t i = 0; i < d->n; i++) {
        struct cxlp_view v;
        uint64_t bytes = (uint64_t)d->lens[i] * (uint64_t)d->itemsize;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(v.len == bytes);
        if (bytes && memcmp(v.data, d->bin + off, bytes) != 0) {
            fprintf(stderr, "%s: sequence %" PRIu64 " differs\n", name, i);
            CHECK(0);
        }
        off += bytes;
    }
    const int64_t *docs;
    uint64_t nd;
    CHECK_OK(cxlp_store_docs(s, &docs, &nd));
    CHECK(nd == d->nd - 1 && docs);
    for (uint64_t i = 0; i <= nd; i++)
        CHECK(docs[i] == d->docs[i]);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
}

/* Copies prefix's files to a new prefix with the .idx passed through edit. */
static const char *variant(const struct mds *d, const char *name,
                           void (*edit)(uint8_t *idx, uint64_t *len, uint8_t *bin,
                                        uint64_t *bin_len))
{
    const char *prefix = path_of(name);
    uint64_t len, bin_len = d->bin_len;
    uint8_t *idx = idx_bytes(d, &len);
    uint8_t *bin = malloc(bin_len + 1);
    CHECK(bin);
    memcpy(bin, d->bin, bin_len);
    edit(idx, &len, bin, &bin_len);
    char path[600];
    snprintf(path, sizeof path, "%s.idx", prefix);
    write_file(path, idx, len);
    snprintf(path, sizeof path, "%s.bin", prefix);
    write_file(path, bin, bin_len);
    free(idx);
    free(bin);
    return prefix;
}

static uint64_t g_n; /* sequence count of the dataset being edited */

struct prog {
    uint64_t calls, done, total;
};

static void on_progress(void *ctx, uint64_t done, uint64_t total)
{
    struct prog *g = ctx;
    CHECK(done >= g->done && done <= total);
    g->calls++;
    g->done = done;
    g->total = total;
}

/* Progress that also watches the pool's reservations during the import. */
struct resv_watch {
    cxlp_pool *p;
    uint64_t calls, peak;
};

static void on_progress_resv(void *ctx, uint64_t done, uint64_t total)
{
    struct resv_watch *r = ctx;
    struct cxlp_pool_stat st;
    (void)done, (void)total;
    CHECK_OK(cxlp_pool_stat(r->p, &st));
    r->calls++;
    if (st.reserved_bytes > r->peak)
        r->peak = st.reserved_bytes;
}

static void e_magic(uint8_t *i, uint64_t *l, uint8_t *b, uint64_t *bl)
{
    (void)l, (void)b, (void)bl;
    i[0] = 'X';
}
static void e_version(uint8_t *i, uint64_t *l, uint8_t *b, uint64_t *bl)
{
    (void)l, (void)b, (void)bl;
    put64(i + 9, 3);
}
static void e_dtype(uint8_t *i, uint64_t *l, uint8_t *b, uint64_t *bl)
{
    (void)l, (void)b, (void)bl;
    i[17] = 42;
}
static void e_trunc_header(uint8_t *i, uint64_t *l, uint8_t *b, uint64_t *bl)
{
    (void)i, (void)b, (void)bl;
    *l = 30;
}
static void e_trunc_ptrs(uint8_t *i, uint64_t *l, uint8_t *b, uint64_t *bl)
{
    (void)i, (void)b, (void)bl;
    *l = 34 + 4 * g_n + 8 * (g_n / 2);
}
static void e_trunc_docs(uint8_t *i, uint64_t *l, uint8_t *b, uint64_t *bl)
{
    (void)i, (void)b, (void)bl;
    *l -= 3;
}
static void e_ptr_range(uint8_t *i, uint64_t *l, uint8_t *b, uint64_t *bl)
{
    (void)l, (void)b, (void)bl;
    put64(i + 34 + 4 * g_n + 8 * (g_n - 1), 1ull << 40);
}
static void e_short_bin(uint8_t *i, uint64_t *l, uint8_t *b, uint64_t *bl)
{
    (void)i, (void)l, (void)b;
    *bl -= 1;
}
static void e_doc_last(uint8_t *i, uint64_t *l, uint8_t *b, uint64_t *bl)
{
    (void)b, (void)bl;
    put64(i + *l - 8, g_n - 1);
}

int main(void)
{
    uint64_t seed = test_seed();
    int small = test_sanitized();
    cxlp_pool *p = setup(256ull << 20);

    /* uint16 tokens (the common case), across several 1 MiB shards */
    struct mds d;
    gen(&d, 8, 2, small ? 600 : 2000, &seed);
    const char *pre = path_of("tok");
    write_mds(&d, pre);
    struct prog g = {0, 0, 0};
    struct cxlp_import_opts o = {.format = CXLP_FMT_MEGATRON, .shard_bytes = 1u << 20,
                                 .progress = on_progress, .progress_ctx = &g};
    CHECK_OK(cxlp_import(p, "m_prefix", pre, &o));
    check_mds(p, "m_prefix", &d, CXLP_DT_U16);
    CHECK(g.calls >= 1 && g.done == d.bin_len && g.total == d.bin_len);
    o.progress = NULL;
    char path[600];
    snprintf(path, sizeof path, "%s.bin", pre);
    CHECK_OK(cxlp_import(p, "m_bin", path, NULL)); /* AUTO */
    check_mds(p, "m_bin", &d, CXLP_DT_U16);
    snprintf(path, sizeof path, "%s.idx", pre);
    CHECK_OK(cxlp_import(p, "m_idx", path, &o));
    check_mds(p, "m_idx", &d, CXLP_DT_U16);
    CHECK_OK(cxlp_import(p, "m_auto", pre, NULL)); /* AUTO on a bare prefix */
    check_mds(p, "m_auto", &d, CXLP_DT_U16);

    /* Reservations stay near the dataset's size: the shards a Megatron
     * import announces (its total bytes) bound the batches of shard extents
     * it reserves ahead. Each extent is backed (on 2 MiB pages: zeroed) when
     * reserved, so doubling batches of 1, 2, 4 ... 64 shards, as for a
     * stream of unknown size, held about twice the dataset (here 127 extents
     * of 260 KiB for a 20 MiB dataset) until the publish gave them back.
     * Shards end >= 7/8 full (runs of at most 1/8 shard), so the extents
     * needed are at most 8/7 of the bytes over shard_bytes, plus a few; the
     * last one only as large as what is left. */
    {
        struct mds r;
        gen(&r, 8, 2, 9000, &seed);
        CHECK(r.bin_len > (16u << 20));
        const char *rp = path_of("resv");
        write_mds(&r, rp);
        const uint64_t shard = 256u << 10, extent = shard + 8192;
        struct resv_watch rw = {p, 0, 0};
        struct cxlp_import_opts ro = {.format = CXLP_FMT_MEGATRON, .shard_bytes = shard,
                                      .progress = on_progress_resv, .progress_ctx = &rw};
        CHECK_OK(cxlp_import(p, "m_resv", rp, &ro));
        check_mds(p, "m_resv", &r, CXLP_DT_U16);
        uint64_t bound = (r.bin_len * 8 / 7 / shard + 4) * extent;
        printf("reservations: peak %" PRIu64 " bytes over %" PRIu64 " progress calls, "
               "dataset %" PRIu64 " bytes, bound %" PRIu64 "\n", rw.peak, rw.calls, r.bin_len,
               bound);
        CHECK(rw.calls >= 4 && rw.peak > 0);
        CHECK(rw.peak <= bound);
        CHECK_OK(cxlp_pool_remove(p, "m_resv"));
        /* a dataset smaller than one shard reserves its own size (data and
         * index), not a whole shard_bytes extent */
        struct resv_watch one = {p, 0, 0};
        ro.shard_bytes = 64u << 20;
        ro.progress_ctx = &one;
        CHECK_OK(cxlp_import(p, "m_one", rp, &ro));
        check_mds(p, "m_one", &r, CXLP_DT_U16);
        bound = r.bin_len + 8 * r.n + (1u << 20);
        printf("one shard: peak %" PRIu64 " bytes, bound %" PRIu64 "\n", one.peak, bound);
        CHECK(one.calls >= 1 && one.peak > 0 && one.peak <= bound);
        CHECK_OK(cxlp_pool_remove(p, "m_one"));
        free_mds(&r);
    }

    /* every DType code */
    static const struct { uint8_t code; int size, dtype; } codes[] = {
        {1, 1, CXLP_DT_U8},  {2, 1, CXLP_DT_I8},  {3, 2, CXLP_DT_I16}, {4, 4, CXLP_DT_I32},
        {5, 8, CXLP_DT_I64}, {6, 8, CXLP_DT_F64}, {7, 4, CXLP_DT_F32},
    };
    for (size_t k = 0; k < sizeof codes / sizeof codes[0]; k++) {
        struct mds e;
        gen(&e, codes[k].code, codes[k].size, 40, &seed);
        char nm[32];
        snprintf(nm, sizeof nm, "code%d", codes[k].code);
        const char *pk = path_of(nm);
        write_mds(&e, pk);
        CHECK_OK(cxlp_import(p, nm, pk, NULL));
        check_mds(p, nm, &e, codes[k].dtype);
        free_mds(&e);
    }

    /* a tiny dataset written by a replica of Megatron's _IndexWriter */
    if (system("python3 -c 'import numpy' 2>/dev/null") == 0) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "python3 -c \"\n"
                 "import struct, numpy as np\n"
                 "p = '%s/py'\n"
                 "lens = [(i * 7) %% 13 for i in range(50)]\n"
                 "seqs = [np.array([(i * 1000 + j) %% 65536 for j in range(n)], np.uint16) for i, n in enumerate(lens)]\n"
                 "docs = [0] + [i for i in range(3, 50, 3)] + [50]\n"
                 "open(p + '.bin', 'wb').write(b''.join(s.tobytes(order='C') for s in seqs))\n"
                 "f = open(p + '.idx', 'wb')\n"
                 "f.write(b'MMIDIDX\\\\x00\\\\x00'); f.write(struct.pack('<Q', 1)); f.write(struct.pack('<B', 8))\n"
                 "ptrs, cur = [], np.int64(0)\n"
                 "for n in lens:\n"
                 "    ptrs.append(cur.item()); cur += n * np.int64(2)\n"
                 "f.write(struct.pack('<Q', len(lens))); f.write(struct.pack('<Q', len(docs)))\n"
                 "f.write(np.array(lens, dtype=np.int32).tobytes(order='C'))\n"
                 "f.write(np.array(ptrs, dtype=np.int64).tobytes(order='C'))\n"
                 "f.write(np.array(docs, dtype=np.int64).tobytes(order='C'))\n"
                 "f.close()\n"
                 "\"", scratch);
        CHECK(system(cmd) == 0);
        CHECK_OK(cxlp_import(p, "py", path_of("py.idx"), NULL));
        cxlp_store *s;
        CHECK_OK(cxlp_store_open(p, "py", &s));
        CHECK(cxlp_store_count(s) == 50);
        for (uint64_t i = 0; i < 50; i++) {
            struct cxlp_view v;
            CHECK_OK(cxlp_store_read(s, i, &v));
            CHECK(v.len == 2 * ((i * 7) % 13));
            for (uint64_t j = 0; j < v.len / 2; j++) {
                uint16_t t;
                memcpy(&t, (const uint8_t *)v.data + 2 * j, 2);
                CHECK(t == (uint16_t)((i * 1000 + j) % 65536));
            }
        }
        const int64_t *docs;
        uint64_t nd;
        CHECK_OK(cxlp_store_docs(s, &docs, &nd));
        CHECK(nd == 17 && docs[0] == 0 && docs[1] == 3 && docs[16] == 48 && docs[17] == 50);
        CHECK_OK(cxlp_store_close(s));
    } else {
        printf("numpy not importable: Python-written dataset not tested\n");
    }

    /* bad input: code, files and field named, pool unchanged */
    g_n = d.n;
    char idxp[600], binp[600];
    const char *v;
#define PATHS(v) (snprintf(idxp, sizeof idxp, "%s.idx", v), snprintf(binp, sizeof binp, "%s.bin", v))
    v = variant(&d, "magic", e_magic);
    PATHS(v);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EBADINPUT, idxp, "'magic'");
    v = variant(&d, "version", e_version);
    PATHS(v);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EUNSUPPORTED, idxp, "'version'");
    v = variant(&d, "dtype", e_dtype);
    PATHS(v);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EBADINPUT, idxp, "'dtype' at byte offset 17");
    v = variant(&d, "trunc_header", e_trunc_header);
    PATHS(v);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EBADINPUT, idxp, "'document_count' at byte offset 26");
    v = variant(&d, "trunc_ptrs", e_trunc_ptrs);
    PATHS(v);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EBADINPUT, idxp, "'sequence_pointers'");
    v = variant(&d, "trunc_docs", e_trunc_docs);
    PATHS(v);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EBADINPUT, idxp, "'document_indices'");
    v = variant(&d, "ptr_range", e_ptr_range);
    PATHS(v);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EBADINPUT, idxp, binp);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EBADINPUT, "'sequence_pointers[", "byte offset");
    v = variant(&d, "short_bin", e_short_bin);
    PATHS(v);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EBADINPUT, idxp, binp);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EBADINPUT, "shorter than the .idx says", NULL);
    v = variant(&d, "doc_last", e_doc_last);
    PATHS(v);
    IMPORT_FAILS(p, "x", v, &o, CXLP_EBADINPUT, idxp, "'document_indices[");
    /* a .bin without its .idx: AUTO falls back to raw, which says why */
    snprintf(path, sizeof path, "%s.idx", v);
    CHECK(unlink(path) == 0);
    snprintf(path, sizeof path, "%s.bin", v);
    IMPORT_FAILS(p, "x", path, NULL, CXLP_EARG, "record_size", "PREFIX.bin + PREFIX.idx");
    snprintf(path, sizeof path, "%s.idx", v);
    IMPORT_FAILS(p, "x", v, &o, -ENOENT, path, "open");
    v = variant(&d, "doc_last", e_doc_last);
    /* missing files name the path */
    snprintf(path, sizeof path, "%s.bin", v);
    CHECK(unlink(path) == 0);
    IMPORT_FAILS(p, "x", v, &o, -ENOENT, path, "open");
    const char *nothing = path_of("nothing");
    snprintf(path, sizeof path, "%s.idx", nothing);
    IMPORT_FAILS(p, "x", nothing, &o, -ENOENT, path, "open");

    /* a pool too small, found out mid-ingest: aborted, the pool as it was */
    struct mds big;
    gen(&big, 5, 8, 3000, &seed);
    CHECK(big.bin_len > (8u << 20));
    const char *bp = path_of("big");
    write_mds(&big, bp);
    const char *small_spec = test_name("imp_small");
    cxlp_pool *q;
    CHECK_OK(cxlp_pool_create(small_spec, 14u << 20, NULL, &q));
    snprintf(binp, sizeof binp, "%s.bin", bp);
    IMPORT_FAILS(q, "big", bp, &o, CXLP_EFULL, binp, "");
    struct cxlp_pool_stat qs;
    CHECK_OK(cxlp_pool_stat(q, &qs));
    CHECK(qs.used_bytes == 0 && qs.reserved_bytes == 0 && qs.n_datasets == 0);
    struct mds sm;
    gen(&sm, 8, 2, 100, &seed);
    const char *sp = path_of("fits");
    write_mds(&sm, sp);
    CHECK_OK(cxlp_import(q, "fits", sp, &o));
    check_mds(q, "fits", &sm, CXLP_DT_U16);
    free_mds(&sm);
    CHECK_OK(cxlp_pool_close(q));
    CHECK_OK(cxlp_pool_destroy(small_spec));
    free_mds(&big);

    free_mds(&d);
    teardown(p);
    printf("ok\n");
    return 0;
}
