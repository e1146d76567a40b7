/*
 * cmd_pool.c - the subcommands that manage pools and datasets: topo, create,
 * ingest, ls, stat, leases, verify, rm, destroy. (cat is in cmd_cat.c, bench
 * in cmd_bench.c.)
 *
 * Every command opens the pool read-only unless it writes, so inspecting a
 * pool never needs write permission and never takes the writer lock.
 */
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/common.h"

/* ---------------------------------------------------------------- topo */

int cli_cmd_topo(int argc, char **argv)
{
    static const struct option lo[] = {
        {"json", no_argument, 0, 'j'},
        {"sysfs-root", required_argument, 0, 'r'},
        {0, 0, 0, 0},
    };
    int json = 0;
    const char *root = NULL;
    int c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        if (c == -2)
            return EXIT_USAGE;
        if (c == 'j')
            json = 1;
        else if (c == 'r')
            root = optarg;
    }
    if (!cli_npos_ok(argc, argv, 0, 0))
        return EXIT_USAGE;
    cxlp_topo *t;
    int rc = cxlp_topo_discover(root, &t);
    if (rc)
        return cli_report_error(rc, NULL, root ? root : "/sys");
    rc = cxlp_topo_print(t, stdout, json);
    int ex = rc ? cli_report_error(rc, t, "cannot print topology") : EXIT_OKAY;
    cxlp_topo_free(t);
    return ex;
}

/* -------------------------------------------------------------- create */

int cli_cmd_create(int argc, char **argv)
{
    static const struct option lo[] = {
        {"mode", required_argument, 0, 'm'},
        {"catalog-bytes", required_argument, 0, 'c'},
        {"lease-slots", required_argument, 0, 'l'},
        {"tier", required_argument, 0, 't'},
        {"meta-bytes", required_argument, 0, 'M'},
        {"coherent", required_argument, 0, 'C'},
        {"expiry", required_argument, 0, 'e'},
        {0, 0, 0, 0},
    };
    struct cxlp_pool_opts o = {0};
    const char *tiers[16];
    size_t n_tiers = 0;
    int c;
    uint64_t v;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        char *end;
        switch (c) {
        case -2:
            return EXIT_USAGE;
        case 'm':
            v = strtoull(optarg, &end, 8);
            if (!*optarg || *end || v > 07777)
                return cli_usage_error("--mode: '%s' is not an octal file mode", optarg);
            o.mode = (uint32_t)v;
            break;
        case 'c':
            if (cli_parse_size(optarg, &o.catalog_bytes) || !o.catalog_bytes)
                return cli_usage_error("--catalog-bytes: '%s' is not a size", optarg);
            break;
        case 'l':
            if (cli_parse_u64(optarg, &v) || v == 0 || v > UINT32_MAX)
                return cli_usage_error("--lease-slots: '%s' is not a count", optarg);
            o.lease_slots = (uint32_t)v;
            break;
        case 't':
            if (n_tiers == sizeof tiers / sizeof tiers[0])
                return cli_usage_error("--tier: at most %zu", sizeof tiers / sizeof tiers[0]);
            tiers[n_tiers++] = optarg;
            break;
        case 'M':
            if (cli_parse_size(optarg, &o.meta_bytes) || !o.meta_bytes)
                return cli_usage_error("--meta-bytes: '%s' is not a size", optarg);
            break;
        case 'C':
            if (strcmp(optarg, "yes") && strcmp(optarg, "no"))
                return cli_usage_error("--coherent: '%s' is not yes or no", optarg);
            o.noncoherent = strcmp(optarg, "no") == 0;
            break;
        case 'e':
            if (cli_parse_ms(optarg, &v) || v == 0 || v > UINT32_MAX)
                return cli_usage_error("--expiry: '%s' is not a duration (e.g. 30s, 1500ms)",
                                       optarg);
            o.expiry_ms = (uint32_t)v;
            break;
        }
    }
    if (!cli_npos_ok(argc, argv, n_tiers ? 1 : 2, n_tiers ? 1 : 2))
        return EXIT_USAGE;
    const char *spec = argv[optind];
    uint64_t size = 0;
    if (!n_tiers && (cli_parse_size(argv[optind + 1], &size) || size == 0))
        return cli_usage_error("SIZE: '%s' is not a size (e.g. 4G, 512MiB)", argv[optind + 1]);
    if (!n_tiers && o.meta_bytes)
        return cli_usage_error("--meta-bytes: only with --tier (a pool of one tier holds its "
                               "metadata in SIZE)");
    cxlp_pool *p;
    int rc = n_tiers ? cxlp_pool_create_tiered(spec, tiers, n_tiers, &o, &p)
                     : cxlp_pool_create(spec, size, &o, &p);
    if (rc)
        return cli_report_error(rc, NULL, spec);
    struct cxlp_pool_stat st;
    struct cxlp_tier_info ti[8];
    size_t nt = 0;
    char b1[32], b2[32], b3[32];
    if (cxlp_pool_stat(p, &st) == 0 && (!n_tiers || cxlp_pool_tiers(p, ti, 8, &nt) == 0)) {
        /* each number says what it is: a pool of one tier is one object
         * whose data area holds the datasets; a pool of tiers keeps shards in
         * its tiers and only metadata in the pool object */
        printf("created pool %s: ", spec);
        if (!n_tiers) {
            printf("size %s, data area %s", cli_fmt_bytes(st.size, b1),
                   cli_fmt_bytes(st.data_bytes, b2));
        } else {
            uint64_t shards = 0;
            for (size_t i = 0; i < nt && i < 8; i++)
                if (ti[i].kind != CXLP_TIER_REMOTE) /* a span of addresses, not room */
                    shards += ti[i].capacity;
            uint64_t meta = st.data_bytes > shards ? st.data_bytes - shards : 0;
            printf("%zu tiers, %s for shards (below); pool object %s of metadata (shard "
                   "tables: %s, --meta-bytes)", nt, cli_fmt_bytes(shards, b1),
                   cli_fmt_bytes(st.size, b2), cli_fmt_bytes(meta, b3));
        }
        printf(", at %s, media %s%s, %scoherent, expiry %.1f s\n", st.path,
               cxlp_media_name(st.media), st.emulated ? " (emulated CXL)" : "",
               st.coherent ? "" : "non-", st.expiry_ms / 1000.0);
    } else {
        printf("created pool %s\n", spec);
    }
    if (n_tiers)
        cli_print_tiers(p, 0);
    cxlp_pool_close(p);
    return EXIT_OKAY;
}

