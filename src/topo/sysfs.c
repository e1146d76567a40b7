/*
 * sysfs.c - bounded reads of sysfs attribute files and strict parsers for
 * the few formats they use (numbers, kernel lists, meminfo lines).
 *
 * Invariants: a read never stores more than cap bytes (cap - 1 of text plus
 * the NUL); a parser never reads past the NUL; every number is checked for
 * overflow digit by digit; every list id is <= its stated bound before it
 * indexes a bit set. Files are opened relative to one directory descriptor
 * of the sysfs root, so a captured tree and the live /sys take the same path
 * through this code.
 *
 * Rejected: strtoull (accepts leading spaces, signs and "0" octal, and needs
 * errno juggling to see overflow); sscanf for lists (no overflow detection);
 * fopen/fgets (unbounded line lengths, and a FIFO in a damaged tree would
 * block the caller: we open with O_NONBLOCK and insist on a regular file).
 */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "topo/topo.h"

int topo_path(char *out, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, cap, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= cap)
        return -ENAMETOOLONG;
    return 0;
}

long topo_read(int rootfd, const char *rel, char *buf, size_t cap)
{
    if (cap == 0)
        return -EINVAL;
    buf[0] = '\0';
    int fd = openat(rootfd, rel, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return -EINVAL;
    }
    /* sysfs reports st_size 4096 for every attribute: read to EOF instead,
     * one byte past the limit to tell "exactly full" from "too long". */
    size_t len = 0;
    for (;;) {
        char extra;
        char *dst = len < cap - 1 ? buf + len : &extra;
        size_t want = len < cap - 1 ? cap - 1 - len : 1;
        ssize_t n = read(fd, dst, want);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            int rc = -errno;
            close(fd);
            buf[len] = '\0';
            return rc;
        }
        if (n == 0)
            break;
        if (dst == &extra) {
            close(fd);
            buf[len] = '\0';
            return -EFBIG;
        }
        len += (size_t)n;
    }
    close(fd);
    buf[len] = '\0';
    if (memchr(buf, '\0', len))
        return -EINVAL;     /* binary content is not an attribute we know */
    return (long)len;
}

int topo_link_base(int rootfd, const char *rel, char *out, size_t cap)
{
    char target[1024];
    ssize_t n = readlinkat(rootfd, rel, target, sizeof target);
    if (n < 0)
        return -errno;
    if ((size_t)n >= sizeof target)
        return -ENAMETOOLONG;
    target[n] = '\0';
    while (n > 0 && target[n - 1] == '/')
        target[--n] = '\0';
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (!*base)
        return -EINVAL;
    if (strlen(base) >= cap)
        return -ENAMETOOLONG;
    strlcpy0(out, base, cap);
    return 0;
}

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static int only_space(const char *s)
{
    while (is_space(*s))
        s++;
    return *s == '\0';
}

static int hex_val(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decimal digits at *p; advances *p. 0, -EINVAL (no digit), -ERANGE. */
static int scan_dec(const char **p, uint64_t *out)
{
    const char *s = *p;
    uint64_t v = 0;
    if (*s < '0' || *s > '9')
        return -EINVAL;
    while (*s >= '0' && *s <= '9') {
        if (mul_overflow_u64(v, 10, &v) || add_overflow_u64(v, (uint64_t)(*s - '0'), &v))
            return -ERANGE;
        s++;
    }
    *p = s;
    *out = v;
    return 0;
}

int topo_parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        s += 2;
        if (hex_val(*s) < 0)
            return -EINVAL;
        for (; hex_val(*s) >= 0; s++) {
            if (v >> 60)
                return -ERANGE;
            v = v << 4 | (uint64_t)hex_val(*s);
        }
    } else {
        int rc = scan_dec(&s, &v);
        if (rc)
            return rc;
    }
    if (!only_space(s))
        return -EINVAL;
    *out = v;
    return 0;
}

