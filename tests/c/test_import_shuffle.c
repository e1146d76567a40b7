/* Shuffled ingest (cxlp_import_opts.shuffle) of raw and .npy inputs: record
 * k of the dataset equals input record P(k) for every k, P a bijection
 * (cxlp_store_source_index / cxlp_store_record_of_source inverse of each
 * other); the same seed gives the same dataset byte for byte, another seed
 * another order; records small (copied from a mapping) and large (one pread
 * each), across groups and shards; the seed is recorded with the dataset,
 * survives a reopen and cxlp_pool_rewrite, and goes with a removed
 * dataset (the catalog then readable by builds without ingest records
 * again); a dataset ingested without shuffle maps ids to themselves; an
 * ingest killed midway publishes nothing and the pool stays whole. */
#include <signal.h>
#include <sys/wait.h>

#include "import_test.h"
#include "pool/pool_format.h"
#include "pool/pool_internal.h"

/* The magic of the current catalog (pool_format.h): CAT_MAGIC_INGEST while
 * a dataset has an ingest record. */
static uint64_t cat_magic(cxlp_pool *p)
{
    struct attach *a = pool_attach(p);
    uint64_t g = cat_generation(a), m;
    memcpy(&m, (const uint8_t *)a->m.base + a->L.cat_off + (g & 1) * a->L.cat_bytes, 8);
    return m;
}

static uint64_t rss_anon_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL);
    char line[256];
    uint64_t v = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssAnon: %" SCNu64, &v) == 1)
            break;
    fclose(f);
    return v;
}

/* The largest RssAnon seen at a progress call. */
static void track_rss(void *ctx, uint64_t done, uint64_t total)
{
    (void)done, (void)total;
    uint64_t *peak = ctx, r = rss_anon_kib();
    if (r > *peak)
        *peak = r;
}

/* Truncates the file ctx names to one byte after the first progress call. */
static void shrink_midway(void *ctx, uint64_t done, uint64_t total)
{
    if (done < total)
        CHECK(truncate((const char *)ctx, 1) == 0);
}

static void die_midway(void *ctx, uint64_t done, uint64_t total)
{
    (void)ctx;
    if (done < total)
        raise(SIGKILL);
}

/* n records of rs bytes: the first 8 bytes of record j hold j, the rest is
 * random, so a record read back names its input position. */
static uint8_t *make_records(uint64_t n, uint64_t rs, uint64_t *seed)
{
    uint8_t *d = test_random_bytes(seed, ((n * rs + 7) / 8) * 8);
    for (uint64_t j = 0; j < n; j++)
        memcpy(d + j * rs, &j, 8);
    return d;
}

/* Every record k is input record P(k) = source_index(k); P is a bijection
 * and record_of_source its inverse. Returns the number of fixed points. */
static uint64_t check_shuffled(cxlp_pool *p, const char *name, const uint8_t *in, uint64_t n,
                               uint64_t rs, uint64_t want_seed)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    CHECK(cxlp_store_count(s) == n);
    uint64_t seed = 99;
    CHECK(cxlp_store_ingest_shuffle(s, &seed) == 1 && seed == want_seed);
    uint8_t *seen = calloc(n, 1);
    CHECK(seen != NULL);
    uint64_t fixed = 0;
    for (uint64_t k = 0; k < n; k++) {
        struct cxlp_view v;
        uint64_t j, back, id;
        CHECK_OK(cxlp_store_read(s, k, &v));
        CHECK(v.len == rs);
        CHECK_OK(cxlp_store_source_index(s, k, &j));
        CHECK(j < n && !seen[j]);
        seen[j] = 1;
        memcpy(&id, v.data, 8);
        if (id != j || memcmp(v.data, in + j * rs, rs) != 0) {
            fprintf(stderr, "%s: record %" PRIu64 " holds input %" PRIu64 ", P says %" PRIu64
                    "\n", name, k, id, j);
            CHECK(0);
        }
        CHECK_OK(cxlp_store_record_of_source(s, j, &back));
        CHECK(back == k);
        fixed += j == k;
    }
    uint64_t x;
    CHECK_RC(cxlp_store_source_index(s, n, &x), CXLP_ERANGE);
    CHECK_RC(cxlp_store_record_of_source(s, n, &x), CXLP_ERANGE);
    CHECK_OK(cxlp_store_verify(s));
    CHECK_OK(cxlp_store_close(s));
    free(seen);
    return fixed;
}

/* Records at equal positions in datasets a and b. */
static uint64_t same_records(cxlp_pool *p, const char *a, const char *b, uint64_t n, uint64_t rs)
{
    cxlp_store *sa, *sb;
    CHECK_OK(cxlp_store_open(p, a, &sa));
    CHECK_OK(cxlp_store_open(p, b, &sb));
    uint64_t same = 0;
    for (uint64_t k = 0; k < n; k++) {
        struct cxlp_view va, vb;
        CHECK_OK(cxlp_store_read(sa, k, &va));
        CHECK_OK(cxlp_store_read(sb, k, &vb));
        same += memcmp(va.data, vb.data, rs) == 0;
    }
    CHECK_OK(cxlp_store_close(sa));
    CHECK_OK(cxlp_store_close(sb));
    return same;
}

