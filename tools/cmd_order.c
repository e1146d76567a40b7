/*
 * cmd_order.c - `cxlpool order`: print or analyse the order a sampler gives,
 * for a dataset of a pool (its record count) or for a plain N.
 *
 *   --first K   the rank view's first K ids (what rank R reads, in order);
 *   --counts    per-rank counts for every rank, and what drop_last drops or
 *               padding repeats;
 *   --quality   shuffle-quality figures of the epoch order (order_quality.c,
 *               the bench's code): mean distinct shards per batch, Spearman
 *               rank correlation of output vs storage order, chi-square of
 *               position uniformity.
 * Without any of the three, --first 10.
 *   --ramp      epoch 0's windows grow from one shard (the block order)
 *   --stats     the hosts order (--kind hosts, implied): per epoch, each
 *               host's share, what its memory holds, and the predicted
 *               local, peer and home fractions of the reads, and what each
 *               host's memory must stage from a peer or the home (given
 *               --hosts, --weights, --memory, --ranks-per-host,
 *               --keep-blocks; see
 *               docs/sampling.md, "Hosts"), plus --quality's figures
 *   --auto      POOL NAME: the block order a loader's staging keeps up with,
 *               what window="auto" takes (cxlp_store_stage_order: staging
 *               units, runs by the home's probe, --runs and --budget to
 *               say otherwise), with the ramp (--no-ramp: without)
 *
 * The order is the library's (cxlp_sampler_*), so what this prints is
 * exactly what a loader with the same seed, epoch, world and rank reads.
 * Rejected: printing the whole order by default (N may be 10^12); a quality
 * check on a sample of positions (the chi-square and the per-batch shard
 * count need the order itself, so --quality is limited to N <= 2^26).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "order_quality.h"

#define QUALITY_MAX_N (UINT64_C(1) << 26)
#define COUNTS_MAX_WORLD 4096
#define STATS_MAX_BLOCKS (UINT64_C(1) << 26)
#define MAXU(a, b) ((a) > (b) ? (a) : (b))
#define MINU(a, b) ((a) < (b) ? (a) : (b))
#define STATS_MAX_EPOCHS 1000

static const char *const PROBE_WORD[] = {"none", "measured", "recorded"};

struct order_opts {
    struct cxlp_sampler_config cfg;
    uint64_t first;
    int want_first, counts, quality, json;
    uint64_t batch, qshard, qunit;
    const char *spec, *name;
    int stage, no_ramp, runs;
    uint64_t budget;
    struct cxlp_stage_order plan;
    /* the hosts order */
    int stats;
    uint32_t H;
    uint64_t weight[CXLP_HOSTS_MAX];
    double memory[CXLP_HOSTS_MAX];
    uint64_t ranks[CXLP_HOSTS_MAX];
    uint32_t *layout;          /* world entries */
    uint64_t epochs;
    int keep, window_all;
};

/* A comma-separated list of n values (one value: the same for all). */
/* A comma-separated list of one value per host into v (u64: unsigned
 * integers, else fractions >= 0 as doubles). */
static int parse_list(const char *arg, const char *what, int u64, void *v, uint32_t *n)
{
    char buf[16384];
    if (strlen(arg) >= sizeof buf)
        return cli_usage_error("%s: the list is too long", what);
    strcpy(buf, arg);
    uint32_t k = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (k >= CXLP_HOSTS_MAX)
            return cli_usage_error("%s: more than %d hosts", what, CXLP_HOSTS_MAX);
        if (u64) {
            if (cli_parse_u64(t, &((uint64_t *)v)[k]))
                return cli_usage_error("%s: '%s' is not an unsigned integer", what, t);
        } else {
            char *end;
            errno = 0;
            double x = strtod(t, &end);
            if (errno || end == t || *end || !(x >= 0) || x > 1e9)
                return cli_usage_error("%s: '%s' is not a fraction >= 0", what, t);
            ((double *)v)[k] = x;
        }
        k++;
    }
    if (!k)
        return cli_usage_error("%s: empty list", what);
    *n = k;
    return EXIT_OKAY;
}

/* n values, or one value repeated to n */
static int fit_list(const char *what, uint32_t got, uint32_t H, void *v, size_t size)
{
    if (got == H)
        return EXIT_OKAY;
    if (got != 1)
        return cli_usage_error("%s: %" PRIu32 " values for %" PRIu32 " hosts", what, got, H);
    for (uint32_t i = 1; i < H; i++)
        memcpy((char *)v + i * size, v, size);
    return EXIT_OKAY;
}

