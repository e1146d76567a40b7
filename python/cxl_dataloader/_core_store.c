/*
 * _core_store.c - Store: one dataset of a pool. get(i) returns an Array over
 * the record in pool memory: no copy. The C store is closed when the last
 * Array (and so the last tensor) viewing it is gone, not at close().
 *
 * What Python sees of the pool is the store's private copy-on-write mapping
 * (cxlp_store_private): reads share the pool's pages, and a write into a
 * tensor (torch has no read-only tensors) gives this process its own copy of
 * that page instead of a SIGSEGV on the read-only shared mapping, and never
 * reaches the pool. The gather engine keeps reading the shared mapping.
 * Where the media refuses a private mapping (devdax) or the address space
 * has no room for it, records are copied (a warning says so, once).
 * Rejected: read-only tensors (torch 2.13 ignores DLPack's read-only flag,
 * so a write faulted and killed the interpreter); a copy per record always
 * (memory and time per sample for what is rarely written).
 */
#include "_core.h"

PyObject *core_info_dict(const struct cxlp_dataset_info *d);

static int store_init(StoreObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"pool", "name", NULL};
    PoolObject *pool;
    PyObject *name;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!U", kwlist, &PoolType, &pool, &name))
        return -1;
    if (self->s) {
        PyErr_SetString(PyExc_RuntimeError, "Store already initialized");
        return -1;
    }
    if (!pool->p) {
        PyErr_SetString(PyExc_ValueError, "pool is closed");
        return -1;
    }
    const char *n = PyUnicode_AsUTF8AndSize(name, NULL);
    if (!n)
        return -1;
    int rc;
    cxlp_store *s = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_store_open(pool->p, n, &s);
    Py_END_ALLOW_THREADS
    if (rc) {
        core_raise_dataset(rc, pool->p);
        return -1;
    }
    self->s = s;
    self->name = Py_NewRef(name);
    return 0;
}

static void store_dealloc(StoreObject *self)
{
    cxlp_store_close(self->s);
    Py_XDECREF(self->name);
    core_free((PyObject *)self);
}

static int store_ok(StoreObject *self)
{
    if (!self->s || self->closed) {
        PyErr_SetString(PyExc_ValueError, "dataset is closed");
        return 0;
    }
    return 1;
}

static Py_ssize_t store_len(StoreObject *self)
{
    if (!store_ok(self))
        return -1;
    uint64_t n = cxlp_store_count(self->s);
    if (n > (uint64_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "dataset has more records than Py_ssize_t");
        return -1;
    }
    return (Py_ssize_t)n;
}

/* Where Python may see (and write) the len bytes of pool memory at data:
 * the same bytes in the private copy-on-write mapping, owned (kept mapped)
 * by the store; or, where there is none, a copy owned by a new bytearray.
 * Returns the address and a new reference to its owner in *owner. */
static void *store_export(StoreObject *self, const void *data, uint64_t len, PyObject **owner)
{
    void *priv;
    int rc = cxlp_store_private(self->s, data, len, &priv);
    if (rc == 0) {
        *owner = Py_NewRef((PyObject *)self);
        return priv;
    }
    if (rc == CXLP_ERANGE) {
        core_raise(rc, NULL);
        return NULL;
    }
    if (!self->copying) {
        self->copying = 1;
        if (PyErr_WarnFormat(PyExc_RuntimeWarning, 1, "dataset %U: records are copied for "
                             "Python (%s)", self->name, cxlp_errmsg(NULL)) < 0)
            return NULL;
    }
    if (len > (uint64_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "record larger than Py_ssize_t");
        return NULL;
    }
    PyObject *copy = PyByteArray_FromStringAndSize(data, (Py_ssize_t)len);
    if (!copy)
        return NULL;
    *owner = copy;
    return PyByteArray_AsString(copy);
}

/* Field k of record i of a tiered dataset copied out into a new bytearray
 * (*owner; Python's own, writable), under a pin held only for the copy: a
 * view would pin the epoch until the dataset is closed, holding back the
 * free of every copy dropped meanwhile (a migration's, an eviction's). */
