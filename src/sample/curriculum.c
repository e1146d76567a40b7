/*
 * curriculum.c - curriculum order: samples released from easy to hard.
 *
 * Samples are ranked by (difficulty, id) once at create (rank_sorted, O(n)),
 * equal difficulties forming groups. At epoch position p the progress is
 *   t = min(1, (epoch * L + p) / total)
 * and the pacing function gives the released fraction g(t):
 *   linear  g = g0 + (1 - g0) t
 *   root    g = sqrt(g0^2 + (1 - g0^2) t)      (competence-based curricula)
 *   step    g = g0 + (1 - g0) floor(steps t) / steps
 * R(t) = ceil(g n) rounded up to the end of its group (a group is released
 * whole, and at least the first group is). Position p then draws
 *   rank_sorted[pi_R(p mod R)],  pi_R keyed by (seed, epoch, R):
 * uniform over the released portion; while R holds still, any R consecutive
 * positions are R distinct samples (they are distinct residues mod R).
 * Everything stays a pure function of (seed, epoch, p): resume and rank
 * split work as for every other order.
 *
 * Rejected: drawing with replacement by hashing p (repeats inside a stage
 * for no reason); a permutation of the whole dataset constrained by release
 * times (needs per-sample state or a sort per epoch).
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "sample/sample.h"

struct keyed {
    uint64_t key, id;
};

static int cmp_keyed(const void *a, const void *b)
{
    const struct keyed *x = a, *y = b;
    if (x->key != y->key)
        return x->key < y->key ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Order-preserving map of a double onto uint64 (-0.0 equals 0.0). */
static uint64_t double_key(double d)
{
    uint64_t u;
    if (d == 0)
        d = 0;
    memcpy(&u, &d, sizeof u);
    return (u >> 63) ? ~u : u | (UINT64_C(1) << 63);
}

int curriculum_init(cxlp_sampler *s, const struct cxlp_curriculum *cur)
{
    if (!cur)
        return seterr(NULL, CXLP_EARG, "curriculum: cur is NULL");
    if (cur->n == 0 || cur->n > CXLP_SAMPLER_MAX_N)
        return seterr(NULL, CXLP_EARG, "curriculum: cur.n %" PRIu64 " not in 1..2^63", cur->n);
    if (!cur->difficulty == !cur->group)
        return seterr(NULL, CXLP_EARG, "curriculum: give exactly one of cur.difficulty "
                      "and cur.group");
    if (cur->pacing < CXLP_PACE_LINEAR || cur->pacing > CXLP_PACE_STEP)
        return seterr(NULL, CXLP_EARG, "curriculum: cur.pacing %d is not a pacing", cur->pacing);
    if (!(cur->start > 0 && cur->start <= 1))
        return seterr(NULL, CXLP_EARG, "curriculum: cur.start %g not in (0, 1]", cur->start);
    if (cur->pacing == CXLP_PACE_STEP && cur->steps == 0)
        return seterr(NULL, CXLP_EARG, "curriculum: cur.steps must be >= 1 for step pacing");
    uint64_t n = cur->n;
    if (n > SIZE_MAX / sizeof(struct keyed))
        return seterr(NULL, -ENOMEM, "curriculum: cur.n %" PRIu64 " too large", n);
    if (cur->difficulty)
        for (uint64_t i = 0; i < n; i++)
            if (cur->difficulty[i] != cur->difficulty[i]) /* NaN */
                return seterr(NULL, CXLP_EARG, "curriculum: cur.difficulty[%" PRIu64
                              "] is NaN", i);
    struct curriculum *c = calloc(1, sizeof *c);
    struct keyed *kv = malloc(n * sizeof *kv);
    if (!c || !kv) {
        free(c);
        free(kv);
        return seterr(NULL, -ENOMEM, "curriculum: out of memory for %" PRIu64 " samples", n);
    }
    s->cur = c;
    for (uint64_t i = 0; i < n; i++) {
        kv[i].key = cur->difficulty ? double_key(cur->difficulty[i]) : cur->group[i];
        kv[i].id = i;
    }
    qsort(kv, n, sizeof *kv, cmp_keyed);
    c->sorted = malloc(n * sizeof *c->sorted);
    uint64_t ng = 1;
    for (uint64_t i = 1; i < n; i++)
        ng += kv[i].key != kv[i - 1].key;
    c->gend = malloc(ng * sizeof *c->gend);
    if (!c->sorted || !c->gend) {
        free(kv);
        return seterr(NULL, -ENOMEM, "curriculum: out of memory for %" PRIu64 " samples", n);
    }
    uint64_t g = 0;
    for (uint64_t i = 0; i < n; i++) {
        c->sorted[i] = kv[i].id;
        if (i + 1 == n || kv[i + 1].key != kv[i].key)
            c->gend[g++] = i + 1;
    }
    free(kv);
    c->n = n;
    c->ngroups = ng;
    c->pacing = cur->pacing;
    c->start = cur->start;
    c->steps = cur->pacing == CXLP_PACE_STEP ? cur->steps : 0;
    c->total = cur->total;
    s->n = n;
    if (!s->L)
        s->L = n;
    XXH3_state_t *h = XXH3_createState();
    if (!h)
        return seterr(NULL, -ENOMEM, "curriculum: out of memory");
    XXH3_64bits_reset(h);
    XXH3_64bits_update(h, c->sorted, n * sizeof *c->sorted);
    XXH3_64bits_update(h, c->gend, ng * sizeof *c->gend);
    const uint64_t pace[4] = {(uint64_t)c->pacing, (uint64_t)c->steps, c->total,
                              double_key(c->start)};
    XXH3_64bits_update(h, pace, sizeof pace);
    sampler_set_fingerprint(s, XXH3_64bits_digest(h));
    XXH3_freeState(h);
    return 0;
}