/* A sampler of the order o asks for (cfg: its world and rank). */
static int make_sampler(const struct order_opts *o, const struct cxlp_sampler_config *cfg,
                        cxlp_sampler **s)
{
    if (cfg->kind != CXLP_ORDER_HOSTS)
        return cxlp_sampler_create(cfg, s);
    struct cxlp_hosts h = {.n_hosts = o->H, .weight = o->weight,
                           .rank_host = cfg->world == o->cfg.world ? o->layout : NULL,
                           .keep = o->keep};
    return cxlp_sampler_create_hosts(cfg, &h, s);
}

static int parse_opts(int argc, char **argv, struct order_opts *o)
{
    enum { O_N = 256, O_KIND, O_SEED, O_EPOCH, O_SHARD, O_WINDOW, O_WORLD, O_RANK, O_DROP,
           O_FIRST, O_COUNTS, O_QUALITY, O_JSON, O_BATCH, O_RAMP, O_NORAMP, O_AUTO, O_RUNS,
           O_BUDGET, O_QUNIT, O_STATS, O_HOSTS, O_WEIGHTS, O_MEMORY, O_RPH, O_EPOCHS, O_KEEP };
    static const struct option lo[] = {
        {"n", required_argument, 0, O_N},           {"kind", required_argument, 0, O_KIND},
        {"seed", required_argument, 0, O_SEED},     {"epoch", required_argument, 0, O_EPOCH},
        {"shard-size", required_argument, 0, O_SHARD},
        {"window", required_argument, 0, O_WINDOW}, {"world", required_argument, 0, O_WORLD},
        {"rank", required_argument, 0, O_RANK},     {"drop-last", no_argument, 0, O_DROP},
        {"first", required_argument, 0, O_FIRST},   {"counts", no_argument, 0, O_COUNTS},
        {"quality", no_argument, 0, O_QUALITY},     {"json", no_argument, 0, O_JSON},
        {"batch", required_argument, 0, O_BATCH},   {"ramp", no_argument, 0, O_RAMP},
        {"no-ramp", no_argument, 0, O_NORAMP},      {"auto", no_argument, 0, O_AUTO},
        {"runs", required_argument, 0, O_RUNS},     {"budget", required_argument, 0, O_BUDGET},
        {"quality-unit", required_argument, 0, O_QUNIT},
        {"stats", no_argument, 0, O_STATS},         {"hosts", required_argument, 0, O_HOSTS},
        {"weights", required_argument, 0, O_WEIGHTS},
        {"memory", required_argument, 0, O_MEMORY},
        {"ranks-per-host", required_argument, 0, O_RPH},
        {"epochs", required_argument, 0, O_EPOCHS},
        {"keep-blocks", no_argument, 0, O_KEEP},
        {0, 0, 0, 0},
    };
    int c, have_n = 0, have_world = 0, ex;
    uint64_t world = 1, rank = 0, hosts = 0;
    uint32_t nw = 0, nm = 0, nr = 0;
    o->cfg.kind = CXLP_ORDER_RANDOM;
    o->batch = 256;
    o->runs = CXLP_RUNS_AUTO;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        uint64_t *dst = NULL;
        const char *what = NULL;
        switch (c) {
        case -2: return EXIT_USAGE;
        case O_N: dst = &o->cfg.n; what = "--n"; have_n = 1; break;
        case O_SEED: dst = &o->cfg.seed; what = "--seed"; break;
        case O_EPOCH: dst = &o->cfg.epoch; what = "--epoch"; break;
        case O_SHARD: dst = &o->cfg.shard_size; what = "--shard-size"; break;
        case O_WINDOW: dst = &o->cfg.window; what = "--window"; break;
        case O_WORLD: dst = &world; what = "--world"; have_world = 1; break;
        case O_HOSTS: dst = &hosts; what = "--hosts"; break;
        case O_EPOCHS: dst = &o->epochs; what = "--epochs"; break;
        case O_STATS: o->stats = 1; break;
        case O_KEEP: o->keep = 1; break;
        case O_WEIGHTS:
            if ((ex = parse_list(optarg, "--weights", 1, o->weight, &nw)))
                return ex;
            break;
        case O_MEMORY:
            if ((ex = parse_list(optarg, "--memory", 0, o->memory, &nm)))
                return ex;
            break;
        case O_RPH:
            if ((ex = parse_list(optarg, "--ranks-per-host", 1, o->ranks, &nr)))
                return ex;
            break;
        case O_RANK: dst = &rank; what = "--rank"; break;
        case O_FIRST: dst = &o->first; what = "--first"; o->want_first = 1; break;
        case O_BATCH: dst = &o->batch; what = "--batch"; break;
        case O_QUNIT: dst = &o->qunit; what = "--quality-unit"; break;
        case O_KIND:
            o->cfg.kind = cxlp_order_parse(optarg);
            if (o->cfg.kind < 0 || (o->cfg.kind > CXLP_ORDER_BLOCK &&
                                    o->cfg.kind != CXLP_ORDER_HOSTS))
                return cli_usage_error("--kind: '%s' is not random, block, sequential or "
                                       "hosts", optarg);
            break;
        case O_DROP: o->cfg.drop_last = 1; break;
        case O_RAMP: o->cfg.ramp = 1; break;
        case O_NORAMP: o->no_ramp = 1; break;
        case O_AUTO: o->stage = 1; break;
        case O_RUNS: {
            uint64_t u;
            if (!strcmp(optarg, "auto"))
                o->runs = CXLP_RUNS_AUTO;
            else if (!strcmp(optarg, "on"))
                o->runs = CXLP_RUNS_ON;
            else if (!strcmp(optarg, "off"))
                o->runs = 0;
            else if (!cli_parse_u64(optarg, &u) && u >= 1 && u <= 1u << 20)
                o->runs = (int)u;
            else
                return cli_usage_error("--runs: '%s' is not auto, on, off or a number of "
                                       "staging units", optarg);
            break;
        }
        case O_BUDGET:
            if (cli_parse_size(optarg, &o->budget) || !o->budget)
                return cli_usage_error("--budget: '%s' is not a size", optarg);
            break;
        case O_COUNTS: o->counts = 1; break;
        case O_QUALITY: o->quality = 1; break;
        case O_JSON: o->json = 1; break;
        }
        if (dst && cli_parse_u64(optarg, dst))
            return cli_usage_error("%s: '%s' is not an unsigned integer", what, optarg);
    }
    if (o->stats)
        o->cfg.kind = CXLP_ORDER_HOSTS;
    if (o->cfg.kind == CXLP_ORDER_HOSTS) {
        /* hosts: from --hosts or the longest list; world from the ranks */
        uint32_t H = (uint32_t)MAXU(MAXU(nw, nm), nr);
        if (hosts > CXLP_HOSTS_MAX)
            return cli_usage_error("--hosts: %" PRIu64 " is more than %d", hosts,
                                   CXLP_HOSTS_MAX);
        if (hosts)
            H = (uint32_t)hosts;
        if (!H)
            H = 1;
        o->H = H;
        if (!nw) {
            o->weight[0] = 1;
            nw = 1;
        }
        if (!nm) {
            o->memory[0] = 1;
            nm = 1;
        }
        if ((ex = fit_list("--weights", nw, H, o->weight, sizeof *o->weight)) ||
            (ex = fit_list("--memory", nm, H, o->memory, sizeof *o->memory)))
            return ex;
        if (nr) {
            if ((ex = fit_list("--ranks-per-host", nr, H, o->ranks, sizeof *o->ranks)))
                return ex;
            uint64_t sum = 0;
            for (uint32_t i = 0; i < H; i++)
                if ((sum += o->ranks[i]) > COUNTS_MAX_WORLD)
                    return cli_usage_error("--ranks-per-host: more than %d ranks",
                                           COUNTS_MAX_WORLD);
            if (!sum)
                return cli_usage_error("--ranks-per-host: no ranks");
            if (have_world && world != sum)
                return cli_usage_error("--world %" PRIu64 " is not the %" PRIu64 " ranks of "
                                       "--ranks-per-host", world, sum);
            world = sum;
        } else {
            /* --world ranks spread over the hosts as evenly as they go */
            if (world > COUNTS_MAX_WORLD)
                return cli_usage_error("--world: more than %d ranks for --kind hosts",
                                       COUNTS_MAX_WORLD);
            for (uint32_t i = 0; i < H; i++)
                o->ranks[i] = world / H + (i < world % H);
        }
        o->layout = malloc((size_t)world * sizeof *o->layout);
        if (!o->layout)
            return cli_report_os(-ENOMEM, "--ranks-per-host");
        for (uint32_t i = 0, r = 0; i < H; i++)
            for (uint64_t k = 0; k < o->ranks[i]; k++)
                o->layout[r++] = i;
        if (!o->epochs)
            o->epochs = 2;
        if (o->epochs > STATS_MAX_EPOCHS)
            return cli_usage_error("--epochs: at most %d", STATS_MAX_EPOCHS);
    } else if (o->stats || nw || nm || nr || hosts || o->keep) {
        return cli_usage_error("--hosts, --weights, --memory, --ranks-per-host and "
                               "--keep-blocks are for --kind hosts (--stats)");
    }
    if (world == 0 || world > UINT32_MAX)
        return cli_usage_error("--world: %" PRIu64 " is not in 1..%" PRIu32, world, UINT32_MAX);
    if (rank >= world)
        return cli_usage_error("--rank: %" PRIu64 " is not below --world %" PRIu64, rank, world);
    if (o->batch == 0)
        return cli_usage_error("--batch: must be at least 1");
    o->cfg.world = (uint32_t)world;
    o->cfg.rank = (uint32_t)rank;
    if (o->stage && (have_n || o->cfg.shard_size || o->cfg.window))
        return cli_usage_error("--auto takes POOL NAME and chooses --shard-size and --window");
    if (o->stage)
        o->cfg.kind = CXLP_ORDER_BLOCK;
    if (o->cfg.ramp && o->cfg.kind != CXLP_ORDER_BLOCK)
        return cli_usage_error("--ramp is for --kind block");
    int blocky = o->cfg.kind == CXLP_ORDER_BLOCK || o->cfg.kind == CXLP_ORDER_HOSTS;
    if (blocky && !o->cfg.shard_size && !o->stage)
        return cli_usage_error("--kind %s needs --shard-size", cxlp_order_name(o->cfg.kind));
    if (o->cfg.kind == CXLP_ORDER_BLOCK && !o->cfg.window && !o->stage)
        o->cfg.window = 1;
    if (o->cfg.kind == CXLP_ORDER_HOSTS && !o->cfg.window)
        o->window_all = 1; /* every block of a host: set once n is known */
    if (o->stage && o->cfg.kind == CXLP_ORDER_HOSTS)
        return cli_usage_error("--auto is for the block order, not --kind hosts");
    o->qshard = o->qunit ? o->qunit : o->cfg.shard_size ? o->cfg.shard_size : 4096;
    if (!o->want_first && !o->counts && !o->quality && !o->stats) {
        o->want_first = 1;
        o->first = 10;
    }
    int npos = argc - optind;
    if (have_n ? npos != 0 : npos != 2)
        return cli_usage_error(have_n ? "--n N takes no POOL NAME" : "give POOL NAME or --n N");
    if (!have_n) {
        o->spec = argv[optind];
        o->name = argv[optind + 1];
    }
    return EXIT_OKAY;
}