static int store_copy_field(StoreObject *self, uint64_t i, uint32_t k, struct cxlp_view *v,
                            PyObject **owner)
{
    uint64_t len = 0;
    char one;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_store_read_field_copy(self->s, i, k, &one, 0, &len);
    Py_END_ALLOW_THREADS
    if (rc && rc != CXLP_ERANGE) {
        core_raise(rc, NULL);
        return -1;
    }
    if (len > (uint64_t)PY_SSIZE_T_MAX) {
        PyErr_SetString(PyExc_OverflowError, "record larger than Py_ssize_t");
        return -1;
    }
    PyObject *copy = PyByteArray_FromStringAndSize(NULL, (Py_ssize_t)len);
    if (!copy)
        return -1;
    char *data = PyByteArray_AsString(copy);
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_store_read_field_copy(self->s, i, k, data, len, &len);
    Py_END_ALLOW_THREADS
    if (rc) {
        Py_DECREF(copy);
        core_raise(rc, NULL);
        return -1;
    }
    v->data = data;
    v->len = len;
    *owner = copy;
    return 0;
}

/* A field of a record as Python sees it: a str field as str (UTF-8,
 * checked when written), any other field as an Array over its bytes: those
 * of owner (a copy) when not NULL, else where Python may see them in the
 * pool (store_export); variable-length 1-D, fixed-shape in its shape. */
static PyObject *field_value(StoreObject *self, const struct cxlp_field *f,
                             const struct cxlp_view *v, PyObject *owner)
{
    int64_t shape[ARRAY_MAX_DIMS];
    int ndim = f->ndim;
    if (f->dtype == CXLP_DT_STR)
        return PyUnicode_DecodeUTF8(v->data, (Py_ssize_t)v->len, "strict");
    PyObject *own = owner ? Py_NewRef(owner) : NULL;
    void *data = own ? (void *)v->data : store_export(self, v->data, v->len, &own);
    if (!data)
        return NULL;
    if (CXLP_FIELD_VAR(f))
        shape[0] = (int64_t)(v->len / (uint64_t)cxlp_dtype_size(f->dtype));
    else
        for (int d = 0; d < f->ndim; d++)
            shape[d] = (int64_t)f->shape[d];
    PyObject *out = array_new(own, data, f->dtype, ndim, shape);
    Py_DECREF(own);
    return out;
}

/* get(i, fields=None): record i; one-field datasets (without fields) give
 * the value itself, others a dict name -> value of every field, or of the
 * field numbers listed in fields. */
