/*
 * _core_writer.c - Writer: the streaming writer for the Python importers
 * (Arrow, Parquet, WebDataset, JSONL). They hand over whole batches of
 * records column-wise, the way Arrow holds them, so a batch of thousands of
 * records is one C call with the GIL released, and its bytes are read
 * straight from the Arrow/NumPy buffers (buffer protocol), not converted
 * per record.
 */
#include "_core.h"

typedef struct {
    PyObject_HEAD
    cxlp_writer *w;
    PyObject *pool;          /* keeps the pool handle open while writing */
    uint32_t nf;
    int var[CXLP_MAX_FIELDS];
} WriterObject;

/* fields: [(name, dtype, shape)], shape a tuple of ints, (None,) for a
 * variable-length field. */
static int parse_fields(PyObject *fields, struct cxlp_schema *sc, int *var)
{
    memset(sc, 0, sizeof *sc);
    PyObject *seq = PySequence_Fast(fields, "fields must be a sequence of (name, dtype, shape)");
    if (!seq)
        return -1;
    Py_ssize_t n = core_fast_size(seq);
    int rc = -1, nvar = 0;
    if (n < 1 || n > CXLP_MAX_FIELDS) {
        PyErr_Format(PyExc_ValueError, "%zd fields: a dataset has 1..%d (choose with columns=)",
                     n, CXLP_MAX_FIELDS);
        goto out;
    }
    sc->n_fields = (uint32_t)n;
    for (Py_ssize_t k = 0; k < n; k++) {
        const char *name, *dtype;
        PyObject *shape;
        struct cxlp_field *f = &sc->fields[k];
        if (!PyArg_ParseTuple(core_fast_item(seq, k), "ssO;field (name, dtype, shape)",
                              &name, &dtype, &shape))
            goto out;
        if (strlen(name) == 0 || strlen(name) >= sizeof f->name) {
            PyErr_Format(PyExc_ValueError, "field name '%s': 1..%zu bytes", name,
                         sizeof f->name - 1);
            goto out;
        }
        strcpy(f->name, name);
        f->dtype = cxlp_dtype_parse(dtype);
        if (f->dtype < 0) {
            PyErr_Format(PyExc_ValueError, "field '%s': unknown dtype '%s'", name, dtype);
            goto out;
        }
        PyObject *sh = PySequence_Fast(shape, "shape must be a tuple");
        if (!sh)
            goto out;
        Py_ssize_t nd = core_fast_size(sh);
        if (nd > CXLP_MAX_DIMS) {
            Py_DECREF(sh);
            PyErr_Format(PyExc_ValueError, "field '%s': %zd dimensions (max %d)", name, nd,
                         CXLP_MAX_DIMS);
            goto out;
        }
        f->ndim = (int)nd;
        for (Py_ssize_t d = 0; d < nd; d++) {
            PyObject *x = core_fast_item(sh, d);
            if (x == Py_None && d == 0 && nd == 1) {
                var[k] = 1;
                f->shape[0] = 0;
                continue;
            }
            unsigned long long v = PyLong_AsUnsignedLongLong(x);
            if (PyErr_Occurred() || v == 0) {
                Py_DECREF(sh);
                PyErr_Clear();
                PyErr_Format(PyExc_ValueError, "field '%s': shape[%zd] must be a positive int "
                             "(or the shape (None,) for a variable length)", name, d);
                goto out;
            }
            f->shape[d] = v;
        }
        Py_DECREF(sh);
        nvar += var[k];
    }
    sc->fixed = nvar == 0;
    rc = 0;
out:
    Py_DECREF(seq);
    return rc;
}

static int writer_init(WriterObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"pool", "name", "fields", "shard_bytes", "hugepages", NULL};
    PoolObject *pool;
    const char *name;
    PyObject *fields;
    unsigned long long shard_bytes = 0;
    int hugepages = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!sO|$Kp", kwlist, &PoolType, &pool, &name,
                                     &fields, &shard_bytes, &hugepages))
        return -1;
    if (self->w) {
        PyErr_SetString(PyExc_RuntimeError, "Writer already initialized");
        return -1;
    }
    if (!pool->p) {
        PyErr_SetString(PyExc_ValueError, "pool is closed");
        return -1;
    }
    struct cxlp_schema sc;
    if (parse_fields(fields, &sc, self->var) < 0)
        return -1;
    struct cxlp_writer_opts o = {.shard_bytes = shard_bytes, .no_hugepages = !hugepages};
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_writer_begin(pool->p, name, &sc, &o, &self->w);
    Py_END_ALLOW_THREADS
    if (rc) {
        core_raise(rc, pool->p);
        return -1;
    }
    self->nf = sc.n_fields;
    self->pool = Py_NewRef((PyObject *)pool);
    return 0;
}

static void writer_dealloc(WriterObject *self)
{
    if (self->w) {
        Py_BEGIN_ALLOW_THREADS
        cxlp_writer_abort(self->w); /* never committed: nothing becomes visible */
        Py_END_ALLOW_THREADS
    }
    Py_XDECREF(self->pool);
    core_free((PyObject *)self);
}