/* n from the dataset's record count; with --auto, the block order its
 * staging keeps up with. */
static int dataset_n(struct order_opts *o)
{
    cxlp_pool *p;
    int ex = cli_open_pool(o->spec, 1, &p);
    if (ex)
        return ex;
    cxlp_store *s;
    int rc = cxlp_store_open(p, o->name, &s);
    if (rc) {
        ex = cli_report_error(rc, p, o->name);
        cxlp_pool_close(p);
        return ex;
    }
    o->cfg.n = cxlp_store_count(s);
    if (o->stage) {
        rc = cxlp_store_stage_order(s, o->budget, o->runs, &o->plan);
        if (rc) {
            ex = cli_report_error(rc, s, o->name);
            cxlp_store_close(s);
            cxlp_pool_close(p);
            return ex;
        }
        o->cfg.shard_size = o->plan.block_records;
        o->cfg.window = o->plan.window;
        o->cfg.ramp = !o->no_ramp && cxlp_store_tiered(s);
        if (!o->qunit)
            o->qshard = o->plan.unit_records; /* distinct units per batch */
    }
    cxlp_store_close(s);
    cxlp_pool_close(p);
    return EXIT_OKAY;
}

static void print_first(const struct order_opts *o, cxlp_sampler *s)
{
    uint64_t buf[1024], left = o->first;
    int any = 0;
    if (o->json)
        printf(", \"first\": [");
    else
        printf("first %" PRIu64 " ids of rank %" PRIu32 ":\n", o->first, o->cfg.rank);
    while (left) {
        size_t k = cxlp_sampler_next(s, buf, left < 1024 ? (size_t)left : 1024);
        if (!k)
            break;
        for (size_t i = 0; i < k; i++, any = 1)
            printf(o->json ? (any ? ", %" PRIu64 : "%" PRIu64) : "%" PRIu64 "\n", buf[i]);
        left -= k;
    }
    if (o->json)
        printf("]");
}

