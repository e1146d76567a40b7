/*
 * plain_gather.c - the baseline of bench/bench_sweep.py: the plainest C a
 * user could write to gather (or pack) the records of a batch, with the
 * same threads, from the same pool pages, in the same order as the loader.
 *
 * Stack: records are fixed-size and back to back (the sweep ingests each
 * dataset as one shard), so record id is at base + id * record_size: one
 * multiply, no lookup, no bounds check. Pack: record id is the elements
 * [off[id], off[id + 1]) of the shard's data (one index load per record),
 * copied into rows of seq_len elements; where each batch starts in the
 * order is computed before the clock starts, so the packer does no
 * planning at all. Thread t does batches t, t + T, t + 2T... into its own
 * batch buffer (page aligned, touched before the clock starts), the way
 * `cxlpool bench gather` does; with nbuf > 1, into nbuf buffers in turn,
 * as many as the loader's ring has slots per thread, so that both write
 * their batches into as much memory (one buffer stays in the core's cache,
 * a ring of them much less: the difference is most of the loader's extra
 * CPU per byte, so the sweep reports against both). The loader does strictly more: it draws the
 * order, plans, looks records up through the store's index, hands batches
 * to Python in order and builds tensors; what the sweep measures is how
 * much of this baseline's throughput survives that.
 *
 * Built by bench_sweep.py with the C compiler and loaded with ctypes (no
 * Python in the timed loop: ctypes releases the GIL for the call). No
 * library dependency: the caller passes addresses it read from the pool.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The sweep's "plain+order" variant draws the order in the timed loop, as
 * the loader must, through the library's own sampler: next and restore are
 * cxlp_sampler_next and cxlp_sampler_restore, passed as addresses so that
 * this file keeps no library dependency; state mirrors struct
 * cxlp_sampler_state (include/cxlpool.h). */
struct sampler_state {
    uint64_t seed, epoch, consumed, fingerprint;
};
typedef size_t (*next_fn)(void *s, uint64_t *out, size_t max);
typedef int (*restore_fn)(void *s, const struct sampler_state *st);

struct draw {
    next_fn next;
    restore_fn restore;
    void **samplers;          /* one per thread, each at the epoch's start */
    struct sampler_state st;  /* the epoch's; consumed is set per seek */
};

struct job {
    const struct draw *draw;  /* NULL: the order is read from `order` */
    const uint8_t *base;      /* record 0 (stack) or the shard's data (pack) */
    uint64_t rec_size;        /* stack: bytes per record */
    const uint64_t *off;      /* pack: element offsets, n + 1 entries */
    const uint64_t *order;    /* record ids in delivery order, from position obase */
    uint64_t obase;
    uint64_t n;               /* ids in order */
    uint32_t batch;           /* rows per batch */
    uint64_t seq_len;         /* pack: elements per row */
    uint32_t itemsize;        /* pack: bytes per element */
    const uint64_t *bstart;   /* pack: per batch, position in order of its first record */
    const uint64_t *boff;     /* pack: per batch, elements of that record already used */
    uint64_t n_batches;
    int threads;
    int nbuf;                 /* batch buffers per thread, used in turn */
};

struct worker {
    const struct job *j;
    int t;
    uint8_t *buf;             /* nbuf buffers of bytes rounded to pages */
    uint64_t *ob;             /* draw: the ids of this thread's batch */
    size_t bufsz;
    uint64_t sink;
    double cpu;               /* this thread's CPU seconds */
    struct gate *gate;
    pthread_t tid;
};

/* Threads start gathering together when the gate opens; a failed start
 * opens it with stop set, so the threads already made exit at once. */
struct gate {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int open, stop;
};

