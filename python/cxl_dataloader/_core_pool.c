/*
 * _core_pool.c - Pool: create/open a pool, list, stat, verify, remove,
 * import. Long calls release the GIL.
 */
#include "_core.h"

static int pool_init(PoolObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"spec", "create", "size", "mode", "readonly", "catalog_bytes",
                             "tiers", "meta_bytes", NULL};
    const char *spec;
    int create = 0, readonly = 0;
    uint64_t size = 0, catalog_bytes = 0, meta_bytes = 0;
    uint32_t mode = 0;
    PyObject *tiers = Py_None;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$pO&O&pO&OO&", kwlist, &spec, &create, core_u64,
                                     &size, core_u32, &mode, &readonly, core_u64, &catalog_bytes,
                                     &tiers, core_u64, &meta_bytes))
        return -1;
    if (self->p) {
        PyErr_SetString(PyExc_RuntimeError, "Pool already initialized");
        return -1;
    }
    const char *tv[16];
    Py_ssize_t nt = 0;
    if (tiers != Py_None) {
        if (!PyList_Check(tiers) || (nt = PyList_Size(tiers)) == 0 || nt > 16) {
            PyErr_SetString(PyExc_TypeError, "tiers must be a list of 1 to 16 'KIND=MEDIA' strings");
            return -1;
        }
        for (Py_ssize_t i = 0; i < nt; i++)
            if (!(tv[i] = PyUnicode_AsUTF8AndSize(PyList_GetItem(tiers, i), NULL)))
                return -1;
    }
    struct cxlp_pool_opts o = {.mode = mode, .catalog_bytes = catalog_bytes, .readonly = readonly,
                               .meta_bytes = meta_bytes};
    int rc;
    cxlp_pool *p = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = !create ? cxlp_pool_open(spec, &o, &p)
         : nt    ? cxlp_pool_create_tiered(spec, tv, (size_t)nt, &o, &p)
                 : cxlp_pool_create(spec, size, &o, &p);
    Py_END_ALLOW_THREADS
    if (rc) {
        core_raise(rc, NULL);
        return -1;
    }
    self->p = p;
    self->spec = PyUnicode_FromString(spec);
    return self->spec ? 0 : -1;
}

static void pool_dealloc(PoolObject *self)
{
    cxlp_pool_close(self->p);
    Py_XDECREF(self->spec);
    core_free((PyObject *)self);
}

static int pool_ok(PoolObject *self)
{
    if (!self->p) {
        PyErr_SetString(PyExc_ValueError, "pool is closed");
        return 0;
    }
    return 1;
}

static PyObject *pool_close(PoolObject *self, PyObject *unused)
{
    (void)unused;
    cxlp_pool_close(self->p);
    self->p = NULL;
    Py_RETURN_NONE;
}

/* A dataset's catalog facts, with the keys of `cxlpool ls --json`:
 * ingest_shuffle is None or {"seed": S} (shuffled 1). */
static PyObject *info_dict(const struct cxlp_dataset_info *d, int shuffled, uint64_t seed)
{
    PyObject *sh = shuffled ? Py_BuildValue("{s:K}", "seed", (unsigned long long)seed)
                            : (Py_INCREF(Py_None), Py_None);
    if (!sh)
        return NULL;
    PyObject *r = Py_BuildValue("{s:s,s:K,s:K,s:K,s:K,s:I,s:O,s:K,s:K,s:K,s:O}", "name", d->name,
                         "version", (unsigned long long)d->version, "records",
                         (unsigned long long)d->n_records, "data_bytes",
                         (unsigned long long)d->data_bytes, "stored_bytes",
                         (unsigned long long)d->stored_bytes, "shards", d->n_shards, "fixed",
                         d->fixed ? Py_True : Py_False, "record_size",
                         (unsigned long long)d->record_size, "docs",
                         (unsigned long long)d->n_docs, "created_unix",
                         (unsigned long long)d->created_unix, "ingest_shuffle", sh);
    Py_DECREF(sh);
    return r;
}

PyObject *core_info_dict(const struct cxlp_dataset_info *d, int shuffled, uint64_t seed)
{
    return info_dict(d, shuffled, seed);
}

