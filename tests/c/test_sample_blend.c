/* BLEND: after every prefix of k positions each source's count is within 1
 * of k * w_i / sum(w); next(), at() and epoch_at() agree (checkpointed
 * random access); each source's draws run through a permutation of the
 * source per pass; ids split back into (source, inner); bad sources are
 * refused naming the field. */
#include "sample_util.h"

/* Walks L positions (next() when use_next, else epoch_at) and checks the
 * prefix property. */
static void check_blend(const struct cxlp_blend_source *src, size_t k, uint64_t L,
                        int shuffle, uint64_t seed, int use_next)
{
    struct cxlp_sampler_config c = {.n = L, .seed = seed};
    cxlp_sampler *s;
    CHECK_OK(cxlp_sampler_create_blend(&c, src, k, shuffle, &s));
    CHECK(cxlp_sampler_epoch_len(s) == L);
    uint64_t wsum = 0, *cnt = calloc(k, sizeof *cnt);
    uint8_t **seen = calloc(k, sizeof *seen);
    for (size_t i = 0; i < k; i++) {
        wsum += src[i].weight;
        seen[i] = calloc(src[i].size + 1, 1);
    }
    uint64_t buf[512], nb = 0, bi = 0;
    for (uint64_t p = 0; p < L; p++) {
        uint64_t id;
        if (use_next) {
            if (bi == nb) {
                nb = cxlp_sampler_next(s, buf, 512);
                bi = 0;
                CHECK(nb > 0);
            }
            id = buf[bi++];
        } else {
            CHECK_OK(cxlp_sampler_epoch_at(s, p, &id));
        }
        uint32_t si;
        uint64_t inner;
        CHECK_OK(cxlp_sampler_source(s, id, &si, &inner));
        CHECK(si < k && inner < src[si].size && src[si].weight > 0);
        /* pass = cnt / size: within a pass the draws are distinct */
        if (shuffle) {
            if (cnt[si] % src[si].size == 0)
                memset(seen[si], 0, src[si].size);
            CHECK(!seen[si][inner]);
            seen[si][inner] = 1;
        } else {
            CHECK(inner == cnt[si] % src[si].size);
        }
        cnt[si]++;
        uint64_t kk = p + 1;
        for (size_t i = 0; i < k; i++) {
            /* |cnt_i - kk * w_i / wsum| < 1, in exact integers */
            unsigned __int128 lhs = (unsigned __int128)cnt[i] * wsum;
            unsigned __int128 rhs = (unsigned __int128)kk * src[i].weight;
            unsigned __int128 diff = lhs > rhs ? lhs - rhs : rhs - lhs;
            if (diff >= wsum) {
                fprintf(stderr, "blend: source %zu count %" PRIu64 " after %" PRIu64
                        " positions, weight %" PRIu64 "/%" PRIu64 "\n", i, cnt[i], kk,
                        src[i].weight, wsum);
                exit(1);
            }
        }
    }
    if (use_next)
        CHECK(cxlp_sampler_next(s, buf, 512) == 0 && bi == nb);
    for (size_t i = 0; i < k; i++)
        free(seen[i]);
    free(seen);
    free(cnt);
    cxlp_sampler_free(s);
}

int main(void)
{
    uint64_t seed = test_seed(), rng = seed;
    int san = test_sanitized();
    for (int t = 0; t < (san ? 60 : 300); t++) {
        struct cxlp_blend_source src[64];
        size_t k = 1 + test_rand(&rng) % (t % 10 == 0 ? 64 : 8);
        uint64_t wmax = t % 3 == 0 ? 5 : t % 3 == 1 ? 60 : 2000;
        for (size_t i = 0; i < k; i++) {
            src[i].size = 1 + test_rand(&rng) % 400;
            src[i].weight = test_rand(&rng) % wmax + (i == 0);
        }
        uint64_t L = 1 + test_rand(&rng) % 6000;
        check_blend(src, k, L, (int)(t & 1), test_rand(&rng), (int)(t % 4 < 2));
    }
    /* a long period with checkpoints, walked by next() and by epoch_at() */
    {
        struct cxlp_blend_source big[3] = {{1000, 999983}, {5000, 1000003}, {7, 17}};
        check_blend(big, 3, san ? 300000 : 2100000, 1, seed, 1);
        check_blend(big, 3, 20000, 1, seed, 0);
        struct cxlp_blend_source top[2] = {{100, (UINT64_C(1) << 24) - 3}, {100, 3}};
        check_blend(top, 2, san ? 100000 : 600000, 0, seed, 1);
    }
    /* random access far out equals next() after a restore there, any world */
    {
        struct cxlp_blend_source src[3] = {{1000, 5}, {300, 3}, {77, 2}};
        struct cxlp_sampler_config c = {.n = UINT64_C(1) << 40, .seed = seed, .world = 5,
                                        .rank = 2};
        cxlp_sampler *s;
        CHECK_OK(cxlp_sampler_create_blend(&c, src, 3, 1, &s));
        struct cxlp_sampler_state st;
        CHECK_OK(cxlp_sampler_state(s, &st));
        st.consumed = UINT64_C(999999999999);
        CHECK_OK(cxlp_sampler_restore(s, &st));
        uint64_t v[100], id;
        CHECK(cxlp_sampler_next(s, v, 100) == 100);
        for (int j = 0; j < 100; j++) {
            CHECK_OK(cxlp_sampler_epoch_at(s, st.consumed + 2 + (uint64_t)j * 5, &id));
            CHECK(id == v[j]);
            CHECK_OK(cxlp_sampler_at(s, (uint64_t)j, &id));
            CHECK(id == v[j]);
        }
        uint32_t si;
        uint64_t inner;
        CHECK_RC(cxlp_sampler_source(s, 1377, &si, &inner), CXLP_ERANGE);
        CHECK_OK(cxlp_sampler_source(s, 1376, &si, &inner));
        CHECK(si == 2 && inner == 76);
        cxlp_sampler_free(s);
    }
    /* errors name the source field */
    {
        struct cxlp_sampler_config c = {.n = 10};
        cxlp_sampler *s = NULL;
        struct cxlp_blend_source bad[2] = {{10, 1}, {0, 1}};
        CHECK_RC(cxlp_sampler_create_blend(&c, bad, 2, 1, &s), CXLP_EARG);
        CHECK(strstr(cxlp_errmsg(NULL), "src[1].size"));
        struct cxlp_blend_source zero[2] = {{10, 0}, {5, 0}};
        CHECK_RC(cxlp_sampler_create_blend(&c, zero, 2, 1, &s), CXLP_EARG);
        CHECK(strstr(cxlp_errmsg(NULL), "weight"));
        struct cxlp_blend_source huge[2] = {{10, UINT64_C(1) << 30}, {5, 1}};
        CHECK_RC(cxlp_sampler_create_blend(&c, huge, 2, 1, &s), CXLP_EARG);
        CHECK(strstr(cxlp_errmsg(NULL), "sum of weights"));
        CHECK_RC(cxlp_sampler_create_blend(&c, bad, 0, 1, &s), CXLP_EARG);
        CHECK(s == NULL);
        cxlp_sampler *r = make(CXLP_ORDER_RANDOM, 10, 1, 1, 0, 0, 0, 0);
        uint32_t si;
        uint64_t inner;
        CHECK_RC(cxlp_sampler_source(r, 1, &si, &inner), CXLP_EARG);
        cxlp_sampler_free(r);
    }
    printf("ok\n");
    return 0;
}