static double clock_s(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void stack_batch(const struct job *j, uint64_t k, uint8_t *dst)
{
    const uint64_t *ids = j->order + (k * j->batch - j->obase);
    uint64_t m = j->n - k * j->batch < j->batch ? j->n - k * j->batch : j->batch;
    const uint64_t rs = j->rec_size;
    for (uint64_t i = 0; i < m; i++)
        memcpy(dst + i * rs, j->base + ids[i] * rs, rs);
}

static void pack_batch(const struct job *j, uint64_t k, uint8_t *dst)
{
    const uint64_t L = j->seq_len, isz = j->itemsize, total = (uint64_t)j->batch * L;
    uint64_t p = j->bstart[k], off = j->boff[k], pos = 0;
    while (pos < total && p < j->n) {
        uint64_t id = j->order[p - j->obase], a = j->off[id], len = j->off[id + 1] - a;
        uint64_t col = pos % L, take = len - off < L - col ? len - off : L - col;
        memcpy(dst + pos * isz, j->base + (a + off) * isz, take * isz);
        pos += take;
        off += take;
        if (off == len) {
            off = 0;
            p++;
        }
    }
    if (pos % L) /* the last batch's last row: pad */
        memset(dst + pos * isz, 0, (L - pos % L) * isz);
}

static void *run(void *arg)
{
    struct worker *w = arg;
    const struct job *j = w->j;
    uint64_t acc = 0, bytes = j->off ? j->batch * j->seq_len * j->itemsize : j->batch * j->rec_size;
    pthread_mutex_lock(&w->gate->mu);
    while (!w->gate->open)
        pthread_cond_wait(&w->gate->cv, &w->gate->mu);
    int stop = w->gate->stop;
    pthread_mutex_unlock(&w->gate->mu);
    if (stop)
        return NULL;
    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID);
    struct job dj = *j; /* draw: the order is this thread's buffer */
    uint64_t drawn_to = 0, last = 0; /* draw: the sampler's next position, its id before */
    for (uint64_t k = (uint64_t)w->t, r = 0; k < j->n_batches; k += (uint64_t)j->threads, r++) {
        uint8_t *buf = w->buf + (r % (uint64_t)j->nbuf) * w->bufsz;
        const struct job *jk = j;
        if (j->draw) {
            /* the positions batch k reads: its records (pack: up to the one
             * it ends in, which the next batch starts in) */
            uint64_t p0 = j->off ? j->bstart[k] : k * j->batch;
            uint64_t p1 = j->off ? (k + 1 < j->n_batches ? j->bstart[k + 1] + 1 : j->n)
                                 : p0 + j->batch;
            p1 = p1 < j->n ? p1 : j->n;
            size_t got = 0;
            if (drawn_to && p0 + 1 == drawn_to) { /* pack: the record both batches cut */
                w->ob[0] = last;
                got = 1;
            } else if (p0 != drawn_to) {
                struct sampler_state st = j->draw->st;
                st.consumed = p0;
                j->draw->restore(j->draw->samplers[w->t], &st);
            }
            while (got < p1 - p0) {
                size_t m = j->draw->next(j->draw->samplers[w->t], w->ob + got, p1 - p0 - got);
                if (!m)
                    break;
                got += m;
            }
            drawn_to = p0 + got;
            last = got ? w->ob[got - 1] : 0;
            dj.order = w->ob;
            dj.obase = p0;
            jk = &dj;
        }
        if (j->off)
            pack_batch(jk, k, buf);
        else
            stack_batch(jk, k, buf);
        acc += buf[0] + buf[bytes - 1]; /* the copies are used */
    }
    w->sink = acc;
    w->cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    return NULL;
}

/* Gathers every batch once with `threads` threads: wall seconds from the
 * opening of the gate to the last join (buffers are allocated and touched, and
 * the threads made, before), CPU seconds of the gathering threads summed in
 * *cpu. -1 when a thread or a buffer could not be had. */
