/*
 * schema.c - dataset names and schemas: the checks both the writer (before
 * anything is reserved) and the reader (the catalog is untrusted) apply.
 *
 * Invariants of a normalized schema:
 *   fixed: 1 <= n_fields <= CXLP_MAX_FIELDS,
 *          fields[k].offset == sum of sizes of fields[0..k),
 *          record_size == sum of all field sizes > 0,
 *          size(field) = dtype_size * prod(shape[0..ndim))
 *   var:   n_fields == 1, fields[0].ndim == 0, record_size == 0
 * All products and sums are overflow-checked: a schema read from a corrupt
 * catalog cannot make a consumer compute a wrapped size.
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
    if (s.n_fields < 1 || s.n_fields > CXLP_MAX_FIELDS || (!s.fixed && s.n_fields != 1)) {
        snprintf(err, errlen, "schema.n_fields is %u: %s", s.n_fields,
                 s.fixed ? "fixed-size records need 1..8 fields"
                         : "variable-size records have exactly one field");
        return CXLP_EARG;
    }
    uint64_t off = 0;
    for (uint32_t k = 0; k < s.n_fields; k++) {
        struct cxlp_field *f = &s.fields[k];
        if (!field_name_ok(f->name)) {
            snprintf(err, errlen, "schema field %u: name must be 1..31 bytes", k);
            return CXLP_EARG;
        }
        if (cxlp_dtype_size(f->dtype) < 0) {
            snprintf(err, errlen, "schema field %u (%s): unknown dtype %d", k, f->name, f->dtype);
            return CXLP_EARG;
        }
        if (f->ndim < 0 || f->ndim > CXLP_MAX_DIMS || (!s.fixed && f->ndim != 0)) {
            snprintf(err, errlen, "schema field %u (%s): ndim %d (%s)", k, f->name, f->ndim,
                     s.fixed ? "0..4" : "variable-size records take ndim 0");
            return CXLP_EARG;
        }
        uint64_t size = (uint64_t)cxlp_dtype_size(f->dtype);
        for (int d = 0; d < f->ndim; d++) {
            if (f->shape[d] == 0 || mul_overflow_u64(size, f->shape[d], &size)) {
                snprintf(err, errlen, "schema field %u (%s): shape[%d] = %llu is zero or "
                         "overflows the record size", k, f->name, d,
                         (unsigned long long)f->shape[d]);
                return CXLP_EARG;
            }
        }
        for (int d = f->ndim; d < CXLP_MAX_DIMS; d++)
            f->shape[d] = 0;
        if (!s.fixed) {
            f->offset = 0;
            break;
        }
        if (f->offset != off && !(f->offset == 0 && k > 0)) {
            snprintf(err, errlen, "schema field %u (%s): offset %llu, fields are back to back "
                     "so it must be %llu", k, f->name, (unsigned long long)f->offset,
                     (unsigned long long)off);
            return CXLP_EARG;
        }
        f->offset = off;
        if (add_overflow_u64(off, size, &off)) {
            snprintf(err, errlen, "schema field %u (%s): record size overflows", k, f->name);
            return CXLP_EARG;
        }
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