static PyObject *store_get(StoreObject *self, PyObject *args)
{
    PyObject *arg, *which = Py_None;
    if (!PyArg_ParseTuple(args, "O|O", &arg, &which) || !store_ok(self))
        return NULL;
    long long i = PyLong_AsLongLong(arg);
    if (i == -1 && PyErr_Occurred())
        return NULL;
    uint64_t n = cxlp_store_count(self->s);
    if (i < 0)
        i += (long long)n;
    if (i < 0 || (uint64_t)i >= n)
        return PyErr_Format(PyExc_IndexError, "record %lld out of range for %llu records",
                            PyLong_AsLongLong(arg), (unsigned long long)n);
    const struct cxlp_schema *sc = cxlp_store_schema(self->s);
    uint32_t fields[CXLP_MAX_FIELDS], nf = 0;
    if (which == Py_None) {
        for (nf = 0; nf < sc->n_fields; nf++)
            fields[nf] = nf;
    } else {
        PyObject *seq = PySequence_Fast(which, "fields must be a sequence of field numbers");
        if (!seq)
            return NULL;
        Py_ssize_t m = core_fast_size(seq);
        for (Py_ssize_t k = 0; k < m; k++) {
            long f = PyLong_AsLong(core_fast_item(seq, k));
            if ((f == -1 && PyErr_Occurred()) || f < 0 || (uint32_t)f >= sc->n_fields ||
                nf == CXLP_MAX_FIELDS) {
                Py_DECREF(seq);
                if (!PyErr_Occurred())
                    PyErr_Format(PyExc_IndexError, "field %ld of %u", f, sc->n_fields);
                return NULL;
            }
            fields[nf++] = (uint32_t)f;
        }
        Py_DECREF(seq);
    }
    /* a tiered dataset's fields are copied out (store_copy_field), each
     * into a bytearray of its own; other datasets' are views */
    const int tiered = cxlp_store_tiered(self->s);
    struct cxlp_view v[CXLP_MAX_FIELDS];
    PyObject *copies[CXLP_MAX_FIELDS] = {NULL};
    PyObject *out = NULL;
    for (uint32_t k = 0; k < nf; k++) {
        if (tiered) {
            if (store_copy_field(self, (uint64_t)i, fields[k], &v[k], &copies[k]))
                goto out;
        } else {
            int rc = cxlp_store_read_field(self->s, (uint64_t)i, fields[k], &v[k]);
            if (rc) {
                core_raise(rc, NULL);
                goto out;
            }
        }
    }
    if (sc->n_fields == 1 && which == Py_None) {
        out = field_value(self, &sc->fields[0], &v[0], copies[0]);
        goto out;
    }
    out = PyDict_New();
    for (uint32_t k = 0; out && k < nf; k++) {
        const struct cxlp_field *f = &sc->fields[fields[k]];
        PyObject *a = field_value(self, f, &v[k], copies[k]);
        if (!a || PyDict_SetItemString(out, f->name, a) < 0)
            Py_CLEAR(out);
        Py_XDECREF(a);
    }
out:
    for (uint32_t k = 0; k < nf; k++)
        Py_XDECREF(copies[k]);
    return out;
}

static PyObject *store_schema(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (!store_ok(self))
        return NULL;
    const struct cxlp_schema *sc = cxlp_store_schema(self->s);
    PyObject *fields = PyList_New(0);
    for (uint32_t k = 0; fields && k < sc->n_fields; k++) {
        const struct cxlp_field *f = &sc->fields[k];
        PyObject *shape = PyTuple_New(f->ndim);
        for (int d = 0; shape && d < f->ndim; d++)
            PyTuple_SetItem(shape, d, PyLong_FromUnsignedLongLong(f->shape[d]));
        if (shape && CXLP_FIELD_VAR(f))
            PyTuple_SetItem(shape, 0, Py_NewRef(Py_None)); /* variable length */
        PyObject *fd = shape ? Py_BuildValue("{s:s,s:s,s:N,s:K,s:O}", "name", f->name, "dtype",
                                             cxlp_dtype_name(f->dtype), "shape", shape,
                                             "offset", (unsigned long long)f->offset,
                                             "variable", CXLP_FIELD_VAR(f) ? Py_True : Py_False)
                             : NULL;
        if (!fd || PyList_Append(fields, fd) < 0)
            Py_CLEAR(fields);
        Py_XDECREF(fd);
    }
    if (!fields)
        return NULL;
    return Py_BuildValue("{s:O,s:K,s:N}", "fixed", sc->fixed ? Py_True : Py_False,
                         "record_size", (unsigned long long)sc->record_size, "fields", fields);
}

static PyObject *store_info(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (!store_ok(self))
        return NULL;
    struct cxlp_dataset_info d;
    int rc = cxlp_store_info(self->s, &d);
    if (rc)
        return core_raise(rc, self->s);
    return core_info_dict(&d);
}

static PyObject *store_shards(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (!store_ok(self))
        return NULL;
    uint64_t n, per, max;
    int rc = cxlp_store_shards(self->s, &n, &per, &max);
    if (rc)
        return core_raise(rc, self->s);
    return Py_BuildValue("{s:K,s:K,s:K}", "n_shards", (unsigned long long)n, "per_shard",
                         (unsigned long long)per, "max_bytes", (unsigned long long)max);
}

