/*
 * bench_sample.c - speed, memory and shuffle quality of the sampler orders.
 *
 *   bench_sample [--quick]
 *
 * Speed: indices per second on one thread from cxlp_sampler_next in batches
 * of 4096 (the gather engine's path), for the full permutation at several n
 * and for the other orders.
 * Memory: VmRSS / VmHWM of this process around a sampler over n = 10^12
 * that draws 10^8 indices and 10^6 random-access positions.
 * Quality, over n = 2^22 ids stored in shards of 4096 (1024 shards) and
 * batches of 256, for sequential, block at several W, and full orders:
 *   shards/batch  mean number of distinct shards in a batch (higher mixes
 *                 better; the full permutation gives about 227, block <= W);
 *   spearman      rank correlation of output position vs storage order
 *                 (0 for a good shuffle, 1 for sequential);
 *   chi2          Pearson chi-square of the 32 x 32 contingency table of
 *                 (storage bucket of the id, position bucket in the epoch),
 *                 df = 31^2 = 961; under a uniformly random permutation each
 *                 id is equally likely at every position, and the order
 *                 passes when chi2 < the 0.1% critical value (Wilson-Hilferty
 *                 approximation, about 1102). The full order is tested over
 *                 several seeds and the pass count printed.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cxlpool.h"
#include "order_quality.h"

#define BATCH 4096

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static long status_kib(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    size_t fl = strlen(field);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, field, fl) == 0 && line[fl] == ':')
            v = strtol(line + fl + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

static cxlp_sampler *mk(int kind, uint64_t n, uint64_t seed, uint64_t S, uint64_t W)
{
    struct cxlp_sampler_config c = {.kind = kind, .n = n, .seed = seed, .shard_size = S,
                                    .window = W, .drop_last = 1};
    cxlp_sampler *s;
    if (cxlp_sampler_create(&c, &s)) {
        fprintf(stderr, "create: %s\n", cxlp_errmsg(NULL));
        exit(1);
    }
    return s;
}

/* Draws up to `want` indices; returns indices per wall second, and per
 * second of this thread's CPU time in *cpu_rate (the per-core figure on a
 * shared machine, where wall time includes time spent preempted). */
static double rate2(cxlp_sampler *s, uint64_t want, uint64_t *sink, double *cpu_rate)
{
    static uint64_t buf[BATCH];
    uint64_t got = 0, x = 0;
    double c0 = cpu_now(), t0 = now();
    while (got < want) {
        size_t k = cxlp_sampler_next(s, buf, BATCH);
        if (!k)
            break;
        for (size_t i = 0; i < k; i += 64)
            x ^= buf[i];
        got += k;
    }
    double dt = now() - t0, dc = cpu_now() - c0;
    *sink ^= x;
    if (cpu_rate)
        *cpu_rate = (double)got / dc;
    return (double)got / dt;
}

static double rate(cxlp_sampler *s, uint64_t want, uint64_t *sink)
{
    return rate2(s, want, sink, NULL);
}

/* Best of three runs, both figures, printed as one row. */
static void row(const char *name, cxlp_sampler *s, uint64_t want, int reset, uint64_t *sink)
{
    double best = 0, bestc = 0, c;
    for (int rep = 0; rep < 3; rep++) {
        if (reset)
            cxlp_sampler_set_epoch(s, (uint64_t)rep);
        double r = rate2(s, want, sink, &c);
        best = r > best ? r : best;
        bestc = c > bestc ? c : bestc;
    }
    printf("  %-36s %12.1f %12.1f\n", name, best / 1e6, bestc / 1e6);
}

