/*
 * cli_cmd_bench.c - `cxlpool bench gather`: what the pool read path costs
 * against the best a process could do with a private copy of the data.
 *
 * Both paths gather the same records in the same seeded random order into
 * per-thread batch buffers: the pool path through cxlp_store_read + memcpy,
 * the baseline by memcpy from a private anonymous mapping holding a copy of
 * the dataset, addressed the cheapest way there is: i * record_size for
 * fixed-size records, a precomputed offset array for variable-size ones. The
 * mapping asks for transparent huge pages (MADV_HUGEPAGE, as NumPy does for
 * large arrays) unless --no-thp: the strongest plain gather a user has. Each round
 * runs both, alternating which goes first, so machine noise (other tenants,
 * frequency changes) hits both; throughputs are medians over the rounds and
 * the ratio is the median of the per-round ratios (each round's two passes
 * run back to back, so they see the same noise). Both
 * buffers and mappings are touched in an untimed warm-up pass, so neither
 * pays page faults in the timed rounds.
 *
 * Thread t gathers batches t, t+T, t+2T, ... of the order: its own slice,
 * its own batch buffer, no sharing, started together on a barrier.
 *
 * Rejected: timing each record (clock reads would dominate small records);
 * reading the baseline from a file mapping (that would measure the page
 * cache, not memory).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "cli.h"

#define MAX_THREADS 64
#define MAX_ROUNDS 101

struct bench {
    cxlp_store *s;
    const uint8_t *plain;     /* private copy: record i at plain[off[i]] */
    const uint64_t *off;      /* n+1 offsets */
    uint64_t rec_size;        /* fixed-size records: plain[i * rec_size]; else 0 */
    const uint64_t *order;    /* n_batches * batch record ids */
    uint64_t batch, n_batches, max_batch_bytes;
    int threads;
    int use_pool;
    int err;                  /* first read error of a pass, 0 if none */
    pthread_barrier_t start;
};

struct worker {
    struct bench *b;
    int t;
    uint8_t *buf;
    pthread_t tid;
    double t0, t1;            /* this thread's gather, after the barrier */
    uint64_t sink;            /* bytes of each batch summed: keeps the copies */
    int err;                  /* read error, 0 if none */
};

static void *gather(void *arg)
{
    struct worker *w = arg;
    struct bench *b = w->b;
    uint64_t acc = 0;
    pthread_barrier_wait(&b->start);
    w->t0 = cli_now_sec();
    for (uint64_t k = (uint64_t)w->t; k < b->n_batches; k += (uint64_t)b->threads) {
        const uint64_t *ids = b->order + k * b->batch;
        uint64_t pos = 0;
        if (b->use_pool) {
            for (uint64_t j = 0; j < b->batch; j++) {
                struct cxlp_view v;
                int rc = cxlp_store_read(b->s, ids[j], &v);
                if (rc) {
                    w->err = rc;
                    return NULL;
                }
                memcpy(w->buf + pos, v.data, v.len);
                pos += v.len;
            }
        } else if (b->rec_size) {
            /* Fixed size: the address is arithmetic, as in any array. */
            for (uint64_t j = 0; j < b->batch; j++) {
                memcpy(w->buf + pos, b->plain + ids[j] * b->rec_size, b->rec_size);
                pos += b->rec_size;
            }
        } else {
            for (uint64_t j = 0; j < b->batch; j++) {
                uint64_t id = ids[j], len = b->off[id + 1] - b->off[id];
                memcpy(w->buf + pos, b->plain + b->off[id], len);
                pos += len;
            }
        }
        /* Consume the batch so the copies cannot be optimised away. */
        if (pos)
            acc += w->buf[pos - 1] + w->buf[pos / 2];
    }
    w->t1 = cli_now_sec();
    w->sink = acc;
    return NULL;
}

