/*
 * npy.c - strict parser of the NumPy .npy header (format versions 1.0, 2.0
 * and 3.0).
 *
 * Layout: "\x93NUMPY", u8 major, u8 minor, header length (u16 LE in 1.0, u32
 * LE in 2.0/3.0), then that many bytes holding a Python dict literal
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * padded with spaces and a final '\n'; the array data follows.
 *
 * Invariants of an accepted header:
 *   data_offset = preamble + header length <= len of the buffer
 *   keys = {descr, fortran_order, shape}, each exactly once
 *   n_records = shape[0] (ndim >= 1) or 1 (ndim == 0)
 *   record_bytes = prod(shape[1:]) * itemsize > 0, computed without overflow
 *   data_bytes = n_records * record_bytes, computed without overflow
 *   ndim - 1 <= CXLP_MAX_DIMS - 1 (the record's field shape)
 *
 * Why a hand-written tokenizer: the header is a Python literal, not JSON
 * (single quotes, True/False, tuples, trailing commas), so no JSON library
 * reads it, and there is no C library for Python literals short of embedding
 * CPython. The grammar numpy writes is tiny: strings, non-negative integers,
 * True/False, tuples and (for structured dtypes, which we refuse) lists.
 *
 * Alternatives rejected:
 *   - Matching the header against the exact text numpy writes: other writers
 *     (older numpy, other languages) order keys differently and pad
 *     differently; a tokenizer accepts all of them and nothing else.
 *   - Flattening more than CXLP_MAX_DIMS-1 trailing axes into the last one:
 *     a schema whose shape differs from the file's would turn into tensors
 *     of the wrong shape without a word. We refuse (CXLP_EUNSUPPORTED) and
 *     the message says to reshape before saving.
 */
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "store/npy.h"

static const uint8_t npy_magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};


static uint16_t le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
           ((uint32_t)p[3] << 24);
}

int npy_preamble(const uint8_t *buf, uint64_t len, const char *name,
                 uint64_t *data_offset, char *err, size_t errcap)
{
    if (len < 8)
        return errbuf_set(err, errcap, CXLP_EBADINPUT,
                    "%s: field 'magic': file is %llu bytes, a .npy preamble needs %d",
                    name, (unsigned long long)len, NPY_PREAMBLE_V1);
    if (memcmp(buf, npy_magic, sizeof npy_magic) != 0)
        return errbuf_set(err, errcap, CXLP_EBADINPUT,
                    "%s: field 'magic' at byte offset 0: not \\x93NUMPY (not a .npy file)",
                    name);
    int major = buf[6], minor = buf[7];
    if (minor != 0 || major < 1 || major > 3)
        return errbuf_set(err, errcap, CXLP_EUNSUPPORTED,
                    "%s: field 'version' at byte offset 6: %d.%d is not supported "
                    "(1.0, 2.0, 3.0)", name, major, minor);
    uint64_t pre = major == 1 ? NPY_PREAMBLE_V1 : NPY_PREAMBLE_V2;
    if (len < pre)
        return errbuf_set(err, errcap, CXLP_EBADINPUT,
                    "%s: field 'header_len' at byte offset 8: file is %llu bytes, "
                    "version %d.0 needs %llu", name, (unsigned long long)len, major,
                    (unsigned long long)pre);
    uint64_t hlen = major == 1 ? le16(buf + 8) : le32(buf + 8);
    if (hlen > NPY_HEADER_MAX)
        return errbuf_set(err, errcap, CXLP_EBADINPUT,
                    "%s: field 'header_len' at byte offset 8: %llu bytes exceeds the "
                    "limit of %u", name, (unsigned long long)hlen, NPY_HEADER_MAX);
    *data_offset = pre + hlen;
    return 0;
}

/* ---- tokenizer over the header dict ---- */

enum tok { T_END, T_LBRACE, T_RBRACE, T_LPAREN, T_RPAREN, T_LBRACK, T_RBRACK,
           T_COLON, T_COMMA, T_STR, T_INT, T_TRUE, T_FALSE, T_NONE, T_BAD };

