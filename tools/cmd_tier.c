/*
 * cmd_tier.c - the subcommands of tiered pools: migrate, top; and the tier
 * table that create and stat print.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static double ratio(uint64_t a, uint64_t b)
{
    return b ? (double)a / (double)b : 0.0;
}

static int get_tiers(cxlp_pool *p, struct cxlp_tier_info *t, size_t *n)
{
    return cxlp_pool_tiers(p, t, 8, n);
}

void cli_print_tiers(cxlp_pool *p, int json)
{
    struct cxlp_tier_info t[8];
    size_t n;
    if (get_tiers(p, t, &n)) {
        if (json)
            printf("[]");
        return;
    }
    if (json) {
        printf("[");
        for (size_t i = 0; i < n && i < 8; i++) {
            printf("%s{\"tier\": %zu, \"kind\": \"%s\", \"media\": \"%s\", \"emulated\": %s, "
                   "\"numa_node\": %d, \"home\": %s, \"staged\": %s, \"path\": ",
                   i ? ", " : "", i, cxlp_tier_name(t[i].kind), cxlp_media_name(t[i].media),
                   t[i].emulated ? "true" : "false", t[i].numa_node, t[i].home ? "true" : "false",
                   t[i].staged ? "true" : "false");
            cli_json_str(stdout, t[i].path);
            printf(", \"capacity\": %" PRIu64 ", \"used\": %" PRIu64 ", \"copies\": %" PRIu64
                   ", \"copy_bytes\": %" PRIu64 ", \"hits\": %" PRIu64 ", \"misses\": %" PRIu64
                   ", \"hit_rate\": %.6f, \"bytes_in\": %" PRIu64 ", \"bytes_out\": %" PRIu64
                   ", \"stall_ns\": %" PRIu64 ", \"fetches\": %" PRIu64 ", \"evictions\": %" PRIu64 "}",
                   t[i].capacity, t[i].used, t[i].copies, t[i].copy_bytes, t[i].hits, t[i].misses,
                   ratio(t[i].hits, t[i].hits + t[i].misses), t[i].bytes_in, t[i].bytes_out,
                   t[i].stall_ns, t[i].fetches, t[i].evictions);
        }
        printf("]");
        return;
    }
    if (n < 2)
        return; /* a pool of one tier: the lines above say it all */
    printf("tiers:\n  %-4s %-5s %-24s %10s %10s %8s %7s %10s %10s %9s\n", "#", "KIND", "MEDIA",
           "CAPACITY", "USED", "COPIES", "HIT%", "IN", "OUT", "STALL s");
    for (size_t i = 0; i < n && i < 8; i++) {
        char m[64], b[4][32];
        if (t[i].numa_node >= 0)
            snprintf(m, sizeof m, "numa node %d%s", t[i].numa_node,
                     t[i].emulated ? " (emulated)" : "");
        else
            snprintf(m, sizeof m, "%s%s", cxlp_media_name(t[i].media),
                     t[i].emulated ? " (emulated)" : "");
        printf("  %-4zu %-5s %-24s %10s %10s %8" PRIu64 " %6.1f%% %10s %10s %9.3f%s\n", i,
               cxlp_tier_name(t[i].kind), m, cli_fmt_bytes(t[i].capacity, b[0]),
               cli_fmt_bytes(t[i].used, b[1]), t[i].copies,
               100 * ratio(t[i].hits, t[i].hits + t[i].misses), cli_fmt_bytes(t[i].bytes_in, b[2]),
               cli_fmt_bytes(t[i].bytes_out, b[3]), (double)t[i].stall_ns / 1e9,
               t[i].home ? "  home" : "");
        printf("       %s\n", t[i].path);
    }
}

/* ------------------------------------------------------------- migrate */

