/*
 * token.c - the shared secret of remote pools, and the addresses they are
 * reached at. Built with or without UCX (a build without it still refuses
 * a bad token file the same way before saying it has no UCX).
 *
 * The token file is held to what ssh holds a private key to: a regular
 * file of this user that no one else may read, since anyone who reads it
 * may read every dataset of the served pool. Rejected: the token on the
 * command line (visible in /proc/PID/cmdline to every user) or in the
 * environment (inherited by every child).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "net/metrics.h"
#include "net/net.h"

int net_token_read(const char *path, uint8_t *tok, size_t *len, char *err, size_t errlen)
{
    if (!path || !*path)
        return errbuf_set(err, errlen, CXLP_EARG, "no token file (--token-file F: a file of "
                          "mode 0600 holding the shared secret)");
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0)
        return errbuf_set(err, errlen, errno == ELOOP ? CXLP_EARG : -errno,
                          "token file %s: %s", path,
                          errno == ELOOP ? "a symbolic link" : strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st))
        rc = errbuf_set(err, errlen, -errno, "token file %s: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        rc = errbuf_set(err, errlen, CXLP_EARG, "token file %s: not a regular file", path);
    else if (st.st_uid != geteuid())
        rc = errbuf_set(err, errlen, CXLP_EARG, "token file %s: owned by uid %u, not by this "
                        "user (uid %u)", path, (unsigned)st.st_uid, (unsigned)geteuid());
    else if (st.st_mode & 077)
        rc = errbuf_set(err, errlen, CXLP_EARG, "token file %s: mode %04o lets group or others "
                        "access it (chmod 600)", path, (unsigned)(st.st_mode & 07777));
    if (rc) {
        close(fd);
        return rc;
    }
    uint8_t buf[WIRE_TOKEN_MAX + 3];
    size_t n = 0;
    for (;;) {
        ssize_t k = read(fd, buf + n, sizeof buf - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0) {
            rc = errbuf_set(err, errlen, -errno, "token file %s: %s", path, strerror(errno));
            break;
        }
        if (k == 0)
            break;
        n += (size_t)k;
        if (n == sizeof buf)
            break;
    }
    close(fd);
    if (rc)
        return rc;
    if (n && buf[n - 1] == '\n')
        n--;
    if (n && buf[n - 1] == '\r')
        n--;
    if (n == 0 || n > WIRE_TOKEN_MAX)
        return errbuf_set(err, errlen, CXLP_EARG, "token file %s: %s", path,
                          n ? "longer than 256 bytes" : "empty");
    memcpy(tok, buf, n);
    *len = n;
    return 0;
}

static int parse_port(const char *s, int min, int *port)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < min || v > 65535 || s[0] == '+' || s[0] == '-' ||
        s[0] == ' ')
        return -1;
    *port = (int)v;
    return 0;
}

int net_addr_parse(const char *s, char *host, size_t cap, int *port, char *err, size_t errlen)
{
    const char *colon = s ? strrchr(s, ':') : NULL;
    if (!colon || colon == s || (size_t)(colon - s) >= cap || parse_port(colon + 1, 0, port))
        return errbuf_set(err, errlen, CXLP_EARG, "address '%s': expected ADDR:PORT, e.g. "
                          "0.0.0.0:7300 (PORT 0..65535)", s ? s : "(null)");
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = '\0';
    return 0;
}

int net_url_parse(const char *url, char *host, size_t cap, int *port, char *pool, char *err,
                  size_t errlen)
{
    static const char pre[] = "ucx://";
    if (!url || strncmp(url, pre, sizeof pre - 1))
        return errbuf_set(err, errlen, CXLP_EARG, "url '%s': expected ucx://HOST:PORT/POOL",
                          url ? url : "(null)");
    const char *hp = url + sizeof pre - 1, *slash = strchr(hp, '/');
    char addr[300];
    if (!slash || (size_t)(slash - hp) >= sizeof addr)
        return errbuf_set(err, errlen, CXLP_EARG, "url '%s': expected ucx://HOST:PORT/POOL",
                          url);
    memcpy(addr, hp, (size_t)(slash - hp));
    addr[slash - hp] = '\0';
    size_t pl = strlen(slash + 1);
    if (net_addr_parse(addr, host, cap, port, NULL, 0) || *port == 0)
        return errbuf_set(err, errlen, CXLP_EARG, "url '%s': expected ucx://HOST:PORT/POOL "
                          "(PORT 1..65535)", url);
    if (pl == 0 || pl > WIRE_NAME_MAX)
        return errbuf_set(err, errlen, CXLP_EARG, "url '%s': the pool name is 1..%u bytes", url,
                          WIRE_NAME_MAX);
    memcpy(pool, slash + 1, pl + 1);
    return 0;
}

int net_resolve(const char *host, int port, int passive, struct sockaddr_storage *ss,
                socklen_t *sl, char *err, size_t cap)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM,
                             .ai_flags = passive ? AI_PASSIVE : 0}, *ai;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int g = getaddrinfo(*host ? host : NULL, ps, &hints, &ai);
    if (g)
        return errbuf_set(err, cap, CXLP_EARG, "address %s:%d: %s", host, port, gai_strerror(g));
    memcpy(ss, ai->ai_addr, ai->ai_addrlen);
    *sl = ai->ai_addrlen;
    freeaddrinfo(ai);
    return 0;
}
