/* Reading a peer's memory (docs/remote.md, "Reading a peer's memory"):
 * four pools on one machine, three of them served by cxlp_serve in child
 * processes.
 *   A: dram and an nvme home; ingests "d" (its copies: the home only);
 *   B: dram and a remote tier naming A: mirrors "d", copies shards 0..7
 *      into its dram (ds[i]) and serves its pool;
 *   C: dram and a remote tier naming A, then B;
 *   D: dram, a remote tier naming B, and an nvme home; ingests the same
 *      "d" (the same shard table): B becomes a second holder of it.
 * Checks:
 *   - HELD: A's server says no shard of d is in its memory, B's says
 *     shards 0..7 are;
 *   - B serves its mirror from memory only: a READ of a shard B has in
 *     memory gives A's bytes, one of a shard it has not is refused
 *     (CXLP_EBUSY, "not in this host's memory"), never read from A
 *     through B;
 *   - C stages a shard B has in memory from B although A comes first in
 *     its list: with A's server stopped (SIGSTOP) and a reader timeout
 *     that allows no second try, and a byte of that shard flipped in A's
 *     home, C's copy is intact; a flipped shard no peer has in memory is
 *     refused (CXLP_ECORRUPT: read from A's home);
 *   - D copies a shard B does not have from its own home, B untried;
 *   - a loader on D whose every shard is another host's (tier_away, with
 *     tier_sparse) stages nothing and reads every batch in part: the
 *     records of shards 0..7 from B (peer_records counts exactly those;
 *     one of them flipped in D's home comes back intact), the rest from
 *     D's home; every record once and intact. With B killed, the same
 *     epoch reads those shards from D's home and stops at the flipped
 *     block with CXLP_ECORRUPT naming its shard, every record delivered
 *     before it intact.
 * Without UCX the test has nothing to run (test_remote_tier checks the
 * refusal). */
#include "records.h"
#include "remote_util.h"
#include "net/net.h"

#define MiB (1ull << 20)
#define SHARD (64u * 1024)
#define HELD_B 8u                 /* shards B copies into its dram */

static char tok[256], logp[256];

/* A pool of tiers: the specs given, in order. */
static cxlp_pool *make(const char *name, const char **tiers, uint32_t n)
{
    struct cxlp_pool_opts po = {.meta_bytes = 4u << 20};
    cxlp_pool *p;
    cxlp_pool_destroy(name);
    int rc = cxlp_pool_create_tiered(name, tiers, n, &po, &p);
    if (rc)
        fprintf(stderr, "create %s: %s\n", name, cxlp_errmsg(NULL));
    CHECK_OK(rc);
    return p;
}

/* The first record of shard k of s. */
static uint64_t first_of(cxlp_store *s, uint64_t k, uint64_t per)
{
    struct cxlp_record_loc l;
    CHECK_OK(cxlp_store_locate(s, k * per, &l));
    CHECK(l.shard == k && l.index == 0);
    return k * per;
}

