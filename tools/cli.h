/*
 * cli.h - what the cxlpool subcommands share: exit codes, option parsing
 * helpers, error reporting, size parsing and JSON string output.
 *
 * Exit codes (documented in docs/cli.md and `cxlpool --help`):
 *   0 ok, 1 runtime error, 2 usage error, 3 verify found corruption,
 *   4 not found (pool or dataset).
 * A subcommand returns its exit code; main() only dispatches.
 */
#ifndef CXLPOOL_CLI_H
#define CXLPOOL_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "cxlpool.h"

enum {
    EXIT_OKAY = 0,
    EXIT_RUNTIME = 1,
    EXIT_USAGE = 2,
    EXIT_CORRUPT = 3,
    EXIT_NOTFOUND = 4,
};

/* One subcommand: name, one-line summary, usage text, entry point.
 * argv[0] is the subcommand name. */
struct cli_cmd {
    const char *name;
    const char *summary;
    const char *usage;
    int (*run)(int argc, char **argv);
};

/* Name of the subcommand now running (for messages). */
extern const char *cli_cmd_name;

/* Prints "cxlpool: CMD: MSG" plus a pointer to --help and returns EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Reports a library failure: "cxlpool: CMD: <errmsg> [CODE]" on stderr,
 * where errmsg is cxlp_errmsg(handle) (handle may be NULL: the thread's last
 * message), prefixed by "what: " unless the message already names what (a
 * path, pool or dataset name), so every message names its subject.
 * Returns the exit code for rc: EXIT_NOTFOUND for a missing pool or dataset,
 * EXIT_USAGE for CXLP_EARG (an argument the library rejects), else
 * EXIT_RUNTIME. */
int cli_report_error(int rc, const void *handle, const char *what);

/* Reports a failure outside the library (rc: -errno) about what. */
int cli_report_os(int rc, const char *what);

/* Symbolic name of rc: "CXLP_ECORRUPT", "ENOENT", ... */
const char *cli_rc_name(int rc);

struct option;
/* getopt_long with our conventions: options may follow positionals; returns
 * the option, -1 at the end, or -2 after reporting a usage error. */
int cli_next_opt(int argc, char **argv, const struct option *lo);
/* After options: the positional count must lie in [lo, hi]; else reports a
 * usage error and returns 0. */
int cli_npos_ok(int argc, char **argv, int lo, int hi);

/* Prints the usage of the running subcommand to f. */
void cli_print_usage(FILE *f);

/* Parses "123", "4K", "1.5G", "64MiB", "1TB" into bytes. K/M/G/T/P and
 * KiB..PiB are powers of 1024; KB..PB powers of 1000. 0 or -1 (bad text or
 * overflow). */
int cli_parse_size(const char *s, uint64_t *out);
/* A duration in milliseconds: "1500ms", "30s", "2m", or plain seconds
 * ("30", "0.5"). 0 or -1. */
int cli_parse_ms(const char *s, uint64_t *out);
/* Plain unsigned integer (decimal or 0x hex). 0 or -1. */
int cli_parse_u64(const char *s, uint64_t *out);

/* Writes s as a JSON string literal (quotes and escapes). */
void cli_json_str(FILE *f, const char *s);

/* Human-readable bytes: "1.50 GiB". buf of at least 32 bytes. */
const char *cli_fmt_bytes(uint64_t n, char *buf);

/* Seconds since an arbitrary start (CLOCK_MONOTONIC). */
double cli_now_sec(void);

/* Opens POOL for a subcommand; on failure reports and returns the exit code
 * (negated exit code never 0). Returns 0 and *out on success. */
int cli_open_pool(const char *spec, int readonly, cxlp_pool **out);

/* The subcommands. */
int cli_cmd_topo(int argc, char **argv);
int cli_cmd_create(int argc, char **argv);
int cli_cmd_ingest(int argc, char **argv);
int cli_cmd_ls(int argc, char **argv);
int cli_cmd_stat(int argc, char **argv);
int cli_cmd_leases(int argc, char **argv);
int cli_cmd_verify(int argc, char **argv);
int cli_cmd_cat(int argc, char **argv);
int cli_cmd_rm(int argc, char **argv);
int cli_cmd_rewrite(int argc, char **argv);
int cli_cmd_destroy(int argc, char **argv);
int cli_cmd_bench(int argc, char **argv);
int cli_cmd_order(int argc, char **argv);
int cli_cmd_migrate(int argc, char **argv);
int cli_cmd_top(int argc, char **argv);
int cli_cmd_policy(int argc, char **argv);
int cli_cmd_sim(int argc, char **argv);
int cli_cmd_serve(int argc, char **argv);
int cli_cmd_remote_cat(int argc, char **argv);

/* The pool's tiers: a table (pools of more than one tier), or a JSON array. */
void cli_print_tiers(cxlp_pool *p, int json);

/* Progress bar on stderr for ingest (only drawn on a terminal). */
struct progress {
    double t0;
    double last_draw;
    int drawn;
};
void cli_progress_cb(void *ctx, uint64_t done, uint64_t total);
void cli_progress_end(struct progress *pg);
/* "WHAT: done/total shards (pct%)" on stderr, redrawn at most five times a
 * second, when show (a terminal); the callback of migrate and rewrite. */
struct shards_progress {
    const char *what;
    double last;
    int show;
};
void cli_shards_progress(void *ctx, uint64_t done, uint64_t total);

/* Half-precision conversions for `cat` (IEEE binary16 and bfloat16). */
double cli_half_to_double(uint16_t h);
double cli_bf16_to_double(uint16_t h);

#endif
