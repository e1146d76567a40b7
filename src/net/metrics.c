/*
 * metrics.c - `cxlpool serve`'s counters as Prometheus text, answered on a
 * TCP port of its own by a thread of its own: a dozen lines of HTTP/1.0
 * (read one request, answer GET /metrics, close). Rejected: libmicrohttpd
 * and the like: no Debian library is worth a dependency for one GET of
 * text, and the UCX worker's thread never waits on an HTTP client.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "common/common.h"
#include "net/metrics.h"

/* Upper bounds of the latency buckets, in seconds. */
static const double lat_bounds[METRICS_BOUNDS] = {0.0001, 0.00025, 0.0005, 0.001,
                                                  0.0025, 0.005,   0.01,   0.025,
                                                  0.05,   0.1,     0.25,   1.0};

void metrics_latency(struct metrics *m, uint64_t ns)
{
    size_t b = 0;
    while (b < METRICS_BOUNDS && (double)ns / 1e9 > lat_bounds[b])
        b++;
    metrics_add(&m->lat_bucket[b], 1);
    metrics_add(&m->lat_ns_sum, ns);
    metrics_add(&m->lat_count, 1);
}

size_t metrics_text(struct metrics *m, char *buf, size_t cap)
{
    size_t n = 0;
#define P(...) n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, __VA_ARGS__)
#define L(x) (unsigned long long)atomic_load_explicit(&(x), memory_order_relaxed)
    P("# HELP cxlpool_serve_bytes_total Shard bytes sent to clients.\n"
      "# TYPE cxlpool_serve_bytes_total counter\ncxlpool_serve_bytes_total %llu\n", L(m->bytes));
    P("# HELP cxlpool_serve_home_bytes_total Shard bytes the server read from its pool's "
      "home (a staged tier: nvme) to answer reads; the rest came from memory.\n"
      "# TYPE cxlpool_serve_home_bytes_total counter\ncxlpool_serve_home_bytes_total %llu\n",
      L(m->home_bytes));
    P("# HELP cxlpool_serve_requests_total Requests received, by operation.\n"
      "# TYPE cxlpool_serve_requests_total counter\n");
    static const char *ops[] = {"malformed", "hello", "list", "shards", "read", "meta", "docs",
                                "held"};
    _Static_assert(sizeof ops / sizeof ops[0] == WIRE_OP_LAST + 1, "a name per op");
    for (int i = 0; i <= WIRE_OP_LAST; i++)
        P("cxlpool_serve_requests_total{op=\"%s\"} %llu\n", ops[i], L(m->requests[i]));
    P("# HELP cxlpool_serve_errors_total Requests answered with an error, or not answered.\n"
      "# TYPE cxlpool_serve_errors_total counter\ncxlpool_serve_errors_total %llu\n",
      L(m->errors));
    P("# HELP cxlpool_serve_refused_total Clients refused (token, pool, first message).\n"
      "# TYPE cxlpool_serve_refused_total counter\ncxlpool_serve_refused_total %llu\n",
      L(m->refused));
    P("# HELP cxlpool_serve_clients Clients connected now.\n"
      "# TYPE cxlpool_serve_clients gauge\ncxlpool_serve_clients %llu\n", L(m->clients));
    P("# HELP cxlpool_serve_clients_total Clients that connected.\n"
      "# TYPE cxlpool_serve_clients_total counter\ncxlpool_serve_clients_total %llu\n",
      L(m->clients_total));
    P("# HELP cxlpool_serve_request_seconds From a request's arrival to its reply sent.\n"
      "# TYPE cxlpool_serve_request_seconds histogram\n");
    unsigned long long cum = 0;
    for (size_t b = 0; b <= METRICS_BOUNDS; b++) {
        cum += L(m->lat_bucket[b]);
        if (b < METRICS_BOUNDS)
            P("cxlpool_serve_request_seconds_bucket{le=\"%g\"} %llu\n", lat_bounds[b], cum);
        else
            P("cxlpool_serve_request_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    P("cxlpool_serve_request_seconds_sum %.9f\ncxlpool_serve_request_seconds_count %llu\n",
      (double)L(m->lat_ns_sum) / 1e9, L(m->lat_count));
#undef P
#undef L
    return n;
}

static void *http_main(void *arg)
{
    struct metrics_http *mt = arg;
    while (!atomic_load_explicit(&mt->quit, memory_order_relaxed)) {
        struct pollfd pfd = {.fd = mt->fd, .events = POLLIN};
        if (poll(&pfd, 1, 100) <= 0)
            continue;
        int c = accept4(mt->fd, NULL, NULL, SOCK_CLOEXEC);
        if (c < 0)
            continue;
        struct timeval tv = {.tv_sec = 1};
        setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        char req[1024];
        ssize_t r = recv(c, req, sizeof req - 1, 0);
        if (r > 0) {
            req[r] = '\0';
            static char body[8192];
            size_t bl = 0;
            int ok = strncmp(req, "GET /metrics", 12) == 0 && (req[12] == ' ' || req[12] == '?');
            if (ok)
                bl = metrics_text(mt->m, body, sizeof body);
            else
                bl = (size_t)snprintf(body, sizeof body, "not found: GET /metrics\n");
            if (bl >= sizeof body)
                bl = sizeof body - 1;
            char head[160];
            int hl = snprintf(head, sizeof head,
                              "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4\r\n"
                              "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                              ok ? "200 OK" : "404 Not Found", bl);
            if (send(c, head, (size_t)hl, MSG_NOSIGNAL) == hl)
                (void)!send(c, body, bl, MSG_NOSIGNAL);
        }
        /* a lingering close: the answer is sent before the client's rest
         * of request is read away (closing with unread bytes would reset
         * the connection, and the client could lose the answer) */
        shutdown(c, SHUT_WR);
        for (int i = 0; i < 64 && recv(c, req, sizeof req, 0) > 0; i++)
            ;
        close(c);
    }
    return NULL;
}

int metrics_http_start(struct metrics_http *mt, struct metrics *m, const char *host, int port,
                       char *err, size_t cap)
{
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    mt->m = m;
    mt->fd = -1;
    int rc = net_resolve(host, port, 1, &ss, &sl, err, cap);
    if (rc)
        return rc;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    if (fd < 0)
        return errbuf_set(err, cap, -errno, "metrics socket: %s", strerror(errno));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) || listen(fd, 16)) {
        rc = errbuf_set(err, cap, -errno, "metrics port %s:%d: %s", host, port, strerror(errno));
        close(fd);
        return rc;
    }
    mt->fd = fd;
    if ((rc = pthread_create(&mt->t, NULL, http_main, mt))) {
        close(fd);
        mt->fd = -1;
        return errbuf_set(err, cap, -rc, "metrics thread: %s", strerror(rc));
    }
    return 0;
}

void metrics_http_stop(struct metrics_http *mh)
{
    if (mh->fd < 0)
        return;
    atomic_store_explicit(&mh->quit, 1, memory_order_relaxed);
    pthread_join(mh->t, NULL);
    close(mh->fd);
    mh->fd = -1;
}
