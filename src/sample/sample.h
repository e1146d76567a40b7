/*
 * sample.h - the sampler handle shared by the order modules.
 *
 * A sampler is two independent pieces:
 *   the epoch order   order(p), p in [0, L): a pure function of the
 *                     parameters, seed, epoch and p (order.c for sequential,
 *                     random and block; blend.c; curriculum.c);
 *   the rank view     position of the rank's j-th draw:
 *                     pos(j) = base + rank + j * world, read as
 *                     order(pos mod L) (padding wraps) (sampler.c).
 * Invariants:
 *   base <= L;  drawn <= per_rank_len(L - base);
 *   consumed = min(base + world * drawn, L).
 */
#ifndef CXLP_SAMPLE_H
#define CXLP_SAMPLE_H

#include <errno.h>
#include <inttypes.h>

#include "common/common.h"
#include "sample/feistel.h"

/* Purpose tags for derive_key: different uses of one seed never share keys. */
enum {
    TAG_PERM = 1,            /* RANDOM: the epoch permutation */
    TAG_SHARDS = 2,          /* BLOCK: the shard order */
    TAG_WINDOW = 3,          /* BLOCK: one window's sample order */
    TAG_SOURCE = 4,          /* BLEND: one source's permutation, one pass */
    TAG_RELEASED = 5,        /* CURRICULUM: the order within R released */
};
/* HOSTS uses TAG_SHARDS for its block permutation (keep: epoch 0, extra
 * 1, whatever the epoch), TAG_WINDOW for a host's window w, extra =
 * w ^ (h << 44) (host 0's windows are BLOCK's), and with keep TAG_HOST_SLOTS
 * for the per-epoch order of host h's slots (extra h). */
#define TAG_HOST_SLOTS 6

#define RAMP_MAX 64          /* ramp windows at most (W = 2^40 takes 120: capped) */
struct block {
    uint64_t S;              /* shard size */
    uint64_t W;              /* window, clamped to M */
    uint64_t M;              /* number of shards = ceil(n / S) */
    uint64_t nwin;           /* windows this epoch */
    uint64_t deficit;        /* S - size of the last shard (0: it is full) */
    uint64_t q;              /* position of the last shard in the shard order */
    struct feistel shards;   /* shard order: position -> shard */
    /* the ramp (order.c): epoch 0's first windows grow from one shard */
    int ramp;                /* asked for (cxlp_sampler_config.ramp) */
    int ramped;              /* this epoch has it */
    uint32_t nr;             /* ramp windows: the first nr */
    uint64_t rfirst[RAMP_MAX + 1]; /* shard order position of ramp window i's
                                      first shard; rfirst[nr]: the first
                                      full window's */
};

/* One window's geometry: its first position, its count, its permutation,
 * and (for next()) the shard of each of its first WIN_CACHE slots, so that
 * the shard order is evaluated once per shard instead of once per sample. */
#define WIN_CACHE 256
struct window {
    uint64_t w;              /* window index; UINT64_MAX: none cached */
    uint64_t start;          /* first epoch position of the window */
    uint64_t count;
    uint64_t nsh;            /* shards in it */
    uint64_t ncached;        /* slots [0, ncached) have slot_shard */
    struct feistel perm;
    uint64_t slot_shard[WIN_CACHE];
};

struct blend {
    size_t k;
    int shuffle;
    uint64_t *size;          /* k */
    uint64_t *off;           /* k+1: off[i] = sum of size[0..i) */
    uint64_t *q;             /* k reduced weights */
    uint64_t D;              /* sum q, the period */
    uint64_t every;          /* checkpoint interval inside a period */
    uint32_t *ckpt;          /* (D / every + 1) rows of k counts */
    /* cursor for next(): cur_c = counts before period position cur_r of
     * period cur_m, relative to that period's start */
    uint64_t cur_m;          /* UINT64_MAX: invalid */
    uint64_t cur_r;
    uint32_t *cur_c;         /* k */
};

struct curriculum {
    uint64_t n;
    uint64_t *sorted;        /* ids by (difficulty, id) */
    uint64_t *gend;          /* ngroups group ends (exclusive), ascending */
    uint64_t ngroups;
    int pacing;
    double start;
    uint32_t steps;
    uint64_t total;
};

/* HOSTS (hosts.c): host h's window of next()'s cache */
struct hwin {
    uint64_t w;              /* UINT64_MAX: none */
    uint64_t start, count;
    struct feistel perm;
};