static PyObject *store_format(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (!store_ok(self))
        return NULL;
    uint32_t version;
    uint64_t block;
    int area;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* a pool of tiers: a read of a header page */
    rc = cxlp_store_format(self->s, &version, &block, &area);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, self->s);
    return Py_BuildValue("{s:I,s:K,s:O}", "version", (unsigned int)version, "block_bytes",
                         (unsigned long long)block, "sums_area", area ? Py_True : Py_False);
}

static PyObject *store_shard_tiers(StoreObject *self, PyObject *args)
{
    unsigned long long k;
    if (!PyArg_ParseTuple(args, "K", &k) || !store_ok(self))
        return NULL;
    uint32_t mask;
    int rc = cxlp_store_shard_tiers(self->s, k, &mask);
    if (rc)
        return core_raise(rc, NULL);
    return PyLong_FromUnsignedLong(mask);
}

static PyObject *store_get_tiered(StoreObject *self, void *closure)
{
    (void)closure;
    if (!store_ok(self))
        return NULL;
    return PyBool_FromLong(cxlp_store_tiered(self->s));
}

static PyObject *store_docs(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (!store_ok(self))
        return NULL;
    const int64_t *docs = NULL;
    uint64_t n = 0;
    int rc = cxlp_store_docs(self->s, &docs, &n);
    if (rc)
        return core_raise(rc, self->s);
    if (!docs)
        Py_RETURN_NONE;
    int64_t shape[1] = {(int64_t)n + 1};
    PyObject *owner;
    void *data = store_export(self, docs, (n + 1) * sizeof *docs, &owner);
    if (!data)
        return NULL;
    PyObject *a = array_new(owner, data, CXLP_DT_I64, 1, shape);
    Py_DECREF(owner);
    return a;
}

static PyObject *store_verify(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (!store_ok(self))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_store_verify(self->s);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, self->s);
    Py_RETURN_NONE;
}

static PyObject *store_hugepages(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (!store_ok(self))
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_store_hugepages(self->s);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, self->s);
    Py_RETURN_NONE;
}

static PyObject *store_gather_threads(StoreObject *self, PyObject *args)
{
    unsigned int threads = 0;
    int numa_node = -1;
    if (!PyArg_ParseTuple(args, "|Ii", &threads, &numa_node) || !store_ok(self))
        return NULL;
    return PyLong_FromUnsignedLong(cxlp_loader_default_threads(self->s, threads, numa_node));
}

static PyObject *store_pages(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (!store_ok(self))
        return NULL;
    uint64_t bytes = 0, huge = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_store_pages(self->s, &bytes, &huge);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, NULL);
    return Py_BuildValue("{sKsK}", "bytes", (unsigned long long)bytes, "huge_bytes",
                         (unsigned long long)huge);
}

/* spans(first, count): where records [first, first+count) lie in the pool,
 * [(pool offset, bytes, first record, records, address)], one per shard
 * crossed (cxlp_store_spans): what a reader of a file: pool that bypasses
 * the mapping (O_DIRECT, GPUDirect Storage) reads. address is where get()'s
 * views show those bytes (the private view of the pool, cxlp_store_private;
 * 0 where there is none and get() copies): what registering the dataset's
 * memory with a device covers. */
