/*
 * client.c - cxlp_remote_*: a served pool read over UCX (docs/remote.md).
 *
 * Glossary
 *   call      one request and its reply: the handle has at most one in
 *             flight, and waits for it by progressing its own worker.
 *   deadline  the call's start plus timeout_ms: a reply not complete by
 *             then fails the call with -ETIMEDOUT naming the host and what
 *             was asked; so does an endpoint error (-ECONNRESET). Either
 *             leaves the handle broken: every later call fails at once.
 *
 * Invariants
 *   - a reply is taken only for the call in flight (same id and op), and
 *     only when its payload is exactly the length the call can take: a READ
 *     lands in the caller's buffer, never past len;
 *   - the handle never waits without a deadline: a server that is killed,
 *     stopped or unplugged mid-read costs at most timeout_ms.
 *
 * Rejected: a progress thread per handle (a reader would need locks around
 * the worker for a gain only pipelined reads can take; one call at a time
 * is what remote-cat and the tests need now), and trusting the server for
 * integrity: cxlp_remote_fetch verifies each shard with its own checksums.
 */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/common.h"
#include "net/metrics.h"
#include "net/net.h"

#ifndef CXLP_HAVE_UCX

static int no_ucx(void)
{
    return seterr(NULL, CXLP_EUNSUPPORTED, "remote pools: this build has no UCX (built with "
                  "CXLP_UCX=OFF): they need a build with libucx");
}

int cxlp_remote_open(const char *url, const struct cxlp_remote_opts *opts, cxlp_remote **out)
{
    (void)url;
    (void)opts;
    (void)out;
    return no_ucx();
}

void cxlp_remote_close(cxlp_remote *r)
{
    (void)r;
}

int cxlp_remote_list(cxlp_remote *r, struct cxlp_dataset_info *infos, size_t cap, size_t *n)
{
    (void)r, (void)infos, (void)cap, (void)n;
    return no_ucx();
}

int cxlp_remote_shards(cxlp_remote *r, const char *name, struct cxlp_remote_shard *out,
                       size_t cap, uint64_t *n, uint64_t *version)
{
    (void)r, (void)name, (void)out, (void)cap, (void)n, (void)version;
    return no_ucx();
}

int cxlp_remote_read(cxlp_remote *r, const char *name, uint64_t k, uint64_t off, uint64_t len,
                     void *buf)
{
    (void)r, (void)name, (void)k, (void)off, (void)len, (void)buf;
    return no_ucx();
}

int cxlp_remote_fetch(cxlp_remote *r, const char *name, uint64_t k,
                      int (*fn)(void *ctx, uint64_t id, const void *rec, uint64_t len), void *ctx)
{
    (void)r, (void)name, (void)k, (void)fn, (void)ctx;
    return no_ucx();
}

int remote_raw(struct cxlp_remote *r, const void *req, size_t len, struct wire_rep *rep,
               void *buf, uint64_t cap, uint64_t *got)
{
    (void)r, (void)req, (void)len, (void)rep, (void)buf, (void)cap, (void)got;
    return no_ucx();
}

int remote_meta(struct cxlp_remote *r, const char *name, struct wire_meta *m)
{
    (void)r, (void)name, (void)m;
    return no_ucx();
}

int remote_docs(struct cxlp_remote *r, const char *name, uint64_t ver, uint64_t off, uint64_t len,
                void *buf)
{
    (void)r, (void)name, (void)ver, (void)off, (void)len, (void)buf;
    return no_ucx();
}

int remote_read_at(struct cxlp_remote *r, const char *name, uint64_t ver, uint64_t k,
                   uint64_t off, uint64_t len, void *buf)
{
    (void)r, (void)name, (void)ver, (void)k, (void)off, (void)len, (void)buf;
    return no_ucx();
}

int remote_held(struct cxlp_remote *r, const char *name, uint64_t *ver, uint8_t *bits,
                uint64_t n)
{
    (void)r, (void)name, (void)ver, (void)bits, (void)n;
    return no_ucx();
}