/* -------------------------------------------------------------- ingest */

static void print_dataset_json(const struct cxlp_dataset_info *d, int shuffled, uint64_t seed);

/* Formats whose trusted readers are Python libraries (pyarrow, tarfile,
 * json + tokenizers, fsspec): `cxlpool ingest` hands them to the
 * cxl_dataloader package rather than parsing them here. */
static const char *const py_formats[] = {"arrow", "parquet", "webdataset", "jsonl"};

static int is_py_format(const char *f)
{
    for (size_t i = 0; i < sizeof py_formats / sizeof py_formats[0]; i++)
        if (!strcmp(f, py_formats[i]))
            return 1;
    return 0;
}

/* auto: a URL, or a name ending in one of those formats' extensions. */
static int looks_py(const char *src)
{
    static const char *const ext[] = {".parquet", ".arrow", ".feather", ".tar", ".jsonl",
                                      ".jsonl.gz", ".tar.gz"};
    if (strstr(src, "://"))
        return 1;
    size_t n = strlen(src);
    for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
        size_t k = strlen(ext[i]);
        if (n > k && !strcmp(src + n - k, ext[i]))
            return 1;
    }
    return 0;
}

/* Replaces this process with `python3 -m cxl_dataloader.ingest ARGS`: the
 * interpreter from CXLPOOL_PYTHON (the wheel's `cxlpool` command sets it
 * to its own), else the python3 installed beside this binary, else python3
 * on PATH. */
static int exec_py_ingest(char **args)
{
    char exe[4096], py[4200];
    const char *env = getenv("CXLPOOL_PYTHON");
    const char *interp = env && *env ? env : "python3";
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (!(env && *env) && n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(py, sizeof py, "%s/python3", exe);
            if (access(py, X_OK) == 0)
                interp = py;
        }
    }
    args[0] = (char *)interp;
    execvp(interp, args);
    fprintf(stderr, "cxlpool: ingest: cannot run %s for this format (%s); set CXLPOOL_PYTHON "
            "to a python3 with the cxl_dataloader package\n", interp, strerror(errno));
    return EXIT_RUNTIME;
}

