/* The hosts order (cxlp_sampler_create_hosts): with one host it is the
 * block order, id for id, on every rank; over random hosts, weights, rank
 * layouts, n (0, 1, n < world), shard sizes, windows and drop_last: the
 * epoch order is a permutation; every rank draws the per-rank count of
 * every order; the ranks together read the epoch's positions [0, q*world)
 * (mod L) exactly once each; in every round a host's ranks read as many of
 * their own host's blocks as the round has for them (min(cnt, ranks)); the
 * blocks go to hosts by largest remainder of their weights; next, at and a
 * second sampler agree; exact resume at random cuts; elastic resume to
 * another world and layout neither repeats nor skips; the assignment
 * changes with the epoch; the fingerprint ignores world and layout, not the
 * weights; hostile sizes create or fail with CXLP_EARG and draw in range;
 * bad arguments are refused naming the field. */
#include <math.h>

#include "sample_util.h"

struct hspec {
    uint64_t n, seed, epoch, S, W;
    uint32_t H;
    uint64_t wt[8];
    int keep;
};

static cxlp_sampler *hmake(const struct hspec *sp, uint32_t world, uint32_t rank,
                           const uint32_t *layout, int drop_last)
{
    struct cxlp_sampler_config c = {.n = sp->n, .seed = sp->seed, .epoch = sp->epoch,
                                    .world = world, .rank = rank, .drop_last = drop_last,
                                    .shard_size = sp->S, .window = sp->W};
    struct cxlp_hosts h = {.n_hosts = sp->H, .weight = sp->wt, .rank_host = layout,
                           .keep = sp->keep};
    cxlp_sampler *s = NULL;
    CHECK_OK(cxlp_sampler_create_hosts(&c, &h, &s));
    return s;
}

static void random_hspec(struct hspec *sp, uint64_t *rng)
{
    memset(sp, 0, sizeof *sp);
    uint64_t r = test_rand(rng) % 10;
    sp->n = r == 0 ? test_rand(rng) % 3 : r < 3 ? test_rand(rng) % 70 : test_rand(rng) % 4000;
    sp->seed = test_rand(rng);
    sp->epoch = test_rand(rng) % 5;
    sp->S = 1 + test_rand(rng) % 60;
    sp->W = 1 + test_rand(rng) % 6;
    sp->H = 1 + (uint32_t)(test_rand(rng) % 6);
    sp->keep = (int)(test_rand(rng) % 2);
    int any = 0;
    for (uint32_t h = 0; h < sp->H; h++) {
        sp->wt[h] = test_rand(rng) % 4 == 0 ? 0 : 1 + test_rand(rng) % 9;
        any |= sp->wt[h] != 0;
    }
    if (!any)
        sp->wt[0] = 1;
}

static void random_layout(uint32_t *layout, uint32_t world, uint32_t H, uint64_t *rng)
{
    if (test_rand(rng) % 2) { /* contiguous, torchrun's */
        for (uint32_t r = 0; r < world; r++)
            layout[r] = (uint32_t)((uint64_t)r * H / world);
    } else {
        for (uint32_t r = 0; r < world; r++)
            layout[r] = (uint32_t)(test_rand(rng) % H);
    }
}

/* host of every id of this epoch (from host_of) */
static uint32_t *hosts_of(cxlp_sampler *s, uint64_t n)
{
    uint32_t *h = malloc((n ? n : 1) * sizeof *h);
    CHECK(h);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t idx;
        CHECK_OK(cxlp_sampler_host_of(s, i, &h[i], &idx));
    }
    return h;
}

