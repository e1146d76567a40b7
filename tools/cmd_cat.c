/*
 * cli_cmd_cat.c - `cxlpool cat`: one record as raw bytes, a hex dump, or values
 * printed by the dataset's schema (dtype and shape per field).
 *
 * Values are decoded with memcpy from the borrowed view (records carry no
 * alignment promise). A fixed-size record prints each field with its shape;
 * a variable-size record is a 1-D array of the schema's single dtype. Bytes
 * that do not fill a whole element (a damaged schema) are shown as a hex
 * tail instead of being read past.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

double cli_half_to_double(uint16_t h)
{
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp(m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp(m + 1024, e - 25);
    return (h & 0x8000) ? -v : v;
}

double cli_bf16_to_double(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Prints element i of dtype dt at p. json: NaN/Inf become null. */
static void print_elem(int dt, const uint8_t *p, int json)
{
    union {
        uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
        uint64_t u64; int64_t i64; float f32; double f64;
    } x;
    double d;
    switch (dt) {
    case CXLP_DT_U8: printf("%u", p[0]); return;
    case CXLP_DT_I8: memcpy(&x.i8, p, 1); printf("%d", x.i8); return;
    case CXLP_DT_BOOL: printf("%s", p[0] ? "true" : "false"); return;
    case CXLP_DT_U16: memcpy(&x.u16, p, 2); printf("%u", x.u16); return;
    case CXLP_DT_I16: memcpy(&x.i16, p, 2); printf("%d", x.i16); return;
    case CXLP_DT_U32: memcpy(&x.u32, p, 4); printf("%" PRIu32, x.u32); return;
    case CXLP_DT_I32: memcpy(&x.i32, p, 4); printf("%" PRId32, x.i32); return;
    case CXLP_DT_U64: memcpy(&x.u64, p, 8); printf("%" PRIu64, x.u64); return;
    case CXLP_DT_I64: memcpy(&x.i64, p, 8); printf("%" PRId64, x.i64); return;
    case CXLP_DT_F16: memcpy(&x.u16, p, 2); d = cli_half_to_double(x.u16); break;
    case CXLP_DT_BF16: memcpy(&x.u16, p, 2); d = cli_bf16_to_double(x.u16); break;
    case CXLP_DT_F32: memcpy(&x.f32, p, 4); d = x.f32; break;
    case CXLP_DT_F64: memcpy(&x.f64, p, 8); d = x.f64; break;
    default: printf("?"); return;
    }
    if (json && !isfinite(d))
        printf("null");
    else
        printf("%.9g", d);
}

/* Prints n elements shaped by shape[0..ndim) as nested lists (json) or
 * bracketed rows (text). Returns bytes consumed. */
static uint64_t print_array(int dt, const uint8_t *p, const uint64_t *shape, int ndim,
                            uint64_t n, int json)
{
    uint64_t es = (uint64_t)cxlp_dtype_size(dt);
    if (ndim <= 1) {
        printf("[");
        for (uint64_t i = 0; i < n; i++) {
            if (i)
                printf(json ? ", " : " ");
            print_elem(dt, p + i * es, json);
        }
        printf("]");
        return n * es;
    }
    uint64_t inner = n / shape[0], used = 0;
    printf("[");
    for (uint64_t i = 0; i < shape[0]; i++) {
        if (i)
            printf(json ? ", " : "\n  ");
        used += print_array(dt, p + used, shape + 1, ndim - 1, inner, json);
    }
    printf("]");
    return used;
}

static void hexdump(const uint8_t *p, uint64_t n, uint64_t base)
{
    for (uint64_t off = 0; off < n; off += 16) {
        printf("%08" PRIx64 "  ", base + off);
        for (uint64_t i = 0; i < 16; i++) {
            if (off + i < n)
                printf("%02x ", p[off + i]);
            else
                printf("   ");
            if (i == 7)
                printf(" ");
        }
        printf(" |");
        for (uint64_t i = 0; i < 16 && off + i < n; i++)
            putchar(p[off + i] >= 0x20 && p[off + i] < 0x7f ? p[off + i] : '.');
        printf("|\n");
    }
}

/* Elements of a field: the product of its shape (1 for a scalar). 0 on
 * overflow. */
static uint64_t field_elems(const struct cxlp_field *f)
{
    uint64_t n = 1;
    for (int k = 0; k < f->ndim && k < CXLP_MAX_DIMS; k++)
        if (__builtin_mul_overflow(n, f->shape[k], &n))
            return 0;
    return n;
}