/* Per-rank counts: every rank's length (equal by construction: printed
 * from each rank's own sampler, so a mistake would show), what is dropped
 * or repeated. */
static int print_counts(const struct order_opts *o, uint64_t L)
{
    uint32_t w = o->cfg.world;
    uint64_t per = 0;
    if (o->json)
        printf(", \"counts\": [");
    else
        printf("per-rank counts (world %" PRIu32 "):\n", w);
    for (uint32_t r = 0; r < w; r++) {
        struct cxlp_sampler_config c = o->cfg;
        c.rank = r;
        cxlp_sampler *s;
        int rc = make_sampler(o, &c, &s);
        if (rc)
            return cli_report_error(rc, NULL, "sampler");
        per = cxlp_sampler_len(s);
        cxlp_sampler_free(s);
        if (o->json)
            printf(r ? ", %" PRIu64 : "%" PRIu64, per);
        else
            printf("  rank %" PRIu32 ": %" PRIu64 "\n", r, per);
    }
    uint64_t total = per * w;
    uint64_t dropped = total < L ? L - total : 0, padded = total > L ? total - L : 0;
    if (o->json)
        printf("], \"total\": %" PRIu64 ", \"dropped\": %" PRIu64 ", \"padded\": %" PRIu64,
               total, dropped, padded);
    else
        printf("  total %" PRIu64 " of %" PRIu64 " positions; dropped %" PRIu64
               ", padded %" PRIu64 "\n", total, L, dropped, padded);
    return EXIT_OKAY;
}

