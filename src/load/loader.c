/*
 * loader.c - the gather engine: worker threads, batch ring, collation.
 *
 * Glossary
 *   batch k     the k-th batch of the stream (k = 0, 1, 2...)
 *   slot        one of S buffers of the ring; a free slot takes the next
 *               batch planned; the consumer finds batch k in deliver[k % D]
 *   plan        which records (and, PACK, which parts of them) make batch k
 *   gather      copying the planned bytes from the pool into the slot
 *   free stack  the free slots: pushed by whoever releases a batch, popped
 *               by the one gather thread that is planning
 *
 * Invariants
 *   planned batches   = next_plan;  taken batches = next_out <= next_plan
 *   next_plan - next_out <= D: deliver[k % D] holds batch k only
 *   a slot is in exactly one place: the free stack, a gather thread's hands
 *   (planning or copying), deliver[] (ready), or the consumer's (lent)
 *   refs = 1 + lent slots; the loader's memory goes when refs reaches 0
 *   S grows by one when the consumer holds all S slots and asks for more
 *   (as torch's DataLoader lets a loop keep every batch), up to max_slots
 *   batches are delivered in order k = 0, 1, 2... whatever thread gathered them
 *   resume point of batch k = (records fully consumed, elements of the next
 *   record consumed) after planning k; planning is sequential, so it is exact
 *
 * Why planning is serialized and gathering is not: PACK rows depend on the
 * lengths of every earlier record, so where batch k starts is only known once
 * k-1 is planned. Planning reads lengths only (O(1) per record through the
 * store index) under one lock that only gather threads take; the copies,
 * which are the cost, run in parallel outside it. STACK and PAD plan the same
 * way for one code path.
 *
 * The hand-off. The consumer takes a ready batch with one acquire load of
 * deliver[k % D] and no lock or system call. When it is not ready, the
 * consumer spins a couple of microseconds (only when a CPU is spare: gather
 * threads < CPUs), then parks (futex.h) until a gather thread publishes a
 * batch half a ring past the one awaited (wait_ready): a loop faster than
 * the gather threads pays one wake-up per several batches. A gather thread
 * never makes a system call for a consumer that is not parked, and mostly
 * none at all: the parked consumer sets itself a timer, half the time the
 * gather threads should take to make the batches it waits for at the rate
 * they made them while it slept before, and wakes on it. A wake-up costs
 * the thread that makes it, and on a VM whose idle CPUs halt that is an
 * interrupt through the hypervisor, tens of microseconds taken from a
 * gather thread (8% of it at 256 B x 256 records per batch, one wake per
 * half ring; docs/benchmarks/history.md), while the consumer's CPU waits anyway.
 * Sleeps shorter than SLEEP_MIN_NS get no timer, nor rings of fewer than
 * TIMER_MIN_SLOTS slots (large batches). The other
 * way round, releases push slots onto the free stack and wake a parked
 * gather thread only once half the ring is free, so a woken thread fills
 * several slots before it parks again; the consumer wakes gather threads
 * itself before it parks, and a gather thread that parks wakes the
 * consumer, so neither hysteresis can stall the other. Small batches get
 * more slots so that both halves are many batches: half the gather
 * threads' L2, or RING_BYTES where that is too small. How many
 * threads gather, and where, comes from the topology (loader_cpus): never
 * more than the CPUs the process may use, one less by default (the
 * consumer's), on the node of the pool's memory or the nearest node with
 * CPUs.
 *
 * Fields: a batch collates the fields the caller chose (sel[]), each into its
 * own region of the slot. Planning looks at the first variable-length field
 * only: PAD and PACK need the other variable-length fields to have as many
 * elements in each record, which is checked where the views are read.
 *
 * Copies. Records go from the pool straight into the slot, once. STACK and
 * PAD resolve the views of a batch's records, every chosen field, in one
 * call to the source before any copy (resolve_rows): for fixed-shape fields
 * in the store a multiply-high and a multiply per record and field, no call
 * per record; otherwise one lookup of the record's shard for all its fields,
 * done back to back so that on a random order the cache misses of the
 * lookups overlap instead of each waiting behind the previous record's
 * copy. Then each field is copied, runs of records that lie back to back
 * in its column as one copy, and where there are none (a shuffled order)
 * one copy per record in a loop with nothing else in it (stack_field).
 * PACK reads each record's planned field once, while planning (it needs
 * the length), through the source's resolve for up to PLAN_AHEAD records
 * at once where it has one (plan_view: the lookups' misses overlap there
 * too), and keeps where each segment's elements are; the gather prefetches
 * the pieces a few ahead of its copies (pack_field); the other
 * chosen fields are looked up by the gather, all before any copy, outside
 * the planning lock (pack_lookup).
 *
 * Rejected: a thread per batch handing results through a queue (reordering
 * cost, and unbounded memory when the consumer is slow); copying into
 * per-thread buffers and then into the ring (a second copy); one mutex and
 * two condition variables around all of it (what this file did before: on a
 * machine with as many CPUs as gather threads, a lock round trip and often
 * a futex wake per batch held batches of 8 records to a few percent of what
 * the copies alone reach); slot k % S for batch k (a consumer that keeps one
 * batch would then stop the ring).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "common/futex.h"
#include "load/loader.h"
#include "media/media.h"
#include "media/numa_lib.h" /* libnuma when first used */
#include "store/store.h"
#include "tier/tier.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define DELIVER 4096u             /* D: batches in flight at most; a power of two */
#define NONE UINT64_MAX
#define SPIN_NS 2000              /* consumer's spin before it sleeps */
#define PLAN_AHEAD 32             /* PACK: records planning resolves at once */
#define PACK_PREFETCH 8           /* PACK: pieces ahead the gather prefetches */
#define SLEEP_MIN_NS 100000       /* consumer: shortest sleep worth a timer */
#define TIMER_MIN_SLOTS 16u       /* consumer: a timer only in rings of this many slots
                                     (small batches): with the 6 slots of batches of 2 MiB
                                     and more it made Python's part of each batch 1.1 ->
                                     3.3 us (64 KiB x 256; docs/benchmarks/history.md) */
#define PREFETCH_ROWS 4           /* STACK: records ahead whose first line is prefetched */
#define RING_BYTES (UINT64_C(8) << 20) /* small batches (their least ring past the L2):
                                          slots up to this much memory, */
#define RING_SLOTS_MAX 64u        /* and at most this many */

/* A chosen field: which source field, how it collates, where in the slot. */
struct lfield {
    uint32_t field;          /* field number in the source */
    int var;                 /* variable-length */
    uint64_t size;           /* fixed-shape: bytes per record */
    int dtype, isz;          /* element type and size */
    uint64_t row_bytes;      /* bytes per row (PACK fixed-shape: per segment) */
    uint64_t off;            /* offset of its region in the slot data */
    int in_slot;             /* 0: PACK fixed-shape, kept per segment in segf */
};

struct slot {
    struct cxlp_batch b;     /* first: cxlp_batch* -> slot* */
    struct slot *next_free;
    int own_map;             /* data is a mapping of its own (else in the arena) */
    uint64_t batch_no;
    int err;
    char msg[ERRMSG_MAX];    /* err's message, from the gather thread's own */
    uint8_t *data;
    uint64_t *ids;
    size_t ids_cap;
    int64_t *lengths;
    struct cxlp_view *views; /* STACK, PAD: the batch's records, resolved (rows x nsel) */
    int64_t *seg_row, *seg_start, *seg_len, *seg_offset;
    /* PACK: where segment g's elements of chosen field k are (a fixed-shape
     * field: its value), seg_src[g * nsel + k] */
    const uint8_t **seg_src;
    size_t seg_cap;
    uint8_t *segf[CXLP_MAX_FIELDS]; /* PACK: fixed-shape field values per segment */
};

/* One gather thread: where it parks when there is nothing to gather. */
struct gthread {
    alignas(CACHELINE) struct park park;
    cxlp_loader *l;
    pthread_t tid;
};

struct cxlp_loader {
    struct obj obj;
    struct rec_src src;
    struct cxlp_loader_opts o;
    cxlp_index_fn index_fn;
    void *index_ctx;
    int itemsize;            /* PAD/PACK element size of the planned field */
    uint64_t row_bytes;      /* field 0's */
    uint32_t nsel;           /* chosen fields */
    struct lfield sel[CXLP_MAX_FIELDS];
    uint32_t fidx[CXLP_MAX_FIELDS];  /* sel[k].field, as the source takes them */
    uint32_t var0;           /* PAD/PACK: the first variable-length chosen field */
    uint32_t nthreads;
    int node;                /* gather threads run on this node's CPUs; -1 anywhere */
    int spin;                /* 1: a CPU is spare for the consumer to spin on */
    uint32_t spin_ns;        /* consumer: its spin now (adapts, see wait_ready) */
    uint32_t waits;          /* consumer: waits so far */
    uint64_t batch_ns;       /* consumer: ns per batch the gather threads
                                made while it slept (running mean), 0 unknown */
    uint64_t timeouts;       /* consumer: sleeps its timer ended */

    /* planner state, under plan_mu (gather threads only) */
    pthread_mutex_t plan_mu;
    uint64_t next_plan;      /* also read atomically by the consumer */
    uint64_t *idbuf;
    size_t idbuf_cap, idbuf_n, idbuf_pos;
    int stream_end;          /* index source said n == 0 */
    uint64_t records_done;   /* records fully consumed */
    uint64_t cur_off;        /* PACK: elements of idbuf[idbuf_pos] consumed */
    /* PACK: the planned field's views of idbuf[ahead_pos, ahead_pos +
     * ahead_n), resolved together (plan_view) */
    struct cxlp_view ahead[PLAN_AHEAD];
    size_t ahead_pos, ahead_n;

