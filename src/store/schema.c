/*
 * schema.c - dataset names and schemas: the checks both the writer (before
 * anything is reserved) and the reader (the catalog is untrusted) apply.
 *
 * Invariants of a normalized schema:
 *   1 <= n_fields <= CXLP_MAX_FIELDS, field names 1..31 bytes and distinct
 *   a field is variable-length (VAR) iff ndim == 1 && shape[0] == 0;
 *     otherwise every shape[d] > 0 for d < ndim, shape[d] == 0 beyond
 *   str fields are VAR
 *   fixed == 1 iff no field is VAR
 *   fixed: fields[k].offset == sum of sizes of fields[0..k),
 *          record_size == sum of all field sizes > 0,
 *          size(field) = dtype_size * prod(shape[0..ndim))
 *   var:   record_size == 0, every offset == 0
 * All products and sums are overflow-checked: a schema read from a corrupt
 * catalog cannot make a consumer compute a wrapped size. The one legacy
 * spelling (fixed == 0, one field of ndim 0: how "a variable-length record"
 * was said before fields could be mixed) normalizes to the VAR form.
 */
#include <stdio.h>
#include <string.h>

#include "store/store.h"

int store_name_check(const char *name, char *err, size_t errlen)
{
    if (!name) {
        snprintf(err, errlen, "dataset name is NULL");
        return CXLP_EARG;
    }
    size_t n = strnlen(name, CXLP_NAME_MAX);
    if (n == 0 || n >= CXLP_NAME_MAX) {
        snprintf(err, errlen, "dataset name must be 1..%d bytes", CXLP_NAME_MAX - 1);
        return CXLP_EARG;
    }
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0) {
        snprintf(err, errlen, "dataset name \"%s\" is not allowed (it names a directory "
                 "wherever datasets become paths)", name);
        return CXLP_EARG;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)name[i];
        if (c < 0x20 || c > 0x7e || c == '/') {
            snprintf(err, errlen, "dataset name \"%.*s\": byte %zu (0x%02x) is not allowed "
                     "(printable ASCII without '/')", (int)n, name, i, c);
            return CXLP_EARG;
        }
    }
    return 0;
}

static int field_name_ok(const char *s)
{
    size_t n = strnlen(s, 32);
    return n > 0 && n < 32;
}

