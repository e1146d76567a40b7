/* .npy import through cxlp_import: files written by hand in C (versions 1.0,
 * 2.0 and 3.0, 0-d to 4-d) and by numpy itself; every record read back
 * equal; the schema; and each bad input (code, message naming file and
 * field, pool unchanged). */
#include "import_test.h"

/* Writes a .npy with the given header dict text and data bytes; the header
 * is padded to 64 bytes as numpy does. */
static void write_npy(const char *path, int major, const char *dict, const void *data,
                      uint64_t len)
{
    uint64_t pre = major == 1 ? 10 : 12, dl = strlen(dict);
    uint64_t hlen = ((pre + dl + 1 + 63) / 64) * 64 - pre;
    uint8_t *b = malloc(pre + hlen + len);
    CHECK(b != NULL);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (uint8_t)major;
    b[7] = 0;
    for (uint64_t i = 0; i < pre - 8; i++)
        b[8 + i] = (uint8_t)(hlen >> (8 * i));
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hlen - dl - 1);
    b[pre + hlen - 1] = '\n';
    if (len)
        memcpy(b + pre + hlen, data, len);
    write_file(path, b, pre + hlen + len);
    free(b);
}

static void check_npy(cxlp_pool *p, const char *name, const uint8_t *data, uint64_t n,
                      uint64_t rs, int dtype, int ndim, const uint64_t *shape)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    CHECK(cxlp_store_count(s) == n);
    const struct cxlp_schema *sc = cxlp_store_schema(s);
    CHECK(sc->fixed == 1 && sc->record_size == rs && sc->n_fields == 1);
    CHECK(strcmp(sc->fields[0].name, "data") == 0);
    CHECK(sc->fields[0].dtype == dtype && sc->fields[0].ndim == ndim);
    for (int d = 0; d < ndim; d++)
        CHECK(sc->fields[0].shape[d] == shape[d]);
    for (uint64_t i = 0; i < n; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(v.len == rs);
        CHECK(memcmp(v.data, data + i * rs, rs) == 0);
    }
    CHECK_OK(cxlp_store_close(s));
}

