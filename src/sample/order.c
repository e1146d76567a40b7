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
 * Rejected: a shuffle buffer (like WebDataset's): its state is the buffer,
 * so resume would need the buffer's contents and position-uniformity depends
 * on the fill history; here any position is computed in O(1).
 */
#include "sample/sample.h"

int order_init_block(cxlp_sampler *s, uint64_t shard_size, uint64_t window)
{
    struct block *b = &s->block;
    uint64_t n = s->n;
    b->S = n ? MIN(shard_size, n) : shard_size;
    b->M = n ? (n - 1) / b->S + 1 : 0;
    b->W = MIN(window, MAX(b->M, 1));
    b->nwin = b->M ? (b->M - 1) / b->W + 1 : 0;
    b->deficit = b->M * b->S - n;
    uint64_t ws;
    if (mul_overflow_u64(b->W, b->S, &ws))
        return seterr(NULL, CXLP_EARG, "cfg.window %" PRIu64 " * cfg.shard_size %" PRIu64
                      " overflows", window, shard_size);
    return 0;
}

static uint64_t window_start(const struct block *b, uint64_t n, uint64_t w)
{
    if (w >= b->nwin)
        return n;
    uint64_t first = w * b->W;
    return first * b->S - (b->deficit && b->q < first ? b->deficit : 0);
}

/* Order position of slot `slot` of window `win` (the short shard last). */
static uint64_t slot_op(const struct block *b, const struct window *win, uint64_t slot)
{
    uint64_t first = win->w * b->W;
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
    win->nsh = MIN(b->W, b->M - w * b->W);
    feistel_init(&win->perm, win->count, derive_key(s->seed, s->epoch, TAG_WINDOW, w));
    win->ncached = cache ? MIN(win->nsh, WIN_CACHE) : 0;
    for (uint64_t k = 0; k < win->ncached; k++)
        win->slot_shard[k] = feistel_apply(&b->shards, slot_op(b, win, k));
}

uint64_t block_window_of(const struct block *b, uint64_t p)
{
    uint64_t w = MIN(p / (b->W * b->S), b->nwin - 1);
    /* start(w) <= w*W*S <= p; the short shard can pull start(w+1) below p */
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
        s->win.w = UINT64_MAX;
        break;
    }
    case CXLP_ORDER_BLEND:
        s->blend->cur_m = UINT64_MAX;
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
    default:
        return p;
    }
}
