/*
 * fetch.c - one shard copied between tiers: read the fastest other copy,
 * verify it, publish it (pool/place.c). A miss of a reader, a staging
 * policy's prefetch and a migration are all this.
 *
 * Order, and why: room is reserved for the copy first (a claim on the
 * shard and tier, so two processes never read the same shard twice: the
 * second waits for the first's word); the source is read under a location
 * epoch pin (a source copy dropped meanwhile stays until we are done); the
 * new copy is checked like a shard opened from the pool (header against the
 * shard table) and its checksum recomputed before its word is published;
 * anything that fails returns the reservation and publishes nothing.
 *
 * Sources: a memory tier is copied with memcpy from its mapping; a staged
 * tier (nvme) is read with io_uring (media/io.c), O_DIRECT straight into the
 * new copy's pages, so the page cache holds no second copy.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/atomic.h"
#include "pool/loc.h"
#include "pool/pool_format.h"
#include "store/fetch.h"
#include "store/remote_tier.h"
#include "store/store.h"

#define WAIT_LIMIT_NS (UINT64_C(300) * 1000000000u)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void store_io_close(struct store_io *io)
{
    for (int i = 0; i < POOL_MAX_TIERS; i++) {
        media_reader_close(io->r[i]);
        io->r[i] = NULL;
    }
}

int store_pool_rw(cxlp_store *s, cxlp_pool **out)
{
    int rc = 0;
    pthread_mutex_lock(&s->mu);
    if (!s->wp)
        rc = pool_open_writable(s->a, &s->wp);
    *out = s->wp;
    pthread_mutex_unlock(&s->mu);
    if (rc)
        return seterr(NULL, rc, "dataset %s: copies need a writable handle on the pool: %s",
                      s->name, cxlp_errmsg(NULL));
    return 0;
}

/* Reads shard k's fastest copy outside tier t (UINT32_MAX: any) into dst
 * (len bytes). */
/* 0 when tier u's word for shard k, at off, holds len bytes inside the
 * tier; else CXLP_ECORRUPT naming them (a word is pool memory: untrusted). */
int store_word_in_tier(const cxlp_store *s, uint64_t k, uint32_t u, uint64_t off, uint64_t len)
{
    const struct attach_tier *at = attach_tier(s->a, u);
    if (off < at->data_off || !range_ok(off - at->data_off, len, at->data_len))
        return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": tier %u word names "
                      "%#" PRIx64 "+%" PRIu64 ", outside the tier", s->name, k, u, off, len);
    return 0;
}

const char *store_read_why(const cxlp_store *s, uint32_t u, int rc, char *buf, size_t cap)
{
    if (u >= attach_n_tiers(s->a) || !(attach_tier(s->a, u)->flags & TIER_REMOTE))
        return cxlp_strerror(rc);
    strlcpy0(buf, cxlp_errmsg(NULL), cap);
    return buf;
}

/* io's reader of staged tier u, opened on first use. */
int store_tier_reader(const cxlp_store *s, uint64_t k, uint32_t u, struct store_io *io,
                      struct media_reader **r)
{
    char err[ERRMSG_MAX];
    int rc;
    if (!io->r[u] && (attach_tier(s->a, u)->flags & TIER_REMOTE))
        rc = store_remote_reader(s, u, &io->r[u]);
    else if (!io->r[u] && (rc = media_reader_open(&io->r[u], attach_tier(s->a, u)->path, err,
                                                  sizeof err)))
        return seterr(NULL, rc, "dataset %s shard %" PRIu64 ": %s", s->name, k, err);
    else
        rc = 0;
    if (rc)
        return rc;
    *r = io->r[u];
    return 0;
}

/* Bytes per second a read of staged tier u is expected to move, for the
 * choice of a source (read_source): configured in $CXLPOOL_TIER_BW
 * ("remote=1G,nvme=2G": bytes a second by tier kind), else this store's
 * measure of its reads of the tier (a moving average), else 2 GB/s for an
 * nvme tier and 1 GB/s for a remote one. A tier whose read failed in the
 * last TIER_DOWN_NS counts as 1 byte a second: tried last. */
#define TIER_DOWN_NS (UINT64_C(5) * 1000000000u)
static void conf_bw_read(uint64_t *conf_bw)
{
    const char *e = getenv("CXLPOOL_TIER_BW");
    char buf[256];
    if (!e || strlen(e) >= sizeof buf)
        return;
    strlcpy0(buf, e, sizeof buf);
    char *save = NULL;
    for (char *kv = strtok_r(buf, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '=');
        uint64_t v;
        if (!eq)
            continue;
        *eq = '\0';
        int kind = cxlp_tier_parse(kv);
        if (kind >= 0 && cxlp_size_parse(eq + 1, &v) == 0 && v)
            conf_bw[kind] = v;
    }
}

/* 1 when $CXLPOOL_TIER_BW gives tier kind kind a figure. */
static int tier_bw_configured(int kind)
{
    uint64_t conf_bw[CXLP_TIER_NVME + 1] = {0};
    conf_bw_read(conf_bw);
    return kind >= 0 && kind <= CXLP_TIER_NVME && conf_bw[kind];
}

static uint64_t tier_bw(const cxlp_store *s, uint32_t u)
{
    /* read at every choice (a copy of a shard): a few bytes to parse
     * beside the shard's I/O, and a process may change it between reads */
    uint64_t conf_bw[CXLP_TIER_NVME + 1] = {0};
    if (now_ns() < at_load_relaxed(&s->tier_down[u]))
        return 1;
    conf_bw_read(conf_bw);
    const struct attach_tier *at = attach_tier(s->a, u);
    int kind = at->kind >= 0 && at->kind <= CXLP_TIER_NVME ? at->kind : CXLP_TIER_NVME;
    if (conf_bw[kind])
        return conf_bw[kind];
    uint64_t m = at_load_relaxed(&s->tier_bw[u]);
    if (m)
        return m;
    return kind == CXLP_TIER_REMOTE ? UINT64_C(1000000000) : UINT64_C(2000000000);
}

