/*
 * _core_store.c - Store: one dataset of a pool. get(i) returns an Array over
 * the record in pool memory: no copy. The C store is closed when the last
 * Array (and so the last tensor) viewing it is gone, not at close().
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
    const char *n = PyUnicode_AsUTF8(name);
    if (!n)
        return -1;
    int rc;
    cxlp_store *s = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_store_open(pool->p, n, &s);
    Py_END_ALLOW_THREADS
    if (rc) {
        core_raise(rc, pool->p);
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
    Py_TYPE(self)->tp_free((PyObject *)self);
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

/* Field k of record i as Python sees it: a str field as str (UTF-8,
 * checked when written), any other field as an Array over pool memory:
 * variable-length 1-D, fixed-shape in its shape. */
static PyObject *field_value(StoreObject *self, const struct cxlp_field *f,
                             const struct cxlp_view *v)
{
    int64_t shape[ARRAY_MAX_DIMS];
    if (f->dtype == CXLP_DT_STR)
        return PyUnicode_DecodeUTF8(v->data, (Py_ssize_t)v->len, "strict");
    if (CXLP_FIELD_VAR(f)) {
        shape[0] = (int64_t)(v->len / (uint64_t)cxlp_dtype_size(f->dtype));
        return array_new((PyObject *)self, (void *)v->data, f->dtype, 1, shape);
    }
    for (int d = 0; d < f->ndim; d++)
        shape[d] = (int64_t)f->shape[d];
    return array_new((PyObject *)self, (void *)v->data, f->dtype, f->ndim, shape);
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
        Py_ssize_t m = PySequence_Fast_GET_SIZE(seq);
        for (Py_ssize_t k = 0; k < m; k++) {
            long f = PyLong_AsLong(PySequence_Fast_GET_ITEM(seq, k));
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
    struct cxlp_view v[CXLP_MAX_FIELDS];
    for (uint32_t k = 0; k < nf; k++) {
        int rc = cxlp_store_read_field(self->s, (uint64_t)i, fields[k], &v[k]);
        if (rc)
            return core_raise(rc, NULL);
    }
    if (sc->n_fields == 1 && which == Py_None)
        return field_value(self, &sc->fields[0], &v[0]);
    PyObject *out = PyDict_New();
    for (uint32_t k = 0; out && k < nf; k++) {
        const struct cxlp_field *f = &sc->fields[fields[k]];
        PyObject *a = field_value(self, f, &v[k]);
        if (!a || PyDict_SetItemString(out, f->name, a) < 0)
            Py_CLEAR(out);
        Py_XDECREF(a);
    }
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
            PyTuple_SET_ITEM(shape, d, PyLong_FromUnsignedLongLong(f->shape[d]));
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
    return array_new((PyObject *)self, (void *)docs, CXLP_DT_I64, 1, shape);
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
    {"hugepages", (PyCFunction)store_hugepages, METH_NOARGS,
     "Move the records onto 2 MiB pages (once per pool; see cxlp_store_hugepages)."},
    {"close", (PyCFunction)store_close, METH_NOARGS, "No more get(); views stay valid."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods store_as_seq = {.sq_length = (lenfunc)store_len};

PyTypeObject StoreType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cxl_dataloader._core.Store",
    .tp_basicsize = sizeof(StoreObject),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "Store(pool, name): an open dataset.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)store_init,
    .tp_dealloc = (destructor)store_dealloc,
    .tp_methods = store_methods,
    .tp_as_sequence = &store_as_seq,
};