const char *remote_url(const struct cxlp_remote *r)
{
    (void)r;
    return "";
}

#else

#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#include "store/shard.h"

#define DEF_TIMEOUT_MS 10000u
#define LIST_MAX (UINT64_C(64) << 20) /* a listing or shard table longer is refused */

struct call {
    uint64_t id;
    uint32_t op;
    int raw;                 /* remote_raw: any reply, any op */
    int done;                /* reply header taken (and its data, once !rndv) */
    int rndv;                /* data still arriving */
    void *rreq;              /* ... by this receive request (rndv) */
    int err;                 /* a reply that broke an invariant: CXLP_EBADINPUT */
    char why[200];
    struct wire_rep rep;
    uint8_t *dst;            /* caller's buffer (READ, raw), or NULL */
    uint64_t cap;
    uint8_t *payload;        /* LIST, SHARDS: allocated here */
    uint64_t got;
    int sent;                /* the request's send completed */
};

struct cxlp_remote {
    struct obj obj;
    char host[256];
    int port;
    char pool[WIRE_NAME_MAX + 1];
    char url[400];
    ucp_context_h ctx;
    ucp_worker_h w;
    ucp_ep_h ep;
    int efd;
    int broken;              /* 0, or the error every later call returns */
    ucs_status_t ep_status;  /* the endpoint's error, once it has one */
    uint32_t timeout_ms;
    uint64_t next_id;
    struct call c;
    uint8_t req[WIRE_REQ_MAX];
    char ver_name[WIRE_NAME_MAX + 1]; /* the dataset of the last shard table */
    uint64_t ver;                     /* its version: what reads of it name */
    struct cxlp_remote_shard *tab;    /* that table, whole (cxlp_remote_fetch) */
    uint64_t tab_n;
};

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t st)
{
    struct cxlp_remote *r = arg;
    (void)ep;
    r->ep_status = st;
}

static void recv_cb(void *req, ucs_status_t st, size_t length, void *user)
{
    struct cxlp_remote *r = user;
    r->c.rndv = 0;
    r->c.rreq = NULL;
    if (st != UCS_OK || length != r->c.got) {
        r->c.err = st == UCS_OK ? CXLP_EBADINPUT : -ECONNRESET;
        snprintf(r->c.why, sizeof r->c.why, "reply data: %s (%zu bytes)",
                 ucs_status_string(st), length);
    }
    ucp_request_free(req);
}

static ucs_status_t rep_cb(void *arg, const void *header, size_t header_length, void *data,
                           size_t length, const ucp_am_recv_param_t *param)
{
    struct cxlp_remote *r = arg;
    struct call *c = &r->c;
    struct wire_rep rep;
    char err[200];
    if (c->done || !c->id)
        return UCS_OK; /* a late reply of a call that gave up: dropped */
    if (wire_rep_decode(header, header_length, &rep, err, sizeof err)) {
        c->err = CXLP_EBADINPUT;
        snprintf(c->why, sizeof c->why, "%s", err);
        c->done = 1;
        return UCS_OK;
    }
    if (!c->raw && (rep.id != c->id || (rep.op != c->op && rep.op != 0))) {
        return UCS_OK; /* not this call's */
    }
    c->rep = rep;
    c->done = 1;
    if (rep.payload_len != length) {
        c->err = CXLP_EBADINPUT;
        snprintf(c->why, sizeof c->why, "reply announces %llu bytes and carries %zu",
                 (unsigned long long)rep.payload_len, length);
        return UCS_OK;
    }
    if (!length)
        return UCS_OK;
    uint8_t *dst = c->dst;
    if (dst && length > c->cap) {
        c->err = CXLP_EBADINPUT;
        snprintf(c->why, sizeof c->why, "reply of %zu bytes to a request of %llu", length,
                 (unsigned long long)c->cap);
        return UCS_OK;
    }
    if (!dst) {
        if (length > LIST_MAX || !(c->payload = malloc(length))) {
            c->err = length > LIST_MAX ? CXLP_EBADINPUT : -ENOMEM;
            snprintf(c->why, sizeof c->why, "reply of %zu bytes", length);
            return UCS_OK;
        }
        dst = c->payload;
    }
    c->got = length;
    if (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) {
        ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                                   UCP_OP_ATTR_FIELD_USER_DATA,
                                   .cb.recv_am = recv_cb, .user_data = r};
        c->rndv = 1;
        ucs_status_ptr_t q = ucp_am_recv_data_nbx(r->w, data, dst, length, &prm);
        if (q == NULL) {
            c->rndv = 0;
        } else if (!UCS_PTR_IS_ERR(q)) {
            if (c->rndv)
                c->rreq = q;
        } else {
            c->rndv = 0;
            c->err = -ECONNRESET;
            snprintf(c->why, sizeof c->why, "reply data: %s",
                     ucs_status_string(UCS_PTR_STATUS(q)));
        }
        return UCS_OK;
    }
    memcpy(dst, data, length);
    return UCS_OK;
}

