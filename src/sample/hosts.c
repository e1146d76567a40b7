/*
 * hosts.c - HOSTS: the block order over hosts that do not share memory,
 * each host's memory one part of one cache (docs/sampling.md, "Hosts").
 *
 * Epoch e: the M blocks (S consecutive ids each, the last maybe short) are
 * permuted by sigma (keyed by seed, e; the block order's shard order), and
 * sigma's slots are cut into segments: host h owns slots [B[h], B[h+1]),
 * M_h = B[h+1] - B[h] its largest-remainder share of M by weight. So each
 * epoch gives every host a fresh random set of blocks, as many as its
 * weight (capability) says.
 *
 * With keep, sigma is keyed by the seed alone (the same deal every epoch)
 * and host h's stream visits its segment's slots in the order of a
 * per-epoch bijection tau_h: the blocks stay where a host's memory holds
 * them, their order still changes. Without keep tau is the identity.
 *
 * Host h's stream is the block order restricted to its segment: windows of
 * W slots, the short block moved to its window's last slot, each window's
 * records in the order of a keyed bijection. With one host this is BLOCK
 * exactly (same keys, same windows): a test checks it.
 *
 * The epoch order interleaves the streams, N_h samples each, by a balanced
 * tree of two-way Bresenham splits: a node over hosts [lo, hi) with T
 * samples, A of them its left half's, puts position p on the left iff
 * floor((p+1)A/T) > floor(pA/T); p's index on the left is floor(pA/T), on
 * the right p - floor(pA/T). Each split is exact (the left gets exactly A
 * of the T positions, spread evenly), so every stream is read whole, and
 * the count of host h before any p is one walk down the tree.
 *
 * Ranks: the round of draw j is the positions [u, u + world), u = base +
 * j*world (unrolled: u >= L wraps, the padding of every order), so which
 * positions a rank set consumes is what it is for every order (counts,
 * drop_last, padding, state and elastic resume unchanged). Inside a round,
 * host g's stream has cnt_g positions; host g's k-th rank (rank order,
 * rotated by a hash of the round) takes the round's k-th position of its own
 * host's stream when k < cnt_g; the remaining ranks, host by host, take the
 * remaining positions, host by host. A rank thus reads its own host's blocks whenever the
 * round has one for it: over an epoch host h's ranks read
 * min(their draws, the round share of host h's stream) locally, which is as
 * much as equal shares allow, up to the +-1 of each split's rounding.
 *
 * Rejected: giving each host's ranks their own host's stream and nothing
 * else (a host's samples and its ranks' draws differ unless the weights
 * match the ranks, and the consumed set would then depend on the rank
 * layout, so a checkpoint could not be split again under another world);
 * a stored assignment table (O(M) memory, and a state that is no longer a
 * few integers).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "sample/sample.h"

static inline uint64_t muldiv(uint64_t a, uint64_t b, uint64_t c)
{
    return (uint64_t)((unsigned __int128)a * b / c);
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

int hosts_init(cxlp_sampler *s, const struct cxlp_hosts *h)
{
    if (!h)
        return seterr(NULL, CXLP_EARG, "sampler: hosts is NULL");
    if (h->n_hosts < 1 || h->n_hosts > CXLP_HOSTS_MAX)
        return seterr(NULL, CXLP_EARG, "sampler: hosts.n_hosts %" PRIu32 " is not in 1..%d",
                      h->n_hosts, CXLP_HOSTS_MAX);
    if (!h->weight)
        return seterr(NULL, CXLP_EARG, "sampler: hosts.weight is NULL");
    uint32_t H = h->n_hosts;
    uint64_t sum = 0, g = 0;
    for (uint32_t i = 0; i < H; i++) {
        if (add_overflow_u64(sum, h->weight[i], &sum) || sum > CXLP_SAMPLER_MAX_N)
            return seterr(NULL, CXLP_EARG, "sampler: hosts.weight sums past 2^63 (at "
                          "hosts.weight[%" PRIu32 "])", i);
        g = gcd64(g, h->weight[i]);
    }
    if (!sum)
        return seterr(NULL, CXLP_EARG, "sampler: hosts.weight is all 0 (at least one host "
                      "must take blocks)");
    for (uint32_t r = 0; h->rank_host && r < s->world; r++)
        if (h->rank_host[r] >= H)
            return seterr(NULL, CXLP_EARG, "sampler: hosts.rank_host[%" PRIu32 "] %" PRIu32
                          " is not below hosts.n_hosts %" PRIu32, r, h->rank_host[r], H);
    struct hosts *x = calloc(1, sizeof *x);
    if (!x)
        return seterr(NULL, -ENOMEM, "sampler: out of memory");
    s->hosts = x;
    x->H = H;
    size_t n8 = (size_t)H * sizeof(uint64_t);
    x->wt = malloc(n8);
    x->B = malloc(n8 + sizeof(uint64_t));
    x->k = calloc(H, sizeof(uint64_t));
    x->below = calloc(H, sizeof(uint64_t));
    x->N = malloc(n8);
    x->P = malloc(n8 + sizeof(uint64_t));
    x->lo = malloc(n8);
    x->hi = malloc(n8);
    x->win = malloc((size_t)H * sizeof *x->win);
    x->keep = h->keep != 0;
    if (x->keep && !(x->tau = malloc((size_t)H * sizeof *x->tau)))
        return seterr(NULL, -ENOMEM, "sampler: out of memory");
    if (!x->wt || !x->B || !x->k || !x->below || !x->N || !x->P || !x->lo || !x->hi || !x->win)
        return seterr(NULL, -ENOMEM, "sampler: out of memory");
    sum /= g;
    for (uint32_t i = 0; i < H; i++)
        x->wt[i] = h->weight[i] / g;
    /* largest remainder: floor(M w / sum) each, then one more block to the
     * hosts with the largest remainders (ties to the lower host) */
    uint64_t M = s->block.M, given = 0;
    uint64_t *rem = x->lo; /* scratch until the first epoch */
    uint8_t *extra = calloc(H, 1);
    if (!extra)
        return seterr(NULL, -ENOMEM, "sampler: out of memory");
    for (uint32_t i = 0; i < H; i++) {
        unsigned __int128 v = (unsigned __int128)M * x->wt[i];
        x->B[i + 1] = (uint64_t)(v / sum); /* a count for now */
        rem[i] = (uint64_t)(v % sum);
        given += x->B[i + 1];
    }
    for (uint64_t left = M - given; left; left--) {
        uint32_t best = H;
        for (uint32_t i = 0; i < H; i++)
            if (!extra[i] && (best == H || rem[i] > rem[best]))
                best = i;
        extra[best] = 1;
        x->B[best + 1]++;
    }
    free(extra);
    x->B[0] = 0;
    for (uint32_t i = 0; i < H; i++)
        x->B[i + 1] += x->B[i];
    /* this rank's place among the ranks of its host */
    for (uint32_t r = 0; r < s->world; r++) {
        uint32_t hr = h->rank_host ? h->rank_host[r] : 0;
        if (r < s->rank)
            x->below[hr]++;
        x->k[hr]++;
    }
    x->host = h->rank_host ? h->rank_host[s->rank] : 0;
    x->local = x->below[x->host];
    return 0;
}