struct hosts {
    uint32_t H;
    uint64_t *wt;            /* H weights, reduced by their gcd */
    uint64_t *B;             /* H+1: host h's segment is permutation slots [B[h], B[h+1]) */
    uint64_t *k;             /* H: ranks per host */
    uint64_t *below;         /* H: ranks of host g below this rank */
    int keep;                /* the deal is keyed by the seed alone */
    struct feistel *tau;     /* keep: H per-epoch orders of a segment's slots */
    uint64_t ql;             /* stream slot of the short block in host hq's segment */
    uint32_t host;           /* this rank's host */
    uint64_t local;          /* this rank's index among its host's ranks */
    /* per epoch */
    uint32_t hq;             /* host whose segment holds the short block */
    uint64_t *N;             /* H: samples in host h's segment */
    uint64_t *P;             /* H+1: prefix sums of N */
    /* next()'s scratch and caches */
    uint64_t *lo, *hi;       /* H each: stream counts before the round, after it */
    uint64_t cur_u;          /* unrolled position cur_lh is for; UINT64_MAX: none */
    uint64_t cur_lh;         /* this rank's host's stream count before cur_u */
    struct hwin *win;        /* H */
};

struct cxlp_sampler {
    struct obj obj;
    int kind;
    uint64_t n;              /* ids are 0..n-1 */
    uint64_t L;              /* epoch length */
    uint64_t seed, epoch;
    uint32_t world, rank;
    int drop_last;
    uint64_t base, drawn;
    uint64_t fingerprint;
    struct feistel perm;     /* RANDOM: this epoch's permutation */
    struct block block;      /* BLOCK */
    struct window win;       /* BLOCK: next()'s cached window */
    struct blend *blend;
    struct curriculum *cur;
    struct hosts *hosts;
};

/* sampler.c: fingerprint of kind, n, L, block geometry and extra */
void sampler_set_fingerprint(cxlp_sampler *s, uint64_t extra);

/* order.c */
int order_init_block(cxlp_sampler *s, uint64_t shard_size, uint64_t window, int ramp);
void order_epoch(cxlp_sampler *s);  /* re-key for s->seed, s->epoch */
uint64_t order_at(const cxlp_sampler *s, uint64_t p);
void block_window(const cxlp_sampler *s, uint64_t w, struct window *win, int cache);
uint64_t block_window_of(const struct block *b, uint64_t p);
/* Shard of slot `slot` (< win->nsh) of window win: the window's shards,
 * slot by slot (the simulator reads a window's shards through it). */
uint64_t block_slot_shard(const cxlp_sampler *s, const struct window *win, uint64_t slot);
uint64_t block_id(const struct block *b, const struct window *win, uint64_t p);
/* Window-local permuted index l -> id (block_id minus the permutation). */
uint64_t block_map(const struct block *b, const struct window *win, uint64_t l);

/* blend.c */
int blend_init(cxlp_sampler *s, const struct cxlp_blend_source *src, size_t k,
               int shuffle);
void blend_free(struct blend *b);
uint64_t blend_at(const cxlp_sampler *s, uint64_t p);
uint64_t blend_next(cxlp_sampler *s, uint64_t p);

/* curriculum.c */
int curriculum_init(cxlp_sampler *s, const struct cxlp_curriculum *cur);
void curriculum_free(struct curriculum *c);
uint64_t curriculum_at(const cxlp_sampler *s, uint64_t p);
uint64_t curriculum_released(const cxlp_sampler *s, uint64_t p);

/* hosts.c */
int hosts_init(cxlp_sampler *s, const struct cxlp_hosts *h);
void hosts_free(struct hosts *h);
void hosts_epoch(cxlp_sampler *s);
uint64_t hosts_fingerprint(const struct hosts *x);
uint64_t hosts_at(const cxlp_sampler *s, uint64_t p);          /* the epoch order */
uint64_t hosts_rank_at(const cxlp_sampler *s, uint64_t j);     /* the rank view */
void hosts_next(cxlp_sampler *s, uint64_t j, uint64_t *out, size_t cnt);
/* For the simulator (src/sim): host h's stream in epoch positions. Its
 * positions before epoch position p (p <= L); its windows; window w's
 * first stream index (the count of its windows: the stream's length); the
 * window of stream index i (< the stream's length). */
uint64_t hosts_count(const cxlp_sampler *s, uint32_t h, uint64_t p);
uint64_t hosts_nwin(const cxlp_sampler *s, uint32_t h);
uint64_t hosts_window_start(const cxlp_sampler *s, uint32_t h, uint64_t w);
uint64_t hosts_window_of(const cxlp_sampler *s, uint32_t h, uint64_t i);

#endif
