/*
 * cxlpool.c - the command-line tool: dispatch, help, exit codes and the small
 * helpers every subcommand shares (size parsing, error reporting, JSON).
 *
 * Contract with scripts: stdout carries data (tables, JSON, record bytes),
 * stderr carries messages and the progress bar; the exit code says what kind
 * of failure happened (see EXIT_* in cli.h), so a script can tell "not
 * there" (4) from "broken" (3) from "misused" (2) without parsing text.
 *
 * Rejected: one getopt string for all subcommands (options differ per
 * command and a typo must be a usage error, not silently ignored); a
 * dependency on a CLI/JSON library (the output is small and flat enough that
 * printf plus one string escaper is clearer).
 */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"

const char *cli_cmd_name = "";

static const struct cli_cmd cmds[] = {
    {"topo", "show this machine's memory: NUMA nodes, HMAT, tiers, dax, CXL",
     "cxlpool topo [--json] [--sysfs-root DIR]\n"
     "  Reports NUMA nodes (with and without CPUs), HMAT access0 latency and\n"
     "  bandwidth, memory tiers, dax and CXL devices, and the backend a pool on\n"
     "  each node would use. --sysfs-root reads a captured sysfs tree instead\n"
     "  of /sys.\n",
     cli_cmd_topo},
    {"create", "create a pool (of one tier, or of tiers: dram, cxl, remote, nvme)",
     "cxlpool create POOL SIZE [--mode MODE] [--catalog-bytes N] [--lease-slots N]\n"
     "                [--coherent yes|no] [--expiry DURATION]\n"
     "cxlpool create POOL --tier KIND=MEDIA [--tier ...] [--meta-bytes N] [...]\n"
     "  Creates POOL of SIZE bytes (suffixes K M G T, KiB.., KB..). POOL is NAME\n"
     "  or shm:NAME (/dev/shm, emulated CXL: local DRAM), file:PATH,\n"
     "  numa:NODE:NAME, devdax:/dev/daxX.Y or pci:PATH (a device memory region\n"
     "  such as /sys/bus/pci/devices/D/resource2). --mode is octal (default\n"
     "  0600). --coherent no: the hosts that share this memory do not keep\n"
     "  their caches coherent (docs/hosts.md); default yes. --expiry: how long\n"
     "  a lease or the writer lock lives without a heartbeat (default 30s).\n"
     "  With --tier, POOL holds the metadata (--meta-bytes, default 128M) and\n"
     "  each tier, fastest first, is an object of its own: dram=shm:SIZE,\n"
     "  cxl=numa:NODE:SIZE, cxl=devdax:/dev/daxX.Y, nvme=file:PATH:SIZE or\n"
     "  nvme=file:/dev/BLOCKDEV[:SIZE] (shm and numa take an optional NAME\n"
     "  before SIZE). The last nvme tier is the home: ingests write there,\n"
     "  memory tiers hold copies (docs/tiers.md). remote=ucx://HOST:PORT/POOL\n"
     "  [,ucx://...] names other hosts' servers (cxlpool serve): their datasets\n"
     "  are listed and read as this pool's, staged into its memory tiers, with\n"
     "  the token from $CXLPOOL_TOKEN_FILE (docs/remote.md).\n",
     cli_cmd_create},
    {"ingest", "import raw, .npy, Megatron, Arrow, Parquet, WebDataset or JSONL as a dataset",
     "cxlpool ingest POOL NAME SRC [--format raw|npy|megatron|arrow|parquet|webdataset|jsonl|auto]\n"
     "               [--record-size N] [--dtype T] [--shard-bytes N] [--allow-empty]\n"
     "               [--no-hugepages] [--no-progress] [--json] [--shuffle SEED]\n"
     "               [--columns A,B] [--text-field F] [--tokenizer T] [--eod ID] [--workers N]\n"
     "  Imports SRC into dataset NAME. auto guesses by extension (.npy, .bin/.idx,\n"
     "  .parquet, .arrow, .tar, .jsonl; a URL goes to the Python importers; else\n"
     "  raw). raw needs --record-size (bytes per record) and takes --dtype\n"
     "  (uint8 default). A source without records is refused, in every format,\n"
     "  unless --allow-empty. arrow, parquet, webdataset and jsonl run the Python\n"
     "  importers (python3 -m cxl_dataloader.ingest: pyarrow, tarfile, tokenizers,\n"
     "  fsspec; docs/formats.md): SRC is a file, directory, glob or fsspec URL\n"
     "  (s3://, gs://, http(s)://, hf://); --columns picks fields, jsonl needs\n"
     "  --tokenizer (a tokenizer.json, or 'bytes'). The records land on 2 MiB\n"
     "  pages (shm, numa pools) unless --no-hugepages. A progress bar is drawn on\n"
     "  stderr when it is a terminal. Nothing is visible to readers until the\n"
     "  import completes; those importers resume after a kill. --shuffle SEED\n"
     "  (raw and npy) stores the records in a pseudo-random order keyed by SEED\n"
     "  (0..2^64-1): record k is input record P(k); cxlpool stat POOL NAME\n"
     "  shows the seed (docs/formats.md, \"Shuffled ingest\").\n",
     cli_cmd_ingest},
    {"ls", "list the datasets of a pool",
     "cxlpool ls POOL [--json]\n", cli_cmd_ls},
    {"stat", "show pool usage and media (or one dataset's details)",
     "cxlpool stat POOL [NAME] [--json]\n"
     "  Without NAME: sizes, free space, leases, media (and whether it is an\n"
     "  emulation of CXL), and the page size each dataset's shards have. With\n"
     "  NAME: the dataset's counts, sizes, pages and schema.\n",
     cli_cmd_stat},
    {"leases", "list the processes attached to a pool, on every host; expire a host",
     "cxlpool leases POOL [--json] [--expire HOST]\n"
     "  One line per attached process: host, host id, pid (in its own PID\n"
     "  namespace), seconds since its last heartbeat, live or expired, the\n"
     "  oldest catalog generation it pins, and how this command judges it (by\n"
     "  pid on this host, by heartbeat elsewhere). --expire HOST (a hostname,\n"
     "  host id or domain from the listing) forces the expiry of that host's\n"
     "  leases and writer lock, with a warning: its processes, if alive, lose\n"
     "  the protection of their leases.\n",
     cli_cmd_leases},
    {"verify", "check a pool's structure and every checksum",
     "cxlpool verify POOL [--json] [--quiet] [--lock]\n"
     "  Exit 0 when every structure and checksum is valid, 3 when corrupt.\n"
     "  --lock: open the pool writable, so that when writers never leave the\n"
     "  check a quiet window it checks once more holding the writer lock.\n",
     cli_cmd_verify},
    {"cat", "print one record",
     "cxlpool cat POOL NAME INDEX [--format raw|hex|dtype|json] [--input]\n"
     "  raw: the record's bytes (default when stdout is not a terminal);\n"
     "  hex: a hex dump; dtype: values by the schema's dtype and shape (default\n"
     "  on a terminal); json: the same values as JSON. --input: INDEX is the\n"
     "  record's position in the ingested file (a dataset ingested with\n"
     "  --shuffle holds input record P(k) at record k).\n",
     cli_cmd_cat},
    {"rm", "remove a dataset", "cxlpool rm POOL NAME\n", cli_cmd_rm},
    {"rewrite", "write a dataset again in this build's shard format, in its place",
     "cxlpool rewrite POOL NAME [--shard-bytes SIZE] [--no-hugepages] [--json] [--no-progress]\n"
     "  Writes every record again in shard format 4 (4 KiB block sums: what a\n"
     "  record read in part costs; `cxlpool stat POOL NAME` shows a dataset's\n"
     "  format) and puts the new dataset in the old one's place in one atomic\n"
     "  step: the same records, schema, documents and placement policy. Each\n"
     "  old shard is verified before it is copied. Needs room for a second\n"
     "  copy meanwhile. Readers that opened the dataset before keep the old\n"
     "  one until they close. --shard-bytes: the new shards' size (default:\n"
     "  the dataset's own).\n",
     cli_cmd_rewrite},
    {"migrate", "move a dataset's shards to one tier while readers read",
     "cxlpool migrate POOL NAME TIER [--threads N] [--json] [--no-progress]\n"
     "  TIER is dram, cxl, nvme (the first tier of that kind) or a tier index.\n"
     "  To a memory tier: every shard gets a copy there, kept until the next\n"
     "  migration, and loses its other copies but the home's. To the home\n"
     "  tier: every other copy is dropped. Each shard moves in one crash-safe\n"
     "  step; readers never wait.\n",
     cli_cmd_migrate},
    {"top", "watch a pool's tiers: what each holds, hit rate, MB/s in and out",
     "cxlpool top POOL [--interval SECONDS] [--count N]\n"
     "  Every interval (default 1 s), until interrupted or N tables: per tier\n"
     "  its capacity, bytes used, shard copies, the hit rate, misses, MB/s\n"
     "  copied in and evicted out, and the share of time readers waited for\n"
     "  fetches, over the interval, counted by every process on the pool;\n"
     "  then per dataset how many of its shards each tier holds.\n",
     cli_cmd_top},
    {"policy", "show or set a dataset's default placement policy",
     "cxlpool policy POOL NAME [POLICY]\n"
     "  POLICY: lookahead, lru, streaming, hot_first, full_prefetch, or default\n"
     "  (lookahead). Loaders on a pool of tiers use it unless told otherwise\n"
     "  (docs/tiers.md defines each).\n",
     cli_cmd_policy},
    {"sim", "simulate a cluster's tiers, ranks and staging engine (the loader's own policies)",
     "cxlpool sim CONFIG [--set KEY=VALUE]... [--out FILE] [--sweep KEY=V1,V2,...]...\n"
     "  CONFIG: a JSON file, or a preset: design-cluster (4 hosts x 8 GPUs, 2 TB\n"
     "  DRAM and 64 TB CXL each, an NVMe-oF archive; 10^11 samples of 2 KiB) or\n"
     "  this-machine (bench_tiers' geometry). A discrete-event simulation at\n"
     "  shard granularity that calls the loader's block order and placement\n"
     "  policies; tier figures are the configuration's, not measurements. Writes\n"
     "  JSON (per tier, rank, epoch and host) to stdout or --out; the same\n"
     "  configuration gives the same bytes. --set KEY=VALUE overrides a key\n"
     "  (policy, order.window, rank.demand, hosts, tiers.NAME.bandwidth, ...).\n"
     "  --sweep runs once per value of KEY and prints a table instead\n"
     "  (docs/sim.md).\n"
     "cxlpool sim --calibrate DIR [--calibrate-bytes 1G] [--out FILE]\n"
     "  Measures this machine: a file of that size in DIR read as whole 64 MiB\n"
     "  shards in a random order by the staging engine's reader, and a DRAM\n"
     "  copy; writes the this-machine preset with those bandwidths as a\n"
     "  configuration (the file is removed).\n",
     cli_cmd_sim},
    {"destroy", "remove a pool and everything in it",
     "cxlpool destroy POOL [--yes]\n"
     "  Asks on a terminal; elsewhere needs --yes.\n",
     cli_cmd_destroy},
    {"bench", "measure gather throughput against a plain memcpy baseline",
     "cxlpool bench gather POOL NAME [--batch 32] [--batches N] [--threads 1,2]\n"
     "                  [--rounds 5] [--seed S] [--no-thp] [--hugepages] [--json]\n"
     "  Gathers records in a seeded random order into a batch buffer through\n"
     "  cxlp_store_read + memcpy, and in the same run gathers the same records\n"
     "  in the same order from a private anonymous mapping holding a copy of\n"
     "  the dataset (the baseline; on transparent huge pages unless --no-thp).\n"
     "  The two alternate each round; throughputs are medians over the rounds,\n"
     "  the ratio the median of the per-round ratios. Each thread has its own\n"
     "  batch buffer and its own slice of the order. --hugepages first moves\n"
     "  the dataset's pool memory onto 2 MiB pages (cxlp_store_hugepages; it\n"
     "  stays so for every process).\n",
     cli_cmd_bench},
    {"order", "print or analyse a sample order: first ids, per-rank counts, shuffle quality",
     "cxlpool order [POOL NAME | --n N] [--kind random|block|sequential] [--seed S]\n"
     "              [--epoch E] [--shard-size K] [--window W] [--world W --rank R]\n"
     "              [--drop-last] [--first K] [--counts] [--quality] [--batch B]\n"
     "              [--quality-unit K] [--json]\n"
     "       cxlpool order --auto POOL NAME [--budget BYTES] [--runs auto|on|off|N]\n"
     "              [--ramp | --no-ramp] [...]\n"
     "  The order a loader reads (the library's samplers) over the records of\n"
     "  dataset NAME, or over ids 0..N-1. --first K: the first K ids of rank R\n"
     "  (the default, K = 10). --counts: every rank's count, and what --drop-last\n"
     "  drops or padding repeats. --quality (N <= 2^26): mean distinct shards per\n"
     "  batch of B (default 256; shards of --shard-size, else 4096 ids), Spearman\n"
     "  rank correlation of output vs storage order, and a chi-square test of\n"
     "  position uniformity (p = 0.001); --quality-unit K counts distinct runs of\n"
     "  K ids per batch instead of shards (to compare orders of different shard\n"
     "  sizes). --kind block needs --shard-size. --auto: the block order\n"
     "  window=\"auto\" gives dataset NAME of a pool of tiers (its staging unit,\n"
     "  sequential runs as the home's probe decides or --runs says, the ramp of\n"
     "  epoch 0), with the probe's figures (docs/tiers.md).\n",
     cli_cmd_order},
    {"serve", "serve a pool's datasets to other hosts over UCX (read-only)",
     "cxlpool serve POOL --listen ADDR:PORT --token-file F [--metrics-port P]\n"
     "  Lets other hosts read POOL's catalog, shard tables and shard bytes over\n"
     "  UCX (docs/remote.md); the pool is opened read-only. F holds the shared\n"
     "  secret clients must present; the server refuses to start without it, or\n"
     "  when group or others may access F (chmod 600). PORT 0: any free port.\n"
     "  Prints \"listening on ADDR:PORT\" once listening, logs each client\n"
     "  (and each refusal, with its reason) on stderr; --metrics-port P serves\n"
     "  Prometheus text at http://ADDR:P/metrics. SIGTERM: drain and exit 0.\n"
     "  A build without UCX says so (exit 1).\n",
     cli_cmd_serve},
    {"remote-cat", "read a served dataset's records, verified, to stdout",
     "cxlpool remote-cat ucx://HOST:PORT/POOL NAME [--token-file F] [--timeout T]\n"
     "       cxlpool remote-cat ucx://HOST:PORT/POOL --list [--token-file F]\n"
     "  Reads every shard of dataset NAME from a `cxlpool serve`, verifies each\n"
     "  against its own checksums and its shard table, and writes its records'\n"
     "  bytes to stdout in order (fields back to back); a summary on stderr.\n"
     "  --list: the served catalog. --timeout (default 10s): a server that does\n"
     "  not answer fails the read with an error naming it and the shard.\n",
     cli_cmd_remote_cat},
};
#define N_CMDS (sizeof cmds / sizeof cmds[0])