void hosts_free(struct hosts *x)
{
    if (!x)
        return;
    free(x->wt);
    free(x->B);
    free(x->k);
    free(x->below);
    free(x->N);
    free(x->P);
    free(x->lo);
    free(x->hi);
    free(x->win);
    free(x->tau);
    free(x);
}

/* The fingerprint's part: the reduced weights. */
uint64_t hosts_fingerprint(const struct hosts *x)
{
    return XXH3_64bits(x->wt, (size_t)x->H * sizeof *x->wt) ^ 0x484f535453ull ^
           (x->keep ? 0x4b454550ull << 24 : 0);
}

/* Host whose segment holds permutation slot pos (< M). */
static uint32_t seg_of(const struct hosts *x, uint64_t pos)
{
    uint32_t lo = 0, hi = x->H; /* B[lo] <= pos < B[hi] */
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (x->B[mid] <= pos)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

void hosts_epoch(cxlp_sampler *s)
{
    struct block *b = &s->block;
    struct hosts *x = s->hosts;
    feistel_init(&b->shards, b->M, x->keep ? derive_key(s->seed, 0, TAG_SHARDS, 1)
                                           : derive_key(s->seed, s->epoch, TAG_SHARDS, 0));
    b->q = b->M ? feistel_invert(&b->shards, b->M - 1) : 0;
    x->hq = b->M ? seg_of(x, b->q) : 0;
    for (uint32_t h = 0; x->keep && h < x->H; h++)
        feistel_init(&x->tau[h], x->B[h + 1] - x->B[h],
                     derive_key(s->seed, s->epoch, TAG_HOST_SLOTS, h));
    x->ql = b->M ? b->q - x->B[x->hq] : 0;
    if (x->keep && b->M)
        x->ql = feistel_invert(&x->tau[x->hq], x->ql);
    x->P[0] = 0;
    for (uint32_t h = 0; h < x->H; h++) {
        x->N[h] = (x->B[h + 1] - x->B[h]) * b->S - (h == x->hq ? b->deficit : 0);
        x->P[h + 1] = x->P[h] + x->N[h];
        x->win[h].w = UINT64_MAX;
    }
    x->cur_u = UINT64_MAX;
}

/* ---- host h's stream: the block order over its segment ---- */

static uint64_t seg_nwin(const cxlp_sampler *s, uint32_t h)
{
    uint64_t Mh = s->hosts->B[h + 1] - s->hosts->B[h];
    return Mh ? (Mh - 1) / s->block.W + 1 : 0;
}

/* 1 when the short block is in host h's segment at local slot *ql */
static int seg_short(const cxlp_sampler *s, uint32_t h, uint64_t *ql)
{
    const struct hosts *x = s->hosts;
    if (!s->block.deficit || x->hq != h)
        return 0;
    *ql = x->ql;
    return 1;
}

static uint64_t seg_start(const cxlp_sampler *s, uint32_t h, uint64_t w)
{
    if (w >= seg_nwin(s, h))
        return s->hosts->N[h];
    uint64_t first = w * s->block.W, ql;
    return first * s->block.S - (seg_short(s, h, &ql) && ql < first ? s->block.deficit : 0);
}

static void seg_window(const cxlp_sampler *s, uint32_t h, uint64_t w, struct hwin *win)
{
    win->w = w;
    win->start = seg_start(s, h, w);
    win->count = seg_start(s, h, w + 1) - win->start;
    feistel_init(&win->perm, win->count,
                 derive_key(s->seed, s->epoch, TAG_WINDOW, w ^ ((uint64_t)h << 44)));
}

static uint64_t seg_window_of(const cxlp_sampler *s, uint32_t h, uint64_t i)
{
    uint64_t nwin = seg_nwin(s, h);
    uint64_t w = MIN(i / (s->block.W * s->block.S), nwin - 1);
    if (w + 1 < nwin && seg_start(s, h, w + 1) <= i)
        w++;
    return w;
}

/* Id at index i (< N[h]) of host h's stream, with win holding i's window. */
static uint64_t seg_id(const cxlp_sampler *s, uint32_t h, const struct hwin *win, uint64_t i)
{
    const struct block *b = &s->block;
    uint64_t l = feistel_apply(&win->perm, i - win->start);
    uint64_t slot = l / b->S, off = l - slot * b->S;
    uint64_t first = win->w * b->W;
    uint64_t nsh = MIN(b->W, s->hosts->B[h + 1] - s->hosts->B[h] - first);
    uint64_t ls = first + slot, ql; /* the stream's slot */
    if (seg_short(s, h, &ql) && ql >= first && ql < first + nsh) {
        if (slot + 1 == nsh)
            ls = ql;
        else if (slot >= ql - first)
            ls++;
    }
    const struct hosts *x = s->hosts;
    uint64_t pos = x->B[h] + (x->keep ? feistel_apply(&x->tau[h], ls) : ls);
    return feistel_apply(&b->shards, pos) * b->S + off;
}

static uint64_t seg_at(const cxlp_sampler *s, uint32_t h, uint64_t i)
{
    struct hwin win;
    seg_window(s, h, seg_window_of(s, h, i), &win);
    return seg_id(s, h, &win, i);
}

/* ---- the interleave ---- */

/* Host and stream index of epoch position p < L. */
static uint32_t g_locate(const struct hosts *x, uint64_t p, uint64_t *i)
{
    uint32_t lo = 0, hi = x->H;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint64_t T = x->P[hi] - x->P[lo], A = x->P[mid] - x->P[lo];
        uint64_t a = muldiv(p, A, T), b = muldiv(p + 1, A, T);
        if (b > a) {
            hi = mid;
            p = a;
        } else {
            lo = mid;
            p -= a;
        }
    }
    *i = p;
    return lo;
}