static int shuffled(cxlp_pool *p, const char *name, uint64_t *seed)
{
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, name, &s));
    int r = cxlp_store_ingest_shuffle(s, seed);
    CHECK_OK(cxlp_store_close(s));
    return r;
}

static void write_npy(const char *path, const char *dict, const void *data, uint64_t len)
{
    uint64_t pre = 10, dl = strlen(dict);
    uint64_t hlen = ((pre + dl + 1 + 63) / 64) * 64 - pre;
    uint8_t *b = malloc(pre + hlen + len);
    CHECK(b != NULL);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (uint8_t)hlen;
    b[9] = (uint8_t)(hlen >> 8);
    memcpy(b + pre, dict, dl);
    memset(b + pre + dl, ' ', hlen - dl - 1);
    b[pre + hlen - 1] = '\n';
    memcpy(b + pre + hlen, data, len);
    write_file(path, b, pre + hlen + len);
    free(b);
}

int main(void)
{
    uint64_t rseed = test_seed();
    int small = test_sanitized();
    cxlp_pool *p = setup(512ull << 20);

    /* small records: more than one group of 65536, several 1 MiB shards */
    uint64_t rs = 24, n = small ? 70001 : 150001;
    uint8_t *in = make_records(n, rs, &rseed);
    const char *f = path_of("small.raw");
    write_file(f, in, n * rs);
    struct cxlp_import_opts o = {.format = CXLP_FMT_RAW, .record_size = rs, .dtype = -1,
                                 .shard_bytes = 1u << 20, .shuffle = 1, .shuffle_seed = 7};
    CHECK(cat_magic(p) == CAT_MAGIC);
    CHECK_OK(cxlp_import(p, "s7", f, &o));
    CHECK(cat_magic(p) == CAT_MAGIC_INGEST);
    uint64_t seed = 0, fixed = check_shuffled(p, "s7", in, n, rs, 7);
    CHECK(fixed < n / 1000 + 10); /* a permutation, not the identity */
    seed = 0;
    CHECK(cxlp_pool_ingest_shuffle(p, "s7", &seed) == 1 && seed == 7);
    CHECK_RC(cxlp_pool_ingest_shuffle(p, "nope", &seed), CXLP_ENOTFOUND);
    CHECK_OK(cxlp_import(p, "s7b", f, &o));
    CHECK(same_records(p, "s7", "s7b", n, rs) == n); /* same seed, same dataset */
    o.shuffle_seed = UINT64_MAX;
    CHECK_OK(cxlp_import(p, "smax", f, &o));
    check_shuffled(p, "smax", in, n, rs, UINT64_MAX);
    CHECK(same_records(p, "s7", "smax", n, rs) < n / 1000 + 10); /* another order */
    o.shuffle_seed = 0;
    CHECK_OK(cxlp_import(p, "s0", f, &o));
    check_shuffled(p, "s0", in, n, rs, 0);
    CHECK(same_records(p, "s7", "s0", n, rs) < n / 1000 + 10);

    /* without shuffle: ids map to themselves, no seed */
    o.shuffle = 0;
    CHECK_OK(cxlp_import(p, "plain", f, &o));
    seed = 5;
    CHECK(shuffled(p, "plain", &seed) == 0 && seed == 0);
    seed = 5;
    CHECK(cxlp_pool_ingest_shuffle(p, "plain", &seed) == 0 && seed == 0);
    cxlp_store *s;
    CHECK_OK(cxlp_store_open(p, "plain", &s));
    for (uint64_t k = 0; k < n; k += 997) {
        uint64_t j;
        CHECK_OK(cxlp_store_source_index(s, k, &j));
        CHECK(j == k);
        CHECK_OK(cxlp_store_record_of_source(s, k, &j));
        CHECK(j == k);
    }
    CHECK_OK(cxlp_store_close(s));

    /* the seed is in the catalog: kept across a reopen and by a rewrite,
     * gone with the dataset (a new one of the same name is not shuffled) */
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_open(pool_spec, NULL, &p));
    CHECK(shuffled(p, "s7", &seed) == 1 && seed == 7);
    struct cxlp_rewrite_opts ro = {.shard_bytes = 512u << 10};
    CHECK_OK(cxlp_pool_rewrite(p, "s7", &ro));
    check_shuffled(p, "s7", in, n, rs, 7);
    CHECK_OK(cxlp_pool_remove(p, "s7"));
    CHECK_OK(cxlp_pool_remove(p, "s7b"));
    CHECK_OK(cxlp_import(p, "s7", f, &o));
    CHECK(shuffled(p, "s7", &seed) == 0);
    CHECK(shuffled(p, "smax", &seed) == 1 && seed == UINT64_MAX);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    /* once no dataset is shuffled the catalog is one every format 3 build reads */
    CHECK(cat_magic(p) == CAT_MAGIC_INGEST);
    CHECK_OK(cxlp_pool_remove(p, "smax"));
    CHECK_OK(cxlp_pool_remove(p, "s0"));
    CHECK(cat_magic(p) == CAT_MAGIC);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));

    /* killed after its first group: nothing published, the pool whole, the
     * same ingest then succeeds */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        cxlp_pool *q;
        if (cxlp_pool_open(pool_spec, NULL, &q))
            _exit(3);
        struct cxlp_import_opts ok = o;
        ok.shuffle = 1;
        ok.shuffle_seed = 7;
        ok.progress = die_midway;
        cxlp_import(q, "killed", f, &ok);
        _exit(4); /* the callback should have killed it */
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
    CHECK(shuffled(p, "s7", &seed) == 0);
    cxlp_store *ks = NULL;
    CHECK_RC(cxlp_store_open(p, "killed", &ks), CXLP_ENOTFOUND);
    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    o.shuffle = 1;
    o.shuffle_seed = 7;
    CHECK_OK(cxlp_import(p, "killed", f, &o));
    check_shuffled(p, "killed", in, n, rs, 7);
    CHECK_OK(cxlp_pool_remove(p, "killed"));
    free(in);

    /* large records: one pread each; n below the Feistel network's tiny
     * domain and above it */
    uint64_t big = 70000;
    uint64_t counts[2] = {5, 40};
    for (int t = 0; t < 2; t++) {
        uint64_t m = counts[t];
        uint8_t *bin = make_records(m, big, &rseed);
        const char *fb = path_of("big.raw");
        write_file(fb, bin, m * big);
        struct cxlp_import_opts ob = {.format = CXLP_FMT_RAW, .record_size = big, .dtype = -1,
                                      .shuffle = 1, .shuffle_seed = 3 + (uint64_t)t};
        char nm[16];
        snprintf(nm, sizeof nm, "big%d", t);
        CHECK_OK(cxlp_import(p, nm, fb, &ob));
        check_shuffled(p, nm, bin, m, big, 3 + (uint64_t)t);
        free(bin);
    }

    /* large records read by pread: an input that shrinks midway is bad
     * input naming the file, the pool unchanged */
    {
        uint64_t m = 200;
        uint8_t *bin = make_records(m, big, &rseed);
        const char *fb = path_of("shrinks.raw");
        write_file(fb, bin, m * big);
        struct cxlp_import_opts ob = {.format = CXLP_FMT_RAW, .record_size = big, .dtype = -1,
                                      .shuffle = 1, .shuffle_seed = 1,
                                      .progress = shrink_midway, .progress_ctx = (void *)fb};
        IMPORT_FAILS(p, "shrinks", fb, &ob, CXLP_EBADINPUT, "shrinks.raw", "did the file shrink");
        free(bin);
    }

    /* private memory does not grow with the input: a shuffled ingest of
     * 96 MiB of 128-byte records (12 groups) adds less than 24 MiB of
     * RssAnon (the input is read through a mapping of page cache, the pool
     * is shared memory); not under a sanitizer, whose shadow memory grows
     * with every byte touched */
    if (!small) {
        uint64_t m = (96ull << 20) / 128;
        uint8_t *mem = make_records(m, 128, &rseed);
        const char *fm = path_of("mem.raw");
        write_file(fm, mem, m * 128);
        free(mem);
        uint64_t base = rss_anon_kib(), peak = base;
        struct cxlp_import_opts om = {.format = CXLP_FMT_RAW, .record_size = 128, .dtype = -1,
                                      .shuffle = 1, .shuffle_seed = 5, .progress = track_rss,
                                      .progress_ctx = &peak};
        CHECK_OK(cxlp_import(p, "mem", fm, &om));
        printf("RssAnon: %" PRIu64 " KiB before, %" PRIu64 " KiB at most during a shuffled "
               "ingest of 96 MiB\n", base, peak);
        CHECK(peak - base < (24u << 10));
        CHECK_OK(cxlp_pool_remove(p, "mem"));
        CHECK(unlink(fm) == 0);
    }

    /* .npy: rows of the array, after its header */
    uint64_t rows = 3000, rb = 4 * 4;
    uint8_t *arr = make_records(rows, rb, &rseed);
    const char *fn = path_of("a.npy");
    write_npy(fn, "{'descr': '<u4', 'fortran_order': False, 'shape': (3000, 4), }", arr,
              rows * rb);
    struct cxlp_import_opts on = {.format = CXLP_FMT_AUTO, .dtype = -1, .shuffle = 1,
                                  .shuffle_seed = 11};
    CHECK_OK(cxlp_import(p, "npy", fn, &on));
    check_shuffled(p, "npy", arr, rows, rb, 11);
    free(arr);

    /* an empty input with allow_empty: an empty dataset, nothing to shuffle */
    const char *fe = path_of("empty.raw");
    write_file(fe, "", 0);
    struct cxlp_import_opts oe = {.format = CXLP_FMT_RAW, .record_size = 8, .dtype = -1,
                                  .allow_empty = 1, .shuffle = 1, .shuffle_seed = 1};
    CHECK_OK(cxlp_import(p, "empty", fe, &oe));
    CHECK(shuffled(p, "empty", &seed) == 0);

    CHECK_OK(cxlp_pool_verify(p, NULL, NULL));
    teardown(p);
    printf("ok\n");
    return 0;
}