static const struct cli_cmd *cur_cmd;

static void main_usage(FILE *f)
{
    fprintf(f,
            "usage: cxlpool COMMAND [ARGS] (cxlpool COMMAND --help for details)\n\n"
            "Keeps training datasets in a memory pool (CXL memory, or shared\n"
            "memory standing in for it) that many processes read at once.\n\n"
            "commands:\n");
    for (size_t i = 0; i < N_CMDS; i++)
        fprintf(f, "  %-8s %s\n", cmds[i].name, cmds[i].summary);
    fprintf(f,
            "\nPOOL: NAME or shm:NAME (shared memory /dev/shm/cxlp.NAME: emulated CXL),\n"
            "      file:PATH, numa:NODE:NAME, devdax:/dev/daxX.Y, pci:PATH\n"
            "\nexit codes:\n"
            "  0  success\n"
            "  1  runtime error (message names the file, field or offset)\n"
            "  2  usage error (also an argument the library rejects: CXLP_EARG)\n"
            "  3  verify found corruption\n"
            "  4  not found (pool or dataset)\n");
}

void cli_print_usage(FILE *f)
{
    if (cur_cmd)
        fprintf(f, "usage: %s", cur_cmd->usage);
    else
        main_usage(f);
}

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "cxlpool: %s%s", cli_cmd_name, *cli_cmd_name ? ": " : "");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, " (see cxlpool %s%s--help)\n", cli_cmd_name,
            *cli_cmd_name ? " " : "");
    return EXIT_USAGE;
}

