/*
 * _core.c - the module: exception mapping, module functions, type setup.
 * Plain CPython C API; no torch, no numpy at build time. Tensors cross as
 * DLPack capsules (see _core_array.c).
 */
#include "_core.h"

PyObject *CoreError;

PyObject *core_raise(int rc, const void *handle)
{
    const char *msg = cxlp_errmsg(handle);
    PyObject *args = Py_BuildValue("(iss)", rc, msg && *msg ? msg : cxlp_strerror(rc),
                                   cxlp_strerror(rc));
    if (args) {
        PyErr_SetObject(CoreError, args);
        Py_DECREF(args);
    }
    return NULL;
}

static PyObject *mod_destroy(PyObject *self, PyObject *arg)
{
    (void)self;
    const char *spec = PyUnicode_AsUTF8(arg);
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
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name)
        return NULL;
    int d = cxlp_dtype_parse(name);
    if (d < 0)
        return PyErr_Format(PyExc_ValueError, "unknown dtype '%s'", name);
    return PyLong_FromLong(cxlp_dtype_size(d));
}

static PyMethodDef mod_methods[] = {
    {"destroy", mod_destroy, METH_O, "destroy(spec): remove a pool's backing object."},
    {"strerror", mod_strerror, METH_O, "strerror(rc): name of a return code."},
    {"dtype_size", mod_dtype_size, METH_O, "dtype_size(name): bytes per element."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef core_module = {
    PyModuleDef_HEAD_INIT, "_core", "libcxlpool for Python (no torch inside).", -1, mod_methods,
    NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__core(void)
{
    PyTypeObject *types[] = {&PoolType, &StoreType, &ArrayType, &LoaderType, &BatchType,
                            &SamplerType, &WriterType};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyType_Ready(types[i]) < 0)
            return NULL;
    PyObject *m = PyModule_Create(&core_module);
    if (!m)
        return NULL;
    CoreError = PyErr_NewExceptionWithDoc(
        "cxl_dataloader._core.CXLError",
        "A libcxlpool failure: args are (code, message, code name).", PyExc_RuntimeError, NULL);
    if (!CoreError || PyModule_AddObjectRef(m, "CXLError", CoreError) < 0)
        goto fail;
    const char *names[] = {"Pool", "Store", "Array", "Loader", "Batch",
                           "Sampler", "Writer"};
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (PyModule_AddObjectRef(m, names[i], (PyObject *)types[i]) < 0)
            goto fail;
    PyModule_AddStringConstant(m, "version", cxlp_version());
    PyModule_AddIntConstant(m, "COLLATE_STACK", CXLP_COLLATE_STACK);
    PyModule_AddIntConstant(m, "COLLATE_PAD", CXLP_COLLATE_PAD);
    PyModule_AddIntConstant(m, "COLLATE_PACK", CXLP_COLLATE_PACK);
    PyModule_AddIntConstant(m, "ENOTFOUND", CXLP_ENOTFOUND);
    PyModule_AddIntConstant(m, "EEXIST", CXLP_EEXIST);
    PyModule_AddIntConstant(m, "ECORRUPT", CXLP_ECORRUPT);
    return m;
fail:
    Py_DECREF(m);
    return NULL;
}
