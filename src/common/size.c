/*
 * size.c - byte sizes as people write them ("512G", "1.5GiB", "64MB"), for
 * the CLI and the Python layer alike, so both accept exactly the same text.
 *
 * Grammar: DIGITS [ "." DIGITS ] [ UNIT [ "B" | "iB" ] ], UNIT one of
 * K M G T P (either case). A bare unit or UNIT"iB" is a power of 1024, UNIT"B"
 * a power of 1000; no unit means bytes. A fraction is rounded down to a whole
 * byte. No sign, no whitespace, no exponent: strtoull would skip leading
 * blanks and wrap "-1", strtod would take "1e3", so digits are read here.
 */
#include <stdint.h>
#include <string.h>

#include "common/common.h"

static int bad(const char *s, const char *why)
{
    return seterr(NULL, CXLP_EARG, "size '%s': %s (e.g. 4096, 64K, 1.5G, 2GiB, 1TB)",
                  s ? s : "(null)", why);
}

int cxlp_size_parse(const char *s, uint64_t *out)
{
    if (!s || !out)
        return bad(s, "NULL argument");
    const char *p = s;
    uint64_t whole = 0;
    if (*p < '0' || *p > '9')
        return bad(s, "expected digits first");
    for (; *p >= '0' && *p <= '9'; p++)
        if (__builtin_mul_overflow(whole, 10, &whole) ||
            __builtin_add_overflow(whole, (uint64_t)(*p - '0'), &whole))
            return bad(s, "does not fit in 64 bits");
    double frac = 0, scale = 0.1;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return bad(s, "expected digits after '.'");
        for (; *p >= '0' && *p <= '9'; p++, scale /= 10)
            frac += (*p - '0') * scale;
    }
    uint64_t mult = 1;
    if (*p) {
        static const char units[] = "KMGTP";
        char c = *p >= 'a' && *p <= 'z' ? (char)(*p - 32) : *p;
        const char *u = strchr(units, c);
        if (!u || !c)
            return bad(s, "unknown unit (K, M, G, T, P, with B for powers of 1000)");
        uint64_t base = 1024;
        const char *rest = p + 1;
        if (!strcmp(rest, "B"))
            base = 1000;
        else if (strcmp(rest, "") && strcmp(rest, "iB"))
            return bad(s, "unknown unit (K, M, G, T, P, with B for powers of 1000)");
        for (long k = 0; k <= u - units; k++)
            mult *= base;
    }
    uint64_t v;
    if (__builtin_mul_overflow(whole, mult, &v))
        return bad(s, "does not fit in 64 bits");
    if (frac > 0) {
        double extra = frac * (double)mult;
        if ((double)v + extra >= 18446744073709551615.0)
            return bad(s, "does not fit in 64 bits");
        v += (uint64_t)extra;
    }
    *out = v;
    return 0;
}