int cli_cmd_ingest(int argc, char **argv)
{
    static const struct option lo[] = {
        {"format", required_argument, 0, 'f'},
        {"record-size", required_argument, 0, 'r'},
        {"dtype", required_argument, 0, 'd'},
        {"shard-bytes", required_argument, 0, 's'},
        {"no-progress", no_argument, 0, 'n'},
        {"no-hugepages", no_argument, 0, 'H'},
        {"json", no_argument, 0, 'j'},
        {"allow-empty", no_argument, 0, 'a'},
        {"columns", required_argument, 0, 'c'},
        {"text-field", required_argument, 0, 't'},
        {"tokenizer", required_argument, 0, 'k'},
        {"eod", required_argument, 0, 'e'},
        {"workers", required_argument, 0, 'w'},
        {"shuffle", required_argument, 0, 'S'},
        {0, 0, 0, 0},
    };
    struct cxlp_import_opts o = {0};
    o.format = CXLP_FMT_AUTO;
    o.dtype = -1;
    int show = 1, json = 0, c, py = 0;
    /* the arguments for the Python importers, built as we go */
    char *pyargs[32] = {NULL, "-m", "cxl_dataloader.ingest"};
    int np = 3;
    char shard_num[32];
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        switch (c) {
        case -2:
            return EXIT_USAGE;
        case 'c': case 't': case 'k': case 'e': case 'w':
            py |= 2; /* options only those importers take */
            pyargs[np++] = (char *)(c == 'c' ? "--columns" : c == 't' ? "--text-field" :
                                    c == 'k' ? "--tokenizer" : c == 'e' ? "--eod" : "--workers");
            pyargs[np++] = optarg;
            break;
        case 'f':
            if (is_py_format(optarg)) {
                py |= 1;
                pyargs[np++] = "--format";
                pyargs[np++] = optarg;
                break;
            }
            o.format = cxlp_format_parse(optarg);
            if (o.format < 0)
                return cli_usage_error("--format: '%s' is not raw, npy, megatron, arrow, parquet, "
                                       "webdataset, jsonl or auto", optarg);
            break;
        case 'r':
            if (cli_parse_size(optarg, &o.record_size) || !o.record_size)
                return cli_usage_error("--record-size: '%s' is not a positive size", optarg);
            break;
        case 'd':
            o.dtype = cxlp_dtype_parse(optarg);
            if (o.dtype < 0)
                return cli_usage_error("--dtype: unknown dtype '%s' (uint8, int32, float16, ...)",
                                   optarg);
            break;
        case 's':
            if (cli_parse_size(optarg, &o.shard_bytes) || !o.shard_bytes)
                return cli_usage_error("--shard-bytes: '%s' is not a positive size", optarg);
            break;
        case 'n':
            show = 0;
            break;
        case 'H':
            o.no_hugepages = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 'a':
            o.allow_empty = 1;
            break;
        case 'S':
            /* digits only: strtoull would take leading blanks */
            if (!isdigit((unsigned char)optarg[0]) || cli_parse_u64(optarg, &o.shuffle_seed))
                return cli_usage_error("--shuffle: '%s' is not a seed (an integer from 0 to "
                                       "2^64-1)", optarg);
            o.shuffle = 1;
            break;
        }
    }
    if (!cli_npos_ok(argc, argv, 3, 3))
        return EXIT_USAGE;
    const char *spec = argv[optind], *name = argv[optind + 1], *src = argv[optind + 2];
    if (!*name || strlen(name) >= CXLP_NAME_MAX)
        return cli_usage_error("NAME: must be 1..%d bytes", CXLP_NAME_MAX - 1);
    if (py == 2 && o.format != CXLP_FMT_AUTO)
        return cli_usage_error("--columns, --text-field, --tokenizer, --eod and --workers are "
                               "for --format arrow, parquet, webdataset or jsonl");
    if (py || (o.format == CXLP_FMT_AUTO && looks_py(src))) {
        if (o.record_size || o.dtype >= 0)
            return cli_usage_error("--record-size and --dtype are for raw records");
        if (o.shuffle)
            return cli_usage_error("--shuffle: only raw and npy inputs are shuffled at ingest, "
                                   "not %s", py & 1 ? "--format arrow, parquet, webdataset or "
                                   "jsonl" : src);
        if (o.allow_empty)
            pyargs[np++] = "--allow-empty";
        if (o.shard_bytes) {
            snprintf(shard_num, sizeof shard_num, "%" PRIu64, o.shard_bytes);
            pyargs[np++] = "--shard-bytes";
            pyargs[np++] = shard_num;
        }
        if (!show)
            pyargs[np++] = "--no-progress";
        if (o.no_hugepages)
            pyargs[np++] = "--no-hugepages";
        if (json)
            pyargs[np++] = "--json";
        pyargs[np++] = (char *)spec;
        pyargs[np++] = (char *)name;
        pyargs[np++] = (char *)src;
        pyargs[np] = NULL;
        fflush(stdout);
        return exec_py_ingest(pyargs);
    }
    if (access(src, F_OK) != 0) {
        /* Megatron prefixes name no file themselves; let the importer judge. */
        char b[4096];
        snprintf(b, sizeof b, "%s.idx", src);
        if (access(b, F_OK) != 0) {
            fprintf(stderr, "cxlpool: ingest: %s: no such file\n", src);
            return EXIT_RUNTIME;
        }
    }
    cxlp_pool *p;
    int ex = cli_open_pool(spec, 0, &p);
    if (ex)
        return ex;
    struct progress pg = {0};
    pg.t0 = cli_now_sec();
    if (show && isatty(STDERR_FILENO)) {
        o.progress = cli_progress_cb;
        o.progress_ctx = &pg;
    }
    int rc = cxlp_import(p, name, src, &o);
    double secs = cli_now_sec() - pg.t0;
    cli_progress_end(&pg);
    if (rc) {
        ex = cli_report_error(rc, p, src);
        /* A missing source is a runtime error, not a missing pool/dataset. */
        if (rc == -ENOENT)
            ex = EXIT_RUNTIME;
        cxlp_pool_close(p);
        return ex;
    }
    cxlp_store *s;
    struct cxlp_dataset_info d;
    rc = cxlp_store_open(p, name, &s);
    if (rc == 0) {
        rc = cxlp_store_info(s, &d);
        cxlp_store_close(s);
    }
    if (rc) {
        ex = cli_report_error(rc, p, name);
        cxlp_pool_close(p);
        return ex;
    }
    double gbs = secs > 0 ? (double)d.data_bytes / secs / 1e9 : 0;
    if (json) {
        printf("{\"dataset\": ");
        print_dataset_json(&d, o.shuffle, o.shuffle_seed);
        printf(", \"seconds\": %.6f, \"gb_per_s\": %.4f}\n", secs, gbs);
    } else {
        char b[32];
        printf("ingested %s: %" PRIu64 " records, %" PRIu64 " bytes (%s) in %.3f s, %.2f GB/s",
               name, d.n_records, d.data_bytes, cli_fmt_bytes(d.data_bytes, b), secs, gbs);
        if (d.n_docs)
            printf(", %" PRIu64 " documents", d.n_docs);
        if (o.shuffle)
            printf(", shuffled with seed %" PRIu64, o.shuffle_seed);
        printf("\n");
    }
    cxlp_pool_close(p);
    return EXIT_OKAY;
}

/* ------------------------------------------------------------------ ls */

static int list_pool(void *p, struct cxlp_dataset_info *infos, size_t cap, size_t *n)
{
    return cxlp_pool_list(p, infos, cap, n);
}

/* The keys of pool.datasets() and CXLDataset.info() (test_api.py). */
static void print_dataset_json(const struct cxlp_dataset_info *d, int shuffled, uint64_t seed)
{
    printf("{\"name\": ");
    cli_json_str(stdout, d->name);
    printf(", \"version\": %" PRIu64 ", \"records\": %" PRIu64 ", \"data_bytes\": %" PRIu64
           ", \"stored_bytes\": %" PRIu64 ", \"shards\": %u, \"fixed\": %s"
           ", \"record_size\": %" PRIu64 ", \"docs\": %" PRIu64 ", \"created_unix\": %" PRIu64,
           d->version, d->n_records, d->data_bytes, d->stored_bytes, d->n_shards,
           d->fixed ? "true" : "false", d->record_size, d->n_docs, d->created_unix);
    if (shuffled)
        printf(", \"ingest_shuffle\": {\"seed\": %" PRIu64 "}}", seed);
    else
        printf(", \"ingest_shuffle\": null}");
}

