/*
 * json.c - the JSON reader (json.h): recursive descent over a bounded
 * buffer. Invariants: p <= end at every step; depth <= JSON_MAX_DEPTH;
 * every allocation is checked and freed on any failure (the partial tree
 * is freed by its root).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim/json.h"

struct rd {
    const char *s, *p, *end;
    int line;
    const char *bol;         /* where the current line begins */
    char *err;
    size_t errlen;
};

static int fail(struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct rd *r, const char *fmt, ...)
{
    char msg[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (r->err && r->errlen)
        snprintf(r->err, r->errlen, "line %d, column %d: %s", r->line,
                 (int)(r->p - r->bol) + 1, msg);
    return -1;
}

static void ws(struct rd *r)
{
    while (r->p < r->end) {
        char c = *r->p;
        if (c == '\n') {
            r->line++;
            r->bol = r->p + 1;
        } else if (c != ' ' && c != '\t' && c != '\r') {
            return;
        }
        r->p++;
    }
}

static int lit(struct rd *r, const char *w)
{
    size_t n = strlen(w);
    if ((size_t)(r->end - r->p) < n || memcmp(r->p, w, n) != 0)
        return fail(r, "expected %s", w);
    r->p += n;
    return 0;
}

static int hex4(struct rd *r, unsigned *v)
{
    *v = 0;
    if (r->end - r->p < 4)
        return fail(r, "short \\u escape");
    for (int i = 0; i < 4; i++) {
        char c = *r->p++;
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                     : c >= 'A' && c <= 'F' ? (unsigned)(c - 'A' + 10)
                                            : 16u;
        if (d == 16)
            return fail(r, "bad hex digit in \\u escape");
        *v = *v << 4 | d;
    }
    return 0;
}

/* A string at r->p (after its opening quote) into a malloc'd UTF-8 copy. */
static int str(struct rd *r, char **out)
{
    /* the decoded string is never longer than its source text */
    const char *q = r->p;
    while (q < r->end && *q != '"') {
        if (*q == '\\')
            q++;
        q++;
    }
    if (q >= r->end)
        return fail(r, "unterminated string");
    char *o = malloc((size_t)(q - r->p) + 1), *w = o;
    if (!o)
        return fail(r, "out of memory");
    while (*r->p != '"') {
        unsigned char c = (unsigned char)*r->p++;
        if (c < 0x20) {
            free(o);
            return fail(r, "control character in a string");
        }
        if (c != '\\') {
            *w++ = (char)c;
            continue;
        }
        c = (unsigned char)*r->p++;
        unsigned u;
        switch (c) {
        case '"': case '\\': case '/': *w++ = (char)c; break;
        case 'b': *w++ = '\b'; break;
        case 'f': *w++ = '\f'; break;
        case 'n': *w++ = '\n'; break;
        case 'r': *w++ = '\r'; break;
        case 't': *w++ = '\t'; break;
        case 'u':
            if (hex4(r, &u)) {
                free(o);
                return -1;
            }
            if (u >= 0xd800 && u < 0xdc00) { /* a high surrogate: its low one must follow */
                unsigned lo;
                if (r->end - r->p < 2 || r->p[0] != '\\' || r->p[1] != 'u') {
                    free(o);
                    return fail(r, "lone surrogate in \\u escape");
                }
                r->p += 2;
                if (hex4(r, &lo) || lo < 0xdc00 || lo > 0xdfff) {
                    free(o);
                    return fail(r, "bad surrogate pair");
                }
                u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
            } else if (u >= 0xdc00 && u < 0xe000) {
                free(o);
                return fail(r, "lone surrogate in \\u escape");
            }
            if (u == 0) {
                free(o);
                return fail(r, "\\u0000 in a string");
            }
            /* 6 source bytes (12 for a pair) give at most 4 bytes */
            if (u < 0x80) {
                *w++ = (char)u;
            } else if (u < 0x800) {
                *w++ = (char)(0xc0 | u >> 6);
                *w++ = (char)(0x80 | (u & 0x3f));
            } else if (u < 0x10000) {
                *w++ = (char)(0xe0 | u >> 12);
                *w++ = (char)(0x80 | (u >> 6 & 0x3f));
                *w++ = (char)(0x80 | (u & 0x3f));
            } else {
                *w++ = (char)(0xf0 | u >> 18);
                *w++ = (char)(0x80 | (u >> 12 & 0x3f));
                *w++ = (char)(0x80 | (u >> 6 & 0x3f));
                *w++ = (char)(0x80 | (u & 0x3f));
            }
            break;
        default:
            free(o);
            return fail(r, "bad escape \\%c", c >= 0x20 && c < 0x7f ? c : '?');
        }
    }
    r->p++; /* the closing quote */
    *w = '\0';
    *out = o;
    return 0;
}

static int num(struct rd *r, double *v)
{
    const char *a = r->p;
    if (r->p < r->end && *r->p == '-')
        r->p++;
    if (r->p >= r->end || *r->p < '0' || *r->p > '9')
        return fail(r, "bad number");
    if (*r->p == '0')
        r->p++;
    else
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    if (r->p < r->end && *r->p == '.') {
        r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9')
            return fail(r, "bad number: a digit must follow '.'");
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    }
    if (r->p < r->end && (*r->p == 'e' || *r->p == 'E')) {
        r->p++;
        if (r->p < r->end && (*r->p == '+' || *r->p == '-'))
            r->p++;
        if (r->p >= r->end || *r->p < '0' || *r->p > '9')
            return fail(r, "bad number: a digit must follow the exponent");
        while (r->p < r->end && *r->p >= '0' && *r->p <= '9')
            r->p++;
    }
    char buf[64];
    size_t n = (size_t)(r->p - a);
    if (n >= sizeof buf)
        return fail(r, "number too long");
    memcpy(buf, a, n);
    buf[n] = '\0';
    *v = strtod(buf, NULL);
    return 0;
}

static int value(struct rd *r, struct json *j, int depth);

static int grow(struct json *j, size_t *cap, int obj)
{
    if (j->n < *cap)
        return 0;
    size_t nc = *cap ? *cap * 2 : 4;
    struct json *k = realloc(j->kid, nc * sizeof *k);
    if (!k)
        return -1;
    j->kid = k;
    if (obj) {
        char **ks = realloc(j->key, nc * sizeof *ks);
        if (!ks)
            return -1;
        j->key = ks;
    }
    *cap = nc;
    return 0;
}

static int value(struct rd *r, struct json *j, int depth)
{
    memset(j, 0, sizeof *j);
    ws(r);
    j->line = r->line;
    if (r->p >= r->end)
        return fail(r, "unexpected end of text");
    if (depth > JSON_MAX_DEPTH)
        return fail(r, "nested deeper than %d", JSON_MAX_DEPTH);
    char c = *r->p;
    if (c == '{' || c == '[') {
        int obj = c == '{';
        char close = obj ? '}' : ']';
        j->type = obj ? JSON_OBJ : JSON_ARR;
        r->p++;
        size_t cap = 0;
        ws(r);
        if (r->p < r->end && *r->p == close) {
            r->p++;
            return 0;
        }
        for (;;) {
            if (grow(j, &cap, obj))
                return fail(r, "out of memory");
            char *key = NULL;
            if (obj) {
                ws(r);
                if (r->p >= r->end || *r->p != '"')
                    return fail(r, "expected a key string");
                r->p++;
                if (str(r, &key))
                    return -1;
                for (size_t i = 0; i < j->n; i++)
                    if (strcmp(j->key[i], key) == 0) {
                        int rc = fail(r, "duplicate key \"%.60s\"", key);
                        free(key);
                        return rc;
                    }
                ws(r);
                if (r->p >= r->end || *r->p != ':') {
                    free(key);
                    return fail(r, "expected ':'");
                }
                r->p++;
                j->key[j->n] = key;
            }
            /* counted before parsing, so that a failed member is freed too */
            j->n++;
            if (value(r, &j->kid[j->n - 1], depth + 1))
                return -1;
            ws(r);
            if (r->p < r->end && *r->p == ',') {
                r->p++;
                continue;
            }
            if (r->p < r->end && *r->p == close) {
                r->p++;
                return 0;
            }
            return fail(r, "expected ',' or '%c'", close);
        }
    }
    if (c == '"') {
        r->p++;
        j->type = JSON_STR;
        return str(r, &j->str);
    }
    if (c == 't' || c == 'f') {
        j->type = JSON_BOOL;
        j->b = c == 't';
        return lit(r, c == 't' ? "true" : "false");
    }
    if (c == 'n') {
        j->type = JSON_NULL;
        return lit(r, "null");
    }
    j->type = JSON_NUM;
    return num(r, &j->num);
}

static void clear(struct json *j)
{
    for (size_t i = 0; i < j->n; i++) {
        clear(&j->kid[i]);
        if (j->key)
            free(j->key[i]);
    }
    free(j->kid);
    free(j->key);
    free(j->str);
}

void json_free(struct json *j)
{
    if (!j)
        return;
    clear(j);
    free(j);
}

int json_parse(const char *text, size_t len, struct json **out, char *err, size_t errlen)
{
    struct rd r = {text, text, text + len, 1, text, err, errlen};
    struct json *j = calloc(1, sizeof *j);
    if (!j)
        return fail(&r, "out of memory");
    int rc = value(&r, j, 0);
    if (!rc) {
        ws(&r);
        if (r.p != r.end)
            rc = fail(&r, "text after the value");
    }
    if (rc) {
        json_free(j);
        return -1;
    }
    *out = j;
    return 0;
}

const struct json *json_get(const struct json *o, const char *key)
{
    if (!o || o->type != JSON_OBJ)
        return NULL;
    for (size_t i = 0; i < o->n; i++)
        if (strcmp(o->key[i], key) == 0)
            return &o->kid[i];
    return NULL;
}
