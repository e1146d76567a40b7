/*
 * _core.c - the module: exception mapping, module functions, type setup.
 * Plain CPython C API; no torch, no numpy at build time. Tensors cross as
 * DLPack capsules (see _core_array.c).
 */
#include <errno.h>

#include "_core.h"

/* ---- exceptions ----
 * CXLError (a RuntimeError) is the library's; the subclasses are also the
 * builtin exception Python code expects for the condition, so `except
 * FileNotFoundError` or `except KeyError` work as with files and dicts:
 *   CXLNotFoundError(CXLError, FileNotFoundError)    no such pool (or file)
 *   CXLDatasetNotFoundError(CXLNotFoundError, KeyError)   no such dataset
 *   CXLExistsError(CXLError, FileExistsError)         name taken
 *   CXLPermissionError(CXLError, PermissionError)     EACCES, EPERM, owner,
 *                                                     read-only handle
 *   CXLCorruptError(CXLError)                         checksum or structure
 * An instance's one argument is the library's message (str(e) is it, also
 * for the KeyError one, whose str would otherwise be its repr), e.code the
 * return code (a CXLError.E* constant, or -errno), e.reason the code's
 * meaning (cxlp_strerror); the OSError ones carry the matching errno too. */
PyObject *CoreError;
static PyObject *NotFoundError, *DatasetNotFoundError, *ExistsError, *PermError, *CorruptError;

/* CXLError.__str__: the library's message, as it was given (an OSError
 * subclass would otherwise print "[Errno N] ..."). A Python function made
 * at import, so that it binds as a method: the limited API has no
 * PyInstanceMethod_New to wrap a C function for a class dict. */
static PyObject *error_str_function(void)
{
    static const char src[] = "def __str__(self):\n"
                              "    \"The library's message.\"\n"
                              "    a = self.args\n"
                              "    return str(a[0]) if len(a) == 1 else BaseException.__str__(self)\n";
    PyObject *ns = PyDict_New();
    PyObject *exec = PyDict_GetItemString(PyEval_GetBuiltins(), "exec"); /* borrowed */
    PyObject *r = ns && exec ? PyObject_CallFunction(exec, "sOO", src, ns, ns) : NULL;
    PyObject *fn = r ? PyDict_GetItemString(ns, "__str__") : NULL;
    Py_XINCREF(fn);
    Py_XDECREF(r);
    Py_XDECREF(ns);
    if (!fn && !PyErr_Occurred())
        PyErr_SetString(PyExc_RuntimeError, "_core: CXLError.__str__ not made");
    return fn;
}

static const struct {
    const char *name;
    int code;
} error_codes[] = {
    {"EPANIC", CXLP_EPANIC}, {"ECORRUPT", CXLP_ECORRUPT}, {"EFORMAT", CXLP_EFORMAT},
    {"ELAYOUT", CXLP_ELAYOUT}, {"ENOTFOUND", CXLP_ENOTFOUND}, {"EEXIST", CXLP_EEXIST},
    {"EFULL", CXLP_EFULL}, {"EBUSY", CXLP_EBUSY}, {"EUNSUPPORTED", CXLP_EUNSUPPORTED},
    {"EBADINPUT", CXLP_EBADINPUT}, {"EOWNER", CXLP_EOWNER}, {"ERANGE", CXLP_ERANGE},
    {"ENODEV", CXLP_ENODEV}, {"ECATFULL", CXLP_ECATFULL}, {"EARG", CXLP_EARG},
    {"EREADONLY", CXLP_EREADONLY},
};

/* A new exception class NAME(bases...) of this module; CXLError's dict holds
 * __str__ and the E* code constants, which its subclasses inherit. */