static int print_quality(const struct order_opts *o)
{
    uint64_t n = o->cfg.n;
    struct cxlp_sampler_config c = o->cfg;
    c.world = 1;
    c.rank = 0;
    cxlp_sampler *s;
    int rc = make_sampler(o, &c, &s);
    if (rc)
        return cli_report_error(rc, NULL, "sampler");
    uint64_t *v = malloc(n * sizeof *v), got = 0;
    if (!v) {
        cxlp_sampler_free(s);
        return cli_report_os(-ENOMEM, "--quality");
    }
    size_t k;
    while ((k = cxlp_sampler_next(s, v + got, 65536)) > 0)
        got += k;
    cxlp_sampler_free(s);
    struct order_quality q;
    rc = order_quality(v, n, o->qshard, o->batch, &q);
    free(v);
    if (rc)
        return cli_report_os(rc, "--quality");
    int pass = q.chi2 < q.chi2_crit;
    if (o->json) {
        printf(", \"quality\": {\"shard_size\": %" PRIu64 ", \"batch\": %" PRIu64
               ", \"shards_per_batch\": %.3f, \"expected_shards_per_batch\": %.3f"
               ", \"spearman\": %.6f, \"chi2\": %.3f, \"chi2_df\": %u, \"chi2_crit\": %.3f"
               ", \"uniform\": %s}", o->qshard, o->batch, q.shards_per_batch,
               q.expected_shards, q.spearman, q.chi2, (q.grid - 1) * (q.grid - 1),
               q.chi2_crit, pass ? "true" : "false");
        return EXIT_OKAY;
    }
    printf("quality (epoch order, shards of %" PRIu64 ", batches of %" PRIu64 "):\n", o->qshard,
           o->batch);
    printf("  shards/batch  %.1f (a uniform shuffle: %.1f)\n", q.shards_per_batch,
           q.expected_shards);
    printf("  spearman      %.4f (0 for a shuffle, 1 for storage order)\n", q.spearman);
    printf("  chi2          %.1f, df %u, %s at p = 0.001 (critical %.1f)\n", q.chi2,
           (q.grid - 1) * (q.grid - 1), pass ? "uniform" : "not uniform", q.chi2_crit);
    return EXIT_OKAY;
}

/* --stats: per epoch, each host's share and what its memory holds, the
 * predicted fractions of the reads, and what the memories stage.
 *
 * Host h's memory holds cap_h = floor(memory_h * M) blocks: in epoch e
 * the first min(cap_h, M_h) blocks of its segment. A read (rank, id) is
 * local when the id's block is in the rank's host's segment and held, peer
 * when it is in another host's segment and held there, home when its
 * segment's host does not hold it. Prediction: the T = world * q reads of
 * an epoch take host h's stream T * N_h / L times; each round gives host
 * h's ranks min(their count, the round's positions of h) of them, so
 * min(T N_h / L, k_h q) are local; reads are spread evenly over the stream,
 * so the held share f_h = held_h / N_h of each kind is held. Staging: a
 * block held in epoch e that its host did not hold in epoch e - 1 comes
 * from a peer that held it then, else from the home (all of epoch 0's from
 * the home).
 *
 * The prediction takes min() over the epoch where the ranks take min()
 * per round: a round with more of host h's positions than h has ranks
 * sends the rest to peers even when other rounds have fewer. Up to
 * STATS_EXACT_DRAWS draws an epoch the fractions are therefore counted
 * instead, every rank's draws walked as its sampler makes them
 * (cxlp_sampler_host_reads); "fractions" says which. */
