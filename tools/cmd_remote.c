/*
 * cmd_remote.c - `cxlpool serve` and `cxlpool remote-cat`: a pool served to
 * other hosts over UCX, and its records read back through the library's
 * client (docs/remote.md).
 *
 * serve prints "listening on ADDR:PORT" on stdout once it listens (PORT is
 * the bound one: --listen ADDR:0 picks a free port, what the tests use),
 * and its log of clients on stderr. SIGTERM or SIGINT: drain and exit 0.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "common/common.h"

static volatile int g_stop;

static void on_term(int sig)
{
    (void)sig;
    g_stop = 1;
}

static void on_ready(void *ctx, const char *addr, int port)
{
    (void)ctx;
    printf("listening on %s:%d\n", addr, port);
    fflush(stdout);
}

int cli_cmd_serve(int argc, char **argv)
{
    static const struct option lo[] = {{"listen", required_argument, 0, 'l'},
                                       {"token-file", required_argument, 0, 't'},
                                       {"metrics-port", required_argument, 0, 'm'},
                                       {0, 0, 0, 0}};
    struct cxlp_serve_opts o = {.stop = &g_stop, .ready = on_ready};
    uint64_t mp;
    int c;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        switch (c) {
        case 'l': o.listen = optarg; break;
        case 't': o.token_file = optarg; break;
        case 'm':
            if (cli_parse_u64(optarg, &mp) || mp == 0 || mp > 65535)
                return cli_usage_error("--metrics-port '%s': a TCP port 1..65535", optarg);
            o.metrics_port = (int)mp;
            break;
        default: return EXIT_USAGE;
        }
    }
    if (!cli_npos_ok(argc, argv, 1, 1))
        return EXIT_USAGE;
    if (!o.listen)
        return cli_usage_error("--listen ADDR:PORT is required");
    if (!o.token_file)
        return cli_usage_error("--token-file F is required (the shared secret, mode 0600): "
                               "refusing to serve without one");
    struct sigaction sa = {.sa_handler = on_term};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    const char *spec = argv[optind];
    int rc = cxlp_serve(spec, &o);
    return rc ? cli_report_error(rc, NULL, spec) : EXIT_OKAY;
}

struct cat_ctx {
    uint64_t records, bytes, next;
    int fail;
};

static int list_remote(void *r, struct cxlp_dataset_info *infos, size_t cap, size_t *n)
{
    return cxlp_remote_list(r, infos, cap, n);
}

static int put_rec(void *ctx, uint64_t id, const void *rec, uint64_t len)
{
    struct cat_ctx *cc = ctx;
    if (id != cc->next) {
        fprintf(stderr, "cxlpool: remote-cat: record %" PRIu64 " came where %" PRIu64
                " was due\n", id, cc->next);
        return CXLP_ECORRUPT;
    }
    if (len && fwrite(rec, 1, len, stdout) != len)
        return -EIO;
    cc->next++;
    cc->records++;
    cc->bytes += len;
    return 0;
}

int cli_cmd_remote_cat(int argc, char **argv)
{
    static const struct option lo[] = {{"token-file", required_argument, 0, 't'},
                                       {"timeout", required_argument, 0, 'T'},
                                       {"list", no_argument, 0, 'L'},
                                       {0, 0, 0, 0}};
    struct cxlp_remote_opts o = {0};
    uint64_t ms;
    int c, list = 0;
    while ((c = cli_next_opt(argc, argv, lo)) != -1) {
        switch (c) {
        case 't': o.token_file = optarg; break;
        case 'T':
            if (cli_parse_ms(optarg, &ms) || ms == 0 || ms > UINT32_MAX)
                return cli_usage_error("--timeout '%s': a duration (10s, 1500ms)", optarg);
            o.timeout_ms = (uint32_t)ms;
            break;
        case 'L': list = 1; break;
        default: return EXIT_USAGE;
        }
    }
    if (!cli_npos_ok(argc, argv, list ? 1 : 2, list ? 1 : 2))
        return EXIT_USAGE;
    const char *url = argv[optind], *name = list ? NULL : argv[optind + 1];
    cxlp_remote *r;
    int rc = cxlp_remote_open(url, &o, &r);
    if (rc)
        return cli_report_error(rc, NULL, url);
    if (list) {
        size_t n = 0;
        struct cxlp_dataset_info *infos = NULL;
        rc = list_all(list_remote, r, &infos, &n);
        for (size_t i = 0; !rc && i < n; i++)
            printf("%s\t%" PRIu64 " records\t%u shards\t%" PRIu64 " bytes\n", infos[i].name,
                   infos[i].n_records, infos[i].n_shards, infos[i].data_bytes);
        free(infos);
        int ex = rc ? cli_report_error(rc, r, url) : EXIT_OKAY;
        cxlp_remote_close(r);
        return ex;
    }
    uint64_t n_shards;
    rc = cxlp_remote_shards(r, name, NULL, 0, &n_shards, NULL);
    struct cat_ctx cc = {0};
    for (uint64_t k = 0; !rc && k < n_shards; k++)
        rc = cxlp_remote_fetch(r, name, k, put_rec, &cc);
    if (!rc && fflush(stdout))
        rc = -EIO;
    int ex = EXIT_OKAY;
    if (rc)
        ex = cli_report_error(rc, r, name);
    else
        fprintf(stderr, "cxlpool: remote-cat: %s: %" PRIu64 " records, %" PRIu64 " bytes, %"
                PRIu64 " shards verified\n", name, cc.records, cc.bytes, n_shards);
    cxlp_remote_close(r);
    if (rc == CXLP_ECORRUPT)
        ex = EXIT_CORRUPT;
    return ex;
}
