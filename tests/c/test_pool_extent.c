/* The extent allocator against a page-bitmap model: random allocations and
 * frees keep the free list sorted, coalesced, equal to the model, and each
 * allocation is the best fit. Seeded. The model is object 1; objects 0 and 2
 * hold the same offsets in the same list and must never be touched. */
#include "test.h"
#include "pool/pool_internal.h"

#define PAGES 512
#define PG 4096ull
#define BASE (2ull << 20)

static uint8_t used[PAGES];

#define OBJ 1u

static void check_list(const struct cat *c)
{
    uint64_t p = 0;
    for (uint64_t i = 0; i < c->n_fr; i++) {
        if (i > 0)
            CHECK(c->fr[i - 1].object <= c->fr[i].object);
        if (c->fr[i].object != OBJ) {
            /* the other objects keep their one extent */
            CHECK(c->fr[i].off == BASE && c->fr[i].len == PAGES * PG);
            continue;
        }
        CHECK(c->fr[i].len > 0 && c->fr[i].off % PG == 0 && c->fr[i].len % PG == 0);
        if (i > 0 && c->fr[i - 1].object == OBJ)
            CHECK(c->fr[i - 1].off + c->fr[i - 1].len < c->fr[i].off); /* gap between */
        uint64_t first = (c->fr[i].off - BASE) / PG, n = c->fr[i].len / PG;
        for (; p < first; p++)
            CHECK(used[p]);
        for (uint64_t k = 0; k < n; k++, p++)
            CHECK(!used[p]);
    }
    for (; p < PAGES; p++)
        CHECK(used[p]);
}

struct blk {
    uint64_t off, len;
};

int main(void)
{
    uint64_t seed = test_seed();
    struct cat c;
    memset(&c, 0, sizeof c);
    CHECK_OK(ext_free(&c, 2, BASE, PAGES * PG));
    CHECK_OK(ext_free(&c, OBJ, BASE, PAGES * PG));
    CHECK_OK(ext_free(&c, 0, BASE, PAGES * PG));
    check_list(&c);
    CHECK(c.n_fr == 3);
    /* double free and overlapping free are refused */
    CHECK_RC(ext_free(&c, OBJ, BASE + PG, PG), CXLP_ECORRUPT);

    struct blk live[PAGES];
    int n_live = 0;
    int ops = test_sanitized() ? 5000 : 50000;
    uint64_t fulls = 0;
    for (int op = 0; op < ops; op++) {
        if (n_live == 0 || test_rand(&seed) % 100 < 55) {
            uint64_t len = (1 + test_rand(&seed) % 24) * PG;
            /* best fit: the smallest free extent that holds len */
            uint64_t best = UINT64_MAX, best_off = 0;
            for (uint64_t i = 0; i < c.n_fr; i++)
                if (c.fr[i].object == OBJ && c.fr[i].len >= len &&
                    (best == UINT64_MAX || c.fr[i].len < best)) {
                    best = c.fr[i].len;
                    best_off = c.fr[i].off;
                }
            uint64_t off;
            int rc = ext_alloc(&c, OBJ, len, &off);
            if (best == UINT64_MAX) {
                CHECK_RC(rc, CXLP_EFULL);
                fulls++;
                continue;
            }
            CHECK_OK(rc);
            CHECK(off == best_off); /* smallest fit, lowest offset among equals */
            uint64_t first = (off - BASE) / PG;
            for (uint64_t k = 0; k < len / PG; k++) {
                CHECK(!used[first + k]);
                used[first + k] = 1;
            }
            live[n_live++] = (struct blk){off, len};
        } else {
            int i = (int)(test_rand(&seed) % (uint64_t)n_live);
            struct blk b = live[i];
            live[i] = live[--n_live];
            /* free a random piece and keep the rest live */
            uint64_t pages = b.len / PG, cut = test_rand(&seed) % pages;
            if (cut && n_live < PAGES) {
                live[n_live++] = (struct blk){b.off, cut * PG};
                b.off += cut * PG;
                b.len -= cut * PG;
            }
            CHECK_OK(ext_free(&c, OBJ, b.off, b.len));
            uint64_t first = (b.off - BASE) / PG;
            for (uint64_t k = 0; k < b.len / PG; k++)
                used[first + k] = 0;
        }
        check_list(&c);
        uint64_t largest, n_ext, total = ext_free_bytes(&c, OBJ, &largest, &n_ext), m = 0;
        for (int p = 0; p < PAGES; p++)
            m += !used[p];
        CHECK(total == m * PG);
        uint64_t runs = 0; /* free extents are coalesced: one per run of free pages */
        for (int p = 0; p < PAGES; p++)
            runs += !used[p] && (p == 0 || used[p - 1]);
        CHECK(n_ext == runs);
    }
    /* everything back: one extent again */
    while (n_live) {
        n_live--;
        CHECK_OK(ext_free(&c, OBJ, live[n_live].off, live[n_live].len));
    }
    CHECK(c.n_fr == 3 && c.fr[1].object == OBJ && c.fr[1].off == BASE &&
          c.fr[1].len == PAGES * PG);
    printf("%d operations, %llu found no fit\n", ops, (unsigned long long)fulls);
    cat_free(&c);

    /* best fit picks the small hole, not the first one */
    memset(&c, 0, sizeof c);
    CHECK_OK(ext_free(&c, 0, BASE, 8 * PG));
    CHECK_OK(ext_free(&c, 0, BASE + 10 * PG, 2 * PG));
    CHECK_OK(ext_free(&c, 0, BASE + 20 * PG, 3 * PG));
    CHECK_OK(ext_free(&c, 1, BASE + 30 * PG, 2 * PG)); /* another object's fit */
    uint64_t off;
    CHECK_OK(ext_alloc(&c, 0, 2 * PG, &off));
    CHECK(off == BASE + 10 * PG);
    CHECK_OK(ext_alloc(&c, 0, 3 * PG, &off));
    CHECK(off == BASE + 20 * PG);
    CHECK_OK(ext_alloc(&c, 0, 3 * PG, &off));
    CHECK(off == BASE);
    CHECK_RC(ext_alloc(&c, 1, 3 * PG, &off), CXLP_EFULL);
    CHECK(c.n_fr == 2 && c.fr[0].off == BASE + 3 * PG && c.fr[1].object == 1);
    cat_free(&c);
    printf("ok\n");
    return 0;
}
