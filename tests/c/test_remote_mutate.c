/*
 * test_remote_mutate.c - 1000 mutated requests (seeded: bytes flipped or
 * set, messages cut or extended, fields set to edge values) sent to a live
 * server after a proper HELLO. The server answers every one, stays up,
 * and never sends bytes outside a served shard: each READ it answers is
 * checked against the request as the wire decoder reads it, the shard
 * table, and the pool's own bytes there. CXLP_MUTATE_N overrides the count.
 */
#include "remote_util.h"
#include "net/net.h"
#include "store/store.h"

static uint64_t edge(uint64_t *s, uint64_t shard_bytes)
{
    static const uint64_t v[] = {0, 1, 4095, 4096, UINT64_MAX, UINT64_MAX - 4095,
                                 (uint64_t)1 << 63, WIRE_READ_MAX, WIRE_READ_MAX + 1};
    uint64_t k = ru_rand(s) % 12;
    if (k < 9)
        return v[k];
    return k == 9 ? shard_bytes : k == 10 ? shard_bytes + 1 : shard_bytes - 1;
}

int main(void)
{
    if (!cxlp_remote_available())
        SKIP("this build has no UCX (CXLP_UCX=OFF)");
    ru_guard(240);
    uint64_t seed = test_seed(), s = seed | 1;
    const char *e = getenv("CXLP_MUTATE_N");
    uint64_t N = e ? strtoull(e, NULL, 0) : 1000;
    char tok[128], logp[128];
    snprintf(tok, sizeof tok, "/tmp/cxlp-mutate-tok.%d", (int)getpid());
    snprintf(logp, sizeof logp, "/tmp/cxlp-mutate-log.%d", (int)getpid());
    ru_write_file(tok, "mutate-secret", 0600);
    unlink(logp);
    const char *spec = test_name("mutate");
    ru_make_pool(spec, seed);
    int port;
    pid_t pid = ru_serve(spec, tok, logp, &port);
    char url[128];
    snprintf(url, sizeof url, "ucx://127.0.0.1:%d/%s", port, spec);
    struct cxlp_remote_opts ro = {.token_file = tok, .timeout_ms = 10000};
    cxlp_remote *r;
    CHECK_OK(cxlp_remote_open(url, &ro, &r));
    cxlp_pool *lp;
    CHECK_OK(cxlp_pool_open(spec, NULL, &lp));
    cxlp_store *st[2];
    const char *names[2] = {"var", "fix"};
    CHECK_OK(cxlp_store_open(lp, "var", &st[0]));
    CHECK_OK(cxlp_store_open(lp, "fix", &st[1]));
    const uint8_t *base = attach_base(st[0]->a);
    uint8_t *buf = malloc(WIRE_READ_MAX);
    CHECK(buf);
    uint64_t answered_ok = 0, reads_ok = 0, bytes_ok = 0, refused = 0;
    for (uint64_t i = 0; i < N; i++) {
        int d = (int)(ru_rand(&s) % 2);
        cxlp_store *ds = st[d];
        struct wire_req q;
        memset(&q, 0, sizeof q);
        q.id = i + 1;
        uint64_t kind = ru_rand(&s) % 8;
        q.op = kind == 0 ? WIRE_LIST : kind == 1 ? WIRE_SHARDS : WIRE_READ;
        if (q.op != WIRE_LIST)
            snprintf(q.name, sizeof q.name, "%s", names[d]);
        uint64_t k = ru_rand(&s) % ds->n_shards, sb = ds->loc[k].len;
        q.ds_version = ds->ds.info.version;
        q.shard = k;
        q.off = ru_rand(&s) % sb;
        q.len = 1 + ru_rand(&s) % (sb - q.off);
        uint8_t msg[WIRE_REQ_MAX + 64];
        size_t len = wire_req_encode(&q, msg, sizeof msg);
        CHECK(len);
        /* 1..4 mutations */
        int nm = 1 + (int)(ru_rand(&s) % 4);
        for (int m = 0; m < nm; m++) {
            uint64_t how = ru_rand(&s) % 7;
            size_t at = len ? (size_t)(ru_rand(&s) % len) : 0;
            if (how == 0 && len)
                msg[at] ^= (uint8_t)(1u << (ru_rand(&s) % 8));
            else if (how == 1 && len)
                msg[at] = (uint8_t)ru_rand(&s);
            else if (how == 2)
                len = len ? (size_t)(ru_rand(&s) % len) : 0;
            else if (how == 3 && len + 8 <= sizeof msg) {
                for (int j = 0; j < 8; j++)
                    msg[len++] = (uint8_t)ru_rand(&s);
            } else if (how >= 4 && q.op == WIRE_READ && len >= 32) {
                /* one of the READ fields (the last 32 bytes) to an edge value */
                uint64_t v = edge(&s, sb);
                memcpy(msg + len - 32 + 8 * (how - 4 + (ru_rand(&s) % 2)), &v, 8);
            }
        }
        if (len == 0)
            len = 1 + (size_t)(ru_rand(&s) % 8); /* some bytes always go */
        struct wire_rep rep;
        uint64_t got = 0;
        int rc = remote_raw(r, msg, len, &rep, buf, WIRE_READ_MAX, &got);
        if (rc) {
            fprintf(stderr, "request %" PRIu64 ": no reply: %s\n", i, cxlp_errmsg(r));
            CHECK(0);
        }
        if (rep.status) {
            CHECK(got == 0);
            refused++;
            continue;
        }
        answered_ok++;
        /* an accepted request is one the decoder accepts ... */
        struct wire_req dq;
        CHECK(wire_req_decode(msg, len, &dq, NULL, 0) == 0);
        CHECK(dq.op != WIRE_HELLO);
        if (dq.op != WIRE_READ)
            continue;
        /* ... and the bytes are inside the shard it names, equal to the pool's */
        int di = strcmp(dq.name, "var") == 0 ? 0 : 1;
        CHECK(strcmp(dq.name, names[di]) == 0);
        cxlp_store *rs = st[di];
        CHECK(dq.ds_version == rs->ds.info.version);
        CHECK(dq.shard < rs->n_shards);
        const struct pool_shard *ps = &rs->loc[dq.shard];
        CHECK(dq.off <= ps->len && dq.len <= ps->len - dq.off);
        CHECK(got == dq.len);
        CHECK(memcmp(buf, base + ps->off + dq.off, got) == 0);
        reads_ok++;
        bytes_ok += got;
    }
    printf("%" PRIu64 " mutated requests: %" PRIu64 " refused, %" PRIu64 " answered (%" PRIu64
           " reads, %" PRIu64 " bytes, all inside their shards)\n", N, refused, answered_ok,
           reads_ok, bytes_ok);
    CHECK(refused > 0 && reads_ok > 0);
    /* still up, still serving */
    int wst;
    CHECK(waitpid(pid, &wst, WNOHANG) == 0);
    uint64_t n;
    CHECK_OK(cxlp_remote_shards(r, "var", NULL, 0, &n, NULL));
    CHECK(n == st[0]->n_shards);
    cxlp_remote *r2;
    CHECK_OK(cxlp_remote_open(url, &ro, &r2));
    CHECK_OK(cxlp_remote_read(r2, "fix", 0, 0, 64, buf));
    CHECK(memcmp(buf, base + st[1]->loc[0].off, 64) == 0);
    cxlp_remote_close(r2);
    cxlp_remote_close(r);
    CHECK(kill(pid, SIGTERM) == 0);
    CHECK(waitpid(pid, &wst, 0) == pid);
    CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 0);
    cxlp_store_close(st[0]);
    cxlp_store_close(st[1]);
    cxlp_pool_close(lp);
    CHECK_OK(cxlp_pool_destroy(spec));
    free(buf);
    unlink(tok), unlink(logp);
    printf("ok\n");
    return 0;
}
