/*
 * sampler.c - the sampler handle: configuration, the rank view over the
 * epoch order, resume state.
 *
 * Distribution is interleaved like torch's DistributedSampler: rank r draws
 * positions base + r + j*world. After every rank has drawn j indices the
 * drawn positions are exactly [base, base + j*world), a prefix of what is
 * left, whatever the world size. That is what makes elastic resume exact:
 * the state is the global count of consumed positions, and a new world size
 * splits the rest [consumed, L) again. A contiguous split (rank r takes
 * [rR, (r+1)R)) would leave holes in the middle of the epoch at a
 * checkpoint, whose description grows with the number of ranks.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "sample/sample.h"

static const char *const order_names[] = {"sequential", "random", "block", "blend",
                                          "curriculum", "hosts"};

const char *cxlp_order_name(int kind)
{
    if (kind < 0 || kind > CXLP_ORDER_HOSTS)
        return "?";
    return order_names[kind];
}

int cxlp_order_parse(const char *name)
{
    for (int i = 0; name && i <= CXLP_ORDER_HOSTS; i++)
        if (strcmp(name, order_names[i]) == 0)
            return i;
    return -1;
}

static uint64_t rank_len(const cxlp_sampler *s)
{
    uint64_t rest = s->L - s->base;
    return s->drop_last ? rest / s->world : rest / s->world + (rest % s->world != 0);
}

/* Epoch position of the rank's j-th draw; padding reads wrap around. */
static inline uint64_t rank_pos(const cxlp_sampler *s, uint64_t j)
{
    uint64_t p = s->base + s->rank + j * s->world;
    return p < s->L ? p : p % s->L;
}

/* Checks the fields every kind shares and allocates the handle. */
static int sampler_new(const struct cxlp_sampler_config *cfg, int kind,
                       cxlp_sampler **out)
{
    if (!cfg)
        return seterr(NULL, CXLP_EARG, "sampler: cfg is NULL");
    if (!out)
        return seterr(NULL, CXLP_EARG, "sampler: out is NULL");
    uint32_t world = cfg->world ? cfg->world : 1;
    if (cfg->rank >= world)
        return seterr(NULL, CXLP_EARG, "sampler: cfg.rank %" PRIu32
                      " is not below cfg.world %" PRIu32, cfg->rank, world);
    if (cfg->n > CXLP_SAMPLER_MAX_N)
        return seterr(NULL, CXLP_EARG, "sampler: cfg.n %" PRIu64 " exceeds 2^63", cfg->n);
    cxlp_sampler *s = calloc(1, sizeof *s);
    if (!s)
        return seterr(NULL, -ENOMEM, "sampler: out of memory");
    obj_init(&s->obj);
    s->kind = kind;
    s->n = cfg->n;
    s->L = cfg->n;
    s->seed = cfg->seed;
    s->epoch = cfg->epoch;
    s->world = world;
    s->rank = cfg->rank;
    s->drop_last = cfg->drop_last != 0;
    s->win.w = UINT64_MAX;
    *out = s;
    return 0;
}

static void sampler_fingerprint(cxlp_sampler *s, uint64_t extra)
{
    const uint64_t w[6] = {(uint64_t)s->kind, s->n, s->L, s->block.S, s->block.W, extra};
    s->fingerprint = XXH3_64bits(w, sizeof w);
}

int cxlp_sampler_create(const struct cxlp_sampler_config *cfg, cxlp_sampler **out)
{
    if (cfg && cfg->kind != CXLP_ORDER_SEQUENTIAL && cfg->kind != CXLP_ORDER_RANDOM &&
        cfg->kind != CXLP_ORDER_BLOCK) {
        if (cfg->kind == CXLP_ORDER_BLEND || cfg->kind == CXLP_ORDER_CURRICULUM ||
            cfg->kind == CXLP_ORDER_HOSTS)
            return seterr(NULL, CXLP_EARG, "sampler: cfg.kind %s needs "
                          "cxlp_sampler_create_%s", cxlp_order_name(cfg->kind),
                          cxlp_order_name(cfg->kind));
        return seterr(NULL, CXLP_EARG, "sampler: cfg.kind %d is not an order", cfg->kind);
    }
    if (cfg && cfg->kind == CXLP_ORDER_BLOCK) {
        if (cfg->shard_size == 0)
            return seterr(NULL, CXLP_EARG, "sampler: cfg.shard_size must be >= 1 for "
                          "the block order");
        if (cfg->window == 0)
            return seterr(NULL, CXLP_EARG, "sampler: cfg.window must be >= 1 for "
                          "the block order");
    }
    cxlp_sampler *s = NULL;
    int rc = sampler_new(cfg, cfg ? cfg->kind : 0, &s);
    if (rc)
        return rc;
    if (s->kind == CXLP_ORDER_BLOCK && (rc = order_init_block(s, cfg->shard_size,
                                                              cfg->window, cfg->ramp))) {
        free(s);
        return rc;
    }
    /* the ramp changes epoch 0's order: a state of one does not restore
     * into the other (0 leaves the fingerprints orders had before it) */
    sampler_fingerprint(s, s->kind == CXLP_ORDER_BLOCK && s->block.ramp ? 0x52414d50u : 0);
    order_epoch(s);
    *out = s;
    return 0;
}