/* One timed pass with T threads; returns seconds (or -1 on a read error). */
static double run_pass(struct bench *b, struct worker *w, int use_pool)
{
    b->use_pool = use_pool;
    pthread_barrier_init(&b->start, NULL, (unsigned)b->threads + 1);
    for (int t = 0; t < b->threads; t++)
        pthread_create(&w[t].tid, NULL, gather, &w[t]);
    pthread_barrier_wait(&b->start);
    double t0 = 1e300, t1 = 0;
    for (int t = 0; t < b->threads; t++) {
        pthread_join(w[t].tid, NULL);
        t0 = w[t].t0 < t0 ? w[t].t0 : t0;
        t1 = w[t].t1 > t1 ? w[t].t1 : t1;
    }
    /* From the first thread's start to the last one's end: thread creation
     * and joining are not the gather. */
    double el = t1 - t0;
    pthread_barrier_destroy(&b->start);
    for (int t = 0; t < b->threads; t++)
        if (w[t].err) {
            b->err = w[t].err;
            return -1;
        }
    return el;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t splitmix(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int parse_threads(const char *s, int *v, int *n)
{
    *n = 0;
    while (*s) {
        char *end;
        errno = 0;
        long t = strtol(s, &end, 10);
        if (errno || end == s || t < 1 || t > MAX_THREADS || *n >= 16)
            return -1;
        v[(*n)++] = (int)t;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        s = end;
    }
    return *n ? 0 : -1;
}

struct result {
    int threads;
    double pool_s, plain_s;   /* median seconds per pass */
    double ratio;             /* median over rounds of plain_s / pool_s */
};

static int bench_gather(int argc, char **argv)
{
    static const struct option lo[] = {
        {"batch", required_argument, 0, 'b'},
        {"batches", required_argument, 0, 'n'},
        {"threads", required_argument, 0, 't'},
        {"rounds", required_argument, 0, 'r'},
        {"seed", required_argument, 0, 's'},
        {"json", no_argument, 0, 'j'},
        {"no-thp", no_argument, 0, 'H'},
        {"hugepages", no_argument, 0, 'P'},
        {0, 0, 0, 0},
    };
    int no_thp = 0, huge = 0;
    uint64_t batch = 32, n_batches = 0, rounds = 5, seed = 42;
    int tlist[16] = {1, 2}, nt = 2, json = 0, c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        switch (c) {
        case -2:
            return EXIT_USAGE;
        case 'b':
            if (cli_parse_u64(optarg, &batch) || !batch || batch > (1u << 20))
                return cli_usage_error("--batch: '%s' is not a count in 1..1048576", optarg);
            break;
        case 'n':
            if (cli_parse_u64(optarg, &n_batches) || !n_batches)
                return cli_usage_error("--batches: '%s' is not a positive count", optarg);
            break;
        case 't':
            if (parse_threads(optarg, tlist, &nt))
                return cli_usage_error("--threads: '%s' is not a list like 1,2,4 (1..%d)", optarg,
                                   MAX_THREADS);
            break;
        case 'r':
            if (cli_parse_u64(optarg, &rounds) || !rounds || rounds > MAX_ROUNDS)
                return cli_usage_error("--rounds: '%s' is not in 1..%d", optarg, MAX_ROUNDS);
            break;
        case 's':
            if (cli_parse_u64(optarg, &seed))
                return cli_usage_error("--seed: '%s' is not a number", optarg);
            break;
        case 'j':
            json = 1;
            break;
        case 'H':
            no_thp = 1;
            break;
        case 'P':
            huge = 1;
            break;
        }
    }
    if (!cli_npos_ok(argc, argv, 2, 2))
        return EXIT_USAGE;
    const char *spec = argv[optind], *name = argv[optind + 1];

    cxlp_pool *p;
    int ex = cli_open_pool(spec, 1, &p);
    if (ex)
        return ex;
    cxlp_store *s = NULL;
    uint8_t *plain = MAP_FAILED;
    uint64_t *off = NULL, *order = NULL, plain_bytes = 0;
    struct worker w[MAX_THREADS] = {0};
    struct result res[16] = {0};
    int rc = cxlp_store_open(p, name, &s);
    if (rc) {
        ex = cli_report_error(rc, p, name);
        goto out;
    }
    uint64_t n = cxlp_store_count(s);
    if (n == 0) {
        fprintf(stderr, "cxlpool: bench: dataset %s has no records\n", name);
        ex = EXIT_RUNTIME;
        goto out;
    }
    /* --hugepages: the dataset's pool pages become 2 MiB pages first (for
     * every process, and they stay so); the pool path is then measured on
     * the page size the THP baseline has. Best effort: say what happened. */
    const char *pool_pages = "as the pool has them";
    if (huge) {
        rc = cxlp_store_hugepages(s);
        pool_pages = rc ? "4 KiB (hugepages failed)" : "2 MiB (cxlp_store_hugepages)";
        if (rc)
            fprintf(stderr, "cxlpool: bench: --hugepages: %s\n", cxlp_errmsg(NULL));
    }

    /* The baseline: a private anonymous copy of every record, back to back. */
    off = malloc((n + 1) * sizeof *off);
    if (!off) {
        ex = cli_report_os(-ENOMEM, "record offsets");
        goto out;
    }
    off[0] = 0;
    uint64_t max_rec = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct cxlp_view v;
        rc = cxlp_store_read(s, i, &v);
        if (rc) {
            ex = cli_report_error(rc, s, name);
            goto out;
        }
        off[i + 1] = off[i] + v.len;
        max_rec = v.len > max_rec ? v.len : max_rec;
    }
    plain_bytes = off[n];
    plain = mmap(NULL, plain_bytes ? plain_bytes : 1, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (plain == MAP_FAILED) {
        ex = cli_report_os(-errno, "baseline copy (mmap)");
        goto out;
    }
    /* NumPy asks for transparent huge pages on large arrays; the baseline
     * does too, so it is the strongest plain gather a user would have. */
    if (!no_thp)
        madvise(plain, plain_bytes ? plain_bytes : 1, MADV_HUGEPAGE);
    for (uint64_t i = 0; i < n; i++) {
        struct cxlp_view v;
        cxlp_store_read(s, i, &v);
        memcpy(plain + off[i], v.data, v.len);
    }

    /* The order: a seeded permutation when one pass covers at most the
     * dataset (an epoch's shuffle), else uniform draws. Default size: the
     * whole dataset once, capped at 1 GiB of records per pass. */
    if (!n_batches) {
        uint64_t avg = plain_bytes / n ? plain_bytes / n : 1;
        uint64_t want = n < (1ULL << 30) / avg ? n : (1ULL << 30) / avg;
        n_batches = want / batch ? want / batch : 1;
    }
    uint64_t total;
    if (__builtin_mul_overflow(n_batches, batch, &total) || total > (1ULL << 32)) {
        ex = cli_usage_error("--batch x --batches is too large");
        goto out;
    }
    order = malloc(total * sizeof *order);
    if (!order) {
        ex = cli_report_os(-ENOMEM, "order");
        goto out;
    }
    uint64_t rng = seed;
    if (total <= n) {
        uint64_t *perm = malloc(n * sizeof *perm);
        if (!perm) {
            ex = cli_report_os(-ENOMEM, "permutation");
            goto out;
        }
        for (uint64_t i = 0; i < n; i++)
            perm[i] = i;
        for (uint64_t i = 0; i < total; i++) {
            uint64_t j = i + splitmix(&rng) % (n - i), t = perm[i];
            perm[i] = perm[j];
            perm[j] = t;
            order[i] = perm[i];
        }
        free(perm);
    } else {
        for (uint64_t i = 0; i < total; i++)
            order[i] = splitmix(&rng) % n;
    }
    uint64_t bytes = 0;
    for (uint64_t i = 0; i < total; i++)
        bytes += off[order[i] + 1] - off[order[i]];

    struct bench b = {0};
    b.s = s;
    b.plain = plain;
    b.off = off;
    b.rec_size = cxlp_store_schema(s)->fixed ? max_rec : 0;
    b.order = order;
    b.batch = batch;
    b.n_batches = n_batches;
    int maxt = 1;
    for (int i = 0; i < nt; i++)
        maxt = tlist[i] > maxt ? tlist[i] : maxt;
    /* Page-aligned batch buffers, as a loader's (pinned) batch slots are: a
     * malloc'd buffer 16 bytes past a page boundary makes every 4 KiB copy
     * from a page-aligned source pay 4K-aliasing stalls, which would skew
     * the comparison by the source's alignment rather than its path. */
    size_t bufsz = ((size_t)(max_rec * batch) + 4096) & ~(size_t)4095;
    for (int t = 0; t < maxt; t++) {
        w[t].b = &b;
        w[t].t = t;
        w[t].buf = aligned_alloc(4096, bufsz);
        if (!w[t].buf) {
            ex = cli_report_os(-ENOMEM, "batch buffer");
            goto out;
        }
        memset(w[t].buf, 0, bufsz);
    }

    /* Warm-up: both paths once with the most threads, untimed. */
    b.threads = maxt;
    if (run_pass(&b, w, 1) < 0 || run_pass(&b, w, 0) < 0) {
        ex = cli_report_error(b.err, s, name);
        goto out;
    }
    double tp[16][MAX_ROUNDS], tb[16][MAX_ROUNDS];
    for (uint64_t r = 0; r < rounds; r++) {
        for (int i = 0; i < nt; i++) {
            b.threads = tlist[i];
            int pool_first = (r + (uint64_t)i) % 2 == 0;
            double a = run_pass(&b, w, pool_first);
            double d = run_pass(&b, w, !pool_first);
            if (a < 0 || d < 0) {
                ex = cli_report_error(b.err, s, name);
                goto out;
            }
            tp[i][r] = pool_first ? a : d;
            tb[i][r] = pool_first ? d : a;
        }
    }
    for (int i = 0; i < nt; i++) {
        /* The ratio is the median of each round's pair (run back to back, so
         * they share that moment's noise), not a ratio of two medians. */
        double pr[MAX_ROUNDS];
        for (uint64_t r = 0; r < rounds; r++)
            pr[r] = tb[i][r] / tp[i][r];
        res[i].threads = tlist[i];
        res[i].ratio = median(pr, (int)rounds);
        res[i].pool_s = median(tp[i], (int)rounds);
        res[i].plain_s = median(tb[i], (int)rounds);
    }

    struct cxlp_pool_stat st;
    int have_st = cxlp_pool_stat(p, &st) == 0;
    const char *media = have_st ? cxlp_media_name(st.media) : "?";
    int emulated = have_st ? st.emulated : 0;
    if (json) {
        printf("{\"pool\": ");
        cli_json_str(stdout, spec);
        printf(", \"dataset\": ");
        cli_json_str(stdout, name);
        printf(", \"media\": \"%s\", \"emulated\": %s, \"records\": %" PRIu64
               ", \"batch\": %" PRIu64 ", \"batches\": %" PRIu64 ", \"records_per_pass\": %" PRIu64
               ", \"bytes_per_pass\": %" PRIu64 ", \"rounds\": %" PRIu64 ", \"seed\": %" PRIu64
               ", \"plain_thp\": %s, \"pool_pages\": \"%s\", \"results\": [",
               media, emulated ? "true" : "false", n, batch, n_batches, total, bytes, rounds,
               seed, no_thp ? "false" : "true", pool_pages);
        for (int i = 0; i < nt; i++)
            printf("%s{\"threads\": %d, \"pool_gb_s\": %.4f, \"pool_records_s\": %.1f"
                   ", \"plain_gb_s\": %.4f, \"plain_records_s\": %.1f, \"ratio\": %.4f}",
                   i ? ", " : "", res[i].threads, (double)bytes / res[i].pool_s / 1e9,
                   (double)total / res[i].pool_s, (double)bytes / res[i].plain_s / 1e9,
                   (double)total / res[i].plain_s, res[i].ratio);
        printf("]}\n");
    } else {
        char bb[32];
        printf("bench gather %s/%s (media %s%s): %" PRIu64 " records, batch %" PRIu64
               ", %" PRIu64 " batches = %" PRIu64 " records (%s) per pass, median of %" PRIu64
               " rounds, seed %" PRIu64 ", plain copy on %s pages, pool pages %s\n",
               spec, name, media, emulated ? ", emulated CXL" : "", n, batch, n_batches, total,
               cli_fmt_bytes(bytes, bb), rounds, seed, no_thp ? "4 KiB" : "THP (madvise)",
               pool_pages);
        printf("%7s %10s %14s %10s %14s %10s\n", "threads", "pool GB/s", "pool rec/s",
               "plain GB/s", "plain rec/s", "pool/plain");
        for (int i = 0; i < nt; i++)
            printf("%7d %10.2f %14.0f %10.2f %14.0f %9.1f%%\n", res[i].threads,
                   (double)bytes / res[i].pool_s / 1e9, (double)total / res[i].pool_s,
                   (double)bytes / res[i].plain_s / 1e9, (double)total / res[i].plain_s,
                   100.0 * res[i].ratio);
    }
    ex = EXIT_OKAY;
out:
    for (int t = 0; t < MAX_THREADS; t++)
        free(w[t].buf);
    free(order);
    free(off);
    if (plain != MAP_FAILED)
        munmap(plain, plain_bytes ? plain_bytes : 1);
    if (s)
        cxlp_store_close(s);
    cxlp_pool_close(p);
    return ex;
}

int cli_cmd_bench(int argc, char **argv)
{
    if (argc < 2 || argv[1][0] == '-')
        return cli_usage_error("which benchmark? (gather)");
    if (strcmp(argv[1], "gather"))
        return cli_usage_error("unknown benchmark '%s' (gather)", argv[1]);
    return bench_gather(argc - 1, argv + 1);
}
