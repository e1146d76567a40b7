/*
 * test_remote.c - a pool served over UCX on loopback (docs/remote.md):
 * every record of two datasets read back through the client, verified,
 * equal to the local reads, shard checksums equal to the pool's; reads out
 * of a shard refused; a dataset removed and published again while served
 * (old reads refused, the new one read whole); the token file checked at
 * both ends; clients with a wrong token or none refused, each logged with
 * its reason and address; a stopped server and a killed one fail a read
 * within the timeout with an error naming the host and the shard; SIGTERM
 * drains and exits 0; a pool of tiers served from its home, then from its
 * dram tier. In a build without UCX: every entry point says so
 * (CXLP_EUNSUPPORTED).
 */
#include "remote_util.h"
#include "pool/loc.h"
#include "store/fetch.h"
#include "store/store.h"

static char tok[256], tok_bad[256], tok_open[256], logp[256];

static void no_ucx_build(void)
{
    volatile int stop = 0;
    struct cxlp_serve_opts o = {.listen = "127.0.0.1:0", .token_file = tok, .stop = &stop};
    CHECK_RC(cxlp_serve("nosuchpool", &o), CXLP_EUNSUPPORTED);
    CHECK(strstr(cxlp_errmsg(NULL), "no UCX"));
    cxlp_remote *r;
    CHECK_RC(cxlp_remote_open("ucx://127.0.0.1:1/p", NULL, &r), CXLP_EUNSUPPORTED);
    CHECK(strstr(cxlp_errmsg(NULL), "no UCX"));
    const char *tiers[] = {"dram=shm:8M", "remote=ucx://127.0.0.1:1/p"};
    cxlp_pool *p;
    CHECK_RC(cxlp_pool_create_tiered(test_name("noucx"), tiers, 2, NULL, &p), CXLP_EUNSUPPORTED);
    CHECK(strstr(cxlp_errmsg(NULL), "no UCX"));
    printf("no UCX in this build: serve, remote open and remote tiers refused\n");
}

struct cmp_ctx {
    cxlp_store *s;
    uint64_t next, bytes;
    uint8_t *buf;
};

/* Each record fetched equals the local one: its fields back to back. */
static int cmp_rec(void *ctx, uint64_t id, const void *rec, uint64_t len)
{
    struct cmp_ctx *c = ctx;
    CHECK(id == c->next);
    const struct cxlp_schema *sc = cxlp_store_schema(c->s);
    uint64_t at = 0;
    for (uint32_t f = 0; f < sc->n_fields; f++) {
        uint64_t n;
        CHECK_OK(cxlp_store_read_field_copy(c->s, id, f, c->buf + at, (1u << 20) - at, &n));
        at += n;
    }
    CHECK(at == len);
    CHECK(memcmp(c->buf, rec, len) == 0);
    c->next++;
    c->bytes += len;
    return 0;
}