const char *cli_rc_name(int rc)
{
    static const char *names[] = {
        "CXLP_EPANIC",   "CXLP_ECORRUPT",     "CXLP_EFORMAT",  "CXLP_ELAYOUT",
        "CXLP_ENOTFOUND", "CXLP_EEXIST",      "CXLP_EFULL",    "CXLP_EBUSY",
        "CXLP_EUNSUPPORTED", "CXLP_EBADINPUT", "CXLP_EOWNER",  "CXLP_ERANGE",
        "CXLP_ENODEV",   "CXLP_ECATFULL",     "CXLP_EARG",     "CXLP_EREADONLY",
    };
    if (rc <= -CXLP_ERR_BASE && rc >= -CXLP_ERR_LAST)
        return names[-rc - CXLP_ERR_BASE];
    if (rc < 0) {
        const char *n = strerrorname_np(-rc);
        if (n)
            return n;
    }
    return "EUNKNOWN";
}

/* 1 when msg names what: the whole text, or a pool spec's path part
 * ("file:/x/p" is named by "/x/p", "shm:NAME" by "NAME"). */
static int names(const char *msg, const char *what)
{
    if (strstr(msg, what))
        return 1;
    const char *tail = strchr(what, ':');
    while (tail && tail[1]) {
        if (strstr(msg, tail + 1))
            return 1;
        tail = strchr(tail + 1, ':');
    }
    return 0;
}

