/* The .npy header parser over hand-built buffers: every supported dtype and
 * version, and every field's error path with its code and a message naming
 * the file and the field. */
#include "test.h"
#include "common/common.h"
#include "store/npy.h"

static uint8_t buf[1 << 16];
static char err[512];

/* Builds preamble + dict (padded with spaces and '\n' to 64 bytes, as numpy
 * does) + data_len zero bytes. Returns the total length. */
static uint64_t make(int major, int minor, const char *dict, uint64_t data_len)
{
    uint64_t pre = major == 1 ? NPY_PREAMBLE_V1 : NPY_PREAMBLE_V2;
    uint64_t dl = strlen(dict);
    uint64_t hlen = ALIGN_UP(pre + dl + 1, 64) - pre;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (uint8_t)major;
    buf[7] = (uint8_t)minor;
    if (major == 1) {
        buf[8] = (uint8_t)hlen;
        buf[9] = (uint8_t)(hlen >> 8);
    } else {
        for (int i = 0; i < 4; i++)
            buf[8 + i] = (uint8_t)(hlen >> (8 * i));
    }
    memcpy(buf + pre, dict, dl);
    memset(buf + pre + dl, ' ', hlen - dl - 1);
    buf[pre + hlen - 1] = '\n';
    CHECK(pre + hlen + data_len <= sizeof buf);
    memset(buf + pre + hlen, 0, data_len);
    return pre + hlen + data_len;
}

static void ok(const char *dict, int dtype, int ndim, uint64_t n_records,
               uint64_t record_bytes)
{
    struct npy_header h;
    uint64_t len = make(1, 0, dict, 0);
    int rc = npy_parse(buf, len, "ok.npy", &h, err, sizeof err);
    if (rc) {
        fprintf(stderr, "%s -> %d %s\n", dict, rc, err);
        CHECK(0);
    }
    CHECK(h.dtype == dtype);
    CHECK(h.ndim == ndim);
    CHECK(h.n_records == n_records);
    CHECK(h.record_bytes == record_bytes);
    CHECK(h.data_bytes == n_records * record_bytes);
    CHECK(h.data_offset == len);
    CHECK(h.data_offset % 64 == 0);
}

/* dict must fail with want and a message containing both needles. */
static void bad_buf(uint64_t len, int want, const char *needle1, const char *needle2)
{
    struct npy_header h;
    memset(err, 0, sizeof err);
    int rc = npy_parse(buf, len, "bad.npy", &h, err, sizeof err);
    if (rc != want || !strstr(err, "bad.npy") || !strstr(err, needle1) ||
        (needle2 && !strstr(err, needle2))) {
        fprintf(stderr, "rc %d (want %d) msg '%s' (want '%s' '%s')\n", rc, want, err,
                needle1, needle2 ? needle2 : "");
        CHECK(0);
    }
}

static void bad(const char *dict, int want, const char *needle1, const char *needle2)
{
    bad_buf(make(1, 0, dict, 0), want, needle1, needle2);
}