int cxlp_sampler_create_blend(const struct cxlp_sampler_config *cfg,
                              const struct cxlp_blend_source *src, size_t k,
                              int shuffle, cxlp_sampler **out)
{
    cxlp_sampler *s = NULL;
    int rc = sampler_new(cfg, CXLP_ORDER_BLEND, &s);
    if (rc)
        return rc;
    if ((rc = blend_init(s, src, k, shuffle))) {
        cxlp_sampler_free(s);
        return rc;
    }
    order_epoch(s);
    *out = s;
    return 0;
}

int cxlp_sampler_create_curriculum(const struct cxlp_sampler_config *cfg,
                                   const struct cxlp_curriculum *cur,
                                   cxlp_sampler **out)
{
    cxlp_sampler *s = NULL;
    int rc = sampler_new(cfg, CXLP_ORDER_CURRICULUM, &s);
    if (rc)
        return rc;
    if ((rc = curriculum_init(s, cur))) {
        cxlp_sampler_free(s);
        return rc;
    }
    order_epoch(s);
    *out = s;
    return 0;
}

int cxlp_sampler_create_hosts(const struct cxlp_sampler_config *cfg,
                              const struct cxlp_hosts *hosts, cxlp_sampler **out)
{
    if (cfg && cfg->shard_size == 0)
        return seterr(NULL, CXLP_EARG, "sampler: cfg.shard_size must be >= 1 for the hosts "
                      "order");
    if (cfg && cfg->window == 0)
        return seterr(NULL, CXLP_EARG, "sampler: cfg.window must be >= 1 for the hosts order");
    if (cfg && cfg->ramp)
        return seterr(NULL, CXLP_EARG, "sampler: cfg.ramp is not supported by the hosts order");
    cxlp_sampler *s = NULL;
    int rc = sampler_new(cfg, CXLP_ORDER_HOSTS, &s);
    if (rc)
        return rc;
    if ((rc = order_init_block(s, cfg->shard_size, cfg->window, 0)) ||
        (rc = hosts_init(s, hosts))) {
        cxlp_sampler_free(s);
        return rc;
    }
    sampler_fingerprint(s, hosts_fingerprint(s->hosts));
    order_epoch(s);
    *out = s;
    return 0;
}

/* Called by blend_init / curriculum_init once L and their data are known. */
void sampler_set_fingerprint(cxlp_sampler *s, uint64_t extra)
{
    sampler_fingerprint(s, extra);
}

int cxlp_sampler_set_epoch(cxlp_sampler *s, uint64_t epoch)
{
    if (!s)
        return seterr(NULL, CXLP_EARG, "sampler: handle is NULL");
    s->epoch = epoch;
    s->base = 0;
    s->drawn = 0;
    order_epoch(s);
    return 0;
}

uint64_t cxlp_sampler_len(const cxlp_sampler *s)
{
    return s ? rank_len(s) : 0;
}

uint64_t cxlp_sampler_epoch_len(const cxlp_sampler *s)
{
    return s ? s->L : 0;
}

size_t cxlp_sampler_next(cxlp_sampler *s, uint64_t *out, size_t max)
{
    if (!s || !out)
        return 0;
    uint64_t len = rank_len(s);
    if (s->drawn >= len)
        return 0;
    size_t cnt = (size_t)MIN((uint64_t)max, len - s->drawn);
    uint64_t j = s->drawn;
    switch (s->kind) {
    case CXLP_ORDER_RANDOM:
        for (size_t i = 0; i < cnt; i++)
            out[i] = rank_pos(s, j + i);
        feistel_apply_n(&s->perm, out, cnt);
        break;
    case CXLP_ORDER_BLOCK: {
        struct window *win = &s->win;
        for (size_t i = 0; i < cnt;) {
            uint64_t p = rank_pos(s, j + i);
            if (win->w == UINT64_MAX || p < win->start || p - win->start >= win->count)
                block_window(s, block_window_of(&s->block, p), win, 1);
            /* four in the window (positions rise by world unless padding
             * wraps, so the ends being inside means all are): lockstep */
            uint64_t p3 = i + 4 <= cnt ? rank_pos(s, j + i + 3) : 0;
            if (p3 > p && p3 - win->start < win->count) {
                uint64_t x[4] = {p - win->start, rank_pos(s, j + i + 1) - win->start,
                                 rank_pos(s, j + i + 2) - win->start, p3 - win->start};
                feistel_apply4(&win->perm, x);
                for (int k = 0; k < 4; k++)
                    out[i + k] = block_map(&s->block, win, x[k]);
                i += 4;
            } else {
                out[i++] = block_id(&s->block, win, p);
            }
        }
        break;
    }
    case CXLP_ORDER_BLEND:
        for (size_t i = 0; i < cnt; i++)
            out[i] = blend_next(s, rank_pos(s, j + i));
        break;
    case CXLP_ORDER_CURRICULUM:
        for (size_t i = 0; i < cnt; i++)
            out[i] = curriculum_at(s, rank_pos(s, j + i));
        break;
    case CXLP_ORDER_HOSTS:
        hosts_next(s, j, out, cnt);
        break;
    default:
        for (size_t i = 0; i < cnt; i++)
            out[i] = rank_pos(s, j + i);
        break;
    }
    s->drawn += cnt;
    return cnt;
}

