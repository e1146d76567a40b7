/* cxlp_pool_rewrite: a dataset of an earlier shard format (3: 64 KiB block
 * sums; 2: none; 1: tests/c/test_columns.c) written again in format 4 and
 * put in its place.
 *   - every record, field by field, the schema, the document index and the
 *     placement policy are the same; the format is 4 with 4 KiB blocks;
 *     verify passes (and stops advising the rewrite it advised before);
 *     --shard-bytes cuts the shards anew;
 *   - a store opened before keeps reading the old dataset, in its old
 *     format, until it closes; then the old one's space is free again (no
 *     leak: free + used == the data area, nothing deferred or reserved);
 *   - refused, each with nothing changed: no such dataset, a read-only
 *     handle, NULL arguments, a pool without room for a second copy
 *     (CXLP_EFULL), an old shard with a flipped byte (CXLP_ECORRUPT naming
 *     the shard);
 *   - the dataset removed (CXLP_ENOTFOUND), or removed and published again
 *     or rewritten by another writer (CXLP_EBUSY), while a rewrite runs:
 *     that rewrite publishes nothing;
 *   - killed at any instant (forced points around the flip, then random
 *     instants): verify passes, the dataset is whole in the old format or
 *     the new, and nothing stays reserved once the next writer ran;
 *   - rewritten over and over while reader processes open it and check
 *     every record (CXLP_SOAK_SECONDS, 2 s by default): no record wrong.
 */
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "test.h"
#include "records.h"
#include "shard_util.h"
#include "pool/pool.h"
#include "store/store.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)

static uint64_t seed;

static void mv_ingest(cxlp_pool *p, const char *name, uint64_t n)
{
    mv_write(p, name, n, seed, 16 * KiB);
}

static void mv_check(cxlp_store *s, uint64_t n)
{
    CHECK(cxlp_store_count(s) == n);
    CHECK(mv_read_ok(s, 0, n, seed) == n);
    const int64_t *docs;
    uint64_t nd;
    CHECK_OK(cxlp_store_docs(s, &docs, &nd));
    CHECK(docs && nd == (n + 9) / 10);
    for (uint64_t d = 0; d < nd; d++)
        CHECK(docs[d] == (int64_t)(d * 10));
    CHECK(docs[nd] == (int64_t)n);
}

/* ---- helpers */

/* Every record of a dataset of rec_ingest's (fixed, seed) intact. */
static void rec_check(cxlp_store *s, int fixed, uint64_t n)
{
    CHECK(cxlp_store_count(s) == n);
    for (uint64_t i = 0; i < n; i++) {
        struct cxlp_view v;
        CHECK_OK(cxlp_store_read(s, i, &v));
        CHECK(rec_ok(v.data, v.len, fixed, seed, i));
    }
}

static void check(cxlp_store *s, const char *name, uint64_t n)
{
    if (strcmp(name, "mv") == 0)
        mv_check(s, n);
    else
        rec_check(s, strcmp(name, "fx") == 0, n);
}

static uint32_t format_of(cxlp_store *s, uint64_t *block)
{
    uint32_t f;
    CHECK_OK(cxlp_store_format(s, &f, block, NULL));
    return f;
}

/* Every shard of dataset name made the shard format an earlier build
 * wrote, in the pool's memory. */
static void downgrade(cxlp_pool *p, const char *name, uint32_t version)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    uint8_t *base = pool_base_rw(p, 0);
    for (uint64_t k = 0; k < s->n_shards; k++)
        shard_downgrade(base + s->loc[k].off, version);
    CHECK_OK(cxlp_store_close(s));
    CHECK_OK(cxlp_store_open(p, name, &s));
    CHECK(format_of(s, NULL) == version);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
}

/* Nothing reserved or deferred once a transaction reclaimed what no lease
 * pins: every byte is free or a dataset's. */
static void no_leak(cxlp_pool *p)
{
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 0, 4096, &e)); /* a transaction: reclaims */
    CHECK_OK(pool_unreserve(p, 0, e));
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.reserved_bytes == 0 && st.deferred_bytes == 0);
    CHECK(st.free_bytes + st.used_bytes == st.data_bytes);
}