int schema_normalize(const struct cxlp_schema *in, struct cxlp_schema *out,
                     char *err, size_t errlen)
{
    struct cxlp_schema s;
    if (!in) {
        snprintf(err, errlen, "schema is NULL");
        return CXLP_EARG;
    }
    memcpy(&s, in, sizeof s);
    if (s.fixed != 0 && s.fixed != 1) {
        snprintf(err, errlen, "schema.fixed is %d, must be 0 or 1", s.fixed);
        return CXLP_EARG;
    }
    if (s.n_fields < 1 || s.n_fields > CXLP_MAX_FIELDS) {
        snprintf(err, errlen, "schema.n_fields is %u: a schema has 1..%d fields", s.n_fields,
                 CXLP_MAX_FIELDS);
        return CXLP_EARG;
    }
    if (!s.fixed && s.n_fields == 1 && s.fields[0].ndim == 0) { /* legacy spelling */
        s.fields[0].ndim = 1;
        s.fields[0].shape[0] = 0;
    }
    uint64_t off = 0;
    uint32_t n_var = 0;
    for (uint32_t k = 0; k < s.n_fields; k++) {
        struct cxlp_field *f = &s.fields[k];
        if (!field_name_ok(f->name)) {
            snprintf(err, errlen, "schema field %u: name must be 1..31 bytes", k);
            return CXLP_EARG;
        }
        for (uint32_t j = 0; j < k; j++)
            if (strncmp(s.fields[j].name, f->name, 32) == 0) {
                snprintf(err, errlen, "schema fields %u and %u are both named '%.31s'", j, k,
                         f->name);
                return CXLP_EARG;
            }
        if (cxlp_dtype_size(f->dtype) < 0) {
            snprintf(err, errlen, "schema field %u (%.31s): unknown dtype %d", k, f->name, f->dtype);
            return CXLP_EARG;
        }
        if (f->ndim < 0 || f->ndim > CXLP_MAX_DIMS) {
            snprintf(err, errlen, "schema field %u (%.31s): ndim %d (0..%d)", k, f->name, f->ndim,
                     CXLP_MAX_DIMS);
            return CXLP_EARG;
        }
        for (int d = f->ndim; d < CXLP_MAX_DIMS; d++)
            f->shape[d] = 0;
        int var = f->ndim == 1 && f->shape[0] == 0;
        if (f->dtype == CXLP_DT_STR && !var) {
            snprintf(err, errlen, "schema field %u (%.31s): str fields are variable-length "
                     "(ndim 1, shape[0] 0)", k, f->name);
            return CXLP_EARG;
        }
        if (var) {
            n_var++;
            f->offset = 0;
            continue;
        }
        uint64_t size = (uint64_t)cxlp_dtype_size(f->dtype);
        for (int d = 0; d < f->ndim; d++) {
            if (f->shape[d] == 0 || mul_overflow_u64(size, f->shape[d], &size)) {
                snprintf(err, errlen, "schema field %u (%.31s): shape[%d] = %llu is zero or "
                         "overflows the record size (only a 1-D field may have a "
                         "variable length)", k, f->name, d, (unsigned long long)f->shape[d]);
                return CXLP_EARG;
            }
        }
        if (!s.fixed) {
            f->offset = 0;
            continue;
        }
        if (f->offset != off && !(f->offset == 0 && k > 0)) {
            snprintf(err, errlen, "schema field %u (%.31s): offset %llu, fields are back to back "
                     "so it must be %llu", k, f->name, (unsigned long long)f->offset,
                     (unsigned long long)off);
            return CXLP_EARG;
        }
        f->offset = off;
        if (add_overflow_u64(off, size, &off)) {
            snprintf(err, errlen, "schema field %u (%.31s): record size overflows", k, f->name);
            return CXLP_EARG;
        }
    }
    if (s.fixed && n_var) {
        snprintf(err, errlen, "schema.fixed is 1 but %u field%s variable-length", n_var,
                 n_var == 1 ? " is" : "s are");
        return CXLP_EARG;
    }
    if (!s.fixed && !n_var) {
        snprintf(err, errlen, "schema.fixed is 0 but no field (%.31s%s) is variable-length "
                 "(ndim 1, shape[0] 0)", s.fields[0].name, s.n_fields > 1 ? ", ..." : "");
        return CXLP_EARG;
    }
    if (s.fixed) {
        if (s.record_size != 0 && s.record_size != off) {
            snprintf(err, errlen, "schema.record_size %llu differs from the fields' total %llu",
                     (unsigned long long)s.record_size, (unsigned long long)off);
            return CXLP_EARG;
        }
        s.record_size = off;
    } else {
        s.record_size = 0;
    }
    for (uint32_t k = s.n_fields; k < CXLP_MAX_FIELDS; k++)
        memset(&s.fields[k], 0, sizeof s.fields[k]);
    memcpy(out, &s, sizeof s);
    return 0;
}

uint64_t schema_unit(const struct cxlp_schema *s)
{
    return s->fixed ? s->record_size : (uint64_t)cxlp_dtype_size(s->fields[0].dtype);
}

uint64_t schema_field_size(const struct cxlp_field *f)
{
    if (CXLP_FIELD_VAR(f))
        return 0;
    uint64_t size = (uint64_t)cxlp_dtype_size(f->dtype);
    for (int d = 0; d < f->ndim; d++)
        size *= f->shape[d]; /* no overflow in a normalized schema */
    return size;
}

int cxlp_schema_field(const struct cxlp_schema *s, const char *name)
{
    if (!s || !name)
        return -1;
    for (uint32_t k = 0; k < s->n_fields && k < CXLP_MAX_FIELDS; k++)
        if (strncmp(s->fields[k].name, name, sizeof s->fields[k].name) == 0)
            return (int)k;
    return -1;
}

/* UTF-8 as RFC 3629 defines it (no overlongs, no surrogates, <= U+10FFFF).
 * Written here rather than taken from a library: the checks are a dozen
 * lines, and none of our dependencies (xxHash, libnuma) offers one. Returns
 * the offset of the first bad byte, or len when all are valid. */
uint64_t utf8_check(const uint8_t *p, uint64_t len)
{
    uint64_t i = 0;
    while (i < len) {
        uint8_t c = p[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        uint64_t n;
        uint8_t lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf)
            n = 1;
        else if (c >= 0xe0 && c <= 0xef) {
            n = 2;
            if (c == 0xe0)
                lo = 0xa0;
            else if (c == 0xed)
                hi = 0x9f;
        } else if (c >= 0xf0 && c <= 0xf4) {
            n = 3;
            if (c == 0xf0)
                lo = 0x90;
            else if (c == 0xf4)
                hi = 0x8f;
        } else {
            return i;
        }
        if (len - i <= n)
            return i;
        if (p[i + 1] < lo || p[i + 1] > hi)
            return i;
        for (uint64_t k = 2; k <= n; k++)
            if ((p[i + k] & 0xc0) != 0x80)
                return i;
        i += n + 1;
    }
    return len;
}
