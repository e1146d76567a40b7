/*
 * _core_loader.c - Loader: the C gather engine over an order of sample ids;
 * Batch: one ring slot lent to Python. The engine's threads read the order
 * buffer directly (no GIL, no per-sample Python), or, when the order is a
 * Sampler, call cxlp_sampler_next themselves (no id exists in Python at
 * all); next() releases the GIL while it waits. A slot goes back to the
 * ring when its Batch and every Array/tensor viewing it are gone.
 */
#include <time.h>

#include "_core.h"

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

/* index source over a Sampler: the engine calls it under its planning lock,
 * one thread at a time, which is the sampler's threading rule; Python keeps
 * off the handle while busy is set */
static int sampler_fn(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    LoaderObject *l = ctx;
    *n = cxlp_sampler_next(((SamplerObject *)l->sampler)->s, out, max);
    return 0;
}

static int loader_init(LoaderObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"store", "order", "batch_size", "threads", "slots", "collate",
                             "seq_len", "pad_value", "drop_last", "numa_node", "first_offset",
                             "bind_slots", "slot_node", "fields", NULL};
    StoreObject *store;
    PyObject *order, *fields = Py_None;
    unsigned int batch_size, threads = 1, slots = 0;
    int collate = CXLP_COLLATE_STACK, drop_last = 0, numa_node = -1, bind_slots = 0,
        slot_node = 0;
    unsigned long long seq_len = 0, first_offset = 0;
    long long pad_value = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!OI|$IIiKLpiKpiO", kwlist, &StoreType,
                                     &store, &order, &batch_size, &threads, &slots, &collate,
                                     &seq_len, &pad_value, &drop_last, &numa_node, &first_offset,
                                     &bind_slots, &slot_node, &fields))
        return -1;
    if (self->l || self->sampler || self->order.obj) {
        PyErr_SetString(PyExc_RuntimeError, "Loader already initialized");
        return -1;
    }
    if (!store->s || store->closed) {
        PyErr_SetString(PyExc_ValueError, "dataset is closed");
        return -1;
    }
    uint64_t n = cxlp_store_count(store->s);
    const struct cxlp_schema *sc = cxlp_store_schema(store->s);
    if (fields == Py_None) { /* every field; one field gives one array, as before */
        self->nfields = sc->n_fields;
        for (uint32_t k = 0; k < sc->n_fields; k++)
            self->fields[k] = k;
        self->many = sc->n_fields > 1;
    } else {
        PyObject *seq = PySequence_Fast(fields, "fields must be a sequence of field numbers");
        if (!seq)
            return -1;
        Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
        if (m < 1 || m > CXLP_MAX_FIELDS) {
            Py_DECREF(seq);
            PyErr_Format(PyExc_ValueError, "fields: 1..%d field numbers", CXLP_MAX_FIELDS);
            return -1;
        }
        for (Py_ssize_t k = 0; k < m; k++) {
            long f = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, k));
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
    if (PyObject_TypeCheck(order, &SamplerType)) {
        SamplerObject *so = (SamplerObject *)order;
        if (!so->s || so->busy) {
            PyErr_SetString(PyExc_ValueError, so->s ? "sampler is already used by a Loader"
                                                    : "sampler not initialized");
            return -1;
        }
        if (so->id_bound > n) {
            PyErr_Format(PyExc_IndexError, "sampler draws ids below %llu but the dataset has "
                         "%llu records", (unsigned long long)so->id_bound,
                         (unsigned long long)n);
            return -1;
        }
        so->busy++;
        self->sampler = Py_NewRef(order);
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
    self->store = Py_NewRef(store);
    self->collate = collate;
    self->seq_len = seq_len;
    struct cxlp_loader_opts o = {.batch_size = batch_size, .threads = threads, .slots = slots,
                                 .collate = collate, .seq_len = seq_len, .pad_value = pad_value,
                                 .drop_last = drop_last, .numa_node = numa_node,
                                 .first_offset = first_offset, .bind_slots = bind_slots,
                                 .slot_node = slot_node, .n_fields = self->nfields};
    memcpy(o.fields, self->fields, sizeof o.fields);
    int rc = cxlp_loader_create(store->s, &o, self->sampler ? sampler_fn : order_fn, self,
                                &self->l);
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
    if (self->sampler) {
        ((SamplerObject *)self->sampler)->busy--;
        Py_CLEAR(self->sampler);
    }
    Py_XDECREF(self->store);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The next batch as a Batch object, NULL with no exception at the end. The
 * time spent waiting for the engine (GIL released) goes to stall_ns. */
static BatchObject *next_batch(LoaderObject *self)
{
    if (!self->l) {
        PyErr_SetString(PyExc_ValueError, "loader not initialized");
        return NULL;
    }
    struct cxlp_batch *b = NULL;
    int rc;
    uint64_t t0, t1;
    Py_BEGIN_ALLOW_THREADS
    t0 = now_ns();
    rc = cxlp_loader_next(self->l, &b);
    t1 = now_ns();
    Py_END_ALLOW_THREADS
    self->stall_ns += t1 - t0;
    if (rc)
        return (BatchObject *)core_raise(rc, self->l);
    if (!b)
        return NULL;
    BatchObject *bo = PyObject_New(BatchObject, &BatchType);
    if (!bo) {
        cxlp_loader_release(self->l, b);
        return NULL;
    }
    bo->loader = Py_NewRef(self);
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

/* The fast path's one call per batch: (data, lengths, batch, resume_records,
 * resume_offset) or None at the end. data (and lengths, PAD/PACK; else None)
 * are DLPack capsules whose owner is the Batch, so the slot returns to the
 * ring when the tensors made from them are freed. One call instead of an
 * attribute, an Array and a __dlpack__ negotiation per batch: the Python
 * side of a batch is a few microseconds. */
static PyObject *loader_take(LoaderObject *self, PyObject *unused)
{
    (void)unused;
    BatchObject *bo = next_batch(self);
    if (!bo) {
        if (PyErr_Occurred())
            return NULL;
        Py_RETURN_NONE;
    }
    int64_t shape[ARRAY_MAX_DIMS];
    int dtype;
    PyObject *data = self->many ? PyTuple_New(self->nfields) : NULL, *lengths = NULL, *out = NULL;
    for (uint32_t k = 0; k < self->nfields && (data || !self->many); k++) {
        int ndim = field_shape(bo, k, shape, &dtype);
        PyObject *c = dlpack_capsule((PyObject *)bo, bo->b->field_data[k], dtype, ndim, shape, 0, 1);
        if (!c || !self->many) {
            Py_XSETREF(data, c);
            break;
        }
        PyTuple_SET_ITEM(data, k, c);
    }
    if (!data)
        goto done;
    if (bo->b->lengths) {
        int64_t n = bo->b->rows;
        lengths = dlpack_capsule((PyObject *)bo, (void *)bo->b->lengths, CXLP_DT_I64, 1, &n, 0, 1);
        if (!lengths)
            goto done;
    }
    out = Py_BuildValue("(NOOKK)", data, lengths ? lengths : Py_None, (PyObject *)bo,
                        (unsigned long long)bo->b->resume_records,
                        (unsigned long long)bo->b->resume_offset);
    data = NULL;
done:
    Py_XDECREF(data);
    Py_XDECREF(lengths);
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
            PyList_SET_ITEM(list, i, t);
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

static PyMethodDef loader_methods[] = {
    {"take", (PyCFunction)loader_take, METH_NOARGS,
     "take() -> (data capsule, or a tuple of one per field when the dataset has several fields "
     "or fields= was given; lengths capsule or None, Batch, resume_records, resume_offset), "
     "or None at the end."},
    {"slots", (PyCFunction)loader_slots, METH_VARARGS,
     "slots(first=0) -> [(address, bytes)] of ring slots first, first+1, ..."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef loader_getset[] = {
    {"n_slots", (getter)loader_get_n_slots, NULL, "slots in the ring now (it only grows)", NULL},
    {"stall_ns", (getter)loader_get_stall_ns, NULL,
     "nanoseconds next()/take() waited on the engine so far", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

PyTypeObject LoaderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cxl_dataloader._core.Loader",
    .tp_basicsize = sizeof(LoaderObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "Loader(store, order (Sampler or int64 buffer), batch_size, *, threads=1, slots=0, "
              "collate=COLLATE_STACK, seq_len=0, pad_value=0, drop_last=False, numa_node=-1, "
              "first_offset=0, bind_slots=False, slot_node=0, fields=None)",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)loader_init,
    .tp_dealloc = (destructor)loader_dealloc,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)loader_next,
    .tp_methods = loader_methods,
    .tp_getset = loader_getset,
};

/* ---- Batch ---- */

static void batch_dealloc(BatchObject *self)
{
    LoaderObject *l = (LoaderObject *)self->loader;
    cxlp_loader_release(l->l, self->b);
    Py_DECREF(self->loader);
    PyObject_Free(self);
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
            PyTuple_SET_ITEM(t, k, a);
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
        PyTuple_SET_ITEM(t, i, a);
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

PyTypeObject BatchType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cxl_dataloader._core.Batch",
    .tp_basicsize = sizeof(BatchObject),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One batch lent from the ring; the slot returns when this and its arrays are gone.",
    .tp_dealloc = (destructor)batch_dealloc,
    .tp_getset = batch_getset,
};