static void speed(uint64_t want)
{
    uint64_t sink = 0;
    printf("speed: one thread, cxlp_sampler_next in batches of %d, best of 3\n", BATCH);
    printf("  %-36s %12s %12s\n", "order", "M idx/s wall", "M idx/s cpu");
    const uint64_t ns[] = {UINT64_C(1000000), UINT64_C(1000000000), UINT64_C(1000000000000),
                           UINT64_C(1) << 63};
    const char *names[] = {"10^6", "10^9", "10^12", "2^63"};
    char name[80];
    for (int i = 0; i < 4; i++) {
        cxlp_sampler *s = mk(CXLP_ORDER_RANDOM, ns[i], 42, 0, 0);
        snprintf(name, sizeof name, "random, n = %s", names[i]);
        row(name, s, ns[i] < want ? ns[i] : want, 1, &sink);
        cxlp_sampler_free(s);
    }
    {
        struct cxlp_sampler_config c = {.kind = CXLP_ORDER_RANDOM, .n = UINT64_C(1000000000000),
                                        .seed = 42, .world = 64, .rank = 17};
        cxlp_sampler *s;
        cxlp_sampler_create(&c, &s);
        row("random, n = 10^12, rank 17 of 64", s, want, 0, &sink);
        cxlp_sampler_free(s);
    }
    const uint64_t Ws[] = {1, 16, 256};
    for (int i = 0; i < 3; i++) {
        cxlp_sampler *s = mk(CXLP_ORDER_BLOCK, UINT64_C(1000000000000), 42, 4096, Ws[i]);
        snprintf(name, sizeof name, "block, n = 10^12, S 4096, W %" PRIu64, Ws[i]);
        row(name, s, want, 0, &sink);
        cxlp_sampler_free(s);
    }
    /* the hosts order: weights unequal to the ranks; rank 1 is on host 0,
     * whose share is below its ranks' reads, so its draws cross often */
    const uint32_t Hs[] = {4, 64};
    for (int i = 0; i < 2; i++) {
        uint32_t H = Hs[i], world = 2 * H, lay[128];
        uint64_t wt[64];
        for (uint32_t h = 0; h < H; h++)
            wt[h] = 1 + h % 3;
        for (uint32_t r = 0; r < world; r++)
            lay[r] = r / 2;
        struct cxlp_sampler_config c = {.n = UINT64_C(1000000000000), .seed = 42,
                                        .shard_size = 4096, .window = 256, .world = world,
                                        .rank = 1};
        struct cxlp_hosts hh = {.n_hosts = H, .weight = wt, .rank_host = lay};
        cxlp_sampler *s;
        if (cxlp_sampler_create_hosts(&c, &hh, &s)) {
            fprintf(stderr, "create: %s\n", cxlp_errmsg(NULL));
            exit(1);
        }
        snprintf(name, sizeof name, "hosts, 10^12, %" PRIu32 " hosts, rank 1 of %" PRIu32, H,
                 world);
        row(name, s, want / 10, 0, &sink);
        cxlp_sampler_free(s);
    }
    {
        struct cxlp_blend_source src[3] = {{UINT64_C(1) << 30, 5}, {UINT64_C(1) << 28, 3},
                                           {UINT64_C(1) << 20, 2}};
        struct cxlp_sampler_config c = {.n = UINT64_C(1) << 40, .seed = 42};
        cxlp_sampler *s;
        cxlp_sampler_create_blend(&c, src, 3, 1, &s);
        row("blend, 3 sources 5:3:2", s, want / 10, 0, &sink);
        cxlp_sampler_free(s);
    }
    {
        uint64_t n = 1000000;
        double *d = malloc(n * sizeof *d);
        for (uint64_t i = 0; i < n; i++)
            d[i] = (double)((i * 2654435761u) % 1000);
        struct cxlp_curriculum cur = {.n = n, .difficulty = d, .pacing = CXLP_PACE_ROOT,
                                      .start = 0.1, .total = 100 * n};
        struct cxlp_sampler_config c = {.n = 100 * n, .seed = 42};
        cxlp_sampler *s;
        cxlp_sampler_create_curriculum(&c, &cur, &s);
        row("curriculum, n = 10^6, root", s, want / 10, 0, &sink);
        cxlp_sampler_free(s);
        free(d);
    }
    cxlp_sampler *s = mk(CXLP_ORDER_SEQUENTIAL, UINT64_C(1000000000000), 42, 0, 0);
    row("sequential (loop overhead)", s, want, 0, &sink);
    cxlp_sampler_free(s);
    printf("  (checksum %" PRIx64 ")\n\n", sink);
}

