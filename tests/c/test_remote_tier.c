/* The remote tier (docs/remote.md, "The remote tier"): pool A's datasets
 * served by cxlp_serve in child processes, read on pool B made of a small
 * dram tier and a remote tier naming A's servers.
 *   - B lists A's datasets (fixed records, variable records, three fields
 *     with a document index) with A's counts; opening one mirrors it;
 *   - every record read on B (cxlp_store_read_copy: ds[i]) equals A's, the
 *     document index and schema too, and cxlp_pool_verify passes on B;
 *   - one loader epoch per placement policy on B, each from a cold dram
 *     tier (a migration to the dataset's home, the remote tier): every
 *     record once and intact, shards staged from the peer;
 *   - a byte flipped in the served pool's copy of a shard: B refuses the
 *     shard (CXLP_ECORRUPT naming it), places no copy of it, reads the
 *     others; a loader stops at it having delivered only intact records;
 *   - two holders: B4's own dataset that a peer serves too is read from
 *     the holder configured cheaper, and from its home when the peers die;
 *   - two servers of A: one killed (SIGKILL) during a loader epoch, which
 *     goes on from the other, every record once and intact; both killed: a
 *     read fails within the timeout with the host and the shard named; a
 *     server started again on the same port: the next read succeeds (a
 *     new connection); a server stopped (SIGSTOP): -ETIMEDOUT after the
 *     reader's timeout.
 * Without UCX, a remote tier is refused (CXLP_EUNSUPPORTED). */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "records.h"
#include "remote_util.h"

#define MiB (1ull << 20)
#define SHARD (64u * 1024)

static char tok[256], logp[256];

static uint64_t ms_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void kill_server(pid_t pid)
{
    int st;
    CHECK(kill(pid, SIGKILL) == 0);
    CHECK(waitpid(pid, &st, 0) == pid);
    for (int i = 0; i < ru_n_children; i++)
        if (ru_children[i] == pid)
            ru_children[i] = 0;
}

/* Pool name: dram tier of dram_size and a remote tier of the urls. */
static cxlp_pool *make_b(const char *name, const char *dram_size, const char *urls)
{
    char dram[192], rem[460];
    snprintf(dram, sizeof dram, "dram=shm:%s.d:%s", name, dram_size);
    snprintf(rem, sizeof rem, "remote=%s", urls);
    const char *tiers[] = {dram, rem};
    struct cxlp_pool_opts po = {.meta_bytes = 4u << 20};
    cxlp_pool *p;
    cxlp_pool_destroy(name);
    int rc = cxlp_pool_create_tiered(name, tiers, 2, &po, &p);
    if (rc)
        fprintf(stderr, "create %s: %s\n", name, cxlp_errmsg(NULL));
    CHECK_OK(rc);
    return p;
}