int main(void)
{
    /* every supported dtype as numpy writes it, plus the accepted spellings */
    static const struct { const char *descr; int dtype; int size; } dts[] = {
        {"|u1", CXLP_DT_U8, 1},   {"|i1", CXLP_DT_I8, 1},   {"|b1", CXLP_DT_BOOL, 1},
        {"<u2", CXLP_DT_U16, 2},  {"<i2", CXLP_DT_I16, 2},  {"<u4", CXLP_DT_U32, 4},
        {"<i4", CXLP_DT_I32, 4},  {"<u8", CXLP_DT_U64, 8},  {"<i8", CXLP_DT_I64, 8},
        {"<f2", CXLP_DT_F16, 2},  {"<f4", CXLP_DT_F32, 4},  {"<f8", CXLP_DT_F64, 8},
        {"<u1", CXLP_DT_U8, 1},   {">u1", CXLP_DT_U8, 1},   {"u1", CXLP_DT_U8, 1},
        {"f4", CXLP_DT_F32, 4},   {"=i4", CXLP_DT_I32, 4},
    };
    char dict[256];
    for (size_t i = 0; i < sizeof dts / sizeof dts[0]; i++) {
        snprintf(dict, sizeof dict,
                 "{'descr': '%s', 'fortran_order': False, 'shape': (7, 3), }",
                 dts[i].descr);
        ok(dict, dts[i].dtype, 2, 7, 3 * (uint64_t)dts[i].size);
        if (dts[i].descr[0] == '<' || dts[i].descr[0] == '|')
            CHECK(strcmp(npy_descr(dts[i].dtype), dts[i].descr) == 0 || dts[i].size == 1);
    }
    /* shapes: 0-d is one record, 1-d are scalars, up to CXLP_MAX_DIMS-1 trailing */
    ok("{'descr': '<f8', 'fortran_order': False, 'shape': (), }", CXLP_DT_F64, 0, 1, 8);
    ok("{'descr': '<f8', 'fortran_order': False, 'shape': (5,), }", CXLP_DT_F64, 1, 5, 8);
    ok("{'descr': '<i2', 'fortran_order': False, 'shape': (2, 3, 4, 5), }", CXLP_DT_I16, 4,
       2, 2 * 3 * 4 * 5);
    ok("{'descr': '<i2', 'fortran_order': False, 'shape': (0, 3), }", CXLP_DT_I16, 2, 0, 6);
    /* other writers: key order, double quotes, no trailing comma, Python 2 longs */
    ok("{\"shape\": (4L, 2L), \"fortran_order\": False, \"descr\": \"<u2\"}", CXLP_DT_U16,
       2, 4, 4);
    ok("{'fortran_order':False,'shape':(9,),'descr':'|u1'}", CXLP_DT_U8, 1, 9, 1);

    /* versions 2.0 and 3.0: 4-byte header length */
    struct npy_header h;
    for (int major = 2; major <= 3; major++) {
        uint64_t len = make(major, 0,
                            "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }",
                            24);
        CHECK_OK(npy_parse(buf, len, "v.npy", &h, err, sizeof err));
        CHECK(h.major == major && h.data_offset == len - 24);
        CHECK_OK(npy_check_size(&h, len, "v.npy", err, sizeof err));
        CHECK_RC(npy_check_size(&h, len - 1, "v.npy", err, sizeof err), CXLP_EBADINPUT);
        CHECK(strstr(err, "v.npy") && strstr(err, "23 bytes") && strstr(err, "needs 24"));
        CHECK_RC(npy_check_size(&h, len + 4, "v.npy", err, sizeof err), CXLP_EBADINPUT);
        CHECK(strstr(err, "28 bytes") && strstr(err, "'shape' (3, 2)"));
        CHECK_RC(npy_check_size(&h, 10, "v.npy", err, sizeof err), CXLP_EBADINPUT);
    }

    const char *good = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
    /* preamble: magic, version, header_len */
    uint64_t len = make(1, 0, good, 0);
    bad_buf(5, CXLP_EBADINPUT, "'magic'", NULL);
    buf[1] = 'n';
    bad_buf(len, CXLP_EBADINPUT, "'magic'", "byte offset 0");
    len = make(4, 0, good, 0);
    bad_buf(len, CXLP_EUNSUPPORTED, "'version'", "4.0");
    len = make(1, 1, good, 0);
    bad_buf(len, CXLP_EUNSUPPORTED, "'version'", "1.1");
    len = make(2, 0, good, 0);
    bad_buf(10, CXLP_EBADINPUT, "'header_len'", NULL);
    bad_buf(len - 1, CXLP_EBADINPUT, "'header_len'", "header ends at byte");
    buf[11] = 0x7f; /* 2 GiB header */
    bad_buf(len, CXLP_EBADINPUT, "'header_len'", "limit");

    /* syntax */
    bad("('descr': '<f4')", CXLP_EBADINPUT, "header dict", "expected '{'");
    bad("{'descr' '<f4'}", CXLP_EBADINPUT, "header dict", "':'");
    bad("{descr: '<f4'}", CXLP_EBADINPUT, "header dict", "key");
    bad("{'descr': '<f4, 'fortran_order': False, 'shape': (3,)}", CXLP_EBADINPUT,
        "header dict", NULL);
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)} x", CXLP_EBADINPUT,
        "after the closing", NULL);
    bad("{'descr': '<f4' 'fortran_order': False, 'shape': (3,)}", CXLP_EBADINPUT,
        "after field 'descr'", NULL);
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3,)", CXLP_EBADINPUT,
        "header dict", NULL);
    /* keys */
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}", CXLP_EBADINPUT,
        "unknown key 'x'", NULL);
    bad("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}",
        CXLP_EBADINPUT, "'descr'", "twice");
    bad("{'fortran_order': False, 'shape': (3,)}", CXLP_EBADINPUT, "'descr'", "missing");
    bad("{'descr': '<f4', 'shape': (3,)}", CXLP_EBADINPUT, "'fortran_order'", "missing");
    bad("{'descr': '<f4', 'fortran_order': False}", CXLP_EBADINPUT, "'shape'", "missing");
    /* descr: unsupported dtypes name the field and the value */
    static const char *unsup[] = {"<U4", ">i4", "|O", "<c8", "|S4", "<M8[ns]", "<m8[s]",
                                  "|V8", ">f8", "<f16", "|u2", "hello", "<g"};
    for (size_t i = 0; i < sizeof unsup / sizeof unsup[0]; i++) {
        snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (3,)}",
                 unsup[i]);
        char val[32];
        snprintf(val, sizeof val, "'%s'", unsup[i]);
        bad(dict, CXLP_EUNSUPPORTED, "'descr'", val);
    }
    bad("{'descr': '>i4', 'fortran_order': False, 'shape': (3,)}", CXLP_EUNSUPPORTED,
        "'descr'", "big-endian");
    bad("{'descr': [('a', '<i4'), ('b', '<f8', (2,))], 'fortran_order': False, "
        "'shape': (3,)}", CXLP_EUNSUPPORTED, "'descr'", "structured");
    bad("{'descr': 4, 'fortran_order': False, 'shape': (3,)}", CXLP_EBADINPUT, "'descr'",
        NULL);
    /* fortran_order */
    bad("{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2)}", CXLP_EUNSUPPORTED,
        "'fortran_order'", "True");
    bad("{'descr': '<f4', 'fortran_order': 1, 'shape': (3, 2)}", CXLP_EBADINPUT,
        "'fortran_order'", "True or False");
    /* shape */
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3)}", CXLP_EBADINPUT, "'shape'",
        "trailing comma");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': [3]}", CXLP_EBADINPUT, "'shape'",
        "tuple");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,)}", CXLP_EBADINPUT,
        "'shape'", "negative");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3.5,)}", CXLP_EBADINPUT,
        "'shape'", NULL);
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (3 4)}", CXLP_EBADINPUT,
        "'shape'", NULL);
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}",
        CXLP_EBADINPUT, "'shape'", "64 bits");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4294967296, 4294967296)}",
        CXLP_EBADINPUT, "'shape'", "overflows");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296)}",
        CXLP_EBADINPUT, "'shape'", "overflows");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (4, 0)}", CXLP_EUNSUPPORTED,
        "'shape'", "0 bytes");
    bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 1, 1, 1)}",
        CXLP_EUNSUPPORTED, "'shape'", "at most 3");
    char many[1024] = "{'descr': '<f4', 'fortran_order': False, 'shape': (";
    for (int i = 0; i < NPY_MAX_NDIM + 1; i++)
        strcat(many, "1, ");
    strcat(many, ")}");
    bad(many, CXLP_EBADINPUT, "'shape'", "axes");

    /* random corruption of a valid header never reads out of bounds (ASan) and
     * either parses or fails with one of the two input codes */
    uint64_t seed = test_seed();
    for (int it = 0; it < 20000; it++) {
        len = make(1 + (int)(test_rand(&seed) % 3), 0,
                   "{'descr': '<i8', 'fortran_order': False, 'shape': (10, 2, 3), }", 0);
        int flips = 1 + (int)(test_rand(&seed) % 4);
        for (int f = 0; f < flips; f++)
            buf[test_rand(&seed) % len] = (uint8_t)test_rand(&seed);
        uint64_t cut = test_rand(&seed) % 4 == 0 ? test_rand(&seed) % (len + 1) : len;
        int rc = npy_parse(buf, cut, "fuzz.npy", &h, err, sizeof err);
        CHECK(rc == 0 || rc == CXLP_EBADINPUT || rc == CXLP_EUNSUPPORTED);
        if (rc == 0)
            CHECK(h.data_offset <= cut && h.record_bytes > 0);
        else
            CHECK(strstr(err, "fuzz.npy") != NULL);
    }
    printf("ok\n");
    return 0;
}
