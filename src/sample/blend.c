/*
 * blend.c - weighted mixing of K sources with exact proportions.
 *
 * Integer weights q_i (reduced by their gcd), D = sum q_i, w_i = q_i / D.
 * c_i(t) counts the draws of source i in positions [0, t). The invariant
 *   |c_i(t) - t * w_i| < 1        for every prefix t and every i
 * is Pfair scheduling on one processor: the c-th draw (0-based) of source i
 * must fall in the window of positions
 *   [ floor(c D / q_i), ceil((c+1) D / q_i) )
 * and since sum w_i = 1 a schedule meeting every window exists (Baruah et
 * al.; Tijdeman's chairman assignment). On one processor earliest deadline
 * first is optimal, so position t draws, among the sources whose next window
 * has opened (c_i D < (t+1) q_i), the one whose window closes first
 * (smallest ceil((c_i+1) D / q_i); ties to the lowest i). At t = D the
 * invariant forces c_i = q_i, the pattern repeats with period D:
 *   c_i(mD + r) = m q_i + c_i(r).
 * So the state of a blend is still just a position: random access replays at
 * most `every` steps from a checkpoint of counts taken every `every`
 * positions of one period (built once at create, O(K D / every) memory), and
 * next() walks a cursor forward (O(K) per position, O(K * world) per index a
 * rank draws, since every rank walks the positions of all ranks).
 *
 * Rejected: Megatron's BlendedDataset rule (draw the source with the largest
 * (t+1) w_i - c_i): simple, but with several sources its error exceeds 1
 * (the tests found 1.04 with 8 sources). A closed form such as
 * c_i(t) = floor(t S_i + h) - floor(t S_{i-1} + h) over cumulative weights:
 * within 1, but a count can decrease from t to t+1, so it is no sequence of
 * draws. Float weights: exactness (and the period) needs exact arithmetic.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "sample/sample.h"

#define CKPT_ROWS_MAX 65536

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
    while (b) {
        uint64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Source drawn at period position r given the counts before r: earliest
 * deadline among the sources whose window is open. */
static size_t pick(const struct blend *b, uint64_t r, const uint32_t *c)
{
    size_t best = SIZE_MAX;
    uint64_t bestd = UINT64_MAX;
    for (size_t i = 0; i < b->k; i++) {
        uint64_t q = b->q[i];
        if (!q || (uint64_t)c[i] * b->D >= (r + 1) * q)
            continue;
        uint64_t d = (((uint64_t)c[i] + 1) * b->D + q - 1) / q;
        if (d < bestd) {
            bestd = d;
            best = i;
        }
    }
    CXLP_ASSERT(best != SIZE_MAX); /* a full schedule exists: never idle */
    if (best == SIZE_MAX)
        for (best = 0; !b->q[best]; best++)
            ;
    return best;
}

/* c = counts before period position r (< D). */
static void counts_at(const struct blend *b, uint64_t r, uint32_t *c)
{
    uint64_t row = r / b->every;
    memcpy(c, b->ckpt + row * b->k, b->k * sizeof *c);
    for (uint64_t x = row * b->every; x < r; x++)
        c[pick(b, x, c)]++;
}

/* Global id of the count-th draw (0-based) of source i. */
static uint64_t source_id(const cxlp_sampler *s, size_t i, uint64_t count)
{
    const struct blend *b = s->blend;
    uint64_t size = b->size[i], pass = count / size, off = count - pass * size;
    if (b->shuffle) {
        struct feistel f;
        feistel_init(&f, size, derive_key(s->seed, s->epoch,
                                          TAG_SOURCE | (uint64_t)i << 8, pass));
        off = feistel_apply(&f, off);
    }
    return b->off[i] + off;
}