static PyObject *pool_list(PoolObject *self, PyObject *unused)
{
    (void)unused;
    if (!pool_ok(self))
        return NULL;
    size_t cap = 64, n = 0;
    struct cxlp_dataset_info *v = NULL;
    int rc;
    for (;;) {
        v = PyMem_Realloc(v, cap * sizeof *v);
        if (!v)
            return PyErr_NoMemory();
        rc = cxlp_pool_list(self->p, v, cap, &n);
        if (rc || n <= cap)
            break;
        cap = n;
    }
    if (rc) {
        PyMem_Free(v);
        return core_raise(rc, self->p);
    }
    PyObject *out = PyList_New((Py_ssize_t)n);
    for (size_t i = 0; out && i < n; i++) {
        /* how it was ingested; one removed since the listing counts as not
         * shuffled */
        uint64_t seed = 0;
        int sh = cxlp_pool_ingest_shuffle(self->p, v[i].name, &seed);
        if (sh < 0 && sh != CXLP_ENOTFOUND) {
            Py_DECREF(out);
            PyMem_Free(v);
            return core_raise(sh, self->p);
        }
        PyObject *d = info_dict(&v[i], sh == 1, seed);
        if (!d) {
            Py_CLEAR(out);
            break;
        }
        PyList_SetItem(out, (Py_ssize_t)i, d);
    }
    PyMem_Free(v);
    return out;
}

static PyObject *pool_stat(PoolObject *self, PyObject *unused)
{
    (void)unused;
    if (!pool_ok(self))
        return NULL;
    struct cxlp_pool_stat st;
    int rc = cxlp_pool_stat(self->p, &st);
    if (rc)
        return core_raise(rc, self->p);
    return Py_BuildValue(
        "{s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:I,s:I,s:I,s:s,s:O,s:i,s:s,s:I,s:O,s:s,s:i,s:K}",
        "size", (unsigned long long)st.size, "data_bytes", (unsigned long long)st.data_bytes,
        "used_bytes", (unsigned long long)st.used_bytes, "reserved_bytes",
        (unsigned long long)st.reserved_bytes, "reserved_dead_bytes",
        (unsigned long long)st.reserved_dead_bytes, "deferred_bytes",
        (unsigned long long)st.deferred_bytes, "free_bytes", (unsigned long long)st.free_bytes,
        "largest_free", (unsigned long long)st.largest_free, "generation",
        (unsigned long long)st.generation, "n_datasets", st.n_datasets, "live_leases",
        st.live_leases, "lease_slots", st.lease_slots, "media", cxlp_media_name(st.media),
        "emulated", st.emulated ? Py_True : Py_False, "numa_node", st.numa_node, "path", st.path,
        "n_tiers", st.n_tiers,
        "numa_interleave", st.numa_interleave ? Py_True : Py_False, "numa_nodes", st.numa_nodes,
        "near_node", st.near_node, "host_id", (unsigned long long)st.host_id);
}

static void collect_line(void *ctx, const char *line)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *s = PyUnicode_FromString(line);
    if (s) {
        PyList_Append((PyObject *)ctx, s);
        Py_DECREF(s);
    }
    PyGILState_Release(g);
}

static PyObject *pool_verify(PoolObject *self, PyObject *unused)
{
    (void)unused;
    if (!pool_ok(self))
        return NULL;
    PyObject *lines = PyList_New(0);
    if (!lines)
        return NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_pool_verify(self->p, collect_line, lines);
    Py_END_ALLOW_THREADS
    if (rc) {
        Py_DECREF(lines);
        return core_raise(rc, self->p);
    }
    return lines;
}

static PyObject *pool_remove(PoolObject *self, PyObject *arg)
{
    if (!pool_ok(self))
        return NULL;
    const char *name = PyUnicode_AsUTF8AndSize(arg, NULL);
    if (!name)
        return NULL;
    int rc = cxlp_pool_remove(self->p, name);
    if (rc)
        return core_raise_dataset(rc, self->p);
    Py_RETURN_NONE;
}

static PyObject *pool_concat(PoolObject *self, PyObject *args)
{
    const char *name;
    PyObject *parts;
    if (!PyArg_ParseTuple(args, "sO", &name, &parts) || !pool_ok(self))
        return NULL;
    PyObject *seq = PySequence_Fast(parts, "parts must be a sequence of names");
    if (!seq)
        return NULL;
    Py_ssize_t n = core_fast_size(seq);
    const char **names = PyMem_Malloc((size_t)(n ? n : 1) * sizeof *names);
    PyObject *ret = NULL;
    if (!names) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!(names[i] = PyUnicode_AsUTF8AndSize(core_fast_item(seq, i), NULL)))
            goto out;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_pool_concat(self->p, name, names, (size_t)n);
    Py_END_ALLOW_THREADS
    if (rc)
        core_raise(rc, self->p);
    else
        ret = Py_NewRef(Py_None);
out:
    PyMem_Free(names);
    Py_DECREF(seq);
    return ret;
}

struct progress_ctx {
    PyObject *fn;
    int failed;
};

static void progress_cb(void *ctx, uint64_t done, uint64_t total)
{
    struct progress_ctx *pc = ctx;
    if (pc->failed)
        return;
    PyGILState_STATE g = PyGILState_Ensure();
    PyObject *r = PyObject_CallFunction(pc->fn, "KK", (unsigned long long)done,
                                        (unsigned long long)total);
    if (!r) {
        PyErr_WriteUnraisable(pc->fn);
        pc->failed = 1;
    }
    Py_XDECREF(r);
    PyGILState_Release(g);
}

