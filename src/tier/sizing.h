/*
 * sizing.h - the staging engine's sizing rules (engine.c) as pure
 * functions, so that the simulator (src/sim) sizes its modelled engines by
 * the same rules rather than a copy of them.
 *
 *   budget   bytes of cache copies the staging tier may hold by default:
 *            3/4 of the tier (the rest: other datasets, kept copies)
 *   horizon  ids of the rank's stream held ahead: tier_horizon batches when
 *            asked, else as many records as 5/8 of the budget holds (at
 *            least 8 batches), at most 2^22
 *   replan   ids taken between two plans: horizon / 32, at least a batch
 *   place    kept copies a placement makes in the staging tier take at
 *            most a quarter of the budget; what they take leaves the budget
 *            (at least two items of room for the misses)
 *   sparse   an item is too sparse to stage when reading its records of
 *            the horizon in part takes less than a quarter of its records'
 *            bytes in a copy (engine_sparse)
 */
#ifndef CXLP_TIER_SIZING_H
#define CXLP_TIER_SIZING_H

#include <stdint.h>

#define ENGINE_DEF_HORIZON 8u
#define ENGINE_MAX_HORIZON (UINT64_C(1) << 22)

static inline uint64_t engine_default_budget(uint64_t tier_data_len)
{
    return tier_data_len / 4 * 3;
}

/* tier_horizon: batches asked for (0: the default); rec: bytes a record
 * takes (at least 1). */
static inline uint64_t engine_horizon(uint64_t tier_horizon, uint64_t batch, uint64_t budget,
                                      uint64_t rec)
{
    uint64_t def = budget / 8 * 5 / (rec ? rec : 1);
    if (def < ENGINE_DEF_HORIZON * batch)
        def = ENGINE_DEF_HORIZON * batch;
    uint64_t h = tier_horizon ? tier_horizon * batch : def;
    return h < ENGINE_MAX_HORIZON ? h : ENGINE_MAX_HORIZON;
}

static inline uint64_t engine_replan(uint64_t batch, uint64_t horizon)
{
    return horizon / 32 > batch ? horizon / 32 : batch;
}

static inline uint64_t engine_place_cap(uint64_t budget)
{
    return budget / 4;
}

static inline uint64_t engine_budget_after_place(uint64_t budget, uint64_t placed,
                                                 uint64_t maxlen)
{
    uint64_t b = budget > placed ? budget - placed : 0;
    return b < 2 * maxlen ? 2 * maxlen : b;
}

/* 1 when an item is too sparse to pay for a copy: the host's ids of it in
 * view (this rank's `ids` in its horizon and in flight, times 1 + the
 * `others` engines of the host whose need lists name it: each assumed to
 * read as many) at `rec` bytes each (a record's payload rounded up to the
 * partial read's block) take less than a quarter of the smaller of the
 * item's records' bytes (`len` bytes of a copy, of which `payload_pm`/1024
 * are records) and what the `horizon` (ids) can show of one item. A
 * quarter: an item of a window="auto" order (a window half the budget,
 * the horizon 5/8 of it) has a quarter of its records in view when its
 * window's predecessor starts, which is when it was staged before this
 * rule; at 1 (a copy's bytes) it waited for all of them, a window's
 * items were read in part (bench_home_bytes). The rest is the budget's
 * ranking (engine.c, mark_sparse). */
static inline int engine_sparse(uint64_t ids, uint64_t others, uint64_t rec, uint64_t len,
                                uint64_t payload_pm, uint64_t horizon)
{
    uint64_t recs = len / 1024 * payload_pm, lim = horizon * rec < recs ? horizon * rec : recs;
    return ids * (others + 1) * rec * 4 < lim;
}

/* The density of an item in view for the budget's ranking (engine.c,
 * plan): the bytes its ids in view need (as engine_sparse) over its len,
 * on a log scale with 4 steps an octave, 0 (none) to 255. */
#define ENGINE_DENSITY_STEPS 256u
static inline uint32_t engine_density(uint64_t need, uint64_t len)
{
    uint64_t r = need / (len / 64 + 1); /* in 1/64ths of len */
    if (!r)
        return 0;
    uint32_t lg = 63u - (uint32_t)__builtin_clzll(r);
    uint32_t sub = lg >= 2 ? (uint32_t)(r >> (lg - 2)) & 3u : (uint32_t)(r << (2 - lg)) & 3u;
    uint32_t d = 1 + lg * 4 + sub;
    return d < ENGINE_DENSITY_STEPS ? d : ENGINE_DENSITY_STEPS - 1;
}

/* The queue of ids ahead and the ring of ids handed out (engine_create). */
static inline uint64_t engine_q_cap(uint64_t horizon)
{
    return horizon + 4096;
}

static inline uint64_t engine_recent_cap(uint64_t batch)
{
    return batch * 64 + 65536; /* more than a loader holds in flight */
}

/* Bytes engine_create allocates for an engine of n items (engine.c): what
 * every rank's loader holds, per rank, on a tiered dataset. */
uint64_t engine_memory(uint64_t n, uint64_t horizon, uint64_t batch);

#endif