/* With one host: the block order, on every rank, every epoch. */
static void check_one_host(uint64_t *rng)
{
    struct hspec sp;
    random_hspec(&sp, rng);
    sp.H = 1;
    sp.keep = 0;
    sp.wt[0] = 1 + test_rand(rng) % 5;
    uint32_t world = 1 + (uint32_t)(test_rand(rng) % 9);
    int drop = (int)(test_rand(rng) % 2);
    for (uint32_t r = 0; r < world; r++) {
        cxlp_sampler *h = hmake(&sp, world, r, NULL, drop);
        struct cxlp_sampler_config c = {.kind = CXLP_ORDER_BLOCK, .n = sp.n, .seed = sp.seed,
                                        .epoch = sp.epoch, .world = world, .rank = r,
                                        .drop_last = drop, .shard_size = sp.S,
                                        .window = sp.W};
        cxlp_sampler *b;
        CHECK_OK(cxlp_sampler_create(&c, &b));
        uint64_t *vh, *vb;
        uint64_t kh = drain(h, &vh, rng), kb = drain(b, &vb, rng);
        CHECK(kh == kb);
        CHECK(memcmp(vh, vb, kh * sizeof *vh) == 0);
        for (uint64_t p = 0; p < sp.n; p += 1 + p / 7) {
            uint64_t a, x;
            CHECK_OK(cxlp_sampler_epoch_at(h, p, &a));
            CHECK_OK(cxlp_sampler_epoch_at(b, p, &x));
            CHECK(a == x);
        }
        free(vh);
        free(vb);
        cxlp_sampler_free(h);
        cxlp_sampler_free(b);
    }
}