struct lex {
    const uint8_t *s;
    uint64_t n, pos;         /* pos: next unread byte, relative to s */
    uint64_t base;           /* file offset of s[0], for messages */
    enum tok t;
    uint64_t start, len;     /* current token's bytes (string: inside quotes) */
    uint64_t ival;
    int overflow;            /* integer did not fit 64 bits */
    const char *why;         /* T_BAD: what was wrong */
};

static int is_space(uint8_t c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int is_alpha(uint8_t c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static void next(struct lex *l)
{
    while (l->pos < l->n && is_space(l->s[l->pos]))
        l->pos++;
    l->start = l->pos;
    l->len = 0;
    if (l->pos >= l->n) {
        l->t = T_END;
        return;
    }
    uint8_t c = l->s[l->pos];
    switch (c) {
    case '{': l->t = T_LBRACE; l->pos++; l->len = 1; return;
    case '}': l->t = T_RBRACE; l->pos++; l->len = 1; return;
    case '(': l->t = T_LPAREN; l->pos++; l->len = 1; return;
    case ')': l->t = T_RPAREN; l->pos++; l->len = 1; return;
    case '[': l->t = T_LBRACK; l->pos++; l->len = 1; return;
    case ']': l->t = T_RBRACK; l->pos++; l->len = 1; return;
    case ':': l->t = T_COLON; l->pos++; l->len = 1; return;
    case ',': l->t = T_COMMA; l->pos++; l->len = 1; return;
    default: break;
    }
    if (c == '\'' || c == '"') {
        uint64_t i = l->pos + 1;
        while (i < l->n && l->s[i] != c) {
            if (l->s[i] == '\n' || l->s[i] == '\0') {
                l->t = T_BAD;
                l->why = "unterminated string";
                return;
            }
            /* escapes are skipped, not decoded: no supported value has one */
            i += l->s[i] == '\\' ? 2 : 1;
        }
        if (i >= l->n) {
            l->t = T_BAD;
            l->why = "unterminated string";
            return;
        }
        l->t = T_STR;
        l->start = l->pos + 1;
        l->len = i - l->start;
        l->pos = i + 1;
        return;
    }
    if (c >= '0' && c <= '9') {
        uint64_t v = 0;
        int ovf = 0;
        uint64_t i = l->pos;
        while (i < l->n && l->s[i] >= '0' && l->s[i] <= '9') {
            if (mul_overflow_u64(v, 10, &v) || add_overflow_u64(v, l->s[i] - '0', &v))
                ovf = 1;
            i++;
        }
        /* Python 2 wrote long integers with an L suffix */
        if (i < l->n && (l->s[i] == 'L' || l->s[i] == 'l'))
            i++;
        if (i < l->n && (is_alpha(l->s[i]) || l->s[i] == '.')) {
            l->t = T_BAD;
            l->why = "not a non-negative integer";
            return;
        }
        l->t = T_INT;
        l->ival = v;
        l->overflow = ovf;
        l->len = i - l->pos;
        l->pos = i;
        return;
    }
    if (is_alpha(c)) {
        uint64_t i = l->pos;
        while (i < l->n && (is_alpha(l->s[i]) || (l->s[i] >= '0' && l->s[i] <= '9')))
            i++;
        uint64_t n = i - l->pos;
        const char *w = (const char *)l->s + l->pos;
        l->len = n;
        l->pos = i;
        if (n == 4 && memcmp(w, "True", 4) == 0)
            l->t = T_TRUE;
        else if (n == 5 && memcmp(w, "False", 5) == 0)
            l->t = T_FALSE;
        else if (n == 4 && memcmp(w, "None", 4) == 0)
            l->t = T_NONE;
        else {
            l->t = T_BAD;
            l->why = "unknown name (only True, False, None)";
        }
        return;
    }
    l->t = T_BAD;
    l->why = c == '-' ? "negative number" : "unexpected character";
}

/* Skips one value (the current token starts it); lists and tuples nest. */
static int skip_value(struct lex *l, int depth)
{
    if (depth > 32)
        return -1;
    if (l->t == T_LBRACK || l->t == T_LPAREN) {
        enum tok close = l->t == T_LBRACK ? T_RBRACK : T_RPAREN;
        next(l);
        while (l->t != close) {
            if (skip_value(l, depth + 1) < 0)
                return -1;
            if (l->t == T_COMMA)
                next(l);
            else if (l->t != close)
                return -1;
        }
        next(l);
        return 0;
    }
    if (l->t == T_STR || l->t == T_INT || l->t == T_TRUE || l->t == T_FALSE ||
        l->t == T_NONE) {
        next(l);
        return 0;
    }
    return -1;
}

struct dtype_entry {
    char kind;
    int size;                /* also the itemsize */
    int dtype;
};

static const struct dtype_entry dtypes[] = {
    {'u', 1, CXLP_DT_U8},  {'i', 1, CXLP_DT_I8},  {'b', 1, CXLP_DT_BOOL},
    {'u', 2, CXLP_DT_U16}, {'i', 2, CXLP_DT_I16}, {'u', 4, CXLP_DT_U32},
    {'i', 4, CXLP_DT_I32}, {'u', 8, CXLP_DT_U64}, {'i', 8, CXLP_DT_I64},
    {'f', 2, CXLP_DT_F16}, {'f', 4, CXLP_DT_F32}, {'f', 8, CXLP_DT_F64},
};

const char *npy_descr(int dtype)
{
    switch (dtype) {
    case CXLP_DT_U8: return "|u1";
    case CXLP_DT_I8: return "|i1";
    case CXLP_DT_BOOL: return "|b1";
    case CXLP_DT_U16: return "<u2";
    case CXLP_DT_I16: return "<i2";
    case CXLP_DT_U32: return "<u4";
    case CXLP_DT_I32: return "<i4";
    case CXLP_DT_U64: return "<u8";
    case CXLP_DT_I64: return "<i8";
    case CXLP_DT_F16: return "<f2";
    case CXLP_DT_F32: return "<f4";
    case CXLP_DT_F64: return "<f8";
    default: return "?";
    }
}

/* descr text -> dtype. Byte order: '<' (or '=', this host is little-endian
 * where it matters), '|' for one-byte types as numpy writes them; any order
 * is the same bytes for one-byte types. Returns -1 when unsupported. */
static int descr_dtype(const char *d, size_t n, int *itemsize, const char **why)
{
    *why = "not a numeric dtype this importer handles";
    if (n < 2 || n > 3)
        return -1;
    char order = 0;
    if (n == 3) {
        order = d[0];
        d++;
    }
    char kind = d[0];
    if (d[1] < '1' || d[1] > '9')
        return -1;
    int size = d[1] - '0';
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        if (dtypes[i].kind != kind || dtypes[i].size != size)
            continue;
        *itemsize = size;
        if (size == 1 && (order == 0 || order == '<' || order == '>' || order == '|' ||
                          order == '='))
            return dtypes[i].dtype;
        if (size > 1 && (order == 0 || order == '<' || order == '='))
            return dtypes[i].dtype;
        if (order == '>') {
            *why = "big-endian";
            return -1;
        }
        *why = "bad byte-order character";
        return -1;
    }
    return -1;
}

static void format_shape(const struct npy_header *h, char *buf, size_t cap)
{
    size_t o = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < h->ndim && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%llu", i ? ", " : "",
                              (unsigned long long)h->shape[i]);
    if (o < cap)
        snprintf(buf + o, cap - o, "%s)", h->ndim == 1 ? "," : "");
}

