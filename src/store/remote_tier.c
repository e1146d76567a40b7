/*
 * remote_tier.c - a pool's remote tier (docs/remote.md): datasets of other
 * hosts' pools, served by `cxlpool serve`, listed and read here as this
 * pool's own, their shards staged into this host's memory tiers by the same
 * engine and the same copy (fetch.c) as the nvme tier's.
 *
 * Glossary
 *   peer      one url of the tier, ucx://HOST:PORT/POOL: a served pool.
 *   mirror    a dataset of a peer as this pool lists it: a catalog record
 *             of its own (name, schema, counts, document index copied from
 *             the peer, checked against the peer's digest), a shard table
 *             equal to the peer's, and per shard a location word in the
 *             remote tier naming an address in the tier's span (an extent
 *             of the remote object, no memory behind it). Published like
 *             an ingest, with the remote tier as the one holding every
 *             shard: its home.
 *   reader    a media reader of the remote tier for one store and thread:
 *             an address is turned into (shard, offset) by the mirror's
 *             words, and read from the peer with READ requests.
 *
 * Invariants
 *   - a reader reads from a peer only after the peer's shard table of the
 *     dataset was found equal to the mirror's (bytes, records, payload and
 *     digest of every shard): a peer whose dataset changed since is not
 *     read, and the error says so;
 *   - the bytes a peer sends are trusted for nothing: every copy staged
 *     from them goes through store_copy, which checks the header against
 *     the table and recomputes every checksum before the copy's word is
 *     published (a partial read verifies each block it uses);
 *   - a read tries the peers in turn (the one in use first, then the
 *     others, then the first again on a new connection) while the
 *     reader's timeout has time left, and fails after it with the first
 *     error, which names the peer, the dataset and the shard.
 *
 * Rejected: a catalog entry naming the peer's dataset without copying its
 * shard table (every open would ask the peer, and a pool would list
 * nothing while a peer is down); mirroring at create (datasets ingested on
 * the peer later would never appear). The token is read from
 * $CXLPOOL_TOKEN_FILE when a peer is asked, not stored in the pool: the
 * pool object is readable by every user of the pool.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "net/net.h"
#include "pool/loc.h"
#include "pool/pool_format.h"
#include "store/fetch.h"
#include "store/remote_tier.h"
#include "store/store.h"

#define DEF_TIMEOUT_MS 10000u
#define DOCS_MAX (UINT64_C(1) << 32) /* a document index larger is refused */

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static uint32_t timeout_ms(void)
{
    const char *e = getenv("CXLPOOL_REMOTE_TIMEOUT_MS");
    char *end;
    unsigned long v = e ? strtoul(e, &end, 10) : 0;
    return e && *e && !*end && v > 0 && v <= 3600000ul ? (uint32_t)v : DEF_TIMEOUT_MS;
}

static struct cxlp_remote_opts peer_opts(uint32_t ms)
{
    const char *tf = getenv("CXLPOOL_TOKEN_FILE");
    return (struct cxlp_remote_opts){.token_file = tf && *tf ? tf : NULL, .timeout_ms = ms};
}

/* The i-th url of the tier's list (its object's spec) into out; 0, or -1
 * when there is none. */