static const struct cxlp_dataset_info *find(const struct cxlp_dataset_info *v, size_t n,
                                            const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

/* Every record of name read on b equals a's (cxlp_store_read_copy). */
static void same_records(cxlp_pool *a, cxlp_pool *b, const char *name)
{
    cxlp_store *sa, *sb;
    CHECK_OK(cxlp_store_open(a, name, &sa));
    int rc = cxlp_store_open(b, name, &sb);
    if (rc)
        fprintf(stderr, "open %s on B: %s\n", name, cxlp_errmsg(NULL));
    CHECK_OK(rc);
    CHECK(cxlp_store_tiered(sb));
    uint64_t n = cxlp_store_count(sa);
    CHECK(cxlp_store_count(sb) == n);
    const struct cxlp_schema *ca = cxlp_store_schema(sa), *cb = cxlp_store_schema(sb);
    CHECK(ca->n_fields == cb->n_fields && ca->fixed == cb->fixed);
    for (uint32_t f = 0; f < ca->n_fields; f++)
        CHECK(strcmp(ca->fields[f].name, cb->fields[f].name) == 0 &&
              ca->fields[f].dtype == cb->fields[f].dtype);
    const int64_t *da, *db;
    uint64_t nda, ndb;
    CHECK_OK(cxlp_store_docs(sa, &da, &nda));
    CHECK_OK(cxlp_store_docs(sb, &db, &ndb));
    CHECK(nda == ndb && (!nda || memcmp(da, db, (nda + 1) * 8) == 0));
    static uint8_t x[REC_VAR_MAX * 2], y[REC_VAR_MAX * 2];
    for (uint64_t i = 0; i < n; i++)
        for (uint32_t f = 0; f < ca->n_fields; f++) {
            uint64_t lx, ly;
            /* one field: the record (ds[i]); several: each field */
            if (ca->n_fields == 1) {
                CHECK_OK(cxlp_store_read_copy(sa, i, x, sizeof x, &lx));
                rc = cxlp_store_read_copy(sb, i, y, sizeof y, &ly);
            } else {
                CHECK_OK(cxlp_store_read_field_copy(sa, i, f, x, sizeof x, &lx));
                rc = cxlp_store_read_field_copy(sb, i, f, y, sizeof y, &ly);
            }
            if (rc)
                fprintf(stderr, "%s record %llu on B: %s\n", name, (unsigned long long)i,
                        cxlp_errmsg(NULL));
            CHECK_OK(rc);
            CHECK(lx == ly && memcmp(x, y, lx) == 0);
        }
    printf("%s: %llu records read through the remote tier equal the local reads (%llu "
           "documents)\n", name, (unsigned long long)n, (unsigned long long)ndb);
    CHECK_OK(cxlp_store_close(sa));
    CHECK_OK(cxlp_store_close(sb));
}

/* A server epoch() kills (SIGKILL) once the loader delivered kill_after
 * records: its stagers are reading from it then. */
static pid_t kill_pid;
static uint64_t kill_after;

/* One epoch of the block order over name on pool spec with policy: every
 * record once and intact. Returns the records delivered; *rc the loader's
 * error (0 at the end of the epoch). */
static uint64_t epoch(const char *spec, const char *name, int fixed, int policy, uint64_t seed,
                      int *rc_out)
{
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    uint64_t n = cxlp_store_count(s), n_shards;
    CHECK_OK(cxlp_store_shards(s, &n_shards, NULL, NULL));
    struct cxlp_sampler_config cfg = {.kind = CXLP_ORDER_BLOCK, .n = n, .seed = 7,
                                      .shard_size = n / n_shards + 1, .window = 4, .world = 1};
    struct cxlp_loader_opts o = {.batch_size = 16, .threads = 2, .tier_policy = policy,
                                 .tier_budget = 1 * MiB, .tier_horizon = 8};
    cxlp_sampler *sm;
    cxlp_loader *l;
    CHECK_OK(rec_loader(s, fixed, &cfg, o, &sm, &l));
    uint8_t *seen = calloc(n, 1);
    uint64_t got = 0;
    struct cxlp_batch *b;
    int rc;
    for (;;) {
        if ((rc = cxlp_loader_next(l, &b)))
            break;
        if (!b)
            break;
        uint64_t bad;
        if (!rec_batch_ok(b, seen, n, fixed, seed, &bad)) {
            fprintf(stderr, "record %llu wrong or repeated (%s)\n", (unsigned long long)bad,
                    cxlp_policy_name(policy));
            CHECK(0);
        }
        got += b->rows;
        cxlp_loader_release(l, b);
        if (kill_pid > 0 && got >= kill_after) {
            kill_server(kill_pid);
            printf("  server %d killed after %llu records of the epoch\n", (int)kill_pid,
                   (unsigned long long)got);
            kill_pid = 0;
        }
    }
    struct cxlp_loader_stats st;
    CHECK_OK(cxlp_loader_stats(l, &st));
    if (rc)
        printf("  %s: loader stopped after %llu records: %s\n", cxlp_policy_name(policy),
               (unsigned long long)got, cxlp_errmsg(l));
    else
        printf("  %-13s %-5s: %llu records, %.2f MiB staged from the peer, %llu evictions, "
               "%llu shards read in part\n", cxlp_policy_name(policy), name,
               (unsigned long long)got, (double)st.bytes_staged / MiB,
               (unsigned long long)st.evictions, (unsigned long long)st.partial_reads);
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(p));
    *rc_out = rc;
    return got;
}