#define FIELD_DESCR 1
#define FIELD_FORTRAN 2
#define FIELD_SHAPE 4

int npy_parse(const uint8_t *buf, uint64_t len, const char *name,
              struct npy_header *out, char *err, size_t errcap)
{
    uint64_t data_offset;
    int rc = npy_preamble(buf, len, name, &data_offset, err, errcap);
    if (rc)
        return rc;
    if (data_offset > len)
        return errbuf_set(err, errcap, CXLP_EBADINPUT,
                    "%s: field 'header_len' at byte offset 8: header ends at byte %llu, "
                    "file is %llu bytes", name, (unsigned long long)data_offset,
                    (unsigned long long)len);
    struct npy_header h;
    memset(&h, 0, sizeof h);
    h.major = buf[6];
    h.minor = buf[7];
    h.data_offset = data_offset;
    uint64_t pre = h.major == 1 ? NPY_PREAMBLE_V1 : NPY_PREAMBLE_V2;

    struct lex l = {.s = buf + pre, .n = data_offset - pre, .base = pre};
    char descr[64] = "";
    int descr_list = 0, fortran = 0, seen = 0;
#define AT(lx) ((unsigned long long)((lx).base + (lx).start))
#define SYNTAX(what)                                                            \
    errbuf_set(err, errcap, CXLP_EBADINPUT,                                           \
         "%s: header dict at byte offset %llu: %s%s%s%s", name, AT(l), (what),  \
         l.t == T_BAD ? " (" : "", l.t == T_BAD ? l.why : "",                   \
         l.t == T_BAD ? ")" : "")

