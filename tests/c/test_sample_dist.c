/* The rank view and resume, for every order kind: ranks get equal counts,
 * rank r's j-th id is order(r + j*world) (padding wraps), ranks are disjoint
 * and together cover the epoch; resume at random cut points continues
 * exactly; resume under another world size neither repeats nor skips;
 * bad states are refused with a message naming the field. */
#include "sample_util.h"

struct spec {
    int kind;
    uint64_t n, seed, S, W;
    struct cxlp_blend_source src[4];
    size_t k;
    double *diff;
};

static cxlp_sampler *spawn(const struct spec *sp, uint32_t world, uint32_t rank, int drop_last)
{
    struct cxlp_sampler_config c = {.kind = sp->kind, .seed = sp->seed, .world = world,
                                    .rank = rank, .drop_last = drop_last,
                                    .shard_size = sp->S, .window = sp->W};
    cxlp_sampler *s = NULL;
    if (sp->kind == CXLP_ORDER_BLEND) {
        c.n = sp->n;
        CHECK_OK(cxlp_sampler_create_blend(&c, sp->src, sp->k, 1, &s));
    } else if (sp->kind == CXLP_ORDER_CURRICULUM) {
        struct cxlp_curriculum cur = {.n = sp->n, .difficulty = sp->diff,
                                      .pacing = CXLP_PACE_LINEAR, .start = 0.2};
        CHECK_OK(cxlp_sampler_create_curriculum(&c, &cur, &s));
    } else {
        c.n = sp->n;
        CHECK_OK(cxlp_sampler_create(&c, &s));
    }
    return s;
}

static void random_spec(struct spec *sp, uint64_t *rng)
{
    memset(sp, 0, sizeof *sp);
    sp->kind = (int)(test_rand(rng) % 5);
    uint64_t r = test_rand(rng) % 10;
    sp->n = r == 0 ? test_rand(rng) % 3 : r < 3 ? test_rand(rng) % 70 : test_rand(rng) % 3000;
    sp->seed = test_rand(rng);
    sp->S = 1 + test_rand(rng) % 200;
    sp->W = 1 + test_rand(rng) % 8;
    if (sp->kind == CXLP_ORDER_BLEND) {
        sp->k = 1 + test_rand(rng) % 4;
        for (size_t i = 0; i < sp->k; i++) {
            sp->src[i].size = 1 + test_rand(rng) % 500;
            sp->src[i].weight = 1 + test_rand(rng) % 9;
        }
    }
    if (sp->kind == CXLP_ORDER_CURRICULUM) {
        if (sp->n == 0)
            sp->n = 1;
        sp->diff = malloc(sp->n * sizeof *sp->diff);
        for (uint64_t i = 0; i < sp->n; i++)
            sp->diff[i] = (double)(test_rand(rng) % 10);
    }
}

/* The epoch order as one array (world 1). */
static uint64_t epoch_order(const struct spec *sp, uint64_t **out)
{
    cxlp_sampler *s = spawn(sp, 1, 0, 1);
    uint64_t L = cxlp_sampler_epoch_len(s);
    uint64_t *v = malloc((L + 1) * sizeof *v);
    for (uint64_t p = 0; p < L; p++)
        CHECK_OK(cxlp_sampler_epoch_at(s, p, &v[p]));
    cxlp_sampler_free(s);
    *out = v;
    return L;
}

static int is_perm_kind(int kind)
{
    return kind == CXLP_ORDER_RANDOM || kind == CXLP_ORDER_BLOCK ||
           kind == CXLP_ORDER_SEQUENTIAL;
}

static void check_split(const struct spec *sp, uint64_t *rng)
{
    uint64_t *ord, L = epoch_order(sp, &ord);
    uint32_t world = 1 + (uint32_t)(test_rand(rng) % 64);
    int drop_last = (int)(test_rand(rng) & 1);
    uint64_t each = drop_last ? L / world : (L + world - 1) / world;
    uint8_t *seen = calloc(sp->n + 1, 1);
    for (uint32_t r = 0; r < world; r++) {
        cxlp_sampler *s = spawn(sp, world, r, drop_last);
        CHECK(cxlp_sampler_len(s) == each);
        uint64_t *v, got = drain(s, &v, rng);
        CHECK(got == each);
        for (uint64_t j = 0; j < got; j++) {
            uint64_t p = r + j * world, id;
            CHECK(v[j] == ord[p % L]);
            CHECK_OK(cxlp_sampler_at(s, j, &id));
            CHECK(id == v[j]);
            if (is_perm_kind(sp->kind) && p < L) {
                CHECK(!seen[v[j]]); /* disjoint ranks */
                seen[v[j]] = 1;
            }
        }
        free(v);
        cxlp_sampler_free(s);
    }
    if (is_perm_kind(sp->kind)) {
        uint64_t covered = 0;
        for (uint64_t i = 0; i < sp->n; i++)
            covered += seen[i];
        /* union == the epoch order (minus the dropped tail) */
        CHECK(covered == (drop_last ? each * world : L));
    }
    free(seen);
    free(ord);
}