/* A read of len bytes of staged tier u took ns: the store's measure moves
 * a quarter of the way to it. */
static void tier_measured(cxlp_store *s, uint32_t u, uint64_t len, uint64_t ns)
{
    if (len < (UINT64_C(1) << 20) || !ns)
        return; /* small reads measure latency, not bandwidth */
    uint64_t bw = (uint64_t)((double)len * 1e9 / (double)ns);
    uint64_t old = at_load_relaxed(&s->tier_bw[u]);
    at_store_relaxed(&s->tier_bw[u], old ? old - old / 4 + bw / 4 : bw);
}

/* Reads bytes [at, at + len) of shard k's copy outside tier t (UINT32_MAX:
 * any) into dst: a memory tier's when there is one (memcpy), else the staged
 * copies (the home, a peer's through the remote tier) cheapest first, by
 * len over tier_bw; a staged read that fails goes on to the next holder.
 * The error is the first holder's, its message every holder's. */
static int read_source(cxlp_store *s, uint64_t k, uint32_t t, uint64_t at, uint8_t *dst,
                       uint64_t len, struct store_io *io, struct copy_stat *st)
{
    struct attach *a = s->a;
    uint64_t pin = attach_pin_epoch(a);
    int rc = CXLP_ECORRUPT;
    uint32_t cand[POOL_MAX_TIERS];
    uint64_t coff[POOL_MAX_TIERS], cbw[POOL_MAX_TIERS];
    size_t nc = 0;
    int skipped = 0, peer_mem = -2; /* -2: not asked yet */
    for (uint32_t u = 0; u < attach_n_tiers(a); u++) {
        uint64_t w = store_word(s, k, u);
        if (u == t || !loc_present(w))
            continue;
        const struct attach_tier *ti = attach_tier(a, u);
        if ((ti->flags & TIER_REMOTE) && s->local_only) {
            skipped = 1;
            continue;
        }
        uint64_t off = loc_off(w);
        if ((rc = store_word_in_tier(s, k, u, off, at + len))) {
            attach_unpin_epoch(a, pin);
            return rc;
        }
        off += at;
        if (!(ti->flags & TIER_STAGED)) {
            memcpy(dst, ti->base + off, len);
            attach_unpin_epoch(a, pin);
            return 0;
        }
        /* the cheapest first; ties keep the tiers' order */
        uint64_t bw = tier_bw(s, u);
        if ((ti->flags & TIER_REMOTE) && bw > 1 && !tier_bw_configured(ti->kind)) {
            /* a peer with the shard in memory goes before any home: its
             * read touches no disk, and the home serves every host; a
             * peer without it after this pool's own home (it would read
             * its home, or answer that it has none) */
            if (peer_mem == -2)
                peer_mem = store_peer_memory(s, k);
            bw = peer_mem >= 0 ? UINT64_MAX : s->remote < 0 ? 2 : bw;
        }
        size_t i = nc++;
        for (; i > 0 && cbw[i - 1] < bw; i--) {
            cand[i] = cand[i - 1];
            coff[i] = coff[i - 1];
            cbw[i] = cbw[i - 1];
        }
        cand[i] = u;
        coff[i] = off;
        cbw[i] = bw;
    }
    /* a staged copy (the home's, or a peer's: remote words are never
     * dropped) stays while the store's generation pin holds the dataset:
     * the location pin is not needed for its I/O, and held through it
     * would hold back the frees of every copy dropped meanwhile */
    attach_unpin_epoch(a, pin);
    if (!nc && skipped)
        return seterr(NULL, CXLP_EBUSY, "dataset %s shard %" PRIu64 ": not in this host's "
                      "memory, and its home is another host's (a server reads no remote tier)",
                      s->name, k);
    if (!nc)
        return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": no copy in any tier",
                      s->name, k);
    int first = 0;
    char msgs[ERRMSG_MAX] = "";
    for (size_t i = 0; i < nc; i++) {
        uint32_t u = cand[i];
        const struct attach_tier *ti = attach_tier(a, u);
        struct media_reader *r;
        uint64_t t0 = now_ns();
        int direct = 0;
        rc = store_tier_reader(s, k, u, io, &r);
        if (!rc)
            rc = media_read(r, coff[i], len, dst, &direct);
        if (!rc) {
            tier_measured(s, u, len, now_ns() - t0);
            io->staged_bytes += len;
            if (st && direct)
                st->direct_bytes += len;
            return 0;
        }
        char why[ERRMSG_MAX], one[ERRMSG_MAX + 128]; /* cut to msgs' size below */
        snprintf(one, sizeof one, "reading %" PRIu64 " bytes at %#" PRIx64 " of tier %u (%s): %s",
                 len, coff[i], u, cxlp_tier_name(ti->kind),
                 store_read_why(s, u, rc, why, sizeof why));
        size_t n = strlen(msgs);
        if (n)
            strlcpy0(msgs + n, "; then ", sizeof msgs - n);
        n = strlen(msgs);
        strlcpy0(msgs + n, one, sizeof msgs - n);
        first = first ? first : rc;
        if (i + 1 < nc) /* another holder took over: this one waits its turn a while */
            at_store_relaxed(&s->tier_down[u], now_ns() + TIER_DOWN_NS);
    }
    return seterr(NULL, first, "dataset %s shard %" PRIu64 ": %s", s->name, k, msgs);
}