static int writer_ok(WriterObject *self)
{
    if (!self->w) {
        PyErr_SetString(PyExc_ValueError, "writer is committed or aborted");
        return 0;
    }
    return 1;
}

/* append_columns(n, cols): cols[k] is a buffer (fixed-shape field: n
 * values) or (values, offsets) (variable-length field: offsets an int64
 * buffer of n+1 element positions into values). */
static PyObject *writer_append_columns(WriterObject *self, PyObject *args)
{
    unsigned long long n;
    PyObject *cols;
    if (!PyArg_ParseTuple(args, "KO", &n, &cols) || !writer_ok(self))
        return NULL;
    PyObject *seq = PySequence_Fast(cols, "cols must be a sequence");
    if (!seq)
        return NULL;
    Py_buffer bufs[2 * CXLP_MAX_FIELDS];
    int nb = 0;
    struct cxlp_column c[CXLP_MAX_FIELDS];
    PyObject *ret = NULL;
    if (core_fast_size(seq) != (Py_ssize_t)self->nf) {
        PyErr_Format(PyExc_ValueError, "%zd columns for %u fields",
                     core_fast_size(seq), self->nf);
        goto out;
    }
    for (uint32_t k = 0; k < self->nf; k++) {
        PyObject *item = core_fast_item(seq, k), *vals = item, *offs = NULL;
        if (self->var[k] && (!PyTuple_Check(item) || PyTuple_Size(item) != 2)) {
            PyErr_Format(PyExc_TypeError, "column %u: a variable-length field takes "
                         "(values, offsets)", k);
            goto out;
        }
        if (self->var[k]) {
            vals = PyTuple_GetItem(item, 0);
            offs = PyTuple_GetItem(item, 1);
        }
        if (PyObject_GetBuffer(vals, &bufs[nb], PyBUF_C_CONTIGUOUS) < 0)
            goto out;
        c[k].data = bufs[nb].buf;
        c[k].len = (uint64_t)bufs[nb].len;
        c[k].offsets = NULL;
        nb++;
        if (!offs)
            continue;
        if (PyObject_GetBuffer(offs, &bufs[nb], PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
            goto out;
        const char *f = bufs[nb].format ? bufs[nb].format : "B";
        if (*f == '<' || *f == '=' || *f == '@')
            f++;
        nb++;
        if (bufs[nb - 1].itemsize != 8 || !strchr("qlQL", *f) ||
            (uint64_t)bufs[nb - 1].len != (n + 1) * 8) {
            PyErr_Format(PyExc_ValueError, "column %u: offsets must be %llu int64 values", k,
                         n + 1);
            goto out;
        }
        c[k].offsets = bufs[nb - 1].buf;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_writer_append_columns(self->w, n, c);
    Py_END_ALLOW_THREADS
    if (rc)
        core_raise(rc, self->w);
    else
        ret = Py_NewRef(Py_None);
out:
    for (int i = 0; i < nb; i++)
        PyBuffer_Release(&bufs[i]);
    Py_DECREF(seq);
    return ret;
}

static PyObject *writer_commit(WriterObject *self, PyObject *unused)
{
    (void)unused;
    if (!writer_ok(self))
        return NULL;
    cxlp_writer *w = self->w;
    self->w = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_writer_commit(w); /* frees w either way */
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *writer_abort(WriterObject *self, PyObject *unused)
{
    (void)unused;
    if (self->w) {
        cxlp_writer *w = self->w;
        self->w = NULL;
        Py_BEGIN_ALLOW_THREADS
        cxlp_writer_abort(w);
        Py_END_ALLOW_THREADS
    }
    Py_RETURN_NONE;
}

static PyMethodDef writer_methods[] = {
    {"append_columns", (PyCFunction)writer_append_columns, METH_VARARGS,
     "append_columns(n, cols): n records column-wise; cols[k] is a buffer of n values, or "
     "(values, int64 offsets of n+1) for a variable-length field."},
    {"commit", (PyCFunction)writer_commit, METH_NOARGS, "Seal and publish in one catalog flip."},
    {"abort", (PyCFunction)writer_abort, METH_NOARGS, "Drop everything written (no-op after commit)."},
    {NULL, NULL, 0, NULL},
};

static PyType_Slot WriterType_slots[] = {
    {Py_tp_doc, (void *)"Writer(pool, name, fields, *, shard_bytes=0, hugepages=True): a dataset being "
              "written; fields [(name, dtype, shape)] with shape (None,) for a variable length. "
              "Every column lands on 2 MiB pages (shm, numa pools) unless hugepages=False. "
              "Nothing is visible before commit(); a Writer dropped uncommitted is aborted."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)writer_init},
    {Py_tp_dealloc, (void *)writer_dealloc},
    {Py_tp_methods, (void *)writer_methods},
    {0, NULL},
};
PyType_Spec WriterType_spec = {
    .name = "cxl_dataloader._core.Writer",
    .basicsize = sizeof(WriterObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = WriterType_slots,
};
PyTypeObject *WriterTypeP;