/* A str field's bytes as a JSON string (json) or as text. The writer
 * checked them for UTF-8; control bytes are escaped either way. */
static void print_text(const uint8_t *p, uint64_t n, int json)
{
    if (json) {
        char *t = malloc(n + 1);
        if (t) {
            memcpy(t, p, n);
            t[n] = '\0';
            cli_json_str(stdout, t); /* stops at an embedded NUL: shown cut */
            free(t);
        }
        return;
    }
    putchar('"');
    for (uint64_t i = 0; i < n; i++)
        if (p[i] < 0x20 || p[i] == 0x7f)
            printf("\\x%02x", p[i]);
        else
            putchar(p[i]);
    putchar('"');
}

/* Field field of record idx (UINT32_MAX: the whole record) into v. A
 * dataset of a pool of tiers is read as copies (malloc'd into *owned, for
 * free()): a view would keep its copy until the store closes, and a
 * process that may not write the pool has no views at all. */
static int read_one(const cxlp_store *s, uint64_t idx, uint32_t field, struct cxlp_view *v,
                    void **owned)
{
    *owned = NULL;
    if (!cxlp_store_tiered(s))
        return field == UINT32_MAX ? cxlp_store_read(s, idx, v)
                                   : cxlp_store_read_field(s, idx, field, v);
    uint64_t len = 0, cap = 0;
    void *buf = NULL;
    for (;;) {
        int rc = field == UINT32_MAX ? cxlp_store_read_copy(s, idx, buf, cap, &len)
                                     : cxlp_store_read_field_copy(s, idx, field, buf, cap, &len);
        if (rc == CXLP_ERANGE && len > cap && idx < cxlp_store_count(s)) {
            free(buf);
            cap = len;
            if (!(buf = malloc(cap ? cap : 1)))
                return -ENOMEM;
            continue;
        }
        if (rc) {
            free(buf);
            return rc;
        }
        v->data = buf;
        v->len = len;
        *owned = buf;
        return 0;
    }
}

/* Every field of record idx, each read from its own column. Returns 0 or
 * the first read error. */
static int print_values(const cxlp_store *s, const char *name, uint64_t idx, int json)
{
    const struct cxlp_schema *sc = cxlp_store_schema(s);
    struct cxlp_view v[CXLP_MAX_FIELDS];
    void *owned[CXLP_MAX_FIELDS] = {NULL};
    uint64_t total = 0;
    uint32_t nf = sc->n_fields < CXLP_MAX_FIELDS ? sc->n_fields : CXLP_MAX_FIELDS;
    for (uint32_t i = 0; i < nf; i++) {
        int rc = read_one(s, idx, i, &v[i], &owned[i]);
        if (rc) {
            for (uint32_t j = 0; j < i; j++)
                free(owned[j]);
            return rc;
        }
        total += v[i].len;
    }
    if (json) {
        printf("{\"dataset\": ");
        cli_json_str(stdout, name);
        printf(", \"index\": %" PRIu64 ", \"bytes\": %" PRIu64 ", \"fields\": [", idx, total);
    }
    for (uint32_t i = 0; i < nf; i++) {
        const struct cxlp_field *f = &sc->fields[i];
        const uint8_t *p = v[i].data;
        int es = cxlp_dtype_size(f->dtype);
        int var = CXLP_FIELD_VAR(f);
        uint64_t n, bytes;
        if (es <= 0)
            continue;
        n = var ? v[i].len / (uint64_t)es : field_elems(f);
        int ndim = var ? 1 : f->ndim;
        uint64_t shp1[1] = {n};
        const uint64_t *shape = var ? shp1 : f->shape;
        if (__builtin_mul_overflow(n, (uint64_t)es, &bytes) || bytes > v[i].len)
            n = 0, ndim = 1, shape = shp1, shp1[0] = 0; /* damaged schema: show nothing */
        if (json) {
            printf("%s{\"name\": ", i ? ", " : "");
            cli_json_str(stdout, f->name);
            printf(", \"dtype\": \"%s\", \"values\": ", cxlp_dtype_name(f->dtype));
        } else {
            printf("%s (%s", f->name[0] ? f->name : "values", cxlp_dtype_name(f->dtype));
            for (int k = 0; k < ndim; k++)
                printf("%s%" PRIu64, k ? "x" : " ", shape[k]);
            printf("): ");
        }
        if (f->dtype == CXLP_DT_STR)
            print_text(p, n, json);
        else if (ndim == 0)
            print_elem(f->dtype, p, json);
        else
            print_array(f->dtype, p, shape, ndim, n, json);
        printf(json ? "}" : "\n");
    }
    if (json)
        printf("]}\n");
    for (uint32_t i = 0; i < nf; i++)
        free(owned[i]);
    return 0;
}