int cli_cmd_ls(int argc, char **argv)
{
    static const struct option lo[] = {{"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
    int json = 0, c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        if (c == -2)
            return EXIT_USAGE;
        json = 1;
    }
    if (!cli_npos_ok(argc, argv, 1, 1))
        return EXIT_USAGE;
    cxlp_pool *p;
    int ex = cli_open_pool(argv[optind], 1, &p);
    if (ex)
        return ex;
    struct cxlp_dataset_info *v;
    size_t n;
    int rc = list_all(list_pool, p, &v, &n);
    if (rc) {
        ex = cli_report_error(rc, p, argv[optind]);
        cxlp_pool_close(p);
        return ex;
    }
    /* how each was ingested; one removed since the listing counts as not
     * shuffled */
    int *shuf = calloc(n ? n : 1, sizeof *shuf);
    uint64_t *seeds = calloc(n ? n : 1, sizeof *seeds);
    if (!shuf || !seeds)
        rc = -ENOMEM;
    for (size_t i = 0; !rc && i < n; i++) {
        int r = cxlp_pool_ingest_shuffle(p, v[i].name, &seeds[i]);
        if (r >= 0)
            shuf[i] = r;
        else if (r != CXLP_ENOTFOUND)
            rc = r;
    }
    if (rc) {
        ex = cli_report_error(rc, p, argv[optind]);
        free(shuf);
        free(seeds);
        free(v);
        cxlp_pool_close(p);
        return ex;
    }
    if (json) {
        printf("[");
        for (size_t i = 0; i < n; i++) {
            printf(i ? ",\n " : "");
            print_dataset_json(&v[i], shuf[i], seeds[i]);
        }
        printf("]\n");
    } else if (n == 0) {
        printf("(no datasets)\n");
    } else {
        printf("%-24s %14s %-14s %12s %12s %6s %10s %8s %s\n", "NAME", "RECORDS", "RECORD",
               "DATA", "STORED", "SHARDS", "DOCS", "VERSION", "SHUFFLE");
        for (size_t i = 0; i < n; i++) {
            char rec[32], b1[32], b2[32];
            if (v[i].fixed)
                snprintf(rec, sizeof rec, "fixed %" PRIu64 " B", v[i].record_size);
            else
                snprintf(rec, sizeof rec, "variable");
            char sh[32] = "-";
            if (shuf[i])
                snprintf(sh, sizeof sh, "seed %" PRIu64, seeds[i]);
            printf("%-24s %14" PRIu64 " %-14s %12s %12s %6u %10" PRIu64 " %8" PRIu64 " %s\n",
                   v[i].name, v[i].n_records, rec, cli_fmt_bytes(v[i].data_bytes, b1),
                   cli_fmt_bytes(v[i].stored_bytes, b2), v[i].n_shards, v[i].n_docs,
                   v[i].version, sh);
        }
    }
    free(shuf);
    free(seeds);
    free(v);
    cxlp_pool_close(p);
    return EXIT_OKAY;
}

/* ---------------------------------------------------------------- stat */

static const char *media_desc(const struct cxlp_pool_stat *st, char *buf, size_t cap)
{
    switch (st->media) {
    case CXLP_MEDIA_SHM:
        snprintf(buf, cap, "shm (emulated CXL: local DRAM)");
        break;
    case CXLP_MEDIA_FILE:
        snprintf(buf, cap, "file (%s)", st->emulated ? "emulated CXL: file-backed memory"
                                                      : "DAX filesystem");
        break;
    case CXLP_MEDIA_NUMA:
        if (st->numa_interleave)
            snprintf(buf, cap, "numa nodes %s, interleaved (%s)", st->numa_nodes,
                     st->emulated ? "emulated CXL: NUMA nodes with local DRAM among them"
                                  : "memory interleaved over NUMA nodes");
        else
            snprintf(buf, cap, "numa node %d (%s)", st->numa_node,
                     st->emulated ? "emulated CXL: a NUMA node of local DRAM"
                                  : "memory bound to a NUMA node");
        break;
    case CXLP_MEDIA_DEVDAX:
        snprintf(buf, cap, "devdax (%s)", st->emulated ? "emulated" : "device-dax memory");
        break;
    case CXLP_MEDIA_PCI:
        snprintf(buf, cap, "pci (%s)",
                 st->emulated == 2 ? "emulated CXL: a plain file, no PCI device"
                 : st->emulated    ? "emulated CXL: QEMU ivshmem shared memory"
                                   : "a PCI memory BAR");
        break;
    default:
        snprintf(buf, cap, "%s%s", cxlp_media_name(st->media), st->emulated ? " (emulated)" : "");
    }
    return buf;
}

static void uuid_str(const uint8_t u[16], char out[37])
{
    int k = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[k++] = '-';
        k += sprintf(out + k, "%02x", u[i]);
    }
    out[k] = 0;
}

/* "2 MiB pages: 1.00 GiB of 1.00 GiB (99.8%)" */
static void print_pages(uint64_t bytes, uint64_t huge)
{
    char b1[32], b2[32];
    printf("2 MiB pages for %s of %s (%.1f%%), 4 KiB pages for the rest\n",
           cli_fmt_bytes(huge, b1), cli_fmt_bytes(bytes, b2),
           bytes ? 100.0 * (double)huge / (double)bytes : 0.0);
}

/* What cxlp_store_format says, in words: "shard format 4, blocks of 4.00
 * KiB[, sums in a sums area]", "shard format 2, no block sums", "no
 * shards". */
static const char *shard_format_str(uint32_t format, uint64_t block, int area, char *buf,
                                    size_t cap)
{
    char b[32];
    if (!format)
        snprintf(buf, cap, "no shards");
    else if (!block)
        snprintf(buf, cap, "shard format %u, no block sums", format);
    else
        snprintf(buf, cap, "shard format %u, blocks of %s%s", format, cli_fmt_bytes(block, b),
                 area ? ", sums in a sums area" : "");
    return buf;
}