/* The (callback, context) pair of a library call's options for a Python
 * progress callable fn (none for None), its state in pc. */
static void progress_use(struct progress_ctx *pc, PyObject *fn,
                         void (**cb)(void *, uint64_t, uint64_t), void **ctx)
{
    *pc = (struct progress_ctx){.fn = fn};
    *cb = fn != Py_None ? progress_cb : NULL;
    *ctx = fn != Py_None ? pc : NULL;
}

static PyObject *pool_import(PoolObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "src", "format", "record_size", "dtype", "shard_bytes",
                             "progress", "hugepages", "allow_empty", "shuffle", NULL};
    const char *name, *src, *format = "auto", *dtype = NULL;
    uint64_t record_size = 0, shard_bytes = 0, seed = 0;
    PyObject *progress = Py_None, *shuffle = Py_None;
    int hugepages = 1, allow_empty = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|$sO&zO&OppO", kwlist, &name, &src, &format,
                                     core_u64, &record_size, &dtype, core_u64, &shard_bytes,
                                     &progress, &hugepages, &allow_empty, &shuffle))
        return NULL;
    if (shuffle != Py_None) {
        /* an int from 0 to 2^64-1; bool is an int to Python, not a seed */
        if (!PyLong_Check(shuffle) || PyBool_Check(shuffle))
            return PyErr_Format(PyExc_TypeError, "shuffle: expected an int seed or None, not %R",
                                shuffle);
        seed = PyLong_AsUnsignedLongLong(shuffle);
        if (seed == (uint64_t)-1 && PyErr_Occurred()) {
            PyErr_Clear();
            return PyErr_Format(PyExc_ValueError, "shuffle: %R is not a seed (an int from 0 to "
                                "2**64-1)", shuffle);
        }
    }
    if (!pool_ok(self))
        return NULL;
    struct cxlp_import_opts o = {.record_size = record_size, .dtype = -1,
                                 .shard_bytes = shard_bytes, .no_hugepages = !hugepages,
                                 .allow_empty = allow_empty,
                                 .shuffle = shuffle != Py_None, .shuffle_seed = seed};
    o.format = cxlp_format_parse(format);
    if (o.format < 0)
        return PyErr_Format(PyExc_ValueError, "format '%s': expected auto, raw, npy or megatron",
                            format);
    if (dtype && (o.dtype = cxlp_dtype_parse(dtype)) < 0)
        return PyErr_Format(PyExc_ValueError, "dtype '%s' is not a cxlpool dtype", dtype);
    struct progress_ctx pc;
    progress_use(&pc, progress, &o.progress, &o.progress_ctx);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_import(self->p, name, src, &o);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, self->p);
    Py_RETURN_NONE;
}

static PyObject *pool_rewrite(PoolObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "shard_bytes", "progress", "hugepages", NULL};
    const char *name;
    uint64_t shard_bytes = 0;
    PyObject *progress = Py_None;
    int hugepages = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$O&Op", kwlist, &name, core_u64, &shard_bytes,
                                     &progress, &hugepages))
        return NULL;
    if (!pool_ok(self))
        return NULL;
    struct cxlp_rewrite_opts o = {.shard_bytes = shard_bytes, .no_hugepages = !hugepages};
    struct progress_ctx pc;
    progress_use(&pc, progress, &o.progress, &o.progress_ctx);
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_pool_rewrite(self->p, name, &o);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise_dataset(rc, self->p);
    Py_RETURN_NONE;
}

static PyObject *pool_tiers(PoolObject *self, PyObject *unused)
{
    (void)unused;
    if (!pool_ok(self))
        return NULL;
    struct cxlp_tier_info t[16];
    size_t n;
    int rc = cxlp_pool_tiers(self->p, t, 16, &n);
    if (rc)
        return core_raise(rc, self->p);
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out && i < n && i < 16; i++) {
        PyObject *d = Py_BuildValue(
            "{s:n,s:s,s:s,s:O,s:i,s:O,s:O,s:s,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K,s:K}",
            "tier", (Py_ssize_t)i, "kind", cxlp_tier_name(t[i].kind), "media",
            cxlp_media_name(t[i].media), "emulated", t[i].emulated ? Py_True : Py_False,
            "numa_node", t[i].numa_node, "home", t[i].home ? Py_True : Py_False, "staged",
            t[i].staged ? Py_True : Py_False, "path", t[i].path, "capacity",
            (unsigned long long)t[i].capacity, "used", (unsigned long long)t[i].used, "copies",
            (unsigned long long)t[i].copies, "copy_bytes", (unsigned long long)t[i].copy_bytes,
            "hits", (unsigned long long)t[i].hits, "misses", (unsigned long long)t[i].misses,
            "bytes_in", (unsigned long long)t[i].bytes_in, "bytes_out",
            (unsigned long long)t[i].bytes_out, "stall_ns", (unsigned long long)t[i].stall_ns,
            "fetches", (unsigned long long)t[i].fetches, "evictions",
            (unsigned long long)t[i].evictions);
        if (!d || PyList_Append(out, d) < 0)
            Py_CLEAR(out);
        Py_XDECREF(d);
    }
    return out;
}

