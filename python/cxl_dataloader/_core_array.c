/*
 * _core_array.c - Array: an n-d view of pool or ring memory, exported to
 * torch by DLPack (the protocol exactly: DLManagedTensorVersioned in a
 * "dltensor_versioned" capsule, renamed "used_dltensor_versioned" by the
 * consumer; one allocation for struct + shape + strides; manager_ctx holds
 * the Array, so the memory stays mapped while any tensor views it; the
 * deleter takes the GIL) and to numpy by the buffer protocol. Writable:
 * what an Array views is either a ring slot (the loader's own memory) or a
 * copy-on-write view of the pool (see _core_store.c), so a consumer's write
 * stays in this process and flags.writeable tells the truth.
 * The legacy unversioned capsule is produced for consumers that do not ask
 * for max_version >= (1, 0).
 */
#include "_core.h"
#include "dlpack.h"

static DLDataType dl_dtype(int dt)
{
    DLDataType d = {kDLUInt, 8, 1};
    switch (dt) {
    case CXLP_DT_U8: d.code = kDLUInt; d.bits = 8; break;
    case CXLP_DT_I8: d.code = kDLInt; d.bits = 8; break;
    case CXLP_DT_U16: d.code = kDLUInt; d.bits = 16; break;
    case CXLP_DT_I16: d.code = kDLInt; d.bits = 16; break;
    case CXLP_DT_U32: d.code = kDLUInt; d.bits = 32; break;
    case CXLP_DT_I32: d.code = kDLInt; d.bits = 32; break;
    case CXLP_DT_U64: d.code = kDLUInt; d.bits = 64; break;
    case CXLP_DT_I64: d.code = kDLInt; d.bits = 64; break;
    case CXLP_DT_F16: d.code = kDLFloat; d.bits = 16; break;
    case CXLP_DT_BF16: d.code = kDLBfloat; d.bits = 16; break;
    case CXLP_DT_F32: d.code = kDLFloat; d.bits = 32; break;
    case CXLP_DT_F64: d.code = kDLFloat; d.bits = 64; break;
    case CXLP_DT_BOOL: d.code = kDLBool; d.bits = 8; break;
    case CXLP_DT_STR: d.code = kDLUInt; d.bits = 8; break; /* UTF-8 bytes */
    default: break;
    }
    return d;
}

static const char *buffer_format(int dt)
{
    switch (dt) {
    case CXLP_DT_U8: return "B";
    case CXLP_DT_I8: return "b";
    case CXLP_DT_U16: return "H";
    case CXLP_DT_I16: return "h";
    case CXLP_DT_U32: return "I";
    case CXLP_DT_I32: return "i";
    case CXLP_DT_U64: return "Q";
    case CXLP_DT_I64: return "q";
    case CXLP_DT_F16: return "e";
    case CXLP_DT_F32: return "f";
    case CXLP_DT_F64: return "d";
    case CXLP_DT_BOOL: return "?";
    case CXLP_DT_STR: return "B";
    default: return NULL; /* bfloat16 has no struct-module code */
    }
}

PyObject *array_new(PyObject *owner, void *data, int dtype, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > ARRAY_MAX_DIMS)
        return PyErr_Format(PyExc_ValueError, "array of %d dimensions (max %d)", ndim,
                            ARRAY_MAX_DIMS);
    ArrayObject *a = PyObject_New(ArrayObject, &ArrayType);
    if (!a)
        return NULL;
    a->owner = Py_NewRef(owner);
    a->data = data;
    a->dtype = dtype;
    a->ndim = ndim;
    Py_ssize_t stride = cxlp_dtype_size(dtype);
    for (int i = ndim - 1; i >= 0; i--) {
        a->shape[i] = shape[i];
        a->bshape[i] = (Py_ssize_t)shape[i];
        a->bstrides[i] = stride;
        stride *= (Py_ssize_t)shape[i];
    }
    return (PyObject *)a;
}

static void array_dealloc(ArrayObject *a)
{
    Py_XDECREF(a->owner);
    core_free((PyObject *)a);
}

/* ---- DLPack ---- */

static void fill_tensor(void *data, int dtype, int ndim, const int64_t *dims, DLTensor *t,
                        int64_t *shape, int64_t *strides)
{
    t->data = data;
    t->device.device_type = kDLCPU;
    t->device.device_id = 0;
    t->ndim = ndim;
    t->dtype = dl_dtype(dtype);
    int64_t stride = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        shape[i] = dims[i];
        strides[i] = stride;
        stride *= dims[i];
    }
    t->shape = shape;
    t->strides = strides;
    t->byte_offset = 0;
}