int topo_parse_int(const char *s, long min, long max, long *out)
{
    int neg = 0;
    if (*s == '-') {
        neg = 1;
        s++;
    }
    uint64_t v;
    int rc = scan_dec(&s, &v);
    if (rc)
        return rc;
    if (!only_space(s))
        return -EINVAL;
    if (v > (uint64_t)LONG_MAX)
        return -ERANGE;
    long x = neg ? -(long)v : (long)v;
    if (x < min || x > max)
        return -ERANGE;
    *out = x;
    return 0;
}

int topo_parse_list(const char *s, uint64_t maxid, struct topo_nodeset *set, uint64_t *count)
{
    CXLP_ASSERT(!set || maxid <= TOPO_MAX_NODE);
    uint64_t total = 0;
    if (only_space(s)) {
        *count = 0;
        return 0;
    }
    for (;;) {
        uint64_t a, b;
        int rc = scan_dec(&s, &a);
        if (rc)
            return rc;
        b = a;
        if (*s == '-') {
            s++;
            rc = scan_dec(&s, &b);
            if (rc)
                return rc;
        }
        if (a > maxid || b > maxid)
            return -ERANGE;
        if (a > b)
            return -EINVAL;
        if (add_overflow_u64(total, b - a + 1, &total))
            return -ERANGE;
        if (set)
            for (uint64_t i = a; i <= b; i++)
                set->bits[i / 8] |= (uint8_t)(1u << (i % 8));
        if (*s == ',') {
            s++;
            continue;
        }
        if (!only_space(s))
            return -EINVAL;
        break;
    }
    *count = total;
    return 0;
}

int topo_parse_meminfo(const char *s, uint64_t *bytes)
{
    static const char key[] = "MemTotal:";
    for (const char *line = s; *line;) {
        const char *eol = strchr(line, '\n');
        size_t len = eol ? (size_t)(eol - line) : strlen(line);
        /* "Node N MemTotal:   X kB": the key follows the node prefix */
        const char *k = memmem(line, len, key, sizeof key - 1);
        if (k) {
            const char *p = k + sizeof key - 1;
            while (*p == ' ' || *p == '\t')
                p++;
            uint64_t kb;
            int rc = scan_dec(&p, &kb);
            if (rc)
                return rc;
            while (*p == ' ' || *p == '\t')
                p++;
            if (strncmp(p, "kB", 2) != 0)
                return -EINVAL;
            p += 2;
            if (*p != '\n' && *p != '\0' && !is_space(*p))
                return -EINVAL;
            if (mul_overflow_u64(kb, 1024, bytes))
                return -ERANGE;
            return 0;
        }
        if (!eol)
            break;
        line = eol + 1;
    }
    return -ENOENT;
}

int topo_parse_name_id(const char *name, const char *prefix, uint64_t maxid, uint64_t *id)
{
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) != 0)
        return -EINVAL;
    const char *p = name + n;
    uint64_t v;
    if (scan_dec(&p, &v) || *p != '\0' || v > maxid)
        return -EINVAL;
    /* "node01" is not a name the kernel makes */
    if (name[n] == '0' && name[n + 1] != '\0')
        return -EINVAL;
    *id = v;
    return 0;
}

int topo_natural_cmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (*a >= '0' && *a <= '9' && *b >= '0' && *b <= '9') {
            const char *ea = a, *eb = b;
            while (*a == '0')
                a++;
            while (*b == '0')
                b++;
            for (ea = a; *ea >= '0' && *ea <= '9'; ea++)
                ;
            for (eb = b; *eb >= '0' && *eb <= '9'; eb++)
                ;
            if (ea - a != eb - b)
                return ea - a < eb - b ? -1 : 1;
            int c = strncmp(a, b, (size_t)(ea - a));
            if (c)
                return c;
            a = ea;
            b = eb;
            continue;
        }
        if (*a != *b)
            return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return (unsigned char)*a - (unsigned char)*b;
}
