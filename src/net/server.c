/*
 * server.c - `cxlpool serve`: a pool's catalog, shard tables and shard
 * bytes, read by other hosts over UCX (docs/remote.md).
 *
 * Glossary
 *   worker    the one ucp worker; this thread progresses it continuously
 *             (wakeup fd, or a poll every 100 ms), which UCX needs over TCP
 *             where it emulates one-sided operations and rendezvous with
 *             active messages handled by the target's progress.
 *   conn      a client: its endpoint, address, whether it presented the
 *             token, and how many replies to it are in flight.
 *   served    a dataset as the server reads it: an open cxlp_store at one
 *             catalog version (the store pins that version's extents), and
 *             how many replies read its bytes now.
 *   held      a pool of tiers: a shard a READ asked for whole, read whole
 *             from its fastest copy (a memory tier's, else the home's)
 *             into private memory and verified there (store_read_private);
 *             the last HELD_MAX shards are kept while replies read them.
 *             A READ of part of a shard no held copy has reads those bytes
 *             alone from the fastest copy (store_read_range), as stored:
 *             a loader staging units of 64 MiB shards through a remote
 *             tier made the server read 26x the dataset from its home when
 *             every such READ read the whole shard (bench/remote_server_
 *             reads.sh), and every reader verifies what it keeps (the
 *             remote tier's copies, cxlp_remote_fetch).
 *
 * Invariants
 *   - a reply of bytes carries [off, off + len) of shard k of a served store
 *     with off + len <= loc[k].len (from the mapping at loc[k].off on a pool
 *     of one tier, else from a held copy of loc[k].len bytes, or a private
 *     buffer of those len bytes read from the shard's copy): every READ
 *     is bounded by the shard it names, after the wire decoder bounded it
 *     by WIRE_READ_MAX;
 *   - a held copy verified before a byte of it is sent, and kept while a
 *     reply reads it (held.refs > 0); at most HELD_LIMIT held, at most
 *     CONN_INFLIGHT replies in flight to one client (beyond: CXLP_EBUSY),
 *     so a client that sends without receiving cannot grow the server;
 *   - a store stays open while a reply reads from it (served.refs > 0);
 *   - the pool is opened read-only: no client request can write it;
 *   - the first request of a conn is HELLO with the served pool's name and
 *     the token; anything else closes the conn, logged with its reason.
 *
 * Transfer (measured, docs/remote.md): the client sends a request and the
 * server answers with one active message whose data part is the shard's
 * bytes straight from the pool mapping (UCX picks eager or rendezvous by
 * size). Rejected: ucp_get over rkeys of the pool's extents, which over
 * TCP UCX emulates with active messages handled by this same worker:
 * ucx_perftest measured it at about half the bandwidth of ucp_am_bw on the
 * same loopback; and a transport of our own (the issue says not to).
 *
 * /metrics: net/metrics.c, in a thread of its own.
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "net/metrics.h"
#include "net/net.h"

#ifndef CXLP_HAVE_UCX

int cxlp_serve(const char *spec, const struct cxlp_serve_opts *opts)
{
    char err[ERRMSG_MAX];
    uint8_t tok[WIRE_TOKEN_MAX];
    size_t tl;
    /* the token file is checked first either way: the same refusal */
    int rc = net_token_read(opts ? opts->token_file : NULL, tok, &tl, err, sizeof err);
    if (rc)
        return seterr(NULL, rc, "%s: refusing to serve: %s", spec ? spec : "(null)", err);
    return seterr(NULL, CXLP_EUNSUPPORTED, "%s: cannot serve: this build has no UCX (built with "
                  "CXLP_UCX=OFF): remote pools need a build with libucx", spec ? spec : "(null)");
}

#else

#include <ucp/api/ucp.h>

#include "pool/pool.h"
#include "store/fetch.h"
#include "store/store.h"

#define DRAIN_MS 5000
#define HELD_MAX 4             /* whole shards of pools of tiers kept in memory */
#define HELD_LIMIT 16          /* ... and held at most, read by replies in flight */
#define CONN_INFLIGHT 64       /* replies in flight to one client at most */

struct conn {
    ucp_ep_h ep;
    char addr[64];
    int authed;
    int closing;             /* refused or gone: close once refs == 0 */
    int gone;                /* the endpoint failed: close with FORCE */
    uint32_t refs;           /* replies in flight */
    struct conn *next;
};

struct served {
    char name[WIRE_NAME_MAX + 1];
    uint64_t version;
    uint64_t gen;            /* the catalog generation it was last found current in */
    cxlp_store *s;
    uint32_t refs;
    int stale;               /* a newer version is published: close at refs 0 */
    struct served *next;
};