int main(void)
{
    if (!cxlp_remote_available()) {
        printf("no UCX in this build: nothing to run\n");
        return 0;
    }
    ru_guard(600);
    const uint64_t seed = 9;
    char A[128], B[128], C[128], D[128], homeA[256], homeD[256], t[6][300], url[2][200];
    snprintf(A, sizeof A, "%s", test_name("rpa"));
    snprintf(B, sizeof B, "%s", test_name("rpb"));
    snprintf(C, sizeof C, "%s", test_name("rpc"));
    snprintf(D, sizeof D, "%s", test_name("rpd"));
    snprintf(homeA, sizeof homeA, "/tmp/cxlp-%s.tier", A);
    snprintf(homeD, sizeof homeD, "/tmp/cxlp-%s.tier", D);
    snprintf(tok, sizeof tok, "/tmp/%s.tok", A);
    snprintf(logp, sizeof logp, "/tmp/%s.log", A);
    unlink(logp);
    ru_write_file(tok, "peer-secret\n", 0600);
    CHECK(setenv("CXLPOOL_TOKEN_FILE", tok, 1) == 0);
    CHECK(setenv("CXLPOOL_REMOTE_TIMEOUT_MS", "20000", 1) == 0);
    CHECK(unsetenv("CXLPOOL_TIER_BW") == 0); /* the order of sources, unconfigured */

    /* A: its dataset on its home alone; served */
    snprintf(t[0], sizeof t[0], "dram=shm:%s.d:8M", A);
    snprintf(t[1], sizeof t[1], "nvme=file:%s:32M", homeA);
    cxlp_pool *a = make(A, (const char *[]){t[0], t[1]}, 2);
    uint64_t n;
    CHECK_OK(rec_ingest(a, "d", 1, seed, 2 * MiB, SHARD, &n, NULL));
    cxlp_store *sa;
    CHECK_OK(cxlp_store_open(a, "d", &sa));
    uint64_t n_shards, per;
    CHECK_OK(cxlp_store_shards(sa, &n_shards, &per, NULL));
    CHECK(n_shards > 2 * HELD_B && per > 0);
    int pa, pb;
    fflush(stdout);
    pid_t srv_a = ru_serve(A, tok, logp, &pa);
    struct ru_spare srv_b = ru_spare_fork(B, tok, logp); /* before any UCX state here */
    snprintf(url[0], sizeof url[0], "ucx://127.0.0.1:%d/%s", pa, A);

    /* B: mirrors d, copies its first HELD_B shards into dram, serves */
    snprintf(t[2], sizeof t[2], "dram=shm:%s.d:8M", B);
    snprintf(t[3], sizeof t[3], "remote=%s", url[0]);
    cxlp_pool *b = make(B, (const char *[]){t[2], t[3]}, 2);
    cxlp_store *sb;
    CHECK_OK(cxlp_store_open(b, "d", &sb));
    uint8_t rec[REC_FIXED_SIZE];
    uint64_t len;
    for (uint64_t k = 0; k < HELD_B; k++) {
        uint64_t i = first_of(sb, k, per);
        CHECK_OK(cxlp_store_read_copy(sb, i, rec, sizeof rec, &len));
        CHECK(rec_ok(rec, len, 1, seed, i));
    }
    CHECK_OK(ru_spare_go(&srv_b, "127.0.0.1:0", &pb));
    snprintf(url[1], sizeof url[1], "ucx://127.0.0.1:%d/%s", pb, B);

    /* HELD at each server */
    struct cxlp_remote_opts ro = {.token_file = tok, .timeout_ms = 20000};
    cxlp_remote *ra, *rb;
    CHECK_OK(cxlp_remote_open(url[0], &ro, &ra));
    CHECK_OK(cxlp_remote_open(url[1], &ro, &rb));
    uint8_t bits[64];
    uint64_t ver_a, ver_b;
    CHECK(n_shards <= 8 * sizeof bits);
    CHECK_OK(remote_held(ra, "d", &ver_a, bits, n_shards));
    for (uint64_t k = 0; k < n_shards; k++)
        CHECK(!((bits[k / 8] >> (k % 8)) & 1));
    CHECK_OK(remote_held(rb, "d", &ver_b, bits, n_shards));
    for (uint64_t k = 0; k < n_shards; k++)
        CHECK(((bits[k / 8] >> (k % 8)) & 1) == (k < HELD_B));
    CHECK_RC(remote_held(rb, "d", &ver_b, bits, n_shards - 1), CXLP_ENOTFOUND);
    printf("HELD: A has none of d's %llu shards in memory, B has shards 0..%u\n",
           (unsigned long long)n_shards, HELD_B - 1);

    /* B serves its mirror from memory only */
    uint8_t *x = malloc(SHARD * 2), *y = malloc(SHARD * 2);
    CHECK(x && y);
    CHECK_OK(remote_read_at(rb, "d", ver_b, 3, 0, 4096, x));
    CHECK_OK(remote_read_at(ra, "d", ver_a, 3, 0, 4096, y));
    CHECK(memcmp(x, y, 4096) == 0);
    CHECK_RC(remote_read_at(rb, "d", ver_b, HELD_B + 2, 0, 4096, x), CXLP_EBUSY);
    CHECK(strstr(cxlp_errmsg(rb), "not in this host's memory"));
    printf("B serves shard 3 of its mirror from memory; shard %u, not in its memory: %s\n",
           HELD_B + 2, cxlp_errmsg(rb));
    cxlp_remote_close(ra);
    cxlp_remote_close(rb);

    /* C (A first, then B): a shard B has in memory comes from B */
    const uint64_t flip_b = first_of(sa, 3, per) + 5, flip_home = first_of(sa, HELD_B + 4, per) + 5;
    ru_flip_record(homeA, seed, flip_b);
    ru_flip_record(homeA, seed, flip_home);
    snprintf(t[4], sizeof t[4], "dram=shm:%s.d:8M", C);
    char both[420];
    snprintf(both, sizeof both, "remote=%s,%s", url[0], url[1]);
    cxlp_pool *c = make(C, (const char *[]){t[4], both}, 2);
    cxlp_store *sc;
    CHECK_OK(cxlp_store_open(c, "d", &sc));
    /* A stopped, and a timeout shorter than its reader's retries: a read
     * that tried A first would fail; one routed to B succeeds */
    CHECK(setenv("CXLPOOL_REMOTE_TIMEOUT_MS", "1500", 1) == 0);
    CHECK(kill(srv_a, SIGSTOP) == 0);
    CHECK_OK(cxlp_store_read_copy(sc, flip_b, rec, sizeof rec, &len));
    CHECK(rec_ok(rec, len, 1, seed, flip_b));
    CHECK(kill(srv_a, SIGCONT) == 0);
    CHECK_RC(cxlp_store_read_copy(sc, flip_home, rec, sizeof rec, &len), CXLP_ECORRUPT);
    uint64_t other = first_of(sa, HELD_B + 1, per) + 1; /* no peer's memory: A's home */
    CHECK_OK(cxlp_store_read_copy(sc, other, rec, sizeof rec, &len));
    CHECK(rec_ok(rec, len, 1, seed, other));
    printf("C staged shard 3 from B's memory (A's home copy is flipped), shard %u from A's "
           "home (its flipped copy refused)\n", HELD_B + 4);
    CHECK_OK(cxlp_store_close(sc));
    CHECK_OK(cxlp_pool_close(c));

    /* D: its own d, B a second holder; every shard another host's */
    snprintf(t[5], sizeof t[5], "nvme=file:%s:32M", homeD);
    char dram_d[192], rem_d[240];
    snprintf(dram_d, sizeof dram_d, "dram=shm:%s.d:8M", D);
    snprintf(rem_d, sizeof rem_d, "remote=%s", url[1]);
    cxlp_pool *d = make(D, (const char *[]){dram_d, rem_d, t[5]}, 3);
    uint64_t nd;
    CHECK_OK(rec_ingest(d, "d", 1, seed, 2 * MiB, SHARD, &nd, NULL));
    CHECK(nd == n);
    size_t nl;
    CHECK_OK(cxlp_pool_list(d, NULL, 0, &nl)); /* B named as a holder */
    const uint64_t flip_d = first_of(sa, 5, per) + 7;
    ru_flip_record(homeD, seed, flip_d);
    cxlp_store *sd;
    CHECK_OK(cxlp_store_open(d, "d", &sd));
    struct cxlp_record_loc loc;
    CHECK_OK(cxlp_store_locate(sd, flip_d, &loc));
    CHECK(loc.tiers == (2u | 4u)); /* B and the home */
    /* a copy of a shard B does not have comes from D's home, not from B
     * (which would refuse it: a refusal puts the remote tier last for 5 s,
     * and the epoch below would then read nothing from B) */
    const uint64_t own = first_of(sd, HELD_B + 3, per) + 2;
    CHECK_OK(cxlp_store_read_copy(sd, own, rec, sizeof rec, &len));
    CHECK(rec_ok(rec, len, 1, seed, own));
    uint8_t away[64];
    memset(away, 0xff, sizeof away);
    struct cxlp_sampler_config cfg = {.kind = CXLP_ORDER_BLOCK, .n = n, .seed = 3,
                                      .shard_size = per, .window = 4, .world = 1};
    struct cxlp_loader_opts o = {.batch_size = 32, .threads = 2, .tier_budget = 1 * MiB,
                                 .tier_sparse = 1, .tier_away = away};
    cxlp_sampler *sm;
    cxlp_loader *l;
    CHECK_OK(rec_loader(sd, 1, &cfg, o, &sm, &l));
    uint8_t *seen = calloc(n, 1);
    uint64_t got;
    int rc = rec_drain(l, seen, n, 1, seed, &got, "D");
    if (rc < 0)
        fprintf(stderr, "loader: %s\n", cxlp_errmsg(l));
    CHECK_OK(rc);
    CHECK(got == n);
    struct cxlp_loader_stats st;
    CHECK_OK(cxlp_loader_stats(l, &st));
    printf("D's loader, every shard another host's: %llu records, %llu shards read in part, "
           "%llu of them (%llu records) from B's memory, %llu bytes staged\n",
           (unsigned long long)got, (unsigned long long)st.partial_reads,
           (unsigned long long)st.peer_reads, (unsigned long long)st.peer_records,
           (unsigned long long)st.bytes_staged);
    CHECK(st.bytes_staged == 0 && st.partial_reads == st.sparse_reads);
    CHECK(st.peer_records == HELD_B * per && st.peer_reads >= HELD_B);
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);

    /* B killed: the same epoch reads those shards from D's home, where a
     * block of shard 5 is flipped: the loader stops there, naming it,
     * having delivered only intact records */
    int ws;
    CHECK(kill(srv_b.pid, SIGKILL) == 0);
    CHECK(waitpid(srv_b.pid, &ws, 0) == srv_b.pid);
    memset(seen, 0, n);
    CHECK_OK(rec_loader(sd, 1, &cfg, o, &sm, &l));
    rc = rec_drain(l, seen, n, 1, seed, &got, "D, B dead");
    CHECK(rc != 1);
    printf("B killed: %llu intact records, then: %s\n", (unsigned long long)got,
           cxlp_errmsg(l));
    CHECK(rc == CXLP_ECORRUPT && strstr(cxlp_errmsg(l), "shard 5") && got < n);
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
    CHECK_OK(cxlp_store_close(sd));
    CHECK_OK(cxlp_pool_close(d));

    kill(srv_a, SIGTERM);
    CHECK(waitpid(srv_a, &ws, 0) == srv_a && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    free(x);
    free(y);
    CHECK_OK(cxlp_store_close(sb));
    CHECK_OK(cxlp_store_close(sa));
    CHECK_OK(cxlp_pool_close(b));
    CHECK_OK(cxlp_pool_close(a));
    const char *names[] = {A, B, C, D};
    for (int i = 0; i < 4; i++)
        cxlp_pool_destroy(names[i]);
    unlink(homeA);
    unlink(homeD);
    unlink(tok);
    unlink(logp);
    printf("test_remote_peers: ok\n");
    return 0;
}
