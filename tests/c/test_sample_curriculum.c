/* CURRICULUM: the released count follows the pacing schedule (linear, root,
 * step) rounded up to whole groups, never shrinks, and reaches n; every draw
 * lies in the released portion; while R holds still, no sample repeats
 * within R positions; errors name the field. */
#include <math.h>

#include "sample_util.h"

static const double *g_diff;
static const uint64_t *g_group;

static int cmp_rank(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    if (g_diff && g_diff[x] != g_diff[y])
        return g_diff[x] < g_diff[y] ? -1 : 1;
    if (g_group && g_group[x] != g_group[y])
        return g_group[x] < g_group[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static double pace(int pacing, double g0, uint32_t steps, double t)
{
    double g = pacing == CXLP_PACE_ROOT ? sqrt(g0 * g0 + (1 - g0 * g0) * t)
             : pacing == CXLP_PACE_STEP ? g0 + (1 - g0) * floor(steps * t) / steps
                                        : g0 + (1 - g0) * t;
    return g < 1 ? g : 1;
}

static void check_cur(uint64_t n, int use_group, int pacing, double g0, uint32_t steps,
                      uint64_t L, uint64_t total, uint64_t epoch, uint64_t seed)
{
    double *diff = NULL;
    uint64_t *group = NULL, rng = seed;
    if (use_group) {
        group = malloc(n * sizeof *group);
        for (uint64_t i = 0; i < n; i++)
            group[i] = test_rand(&rng) % 7;
    } else {
        diff = malloc(n * sizeof *diff);
        for (uint64_t i = 0; i < n; i++)
            diff[i] = i % 3 ? (double)(test_rand(&rng) % 1000) / 7.0 : -(double)(i % 5);
    }
    struct cxlp_curriculum cur = {.n = n, .difficulty = diff, .group = group,
                                  .pacing = pacing, .start = g0, .steps = steps,
                                  .total = total};
    struct cxlp_sampler_config c = {.n = L, .seed = seed, .epoch = epoch};
    cxlp_sampler *s;
    CHECK_OK(cxlp_sampler_create_curriculum(&c, &cur, &s));
    L = cxlp_sampler_epoch_len(s);
    /* reference ranking and group ends */
    uint64_t *sorted = malloc(n * sizeof *sorted), *rank_of = malloc(n * sizeof *rank_of);
    uint64_t *gend_of = malloc(n * sizeof *gend_of); /* end of the group at rank i */
    for (uint64_t i = 0; i < n; i++)
        sorted[i] = i;
    g_diff = diff;
    g_group = group;
    qsort(sorted, n, sizeof *sorted, cmp_rank);
    for (uint64_t i = 0; i < n; i++)
        rank_of[sorted[i]] = i;
    for (uint64_t i = n; i-- > 0;) {
        int same = i + 1 < n && (diff ? diff[sorted[i]] == diff[sorted[i + 1]]
                                      : group[sorted[i]] == group[sorted[i + 1]]);
        gend_of[i] = same ? gend_of[i + 1] : i + 1;
    }
    uint64_t *last = malloc(n * sizeof *last), buf[256], nb = 0, bi = 0;
    for (uint64_t i = 0; i < n; i++)
        last[i] = UINT64_MAX;
    uint64_t prevR = 0, stretch = 0;
    double tot = (double)(total ? total : L);
    for (uint64_t p = 0; p < L; p++) {
        uint64_t R = cxlp_sampler_released(s, p);
        double t = ((double)epoch * (double)L + (double)p) / tot;
        double g = pace(pacing, g0, steps, t > 1 ? 1 : t);
        /* allow one ulp-scale wobble of g at an exact boundary */
        double lo = ceil(g * (double)n * (1 - 1e-12)), hi = ceil(g * (double)n * (1 + 1e-12));
        uint64_t rlo = lo < 1 ? 1 : lo > n ? n : (uint64_t)lo;
        uint64_t rhi = hi < 1 ? 1 : hi > n ? n : (uint64_t)hi;
        if (R < gend_of[rlo - 1] || R > gend_of[rhi - 1]) {
            fprintf(stderr, "curriculum: R %" PRIu64 " at p %" PRIu64 ", want %" PRIu64
                    " (pacing %d g0 %g t %g)\n", R, p, gend_of[rlo - 1], pacing, g0, t);
            exit(1);
        }
        CHECK(R >= prevR);
        if (R != prevR)
            stretch = p;
        prevR = R;
        if (bi == nb) {
            nb = cxlp_sampler_next(s, buf, 256);
            bi = 0;
            CHECK(nb > 0);
        }
        uint64_t id = buf[bi++];
        CHECK(id < n);
        CHECK(rank_of[id] < R); /* only released samples */
        if (last[id] != UINT64_MAX && last[id] >= stretch)
            CHECK(p - last[id] >= R); /* no repeat within R positions */
        last[id] = p;
    }
    if (L && (double)epoch * (double)L + (double)(L - 1) >= tot)
        CHECK(prevR == n); /* t reached 1: everything released */
    CHECK(cxlp_sampler_next(s, buf, 256) == 0);
    free(last);
    free(sorted);
    free(rank_of);
    free(gend_of);
    free(diff);
    free(group);
    cxlp_sampler_free(s);
}

int main(void)
{
    uint64_t seed = test_seed(), rng = seed;
    int trials = test_sanitized() ? 40 : 200;
    for (int t = 0; t < trials; t++) {
        uint64_t n = 1 + test_rand(&rng) % 3000;
        int pacing = (int)(test_rand(&rng) % 3);
        double g0 = 0.01 + (double)(test_rand(&rng) % 100) / 100.0;
        if (g0 > 1)
            g0 = 1;
        uint32_t steps = 1 + (uint32_t)(test_rand(&rng) % 10);
        uint64_t L = test_rand(&rng) % 2 ? 0 : 1 + test_rand(&rng) % 5000;
        uint64_t total = test_rand(&rng) % 2 ? 0 : 1 + test_rand(&rng) % 10000;
        check_cur(n, (int)(t & 1), pacing, g0, steps, L, total, test_rand(&rng) % 3,
                  test_rand(&rng));
    }
    /* at t = 0 only the start fraction is out; the hardest appear late */
    {
        uint64_t n = 1000;
        double *d = malloc(n * sizeof *d);
        for (uint64_t i = 0; i < n; i++)
            d[i] = (double)(n - i); /* id n-1 easiest */
        struct cxlp_curriculum cur = {.n = n, .difficulty = d, .pacing = CXLP_PACE_LINEAR,
                                      .start = 0.1};
        struct cxlp_sampler_config c = {.seed = seed};
        cxlp_sampler *s;
        CHECK_OK(cxlp_sampler_create_curriculum(&c, &cur, &s));
        CHECK(cxlp_sampler_released(s, 0) == 100);
        CHECK(cxlp_sampler_released(s, 500) == 550);
        CHECK(cxlp_sampler_released(s, 999) == 1000);
        uint64_t v[100];
        CHECK(cxlp_sampler_next(s, v, 100) == 100);
        for (int i = 0; i < 100; i++) /* released: the R easiest, ids >= n - R */
            CHECK(v[i] >= n - cxlp_sampler_released(s, (uint64_t)i));
        CHECK(cxlp_sampler_released(s, 99) == 190);
        free(d);
        cxlp_sampler_free(s);
    }
    /* errors name the field */
    {
        double d[3] = {1, NAN, 2};
        uint64_t g[3] = {0, 1, 2};
        struct cxlp_curriculum cur = {.n = 3, .difficulty = d, .pacing = CXLP_PACE_ROOT,
                                      .start = 0.5};
        struct cxlp_sampler_config c = {0};
        cxlp_sampler *s = NULL;
        CHECK_RC(cxlp_sampler_create_curriculum(&c, &cur, &s), CXLP_EARG);
        CHECK(strstr(cxlp_errmsg(NULL), "cur.difficulty[1]"));
        cur.group = g;
        CHECK_RC(cxlp_sampler_create_curriculum(&c, &cur, &s), CXLP_EARG);
        CHECK(strstr(cxlp_errmsg(NULL), "exactly one"));
        cur.difficulty = NULL;
        cur.start = 0;
        CHECK_RC(cxlp_sampler_create_curriculum(&c, &cur, &s), CXLP_EARG);
        CHECK(strstr(cxlp_errmsg(NULL), "cur.start"));
        cur.start = 0.5;
        cur.pacing = CXLP_PACE_STEP;
        CHECK_RC(cxlp_sampler_create_curriculum(&c, &cur, &s), CXLP_EARG);
        CHECK(strstr(cxlp_errmsg(NULL), "cur.steps"));
        cur.pacing = 7;
        CHECK_RC(cxlp_sampler_create_curriculum(&c, &cur, &s), CXLP_EARG);
        CHECK(strstr(cxlp_errmsg(NULL), "cur.pacing"));
        cur.pacing = CXLP_PACE_LINEAR;
        cur.n = 0;
        CHECK_RC(cxlp_sampler_create_curriculum(&c, &cur, &s), CXLP_EARG);
        CHECK(strstr(cxlp_errmsg(NULL), "cur.n"));
        CHECK(s == NULL);
        cur.n = 3;
        CHECK_OK(cxlp_sampler_create_curriculum(&c, &cur, &s));
        cxlp_sampler_free(s);
    }
    printf("ok\n");
    return 0;
}