static double go(struct job *j, double *cpu)
{
    struct worker w[64];
    struct gate g = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0};
    uint64_t bytes = j->off ? j->batch * j->seq_len * j->itemsize : j->batch * j->rec_size;
    size_t sz = (size_t)((bytes + 4095) & ~(uint64_t)4095);
    int n = j->threads < 1 ? 1 : j->threads > 64 ? 64 : j->threads, rc = 0, started = 0;
    j->threads = n;
    j->nbuf = j->nbuf < 1 ? 1 : j->nbuf;
    uint64_t span = j->batch; /* draw: most positions one batch reads */
    for (uint64_t k = 0; j->off && k < j->n_batches; k++) {
        uint64_t p1 = k + 1 < j->n_batches ? j->bstart[k + 1] + 1 : j->n;
        span = p1 - j->bstart[k] > span ? p1 - j->bstart[k] : span;
    }
    for (int t = 0; t < n; t++) {
        w[t].ob = NULL;
        w[t].j = j;
        w[t].t = t;
        w[t].gate = &g;
        w[t].cpu = 0;
        w[t].bufsz = sz;
        w[t].buf = rc ? NULL : aligned_alloc(4096, sz * (size_t)j->nbuf);
        if (j->draw && !rc && !(w[t].ob = malloc(span * sizeof(uint64_t))))
            rc = -1;
        if (!w[t].buf)
            rc = -1;
        else
            memset(w[t].buf, 0, sz * (size_t)j->nbuf);
    }
    while (!rc && started < n) {
        if (pthread_create(&w[started].tid, NULL, run, &w[started]))
            rc = -1;
        else
            started++;
    }
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    g.stop = rc != 0;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    double t0 = clock_s(CLOCK_MONOTONIC);
    *cpu = 0;
    for (int t = 0; t < started; t++) {
        pthread_join(w[t].tid, NULL);
        *cpu += w[t].cpu;
    }
    double el = clock_s(CLOCK_MONOTONIC) - t0;
    for (int t = 0; t < n; t++) {
        free(w[t].buf);
        free(w[t].ob);
    }
    return rc ? -1.0 : el;
}

/* draw: NULL, or the sampler to draw the order from in the timed loop
 * (then order is not read). */
double plain_stack(const uint8_t *base, uint64_t rec_size, const uint64_t *order, uint64_t n,
                   uint32_t batch, int threads, int nbuf, const struct draw *draw, double *cpu)
{
    struct job j = {.draw = draw, .base = base, .rec_size = rec_size, .order = order, .n = n,
                    .batch = batch, .n_batches = (n + batch - 1) / batch, .threads = threads,
                    .nbuf = nbuf};
    return go(&j, cpu);
}

double plain_pack(const uint8_t *base, const uint64_t *off, uint32_t itemsize,
                  const uint64_t *order, uint64_t n, uint32_t batch, uint64_t seq_len,
                  const uint64_t *bstart, const uint64_t *boff, uint64_t n_batches,
                  int threads, int nbuf, const struct draw *draw, double *cpu)
{
    struct job j = {.draw = draw, .base = base, .off = off, .itemsize = itemsize,
                    .order = order, .n = n, .batch = batch, .seq_len = seq_len,
                    .bstart = bstart, .boff = boff, .n_batches = n_batches, .threads = threads,
                    .nbuf = nbuf};
    return go(&j, cpu);
}

/* Batch k alone into dst (batch * row bytes), for the sweep's check that
 * the loader delivered the same bytes. */
void plain_one(const uint8_t *base, uint64_t rec_size, const uint64_t *off, uint32_t itemsize,
               const uint64_t *order, uint64_t n, uint32_t batch, uint64_t seq_len,
               const uint64_t *bstart, const uint64_t *boff, uint64_t k, uint8_t *dst)
{
    struct job j = {.base = base, .rec_size = rec_size, .off = off, .itemsize = itemsize,
                    .order = order, .n = n, .batch = batch, .seq_len = seq_len,
                    .bstart = bstart, .boff = boff};
    if (off)
        pack_batch(&j, k, dst);
    else
        stack_batch(&j, k, dst);
}