static PyObject *store_spans(StoreObject *self, PyObject *args)
{
    unsigned long long first, n;
    if (!PyArg_ParseTuple(args, "KK", &first, &n) || !store_ok(self))
        return NULL;
    size_t need = 0;
    int rc = cxlp_store_spans(self->s, first, n, NULL, 0, &need);
    if (rc)
        return core_raise(rc, NULL);
    struct cxlp_span *sp = PyMem_Malloc((need ? need : 1) * sizeof *sp);
    if (!sp)
        return PyErr_NoMemory();
    PyObject *out = NULL;
    rc = cxlp_store_spans(self->s, first, n, sp, need, &need);
    if (rc) {
        core_raise(rc, NULL);
        goto done;
    }
    if (!(out = PyList_New((Py_ssize_t)need)))
        goto done;
    for (size_t i = 0; i < need; i++) {
        struct cxlp_view v;
        void *priv = NULL;
        if (cxlp_store_read(self->s, sp[i].first, &v) ||
            cxlp_store_private(self->s, v.data, sp[i].len, &priv))
            priv = NULL; /* no private view: get() copies */
        PyObject *t = Py_BuildValue("(KKKKK)", (unsigned long long)sp[i].off,
                                    (unsigned long long)sp[i].len,
                                    (unsigned long long)sp[i].first,
                                    (unsigned long long)sp[i].count,
                                    (unsigned long long)(uintptr_t)priv);
        if (!t) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SetItem(out, (Py_ssize_t)i, t);
    }
done:
    PyMem_Free(sp);
    return out;
}

/* Sums the lengths (elements) of the records an order names: a fresh
 * Sampler drawn to its end (it must not be a Loader's), or a contiguous
 * int64/uint64 buffer of ids. What a packed loader needs to count its rows
 * (rows = ceil(elements / seq_len)) without reading a record. */