static uint64_t version_of(cxlp_pool *p, const char *name)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    struct cxlp_dataset_info in;
    CHECK_OK(cxlp_store_info(s, &in));
    CHECK_OK(cxlp_store_close(s));
    return in.version;
}

/* ---- the rewrite itself */

/* Whether cxlp_pool_verify's line for dataset name says advice: the
 * rewrite for a dataset of an earlier format. */
struct lines {
    const char *name, *advice;
    int ok, found;
};

static void on_line(void *ctx, const char *l)
{
    struct lines *x = ctx;
    char want[96];
    snprintf(want, sizeof want, "dataset %s: ok: ", x->name);
    if (strncmp(l, want, strlen(want)) == 0) {
        x->ok = 1;
        x->found = strstr(l, x->advice) != NULL;
    }
}

static int verify_says(cxlp_pool *p, const char *name, const char *advice)
{
    struct lines x = {name, advice, 0, 0};
    CHECK_OK(cxlp_pool_verify(p, on_line, &x));
    CHECK(x.ok);
    return x.found;
}

static void rewrite_one(cxlp_pool *p, const char *name, uint32_t old, uint64_t n)
{
    cxlp_store *s0, *s1;
    CHECK_OK(cxlp_store_open(p, name, &s0));
    uint64_t blk0, sh0, sh1;
    CHECK(format_of(s0, &blk0) == old);
    CHECK(blk0 == (old == 3 ? 64 * KiB : 0));
    CHECK_OK(cxlp_store_shards(s0, &sh0, NULL, NULL));
    struct cxlp_schema sc0 = *cxlp_store_schema(s0);
    const int policy = cxlp_store_policy(s0);
    CHECK(verify_says(p, name, old == 3 ? "; shard format 3, blocks of 64 KiB: `cxlpool "
                                          "rewrite` for 4 KiB blocks"
                                        : "; shard format 2, no block sums: `cxlpool rewrite` "
                                          "for 4 KiB blocks"));

    CHECK_OK(cxlp_pool_rewrite(p, name, NULL));

    /* the store opened before: the old dataset, whole, in its format */
    check(s0, name, n);
    CHECK(format_of(s0, NULL) == old);
    CHECK_OK(cxlp_store_verify(s0));
    /* a store opened now: format 4, the same records, schema, documents,
     * policy and shards (the dataset's own size) */
    CHECK_OK(cxlp_store_open(p, name, &s1));
    uint64_t blk1;
    CHECK(format_of(s1, &blk1) == SHARD_VERSION && blk1 == 4 * KiB);
    check(s1, name, n);
    CHECK(memcmp(cxlp_store_schema(s1), &sc0, sizeof sc0) == 0);
    CHECK(cxlp_store_policy(s1) == policy);
    CHECK_OK(cxlp_store_shards(s1, &sh1, NULL, NULL));
    CHECK(sh1 == sh0);
    CHECK_OK(cxlp_store_verify(s1));
    CHECK_OK(cxlp_store_close(s1));
    CHECK_OK(cxlp_store_close(s0));
    CHECK(!verify_says(p, name, "cxlpool rewrite"));
    no_leak(p);
    printf("%s: format %u (%llu shards) -> 4\n", name, old, (unsigned long long)sh0);
}

static void test_formats(cxlp_pool *p, uint64_t *n_fx, uint64_t *n_vr)
{
    CHECK_OK(rec_ingest(p, "fx", 1, seed, 3 * MiB, 256 * KiB, n_fx, NULL));
    CHECK_OK(rec_ingest(p, "vr", 0, seed, 3 * MiB, 256 * KiB, n_vr, NULL));
    mv_ingest(p, "mv", 4000);
    CHECK_OK(cxlp_pool_set_policy(p, "fx", CXLP_POLICY_LRU));
    downgrade(p, "fx", SHARD_VERSION_V3);
    downgrade(p, "vr", SHARD_VERSION_V2);
    downgrade(p, "mv", SHARD_VERSION_V3);
    no_leak(p);
    rewrite_one(p, "fx", 3, *n_fx);
    rewrite_one(p, "vr", 2, *n_vr);
    rewrite_one(p, "mv", 3, 4000);

    /* a shard size of its own: 4x the shards, the same records */
    struct cxlp_rewrite_opts o = {.shard_bytes = 64 * KiB, .no_hugepages = 1};
    CHECK_OK(cxlp_pool_rewrite(p, "fx", &o));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "fx", &s));
    uint64_t sh, per;
    CHECK_OK(cxlp_store_shards(s, &sh, &per, NULL));
    CHECK(per == 64 * KiB / REC_FIXED_SIZE && sh == (*n_fx + per - 1) / per);
    rec_check(s, 1, *n_fx);
    CHECK_OK(cxlp_store_close(s));
    no_leak(p);
}