int store_read_range(cxlp_store *s, uint64_t k, uint64_t at, uint64_t len, uint8_t *dst,
                     struct store_io *io)
{
    if (k >= s->n_shards || !range_ok(at, len, s->loc[k].len))
        return seterr(NULL, CXLP_ERANGE, "dataset %s: bytes [%" PRIu64 ", +%" PRIu64 ") are "
                      "not inside shard %" PRIu64, s->name, at, len, k);
    return read_source(s, k, UINT32_MAX, at, dst, len, io, NULL);
}

/* Waits for another process's copy of shard k in tier t: 0 once its word
 * is there, -EAGAIN when the claim went without a copy (its owner died
 * or gave up: try again). */
int store_wait_copy(cxlp_store *s, cxlp_pool *wp, uint64_t k, uint32_t t, uint64_t want)
{
    uint64_t t0 = now_ns();
    for (unsigned spin = 0;; spin++) {
        if (loc_present(k & POOL_UNIT_TARGET ? store_unit_word(s, k & ~POOL_UNIT_TARGET, t)
                                             : store_word(s, k, t)))
            return 0;
        /* a claim is a reservation: is it still there? (a reserve attempt
         * answers; it also reclaims a dead claimer's) */
        struct pool_extent e;
        int rc = pool_copy_reserve(wp, s->ds.states_off, k, t, want, &e);
        if (rc == 0) {
            pool_unreserve(wp, (int)t, e);
            return -EAGAIN;
        }
        if (rc == CXLP_EEXIST)
            return 0;
        if (rc != CXLP_EBUSY)
            return rc;
        if (now_ns() - t0 > WAIT_LIMIT_NS)
            return seterr(NULL, CXLP_EBUSY, "dataset %s %s %" PRIu64 ": another process has "
                          "been copying it into tier %u for %llu s", s->name,
                          k & POOL_UNIT_TARGET ? "unit" : "shard", k & ~POOL_UNIT_TARGET, t,
                          (unsigned long long)(WAIT_LIMIT_NS / 1000000000u));
        usleep(spin < 20 ? 200 : 2000);
    }
}

int store_copy(cxlp_store *s, uint64_t k, uint32_t t, unsigned flags, uint32_t drop_mask,
               struct store_io *io, struct copy_stat *st)
{
    if (!s->tiered || k >= s->n_shards || t >= attach_n_tiers(s->a) ||
        (attach_tier(s->a, t)->flags & TIER_STAGED))
        return seterr(NULL, CXLP_EARG, "dataset %s: shard %" PRIu64 " into tier %u: not a memory "
                      "tier of a tiered pool", s->name, k, t);
    cxlp_pool *wp;
    int rc = store_pool_rw(s, &wp);
    if (rc)
        return rc;
    struct store_io tmp = {0};
    if (!io)
        io = &tmp;
    struct copy_stat cs = {0};
    struct pool_extent ext;
    const uint64_t so = s->ds.states_off;
    for (;;) {
        rc = pool_copy_reserve(wp, so, k, t, 0, &ext);
        if (rc == CXLP_EBUSY && (flags & FETCH_WAIT)) {
            rc = store_wait_copy(s, wp, k, t, 0);
            if (rc == -EAGAIN)
                continue;
            cs.waited = 1;
            if (rc == 0)
                rc = CXLP_EEXIST;
        }
        break;
    }
    if (rc == CXLP_EEXIST) {
        /* the copy is there: a migration keeps it and drops the others */
        int r2 = 0;
        if (flags & FETCH_KEEP)
            r2 = pool_copy_keep(wp, so, k, t, 0);
        if (!r2 && drop_mask & ~(1u << t))
            r2 = pool_copy_drop(wp, so, k, drop_mask & ~(1u << t), 0, &cs.dropped);
        if (r2 && r2 != CXLP_ENOTFOUND)
            rc = seterr(NULL, r2, "%s", cxlp_errmsg(NULL));
        goto out;
    }
    if (rc) {
        rc = seterr(NULL, rc, "dataset %s shard %" PRIu64 ": %s", s->name, k, cxlp_errmsg(NULL));
        goto out;
    }
    uint8_t *dst = pool_base_rw(wp, (int)t) + ext.off;
    rc = read_source(s, k, t, 0, dst, ext.len, io, &cs);
    if (!rc) {
        struct shard g;
        struct shard_col cols[SHARD_MAX_COLS];
        char err[ERRMSG_MAX];
        rc = store_shard_check(s, k, dst, &g, cols, 0, "new copy");
        if (!rc && (rc = shard_verify_copy(&g, err, sizeof err)))
            seterr(NULL, rc, "dataset %s shard %" PRIu64 " (new copy in tier %u): %s", s->name,
                   k, t, err);
    }
    if (!rc) {
        cs.bytes = ext.len;
        fault_point("copy-before-place");
        rc = pool_copy_place(wp, so, k, t, ext, !(flags & FETCH_KEEP), drop_mask, &cs.dropped);
        if (rc)
            rc = seterr(NULL, rc, "dataset %s shard %" PRIu64 ": %s", s->name, k,
                        cxlp_errmsg(NULL));
    } else {
        char msg[ERRMSG_MAX];
        strlcpy0(msg, cxlp_errmsg(NULL), sizeof msg);
        pool_unreserve(wp, (int)t, ext);
        seterr(NULL, rc, "%s", msg);
    }
out:
    store_io_close(&tmp);
    if (st)
        *st = cs;
    return rc;
}