/* out[g] = positions of host g's stream before p (p <= the node's T), for
 * every host of [lo, hi). */
static void g_counts(const struct hosts *x, uint32_t lo, uint32_t hi, uint64_t p, uint64_t *out)
{
    if (hi - lo == 1) {
        out[lo] = p;
        return;
    }
    uint32_t mid = lo + (hi - lo) / 2;
    uint64_t T = x->P[hi] - x->P[lo], A = x->P[mid] - x->P[lo];
    uint64_t a = T ? muldiv(p, A, T) : 0;
    g_counts(x, lo, mid, a, out);
    g_counts(x, mid, hi, p - a, out);
}

/* The same for host h alone. */
static uint64_t g_count(const struct hosts *x, uint32_t h, uint64_t p)
{
    uint32_t lo = 0, hi = x->H;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        uint64_t T = x->P[hi] - x->P[lo], A = x->P[mid] - x->P[lo];
        uint64_t a = T ? muldiv(p, A, T) : 0;
        if (h < mid) {
            hi = mid;
            p = a;
        } else {
            lo = mid;
            p -= a;
        }
    }
    return p;
}

/* Unrolled counts (u may pass L: the epoch order repeats, as padding reads it). */
static void u_counts(const cxlp_sampler *s, uint64_t u, uint64_t *out)
{
    const struct hosts *x = s->hosts;
    uint64_t wraps = u / s->L;
    g_counts(x, 0, x->H, u - wraps * s->L, out);
    for (uint32_t g = 0; g < x->H; g++)
        out[g] += wraps * x->N[g];
}