static int stat_dataset(cxlp_pool *p, const char *name, int json)
{
    cxlp_store *s;
    int rc = cxlp_store_open(p, name, &s);
    if (rc)
        return cli_report_error(rc, p, name);
    struct cxlp_dataset_info d;
    rc = cxlp_store_info(s, &d);
    if (rc) {
        int ex = cli_report_error(rc, s, name);
        cxlp_store_close(s);
        return ex;
    }
    const struct cxlp_schema *sc = cxlp_store_schema(s);
    uint64_t pbytes = 0, phuge = 0, block = 0;
    uint32_t format = 0;
    int area = 0;
    /* page sizes: of a pool of one tier (copies on a pool of tiers come and
     * go: cxlpool stat POOL and cxlpool top say where they are) */
    rc = cxlp_store_pages(s, &pbytes, &phuge);
    const int pages = rc == 0;
    if (rc == CXLP_EUNSUPPORTED)
        rc = 0;
    if (!rc)
        rc = cxlp_store_format(s, &format, &block, &area);
    uint64_t seed = 0;
    const int shuffled = cxlp_store_ingest_shuffle(s, &seed) == 1;
    if (rc) {
        int ex = cli_report_error(rc, NULL, name);
        cxlp_store_close(s);
        return ex;
    }
    if (json) {
        printf("{\"dataset\": ");
        print_dataset_json(&d, shuffled, seed);
        if (pages)
            printf(", \"pages\": {\"bytes\": %" PRIu64 ", \"huge_bytes\": %" PRIu64 "}",
                   pbytes, phuge);
        else
            printf(", \"pages\": null");
        if (format)
            printf(", \"shard_format\": {\"version\": %u, \"block_bytes\": %" PRIu64
                   ", \"sums_area\": %s}", format, block, area ? "true" : "false");
        else
            printf(", \"shard_format\": null"); /* no shards */
        printf(", \"schema\": {\"fixed\": %s, \"record_size\": %" PRIu64 ", \"fields\": [",
               sc->fixed ? "true" : "false", sc->record_size);
        for (uint32_t i = 0; i < sc->n_fields && i < CXLP_MAX_FIELDS; i++) {
            const struct cxlp_field *f = &sc->fields[i];
            printf("%s{\"name\": ", i ? ", " : "");
            cli_json_str(stdout, f->name);
            printf(", \"dtype\": \"%s\", \"shape\": [", cxlp_dtype_name(f->dtype));
            for (int k = 0; k < f->ndim && k < CXLP_MAX_DIMS; k++)
                printf("%s%" PRIu64, k ? ", " : "", f->shape[k]);
            printf("], \"variable\": %s, \"offset\": %" PRIu64 "}",
                   CXLP_FIELD_VAR(f) ? "true" : "false", f->offset);
        }
        printf("]}}\n");
    } else {
        char b1[32], b2[32];
        printf("dataset:  %s\nversion:  %" PRIu64 "\nrecords:  %" PRIu64 "\n", d.name, d.version,
               d.n_records);
        printf("data:     %" PRIu64 " bytes (%s)\nstored:   %" PRIu64 " bytes (%s)\n",
               d.data_bytes, cli_fmt_bytes(d.data_bytes, b1), d.stored_bytes,
               cli_fmt_bytes(d.stored_bytes, b2));
        printf("shards:   %u\n", d.n_shards);
        if (d.fixed)
            printf("records:  fixed, %" PRIu64 " bytes each\n", d.record_size);
        else
            printf("records:  variable size\n");
        if (d.n_docs)
            printf("docs:     %" PRIu64 "\n", d.n_docs);
        if (shuffled)
            printf("order:    shuffled at ingest, seed %" PRIu64 " (record k is input record "
                   "P(k); Python: CXLDataset.source_index)\n", seed);
        printf("pages:    ");
        if (pages)
            print_pages(pbytes, phuge);
        else
            printf("not reported on a pool of tiers (copies move between tiers)\n");
        char fb[96];
        printf("format:   %s%s\n", shard_format_str(format, block, area, fb, sizeof fb),
               !format || format >= 4 ? ""
               : !block ? " (a partial read reads whole shards; cxlpool rewrite for 4 KiB blocks)"
                        : " (cxlpool rewrite for 4 KiB blocks)");
        printf("schema:\n");
        for (uint32_t i = 0; i < sc->n_fields && i < CXLP_MAX_FIELDS; i++) {
            const struct cxlp_field *f = &sc->fields[i];
            printf("  %-16s %-8s [", f->name[0] ? f->name : "(unnamed)",
                   cxlp_dtype_name(f->dtype));
            for (int k = 0; k < f->ndim && k < CXLP_MAX_DIMS && !CXLP_FIELD_VAR(f); k++)
                printf("%s%" PRIu64, k ? ", " : "", f->shape[k]);
            if (CXLP_FIELD_VAR(f))
                printf("variable]");
            else
                printf("]");
            if (sc->fixed)
                printf(" at +%" PRIu64, f->offset);
            printf("\n");
        }
    }
    cxlp_store_close(s);
    return EXIT_OKAY;
}