void curriculum_free(struct curriculum *c)
{
    if (!c)
        return;
    free(c->sorted);
    free(c->gend);
    free(c);
}

/* The library links no libm (the shared object is built without it): these
 * three are all the curriculum needs, exact and deterministic. */
static double sqrt_down(double v)
{
    if (!(v > 0))
        return 0;
    double y = v < 1 ? 1 : v; /* >= sqrt(v): Newton then descends to it */
    for (;;) {
        double z = 0.5 * (y + v / y);
        if (z >= y)
            return y;
        y = z;
    }
}

static uint64_t floor_pos(double x) /* x >= 0 */
{
    return (uint64_t)x;
}

static uint64_t ceil_pos(double x) /* 0 <= x < 2^64 */
{
    uint64_t r = (uint64_t)x;
    return (double)r < x ? r + 1 : r;
}

static double pace(const struct curriculum *c, double t)
{
    double g0 = c->start, g;
    switch (c->pacing) {
    case CXLP_PACE_ROOT:
        g = sqrt_down(g0 * g0 + (1 - g0 * g0) * t);
        break;
    case CXLP_PACE_STEP:
        g = g0 + (1 - g0) * (double)floor_pos(c->steps * t) / c->steps;
        break;
    default:
        g = g0 + (1 - g0) * t;
        break;
    }
    return g < 1 ? g : 1;
}

uint64_t curriculum_released(const cxlp_sampler *s, uint64_t p)
{
    const struct curriculum *c = s->cur;
    double total = (double)(c->total ? c->total : s->L);
    double t = total > 0 ? ((double)s->epoch * (double)s->L + (double)p) / total : 1;
    if (t > 1)
        t = 1;
    double want = pace(c, t) * (double)c->n;
    uint64_t r = want >= (double)c->n ? c->n : want < 1 ? 1 : ceil_pos(want);
    /* round up to the end of the group holding the r-th sample */
    uint64_t lo = 0, hi = c->ngroups - 1; /* smallest j with gend[j] >= r */
    while (lo < hi) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (c->gend[mid] >= r)
            hi = mid;
        else
            lo = mid + 1;
    }
    return c->gend[lo];
}

uint64_t curriculum_at(const cxlp_sampler *s, uint64_t p)
{
    uint64_t r = curriculum_released(s, p);
    struct feistel f;
    feistel_init(&f, r, derive_key(s->seed, s->epoch, TAG_RELEASED, r));
    return s->cur->sorted[feistel_apply(&f, p % r)];
}

uint64_t cxlp_sampler_released(const cxlp_sampler *s, uint64_t p)
{
    if (!s || s->kind != CXLP_ORDER_CURRICULUM)
        return 0;
    return curriculum_released(s, p);
}