int cxlp_sampler_at(const cxlp_sampler *s, uint64_t j, uint64_t *id)
{
    if (!s || !id)
        return seterr(NULL, CXLP_EARG, "sampler_at: %s is NULL", s ? "id" : "handle");
    uint64_t len = rank_len(s);
    if (j >= len)
        return seterr(NULL, CXLP_ERANGE, "sampler_at: j %" PRIu64 " >= per-rank len %"
                      PRIu64, j, len);
    *id = s->kind == CXLP_ORDER_HOSTS ? hosts_rank_at(s, j) : order_at(s, rank_pos(s, j));
    return 0;
}

int cxlp_sampler_epoch_at(const cxlp_sampler *s, uint64_t p, uint64_t *id)
{
    if (!s || !id)
        return seterr(NULL, CXLP_EARG, "sampler_epoch_at: %s is NULL", s ? "id" : "handle");
    if (p >= s->L)
        return seterr(NULL, CXLP_ERANGE, "sampler_epoch_at: position %" PRIu64
                      " >= epoch length %" PRIu64, p, s->L);
    *id = order_at(s, p);
    return 0;
}

int cxlp_sampler_position(const cxlp_sampler *s, uint64_t id, uint64_t *p)
{
    if (!s || !p)
        return seterr(NULL, CXLP_EARG, "sampler_position: %s is NULL", s ? "p" : "handle");
    if (s->kind != CXLP_ORDER_RANDOM && s->kind != CXLP_ORDER_SEQUENTIAL)
        return seterr(NULL, CXLP_EARG, "sampler_position: kind %s has no inverse",
                      cxlp_order_name(s->kind));
    if (id >= s->n)
        return seterr(NULL, CXLP_ERANGE, "sampler_position: id %" PRIu64 " >= n %" PRIu64,
                      id, s->n);
    *p = s->kind == CXLP_ORDER_RANDOM ? feistel_invert(&s->perm, id) : id;
    return 0;
}

int cxlp_sampler_state(const cxlp_sampler *s, struct cxlp_sampler_state *st)
{
    if (!s || !st)
        return seterr(NULL, CXLP_EARG, "sampler_state: %s is NULL", s ? "st" : "handle");
    uint64_t c;
    if (mul_overflow_u64(s->drawn, s->world, &c) || add_overflow_u64(c, s->base, &c) ||
        c > s->L)
        c = s->L;
    st->seed = s->seed;
    st->epoch = s->epoch;
    st->consumed = c;
    st->fingerprint = s->fingerprint;
    return 0;
}

int cxlp_sampler_restore(cxlp_sampler *s, const struct cxlp_sampler_state *st)
{
    if (!s || !st)
        return seterr(NULL, CXLP_EARG, "sampler_restore: %s is NULL", s ? "st" : "handle");
    if (st->fingerprint != s->fingerprint)
        return seterr(&s->obj, CXLP_EARG, "sampler_restore: state.fingerprint %016" PRIx64
                      " is of another order (this sampler: %016" PRIx64 ", %s, n %" PRIu64
                      ")", st->fingerprint, s->fingerprint, cxlp_order_name(s->kind), s->n);
    if (st->consumed > s->L)
        return seterr(&s->obj, CXLP_EARG, "sampler_restore: state.consumed %" PRIu64
                      " exceeds the epoch length %" PRIu64, st->consumed, s->L);
    s->seed = st->seed;
    s->epoch = st->epoch;
    order_epoch(s);
    s->base = st->consumed;
    s->drawn = 0;
    return 0;
}

void cxlp_sampler_free(cxlp_sampler *s)
{
    if (!s)
        return;
    blend_free(s->blend);
    curriculum_free(s->cur);
    hosts_free(s->hosts);
    free(s);
}
