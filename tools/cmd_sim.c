/*
 * cmd_sim.c - `cxlpool sim`: runs the simulator (src/sim) on a preset or a
 * JSON configuration, writes its result as JSON, or a table of a sweep.
 *
 * A sweep (--sweep KEY=V1,V2,...) runs the configuration once per value of
 * each key in turn (the others at the configuration's values), and writes
 * one row a run: the key, the value, the mean stall fraction, the memory
 * tiers' hit rate, samples/s and the home's bytes read per epoch.
 *
 * Rejected: a cross product of the swept keys (runs multiply; one knob at a
 * time is what the chart of stall against each knob needs).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "sim/sim.h"

#define MAX_SETS 32
#define MAX_SWEEPS 8

static int load(const char *what, struct sim_config *c, char *err, size_t errlen)
{
    FILE *f = fopen(what, "rb");
    if (!f) {
        if (errno == ENOENT && sim_preset(what, c) == 0)
            return 0;
        snprintf(err, errlen, "%s: %s (and not a preset: design-cluster, this-machine)", what,
                 strerror(errno));
        return -1;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (n < cap)
            break;
        if (cap >= (16u << 20)) {
            free(buf);
            fclose(f);
            snprintf(err, errlen, "%s: larger than 16 MiB", what);
            return -1;
        }
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "%s: %s", what, buf ? "read error" : "out of memory");
        return -1;
    }
    int rc = sim_config_parse(buf, n, what, c, err, errlen);
    free(buf);
    return rc;
}

static double epoch_home(const struct sim_result *r)
{
    uint64_t all = 0;
    for (uint32_t e = 0; e < r->n_epochs; e++)
        all += r->epoch[e].home_read;
    return r->n_epochs ? (double)all / r->n_epochs : 0;
}

static double mean_stall(const struct sim_result *r, double *sps)
{
    double st = 0;
    *sps = 0;
    for (uint32_t i = 0; i < r->n_ranks; i++) {
        const struct sim_rank_stats *k = &r->rank[i];
        st += k->time_s > 0 ? k->stall_s / k->time_s : 0;
        *sps += k->time_s > 0 ? (double)k->samples / k->time_s : 0;
    }
    return r->n_ranks ? st / r->n_ranks : 0;
}

static double hit_rate(const struct sim_config *c, const struct sim_result *r)
{
    uint64_t h = 0, m = 0;
    for (uint32_t i = 0; i < c->n_tiers; i++) {
        int k = c->tier[i].kind;
        if (k == SIM_DRAM || k == SIM_CXL_LOCAL || k == SIM_CXL_SWITCH) {
            h += r->tier[i].hits;
            m += r->tier[i].misses;
        }
    }
    return h + m ? (double)h / (double)(h + m) : 0;
}

/* --calibrate DIR: this machine's two bandwidths, as a configuration. */
static int calibrate(int argc, char **argv, const char *dir, uint64_t bytes, const char *out,
                     int others)
{
    if (!cli_npos_ok(argc, argv, 0, 0))
        return EXIT_USAGE;
    if (others)
        return cli_usage_error("--calibrate takes neither --set nor --sweep");
    struct sim_calib k;
    char err[512];
    if (sim_calibrate(dir, bytes, UINT64_C(64) << 20, &k, err, sizeof err)) {
        fprintf(stderr, "cxlpool: sim: %s\n", err);
        return EXIT_RUNTIME;
    }
    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f)
        return cli_report_os(-errno, out);
    sim_calib_config(f, &k);
    int bad = out ? fclose(f) != 0 : fflush(f) != 0;
    fprintf(stderr, "cxlpool: sim: calibrated (measured now, on this machine): dram %.2f GB/s "
            "(memcpy), file %.2f GB/s (%llu shards of %llu MiB in a random order, %s); "
            "latencies and concurrency are the preset's\n",
            k.dram_bps / 1e9, k.file_bps / 1e9, (unsigned long long)(k.bytes / k.shard),
            (unsigned long long)(k.shard >> 20), k.direct ? "O_DIRECT" : "through the page cache");
    return bad ? cli_report_os(-EIO, out ? out : "stdout") : EXIT_OKAY;
}