/* Cut at a random point, restore into a fresh sampler, compare. */
static void check_resume(const struct spec *sp, uint64_t *rng)
{
    uint32_t world = 1 + (uint32_t)(test_rand(rng) % 16);
    uint32_t rank = (uint32_t)(test_rand(rng) % world);
    int drop_last = (int)(test_rand(rng) & 1);
    cxlp_sampler *a = spawn(sp, world, rank, drop_last);
    CHECK_OK(cxlp_sampler_set_epoch(a, test_rand(rng) % 5));
    uint64_t len = cxlp_sampler_len(a), *full, *rest;
    uint64_t cut = len ? test_rand(rng) % (len + 1) : 0;
    cxlp_sampler *ref = spawn(sp, world, rank, drop_last);
    struct cxlp_sampler_state st;
    CHECK_OK(cxlp_sampler_state(a, &st));
    CHECK_OK(cxlp_sampler_set_epoch(ref, st.epoch));
    drain(ref, &full, rng);
    uint64_t *head = malloc((cut + 1) * sizeof *head);
    CHECK(cxlp_sampler_next(a, head, cut) == cut);
    CHECK(memcmp(head, full, cut * sizeof *head) == 0);
    CHECK_OK(cxlp_sampler_state(a, &st));
    CHECK(st.consumed == MINU(cut * world, cxlp_sampler_epoch_len(a)));
    cxlp_sampler *b = spawn(sp, world, rank, drop_last);
    CHECK_OK(cxlp_sampler_restore(b, &st));
    uint64_t got = drain(b, &rest, rng);
    if (st.consumed < cxlp_sampler_epoch_len(a)) {
        CHECK(got == len - cut);
        CHECK(memcmp(rest, full + cut, got * sizeof *rest) == 0);
    }
    free(head);
    free(full);
    free(rest);
    cxlp_sampler_free(a);
    cxlp_sampler_free(b);
    cxlp_sampler_free(ref);
}

/* All ranks of world w1 draw j each; ranks of world w2 finish the epoch. */
static void check_elastic(const struct spec *sp, uint64_t *rng)
{
    uint64_t *ord, L = epoch_order(sp, &ord);
    uint32_t w1 = 1 + (uint32_t)(test_rand(rng) % 64), w2 = 1 + (uint32_t)(test_rand(rng) % 64);
    int drop_last = (int)(test_rand(rng) & 1);
    uint64_t len1 = drop_last ? L / w1 : (L + w1 - 1) / w1;
    uint64_t j = len1 ? test_rand(rng) % (len1 + 1) : 0;
    uint64_t cap = L + 2 * (uint64_t)(w1 + w2) + 1, n = 0;
    uint64_t *ids = malloc(cap * sizeof *ids), *want = malloc(cap * sizeof *want);
    struct cxlp_sampler_state st = {0}, st_r;
    for (uint32_t r = 0; r < w1; r++) {
        cxlp_sampler *s = spawn(sp, w1, r, drop_last);
        CHECK(cxlp_sampler_next(s, ids + n, j) == j);
        n += j;
        CHECK_OK(cxlp_sampler_state(s, &st_r));
        if (r)
            CHECK(memcmp(&st, &st_r, sizeof st) == 0); /* every rank agrees */
        st = st_r;
        cxlp_sampler_free(s);
    }
    uint64_t c = st.consumed;
    CHECK(c == MINU(j * w1, L));
    for (uint32_t r = 0; r < w2; r++) {
        cxlp_sampler *s = spawn(sp, w2, r, drop_last);
        CHECK_OK(cxlp_sampler_restore(s, &st));
        uint64_t *v, got = drain(s, &v, rng);
        CHECK(n + got <= cap);
        memcpy(ids + n, v, got * sizeof *v);
        n += got;
        free(v);
        cxlp_sampler_free(s);
    }
    /* expected: positions [0, j*w1) then [c, c + w2 * len2), mod L */
    uint64_t rest = L - c, len2 = drop_last ? rest / w2 : (rest + w2 - 1) / w2, m = 0;
    for (uint64_t p = 0; p < j * w1; p++)
        want[m++] = ord[p % L];
    for (uint64_t p = c; p < c + len2 * w2; p++)
        want[m++] = ord[p % L];
    CHECK(m == n);
    qsort(ids, n, sizeof *ids, cmp_u64);
    qsort(want, m, sizeof *want, cmp_u64);
    CHECK(memcmp(ids, want, n * sizeof *ids) == 0);
    if (is_perm_kind(sp->kind) && drop_last)
        for (uint64_t i = 1; i < n; i++)
            CHECK(ids[i] != ids[i - 1]); /* nothing repeated */
    if (is_perm_kind(sp->kind) && !drop_last)
        CHECK(n >= L); /* nothing skipped: every position read */
    if (is_perm_kind(sp->kind) && drop_last)
        CHECK(n > L - w2 || L < w2); /* only the last partial round is dropped */
    free(ids);
    free(want);
    free(ord);
}