static PyObject *new_error(const char *name, const char *doc, PyObject *bases, int root)
{
    PyObject *dict = PyDict_New();
    if (!dict)
        return NULL;
    if (root) {
        PyObject *meth = error_str_function();
        if (!meth || PyDict_SetItemString(dict, "__str__", meth) < 0) {
            Py_XDECREF(meth);
            Py_DECREF(dict);
            return NULL;
        }
        Py_DECREF(meth);
        for (size_t i = 0; i < sizeof error_codes / sizeof *error_codes; i++) {
            PyObject *v = PyLong_FromLong(error_codes[i].code);
            if (!v || PyDict_SetItemString(dict, error_codes[i].name, v) < 0) {
                Py_XDECREF(v);
                Py_DECREF(dict);
                return NULL;
            }
            Py_DECREF(v);
        }
    }
    char full[96];
    snprintf(full, sizeof full, "cxl_dataloader.%s", name);
    PyObject *cls = PyErr_NewExceptionWithDoc(full, doc, bases, dict);
    Py_DECREF(dict);
    Py_DECREF(bases);
    return cls;
}

static PyObject *raise_error(int rc, const void *handle, int dataset)
{
    PyObject *cls = CoreError;
    int os = 0; /* the errno an OSError subclass carries */
    switch (rc) {
    case CXLP_ENOTFOUND: cls = dataset ? DatasetNotFoundError : NotFoundError; os = ENOENT; break;
    case -ENOENT: cls = NotFoundError; os = ENOENT; break;
    case CXLP_EEXIST: case -EEXIST: cls = ExistsError; os = EEXIST; break;
    case -EACCES: case CXLP_EOWNER: case CXLP_EREADONLY: cls = PermError; os = EACCES; break;
    case -EPERM: cls = PermError; os = EPERM; break;
    case CXLP_ECORRUPT: case CXLP_EPANIC: cls = CorruptError; break;
    default: break;
    }
    const char *msg = cxlp_errmsg(handle);
    PyObject *e = PyObject_CallFunction(cls, "s", msg && *msg ? msg : cxlp_strerror(rc));
    if (!e)
        return NULL;
    PyObject *code = PyLong_FromLong(rc), *reason = PyUnicode_FromString(cxlp_strerror(rc));
    int bad = !code || !reason || PyObject_SetAttrString(e, "code", code) < 0 ||
              PyObject_SetAttrString(e, "reason", reason) < 0;
    Py_XDECREF(code);
    if (!bad && os) {
        PyObject *en = PyLong_FromLong(os);
        bad = !en || PyObject_SetAttrString(e, "errno", en) < 0 ||
              PyObject_SetAttrString(e, "strerror", reason) < 0;
        Py_XDECREF(en);
    }
    Py_XDECREF(reason);
    if (!bad)
        PyErr_SetObject(cls, e);
    Py_DECREF(e);
    return NULL;
}

PyObject *core_raise(int rc, const void *handle)
{
    return raise_error(rc, handle, 0);
}

PyObject *core_raise_dataset(int rc, const void *handle)
{
    return raise_error(rc, handle, 1);
}

static int add_errors(PyObject *m)
{
    CoreError = new_error("CXLError", "A libcxlpool failure: str(e) is the message (what "
                          "failed and where), e.code the return code (CXLError.E* or -errno), "
                          "e.reason its meaning.", Py_BuildValue("(O)", PyExc_RuntimeError), 1);
    if (!CoreError)
        return -1;
    NotFoundError = new_error("CXLNotFoundError", "No such pool (or source file).",
                              Py_BuildValue("(OO)", CoreError, PyExc_FileNotFoundError), 0);
    if (!NotFoundError)
        return -1;
    DatasetNotFoundError = new_error("CXLDatasetNotFoundError", "No such dataset in the pool.",
                                     Py_BuildValue("(OO)", NotFoundError, PyExc_KeyError), 0);
    ExistsError = new_error("CXLExistsError", "A pool or dataset of that name exists already.",
                            Py_BuildValue("(OO)", CoreError, PyExc_FileExistsError), 0);
    PermError = new_error("CXLPermissionError", "Not permitted: file mode, another user's pool, "
                          "or a write through a read-only handle.",
                          Py_BuildValue("(OO)", CoreError, PyExc_PermissionError), 0);
    CorruptError = new_error("CXLCorruptError", "A checksum or structure of the pool does not "
                             "hold (or a handle was poisoned by such a finding).",
                             Py_BuildValue("(O)", CoreError), 0);
    if (!DatasetNotFoundError || !ExistsError || !PermError || !CorruptError)
        return -1;
    struct {
        const char *name;
        PyObject *cls;
    } all[] = {{"CXLError", CoreError}, {"CXLNotFoundError", NotFoundError},
               {"CXLDatasetNotFoundError", DatasetNotFoundError}, {"CXLExistsError", ExistsError},
               {"CXLPermissionError", PermError}, {"CXLCorruptError", CorruptError}};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        if (PyModule_AddObjectRef(m, all[i].name, all[i].cls) < 0)
            return -1;
    return 0;
}

