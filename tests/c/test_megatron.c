/* The Megatron-LM .idx validator over hand-built buffers laid out as
 * Megatron's _IndexWriter writes them: the accepted forms, and every field's
 * error path with its code and a message naming the file, field and offset. */
#include "test.h"
#include "common/common.h"
#include "store/megatron.h"

static uint8_t buf[1 << 16];
static char err[512];

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Writes an index for n sequences of lens[] with dtype code; docs[nd]. Pointers
 * are the running sum of len*itemsize, as _IndexWriter._sequence_pointers. */
static uint64_t make(uint8_t code, int itemsize, const int32_t *lens, uint64_t n,
                     const int64_t *docs, uint64_t nd, int modes)
{
    memcpy(buf, MEGATRON_MAGIC, MEGATRON_MAGIC_LEN);
    put64(buf + 9, 1);
    buf[17] = code;
    put64(buf + 18, n);
    put64(buf + 26, nd);
    uint64_t off = MEGATRON_HEADER_LEN, ptr = 0;
    for (uint64_t i = 0; i < n; i++)
        put32(buf + off + 4 * i, (uint32_t)lens[i]);
    off += 4 * n;
    for (uint64_t i = 0; i < n; i++) {
        put64(buf + off + 8 * i, ptr);
        ptr += (uint64_t)lens[i] * (uint64_t)itemsize;
    }
    off += 8 * n;
    for (uint64_t i = 0; i < nd; i++)
        put64(buf + off + 8 * i, (uint64_t)docs[i]);
    off += 8 * nd;
    if (modes) {
        memset(buf + off, 0, n);
        off += n;
    }
    return off;
}

static void bad(uint64_t len, uint64_t bin_len, int want, const char *n1, const char *n2)
{
    struct megatron_idx m;
    memset(err, 0, sizeof err);
    int rc = megatron_idx_parse(buf, len, bin_len, "d.idx", "d.bin", &m, err, sizeof err);
    if (rc != want || !strstr(err, "d.idx") || !strstr(err, n1) || (n2 && !strstr(err, n2))) {
        fprintf(stderr, "rc %d (want %d) msg '%s' (want '%s' '%s')\n", rc, want, err, n1,
                n2 ? n2 : "");
        CHECK(0);
    }
}