static void release_owner(void *ctx)
{
    if (!Py_IsInitialized())
        return; /* interpreter gone: the process is exiting, nothing to return */
    PyGILState_STATE g = PyGILState_Ensure();
    Py_DECREF((PyObject *)ctx);
    PyGILState_Release(g);
}

static void deleter_versioned(DLManagedTensorVersioned *m)
{
    release_owner(m->manager_ctx);
    free(m);
}

static void deleter_legacy(DLManagedTensor *m)
{
    release_owner(m->manager_ctx);
    free(m);
}

/* The capsule destructors run when a capsule no consumer took is freed,
 * typically while the consumer's refusal is the exception in flight: it is
 * kept (as numpy's dlpack.c keeps it), and only an error of the lookup
 * here is dropped. */
static void capsule_versioned(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "used_dltensor_versioned"))
        return;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    DLManagedTensorVersioned *m = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (m && m->deleter)
        m->deleter(m);
    PyErr_Clear();
    PyErr_Restore(t, v, tb);
}

static void capsule_legacy(PyObject *cap)
{
    if (PyCapsule_IsValid(cap, "used_dltensor"))
        return;
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m && m->deleter)
        m->deleter(m);
    PyErr_Clear();
    PyErr_Restore(t, v, tb);
}

PyObject *dlpack_capsule(PyObject *owner, void *data, int dtype, int ndim,
                         const int64_t *dims, int readonly, int versioned)
{
    size_t sz = (size_t)ndim * 2 * sizeof(int64_t);
    if (versioned) {
        DLManagedTensorVersioned *m = malloc(sizeof *m + sz);
        if (!m)
            return PyErr_NoMemory();
        int64_t *shape = (int64_t *)(m + 1);
        m->version.major = DLPACK_MAJOR_VERSION;
        m->version.minor = DLPACK_MINOR_VERSION;
        m->manager_ctx = Py_NewRef(owner);
        m->deleter = deleter_versioned;
        m->flags = readonly ? DLPACK_FLAG_BITMASK_READ_ONLY : 0;
        fill_tensor(data, dtype, ndim, dims, &m->dl_tensor, shape, shape + ndim);
        PyObject *cap = PyCapsule_New(m, "dltensor_versioned", capsule_versioned);
        if (!cap)
            deleter_versioned(m);
        return cap;
    }
    DLManagedTensor *m = malloc(sizeof *m + sz);
    if (!m)
        return PyErr_NoMemory();
    int64_t *shape = (int64_t *)(m + 1);
    m->manager_ctx = Py_NewRef(owner);
    m->deleter = deleter_legacy;
    fill_tensor(data, dtype, ndim, dims, &m->dl_tensor, shape, shape + ndim);
    PyObject *cap = PyCapsule_New(m, "dltensor", capsule_legacy);
    if (!cap)
        deleter_legacy(m);
    return cap;
}

/* ---- per-slot templates ---- */

struct dl_tmpl {
    DLManagedTensorVersioned m;
    int64_t shape[ARRAY_MAX_DIMS], strides[ARRAY_MAX_DIMS];
};

/* The template belongs to the Loader: only the owner's reference goes. */
static void deleter_tmpl(DLManagedTensorVersioned *m)
{
    release_owner(m->manager_ctx);
}

dl_tmpl *dl_tmpl_new(int dtype, int ndim, const int64_t *dims)
{
    if (ndim < 1 || ndim > ARRAY_MAX_DIMS) {
        PyErr_Format(PyExc_ValueError, "array of %d dimensions (1..%d)", ndim, ARRAY_MAX_DIMS);
        return NULL;
    }
    dl_tmpl *t = calloc(1, sizeof *t);
    if (!t) {
        PyErr_NoMemory();
        return NULL;
    }
    t->m.version.major = DLPACK_MAJOR_VERSION;
    t->m.version.minor = DLPACK_MINOR_VERSION;
    t->m.deleter = deleter_tmpl;
    fill_tensor(NULL, dtype, ndim, dims, &t->m.dl_tensor, t->shape, t->strides);
    return t;
}

PyObject *dl_tmpl_capsule(dl_tmpl *t, PyObject *owner, void *data, int64_t dim0)
{
    /* row-major strides do not depend on the first dimension */
    t->m.dl_tensor.data = data;
    t->shape[0] = dim0;
    t->m.manager_ctx = Py_NewRef(owner);
    PyObject *cap = PyCapsule_New(&t->m, "dltensor_versioned", capsule_versioned);
    if (!cap)
        Py_DECREF(owner);
    return cap;
}