int blend_init(cxlp_sampler *s, const struct cxlp_blend_source *src, size_t k, int shuffle)
{
    if (!src || k == 0 || k > CXLP_BLEND_MAX_SOURCES)
        return seterr(NULL, CXLP_EARG, "blend: k %zu sources (src %s); want 1..%d",
                      k, src ? "given" : "NULL", CXLP_BLEND_MAX_SOURCES);
    uint64_t total = 0, g = 0;
    for (size_t i = 0; i < k; i++) {
        if (src[i].weight && !src[i].size)
            return seterr(NULL, CXLP_EARG, "blend: src[%zu].size is 0 but its weight is %"
                          PRIu64, i, src[i].weight);
        if (add_overflow_u64(total, src[i].size, &total) || total > CXLP_SAMPLER_MAX_N)
            return seterr(NULL, CXLP_EARG, "blend: src[%zu].size: sum of sizes exceeds 2^63", i);
        g = gcd_u64(g, src[i].weight);
    }
    if (!g)
        return seterr(NULL, CXLP_EARG, "blend: every src[i].weight is 0");
    struct blend *b = calloc(1, sizeof *b);
    if (!b)
        return seterr(NULL, -ENOMEM, "blend: out of memory");
    s->blend = b;
    b->k = k;
    b->shuffle = shuffle != 0;
    b->size = calloc(k, sizeof *b->size);
    b->off = calloc(k + 1, sizeof *b->off);
    b->q = calloc(k, sizeof *b->q);
    b->cur_c = calloc(k, sizeof *b->cur_c);
    if (!b->size || !b->off || !b->q || !b->cur_c)
        return seterr(NULL, -ENOMEM, "blend: out of memory");
    for (size_t i = 0; i < k; i++) {
        b->size[i] = src[i].size;
        b->off[i + 1] = b->off[i] + src[i].size;
        b->q[i] = src[i].weight / g;
        if (b->q[i] > CXLP_BLEND_MAX_PERIOD || b->D + b->q[i] > CXLP_BLEND_MAX_PERIOD)
            return seterr(NULL, CXLP_EARG, "blend: src[%zu].weight: sum of weights / gcd "
                          "exceeds %" PRIu64 "; use smaller integer weights", i,
                          CXLP_BLEND_MAX_PERIOD);
        b->D += b->q[i];
    }
    b->every = 64;
    while (b->D / b->every >= CKPT_ROWS_MAX)
        b->every *= 2;
    uint64_t rows = b->D / b->every + 1;
    b->ckpt = calloc(rows * k, sizeof *b->ckpt);
    if (!b->ckpt)
        return seterr(NULL, -ENOMEM, "blend: out of memory for %" PRIu64 " checkpoints", rows);
    uint32_t *c = b->cur_c;
    memset(c, 0, k * sizeof *c);
    for (uint64_t r = 0; r < b->D; r++) {
        if (r % b->every == 0)
            memcpy(b->ckpt + (r / b->every) * k, c, k * sizeof *c);
        c[pick(b, r, c)]++;
    }
    b->cur_m = UINT64_MAX;
    s->n = total;
    if (!s->L)
        s->L = total;
    XXH3_state_t *h = XXH3_createState();
    if (!h)
        return seterr(NULL, -ENOMEM, "blend: out of memory");
    XXH3_64bits_reset(h);
    XXH3_64bits_update(h, &k, sizeof k);
    XXH3_64bits_update(h, &b->shuffle, sizeof b->shuffle);
    XXH3_64bits_update(h, b->size, k * sizeof *b->size);
    XXH3_64bits_update(h, b->q, k * sizeof *b->q);
    sampler_set_fingerprint(s, XXH3_64bits_digest(h));
    XXH3_freeState(h);
    return 0;
}

void blend_free(struct blend *b)
{
    if (!b)
        return;
    free(b->size);
    free(b->off);
    free(b->q);
    free(b->ckpt);
    free(b->cur_c);
    free(b);
}

uint64_t blend_at(const cxlp_sampler *s, uint64_t p)
{
    const struct blend *b = s->blend;
    uint32_t c[CXLP_BLEND_MAX_SOURCES];
    uint64_t m = p / b->D, r = p - m * b->D;
    counts_at(b, r, c);
    size_t i = pick(b, r, c);
    return source_id(s, i, m * b->q[i] + c[i]);
}

uint64_t blend_next(cxlp_sampler *s, uint64_t p)
{
    struct blend *b = s->blend;
    uint64_t m = p / b->D, r = p - m * b->D;
    if (b->cur_m == m && r >= b->cur_r && r - b->cur_r <= b->every) {
        for (uint64_t x = b->cur_r; x < r; x++)
            b->cur_c[pick(b, x, b->cur_c)]++;
    } else {
        counts_at(b, r, b->cur_c);
    }
    b->cur_m = m;
    b->cur_r = r;
    size_t i = pick(b, r, b->cur_c);
    return source_id(s, i, m * b->q[i] + b->cur_c[i]);
}

int cxlp_sampler_source(const cxlp_sampler *s, uint64_t id, uint32_t *source,
                        uint64_t *inner)
{
    if (!s || !source || !inner)
        return seterr(NULL, CXLP_EARG, "sampler_source: NULL argument");
    if (s->kind != CXLP_ORDER_BLEND)
        return seterr(NULL, CXLP_EARG, "sampler_source: kind %s is not a blend",
                      cxlp_order_name(s->kind));
    const struct blend *b = s->blend;
    if (id >= b->off[b->k])
        return seterr(NULL, CXLP_ERANGE, "sampler_source: id %" PRIu64 " >= %" PRIu64,
                      id, b->off[b->k]);
    size_t lo = 0, hi = b->k; /* off[lo] <= id < off[hi] */
    while (hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->off[mid] <= id)
            lo = mid;
        else
            hi = mid;
    }
    *source = (uint32_t)lo;
    *inner = id - b->off[lo];
    return 0;
}
