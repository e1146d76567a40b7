/*
 * _core_loader.c - Loader: the C gather engine over an order of sample ids;
 * Batch: one ring slot lent to Python. The engine's threads read the order
 * buffer directly (no GIL, no per-sample Python), or, when the order is a
 * Sampler, call cxlp_sampler_next themselves (no id exists in Python at
 * all); next() releases the GIL while it waits. A slot goes back to the
 * ring when its Batch and every Array/tensor viewing it are gone.
 */
#include <string.h>
#include <time.h>

#include "_core.h"

#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* index source over the order buffer: runs on engine threads without the
 * GIL; it only reads memory the Loader pins (Py_buffer) */
static int order_fn(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    LoaderObject *l = ctx;
    uint64_t total = (uint64_t)(l->order.len / 8);
    uint64_t k = MIN_U64(max, total - l->pos);
    memcpy(out, (const uint64_t *)l->order.buf + l->pos, (size_t)k * 8);
    l->pos += k;
    *n = (size_t)k;
    return 0;
}

/* index source over a Sampler (ctx): the engine calls it under its
 * planning lock, one thread at a time, which is the sampler's threading
 * rule; Python keeps off the handle while busy is set */
static int sampler_fn(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    *n = cxlp_sampler_next(((SamplerObject *)ctx)->s, out, max);
    return 0;
}

/* Lends Sampler obj to an engine's threads (busy until given back); -1 with
 * an exception when it is not a free Sampler of ids below n. */
static int sampler_lend(PyObject *obj, uint64_t n, const char *arg)
{
    if (!PyObject_TypeCheck(obj, &SamplerType)) {
        PyErr_Format(PyExc_TypeError, "%s must be a Sampler", arg);
        return -1;
    }
    SamplerObject *so = (SamplerObject *)obj;
    if (!so->s || so->busy) {
        PyErr_Format(PyExc_ValueError, so->s ? "%s: sampler is already used by a Loader"
                                              : "%s: sampler not initialized", arg);
        return -1;
    }
    if (so->id_bound > n) {
        PyErr_Format(PyExc_IndexError, "%s: sampler draws ids below %llu but the dataset has "
                     "%llu records", arg, (unsigned long long)so->id_bound,
                     (unsigned long long)n);
        return -1;
    }
    so->busy++;
    Py_INCREF(obj);
    return 0;
}

static void sampler_return(PyObject **obj)
{
    if (*obj) {
        ((SamplerObject *)*obj)->busy--;
        Py_CLEAR(*obj);
    }
}

/* tier_away: None, or bytes of one bit per shard of the store's dataset
 * (cxlp_loader_opts.tier_away); the bytes object outlives the create call
 * (the engine copies them). */
static int away_arg(StoreObject *store, PyObject *away, const uint8_t **bits)
{
    *bits = NULL;
    if (away == Py_None)
        return 0;
    uint64_t n = 0;
    if (!store->s || cxlp_store_shards(store->s, &n, NULL, NULL))
        n = 0;
    if (!PyBytes_Check(away) || (uint64_t)PyBytes_Size(away) != n / 8 + (n % 8 != 0)) {
        PyErr_Format(PyExc_ValueError, "tier_away: bytes of one bit per shard (%llu bytes for "
                     "%llu shards)", (unsigned long long)(n / 8 + (n % 8 != 0)),
                     (unsigned long long)n);
        return -1;
    }
    *bits = (const uint8_t *)PyBytes_AsString(away);
    return 0;
}