static uint64_t u_count(const cxlp_sampler *s, uint32_t h, uint64_t u)
{
    uint64_t wraps = u / s->L;
    return g_count(s->hosts, h, u - wraps * s->L) + wraps * s->hosts->N[h];
}

uint64_t hosts_at(const cxlp_sampler *s, uint64_t p)
{
    uint64_t i;
    uint32_t h = g_locate(s->hosts, p, &i);
    return seg_at(s, h, i);
}

/* The host and (unrolled) stream index this rank takes in the round of
 * [u, u + world), from the round's counts lo (before u) and hi (before
 * u + world), either given for every host or NULL (then computed).
 * A host's ranks take its positions in the order of their local index
 * rotated by a hash of the round (so over an epoch each of them gets its
 * part of the host's own blocks; a rotation by one per round resonated
 * with a round count of period 2; with one host every position is the
 * host's, and no rotation keeps the rank view BLOCK's); the ranks left over, host by host in that order,
 * take the positions left over, host by host in stream order. */
static uint32_t round_pick(const cxlp_sampler *s, uint64_t u, const uint64_t *lo,
                           const uint64_t *hi, uint64_t *idx)
{
    const struct hosts *x = s->hosts;
    uint32_t h = x->host;
    uint64_t kh = x->k[h], rot = x->H > 1 ? mix64(u / s->world) % kh : 0;
    uint64_t e = (x->local + rot) % kh;
    uint64_t lh = lo ? lo[h] : u_count(s, h, u), ch = (hi ? hi[h] : u_count(s, h, u + s->world)) - lh;
    if (e < ch) {
        *idx = lh + e;
        return h;
    }
    uint64_t d = e - ch;
    for (uint32_t g = 0; g < h; g++) {
        uint64_t c = lo ? hi[g] - lo[g] : u_count(s, g, u + s->world) - u_count(s, g, u);
        d += x->k[g] > c ? x->k[g] - c : 0;
    }
    for (uint32_t g = 0;; g++) {
        uint64_t l = lo ? lo[g] : u_count(s, g, u);
        uint64_t c = (lo ? hi[g] : u_count(s, g, u + s->world)) - l;
        uint64_t sur = c > x->k[g] ? c - x->k[g] : 0;
        if (d < sur) {
            *idx = l + x->k[g] + d;
            return g;
        }
        d -= sur;
    }
}