    /* written by gather threads and releases */
    alignas(CACHELINE) struct slot *free_top;
    uint32_t free_n;         /* slots on the free stack */
    uint64_t end_batch;      /* first batch number past the end; NONE unknown */
    uint32_t stopping;

    /* written by the consumer */
    alignas(CACHELINE) uint64_t next_out;
    uint64_t taken_records;  /* resume_records of the last batch taken (stats) */
    uint64_t waiting_for;    /* the batch the consumer sleeps for (while parked) */
    uint32_t refs;           /* 1 + lent slots */
    struct park cons;        /* the consumer parks here for its batch */

    /* ring growth and the slot list, under mu */
    alignas(CACHELINE) pthread_mutex_t mu;
    uint32_t nslots, cap_slots;
    struct slot **slots;     /* each slot its own allocation: the array grows */
    uint64_t slot_bytes;
    uint64_t nt_ring;        /* STACK: from this many ring bytes, non-temporal stores */
    struct tier_engine *tier;/* tiered datasets: the staging engine (tier/engine.c) */
    uint8_t *arena;          /* the first slots' memory when they are small */
    uint64_t arena_bytes, arena_used;
    struct gthread *gt;      /* nthreads of them */

    struct slot *deliver[DELIVER];
};

/* ------------------------------------------------------------ free stack */

/* Any thread. The release store publishes the consumer's being done with
 * the slot; pairs with the acquire in pop_free. */
static void push_free(cxlp_loader *l, struct slot *s)
{
    struct slot *top = __atomic_load_n(&l->free_top, __ATOMIC_RELAXED);
    do
        s->next_free = top;
    while (!__atomic_compare_exchange_n(&l->free_top, &top, s, 1, __ATOMIC_RELEASE,
                                        __ATOMIC_RELAXED));
    __atomic_fetch_add(&l->free_n, 1, __ATOMIC_SEQ_CST);
}

/* Under plan_mu: the only popper, so a slot cannot leave and come back
 * between the load of top and the CAS (no ABA). */