int main(void)
{
    uint64_t seed = test_seed();
    cxlp_pool *p = setup(128ull << 20);
    uint8_t data[1 << 16];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)test_rand(&seed);

    /* 2-d float32, version 1.0: 50 records of 3 floats */
    const char *f = path_of("a.npy");
    write_npy(f, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (50, 3), }", data, 600);
    CHECK_OK(cxlp_import(p, "a", f, NULL));
    uint64_t sh3[1] = {3};
    check_npy(p, "a", data, 50, 12, CXLP_DT_F32, 1, sh3);

    /* 4-d int16 (records of 3 axes), version 2.0, explicit format */
    const char *f4 = path_of("b.data");
    write_npy(f4, 2, "{'descr': '<i2', 'fortran_order': False, 'shape': (7, 2, 3, 4), }",
              data, 7 * 48);
    struct cxlp_import_opts o = {.format = CXLP_FMT_NPY, .dtype = -1};
    CHECK_OK(cxlp_import(p, "b", f4, &o));
    uint64_t sh234[3] = {2, 3, 4};
    check_npy(p, "b", data, 7, 48, CXLP_DT_I16, 3, sh234);

    /* 1-d uint8 without the .npy suffix: AUTO sniffs the magic; version 3.0 */
    const char *f1 = path_of("c.bin");
    write_npy(f1, 3, "{'descr': '|u1', 'fortran_order': False, 'shape': (1000,), }", data,
              1000);
    CHECK_OK(cxlp_import(p, "c", f1, NULL));
    check_npy(p, "c", data, 1000, 1, CXLP_DT_U8, 0, NULL);

    /* 0-d: one record */
    const char *f0 = path_of("d.npy");
    write_npy(f0, 1, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }", data, 8);
    CHECK_OK(cxlp_import(p, "d", f0, NULL));
    check_npy(p, "d", data, 1, 8, CXLP_DT_F64, 0, NULL);

    /* numpy-written files, compared with tobytes() of the same array */
    if (system("python3 -c 'import numpy' 2>/dev/null") == 0) {
        char cmd[2048];
        snprintf(cmd, sizeof cmd,
                 "python3 -c \"\n"
                 "import numpy as np\n"
                 "d = '%s'\n"
                 "r = np.random.default_rng(%" PRIu64 ")\n"
                 "arrs = {'u1': r.integers(0, 255, (40, 5)).astype('u1'),\n"
                 "        'i8': r.integers(-9, 9, (30,)).astype('<i8'),\n"
                 "        'f2': r.random((9, 2, 2)).astype('<f2'),\n"
                 "        'b1': r.random((17, 3)) > 0.5,\n"
                 "        'u4': np.arange(24, dtype='<u4').reshape(2, 3, 4)[:, ::2]}\n"
                 "for k, a in arrs.items():\n"
                 "    np.save(d + '/np_' + k + '.npy', a)\n"
                 "    open(d + '/np_' + k + '.raw', 'wb').write(np.ascontiguousarray(a).tobytes())\n"
                 "np.save(d + '/np_fortran.npy', np.asfortranarray(np.zeros((3, 4), 'f4')))\n"
                 "np.save(d + '/np_U4.npy', np.array(['ab', 'cd'], dtype='<U4'))\n"
                 "np.save(d + '/np_be.npy', np.arange(4, dtype='>i4'))\n"
                 "np.save(d + '/np_struct.npy', np.zeros(2, dtype=[('a', '<i4')]))\n"
                 "\"", scratch, seed);
        CHECK(system(cmd) == 0);
        static const struct { const char *k; int dtype, ndim; uint64_t n, rs, shape[2]; } ks[] = {
            {"u1", CXLP_DT_U8, 1, 40, 5, {5}},     {"i8", CXLP_DT_I64, 0, 30, 8, {0}},
            {"f2", CXLP_DT_F16, 2, 9, 8, {2, 2}},  {"b1", CXLP_DT_BOOL, 1, 17, 3, {3}},
            {"u4", CXLP_DT_U32, 2, 2, 32, {2, 4}},
        };
        for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++) {
            char fn[64], rn[64], dn[64];
            snprintf(fn, sizeof fn, "np_%s.npy", ks[i].k);
            snprintf(rn, sizeof rn, "np_%s.raw", ks[i].k);
            snprintf(dn, sizeof dn, "np_%s", ks[i].k);
            uint64_t rl;
            uint8_t *raw = read_file(path_of(rn), &rl);
            CHECK(rl == ks[i].n * ks[i].rs);
            CHECK_OK(cxlp_import(p, dn, path_of(fn), NULL));
            check_npy(p, dn, raw, ks[i].n, ks[i].rs, ks[i].dtype, ks[i].ndim, ks[i].shape);
            free(raw);
        }
        const char *ff = path_of("np_fortran.npy");
        IMPORT_FAILS(p, "x", ff, NULL, CXLP_EUNSUPPORTED, ff, "'fortran_order'");
        const char *fu = path_of("np_U4.npy");
        IMPORT_FAILS(p, "x", fu, NULL, CXLP_EUNSUPPORTED, fu, "'descr': value '<U4'");
        const char *fb = path_of("np_be.npy");
        IMPORT_FAILS(p, "x", fb, NULL, CXLP_EUNSUPPORTED, fb, "'descr': value '>i4'");
        const char *fs = path_of("np_struct.npy");
        IMPORT_FAILS(p, "x", fs, NULL, CXLP_EUNSUPPORTED, fs, "structured");
    } else {
        printf("numpy not importable: numpy-written files not tested\n");
    }

    /* bad input, hand-built */
    const char *g = path_of("bad.npy");
    write_npy(g, 1, "{'descr': '<U4', 'fortran_order': False, 'shape': (2,), }", data, 32);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EUNSUPPORTED, g, "'descr': value '<U4'");
    write_npy(g, 1, "{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }", data, 8);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EUNSUPPORTED, g, "'descr': value '>i4'");
    write_npy(g, 1, "{'descr': '|O', 'fortran_order': False, 'shape': (2,), }", data, 16);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EUNSUPPORTED, g, "'descr': value '|O'");
    write_npy(g, 1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", data, 24);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EUNSUPPORTED, g, "'fortran_order'");
    /* data length: short, long */
    write_npy(g, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data, 20);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EBADINPUT, g, "needs 24 bytes");
    write_npy(g, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", data, 28);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EBADINPUT, g, "data is 28 bytes");
    /* header: truncated file, bad magic, bad version, garbage dict */
    write_file(g, "\x93NUMPY\x01\x00\x76\x00{'descr'", 17);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EBADINPUT, g, "'header_len'");
    write_file(g, "\x93NUM", 4);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EBADINPUT, g, "'magic'");
    write_npy(g, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", data, 8);
    struct cxlp_import_opts on = {.format = CXLP_FMT_NPY};
    uint64_t gl;
    uint8_t *gb = read_file(g, &gl);
    gb[0] = 'X';
    write_file(g, gb, gl);
    IMPORT_FAILS(p, "x", g, &on, CXLP_EBADINPUT, g, "'magic'");
    gb[0] = 0x93;
    gb[6] = 7;
    write_file(g, gb, gl);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EUNSUPPORTED, g, "'version'");
    free(gb);
    write_npy(g, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", data, 8);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EBADINPUT, g, "unknown key 'x'");
    write_npy(g, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1, 1, 1, 1), }",
              data, 8);
    IMPORT_FAILS(p, "x", g, NULL, CXLP_EUNSUPPORTED, g, "'shape'");
    const char *missing = path_of("missing.npy");
    IMPORT_FAILS(p, "x", missing, NULL, -ENOENT, missing, "open");

    teardown(p);
    printf("ok\n");
    return 0;
}