/* ---- integer arguments ----
 * PyArg's K and I formats wrap silently (2**64 + 5 becomes 5, -3 becomes
 * 4294967293): these converters ("O&") refuse instead, as numpy does: a
 * non-integer is a TypeError (operator.index), a negative a ValueError, one
 * too large an OverflowError. */
static int convert_unsigned(PyObject *o, uint64_t max, uint64_t *out)
{
    PyObject *i = PyNumber_Index(o), *zero = PyLong_FromLong(0);
    int neg = i && zero ? PyObject_RichCompareBool(i, zero, Py_LT) : -1;
    Py_XDECREF(zero);
    if (!i)
        return 0;
    if (neg) {
        if (neg > 0)
            PyErr_Format(PyExc_ValueError, "expected a non-negative integer, got %R", i);
        Py_DECREF(i);
        return 0;
    }
    unsigned long long v = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    if (PyErr_Occurred() || v > max) {
        PyErr_Clear();
        PyErr_Format(PyExc_OverflowError, "%R does not fit in %s", o,
                     max == UINT32_MAX ? "32 bits" : "64 bits");
        return 0;
    }
    *out = v;
    return 1;
}

int core_u64(PyObject *o, void *out)
{
    return convert_unsigned(o, UINT64_MAX, out);
}

int core_u32(PyObject *o, void *out)
{
    uint64_t v;
    if (!convert_unsigned(o, UINT32_MAX, &v))
        return 0;
    *(uint32_t *)out = (uint32_t)v;
    return 1;
}

static PyObject *mod_destroy(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *spec = PyUnicode_AsUTF8AndSize(arg, NULL);
    if (!spec)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_pool_destroy(spec);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, NULL);
    Py_RETURN_NONE;
}

static PyObject *mod_strerror(PyObject *self, PyObject *arg)
{
    (void)self;
    long rc = PyLong_AsLong(arg);
    if (rc == -1 && PyErr_Occurred())
        return NULL;
    return PyUnicode_FromString(cxlp_strerror((int)rc));
}

static PyObject *mod_dtype_size(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *name = PyUnicode_AsUTF8AndSize(arg, NULL);
    if (!name)
        return NULL;
    int d = cxlp_dtype_parse(name);
    if (d < 0)
        return PyErr_Format(PyExc_ValueError, "unknown dtype '%s'", name);
    return PyLong_FromLong(cxlp_dtype_size(d));
}

static PyObject *mod_policy_parse(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *name = PyUnicode_AsUTF8AndSize(arg, NULL);
    if (!name)
        return NULL;
    return PyLong_FromLong(cxlp_policy_parse(name));
}

static PyObject *mod_size_parse(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *text = PyUnicode_AsUTF8AndSize(arg, NULL);
    if (!text)
        return NULL;
    uint64_t v;
    if (cxlp_size_parse(text, &v)) {
        PyErr_SetString(PyExc_ValueError, cxlp_errmsg(NULL));
        return NULL;
    }
    return PyLong_FromUnsignedLongLong(v);
}

static PyObject *mod_loader_trim(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    cxlp_loader_trim();
    Py_RETURN_NONE;
}

/* The machine's NUMA nodes as cxlp_topo sees them (what a sampler's
 * topology="auto" weighs hosts by). */