static void check_errors(uint64_t seed)
{
    cxlp_sampler *s = NULL;
    struct cxlp_sampler_config c = {.kind = CXLP_ORDER_RANDOM, .n = 10, .world = 4, .rank = 4};
    CHECK_RC(cxlp_sampler_create(&c, &s), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cfg.rank"));
    c.rank = 0;
    c.kind = 42;
    CHECK_RC(cxlp_sampler_create(&c, &s), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cfg.kind"));
    c.kind = CXLP_ORDER_BLEND;
    CHECK_RC(cxlp_sampler_create(&c, &s), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cxlp_sampler_create_blend"));
    c.kind = CXLP_ORDER_RANDOM;
    c.n = CXLP_SAMPLER_MAX_N + 1;
    CHECK_RC(cxlp_sampler_create(&c, &s), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cfg.n"));
    c.n = 100;
    c.kind = CXLP_ORDER_BLOCK;
    c.window = 2;
    CHECK_RC(cxlp_sampler_create(&c, &s), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cfg.shard_size"));
    c.shard_size = 10;
    c.window = 0;
    CHECK_RC(cxlp_sampler_create(&c, &s), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cfg.window"));
    CHECK(s == NULL);
    CHECK_RC(cxlp_sampler_create(NULL, &s), CXLP_EARG);

    /* a state of another order, or past the end, is refused on the handle */
    cxlp_sampler *a = make(CXLP_ORDER_RANDOM, 100, seed, 1, 0, 0, 0, 0);
    cxlp_sampler *b = make(CXLP_ORDER_RANDOM, 101, seed, 1, 0, 0, 0, 0);
    cxlp_sampler *d = make(CXLP_ORDER_BLOCK, 100, seed, 1, 0, 0, 10, 2);
    struct cxlp_sampler_state st;
    CHECK_OK(cxlp_sampler_state(a, &st));
    CHECK_RC(cxlp_sampler_restore(b, &st), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(b), "state.fingerprint"));
    CHECK_RC(cxlp_sampler_restore(d, &st), CXLP_EARG);
    st.consumed = 101;
    CHECK_RC(cxlp_sampler_restore(a, &st), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(a), "state.consumed"));
    /* another world, rank, drop_last or seed is fine: they are not the order */
    cxlp_sampler *e = make(CXLP_ORDER_RANDOM, 100, seed + 9, 7, 3, 1, 0, 0);
    st.consumed = 50;
    CHECK_OK(cxlp_sampler_restore(e, &st));
    CHECK(cxlp_sampler_len(e) == (uint64_t)(50 / 7));
    uint64_t id;
    CHECK_RC(cxlp_sampler_at(e, 50 / 7, &id), CXLP_ERANGE);
    CHECK_OK(cxlp_sampler_set_epoch(e, 3));
    CHECK(cxlp_sampler_len(e) == (uint64_t)(100 / 7));
    CHECK(cxlp_sampler_next(e, NULL, 5) == 0);
    CHECK_RC(cxlp_sampler_position(d, 1, &id), CXLP_EARG);
    cxlp_sampler_free(a);
    cxlp_sampler_free(b);
    cxlp_sampler_free(d);
    cxlp_sampler_free(e);
    cxlp_sampler_free(NULL);
    CHECK(strcmp(cxlp_order_name(CXLP_ORDER_BLOCK), "block") == 0);
    CHECK(cxlp_order_parse("curriculum") == CXLP_ORDER_CURRICULUM);
    CHECK(cxlp_order_parse("nope") == -1);
    CHECK(strcmp(cxlp_order_name(9), "?") == 0);
}

int main(void)
{
    uint64_t seed = test_seed(), rng = seed;
    int trials = test_sanitized() ? 60 : 300;
    for (int t = 0; t < trials; t++) {
        struct spec sp;
        random_spec(&sp, &rng);
        check_split(&sp, &rng);
        check_resume(&sp, &rng);
        check_elastic(&sp, &rng);
        free(sp.diff);
    }
    check_errors(seed);
    printf("ok\n");
    return 0;
}
