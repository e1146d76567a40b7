/*
 * json.h - a small reader of JSON text (RFC 8259) into a tree, for the
 * simulator's configuration files (config.c): untrusted bytes, so every
 * read is bounds-checked, nesting is limited and every failure says where
 * (line and column).
 *
 * Rejected: libjansson (Debian has it, but the wheel links only glibc, and
 * a configuration reader needs about 300 lines); a SAX-style reader (the
 * configuration is walked by key, more than once: presets, then the file).
 */
#ifndef CXLP_SIM_JSON_H
#define CXLP_SIM_JSON_H

#include <stddef.h>
#include <stdint.h>

#define JSON_MAX_DEPTH 32

enum { JSON_NULL, JSON_BOOL, JSON_NUM, JSON_STR, JSON_ARR, JSON_OBJ };

struct json {
    int type;
    int line;                /* where the value starts (1-based) */
    int b;                   /* JSON_BOOL */
    double num;              /* JSON_NUM */
    char *str;               /* JSON_STR: NUL-terminated (an embedded NUL is refused) */
    size_t n;                /* JSON_ARR, JSON_OBJ: members */
    struct json *kid;        /* n values */
    char **key;              /* JSON_OBJ: n keys */
};

/* Parses text[0..len) (no NUL needed) into *out (free with json_free).
 * 0, or -1 with a message "line L, column C: what" in err. Duplicate keys
 * in one object are refused. */
int json_parse(const char *text, size_t len, struct json **out, char *err, size_t errlen);
void json_free(struct json *j);
/* The member of object o named key, or NULL. */
const struct json *json_get(const struct json *o, const char *key);

#endif