/* The same in the shm object of pool. */
static void flip_record(const char *pool, uint64_t seed, uint64_t i)
{
    char path[256];
    snprintf(path, sizeof path, "/dev/shm/cxlp.%s", pool);
    ru_flip_record(path, seed, i);
}

static void no_ucx(void)
{
    const char *tiers[] = {"dram=shm:8M", "remote=ucx://127.0.0.1:1/p"};
    cxlp_pool *p;
    CHECK_RC(cxlp_pool_create_tiered(test_name("rtnoucx"), tiers, 2, NULL, &p),
             CXLP_EUNSUPPORTED);
    CHECK(strstr(cxlp_errmsg(NULL), "no UCX"));
    printf("no UCX in this build: a remote tier is refused\n");
}

int main(void)
{
    if (!cxlp_remote_available()) {
        no_ucx();
        return 0;
    }
    ru_guard(600);
    const uint64_t seed = 5;
    char A[128], A2[128], B[128], B2[128], B3[128];
    snprintf(A, sizeof A, "%s", test_name("rta"));
    snprintf(A2, sizeof A2, "%s", test_name("rta2"));
    snprintf(B, sizeof B, "%s", test_name("rtb"));
    snprintf(B2, sizeof B2, "%s", test_name("rtb2"));
    snprintf(B3, sizeof B3, "%s", test_name("rtb3"));
    snprintf(tok, sizeof tok, "/tmp/%s.tok", A);
    snprintf(logp, sizeof logp, "/tmp/%s.log", A);
    unlink(logp);
    ru_write_file(tok, "tier-secret\n", 0600);
    CHECK(setenv("CXLPOOL_TOKEN_FILE", tok, 1) == 0);
    /* generous while the servers live (a loaded machine must not fail a
     * read); short for the failure phases below */
    CHECK(setenv("CXLPOOL_REMOTE_TIMEOUT_MS", "20000", 1) == 0);

    /* pool A: one tier, three datasets */
    cxlp_pool *a;
    cxlp_pool_destroy(A);
    CHECK_OK(cxlp_pool_create(A, 96 * MiB, NULL, &a));
    uint64_t nf, nv;
    CHECK_OK(rec_ingest(a, "fixed", 1, seed, 3 * MiB, SHARD, &nf, NULL));
    CHECK_OK(rec_ingest(a, "var", 0, seed, 2 * MiB, SHARD, &nv, NULL));
    CHECK_OK(mv_write(a, "mv", 2000, seed, 16u << 10));
    uint64_t ns, nsame;
    CHECK_OK(rec_ingest(a, "stale", 1, seed, 512 * 1024, SHARD, &ns, NULL));
    CHECK_OK(rec_ingest(a, "same", 1, seed, 1 * MiB, SHARD, &nsame, NULL));
    int p1, p2;
    fflush(stdout);
    pid_t s1 = ru_serve(A, tok, logp, &p1), s2 = ru_serve(A, tok, logp, &p2);
    struct ru_spare spare = ru_spare_fork(A, tok, logp);
    char u1[200], u2[200], both[420];
    snprintf(u1, sizeof u1, "ucx://127.0.0.1:%d/%s", p1, A);
    snprintf(u2, sizeof u2, "ucx://127.0.0.1:%d/%s", p2, A);
    snprintf(both, sizeof both, "%s,%s", u1, u2);

    /* B lists A's datasets, and reads them */
    cxlp_pool *b = make_b(B, "4M", u1);
    struct cxlp_dataset_info la[8], lb[8];
    size_t na, nb;
    CHECK_OK(cxlp_pool_list(a, la, 8, &na));
    CHECK_OK(cxlp_pool_list(b, NULL, 0, &nb));
    CHECK(nb == na && nb == 5);
    CHECK_OK(cxlp_pool_list(b, lb, 8, &nb));
    for (size_t i = 0; i < na; i++) {
        const struct cxlp_dataset_info *x = find(lb, nb, la[i].name);
        CHECK(x && x->n_records == la[i].n_records && x->n_shards == la[i].n_shards &&
              x->data_bytes == la[i].data_bytes && x->n_docs == la[i].n_docs &&
              x->fixed == la[i].fixed);
    }
    printf("B lists A's %zu datasets with A's counts\n", nb);
    CHECK_RC(cxlp_store_open(b, "nope", &(cxlp_store *){NULL}), CXLP_ENOTFOUND);
    same_records(a, b, "fixed");
    same_records(a, b, "var");
    same_records(a, b, "mv");
    {
        cxlp_store *s;
        CHECK_OK(cxlp_store_open(b, "mv", &s));
        CHECK(mv_read_ok(s, 0, 2000, seed) == 2000);
        CHECK_OK(cxlp_store_close(s));
    }
    int rc = cxlp_pool_verify(b, NULL, NULL);
    if (rc)
        fprintf(stderr, "verify B: %s\n", cxlp_errmsg(b));
    CHECK_OK(rc);
    /* a migration to a mirror's home is one to the remote tier; the peer
     * knows a mirror by its name: a concat of mirrors is refused */
    CHECK_RC(cxlp_migrate(b, "fixed", "remote", NULL, NULL), 0);
    const char *parts[] = {"fixed", "stale"};
    CHECK_RC(cxlp_pool_concat(b, "both", parts, 2), CXLP_EUNSUPPORTED);
    CHECK(strstr(cxlp_errmsg(b), "held by a peer"));
    CHECK_OK(cxlp_pool_close(b));

    /* one epoch per placement policy, each from a cold dram tier */
    const int policies[] = {CXLP_POLICY_LOOKAHEAD, CXLP_POLICY_LRU, CXLP_POLICY_STREAMING,
                            CXLP_POLICY_HOT_FIRST, CXLP_POLICY_FULL_PREFETCH};
    for (size_t i = 0; i < sizeof policies / sizeof policies[0]; i++) {
        for (int fixed = 1; fixed >= 0; fixed--) {
            const char *name = fixed ? "fixed" : "var";
            CHECK_OK(cxlp_pool_open(B, NULL, &b));
            CHECK_OK(cxlp_migrate(b, name, "remote", NULL, NULL)); /* cold */
            CHECK_OK(cxlp_pool_close(b));
            int lrc;
            uint64_t got = epoch(B, name, fixed, policies[i], seed, &lrc);
            CHECK_OK(lrc);
            CHECK(got == (fixed ? nf : nv));
        }
    }
    CHECK_OK(cxlp_pool_open(B, NULL, &b));
    CHECK_OK(cxlp_pool_verify(b, NULL, NULL));

    /* A replaces "stale": B's mirror of the old one reads nothing from the
     * peer (its shard table differs) until it is removed; then the new one
     * is mirrored */
    CHECK_OK(cxlp_pool_remove(a, "stale"));
    uint64_t ns2;
    CHECK_OK(rec_ingest(a, "stale", 1, seed + 1, 768 * 1024, SHARD, &ns2, NULL));
    {
        cxlp_store *st;
        CHECK_OK(cxlp_store_open(b, "stale", &st));
        uint8_t r1[REC_FIXED_SIZE];
        uint64_t l1;
        CHECK_RC(cxlp_store_read_copy(st, 0, r1, sizeof r1, &l1), CXLP_ENOTFOUND);
        CHECK(strstr(cxlp_errmsg(NULL), "not the one this pool mirrored"));
        printf("a dataset the peer replaced: %s\n", cxlp_errmsg(NULL));
        CHECK_OK(cxlp_store_close(st));
        CHECK_OK(cxlp_pool_remove(b, "stale"));
        CHECK_OK(cxlp_store_open(b, "stale", &st));
        CHECK(cxlp_store_count(st) == ns2);
        for (uint64_t i = 0; i < ns2; i++) {
            CHECK_OK(cxlp_store_read_copy(st, i, r1, sizeof r1, &l1));
            CHECK(rec_ok(r1, l1, 1, seed + 1, i));
        }
        CHECK_OK(cxlp_store_close(st));
        printf("removed and mirrored again: %llu records of the new one\n",
               (unsigned long long)ns2);
    }
    CHECK_OK(cxlp_pool_verify(b, NULL, NULL));
    CHECK_OK(cxlp_pool_close(b));

    /* two holders: B4 ingests "same" itself (its home, nvme) and its peer
     * serves the same dataset; the cheaper source by $CXLPOOL_TIER_BW is
     * read. A byte flipped in B4's home copy tells which was. */
    char B4[128], nvme4[256], dram4[192], rem4[460];
    snprintf(B4, sizeof B4, "%s", test_name("rtb4"));
    snprintf(nvme4, sizeof nvme4, "nvme=file:/tmp/cxlp-%s.tier:32M", B4);
    snprintf(dram4, sizeof dram4, "dram=shm:%s.d:4M", B4);
    snprintf(rem4, sizeof rem4, "remote=%s", both);
    const char *t4[] = {dram4, rem4, nvme4};
    struct cxlp_pool_opts po4 = {.meta_bytes = 4u << 20};
    cxlp_pool *b4;
    CHECK_OK(cxlp_pool_create_tiered(B4, t4, 3, &po4, &b4));
    uint64_t nsame4;
    CHECK_OK(rec_ingest(b4, "same", 1, seed, 1 * MiB, SHARD, &nsame4, NULL));
    CHECK(nsame4 == nsame);
    CHECK_OK(cxlp_pool_list(b4, NULL, 0, &nb)); /* the peer named as a holder */
    CHECK(nb == 5);
    cxlp_store *s4;
    CHECK_OK(cxlp_store_open(b4, "same", &s4));
    struct cxlp_record_loc loc4;
    CHECK_OK(cxlp_store_locate(s4, 100, &loc4));
    CHECK(loc4.tiers == (2u | 4u)); /* the peer and the home, no memory copy */
    char home4[256];
    snprintf(home4, sizeof home4, "/tmp/cxlp-%s.tier", B4);
    ru_flip_record(home4, seed, 100);
    uint8_t r4[REC_FIXED_SIZE];
    uint64_t l4;
    CHECK(setenv("CXLPOOL_TIER_BW", "remote=100M,nvme=10G", 1) == 0); /* the home first */
    CHECK_RC(cxlp_store_read_copy(s4, 100, r4, sizeof r4, &l4), CXLP_ECORRUPT);
    CHECK(setenv("CXLPOOL_TIER_BW", "remote=10G,nvme=100M", 1) == 0); /* the peer first */
    CHECK_OK(cxlp_store_read_copy(s4, 100, r4, sizeof r4, &l4));
    CHECK(rec_ok(r4, l4, 1, seed, 100));
    CHECK_OK(cxlp_store_locate(s4, 100, &loc4));
    CHECK(loc4.tiers == (1u | 2u | 4u));
    CHECK_OK(cxlp_store_close(s4));
    CHECK_OK(cxlp_pool_close(b4));
    printf("two holders: the home's flipped byte refused when the home is cheaper, the peer's "
           "copy read when it is\n");

    /* a byte flipped in the served copy of shard k of A2 */
    cxlp_pool *a2;
    cxlp_pool_destroy(A2);
    CHECK_OK(cxlp_pool_create(A2, 32 * MiB, NULL, &a2));
    uint64_t nf2;
    CHECK_OK(rec_ingest(a2, "fixed", 1, seed, 1 * MiB, SHARD, &nf2, NULL));
    CHECK_OK(cxlp_pool_close(a2));
    const uint64_t bad_rec = 100;
    flip_record(A2, seed, bad_rec);
    int p3;
    fflush(stdout);
    pid_t s3 = ru_serve(A2, tok, logp, &p3);
    char u3[200];
    snprintf(u3, sizeof u3, "ucx://127.0.0.1:%d/%s", p3, A2);
    cxlp_pool *b2 = make_b(B2, "4M", u3);
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(b2, "fixed", &s));
    struct cxlp_record_loc loc;
    CHECK_OK(cxlp_store_locate(s, bad_rec, &loc));
    CHECK(loc.shard > 0);
    uint8_t rec[REC_FIXED_SIZE];
    uint64_t len;
    CHECK_RC(cxlp_store_read_copy(s, bad_rec, rec, sizeof rec, &len), CXLP_ECORRUPT);
    char want[64];
    snprintf(want, sizeof want, "shard %llu", (unsigned long long)loc.shard);
    CHECK(strstr(cxlp_errmsg(NULL), want));
    printf("flipped byte refused: %s\n", cxlp_errmsg(NULL));
    CHECK_OK(cxlp_store_locate(s, bad_rec, &loc));
    CHECK(!(loc.tiers & 1)); /* no copy in dram */
    CHECK_OK(cxlp_store_read_copy(s, 0, rec, sizeof rec, &len));
    CHECK(rec_ok(rec, len, 1, seed, 0));
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_pool_close(b2));
    int lrc;
    uint64_t got = epoch(B2, "fixed", 1, CXLP_POLICY_LOOKAHEAD, seed, &lrc);
    CHECK_RC(lrc, CXLP_ECORRUPT);
    CHECK(got < nf2);

    /* failover: B3 names both servers; the first is killed mid-read. Its
     * readers (made from here on) give up on a peer after 1.5 s */
    CHECK(setenv("CXLPOOL_REMOTE_TIMEOUT_MS", "1500", 1) == 0);
    cxlp_pool *b3 = make_b(B3, "4M", both);
    cxlp_store *sv, *sf;
    CHECK_OK(cxlp_store_open(b3, "var", &sv));
    CHECK_OK(cxlp_store_open(b3, "fixed", &sf));
    /* a loader epoch over "fixed" while the first server is killed: its
     * stagers go on from the second, every record once and intact */
    kill_pid = s1;
    kill_after = nf / 3;
    got = epoch(B3, "fixed", 1, CXLP_POLICY_LOOKAHEAD, seed, &lrc);
    CHECK(kill_pid == 0);
    CHECK_OK(lrc);
    CHECK(got == nf);
    static uint8_t buf[REC_VAR_MAX];
    uint64_t t0 = ms_now();
    for (uint64_t i = 0; i < nv; i++) {
        rc = cxlp_store_read_copy(sv, i, buf, sizeof buf, &len);
        if (rc)
            fprintf(stderr, "var %llu after the kill: %s\n", (unsigned long long)i,
                    cxlp_errmsg(NULL));
        CHECK_OK(rc);
        CHECK(rec_ok(buf, len, 0, seed, i));
    }
    printf("first server killed: %llu records of var read from the second in %llu ms\n",
           (unsigned long long)nv, (unsigned long long)(ms_now() - t0));

    /* both killed: a read of a shard not in memory fails, naming host and shard */
    CHECK_OK(cxlp_migrate(b3, "fixed", "remote", NULL, NULL)); /* no memory copy left */
    kill_server(s2);
    CHECK_OK(cxlp_store_locate(sf, nf - 1, &loc));
    snprintf(want, sizeof want, "shard %llu", (unsigned long long)loc.shard);
    t0 = ms_now();
    rc = cxlp_store_read_copy(sf, nf - 1, rec, sizeof rec, &len);
    uint64_t took = ms_now() - t0;
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", cxlp_errmsg(NULL));
    printf("both servers killed: %s (%d) after %llu ms\n", msg, rc, (unsigned long long)took);
    CHECK(rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -ETIMEDOUT);
    CHECK(strstr(msg, "127.0.0.1:"));
    CHECK(strstr(msg, want));
    CHECK(took < 15000); /* the timeout is 1.5 s a try: no hang */

    /* ... and B4, whose home holds "same" too, reads from its home when the
     * peers fail, although they are configured cheaper */
    CHECK_OK(cxlp_pool_open(B4, NULL, &b4));
    CHECK_OK(cxlp_store_open(b4, "same", &s4));
    t0 = ms_now();
    for (uint64_t i = 0; i < nsame; i += 64) {
        CHECK_OK(cxlp_store_locate(s4, i, &loc4));
        if (loc4.shard == 1)
            continue; /* the shard whose home copy was flipped */
        rc = cxlp_store_read_copy(s4, i, r4, sizeof r4, &l4);
        if (rc)
            fprintf(stderr, "same %llu with the peers dead: %s\n", (unsigned long long)i,
                    cxlp_errmsg(NULL));
        CHECK_OK(rc);
        CHECK(rec_ok(r4, l4, 1, seed, i));
    }
    printf("peers dead: B4 read \"same\" from its home in %llu ms\n",
           (unsigned long long)(ms_now() - t0));
    CHECK_OK(cxlp_store_close(s4));
    CHECK_OK(cxlp_pool_close(b4));
    CHECK(unsetenv("CXLPOOL_TIER_BW") == 0);

    /* a server back on the second port: the same reader connects again */
    char listen[64];
    snprintf(listen, sizeof listen, "127.0.0.1:%d", p2);
    int p4;
    CHECK_OK(ru_spare_go(&spare, listen, &p4));
    CHECK(p4 == p2);
    rc = cxlp_store_read_copy(sf, nf - 1, rec, sizeof rec, &len);
    if (rc)
        fprintf(stderr, "read after the server came back: %s\n", cxlp_errmsg(NULL));
    CHECK_OK(rc);
    CHECK(rec_ok(rec, len, 1, seed, nf - 1));
    printf("a server back on port %d: read again\n", p2);

    /* a server that stops answering (SIGSTOP): a read of a shard not in
     * memory fails with -ETIMEDOUT once the reader's timeout is spent */
    CHECK(kill(spare.pid, SIGSTOP) == 0);
    CHECK_OK(cxlp_store_locate(sf, 0, &loc));
    CHECK(!(loc.tiers & 1));
    snprintf(want, sizeof want, "shard %llu", (unsigned long long)loc.shard);
    t0 = ms_now();
    rc = cxlp_store_read_copy(sf, 0, rec, sizeof rec, &len);
    took = ms_now() - t0;
    snprintf(msg, sizeof msg, "%s", cxlp_errmsg(NULL));
    printf("server stopped: %s (%d) after %llu ms\n", msg, rc, (unsigned long long)took);
    CHECK_RC(rc, -ETIMEDOUT);
    CHECK(strstr(msg, "127.0.0.1:") && strstr(msg, want) && strstr(msg, "no reply in"));
    CHECK(took < 15000); /* no hang */
    CHECK(kill(spare.pid, SIGCONT) == 0);
    kill(spare.pid, SIGTERM);
    int st;
    CHECK(waitpid(spare.pid, &st, 0) == spare.pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_OK(cxlp_store_close(sv));
    CHECK_OK(cxlp_store_close(sf));
    CHECK_OK(cxlp_pool_close(b3));

    kill(s3, SIGTERM);
    CHECK(waitpid(s3, &st, 0) == s3 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    CHECK_OK(cxlp_pool_close(a));
    CHECK_OK(cxlp_pool_destroy(A));
    CHECK_OK(cxlp_pool_destroy(A2));
    CHECK_OK(cxlp_pool_destroy(B));
    CHECK_OK(cxlp_pool_destroy(B2));
    CHECK_OK(cxlp_pool_destroy(B3));
    CHECK_OK(cxlp_pool_destroy(B4));
    unlink(tok);
    unlink(logp);
    printf("ok\n");
    return 0;
}