static void test_refused(const char *spec, cxlp_pool *p)
{
    const uint64_t v = version_of(p, "fx");
    CHECK_RC(cxlp_pool_rewrite(NULL, "fx", NULL), CXLP_EARG);
    CHECK_RC(cxlp_pool_rewrite(p, NULL, NULL), CXLP_EARG);
    CHECK_RC(cxlp_pool_rewrite(p, "nope", NULL), CXLP_ENOTFOUND);
    CHECK(strstr(cxlp_errmsg(p), "nope"));
    struct cxlp_pool_opts ro = {.readonly = 1};
    cxlp_pool *r;
    CHECK_OK(cxlp_pool_open(spec, &ro, &r));
    CHECK_RC(cxlp_pool_rewrite(r, "fx", NULL), CXLP_EREADONLY);
    CHECK_OK(cxlp_pool_close(r));

    /* a flipped record byte in shard 2: refused, named; nothing changed */
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "fx", &s));
    uint8_t *at = pool_base_rw(p, 0) + s->loc[2].off + SHARD_DATA_OFF + 100;
    CHECK_OK(cxlp_store_close(s));
    *at ^= 0x10;
    CHECK_RC(cxlp_pool_rewrite(p, "fx", NULL), CXLP_ECORRUPT);
    printf("corrupt: %s\n", cxlp_errmsg(p));
    CHECK(strstr(cxlp_errmsg(p), "rewrite: dataset fx shard 2"));
    *at ^= 0x10;
    CHECK(version_of(p, "fx") == v);
    no_leak(p);

    /* no room for a second copy: a 12 MiB dataset in a pool of 32 */
    const char *small = test_name("rewritefull");
    cxlp_pool *q;
    CHECK_OK(cxlp_pool_create(small, 32 * MiB, NULL, &q));
    uint64_t n;
    CHECK_OK(rec_ingest(q, "big", 1, seed, 12 * MiB, MiB, &n, NULL));
    CHECK_RC(cxlp_pool_rewrite(q, "big", NULL), CXLP_EFULL);
    printf("full: %s\n", cxlp_errmsg(q));
    CHECK_OK(cxlp_store_open(q, "big", &s));
    rec_check(s, 1, n);
    CHECK_OK(cxlp_store_close(s));
    no_leak(q);
    CHECK_OK(cxlp_pool_close(q));
    CHECK_OK(cxlp_pool_destroy(small));
}

/* ---- other processes: a rewrite stopped or killed */

static volatile uint64_t *progress; /* shards done by the child, shared */

static void child_progress(void *ctx, uint64_t done, uint64_t total)
{
    (void)ctx;
    (void)total;
    __atomic_store_n(progress, done, __ATOMIC_RELAXED);
}

/* A child that rewrites name (rounds times, alternating shard sizes) with
 * CXLP_FAULT set to fault; exits with 0, or 10 + the code's distance from
 * CXLP_EPANIC for a library error. */
static pid_t spawn(const char *spec, const char *name, const char *fault, int rounds)
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid)
        return pid;
    if (fault)
        setenv("CXLP_FAULT", fault, 1);
    cxlp_pool *p;
    if (cxlp_pool_open(spec, NULL, &p))
        _exit(2);
    for (int r = 0; r < rounds; r++) {
        struct cxlp_rewrite_opts o = {.shard_bytes = r % 2 ? 128 * KiB : 256 * KiB,
                                      .progress = child_progress};
        int rc = cxlp_pool_rewrite(p, name, &o);
        if (rc) {
            fprintf(stderr, "child: %s\n", cxlp_errmsg(p));
            _exit(rc <= CXLP_EPANIC && rc > CXLP_EPANIC - 100 ? 10 + (CXLP_EPANIC - rc) : 3);
        }
    }
    cxlp_pool_close(p);
    _exit(0);
}

