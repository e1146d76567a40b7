/*
 * order.c - the epoch orders over one dataset: sequential, random, block.
 *
 * RANDOM: order(p) = pi(p), pi the Feistel bijection keyed by
 * derive_key(seed, epoch, TAG_PERM, 0).
 *
 * BLOCK: M = ceil(n/S) shards, shard j = ids [jS, min((j+1)S, n)). The shard
 * order sigma is a Feistel bijection of [0, M). Window w holds the shards
 * sigma(wW) .. sigma(min(wW+W, M) - 1); windows follow each other, so
 *   start(w) = w*W*S - [q < wW] * deficit   (w < nwin),  start(nwin) = n,
 * where q = sigma^-1(M-1) is where the short last shard sits and
 * deficit = M*S - n is how much shorter it is. Inside window w the count(w)
 * samples are laid out slot by slot (slot = one shard, the short shard moved
 * to the last slot so every other slot is exactly S long) and visited in the
 * order of a Feistel bijection of [0, count(w)) keyed by (seed, epoch, w).
 * Hence positions [start(w), start(w+1)) touch exactly the shards of window
 * w: at most W shards are active at once, and each is read entirely inside
 * its window.
 *
 * BLOCK with the ramp (cfg.ramp), epoch 0 only: the first windows are
 * smaller, window 0 one shard, each next one at most 5/4 of the one before
 * (at least one more) until W: rfirst[i] is window i's first slot, the
 * windows after the ramp W each from rfirst[nr]. A staging engine stages
 * window i+1 while window i is read, and at a demand of 80% of the rate it
 * reads at, reading 5/4 of a window takes as long as consuming the window:
 * a cold staging tier then gives the first batch after one shard is
 * staged instead of a whole window, and the first epoch does not stall
 * for the first window (docs/tiers.md, "Start-up"). What it costs: a
 * batch of a small window draws from fewer shards (docs/sampling.md).
 * Other epochs (the engine stages their first window during the last
 * window of the epoch before) and other orders are unchanged.
 *
 * Rejected: a shuffle buffer (like WebDataset's): its state is the buffer,
 * so resume would need the buffer's contents and position-uniformity depends
 * on the fill history; here any position is computed in O(1).
 */
#include "sample/sample.h"

/* Windows of the epoch: with the ramp, nr of the ramp's, then W each. */
static uint64_t count_windows(const struct block *b)
{
    if (!b->M)
        return 0;
    if (!b->ramped)
        return (b->M - 1) / b->W + 1;
    uint64_t w = 0;
    while (w < b->nr && b->rfirst[w] < b->M)
        w++;
    return w < b->nr ? w : b->nr + (b->M - b->rfirst[b->nr] + b->W - 1) / b->W;
}

/* First slot (shard order position) of window w, and its shards (before
 * the dataset's end cuts it). */
static uint64_t wfirst(const struct block *b, uint64_t w)
{
    if (!b->ramped)
        return w * b->W;
    return w <= b->nr ? b->rfirst[w] : b->rfirst[b->nr] + (w - b->nr) * b->W;
}

static uint64_t wsize(const struct block *b, uint64_t w)
{
    return b->ramped && w < b->nr ? b->rfirst[w + 1] - b->rfirst[w] : b->W;
}

int order_init_block(cxlp_sampler *s, uint64_t shard_size, uint64_t window, int ramp)
{
    struct block *b = &s->block;
    uint64_t n = s->n;
    b->S = n ? MIN(shard_size, n) : shard_size;
    b->M = n ? (n - 1) / b->S + 1 : 0;
    b->W = MIN(window, MAX(b->M, 1));
    b->deficit = b->M * b->S - n;
    b->ramp = ramp != 0;
    uint64_t ws;
    if (mul_overflow_u64(b->W, b->S, &ws))
        return seterr(NULL, CXLP_EARG, "cfg.window %" PRIu64 " * cfg.shard_size %" PRIu64
                      " overflows", window, shard_size);
    /* the ramp's windows: 1, then at most 5/4 of the last (at least one
     * more) until W; a window past RAMP_MAX jumps to W */
    b->nr = 0;
    b->rfirst[0] = 0;
    for (uint64_t sz = 1; b->ramp && sz < b->W && b->nr < RAMP_MAX; b->nr++) {
        b->rfirst[b->nr + 1] = b->rfirst[b->nr] + sz;
        sz = MIN(b->W, MAX(sz + 1, sz * 5 / 4));
    }
    b->ramped = 0;
    b->nwin = count_windows(b);
    return 0;
}

static uint64_t window_start(const struct block *b, uint64_t n, uint64_t w)
{
    if (w >= b->nwin)
        return n;
    uint64_t first = wfirst(b, w);
    return first * b->S - (b->deficit && b->q < first ? b->deficit : 0);
}