int cli_cmd_stat(int argc, char **argv)
{
    static const struct option lo[] = {{"json", no_argument, 0, 'j'}, {0, 0, 0, 0}};
    int json = 0, c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        if (c == -2)
            return EXIT_USAGE;
        json = 1;
    }
    if (!cli_npos_ok(argc, argv, 1, 2))
        return EXIT_USAGE;
    cxlp_pool *p;
    const char *spec = argv[optind];
    int ex = cli_open_pool(spec, 1, &p);
    if (ex)
        return ex;
    if (argc - optind == 2) {
        ex = stat_dataset(p, argv[optind + 1], json);
        cxlp_pool_close(p);
        return ex;
    }
    struct cxlp_pool_stat st;
    int rc = cxlp_pool_stat(p, &st);
    if (rc) {
        ex = cli_report_error(rc, p, spec);
        cxlp_pool_close(p);
        return ex;
    }
    char md[192], uu[37];
    media_desc(&st, md, sizeof md);
    uuid_str(st.uuid, uu);
    /* the page size each dataset's shards really have */
    struct cxlp_dataset_info *ds = NULL;
    size_t nds = 0;
    rc = list_all(list_pool, p, &ds, &nds);
    if (rc) {
        ex = cli_report_error(rc, p, spec);
        cxlp_pool_close(p);
        return ex;
    }
    uint64_t *pg = calloc(3 * (nds ? nds : 1), sizeof *pg); /* bytes, huge, tiered */
    for (size_t i = 0; pg && i < nds && !rc; i++) {
        cxlp_store *s;
        rc = cxlp_store_open(p, ds[i].name, &s);
        if (!rc) {
            /* a tiered dataset's copies move: the tier table says where */
            pg[2 * nds + i] = (uint64_t)cxlp_store_tiered(s);
            if (!pg[2 * nds + i])
                rc = cxlp_store_pages(s, &pg[2 * i], &pg[2 * i + 1]);
            cxlp_store_close(s);
        }
        if (rc)
            ex = cli_report_error(rc, NULL, ds[i].name);
    }
    if (!pg || rc) {
        if (!pg)
            ex = cli_report_os(-ENOMEM, "dataset pages");
        free(pg);
        free(ds);
        cxlp_pool_close(p);
        return ex;
    }
    if (json) {
        printf("{\"pool\": ");
        cli_json_str(stdout, spec);
        printf(", \"path\": ");
        cli_json_str(stdout, st.path);
        printf(", \"media\": \"%s\", \"emulated\": %s, \"numa_node\": %d, \"numa_interleave\": %s"
               ", \"numa_nodes\": \"%s\", \"near_node\": %d, \"media_desc\": ",
               cxlp_media_name(st.media), st.emulated ? "true" : "false", st.numa_node,
               st.numa_interleave ? "true" : "false", st.numa_nodes, st.near_node);
        cli_json_str(stdout, md);
        printf(", \"format_version\": %u, \"uuid\": \"%s\", \"size\": %" PRIu64
               ", \"data_bytes\": %" PRIu64 ", \"used_bytes\": %" PRIu64
               ", \"reserved_bytes\": %" PRIu64 ", \"reserved_dead_bytes\": %" PRIu64
               ", \"deferred_bytes\": %" PRIu64
               ", \"free_bytes\": %" PRIu64 ", \"largest_free\": %" PRIu64
               ", \"generation\": %" PRIu64 ", \"datasets\": %u, \"live_leases\": %u"
               ", \"lease_slots\": %u, \"coherent\": %s, \"expiry_ms\": %" PRIu64
               ", \"hosts\": %u, \"host_id\": \"%016" PRIx64 "\", \"host_id_source\": ",
               st.format_version, uu, st.size, st.data_bytes, st.used_bytes, st.reserved_bytes,
               st.reserved_dead_bytes, st.deferred_bytes, st.free_bytes, st.largest_free, st.generation, st.n_datasets,
               st.live_leases, st.lease_slots, st.coherent ? "true" : "false", st.expiry_ms,
               st.hosts, st.host_id);
        cli_json_str(stdout, st.host_id_source);
        printf(", \"pages\": [");
        for (size_t i = 0, n = 0; i < nds; i++) {
            if (pg[2 * nds + i])
                continue;
            printf("%s{\"dataset\": ", n++ ? ", " : "");
            cli_json_str(stdout, ds[i].name);
            printf(", \"bytes\": %" PRIu64 ", \"huge_bytes\": %" PRIu64 "}", pg[2 * i],
                   pg[2 * i + 1]);
        }
        printf("], \"tiers\": ");
        cli_print_tiers(p, 1);
        printf("}\n");
    } else {
        char b[8][32];
        printf("pool:       %s\npath:       %s\nmedia:      %s\n", spec, st.path, md);
        printf("format:     v%u, uuid %s\n", st.format_version, uu);
        printf("size:       %s\n", cli_fmt_bytes(st.size, b[0]));
        char dead[96] = "";
        if (st.reserved_dead_bytes)
            snprintf(dead, sizeof dead, " (%s of it by ingests that died: freed at the next write)",
                     cli_fmt_bytes(st.reserved_dead_bytes, b[7]));
        printf("data area:  %s (used %s, reserved %s%s, deferred %s, free %s, largest free %s)\n",
               cli_fmt_bytes(st.data_bytes, b[1]), cli_fmt_bytes(st.used_bytes, b[2]),
               cli_fmt_bytes(st.reserved_bytes, b[3]), dead, cli_fmt_bytes(st.deferred_bytes, b[4]),
               cli_fmt_bytes(st.free_bytes, b[5]), cli_fmt_bytes(st.largest_free, b[6]));
        printf("datasets:   %u (catalog generation %" PRIu64 ")\n", st.n_datasets,
               st.generation);
        printf("leases:     %u live of %u slots (this command holds one)\n", st.live_leases,
               st.lease_slots);
        printf("hosts:      %u attached or not yet expired; expiry %.1f s; memory %s\n",
               st.hosts, st.expiry_ms / 1000.0,
               st.coherent ? "coherent" : "non-coherent (written back and invalidated)");
        printf("this host:  id %016" PRIx64 " from %s\n", st.host_id, st.host_id_source);
        for (size_t i = 0; i < nds; i++) {
            if (pg[2 * nds + i])
                continue;
            printf("pages:      %s: ", ds[i].name);
            print_pages(pg[2 * i], pg[2 * i + 1]);
        }
        cli_print_tiers(p, 0);
    }
    free(pg);
    free(ds);
    cxlp_pool_close(p);
    return EXIT_OKAY;
}

/* -------------------------------------------------------------- leases */