static void read_all(cxlp_remote *r, cxlp_pool *lp, const char *name)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(lp, name, &s));
    uint64_t n, ver;
    CHECK_OK(cxlp_remote_shards(r, name, NULL, 0, &n, &ver));
    CHECK(n == s->n_shards && n > 3);
    CHECK(ver == s->ds.info.version);
    struct cxlp_remote_shard *t = calloc(n, sizeof *t);
    CHECK(t);
    CHECK_OK(cxlp_remote_shards(r, name, t, n, &n, NULL));
    struct cmp_ctx c = {.s = s, .buf = malloc(1u << 20)};
    CHECK(c.buf);
    for (uint64_t k = 0; k < n; k++) {
        CHECK(t[k].checksum == s->loc[k].checksum && t[k].bytes == s->loc[k].len);
        CHECK(t[k].first_record == s->loc[k].first_record);
        CHECK_OK(cxlp_remote_fetch(r, name, k, cmp_rec, &c));
    }
    CHECK(c.next == cxlp_store_count(s));
    /* raw bytes of the last shard equal the pool's */
    uint8_t *raw = malloc(t[n - 1].bytes);
    CHECK(raw);
    CHECK_OK(cxlp_remote_read(r, name, n - 1, 0, t[n - 1].bytes, raw));
    if (cxlp_store_tiered(s)) { /* the shard as this process reads it, verified */
        uint8_t *mine;
        struct shard g;
        struct shard_col cols[CXLP_MAX_FIELDS];
        CHECK_OK(store_read_private(s, n - 1, NULL, &mine, &g, cols));
        CHECK(memcmp(raw, mine, t[n - 1].bytes) == 0);
        free(mine);
    } else {
        CHECK(memcmp(raw, attach_base(s->a) + s->loc[n - 1].off, t[n - 1].bytes) == 0);
    }
    /* part of a shard (the first: on a pool of tiers no reply holds it
     * now, so only those bytes are read, from its fastest copy) */
    uint64_t lo = t[0].bytes / 3, part = t[0].bytes / 3;
    uint8_t *pr = malloc(part);
    CHECK(pr && part > 0);
    CHECK_OK(cxlp_remote_read(r, name, 0, lo, part, pr));
    if (cxlp_store_tiered(s)) {
        uint8_t *mine;
        struct shard g;
        struct shard_col cols[CXLP_MAX_FIELDS];
        CHECK_OK(store_read_private(s, 0, NULL, &mine, &g, cols));
        CHECK(memcmp(pr, mine + lo, part) == 0);
        free(mine);
    } else {
        CHECK(memcmp(pr, attach_base(s->a) + s->loc[0].off + lo, part) == 0);
    }
    free(pr);
    /* out of the shard: refused, nothing read */
    CHECK_RC(cxlp_remote_read(r, name, n - 1, t[n - 1].bytes - 10, 20, raw), CXLP_ERANGE);
    CHECK(strstr(cxlp_errmsg(r), "not inside shard"));
    CHECK_RC(cxlp_remote_read(r, name, n, 0, 1, raw), CXLP_ERANGE);
    printf("%s: %" PRIu64 " records, %" PRIu64 " bytes in %" PRIu64 " shards, verified\n", name,
           c.next, c.bytes, n);
    free(raw);
    free(t);
    free(c.buf);
    cxlp_store_close(s);
}

/* A pool of tiers: its shards served from the home (none has a memory
 * copy) and from the dram tier (after a migration), every record equal. */
