/*
 * test.h - the tiny harness every C test uses. A test is a small program:
 * exit 0 pass, 1 fail, 77 skip (ctest SKIP_RETURN_CODE). CHECK prints the
 * failing expression with file:line and exits 1. Randomized tests print their
 * seed (TEST_SEED env overrides it).
 */
#ifndef CXLP_TEST_H
#define CXLP_TEST_H

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cxlpool.h"

#define CHECK(x)                                                                \
    do {                                                                        \
        if (!(x)) {                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #x); \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

/* rc must be 0; prints the code and the thread's last message otherwise. */
#define CHECK_OK(expr)                                                          \
    do {                                                                        \
        int rc_ = (expr);                                                       \
        if (rc_ != 0) {                                                         \
            fprintf(stderr, "%s:%d: %s = %d (%s): %s\n", __FILE__, __LINE__,    \
                    #expr, rc_, cxlp_strerror(rc_), cxlp_errmsg(NULL));         \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

/* rc must equal want. */
#define CHECK_RC(expr, want)                                                    \
    do {                                                                        \
        int rc_ = (expr);                                                       \
        if (rc_ != (want)) {                                                    \
            fprintf(stderr, "%s:%d: %s = %d (%s), want %d (%s): %s\n",          \
                    __FILE__, __LINE__, #expr, rc_, cxlp_strerror(rc_),         \
                    (int)(want), cxlp_strerror(want), cxlp_errmsg(NULL));       \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

#define SKIP(...)                                                               \
    do {                                                                        \
        printf("SKIP: " __VA_ARGS__);                                           \
        printf("\n");                                                           \
        exit(77);                                                               \
    } while (0)

/* Unique name for a test pool or file: prefix.PID.counter */
/* Replays the committed corpus of fuzz target `target`: fn(name, bytes,
 * len, ctx) for every file of fuzz/corpus/TARGET (at most cap bytes of
 * each, in a buffer freed after the call), the directory found from `src`,
 * the calling test's __FILE__ (tests/c/X.c). Returns the files replayed. */
static inline int test_corpus_each(const char *src, const char *target, size_t cap,
                                   void (*fn)(const char *, const uint8_t *, size_t, void *),
                                   void *ctx)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", src);
    char *slash = strrchr(dir, '/');
    CHECK(slash);
    snprintf(slash, sizeof dir - (size_t)(slash - dir), "/../../fuzz/corpus/%s", target);
    DIR *d = opendir(dir);
    if (!d)
        fprintf(stderr, "no corpus at %s\n", dir);
    CHECK(d);
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        FILE *f = fopen(path, "rb");
        CHECK(f);
        uint8_t *buf = malloc(cap ? cap : 1);
        CHECK(buf);
        size_t len = fread(buf, 1, cap, f);
        fclose(f);
        fn(e->d_name, buf, len, ctx);
        free(buf);
        n++;
    }
    closedir(d);
    printf("replayed %d corpus files\n", n);
    return n;
}

static inline const char *test_name(const char *prefix)
{
    static char buf[8][128];
    static int k;
    char *b = buf[k++ % 8];
    static int ctr;
    snprintf(b, 128, "%s.%d.%d", prefix, (int)getpid(), ctr++);
    return b;
}

static inline uint64_t test_seed(void)
{
    const char *s = getenv("TEST_SEED");
    uint64_t seed = s ? strtoull(s, NULL, 0) : (uint64_t)time(NULL) ^ (uint64_t)getpid();
    printf("seed %" PRIu64 " (TEST_SEED to replay)\n", seed);
    return seed;
}

/* splitmix64: small, good-enough PRNG for tests */
static inline uint64_t test_rand(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* n random bytes (n a multiple of 8), malloc'd; exits on failure. */
static inline uint8_t *test_random_bytes(uint64_t *s, uint64_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    CHECK(p);
    for (uint64_t i = 0; i + 8 <= n; i += 8) {
        uint64_t v = test_rand(s);
        memcpy(p + i, &v, 8);
    }
    return p;
}

/* 1 when running under ASan/UBSan (stress tests scale down). */
static inline int test_sanitized(void)
{
#if defined(__SANITIZE_ADDRESS__)
    return 1;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
    return 1;
#endif
#endif
    return getenv("CXLP_SANITIZED") != NULL;
}

/* The crash tests' random instant: waits until the child pid has made
 * *progress reach at (polling every 50 us), then SIGKILLs it after delay_us;
 * a child that exits first is reaped here. Returns 1 when the child was
 * reaped (its wait status in *status), 0 when it was killed and still has
 * to be reaped. */
static inline int test_kill_at(pid_t pid, volatile uint64_t *progress, uint64_t at,
                               useconds_t delay_us, int *status)
{
    while (__atomic_load_n(progress, __ATOMIC_RELAXED) < at)
        if (waitpid(pid, status, WNOHANG) == pid)
            return 1;
        else
            usleep(50);
    usleep(delay_us);
    kill(pid, SIGKILL);
    return 0;
}

#endif