int cli_cmd_leases(int argc, char **argv)
{
    static const struct option lo[] = {
        {"json", no_argument, 0, 'j'},
        {"expire", required_argument, 0, 'x'},
        {0, 0, 0, 0},
    };
    int json = 0, c;
    const char *expire = NULL;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        if (c == -2)
            return EXIT_USAGE;
        if (c == 'j')
            json = 1;
        else
            expire = optarg;
    }
    if (!cli_npos_ok(argc, argv, 1, 1))
        return EXIT_USAGE;
    const char *spec = argv[optind];
    cxlp_pool *p;
    int ex = cli_open_pool(spec, expire == NULL, &p);
    if (ex)
        return ex;
    if (expire) {
        uint32_t n = 0;
        int rc = cxlp_pool_expire_host(p, expire, &n);
        if (rc) {
            ex = cli_report_error(rc, p, expire);
            cxlp_pool_close(p);
            return ex;
        }
        fprintf(stderr, "cxlpool: leases: warning: expired %u lease%s of host %s (and its writer "
                "lock, if it held it): if its processes are alive, extents they read may now be "
                "reused under them\n", n, n == 1 ? "" : "s", expire);
        printf("expired %u lease%s of %s in %s\n", n, n == 1 ? "" : "s", expire, spec);
        cxlp_pool_close(p);
        return EXIT_OKAY;
    }
    size_t cap = 64, n;
    struct cxlp_lease_info *v = NULL;
    int rc;
    for (;;) {
        free(v);
        v = calloc(cap, sizeof *v);
        if (!v) {
            cxlp_pool_close(p);
            return cli_report_os(-ENOMEM, "leases");
        }
        if ((rc = cxlp_pool_leases(p, v, cap, &n)) || n <= cap)
            break;
        cap = n + 16;
    }
    if (rc) {
        free(v);
        ex = cli_report_error(rc, p, spec);
        cxlp_pool_close(p);
        return ex;
    }
    if (json)
        printf("[");
    else
        printf("%-5s %-16s %-16s %8s %9s %-8s %-12s %s\n", "SLOT", "HOST", "HOST ID", "PID",
               "AGE", "STATE", "PINNED GEN", "SEEN AS");
    for (size_t i = 0; i < n; i++) {
        const struct cxlp_lease_info *l = &v[i];
        const char *state = l->live ? "live" : "expired";
        const char *as = l->this_process ? "this command" :
                         l->same_domain ? "this host (pid checked)" : "other host (heartbeat)";
        char hid[17] = "-", gen[24] = "-";
        if (l->host_id)
            snprintf(hid, sizeof hid, "%016" PRIx64, l->host_id);
        if (l->pinned_gen != UINT64_MAX)
            snprintf(gen, sizeof gen, "%" PRIu64, l->pinned_gen);
        if (json) {
            printf("%s{\"slot\": %u, \"host\": ", i ? ",\n " : "", l->slot);
            cli_json_str(stdout, l->host);
            printf(", \"host_id\": \"%s\", \"domain\": \"%016" PRIx64 "\", \"pid\": %u"
                   ", \"age_s\": %.1f, \"live\": %s, \"pinned_gen\": %s"
                   ", \"same_domain\": %s, \"this_process\": %s}",
                   hid, l->domain, l->pid, l->age_s, l->live ? "true" : "false",
                   l->pinned_gen == UINT64_MAX ? "null" : gen,
                   l->same_domain ? "true" : "false", l->this_process ? "true" : "false");
        } else {
            char age[32];
            snprintf(age, sizeof age, "%.1f s", l->age_s);
            printf("%-5u %-16s %-16s %8u %9s %-8s %-12s %s\n", l->slot,
                   l->host[0] ? l->host : "?", hid, l->pid, age, state, gen, as);
        }
    }
    if (json)
        printf("]\n");
    free(v);
    cxlp_pool_close(p);
    return EXIT_OKAY;
}

/* -------------------------------------------------------------- verify */

struct vlines {
    int print;
    int json;
    int n;
};

static void verify_line(void *ctx, const char *line)
{
    struct vlines *vl = ctx;
    if (vl->json) {
        printf("%s", vl->n ? ",\n  " : "");
        cli_json_str(stdout, line);
    } else if (vl->print) {
        printf("%s\n", line);
    }
    vl->n++;
}

int cli_cmd_verify(int argc, char **argv)
{
    static const struct option lo[] = {
        {"json", no_argument, 0, 'j'},
        {"quiet", no_argument, 0, 'q'},
        {"lock", no_argument, 0, 'l'},
        {0, 0, 0, 0},
    };
    int json = 0, quiet = 0, lock = 0, c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        if (c == -2)
            return EXIT_USAGE;
        if (c == 'j')
            json = 1;
        else if (c == 'l')
            lock = 1;
        else
            quiet = 1;
    }
    if (!cli_npos_ok(argc, argv, 1, 1))
        return EXIT_USAGE;
    const char *spec = argv[optind];
    cxlp_pool *p = NULL;
    struct cxlp_pool_opts o = {0};
    /* --lock: a writable handle, whose check takes the writer lock when
     * writers leave it no quiet window (src/pool/check.c) */
    o.readonly = !lock;
    struct vlines vl = {!quiet, json, 0};
    int rc = cxlp_pool_open(spec, &o, &p);
    const char *msg;
    if (json)
        printf("{\"pool\": "), cli_json_str(stdout, spec), printf(", \"checked\": [\n  ");
    if (rc == 0) {
        rc = cxlp_pool_verify(p, verify_line, &vl);
        msg = cxlp_errmsg(p);
    } else {
        msg = cxlp_errmsg(NULL);
    }
    if (json) {
        printf("],\n \"ok\": %s, \"items\": %d", rc ? "false" : "true", vl.n);
        if (rc) {
            printf(", \"code\": \"%s\", \"error\": ", cli_rc_name(rc));
            cli_json_str(stdout, msg);
        }
        printf("}\n");
    }
    int ex = EXIT_OKAY;
    if (rc) {
        ex = cli_report_error(rc, p, spec);
        /* A damaged header or catalog is corruption too; a missing pool is not. */
        if (rc == CXLP_ECORRUPT || rc == CXLP_EFORMAT || rc == CXLP_ELAYOUT)
            ex = EXIT_CORRUPT;
    } else if (!json && !quiet) {
        printf("ok: %s verified (%d items)\n", spec, vl.n);
    }
    cxlp_pool_close(p);
    return ex;
}