static int loader_init(LoaderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"store", "order", "batch_size", "threads", "slots", "collate",
                             "seq_len", "pad_value", "drop_last", "numa_node", "first_offset",
                             "bind_slots", "slot_node", "tensor", "segments", "prefetch",
                             "tier_policy", "tier_budget", "tier_horizon", "tier_target",
                             "tier_stagers", "fields", "slot_nodes", "next_order",
                             "tier_read_in_part", "tier_sparse", "tier_away", NULL};
    StoreObject *store;
    PyObject *order, *tensor = Py_None, *fields = Py_None, *slot_nodes = Py_None,
             *next_order = Py_None, *away = Py_None;
    unsigned int batch_size, threads = 0, slots = 0, prefetch = 0;
    int collate = CXLP_COLLATE_STACK, drop_last = 0, numa_node = -1, bind_slots = 0,
        slot_node = 0, segments = 0, tier_policy = 0, tier_target = -1, read_in_part = 0,
        sparse = 0;
    unsigned long long seq_len = 0, first_offset = 0, tier_budget = 0;
    unsigned int tier_horizon = 0, tier_stagers = 0;
    long long pad_value = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OI|$IIiKLpiKiiOpIiKIiIOOOppO", kwlist, &StoreType,
                                     &store, &order, &batch_size, &threads, &slots, &collate,
                                     &seq_len, &pad_value, &drop_last, &numa_node, &first_offset,
                                     &bind_slots, &slot_node, &tensor, &segments, &prefetch,
                                     &tier_policy, &tier_budget, &tier_horizon, &tier_target,
                                     &tier_stagers, &fields, &slot_nodes, &next_order,
                                     &read_in_part, &sparse, &away))
        return -1;
    const uint8_t *away_bits = NULL;
    if (away_arg(store, away, &away_bits) < 0)
        return -1;
    uint64_t node_mask[16] = {0};
    if (slot_nodes != Py_None) {
        PyObject *seq = PySequence_Fast(slot_nodes, "slot_nodes must be a sequence of node numbers");
        if (!seq)
            return -1;
        for (Py_ssize_t i = 0; i < core_fast_size(seq); i++) {
            long n = PyLong_AsLong(core_fast_item(seq, i));
            if (n == -1 && PyErr_Occurred()) {
                Py_DECREF(seq);
                return -1;
            }
            if (n < 0 || n >= 1024) {
                Py_DECREF(seq);
                PyErr_Format(PyExc_ValueError, "slot_nodes: node %ld is not 0..1023", n);
                return -1;
            }
            node_mask[n / 64] |= UINT64_C(1) << (n % 64);
        }
        Py_DECREF(seq);
    }
    if (tensor != Py_None && !PyCallable_Check(tensor)) {
        PyErr_SetString(PyExc_TypeError, "tensor must be a callable (DLPack capsule -> tensor) "
                        "or None");
        return -1;
    }
    if (self->l || self->sampler || self->next || self->order.obj) {
        PyErr_SetString(PyExc_RuntimeError, "Loader already initialized");
        return -1;
    }
    if (!store->s || store->closed) {
        PyErr_SetString(PyExc_ValueError, "dataset is closed");
        return -1;
    }
    uint64_t n = cxlp_store_count(store->s);
    const struct cxlp_schema *sc = cxlp_store_schema(store->s);
    if (fields == Py_None) { /* every field; one field gives one tensor, as before */
        self->nfields = sc->n_fields;
        for (uint32_t k = 0; k < sc->n_fields; k++)
            self->fields[k] = k;
        self->many = sc->n_fields > 1;
    } else {
        PyObject *seq = PySequence_Fast(fields, "fields must be a sequence of field numbers");
        if (!seq)
            return -1;
        Py_ssize_t m = core_fast_size(seq);
        if (m < 1 || m > CXLP_MAX_FIELDS) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "fields: 1..%d field numbers", CXLP_MAX_FIELDS);
            return -1;
        }
        for (Py_ssize_t k = 0; k < m; k++) {
            long f = PyLong_AsLong(core_fast_item(seq, k));
            if (f < 0 || (uint32_t)f >= sc->n_fields) {
                Py_DECREF(seq);
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_IndexError, "field %ld of %u", f, sc->n_fields);
                return -1;
            }
            self->fields[k] = (uint32_t)f;
        }
        Py_DECREF(seq);
        self->nfields = (uint32_t)m;
        self->many = 1;
    }
    for (uint32_t k = 0; k < self->nfields; k++) {
        const struct cxlp_field *f = &sc->fields[self->fields[k]];
        if (!(self->keys[k] = PyUnicode_InternFromString(f->name)))
            return -1;
        if (collate == CXLP_COLLATE_PACK && !CXLP_FIELD_VAR(f))
            self->seg_fields |= 1u << k;
    }
    if (next_order != Py_None) {
        if (next_order == order) {
            PyErr_SetString(PyExc_ValueError, "next_order: the same Sampler as order");
            return -1;
        }
        if (sampler_lend(next_order, n, "next_order") < 0)
            return -1;
        self->next = next_order;
    }
    if (PyObject_TypeCheck(order, &SamplerType)) {
        if (sampler_lend(order, n, "order") < 0)
            return -1;
        self->sampler = order;
    } else {
        if (PyObject_GetBuffer(order, &self->order, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            return -1;
        const char *f = self->order.format ? self->order.format : "B";
        if (*f == '<' || *f == '=' || *f == '@')
            f++;
        if (self->order.itemsize != 8 || !strchr("qQlL", *f)) {
            PyBuffer_Release(&self->order);
            PyErr_Format(PyExc_TypeError, "order must be a Sampler or a contiguous int64 or "
                         "uint64 buffer, got format '%s' itemsize %zd",
                         self->order.format ? self->order.format : "B", self->order.itemsize);
            return -1;
        }
        /* ids out of range fail in the engine with the record named; checking
         * here once is cheaper than a surprise mid-epoch */
        uint64_t cnt = (uint64_t)(self->order.len / 8);
        const uint64_t *ids = self->order.buf;
        for (uint64_t i = 0; i < cnt; i++)
            if (ids[i] >= n) {
                PyBuffer_Release(&self->order);
                PyErr_Format(PyExc_IndexError, "order[%llu] = %lld is outside the dataset's "
                             "%llu records", (unsigned long long)i, (long long)ids[i],
                             (unsigned long long)n);
                return -1;
            }
    }
    self->store = Py_NewRef((PyObject *)store);
    self->collate = collate;
    self->seq_len = seq_len;
    self->tensor = tensor == Py_None ? NULL : Py_NewRef(tensor);
    self->segments = segments;
    self->resume_offset = first_offset; /* where the stream stands before any batch */
    struct cxlp_loader_opts o = {.batch_size = batch_size, .threads = threads, .slots = slots,
                                 .collate = collate, .seq_len = seq_len, .pad_value = pad_value,
                                 .drop_last = drop_last, .numa_node = numa_node,
                                 .first_offset = first_offset, .bind_slots = bind_slots,
                                 .slot_node = slot_node, .prefetch = prefetch,
                                 .tier_policy = tier_policy, .tier_budget = tier_budget,
                                 .tier_horizon = tier_horizon, .tier_target = tier_target,
                                 .tier_stagers = tier_stagers, .n_fields = self->nfields,
                                 .tier_next_fn = self->next ? sampler_fn : NULL,
                                 .tier_next_ctx = self->next, .tier_read_in_part = read_in_part,
                                 .tier_sparse = sparse, .tier_away = away_bits};
    memcpy(o.fields, self->fields, sizeof o.fields);
    memcpy(o.slot_nodes, node_mask, sizeof o.slot_nodes);
    int rc;
    Py_BEGIN_ALLOW_THREADS /* a placement policy copies before the first batch */
    rc = cxlp_loader_create(store->s, &o, self->sampler ? sampler_fn : order_fn,
                            self->sampler ? (void *)self->sampler : (void *)self, &self->l);
    Py_END_ALLOW_THREADS
    if (rc) {
        core_raise(rc, NULL);
        return -1;
    }
    return 0;
}

static void loader_dealloc(LoaderObject *self)
{
    if (self->l) {
        Py_BEGIN_ALLOW_THREADS
        cxlp_loader_free(self->l);
        Py_END_ALLOW_THREADS
    }
    if (self->order.obj)
        PyBuffer_Release(&self->order);
    sampler_return(&self->sampler);
    sampler_return(&self->next);
    for (uint32_t i = 0; i < self->n_tmpl; i++)
        for (int f = 0; f < N_TMPL; f++)
            dl_tmpl_free(self->tmpl[i][f]);
    PyMem_Free(self->tmpl);
    for (uint32_t k = 0; k < CXLP_MAX_FIELDS; k++)
        Py_CLEAR(self->keys[k]);
    Py_XDECREF(self->tensor);
    Py_XDECREF(self->store);
    core_free((PyObject *)self);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The next batch as a Batch object, NULL with no exception at the end. A
 * batch that is ready is taken holding the GIL (no release and retake of
 * it, no clock reads: 0.05-0.1 us of Python's 1.5-2.4 us per small batch,
 * docs/benchmarks/history.md); otherwise the time spent waiting for the engine,
 * with the GIL released, goes to stall_ns. */
static BatchObject *next_batch(LoaderObject *self)
{
    if (!self->l) {
        PyErr_SetString(PyExc_ValueError, "loader not initialized");
        return NULL;
    }
    struct cxlp_batch *b = NULL;
    int rc;
    if (cxlp_loader_ready(self->l)) {
        rc = cxlp_loader_next(self->l, &b); /* returns at once: keep the GIL */
    } else {
        uint64_t t0, t1;
        Py_BEGIN_ALLOW_THREADS
        t0 = now_ns();
        rc = cxlp_loader_next(self->l, &b);
        t1 = now_ns();
        Py_END_ALLOW_THREADS
        self->stall_ns += t1 - t0;
    }
    if (rc)
        return (BatchObject *)core_raise(rc, self->l);
    if (!b)
        return NULL;
    BatchObject *bo = PyObject_New(BatchObject, &BatchType);
    if (!bo) {
        cxlp_loader_release(self->l, b);
        return NULL;
    }
    bo->loader = Py_NewRef((PyObject *)self);
    bo->b = b;
    return bo;
}

static PyObject *loader_next(LoaderObject *self)
{
    return (PyObject *)next_batch(self); /* NULL, no exception: StopIteration */
}

/* Shape and dtype of collated field k of a batch; returns ndim.
 * Variable-length (PAD, PACK): [rows, seq_len]; fixed-shape: [rows, *shape]
 * (PACK: [n_segments, *shape]); a shape too deep for an Array: its bytes. */
static int field_shape(const BatchObject *self, uint32_t k, int64_t *shape, int *dtype)
{
    const LoaderObject *l = (const LoaderObject *)self->loader;
    const struct cxlp_schema *sc = cxlp_store_schema(((StoreObject *)l->store)->s);
    const struct cxlp_batch *b = self->b;
    const struct cxlp_field *f = &sc->fields[l->fields[k]];
    shape[0] = b->rows;
    if (CXLP_FIELD_VAR(f)) {
        shape[1] = (int64_t)l->seq_len;
        *dtype = f->dtype;
        return 2;
    }
    if (l->collate == CXLP_COLLATE_PACK)
        shape[0] = (int64_t)b->n_segments;
    if (f->ndim < ARRAY_MAX_DIMS) {
        for (int d = 0; d < f->ndim; d++)
            shape[d + 1] = (int64_t)f->shape[d];
        *dtype = f->dtype;
        return f->ndim + 1;
    }
    shape[1] = (int64_t)b->field_row_bytes[k];
    *dtype = CXLP_DT_U8;
    return 2;
}

/* Keys of take()'s dicts beside the fields' names, made once. */
static PyObject *meta_key[F_FIELD];

static int make_keys(void)
{
    static const char *names[F_FIELD] = {"lengths", "seg_row", "seg_start", "seg_len",
                                         "seg_offset", "seg_id"};
    for (int f = 0; f < F_FIELD; f++)
        if (!meta_key[f] && !(meta_key[f] = PyUnicode_InternFromString(names[f])))
            return -1;
    return 0;
}

/* The template of f (F_LENGTHS.., or F_FIELD + k for collated field k) for
 * the batch's slot, made on first use. */
static dl_tmpl *slot_tmpl(LoaderObject *self, const BatchObject *bo, int f)
{
    uint32_t slot = bo->b->slot;
    if (slot >= self->n_tmpl) {
        uint32_t n = MAX(slot + 1, 2 * self->n_tmpl);
        dl_tmpl *(*t)[N_TMPL] = PyMem_Realloc(self->tmpl, n * sizeof *t);
        if (!t) {
            PyErr_NoMemory();
            return NULL;
        }
        memset(t + self->n_tmpl, 0, (n - self->n_tmpl) * sizeof *t);
        self->tmpl = t;
        self->n_tmpl = n;
    }
    dl_tmpl **p = &self->tmpl[slot][f];
    if (!*p) {
        int64_t shape[ARRAY_MAX_DIMS];
        int dtype = CXLP_DT_I64, ndim = 1;
        shape[0] = 0;
        if (f >= F_FIELD)
            ndim = field_shape(bo, (uint32_t)(f - F_FIELD), shape, &dtype);
        *p = dl_tmpl_new(dtype, ndim, shape);
    }
    return *p;
}

/* Field f of the batch as a tensor (or a capsule without a converter). */
static PyObject *field(LoaderObject *self, BatchObject *bo, int f, const void *data, int64_t n)
{
    dl_tmpl *t = slot_tmpl(self, bo, f);
    if (!t)
        return NULL;
    PyObject *cap = dl_tmpl_capsule(t, (PyObject *)bo, (void *)data, n);
    if (!cap || !self->tensor)
        return cap;
    PyObject *out = PyObject_CallFunctionObjArgs(self->tensor, cap, NULL);
    Py_DECREF(cap);
    return out;
}

/* The fast path's one call per batch: the next batch as the tensor (STACK
 * of one field) or dict of tensors by field name (several fields; PAD and
 * PACK add lengths) the loop yields, or None at the end. Each tensor views
 * the ring slot (its DLPack owner is the Batch, so the slot returns to the
 * ring when the tensors are freed) and is made from the slot's cached
 * descriptor by one call of the converter. PACK adds the document
 * boundaries only when the Loader was made with segments=True: five
 * tensors a batch that most loops never read. resume_records and
 * resume_offset then say where the stream stands. */
static PyObject *loader_take(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    BatchObject *bo = next_batch(self);
    if (!bo) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    const struct cxlp_batch *b = bo->b;
    PyObject *out = NULL, *v = NULL;
    self->resume_records = b->resume_records;
    self->resume_offset = b->resume_offset;
    if (self->collate == CXLP_COLLATE_STACK && !self->many) {
        out = field(self, bo, F_FIELD, b->field_data[0], b->rows);
        goto done;
    }
    if (make_keys() < 0 || !(out = PyDict_New()))
        goto fail;
    for (uint32_t k = 0; k < self->nfields; k++) {
        /* PACK: a fixed-shape field has one value per segment */
        int64_t n = self->seg_fields >> k & 1 ? (int64_t)b->n_segments : b->rows;
        CORE_XSETREF(v, field(self, bo, F_FIELD + (int)k, b->field_data[k], n));
        if (!v || PyDict_SetItem(out, self->keys[k], v) < 0)
            goto fail;
    }
    if (self->collate == CXLP_COLLATE_STACK)
        goto ok;
    CORE_SETREF(v, field(self, bo, F_LENGTHS, b->lengths, b->rows));
    if (!v || PyDict_SetItem(out, meta_key[F_LENGTHS], v) < 0)
        goto fail;
    if (self->collate == CXLP_COLLATE_PACK && self->segments) {
        const void *cols[] = {b->seg_row, b->seg_start, b->seg_len, b->seg_offset, b->ids};
        for (int f = F_SEG_ROW; f <= F_SEG_ID; f++) {
            CORE_SETREF(v, field(self, bo, f, cols[f - F_SEG_ROW], (int64_t)b->n_segments));
            if (!v || PyDict_SetItem(out, meta_key[f], v) < 0)
                goto fail;
        }
    }
ok:
    Py_CLEAR(v);
    goto done;
fail:
    Py_XDECREF(v);
    Py_CLEAR(out);
done:
    Py_DECREF(bo);
    return out;
}

/* [(address, bytes)] of ring slots first, first+1, ...: what pin_memory
 * registers with CUDA. */
static PyObject *loader_slots(LoaderObject *self, PyObject *args)
{
    unsigned int first = 0;
    if (!PyArg_ParseTuple(args, "|I", &first))
        return NULL;
    if (!self->l) {
        PyErr_SetString(PyExc_ValueError, "loader not initialized");
        return NULL;
    }
    uint32_t n = cxlp_loader_slots(self->l, 0, NULL, NULL, 0);
    uint32_t k = first < n ? n - first : 0;
    void **addr = PyMem_Malloc((k ? k : 1) * sizeof *addr);
    uint64_t *bytes = PyMem_Malloc((k ? k : 1) * sizeof *bytes);
    PyObject *list = NULL;
    if (!addr || !bytes) {
        PyErr_NoMemory();
        goto out;
    }
    /* the ring may have grown since: list what this call saw */
    if (k)
        cxlp_loader_slots(self->l, first, addr, bytes, k);
    list = PyList_New(k);
    for (uint32_t i = 0; list && i < k; i++) {
        PyObject *t = Py_BuildValue("(KK)", (unsigned long long)(uintptr_t)addr[i],
                                    (unsigned long long)bytes[i]);
        if (!t)
            Py_CLEAR(list);
        else
            PyList_SetItem(list, i, t);
    }
out:
    PyMem_Free(addr);
    PyMem_Free(bytes);
    return list;
}

static PyObject *loader_get_n_slots(LoaderObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLong(self->l ? cxlp_loader_slots(self->l, 0, NULL, NULL, 0) : 0);
}

static PyObject *loader_get_stall_ns(LoaderObject *self, void *c)
{
    (void)c;
    return PyLong_FromUnsignedLongLong(self->stall_ns);
}

/* A staging engine's counters as a dict. */
static PyObject *stats_dict(const struct cxlp_loader_stats *st)
{
    return Py_BuildValue("{s:s,s:i,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:I,s:O,"
                         "s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:O,s:K,s:K}", "policy",
                         cxlp_policy_name(st->policy), "tier", st->tier, "budget",
                         (unsigned long long)st->budget, "batches",
                         (unsigned long long)st->batches, "records",
                         (unsigned long long)st->records, "hits", (unsigned long long)st->hits,
                         "misses", (unsigned long long)st->misses, "stage_stall_ns",
                         (unsigned long long)st->stall_ns, "prefetched",
                         (unsigned long long)st->prefetched, "fetched",
                         (unsigned long long)st->fetched, "bytes_staged",
                         (unsigned long long)st->bytes_staged, "evictions",
                         (unsigned long long)st->evictions, "bytes_evicted",
                         (unsigned long long)st->bytes_evicted, "placed",
                         (unsigned long long)st->placed, "private_reads",
                         (unsigned long long)st->private_reads, "partial_reads",
                         (unsigned long long)st->partial_reads, "partial_bytes",
                         (unsigned long long)st->partial_bytes, "stagers", st->stagers,
                         "read_in_part", st->read_in_part ? Py_True : Py_False,
                         "unit_records", (unsigned long long)st->unit_records, "unit_bytes",
                         (unsigned long long)st->unit_bytes, "kept_bytes",
                         (unsigned long long)st->kept_bytes, "kept_evicted",
                         (unsigned long long)st->kept_evicted, "no_room",
                         (unsigned long long)st->no_room, "next_pass_bytes",
                         (unsigned long long)st->next_pass_bytes, "sparse_reads",
                         (unsigned long long)st->sparse_reads, "sparse",
                         st->sparse ? Py_True : Py_False, "peer_reads",
                         (unsigned long long)st->peer_reads, "peer_records",
                         (unsigned long long)st->peer_records);
}

/* The staging engine's counters (all zero on a pool of one tier). */
static PyObject *loader_stats(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->l) {
        PyErr_SetString(PyExc_ValueError, "loader not initialized");
        return NULL;
    }
    struct cxlp_loader_stats st;
    int rc = cxlp_loader_stats(self->l, &st);
    if (rc)
        return core_raise(rc, self->l);
    return stats_dict(&st);
}

static PyObject *loader_get_u64(LoaderObject *self, void *c)
{
    switch ((int)(intptr_t)c) {
    case 0: return PyLong_FromUnsignedLongLong(self->resume_records);
    case 1: return PyLong_FromUnsignedLongLong(self->resume_offset);
    default: return PyLong_FromUnsignedLong(self->l ? cxlp_loader_threads(self->l) : 0);
    }
}

static PyMethodDef loader_methods[] = {
    {"stats", (PyCFunction)loader_stats, METH_NOARGS,
     "The staging engine's counters (hits, misses, bytes staged and evicted, ...)."},
    {"take", (PyCFunction)loader_take, METH_NOARGS,
     "take() -> the next batch: a tensor (stacked records of one field) or a dict of tensors "
     "by field name (several fields, or fields= given; PAD and PACK add lengths, and seg_* "
     "with segments=True), made by tensor(capsule); capsules when tensor is None. None at "
     "the end."},
    {"slots", (PyCFunction)loader_slots, METH_VARARGS,
     "slots(first=0) -> [(address, bytes)] of ring slots first, first+1, ..."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loader_getset[] = {
    {"n_slots", (getter)loader_get_n_slots, NULL, "slots in the ring now (it only grows)", NULL},
    {"stall_ns", (getter)loader_get_stall_ns, NULL,
     "nanoseconds next()/take() waited on the engine so far", NULL},
    {"resume_records", (getter)loader_get_u64, NULL,
     "records consumed after the last batch take() returned", (void *)0},
    {"resume_offset", (getter)loader_get_u64, NULL,
     "PACK: elements of the next record delivered after that batch", (void *)1},
    {"threads", (getter)loader_get_u64, NULL, "gather threads the engine runs", (void *)2},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot LoaderType_slots[] = {
    {Py_tp_doc, (void *)"Loader(store, order (Sampler or int64 buffer), batch_size, *, threads=0 "
              "(from the topology), slots=0 (from prefetch and the batch size), prefetch=0, "
              "collate=COLLATE_STACK, seq_len=0, pad_value=0, drop_last=False, numa_node=-1, "
              "first_offset=0, bind_slots=0 (1: bound to slot_node, 2: interleaved over "
              "slot_nodes), slot_node=0, tensor=None, segments=False, tier_policy=0, "
              "tier_budget=0, tier_horizon=0, tier_target=-1, tier_stagers=0, fields=None, "
              "slot_nodes=None, next_order=None (a Sampler of the next pass: its first shards "
              "are staged once this pass's ids are all in view), tier_read_in_part=False (records "
              "of shards not in memory read in part from the home tier, copies made only into "
              "the budget's room))"},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)loader_init},
    {Py_tp_dealloc, (void *)loader_dealloc},
    {Py_tp_iter, (void *)PyObject_SelfIter},
    {Py_tp_iternext, (void *)loader_next},
    {Py_tp_methods, (void *)loader_methods},
    {Py_tp_getset, (void *)loader_getset},
    {0, NULL},
};
PyType_Spec LoaderType_spec = {
    .name = "cxl_dataloader._core.Loader",
    .basicsize = sizeof(LoaderObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = LoaderType_slots,
};
PyTypeObject *LoaderTypeP;

/* ---- Pass ---- */

/* A pass of the fast path as Python iterates it: next() is the Loader's
 * take() with the loop's bookkeeping done in C (the consumed count set on
 * the sampler, the end of the pass signalled once), so that a batch costs
 * one C call and no generator frame. on_end() runs exactly once: when take()
 * runs out or raises, at close(), or when the Pass is freed unfinished (a
 * break out of the loop), as a generator's finally would. */
typedef struct {
    PyObject_HEAD
    PyObject *loader;        /* the Loader (its take) */
    PyObject *on_end;        /* callable, cleared once called */
    PyObject *drawn;         /* object whose _drawn is set per batch, or NULL */
} PassObject;

static PyObject *drawn_name;

static int pass_init(PassObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"loader", "on_end", "drawn", NULL};
    PyObject *loader, *on_end, *drawn = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!O|O", kwlist, &LoaderType, &loader, &on_end,
                                     &drawn))
        return -1;
    if (!PyCallable_Check(on_end)) {
        PyErr_SetString(PyExc_TypeError, "on_end must be callable");
        return -1;
    }
    if (self->loader) {
        PyErr_SetString(PyExc_RuntimeError, "Pass already initialized");
        return -1;
    }
    if (!drawn_name && !(drawn_name = PyUnicode_InternFromString("_drawn")))
        return -1;
    self->loader = Py_NewRef(loader);
    self->on_end = Py_NewRef(on_end);
    self->drawn = drawn == Py_None ? NULL : Py_NewRef(drawn);
    return 0;
}