int main(void)
{
    static const int32_t lens[5] = {3, 0, 7, 1, 4};
    static const int64_t docs[4] = {0, 2, 3, 5};
    struct megatron_idx m;
    /* every DType code with its size */
    static const struct { uint8_t code; int dtype, size; } dts[] = {
        {1, CXLP_DT_U8, 1},  {2, CXLP_DT_I8, 1},  {3, CXLP_DT_I16, 2},
        {4, CXLP_DT_I32, 4}, {5, CXLP_DT_I64, 8}, {6, CXLP_DT_F64, 8},
        {7, CXLP_DT_F32, 4}, {8, CXLP_DT_U16, 2},
    };
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        uint64_t len = make(dts[k].code, dts[k].size, lens, 5, docs, 4, 0);
        uint64_t bin = 15 * (uint64_t)dts[k].size;
        CHECK_OK(megatron_idx_parse(buf, len, bin, "d.idx", "d.bin", &m, err, sizeof err));
        CHECK(m.dtype == dts[k].dtype && m.itemsize == dts[k].size);
        CHECK(m.n_seqs == 5 && m.n_doc_entries == 4 && !m.multimodal && m.contiguous);
        CHECK(m.total_bytes == bin);
        for (int i = 0; i < 5; i++)
            CHECK(megatron_seq_len(&m, i) == lens[i]);
        CHECK(megatron_seq_ptr(&m, 4) == 11 * dts[k].size);
        CHECK(megatron_doc(&m, 3) == 5);
        /* a longer .bin is fine; a shorter one names both files */
        CHECK_OK(megatron_idx_parse(buf, len, bin + 100, "d.idx", "d.bin", &m, err, sizeof err));
        bad(len, bin - 1, CXLP_EBADINPUT, "d.bin", "sequence_pointers[4]");
    }
    /* multimodal: an int8 mode per sequence follows */
    uint64_t len = make(4, 4, lens, 5, docs, 4, 1);
    CHECK_OK(megatron_idx_parse(buf, len, 60, "d.idx", "d.bin", &m, err, sizeof err));
    CHECK(m.multimodal);
    /* empty dataset: no sequences, docs = [0] */
    static const int64_t doc0[1] = {0};
    len = make(8, 2, NULL, 0, doc0, 1, 0);
    CHECK_OK(megatron_idx_parse(buf, len, 0, "d.idx", "d.bin", &m, err, sizeof err));
    CHECK(m.n_seqs == 0 && m.total_bytes == 0);

    /* header fields, each truncated and each corrupt */
    len = make(4, 4, lens, 5, docs, 4, 0);
    bad(0, 60, CXLP_EBADINPUT, "'magic'", "byte offset 0");
    bad(8, 60, CXLP_EBADINPUT, "'magic'", NULL);
    bad(12, 60, CXLP_EBADINPUT, "'version'", "byte offset 9");
    bad(17, 60, CXLP_EBADINPUT, "'dtype'", "byte offset 17");
    bad(20, 60, CXLP_EBADINPUT, "'sequence_count'", "byte offset 18");
    bad(33, 60, CXLP_EBADINPUT, "'document_count'", "byte offset 26");
    bad(34, 60, CXLP_EBADINPUT, "'sequence_lengths'", "byte offset 34");
    bad(34 + 20 + 39, 60, CXLP_EBADINPUT, "'sequence_pointers'", "byte offset 54");
    bad(len - 1, 60, CXLP_EBADINPUT, "'document_indices'", "byte offset 94");
    bad(len + 1, 60, CXLP_EBADINPUT, "'document_indices'", "ends at byte offset 126");
    buf[3] = 'X';
    bad(len, 60, CXLP_EBADINPUT, "'magic'", "not MMIDIDX");
    len = make(4, 4, lens, 5, docs, 4, 0);
    put64(buf + 9, 2);
    bad(len, 60, CXLP_EUNSUPPORTED, "'version'", "2 is not supported");
    len = make(4, 4, lens, 5, docs, 4, 0);
    buf[17] = 9;
    bad(len, 60, CXLP_EBADINPUT, "'dtype'", "code 9");
    buf[17] = 0;
    bad(len, 60, CXLP_EBADINPUT, "'dtype'", "code 0");
    /* counts that overflow the size arithmetic are truncations, not wraps */
    len = make(4, 4, lens, 5, docs, 4, 0);
    put64(buf + 18, UINT64_MAX / 4 + 1);
    bad(len, 60, CXLP_EBADINPUT, "'sequence_lengths'", "runs past the end");
    len = make(4, 4, lens, 5, docs, 4, 0);
    put64(buf + 26, UINT64_MAX / 8 + 1);
    bad(len, 60, CXLP_EBADINPUT, "'document_indices'", "runs past the end");
    len = make(4, 4, lens, 5, docs, 4, 0);
    put64(buf + 26, 0);
    bad(len - 32, 60, CXLP_EBADINPUT, "'document_count'", "leading 0");

    /* per-sequence fields */
    len = make(4, 4, lens, 5, docs, 4, 0);
    put32(buf + 34 + 4 * 2, 0x80000000u);
    bad(len, 60, CXLP_EBADINPUT, "'sequence_lengths[2]'", "byte offset 42");
    len = make(4, 4, lens, 5, docs, 4, 0);
    put64(buf + 54 + 8 * 3, (uint64_t)-8);
    bad(len, 60, CXLP_EBADINPUT, "'sequence_pointers[3]'", "negative");
    len = make(4, 4, lens, 5, docs, 4, 0);
    put64(buf + 54 + 8 * 3, 4);
    bad(len, 60, CXLP_EBADINPUT, "'sequence_pointers[3]'", "previous pointer");
    len = make(4, 4, lens, 5, docs, 4, 0);
    put64(buf + 54 + 8 * 4, 1ULL << 62);
    bad(len, 60, CXLP_EBADINPUT, "'sequence_pointers[4]'", "d.bin (60 bytes)");
    /* a gap between sequences is legal, but not contiguous */
    len = make(4, 4, lens, 5, docs, 4, 0);
    put64(buf + 54 + 8 * 4, 48);
    CHECK_OK(megatron_idx_parse(buf, len, 64, "d.idx", "d.bin", &m, err, sizeof err));
    CHECK(!m.contiguous);

    /* document indices */
    static const int64_t d_first[4] = {1, 2, 3, 5}, d_last[4] = {0, 2, 3, 4},
                         d_desc[4] = {0, 3, 2, 5}, d_big[4] = {0, 2, 6, 5},
                         d_neg[4] = {0, -1, 3, 5};
    len = make(4, 4, lens, 5, d_first, 4, 0);
    bad(len, 60, CXLP_EBADINPUT, "'document_indices[0]'", "first entry must be 0");
    len = make(4, 4, lens, 5, d_last, 4, 0);
    bad(len, 60, CXLP_EBADINPUT, "'document_indices[3]'", "'sequence_count'");
    len = make(4, 4, lens, 5, d_desc, 4, 0);
    bad(len, 60, CXLP_EBADINPUT, "'document_indices[2]'", "less than the previous");
    len = make(4, 4, lens, 5, d_big, 4, 0);
    bad(len, 60, CXLP_EBADINPUT, "'document_indices[2]'", "greater than");
    len = make(4, 4, lens, 5, d_neg, 4, 0);
    bad(len, 60, CXLP_EBADINPUT, "'document_indices[1]'", "less than the previous");

    /* random corruption never reads out of bounds (ASan) */
    uint64_t seed = test_seed();
    for (int it = 0; it < 20000; it++) {
        len = make(4, 4, lens, 5, docs, 4, (int)(test_rand(&seed) & 1));
        int flips = 1 + (int)(test_rand(&seed) % 3);
        for (int f = 0; f < flips; f++)
            buf[test_rand(&seed) % len] = (uint8_t)test_rand(&seed);
        uint64_t cut = test_rand(&seed) % 4 == 0 ? test_rand(&seed) % (len + 1) : len;
        uint64_t bin = test_rand(&seed) % 80;
        int rc = megatron_idx_parse(buf, cut, bin, "d.idx", "d.bin", &m, err, sizeof err);
        CHECK(rc == 0 || rc == CXLP_EBADINPUT || rc == CXLP_EUNSUPPORTED);
        if (rc == 0) {
            for (uint64_t i = 0; i < m.n_seqs; i++)
                CHECK((uint64_t)megatron_seq_ptr(&m, i) +
                      (uint64_t)megatron_seq_len(&m, i) * m.itemsize <= bin);
        } else {
            CHECK(strstr(err, "d.idx") != NULL);
        }
    }
    printf("ok\n");
    return 0;
}