/* ------------------------------------------------------------------ rm */

int cli_cmd_rm(int argc, char **argv)
{
    static const struct option lo[] = {{0, 0, 0, 0}};
    int c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1)
        if (c == -2)
            return EXIT_USAGE;
    if (!cli_npos_ok(argc, argv, 2, 2))
        return EXIT_USAGE;
    cxlp_pool *p;
    int ex = cli_open_pool(argv[optind], 0, &p);
    if (ex)
        return ex;
    int rc = cxlp_pool_remove(p, argv[optind + 1]);
    if (rc)
        ex = cli_report_error(rc, p, argv[optind + 1]);
    else
        printf("removed %s from %s\n", argv[optind + 1], argv[optind]);
    cxlp_pool_close(p);
    return ex;
}

/* ------------------------------------------------------------- rewrite */

struct fmt_now {
    uint32_t format;
    uint64_t block, shards;
    int area;
};

/* Dataset name's shard format and shard count as a store opened now sees
 * them. */
static int fmt_now(cxlp_pool *p, const char *name, struct fmt_now *f)
{
    cxlp_store *s;
    int rc = cxlp_store_open(p, name, &s);
    if (rc)
        return rc;
    memset(f, 0, sizeof *f);
    rc = cxlp_store_format(s, &f->format, &f->block, &f->area);
    if (!rc)
        rc = cxlp_store_shards(s, &f->shards, NULL, NULL);
    cxlp_store_close(s);
    return rc;
}

static void fmt_json(const struct fmt_now *f)
{
    printf("{\"version\": %u, \"block_bytes\": %" PRIu64 ", \"sums_area\": %s, \"shards\": %"
           PRIu64 "}", f->format, f->block, f->area ? "true" : "false", f->shards);
}

int cli_cmd_rewrite(int argc, char **argv)
{
    static const struct option lo[] = {
        {"shard-bytes", required_argument, 0, 's'},
        {"no-hugepages", no_argument, 0, 'H'},
        {"json", no_argument, 0, 'j'},
        {"no-progress", no_argument, 0, 'n'},
        {0, 0, 0, 0},
    };
    struct cxlp_rewrite_opts o = {0};
    int json = 0, show = 1, c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        switch (c) {
        case -2:
            return EXIT_USAGE;
        case 's':
            if (cli_parse_size(optarg, &o.shard_bytes) || !o.shard_bytes)
                return cli_usage_error("--shard-bytes: '%s' is not a positive size", optarg);
            break;
        case 'H':
            o.no_hugepages = 1;
            break;
        case 'j':
            json = 1;
            break;
        case 'n':
            show = 0;
            break;
        }
    }
    if (!cli_npos_ok(argc, argv, 2, 2))
        return EXIT_USAGE;
    const char *spec = argv[optind], *name = argv[optind + 1];
    cxlp_pool *p;
    int ex = cli_open_pool(spec, 0, &p);
    if (ex)
        return ex;
    struct fmt_now before, after;
    struct shards_progress sp = {"rewrite", 0, show && isatty(STDERR_FILENO)};
    o.progress = cli_shards_progress;
    o.progress_ctx = &sp;
    double t0 = cli_now_sec();
    int rc = fmt_now(p, name, &before);
    if (!rc)
        rc = cxlp_pool_rewrite(p, name, &o);
    double secs = cli_now_sec() - t0;
    if (!rc)
        rc = fmt_now(p, name, &after);
    if (rc) {
        ex = cli_report_error(rc, p, name);
        cxlp_pool_close(p);
        return ex;
    }
    if (json) {
        printf("{\"dataset\": ");
        cli_json_str(stdout, name);
        printf(", \"before\": ");
        fmt_json(&before);
        printf(", \"after\": ");
        fmt_json(&after);
        printf(", \"seconds\": %.6f}\n", secs);
    } else {
        char f0[96], f1[96];
        printf("rewrote %s: %s -> %s; shards %" PRIu64 " -> %" PRIu64 ", in %.3f s\n", name,
               shard_format_str(before.format, before.block, before.area, f0, sizeof f0),
               shard_format_str(after.format, after.block, after.area, f1, sizeof f1),
               before.shards, after.shards, secs);
    }
    cxlp_pool_close(p);
    return EXIT_OKAY;
}

/* ------------------------------------------------------------- destroy */

int cli_cmd_destroy(int argc, char **argv)
{
    static const struct option lo[] = {{"yes", no_argument, 0, 'y'}, {0, 0, 0, 0}};
    int yes = 0, c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        if (c == -2)
            return EXIT_USAGE;
        yes = 1;
    }
    if (!cli_npos_ok(argc, argv, 1, 1))
        return EXIT_USAGE;
    const char *spec = argv[optind];
    if (!yes) {
        if (!isatty(STDIN_FILENO))
            return cli_usage_error("refusing to destroy %s without --yes (stdin is not a terminal)",
                               spec);
        fprintf(stderr, "destroy pool %s and every dataset in it? [y/N] ", spec);
        char line[16];
        if (!fgets(line, sizeof line, stdin) || (line[0] != 'y' && line[0] != 'Y')) {
            fprintf(stderr, "not destroyed\n");
            return EXIT_RUNTIME;
        }
    }
    int rc = cxlp_pool_destroy(spec);
    if (rc)
        return cli_report_error(rc, NULL, spec);
    printf("destroyed %s\n", spec);
    return EXIT_OKAY;
}