static void memory(uint64_t want)
{
    uint64_t sink = 0;
    long rss0 = status_kib("VmRSS"), hwm0 = status_kib("VmHWM");
    cxlp_sampler *s = mk(CXLP_ORDER_RANDOM, UINT64_C(1000000000000), 7, 0, 0);
    rate(s, want, &sink);
    uint64_t id, rng = 1;
    for (int i = 0; i < 1000000; i++) {
        rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
        cxlp_sampler_epoch_at(s, (rng >> 1) % UINT64_C(1000000000000), &id);
        sink ^= id;
    }
    long rss1 = status_kib("VmRSS"), hwm1 = status_kib("VmHWM");
    printf("memory: random order over n = 10^12, %" PRIu64 " indices drawn + 10^6 random "
           "positions\n", want);
    printf("  VmRSS before %ld KiB, after %ld KiB (+%ld); VmHWM before %ld KiB, after %ld KiB"
           " (+%ld)\n\n", rss0, rss1, rss1 - rss0, hwm0, hwm1, hwm1 - hwm0);
    cxlp_sampler_free(s);
    if (sink == 42)
        printf(" ");
}

/* Draws the whole epoch of s into v and measures it (order_quality.c, the
 * code `cxlpool order --quality` runs too). */
static struct order_quality measure(cxlp_sampler *s, uint64_t n, uint64_t S, uint64_t B,
                                    uint64_t *v)
{
    struct order_quality q;
    uint64_t got = 0, k;
    while ((k = cxlp_sampler_next(s, v + got, BATCH)) > 0)
        got += k;
    if (got != n) {
        fprintf(stderr, "quality: drew %" PRIu64 " of %" PRIu64 "\n", got, n);
        exit(1);
    }
    if (order_quality(v, n, S, B, &q)) {
        fprintf(stderr, "quality: out of memory\n");
        exit(1);
    }
    return q;
}

static void quality(int seeds)
{
    const uint64_t n = UINT64_C(1) << 22, S = 4096, B = 256;
    uint64_t *v = malloc(n * sizeof *v);
    double crit = order_chi2_crit(31.0 * 31.0, 3.0902);
    printf("quality: n = 2^22 ids, shards of %" PRIu64 " (1024 shards), batches of %" PRIu64
           ", chi2 df 961, pass < %.0f (p = 0.001)\n", S, B, crit);
    printf("  %-16s %14s %10s %14s %6s\n", "order", "shards/batch", "spearman", "chi2", "pass");
    struct { int kind; uint64_t W; const char *name; } rows[] = {
        {CXLP_ORDER_SEQUENTIAL, 0, "sequential"},
        {CXLP_ORDER_BLOCK, 1, "block W=1"},
        {CXLP_ORDER_BLOCK, 4, "block W=4"},
        {CXLP_ORDER_BLOCK, 16, "block W=16"},
        {CXLP_ORDER_BLOCK, 64, "block W=64"},
        {CXLP_ORDER_BLOCK, 256, "block W=256"},
        {CXLP_ORDER_BLOCK, 1024, "block W=1024"},
        {CXLP_ORDER_RANDOM, 0, "full"},
    };
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        int reps = rows[r].kind == CXLP_ORDER_RANDOM ? seeds : 1, pass = 0;
        struct order_quality sum = {0};
        double worst = 0;
        for (int k = 0; k < reps; k++) {
            cxlp_sampler *s = mk(rows[r].kind, n, 1000 + (uint64_t)k, S, rows[r].W);
            struct order_quality q = measure(s, n, S, B, v);
            cxlp_sampler_free(s);
            sum.shards_per_batch += q.shards_per_batch / reps;
            sum.spearman += q.spearman / reps;
            sum.chi2 += q.chi2 / reps;
            pass += q.chi2 < crit;
            worst = q.chi2 > worst ? q.chi2 : worst;
        }
        char verdict[32];
        snprintf(verdict, sizeof verdict, "%d/%d", pass, reps);
        printf("  %-16s %14.1f %10.4f %14.1f %6s", rows[r].name, sum.shards_per_batch,
               sum.spearman, sum.chi2, verdict);
        if (reps > 1)
            printf("   (mean of %d seeds; worst chi2 %.1f)", reps, worst);
        printf("\n");
    }
    printf("  expected for a uniform shuffle: shards/batch %.1f, spearman 0, chi2 about 961\n",
           1024.0 * (1 - pow(1 - 1.0 / 1024, (double)B)));
    free(v);
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
    uint64_t want = quick ? UINT64_C(20000000) : UINT64_C(200000000);
    printf("libcxlpool %s sampler bench%s\n\n", cxlp_version(), quick ? " (--quick)" : "");
    memory(quick ? UINT64_C(10000000) : UINT64_C(100000000));
    speed(want);
    quality(quick ? 4 : 20);
    return 0;
}