int cli_cmd_migrate(int argc, char **argv)
{
    static const struct option lo[] = {
        {"threads", required_argument, 0, 't'},
        {"json", no_argument, 0, 'j'},
        {"no-progress", no_argument, 0, 'n'},
        {0, 0, 0, 0},
    };
    struct cxlp_migrate_opts o = {0};
    int json = 0, show = 1, c;
    uint64_t v;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        switch (c) {
        case -2:
            return EXIT_USAGE;
        case 't':
            if (cli_parse_u64(optarg, &v) || v == 0 || v > 64)
                return cli_usage_error("--threads: '%s' is not 1..64", optarg);
            o.threads = (uint32_t)v;
            break;
        case 'j':
            json = 1;
            break;
        case 'n':
            show = 0;
            break;
        }
    }
    if (!cli_npos_ok(argc, argv, 3, 3))
        return EXIT_USAGE;
    const char *spec = argv[optind], *name = argv[optind + 1], *tier = argv[optind + 2];
    cxlp_pool *p;
    int ex = cli_open_pool(spec, 0, &p);
    if (ex)
        return ex;
    struct shards_progress mp = {"migrate", 0, show && isatty(STDERR_FILENO)};
    o.progress = cli_shards_progress;
    o.progress_ctx = &mp;
    struct cxlp_migrate_stat st;
    int rc = cxlp_migrate(p, name, tier, &o, &st);
    if (rc) {
        ex = cli_report_error(rc, p, name);
        cxlp_pool_close(p);
        return ex;
    }
    if (json) {
        printf("{\"dataset\": ");
        cli_json_str(stdout, name);
        printf(", \"tier\": ");
        cli_json_str(stdout, tier);
        printf(", \"shards\": %" PRIu64 ", \"copied\": %" PRIu64 ", \"already\": %" PRIu64
               ", \"bytes_copied\": %" PRIu64 ", \"direct_bytes\": %" PRIu64
               ", \"bytes_dropped\": %" PRIu64 ", \"seconds\": %.6f}\n",
               st.shards, st.copied, st.already, st.bytes_copied, st.direct_bytes,
               st.bytes_dropped, st.seconds);
    } else {
        char b1[32], b2[32];
        printf("migrated %s to %s: %" PRIu64 " shards (%" PRIu64 " copied, %" PRIu64
               " there already), %s copied in %.3f s, %s of other copies dropped\n",
               name, tier, st.shards, st.copied, st.already, cli_fmt_bytes(st.bytes_copied, b1),
               st.seconds, cli_fmt_bytes(st.bytes_dropped, b2));
    }
    cxlp_pool_close(p);
    return EXIT_OKAY;
}

/* ---------------------------------------------------------------- top */

static volatile sig_atomic_t top_stop;

static void on_int(int sig)
{
    (void)sig;
    top_stop = 1;
}

