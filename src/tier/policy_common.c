/*
 * policy_common.c - what several policies (policy.h) share: the window's
 * missing shards in order, the least recently used victim, and placement
 * of shards ranked by heat; and the table of each enum cxlp_policy.
 */
#include <stdlib.h>

#include "cxlpool.h"
#include "tier/policy.h"

const struct tier_policy_ops *tier_policy_of(int policy)
{
    switch (policy) {
    case CXLP_POLICY_LRU: return &tier_policy_lru;
    case CXLP_POLICY_STREAMING: return &tier_policy_streaming;
    case CXLP_POLICY_HOT_FIRST: return &tier_policy_hot_first;
    case CXLP_POLICY_FULL_PREFETCH: return &tier_policy_full_prefetch;
    default: return &tier_policy_lookahead;
    }
}

size_t policy_window_missing(const struct tier_view *v, uint64_t *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < v->n_window && n < max; i++) {
        uint64_t k = v->window[i];
        if (!v->resident[k] && !v->kept[k] && !v->busy[k])
            out[n++] = k;
    }
    return n;
}

size_t policy_none(const struct tier_view *v, uint64_t *out, size_t max)
{
    (void)v;
    (void)out;
    (void)max;
    return 0;
}

uint64_t policy_lru_victim(const struct tier_view *v, uint64_t for_shard)
{
    (void)for_shard;
    uint64_t best = TIER_NONE, when = UINT64_MAX;
    for (size_t i = 0; i < v->n_res; i++) {
        uint64_t k = v->res_list[i];
        /* next_use 0: handed out, being gathered: never */
        if (v->next_use[k] == 0 || v->busy[k])
            continue;
        if (v->last_use[k] < when) {
            when = v->last_use[k];
            best = k;
        }
    }
    return best;
}

static int hotter(const void *a, const void *b, void *heat)
{
    const uint64_t *h = heat;
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    uint64_t hx = h ? h[x] : 0, hy = h ? h[y] : 0;
    if (hx != hy)
        return hx > hy ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* The shards ranked hottest first (malloc'd), or NULL. */
static uint64_t *ranked(const struct tier_view *v)
{
    uint64_t *r = malloc((v->n_shards ? v->n_shards : 1) * sizeof *r);
    if (!r)
        return NULL;
    for (uint64_t k = 0; k < v->n_shards; k++)
        r[k] = k;
    qsort_r(r, v->n_shards, sizeof *r, hotter, (void *)v->heat);
    return r;
}

size_t policy_hot_place(const struct tier_view *v, const uint64_t *caps, uint32_t n_tiers,
                        const uint32_t *permille, struct tier_place *out, size_t max)
{
    uint64_t *r = ranked(v);
    if (!r)
        return 0;
    size_t n = 0, at = 0;
    for (uint32_t t = 0; t < n_tiers; t++) {
        uint64_t quota = permille ? v->n_shards * permille[t] / 1000 : v->n_shards, used = 0;
        uint64_t end = at + quota > v->n_shards ? v->n_shards : at + quota;
        for (; at < end && n < max; at++) {
            uint64_t k = r[at];
            if (used + v->len[k] > caps[t])
                break;
            used += v->len[k];
            out[n++] = (struct tier_place){k, t};
        }
        if (!permille) /* fill each tier in turn with what is left */
            continue;
        at = end;
    }
    free(r);
    return n;
}