/* Calls on_end if it has not been; -1 with its exception. */
static int pass_end(PassObject *self)
{
    PyObject *f = self->on_end;
    if (!f)
        return 0;
    self->on_end = NULL;
    PyObject *r = PyObject_CallNoArgs(f);
    Py_DECREF(f);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

/* pass_end where an exception may be set, which is kept; on_end's own
 * exception is reported as unraisable. */
static void pass_end_keeping_error(PassObject *self)
{
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    if (pass_end(self) < 0)
        PyErr_WriteUnraisable((PyObject *)self);
    PyErr_Restore(t, v, tb);
}

static PyObject *pass_next(PassObject *self)
{
    if (!self->on_end)
        return NULL;         /* over: StopIteration */
    LoaderObject *l = (LoaderObject *)self->loader;
    PyObject *out = loader_take(l, NULL);
    if (out == Py_None) {
        Py_DECREF(out);
        pass_end(self);
        return NULL;         /* StopIteration, or on_end's exception */
    }
    if (!out) {
        /* take()'s exception goes out; the pass is over, as a generator
         * is after its body raised */
        pass_end_keeping_error(self);
        return NULL;
    }
    if (self->drawn) {
        PyObject *n = PyLong_FromUnsignedLongLong(l->resume_records);
        if (!n || PyObject_SetAttr(self->drawn, drawn_name, n) < 0) {
            Py_XDECREF(n);
            Py_DECREF(out);
            return NULL;
        }
        Py_DECREF(n);
    }
    return out;
}

static PyObject *pass_close(PassObject *self, PyObject *unused)
{
    (void)unused;
    if (pass_end(self) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* tp_finalize: a Pass freed (or collected in a cycle) unfinished ends its
 * pass first */
static void pass_finalize(PassObject *self)
{
    if (self->on_end)
        pass_end_keeping_error(self);
}

static int pass_traverse(PassObject *self, visitproc visit, void *arg)
{
    Py_VISIT(Py_TYPE((PyObject *)self)); /* a heap type's instances hold it */
    Py_VISIT(self->loader);
    Py_VISIT(self->on_end);
    Py_VISIT(self->drawn);
    return 0;
}

static int pass_clear(PassObject *self)
{
    Py_CLEAR(self->loader);
    Py_CLEAR(self->on_end);
    Py_CLEAR(self->drawn);
    return 0;
}

static void pass_dealloc(PassObject *self)
{
    PyObject_GC_UnTrack(self);
    /* a Pass freed unfinished ends its pass here (the limited API has no
     * PyObject_CallFinalizerFromDealloc): on_end (the loader's end of a
     * pass) holds no reference to the Pass, so nothing brings it back */
    if (self->on_end)
        pass_end_keeping_error(self);
    pass_clear(self);
    core_free((PyObject *)self);
}

static PyMethodDef pass_methods[] = {
    {"close", (PyCFunction)pass_close, METH_NOARGS,
     "Ends the pass now (on_end runs, if it has not); next() then raises StopIteration."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot PassType_slots[] = {
    {Py_tp_doc, (void *)"Pass(loader, on_end, drawn=None): iterates loader.take() until it returns "
              "None; sets drawn._drawn to loader.resume_records after each batch; calls "
              "on_end() once: at the end, on an error, at close() or when freed unfinished"},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)pass_init},
    {Py_tp_dealloc, (void *)pass_dealloc},
    {Py_tp_finalize, (void *)pass_finalize},
    {Py_tp_traverse, (void *)pass_traverse},
    {Py_tp_clear, (void *)pass_clear},
    {Py_tp_iter, (void *)PyObject_SelfIter},
    {Py_tp_iternext, (void *)pass_next},
    {Py_tp_methods, (void *)pass_methods},
    {0, NULL},
};
PyType_Spec PassType_spec = {
    .name = "cxl_dataloader._core.Pass",
    .basicsize = sizeof(PassObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .slots = PassType_slots,
};
PyTypeObject *PassTypeP;

/* ---- Batch ---- */

static void batch_dealloc(BatchObject *self)
{
    LoaderObject *l = (LoaderObject *)self->loader;
    cxlp_loader_release(l->l, self->b);
    Py_DECREF(self->loader);
    core_free((PyObject *)self);
}

static PyObject *batch_data(BatchObject *self, void *c)
{
    (void)c;
    int64_t shape[ARRAY_MAX_DIMS];
    int dtype;
    int ndim = field_shape(self, 0, shape, &dtype);
    return array_new((PyObject *)self, self->b->data, dtype, ndim, shape);
}

static PyObject *batch_fields(BatchObject *self, void *c)
{
    (void)c;
    LoaderObject *l = (LoaderObject *)self->loader;
    PyObject *t = PyTuple_New(l->nfields);
    for (uint32_t k = 0; t && k < l->nfields; k++) {
        int64_t shape[ARRAY_MAX_DIMS];
        int dtype;
        int ndim = field_shape(self, k, shape, &dtype);
        PyObject *a = array_new((PyObject *)self, self->b->field_data[k], dtype, ndim, shape);
        if (!a)
            Py_CLEAR(t);
        else
            PyTuple_SetItem(t, k, a);
    }
    return t;
}

static PyObject *batch_ids(BatchObject *self, void *c)
{
    (void)c;
    LoaderObject *l = (LoaderObject *)self->loader;
    int64_t n = l->collate == CXLP_COLLATE_PACK ? (int64_t)self->b->n_segments : self->b->rows;
    return array_new((PyObject *)self, (void *)self->b->ids, CXLP_DT_I64, 1, &n);
}

static PyObject *batch_lengths(BatchObject *self, void *c)
{
    (void)c;
    if (!self->b->lengths)
        Py_RETURN_NONE;
    int64_t n = self->b->rows;
    return array_new((PyObject *)self, (void *)self->b->lengths, CXLP_DT_I64, 1, &n);
}

static PyObject *batch_segments(BatchObject *self, void *c)
{
    (void)c;
    LoaderObject *l = (LoaderObject *)self->loader;
    if (l->collate != CXLP_COLLATE_PACK)
        Py_RETURN_NONE;
    int64_t n = (int64_t)self->b->n_segments;
    const int64_t *cols[4] = {self->b->seg_row, self->b->seg_start, self->b->seg_len,
                              self->b->seg_offset};
    PyObject *t = PyTuple_New(4);
    for (int i = 0; t && i < 4; i++) {
        PyObject *a = array_new((PyObject *)self, (void *)cols[i], CXLP_DT_I64, 1, &n);
        if (!a) {
            Py_CLEAR(t);
            break;
        }
        PyTuple_SetItem(t, i, a);
    }
    return t;
}

static PyObject *batch_int(BatchObject *self, void *c)
{
    const struct cxlp_batch *b = self->b;
    switch ((int)(intptr_t)c) {
    case 0: return PyLong_FromUnsignedLongLong(b->index);
    case 1: return PyLong_FromUnsignedLong(b->rows);
    case 2: return PyLong_FromUnsignedLongLong(b->resume_records);
    default: return PyLong_FromUnsignedLongLong(b->resume_offset);
    }
}

static PyGetSetDef batch_getset[] = {
    {"data", (getter)batch_data, NULL, "the batch (its first field): [rows, ...] Array over the ring slot", NULL},
    {"fields", (getter)batch_fields, NULL, "every collated field, as Arrays over the ring slot", NULL},
    {"ids", (getter)batch_ids, NULL, "sample id per row (PACK: per segment)", NULL},
    {"lengths", (getter)batch_lengths, NULL, "PAD/PACK: valid elements per row", NULL},
    {"segments", (getter)batch_segments, NULL, "PACK: (row, start, len, offset) Arrays", NULL},
    {"index", (getter)batch_int, NULL, "batch number", (void *)0},
    {"rows", (getter)batch_int, NULL, "rows in this batch", (void *)1},
    {"resume_records", (getter)batch_int, NULL, "records consumed after this batch", (void *)2},
    {"resume_offset", (getter)batch_int, NULL, "PACK: elements of the next record consumed", (void *)3},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot BatchType_slots[] = {
    {Py_tp_doc, (void *)"One batch lent from the ring; the slot returns when this and its arrays are gone."},
    {Py_tp_dealloc, (void *)batch_dealloc},
    {Py_tp_getset, (void *)batch_getset},
    {0, NULL},
};
PyType_Spec BatchType_spec = {
    .name = "cxl_dataloader._core.Batch",
    .basicsize = sizeof(BatchObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = BatchType_slots,
};
PyTypeObject *BatchTypeP;

/* ------------------------------------------------------------ Stager */

/* Stager: staging ahead of a pass that has not started (cxlp_stager). */
typedef struct {
    PyObject_HEAD
    cxlp_stager *st;
    PyObject *store;         /* StoreObject */
    PyObject *sampler;       /* SamplerObject, lent while st runs */
} StagerObject;

static void stager_stop(StagerObject *self)
{
    if (self->st) {
        Py_BEGIN_ALLOW_THREADS /* a copy in progress is finished first */
        cxlp_stager_free(self->st);
        Py_END_ALLOW_THREADS
        self->st = NULL;
    }
    sampler_return(&self->sampler);
    Py_CLEAR(self->store);
}

static int stager_init(StagerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"store", "order", "batch_size", "tier_policy", "tier_budget",
                             "tier_horizon", "tier_target", "tier_stagers", "tier_read_in_part",
                             "tier_sparse", "tier_away", NULL};
    StoreObject *store;
    PyObject *order, *away = Py_None;
    unsigned int batch_size, tier_horizon = 0, tier_stagers = 0;
    int tier_policy = 0, tier_target = -1, read_in_part = 0, sparse = 0;
    unsigned long long tier_budget = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OI|$iKIiIppO", kwlist, &StoreType, &store,
                                     &order, &batch_size, &tier_policy, &tier_budget,
                                     &tier_horizon, &tier_target, &tier_stagers, &read_in_part,
                                     &sparse, &away))
        return -1;
    const uint8_t *away_bits = NULL;
    if (away_arg(store, away, &away_bits) < 0)
        return -1;
    if (self->st || self->sampler) {
        PyErr_SetString(PyExc_RuntimeError, "Stager already initialized");
        return -1;
    }
    if (!store->s || store->closed) {
        PyErr_SetString(PyExc_ValueError, "dataset is closed");
        return -1;
    }
    if (sampler_lend(order, cxlp_store_count(store->s), "order") < 0)
        return -1;
    self->sampler = order;
    self->store = Py_NewRef((PyObject *)store);
    struct cxlp_loader_opts o = {.batch_size = batch_size, .tier_policy = tier_policy,
                                 .tier_budget = tier_budget, .tier_horizon = tier_horizon,
                                 .tier_target = tier_target, .tier_stagers = tier_stagers,
                                 .tier_read_in_part = read_in_part, .tier_sparse = sparse,
                                 .tier_away = away_bits};
    int rc;
    Py_BEGIN_ALLOW_THREADS /* a placement policy copies here */
    rc = cxlp_stager_create(store->s, &o, sampler_fn, self->sampler, &self->st);
    Py_END_ALLOW_THREADS
    if (rc) {
        stager_stop(self);
        core_raise(rc, NULL);
        return -1;
    }
    return 0;
}

static void stager_dealloc(StagerObject *self)
{
    stager_stop(self);
    core_free((PyObject *)self);
}

static PyObject *stager_close(StagerObject *self, PyObject *unused)
{
    (void)unused;
    stager_stop(self);
    Py_RETURN_NONE;
}

static PyObject *stager_stats(StagerObject *self, PyObject *unused)
{
    (void)unused;
    if (!self->st) {
        PyErr_SetString(PyExc_ValueError, "stager is closed");
        return NULL;
    }
    struct cxlp_loader_stats st;
    int rc = cxlp_stager_stats(self->st, &st);
    if (rc)
        return core_raise(rc, NULL);
    return stats_dict(&st);
}

static PyMethodDef stager_methods[] = {
    {"stats", (PyCFunction)stager_stats, METH_NOARGS,
     "Its counters, as Loader.stats() (prefetched, bytes_staged, ...)."},
    {"close", (PyCFunction)stager_close, METH_NOARGS,
     "Stops it (a copy in progress is finished) and gives the sampler back; the copies "
     "stay."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot StagerType_slots[] = {
    {Py_tp_doc, (void *)"Stager(store, order (Sampler), batch_size, *, tier_policy=0, tier_budget=0, "
              "tier_horizon=0, tier_target=-1, tier_stagers=0): stages the first shards of "
              "a pass not started yet (a dataset in a pool of tiers), until close()"},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)stager_init},
    {Py_tp_dealloc, (void *)stager_dealloc},
    {Py_tp_methods, (void *)stager_methods},
    {0, NULL},
};
PyType_Spec StagerType_spec = {
    .name = "cxl_dataloader._core.Stager",
    .basicsize = sizeof(StagerObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = StagerType_slots,
};
PyTypeObject *StagerTypeP;