int cli_cmd_top(int argc, char **argv)
{
    static const struct option lo[] = {
        {"interval", required_argument, 0, 'i'},
        {"count", required_argument, 0, 'c'},
        {0, 0, 0, 0},
    };
    double interval = 1.0;
    uint64_t count = 0;
    int c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        char *end;
        switch (c) {
        case -2:
            return EXIT_USAGE;
        case 'i':
            interval = strtod(optarg, &end);
            if (*end || interval < 0.05 || interval > 3600)
                return cli_usage_error("--interval: '%s' is not 0.05..3600 seconds", optarg);
            break;
        case 'c':
            if (cli_parse_u64(optarg, &count) || count == 0)
                return cli_usage_error("--count: '%s' is not a positive count", optarg);
            break;
        }
    }
    if (!cli_npos_ok(argc, argv, 1, 1))
        return EXIT_USAGE;
    const char *spec = argv[optind];
    cxlp_pool *p;
    int ex = cli_open_pool(spec, 1, &p);
    if (ex)
        return ex;
    int tty = isatty(STDOUT_FILENO);
    signal(SIGINT, on_int);
    struct cxlp_tier_info prev[8], cur[8];
    size_t n = 0;
    double t_prev = cli_now_sec();
    if (get_tiers(p, prev, &n)) {
        ex = cli_report_error(-EIO, p, spec);
        cxlp_pool_close(p);
        return ex;
    }
    for (uint64_t round = 1; !top_stop && (!count || round <= count); round++) {
        struct timespec ts = {(time_t)interval, (long)((interval - (double)(time_t)interval) * 1e9)};
        nanosleep(&ts, NULL);
        if (top_stop)
            break;
        double t_now = cli_now_sec(), dt = t_now - t_prev;
        int rc = get_tiers(p, cur, &n);
        if (rc) {
            ex = cli_report_error(rc, p, spec);
            break;
        }
        if (tty)
            printf("\033[H\033[2J");
        time_t wall = time(NULL);
        char when[32];
        strftime(when, sizeof when, "%H:%M:%S", localtime(&wall));
        printf("cxlpool top %s   %s   every %.2f s\n", spec, when, interval);
        printf("%-4s %-5s %10s %10s %7s %6s %9s %9s %9s %9s %8s\n", "TIER", "KIND", "CAPACITY",
               "USED", "COPIES", "HIT%", "MISS/s", "IN MB/s", "OUT MB/s", "EVICT/s", "STALL%");
        for (size_t i = 0; i < n && i < 8; i++) {
            char b[2][32];
            uint64_t dh = cur[i].hits - prev[i].hits, dm = cur[i].misses - prev[i].misses;
            printf("%-4zu %-5s %10s %10s %7" PRIu64 " %5.1f%% %9.1f %9.1f %9.1f %9.1f %7.2f%%%s\n",
                   i, cxlp_tier_name(cur[i].kind), cli_fmt_bytes(cur[i].capacity, b[0]),
                   cli_fmt_bytes(cur[i].used, b[1]), cur[i].copies,
                   dh + dm ? 100.0 * (double)dh / (double)(dh + dm) : 0.0, (double)dm / dt,
                   (double)(cur[i].bytes_in - prev[i].bytes_in) / dt / 1e6,
                   (double)(cur[i].bytes_out - prev[i].bytes_out) / dt / 1e6,
                   (double)(cur[i].evictions - prev[i].evictions) / dt,
                   100.0 * (double)(cur[i].stall_ns - prev[i].stall_ns) / (dt * 1e9),
                   cur[i].home ? "  home" : "");
        }
        /* what each tier holds, per dataset */
        struct cxlp_dataset_info ds[64];
        size_t nd = 0;
        if (cxlp_pool_list(p, ds, 64, &nd) == 0 && nd) {
            printf("\n%-24s %8s", "DATASET", "SHARDS");
            for (size_t i = 0; i < n && i < 8; i++)
                printf(" %7s%zu", cxlp_tier_name(cur[i].kind), i);
            printf("\n");
            for (size_t d = 0; d < nd && d < 64; d++) {
                cxlp_store *s;
                uint64_t copies[8];
                size_t nt;
                if (cxlp_store_open(p, ds[d].name, &s))
                    continue;
                if (cxlp_store_copies(s, copies, 8, &nt) == 0) {
                    printf("%-24s %8u", ds[d].name, ds[d].n_shards);
                    for (size_t i = 0; i < nt && i < 8; i++)
                        printf(" %8" PRIu64, copies[i]);
                    printf("\n");
                }
                cxlp_store_close(s);
            }
        }
        /* the loaders of this host and why they miss */
        struct cxlp_stager_info st[16];
        size_t ns = 0;
        if (cxlp_pool_stagers(p, st, 16, &ns) == 0 && ns) {
            printf("\n%-8s %-20s %-13s %10s %10s %10s %6s\n", "PID", "DATASET", "POLICY",
                   "BUDGET", "UNIT", "KEPT", "HIT%");
            for (size_t i = 0; i < ns; i++) {
                char b[3][32];
                uint64_t all = st[i].hits + st[i].misses;
                printf("%-8u %-20s %-13s %10s %10s %10s %5.1f%%\n", st[i].pid, st[i].dataset,
                       cxlp_policy_name(st[i].policy), cli_fmt_bytes(st[i].budget, b[0]),
                       cli_fmt_bytes(st[i].unit_bytes, b[1]), cli_fmt_bytes(st[i].kept_bytes, b[2]),
                       all ? 100.0 * (double)st[i].hits / (double)all : 0.0);
                if (st[i].why[0])
                    printf("         misses: %s\n", st[i].why);
            }
        }
        fflush(stdout);
        memcpy(prev, cur, sizeof cur);
        t_prev = t_now;
    }
    cxlp_pool_close(p);
    return ex;
}

/* -------------------------------------------------------------- policy */

int cli_cmd_policy(int argc, char **argv)
{
    static const struct option lo[] = {{0, 0, 0, 0}};
    int c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1)
        if (c == -2)
            return EXIT_USAGE;
    if (!cli_npos_ok(argc, argv, 2, 3))
        return EXIT_USAGE;
    const char *spec = argv[optind], *name = argv[optind + 1];
    int set = argc - optind == 3;
    int policy = set ? cxlp_policy_parse(argv[optind + 2]) : 0;
    if (set && policy < 0)
        return cli_usage_error("POLICY: '%s' is not lookahead, lru, streaming, hot_first, "
                               "full_prefetch or default", argv[optind + 2]);
    cxlp_pool *p;
    int ex = cli_open_pool(spec, !set, &p);
    if (ex)
        return ex;
    int rc;
    if (set) {
        rc = cxlp_pool_set_policy(p, name, policy);
        if (rc)
            ex = cli_report_error(rc, p, name);
        else
            printf("%s: loaders place shards by %s\n", name, cxlp_policy_name(policy));
    } else {
        cxlp_store *s;
        rc = cxlp_store_open(p, name, &s);
        if (rc) {
            ex = cli_report_error(rc, p, name);
        } else {
            int pol = cxlp_store_policy(s);
            printf("%s: %s%s\n", name, cxlp_policy_name(pol), pol ? "" : " (lookahead)");
            cxlp_store_close(s);
        }
    }
    cxlp_pool_close(p);
    return ex;
}