int store_read_head(cxlp_store *s, uint64_t k, uint8_t *page, struct shard *g,
                    struct shard_col *cols)
{
    if (k >= s->n_shards)
        return seterr(NULL, CXLP_ERANGE, "dataset %s: shard %" PRIu64 " of %" PRIu64, s->name, k,
                      s->n_shards);
    struct store_io io = {0};
    int rc = read_source(s, k, UINT32_MAX, 0, page, SHARD_DATA_OFF, &io, NULL);
    store_io_close(&io);
    char err[ERRMSG_MAX];
    if (!rc && (rc = shard_open_head(g, cols, s->ncols, page, s->loc[k].len, err, sizeof err)))
        seterr(NULL, rc, "dataset %s shard %" PRIu64 " (header page): %s", s->name, k, err);
    return rc;
}

int store_read_private(cxlp_store *s, uint64_t k, struct store_io *io, uint8_t **buf,
                       struct shard *g, struct shard_col *cols)
{
    *buf = NULL;
    if (k >= s->n_shards)
        return seterr(NULL, CXLP_ERANGE, "dataset %s: shard %" PRIu64 " of %" PRIu64, s->name, k,
                      s->n_shards);
    const uint64_t len = ALIGN_UP(s->loc[k].len, POOL_EXTENT_ALIGN); /* as an extent holds it */
    void *p = NULL;
    if (posix_memalign(&p, POOL_EXTENT_ALIGN, len)) /* O_DIRECT wants aligned memory */
        return seterr(NULL, -ENOMEM, "dataset %s shard %" PRIu64 ": no memory for a private "
                      "copy of %" PRIu64 " bytes", s->name, k, len);
    int rc = read_source(s, k, UINT32_MAX, 0, p, len, io, NULL);
    if (!rc)
        rc = store_shard_check(s, k, p, g, cols, 0, "private copy");
    char err[ERRMSG_MAX];
    if (!rc && (rc = shard_verify_copy(g, err, sizeof err)))
        seterr(NULL, rc, "dataset %s shard %" PRIu64 " (private copy): %s", s->name, k, err);
    if (rc) {
        free(p);
        return rc;
    }
    *buf = p;
    return 0;
}

/* The header pages a store keeps of the home copies it read in part, one
 * slot per shard modulo their count (at most HEAD_CACHE_MAX: 16 MiB), each
 * checked as a whole shard's header is before it is kept, and taken only
 * for the same home word (tier, offset, version). A partial read of a
 * shard whose page is kept starts at its indexes: in a full shuffle read
 * in part, where each batch reads one or two records from each of dozens
 * of shards, the header step was 17% of the read time (docs/benchmarks.md).
 * A hash table of the shards read last would keep more of a dataset of
 * many shards; this keeps every header of a dataset of up to 4,096 shards,
 * and the slot of a shard is found with a modulo. */
#define HEAD_CACHE_MAX 4096u
/* The pages of format 4 sums areas kept likewise, a slot per (shard, page)
 * hashed: in a full shuffle read in part each record's blocks need a page
 * of sums, 4 KiB beside 8 KiB of blocks, and every page covers 2 MiB of
 * its shard, so a page read once serves the epoch's later records there.
 * 4,096 pages (16 MiB) hold every page of 8 GiB of 4 KiB blocks. */
#define SUMS_CACHE_MAX 4096u
struct head_page {
    uint64_t k1;               /* shard + 1; 0: empty */
    uint64_t p;                /* header page: 0; page of sums: its index + 1 */
    uint64_t word;             /* the home word it was read at */
    uint8_t page[SHARD_DATA_OFF];
};

/* A table of kept pages: the header pages (one slot per shard) or the
 * pages of sums. */
struct kept {
    struct head_page **t;
    uint32_t *n;
    uint32_t max;
};

static struct kept kept_heads(cxlp_store *s)
{
    return (struct kept){&s->heads, &s->n_heads, (uint32_t)MIN(s->n_shards, HEAD_CACHE_MAX)};
}

static struct kept kept_sums(cxlp_store *s)
{
    return (struct kept){&s->sums, &s->n_sums, SUMS_CACHE_MAX};
}

static uint64_t kept_slot(const struct kept *c, uint64_t k, uint64_t p)
{
    return (k + p * UINT64_C(0x9e3779b97f4a7c15)) % *c->n;
}

/* Copies page p of shard k (home word w), if kept, to dst: 1, or 0. */
static int kept_get(cxlp_store *s, struct kept c, uint64_t k, uint64_t p, uint64_t w,
                    uint8_t *dst)
{
    int hit = 0;
    pthread_mutex_lock(&s->heads_mu);
    if (*c.t) {
        const struct head_page *h = &(*c.t)[kept_slot(&c, k, p)];
        if ((hit = h->k1 == k + 1 && h->p == p && h->word == w))
            memcpy(dst, h->page, SHARD_DATA_OFF);
    }
    pthread_mutex_unlock(&s->heads_mu);
    return hit;
}

/* Keeps page p of shard k (home word w), checked, in place of whatever its
 * slot held; nothing to copy when the slot holds it already (a page of
 * sums taken from it is verified and put back like one read). */
static void kept_put(cxlp_store *s, struct kept c, uint64_t k, uint64_t p, uint64_t w,
                     const uint8_t *src)
{
    pthread_mutex_lock(&s->heads_mu);
    if (!*c.t && c.max) {
        if ((*c.t = calloc(c.max, sizeof **c.t))) /* pages touched as kept */
            *c.n = c.max;
    }
    if (*c.t) {
        struct head_page *h = &(*c.t)[kept_slot(&c, k, p)];
        if (h->k1 == k + 1 && h->p == p && h->word == w) {
            pthread_mutex_unlock(&s->heads_mu);
            return;
        }
        h->k1 = k + 1;
        h->p = p;
        h->word = w;
        memcpy(h->page, src, SHARD_DATA_OFF);
    }
    pthread_mutex_unlock(&s->heads_mu);
}