#define STATS_EXACT_DRAWS (1ULL << 22)

/* Every rank's draws in epoch c->epoch, counted local, peer, home. */
static int count_reads(const struct order_opts *o, const struct cxlp_sampler_config *c,
                       double out[3])
{
    uint64_t sum[3] = {0, 0, 0};
    for (uint32_t r = 0; r < c->world; r++) {
        struct cxlp_sampler_config rc_cfg = *c;
        rc_cfg.rank = r;
        cxlp_sampler *s;
        uint64_t k[3];
        int rc = make_sampler(o, &rc_cfg, &s);
        if (!rc)
            rc = cxlp_sampler_host_reads(s, o->memory, k);
        cxlp_sampler_free(s);
        if (rc)
            return rc;
        for (int i = 0; i < 3; i++)
            sum[i] += k[i];
    }
    double t = (double)(sum[0] + sum[1] + sum[2]);
    for (int i = 0; i < 3; i++)
        out[i] = t > 0 ? (double)sum[i] / t : 0;
    return 0;
}

static int print_stats(const struct order_opts *o)
{
    uint64_t n = o->cfg.n, S = n ? MINU(o->cfg.shard_size, n) : o->cfg.shard_size;
    uint64_t M = n ? (n - 1) / S + 1 : 0, deficit = M * S - n;
    uint32_t H = o->H, world = o->cfg.world;
    uint64_t q = o->cfg.drop_last ? n / world : n / world + (n % world != 0);
    double T = (double)world * (double)q;
    uint64_t *cap = calloc(H, sizeof *cap), *N = calloc(H, sizeof *N),
             *Mh = calloc(H, sizeof *Mh), *held = calloc(H, sizeof *held);
    if (!cap || !N || !Mh || !held) {
        free(cap), free(N), free(Mh), free(held);
        return cli_report_os(-ENOMEM, "--stats");
    }
    for (uint32_t h = 0; h < H; h++) {
        double c = o->memory[h] * (double)M + 1e-9; /* 0.3 * 10 is 2.999... */
        cap[h] = c >= (double)M ? M : (uint64_t)c;
    }
    if (o->json) {
        printf(", \"stats\": {\"world\": %" PRIu32 ", \"blocks\": %" PRIu64 ", \"keep_blocks\": %s"
               ", \"hosts\": [", world, M, o->keep ? "true" : "false");
        for (uint32_t h = 0; h < H; h++)
            printf("%s{\"weight\": %" PRIu64 ", \"memory\": %.6f, \"capacity_blocks\": %"
                   PRIu64 ", \"ranks\": %" PRIu64 "}", h ? ", " : "", o->weight[h],
                   o->memory[h], cap[h], o->ranks[h]);
        printf("], \"epochs\": [");
    } else {
        printf("hosts (blocks of %" PRIu64 " ids, %" PRIu64 " blocks; world %" PRIu32 ", %"
               PRIu64 " reads per rank):\n", S, M, world, q);
        for (uint32_t h = 0; h < H; h++)
            printf("  host %" PRIu32 ": weight %" PRIu64 ", memory %.3f of the dataset (%" PRIu64
                   " blocks), %" PRIu64 " rank%s\n", h, o->weight[h], o->memory[h], cap[h],
                   o->ranks[h], o->ranks[h] == 1 ? "" : "s");
    }
    int ex = EXIT_OKAY;
    cxlp_sampler *prev = NULL;
    for (uint64_t e = o->cfg.epoch; e - o->cfg.epoch < o->epochs; e++) {
        struct cxlp_sampler_config c = o->cfg;
        c.epoch = e;
        cxlp_sampler *s;
        int rc = make_sampler(o, &c, &s);
        if (rc) {
            ex = cli_report_error(rc, NULL, "sampler");
            break;
        }
        uint32_t hq = 0;
        uint64_t iq = 0;
        if (n && (rc = cxlp_sampler_host_of(s, n - 1, &hq, &iq))) {
            cxlp_sampler_free(s);
            ex = cli_report_error(rc, NULL, "sampler");
            break;
        }
        double local = 0, peer = 0, home = 0;
        for (uint32_t h = 0; h < H; h++) {
            cxlp_sampler_host_share(s, h, &N[h], &Mh[h]);
            uint64_t hb = MINU(cap[h], Mh[h]);
            held[h] = hb * S - (deficit && hq == h && iq < hb ? deficit : 0);
            if (!N[h] || !n)
                continue;
            double reads = T * (double)N[h] / (double)n, f = (double)held[h] / (double)N[h];
            double own = MINU(reads, (double)o->ranks[h] * (double)q);
            local += own * f;
            peer += (reads - own) * f;
            home += reads * (1 - f);
        }
        if (T > 0) {
            local /= T;
            peer /= T;
            home /= T;
        }
        int exact = T <= (double)STATS_EXACT_DRAWS;
        double f3[3];
        if (exact && (rc = count_reads(o, &c, f3))) {
            cxlp_sampler_free(s);
            ex = cli_report_error(rc, NULL, "sampler");
            break;
        }
        if (exact) {
            local = f3[0];
            peer = f3[1];
            home = f3[2];
        }
        /* staging against the epoch before */
        double st_peer = 0, st_home = 0;
        if (e > 0 && !prev) {
            c.epoch = e - 1;
            if ((rc = make_sampler(o, &c, &prev))) {
                cxlp_sampler_free(s);
                ex = cli_report_error(rc, NULL, "sampler");
                break;
            }
        }
        for (uint64_t b = 0; b < M; b++) {
            uint32_t h, h2;
            uint64_t i, i2, size = b + 1 == M ? S - deficit : S;
            cxlp_sampler_host_of(s, b * S, &h, &i);
            if (i >= cap[h])
                continue;
            if (!prev) {
                st_home += (double)size;
                continue;
            }
            cxlp_sampler_host_of(prev, b * S, &h2, &i2);
            if (h2 == h && i2 < cap[h])
                continue;
            if (i2 < cap[h2])
                st_peer += (double)size;
            else
                st_home += (double)size;
        }
        if (n) {
            st_peer /= (double)n;
            st_home /= (double)n;
        }
        if (o->json) {
            printf("%s{\"epoch\": %" PRIu64 ", \"local\": %.6f, \"peer\": %.6f, \"home\": %.6f"
                   ", \"fractions\": \"%s\", \"staged_peer\": %.6f, \"staged_home\": %.6f, "
                   "\"hosts\": [", e > o->cfg.epoch ? ", " : "", e, local, peer, home,
                   exact ? "counted" : "predicted", st_peer, st_home);
            for (uint32_t h = 0; h < H; h++)
                printf("%s{\"blocks\": %" PRIu64 ", \"samples\": %" PRIu64 ", \"held\": %"
                       PRIu64 "}", h ? ", " : "", Mh[h], N[h], held[h]);
            printf("]}");
        } else {
            printf("epoch %" PRIu64 ": reads local %.4f, peer %.4f, home %.4f (%s); staged "
                   "from peers %.4f, from the home %.4f of the dataset\n", e, local, peer, home,
                   exact ? "counted" : "predicted", st_peer, st_home);
            for (uint32_t h = 0; h < H; h++)
                printf("  host %" PRIu32 ": %" PRIu64 " blocks (%" PRIu64 " samples), %" PRIu64
                       " samples held\n", h, Mh[h], N[h], held[h]);
        }
        cxlp_sampler_free(prev);
        prev = s;
    }
    cxlp_sampler_free(prev);
    if (o->json && !ex)
        printf("]}");
    free(cap), free(N), free(Mh), free(held);
    return ex;
}