static PyObject *store_elements(StoreObject *self, PyObject *args)
{
    PyObject *order;
    unsigned int field = 0;
    if (!PyArg_ParseTuple(args, "O|I", &order, &field) || !store_ok(self))
        return NULL;
    const struct cxlp_schema *sc = cxlp_store_schema(self->s);
    if (field >= sc->n_fields)
        return PyErr_Format(PyExc_IndexError, "field %u of %u", field, sc->n_fields);
    const struct cxlp_field *fd = &sc->fields[field];
    /* elements of a variable-length field; of a fixed-shape one, records */
    uint64_t unit = (uint64_t)cxlp_dtype_size(fd->dtype);
    for (int d = 0; d < fd->ndim && !CXLP_FIELD_VAR(fd); d++)
        unit *= fd->shape[d];
    uint64_t n = cxlp_store_count(self->s), total = 0, bad = UINT64_MAX;
    int rc = 0;
    if (PyObject_TypeCheck(order, &SamplerType)) {
        SamplerObject *so = (SamplerObject *)order;
        if (!so->s || so->busy)
            return PyErr_Format(PyExc_ValueError, "sampler %s", so->s ? "is used by a Loader"
                                                                      : "not initialized");
        if (so->id_bound > n)
            return PyErr_Format(PyExc_IndexError, "sampler draws ids below %llu but the "
                                "dataset has %llu records", (unsigned long long)so->id_bound,
                                (unsigned long long)n);
        so->busy++;
        Py_BEGIN_ALLOW_THREADS
        uint64_t ids[4096];
        size_t k;
        while (!rc && (k = cxlp_sampler_next(so->s, ids, 4096)) > 0)
            for (size_t j = 0; j < k && !rc; j++) {
                struct cxlp_view v;
                if (!(rc = cxlp_store_read_field(self->s, ids[j], field, &v)))
                    total += v.len / unit;
            }
        Py_END_ALLOW_THREADS
        so->busy--;
    } else {
        Py_buffer b;
        if (PyObject_GetBuffer(order, &b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            return NULL;
        const char *f = b.format ? b.format : "B";
        if (*f == '<' || *f == '=' || *f == '@')
            f++;
        if (b.itemsize != 8 || !strchr("qQlL", *f) || f[1]) {
            PyBuffer_Release(&b);
            return PyErr_Format(PyExc_TypeError, "order must be a Sampler or a contiguous "
                                "int64 or uint64 buffer");
        }
        const uint64_t *ids = b.buf;
        uint64_t cnt = (uint64_t)(b.len / 8);
        Py_BEGIN_ALLOW_THREADS
        for (uint64_t j = 0; j < cnt && !rc; j++) {
            if (ids[j] >= n) {
                bad = j;
                break;
            }
            struct cxlp_view v;
            if (!(rc = cxlp_store_read_field(self->s, ids[j], field, &v)))
                total += v.len / unit;
        }
        Py_END_ALLOW_THREADS
        if (bad != UINT64_MAX) {
            PyErr_Format(PyExc_IndexError, "order[%llu] = %lld is outside the dataset's %llu "
                         "records", (unsigned long long)bad, (long long)ids[bad],
                         (unsigned long long)n);
            PyBuffer_Release(&b);
            return NULL;
        }
        PyBuffer_Release(&b);
    }
    if (rc)
        return core_raise(rc, NULL);
    return PyLong_FromUnsignedLongLong(total);
}

static PyObject *store_close(StoreObject *self, PyObject *unused)
{
    (void)unused;
    self->closed = 1; /* arrays still alive keep the C store until dealloc */
    Py_RETURN_NONE;
}

static PyMethodDef store_methods[] = {
    {"get", (PyCFunction)store_get, METH_VARARGS,
     "get(i, fields=None): record i as an Array (str for a str field), or a dict of them by "
     "field name (several fields, or the field numbers in fields)."},
    {"schema", (PyCFunction)store_schema, METH_NOARGS, "The dataset schema as a dict."},
    {"info", (PyCFunction)store_info, METH_NOARGS, "Catalog facts as a dict."},
    {"docs", (PyCFunction)store_docs, METH_NOARGS, "Document starts (int64 Array) or None."},
    {"verify", (PyCFunction)store_verify, METH_NOARGS, "Recompute every checksum."},
    {"elements", (PyCFunction)store_elements, METH_VARARGS,
     "elements(order, field=0): total length in elements of field (a variable-length "
     "one; a fixed-shape field counts records) of the records an order (a fresh Sampler, "
     "drawn to its end, or an int64 buffer of ids) names."},
    {"hugepages", (PyCFunction)store_hugepages, METH_NOARGS,
     "Move the records onto 2 MiB pages (once per pool; see cxlp_store_hugepages)."},
    {"gather_threads", (PyCFunction)store_gather_threads, METH_VARARGS,
     "gather_threads(threads=0, numa_node=-1): how many a Loader over this dataset runs."},
    {"pages", (PyCFunction)store_pages, METH_NOARGS,
     "{'bytes': shard bytes, 'huge_bytes': of them on 2 MiB pages} (cxlp_store_pages)."},
    {"spans", (PyCFunction)store_spans, METH_VARARGS,
     "spans(first, count): [(pool offset, bytes, first record, records, address of the "
     "bytes in get()'s view or 0)] per shard crossed."},
    {"close", (PyCFunction)store_close, METH_NOARGS, "No more get(); views stay valid."},
    {"shards", (PyCFunction)store_shards, METH_NOARGS,
     "n_shards, per_shard (records each; 0 when they differ), max_bytes of one."},
    {"format", (PyCFunction)store_format, METH_NOARGS,
     "{'version': shard format, 'block_bytes': of a block sum (0: none), 'sums_area'} "
     "(cxlp_store_format)."},
    {"shard_tiers", (PyCFunction)store_shard_tiers, METH_VARARGS,
     "shard_tiers(k) -> bit t set: tier t holds a copy of shard k now."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef store_getset[] = {
    {"tiered", (getter)store_get_tiered, NULL,
     "True when the pool has tiers: get() then copies records out", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};


static PyType_Slot StoreType_slots[] = {
    {Py_tp_doc, (void *)"Store(pool, name): an open dataset."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)store_init},
    {Py_tp_dealloc, (void *)store_dealloc},
    {Py_tp_methods, (void *)store_methods},
    {Py_tp_getset, (void *)store_getset},
    {Py_sq_length, (void *)store_len},
    {0, NULL},
};
PyType_Spec StoreType_spec = {
    .name = "cxl_dataloader._core.Store",
    .basicsize = sizeof(StoreObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = StoreType_slots,
};
PyTypeObject *StoreTypeP;