static int exit_code(int rc)
{
    return 10 + (CXLP_EPANIC - rc);
}

/* After a kill: whole, in format 3 (as it was) or 4, verified; nothing
 * left reserved once the next writer ran. */
static uint32_t after_kill(cxlp_pool *p, const char *name, uint64_t n)
{
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    uint32_t f = format_of(s, NULL);
    CHECK(f == 3 || f == 4);
    rec_check(s, 1, n);
    CHECK_OK(cxlp_store_close(s));
    no_leak(p);
    return f;
}

static void test_processes(const char *spec, cxlp_pool *p)
{
    progress = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(progress != MAP_FAILED);
    uint64_t n, m;
    int st;

    /* removed while the rewrite runs (the child stopped before its
     * commit): ENOTFOUND, nothing published; removed and published again,
     * or rewritten here meanwhile: EBUSY, what the name holds now stays */
    for (int again = 0; again < 3; again++) {
        CHECK_OK(rec_ingest(p, "kx", 1, seed, 2 * MiB, 256 * KiB, &n, NULL));
        pid_t pid = spawn(spec, "kx", "rewrite-before-commit:stop", 1);
        CHECK(waitpid(pid, &st, WUNTRACED) == pid && WIFSTOPPED(st));
        m = n;
        if (again == 2) {
            CHECK_OK(cxlp_pool_rewrite(p, "kx", NULL)); /* another writer's rewrite */
        } else {
            CHECK_OK(cxlp_pool_remove(p, "kx"));
            if (again)
                CHECK_OK(rec_ingest(p, "kx", 1, seed + 1, MiB, 256 * KiB, &m, NULL));
        }
        const uint64_t v = again ? version_of(p, "kx") : 0;
        kill(pid, SIGCONT);
        CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st));
        CHECK(WEXITSTATUS(st) == exit_code(again ? CXLP_EBUSY : CXLP_ENOTFOUND));
        if (again) {
            CHECK(version_of(p, "kx") == v);
            cxlp_store *s;
            CHECK_OK(cxlp_store_open(p, "kx", &s));
            CHECK(cxlp_store_count(s) == m);
            CHECK_OK(cxlp_store_close(s));
            CHECK_OK(cxlp_pool_remove(p, "kx"));
        } else {
            struct cxlp_dataset_info in[8];
            size_t k;
            CHECK_OK(cxlp_pool_list(p, in, 8, &k));
            for (size_t i = 0; i < k; i++)
                CHECK(strcmp(in[i].name, "kx") != 0);
        }
        CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
        no_leak(p);
    }

    /* killed: at the instants random kills rarely hit, then at random */
    CHECK_OK(rec_ingest(p, "kx", 1, seed, 4 * MiB, 256 * KiB, &n, NULL));
    downgrade(p, "kx", SHARD_VERSION_V3);
    static const char *forced[] = {"writer-mid-shard", "rewrite-before-commit", "reserve-locked",
                                   "publish-before-slot", "publish-before-flip",
                                   "publish-after-flip"};
    const int n_forced = (int)(sizeof forced / sizeof *forced);
    const int n_random = getenv("CXLP_SLOW_TESTS") ? 100 : 12;
    int became4 = 0;
    uint64_t rng = seed;
    for (int a = 0; a < n_forced + n_random; a++) {
        const char *fault = a < n_forced ? forced[a] : NULL;
        *progress = 0;
        pid_t pid = spawn(spec, "kx", fault, fault ? 1 : 1000);
        if (fault) {
            CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        } else {
            /* after some shards of the first rewrite or of a later one */
            uint64_t s0 = test_rand(&rng) % 16;
            if (!test_kill_at(pid, progress, s0, (useconds_t)(test_rand(&rng) % 3000), &st))
                CHECK(waitpid(pid, &st, 0) == pid);
        }
        uint32_t f = after_kill(p, "kx", n);
        became4 += f == 4;
        if (fault)
            CHECK(f == (strcmp(fault, "publish-after-flip") == 0 ? 4u : 3u));
        if (f == 4 && a + 1 < n_forced + n_random)
            downgrade(p, "kx", SHARD_VERSION_V3); /* the next kill starts from format 3 */
        printf("kill %d (%s): format %u\n", a, fault ? fault : "random", f);
    }
    CHECK(became4 >= 1);
    CHECK_OK(cxlp_pool_remove(p, "kx"));
    no_leak(p);
    munmap((void *)progress, 4096);
}