int store_kept_page(cxlp_store *s, uint64_t k, uint64_t p, uint64_t w, uint8_t *dst)
{
    return kept_get(s, p ? kept_sums(s) : kept_heads(s), k, p, w, dst);
}

void store_keep_page(cxlp_store *s, uint64_t k, uint64_t p, uint64_t w, const uint8_t *src)
{
    kept_put(s, p ? kept_sums(s) : kept_heads(s), k, p, w, src);
}

/* A sorted set of block or page numbers (a partial read of a large shard
 * touches a few of its up to 2^18 blocks: a list, not a bitmap). */
struct nums {
    uint64_t *v;
    size_t n, cap;
};

static int nums_push(struct nums *a, uint64_t x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 16;
        uint64_t *v = realloc(a->v, cap * sizeof *v);
        if (!v)
            return seterr(NULL, -ENOMEM, "out of memory for a partial read");
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sorts a and drops repeats. */
static void nums_settle(struct nums *a)
{
    if (a->n < 2)
        return;
    qsort(a->v, a->n, sizeof *a->v, cmp_u64);
    size_t m = 1;
    for (size_t i = 1; i < a->n; i++)
        if (a->v[i] != a->v[m - 1])
            a->v[m++] = a->v[i];
    a->n = m;
}

static int nums_has(const struct nums *a, uint64_t x)
{
    return a->n && bsearch(&x, a->v, a->n, sizeof *a->v, cmp_u64) != NULL;
}

/* Adds add's numbers to a (a stays sorted). */
static int nums_merge(struct nums *a, const struct nums *add)
{
    for (size_t i = 0; i < add->n; i++) {
        int rc = nums_push(a, add->v[i]);
        if (rc)
            return rc;
    }
    nums_settle(a);
    return 0;
}

static void nums_free(struct nums *a)
{
    free(a->v);
    *a = (struct nums){0};
}

/* One shard of a partial read in progress: its sparse copy and which of its
 * blocks (and pages of its sums area) are read and verified. */
struct partial {
    uint64_t k;
    uint64_t word;             /* its home word, as resolved for this read */
    int kept;                  /* its header page came from the store's */
    uint8_t *p;
    uint64_t len;              /* the mapping: the extent's length */
    uint64_t off;              /* the home copy's offset in its tier */
    uint64_t head;             /* bytes [0, head) read first (the header
                                  page's read): never read again, so the
                                  header and sums checked stay the ones
                                  every block is verified against */
    struct shard *g;
    struct shard_col *cols;
    const uint64_t *rec;       /* the records wanted, shard-local */
    size_t n;
    struct nums want;          /* blocks the step needs; then those it reads */
    struct nums fresh;         /* pages of the sums area the step reads
                                  (or takes from the store's) */
    struct nums done;          /* blocks read and verified */
    struct nums pages;         /* pages of the sums area read and verified */
};

/* The shards of one partial read. They share the home tier's reader, and
 * each step reads what all of them need in one io_uring call (media_readv,
 * MEDIA_IO_DEPTH requests in flight): a batch whose records lie in many
 * shards pays a round trip per step, not per step and shard. */
struct parts {
    cxlp_store *s;
    uint32_t u;                /* the home tier */
    struct media_reader *r;
    struct partial *x;
    size_t n;
    struct media_read_range *v; /* the step's ranges */
    size_t nv, cap_v;
    uint64_t bytes;            /* read so far */
};

/* "shard 7" or "shards 7 and 12 more", for messages. */
static const char *parts_named(const struct parts *P, char *buf, size_t cap)
{
    if (P->n == 1)
        snprintf(buf, cap, "shard %" PRIu64, P->x[0].k);
    else
        snprintf(buf, cap, "shards %" PRIu64 " and %zu more", P->x[0].k, P->n - 1);
    return buf;
}

/* One more range for the step's read, merged with the last one where it
 * follows it in the tier. */
static int add_range(struct parts *P, uint64_t off, uint64_t len, void *dst)
{
    struct media_read_range *l = P->nv ? &P->v[P->nv - 1] : NULL;
    if (l && l->off + l->len == off && (uint8_t *)l->dst + l->len == (uint8_t *)dst) {
        l->len += len;
        P->bytes += len; /* a merged range is read too */
        return 0;
    }
    if (P->nv == P->cap_v) {
        size_t cap = P->cap_v ? 2 * P->cap_v : 64;
        struct media_read_range *v = realloc(P->v, cap * sizeof *v);
        if (!v)
            return seterr(NULL, -ENOMEM, "dataset %s: out of memory for a partial read",
                          P->s->name);
        P->v = v;
        P->cap_v = cap;
    }
    P->v[P->nv++] = (struct media_read_range){off, len, dst};
    P->bytes += len;
    return 0;
}

/* Reads the step's ranges; what names the step in a message. */
static int read_ranges(struct parts *P, const char *what)
{
    if (!P->nv)
        return 0;
    int rc = media_readv(P->r, P->v, P->nv, NULL);
    size_t nv = P->nv;
    P->nv = 0;
    if (rc) {
        char who[64], why[ERRMSG_MAX];
        return seterr(NULL, rc, "dataset %s %s: partial read of %zu ranges (%s) from tier %u "
                      "(%s): %s", P->s->name, parts_named(P, who, sizeof who), nv, what, P->u,
                      attach_tier(P->s->a, P->u)->path,
                      store_read_why(P->s, P->u, rc, why, sizeof why));
    }
    return 0;
}

/* Marks the blocks holding bytes [lo, hi) of the shard as needed. */
static int need_bytes(struct partial *x, uint64_t lo, uint64_t hi)
{
    int rc = 0;
    if (lo >= hi)
        return 0;
    for (uint64_t b = lo >> x->g->bsum_shift;
         !rc && b <= (hi - 1) >> x->g->bsum_shift && b < x->g->n_bsums; b++)
        rc = nums_push(&x->want, b);
    return rc;
}

/* Where page p of x's sums area starts in its mapping; 1 in *whole when
 * all of its 4 KiB lie inside (what the store's kept pages hold). */
static uint64_t sums_page(const struct partial *x, uint64_t p, int *whole)
{
    uint64_t at = x->g->sums_off + p * SHARD_SUMS_PAGE;
    *whole = at + SHARD_SUMS_PAGE <= x->len;
    return at;
}

/* Reads the needed blocks of every shard not read yet (whole blocks, runs
 * of them one range each, and the pages of the sums area that hold their
 * sums: all in one call), then verifies each page read against its page
 * sum and each block read against its sum. */
static int load_needed(struct parts *P, const char *what)
{
    int rc;
    for (size_t i = 0; i < P->n; i++) {
        struct partial *x = &P->x[i];
        const struct shard *g = x->g;
        const uint64_t B = UINT64_C(1) << g->bsum_shift;
        /* a block's reads end where the blocks do: a sums area's pages are
         * read as pages (each once) */
        const uint64_t end = g->sums_off ? g->sums_off : x->len;
        nums_settle(&x->want);
        size_t m = 0;
        for (size_t j = 0; j < x->want.n; j++) {
            uint64_t b = x->want.v[j];
            if (nums_has(&x->done, b))
                continue;
            x->want.v[m++] = b;
            uint64_t lo = MAX(b * B, x->head), hi = MIN(b * B + B, end);
            if (lo < hi && (rc = add_range(P, x->off + lo, hi - lo, x->p + lo)))
                return rc;
            if (g->sums_off && !nums_has(&x->pages, b / SHARD_PAGE_SUMS) &&
                (rc = nums_push(&x->fresh, b / SHARD_PAGE_SUMS)))
                return rc;
        }
        x->want.n = m;
        nums_settle(&x->fresh);
        for (size_t j = 0; j < x->fresh.n; j++) {
            int whole;
            uint64_t lo = sums_page(x, x->fresh.v[j], &whole);
            uint64_t hi = MIN(lo + SHARD_SUMS_PAGE, x->len);
            /* a kept page is verified again below, as one read is */
            if (whole &&
                kept_get(P->s, kept_sums(P->s), x->k, x->fresh.v[j] + 1, x->word, x->p + lo))
                continue;
            if ((rc = add_range(P, x->off + lo, hi - lo, x->p + lo)))
                return rc;
        }
    }
    if ((rc = read_ranges(P, what)))
        return rc;
    cxlp_store *s = P->s;
    for (size_t i = 0; i < P->n; i++) {
        struct partial *x = &P->x[i];
        char err[ERRMSG_MAX];
        for (size_t j = 0; j < x->fresh.n && !rc; j++) {
            int whole;
            uint64_t lo = sums_page(x, x->fresh.v[j], &whole);
            rc = shard_verify_sum_pages(x->g, x->fresh.v[j], 1, err, sizeof err);
            if (!rc && whole)
                kept_put(s, kept_sums(s), x->k, x->fresh.v[j] + 1, x->word, x->p + lo);
        }
        for (size_t j = 0; j < x->want.n && !rc; j++)
            rc = shard_verify_blocks(x->g, x->want.v[j], 1, err, sizeof err);
        if (rc)
            return seterr(NULL, rc, "dataset %s shard %" PRIu64 " (partial read from tier "
                          "%u, %s, at %#" PRIx64 "): %s", s->name, x->k, P->u,
                          attach_tier(s->a, P->u)->path, x->off, err);
        if ((rc = nums_merge(&x->pages, &x->fresh)) || (rc = nums_merge(&x->done, &x->want)))
            return rc;
        x->fresh.n = x->want.n = 0;
    }
    return 0;
}

/* The steps: every shard's header page; the variable-size columns'
 * indexes; the blocks of the records. 1 when the dataset's shards have no
 * block sums (format 1 or 2). */
static int read_parts(struct parts *P)
{
    cxlp_store *s = P->s;
    char err[ERRMSG_MAX];
    int rc;
    /* the header page alone: the header, the directory and the sums,
     * under the header checksum. The rest of block 0 is read as any other
     * block, when a record needs it (load_needed starts it at head). Each
     * shard's reads of a step are one range of the step's call, and a
     * batch reads mostly one record a shard (a full shuffle): reading 4 KiB
     * here instead of block 0's 64 KiB took such an epoch from 14.5 to 8.2
     * times the dataset's bytes (docs/benchmarks.md) */
    for (size_t i = 0; i < P->n; i++) {
        struct partial *x = &P->x[i];
        x->head = MIN(x->len, (uint64_t)SHARD_DATA_OFF);
        x->kept = x->head == SHARD_DATA_OFF && kept_get(s, kept_heads(s), x->k, 0, x->word, x->p);
        if (!x->kept && (rc = add_range(P, x->off, x->head, x->p)))
            return rc;
    }
    if ((rc = read_ranges(P, "headers")))
        return rc;
    for (size_t i = 0; i < P->n; i++) {
        struct partial *x = &P->x[i];
        struct shard *g = x->g;
        rc = shard_open_head(g, x->cols, s->ncols, x->p, s->loc[x->k].len, err, sizeof err);
        if (rc)
            return seterr(NULL, rc, "dataset %s shard %" PRIu64 " (partial read from tier %u, "
                          "%s): %s", s->name, x->k, P->u, attach_tier(s->a, P->u)->path, err);
        if (!g->n_bsums) {
            /* shard format 1 or 2: read whole. Every shard of a dataset
             * has one format (store_shard_check), so the next ones are
             * too; a hint only: a wrong one costs whole reads, never a
             * wrong byte */
            at_store_relaxed(&s->no_bsums, 1);
            return 1;
        }
        /* the indexes, verified before shard_open walks them */
        for (uint32_t c = 0; c < g->n_cols && !rc; c++)
            if (x->cols[c].kind == SHARD_KIND_VAR)
                rc = need_bytes(x, x->cols[c].index_off,
                                x->cols[c].index_off + x->cols[c].index_len);
        if (rc)
            return rc;
    }
    if ((rc = load_needed(P, "indexes")))
        return rc;
    for (size_t i = 0; i < P->n; i++) {
        struct partial *x = &P->x[i];
        struct shard *g = x->g;
        if ((rc = store_shard_check(s, x->k, x->p, g, x->cols, 0, "partial read")))
            return rc;
        if (!x->kept && x->head == SHARD_DATA_OFF)
            kept_put(s, kept_heads(s), x->k, 0, x->word, x->p);
        for (size_t j = 0; j < x->n; j++) {
            if (x->rec[j] >= g->n_records)
                return seterr(NULL, CXLP_ERANGE, "dataset %s shard %" PRIu64 ": record %" PRIu64
                              " of %" PRIu64, s->name, x->k, x->rec[j], g->n_records);
            for (uint32_t c = 0; c < g->n_cols; c++) {
                const uint8_t *q;
                uint64_t l;
                if (shard_col_record(&x->cols[c], x->rec[j], &q, &l)) {
                    shard_explain(g, c, x->rec[j], err, sizeof err);
                    return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 " (partial "
                                  "read): %s", s->name, x->k, err);
                }
                if ((rc = need_bytes(x, (uint64_t)(q - x->p), (uint64_t)(q - x->p) + l)))
                    return rc;
            }
        }
    }
    return load_needed(P, "records");
}