int cli_report_error(int rc, const void *handle, const char *what)
{
    const char *msg = cxlp_errmsg(handle);
    /* a store's reads say what failed in the thread's message (a store is
     * shared by threads): a handle with none of its own gives way to it */
    if (handle && (!msg || !*msg))
        msg = cxlp_errmsg(NULL);
    if (!msg || !*msg || !strcmp(msg, what))
        fprintf(stderr, "cxlpool: %s: %s [%s: %s]\n", cli_cmd_name, what, cli_rc_name(rc),
                cxlp_strerror(rc));
    else if (names(msg, what))
        fprintf(stderr, "cxlpool: %s: %s [%s: %s]\n", cli_cmd_name, msg, cli_rc_name(rc),
                cxlp_strerror(rc));
    else /* the library's message lacks the subject: name it */
        fprintf(stderr, "cxlpool: %s: %s: %s [%s: %s]\n", cli_cmd_name, what, msg,
                cli_rc_name(rc), cxlp_strerror(rc));
    if (rc == CXLP_ENOTFOUND || rc == -ENOENT)
        return EXIT_NOTFOUND;
    if (rc == CXLP_EARG) /* the library judged an argument: a usage error */
        return EXIT_USAGE;
    return EXIT_RUNTIME;
}

int cli_report_os(int rc, const char *what)
{
    fprintf(stderr, "cxlpool: %s: %s [%s: %s]\n", cli_cmd_name, what, cli_rc_name(rc),
            cxlp_strerror(rc));
    return EXIT_RUNTIME;
}