/* Reader processes that open the dataset again and again, each time
 * reading every record and checking it, while this process rewrites it
 * over and over (alternating shard sizes) for CXLP_SOAK_SECONDS (2 s; a
 * soak with more): every store sees one whole dataset, old or new; no
 * record is wrong; nothing leaks once the readers are gone. */
static void test_under_readers(const char *spec, cxlp_pool *p)
{
    const char *e = getenv("CXLP_SOAK_SECONDS");
    const double secs = e ? atof(e) : 2;
    uint64_t n;
    CHECK_OK(rec_ingest(p, "soak", 0, seed, 2 * MiB, 256 * KiB, &n, NULL));
    enum { READERS = 3 };
    /* [0] stop flag; then per reader: passes, bad records */
    volatile uint64_t *sh = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                                 -1, 0);
    CHECK(sh != MAP_FAILED);
    pid_t pid[READERS];
    for (int r = 0; r < READERS; r++) {
        pid[r] = fork();
        CHECK(pid[r] >= 0);
        if (pid[r])
            continue;
        struct cxlp_pool_opts ro = {.readonly = 1};
        cxlp_pool *q;
        if (cxlp_pool_open(spec, &ro, &q))
            _exit(2);
        while (!__atomic_load_n(&sh[0], __ATOMIC_ACQUIRE)) {
            cxlp_store *s;
            if (cxlp_store_open(q, "soak", &s)) {
                __atomic_fetch_add(&sh[2 + 2 * r], 1, __ATOMIC_RELAXED);
                continue;
            }
            uint64_t bad = cxlp_store_count(s) != n;
            for (uint64_t i = 0; i < n && !bad; i++) {
                struct cxlp_view v;
                bad += cxlp_store_read(s, i, &v) || !rec_ok(v.data, v.len, 0, seed, i);
            }
            cxlp_store_close(s);
            __atomic_fetch_add(&sh[1 + 2 * r], 1, __ATOMIC_RELAXED);
            __atomic_fetch_add(&sh[2 + 2 * r], bad, __ATOMIC_RELAXED);
        }
        cxlp_pool_close(q);
        _exit(0);
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t rewrites = 0;
    do {
        struct cxlp_rewrite_opts o = {.shard_bytes = rewrites % 2 ? 128 * KiB : 256 * KiB};
        CHECK_OK(cxlp_pool_rewrite(p, "soak", &o));
        rewrites++;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < secs);
    __atomic_store_n(&sh[0], 1, __ATOMIC_RELEASE);
    uint64_t passes = 0, bad = 0;
    for (int r = 0; r < READERS; r++) {
        int st;
        CHECK(waitpid(pid[r], &st, 0) == pid[r] && WIFEXITED(st) && WEXITSTATUS(st) == 0);
        passes += sh[1 + 2 * r];
        bad += sh[2 + 2 * r];
    }
    printf("under readers: %llu rewrites in %.0f s while %d readers made %llu passes over "
           "the dataset, %llu bad\n", (unsigned long long)rewrites, secs, READERS,
           (unsigned long long)passes, (unsigned long long)bad);
    CHECK(bad == 0 && rewrites >= 2 && passes >= READERS);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_remove(p, "soak"));
    no_leak(p);
    munmap((void *)sh, 4096);
}

int main(void)
{
    seed = test_seed();
    const char *spec = test_name("rewrite");
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 96 * MiB, NULL, &p));
    uint64_t n_fx, n_vr;
    test_formats(p, &n_fx, &n_vr);
    test_refused(spec, p);
    test_processes(spec, p);
    test_under_readers(spec, p);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
    printf("ok\n");
    return 0;
}