/* Order position of slot `slot` of window `win` (the short shard last). */
static uint64_t slot_op(const struct block *b, const struct window *win, uint64_t slot)
{
    uint64_t first = wfirst(b, win->w);
    if (b->deficit && b->q >= first && b->q < first + win->nsh) {
        uint64_t ql = b->q - first;
        if (slot + 1 == win->nsh)
            return b->q;
        return first + (slot < ql ? slot : slot + 1);
    }
    return first + slot;
}

void block_window(const cxlp_sampler *s, uint64_t w, struct window *win, int cache)
{
    const struct block *b = &s->block;
    win->w = w;
    win->start = window_start(b, s->n, w);
    win->count = window_start(b, s->n, w + 1) - win->start;
    win->nsh = MIN(wsize(b, w), b->M - wfirst(b, w));
    feistel_init(&win->perm, win->count, derive_key(s->seed, s->epoch, TAG_WINDOW, w));
    win->ncached = cache ? MIN(win->nsh, WIN_CACHE) : 0;
    for (uint64_t k = 0; k < win->ncached; k++)
        win->slot_shard[k] = feistel_apply(&b->shards, slot_op(b, win, k));
}

uint64_t block_slot_shard(const cxlp_sampler *s, const struct window *win, uint64_t slot)
{
    if (slot < win->ncached)
        return win->slot_shard[slot];
    return feistel_apply(&s->block.shards, slot_op(&s->block, win, slot));
}

uint64_t block_window_of(const struct block *b, uint64_t p)
{
    uint64_t w;
    if (b->ramped && (b->nr >= b->nwin || p < window_start(b, UINT64_MAX, b->nr))) {
        /* inside the ramp: its few windows, the last that starts at or
         * before p */
        for (w = 0; w + 1 < b->nwin && window_start(b, UINT64_MAX, w + 1) <= p;)
            w++;
        return w;
    }
    uint64_t r = b->ramped ? b->nr : 0, from = b->ramped ? window_start(b, UINT64_MAX, r) : 0;
    w = MIN(r + (p - MIN(p, from)) / (b->W * b->S), b->nwin - 1);
    /* start(w) <= first(w)*S <= p; the short shard can pull start(w+1) below p */
    if (w + 1 < b->nwin && window_start(b, UINT64_MAX, w + 1) <= p)
        w++;
    return w;
}

uint64_t block_map(const struct block *b, const struct window *win, uint64_t l)
{
    uint64_t slot, off;
    if (win->count <= UINT32_MAX) { /* a 32-bit divide is several times cheaper */
        slot = (uint32_t)l / (uint32_t)b->S;
        off = (uint32_t)l - (uint32_t)(slot * b->S);
    } else {
        slot = l / b->S;
        off = l - slot * b->S;
    }
    uint64_t shard = slot < win->ncached ? win->slot_shard[slot]
                                          : feistel_apply(&b->shards, slot_op(b, win, slot));
    return shard * b->S + off;
}

uint64_t block_id(const struct block *b, const struct window *win, uint64_t p)
{
    return block_map(b, win, feistel_apply(&win->perm, p - win->start));
}

void order_epoch(cxlp_sampler *s)
{
    switch (s->kind) {
    case CXLP_ORDER_RANDOM:
        feistel_init(&s->perm, s->n, derive_key(s->seed, s->epoch, TAG_PERM, 0));
        break;
    case CXLP_ORDER_BLOCK: {
        struct block *b = &s->block;
        feistel_init(&b->shards, b->M, derive_key(s->seed, s->epoch, TAG_SHARDS, 0));
        b->q = b->M ? feistel_invert(&b->shards, b->M - 1) : 0;
        b->ramped = b->ramp && s->epoch == 0 && b->nr > 0;
        b->nwin = count_windows(b);
        s->win.w = UINT64_MAX;
        break;
    }
    case CXLP_ORDER_BLEND:
        s->blend->cur_m = UINT64_MAX;
        break;
    case CXLP_ORDER_HOSTS:
        hosts_epoch(s);
        break;
    default:
        break;
    }
}

uint64_t order_at(const cxlp_sampler *s, uint64_t p)
{
    switch (s->kind) {
    case CXLP_ORDER_RANDOM:
        return feistel_apply(&s->perm, p);
    case CXLP_ORDER_BLOCK: {
        struct window win;
        block_window(s, block_window_of(&s->block, p), &win, 0);
        return block_id(&s->block, &win, p);
    }
    case CXLP_ORDER_BLEND:
        return blend_at(s, p);
    case CXLP_ORDER_CURRICULUM:
        return curriculum_at(s, p);
    case CXLP_ORDER_HOSTS:
        return hosts_at(s, p);
    default:
        return p;
    }
}