static void send_cb(void *req, ucs_status_t st, void *user)
{
    struct cxlp_remote *r = user;
    (void)st;
    r->c.sent = 1;
    ucp_request_free(req);
}

/* Sends the request in r->req (len bytes) and waits for the reply. what
 * names the call in messages. */
static int call(struct cxlp_remote *r, size_t len, const char *what)
{
    if (r->broken)
        return seterr(&r->obj, r->broken, "%s: %s: the connection failed earlier; open it again",
                      r->url, what);
    struct call *c = &r->c;
    c->done = c->rndv = c->err = 0;
    c->sent = 0;
    c->got = 0;
    c->why[0] = '\0';
    ucp_request_param_t prm = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_FLAGS,
        .cb.send = send_cb, .user_data = r,
        .flags = UCP_AM_SEND_FLAG_REPLY | UCP_AM_SEND_FLAG_EAGER,
    };
    ucs_status_ptr_t q = ucp_am_send_nbx(r->ep, WIRE_AM_REQ, r->req, len, NULL, 0, &prm);
    if (q == NULL)
        c->sent = 1;
    else if (UCS_PTR_IS_ERR(q))
        r->ep_status = UCS_PTR_STATUS(q);
    uint64_t end = now_ms() + r->timeout_ms;
    int rc = 0;
    for (;;) {
        while (ucp_worker_progress(r->w))
            ;
        if (c->done && !c->rndv && c->sent)
            break;
        if (r->ep_status != UCS_OK) {
            rc = r->ep_status == UCS_ERR_UNREACHABLE || r->ep_status == UCS_ERR_REJECTED
                     ? -ECONNREFUSED : -ECONNRESET;
            rc = seterr(&r->obj, rc, "%s: %s: connection %s (%s)", r->url, what,
                        rc == -ECONNREFUSED ? "refused" : "lost",
                        ucs_status_string(r->ep_status));
            break;
        }
        uint64_t t = now_ms();
        if (t >= end) {
            rc = seterr(&r->obj, -ETIMEDOUT, "%s: %s: no reply in %u ms", r->url, what,
                        r->timeout_ms);
            break;
        }
        if (ucp_worker_arm(r->w) == UCS_ERR_BUSY)
            continue;
        struct pollfd pfd = {.fd = r->efd, .events = POLLIN};
        uint64_t wait = end - t < 50 ? end - t : 50;
        (void)poll(&pfd, 1, (int)wait);
    }
    if (rc) {
        r->broken = rc;
        c->id = 0; /* a late reply is dropped */
        if (c->rndv && c->rreq) {
            /* data still owed to the caller's buffer: cancelled and waited
             * for here, so nothing lands there once this call returns */
            ucp_request_cancel(r->w, c->rreq);
            uint64_t end2 = now_ms() + 1000;
            while (c->rndv && now_ms() < end2)
                ucp_worker_progress(r->w);
            c->dst = NULL;
        }
        return rc;
    }
    if (c->err) {
        r->broken = c->err;
        return seterr(&r->obj, c->err, "%s: %s: bad reply: %s", r->url, what, c->why);
    }
    return 0;
}