void dl_tmpl_free(dl_tmpl *t)
{
    free(t);
}

static PyObject *array_dlpack(ArrayObject *a, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"stream", "max_version", "dl_device", "copy", NULL};
    PyObject *stream = Py_None, *max_version = Py_None, *dl_device = Py_None, *copy = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOO", kwlist, &stream, &max_version,
                                     &dl_device, &copy))
        return NULL;
    if (stream != Py_None && !(PyLong_Check(stream) && PyLong_AsLong(stream) == -1))
        return PyErr_Format(PyExc_ValueError, "stream must be None or -1 for CPU memory");
    if (copy == Py_True)
        return PyErr_Format(PyExc_BufferError, "copy=True: this array exports views only");
    if (dl_device != Py_None) {
        int dt = 0, di = 0;
        if (!PyArg_ParseTuple(dl_device, "ii", &dt, &di))
            return NULL;
        if (dt != kDLCPU)
            return PyErr_Format(PyExc_BufferError, "dl_device %d: only CPU (1) is served", dt);
    }
    long major = 0;
    if (max_version != Py_None) {
        long minor;
        if (!PyArg_ParseTuple(max_version, "ll", &major, &minor))
            return NULL;
    }
    return dlpack_capsule((PyObject *)a, a->data, a->dtype, a->ndim, a->shape, 0, major >= 1);
}

static PyObject *array_dlpack_device(ArrayObject *a, PyObject *unused)
{
    (void)a;
    (void)unused;
    return Py_BuildValue("(ii)", kDLCPU, 0);
}

/* ---- buffer protocol ---- */

static int array_getbuffer(ArrayObject *a, Py_buffer *view, int flags)
{
    const char *fmt = buffer_format(a->dtype);
    if (!fmt) {
        PyErr_Format(PyExc_BufferError, "dtype %s has no buffer format; use DLPack",
                     cxlp_dtype_name(a->dtype));
        return -1;
    }
    Py_ssize_t n = 1;
    for (int i = 0; i < a->ndim; i++)
        n *= a->bshape[i];
    view->buf = a->data;
    view->obj = Py_NewRef((PyObject *)a);
    view->itemsize = cxlp_dtype_size(a->dtype);
    view->len = n * view->itemsize;
    view->readonly = 0;
    view->ndim = a->ndim;
    view->format = (flags & PyBUF_FORMAT) ? (char *)fmt : NULL;
    view->shape = (flags & PyBUF_ND) ? a->bshape : NULL;
    view->strides = (flags & PyBUF_STRIDES) ? a->bstrides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}


static PyObject *array_get_shape(ArrayObject *a, void *c)
{
    (void)c;
    PyObject *t = PyTuple_New(a->ndim);
    for (int i = 0; t && i < a->ndim; i++)
        PyTuple_SetItem(t, i, PyLong_FromLongLong(a->shape[i]));
    return t;
}

static PyObject *array_get_dtype(ArrayObject *a, void *c)
{
    (void)c;
    return PyUnicode_FromString(cxlp_dtype_name(a->dtype));
}

static PyMethodDef array_methods[] = {
    {"__dlpack__", (PyCFunction)(void (*)(void))array_dlpack, METH_VARARGS | METH_KEYWORDS,
     "DLPack capsule viewing this memory (no copy)."},
    {"__dlpack_device__", (PyCFunction)array_dlpack_device, METH_NOARGS, "(kDLCPU, 0)"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef array_getset[] = {
    {"shape", (getter)array_get_shape, NULL, "shape", NULL},
    {"dtype", (getter)array_get_dtype, NULL, "dtype name (cxlpool's)", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot ArrayType_slots[] = {
    {Py_tp_doc, (void *)"A zero-copy view of pool or batch-ring memory (DLPack, buffer protocol)."},
    {Py_tp_dealloc, (void *)array_dealloc},
    {Py_tp_methods, (void *)array_methods},
    {Py_tp_getset, (void *)array_getset},
    {Py_bf_getbuffer, (void *)array_getbuffer},
    {0, NULL},
};
PyType_Spec ArrayType_spec = {
    .name = "cxl_dataloader._core.Array",
    .basicsize = sizeof(ArrayObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = ArrayType_slots,
};
PyTypeObject *ArrayTypeP;