    next(&l);
    if (l.t != T_LBRACE)
        return SYNTAX("expected '{'");
    next(&l);
    while (l.t != T_RBRACE) {
        if (l.t != T_STR)
            return SYNTAX("expected a quoted key or '}'");
        const char *key = (const char *)l.s + l.start;
        uint64_t klen = l.len;
        int field;
        if (klen == 5 && memcmp(key, "descr", 5) == 0)
            field = FIELD_DESCR;
        else if (klen == 13 && memcmp(key, "fortran_order", 13) == 0)
            field = FIELD_FORTRAN;
        else if (klen == 5 && memcmp(key, "shape", 5) == 0)
            field = FIELD_SHAPE;
        else
            return errbuf_set(err, errcap, CXLP_EBADINPUT,
                        "%s: header dict at byte offset %llu: unknown key '%.*s' "
                        "(only 'descr', 'fortran_order', 'shape')", name, AT(l),
                        (int)MIN(klen, 40), key);
        if (seen & field)
            return errbuf_set(err, errcap, CXLP_EBADINPUT,
                        "%s: header dict at byte offset %llu: key '%.*s' appears twice",
                        name, AT(l), (int)klen, key);
        seen |= field;
        next(&l);
        if (l.t != T_COLON)
            return SYNTAX("expected ':' after a key");
        next(&l);
        if (field == FIELD_DESCR) {
            if (l.t == T_STR) {
                if (l.len >= sizeof descr)
                    return errbuf_set(err, errcap, CXLP_EUNSUPPORTED,
                                "%s: field 'descr': value '%.40s...' is not supported "
                                "(numeric dtypes only)", name,
                                (const char *)l.s + l.start);
                memcpy(descr, l.s + l.start, l.len);
                descr[l.len] = '\0';
                next(&l);
            } else if (l.t == T_LBRACK) {
                descr_list = 1;
                if (skip_value(&l, 0) < 0)
                    return SYNTAX("field 'descr': malformed list");
            } else {
                return SYNTAX("field 'descr': expected a string or a list");
            }
        } else if (field == FIELD_FORTRAN) {
            if (l.t != T_TRUE && l.t != T_FALSE)
                return SYNTAX("field 'fortran_order': expected True or False");
            fortran = l.t == T_TRUE;
            next(&l);
        } else {
            if (l.t != T_LPAREN)
                return SYNTAX("field 'shape': expected a tuple");
            next(&l);
            int trailing_comma = 0;
            while (l.t != T_RPAREN) {
                if (l.t != T_INT)
                    return SYNTAX("field 'shape': expected a non-negative integer");
                if (l.overflow)
                    return errbuf_set(err, errcap, CXLP_EBADINPUT,
                                "%s: field 'shape' at byte offset %llu: axis %d does not "
                                "fit 64 bits", name, AT(l), h.ndim);
                if (h.ndim >= NPY_MAX_NDIM)
                    return errbuf_set(err, errcap, CXLP_EBADINPUT,
                                "%s: field 'shape': more than %d axes", name,
                                NPY_MAX_NDIM);
                h.shape[h.ndim++] = l.ival;
                next(&l);
                trailing_comma = 0;
                if (l.t == T_COMMA) {
                    trailing_comma = 1;
                    next(&l);
                } else if (l.t != T_RPAREN) {
                    return SYNTAX("field 'shape': expected ',' or ')'");
                }
            }
            /* (3) is the integer 3 in Python, not a tuple */
            if (h.ndim == 1 && !trailing_comma)
                return SYNTAX("field 'shape': a 1-tuple needs a trailing comma, (n,)");
            next(&l);
        }
        if (l.t == T_COMMA)
            next(&l);
        else if (l.t != T_RBRACE)
            return SYNTAX(field == FIELD_DESCR     ? "after field 'descr': expected ',' or '}'"
                          : field == FIELD_SHAPE ? "after field 'shape': expected ',' or '}'"
                                                 : "after field 'fortran_order': expected "
                                                   "',' or '}'");
    }
    next(&l);
    if (l.t != T_END)
        return SYNTAX("text after the closing '}' (only spaces and a newline may follow)");
    if (!(seen & FIELD_DESCR))
        return errbuf_set(err, errcap, CXLP_EBADINPUT, "%s: header dict: field 'descr' missing",
                    name);
    if (!(seen & FIELD_FORTRAN))
        return errbuf_set(err, errcap, CXLP_EBADINPUT,
                    "%s: header dict: field 'fortran_order' missing", name);
    if (!(seen & FIELD_SHAPE))
        return errbuf_set(err, errcap, CXLP_EBADINPUT, "%s: header dict: field 'shape' missing",
                    name);
#undef SYNTAX
#undef AT