static int parts_from(cxlp_store *s, struct store_part *v, size_t n, struct store_io *io,
                      uint64_t *bytes, uint32_t u);

/* Shards v[0..n) in part: those a peer has in memory (store_peer_memory)
 * through the remote tier, unless $CXLPOOL_TIER_BW gives it a figure or
 * its reads failed lately, and the rest from the home tier. A mirror's
 * home is the remote tier: its reader picks the peer with the shard in
 * memory itself. Peer reads that fail are read from the home. */
static int peers_or_home(cxlp_store *s, struct store_part *v, size_t n, struct store_io *io,
                         uint64_t *bytes, uint32_t home)
{
    const uint32_t rt = store_remote_tier(s);
    uint8_t *peer = NULL;
    size_t np = 0;
    uint64_t recs = 0;
    if (rt != UINT32_MAX && (rt == home || (!tier_bw_configured(CXLP_TIER_REMOTE) &&
                                            now_ns() >= at_load_relaxed(&s->tier_down[rt])))) {
        if (!(peer = calloc(n, 1)))
            return seterr(NULL, -ENOMEM, "dataset %s: out of memory", s->name);
        for (size_t i = 0; i < n; i++)
            if (loc_present(store_word(s, v[i].k, rt)) && store_peer_memory(s, v[i].k) >= 0) {
                peer[i] = 1;
                np++;
                recs += v[i].n;
            }
    }
    int rc;
    if (!np || np == n || rt == home) {
        uint32_t u = np == n ? rt : home;
        rc = parts_from(s, v, n, io, bytes, u);
        if (rc && rc != 1 && u != home) { /* the peers failed: the home */
            at_store_relaxed(&s->tier_down[rt], now_ns() + TIER_DOWN_NS);
            np = recs = 0;
            rc = parts_from(s, v, n, io, bytes, home);
        }
    } else {
        /* w[0..np): the peers' shards, w[np..n): the home's */
        struct store_part *w = malloc(n * sizeof *w);
        size_t *at = malloc(n * sizeof *at);
        uint64_t b1 = 0, b2 = 0;
        rc = w && at ? 0 : seterr(NULL, -ENOMEM, "dataset %s: out of memory", s->name);
        for (size_t i = 0, a = 0, b = np; !rc && i < n; i++) {
            size_t j = peer[i] ? a++ : b++;
            w[j] = v[i];
            at[j] = i;
        }
        if (!rc && (rc = parts_from(s, w, np, io, &b1, rt)) && rc != 1) {
            at_store_relaxed(&s->tier_down[rt], now_ns() + TIER_DOWN_NS);
            np = recs = 0;
            rc = parts_from(s, w, n, io, &b1, home);
        } else if (!rc && (rc = parts_from(s, w + np, n - np, io, &b2, home))) {
            for (size_t j = 0; j < np; j++)
                munmap(w[j].buf, w[j].buf_len);
        }
        *bytes = b1 + b2;
        for (size_t j = 0; !rc && j < n; j++) {
            v[at[j]].buf = w[j].buf;
            v[at[j]].buf_len = w[j].buf_len;
        }
        free(w);
        free(at);
    }
    if (!rc) {
        io->peer_parts += np;
        io->peer_records += recs;
    }
    free(peer);
    return rc;
}