static PyObject *pool_migrate(PoolObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"name", "tier", "threads", NULL};
    const char *name, *tier;
    unsigned int threads = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "ss|$I", kwlist, &name, &tier, &threads))
        return NULL;
    if (!pool_ok(self))
        return NULL;
    struct cxlp_migrate_opts o = {.threads = threads};
    struct cxlp_migrate_stat st;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_migrate(self->p, name, tier, &o, &st);
    Py_END_ALLOW_THREADS
    if (rc)
        return core_raise(rc, self->p);
    return Py_BuildValue("{s:K,s:K,s:K,s:K,s:K,s:K,s:d}", "shards",
                         (unsigned long long)st.shards, "copied", (unsigned long long)st.copied,
                         "already", (unsigned long long)st.already, "bytes_copied",
                         (unsigned long long)st.bytes_copied, "direct_bytes",
                         (unsigned long long)st.direct_bytes, "bytes_dropped",
                         (unsigned long long)st.bytes_dropped, "seconds", st.seconds);
}

static PyObject *pool_get_spec(PoolObject *self, void *closure)
{
    (void)closure;
    return Py_NewRef(self->spec ? self->spec : Py_None);
}

static PyObject *pool_get_closed(PoolObject *self, void *closure)
{
    (void)closure;
    return PyBool_FromLong(self->p == NULL);
}

static PyMethodDef pool_methods[] = {
    {"close", (PyCFunction)pool_close, METH_NOARGS, "Detach (open datasets stay usable)."},
    {"list", (PyCFunction)pool_list, METH_NOARGS, "Datasets in the catalog, as dicts."},
    {"stat", (PyCFunction)pool_stat, METH_NOARGS, "Space, leases, media, as a dict."},
    {"verify", (PyCFunction)pool_verify, METH_NOARGS, "Check structure and every checksum."},
    {"remove", (PyCFunction)pool_remove, METH_O, "remove(name): drop a dataset."},
    {"tiers", (PyCFunction)pool_tiers, METH_NOARGS, "The pool's tiers and their counters."},
    {"migrate", (PyCFunction)(void (*)(void))pool_migrate, METH_VARARGS | METH_KEYWORDS,
     "migrate(name, tier, *, threads=1): move a dataset to a tier; stats as a dict."},
    {"rewrite", (PyCFunction)(void (*)(void))pool_rewrite, METH_VARARGS | METH_KEYWORDS,
     "rewrite(name, *, shard_bytes=0, progress=None, hugepages=True): write a dataset again "
     "in this build's shard format and put it in its place (cxlp_pool_rewrite)."},
    {"concat", (PyCFunction)pool_concat, METH_VARARGS,
     "concat(name, parts): publish name as the parts' records in order and remove the parts, "
     "in one catalog flip (no copy)."},
    {"import_", (PyCFunction)(void (*)(void))pool_import, METH_VARARGS | METH_KEYWORDS,
     "import_(name, src, *, format='auto', record_size=0, dtype=None, shard_bytes=0, "
     "progress=None, hugepages=True, allow_empty=False): ingest a raw, .npy or Megatron "
     "dataset (records on 2 MiB pages unless hugepages=False; a source of no records is "
     "refused unless allow_empty)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef pool_getset[] = {
    {"spec", (getter)pool_get_spec, NULL, "the pool spec", NULL},
    {"closed", (getter)pool_get_closed, NULL, "True after close()", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyType_Slot PoolType_slots[] = {
    {Py_tp_doc, (void *)"Pool(spec, *, create=False, size=0, mode=0, readonly=False, catalog_bytes=0, "
              "tiers=None, meta_bytes=0)"},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)pool_init},
    {Py_tp_dealloc, (void *)pool_dealloc},
    {Py_tp_methods, (void *)pool_methods},
    {Py_tp_getset, (void *)pool_getset},
    {0, NULL},
};
PyType_Spec PoolType_spec = {
    .name = "cxl_dataloader._core.Pool",
    .basicsize = sizeof(PoolObject),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .slots = PoolType_slots,
};
PyTypeObject *PoolTypeP;