/* Encodes q (its id set here) into r->req and runs the call. */
static int call_req(struct cxlp_remote *r, struct wire_req *q, uint8_t *dst, uint64_t cap,
                    const char *what)
{
    q->id = ++r->next_id;
    size_t len = wire_req_encode(q, r->req, sizeof r->req);
    if (!len)
        return seterr(&r->obj, CXLP_EARG, "%s: %s: request not encodable (name of 1..%u bytes?)",
                      r->url, what, WIRE_NAME_MAX);
    free(r->c.payload);
    r->c.payload = NULL;
    r->c.id = q->id;
    r->c.op = q->op;
    r->c.raw = 0;
    r->c.dst = dst;
    r->c.cap = cap;
    int rc = call(r, len, what);
    if (!rc && r->c.rep.status)
        rc = seterr(&r->obj, r->c.rep.status, "%s: %s: %s", r->url, what, r->c.rep.msg);
    return rc;
}

int remote_raw(struct cxlp_remote *r, const void *req, size_t len, struct wire_rep *rep,
               void *buf, uint64_t cap, uint64_t *got)
{
    if (len > sizeof r->req)
        return seterr(&r->obj, CXLP_EARG, "raw request of %zu bytes", len);
    memcpy(r->req, req, len);
    free(r->c.payload);
    r->c.payload = NULL;
    r->c.id = ++r->next_id;
    r->c.raw = 1;
    r->c.dst = buf;
    r->c.cap = cap;
    int rc = call(r, len, "raw request");
    if (!rc) {
        *rep = r->c.rep;
        *got = r->c.got;
    }
    return rc;
}

static int resolve(struct cxlp_remote *r, struct sockaddr_storage *ss, socklen_t *sl)
{
    char err[ERRMSG_MAX];
    int rc = net_resolve(r->host, r->port, 0, ss, sl, err, sizeof err);
    return rc ? seterr(NULL, rc, "%s: %s", r->url, err) : 0;
}

static void ep_close(struct cxlp_remote *r)
{
    ucp_request_param_t prm = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                               .flags = r->broken || r->ep_status != UCS_OK
                                            ? UCP_EP_CLOSE_FLAG_FORCE : 0};
    ucs_status_ptr_t q = ucp_ep_close_nbx(r->ep, &prm);
    if (q == NULL || UCS_PTR_IS_ERR(q))
        return;
    uint64_t end = now_ms() + 1000;
    while (ucp_request_check_status(q) == UCS_INPROGRESS && now_ms() < end)
        ucp_worker_progress(r->w);
    if (ucp_request_check_status(q) == UCS_INPROGRESS)
        ucp_request_cancel(r->w, q);
    ucp_request_free(q);
}

void cxlp_remote_close(cxlp_remote *r)
{
    if (!r)
        return;
    if (r->ep)
        ep_close(r);
    if (r->w)
        ucp_worker_destroy(r->w);
    if (r->ctx)
        ucp_cleanup(r->ctx);
    free(r->c.payload);
    free(r->tab);
    r->obj.magic = 0;
    free(r);
}