uint64_t hosts_rank_at(const cxlp_sampler *s, uint64_t j)
{
    uint64_t idx;
    uint32_t g = round_pick(s, s->base + j * s->world, NULL, NULL, &idx);
    return seg_at(s, g, idx % s->hosts->N[g]);
}

void hosts_next(cxlp_sampler *s, uint64_t j, uint64_t *out, size_t cnt)
{
    struct hosts *x = s->hosts;
    uint32_t h = x->host;
    uint64_t kh = x->k[h];
    for (size_t i = 0; i < cnt; i++) {
        uint64_t u = s->base + (j + i) * s->world, idx;
        /* this rank's own host first: O(log H); every host only when the
         * round has no position of its own host for it */
        uint64_t lh = x->cur_u == u ? x->cur_lh : u_count(s, h, u);
        uint64_t hh = u_count(s, h, u + s->world);
        uint64_t rot = x->H > 1 ? mix64(u / s->world) % kh : 0, e = (x->local + rot) % kh;
        uint32_t g = h;
        if (e < hh - lh) {
            idx = lh + e;
        } else {
            u_counts(s, u, x->lo);
            u_counts(s, u + s->world, x->hi);
            g = round_pick(s, u, x->lo, x->hi, &idx);
        }
        x->cur_u = u + s->world;
        x->cur_lh = hh;
        idx %= x->N[g];
        struct hwin *win = &x->win[g];
        if (win->w == UINT64_MAX || idx < win->start || idx - win->start >= win->count)
            seg_window(s, g, seg_window_of(s, g, idx), win);
        out[i] = seg_id(s, g, win, idx);
    }
}

uint64_t hosts_count(const cxlp_sampler *s, uint32_t h, uint64_t p)
{
    return g_count(s->hosts, h, p);
}

uint64_t hosts_nwin(const cxlp_sampler *s, uint32_t h)
{
    return seg_nwin(s, h);
}

uint64_t hosts_window_start(const cxlp_sampler *s, uint32_t h, uint64_t w)
{
    return seg_start(s, h, w);
}

uint64_t hosts_window_of(const cxlp_sampler *s, uint32_t h, uint64_t i)
{
    return seg_window_of(s, h, i);
}

int cxlp_sampler_host_of(const cxlp_sampler *s, uint64_t id, uint32_t *host, uint64_t *index)
{
    if (!s || !host || !index)
        return seterr(NULL, CXLP_EARG, "sampler_host_of: %s is NULL", s ? "output" : "handle");
    if (s->kind != CXLP_ORDER_HOSTS)
        return seterr(NULL, CXLP_EARG, "sampler_host_of: kind %s has no hosts",
                      cxlp_order_name(s->kind));
    if (id >= s->n)
        return seterr(NULL, CXLP_ERANGE, "sampler_host_of: id %" PRIu64 " >= n %" PRIu64, id,
                      s->n);
    uint64_t pos = feistel_invert(&s->block.shards, id / s->block.S);
    *host = seg_of(s->hosts, pos);
    *index = pos - s->hosts->B[*host];
    return 0;
}

