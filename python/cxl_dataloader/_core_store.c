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

PyObject *core_info_dict(const struct cxlp_dataset_info *d, int shuffled, uint64_t seed);

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
    uint64_t seed = 0;
    int sh = cxlp_store_ingest_shuffle(self->s, &seed);
    return core_info_dict(&d, sh == 1, seed);
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

static PyObject *store_units(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (!store_ok(self))
        return NULL;
    uint64_t nu, per, copies[32];
    size_t n;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* a catalog snapshot */
    rc = cxlp_store_units(self->s, &nu, &per, copies, 32, &n);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, self->s);
    PyObject *c = PyList_New((Py_ssize_t)MIN_U64(n, 32));
    for (size_t t = 0; c && t < n && t < 32; t++) {
        PyObject *v = PyLong_FromUnsignedLongLong(copies[t]);
        if (!v || PyList_SetItem(c, (Py_ssize_t)t, v)) { /* steals v */
            Py_CLEAR(c);
            break;
        }
    }
    if (!c)
        return NULL;
    return Py_BuildValue("{s:K,s:K,s:N}", "n_units", (unsigned long long)nu, "per_unit",
                         (unsigned long long)per, "copies", c);
}

static PyObject *store_stage_unit(StoreObject *self, PyObject *args)
{
    unsigned long long budget = 0;
    if (!PyArg_ParseTuple(args, "|K", &budget) || !store_ok(self))
        return NULL;
    uint64_t rec, bytes;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* may read a header page */
    rc = cxlp_store_stage_unit(self->s, budget, &rec, &bytes);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, self->s);
    return Py_BuildValue("{s:K,s:K}", "records", (unsigned long long)rec, "bytes",
                         (unsigned long long)bytes);
}

static PyObject *store_stage_order(StoreObject *self, PyObject *args)
{
    unsigned long long budget = 0;
    int runs = CXLP_RUNS_AUTO;
    if (!PyArg_ParseTuple(args, "|Ki", &budget, &runs) || !store_ok(self))
        return NULL;
    struct cxlp_stage_order o;
    int rc;
    Py_BEGIN_ALLOW_THREADS /* may probe the home: tens of MiB read */
    rc = cxlp_store_stage_order(self->s, budget, runs, &o);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, self->s);
    static const char *const probe[] = {"none", "measured", "recorded"};
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:s,s:d,s:d,s:d}", "block_records",
                         (unsigned long long)o.block_records, "window",
                         (unsigned long long)o.window, "unit_records",
                         (unsigned long long)o.unit_records, "unit_bytes",
                         (unsigned long long)o.unit_bytes, "run_units",
                         (unsigned long long)o.run_units, "probe", probe[o.probed == 1 || o.probed == 2 ? o.probed : 0],
                         "random_ratio", o.random_ratio, "seq_bps", o.seq_bps, "random_bps",
                         o.random_bps);
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

/* locate(i) -> dict: cxlp_store_locate's fields (dataset.py adds names). */
static PyObject *store_locate(StoreObject *self, PyObject *args)
{
    unsigned long long i;
    if (!PyArg_ParseTuple(args, "K", &i) || !store_ok(self))
        return NULL;
    struct cxlp_record_loc l;
    int rc = cxlp_store_locate(self->s, i, &l);
    if (rc)
        return core_raise(rc, NULL);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:k}", "shard", (unsigned long long)l.shard,
                         "index", (unsigned long long)l.index, "shard_records",
                         (unsigned long long)l.shard_records, "version",
                         (unsigned long long)l.version, "heat", (unsigned long long)l.heat,
                         "tiers", (unsigned long)l.tiers);
}

static PyObject *store_get_tiered(StoreObject *self, void *closure)
{
    (void)closure;
    if (!store_ok(self))
        return NULL;
    return PyBool_FromLong(cxlp_store_tiered(self->s));
}

/* None, or the seed of a shuffled ingest. */
static PyObject *store_ingest_shuffle(StoreObject *self, PyObject *unused)
{
    (void)unused;
    if (!store_ok(self))
        return NULL;
    uint64_t seed = 0;
    if (cxlp_store_ingest_shuffle(self->s, &seed) != 1)
        Py_RETURN_NONE;
    return PyLong_FromUnsignedLongLong(seed);
}