int store_read_parts(cxlp_store *s, struct store_part *v, size_t n, struct store_io *io,
                     uint64_t *bytes)
{
    *bytes = 0;
    for (size_t i = 0; i < n; i++) {
        v[i].buf = NULL;
        v[i].buf_len = 0;
    }
    struct attach *a = s->a;
    uint32_t ver = at_load_acquire(&s->version); /* 0 until a shard settled it */
    if (!s->tiered || (ver && ver < SHARD_VERSION_V3) || at_load_relaxed(&s->no_bsums))
        return 1;
    const uint32_t home = store_home(s);
    if (home >= attach_n_tiers(a) || !(attach_tier(a, home)->flags & TIER_STAGED))
        return 1;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        uint64_t k = v[i].k;
        if (k >= s->n_shards)
            rc = seterr(NULL, CXLP_ERANGE, "dataset %s: shard %" PRIu64 " of %" PRIu64, s->name,
                        k, s->n_shards);
        else if (!loc_present(store_word(s, k, home)))
            rc = 1;
    }
    if (rc || !n)
        return rc;
    return peers_or_home(s, v, n, io, bytes, home);
}

/* Shards v[0..n) in part from staged tier u, which holds each of them. */
static int parts_from(cxlp_store *s, struct store_part *v, size_t n, struct store_io *io,
                      uint64_t *bytes, uint32_t u)
{
    struct parts P = {.s = s, .u = u, .n = n};
    int rc = 0;
    *bytes = 0;
    if (!(P.x = calloc(n, sizeof *P.x)))
        return seterr(NULL, -ENOMEM, "dataset %s: out of memory for a partial read of %zu "
                      "shards", s->name, n);
    for (size_t i = 0; i < n && !rc; i++) {
        struct partial *x = &P.x[i];
        uint64_t k = x->k = v[i].k;
        x->g = v[i].g;
        x->cols = v[i].cols;
        x->rec = v[i].rec;
        x->n = v[i].n;
        x->len = ALIGN_UP(s->loc[k].len, POOL_EXTENT_ALIGN); /* as an extent holds it */
        x->word = store_word(s, k, P.u);
        x->off = loc_off(x->word);
        if ((rc = store_word_in_tier(s, k, P.u, x->off, x->len)))
            break;
        /* sparse: only the pages of the blocks read are ever touched */
        void *p = mmap(NULL, x->len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) {
            rc = seterr(NULL, -errno, "dataset %s shard %" PRIu64 ": no address space for a "
                        "partial read of %" PRIu64 " bytes", s->name, k, x->len);
            break;
        }
        x->p = v[i].buf = p;
        v[i].buf_len = x->len;
    }
    if (!rc && !(rc = store_tier_reader(s, P.x[0].k, P.u, io, &P.r)))
        rc = read_parts(&P);
    *bytes = P.bytes;
    for (size_t i = 0; i < n; i++) {
        nums_free(&P.x[i].want);
        nums_free(&P.x[i].fresh);
        nums_free(&P.x[i].done);
        nums_free(&P.x[i].pages);
    }
    if (rc)
        for (size_t i = 0; i < n; i++) {
            if (v[i].buf)
                munmap(v[i].buf, v[i].buf_len);
            v[i].buf = NULL;
            v[i].buf_len = 0;
        }
    free(P.x);
    free(P.v);
    return rc;
}