static void tiered(uint64_t seed)
{
    char pool[128], dram[200], nvme[200], home[160];
    snprintf(pool, sizeof pool, "%s", test_name("remotet"));
    snprintf(dram, sizeof dram, "dram=shm:%s.d:16M", pool);
    snprintf(home, sizeof home, "/tmp/cxlp-%s.tier", pool);
    snprintf(nvme, sizeof nvme, "nvme=file:%s:32M", home);
    const char *tiers[] = {dram, nvme};
    struct cxlp_pool_opts o = {.meta_bytes = 4u << 20};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create_tiered(pool, tiers, 2, &o, &p));
    struct cxlp_schema vs;
    memset(&vs, 0, sizeof vs);
    vs.n_fields = 1;
    strcpy(vs.fields[0].name, "tokens");
    vs.fields[0].dtype = CXLP_DT_U16;
    struct cxlp_writer_opts wo = {.shard_bytes = 32u << 10};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "var", &vs, &wo, &w));
    uint64_t s = seed | 1;
    uint16_t rec[200];
    for (uint32_t i = 0; i < 2000; i++) {
        uint32_t n = (uint32_t)(ru_rand(&s) % 200);
        for (uint32_t j = 0; j < n; j++)
            rec[j] = (uint16_t)ru_rand(&s);
        CHECK_OK(cxlp_writer_append(w, rec, n * 2u));
    }
    CHECK_OK(cxlp_writer_commit(w));
    int port;
    pid_t pid = ru_serve(pool, tok, logp, &port);
    char url[200];
    snprintf(url, sizeof url, "ucx://127.0.0.1:%d/%s", port, pool);
    struct cxlp_remote_opts ro = {.token_file = tok};
    cxlp_remote *r;
    CHECK_OK(cxlp_remote_open(url, &ro, &r));
    cxlp_store *st;
    CHECK_OK(cxlp_store_open(p, "var", &st));
    uint64_t copies[4];
    size_t nt;
    CHECK_OK(cxlp_store_copies(st, copies, 4, &nt));
    CHECK(nt == 2 && copies[0] == 0); /* every shard at home only */
    cxlp_store_close(st);
    read_all(r, p, "var");
    CHECK_OK(cxlp_migrate(p, "var", "dram", NULL, NULL));
    CHECK_OK(cxlp_store_open(p, "var", &st));
    CHECK_OK(cxlp_store_copies(st, copies, 4, &nt));
    CHECK(copies[0] == st->n_shards); /* every shard in dram now */
    /* the home's copies zeroed: what the server sends now comes from dram
     * (or the last shards it kept, read and verified before) */
    int fd = open(home, O_RDWR);
    CHECK(fd >= 0);
    static uint8_t zero[64u << 10], was[64u << 10];
    uint32_t h = attach_home(st->a);
    for (uint64_t k = 0; k < st->n_shards; k++) {
        uint64_t wd = store_word(st, k, h), len = st->loc[k].len;
        CHECK(loc_present(wd) && len <= sizeof zero);
        /* the home copy is where its word says: the shard's bytes */
        uint8_t *mine;
        struct shard g;
        struct shard_col cols[CXLP_MAX_FIELDS];
        CHECK_OK(store_read_private(st, k, NULL, &mine, &g, cols));
        CHECK(pread(fd, was, len, (off_t)loc_off(wd)) == (ssize_t)len);
        CHECK(memcmp(was, mine, len) == 0);
        free(mine);
        CHECK(pwrite(fd, zero, len, (off_t)loc_off(wd)) == (ssize_t)len);
    }
    close(fd);
    cxlp_store_close(st);
    read_all(r, p, "var");
    cxlp_remote_close(r);
    CHECK(kill(pid, SIGTERM) == 0);
    int wst;
    CHECK(waitpid(pid, &wst, 0) == pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(pool));
    unlink(home);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(void)
{
    snprintf(tok, sizeof tok, "/tmp/cxlp-remote-tok.%d", (int)getpid());
    snprintf(tok_bad, sizeof tok_bad, "/tmp/cxlp-remote-tokbad.%d", (int)getpid());
    snprintf(tok_open, sizeof tok_open, "/tmp/cxlp-remote-tokopen.%d", (int)getpid());
    snprintf(logp, sizeof logp, "/tmp/cxlp-remote-log.%d", (int)getpid());
    ru_write_file(tok, "the-shared-secret\n", 0600);
    ru_write_file(tok_bad, "not-the-secret\n", 0600);
    ru_write_file(tok_open, "the-shared-secret\n", 0644);
    unlink(logp);
    if (!cxlp_remote_available()) {
        no_ucx_build();
        unlink(tok), unlink(tok_bad), unlink(tok_open);
        return 0;
    }
    ru_guard(240);
    uint64_t seed = test_seed();
    const char *spec = test_name("remote");
    ru_make_pool(spec, seed);

    /* the token file, checked before anything listens */
    volatile int stop = 0;
    struct cxlp_serve_opts so = {.listen = "127.0.0.1:0", .token_file = tok_open, .stop = &stop};
    CHECK_RC(cxlp_serve(spec, &so), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), tok_open) && strstr(cxlp_errmsg(NULL), "mode 0644"));
    so.token_file = NULL;
    CHECK_RC(cxlp_serve(spec, &so), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "no token file"));

    int port;
    pid_t pid = ru_serve(spec, tok, logp, &port);
    char url[128];
    snprintf(url, sizeof url, "ucx://127.0.0.1:%d/%s", port, spec);
    struct cxlp_remote_opts ro = {.token_file = tok, .timeout_ms = 10000};
    cxlp_remote *r;
    CHECK_OK(cxlp_remote_open(url, &ro, &r));
    struct cxlp_dataset_info infos[4];
    size_t n;
    CHECK_OK(cxlp_remote_list(r, infos, 4, &n));
    CHECK(n == 2);
    for (size_t i = 0; i < n; i++)
        CHECK((!strcmp(infos[i].name, "var") && infos[i].n_records == RU_VAR_N) ||
              (!strcmp(infos[i].name, "fix") && infos[i].n_records == RU_FIX_N));
    cxlp_pool *lp;
    CHECK_OK(cxlp_pool_open(spec, NULL, &lp));
    read_all(r, lp, "var");
    read_all(r, lp, "fix");
    uint64_t ns;
    CHECK_RC(cxlp_remote_shards(r, "nosuch", NULL, 0, &ns, NULL), CXLP_ENOTFOUND);
    /* a dataset removed while served: its reads refused; published again:
     * the new version served, the old one's reads refused */
    uint64_t v_old, v_new;
    CHECK_OK(cxlp_remote_shards(r, "fix", NULL, 0, &ns, &v_old));
    uint8_t one[64];
    CHECK_OK(cxlp_remote_read(r, "fix", 0, 0, sizeof one, one));
    CHECK_OK(cxlp_pool_remove(lp, "fix"));
    CHECK_RC(cxlp_remote_read(r, "fix", 0, 0, sizeof one, one), CXLP_ENOTFOUND);
    CHECK_RC(cxlp_remote_shards(r, "fix", NULL, 0, &ns, NULL), CXLP_ENOTFOUND);
    {
        struct cxlp_schema rs;
        memset(&rs, 0, sizeof rs);
        rs.fixed = 1;
        rs.n_fields = 1;
        strcpy(rs.fields[0].name, "row");
        rs.fields[0].dtype = CXLP_DT_U8;
        rs.fields[0].ndim = 1;
        rs.fields[0].shape[0] = 100;
        struct cxlp_writer_opts wo = {.shard_bytes = 8u << 10};
        cxlp_writer *w;
        CHECK_OK(cxlp_writer_begin(lp, "fix", &rs, &wo, &w));
        uint8_t row[100];
        for (uint32_t i = 0; i < 500; i++) {
            memset(row, (int)(i & 0xff), sizeof row);
            CHECK_OK(cxlp_writer_append(w, row, sizeof row));
        }
        CHECK_OK(cxlp_writer_commit(w));
    }
    CHECK_OK(cxlp_remote_shards(r, "fix", NULL, 0, &ns, &v_new));
    CHECK(v_new != v_old);
    read_all(r, lp, "fix"); /* the new one, every record */

    /* clients refused: wrong token, none, another pool; a token file others can read */
    cxlp_remote *bad;
    struct cxlp_remote_opts bo = {.token_file = tok_bad};
    CHECK_RC(cxlp_remote_open(url, &bo, &bad), -EACCES);
    CHECK(strstr(cxlp_errmsg(NULL), "wrong token") && strstr(cxlp_errmsg(NULL), "127.0.0.1"));
    CHECK_RC(cxlp_remote_open(url, NULL, &bad), -EACCES);
    CHECK(strstr(cxlp_errmsg(NULL), "no token"));
    char url2[160];
    snprintf(url2, sizeof url2, "ucx://127.0.0.1:%d/otherpool", port);
    CHECK_RC(cxlp_remote_open(url2, &ro, &bad), -EACCES);
    CHECK(strstr(cxlp_errmsg(NULL), "otherpool"));
    bo.token_file = tok_open;
    CHECK_RC(cxlp_remote_open(url, &bo, &bad), CXLP_EARG);
    CHECK(strstr(cxlp_errmsg(NULL), "mode 0644"));
    CHECK(chmod(tok_open, 0400) == 0); /* owner-only, read-only: taken */
    CHECK_OK(cxlp_remote_open(url, &bo, &bad));
    cxlp_remote_close(bad);
    CHECK(ru_file_has(logp, "refused: wrong token"));
    CHECK(ru_file_has(logp, "refused: no token"));
    CHECK(ru_file_has(logp, "refused: asked for pool 'otherpool'"));
    CHECK(ru_file_has(logp, "client 127.0.0.1:"));

    /* a stopped server: the read fails within the timeout, naming host and shard */
    cxlp_remote *r2;
    struct cxlp_remote_opts qo = {.token_file = tok, .timeout_ms = 1500};
    CHECK_OK(cxlp_remote_open(url, &qo, &r2));
    uint8_t buf[4096];
    CHECK_OK(cxlp_remote_read(r2, "var", 0, 0, sizeof buf, buf));
    CHECK(kill(pid, SIGSTOP) == 0);
    double t0 = now_s();
    int rc = cxlp_remote_read(r2, "var", 1, 0, sizeof buf, buf);
    double dt = now_s() - t0;
    CHECK(kill(pid, SIGCONT) == 0);
    printf("stopped server: %s (%.2f s)\n", cxlp_errmsg(r2), dt);
    /* -ETIMEDOUT, unless UCX's keepalive declared the peer gone first */
    CHECK(rc == -ETIMEDOUT || rc == -ECONNRESET);
    CHECK(strstr(cxlp_errmsg(r2), "127.0.0.1") && strstr(cxlp_errmsg(r2), "shard 1 of var"));
    CHECK(dt < 60); /* a hang guard, not a timing test: the timeout is 1.5 s */
    CHECK(cxlp_remote_read(r2, "var", 0, 0, 16, buf) == rc); /* broken stays broken */
    CHECK(strstr(cxlp_errmsg(r2), "failed earlier"));
    cxlp_remote_close(r2);

    /* SIGTERM: drains, exits 0 */
    CHECK(kill(pid, SIGTERM) == 0);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK(ru_file_has(logp, "draining") && ru_file_has(logp, "stopped"));
    CHECK(cxlp_remote_read(r, "var", 0, 0, 16, buf) < 0); /* the server is gone */
    cxlp_remote_close(r);

    /* killed mid-read: shard 0 read, then SIGKILL, then shard 1 */
    pid = ru_serve(spec, tok, logp, &port);
    snprintf(url, sizeof url, "ucx://127.0.0.1:%d/%s", port, spec);
    qo.timeout_ms = 3000;
    CHECK_OK(cxlp_remote_open(url, &qo, &r2));
    CHECK_OK(cxlp_remote_read(r2, "var", 0, 0, sizeof buf, buf));
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    t0 = now_s();
    rc = cxlp_remote_read(r2, "var", 1, 0, sizeof buf, buf);
    dt = now_s() - t0;
    printf("killed server: %s (%.2f s)\n", cxlp_errmsg(r2), dt);
    CHECK(rc == -ECONNRESET || rc == -ETIMEDOUT);
    CHECK(strstr(cxlp_errmsg(r2), "127.0.0.1") && strstr(cxlp_errmsg(r2), "shard 1 of var"));
    CHECK(dt < 60);
    cxlp_remote_close(r2);
    /* nobody listens now */
    CHECK(cxlp_remote_open(url, &qo, &r2) < 0);
    CHECK(strstr(cxlp_errmsg(NULL), "127.0.0.1"));

    cxlp_pool_close(lp);
    CHECK_OK(cxlp_pool_destroy(spec));
    tiered(seed);
    unlink(tok), unlink(tok_bad), unlink(tok_open), unlink(logp);
    printf("ok\n");
    return 0;
}