int cxlp_remote_open(const char *url, const struct cxlp_remote_opts *opts, cxlp_remote **out)
{
    char err[ERRMSG_MAX];
    if (!out)
        return seterr(NULL, CXLP_EARG, "remote open: out is NULL");
    struct cxlp_remote *r = calloc(1, sizeof *r);
    if (!r)
        return seterr(NULL, -ENOMEM, "remote open: out of memory");
    obj_init(&r->obj);
    r->efd = -1;
    r->timeout_ms = opts && opts->timeout_ms ? opts->timeout_ms : DEF_TIMEOUT_MS;
    int rc = net_url_parse(url, r->host, sizeof r->host, &r->port, r->pool, err, sizeof err);
    if (rc) {
        free(r);
        return seterr(NULL, rc, "remote open: %s", err);
    }
    snprintf(r->url, sizeof r->url, "ucx://%s:%d/%s", r->host, r->port, r->pool);
    struct wire_req hello;
    memset(&hello, 0, sizeof hello);
    hello.op = WIRE_HELLO;
    snprintf(hello.name, sizeof hello.name, "%s", r->pool);
    if (opts && opts->token_file) {
        size_t tl;
        if ((rc = net_token_read(opts->token_file, hello.token, &tl, err, sizeof err))) {
            free(r);
            return seterr(NULL, rc, "%s: %s", url, err);
        }
        hello.token_len = (uint32_t)tl;
    }
    struct sockaddr_storage ss;
    socklen_t sl = 0;
    if ((rc = resolve(r, &ss, &sl))) {
        free(r);
        return rc;
    }
    ucp_config_t *cfg;
    ucs_status_t st = ucp_config_read(NULL, NULL, &cfg);
    if (st == UCS_OK) {
        ucp_params_t up = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                           .features = UCP_FEATURE_AM | UCP_FEATURE_WAKEUP};
        st = ucp_init(&up, cfg, &r->ctx);
        ucp_config_release(cfg);
    }
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    if (st == UCS_OK)
        st = ucp_worker_create(r->ctx, &wp, &r->w);
    if (st == UCS_OK)
        st = ucp_worker_get_efd(r->w, &r->efd);
    ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                 UCP_AM_HANDLER_PARAM_FIELD_CB | UCP_AM_HANDLER_PARAM_FIELD_ARG,
                                 .id = WIRE_AM_REP, .cb = rep_cb, .arg = r};
    if (st == UCS_OK)
        st = ucp_worker_set_am_recv_handler(r->w, &hp);
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = (struct sockaddr *)&ss, .addrlen = sl},
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = ep_err_cb, .arg = r},
    };
    if (st == UCS_OK)
        st = ucp_ep_create(r->w, &ep, &r->ep);
    if (st != UCS_OK) {
        rc = seterr(NULL, -ECONNREFUSED, "%s: UCX: %s", r->url, ucs_status_string(st));
        cxlp_remote_close(r);
        return rc;
    }
    rc = call_req(r, &hello, NULL, 0, "HELLO");
    if (rc) {
        int code = rc;
        if (r->c.rep.status == -EACCES)
            code = -EACCES;
        else if (rc == -ECONNRESET && r->c.done == 0 && r->next_id == 1)
            code = -ECONNREFUSED; /* nothing ever answered */
        seterr(NULL, code, "%s", r->obj.err);
        cxlp_remote_close(r);
        return code;
    }
    *out = r;
    return 0;
}

int cxlp_remote_list(cxlp_remote *r, struct cxlp_dataset_info *infos, size_t cap, size_t *n)
{
    if (!r || !n || (cap && !infos))
        return seterr(r ? &r->obj : NULL, CXLP_EARG, "remote list: NULL argument");
    struct wire_req q;
    memset(&q, 0, sizeof q);
    q.op = WIRE_LIST;
    int rc = call_req(r, &q, NULL, 0, "LIST");
    if (rc)
        return rc;
    char err[256];
    rc = wire_list_decode(r->c.payload, r->c.got, infos, cap, n, err, sizeof err);
    if (rc)
        return seterr(&r->obj, rc, "%s: LIST: bad reply: %s", r->url, err);
    return 0;
}