int cli_cmd_sim(int argc, char **argv)
{
    enum { O_SET = 256, O_SWEEP, O_OUT, O_CAL, O_CALBYTES };
    static const struct option lo[] = {
        {"set", required_argument, 0, O_SET},
        {"sweep", required_argument, 0, O_SWEEP},
        {"out", required_argument, 0, O_OUT},
        {"calibrate", required_argument, 0, O_CAL},
        {"calibrate-bytes", required_argument, 0, O_CALBYTES},
        {0, 0, 0, 0},
    };
    const char *sets[MAX_SETS], *sweeps[MAX_SWEEPS], *out = NULL, *cal = NULL;
    uint64_t cal_bytes = UINT64_C(1) << 30;
    int nset = 0, nsweep = 0, c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        switch (c) {
        case -2: return EXIT_USAGE;
        case O_SET:
            if (nset == MAX_SETS)
                return cli_usage_error("--set: at most %d", MAX_SETS);
            sets[nset++] = optarg;
            break;
        case O_SWEEP:
            if (nsweep == MAX_SWEEPS)
                return cli_usage_error("--sweep: at most %d", MAX_SWEEPS);
            sweeps[nsweep++] = optarg;
            break;
        case O_OUT: out = optarg; break;
        case O_CAL: cal = optarg; break;
        case O_CALBYTES:
            if (cli_parse_size(optarg, &cal_bytes))
                return cli_usage_error("--calibrate-bytes %s: a size", optarg);
            break;
        default: return cli_usage_error("unknown option");
        }
    }
    if (cal)
        return calibrate(argc, argv, cal, cal_bytes, out, nset + nsweep);
    if (!cli_npos_ok(argc, argv, 1, 1))
        return EXIT_USAGE;
    static struct sim_config cfg;
    char err[512];
    if (load(argv[optind], &cfg, err, sizeof err)) {
        fprintf(stderr, "cxlpool: sim: %s\n", err);
        return EXIT_USAGE;
    }
    for (int i = 0; i < nset; i++) {
        char key[128];
        const char *eq = strchr(sets[i], '=');
        if (!eq || (size_t)(eq - sets[i]) >= sizeof key)
            return cli_usage_error("--set %s: KEY=VALUE", sets[i]);
        memcpy(key, sets[i], (size_t)(eq - sets[i]));
        key[eq - sets[i]] = '\0';
        if (sim_config_set(&cfg, key, eq + 1, err, sizeof err))
            return cli_usage_error("--set: %s", err);
    }
    if (sim_config_check(&cfg, cfg.name, err, sizeof err)) {
        fprintf(stderr, "cxlpool: sim: %s\n", err);
        return EXIT_USAGE;
    }
    if (nsweep == 0) {
        struct sim_result r;
        double t0 = cli_now_sec();
        if (sim_run(&cfg, NULL, &r, err, sizeof err)) {
            fprintf(stderr, "cxlpool: sim: %s\n", err);
            return EXIT_RUNTIME;
        }
        FILE *f = out ? fopen(out, "w") : stdout;
        if (!f) {
            sim_result_free(&r);
            return cli_report_os(-errno, out);
        }
        sim_write_json(f, &cfg, &r);
        int bad = out ? fclose(f) != 0 : fflush(f) != 0;
        fprintf(stderr, "cxlpool: sim: %s, %s, the %s order: %llu events in %.2f s "
                "(simulated %.1f s)\n", cfg.name, cxlp_policy_name(cfg.policy),
                cfg.order == SIM_ORDER_HOSTS ? "hosts" : "block", (unsigned long long)r.events,
                cli_now_sec() - t0, r.end_s);
        sim_result_free(&r);
        return bad ? cli_report_os(-EIO, out ? out : "stdout") : EXIT_OKAY;
    }
    /* the sweeps: one table */
    printf("key\tvalue\tstall_fraction\tmemory_hit_rate\tsamples_per_s\thome_bytes_per_epoch"
           "\tsim_seconds\n");
    for (int i = 0; i < nsweep; i++) {
        char key[128], vals[1024];
        const char *eq = strchr(sweeps[i], '=');
        if (!eq || (size_t)(eq - sweeps[i]) >= sizeof key || strlen(eq + 1) >= sizeof vals)
            return cli_usage_error("--sweep %s: KEY=V1,V2,...", sweeps[i]);
        memcpy(key, sweeps[i], (size_t)(eq - sweeps[i]));
        key[eq - sweeps[i]] = '\0';
        snprintf(vals, sizeof vals, "%s", eq + 1);
        char *save = NULL;
        for (char *v = strtok_r(vals, ",", &save); v; v = strtok_r(NULL, ",", &save)) {
            static struct sim_config run;
            run = cfg;
            struct sim_result r;
            if (sim_config_set(&run, key, v, err, sizeof err))
                return cli_usage_error("%s", err);
            if (sim_config_check(&run, run.name, err, sizeof err) ||
                sim_run(&run, NULL, &r, err, sizeof err)) {
                fprintf(stderr, "cxlpool: sim: %s=%s: %s\n", key, v, err);
                return EXIT_RUNTIME;
            }
            double sps, st = mean_stall(&r, &sps);
            printf("%s\t%s\t%.6f\t%.6f\t%.6g\t%.6g\t%.6g\n", key, v, st, hit_rate(&run, &r), sps,
                   epoch_home(&r), r.end_s);
            fflush(stdout);
            sim_result_free(&r);
        }
    }
    return EXIT_OKAY;
}