/* Everything about one epoch split over one layout. */
static void check_split(const struct hspec *sp, uint64_t *rng)
{
    uint32_t world = 1 + (uint32_t)(test_rand(rng) % 24);
    uint32_t layout[32];
    random_layout(layout, world, sp->H, rng);
    int drop = (int)(test_rand(rng) % 2);
    uint64_t n = sp->n, L = n;
    uint64_t q = drop ? L / world : (L + world - 1) / world;
    cxlp_sampler *s0 = hmake(sp, world, 0, layout, drop);
    /* the epoch order is a permutation */
    uint64_t *G = malloc((n ? n : 1) * sizeof *G);
    CHECK(G);
    for (uint64_t p = 0; p < n; p++)
        CHECK_OK(cxlp_sampler_epoch_at(s0, p, &G[p]));
    CHECK(is_perm(G, n));
    uint32_t *hof = hosts_of(s0, n);
    /* blocks by weight: largest remainder, samples as host_share says */
    uint64_t M = n ? (n - 1) / MINU(sp->S, n) + 1 : 0, wsum = 0, bsum = 0, nsum = 0;
    for (uint32_t h = 0; h < sp->H; h++)
        wsum += sp->wt[h];
    uint64_t *cnt_h = calloc(sp->H, sizeof *cnt_h);
    for (uint64_t i = 0; i < n; i++)
        cnt_h[hof[i]]++;
    for (uint32_t h = 0; h < sp->H; h++) {
        uint64_t samples, blocks;
        CHECK_OK(cxlp_sampler_host_share(s0, h, &samples, &blocks));
        CHECK(samples == cnt_h[h]);
        /* |blocks - M w / sum| < 1 */
        double want = (double)M * (double)sp->wt[h] / (double)wsum;
        CHECK((double)blocks > want - 1 && (double)blocks < want + 1);
        if (!sp->wt[h])
            CHECK(blocks == 0);
        bsum += blocks;
        nsum += samples;
    }
    CHECK(bsum == M && nsum == n);
    /* host_block: each host's blocks, once each, and its stream reads them
     * window by window in that order */
    uint64_t *kof = malloc((M ? M : 1) * sizeof *kof);
    uint64_t Sb = n ? MINU(sp->S, n) : 1, Wb = MINU(sp->W, M ? M : 1);
    for (uint64_t blk = 0; blk < M; blk++)
        kof[blk] = UINT64_MAX;
    for (uint32_t h = 0; h < sp->H; h++) {
        uint64_t samples, blocks, blk;
        CHECK_OK(cxlp_sampler_host_share(s0, h, &samples, &blocks));
        for (uint64_t k = 0; k < blocks; k++) {
            CHECK_OK(cxlp_sampler_host_block(s0, h, k, &blk));
            CHECK(blk < M && kof[blk] == UINT64_MAX && hof[blk * Sb] == h);
            kof[blk] = k;
        }
        CHECK_RC(cxlp_sampler_host_block(s0, h, blocks, &blk), CXLP_ERANGE);
    }
    uint64_t *lastw = calloc(sp->H, sizeof *lastw);
    for (uint64_t p = 0; p < n; p++) {
        uint32_t h = hof[G[p]];
        uint64_t w = kof[G[p] / Sb] / Wb;
        CHECK(w >= lastw[h]);
        lastw[h] = w;
    }
    free(lastw);
    free(kof);
    /* every rank: the per-rank count; next = at = a second sampler; its
     * reads counted by host_reads as by host_of against random memories */
    double mem[8];
    uint64_t cap[8];
    for (uint32_t h = 0; h < sp->H; h++) {
        mem[h] = (double)(test_rand(rng) % 12) / 10;
        double c = mem[h] * (double)M + 1e-9;
        cap[h] = c >= (double)M ? M : (uint64_t)c;
    }
    uint64_t **v = calloc(world, sizeof *v);
    for (uint32_t r = 0; r < world; r++) {
        cxlp_sampler *s = hmake(sp, world, r, layout, drop);
        CHECK(cxlp_sampler_len(s) == q);
        CHECK(drain(s, &v[r], rng) == q);
        cxlp_sampler *t = hmake(sp, world, r, layout, drop);
        for (uint64_t j = 0; j < q; j += 1 + test_rand(rng) % 3) {
            uint64_t id;
            CHECK_OK(cxlp_sampler_at(t, j, &id));
            CHECK(id == v[r][j]);
        }
        uint64_t id;
        CHECK_RC(cxlp_sampler_at(t, q, &id), CXLP_ERANGE);
        uint64_t want3[3] = {0, 0, 0}, got3[3];
        for (uint64_t j = 0; j < q; j++) {
            uint32_t h;
            uint64_t idx;
            CHECK_OK(cxlp_sampler_host_of(t, v[r][j], &h, &idx));
            want3[idx >= cap[h] ? 2 : h == layout[r] ? 0 : 1]++;
        }
        CHECK_OK(cxlp_sampler_host_reads(t, mem, got3));
        CHECK(memcmp(want3, got3, sizeof got3) == 0);
        cxlp_sampler_free(s);
        cxlp_sampler_free(t);
    }
    /* round j: the ranks read exactly positions [j*world, (j+1)*world) mod
     * L, and each host's ranks min(its positions, its ranks) of their own */
    uint64_t *ranks_on = calloc(sp->H, sizeof *ranks_on), *pos_of = calloc(sp->H, sizeof *pos_of);
    for (uint32_t r = 0; r < world; r++)
        ranks_on[layout[r]]++;
    uint64_t *want = malloc(world * sizeof *want), *got = malloc(world * sizeof *got);
    uint64_t *own = calloc(world, sizeof *own);
    for (uint64_t j = 0; j < q; j++) {
        memset(pos_of, 0, sp->H * sizeof *pos_of);
        for (uint32_t i = 0; i < world; i++) {
            want[i] = G[(j * world + i) % L];
            pos_of[hof[want[i]]]++;
        }
        uint64_t local = 0, best = 0;
        for (uint32_t r = 0; r < world; r++) {
            got[r] = v[r][j];
            local += hof[got[r]] == layout[r];
            own[r] += hof[got[r]] == layout[r];
        }
        for (uint32_t h = 0; h < sp->H; h++)
            best += MINU(pos_of[h], ranks_on[h]);
        CHECK(local == best);
        qsort(want, world, sizeof *want, cmp_u64);
        qsort(got, world, sizeof *got, cmp_u64);
        CHECK(memcmp(want, got, world * sizeof *want) == 0);
    }
    /* the ranks of one host share its blocks evenly (the rotation is a
     * hash: within 4 sqrt(q) + 4, more than 5 standard deviations) */
    for (uint32_t a = 0; a < world; a++)
        for (uint32_t b = 0; b < world; b++)
            if (layout[a] == layout[b] && own[a] > own[b])
                CHECK((double)(own[a] - own[b]) <= 4 * sqrt((double)q) + 4);
    free(own);
    free(want);
    free(got);
    free(ranks_on);
    free(pos_of);
    for (uint32_t r = 0; r < world; r++)
        free(v[r]);
    free(v);
    free(cnt_h);
    free(hof);
    free(G);
    cxlp_sampler_free(s0);
}

/* Exact resume at a random cut, then elastic resume into another world and
 * layout: the ids read before and after are the epoch, nothing repeated
 * (drop_last) or missing (padding). */