int cxlp_sampler_host_block(const cxlp_sampler *s, uint32_t h, uint64_t k, uint64_t *block)
{
    if (!s || !block)
        return seterr(NULL, CXLP_EARG, "sampler_host_block: %s is NULL",
                      s ? "block" : "handle");
    if (s->kind != CXLP_ORDER_HOSTS)
        return seterr(NULL, CXLP_EARG, "sampler_host_block: kind %s has no hosts",
                      cxlp_order_name(s->kind));
    const struct hosts *x = s->hosts;
    if (h >= x->H)
        return seterr(NULL, CXLP_ERANGE, "sampler_host_block: host %" PRIu32 " >= %" PRIu32
                      " hosts", h, x->H);
    uint64_t Mh = x->B[h + 1] - x->B[h];
    if (k >= Mh)
        return seterr(NULL, CXLP_ERANGE, "sampler_host_block: block %" PRIu64 " of host %"
                      PRIu32 "'s %" PRIu64, k, h, Mh);
    /* as seg_id: the short block is its window's last slot */
    const struct block *b = &s->block;
    uint64_t first = k / b->W * b->W, slot = k - first, nsh = MIN(b->W, Mh - first);
    uint64_t ls = k, ql;
    if (seg_short(s, h, &ql) && ql >= first && ql < first + nsh) {
        if (slot + 1 == nsh)
            ls = ql;
        else if (slot >= ql - first)
            ls++;
    }
    *block = feistel_apply(&b->shards, x->B[h] + (x->keep ? feistel_apply(&x->tau[h], ls) : ls));
    return 0;
}

int cxlp_sampler_host_share(const cxlp_sampler *s, uint32_t h, uint64_t *samples,
                            uint64_t *blocks)
{
    if (!s || !samples || !blocks)
        return seterr(NULL, CXLP_EARG, "sampler_host_share: %s is NULL",
                      s ? "output" : "handle");
    if (s->kind != CXLP_ORDER_HOSTS)
        return seterr(NULL, CXLP_EARG, "sampler_host_share: kind %s has no hosts",
                      cxlp_order_name(s->kind));
    if (h >= s->hosts->H)
        return seterr(NULL, CXLP_ERANGE, "sampler_host_share: host %" PRIu32 " >= %" PRIu32
                      " hosts", h, s->hosts->H);
    *samples = s->hosts->N[h];
    *blocks = s->hosts->B[h + 1] - s->hosts->B[h];
    return 0;
}

int cxlp_sampler_host_reads(const cxlp_sampler *s, const double *memory, uint64_t counts[3])
{
    if (!s || !memory || !counts)
        return seterr(NULL, CXLP_EARG, "sampler_host_reads: %s is NULL",
                      !s ? "handle" : !memory ? "memory" : "counts");
    if (s->kind != CXLP_ORDER_HOSTS)
        return seterr(NULL, CXLP_EARG, "sampler_host_reads: kind %s has no hosts",
                      cxlp_order_name(s->kind));
    const struct hosts *x = s->hosts;
    const struct block *b = &s->block;
    for (uint32_t h = 0; h < x->H; h++)
        if (!isfinite(memory[h]) || memory[h] < 0)
            return seterr(NULL, CXLP_EARG, "sampler_host_reads: memory[%" PRIu32 "] is not a "
                          "fraction >= 0", h);
    uint64_t *cap = malloc((size_t)x->H * 3 * sizeof *cap);
    if (!cap)
        return seterr(NULL, -ENOMEM, "sampler_host_reads: out of memory");
    uint64_t *lo = cap + x->H, *hi = lo + x->H;
    for (uint32_t h = 0; h < x->H; h++) {
        double c = memory[h] * (double)b->M + 1e-9; /* 0.3 * 10 is 2.999... */
        cap[h] = c >= (double)b->M ? b->M : (uint64_t)c;
    }
    counts[0] = counts[1] = counts[2] = 0;
    uint64_t len = cxlp_sampler_len(s);
    for (uint64_t j = 0; j < len; j++) {
        uint64_t u = s->base + j * s->world, idx;
        if (j == 0)
            u_counts(s, u, lo);
        u_counts(s, u + s->world, hi);
        uint32_t g = round_pick(s, u, lo, hi, &idx);
        uint64_t id = seg_at(s, g, idx % x->N[g]);
        uint64_t index = feistel_invert(&b->shards, id / b->S) - x->B[g];
        counts[index >= cap[g] ? 2 : g == x->host ? 0 : 1]++;
        uint64_t *t = lo;
        lo = hi;
        hi = t;
    }
    free(cap);
    return 0;
}