int cli_open_pool(const char *spec, int readonly, cxlp_pool **out)
{
    struct cxlp_pool_opts o = {0};
    o.readonly = readonly;
    int rc = cxlp_pool_open(spec, &o, out);
    if (rc == 0)
        return 0;
    return cli_report_error(rc, NULL, spec);
}

int cli_parse_size(const char *s, uint64_t *out)
{
    return cxlp_size_parse(s, out) ? -1 : 0;
}

int cli_parse_ms(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    double mult = 1000;
    if (!strcmp(end, "ms"))
        mult = 1;
    else if (!strcmp(end, "m"))
        mult = 60000;
    else if (*end && strcmp(end, "s"))
        return -1;
    v *= mult;
    if (v >= 18446744073709551615.0)
        return -1;
    *out = (uint64_t)(v + 0.5);
    return 0;
}

int cli_parse_u64(const char *s, uint64_t *out)
{
    if (!s || !*s || *s == '-' || *s == '+')
        return -1;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

void cli_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\t': fputs("\\t", f); break;
        case '\r': fputs("\\r", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

const char *cli_fmt_bytes(uint64_t n, char *buf)
{
    static const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    double v = (double)n;
    int i = 0;
    while (v >= 1024 && i < 6) {
        v /= 1024;
        i++;
    }
    if (i == 0)
        snprintf(buf, 32, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, 32, "%.2f %s", v, u[i]);
    return buf;
}

double cli_now_sec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* getopt_long with our error conventions: returns the option, -1 at the end,
 * or -2 after reporting a usage error. */
int cli_next_opt(int argc, char **argv, const struct option *lo)
{
    opterr = 0;
    int c = getopt_long(argc, argv, ":", lo, NULL);
    if (c == '?') {
        if (optopt)
            cli_usage_error("unknown option '-%c'", optopt);
        else
            cli_usage_error("unknown option '%s'", argv[optind - 1]);
        return -2;
    }
    if (c == ':') {
        cli_usage_error("option '%s' needs a value", argv[optind - 1]);
        return -2;
    }
    return c;
}

/* Positional count check after options: want in [lo, hi]. */
int cli_npos_ok(int argc, char **argv, int lo, int hi)
{
    int n = argc - optind;
    if (n < lo) {
        cli_usage_error("missing argument%s", lo - n > 1 ? "s" : "");
        return 0;
    }
    if (n > hi) {
        cli_usage_error("unexpected argument '%s'", argv[optind + hi]);
        return 0;
    }
    return 1;
}

static int wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--"))
            break;
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        main_usage(stderr);
        return EXIT_USAGE;
    }
    const char *c = argv[1];
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
        if (argc > 2 && strcmp(c, "help") == 0) {
            for (size_t i = 0; i < N_CMDS; i++)
                if (!strcmp(argv[2], cmds[i].name)) {
                    printf("usage: %s", cmds[i].usage);
                    return EXIT_OKAY;
                }
        }
        main_usage(stdout);
        return EXIT_OKAY;
    }
    if (!strcmp(c, "--version") || !strcmp(c, "version")) {
        printf("cxlpool %s\n", cxlp_version());
        return EXIT_OKAY;
    }
    for (size_t i = 0; i < N_CMDS; i++) {
        if (strcmp(c, cmds[i].name))
            continue;
        cur_cmd = &cmds[i];
        cli_cmd_name = cmds[i].name;
        if (wants_help(argc - 1, argv + 1)) {
            cli_print_usage(stdout);
            return EXIT_OKAY;
        }
        return cmds[i].run(argc - 1, argv + 1);
    }
    fprintf(stderr, "cxlpool: unknown command '%s' (see cxlpool --help)\n", c);
    return EXIT_USAGE;
}