static void check_resume(const struct hspec *sp, uint64_t *rng)
{
    uint32_t w1 = 1 + (uint32_t)(test_rand(rng) % 12), w2 = 1 + (uint32_t)(test_rand(rng) % 12);
    uint32_t l1[16], l2[16];
    random_layout(l1, w1, sp->H, rng);
    random_layout(l2, w2, sp->H, rng);
    int drop = (int)(test_rand(rng) % 2);
    uint64_t L = sp->n;
    uint64_t q1 = drop ? L / w1 : (L + w1 - 1) / w1;
    uint64_t cut = q1 ? test_rand(rng) % (q1 + 1) : 0;
    if (cut * w1 > L)
        cut = L / w1; /* the state is exact while consumed <= L */
    uint64_t *seen = calloc(L ? L : 1, sizeof *seen), reads = 0;
    struct cxlp_sampler_state st;
    for (uint32_t r = 0; r < w1; r++) {
        cxlp_sampler *a = hmake(sp, w1, r, l1, drop);
        uint64_t *full, k = drain(a, &full, rng);
        CHECK(k == q1);
        cxlp_sampler *b = hmake(sp, w1, r, l1, drop);
        uint64_t buf[64];
        for (uint64_t d = 0; d < cut;) {
            size_t got = cxlp_sampler_next(b, buf, (size_t)MINU(64, cut - d));
            CHECK(got > 0);
            for (size_t i = 0; i < got; i++) {
                CHECK(buf[i] == full[d + i]);
                seen[buf[i]]++;
                reads++;
            }
            d += got;
        }
        CHECK_OK(cxlp_sampler_state(b, &st));
        CHECK(st.consumed == MINU(cut * w1, L));
        /* exact: the same rank continues where it was */
        cxlp_sampler *c = hmake(sp, w1, r, l1, drop);
        CHECK_OK(cxlp_sampler_restore(c, &st));
        uint64_t *rest, kr = drain(c, &rest, rng);
        CHECK(kr == q1 - cut);
        CHECK(memcmp(rest, full + cut, kr * sizeof *rest) == 0);
        /* host_reads counts from the restored point: as many as are left */
        double all[8] = {1, 1, 1, 1, 1, 1, 1, 1};
        uint64_t c3[3];
        cxlp_sampler *d = hmake(sp, w1, r, l1, drop);
        CHECK_OK(cxlp_sampler_restore(d, &st));
        CHECK_OK(cxlp_sampler_host_reads(d, all, c3));
        CHECK(c3[0] + c3[1] + c3[2] == kr && c3[2] == 0);
        cxlp_sampler_free(d);
        free(rest);
        free(full);
        cxlp_sampler_free(a);
        cxlp_sampler_free(b);
        cxlp_sampler_free(c);
    }
    /* elastic: w2 ranks of layout l2 read the rest */
    uint64_t rest_len = L - st.consumed;
    uint64_t q2 = drop ? rest_len / w2 : (rest_len + w2 - 1) / w2;
    for (uint32_t r = 0; r < w2; r++) {
        cxlp_sampler *c = hmake(sp, w2, r, l2, drop);
        CHECK_OK(cxlp_sampler_restore(c, &st));
        uint64_t *rest, kr = drain(c, &rest, rng);
        CHECK(kr == q2);
        for (uint64_t i = 0; i < kr; i++) {
            seen[rest[i]]++;
            reads++;
        }
        free(rest);
        cxlp_sampler_free(c);
    }
    uint64_t once = 0, more = 0;
    for (uint64_t i = 0; i < L; i++) {
        once += seen[i] >= 1;
        more += seen[i] > 1;
    }
    if (drop) {
        CHECK(more == 0);
        CHECK(reads == st.consumed + q2 * w2);
    } else {
        CHECK(once == L);
    }
    free(seen);
}