static struct slot *pop_free(cxlp_loader *l)
{
    /* pairs with the release CAS in push_free */
    struct slot *top = __atomic_load_n(&l->free_top, __ATOMIC_ACQUIRE);
    while (top && !__atomic_compare_exchange_n(&l->free_top, &top, top->next_free, 1,
                                               __ATOMIC_ACQUIRE, __ATOMIC_ACQUIRE))
        ;
    if (top)
        __atomic_fetch_sub(&l->free_n, 1, __ATOMIC_SEQ_CST);
    return top;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Wakes the consumer if it is parked for a batch <= k (k = NONE: whatever
 * it waits for, e.g. because no more batches will come soon). */
static void notify_consumer(cxlp_loader *l, uint64_t k)
{
    if (park_is_parked(&l->cons) &&
        (k == NONE || k >= __atomic_load_n(&l->waiting_for, __ATOMIC_SEQ_CST)))
        unpark(&l->cons);
}

/* Wakes up to n parked gather threads. */
static void wake_gatherers(cxlp_loader *l, uint32_t n)
{
    for (uint32_t i = 0; i < l->nthreads && n; i++)
        n -= (uint32_t)unpark(&l->gt[i].park);
}

/* A gather thread found nothing to do (no free slot, or the in-flight
 * window full): parks until a release or the end. */
static void wait_free(cxlp_loader *l, struct gthread *me)
{
    uint32_t key = park_prepare(&me->park);
    uint64_t plan = __atomic_load_n(&l->next_plan, __ATOMIC_SEQ_CST);
    if ((__atomic_load_n(&l->free_top, __ATOMIC_SEQ_CST) &&
         plan - __atomic_load_n(&l->next_out, __ATOMIC_SEQ_CST) < DELIVER) ||
        __atomic_load_n(&l->stopping, __ATOMIC_SEQ_CST) ||
        plan >= __atomic_load_n(&l->end_batch, __ATOMIC_SEQ_CST)) {
        park_cancel(&me->park);
        return;
    }
    /* no progress from here until the consumer releases: if it sleeps for
     * a batch already made, it must not wait for more */
    notify_consumer(l, NONE);
    park_wait(&me->park, key, 0);
}

/* ---------------------------------------------------------------- plan --- */

/* Makes idbuf[idbuf_pos] valid; 0 with *have = 0 at the end of the stream. */
static int peek_id(cxlp_loader *l, uint64_t *id, int *have)
{
    if (l->idbuf_pos == l->idbuf_n) {
        if (l->stream_end) {
            *have = 0;
            return 0;
        }
        size_t n = 0;
        int rc = l->index_fn(l->index_ctx, l->idbuf, l->idbuf_cap, &n);
        if (rc)
            return seterr(NULL, rc, "index source failed: %s", cxlp_strerror(rc));
        if (n > l->idbuf_cap)
            return seterr(NULL, CXLP_EARG, "index source returned %zu ids for a buffer of %zu",
                          n, l->idbuf_cap);
        l->idbuf_n = n;
        l->idbuf_pos = 0;
        l->ahead_n = 0; /* the views were of the ids replaced */
        if (n == 0) {
            l->stream_end = 1;
            *have = 0;
            return 0;
        }
    }
    *id = l->idbuf[l->idbuf_pos];
    *have = 1;
    return 0;
}

static int grow_segments(const cxlp_loader *l, struct slot *s, size_t need)
{
    if (need <= s->seg_cap)
        return 0;
    size_t cap = s->seg_cap ? s->seg_cap : 256;
    while (cap < need)
        cap *= 2;
    for (uint32_t k = 0; k < l->nsel; k++) {
        if (l->sel[k].in_slot)
            continue;
        uint8_t *p = realloc(s->segf[k], cap * l->sel[k].row_bytes);
        if (!p)
            return -ENOMEM;
        s->segf[k] = p;
    }
    int64_t **arrs[4] = {&s->seg_row, &s->seg_start, &s->seg_len, &s->seg_offset};
    for (int i = 0; i < 4; i++) {
        int64_t *p = realloc(*arrs[i], cap * sizeof(int64_t));
        if (!p)
            return -ENOMEM;
        *arrs[i] = p;
    }
    const uint8_t **src = realloc(s->seg_src, cap * l->nsel * sizeof *src);
    if (!src)
        return -ENOMEM;
    s->seg_src = src;
    uint64_t *ids = realloc(s->ids, cap * sizeof(uint64_t));
    if (!ids)
        return -ENOMEM;
    s->ids = ids;
    s->ids_cap = cap;
    s->seg_cap = cap;
    return 0;
}

/* STACK, PAD: the next batch_size ids, one row each. */
static int plan_rows(cxlp_loader *l, struct slot *s, uint32_t *rows)
{
    uint32_t r = 0;
    while (r < l->o.batch_size) {
        uint64_t id;
        int have, rc = peek_id(l, &id, &have);
        if (rc)
            return rc;
        if (!have)
            break;
        /* whole runs of the id buffer at once */
        size_t k = MIN(l->idbuf_n - l->idbuf_pos, (size_t)(l->o.batch_size - r));
        memcpy(s->ids + r, l->idbuf + l->idbuf_pos, k * sizeof(uint64_t));
        l->idbuf_pos += k;
        r += (uint32_t)k;
    }
    if (r < l->o.batch_size && l->o.drop_last)
        r = 0;
    l->records_done += r;
    *rows = r;
    return 0;
}

static int read_fail(uint64_t id, int rc)
{
    return seterr(NULL, rc, "reading record %llu: %s", (unsigned long long)id,
                  cxlp_strerror(rc));
}

/* All chosen fields of record id into v[0..nsel). */
static inline int read_sel(const cxlp_loader *l, uint64_t id, struct cxlp_view *v)
{
    if (l->src.read_fields)
        return l->src.read_fields(l->src.ctx, id, l->fidx, l->nsel, v);
    return l->src.read(l->src.ctx, id, v);
}

/* Chosen field k of record id. */
static inline int read_one(const cxlp_loader *l, uint64_t id, uint32_t k, struct cxlp_view *v)
{
    if (l->src.read_fields)
        return l->src.read_fields(l->src.ctx, id, &l->fidx[k], 1, v);
    return l->src.read(l->src.ctx, id, v);
}

__attribute__((cold, noinline)) static int fields_differ(const cxlp_loader *l, uint64_t id,
                                                        const struct lfield *f, uint64_t len,
                                                        uint64_t elems)
{
    /* the fields by name where the source has a schema */
    const struct cxlp_schema *sc = l->src.schema;
    const char *name = sc ? sc->fields[f->field].name : "";
    const char *planned = sc ? sc->fields[l->sel[l->var0].field].name : "";
    return seterr(NULL, f->var ? CXLP_EARG : CXLP_ECORRUPT,
                  "record %llu: field %u%s%s%s has %llu bytes, %s %llu%s%s%s", (unsigned long long)id,
                  f->field, sc ? " '" : "", name, sc ? "'" : "", (unsigned long long)len,
                  f->var ? "the padded/packed fields have" : "the schema says",
                  (unsigned long long)(f->var ? elems : f->size),
                  f->var && sc ? " elements (as field '" : "", f->var && sc ? planned : "",
                  !f->var ? "" : sc ? "'): PAD and PACK need equal lengths"
                                    : " elements: PAD and PACK need equal lengths");
}

/* The chosen fields of one record, checked against what the plan assumed:
 * every variable-length field has `elems` elements (the planned field's
 * count), every fixed-shape field its size. elems * isz cannot overflow:
 * elems is a view's length (inside the pool mapping) over an element size. */
static inline int check_fields(cxlp_loader *l, uint64_t id, const struct cxlp_view *v,
                               uint64_t elems)
{
    for (uint32_t k = 0; k < l->nsel; k++) {
        const struct lfield *f = &l->sel[k];
        if (__builtin_expect(v[k].len != (f->var ? elems * (uint64_t)f->isz : f->size), 0))
            return fields_differ(l, id, f, v[k].len, elems);
    }
    return 0;
}

/* PACK: the planned field's view of idbuf[idbuf_pos] (peek_id made it
 * valid). Through the source's resolve, when it has one, for up to
 * PLAN_AHEAD ids from there at once: each record's index entry is a cache
 * miss on a random order, and one loop over independent ids overlaps them,
 * where a read per record between the copies' planning waits for each in
 * turn (short records: most of a batch's planning). A record the resolve
 * refuses is read alone, by read_one, which says why. */
static int plan_view(cxlp_loader *l, uint64_t id, struct cxlp_view *v)
{
    size_t at = l->idbuf_pos - l->ahead_pos;
    if (l->idbuf_pos >= l->ahead_pos && at < l->ahead_n) {
        *v = l->ahead[at];
        return 0;
    }
    l->ahead_n = 0;
    if (l->src.resolve) {
        size_t n = MIN(l->idbuf_n - l->idbuf_pos, (size_t)PLAN_AHEAD), bad = n;
        if (l->src.resolve(l->src.ctx, l->idbuf + l->idbuf_pos, n, &l->fidx[l->var0], 1,
                           l->ahead, &bad))
            n = bad; /* the views before it are good */
        l->ahead_pos = l->idbuf_pos;
        l->ahead_n = n;
        if (n) {
            *v = l->ahead[0];
            return 0;
        }
    }
    return read_one(l, id, l->var0, v);
}

/* PACK: fill batch_size rows of seq_len elements from consecutive records.
 * Each record's planned field is read once, here, and the segments keep
 * where their elements are (seg_src) for the gather; other chosen fields
 * are the gather's (pack_lookup), outside the planning lock. */
static int plan_pack(cxlp_loader *l, struct slot *s, uint32_t *rows)
{
    const uint64_t L = l->o.seq_len, total = (uint64_t)l->o.batch_size * L;
    const uint64_t isz = (uint64_t)l->itemsize;
    const uint32_t nsel = l->nsel;
    uint64_t pos = 0, nseg = 0;
    /* planning state is committed only when the batch is kept (drop_last) */
    uint64_t done0 = l->records_done;
    while (pos < total) {
        uint64_t id;
        int have, rc = peek_id(l, &id, &have);
        if (rc)
            return rc;
        if (!have)
            break;
        struct cxlp_view v;
        if ((rc = plan_view(l, id, &v)))
            return read_fail(id, rc);
        if (v.len % isz)
            return seterr(NULL, CXLP_ECORRUPT,
                          "record %llu: %llu bytes is not a whole number of %d-byte elements",
                          (unsigned long long)id, (unsigned long long)v.len, l->itemsize);
        uint64_t elems = v.len / isz;
        if (l->cur_off > elems)
            return seterr(NULL, CXLP_EARG,
                          "first_offset %llu is past the end of record %llu (%llu elements)",
                          (unsigned long long)l->cur_off, (unsigned long long)id,
                          (unsigned long long)elems);
        while (l->cur_off < elems && pos < total) {
            uint64_t row = pos / L, col = pos % L;
            uint64_t take = MIN(elems - l->cur_off, L - col);
            if (nseg >= s->seg_cap && (rc = grow_segments(l, s, nseg + 1))) /* rarely */
                return seterr(NULL, rc, "out of memory planning batch");
            s->seg_row[nseg] = (int64_t)row;
            s->seg_start[nseg] = (int64_t)col;
            s->seg_len[nseg] = (int64_t)take;
            s->seg_offset[nseg] = (int64_t)l->cur_off;
            s->seg_src[nseg * nsel + l->var0] = (const uint8_t *)v.data + l->cur_off * isz;
            s->ids[nseg] = id;
            nseg++;
            pos += take;
            l->cur_off += take;
        }
        if (l->cur_off == elems) {
            l->cur_off = 0;
            l->idbuf_pos++;
            l->records_done++;
        }
    }
    uint32_t r = (uint32_t)((pos + L - 1) / L);
    if (pos < total && l->o.drop_last) {
        r = 0;
        l->records_done = done0; /* nothing of a dropped batch counts */
    }
    for (uint32_t i = 0; i < r; i++)
        s->lengths[i] = (int64_t)MIN(L, pos - (uint64_t)i * L);
    s->b.n_segments = r ? nseg : 0;
    *rows = r;
    return 0;
}

/* ---------------------------------------------------------------- gather - */

static void fill_elems(uint8_t *dst, uint64_t n, int dtype, int64_t v)
{
    if (n == 0)
        return;
    switch (dtype) {
    case CXLP_DT_F32: { float f = (float)v; for (uint64_t i = 0; i < n; i++) memcpy(dst + 4 * i, &f, 4); return; }
    case CXLP_DT_F64: { double d = (double)v; for (uint64_t i = 0; i < n; i++) memcpy(dst + 8 * i, &d, 8); return; }
    default: break;
    }
    int sz = cxlp_dtype_size(dtype);
    if (sz == 1 || v == 0) {
        memset(dst, (int)(v & 0xff), n * (uint64_t)sz);
        return;
    }
    for (uint64_t i = 0; i < n; i++)
        memcpy(dst + i * (uint64_t)sz, &v, (size_t)sz); /* little-endian low bytes */
}

/* The views of the batch's rows, every chosen field (views[i * nsel + k]),
 * all before any copy: in one call to the source when it can. */
static int resolve_rows(cxlp_loader *l, struct slot *s)
{
    const uint32_t nsel = l->nsel;
    if (l->src.resolve) {
        size_t bad = 0;
        int rc = l->src.resolve(l->src.ctx, s->ids, s->b.rows, l->fidx, nsel, s->views, &bad);
        return rc ? read_fail(s->ids[bad], rc) : 0;
    }
    for (uint32_t i = 0; i < s->b.rows; i++) {
        int rc = read_sel(l, s->ids[i], &s->views[(size_t)i * nsel]);
        if (rc)
            return read_fail(s->ids[i], rc);
    }
    return 0;
}

#if defined(__SSE2__)
/* n bytes (a multiple of 64; dst 16-byte aligned) with non-temporal
 * stores: whole lines written around the caches */
static inline void copy_nt(uint8_t *dst, const uint8_t *src, uint64_t n)
{
    for (uint64_t o = 0; o < n; o += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(src + o));
        __m128i b = _mm_loadu_si128((const __m128i *)(src + o + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(src + o + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(src + o + 48));
        _mm_stream_si128((__m128i *)(dst + o), a);
        _mm_stream_si128((__m128i *)(dst + o + 16), b);
        _mm_stream_si128((__m128i *)(dst + o + 32), c);
        _mm_stream_si128((__m128i *)(dst + o + 48), d);
    }
}
#endif

/* Field k of a STACK batch: its values of rows i (views v[i * nsel]) into
 * dst. Every length is checked first, and whether any record sits right
 * after the one before it in the pool: then runs of such records are
 * copied as one; else (a shuffled order, nearly always) one copy per
 * record, in a loop with nothing else in it but a prefetch of the first
 * line of the record PREFETCH_ROWS ahead. Such a loop lets the core keep
 * several records' cache misses in flight: with the search for runs
 * between the copies, 256 B records gathered 5-10% slower
 * (docs/benchmarks/history.md). nt (a ring larger than the cache can hold, so
 * the slot's lines are not in it): records whose size is a multiple of a
 * line are written with non-temporal stores, which write whole lines
 * without first reading them from memory as a cached store must (and
 * leave the cache to the loop). Inlined with nsel constant 1 for the
 * one-field case. */
static inline __attribute__((always_inline)) int
stack_field(const struct slot *s, const struct lfield *f,
            const struct cxlp_view *v, uint32_t nsel, uint8_t *dst, int nt)
{
    const uint64_t rs = f->size;
    const uint32_t n = s->b.rows;
    uint32_t joined = 0; /* records right after the one before them */
    for (uint32_t i = 0; i < n; i++) {
        const struct cxlp_view *vi = &v[(size_t)i * nsel];
        if (vi->len != rs)
            return seterr(NULL, CXLP_ECORRUPT, "record %llu field %u: %llu bytes, schema says %llu",
                          (unsigned long long)s->ids[i], f->field, (unsigned long long)vi->len,
                          (unsigned long long)rs);
        joined += i && vi->data == (const uint8_t *)v[(size_t)(i - 1) * nsel].data + rs;
    }
    (void)nt;
    if (!joined) {
#if defined(__SSE2__)
        if (nt && rs % 64 == 0 && (uintptr_t)dst % 16 == 0) {
            for (uint32_t i = 0; i < n; i++) {
                if (i + PREFETCH_ROWS < n)
                    __builtin_prefetch(v[(size_t)(i + PREFETCH_ROWS) * nsel].data);
                copy_nt(dst + (uint64_t)i * rs, v[(size_t)i * nsel].data, rs);
            }
            _mm_sfence(); /* the streamed lines reach memory before publish() */
            return 0;
        }
#endif
        for (uint32_t i = 0; i < n; i++) {
            if (i + PREFETCH_ROWS < n)
                __builtin_prefetch(v[(size_t)(i + PREFETCH_ROWS) * nsel].data);
            memcpy(dst + (uint64_t)i * rs, v[(size_t)i * nsel].data, (size_t)rs);
        }
        return 0;
    }
    for (uint32_t i = 0; i < n;) {
        uint32_t j = i + 1;
        const uint8_t *next = (const uint8_t *)v[(size_t)i * nsel].data + rs;
        while (j < n && v[(size_t)j * nsel].data == next) {
            next += rs;
            j++;
        }
        memcpy(dst + (uint64_t)i * rs, v[(size_t)i * nsel].data, (size_t)((j - i) * rs));
        i = j;
    }
    return 0;
}

static int gather_stack(cxlp_loader *l, struct slot *s)
{
    int rc = resolve_rows(l, s);
    if (rc)
        return rc;
    const uint32_t nsel = l->nsel;
    const int nt = (uint64_t)__atomic_load_n(&l->nslots, __ATOMIC_RELAXED) * l->slot_bytes >=
                   l->nt_ring;
    if (nsel == 1)
        return stack_field(s, &l->sel[0], s->views, 1, s->data, nt);
    for (uint32_t k = 0; k < nsel && !rc; k++)
        rc = stack_field(s, &l->sel[k], s->views + k, nsel, s->data + l->sel[k].off, nt);
    return rc;
}

/* PAD, field f of every row (views v[i * nsel]) into dst: a variable-length
 * field cut at lengths[i] (set) and padded to seq_len, a fixed-shape one
 * copied. Inlined with nsel constant 1 for the one-field case. */
static inline __attribute__((always_inline)) void
pad_field(const cxlp_loader *l, const struct slot *s, const struct lfield *f,
          const struct cxlp_view *v, uint32_t nsel, uint8_t *dst)
{
    /* locals: the copies could alias *l and *f for all the compiler knows */
    const uint64_t L = l->o.seq_len, isz = (uint64_t)f->isz, rb = f->row_bytes, size = f->size;
    const int64_t pad = l->o.pad_value;
    const int dtype = f->dtype;
    const uint32_t rows = s->b.rows;
    const int64_t *lengths = s->lengths;
    if (!f->var) {
        for (uint32_t i = 0; i < rows; i++)
            memcpy(dst + (uint64_t)i * rb, v[(size_t)i * nsel].data, (size_t)size);
        return;
    }
    for (uint32_t i = 0; i < rows; i++) {
        uint8_t *row = dst + (uint64_t)i * rb;
        uint64_t n = (uint64_t)lengths[i];
        memcpy(row, v[(size_t)i * nsel].data, (size_t)(n * isz));
        fill_elems(row + n * isz, L - n, dtype, pad);
    }
}

static int gather_pad(cxlp_loader *l, struct slot *s)
{
    const uint64_t L = l->o.seq_len;
    const uint32_t nsel = l->nsel, var0 = l->var0;
    const struct lfield *f0 = &l->sel[var0];
    const uint64_t isz0 = (uint64_t)f0->isz;
    int rc = resolve_rows(l, s);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < s->b.rows; i++) {
        const struct cxlp_view *v = &s->views[(size_t)i * nsel];
        uint64_t elems = v[var0].len / isz0;
        if (nsel > 1) {
            if ((rc = check_fields(l, s->ids[i], v, elems)))
                return rc;
            for (uint32_t k = 0; k < nsel; k++) /* small values, for the copies below */
                if (!l->sel[k].var)
                    __builtin_prefetch(v[k].data);
        }
        s->lengths[i] = (int64_t)MIN(elems, L);
    }
    if (nsel == 1) {
        pad_field(l, s, f0, s->views, 1, s->data);
        return 0;
    }
    for (uint32_t k = 0; k < nsel; k++)
        pad_field(l, s, &l->sel[k], s->views + k, nsel, s->data + l->sel[k].off);
    return 0;
}

/* PACK, chosen field k of every segment (from seg_src[g * nsel + k]): a
 * variable-length field's pieces into their rows (the last row's tail
 * padded), a fixed-shape field's value per segment into segf[k]. Inlined
 * with nsel constant 1 for the one-field case. */
static inline __attribute__((always_inline)) void
pack_field(const cxlp_loader *l, struct slot *s, uint32_t k, uint32_t nsel)
{
    /* locals: the copies could alias *l, *f and *s for all the compiler knows */
    const struct lfield *f = &l->sel[k];
    const uint8_t *const *src = s->seg_src + k;
    const uint64_t n = s->b.n_segments, isz = (uint64_t)f->isz, rb = f->row_bytes, size = f->size;
    const int64_t *row = s->seg_row, *start = s->seg_start, *len = s->seg_len;
    if (!f->var) {
        uint8_t *dst = s->segf[k];
        for (uint64_t g = 0; g < n; g++)
            memcpy(dst + g * size, src[g * nsel], (size_t)size);
        return;
    }
    uint8_t *dst = s->data + f->off;
    for (uint64_t g = 0; g < n; g++) {
        /* short pieces of records in a random order: each a cache miss
         * the copy before it cannot hide; started PACK_PREFETCH ahead */
        if (g + PACK_PREFETCH < n)
            __builtin_prefetch(src[(g + PACK_PREFETCH) * nsel]);
        memcpy(dst + (uint64_t)row[g] * rb + (uint64_t)start[g] * isz, src[g * nsel],
               (size_t)((uint64_t)len[g] * isz));
    }
    uint32_t last = s->b.rows - 1;
    if (s->b.rows && (uint64_t)s->lengths[last] < l->o.seq_len)
        fill_elems(dst + last * rb + (uint64_t)s->lengths[last] * isz,
                   l->o.seq_len - (uint64_t)s->lengths[last], f->dtype, l->o.pad_value);
}

/* PACK of several fields: the chosen fields of every segment's record, all
 * looked up before any copy (so that on a random order the cache misses
 * overlap), checked against the planned field's length and put in
 * seg_src. A record's segments are consecutive: one lookup each. */
static int pack_lookup(cxlp_loader *l, struct slot *s)
{
    const uint32_t nsel = l->nsel, var0 = l->var0;
    const uint64_t isz0 = (uint64_t)l->sel[var0].isz;
    struct cxlp_view v[CXLP_MAX_FIELDS];
    for (uint64_t g = 0; g < s->b.n_segments; g++) {
        if (g == 0 || s->ids[g] != s->ids[g - 1]) {
            int rc = read_sel(l, s->ids[g], v);
            if (rc)
                return read_fail(s->ids[g], rc);
            if ((rc = check_fields(l, s->ids[g], v, v[var0].len / isz0)))
                return rc;
        }
        for (uint32_t k = 0; k < nsel; k++) {
            const struct lfield *f = &l->sel[k];
            if (k == var0)
                continue; /* planning's */
            if (!f->var)
                __builtin_prefetch(v[k].data); /* small values, for the copies */
            s->seg_src[g * nsel + k] = (const uint8_t *)v[k].data +
                                       (f->var ? (uint64_t)s->seg_offset[g] * (uint64_t)f->isz : 0);
        }
    }
    return 0;
}

static int gather_pack(cxlp_loader *l, struct slot *s)
{
    if (l->nsel == 1) {
        pack_field(l, s, 0, 1);
        return 0;
    }
    int rc = pack_lookup(l, s);
    for (uint32_t k = 0; k < l->nsel && !rc; k++)
        pack_field(l, s, k, l->nsel);
    return rc;
}

/* ---------------------------------------------------------------- threads  */

/* Batch k is ready in s: into deliver[], then the consumer if it sleeps
 * for it. The release store publishes the slot's contents; pairs with the
 * acquire load in cxlp_loader_next. */
/* The slot's result, with its message taken from this (gather) thread's
 * own: the consumer puts it on the handle when it returns the batch. */
static void slot_result(struct slot *s, int rc)
{
    s->err = rc;
    if (rc)
        strlcpy0(s->msg, cxlp_errmsg(NULL), sizeof s->msg);
}

static void publish(cxlp_loader *l, struct slot *s, uint64_t k)
{
    __atomic_store_n(&l->deliver[k & (DELIVER - 1)], s, __ATOMIC_SEQ_CST);
    notify_consumer(l, k);
}

/* Under plan_mu: the end of the stream is known (end = first batch past
 * it); every thread that sleeps must see it. */
static void set_end(cxlp_loader *l, uint64_t end)
{
    __atomic_store_n(&l->end_batch, end, __ATOMIC_SEQ_CST);
}

static void *worker(void *arg)
{
    struct gthread *me = arg;
    cxlp_loader *l = me->l;
    if (l->node >= 0)
        numa_run_on_node(l->node);
    for (;;) {
        pthread_mutex_lock(&l->plan_mu);
        uint64_t k = l->next_plan;
        if (__atomic_load_n(&l->stopping, __ATOMIC_SEQ_CST) ||
            k >= __atomic_load_n(&l->end_batch, __ATOMIC_SEQ_CST)) {
            pthread_mutex_unlock(&l->plan_mu);
            break;
        }
        struct slot *s = NULL;
        if (k - __atomic_load_n(&l->next_out, __ATOMIC_SEQ_CST) < DELIVER)
            s = pop_free(l);
        if (!s) {
            pthread_mutex_unlock(&l->plan_mu);
            wait_free(l, me);
            continue;
        }
        /* from here on the batch reads the pool (PACK plans from the records) */
        uint64_t alarm = read_alarm_now();
        uint32_t rows = 0;
        int rc = l->o.collate == CXLP_COLLATE_PACK ? plan_pack(l, s, &rows) : plan_rows(l, s, &rows);
        s->batch_no = k;
        slot_result(s, rc);
        s->b.index = k;
        s->b.rows = rows;
        s->b.resume_records = l->records_done;
        s->b.resume_offset = l->cur_off;
        /* planning may have grown (moved) the arrays */
        s->b.ids = s->ids;
        s->b.lengths = s->lengths;
        s->b.seg_row = s->seg_row;
        s->b.seg_start = s->seg_start;
        s->b.seg_len = s->seg_len;
        s->b.seg_offset = s->seg_offset;
        for (uint32_t f = 0; f < l->nsel; f++)
            s->b.field_data[f] = l->sel[f].in_slot ? s->data + l->sel[f].off : s->segf[f];
        s->b.data = s->b.field_data[0];
        if (rc || rows == 0) {
            /* an error ends the stream after this batch; an empty plan is the end */
            set_end(l, rc ? k + 1 : k);
            __atomic_store_n(&l->next_plan, k + 1, __ATOMIC_SEQ_CST);
            pthread_mutex_unlock(&l->plan_mu);
            if (rc)
                publish(l, s, k);
            else
                push_free(l, s);
            wake_gatherers(l, UINT32_MAX);
            notify_consumer(l, NONE);
            continue;
        }
        __atomic_store_n(&l->next_plan, k + 1, __ATOMIC_SEQ_CST);
        pthread_mutex_unlock(&l->plan_mu);

        /* tiered: the batch's shards in memory and pinned while we copy */
        if (l->tier)
            rc = engine_batch_begin(l->tier, s->ids,
                                    l->o.collate == CXLP_COLLATE_PACK ? s->b.n_segments : rows);
        if (rc)
            rc = seterr(NULL, rc, "staging batch %llu: %s", (unsigned long long)k,
                        cxlp_errmsg(NULL));
        else switch (l->o.collate) {
        case CXLP_COLLATE_STACK: rc = gather_stack(l, s); break;
        case CXLP_COLLATE_PAD: rc = gather_pad(l, s); break;
        default: rc = gather_pack(l, s); break;
        }
        /* a pool shrunk under the mapping reads as zeros (media/guard.c), a
         * lost lease protects nothing: such a batch is an error, never
         * delivered, and the error says which of the two it was */
        uint64_t now = read_alarm_now();
        if (__builtin_expect(now != 0 && (rc || now != alarm), 0) && l->src.check) {
            int crc = l->src.check(l->src.ctx);
            if (crc)
                rc = seterr(NULL, crc, "batch %llu: %s", (unsigned long long)k,
                            cxlp_errmsg(NULL));
        }
        slot_result(s, rc); /* before batch_end, whose errors are not this batch's */
        if (l->tier)
            engine_batch_end(l->tier, rows);
        publish(l, s, k);
    }
    /* nothing more from this thread: a consumer sleeping for more must look */
    notify_consumer(l, NONE);
    return NULL;
}

/* Ring memory kept from a freed loader for the next one. A training loop
 * makes a loader per pass (iter() over the DataLoader), each with the same
 * ring; a fresh mapping costs the first pass's page faults again, and the
 * kernel zeroes every page before the gather writes it (clear_page, 6% of
 * a 64 KiB x 256 pass's CPU samples; a 16 MiB slot is 8 huge pages to
 * zero). So a freed loader's unbound mappings are kept, whole, and the
 * next loader takes those of its sizes; whatever it did not take is
 * unmapped once its ring is made (cxlp_loader_trim): what is held is what
 * loaders freed since the last one was made, at most KEEP_BYTES. A mapping
 * is taken only by a loader whose gather threads run on the node of the
 * one that touched its pages first (l->node). Kept memory holds the last
 * batches' bytes, which the next ring overwrites as it overwrites its own
 * slots at every batch. Mappings bound to nodes (bind_slots) are neither
 * kept nor taken: their pages are placed at the first touch. */
#define KEEP_MAX 64
#define KEEP_BYTES (UINT64_C(1) << 30)
static struct {
    pthread_mutex_t mu;
    uint32_t n;
    uint64_t bytes;
    struct {
        uint8_t *p;
        uint64_t bytes;
        int node;
    } m[KEEP_MAX];
} kept = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;

/* A fork while another thread keeps or takes a mapping must not leave the
 * child the mutex held (as media/guard.c's table). */
static void kept_fork_prepare(void)
{
    pthread_mutex_lock(&kept.mu);
}

static void kept_fork_done(void)
{
    pthread_mutex_unlock(&kept.mu);
}

static void kept_install(void)
{
    pthread_atfork(kept_fork_prepare, kept_fork_done, kept_fork_done);
}

static void kept_lock(void)
{
    pthread_once(&kept_once, kept_install);
    pthread_mutex_lock(&kept.mu);
}

/* A kept mapping of exactly bytes first touched from node, or NULL. */
static uint8_t *kept_take(uint64_t bytes, int node)
{
    uint8_t *p = NULL;
    kept_lock();
    for (uint32_t i = 0; i < kept.n; i++)
        if (kept.m[i].bytes == bytes && kept.m[i].node == node) {
            p = kept.m[i].p;
            kept.bytes -= bytes;
            kept.m[i] = kept.m[--kept.n];
            break;
        }
    pthread_mutex_unlock(&kept.mu);
    return p;
}

/* Keeps mapping p of bytes for the next loader, or unmaps it. */
static void kept_put(uint8_t *p, uint64_t bytes, int node)
{
    kept_lock();
    int keep = kept.n < KEEP_MAX && kept.bytes + bytes <= KEEP_BYTES;
    if (keep) {
        kept.m[kept.n].p = p;
        kept.m[kept.n].node = node;
        kept.m[kept.n++].bytes = bytes;
        kept.bytes += bytes;
    }
    pthread_mutex_unlock(&kept.mu);
    if (!keep)
        munmap(p, (size_t)bytes);
}

void cxlp_loader_trim(void)
{
    kept_lock();
    for (uint32_t i = 0; i < kept.n; i++)
        munmap(kept.m[i].p, (size_t)kept.m[i].bytes);
    kept.n = 0;
    kept.bytes = 0;
    pthread_mutex_unlock(&kept.mu);
}

/* Lets go of a slot's (or the arena's) mapping: kept for the next loader
 * when unbound. */
static void slot_unmap(const cxlp_loader *l, uint8_t *p, uint64_t bytes)
{
    if (l->o.bind_slots)
        munmap(p, (size_t)bytes);
    else
        kept_put(p, bytes, l->node);
}

static void slot_free(cxlp_loader *l, struct slot *s)
{
    if (!s)
        return;
    free(s->ids);
    free(s->lengths);
    free(s->views);
    free(s->seg_row);
    free(s->seg_start);
    free(s->seg_len);
    free(s->seg_offset);
    free(s->seg_src);
    for (uint32_t k = 0; k < CXLP_MAX_FIELDS; k++)
        free(s->segf[k]);
    if (s->data && s->own_map)
        slot_unmap(l, s->data, l->slot_bytes);
    free(s);
}

/* A slot's memory: anonymous, page aligned; slots of 2 MiB or more (their
 * size a multiple of 2 MiB) start at a 2 MiB boundary and ask for
 * transparent huge pages, so that the gather's first writes fault in 2 MiB
 * at a time and the batch is written through few TLB entries (a batch of
 * 256 records of 64 KiB is 16 MiB: 4096 faults and page walks per slot on
 * 4 KiB pages). A kept mapping of the size when the loader's slots are not
 * bound. NULL with errno on failure. */
static uint8_t *slot_map(const cxlp_loader *l, uint64_t bytes)
{
    const uint64_t H = UINT64_C(2) << 20;
    uint8_t *k = l->o.bind_slots ? NULL : kept_take(bytes, l->node);
    if (k)
        return k;
    if (bytes < H) {
        void *p = mmap(NULL, (size_t)bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                       -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    uint8_t *r = mmap(NULL, (size_t)(bytes + H), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED)
        return NULL;
    uint8_t *a = (uint8_t *)ALIGN_UP((uintptr_t)r, H);
    if (a > r)
        munmap(r, (size_t)(a - r));
    if (a + bytes < r + bytes + H)
        munmap(a + bytes, (size_t)(r + bytes + H - (a + bytes)));
    (void)madvise(a, (size_t)bytes, MADV_HUGEPAGE); /* best effort: THP may be off */
    return a;
}

/* 1 when opts name a node set for the ring slots (slot_nodes). */
static int slot_nodes_any(const struct cxlp_loader_opts *o)
{
    uint64_t any = 0;
    for (size_t w = 0; w < sizeof o->slot_nodes / sizeof o->slot_nodes[0]; w++)
        any |= o->slot_nodes[w];
    return any != 0;
}

/* Adds one slot to the ring (under mu, or before the threads start) and
 * puts it on the free stack. Its data is page aligned anonymous memory (a
 * piece of the arena, or a mapping of its own), so it can be registered
 * with CUDA (cudaHostRegister) or bound to a node. */
static int slot_add(cxlp_loader *l)
{
    if (l->nslots == l->cap_slots) {
        uint32_t cap = l->cap_slots ? 2 * l->cap_slots : 8;
        struct slot **a = realloc(l->slots, cap * sizeof *a);
        if (!a)
            return -ENOMEM;
        l->slots = a;
        l->cap_slots = cap;
    }
    struct slot *s = calloc(1, sizeof *s);
    if (!s)
        return -ENOMEM;
    uint64_t rows = l->o.batch_size;
    if (l->arena && l->arena_used + l->slot_bytes <= l->arena_bytes) {
        s->data = l->arena + l->arena_used;
        l->arena_used += l->slot_bytes;
    } else if ((s->data = slot_map(l, l->slot_bytes))) {
        s->own_map = 1;
    } else {
        int e = errno;
        slot_free(l, s);
        return -e;
    }
    if (l->o.bind_slots) {
        /* before the first touch, so every page is allocated on the node(s) */
        const size_t W = 8 * sizeof(unsigned long);
        unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {0};
        for (int n = 0; n < 1024; n++)
            mask[n / W] |= (unsigned long)((l->o.slot_nodes[n / 64] >> (n % 64)) & 1) << (n % W);
        if (!slot_nodes_any(&l->o))
            mask[l->o.slot_node / W] |= 1UL << (l->o.slot_node % W);
        if (mbind(s->data, (size_t)l->slot_bytes, l->o.bind_slots == 2 ? MPOL_INTERLEAVE : MPOL_BIND,
                  mask, 1024, 0) < 0) {
            int e = errno;
            slot_free(l, s);
            return -e;
        }
    }
    s->b.data = s->data;
    s->b.row_bytes = l->row_bytes;
    s->b.slot = l->nslots;
    s->b.n_fields = l->nsel;
    for (uint32_t k = 0; k < l->nsel; k++) {
        s->b.field_data[k] = s->data + l->sel[k].off;
        s->b.field_row_bytes[k] = l->sel[k].row_bytes;
    }
    int bad = 0;
    if (l->o.collate == CXLP_COLLATE_PACK) {
        bad = grow_segments(l, s, rows * 2) != 0;
    } else {
        s->ids = malloc(rows * sizeof(uint64_t));
        s->views = malloc(rows * l->nsel * sizeof(struct cxlp_view));
        s->ids_cap = rows;
        bad = !s->ids || !s->views;
    }
    if (!bad && l->o.collate != CXLP_COLLATE_STACK)
        bad = !(s->lengths = malloc(rows * sizeof(int64_t)));
    if (bad) {
        slot_free(l, s);
        return -ENOMEM;
    }
    l->slots[l->nslots] = s;
    /* releases in other threads read nslots */
    __atomic_store_n(&l->nslots, l->nslots + 1, __ATOMIC_RELAXED);
    push_free(l, s);
    return 0;
}

static void destroy(cxlp_loader *l)
{
    for (uint32_t i = 0; l->slots && i < l->nslots; i++)
        slot_free(l, l->slots[i]);
    if (l->arena)
        slot_unmap(l, l->arena, l->arena_bytes);
    free(l->slots);
    free(l->idbuf);
    free(l->gt);
    pthread_mutex_destroy(&l->mu);
    pthread_mutex_destroy(&l->plan_mu);
    l->obj.magic = 0;
    free(l);
}

static void unref(cxlp_loader *l)
{
    if (__atomic_fetch_sub(&l->refs, 1, __ATOMIC_ACQ_REL) == 1)
        destroy(l);
}

/* The chosen fields (opts->fields, or every field) as sel[]. */
static int resolve_fields(cxlp_loader *l, const struct rec_src *src,
                          const struct cxlp_loader_opts *o)
{
    if (o->n_fields > CXLP_MAX_FIELDS)
        return seterr(NULL, CXLP_EARG, "loader: n_fields %u is more than %d", o->n_fields,
                      CXLP_MAX_FIELDS);
    if (!src->read_fields) { /* a source of one field */
        if (o->n_fields > 1 || (o->n_fields == 1 && o->fields[0] != 0))
            return seterr(NULL, CXLP_EARG, "loader: the source has one field (field 0)");
        int isz = cxlp_dtype_size(src->dtype);
        l->nsel = 1;
        l->sel[0] = (struct lfield){.field = 0, .var = !src->fixed, .size = src->record_size,
                                    .dtype = src->dtype, .isz = isz > 0 ? isz : 1};
        return 0;
    }
    const struct cxlp_schema *sc = src->schema;
    l->nsel = o->n_fields ? o->n_fields : sc->n_fields;
    for (uint32_t k = 0; k < l->nsel; k++) {
        uint32_t f = o->n_fields ? o->fields[k] : k;
        if (f >= sc->n_fields)
            return seterr(NULL, CXLP_EARG, "loader: fields[%u] = %u, the dataset has %u fields",
                          k, f, sc->n_fields);
        for (uint32_t j = 0; j < k; j++)
            if (l->sel[j].field == f)
                return seterr(NULL, CXLP_EARG, "loader: field %u (%s) chosen twice", f,
                              sc->fields[f].name);
        const struct cxlp_field *fd = &sc->fields[f];
        l->sel[k] = (struct lfield){.field = f, .var = CXLP_FIELD_VAR(fd),
                                    .size = schema_field_size(fd), .dtype = fd->dtype,
                                    .isz = cxlp_dtype_size(fd->dtype)};
    }
    return 0;
}

static int check_opts(const cxlp_loader *l, const struct cxlp_loader_opts *o)
{
    if (o->batch_size == 0)
        return seterr(NULL, CXLP_EARG, "loader: batch_size must be > 0");
    if (o->threads > 256)
        return seterr(NULL, CXLP_EARG, "loader: threads %u is more than 256", o->threads);
    if (o->slots > DELIVER)
        return seterr(NULL, CXLP_EARG, "loader: slots %u is more than %u", o->slots, DELIVER);
    if (o->prefetch > 64)
        return seterr(NULL, CXLP_EARG, "loader: prefetch %u is more than 64", o->prefetch);
    uint32_t nvar = 0, first_var = 0;
    for (uint32_t k = 0; k < l->nsel; k++)
        if (l->sel[k].var && !nvar++)
            first_var = k;
    switch (o->collate) {
    case CXLP_COLLATE_STACK:
        if (nvar)
            return seterr(NULL, CXLP_EARG,
                          "loader: collate STACK needs fixed-size records (field %u is "
                          "variable-length); use PAD or PACK", l->sel[first_var].field);
        break;
    case CXLP_COLLATE_PAD:
    case CXLP_COLLATE_PACK:
        if (!nvar)
            return seterr(NULL, CXLP_EARG,
                          "loader: collate PAD/PACK is for variable-size records; use STACK");
        if (o->seq_len == 0)
            return seterr(NULL, CXLP_EARG, "loader: seq_len must be > 0 for PAD and PACK");
        for (uint32_t k = 0; k < l->nsel; k++)
            if (cxlp_dtype_size(l->sel[k].dtype) <= 0)
                return seterr(NULL, CXLP_EARG, "loader: unknown element dtype %d", l->sel[k].dtype);
        break;
    default:
        return seterr(NULL, CXLP_EARG, "loader: unknown collate %d", o->collate);
    }
    if (o->bind_slots < 0 || o->bind_slots > 2)
        return seterr(NULL, CXLP_EARG, "loader: bind_slots %d: 0, 1 (bind) or 2 (interleave)",
                      o->bind_slots);
    if (o->bind_slots && !slot_nodes_any(o) && (o->slot_node < 0 || o->slot_node >= 1024))
        return seterr(NULL, CXLP_EARG, "loader: slot_node %d is not a node number", o->slot_node);
    if (o->first_offset && o->collate != CXLP_COLLATE_PACK)
        return seterr(NULL, CXLP_EARG, "loader: first_offset applies to PACK only");
    return 0;
}

/* CPUs of node (in the process's affinity), 0 if none or unknown. */
static int node_cpus(int node, const cpu_set_t *aff)
{
    if (node < 0 || node > numa_max_node())
        return 0;
    struct bitmask *bm = numa_allocate_cpumask();
    int n = 0;
    if (bm && numa_node_to_cpus(node, bm) == 0)
        for (unsigned c = 0; c < bm->size && c < CPU_SETSIZE; c++)
            n += numa_bitmask_isbitset(bm, c) && CPU_ISSET(c, aff);
    if (bm)
        numa_free_cpumask(bm);
    return n;
}

int loader_cpus(int node, int src_node, int *chosen_node)
{
    cpu_set_t aff;
    CPU_ZERO(&aff);
    int all = sched_getaffinity(0, sizeof aff, &aff) == 0 ? CPU_COUNT(&aff) : 0;
    if (all <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        all = n > 0 ? (int)n : 1;
        for (int c = 0; c < all && c < CPU_SETSIZE; c++)
            CPU_SET(c, &aff);
    }
    *chosen_node = -1;
    if ((node < 0 && src_node < 0) || numa_available() < 0)
        return all;
    int want = node >= 0 ? node : src_node;
    if (node < 0 && node_cpus(want, &aff) == 0) {
        /* the records are on a node without CPUs (CXL memory, or a node the
         * process may not run on): the nearest node with CPUs */
        uint32_t w[MEDIA_MAX_NODES] = {0};
        if (src_node < MEDIA_MAX_NODES)
            w[src_node] = 1;
        want = media_nearest_cpu_node(w);
    }
    int n = node_cpus(want, &aff);
    if (n == 0)
        return all;
    *chosen_node = want;
    return n;
}

/* Never more gather threads than CPUs to run them: a thread more only
 * takes turns with the others (and with the consumer). The default leaves
 * one CPU to the consumer, the training loop's own thread, where there are
 * several. */
static uint32_t threads_for(uint32_t asked, int cpus)
{
    uint32_t want = asked ? asked : (uint32_t)(cpus > 1 ? cpus - 1 : 1);
    return MIN(want, (uint32_t)cpus);
}

uint32_t cxlp_loader_default_threads(const cxlp_store *s, uint32_t threads, int numa_node)
{
    int node;
    return threads_for(threads, loader_cpus(numa_node, s ? store_numa_node(s) : -1, &node));
}

/* A core's L2 cache in bytes; 0 unknown. */
static uint64_t l2_bytes(void)
{
    long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    return v > 0 ? (uint64_t)v : 0;
}

/* Ring bytes from which STACK stores are non-temporal: 3/4 of the last
 * level cache (the L2 where no L3 is known), the share glibc's memcpy also
 * takes as its threshold (a ring that large does not stay in the cache
 * between the gather and the loop, nor between two uses of a slot); no
 * size known: never. */
static uint64_t nt_ring_bytes(void)
{
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    uint64_t llc = l3 > 0 ? (uint64_t)l3 : l2_bytes();
    return llc ? llc / 4 * 3 : UINT64_MAX;
}

int loader_create_src(const struct rec_src *src, const struct cxlp_loader_opts *opts,
                      cxlp_index_fn index_fn, void *index_ctx, cxlp_loader **out)
{
    if (!src || !opts || !index_fn || !out || (src->read_fields && !src->schema))
        return seterr(NULL, CXLP_EARG, "loader: NULL argument");
    if (opts->tier_policy < 0 || opts->tier_policy > CXLP_POLICY_FULL_PREFETCH)
        return seterr(NULL, CXLP_EARG, "loader: tier_policy %d is not a policy", opts->tier_policy);
    cxlp_loader *l = calloc(1, sizeof *l);
    if (!l)
        return -ENOMEM;
    int rc = resolve_fields(l, src, opts);
    if (!rc)
        rc = check_opts(l, opts);
    if (rc) {
        free(l);
        return rc;
    }
    obj_init(&l->obj);
    l->src = *src;
    l->tier = src->tier; /* before any thread starts */
    l->o = *opts;
    l->index_fn = index_fn;
    l->index_ctx = index_ctx;
    int cpus = loader_cpus(opts->numa_node, src->node, &l->node);
    l->nthreads = threads_for(opts->threads, cpus);
    l->spin = l->nthreads < (uint32_t)cpus;
    l->spin_ns = SPIN_NS;
    l->end_batch = NONE;
    l->waiting_for = NONE;
    l->refs = 1;
    l->cur_off = opts->first_offset;
    pthread_mutex_init(&l->mu, NULL);
    pthread_mutex_init(&l->plan_mu, NULL);

    /* each chosen field's region of the slot, 64-byte aligned */
    uint64_t rows = opts->batch_size, slot_bytes = 0;
    for (uint32_t k = 0; k < l->nsel; k++) {
        struct lfield *f = &l->sel[k];
        l->fidx[k] = f->field;
        f->in_slot = !(opts->collate == CXLP_COLLATE_PACK && !f->var);
        f->row_bytes = f->size;
        if (f->var && mul_overflow_u64(opts->seq_len, (uint64_t)f->isz, &f->row_bytes))
            goto too_big;
        if (!f->in_slot)
            continue;
        uint64_t bytes;
        f->off = ALIGN_UP(slot_bytes, 64);
        if (mul_overflow_u64(rows, f->row_bytes, &bytes) || bytes > ((uint64_t)1 << 40))
            goto too_big;
        slot_bytes = f->off + bytes;
    }
    for (uint32_t k = l->nsel; k-- > 0;)
        if (l->sel[k].var)
            l->var0 = k;
    l->itemsize = l->sel[l->var0].isz;
    l->row_bytes = l->sel[0].row_bytes;
    if (slot_bytes > ((uint64_t)1 << 40))
        goto too_big;
    l->slot_bytes = ALIGN_UP(slot_bytes ? slot_bytes : 1, 4096);
    if (l->slot_bytes >= (UINT64_C(2) << 20)) /* whole 2 MiB pages (slot_map) */
        l->slot_bytes = ALIGN_UP(l->slot_bytes, UINT64_C(2) << 20);
    l->nt_ring = src->nt_ring ? src->nt_ring : nt_ring_bytes();
    /* prefetch batches ahead per thread, twice over (one thread descheduled
     * mid-batch must not leave the others without a free slot); by default
     * 2, and for small batches more slots, so that a gather thread woken
     * when half the ring is free makes many batches per wake-up and the
     * consumer woken when half the ring is ready takes many: half the gather
     * threads' L2 where that holds TIMER_MIN_SLOTS slots (so the consumer
     * keeps its timer): the slot a thread rewrites is then still in its
     * L2, and its stores do not fetch the lines from farther away
     * (docs/benchmarks/history.md, "A ring in half the L2"); else RING_BYTES (with
     * 128 KiB slots a ring of the whole L2, or of half of it without the
     * timer, was slower than one of 8 MiB) */
    uint32_t nslots = opts->slots;
    if (!nslots && opts->prefetch) {
        nslots = 2 * opts->prefetch * l->nthreads + 2;
    } else if (!nslots) {
        nslots = 2 * 2 * l->nthreads + 2;
        uint64_t l2 = l2_bytes() * l->nthreads;
        uint64_t n = l2 && MAX(nslots, TIMER_MIN_SLOTS) * l->slot_bytes <= l2 / 2
                         ? l2 / 2 / l->slot_bytes
                         : RING_BYTES / l->slot_bytes;
        nslots = (uint32_t)MAX(nslots, MIN(RING_SLOTS_MAX, n));
    }
    if (opts->max_slots && opts->max_slots < nslots)
        nslots = opts->max_slots;
    l->idbuf_cap = MAX(rows, 1024);
    l->idbuf = malloc(l->idbuf_cap * sizeof(uint64_t));
    /* small slots: the first ones side by side in 2 MiB pages (slot_map),
     * so the ring is written through a few TLB entries, not one per 4 KiB
     * (docs/benchmarks/history.md, bench_engine); slots added later (growth) get
     * mappings of their own */
    if (l->slot_bytes < (UINT64_C(2) << 20)) {
        l->arena_bytes = ALIGN_UP((uint64_t)nslots * l->slot_bytes, UINT64_C(2) << 20);
        if (!(l->arena = slot_map(l, l->arena_bytes)))
            l->arena_bytes = 0; /* then each slot maps its own */
    }
    l->gt = aligned_alloc(CACHELINE, ALIGN_UP(l->nthreads * sizeof *l->gt, CACHELINE));
    if (!l->idbuf || !l->gt)
        goto nomem;
    memset(l->gt, 0, l->nthreads * sizeof *l->gt);
    for (uint32_t i = 0; i < nslots; i++) {
        if ((rc = slot_add(l))) {
            if (opts->bind_slots && slot_nodes_any(opts))
                rc = seterr(NULL, rc, "loader: %u slots of %llu bytes %s slot_nodes: %s",
                            nslots, (unsigned long long)l->slot_bytes,
                            opts->bind_slots == 2 ? "interleaved over" : "bound to",
                            strerror(-rc));
            else if (opts->bind_slots)
                rc = seterr(NULL, rc, "loader: %u slots of %llu bytes bound to node %d: %s",
                            nslots, (unsigned long long)l->slot_bytes, opts->slot_node,
                            strerror(-rc));
            else
                rc = seterr(NULL, rc, "loader: %u slots of %llu bytes: %s", nslots,
                            (unsigned long long)l->slot_bytes, strerror(-rc));
            goto fail;
        }
    }
    cxlp_loader_trim(); /* what this ring did not take */
    for (uint32_t i = 0; i < l->nthreads; i++)
        l->gt[i].l = l;
    for (uint32_t i = 0; i < l->nthreads; i++) {
        rc = pthread_create(&l->gt[i].tid, NULL, worker, &l->gt[i]);
        if (rc == 0) /* a name users can find in top -H, py-spy and /proc */
            pthread_setname_np(l->gt[i].tid, "cxlp-gather");
        if (rc) {
            __atomic_store_n(&l->stopping, 1, __ATOMIC_SEQ_CST);
            wake_gatherers(l, UINT32_MAX);
            for (uint32_t j = 0; j < i; j++)
                pthread_join(l->gt[j].tid, NULL);
            rc = seterr(NULL, -rc, "loader: starting thread %u: %s", i, strerror(rc));
            goto fail;
        }
    }
    *out = l;
    return 0;
too_big:
    rc = seterr(NULL, CXLP_EARG, "loader: batch_size x row size x slots is too large");
    goto fail;
nomem:
    rc = seterr(NULL, -ENOMEM, "loader: out of memory");
fail:
    destroy(l);
    return rc;
}

static int store_read_fields_fn(const void *ctx, uint64_t id, const uint32_t *f, uint32_t n,
                                struct cxlp_view *v)
{
    return store_read_fields(ctx, id, f, n, v);
}

static int store_resolve_fn(const void *ctx, const uint64_t *ids, size_t n, const uint32_t *f,
                            uint32_t nf, struct cxlp_view *out, size_t *bad)
{
    return store_resolve(ctx, ids, n, f, nf, out, bad);
}

int cxlp_loader_create(cxlp_store *s, const struct cxlp_loader_opts *opts,
                       cxlp_index_fn index_fn, void *index_ctx, cxlp_loader **out)
{
    if (!s)
        return seterr(NULL, CXLP_EARG, "loader: store is NULL");
    struct rec_src src = {
        .ctx = s,
        .read_fields = store_read_fields_fn,
        .schema = cxlp_store_schema(s),
        .resolve = store_resolve_fn,
        .check = store_check,
        .node = store_numa_node(s),
    };
    struct tier_engine *eng = NULL;
    if (cxlp_store_tiered(s) && opts) {
        /* the engine sits between the index source and the gather */
        int rc = engine_create(s, opts, index_fn, index_ctx, &eng);
        if (rc)
            return rc;
        src.read_fields = engine_read_fields; /* records through the batch's map */
        src.check = engine_check;
        src.resolve = NULL;
        src.ctx = eng;
        src.tier = eng;
        index_fn = engine_next;
        index_ctx = eng;
    }
    int rc = loader_create_src(&src, opts, index_fn, index_ctx, out);
    if (rc)
        engine_free(eng);
    return rc;
}

int cxlp_loader_stats(cxlp_loader *l, struct cxlp_loader_stats *st)
{
    if (!l || !st)
        return seterr(NULL, CXLP_EARG, "cxlp_loader_stats: NULL argument");
    memset(st, 0, sizeof *st);
    if (l->tier) {
        engine_stats(l->tier, st);
    } else {
        /* no engine: what the consumer has taken (a full pass: every batch
         * and record of it) */
        st->batches = __atomic_load_n(&l->next_out, __ATOMIC_SEQ_CST);
        st->records = __atomic_load_n(&l->taken_records, __ATOMIC_RELAXED);
    }
    return 0;
}

/* Batch k if it is in deliver[]; NULL otherwise. */
static struct slot *ready(cxlp_loader *l, uint64_t k)
{
    /* pairs with the store in publish */
    struct slot *s = __atomic_load_n(&l->deliver[k & (DELIVER - 1)], __ATOMIC_ACQUIRE);
    return s && s->batch_no == k ? s : NULL;
}

/* Batch k is ready, or the stream ends before it: cxlp_loader_next(k)
 * returns without waiting. */
static int ready_or_end(cxlp_loader *l, uint64_t k)
{
    return ready(l, k) || k >= __atomic_load_n(&l->end_batch, __ATOMIC_SEQ_CST);
}

/* Every slot is lent to the consumer and it asks for one more: the ring
 * grows by one, up to max_slots. Consumer thread. */
static int grow(cxlp_loader *l)
{
    pthread_mutex_lock(&l->mu); /* cxlp_loader_slots reads the list */
    int rc = 0;
    if (l->o.max_slots && l->nslots >= l->o.max_slots)
        rc = seterr(&l->obj, CXLP_EBUSY,
                    "loader: all %u ring slots are held by unreleased batches; "
                    "release batches or raise max_slots", l->nslots);
    else if ((rc = slot_add(l)))
        rc = seterr(&l->obj, rc, "loader: growing the ring past %u slots: %s", l->nslots,
                    strerror(-rc));
    pthread_mutex_unlock(&l->mu);
    if (!rc)
        wake_gatherers(l, 1);
    return rc;
}

/* The consumer sleeps until batch k may be ready (or the end is known).
 * Unless exact, it asks to be woken only once half the ring is ready, so
 * that a loop faster than the gather threads pays one wake-up per several
 * batches rather than one per batch (what it waits for then is the gather
 * threads, not the wake-up); a gather thread that parks, ends or errs wakes
 * it whatever it waits for, and a wake that finds batch k not made yet
 * (another thread still copying it) is followed by an exact wait. Unless
 * exact, the sleep is also bounded by the consumer's own timer (the
 * hand-off, at the top); 1 when that timer ended it. */
static int wait_ready(cxlp_loader *l, uint64_t k, int exact)
{
    /* The spin adapts: it doubles (up to SPIN_NS) when the batch came
     * while spinning and halves when it did not, so a loop that always
     * waits longer (the gather threads are the bottleneck) stops burning a
     * CPU on it; every 32nd wait tries again. */
    uint32_t spin = l->spin_ns ? l->spin_ns : (++l->waits % 32 == 0 ? SPIN_NS / 4 : 0);
    if (l->spin && spin) {
        uint64_t t0 = now_ns();
        do {
            for (int i = 0; i < 64; i++) {
                if (ready(l, k)) {
                    l->spin_ns = MIN(SPIN_NS, 2 * spin);
                    return 0;
                }
                cpu_relax();
            }
        } while (now_ns() - t0 < spin);
        l->spin_ns = spin / 2 < 250 ? 0 : spin / 2;
    }
    uint32_t half = __atomic_load_n(&l->nslots, __ATOMIC_RELAXED) / 2;
    __atomic_store_n(&l->waiting_for, k + (exact || !half ? 0 : half - 1), __ATOMIC_SEQ_CST);
    uint32_t key = park_prepare(&l->cons);
    if (ready_or_end(l, k)) {
        park_cancel(&l->cons);
        return 0;
    }
    /* gather threads parked while slots are free (they wait for half the
     * ring): this wait needs them now */
    if (__atomic_load_n(&l->free_n, __ATOMIC_SEQ_CST))
        wake_gatherers(l, UINT32_MAX);
    /* the timer: half the time to make the batches up to waiting_for that
     * are not planned yet, or still being copied (at most one per thread) */
    uint64_t plan0 = __atomic_load_n(&l->next_plan, __ATOMIC_SEQ_CST), timeout = 0;
    if (!exact && half >= TIMER_MIN_SLOTS / 2 && l->batch_ns) {
        uint64_t made = plan0 > k + l->nthreads ? plan0 - k - l->nthreads : 0;
        timeout = (half - MIN(made, half)) * l->batch_ns / 2;
        timeout = timeout < SLEEP_MIN_NS ? 0 : timeout;
    }
    uint64_t t0 = now_ns();
    int timed = park_wait(&l->cons, key, timeout);
    uint64_t plan1 = __atomic_load_n(&l->next_plan, __ATOMIC_SEQ_CST);
    if (!exact && plan1 > plan0) {
        uint64_t ns = (now_ns() - t0) / (plan1 - plan0);
        l->batch_ns = l->batch_ns ? (3 * l->batch_ns + ns) / 4 : ns;
    }
    l->timeouts += (uint64_t)timed;
    return timed;
}

uint64_t loader_timeouts(const cxlp_loader *l)
{
    return l->timeouts;
}

int cxlp_loader_next(cxlp_loader *l, struct cxlp_batch **out)
{
    uint64_t k = l->next_out;
    int timed = 0; /* the last wait ended on the consumer's timer: not exact */
    for (int waits = 0;; waits++) {
        struct slot *s = ready(l, k);
        if (s) {
            __atomic_store_n(&l->deliver[k & (DELIVER - 1)], NULL, __ATOMIC_RELAXED);
            __atomic_store_n(&l->next_out, k + 1, __ATOMIC_SEQ_CST);
            /* gather threads stopped by the in-flight window may go on */
            if (__atomic_load_n(&l->next_plan, __ATOMIC_RELAXED) - k >= DELIVER - 1)
                wake_gatherers(l, UINT32_MAX);
            if (s->err) {
                /* the message onto the handle here, in the consumer's
                 * thread: a gather thread that fails a later batch writes
                 * only its slot, so the message read after this return is
                 * this batch's, whole */
                int rc = seterr(&l->obj, s->err, "%s", s->msg);
                push_free(l, s);
                wake_gatherers(l, 1);
                return rc;
            }
            __atomic_fetch_add(&l->refs, 1, __ATOMIC_ACQ_REL);
            __atomic_store_n(&l->taken_records, s->b.resume_records, __ATOMIC_RELAXED);
            *out = &s->b;
            return 0;
        }
        if (k >= __atomic_load_n(&l->end_batch, __ATOMIC_SEQ_CST)) {
            *out = NULL;
            return 0;
        }
        if (__atomic_load_n(&l->refs, __ATOMIC_ACQUIRE) - 1 >= l->nslots) {
            /* batch k cannot be made: every slot is lent to the consumer */
            int rc = grow(l);
            if (rc)
                return rc;
            continue;
        }
        timed = wait_ready(l, k, waits > 0 && !timed);
    }
}

int cxlp_loader_ready(cxlp_loader *l)
{
    return ready_or_end(l, l->next_out);
}

void cxlp_loader_release(cxlp_loader *l, struct cxlp_batch *b)
{
    if (!l || !b)
        return;
    struct slot *s = (struct slot *)b;
    push_free(l, s);
    /* wake a parked gather thread once half the ring is free, so that it
     * fills several slots per wake-up; sooner when the consumer is parked
     * (it checks free_n after it parks: one of the two sees the other) */
    if (__atomic_load_n(&l->free_n, __ATOMIC_SEQ_CST) * 2 >=
            __atomic_load_n(&l->nslots, __ATOMIC_RELAXED) ||
        park_is_parked(&l->cons))
        wake_gatherers(l, 1);
    unref(l);
}

uint32_t cxlp_loader_slots(cxlp_loader *l, uint32_t first, void **addr, uint64_t *bytes,
                           uint32_t max)
{
    if (!l)
        return 0;
    pthread_mutex_lock(&l->mu); /* slot_add runs under mu once the threads run */
    uint32_t n = l->nslots;
    for (uint32_t i = 0; i < max && first < n && i < n - first; i++) {
        if (addr)
            addr[i] = l->slots[first + i]->data;
        if (bytes)
            bytes[i] = l->slot_bytes;
    }
    pthread_mutex_unlock(&l->mu);
    return n;
}

uint32_t cxlp_loader_threads(const cxlp_loader *l)
{
    return l ? l->nthreads : 0;
}

void cxlp_loader_free(cxlp_loader *l)
{
    if (!l)
        return;
    __atomic_store_n(&l->stopping, 1, __ATOMIC_SEQ_CST);
    wake_gatherers(l, UINT32_MAX);
    for (uint32_t i = 0; i < l->nthreads; i++)
        pthread_join(l->gt[i].tid, NULL);
    engine_free(l->tier); /* no gather thread uses it now */
    l->tier = NULL;
    unref(l);
}