    /* semantics */
    if (descr_list)
        return errbuf_set(err, errcap, CXLP_EUNSUPPORTED,
                    "%s: field 'descr': a structured dtype (list of fields) is not "
                    "supported; numeric dtypes only", name);
    const char *why;
    h.dtype = descr_dtype(descr, strlen(descr), &h.itemsize, &why);
    if (h.dtype < 0)
        return errbuf_set(err, errcap, CXLP_EUNSUPPORTED,
                    "%s: field 'descr': value '%s' is not supported (%s); numeric "
                    "little-endian dtypes only: |u1 |i1 |b1 <u2 <i2 <u4 <i4 <u8 <i8 "
                    "<f2 <f4 <f8", name, descr, why);
    if (fortran)
        return errbuf_set(err, errcap, CXLP_EUNSUPPORTED,
                    "%s: field 'fortran_order': value True is not supported (C order "
                    "only; save with np.ascontiguousarray)", name);
    char shape[160];
    format_shape(&h, shape, sizeof shape);
    if (h.ndim > CXLP_MAX_DIMS)
        return errbuf_set(err, errcap, CXLP_EUNSUPPORTED,
                    "%s: field 'shape': %s gives records of %d axes, at most %d are "
                    "supported (reshape before saving)", name, shape, h.ndim - 1,
                    CXLP_MAX_DIMS - 1);
    uint64_t rec = (uint64_t)h.itemsize;
    for (int i = 1; i < h.ndim; i++)
        if (mul_overflow_u64(rec, h.shape[i], &rec))
            return errbuf_set(err, errcap, CXLP_EBADINPUT,
                        "%s: field 'shape': %s: record size overflows 64 bits", name,
                        shape);
    h.record_bytes = rec;
    h.n_records = h.ndim ? h.shape[0] : 1;
    if (mul_overflow_u64(h.n_records, h.record_bytes, &h.data_bytes))
        return errbuf_set(err, errcap, CXLP_EBADINPUT,
                    "%s: field 'shape': %s: data size overflows 64 bits", name, shape);
    if (h.record_bytes == 0)
        return errbuf_set(err, errcap, CXLP_EUNSUPPORTED,
                    "%s: field 'shape': %s gives records of 0 bytes", name, shape);
    *out = h;
    return 0;
}

int npy_check_size(const struct npy_header *h, uint64_t file_size, const char *name,
                   char *err, size_t errcap)
{
    char shape[160];
    format_shape(h, shape, sizeof shape);
    if (file_size < h->data_offset)
        return errbuf_set(err, errcap, CXLP_EBADINPUT,
                    "%s: file is %llu bytes, shorter than its %llu-byte header", name,
                    (unsigned long long)file_size, (unsigned long long)h->data_offset);
    uint64_t actual = file_size - h->data_offset;
    if (actual != h->data_bytes)
        return errbuf_set(err, errcap, CXLP_EBADINPUT,
                    "%s: data is %llu bytes at byte offset %llu, but 'shape' %s x "
                    "itemsize %d ('descr' %s) needs %llu bytes", name,
                    (unsigned long long)actual, (unsigned long long)h->data_offset, shape,
                    h->itemsize, npy_descr(h->dtype), (unsigned long long)h->data_bytes);
    return 0;
}
