/*
 * loader.c - the gather engine: worker threads, batch ring, collation.
 *
 * Glossary
 *   batch k     the k-th batch of the stream (k = 0, 1, 2...)
 *   slot        one of S buffers of the ring; a free slot takes the next
 *               batch planned; the consumer finds batch k by its number
 *   plan        which records (and, PACK, which parts of them) make batch k
 *   gather      copying the planned bytes from the pool into the slot
 *
 * Invariants
 *   planned batches   = next_plan;  delivered batches = next_out <= next_plan
 *   batches in flight (planned, not yet released) <= S
 *   S grows by one when the consumer holds all S slots and asks for more
 *   (as torch's DataLoader lets a loop keep every batch), up to max_slots
 *   batches are delivered in order k = 0, 1, 2... whatever thread gathered them
 *   resume point of batch k = (records fully consumed, elements of the next
 *   record consumed) after planning k; planning is sequential, so it is exact
 *
 * Why planning is serialized and gathering is not: PACK rows depend on the
 * lengths of every earlier record, so where batch k starts is only known once
 * k-1 is planned. Planning reads lengths only (O(1) per record through the
 * store index) under one lock; the copies, which are the cost, run in
 * parallel outside it. STACK and PAD plan the same way for one code path.
 *
 * Fields: a batch collates the fields the caller chose (sel[]), each into its
 * own region of the slot; a record's chosen fields are read with one lookup
 * of its shard (rec_src.read_fields). Planning looks at the first
 * variable-length field only: PAD and PACK need the other variable-length
 * fields to have as many elements in each record, which the gather checks.
 *
 * Rejected: a thread per batch handing results through a queue (reordering
 * cost, and unbounded memory when the consumer is slow); copying into
 * per-thread buffers and then into the ring (a second copy).
 */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "common/common.h"
#include "load/loader.h"
#include "store/store.h"

enum slot_state { SLOT_FREE = 0, SLOT_FILLING, SLOT_READY, SLOT_LENT };

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
    enum slot_state state;
    uint64_t batch_no;
    int err;
    uint8_t *data;
    uint64_t *ids;
    size_t ids_cap;
    int64_t *lengths;
    int64_t *seg_row, *seg_start, *seg_len, *seg_offset;
    size_t seg_cap;
    uint8_t *segf[CXLP_MAX_FIELDS]; /* PACK: fixed-shape field values per segment */
    struct cxlp_view *views;  /* PAD, PACK: the batch's lookups (lookup_all) */
    size_t views_cap;
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
    uint32_t fidx[CXLP_MAX_FIELDS];  /* sel[k].field, as read_fields takes them */
    uint32_t var0;           /* PAD/PACK: the first variable-length chosen field */

    pthread_mutex_t mu;
    pthread_cond_t cv_free;  /* a slot became free, or stopping */
    pthread_cond_t cv_ready; /* a slot became ready, or the end is known */

    /* planner state, under mu */
    uint64_t next_plan;
    uint64_t *idbuf;
    size_t idbuf_cap, idbuf_n, idbuf_pos;
    int stream_end;          /* index source said n == 0 */
    uint64_t records_done;   /* records fully consumed */
    uint64_t cur_off;        /* PACK: elements of idbuf[idbuf_pos] consumed */
    uint64_t end_batch;      /* first batch number past the end; UINT64_MAX unknown */

    /* consumer state, under mu */
    uint64_t next_out;
    uint32_t lent;
    int stopping, freed;

    uint32_t nthreads, nslots, cap_slots;
    pthread_t *threads;
    struct slot **slots;     /* each slot its own allocation: the array grows */
    uint64_t slot_bytes;
};

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
            return seterr(&l->obj, rc, "index source failed: %s", cxlp_strerror(rc));
        if (n > l->idbuf_cap)
            return seterr(&l->obj, CXLP_EARG, "index source returned %zu ids for a buffer of %zu",
                          n, l->idbuf_cap);
        l->idbuf_n = n;
        l->idbuf_pos = 0;
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
        s->ids[r++] = id;
        l->idbuf_pos++;
    }
    if (r < l->o.batch_size && l->o.drop_last)
        r = 0;
    l->records_done += r;
    *rows = r;
    return 0;
}