static void check_epochs_and_fingerprint(uint64_t *rng)
{
    struct hspec sp = {.n = 100000, .seed = test_rand(rng), .S = 100, .W = 4, .H = 4,
                       .wt = {1, 2, 3, 4}};
    uint32_t l1[4] = {0, 1, 2, 3}, l2[7] = {3, 3, 2, 1, 0, 0, 1};
    cxlp_sampler *a = hmake(&sp, 4, 0, l1, 0), *b = hmake(&sp, 7, 5, l2, 1);
    struct cxlp_sampler_state sa, sb;
    CHECK_OK(cxlp_sampler_state(a, &sa));
    CHECK_OK(cxlp_sampler_state(b, &sb));
    CHECK(sa.fingerprint == sb.fingerprint);
    /* the assignment moves with the epoch: most blocks change host */
    uint64_t moved = 0;
    CHECK_OK(cxlp_sampler_set_epoch(b, 1));
    for (uint64_t blk = 0; blk < 1000; blk++) {
        uint32_t ha, hb;
        uint64_t ia, ib;
        CHECK_OK(cxlp_sampler_host_of(a, blk * 100, &ha, &ia));
        CHECK_OK(cxlp_sampler_host_of(b, blk * 100, &hb, &ib));
        moved += ha != hb;
    }
    /* 1 - sum (w/10)^2 = 0.7 of the blocks change host */
    CHECK(moved > 600 && moved < 800);
    cxlp_sampler_free(b);
    /* weights scaled: the same order; other weights: another */
    struct hspec s2 = sp;
    for (int i = 0; i < 4; i++)
        s2.wt[i] *= 3;
    b = hmake(&s2, 4, 0, l1, 0);
    CHECK_OK(cxlp_sampler_state(b, &sb));
    CHECK(sb.fingerprint == sa.fingerprint);
    for (uint64_t p = 0; p < 1000; p++) {
        uint64_t x, y;
        CHECK_OK(cxlp_sampler_epoch_at(a, p, &x));
        CHECK_OK(cxlp_sampler_epoch_at(b, p, &y));
        CHECK(x == y);
    }
    cxlp_sampler_free(b);
    s2.wt[3] = 5;
    b = hmake(&s2, 4, 0, l1, 0);
    CHECK_OK(cxlp_sampler_state(b, &sb));
    CHECK(sb.fingerprint != sa.fingerprint);
    CHECK_RC(cxlp_sampler_restore(b, &sa), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(b), "fingerprint"));
    cxlp_sampler_free(b);
    /* each block's samples stay together on one host */
    for (uint64_t i = 0; i < 5000; i++) {
        uint32_t h0, h1;
        uint64_t i0, i1;
        CHECK_OK(cxlp_sampler_host_of(a, i, &h0, &i0));
        CHECK_OK(cxlp_sampler_host_of(a, i / 100 * 100, &h1, &i1));
        CHECK(h0 == h1 && i0 == i1);
    }
    cxlp_sampler_free(a);
    /* keep: the same deal every epoch (and another fingerprint), the
     * hosts' orders still new each epoch */
    sp.keep = 1;
    a = hmake(&sp, 4, 0, l1, 0);
    b = hmake(&sp, 4, 0, l1, 0);
    CHECK_OK(cxlp_sampler_state(a, &sb));
    CHECK(sb.fingerprint != sa.fingerprint);
    CHECK_OK(cxlp_sampler_set_epoch(b, 3));
    uint64_t same_pos = 0;
    for (uint64_t i = 0; i < sp.n; i++) {
        uint32_t ha, hb;
        uint64_t ia, ib;
        CHECK_OK(cxlp_sampler_host_of(a, i, &ha, &ia));
        CHECK_OK(cxlp_sampler_host_of(b, i, &hb, &ib));
        CHECK(ha == hb && ia == ib);
        uint64_t x, y;
        CHECK_OK(cxlp_sampler_epoch_at(a, i, &x));
        CHECK_OK(cxlp_sampler_epoch_at(b, i, &y));
        same_pos += x == y;
    }
    CHECK(same_pos < sp.n / 100);
    /* the first block each host reads differs between epochs */
    uint64_t first_a[4] = {0}, first_b[4] = {0}, seen_a = 0, seen_b = 0;
    for (uint64_t p = 0; p < sp.n && (seen_a != 15 || seen_b != 15); p++) {
        uint64_t x, y, ix;
        uint32_t hx;
        CHECK_OK(cxlp_sampler_epoch_at(a, p, &x));
        CHECK_OK(cxlp_sampler_host_of(a, x, &hx, &ix));
        if (!(seen_a >> hx & 1))
            first_a[hx] = x / 100, seen_a |= 1u << hx;
        CHECK_OK(cxlp_sampler_epoch_at(b, p, &y));
        CHECK_OK(cxlp_sampler_host_of(b, y, &hx, &ix));
        if (!(seen_b >> hx & 1))
            first_b[hx] = y / 100, seen_b |= 1u << hx;
    }
    CHECK(memcmp(first_a, first_b, sizeof first_a) != 0);
    cxlp_sampler_free(a);
    cxlp_sampler_free(b);
}

