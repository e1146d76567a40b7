/* The ring's slot memory as cxlp_loader_slots reports it (what the Python
 * layer registers with CUDA for pin_memory), growth of the ring, the ring
 * kept for the next loader, and slot binding to a NUMA node (pin_to_cxl). */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <sys/mman.h>

#include "test.h"
#include "common/common.h"
#include "load/loader.h"

#define N 64
#define RS 4096

static uint8_t recs[N * RS];

static int read_fn(const void *ctx, uint64_t id, struct cxlp_view *v)
{
    (void)ctx;
    if (id >= N)
        return CXLP_ERANGE;
    v->data = recs + id * RS;
    v->len = RS;
    return 0;
}

static int order_fn(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    uint64_t *pos = ctx;
    size_t k = 0;
    while (k < max && *pos < N)
        out[k++] = (*pos)++;
    *n = k;
    return 0;
}

static int slot_of(void **addr, uint32_t n, const void *p)
{
    for (uint32_t i = 0; i < n; i++)
        if (addr[i] == p)
            return (int)i;
    return -1;
}

static void test_slots_listed_and_growth(void)
{
    struct rec_src src = {.read = read_fn, .fixed = 1, .record_size = RS};
    uint64_t pos = 0;
    struct cxlp_loader_opts o = {.batch_size = 2, .threads = 1, .slots = 2, .numa_node = -1};
    cxlp_loader *l;
    CHECK_OK(loader_create_src(&src, &o, order_fn, &pos, &l));
    void *addr[64];
    uint64_t bytes[64];
    CHECK(cxlp_loader_slots(l, 0, NULL, NULL, 0) == 2);
    CHECK(cxlp_loader_slots(l, 0, addr, bytes, 64) == 2);
    for (int i = 0; i < 2; i++)
        CHECK(bytes[i] == 2 * RS && (uintptr_t)addr[i] % 4096 == 0);
    /* holding every batch grows the ring: the new slots are listed after
     * the old ones, which keep their place */
    struct cxlp_batch *held[5];
    for (int k = 0; k < 5; k++) {
        CHECK_OK(cxlp_loader_next(l, &held[k]));
        CHECK(held[k] != NULL);
    }
    uint32_t n = cxlp_loader_slots(l, 0, addr, bytes, 64);
    CHECK(n >= 5);
    for (int k = 0; k < 5; k++)
        CHECK(slot_of(addr, n, held[k]->data) >= 0);
    void *tail[64];
    CHECK(cxlp_loader_slots(l, 2, tail, NULL, 64) == n);
    CHECK(tail[0] == addr[2] && tail[n - 3] == addr[n - 1]);
    CHECK(cxlp_loader_slots(l, n + 5, tail, NULL, 64) == n); /* past the end: nothing written */
    for (int k = 0; k < 5; k++)
        cxlp_loader_release(l, held[k]);
    cxlp_loader_free(l);
}

/* 1 when the page at p is mapped in this process. */
static int mapped(const void *p)
{
    void *page = (void *)((uintptr_t)p & ~(uintptr_t)4095);
    if (msync(page, 4096, MS_ASYNC) == 0)
        return 1;
    CHECK(errno == ENOMEM);
    return 0;
}

/* Takes every batch of l (records in order), checks each, frees l. */
static void drain(cxlp_loader *l)
{
    struct cxlp_batch *b;
    uint64_t rows = 0;
    for (;;) {
        CHECK_OK(cxlp_loader_next(l, &b));
        if (!b)
            break;
        CHECK(memcmp(b->data, recs + rows * RS, b->rows * RS) == 0);
        rows += b->rows;
        cxlp_loader_release(l, b);
    }
    CHECK(rows == N);
    cxlp_loader_free(l);
}

/* Runs a loader over every record, checking each batch; its first slot. */
static void *run_all(const struct cxlp_loader_opts *o)
{
    struct rec_src src = {.read = read_fn, .fixed = 1, .record_size = RS};
    uint64_t pos = 0;
    cxlp_loader *l;
    CHECK_OK(loader_create_src(&src, o, order_fn, &pos, &l));
    void *addr[8];
    CHECK(cxlp_loader_slots(l, 0, addr, NULL, 8) >= 1);
    drain(l);
    return addr[0];
}

static void test_ring_kept(void)
{
    struct cxlp_loader_opts o = {.batch_size = 2, .threads = 1, .slots = 2, .numa_node = -1};
    /* a freed loader's ring stays mapped, and the next loader of its
     * shape takes it and reads right through the old batches' bytes */
    void *a = run_all(&o);
    CHECK(mapped(a));
    void *b = run_all(&o);
    CHECK(b == a && mapped(b));
    cxlp_loader_trim();
    CHECK(!mapped(b));
    /* rings bound to a node are neither taken nor kept; a new loader
     * unmaps what it did not take */
    if (numa_available() < 0)
        return;
    void *c = run_all(&o);
    struct cxlp_loader_opts bound = o;
    bound.bind_slots = 1;
    bound.slot_node = 0;
    void *d = run_all(&bound);
    CHECK(d != c && !mapped(c) && !mapped(d));
}

static void test_bind_slots(void)
{
    struct rec_src src = {.read = read_fn, .fixed = 1, .record_size = RS};
    uint64_t pos = 0;
    cxlp_loader *l;
    struct cxlp_loader_opts bad = {.batch_size = 2, .numa_node = -1, .bind_slots = 1,
                                   .slot_node = -3};
    CHECK_RC(loader_create_src(&src, &bad, order_fn, &pos, &l), CXLP_EARG);
    if (numa_available() < 0)
        SKIP("no NUMA support\n");
    struct cxlp_loader_opts o = {.batch_size = 2, .threads = 1, .slots = 2, .numa_node = -1,
                                 .bind_slots = 1, .slot_node = 0};
    CHECK_OK(loader_create_src(&src, &o, order_fn, &pos, &l));
    void *addr[8];
    CHECK(cxlp_loader_slots(l, 0, addr, NULL, 8) == 2);
    for (int i = 0; i < 2; i++) {
        int mode = -1;
        unsigned long mask[16] = {0};
        CHECK(get_mempolicy(&mode, mask, 1024, addr[i], MPOL_F_ADDR) == 0);
        CHECK(mode == MPOL_BIND && (mask[0] & 1));
    }
    drain(l);
}

int main(void)
{
    for (int i = 0; i < N * RS; i++)
        recs[i] = (uint8_t)(i * 7 + i / RS);
    test_slots_listed_and_growth();
    test_ring_kept();
    test_bind_slots();
    printf("ok\n");
    return 0;
}