int cxlp_remote_shards(cxlp_remote *r, const char *name, struct cxlp_remote_shard *out,
                       size_t cap, uint64_t *n, uint64_t *version)
{
    if (!r || !name || !n || (cap && !out))
        return seterr(r ? &r->obj : NULL, CXLP_EARG, "remote shards: NULL argument");
    struct wire_req q;
    memset(&q, 0, sizeof q);
    q.op = WIRE_SHARDS;
    if (strlen(name) > WIRE_NAME_MAX)
        return seterr(&r->obj, CXLP_EARG, "%s: dataset name '%s' longer than %u bytes", r->url,
                      name, WIRE_NAME_MAX);
    snprintf(q.name, sizeof q.name, "%s", name);
    char what[128];
    snprintf(what, sizeof what, "shard table of %s", name);
    int rc = call_req(r, &q, NULL, 0, what);
    if (rc)
        return rc;
    char err[256];
    uint64_t ver, cnt;
    struct wire_shard *t = NULL;
    if (cap && !(t = calloc(cap, sizeof *t)))
        return seterr(&r->obj, -ENOMEM, "remote shards: out of memory");
    rc = wire_shards_decode(r->c.payload, r->c.got, &ver, t, cap, &cnt, err, sizeof err);
    if (rc) {
        free(t);
        return seterr(&r->obj, rc, "%s: %s: bad reply: %s", r->url, what, err);
    }
    for (uint64_t k = 0; k < cnt && k < cap; k++)
        out[k] = (struct cxlp_remote_shard){t[k].first_record, t[k].n_records, t[k].bytes,
                                            t[k].data_len, t[k].checksum};
    free(t);
    *n = cnt;
    if (version)
        *version = ver;
    if (strcmp(r->ver_name, name) || r->ver != ver) {
        free(r->tab);
        r->tab = NULL;
        r->tab_n = 0;
    }
    snprintf(r->ver_name, sizeof r->ver_name, "%s", name);
    r->ver = ver;
    if (cap >= cnt && !r->tab && (r->tab = malloc((cnt ? cnt : 1) * sizeof *r->tab))) {
        if (cnt)
            memcpy(r->tab, out, cnt * sizeof *r->tab);
        r->tab_n = cnt;
    }
    return 0;
}

/* name's version as the last shard table read of it gave it (one per
 * handle: the dataset last asked about), else a fresh table's. */
static int version_of(cxlp_remote *r, const char *name, uint64_t *ver)
{
    uint64_t n;
    if (r->ver && strcmp(r->ver_name, name) == 0) {
        *ver = r->ver;
        return 0;
    }
    return cxlp_remote_shards(r, name, NULL, 0, &n, ver);
}

/* Reads [off, off + len) into buf in parts of at most WIRE_READ_MAX: op
 * WIRE_READ (shard k's bytes) or WIRE_DOCS (the document index); each
 * part's reply must carry all its bytes. */
static int read_parts(cxlp_remote *r, uint32_t op, const char *name, uint64_t ver, uint64_t k,
                      uint64_t off, uint64_t len, void *buf)
{
    uint8_t *p = buf;
    while (len) {
        uint64_t part = len < WIRE_READ_MAX ? len : WIRE_READ_MAX;
        struct wire_req q;
        memset(&q, 0, sizeof q);
        q.op = op;
        snprintf(q.name, sizeof q.name, "%s", name);
        q.ds_version = ver;
        q.shard = op == WIRE_READ ? k : 0;
        q.off = off;
        q.len = part;
        char what[160];
        if (op == WIRE_READ)
            snprintf(what, sizeof what, "shard %llu of %s (bytes %llu..%llu)",
                     (unsigned long long)k, name, (unsigned long long)off,
                     (unsigned long long)(off + part));
        else
            snprintf(what, sizeof what, "document index of %s (bytes %llu..%llu)", name,
                     (unsigned long long)off, (unsigned long long)(off + part));
        int rc = call_req(r, &q, p, part, what);
        if (rc)
            return rc;
        if (r->c.got != part)
            return seterr(&r->obj, CXLP_EBADINPUT, "%s: %s: %llu bytes came", r->url, what,
                          (unsigned long long)r->c.got);
        p += part;
        off += part;
        len -= part;
    }
    return 0;
}

const char *remote_url(const struct cxlp_remote *r)
{
    return r->url;
}

/* A request of op (META, HELD) naming dataset name and nothing more; the
 * reply's payload is left in r->c.payload (r->c.got bytes). */
static int call_named(struct cxlp_remote *r, uint32_t op, const char *name, const char *what)
{
    struct wire_req q;
    memset(&q, 0, sizeof q);
    q.op = op;
    snprintf(q.name, sizeof q.name, "%s", name);
    return call_req(r, &q, NULL, 0, what);
}