struct held {
    struct served *d;
    uint64_t k;
    uint8_t *buf;            /* loc[k].len bytes (and more: an extent's) */
    uint32_t refs;
    uint64_t used;           /* last use, for eviction */
    struct held *next;
};

struct srv {
    ucp_context_h ctx;
    ucp_worker_h w;
    ucp_listener_h l;
    cxlp_pool *p;
    char pool_name[WIRE_NAME_MAX + 1];
    const char *spec;
    uint8_t token[WIRE_TOKEN_MAX];
    size_t token_len;
    struct conn *conns;
    struct served *ds;
    struct held *held;
    uint64_t n_held, clock;
    struct store_io io;      /* this thread's readers of staged tiers */
    uint64_t inflight;
    FILE *log;
    struct metrics m;
    volatile int *stop;
    int draining;
};

struct reply {
    struct srv *sv;
    struct conn *c;
    struct served *ds;       /* READ: the store its bytes are in */
    struct held *h;          /* READ of a pool of tiers: the copy they are in */
    uint8_t *payload;        /* LIST, SHARDS: owned */
    uint64_t t0;
    uint32_t op;
    uint8_t hdr[WIRE_REP_MAX];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void logf_(struct srv *sv, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void logf_(struct srv *sv, const char *fmt, ...)
{
    char line[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    time_t t = time(NULL);
    struct tm tm;
    char ts[32];
    gmtime_r(&t, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%SZ", &tm);
    fprintf(sv->log, "%s cxlpool serve: %s\n", ts, line);
    fflush(sv->log);
}

static void reply_done(struct reply *rp, ucs_status_t st)
{
    struct srv *sv = rp->sv;
    metrics_latency(&sv->m, now_ns() - rp->t0);
    if (st != UCS_OK)
        metrics_add(&sv->m.errors, 1);
    if (rp->ds)
        rp->ds->refs--;
    if (rp->h)
        rp->h->refs--;
    rp->c->refs--;
    sv->inflight--;
    free(rp->payload);
    free(rp);
}

static void send_cb(void *req, ucs_status_t st, void *user)
{
    reply_done(user, st);
    ucp_request_free(req);
}

/* Sends a reply to c: status (and msg), then len bytes at data. Takes
 * ownership of payload (may be NULL; data may point into it). */
static void reply(struct srv *sv, struct conn *c, uint32_t op, uint64_t id, int status,
                  const char *msg, const void *data, uint64_t len, uint8_t *payload,
                  struct served *ds, struct held *h, uint64_t t0)
{
    struct reply *rp = calloc(1, sizeof *rp);
    if (!rp) {
        free(payload);
        metrics_add(&sv->m.errors, 1);
        c->closing = 1;
        return;
    }
    struct wire_rep w;
    memset(&w, 0, sizeof w);
    w.op = op;
    w.id = id;
    w.status = status;
    if (status)
        snprintf(w.msg, sizeof w.msg, "%s", msg ? msg : cxlp_strerror(status));
    w.payload_len = status ? 0 : len;
    size_t hl = wire_rep_encode(&w, rp->hdr, sizeof rp->hdr);
    CXLP_ASSERT(hl);
    rp->sv = sv;
    rp->c = c;
    rp->ds = ds;
    rp->h = h;
    rp->payload = payload;
    rp->t0 = t0;
    rp->op = op;
    c->refs++;
    if (ds)
        ds->refs++;
    if (h)
        h->refs++;
    sv->inflight++;
    if (status)
        metrics_add(&sv->m.errors, 1);
    else
        metrics_add(&sv->m.bytes, len);
    ucp_request_param_t prm = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = send_cb,
        .user_data = rp,
    };
    ucs_status_ptr_t r = ucp_am_send_nbx(c->ep, WIRE_AM_REP, rp->hdr, hl,
                                         status ? NULL : data, status ? 0 : len, &prm);
    if (r == NULL)
        reply_done(rp, UCS_OK);
    else if (UCS_PTR_IS_ERR(r))
        reply_done(rp, UCS_PTR_STATUS(r));
}

/* The served dataset name at its current version (opened on first use);
 * exact: only when that version is want (a READ names the version of its
 * shard table). NULL with the reason in msg. */
static struct served *served_get(struct srv *sv, const char *name, int exact, uint64_t want,
                                 int *rc, char *msg, size_t cap)
{
    /* the catalog unchanged since a store of name was opened at its
     * version: that store is current, with no listing (one load) */
    uint64_t gen = cat_generation(pool_attach(sv->p));
    for (struct served *d = sv->ds; d; d = d->next)
        if (d->gen == gen && !d->stale && strcmp(d->name, name) == 0 &&
            (!exact || want == d->version))
            return d;
    struct cxlp_dataset_info *infos = NULL;
    size_t n = 0;
    uint64_t cur = 0;
    *rc = pool_list_all(sv->p, 1, &infos, &n);
    for (size_t i = 0; !*rc && i < n; i++)
        if (strcmp(infos[i].name, name) == 0)
            cur = infos[i].version;
    free(infos);
    if (*rc) {
        snprintf(msg, cap, "catalog: %s", cxlp_errmsg(sv->p));
        return NULL;
    }
    for (struct served *d = sv->ds; d; d = d->next)
        if (strcmp(d->name, name) == 0 && d->version != cur)
            d->stale = 1;
    if (!cur || (exact && want != cur)) {
        *rc = CXLP_ENOTFOUND;
        if (!cur)
            snprintf(msg, cap, "no dataset '%s' in pool %s", name, sv->pool_name);
        else
            snprintf(msg, cap, "dataset '%s' is at version %llu now, not %llu: read its shard "
                     "table again", name, (unsigned long long)cur, (unsigned long long)want);
        return NULL;
    }
    for (struct served *d = sv->ds; d; d = d->next)
        if (strcmp(d->name, name) == 0 && d->version == cur) {
            d->gen = gen;
            return d;
        }
    struct served *d = calloc(1, sizeof *d);
    if (!d) {
        *rc = -ENOMEM;
        snprintf(msg, cap, "out of memory");
        return NULL;
    }
    if ((*rc = cxlp_store_open(sv->p, name, &d->s))) {
        snprintf(msg, cap, "%s", cxlp_errmsg(NULL));
        free(d);
        return NULL;
    }
    uint64_t v = d->s->ds.info.version;
    if (v != cur) { /* published again between the listing and the open */
        cxlp_store_close(d->s);
        free(d);
        *rc = CXLP_ENOTFOUND;
        snprintf(msg, cap, "dataset '%s' changed while opening: ask again", name);
        return NULL;
    }
    d->s->local_only = 1; /* a mirror's shards from this host's memory only: no chains */
    snprintf(d->name, sizeof d->name, "%s", name);
    d->version = cur;
    d->gen = gen;
    d->next = sv->ds;
    sv->ds = d;
    return d;
}

/* The served dataset request q names (served_get; exact: at the version
 * the request names, as READ and DOCS do), or NULL once q is answered
 * with the reason. */
static struct served *served_of(struct srv *sv, struct conn *c, const struct wire_req *q,
                                int exact, uint64_t t0)
{
    char msg[WIRE_MSG_MAX];
    int rc;
    struct served *d = served_get(sv, q->name, exact, q->ds_version, &rc, msg, sizeof msg);
    if (!d)
        reply(sv, c, q->op, q->id, rc, msg, NULL, 0, NULL, NULL, NULL, t0);
    return d;
}

static int held_of(const struct srv *sv, const struct served *d)
{
    for (const struct held *h = sv->held; h; h = h->next)
        if (h->d == d)
            return 1;
    return 0;
}

/* Closes the stores no reply reads and a newer version replaced. */
static void served_sweep(struct srv *sv, int all)
{
    for (struct served **pp = &sv->ds; *pp;) {
        struct served *d = *pp;
        if ((d->stale || all) && d->refs == 0 && !held_of(sv, d)) {
            *pp = d->next;
            cxlp_store_close(d->s);
            free(d);
        } else {
            pp = &d->next;
        }
    }
}

/* Frees the held copies no reply reads: all, or those past HELD_MAX
 * (least recently used first) and those of stores about to close. */
static void held_sweep(struct srv *sv, int all)
{
    for (;;) {
        struct held **victim = NULL;
        for (struct held **pp = &sv->held; *pp; pp = &(*pp)->next) {
            struct held *h = *pp;
            if (h->refs)
                continue;
            if (all || h->d->stale) {
                victim = pp;
                break;
            }
            if (sv->n_held > HELD_MAX && (!victim || h->used < (*victim)->used))
                victim = pp;
        }
        if (!victim)
            return;
        struct held *h = *victim;
        *victim = h->next;
        free(h->buf);
        free(h);
        sv->n_held--;
    }
}

/* The held copy of shard k of d, or NULL. */
static struct held *held_find(struct srv *sv, const struct served *d, uint64_t k)
{
    for (struct held *h = sv->held; h; h = h->next)
        if (h->d == d && h->k == k) {
            h->used = ++sv->clock;
            return h;
        }
    return NULL;
}

/* Shard k of d (a pool of tiers) whole and verified, held. NULL with the
 * reason in msg. */
static struct held *held_get(struct srv *sv, struct served *d, uint64_t k, int *rc, char *msg,
                             size_t cap)
{
    struct held *found = held_find(sv, d, k);
    if (found)
        return found;
    if (sv->n_held >= HELD_LIMIT) {
        *rc = CXLP_EBUSY;
        snprintf(msg, cap, "busy: %u shards held for replies in flight; ask again",
                 (unsigned)sv->n_held);
        return NULL;
    }
    struct held *h = calloc(1, sizeof *h);
    struct shard_col *cols = calloc(d->s->ncols ? d->s->ncols : 1, sizeof *cols);
    struct shard g;
    *rc = h && cols ? store_read_private(d->s, k, &sv->io, &h->buf, &g, cols) : -ENOMEM;
    free(cols);
    if (*rc) {
        snprintf(msg, cap, "%s", *rc == -ENOMEM && !h ? "out of memory" : cxlp_errmsg(NULL));
        free(h);
        return NULL;
    }
    h->d = d;
    h->k = k;
    h->used = ++sv->clock;
    h->next = sv->held;
    sv->held = h;
    sv->n_held++;
    h->refs++; /* not the one evicted: the caller is about to read it */
    held_sweep(sv, 0);
    h->refs--;
    return h;
}

static void do_list(struct srv *sv, struct conn *c, uint64_t id, uint64_t t0)
{
    struct cxlp_dataset_info *infos = NULL;
    size_t n = 0;
    int rc = pool_list_all(sv->p, 1, &infos, &n);
    if (rc) {
        free(infos);
        reply(sv, c, WIRE_LIST, id, rc, cxlp_errmsg(sv->p), NULL, 0, NULL, NULL, NULL, t0);
        return;
    }
    size_t len = wire_list_encode(infos, (uint32_t)n, NULL);
    uint8_t *buf = malloc(len);
    if (!buf) {
        free(infos);
        reply(sv, c, WIRE_LIST, id, -ENOMEM, NULL, NULL, 0, NULL, NULL, NULL, t0);
        return;
    }
    wire_list_encode(infos, (uint32_t)n, buf);
    free(infos);
    reply(sv, c, WIRE_LIST, id, 0, NULL, buf, len, buf, NULL, NULL, t0);
}

static void do_shards(struct srv *sv, struct conn *c, const struct wire_req *q, uint64_t t0)
{
    struct served *d = served_of(sv, c, q, 0, t0);
    if (!d)
        return;
    uint64_t n = d->s->n_shards;
    struct wire_shard *t = calloc(n ? n : 1, sizeof *t);
    uint8_t *buf = t ? malloc(16 + n * WIRE_SHARD_BYTES) : NULL;
    if (!buf) {
        free(t);
        reply(sv, c, WIRE_SHARDS, q->id, -ENOMEM, NULL, NULL, 0, NULL, NULL, NULL, t0);
        return;
    }
    for (uint64_t k = 0; k < n; k++) {
        const struct pool_shard *ps = &d->s->loc[k];
        t[k] = (struct wire_shard){ps->first_record, ps->n_records, ps->len, ps->data_len,
                                   ps->checksum};
    }
    size_t len = wire_shards_encode(d->version, t, n, buf);
    free(t);
    reply(sv, c, WIRE_SHARDS, q->id, 0, NULL, buf, len, buf, NULL, NULL, t0);
}

static void do_read(struct srv *sv, struct conn *c, const struct wire_req *q, uint64_t t0)
{
    char msg[WIRE_MSG_MAX];
    int rc;
    struct served *d = served_of(sv, c, q, 1, t0);
    if (!d)
        return;
    if (q->shard >= d->s->n_shards) {
        snprintf(msg, sizeof msg, "dataset '%s' has %llu shards, not shard %llu", q->name,
                 (unsigned long long)d->s->n_shards, (unsigned long long)q->shard);
        reply(sv, c, WIRE_READ, q->id, CXLP_ERANGE, msg, NULL, 0, NULL, NULL, NULL, t0);
        return;
    }
    const struct pool_shard *ps = &d->s->loc[q->shard];
    uint64_t map = attach_size(d->s->a);
    if (!range_ok(q->off, q->len, ps->len) ||
        (!d->s->tiered && !range_ok(ps->off, ps->len, map))) {
        snprintf(msg, sizeof msg, "bytes [%llu, +%llu) are not inside shard %llu of '%s' "
                 "(%llu bytes)", (unsigned long long)q->off, (unsigned long long)q->len,
                 (unsigned long long)q->shard, q->name, (unsigned long long)ps->len);
        reply(sv, c, WIRE_READ, q->id, CXLP_ERANGE, msg, NULL, 0, NULL, NULL, NULL, t0);
        return;
    }
    struct held *h = d->s->tiered ? held_find(sv, d, q->shard) : NULL;
    const uint8_t *src;
    const uint64_t staged0 = sv->io.staged_bytes;
    if (d->s->tiered && !h && (q->off || q->len != ps->len)) {
        /* part of a shard no reply holds: those bytes alone, from its
         * fastest copy, as stored (the reader verifies what it keeps) */
        uint8_t *buf = malloc(q->len);
        rc = buf ? store_read_range(d->s, q->shard, q->off, q->len, buf, &sv->io) : -ENOMEM;
        metrics_add(&sv->m.home_bytes, sv->io.staged_bytes - staged0);
        if (rc) {
            free(buf);
            snprintf(msg, sizeof msg, "%s", rc == -ENOMEM ? "out of memory" : cxlp_errmsg(NULL));
            reply(sv, c, WIRE_READ, q->id, rc, msg, NULL, 0, NULL, NULL, NULL, t0);
            return;
        }
        reply(sv, c, WIRE_READ, q->id, 0, NULL, buf, q->len, buf, NULL, NULL, t0);
        return;
    }
    if (d->s->tiered) {
        h = h ? h : held_get(sv, d, q->shard, &rc, msg, sizeof msg);
        metrics_add(&sv->m.home_bytes, sv->io.staged_bytes - staged0);
        if (!h) {
            reply(sv, c, WIRE_READ, q->id, rc, msg, NULL, 0, NULL, NULL, NULL, t0);
            return;
        }
        src = h->buf + q->off;
    } else {
        src = attach_base(d->s->a) + ps->off + q->off;
    }
    reply(sv, c, WIRE_READ, q->id, 0, NULL, src, q->len, NULL, d, h, t0);
}

/* Which shards of a dataset this pool has whole in a memory tier (HELD):
 * what a peer's remote tier routes its reads by (store/remote_tier.c). A
 * pool of one tier is memory: every shard. */
static void do_held(struct srv *sv, struct conn *c, const struct wire_req *q, uint64_t t0)
{
    struct served *d = served_of(sv, c, q, 0, t0);
    if (!d)
        return;
    uint64_t n = d->s->n_shards;
    size_t len = wire_held_encode(d->version, NULL, n, NULL);
    uint8_t *bits = calloc(1, len), *buf = bits ? malloc(len) : NULL;
    if (!buf) {
        free(bits);
        reply(sv, c, WIRE_HELD, q->id, -ENOMEM, NULL, NULL, 0, NULL, NULL, NULL, t0);
        return;
    }
    for (uint64_t k = 0; k < n; k++)
        if (store_in_memory(d->s, k))
            bits[k / 8] |= (uint8_t)(1u << (k % 8));
    wire_held_encode(d->version, bits, n, buf);
    free(bits);
    reply(sv, c, WIRE_HELD, q->id, 0, NULL, buf, len, buf, NULL, NULL, t0);
}

/* A dataset's schema and document index's size and digest: what a pool
 * with a remote tier needs to list the dataset as its own (its mirror). */
static void do_meta(struct srv *sv, struct conn *c, const struct wire_req *q, uint64_t t0)
{
    struct served *d = served_of(sv, c, q, 0, t0);
    if (!d)
        return;
    struct wire_meta m = {.ds_version = d->version, .schema = d->s->ds.schema,
                          .n_docs = d->s->docs ? d->s->ds.info.n_docs : 0,
                          .docs_checksum = d->s->docs ? d->s->ds.docs_checksum : 0};
    size_t len = wire_meta_encode(&m, NULL);
    uint8_t *buf = malloc(len);
    if (!buf) {
        reply(sv, c, WIRE_META, q->id, -ENOMEM, NULL, NULL, 0, NULL, NULL, NULL, t0);
        return;
    }
    wire_meta_encode(&m, buf);
    reply(sv, c, WIRE_META, q->id, 0, NULL, buf, len, buf, NULL, NULL, t0);
}

/* Bytes of a dataset's document index (n_docs + 1 int64), bounded by it. */
static void do_docs(struct srv *sv, struct conn *c, const struct wire_req *q, uint64_t t0)
{
    char msg[WIRE_MSG_MAX];
    struct served *d = served_of(sv, c, q, 1, t0);
    if (!d)
        return;
    uint64_t have = d->s->docs ? (d->s->ds.info.n_docs + 1) * sizeof(int64_t) : 0;
    if (!range_ok(q->off, q->len, have)) {
        snprintf(msg, sizeof msg, "bytes [%llu, +%llu) are not inside the document index of "
                 "'%s' (%llu bytes)", (unsigned long long)q->off, (unsigned long long)q->len,
                 q->name, (unsigned long long)have);
        reply(sv, c, WIRE_DOCS, q->id, CXLP_ERANGE, msg, NULL, 0, NULL, NULL, NULL, t0);
        return;
    }
    reply(sv, c, WIRE_DOCS, q->id, 0, NULL, (const uint8_t *)d->s->docs + q->off, q->len, NULL,
          d, NULL, t0);
}

static struct conn *conn_of(struct srv *sv, ucp_ep_h ep)
{
    for (struct conn *c = sv->conns; c; c = c->next)
        if (c->ep == ep)
            return c;
    return NULL;
}

static void refuse(struct srv *sv, struct conn *c, uint32_t op, uint64_t id, const char *why)
{
    logf_(sv, "client %s refused: %s", c->addr, why);
    metrics_add(&sv->m.refused, 1);
    reply(sv, c, op, id, -EACCES, why, NULL, 0, NULL, NULL, NULL, now_ns());
    c->closing = 1;
}

static int token_eq(const struct srv *sv, const uint8_t *t, size_t n)
{
    /* every byte compared whatever differs first: the time says nothing */
    uint8_t diff = (uint8_t)(n != sv->token_len);
    for (size_t i = 0; i < sv->token_len; i++)
        diff |= (uint8_t)(sv->token[i] ^ (i < n ? t[i] : 0));
    return diff == 0;
}

static ucs_status_t req_cb(void *arg, const void *header, size_t header_length, void *data,
                           size_t length, const ucp_am_recv_param_t *param)
{
    struct srv *sv = arg;
    (void)data;
    uint64_t t0 = now_ns();
    if (!(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)) {
        metrics_add(&sv->m.errors, 1);
        return UCS_OK; /* no endpoint to answer on: a client that skipped the REPLY flag */
    }
    struct conn *c = conn_of(sv, param->reply_ep);
    if (!c || c->closing || sv->draining) {
        metrics_add(&sv->m.errors, 1);
        return UCS_OK;
    }
    struct wire_req q;
    char err[256];
    int rc = length ? errbuf_set(err, sizeof err, CXLP_EBADINPUT, "request with a data part")
                    : wire_req_decode(header, header_length, &q, err, sizeof err);
    uint32_t op = rc ? 0 : q.op;
    metrics_add(&sv->m.requests[op], 1);
    if (!c->authed) {
        char why[300];
        if (rc)
            snprintf(why, sizeof why, "first message malformed: %s", err);
        else if (op != WIRE_HELLO)
            snprintf(why, sizeof why, "no token: first message was %s", wire_op_name(op));
        else if (strcmp(q.name, sv->pool_name) && strcmp(q.name, sv->spec))
            snprintf(why, sizeof why, "asked for pool '%s'; this server serves '%s'", q.name,
                     sv->pool_name);
        else if (q.token_len == 0)
            snprintf(why, sizeof why, "no token");
        else if (!token_eq(sv, q.token, q.token_len))
            snprintf(why, sizeof why, "wrong token");
        else
            why[0] = '\0';
        if (why[0]) {
            refuse(sv, c, op, rc ? 0 : q.id, why);
            return UCS_OK;
        }
        c->authed = 1;
        logf_(sv, "client %s authenticated", c->addr);
        reply(sv, c, WIRE_HELLO, q.id, 0, NULL, NULL, 0, NULL, NULL, NULL, t0);
        return UCS_OK;
    }
    if (rc) {
        reply(sv, c, 0, 0, rc, err, NULL, 0, NULL, NULL, NULL, t0);
        return UCS_OK;
    }
    if (c->refs >= CONN_INFLIGHT) { /* a client that sends and does not receive */
        reply(sv, c, q.op, q.id, CXLP_EBUSY, "busy: too many replies in flight to this client",
              NULL, 0, NULL, NULL, NULL, t0);
        return UCS_OK;
    }
    switch (q.op) {
    case WIRE_HELLO:
        reply(sv, c, WIRE_HELLO, q.id, CXLP_EARG, "HELLO again on an authenticated connection",
              NULL, 0, NULL, NULL, NULL, t0);
        break;
    case WIRE_LIST: do_list(sv, c, q.id, t0); break;
    case WIRE_SHARDS: do_shards(sv, c, &q, t0); break;
    case WIRE_META: do_meta(sv, c, &q, t0); break;
    case WIRE_DOCS: do_docs(sv, c, &q, t0); break;
    case WIRE_HELD: do_held(sv, c, &q, t0); break;
    default: do_read(sv, c, &q, t0); break;
    }
    return UCS_OK;
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    struct conn *c = arg;
    (void)ep;
    (void)st;
    c->gone = 1;
    c->closing = 1;
}

static void conn_cb(ucp_conn_request_h creq, void *arg)
{
    struct srv *sv = arg;
    char addr[64] = "?";
    ucp_conn_request_attr_t at = {.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR};
    if (ucp_conn_request_query(creq, &at) == UCS_OK) {
        char h[INET6_ADDRSTRLEN] = "?";
        int port = 0;
        if (at.client_address.ss_family == AF_INET) {
            struct sockaddr_in *a = (struct sockaddr_in *)&at.client_address;
            inet_ntop(AF_INET, &a->sin_addr, h, sizeof h);
            port = ntohs(a->sin_port);
        } else if (at.client_address.ss_family == AF_INET6) {
            struct sockaddr_in6 *a = (struct sockaddr_in6 *)&at.client_address;
            inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof h);
            port = ntohs(a->sin6_port);
        }
        snprintf(addr, sizeof addr, "%s:%d", h, port);
    }
    struct conn *c = sv->draining ? NULL : calloc(1, sizeof *c);
    if (!c) {
        logf_(sv, "client %s refused: %s", addr, sv->draining ? "draining" : "out of memory");
        ucp_listener_reject(sv->l, creq);
        return;
    }
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .conn_request = creq,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_err_cb, .arg = c},
    };
    ucs_status_t st = ucp_ep_create(sv->w, &ep, &c->ep);
    if (st != UCS_OK) {
        logf_(sv, "client %s: endpoint: %s", addr, ucs_status_string(st));
        free(c);
        return;
    }
    c->next = sv->conns;
    sv->conns = c;
    metrics_add(&sv->m.clients, 1);
    metrics_add(&sv->m.clients_total, 1);
    logf_(sv, "client %s connected", addr);
}