static int peer_url(const char *list, int i, char *out, size_t cap)
{
    const char *p = list;
    for (int j = 0; j < i; j++) {
        p = strchr(p, ',');
        if (!p)
            return -1;
        p++;
    }
    size_t n = strcspn(p, ",");
    if (!n || n >= cap)
        return -1;
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

static int n_peers(const char *list)
{
    int n = 1;
    for (const char *p = list; *p; p++)
        n += *p == ',';
    return n;
}

int store_remote_of(const cxlp_store *s)
{
    if (!s->tiered || !s->n_shards)
        return -1;
    /* a dataset of this pool's own that a peer holds too has its home
     * here: not a mirror */
    uint32_t home = attach_home(s->a);
    if (home != POOL_NO_HOME && loc_present(store_word(s, 0, home)))
        return -1;
    for (uint32_t t = 0; t < attach_n_tiers(s->a); t++)
        if ((attach_tier(s->a, t)->flags & TIER_REMOTE) && loc_present(store_word(s, 0, t)))
            return (int)t;
    return -1;
}

uint32_t store_home(const cxlp_store *s)
{
    return s->remote >= 0 ? (uint32_t)s->remote : attach_home(s->a);
}

#define HELD_TTL_MS 200u       /* a peer's answer is used this long */
#define HELD_MISS_MS 20u       /* ... or this long, for a shard no peer has */
#define HELD_DOWN_MS 10000u    /* one that did not answer is asked again after this */
#define HELD_ASK_MS 500u       /* the timeout of one ask */

struct rt_held_peer {
    cxlp_remote *r;            /* its connection for HELD, NULL: none */
    uint64_t at_ms;            /* when last asked; 0: never */
    int ok, busy;              /* it answered; a thread asks it now */
    uint8_t *bits;             /* n_shards bits: it has shard k in memory */
    int any;                   /* a bit is set */
};

struct rt_held {
    uint32_t tier;
    int n;
    struct rt_held_peer p[];
};

/* ---------------------------------------------------------------- reader */

struct rt_ext {
    uint64_t base, k;
};

/* A connection a reader gave back: the next reader of the store takes it. */
struct rt_idle {
    cxlp_remote *r;
    uint32_t tier;
    int peer;
    uint64_t ver;
    struct rt_idle *next;
};
#define RT_IDLE_MAX 32
#define RT_PEERS_MAX 16        /* peers of a tier a reader reads (the first ones) */

struct rtier {
    const cxlp_store *s;
    uint32_t tier;
    const char *list;          /* the peers (the tier object's spec) */
    int n_peers, peer;         /* the peer that answered last */
    cxlp_remote *r[RT_PEERS_MAX];  /* per peer: NULL, not connected */
    uint64_t ver[RT_PEERS_MAX];    /* the dataset's version at that peer */
    uint32_t timeout_ms;
    struct rt_ext *ext;        /* the shards' addresses, sorted */
    uint64_t n;
};

static int ext_cmp(const void *a, const void *b)
{
    const struct rt_ext *x = a, *y = b;
    return x->base < y->base ? -1 : x->base > y->base;
}

/* Connects x to peer i and checks that it holds the mirrored dataset. */
static int rt_connect(struct rtier *x, int i, uint32_t ms)
{
    const cxlp_store *s = x->s;
    char url[POOL_SPEC_MAX];
    if (peer_url(x->list, i, url, sizeof url))
        return seterr(NULL, CXLP_EARG, "remote tier %u: peer %d of '%s'", x->tier, i, x->list);
    struct cxlp_remote_opts o = peer_opts(ms);
    cxlp_remote *r;
    int rc = cxlp_remote_open(url, &o, &r);
    if (rc)
        return rc; /* the message names the peer */
    uint64_t n = 0, ver = 0;
    struct cxlp_remote_shard *t = calloc(s->n_shards ? s->n_shards : 1, sizeof *t);
    rc = t ? cxlp_remote_shards(r, s->name, t, s->n_shards, &n, &ver) : -ENOMEM;
    if (rc) {
        rc = seterr(NULL, rc, "%s", t ? cxlp_errmsg(r) : "out of memory");
    } else {
        int same = n == s->n_shards;
        for (uint64_t k = 0; same && k < n; k++) {
            const struct pool_shard *l = &s->loc[k];
            same = t[k].first_record == s->first[k] && t[k].n_records == l->n_records &&
                   t[k].bytes == l->len && t[k].data_len == l->data_len &&
                   t[k].checksum == l->checksum;
        }
        if (!same)
            rc = seterr(NULL, CXLP_ENOTFOUND, "%s: dataset %s there is not the one this pool "
                        "mirrored (its shard table differs: it changed since); remove it "
                        "here to mirror it again", url, s->name);
    }
    free(t);
    if (rc) {
        cxlp_remote_close(r);
        return rc;
    }
    x->r[i] = r;
    x->ver[i] = ver;
    return 0;
}

/* Appends "; what" (or what) to buf. */
static void say_more(char *buf, size_t cap, const char *what)
{
    size_t n = strlen(buf);
    if (n + 3 < cap)
        snprintf(buf + n, cap - n, "%s%s", n ? "; " : "", what);
}

/* Bytes [off, off + len) of shard k from a peer, failing over: a peer that
 * has the shard in memory (store_peer_memory) first, else the one that
 * answered last; then the others in turn, then the first again on a new
 * connection, while the timeout has time left. A peer that answers that it
 * does not hold the shard (CXLP_EBUSY: a mirror not in its memory, or
 * busy) keeps its connection. The error is the first try's (the first
 * other than CXLP_EBUSY where there is one), its message lists each
 * try's. */
static int rt_read(struct rtier *x, uint64_t k, uint64_t off, uint64_t len, void *dst)
{
    const uint64_t t0 = now_ms();
    char msgs[ERRMSG_MAX] = "";
    int first = 0;
    const int tries = x->n_peers + 1;
    int held = store_peer_memory((cxlp_store *)(uintptr_t)x->s, k);
    int i = held >= 0 && held < x->n_peers ? held : x->peer;
    for (int a = 0; a < tries; a++, i = (i + 1) % x->n_peers) {
        uint64_t spent = now_ms() - t0;
        if (a && spent >= x->timeout_ms)
            break;
        int rc = 0;
        if (!x->r[i] && (rc = rt_connect(x, i, (uint32_t)(x->timeout_ms - spent)))) {
            first = first ? first : rc;
            say_more(msgs, sizeof msgs, cxlp_errmsg(NULL));
            continue;
        }
        rc = remote_read_at(x->r[i], x->s->name, x->ver[i], k, off, len, dst);
        if (!rc) {
            x->peer = i;
            return 0;
        }
        /* a peer without the shard says nothing of the shard's bytes:
         * another peer's error is the one to report */
        first = first && (first != CXLP_EBUSY || rc == CXLP_EBUSY) ? first : rc;
        say_more(msgs, sizeof msgs, cxlp_errmsg(x->r[i]));
        if (rc == CXLP_ERANGE || rc == CXLP_EARG)
            break; /* the request, not the peer */
        if (rc != CXLP_EBUSY) {
            cxlp_remote_close(x->r[i]);
            x->r[i] = NULL;
        }
    }
    return seterr(NULL, first, "%s", msgs);
}

/* Each range, one shard's bytes, is read with READs of at most
 * WIRE_READ_MAX, one after another. */
static int rt_readv(void *ctx, const struct media_read_range *v, size_t n)
{
    struct rtier *x = ctx;
    const cxlp_store *s = x->s;
    for (size_t i = 0; i < n; i++) {
        /* the shard whose address range holds v[i] */
        uint64_t lo = 0, hi = x->n;
        while (hi - lo > 1) {
            uint64_t mid = lo + (hi - lo) / 2;
            if (x->ext[mid].base <= v[i].off)
                lo = mid;
            else
                hi = mid;
        }
        uint64_t k = x->n ? x->ext[lo].k : 0, base = x->n ? x->ext[lo].base : 0;
        uint64_t slen = x->n ? s->loc[k].len : 0, ext = ALIGN_UP(slen, POOL_EXTENT_ALIGN);
        if (!x->n || v[i].off < base || !range_ok(v[i].off - base, v[i].len, ext))
            return seterr(NULL, CXLP_ECORRUPT, "dataset %s: remote tier %u: %" PRIu64
                          " bytes at %#" PRIx64 " are not inside one of its shards", s->name,
                          x->tier, v[i].len, v[i].off);
        const struct media_read_range one = v[i];
        uint64_t at = one.off - base;
        /* an extent is whole pages; past the shard's bytes it holds zeros */
        uint64_t want = at < slen ? MIN(one.len, slen - at) : 0;
        if (want) {
            int rc = rt_read(x, k, at, want, one.dst);
            if (rc)
                return rc;
        }
        memset((uint8_t *)one.dst + want, 0, one.len - want);
    }
    return 0;
}

static void rt_close(void *ctx)
{
    struct rtier *x = ctx;
    cxlp_store *s = (cxlp_store *)(uintptr_t)x->s; /* its rt_mu, rt_idle */
    pthread_mutex_lock(&s->rt_mu);
    s->rt_peer = x->peer;
    int n = 0;
    for (struct rt_idle *i = s->rt_idle; i; i = i->next)
        n++;
    for (int i = 0; i < x->n_peers && n < RT_IDLE_MAX; i++) {
        struct rt_idle *e = x->r[i] ? malloc(sizeof *e) : NULL;
        if (!e)
            continue;
        *e = (struct rt_idle){x->r[i], x->tier, i, x->ver[i], s->rt_idle};
        s->rt_idle = e;
        x->r[i] = NULL;
        n++;
    }
    pthread_mutex_unlock(&s->rt_mu);
    for (int i = 0; i < x->n_peers; i++)
        cxlp_remote_close(x->r[i]);
    free(x->ext);
    free(x);
}

void store_remote_free(cxlp_store *s)
{
    while (s->rt_idle) {
        struct rt_idle *e = s->rt_idle;
        s->rt_idle = e->next;
        cxlp_remote_close(e->r);
        free(e);
    }
    struct rt_held *h = s->rt_held;
    for (int i = 0; h && i < h->n; i++) {
        cxlp_remote_close(h->p[i].r);
        free(h->p[i].bits);
    }
    free(h);
    s->rt_held = NULL;
}

static const struct media_reader_ops rt_ops = {rt_readv, rt_close};

int store_remote_reader(const cxlp_store *s, uint32_t u, struct media_reader **out)
{
    struct rtier *x = calloc(1, sizeof *x);
    if (!x || !(x->ext = malloc((s->n_shards ? s->n_shards : 1) * sizeof *x->ext))) {
        free(x);
        return seterr(NULL, -ENOMEM, "dataset %s: out of memory", s->name);
    }
    x->s = s;
    x->tier = u;
    x->list = attach_tier(s->a, u)->path;
    x->n_peers = MIN(n_peers(x->list), RT_PEERS_MAX);
    x->timeout_ms = timeout_ms();
    for (uint64_t k = 0; k < s->n_shards; k++) {
        uint64_t w = store_word(s, k, u);
        if (!loc_present(w))
            continue; /* a store of another dataset: not a mirror's shard */
        x->ext[x->n++] = (struct rt_ext){loc_off(w), k};
    }
    qsort(x->ext, x->n, sizeof *x->ext, ext_cmp);
    /* the connections other readers of the store gave back, and the peer
     * that answered last */
    cxlp_store *ms = (cxlp_store *)(uintptr_t)s;
    pthread_mutex_lock(&ms->rt_mu);
    x->peer = ms->rt_peer < x->n_peers ? ms->rt_peer : 0;
    for (struct rt_idle **pp = &ms->rt_idle; *pp;) {
        struct rt_idle *e = *pp;
        if (e->tier != u || e->peer >= x->n_peers || x->r[e->peer]) {
            pp = &e->next;
            continue;
        }
        *pp = e->next;
        x->r[e->peer] = e->r;
        x->ver[e->peer] = e->ver;
        free(e);
    }
    pthread_mutex_unlock(&ms->rt_mu);
    int rc = media_reader_custom(out, &rt_ops, x);
    if (rc) {
        rt_close(x);
        return seterr(NULL, rc, "dataset %s: out of memory", s->name);
    }
    return 0;
}

/* ------------------------------------------------------------------ held */

uint32_t store_remote_tier(const cxlp_store *s)
{
    if (s->remote >= 0)
        return (uint32_t)s->remote;
    for (uint32_t t = 0; s->n_shards && t < attach_n_tiers(s->a); t++)
        if ((attach_tier(s->a, t)->flags & TIER_REMOTE) && loc_present(store_word(s, 0, t)))
            return t;
    return UINT32_MAX;
}

/* Asks peer i which shards it has in memory, into bits. 0 or an error. */
static int held_ask(cxlp_store *s, struct rt_held *h, int i, uint8_t *bits)
{
    struct rt_held_peer *q = &h->p[i];
    int rc = 0;
    if (!q->r) {
        char url[POOL_SPEC_MAX];
        struct cxlp_remote_opts o = peer_opts(HELD_ASK_MS);
        if (peer_url(attach_tier(s->a, h->tier)->path, i, url, sizeof url))
            return CXLP_EARG;
        if ((rc = cxlp_remote_open(url, &o, &q->r)))
            return rc;
    }
    uint64_t ver;
    if ((rc = remote_held(q->r, s->name, &ver, bits, s->n_shards))) {
        cxlp_remote_close(q->r);
        q->r = NULL;
    }
    return rc;
}

/* The first peer whose last answer has shard k in memory, or -1. */
static int held_lookup(const struct rt_held *h, uint64_t k)
{
    for (int i = 0; i < h->n; i++)
        if (h->p[i].ok && (h->p[i].bits[k / 8] >> (k % 8)) & 1)
            return i;
    return -1;
}

/* Asks again every peer whose answer is older than age ms (one that did
 * not answer: HELD_DOWN_MS) and that no other thread asks now; mu held,
 * released while asking. 0 when one was asked. */
static int held_refresh(cxlp_store *s, struct rt_held *h, uint64_t age)
{
    const size_t nb = s->n_shards / 8 + 1;
    uint8_t *tmp = NULL;
    int asked = 0;
    for (int i = 0; i < h->n; i++) {
        struct rt_held_peer *q = &h->p[i];
        uint64_t now = now_ms();
        if (q->busy || (q->at_ms && now - q->at_ms < (q->ok ? age : HELD_DOWN_MS)))
            continue;
        if (!tmp && !(tmp = malloc(nb)))
            break;
        q->busy = 1;
        q->at_ms = now;
        pthread_mutex_unlock(&s->rt_held_mu);
        int rc = held_ask(s, h, i, tmp);
        pthread_mutex_lock(&s->rt_held_mu);
        q->busy = 0;
        q->ok = rc == 0;
        if (!rc) {
            memcpy(q->bits, tmp, nb);
            q->any = 0;
            for (size_t j = 0; j < nb && !q->any; j++)
                q->any = tmp[j] != 0;
        }
        asked = 1;
    }
    free(tmp);
    return asked ? 0 : -1;
}

int store_peer_memory(cxlp_store *s, uint64_t k)
{
    if (!s->tiered || s->local_only || k >= s->n_shards)
        return -1;
    const size_t nb = s->n_shards / 8 + 1;
    pthread_mutex_lock(&s->rt_held_mu);
    struct rt_held *h = s->rt_held;
    if (!h) {
        uint32_t t = store_remote_tier(s);
        int n = t == UINT32_MAX ? 0 : MIN(n_peers(attach_tier(s->a, t)->path), RT_PEERS_MAX);
        h = n ? calloc(1, sizeof *h + (size_t)n * sizeof h->p[0]) : NULL;
        for (int i = 0; h && i < n; i++)
            if (!(h->p[i].bits = calloc(1, nb))) {
                while (i--)
                    free(h->p[i].bits);
                free(h);
                h = NULL;
            }
        if (!h) {
            pthread_mutex_unlock(&s->rt_held_mu);
            return -1;
        }
        h->tier = t;
        h->n = n;
        s->rt_held = h;
    }
    (void)held_refresh(s, h, HELD_TTL_MS);
    int found = held_lookup(h, k);
    /* none has it: answers this old may miss a copy made since (a peer
     * stages its window about when this host reads it); where no peer has
     * any shard in memory (a home's server alone) they are not asked again
     * so soon */
    int any = 0;
    for (int i = 0; i < h->n; i++)
        any |= h->p[i].ok && h->p[i].any;
    if (found < 0 && any && held_refresh(s, h, HELD_MISS_MS) == 0)
        found = held_lookup(h, k);
    pthread_mutex_unlock(&s->rt_held_mu);
    return found;
}

/* ---------------------------------------------------------------- mirror */

/* Publishes peer r's dataset info->name in wp as a mirror in tier t. */
static int mirror_one(cxlp_pool *wp, uint32_t t, cxlp_remote *r,
                      const struct cxlp_dataset_info *info)
{
    const char *name = info->name, *url = remote_url(r);
    char why[ERRMSG_MAX];
    int rc = store_name_check(name, why, sizeof why); /* a name this pool would take */
    if (rc)
        return seterr(NULL, rc, "%s: %s", url, why);
    struct wire_meta m;
    rc = remote_meta(r, name, &m);
    if (rc)
        return seterr(NULL, rc, "%s", cxlp_errmsg(r));
    uint64_t n = 0, n2 = 0, ver = 0;
    if ((rc = cxlp_remote_shards(r, name, NULL, 0, &n, &ver)))
        return seterr(NULL, rc, "%s", cxlp_errmsg(r));
    if (ver != m.ds_version || n != info->n_shards || n > UINT32_MAX)
        return seterr(NULL, CXLP_ENOTFOUND, "%s: dataset %s changed while it was mirrored (%"
                      PRIu64 " shards, versions %" PRIu64 " and %" PRIu64 "): ask again", url,
                      name, n, ver, m.ds_version);
    struct cxlp_remote_shard *tab = calloc(n ? n : 1, sizeof *tab);
    struct pool_shard *sh = calloc(n ? n : 1, sizeof *sh);
    struct pool_extent *ext = calloc(n ? n : 1, sizeof *ext);
    uint64_t *lens = calloc(n ? n : 1, sizeof *lens);
    struct pool_extent dext = {0, 0};
    int reserved = 0;
    char err[ERRMSG_MAX];
    if (!tab || !sh || !ext || !lens) {
        rc = seterr(NULL, -ENOMEM, "mirror of %s: out of memory", name);
        goto out;
    }
    if ((rc = cxlp_remote_shards(r, name, tab, n, &n2, &ver))) {
        rc = seterr(NULL, rc, "%s", cxlp_errmsg(r));
        goto out;
    }
    if (n2 != n || ver != m.ds_version) {
        rc = seterr(NULL, CXLP_ENOTFOUND, "%s: dataset %s changed while it was mirrored: ask "
                    "again", url, name);
        goto out;
    }
    struct pool_dataset ds;
    memset(&ds, 0, sizeof ds);
    ds.info = *info;
    ds.info.version = 0;
    ds.info.n_shards = (uint32_t)n;
    ds.n_shards = (uint32_t)n;
    if ((rc = schema_normalize(&m.schema, &ds.schema, err, sizeof err))) {
        rc = seterr(NULL, CXLP_ECORRUPT, "%s: dataset %s: its schema: %s", url, name, err);
        goto out;
    }
    ds.info.fixed = ds.schema.fixed;
    ds.info.record_size = ds.schema.fixed ? ds.schema.record_size : 0;
    ds.info.n_docs = m.n_docs;
    for (uint64_t k = 0; k < n; k++) {
        if (tab[k].bytes == 0 || tab[k].bytes > POOL_REMOTE_SPAN) {
            rc = seterr(NULL, CXLP_ECORRUPT, "%s: dataset %s shard %" PRIu64 ": %" PRIu64
                        " bytes", url, name, k, tab[k].bytes);
            goto out;
        }
        lens[k] = tab[k].bytes;
    }
    if (m.n_docs) {
        uint64_t dl;
        if (m.n_docs >= DOCS_MAX / 8 || mul_overflow_u64(m.n_docs + 1, 8, &dl)) {
            rc = seterr(NULL, CXLP_ECORRUPT, "%s: dataset %s: %" PRIu64 " documents", url, name,
                        m.n_docs);
            goto out;
        }
        if ((rc = pool_reserve(wp, POOL_META, dl, &dext))) {
            rc = seterr(NULL, rc, "mirror of %s: its document index: %s", name,
                        cxlp_errmsg(wp));
            dext.len = 0;
            goto out;
        }
        uint8_t *dst = pool_base_rw(wp, POOL_META) + dext.off;
        if ((rc = remote_docs(r, name, ver, 0, dl, dst))) {
            rc = seterr(NULL, rc, "%s", cxlp_errmsg(r));
            goto out;
        }
        if (XXH3_64bits(dst, dl) != m.docs_checksum) {
            rc = seterr(NULL, CXLP_ECORRUPT, "%s: dataset %s: its document index does not "
                        "match its digest", url, name);
            goto out;
        }
        if ((rc = pool_sync(wp, POOL_META, dext.off, dl)))
            goto out;
        ds.docs = (struct pool_extent){dext.off, dl};
        ds.docs_checksum = m.docs_checksum;
    }
    if (n && (rc = pool_reserve_many(wp, (int)t, lens, n, 0, ext))) {
        rc = seterr(NULL, rc, "mirror of %s: %s", name, cxlp_errmsg(wp));
        goto out;
    }
    reserved = 1;
    for (uint64_t k = 0; k < n; k++)
        sh[k] = (struct pool_shard){.off = ext[k].off, .len = tab[k].bytes,
                                    .first_record = tab[k].first_record,
                                    .n_records = tab[k].n_records, .data_len = tab[k].data_len,
                                    .checksum = tab[k].checksum};
    rc = pool_publish_in(wp, &ds, sh, t);
    if (rc == 0) {
        reserved = 0;
        dext.len = 0;
    } else if (rc != CXLP_EEXIST) {
        rc = seterr(NULL, rc, "mirror of %s: %s", name, cxlp_errmsg(wp));
    }
out:
    if (reserved)
        (void)pool_unreserve_many(wp, (int)t, ext, n);
    if (dext.len)
        (void)pool_unreserve(wp, POOL_META, dext);
    free(tab);
    free(sh);
    free(ext);
    free(lens);
    return rc;
}

/* Dataset name of this pool (its home here) held by peer r too, with the
 * same shard table: every shard gets a word in remote tier t, so that
 * read_source may take it from the peer when that is cheaper, or when the
 * home fails. Nothing when the tables differ, when it has those words
 * already, or when it is a mirror. 0 or an error. */
static int attach_holder(cxlp_pool *wp, uint32_t t, cxlp_remote *r, const char *name)
{
    cxlp_store *s;
    int rc = cxlp_store_open(wp, name, &s);
    if (rc)
        return rc;
    uint32_t home = attach_home(s->a);
    if (!s->tiered || !s->n_shards || s->remote >= 0 || home == POOL_NO_HOME ||
        !loc_present(store_word(s, 0, home)) || loc_present(store_word(s, 0, t))) {
        cxlp_store_close(s);
        return 0;
    }
    uint64_t n = 0, ver = 0;
    struct cxlp_remote_shard *tab = calloc(s->n_shards, sizeof *tab);
    rc = tab ? cxlp_remote_shards(r, name, tab, s->n_shards, &n, &ver) : -ENOMEM;
    int same = !rc && n == s->n_shards;
    for (uint64_t k = 0; same && k < n; k++) {
        const struct pool_shard *l = &s->loc[k];
        same = tab[k].first_record == s->first[k] && tab[k].n_records == l->n_records &&
               tab[k].bytes == l->len && tab[k].data_len == l->data_len &&
               tab[k].checksum == l->checksum;
    }
    free(tab);
    rc = 0;
    for (uint64_t k = 0; same && k < s->n_shards && !rc; k++) {
        struct pool_extent e;
        rc = pool_copy_reserve(wp, s->ds.states_off, k, t, 0, &e);
        if (rc == CXLP_EEXIST) {
            rc = 0;
            continue;
        }
        if (!rc)
            rc = pool_copy_place(wp, s->ds.states_off, k, t, e, 0, 0, NULL);
        if (rc == CXLP_EEXIST)
            rc = 0;
    }
    if (rc)
        rc = seterr(NULL, rc, "dataset %s: naming %s as a holder of its shards: %s", name,
                    remote_url(r), cxlp_errmsg(wp));
    cxlp_store_close(s);
    return rc;
}

/* 1 when this pool's catalog lists name. */
static int listed_here(cxlp_pool *p, const char *name)
{
    size_t n = 0;
    struct cxlp_dataset_info *infos = NULL;
    int found = 0;
    if (pool_list_all(p, 1, &infos, &n) == 0)
        for (size_t i = 0; i < n && !found; i++)
            found = strcmp(infos[i].name, name) == 0;
    free(infos);
    return found;
}

static int list_remote(void *r, struct cxlp_dataset_info *infos, size_t cap, size_t *n)
{
    return cxlp_remote_list(r, infos, cap, n);
}

int pool_remote_mirror(cxlp_pool *p, const char *name)
{
    struct attach *a = pool_attach(p);
    int have = 0;
    for (uint32_t t = 0; t < attach_n_tiers(a); t++)
        have |= (attach_tier(a, t)->flags & TIER_REMOTE) != 0;
    if (!have)
        return CXLP_ENOTFOUND;
    cxlp_pool *wp = p;
    int rc = 0;
    if (!pool_writable(p) && (rc = pool_open_writable(a, &wp)))
        return seterr(NULL, rc, "%s: mirroring datasets of its remote tier needs a writable "
                      "handle: %s", attach_media(a, 0)->path, cxlp_errmsg(NULL));
    int result = name ? CXLP_ENOTFOUND : 0, found = 0;
    char first[ERRMSG_MAX] = "";
    for (uint32_t t = 0; t < attach_n_tiers(a) && !found; t++) {
        if (!(attach_tier(a, t)->flags & TIER_REMOTE))
            continue;
        const char *list = attach_tier(a, t)->path;
        for (int i = 0; i < n_peers(list) && !found; i++) {
            char url[POOL_SPEC_MAX];
            if (peer_url(list, i, url, sizeof url))
                continue;
            struct cxlp_remote_opts o = peer_opts(timeout_ms());
            cxlp_remote *r;
            if ((rc = cxlp_remote_open(url, &o, &r))) {
                if (!first[0]) {
                    strlcpy0(first, cxlp_errmsg(NULL), sizeof first);
                    if (name)
                        result = rc;
                }
                continue;
            }
            size_t n = 0;
            struct cxlp_dataset_info *infos = NULL;
            rc = list_all(list_remote, r, &infos, &n);
            for (size_t j = 0; !rc && j < n && !found; j++) {
                if (name && strcmp(infos[j].name, name))
                    continue;
                if (listed_here(wp, infos[j].name)) {
                    /* a dataset of this pool, or mirrored already; one of
                     * its own that the peer holds too gains a holder */
                    if (!name)
                        (void)attach_holder(wp, t, r, infos[j].name);
                    found = name != NULL;
                    continue;
                }
                int r2 = mirror_one(wp, t, r, &infos[j]);
                if (r2 == 0 || r2 == CXLP_EEXIST) {
                    found = name != NULL;
                    if (name)
                        result = 0;
                } else if (!first[0] || name) {
                    strlcpy0(first, cxlp_errmsg(NULL), sizeof first);
                    result = r2;
                }
            }
            if (rc && !first[0]) {
                strlcpy0(first, cxlp_errmsg(r), sizeof first);
                if (name)
                    result = rc;
            }
            free(infos);
            cxlp_remote_close(r);
        }
    }
    if (wp != p)
        cxlp_pool_close(wp);
    if (result && first[0])
        return seterr(NULL, result, "%s", first);
    if (result)
        return seterr(NULL, result, "dataset %s: not in this pool, and no peer of its remote "
                      "tier lists it", name ? name : "");
    return 0;
}