int store_read_partial(cxlp_store *s, uint64_t k, const uint64_t *rec, size_t n,
                       struct store_io *io, uint8_t **buf, uint64_t *buf_len,
                       struct shard *g, struct shard_col *cols, uint64_t *bytes)
{
    struct store_part v = {.k = k, .rec = rec, .n = n, .g = g, .cols = cols};
    int rc = store_read_parts(s, &v, 1, io, bytes);
    *buf = v.buf;
    *buf_len = v.buf_len;
    return rc;
}

int store_read_home(cxlp_store *s, struct store_part *v, size_t n, struct store_io *io,
                    uint64_t *bytes, size_t *whole)
{
    *whole = 0;
    int rc = store_read_parts(s, v, n, io, bytes);
    if (rc != 1)
        return rc;
    for (size_t i = 0; i < n; i++) {
        v[i].buf_len = 0;
        if ((rc = store_read_private(s, v[i].k, io, &v[i].buf, v[i].g, v[i].cols))) {
            for (size_t j = 0; j < i; j++) {
                free(v[j].buf);
                v[j].buf = NULL;
            }
            return rc;
        }
    }
    *whole = n;
    return 0;
}

void store_home_free(uint8_t *buf, uint64_t map_len)
{
    if (map_len)
        munmap(buf, map_len);
    else
        free(buf);
}

int store_room_from_others(cxlp_store *s, uint32_t t)
{
    cxlp_pool *wp;
    uint64_t bytes = 0;
    return store_pool_rw(s, &wp) == 0 &&
           pool_drop_one_cache(wp, t, s->ds.states_off, &bytes) == 0 && bytes > 0;
}

int store_fetch(cxlp_store *s, uint64_t k, unsigned flags)
{
    uint64_t t0 = now_ns();
    int rc = CXLP_EFULL;
    uint32_t t = 0;
    for (uint32_t i = 0; i < s->n_mem; i++) {
        t = s->mem[i];
        /* a tier full of other datasets' cache copies gives up a few:
         * they are evictable by definition */
        for (int tries = 0; tries < 8; tries++) {
            rc = store_copy(s, k, t, flags | FETCH_WAIT, 0, NULL, NULL);
            if (rc != CXLP_EFULL || !store_room_from_others(s, t))
                break;
        }
        if (rc != CXLP_EFULL)
            break;
    }
    if (rc == CXLP_EEXIST)
        rc = 0;
    if (rc == 0) {
        struct pool_tier_ctr *c = attach_ctr(s->a, t);
        if (c) {
            at_fetch_add_relaxed(&c->misses, 1);
            at_fetch_add_relaxed(&c->stall_ns, now_ns() - t0);
        }
    } else if (rc == CXLP_EFULL) {
        rc = seterr(NULL, rc, "dataset %s shard %" PRIu64 ": no memory tier has room for a copy "
                    "(copies held by open views and pins are freed when they go)", s->name, k);
    }
    return rc;
}
