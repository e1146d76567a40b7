/*
 * metrics.h - what `cxlpool serve` counts, and the /metrics responder that
 * shows it in Prometheus text (metrics.c). The server's thread adds; the
 * responder's thread reads: relaxed atomics, since each figure stands
 * alone (a scrape may see bytes of a request whose count it does not yet
 * see, as any Prometheus counter may).
 */
#ifndef CXLP_NET_METRICS_H
#define CXLP_NET_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "net/wire.h"

#define METRICS_BOUNDS 12      /* latency buckets, seconds (metrics.c), and +Inf */

struct metrics {
    _Atomic uint64_t bytes;             /* shard bytes sent */
    _Atomic uint64_t home_bytes;        /* shard bytes read from a staged home tier */
    _Atomic uint64_t requests[WIRE_OP_LAST + 1]; /* by op: 0 malformed, then wire_op */
    _Atomic uint64_t errors, refused, clients, clients_total;
    _Atomic uint64_t lat_count, lat_ns_sum, lat_bucket[METRICS_BOUNDS + 1];
};

static inline void metrics_add(_Atomic uint64_t *x, uint64_t v)
{
    atomic_fetch_add_explicit(x, v, memory_order_relaxed);
}

static inline void metrics_sub(_Atomic uint64_t *x, uint64_t v)
{
    atomic_fetch_sub_explicit(x, v, memory_order_relaxed);
}

/* One request's latency (arrival to reply sent) into the histogram. */
void metrics_latency(struct metrics *m, uint64_t ns);

/* The text of a scrape into buf (cap bytes); returns its length (it may
 * exceed cap: then buf holds a cut text). */
size_t metrics_text(struct metrics *m, char *buf, size_t cap);

/* The responder: a thread answering GET /metrics on host:port. */
struct metrics_http {
    struct metrics *m;
    int fd;                  /* -1: not started */
    _Atomic int quit;
    pthread_t t;
};
/* 0, or an error (the port taken: -EADDRINUSE) with err naming it. */
int metrics_http_start(struct metrics_http *mh, struct metrics *m, const char *host, int port,
                       char *err, size_t cap);
/* Stops and joins the thread (within 100 ms); nothing when not started. */
void metrics_http_stop(struct metrics_http *mh);

/* host:port as an IPv4 socket address ("" host: any). 0 or CXLP_EARG. */
int net_resolve(const char *host, int port, int passive, struct sockaddr_storage *ss,
                socklen_t *sl, char *err, size_t cap);

#endif