/* raw and hex: the whole record where the dataset has one (one field, or
 * rows of an older format), else each field's bytes in field order (hex:
 * each under its name). A write to stdout that fails sets *out_errno (the
 * return is then 0): what failed is the output, not the read. */
static int print_bytes(const cxlp_store *s, uint64_t idx, int hex, int *out_errno)
{
    const struct cxlp_schema *sc = cxlp_store_schema(s);
    struct cxlp_view v;
    void *owned;
    int rc = read_one(s, idx, UINT32_MAX, &v, &owned);
    uint32_t nf = rc == CXLP_EARG ? sc->n_fields : 1;
    for (uint32_t i = 0; i < nf && !*out_errno; i++) {
        if (nf > 1 && (rc = read_one(s, idx, i, &v, &owned)))
            return rc;
        if (rc)
            return rc;
        if (hex) {
            if (nf > 1)
                printf("%s:\n", sc->fields[i].name);
            hexdump(v.data, v.len, 0);
        } else if (v.len && fwrite(v.data, 1, v.len, stdout) != v.len) {
            *out_errno = errno;
        }
        free(owned);
    }
    return 0;
}

int cli_cmd_cat(int argc, char **argv)
{
    static const struct option lo[] = {{"format", required_argument, 0, 'f'},
                                       {"input", no_argument, 0, 'i'}, {0, 0, 0, 0}};
    enum { RAW, HEX, DTYPE, JSON } fmt = isatty(STDOUT_FILENO) ? DTYPE : RAW;
    int c, input = 0;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        if (c == -2)
            return EXIT_USAGE;
        if (c == 'i')
            input = 1;
        else if (!strcmp(optarg, "raw"))
            fmt = RAW;
        else if (!strcmp(optarg, "hex"))
            fmt = HEX;
        else if (!strcmp(optarg, "dtype"))
            fmt = DTYPE;
        else if (!strcmp(optarg, "json"))
            fmt = JSON;
        else
            return cli_usage_error("--format: '%s' is not raw, hex, dtype or json", optarg);
    }
    if (!cli_npos_ok(argc, argv, 3, 3))
        return EXIT_USAGE;
    const char *spec = argv[optind], *name = argv[optind + 1];
    uint64_t idx;
    if (cli_parse_u64(argv[optind + 2], &idx))
        return cli_usage_error("INDEX: '%s' is not a record number", argv[optind + 2]);
    cxlp_pool *p;
    int ex = cli_open_pool(spec, 1, &p);
    if (ex)
        return ex;
    cxlp_store *s;
    int rc = cxlp_store_open(p, name, &s);
    if (rc) {
        ex = cli_report_error(rc, p, name);
        cxlp_pool_close(p);
        return ex;
    }
    /* --input: INDEX is an input position (a shuffled ingest renumbers) */
    if (input && (rc = cxlp_store_record_of_source(s, idx, &idx)) != 0) {
        ex = cli_report_error(rc, NULL, name);
        if (rc == CXLP_ERANGE)
            ex = EXIT_NOTFOUND;
        cxlp_store_close(s);
        cxlp_pool_close(p);
        return ex;
    }
    int out_errno = 0;
    if (fmt == RAW || fmt == HEX)
        rc = print_bytes(s, idx, fmt == HEX, &out_errno);
    else
        rc = print_values(s, name, idx, fmt == JSON);
    if (out_errno) {
        ex = cli_report_os(-out_errno, "stdout");
    } else if (rc) {
        ex = cli_report_error(rc, s, name);
        /* An index past the end is "not found" for scripts. */
        if (rc == CXLP_ERANGE)
            ex = EXIT_NOTFOUND;
    }
    cxlp_store_close(s);
    cxlp_pool_close(p);
    if (fflush(stdout) && !ex)
        ex = cli_report_os(-errno, "stdout");
    return ex;
}