static void check_errors(void)
{
    uint64_t wt[3] = {1, 1, 1}, zero[2] = {0, 0}, big[2] = {UINT64_C(1) << 63, 1};
    uint32_t lay[2] = {0, 3};
    struct cxlp_sampler_config c = {.n = 100, .world = 2, .shard_size = 10, .window = 1};
    cxlp_sampler *s = NULL;
    struct {
        struct cxlp_hosts h;
        const char *field;
    } bad[] = {
        {{.n_hosts = 0, .weight = wt}, "hosts.n_hosts"},
        {{.n_hosts = CXLP_HOSTS_MAX + 1, .weight = wt}, "hosts.n_hosts"},
        {{.n_hosts = 3, .weight = NULL}, "hosts.weight"},
        {{.n_hosts = 2, .weight = zero}, "hosts.weight"},
        {{.n_hosts = 2, .weight = big}, "hosts.weight"},
        {{.n_hosts = 3, .weight = wt, .rank_host = lay}, "hosts.rank_host[1]"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        CHECK_RC(cxlp_sampler_create_hosts(&c, &bad[i].h, &s), CXLP_EARG);
        CHECK(strstr(cxlp_errmsg(NULL), bad[i].field));
    }
    struct cxlp_hosts ok = {.n_hosts = 3, .weight = wt};
    CHECK_RC(cxlp_sampler_create_hosts(&c, NULL, &s), CXLP_EARG);
    struct cxlp_sampler_config c2 = c;
    c2.shard_size = 0;
    CHECK_RC(cxlp_sampler_create_hosts(&c2, &ok, &s), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cfg.shard_size"));
    c2 = c;
    c2.window = 0;
    CHECK_RC(cxlp_sampler_create_hosts(&c2, &ok, &s), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cfg.window"));
    c2 = c;
    c2.ramp = 1;
    CHECK_RC(cxlp_sampler_create_hosts(&c2, &ok, &s), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cfg.ramp"));
    c2 = c;
    c2.kind = CXLP_ORDER_HOSTS;
    CHECK_RC(cxlp_sampler_create(&c2, &s), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "cxlp_sampler_create_hosts"));
    /* host_of and host_share: other kinds and ranges */
    c2 = c;
    c2.kind = CXLP_ORDER_RANDOM;
    CHECK_OK(cxlp_sampler_create(&c2, &s));
    uint32_t h;
    uint64_t x, y;
    CHECK_RC(cxlp_sampler_host_of(s, 0, &h, &x), CXLP_EARG);
    CHECK_RC(cxlp_sampler_host_share(s, 0, &x, &y), CXLP_EARG);
    CHECK_RC(cxlp_sampler_host_block(s, 0, 0, &x), CXLP_EARG);
    double mem[3] = {1, 1, 1};
    uint64_t c3[3];
    CHECK_RC(cxlp_sampler_host_reads(s, mem, c3), CXLP_EARG);
    cxlp_sampler_free(s);
    CHECK_OK(cxlp_sampler_create_hosts(&c, &ok, &s));
    CHECK_RC(cxlp_sampler_host_of(s, 100, &h, &x), CXLP_ERANGE);
    CHECK_RC(cxlp_sampler_host_share(s, 3, &x, &y), CXLP_ERANGE);
    mem[1] = -0.5;
    CHECK_RC(cxlp_sampler_host_reads(s, mem, c3), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "memory[1]"));
    mem[1] = NAN;
    CHECK_RC(cxlp_sampler_host_reads(s, mem, c3), CXLP_EARG);
    CHECK(strcmp(cxlp_order_name(CXLP_ORDER_HOSTS), "hosts") == 0);
    CHECK(cxlp_order_parse("hosts") == CXLP_ORDER_HOSTS);
    cxlp_sampler_free(s);
}

/* Hostile sizes (n up to 2^63, shard sizes and windows up to 2^64 - 1,
 * weights up to 2^62): create succeeds or fails with CXLP_EARG; a created
 * sampler gives the per-rank length of every order, in-range ids from next
 * and at (the same), hosts below H. Under UBSan this checks the arithmetic. */
static void check_hostile(uint64_t *rng, int trials)
{
    int created = 0;
    for (int t = 0; t < trials; t++) {
        uint64_t pick = test_rand(rng) % 5;
        uint64_t n = pick == 0 ? test_rand(rng) % 3
                     : pick == 1 ? (UINT64_C(1) << 63) - test_rand(rng) % 3
                     : pick == 2 ? test_rand(rng) >> (test_rand(rng) % 64)
                     : pick == 3 ? UINT64_C(1) << 63
                                 : test_rand(rng) % 100000;
        uint64_t S = test_rand(rng) % 3 == 0 ? test_rand(rng) : 1 + (test_rand(rng) >> (test_rand(rng) % 64));
        uint64_t W = test_rand(rng) % 3 == 0 ? UINT64_MAX : 1 + (test_rand(rng) >> (test_rand(rng) % 64));
        uint32_t H = 1 + (uint32_t)(test_rand(rng) % 16), world = 1 + (uint32_t)(test_rand(rng) % 64);
        uint64_t wt[16];
        for (uint32_t h = 0; h < H; h++) {
            uint64_t k = test_rand(rng) % 4;
            wt[h] = k == 0 ? 0 : k == 1 ? 1 : k == 2 ? UINT64_C(1) << 62 : test_rand(rng) >> 8;
        }
        uint32_t lay[64];
        for (uint32_t r = 0; r < world; r++)
            lay[r] = (uint32_t)(test_rand(rng) % H);
        uint32_t rank = (uint32_t)(test_rand(rng) % world);
        int drop = (int)(test_rand(rng) % 2);
        struct cxlp_sampler_config c = {.n = n, .seed = test_rand(rng),
                                        .epoch = test_rand(rng), .world = world, .rank = rank,
                                        .drop_last = drop, .shard_size = S, .window = W};
        struct cxlp_hosts hh = {.n_hosts = H, .weight = wt, .rank_host = lay,
                                .keep = (int)(test_rand(rng) % 2)};
        cxlp_sampler *s = NULL;
        int rc = cxlp_sampler_create_hosts(&c, &hh, &s);
        if (rc) {
            CHECK(rc == CXLP_EARG);
            continue;
        }
        created++;
        uint64_t q = drop ? n / world : n / world + (n % world != 0);
        CHECK(cxlp_sampler_len(s) == q);
        uint64_t buf[64];
        size_t k = cxlp_sampler_next(s, buf, 64);
        CHECK(k == MINU(q, 64));
        for (size_t i = 0; i < k; i++) {
            uint64_t id;
            uint32_t h;
            uint64_t idx, samples, blocks;
            CHECK(buf[i] < n);
            CHECK_OK(cxlp_sampler_at(s, i, &id));
            CHECK(id == buf[i]);
            CHECK_OK(cxlp_sampler_host_of(s, id, &h, &idx));
            CHECK(h < H && wt[h] != 0);
            CHECK_OK(cxlp_sampler_host_share(s, h, &samples, &blocks));
            CHECK(idx < blocks && samples <= n);
        }
        if (q) {
            uint64_t j = test_rand(rng) % q, id, p = test_rand(rng) % n;
            CHECK_OK(cxlp_sampler_at(s, j, &id));
            CHECK(id < n);
            CHECK_OK(cxlp_sampler_epoch_at(s, p, &id));
            CHECK(id < n);
        }
        struct cxlp_sampler_state st;
        CHECK_OK(cxlp_sampler_state(s, &st));
        st.consumed = n ? test_rand(rng) % (n + 1) : 0;
        CHECK_OK(cxlp_sampler_restore(s, &st));
        k = cxlp_sampler_next(s, buf, 8);
        for (size_t i = 0; i < k; i++)
            CHECK(buf[i] < n);
        cxlp_sampler_free(s);
    }
    printf("hostile: %d of %d created\n", created, trials);
    CHECK(created > trials / 4);
}

int main(void)
{
    uint64_t seed = test_seed(), rng = seed;
    int trials = test_sanitized() ? 80 : 400;
    for (int t = 0; t < trials; t++) {
        check_one_host(&rng);
        struct hspec sp;
        random_hspec(&sp, &rng);
        check_split(&sp, &rng);
        check_resume(&sp, &rng);
    }
    check_epochs_and_fingerprint(&rng);
    check_hostile(&rng, test_sanitized() ? 3000 : 20000);
    check_errors();
    printf("ok\n");
    return 0;
}
