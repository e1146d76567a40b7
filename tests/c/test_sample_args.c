/* Hostile configurations: random kinds, sizes up to 2^64, shard sizes and
 * windows up to 2^64, worlds up to 2^32-1. Each either creates or fails with
 * CXLP_EARG and a message; every created sampler hands out ids < n from
 * next(), at() and epoch_at(), and its len matches the formula (the
 * sanitizer build checks the arithmetic on the way). */
#include "sample_util.h"

static uint64_t wild(uint64_t *rng)
{
    switch (test_rand(rng) % 6) {
    case 0: return test_rand(rng) % 4;
    case 1: return test_rand(rng) % 1000;
    case 2: return UINT64_MAX - test_rand(rng) % 3;
    case 3: return (UINT64_C(1) << 63) - test_rand(rng) % 3 + 1;
    case 4: return UINT64_C(1) << (test_rand(rng) % 64);
    default: return test_rand(rng);
    }
}

int main(void)
{
    uint64_t seed = test_seed(), rng = seed;
    int trials = test_sanitized() ? 3000 : 20000, made = 0;
    for (int t = 0; t < trials; t++) {
        struct cxlp_sampler_config c = {
            .kind = (int)(test_rand(&rng) % 7) - 1,
            .n = wild(&rng),
            .seed = test_rand(&rng),
            .epoch = wild(&rng),
            .shard_size = wild(&rng),
            .window = wild(&rng),
            .world = (uint32_t)(test_rand(&rng) % 3 ? test_rand(&rng) % 70
                                                   : test_rand(&rng)),
            .drop_last = (int)(test_rand(&rng) % 3),
        };
        c.rank = (uint32_t)(test_rand(&rng) % 4 ? test_rand(&rng) % (c.world ? c.world : 1)
                                                : test_rand(&rng));
        cxlp_sampler *s = NULL;
        int rc = cxlp_sampler_create(&c, &s);
        if (rc) {
            CHECK_RC(rc, CXLP_EARG);
            CHECK(s == NULL && strlen(cxlp_errmsg(NULL)) > 10);
            continue;
        }
        made++;
        uint64_t n = c.n, world = c.world ? c.world : 1;
        uint64_t len = c.drop_last ? n / world : n / world + (n % world != 0);
        CHECK(cxlp_sampler_len(s) == len);
        uint64_t v[37], id;
        size_t k = cxlp_sampler_next(s, v, 37);
        CHECK(k == MINU(len, 37));
        for (size_t i = 0; i < k; i++) {
            CHECK(v[i] < n);
            CHECK_OK(cxlp_sampler_at(s, i, &id));
            CHECK(id == v[i]);
        }
        if (len) {
            uint64_t j = len - 1 - test_rand(&rng) % MINU(len, 1000);
            CHECK_OK(cxlp_sampler_at(s, j, &id));
            CHECK(id < n);
            CHECK_OK(cxlp_sampler_epoch_at(s, n - 1, &id));
            CHECK(id < n);
            struct cxlp_sampler_state st;
            CHECK_OK(cxlp_sampler_state(s, &st));
            CHECK(st.consumed == MINU(k * world, n));
            st.consumed = n - test_rand(&rng) % MINU(n, 5);
            CHECK_OK(cxlp_sampler_restore(s, &st));
            k = cxlp_sampler_next(s, v, 37);
            for (size_t i = 0; i < k; i++)
                CHECK(v[i] < n);
        }
        cxlp_sampler_free(s);
    }
    /* hostile blends: sizes and weights up to 2^64 */
    int blends = 0;
    for (int t = 0; t < trials / 20; t++) {
        struct cxlp_blend_source src[5];
        size_t k = 1 + test_rand(&rng) % 5;
        for (size_t i = 0; i < k; i++) {
            src[i].size = wild(&rng);
            src[i].weight = test_rand(&rng) % 3 ? test_rand(&rng) % 1000 : wild(&rng);
        }
        struct cxlp_sampler_config c = {.n = wild(&rng), .seed = test_rand(&rng),
                                        .world = 1 + (uint32_t)(test_rand(&rng) % 9)};
        c.rank = (uint32_t)(test_rand(&rng) % c.world);
        cxlp_sampler *s = NULL;
        int rc = cxlp_sampler_create_blend(&c, src, k, (int)(t & 1), &s);
        if (rc) {
            CHECK_RC(rc, CXLP_EARG);
            CHECK(s == NULL);
            continue;
        }
        blends++;
        uint64_t v[17];
        size_t got = cxlp_sampler_next(s, v, 17);
        for (size_t i = 0; i < got; i++) {
            uint32_t si;
            uint64_t inner;
            CHECK_OK(cxlp_sampler_source(s, v[i], &si, &inner));
            CHECK(si < k && inner < src[si].size && src[si].weight > 0);
        }
        uint64_t L = cxlp_sampler_epoch_len(s), id;
        if (L)
            CHECK_OK(cxlp_sampler_epoch_at(s, L - 1, &id));
        cxlp_sampler_free(s);
    }
    printf("%d of %d blends valid\n", blends, trials / 20);
    printf("%d of %d configurations valid\n", made, trials);
    CHECK(made > trials / 10);
    printf("ok\n");
    return 0;
}