/* Closes an endpoint and waits for it (at most 1 s of progress). */
static void ep_close(struct srv *sv, ucp_ep_h ep, int force)
{
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = force ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    ucs_status_ptr_t r = ucp_ep_close_nbx(ep, &prm);
    if (r == NULL || UCS_PTR_IS_ERR(r))
        return;
    uint64_t end = now_ns() + 1000000000u;
    while (ucp_request_check_status(r) == UCS_INPROGRESS && now_ns() < end)
        ucp_worker_progress(sv->w);
    if (ucp_request_check_status(r) == UCS_INPROGRESS)
        ucp_request_cancel(sv->w, r);
    ucp_request_free(r);
}

/* Closes the conns that are done: refused or gone, nothing in flight. */
static void conns_sweep(struct srv *sv, int all)
{
    for (struct conn **pp = &sv->conns; *pp;) {
        struct conn *c = *pp;
        if (all || (c->closing && c->refs == 0)) {
            *pp = c->next;
            if (c->gone)
                logf_(sv, "client %s disconnected", c->addr);
            /* at the end, replies still in flight (past the drain) are
             * cancelled by a forced close, their callbacks run inside it */
            ep_close(sv, c->ep, c->gone || c->refs);
            metrics_sub(&sv->m.clients, 1);
            free(c);
        } else {
            pp = &c->next;
        }
    }
}