/* source_index(i) / record_of_source(j): i and j are ints in [0, len). */
static PyObject *store_map(StoreObject *self, PyObject *args, int inverse)
{
    unsigned long long i;
    if (!PyArg_ParseTuple(args, "K", &i) || !store_ok(self))
        return NULL;
    uint64_t out;
    int rc = inverse ? cxlp_store_record_of_source(self->s, i, &out)
                     : cxlp_store_source_index(self->s, i, &out);
    if (rc)
        return core_raise(rc, NULL);
    return PyLong_FromUnsignedLongLong(out);
}

static PyObject *store_source_index(StoreObject *self, PyObject *args)
{
    return store_map(self, args, 0);
}

static PyObject *store_record_of_source(StoreObject *self, PyObject *args)
{
    return store_map(self, args, 1);
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

/* A contiguous C buffer of integers of itemsize bytes (8: int64 or uint64; 4:
 * int32 or uint32) from obj, or -1 with a TypeError naming arg. */
static int int_buffer(PyObject *obj, Py_buffer *b, int itemsize, int writable, const char *arg)
{
    if (PyObject_GetBuffer(obj, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT |
                                       (writable ? PyBUF_WRITABLE : 0)) < 0)
        return -1;
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    const char *kinds = itemsize == 8 ? "qlQL" : "iI";
    if (b->itemsize != itemsize || !strchr(kinds, *f) || f[1]) {
        PyBuffer_Release(b);
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous%s buffer of %d-bit integers",
                     arg, writable ? " writable" : "", itemsize * 8);
        return -1;
    }
    return 0;
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
        if (int_buffer(order, &b, 8, 0, "order (not a Sampler)") < 0)
            return NULL;
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

/* Field `field` when it is a variable-length one, else NULL with a
 * ValueError naming the method `what`. */
static const struct cxlp_field *var_field(StoreObject *self, unsigned int field,
                                          const char *what)
{
    const struct cxlp_schema *sc = cxlp_store_schema(self->s);
    if (field >= sc->n_fields || !CXLP_FIELD_VAR(&sc->fields[field])) {
        PyErr_Format(PyExc_ValueError, "%s: field %u is not a variable-length field of the "
                     "dataset", what, field);
        return NULL;
    }
    return &sc->fields[field];
}

/* lengths(out, field=0): the length in elements of variable-length field
 * `field` of every record, into out (a writable int32 buffer of exactly
 * len(dataset) entries): Megatron's IndexedDataset.sequence_lengths. An
 * index lookup per record, no data read; a length past INT32_MAX (what
 * Megatron's int32 lengths hold) is an OverflowError naming the record. */
static PyObject *store_lengths(StoreObject *self, PyObject *args)
{
    PyObject *obj;
    unsigned int field = 0;
    if (!PyArg_ParseTuple(args, "O|I", &obj, &field) || !store_ok(self))
        return NULL;
    const struct cxlp_field *fd = var_field(self, field, "lengths");
    if (!fd)
        return NULL;
    Py_buffer b;
    if (int_buffer(obj, &b, 4, 1, "lengths' out") < 0)
        return NULL;
    uint64_t n = cxlp_store_count(self->s), bad = UINT64_MAX;
    if ((uint64_t)(b.len / 4) != n) {
        PyBuffer_Release(&b);
        return PyErr_Format(PyExc_ValueError, "lengths: out holds %lld entries, the dataset "
                            "has %llu records", (long long)(b.len / 4), (unsigned long long)n);
    }
    uint64_t unit = (uint64_t)cxlp_dtype_size(fd->dtype);
    int32_t *out = b.buf;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    for (uint64_t i = 0; i < n && !rc; i++) {
        struct cxlp_view v;
        if ((rc = cxlp_store_read_field(self->s, i, field, &v)))
            break;
        if (v.len / unit > INT32_MAX) {
            bad = i;
            break;
        }
        out[i] = (int32_t)(v.len / unit);
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&b);
    if (rc)
        return core_raise(rc, self->s);
    if (bad != UINT64_MAX)
        return PyErr_Format(PyExc_OverflowError, "lengths: record %llu has more than "
                            "2^31-1 elements", (unsigned long long)bad);
    Py_RETURN_NONE;
}

/* gather(ids, offsets, counts, dest, out, field=0): piece j copies elements
 * [offsets[j], offsets[j] + counts[j]) of field `field` (variable-length) of
 * record ids[j] into out at element dest[j] (ids..dest: int64 buffers of one
 * length; out: a writable buffer whose item size is the field's dtype's).
 * What a batch of Megatron GPT samples is made of (pieces of documents,
 * integrations/megatron.py): one call per batch, the GIL released. Every
 * piece is checked against its record and against out before anything is
 * copied: IndexError names the first bad piece. */
static PyObject *store_gather(StoreObject *self, PyObject *args)
{
    PyObject *o[5];
    unsigned int field = 0;
    if (!PyArg_ParseTuple(args, "OOOOO|I", &o[0], &o[1], &o[2], &o[3], &o[4], &field) ||
        !store_ok(self))
        return NULL;
    const struct cxlp_field *fd = var_field(self, field, "gather");
    if (!fd)
        return NULL;
    static const char *names[] = {"ids", "offsets", "counts", "dest"};
    Py_buffer b[5];
    int got = 0;
    PyObject *ret = NULL;
    for (; got < 4; got++)
        if (int_buffer(o[got], &b[got], 8, 0, names[got]) < 0)
            goto done;
    if (PyObject_GetBuffer(o[4], &b[4], PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0)
        goto done;
    got = 5;
    const uint64_t unit = (uint64_t)cxlp_dtype_size(fd->dtype);
    const uint64_t npieces = (uint64_t)(b[0].len / 8), cap = (uint64_t)b[4].len / unit;
    if ((uint64_t)b[4].len % unit) {
        PyErr_Format(PyExc_TypeError, "gather: out's size is not a multiple of the field's "
                     "%llu-byte elements", (unsigned long long)unit);
        goto done;
    }
    for (int k = 1; k < 4; k++)
        if ((uint64_t)(b[k].len / 8) != npieces) {
            PyErr_Format(PyExc_ValueError, "gather: %s has %lld entries, ids %llu", names[k],
                         (long long)(b[k].len / 8), (unsigned long long)npieces);
            goto done;
        }
    const int64_t *ids = b[0].buf, *off = b[1].buf, *cnt = b[2].buf, *dst = b[3].buf;
    const uint64_t n = cxlp_store_count(self->s);
    char *out = b[4].buf;
    uint64_t bad = UINT64_MAX;
    int rc = 0;
    Py_BEGIN_ALLOW_THREADS
    /* check every piece first, so a bad one copies nothing */
    for (uint64_t j = 0; j < npieces && !rc; j++) {
        struct cxlp_view v;
        if (ids[j] < 0 || (uint64_t)ids[j] >= n || off[j] < 0 || cnt[j] < 0 || dst[j] < 0 ||
            (uint64_t)dst[j] > cap || (uint64_t)cnt[j] > cap - (uint64_t)dst[j]) {
            bad = j;
            break;
        }
        if ((rc = cxlp_store_read_field(self->s, (uint64_t)ids[j], field, &v)))
            break;
        uint64_t have = v.len / unit;
        if ((uint64_t)off[j] > have || (uint64_t)cnt[j] > have - (uint64_t)off[j]) {
            bad = j;
            break;
        }
    }
    for (uint64_t j = 0; j < npieces && !rc && bad == UINT64_MAX; j++) {
        struct cxlp_view v;
        if (!(rc = cxlp_store_read_field(self->s, (uint64_t)ids[j], field, &v)))
            memcpy(out + (uint64_t)dst[j] * unit,
                   (const char *)v.data + (uint64_t)off[j] * unit, (uint64_t)cnt[j] * unit);
    }
    Py_END_ALLOW_THREADS
    if (rc)
        core_raise(rc, self->s);
    else if (bad != UINT64_MAX)
        PyErr_Format(PyExc_IndexError, "gather: piece %llu (record %lld, elements [%lld, "
                     "+%lld), to %lld) lies outside its record or out (%llu elements)",
                     (unsigned long long)bad, (long long)ids[bad], (long long)off[bad],
                     (long long)cnt[bad], (long long)dst[bad], (unsigned long long)cap);
    else
        ret = Py_NewRef(Py_None);
done:
    for (int k = 0; k < got; k++)
        PyBuffer_Release(&b[k]);
    return ret;
}

/* rows(first, count): records [first, first + count) of a fixed-size
 * one-field dataset as one Array [count, *shape] viewing the pool (no copy),
 * where they lie in one shard (spans() says where shards end); ValueError
 * otherwise, and on a pool of tiers (whose copies move: read records there). */
static PyObject *store_rows(StoreObject *self, PyObject *args)
{
    unsigned long long first, count;
    if (!PyArg_ParseTuple(args, "KK", &first, &count) || !store_ok(self))
        return NULL;
    const struct cxlp_schema *sc = cxlp_store_schema(self->s);
    const struct cxlp_field *f = &sc->fields[0];
    if (sc->n_fields != 1 || !sc->fixed || f->ndim + 1 > ARRAY_MAX_DIMS ||
        cxlp_store_tiered(self->s) || count == 0)
        return PyErr_Format(PyExc_ValueError, "rows: needs count > 0 records of a fixed-size "
                            "one-field dataset on a pool without tiers");
    struct cxlp_span sp;
    size_t need = 0;
    int rc = cxlp_store_spans(self->s, first, count, &sp, 1, &need);
    if (rc && rc != CXLP_ERANGE)
        return core_raise(rc, NULL);
    if (need != 1)
        return PyErr_Format(PyExc_ValueError, "rows: records [%llu, +%llu) cross %zu shards",
                            first, count, need);
    struct cxlp_view v;
    if ((rc = cxlp_store_read(self->s, first, &v)))
        return core_raise(rc, NULL);
    int64_t shape[ARRAY_MAX_DIMS];
    shape[0] = (int64_t)count;
    for (int d = 0; d < f->ndim; d++)
        shape[d + 1] = (int64_t)f->shape[d];
    PyObject *own;
    void *data = store_export(self, v.data, sp.len, &own);
    if (!data)
        return NULL;
    PyObject *out = array_new(own, data, f->dtype, f->ndim + 1, shape);
    Py_DECREF(own);
    return out;
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
    {"ingest_shuffle", (PyCFunction)store_ingest_shuffle, METH_NOARGS,
     "The seed of a shuffled ingest, or None."},
    {"source_index", (PyCFunction)store_source_index, METH_VARARGS,
     "source_index(i): the input position of record i."},
    {"record_of_source", (PyCFunction)store_record_of_source, METH_VARARGS,
     "record_of_source(j): the record holding input record j."},
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
    {"lengths", (PyCFunction)store_lengths, METH_VARARGS,
     "lengths(out, field=0): every record's length in elements into an int32 buffer."},
    {"gather", (PyCFunction)store_gather, METH_VARARGS,
     "gather(ids, offsets, counts, dest, out, field=0): pieces of records into out."},
    {"rows", (PyCFunction)store_rows, METH_VARARGS,
     "rows(first, count): consecutive fixed-size records of one shard as one Array."},
    {"close", (PyCFunction)store_close, METH_NOARGS, "No more get(); views stay valid."},
    {"shards", (PyCFunction)store_shards, METH_NOARGS,
     "n_shards, per_shard (records each; 0 when they differ), max_bytes of one."},
    {"format", (PyCFunction)store_format, METH_NOARGS,
     "{'version': shard format, 'block_bytes': of a block sum (0: none), 'sums_area'} "
     "(cxlp_store_format)."},
    {"units", (PyCFunction)store_units, METH_NOARGS,
     "units() -> {'n_units', 'per_unit', 'copies': per tier}: the dataset's staging units."},
    {"stage_unit", (PyCFunction)store_stage_unit, METH_VARARGS,
     "stage_unit(budget=0) -> {'records', 'bytes'}: what a loader with that budget stages."},
    {"stage_order", (PyCFunction)store_stage_order, METH_VARARGS,
     "stage_order(budget=0, runs=-1) -> the block order a loader's staging keeps up with."},
    {"locate", (PyCFunction)store_locate, METH_VARARGS,
     "locate(i) -> {shard, index, shard_records, version, heat, tiers (a bit mask)}."},
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