int cli_cmd_order(int argc, char **argv)
{
    struct order_opts o;
    memset(&o, 0, sizeof o);
    int ex = parse_opts(argc, argv, &o);
    if (ex)
        return ex;
    if (o.spec && (ex = dataset_n(&o)))
        return ex;
    if (o.window_all)
        o.cfg.window = o.cfg.n ? (o.cfg.n - 1) / o.cfg.shard_size + 1 : 1;
    /* refuse before printing anything, so --json output is whole or absent */
    if (o.counts && o.cfg.world > COUNTS_MAX_WORLD)
        return cli_usage_error("--counts: --world %" PRIu32 " is more ranks than %d",
                               o.cfg.world, COUNTS_MAX_WORLD);
    if (o.stats && o.cfg.n > STATS_MAX_BLOCKS * o.cfg.shard_size)
        return cli_usage_error("--stats: more than %" PRIu64 " blocks", STATS_MAX_BLOCKS);
    if (o.stats && o.cfg.n >= 20 && o.cfg.n <= QUALITY_MAX_N)
        o.quality = 1;
    if (o.quality && (o.cfg.n > QUALITY_MAX_N || o.cfg.n < 20))
        return cli_usage_error("--quality: n %" PRIu64 " is outside 20..%" PRIu64
                               " (the figures need the whole epoch in memory)",
                               o.cfg.n, QUALITY_MAX_N);
    cxlp_sampler *s;
    int rc = make_sampler(&o, &o.cfg, &s);
    if (rc) {
        free(o.layout);
        return cli_report_error(rc, NULL, "sampler");
    }
    struct cxlp_sampler_state st;
    cxlp_sampler_state(s, &st);
    uint64_t L = cxlp_sampler_epoch_len(s), per = cxlp_sampler_len(s);
    const char *kind = cxlp_order_name(o.cfg.kind);
    if (o.json) {
        printf("{");
        if (o.spec) {
            printf("\"pool\": ");
            cli_json_str(stdout, o.spec);
            printf(", \"dataset\": ");
            cli_json_str(stdout, o.name);
            printf(", ");
        }
        if (o.stage)
            printf("\"staging\": {\"unit_records\": %" PRIu64 ", \"unit_bytes\": %" PRIu64
                   ", \"run_units\": %" PRIu64 ", \"probe\": \"%s\", \"random_ratio\": %.3f"
                   ", \"seq_bps\": %.0f, \"random_bps\": %.0f, \"ramp\": %s}, ",
                   o.plan.unit_records, o.plan.unit_bytes, o.plan.run_units,
                   PROBE_WORD[o.plan.probed == 1 || o.plan.probed == 2 ? o.plan.probed : 0], o.plan.random_ratio, o.plan.seq_bps,
                   o.plan.random_bps, o.cfg.ramp ? "true" : "false");
        printf("\"kind\": \"%s\", \"n\": %" PRIu64 ", \"seed\": %" PRIu64 ", \"epoch\": %" PRIu64
               ", \"shard_size\": %" PRIu64 ", \"window\": %" PRIu64 ", \"world\": %" PRIu32
               ", \"rank\": %" PRIu32 ", \"drop_last\": %s, \"epoch_len\": %" PRIu64
               ", \"rank_len\": %" PRIu64 ", \"fingerprint\": \"%016" PRIx64 "\"",
               kind, o.cfg.n, o.cfg.seed, o.cfg.epoch, o.cfg.shard_size, o.cfg.window,
               o.cfg.world, o.cfg.rank, o.cfg.drop_last ? "true" : "false", L, per,
               st.fingerprint);
    } else {
        printf("order %s over %" PRIu64 " ids", kind, o.cfg.n);
        if (o.spec)
            printf(" (%s %s)", o.spec, o.name);
        printf(", seed %" PRIu64 ", epoch %" PRIu64, o.cfg.seed, o.cfg.epoch);
        if (o.cfg.kind == CXLP_ORDER_BLOCK)
            printf(", shards of %" PRIu64 ", window %" PRIu64 "%s", o.cfg.shard_size,
                   o.cfg.window, o.cfg.ramp ? ", ramp in epoch 0" : "");
        if (o.cfg.kind == CXLP_ORDER_HOSTS)
            printf(", blocks of %" PRIu64 ", window %" PRIu64 ", %" PRIu32 " host%s, %s",
                   o.cfg.shard_size, o.cfg.window, o.H, o.H == 1 ? "" : "s",
                   o.keep ? "blocks kept on their hosts" : "blocks dealt afresh each epoch");
        if (o.stage) {
            printf("\nstaging: units of %" PRIu64 " records (about %" PRIu64 " bytes), runs of "
                   "%" PRIu64 " unit%s", o.plan.unit_records, o.plan.unit_bytes,
                   o.plan.run_units, o.plan.run_units == 1 ? "" : "s");
            if (o.plan.probed == 1)
                printf("; the home read units at %.0f MB/s in file order, %.0f MB/s at random "
                       "(recorded in the pool)", o.plan.seq_bps / 1e6, o.plan.random_bps / 1e6);
            else if (o.plan.probed == 2)
                printf("; the pool's record: the home reads units at random at %.2f of its "
                       "rate in file order", o.plan.random_ratio);
            else if (o.runs != CXLP_RUNS_AUTO)
                printf("; as --runs asked (no probe)");
            else
                printf("; the home was not probed (a memory or page-cache home: no runs)");
        }
        printf("\nworld %" PRIu32 ", rank %" PRIu32 ", %s: %" PRIu64 " per rank of %" PRIu64
               "; fingerprint %016" PRIx64 "\n", o.cfg.world, o.cfg.rank,
               o.cfg.drop_last ? "drop_last" : "padded", per, L, st.fingerprint);
    }
    if (o.want_first)
        print_first(&o, s);
    cxlp_sampler_free(s);
    if (o.counts && (ex = print_counts(&o, L)))
        return ex;
    if (o.quality && (ex = print_quality(&o)))
        return ex;
    if (o.stats && (ex = print_stats(&o)))
        return ex;
    free(o.layout);
    if (o.json)
        printf("}\n");
    if (fflush(stdout))
        return cli_report_os(-errno, "stdout");
    return EXIT_OKAY;
}