/* ---- the server ---- */

static const char *pool_short_name(const char *spec)
{
    const char *a = strrchr(spec, ':'), *b = strrchr(spec, '/');
    const char *p = a > b ? a : b;
    return p ? p + 1 : spec;
}

static int ucx_fail(const char *what, ucs_status_t st)
{
    return seterr(NULL, CXLP_EUNSUPPORTED, "cannot serve: UCX: %s: %s", what,
                  ucs_status_string(st));
}

static int serve_loop(struct srv *sv, int efd)
{
    while (!*sv->stop) {
        while (ucp_worker_progress(sv->w))
            ;
        conns_sweep(sv, 0);
        held_sweep(sv, 0);
        served_sweep(sv, 0);
        ucs_status_t st = ucp_worker_arm(sv->w);
        if (st == UCS_ERR_BUSY)
            continue;
        struct pollfd pfd = {.fd = efd, .events = POLLIN};
        (void)poll(&pfd, 1, 100);
    }
    return 0;
}

int cxlp_serve(const char *spec, const struct cxlp_serve_opts *opts)
{
    char err[ERRMSG_MAX], host[256];
    int port, rc;
    if (!spec || !opts || !opts->stop)
        return seterr(NULL, CXLP_EARG, "cxlp_serve: spec, opts and opts->stop are required");
    struct srv *sv = calloc(1, sizeof *sv);
    if (!sv)
        return seterr(NULL, -ENOMEM, "cxlp_serve: out of memory");
    sv->log = opts->log ? opts->log : stderr;
    sv->stop = opts->stop;
    sv->spec = spec;
    snprintf(sv->pool_name, sizeof sv->pool_name, "%s", pool_short_name(spec));
    if ((rc = net_token_read(opts->token_file, sv->token, &sv->token_len, err, sizeof err))) {
        free(sv);
        return seterr(NULL, rc, "%s: refusing to serve: %s", spec, err);
    }
    if ((rc = net_addr_parse(opts->listen, host, sizeof host, &port, err, sizeof err))) {
        free(sv);
        return seterr(NULL, rc, "%s: cannot serve: --listen: %s", spec, err);
    }
    struct cxlp_pool_opts po = {.readonly = 1};
    if ((rc = cxlp_pool_open(spec, &po, &sv->p))) {
        free(sv);
        return rc; /* the open's message stands */
    }
    struct metrics_http mh = {.fd = -1};
    ucp_config_t *cfg = NULL;
    ucs_status_t st;
    int efd = -1;
    if (rc)
        goto out_pool;
    /* a server started again after a crash listens on its port at once,
     * not after its old connections' TIME_WAIT, so clients reconnect to it
     * (docs/remote.md); a value in the environment wins. The tcp
     * connection manager reads it from the environment only (ucp_config_*
     * does not know it) */
    (void)setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
    if ((st = ucp_config_read(NULL, NULL, &cfg)) != UCS_OK) {
        rc = ucx_fail("ucp_config_read", st);
        goto out_pool;
    }
    ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features =
                       UCP_FEATURE_AM | UCP_FEATURE_WAKEUP};
    st = ucp_init(&up, cfg, &sv->ctx);
    ucp_config_release(cfg);
    if (st != UCS_OK) {
        rc = ucx_fail("ucp_init", st);
        goto out_pool;
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    if ((st = ucp_worker_create(sv->ctx, &wp, &sv->w)) != UCS_OK) {
        rc = ucx_fail("ucp_worker_create", st);
        goto out_ctx;
    }
    if ((st = ucp_worker_get_efd(sv->w, &efd)) != UCS_OK) {
        rc = ucx_fail("ucp_worker_get_efd", st);
        goto out_worker;
    }
    ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                 UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                 .id = WIRE_AM_REQ, .cb = req_cb, .arg = sv};
    if ((st = ucp_worker_set_am_recv_handler(sv->w, &hp)) != UCS_OK) {
        rc = ucx_fail("ucp_worker_set_am_recv_handler", st);
        goto out_worker;
    }
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    if ((rc = net_resolve(host, port, 1, &ss, &sl, err, sizeof err))) {
        rc = seterr(NULL, rc, "%s: cannot serve: --listen: %s", spec, err);
        goto out_worker;
    }
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = {.addr = (struct sockaddr *)&ss, .addrlen = sl},
        .conn_handler = {.cb = conn_cb, .arg = sv},
    };
    if ((st = ucp_listener_create(sv->w, &lp, &sv->l)) != UCS_OK) {
        rc = seterr(NULL, st == UCS_ERR_BUSY ? -EADDRINUSE : CXLP_EARG,
                    "%s: cannot serve: cannot listen on %s: %s", spec, opts->listen,
                    ucs_status_string(st));
        goto out_worker;
    }
    ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    int bound = port;
    if (ucp_listener_query(sv->l, &la) == UCS_OK && la.sockaddr.ss_family == AF_INET)
        bound = ntohs(((struct sockaddr_in *)&la.sockaddr)->sin_port);
    if (opts->metrics_port > 0 &&
        (rc = metrics_http_start(&mh, &sv->m, host, opts->metrics_port, err, sizeof err))) {
        rc = seterr(NULL, rc, "%s: cannot serve: %s", spec, err);
        goto out_listener;
    }
    logf_(sv, "serving %s (read-only) on %s:%d%s", spec, host, bound,
          opts->metrics_port > 0 ? ", /metrics on its own port" : "");
    if (opts->ready)
        opts->ready(opts->ctx, host, bound);
    serve_loop(sv, efd);

    /* drain: no new clients, the replies in flight complete, then close */
    sv->draining = 1;
    logf_(sv, "draining: %llu replies in flight", (unsigned long long)sv->inflight);
    ucp_listener_destroy(sv->l);
    sv->l = NULL;
    uint64_t end = now_ns() + (uint64_t)DRAIN_MS * 1000000u;
    while (sv->inflight && now_ns() < end)
        ucp_worker_progress(sv->w);
    if (sv->inflight)
        logf_(sv, "drain: %llu replies still in flight after %d ms; closing anyway",
              (unsigned long long)sv->inflight, DRAIN_MS);
    rc = 0;
out_listener:
    if (sv->l)
        ucp_listener_destroy(sv->l);
    conns_sweep(sv, 1);
out_worker:
    metrics_http_stop(&mh);
    ucp_worker_destroy(sv->w);
out_ctx:
    ucp_cleanup(sv->ctx);
out_pool:
    for (struct held *h = sv->held; h; h = h->next)
        h->refs = 0;
    held_sweep(sv, 1);
    for (struct served *d = sv->ds; d; d = d->next)
        d->refs = 0;
    served_sweep(sv, 1);
    store_io_close(&sv->io);
    cxlp_pool_close(sv->p);
    if (rc == 0)
        logf_(sv, "stopped");
    free(sv);
    return rc;
}

#endif /* CXLP_HAVE_UCX */

int cxlp_remote_available(void)
{
#ifdef CXLP_HAVE_UCX
    return 1;
#else
    return 0;
#endif
}