int remote_held(struct cxlp_remote *r, const char *name, uint64_t *ver, uint8_t *bits,
                uint64_t n)
{
    if (!r || !name || !ver || !bits || strlen(name) > WIRE_NAME_MAX)
        return seterr(r ? &r->obj : NULL, CXLP_EARG, "remote held: bad argument");
    char what[128];
    snprintf(what, sizeof what, "shards of %s in memory", name);
    int rc = call_named(r, WIRE_HELD, name, what);
    if (rc)
        return rc;
    char err[256];
    uint64_t cnt = 0;
    if ((rc = wire_held_decode(r->c.payload, r->c.got, ver, bits, (size_t)(n / 8 + (n % 8 != 0)),
                               &cnt, err, sizeof err)))
        return seterr(&r->obj, rc, "%s: %s: bad reply: %s", r->url, what, err);
    if (cnt != n)
        return seterr(&r->obj, CXLP_ENOTFOUND, "%s: %s: %llu shards there, %llu here: not the "
                      "dataset this pool holds", r->url, what, (unsigned long long)cnt,
                      (unsigned long long)n);
    return 0;
}

int remote_meta(struct cxlp_remote *r, const char *name, struct wire_meta *m)
{
    if (!r || !name || !m || strlen(name) > WIRE_NAME_MAX)
        return seterr(r ? &r->obj : NULL, CXLP_EARG, "remote meta: bad argument");
    char what[128];
    snprintf(what, sizeof what, "schema of %s", name);
    int rc = call_named(r, WIRE_META, name, what);
    if (rc)
        return rc;
    char err[256];
    if ((rc = wire_meta_decode(r->c.payload, r->c.got, m, err, sizeof err)))
        return seterr(&r->obj, rc, "%s: %s: bad reply: %s", r->url, what, err);
    return 0;
}

int remote_docs(struct cxlp_remote *r, const char *name, uint64_t ver, uint64_t off, uint64_t len,
                void *buf)
{
    if (!r || !name || (len && !buf) || strlen(name) > WIRE_NAME_MAX)
        return seterr(r ? &r->obj : NULL, CXLP_EARG, "remote docs: bad argument");
    return read_parts(r, WIRE_DOCS, name, ver, 0, off, len, buf);
}

int remote_read_at(struct cxlp_remote *r, const char *name, uint64_t ver, uint64_t k,
                   uint64_t off, uint64_t len, void *buf)
{
    if (!r || !name || (len && !buf) || strlen(name) > WIRE_NAME_MAX)
        return seterr(r ? &r->obj : NULL, CXLP_EARG, "remote read: bad argument");
    return read_parts(r, WIRE_READ, name, ver, k, off, len, buf);
}

int cxlp_remote_read(cxlp_remote *r, const char *name, uint64_t k, uint64_t off, uint64_t len,
                     void *buf)
{
    if (!r || !name || (len && !buf))
        return seterr(r ? &r->obj : NULL, CXLP_EARG, "remote read: NULL argument");
    if (strlen(name) > WIRE_NAME_MAX)
        return seterr(&r->obj, CXLP_EARG, "%s: dataset name '%s' longer than %u bytes", r->url,
                      name, WIRE_NAME_MAX);
    uint64_t ver;
    int rc = version_of(r, name, &ver);
    return rc ? rc : read_parts(r, WIRE_READ, name, ver, k, off, len, buf);
}

