/* 4 reader processes (2 threads each) look datasets up in a loop while a
 * writer publishes and removes: every snapshot a reader gets is whole (shard
 * records as published) and the bytes it points at stay the publisher's for
 * as long as the reader holds its pin, although the writer reuses freed
 * extents. */
#include <pthread.h>
#include <sched.h>
#include <signal.h>

#include "test_pool_util.h"
#include "pool/pool_internal.h"

#define MiB (1ull << 20)

struct rd {
    cxlp_pool *p;
    int iters;
    uint64_t seen, misses;
    int rc;
};

/* one reading thread; two share each reader process's handle, so pins of
 * one attachment come and go from two threads */
static void *read_loop(void *arg)
{
    struct rd *r = arg;
    for (int i = 0; i < r->iters; i++) {
        struct cxlp_dataset_info inf[16];
        size_t n;
        if (cxlp_pool_list(r->p, inf, 16, &n)) {
            r->rc = 11;
            return NULL;
        }
        for (size_t k = 0; k < n && k < 16; k++) {
            struct pool_dataset d;
            struct pool_shard *sh;
            struct attach *a;
            uint64_t gen;
            int rc = pool_lookup(r->p, inf[k].name, &d, &sh, &a, &gen);
            if (rc == CXLP_ENOTFOUND) {
                r->misses++;
                continue;
            }
            if (rc) {
                fprintf(stderr, "reader: lookup: %d\n", rc);
                r->rc = 12;
                return NULL;
            }
            if (tp_verify(a, &d, sh) != 0) {
                r->rc = 13;
                return NULL;
            }
            sched_yield(); /* let the writer remove and reuse meanwhile */
            if (tp_verify(a, &d, sh) != 0) {
                r->rc = 14;
                return NULL;
            }
            attach_unpin(a, gen);
            attach_unref(a);
            free(sh);
            r->seen++;
        }
    }
    return NULL;
}

static int reader(const char *spec, int iters)
{
    cxlp_pool *p;
    if (cxlp_pool_open(spec, NULL, &p))
        return 10;
    struct rd r[2] = {{p, iters / 2, 0, 0, 0}, {p, iters / 2, 0, 0, 0}};
    pthread_t t;
    if (pthread_create(&t, NULL, read_loop, &r[1]))
        return 16;
    read_loop(&r[0]);
    pthread_join(t, NULL);
    if (r[0].rc || r[1].rc)
        return r[0].rc ? r[0].rc : r[1].rc;
    /* every pin was returned: the lease pins nothing */
    if (pool_attach(p)->lease->min_gen != UINT64_MAX)
        return 17;
    cxlp_pool_close(p);
    printf("reader %d: %llu snapshots verified, %llu removed before lookup\n", (int)getpid(),
           (unsigned long long)(r[0].seen + r[1].seen),
           (unsigned long long)(r[0].misses + r[1].misses));
    fflush(stdout);
    return r[0].seen + r[1].seen > 0 ? 0 : 15;
}

int main(void)
{
    const char *name = test_name("conc");
    struct cxlp_pool_opts o = {.catalog_bytes = 64 * 1024, .lease_slots = 16};
    cxlp_pool *p;
    /* small enough that the writer must reuse extents of removed datasets */
    CHECK_OK(cxlp_pool_create(name, 16 * MiB, &o, &p));
    int iters = test_sanitized() ? 300 : 3000;
    int rounds = test_sanitized() ? 200 : 1000;
    CHECK_OK(tp_publish(p, "w0", 3, 20000, NULL));
    pid_t kids[4];
    for (int i = 0; i < 4; i++) {
        kids[i] = fork();
        CHECK(kids[i] >= 0);
        if (kids[i] == 0)
            _exit(reader(name, iters));
    }
    char nm[32];
    int alive = 4, fulls = 0;
    int r;
    for (r = 1; r < rounds || alive; r++) {
        snprintf(nm, sizeof nm, "w%d", r);
        int rc = tp_publish(p, nm, 1 + r % 4, 16384 + 4096 * (r % 5), NULL);
        CHECK(rc == 0 || rc == CXLP_EFULL);
        fulls += rc == CXLP_EFULL;
        snprintf(nm, sizeof nm, "w%d", r - 1);
        rc = cxlp_pool_remove(p, nm);
        CHECK(rc == 0 || rc == CXLP_ENOTFOUND);
        if (r % 64 == 0)
            tp_check(p);
        alive = 0;
        for (int i = 0; i < 4; i++) {
            if (kids[i] == 0)
                continue;
            int st;
            pid_t w = waitpid(kids[i], &st, WNOHANG);
            CHECK(w >= 0);
            if (w == 0) {
                alive++;
                continue;
            }
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                fprintf(stderr, "reader %d: status %#x\n", (int)w, st);
            CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
            kids[i] = 0;
        }
    }
    printf("writer: %d publish/remove rounds, %d found the pool full\n", r, fulls);
    tp_check(p);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(name));
    printf("ok\n");
    return 0;
}