static int read_fail(cxlp_loader *l, int rc, uint64_t id)
{
    return seterr(&l->obj, rc, "reading record %llu: %s", (unsigned long long)id,
                  cxlp_strerror(rc));
}

static int record_elems(cxlp_loader *l, uint64_t id, uint64_t *elems)
{
    struct cxlp_view v;
    int rc = read_one(l, id, l->var0, &v);
    if (rc)
        return read_fail(l, rc, id);
    if (v.len % (uint64_t)l->itemsize)
        return seterr(&l->obj, CXLP_ECORRUPT,
                      "record %llu: %llu bytes is not a whole number of %d-byte elements",
                      (unsigned long long)id, (unsigned long long)v.len, l->itemsize);
    *elems = v.len / (uint64_t)l->itemsize;
    return 0;
}

/* PACK: fill batch_size rows of seq_len elements from consecutive records. */
static int plan_pack(cxlp_loader *l, struct slot *s, uint32_t *rows)
{
    const uint64_t L = l->o.seq_len, total = (uint64_t)l->o.batch_size * L;
    uint64_t pos = 0, nseg = 0;
    /* planning state is committed only when the batch is kept (drop_last) */
    uint64_t done0 = l->records_done;
    while (pos < total) {
        uint64_t id, elems = 0;
        int have, rc = peek_id(l, &id, &have);
        if (rc)
            return rc;
        if (!have)
            break;
        if ((rc = record_elems(l, id, &elems)))
            return rc;
        if (l->cur_off > elems)
            return seterr(&l->obj, CXLP_EARG,
                          "first_offset %llu is past the end of record %llu (%llu elements)",
                          (unsigned long long)l->cur_off, (unsigned long long)id,
                          (unsigned long long)elems);
        while (l->cur_off < elems && pos < total) {
            uint64_t row = pos / L, col = pos % L;
            uint64_t take = MIN(elems - l->cur_off, L - col);
            if ((rc = grow_segments(l, s, nseg + 1)))
                return seterr(&l->obj, rc, "out of memory planning batch");
            s->seg_row[nseg] = (int64_t)row;
            s->seg_start[nseg] = (int64_t)col;
            s->seg_len[nseg] = (int64_t)take;
            s->seg_offset[nseg] = (int64_t)l->cur_off;
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

static int gather_stack(cxlp_loader *l, struct slot *s)
{
    const uint64_t rs = l->row_bytes;
    uint8_t *dst = s->data;
    uint32_t i = 0;
    if (l->nsel > 1) {
        struct cxlp_view v[CXLP_MAX_FIELDS];
        for (i = 0; i < s->b.rows; i++) {
            int rc = read_sel(l, s->ids[i], v);
            if (rc)
                return read_fail(l, rc, s->ids[i]);
            for (uint32_t k = 0; k < l->nsel; k++) {
                const struct lfield *f = &l->sel[k];
                if (v[k].len != f->size)
                    return seterr(&l->obj, CXLP_ECORRUPT, "record %llu field %u: %llu bytes, schema says %llu",
                                  (unsigned long long)s->ids[i], f->field,
                                  (unsigned long long)v[k].len, (unsigned long long)f->size);
                memcpy(s->data + f->off + (uint64_t)i * f->size, v[k].data, (size_t)f->size);
            }
        }
        return 0;
    }
    while (i < s->b.rows) {
        struct cxlp_view v;
        int rc = read_one(l, s->ids[i], 0, &v);
        if (rc)
            return read_fail(l, rc, s->ids[i]);
        if (v.len != rs)
            return seterr(&l->obj, CXLP_ECORRUPT, "record %llu: %llu bytes, schema says %llu",
                          (unsigned long long)s->ids[i], (unsigned long long)v.len,
                          (unsigned long long)rs);
        /* merge a run of records that sit back to back in the pool */
        uint32_t j = i + 1;
        const uint8_t *next = (const uint8_t *)v.data + rs;
        while (j < s->b.rows) {
            struct cxlp_view w;
            if (read_one(l, s->ids[j], 0, &w) || w.data != next || w.len != rs)
                break;
            next += rs;
            j++;
        }
        memcpy(dst + (uint64_t)i * rs, v.data, (size_t)((j - i) * rs));
        i = j;
    }
    return 0;
}

/* The chosen fields of one record, checked against what the plan assumed:
 * every variable-length field has `elems` elements (the planned field's
 * count), every fixed-shape field its size. */
static int check_fields(cxlp_loader *l, uint64_t id, const struct cxlp_view *v, uint64_t elems)
{
    for (uint32_t k = 0; k < l->nsel; k++) {
        const struct lfield *f = &l->sel[k];
        if (f->var ? v[k].len / (uint64_t)f->isz != elems || v[k].len % (uint64_t)f->isz
                   : v[k].len != f->size)
            return seterr(&l->obj, f->var ? CXLP_EARG : CXLP_ECORRUPT,
                          "record %llu: field %u has %llu bytes, %s %llu%s", (unsigned long long)id,
                          f->field, (unsigned long long)v[k].len,
                          f->var ? "the padded/packed fields have" : "the schema says",
                          (unsigned long long)(f->var ? elems : f->size),
                          f->var ? " elements: PAD and PACK need equal lengths" : "");
    }
    return 0;
}

/* The chosen fields of records ids[0..n) into s->views (n x nsel), all
 * looked up before any copy: on a random order each lookup (index block and
 * the first bytes of the record) misses the cache, and done back to back
 * the misses overlap instead of each waiting behind the previous record's
 * copy; the small fixed-shape values are prefetched for the copy pass. */
static int lookup_all(cxlp_loader *l, struct slot *s, const uint64_t *ids, uint64_t n)
{
    uint64_t need = n * l->nsel;
    if (need > s->views_cap) {
        struct cxlp_view *v = realloc(s->views, need * sizeof *v);
        if (!v)
            return seterr(&l->obj, -ENOMEM, "out of memory gathering a batch");
        s->views = v;
        s->views_cap = need;
    }
    for (uint64_t i = 0; i < n; i++) {
        struct cxlp_view *v = &s->views[i * l->nsel];
        int rc = read_sel(l, ids[i], v);
        if (rc)
            return read_fail(l, rc, ids[i]);
        for (uint32_t k = 0; k < l->nsel; k++)
            if (!l->sel[k].var)
                __builtin_prefetch(v[k].data);
    }
    return 0;
}

static int gather_pad(cxlp_loader *l, struct slot *s)
{
    const uint64_t L = l->o.seq_len;
    const struct lfield *f0 = &l->sel[l->var0];
    int rc = lookup_all(l, s, s->ids, s->b.rows);
    if (rc)
        return rc;
    for (uint32_t i = 0; i < s->b.rows; i++) {
        const struct cxlp_view *v = &s->views[(uint64_t)i * l->nsel];
        uint64_t elems = v[l->var0].len / (uint64_t)f0->isz;
        if (l->nsel > 1 && (rc = check_fields(l, s->ids[i], v, elems)))
            return rc;
        uint64_t n = MIN(elems, L);
        for (uint32_t k = 0; k < l->nsel; k++) {
            const struct lfield *f = &l->sel[k];
            uint8_t *row = s->data + f->off + (uint64_t)i * f->row_bytes;
            if (!f->var) {
                memcpy(row, v[k].data, (size_t)f->size);
                continue;
            }
            memcpy(row, v[k].data, (size_t)(n * (uint64_t)f->isz));
            fill_elems(row + n * (uint64_t)f->isz, L - n, f->dtype, l->o.pad_value);
        }
        s->lengths[i] = (int64_t)n;
    }
    return 0;
}

static int gather_pack(cxlp_loader *l, struct slot *s)
{
    const struct lfield *f0 = &l->sel[l->var0];
    int rc = lookup_all(l, s, s->ids, s->b.n_segments);
    if (rc)
        return rc;
    for (uint64_t g = 0; g < s->b.n_segments; g++) {
        const struct cxlp_view *v = &s->views[g * l->nsel];
        if (l->nsel > 1 && (rc = check_fields(l, s->ids[g], v, v[l->var0].len / (uint64_t)f0->isz)))
            return rc;
        for (uint32_t k = 0; k < l->nsel; k++) {
            const struct lfield *f = &l->sel[k];
            if (!f->var) {
                memcpy(s->segf[k] + g * f->size, v[k].data, (size_t)f->size);
                continue;
            }
            uint64_t isz = (uint64_t)f->isz;
            uint64_t off = (uint64_t)s->seg_offset[g] * isz, len = (uint64_t)s->seg_len[g] * isz;
            if (!range_ok(off, len, v[k].len))
                return seterr(&l->obj, CXLP_ECORRUPT, "record %llu changed length under the loader",
                              (unsigned long long)s->ids[g]);
            memcpy(s->data + f->off + (uint64_t)s->seg_row[g] * f->row_bytes +
                   (uint64_t)s->seg_start[g] * isz, (const uint8_t *)v[k].data + off, (size_t)len);
        }
    }
    uint32_t last = s->b.rows - 1;
    for (uint32_t k = 0; k < l->nsel && s->b.rows; k++) {
        const struct lfield *f = &l->sel[k];
        if (f->var && (uint64_t)s->lengths[last] < l->o.seq_len)
            fill_elems(s->data + f->off + last * f->row_bytes + (uint64_t)s->lengths[last] * (uint64_t)f->isz,
                       l->o.seq_len - (uint64_t)s->lengths[last], f->dtype, l->o.pad_value);
    }
    return 0;
}

/* ---------------------------------------------------------------- threads  */

static void *worker(void *arg)
{
    cxlp_loader *l = arg;
    if (l->o.numa_node >= 0)
        numa_run_on_node(l->o.numa_node);
    pthread_mutex_lock(&l->mu);
    while (!l->stopping) {
        uint64_t k = l->next_plan;
        if (k >= l->end_batch)
            break;
        struct slot *s = NULL;
        for (uint32_t i = 0; i < l->nslots && !s; i++)
            if (l->slots[i]->state == SLOT_FREE)
                s = l->slots[i];
        if (!s) {
            pthread_cond_wait(&l->cv_free, &l->mu);
            continue;
        }
        uint32_t rows = 0;
        int rc = l->o.collate == CXLP_COLLATE_PACK ? plan_pack(l, s, &rows) : plan_rows(l, s, &rows);
        l->next_plan++;
        s->batch_no = k;
        s->err = rc;
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
            l->end_batch = rc ? k + 1 : k;
            s->state = rc ? SLOT_READY : SLOT_FREE;
            pthread_cond_broadcast(&l->cv_ready);
            pthread_cond_broadcast(&l->cv_free);
            continue;
        }
        s->state = SLOT_FILLING;
        pthread_mutex_unlock(&l->mu);

        switch (l->o.collate) {
        case CXLP_COLLATE_STACK: rc = gather_stack(l, s); break;
        case CXLP_COLLATE_PAD: rc = gather_pad(l, s); break;
        default: rc = gather_pack(l, s); break;
        }

        pthread_mutex_lock(&l->mu);
        s->err = rc;
        s->state = SLOT_READY;
        /* The one consumer waits for batch next_out only: waking it for any
         * other batch costs a context switch per batch for nothing, which on
         * a machine with as many CPUs as gather threads takes CPU time from
         * the gather itself. */
        if (k == l->next_out)
            pthread_cond_signal(&l->cv_ready);
    }
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

static void slot_free(cxlp_loader *l, struct slot *s)
{
    if (!s)
        return;
    free(s->ids);
    free(s->lengths);
    free(s->seg_row);
    free(s->seg_start);
    free(s->seg_len);
    free(s->seg_offset);
    for (uint32_t k = 0; k < CXLP_MAX_FIELDS; k++)
        free(s->segf[k]);
    free(s->views);
    if (s->data)
        munmap(s->data, (size_t)l->slot_bytes);
    free(s);
}

/* Adds one slot to the ring (under mu, or before the threads start). Its
 * data is an anonymous mapping of its own: page aligned, so it can be
 * registered with CUDA (cudaHostRegister) or bound to a node. */
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
    s->data = mmap(NULL, (size_t)l->slot_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (s->data == MAP_FAILED) {
        int e = errno;
        s->data = NULL;
        slot_free(l, s);
        return -e;
    }
    if (l->o.bind_slots) {
        /* before the first touch, so every page is allocated on the node */
        unsigned long mask[1024 / (8 * sizeof(unsigned long))] = {0};
        int node = l->o.slot_node;
        mask[node / (8 * (int)sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
        if (mbind(s->data, (size_t)l->slot_bytes, MPOL_BIND, mask, 1024, 0) < 0) {
            int e = errno;
            slot_free(l, s);
            return -e;
        }
    }
    s->b.data = s->data;
    s->b.row_bytes = l->row_bytes;
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
        s->ids_cap = rows;
        bad = !s->ids;
    }
    if (!bad && l->o.collate != CXLP_COLLATE_STACK)
        bad = !(s->lengths = malloc(rows * sizeof(int64_t)));
    if (bad) {
        slot_free(l, s);
        return -ENOMEM;
    }
    l->slots[l->nslots++] = s;
    return 0;
}

static void destroy(cxlp_loader *l)
{
    for (uint32_t i = 0; l->slots && i < l->nslots; i++)
        slot_free(l, l->slots[i]);
    free(l->slots);
    free(l->idbuf);
    free(l->threads);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv_free);
    pthread_cond_destroy(&l->cv_ready);
    l->obj.magic = 0;
    free(l);
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
    if (o->slots > 4096)
        return seterr(NULL, CXLP_EARG, "loader: slots %u is more than 4096", o->slots);
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
    if (o->bind_slots && (o->slot_node < 0 || o->slot_node >= 1024))
        return seterr(NULL, CXLP_EARG, "loader: slot_node %d is not a node number", o->slot_node);
    if (o->first_offset && o->collate != CXLP_COLLATE_PACK)
        return seterr(NULL, CXLP_EARG, "loader: first_offset applies to PACK only");
    return 0;
}

int loader_create_src(const struct rec_src *src, const struct cxlp_loader_opts *opts,
                      cxlp_index_fn index_fn, void *index_ctx, cxlp_loader **out)
{
    if (!src || !opts || !index_fn || !out || (src->read_fields && !src->schema))
        return seterr(NULL, CXLP_EARG, "loader: NULL argument");
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
    l->o = *opts;
    l->index_fn = index_fn;
    l->index_ctx = index_ctx;
    l->nthreads = opts->threads ? opts->threads : 1;
    l->nslots = opts->slots ? opts->slots : 2 * l->nthreads + 2;
    if (opts->max_slots && opts->max_slots < l->nslots)
        l->nslots = opts->max_slots;
    l->end_batch = UINT64_MAX;
    l->cur_off = opts->first_offset;
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv_free, NULL);
    pthread_cond_init(&l->cv_ready, NULL);

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
    l->idbuf_cap = MAX(rows, 1024);
    l->idbuf = malloc(l->idbuf_cap * sizeof(uint64_t));
    l->threads = calloc(l->nthreads, sizeof *l->threads);
    if (!l->idbuf || !l->threads)
        goto nomem;
    uint32_t want = l->nslots;
    l->nslots = 0;
    for (uint32_t i = 0; i < want; i++) {
        if ((rc = slot_add(l))) {
            if (opts->bind_slots)
                rc = seterr(NULL, rc, "loader: %u slots of %llu bytes bound to node %d: %s",
                            want, (unsigned long long)l->slot_bytes, opts->slot_node,
                            strerror(-rc));
            else
                rc = seterr(NULL, rc, "loader: %u slots of %llu bytes: %s", want,
                            (unsigned long long)l->slot_bytes, strerror(-rc));
            goto fail;
        }
    }
    for (uint32_t i = 0; i < l->nthreads; i++) {
        rc = pthread_create(&l->threads[i], NULL, worker, l);
        if (rc == 0) /* a name users can find in top -H, py-spy and /proc */
            pthread_setname_np(l->threads[i], "cxlp-gather");
        if (rc) {
            pthread_mutex_lock(&l->mu);
            l->stopping = 1;
            pthread_cond_broadcast(&l->cv_free);
            pthread_mutex_unlock(&l->mu);
            for (uint32_t j = 0; j < i; j++)
                pthread_join(l->threads[j], NULL);
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

int cxlp_loader_create(cxlp_store *s, const struct cxlp_loader_opts *opts,
                       cxlp_index_fn index_fn, void *index_ctx, cxlp_loader **out)
{
    if (!s)
        return seterr(NULL, CXLP_EARG, "loader: store is NULL");
    struct rec_src src = {
        .ctx = s,
        .read_fields = store_read_fields_fn,
        .schema = cxlp_store_schema(s),
    };
    return loader_create_src(&src, opts, index_fn, index_ctx, out);
}

int cxlp_loader_next(cxlp_loader *l, struct cxlp_batch **out)
{
    pthread_mutex_lock(&l->mu);
    for (;;) {
        uint64_t k = l->next_out;
        if (k >= l->end_batch) {
            pthread_mutex_unlock(&l->mu);
            *out = NULL;
            return 0;
        }
        struct slot *s = NULL;
        int any_free = 0;
        for (uint32_t i = 0; i < l->nslots; i++) {
            struct slot *t = l->slots[i];
            any_free |= t->state == SLOT_FREE;
            if ((t->state == SLOT_READY || t->state == SLOT_FILLING) && t->batch_no == k)
                s = t;
        }
        if (s && s->state == SLOT_READY) {
            l->next_out++;
            if (s->err) {
                int rc = s->err;
                s->state = SLOT_FREE;
                pthread_cond_broadcast(&l->cv_free);
                pthread_mutex_unlock(&l->mu);
                return rc; /* the message is on the loader handle */
            }
            s->state = SLOT_LENT;
            l->lent++;
            pthread_mutex_unlock(&l->mu);
            *out = &s->b;
            return 0;
        }
        if (!s && !any_free && k >= l->next_plan) {
            /* batch k is not planned and every slot is lent to the consumer */
            if (l->o.max_slots && l->nslots >= l->o.max_slots) {
                pthread_mutex_unlock(&l->mu);
                return seterr(&l->obj, CXLP_EBUSY,
                              "loader: all %u ring slots are held by unreleased batches; "
                              "release batches or raise max_slots", l->nslots);
            }
            int rc = slot_add(l);
            if (rc) {
                pthread_mutex_unlock(&l->mu);
                return seterr(&l->obj, rc, "loader: growing the ring past %u slots: %s",
                              l->nslots, strerror(-rc));
            }
            pthread_cond_broadcast(&l->cv_free);
        }
        pthread_cond_wait(&l->cv_ready, &l->mu);
    }
}

void cxlp_loader_release(cxlp_loader *l, struct cxlp_batch *b)
{
    if (!l || !b)
        return;
    struct slot *s = (struct slot *)b;
    pthread_mutex_lock(&l->mu);
    CXLP_ASSERT(s->state == SLOT_LENT);
    s->state = SLOT_FREE;
    l->lent--;
    int last = l->freed && l->lent == 0;
    pthread_cond_signal(&l->cv_free); /* one slot: one worker can use it */
    pthread_mutex_unlock(&l->mu);
    if (last)
        destroy(l);
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

void cxlp_loader_free(cxlp_loader *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stopping = 1;
    pthread_cond_broadcast(&l->cv_free);
    pthread_cond_broadcast(&l->cv_ready);
    pthread_mutex_unlock(&l->mu);
    for (uint32_t i = 0; i < l->nthreads; i++)
        pthread_join(l->threads[i], NULL);
    pthread_mutex_lock(&l->mu);
    l->freed = 1;
    int now = l->lent == 0;
    pthread_mutex_unlock(&l->mu);
    if (now)
        destroy(l);
}