int cxlp_remote_fetch(cxlp_remote *r, const char *name, uint64_t k,
                      int (*fn)(void *ctx, uint64_t id, const void *rec, uint64_t len), void *ctx)
{
    if (!r || !name || !fn)
        return seterr(r ? &r->obj : NULL, CXLP_EARG, "remote fetch: NULL argument");
    /* the handle's table of name when it has one, else a fresh one */
    int rc = 0;
    if (!r->tab || strcmp(r->ver_name, name)) {
        uint64_t n, n2, v;
        struct cxlp_remote_shard *t = NULL;
        rc = cxlp_remote_shards(r, name, NULL, 0, &n, &v);
        if (!rc && !(t = calloc(n ? n : 1, sizeof *t)))
            rc = seterr(&r->obj, -ENOMEM, "remote fetch: out of memory");
        if (!rc)
            rc = cxlp_remote_shards(r, name, t, n, &n2, &v);
        free(t);
        if (rc)
            return rc;
        if (!r->tab)
            return seterr(&r->obj, CXLP_ENOTFOUND, "%s: dataset %s changed while read: "
                          "read it again", r->url, name);
    }
    if (k >= r->tab_n)
        return seterr(&r->obj, CXLP_ERANGE, "%s: dataset %s has %llu shards, not shard %llu",
                      r->url, name, (unsigned long long)r->tab_n, (unsigned long long)k);
    uint64_t ver = r->ver;
    struct cxlp_remote_shard e = r->tab[k];
    uint8_t *buf = e.bytes ? malloc(e.bytes) : NULL;
    if (!buf)
        return seterr(&r->obj, e.bytes ? -ENOMEM : CXLP_ECORRUPT,
                      "%s: shard %llu of %s: %llu bytes", r->url, (unsigned long long)k, name,
                      (unsigned long long)e.bytes);
    if ((rc = read_parts(r, WIRE_READ, name, ver, k, 0, e.bytes, buf))) {
        free(buf);
        return rc;
    }
    struct shard sh;
    struct shard_col *cols = calloc(SHARD_MAX_COLS, sizeof *cols);
    char err[ERRMSG_MAX];
    uint64_t dl = 0, sum = 0;
    if (!cols)
        rc = errbuf_set(err, sizeof err, -ENOMEM, "out of memory");
    else if (!(rc = shard_open(&sh, cols, SHARD_MAX_COLS, buf, e.bytes, err, sizeof err)) &&
             !(rc = shard_verify_copy(&sh, err, sizeof err))) {
        shard_digest(&sh, &dl, &sum);
        if (sh.n_records != e.n_records || dl != e.data_len || sum != e.checksum)
            rc = errbuf_set(err, sizeof err, CXLP_ECORRUPT, "%llu records, %llu bytes of data, "
                            "digest %016llx; its shard table says %llu, %llu, %016llx",
                            (unsigned long long)sh.n_records, (unsigned long long)dl,
                            (unsigned long long)sum, (unsigned long long)e.n_records,
                            (unsigned long long)e.data_len, (unsigned long long)e.checksum);
    }
    if (rc) {
        free(cols);
        free(buf);
        return seterr(&r->obj, rc == -ENOMEM ? rc : CXLP_ECORRUPT,
                      "%s: shard %llu of %s did not verify: %s", r->url, (unsigned long long)k,
                      name, err);
    }
    /* one field: the record in place; several: its fields back to back */
    uint8_t *rec = NULL;
    uint64_t rec_cap = 0;
    for (uint64_t i = 0; i < sh.n_records && !rc; i++) {
        const uint8_t *p[SHARD_MAX_COLS];
        uint64_t l[SHARD_MAX_COLS], tot = 0;
        for (uint32_t f = 0; f < sh.n_cols && !rc; f++) {
            if (shard_col_record(&sh.col[f], i, &p[f], &l[f]))
                rc = seterr(&r->obj, CXLP_ECORRUPT, "%s: shard %llu of %s: record %llu, field "
                            "%u: bad index entry", r->url, (unsigned long long)k, name,
                            (unsigned long long)i, f);
            tot += l[f];
        }
        if (rc)
            break;
        if (sh.n_cols == 1) {
            rc = fn(ctx, e.first_record + i, p[0], l[0]);
            continue;
        }
        if (tot > rec_cap) {
            uint8_t *nr = realloc(rec, tot);
            if (!nr) {
                rc = seterr(&r->obj, -ENOMEM, "remote fetch: out of memory");
                break;
            }
            rec = nr;
            rec_cap = tot;
        }
        uint64_t at = 0;
        for (uint32_t f = 0; f < sh.n_cols; f++) {
            memcpy(rec + at, p[f], l[f]);
            at += l[f];
        }
        rc = fn(ctx, e.first_record + i, rec, tot);
    }
    free(rec);
    free(cols);
    free(buf);
    return rc;
}

#endif /* CXLP_HAVE_UCX */