static PyObject *mod_topo_nodes(PyObject *self, PyObject *unused)
{
    (void)self;
    (void)unused;
    cxlp_topo *t;
    int rc = cxlp_topo_discover(NULL, &t);
    if (rc)
        return core_raise(rc, NULL);
    PyObject *list = PyList_New(0);
    for (size_t i = 0; list && i < cxlp_topo_node_count(t); i++) {
        const struct cxlp_topo_node *nd = cxlp_topo_node(t, i);
        PyObject *bw = nd->read_bandwidth_mbs == CXLP_TOPO_UNKNOWN
                           ? (Py_INCREF(Py_None), Py_None)
                           : PyLong_FromUnsignedLongLong(nd->read_bandwidth_mbs);
        PyObject *d = bw ? Py_BuildValue("{s:i,s:O,s:K,s:O,s:O}", "id", nd->id, "has_cpu",
                                         nd->has_cpu ? Py_True : Py_False, "mem_total",
                                         (unsigned long long)nd->mem_total,
                                         "read_bandwidth_mbs", bw, "is_cxl",
                                         nd->is_cxl ? Py_True : Py_False)
                         : NULL;
        Py_XDECREF(bw);
        if (!d || PyList_Append(list, d) < 0) {
            Py_XDECREF(d);
            Py_CLEAR(list);
            break;
        }
        Py_DECREF(d);
    }
    cxlp_topo_free(t);
    return list;
}

static PyMethodDef mod_methods[] = {
    {"policy_parse", mod_policy_parse, METH_O,
     "policy_parse(name): the cxlp_policy number of a placement policy; -1 unknown."},
    {"size_parse", mod_size_parse, METH_O,
     "size_parse(text): bytes of a size as the CLI takes it (\"512G\", \"1.5GiB\", \"1TB\")."},
    {"destroy", mod_destroy, METH_O, "destroy(spec): remove a pool's backing object."},
    {"strerror", mod_strerror, METH_O, "strerror(rc): name of a return code."},
    {"dtype_size", mod_dtype_size, METH_O, "dtype_size(name): bytes per element."},
    {"topo_nodes", mod_topo_nodes, METH_NOARGS,
     "topo_nodes(): NUMA nodes (id, has_cpu, mem_total, read_bandwidth_mbs or None, is_cxl)."},
    {"loader_trim", mod_loader_trim, METH_NOARGS,
     "loader_trim(): unmaps the ring memory freed loaders left for the next one."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "_core", "libcxlpool for Python (no torch inside).", -1, mod_methods,
    NULL, NULL, NULL, NULL,
};

void core_free(PyObject *self)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (PyType_IS_GC(tp))
        PyObject_GC_Del(self);
    else
        PyObject_Free(self);
    Py_DECREF(tp);
}

PyMODINIT_FUNC PyInit__core(void)
{
    static struct {
        PyType_Spec *spec;
        PyTypeObject **type;
        const char *name;
    } types[] = {
        {&PoolType_spec, &PoolTypeP, "Pool"},       {&StoreType_spec, &StoreTypeP, "Store"},
        {&ArrayType_spec, &ArrayTypeP, "Array"},    {&LoaderType_spec, &LoaderTypeP, "Loader"},
        {&BatchType_spec, &BatchTypeP, "Batch"},    {&SamplerType_spec, &SamplerTypeP, "Sampler"},
        {&WriterType_spec, &WriterTypeP, "Writer"}, {&StagerType_spec, &StagerTypeP, "Stager"},
        {&PassType_spec, &PassTypeP, "Pass"},
    };
    /* made once: the module is single-phase (m_size -1) and never reloaded */
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (!*types[i].type &&
            !(*types[i].type = (PyTypeObject *)PyType_FromSpec(types[i].spec)))
            return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (!m)
        return NULL;
    if (add_errors(m) < 0)
        goto fail;
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyModule_AddObjectRef(m, types[i].name, (PyObject *)*types[i].type) < 0)
            goto fail;
    PyModule_AddStringConstant(m, "version", cxlp_version());
    PyModule_AddIntConstant(m, "COLLATE_STACK", CXLP_COLLATE_STACK);
    PyModule_AddIntConstant(m, "MAX_STAGERS", CXLP_MAX_STAGERS);
    PyModule_AddIntConstant(m, "COLLATE_PAD", CXLP_COLLATE_PAD);
    PyModule_AddIntConstant(m, "COLLATE_PACK", CXLP_COLLATE_PACK);
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
