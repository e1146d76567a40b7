/*
 * _core_sampler.c - Sampler: a cxlp_sampler (an order over dataset ids,
 * split over ranks, resumable from a few integers) for Python.
 *
 * The torch Samplers of samplers.py are thin Python over this type, and a
 * Loader given a Sampler as its order calls cxlp_sampler_next on its own
 * threads: no id crosses into Python on that path.
 *
 * Invariants:
 *   ids drawn < id_bound (n; the sum of the blend sizes; the curriculum's n);
 *   busy > 0  <=>  a Loader owns the drawing (next, set_epoch, restore and
 *                  state are refused from Python meanwhile, since the C
 *                  handle is used by one thread at a time).
 * Ids come back as an int64 Array (buffer protocol and DLPack) over a bytes
 * object filled once before it is exposed: one allocation per call, no
 * per-id Python object.
 * Rejected: a Python list of ints per next() (an object per id, 30x slower
 * than the C draw); sharing one handle between Python and a Loader under a
 * lock (the engine draws ahead of what the consumer has seen, so Python's
 * view of the state would be wrong anyway: the training side counts
 * delivered batches instead).
 */
#include "_core.h"

#define NEXT_MAX (1u << 24)

static int sampler_ok(SamplerObject *self, int mutating)
{
    if (!self->s) {
        PyErr_SetString(PyExc_ValueError, "sampler not initialized");
        return 0;
    }
    if (mutating && self->busy) {
        PyErr_SetString(PyExc_RuntimeError, "sampler is in use by a Loader; create another "
                        "Sampler for drawing from Python");
        return 0;
    }
    return 1;
}

static int parse_kind(PyObject *o, int *kind)
{
    if (PyLong_Check(o)) {
        long k = PyLong_AsLong(o);
        if (k == -1 && PyErr_Occurred())
            return -1;
        *kind = (int)k;
        return 0;
    }
    const char *name = PyUnicode_AsUTF8AndSize(o, NULL);
    if (!name)
        return -1;
    *kind = cxlp_order_parse(name);
    if (*kind < 0 || *kind > CXLP_ORDER_BLOCK) {
        PyErr_Format(PyExc_ValueError, "kind '%s': expected sequential, random or block "
                     "(blend and curriculum have their own constructors)", name);
        return -1;
    }
    return 0;
}

static SamplerObject *wrap(PyTypeObject *type, cxlp_sampler *s, uint64_t id_bound)
{
    SamplerObject *o = (SamplerObject *)PyType_GenericAlloc(type, 0);
    if (!o) {
        cxlp_sampler_free(s);
        return NULL;
    }
    struct cxlp_sampler_state st;
    cxlp_sampler_state(s, &st);
    o->s = s;
    o->id_bound = id_bound;
    o->fingerprint = st.fingerprint;
    return o;
}

static int sampler_init(SamplerObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"kind", "n", "seed", "epoch", "shard_size", "window", "world",
                             "rank", "drop_last", "ramp", NULL};
    PyObject *kindo = NULL;
    uint64_t n = 0, seed = 0, epoch = 0, shard = 0, window = 0;
    uint32_t world = 1, rank = 0;
    int drop_last = 0, ramp = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OO&O&O&O&O&O&O&pp", kwlist, &kindo, core_u64, &n,
                                     core_u64, &seed, core_u64, &epoch, core_u64, &shard,
                                     core_u64, &window, core_u32, &world, core_u32, &rank,
                                     &drop_last, &ramp))
        return -1;
    if (self->s) {
        PyErr_SetString(PyExc_RuntimeError, "Sampler already initialized");
        return -1;
    }
    int kind = CXLP_ORDER_RANDOM;
    if (kindo && parse_kind(kindo, &kind) < 0)
        return -1;
    struct cxlp_sampler_config c = {.kind = kind, .n = n, .seed = seed, .epoch = epoch,
                                    .shard_size = shard, .window = window, .world = world,
                                    .rank = rank, .drop_last = drop_last, .ramp = ramp};
    int rc = cxlp_sampler_create(&c, &self->s);
    if (rc) {
        core_raise(rc, NULL);
        return -1;
    }
    struct cxlp_sampler_state st;
    cxlp_sampler_state(self->s, &st);
    self->id_bound = n;
    self->fingerprint = st.fingerprint;
    return 0;
}

/* Reads a sequence of Python ints into a new uint64 array of *k entries. */
static uint64_t *u64_list(PyObject *seq, const char *what, size_t *k)
{
    PyObject *fast = PySequence_Fast(seq, what);
    if (!fast)
        return NULL;
    Py_ssize_t len = core_fast_size(fast);
    uint64_t *v = PyMem_Malloc((size_t)(len ? len : 1) * sizeof *v);
    if (!v) {
        Py_DECREF(fast);
        PyErr_NoMemory();
        return NULL;
    }
    for (Py_ssize_t i = 0; i < len; i++) {
        v[i] = PyLong_AsUnsignedLongLong(core_fast_item(fast, i));
        if (v[i] == (uint64_t)-1 && PyErr_Occurred()) {
            PyErr_Format(PyExc_ValueError, "%s[%zd] must be a non-negative integer", what, i);
            PyMem_Free(v);
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);
    *k = (size_t)len;
    return v;
}

static PyObject *sampler_create_blend(PyObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"sizes", "weights", "n", "seed", "epoch", "world", "rank",
                             "drop_last", "shuffle", NULL};
    PyObject *sizes, *weights;
    uint64_t n = 0, seed = 0, epoch = 0;
    uint32_t world = 1, rank = 0;
    int drop_last = 0, shuffle = 1;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$O&O&O&O&O&pp", kwlist, &sizes, &weights,
                                     core_u64, &n, core_u64, &seed, core_u64, &epoch, core_u32,
                                     &world, core_u32, &rank, &drop_last, &shuffle))
        return NULL;
    size_t k = 0, kw_ = 0;
    uint64_t *sz = u64_list(sizes, "sizes", &k), *w = NULL;
    if (!sz)
        return NULL;
    w = u64_list(weights, "weights", &kw_);
    if (!w) {
        PyMem_Free(sz);
        return NULL;
    }
    PyObject *ret = NULL;
    struct cxlp_blend_source *src = NULL;
    if (k != kw_) {
        PyErr_Format(PyExc_ValueError, "%zu sizes but %zu weights", k, kw_);
        goto out;
    }
    src = PyMem_Malloc((k ? k : 1) * sizeof *src);
    if (!src) {
        PyErr_NoMemory();
        goto out;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < k; i++) {
        src[i] = (struct cxlp_blend_source){.size = sz[i], .weight = w[i]};
        total = total + sz[i] < total ? UINT64_MAX : total + sz[i];
    }
    struct cxlp_sampler_config c = {.n = n, .seed = seed, .epoch = epoch, .world = world,
                                    .rank = rank, .drop_last = drop_last};
    cxlp_sampler *s;
    int rc = cxlp_sampler_create_blend(&c, src, k, shuffle, &s);
    if (rc) {
        core_raise(rc, NULL);
        goto out;
    }
    ret = (PyObject *)wrap((PyTypeObject *)type, s, total);
out:
    PyMem_Free(src);
    PyMem_Free(sz);
    PyMem_Free(w);
    return ret;
}

/* The hosts order: weights per host, the host of every rank. */
static PyObject *sampler_create_hosts(PyObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"weights", "rank_hosts", "n", "seed", "epoch", "shard_size",
                             "window", "world", "rank", "drop_last", "keep", NULL};
    PyObject *weights, *rank_hosts;
    uint64_t n = 0, seed = 0, epoch = 0, shard = 0, window = 0;
    uint32_t world = 1, rank = 0;
    int drop_last = 0, keep = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "OO|$O&O&O&O&O&O&O&pp", kwlist, &weights,
                                     &rank_hosts, core_u64, &n, core_u64, &seed, core_u64,
                                     &epoch, core_u64, &shard, core_u64, &window, core_u32,
                                     &world, core_u32, &rank, &drop_last, &keep))
        return NULL;
    size_t H = 0, nr = 0;
    uint64_t *w = u64_list(weights, "weights", &H), *rh = NULL;
    if (!w)
        return NULL;
    PyObject *ret = NULL;
    uint32_t *layout = NULL;
    if (!(rh = u64_list(rank_hosts, "rank_hosts", &nr)))
        goto out;
    if (nr != world) {
        PyErr_Format(PyExc_ValueError, "rank_hosts has %zu entries for world %u", nr,
                     (unsigned)world);
        goto out;
    }
    if (H > CXLP_HOSTS_MAX) {
        PyErr_Format(PyExc_ValueError, "weights: %zu hosts, at most %d", H, CXLP_HOSTS_MAX);
        goto out;
    }
    if (!(layout = PyMem_Malloc((nr ? nr : 1) * sizeof *layout))) {
        PyErr_NoMemory();
        goto out;
    }
    for (size_t i = 0; i < nr; i++) {
        if (rh[i] >= H) {
            PyErr_Format(PyExc_ValueError, "rank_hosts[%zu] %llu is not below the %zu hosts",
                         i, (unsigned long long)rh[i], H);
            goto out;
        }
        layout[i] = (uint32_t)rh[i];
    }
    struct cxlp_sampler_config c = {.n = n, .seed = seed, .epoch = epoch, .shard_size = shard,
                                    .window = window, .world = world, .rank = rank,
                                    .drop_last = drop_last};
    struct cxlp_hosts h = {.n_hosts = (uint32_t)H, .weight = w, .rank_host = layout,
                           .keep = keep};
    cxlp_sampler *s;
    int rc = cxlp_sampler_create_hosts(&c, &h, &s);
    if (rc) {
        core_raise(rc, NULL);
        goto out;
    }
    ret = (PyObject *)wrap((PyTypeObject *)type, s, n);
out:
    PyMem_Free(w);
    PyMem_Free(rh);
    PyMem_Free(layout);
    return ret;
}

/* Difficulty values from a fixed-size dataset: one numeric scalar per
 * record, in `field` (NULL: the only field). A sibling dataset
 * "<name>.difficulty" of float64 records is the usual form. */
static double *store_values(StoreObject *st, const char *field, uint64_t *n)
{
    if (!st->s || st->closed) {
        PyErr_SetString(PyExc_ValueError, "difficulty dataset is closed");
        return NULL;
    }
    const struct cxlp_schema *sc = cxlp_store_schema(st->s);
    const char *ds = PyUnicode_AsUTF8AndSize(st->name, NULL);
    if (!sc->fixed) {
        PyErr_Format(PyExc_ValueError, "difficulty dataset '%s' has variable-size records; "
                     "it needs one scalar per record", ds);
        return NULL;
    }
    const struct cxlp_field *f = NULL;
    for (uint32_t i = 0; i < sc->n_fields; i++)
        if (field ? strcmp(sc->fields[i].name, field) == 0 : sc->n_fields == 1)
            f = &sc->fields[i];
    uint64_t elems = 1;
    for (int d = 0; f && d < f->ndim; d++)
        elems *= f->shape[d];
    if (!f) {
        if (field)
            PyErr_Format(PyExc_ValueError, "difficulty dataset '%s' has no field '%s'", ds,
                         field);
        else
            PyErr_Format(PyExc_ValueError, "difficulty dataset '%s' has %u fields; name one "
                         "(field=)", ds, sc->n_fields);
        return NULL;
    }
    if (elems != 1) {
        PyErr_Format(PyExc_ValueError, "difficulty dataset '%s': field '%s' is not a scalar "
                     "(%llu elements per record)", ds, f->name, (unsigned long long)elems);
        return NULL;
    }
    uint64_t cnt = cxlp_store_count(st->s);
    double *v = PyMem_Malloc((size_t)(cnt ? cnt : 1) * sizeof *v);
    if (!v) {
        PyErr_NoMemory();
        return NULL;
    }
    uint32_t fno = (uint32_t)(f - sc->fields);
    for (uint64_t i = 0; i < cnt; i++) {
        struct cxlp_view view;
        int rc = cxlp_store_read_field(st->s, i, fno, &view);
        if (rc || view.len < (uint64_t)cxlp_dtype_size(f->dtype)) {
            PyMem_Free(v);
            core_raise(rc ? rc : CXLP_ECORRUPT, NULL);
            return NULL;
        }
        const unsigned char *p = (const unsigned char *)view.data;
        union { uint8_t u8; int8_t i8; uint16_t u16; int16_t i16; uint32_t u32; int32_t i32;
                uint64_t u64; int64_t i64; float f32; double f64; } x;
        memcpy(&x, p, (size_t)cxlp_dtype_size(f->dtype));
        switch (f->dtype) {
        case CXLP_DT_U8: case CXLP_DT_BOOL: v[i] = x.u8; break;
        case CXLP_DT_I8: v[i] = x.i8; break;
        case CXLP_DT_U16: v[i] = x.u16; break;
        case CXLP_DT_I16: v[i] = x.i16; break;
        case CXLP_DT_U32: v[i] = x.u32; break;
        case CXLP_DT_I32: v[i] = x.i32; break;
        case CXLP_DT_U64: v[i] = (double)x.u64; break;
        case CXLP_DT_I64: v[i] = (double)x.i64; break;
        case CXLP_DT_F32: v[i] = x.f32; break;
        case CXLP_DT_F64: v[i] = x.f64; break;
        default:
            PyMem_Free(v);
            PyErr_Format(PyExc_ValueError, "difficulty dataset '%s': dtype %s is not "
                         "supported (use float64)", ds, cxlp_dtype_name(f->dtype));
            return NULL;
        }
    }
    *n = cnt;
    return v;
}

/* Borrows a contiguous 8-byte buffer of format fmt ("d" or "qQ"). */
static int get_buf8(PyObject *o, Py_buffer *b, const char *fmts, const char *what)
{
    if (PyObject_GetBuffer(o, b, PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0)
        return -1;
    const char *f = b->format ? b->format : "B";
    if (*f == '<' || *f == '=' || *f == '@')
        f++;
    if (b->itemsize != 8 || !strchr(fmts, *f) || f[1]) {
        PyErr_Format(PyExc_TypeError, "%s must be a contiguous %s buffer, got format '%s'",
                     what, strchr(fmts, 'd') ? "float64" : "int64", b->format ? b->format : "B");
        PyBuffer_Release(b);
        return -1;
    }
    return 0;
}

static PyObject *sampler_create_curriculum(PyObject *type, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"difficulty", "group", "store", "field", "pacing", "start",
                             "steps", "total", "n", "seed", "epoch", "world", "rank",
                             "drop_last", NULL};
    PyObject *diff = Py_None, *group = Py_None, *store = Py_None;
    const char *field = NULL, *pacing = "linear";
    double start = 0.1;
    uint32_t steps = 1, world = 1, rank = 0;
    uint64_t total = 0, n = 0, seed = 0, epoch = 0;
    int drop_last = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "|OOOzsdO&O&O&O&O&O&O&p", kwlist, &diff, &group,
                                     &store, &field, &pacing, &start, core_u32, &steps, core_u64,
                                     &total, core_u64, &n, core_u64, &seed, core_u64, &epoch,
                                     core_u32, &world, core_u32, &rank, &drop_last))
        return NULL;
    if ((diff != Py_None) + (group != Py_None) + (store != Py_None) != 1) {
        PyErr_SetString(PyExc_ValueError, "give exactly one of difficulty, group, store");
        return NULL;
    }
    struct cxlp_curriculum cur = {.start = start, .steps = steps, .total = total};
    const char *names[] = {"linear", "root", "step"};
    cur.pacing = -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(pacing, names[i]) == 0)
            cur.pacing = i;
    if (cur.pacing < 0)
        return PyErr_Format(PyExc_ValueError, "pacing '%s': expected linear, root or step",
                            pacing);
    Py_buffer b = {0};
    double *owned = NULL;
    if (store != Py_None) {
        if (!PyObject_TypeCheck(store, &StoreType))
            return PyErr_Format(PyExc_TypeError, "store must be a Store");
        owned = store_values((StoreObject *)store, field, &cur.n);
        if (!owned)
            return NULL;
        cur.difficulty = owned;
    } else if (diff != Py_None) {
        if (get_buf8(diff, &b, "d", "difficulty") < 0)
            return NULL;
        cur.difficulty = b.buf;
        cur.n = (uint64_t)(b.len / 8);
    } else {
        if (get_buf8(group, &b, "qQlL", "group") < 0)
            return NULL;
        cur.group = b.buf;
        cur.n = (uint64_t)(b.len / 8);
    }
    struct cxlp_sampler_config c = {.n = n, .seed = seed, .epoch = epoch, .world = world,
                                    .rank = rank, .drop_last = drop_last};
    cxlp_sampler *s = NULL;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = cxlp_sampler_create_curriculum(&c, &cur, &s);
    Py_END_ALLOW_THREADS
    if (b.obj)
        PyBuffer_Release(&b);
    PyMem_Free(owned);
    if (rc)
        return core_raise(rc, NULL);
    return (PyObject *)wrap((PyTypeObject *)type, s, cur.n);
}

static void sampler_dealloc(SamplerObject *self)
{
    cxlp_sampler_free(self->s);
    core_free((PyObject *)self);
}

static PyObject *sampler_set_epoch(SamplerObject *self, PyObject *arg)
{
    if (!sampler_ok(self, 1))
        return NULL;
    unsigned long long e = PyLong_AsUnsignedLongLong(arg);
    if (e == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    int rc = cxlp_sampler_set_epoch(self->s, e);
    if (rc)
        return core_raise(rc, self->s);
    Py_RETURN_NONE;
}

static Py_ssize_t sampler_len(SamplerObject *self)
{
    if (!sampler_ok(self, 0))
        return -1;
    uint64_t n = cxlp_sampler_len(self->s);
    if (n > (uint64_t)PY_SSIZE_T_MAX) {
        PyErr_Format(PyExc_OverflowError, "per-rank length %llu does not fit len(); use "
                     "rank_len()", (unsigned long long)n);
        return -1;
    }
    return (Py_ssize_t)n;
}

static PyObject *sampler_rank_len(SamplerObject *self, PyObject *unused)
{
    (void)unused;
    if (!sampler_ok(self, 0))
        return NULL;
    return PyLong_FromUnsignedLongLong(cxlp_sampler_len(self->s));
}

static PyObject *sampler_epoch_len(SamplerObject *self, PyObject *unused)
{
    (void)unused;
    if (!sampler_ok(self, 0))
        return NULL;
    return PyLong_FromUnsignedLongLong(cxlp_sampler_epoch_len(self->s));
}

static PyObject *sampler_next(SamplerObject *self, PyObject *args)
{
    unsigned long long max = 4096;
    if (!PyArg_ParseTuple(args, "|K", &max) || !sampler_ok(self, 1))
        return NULL;
    if (max > NEXT_MAX)
        max = NEXT_MAX;
    PyObject *bytes = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(max ? max : 1) * 8);
    if (!bytes)
        return NULL;
    uint64_t *out = (uint64_t *)PyBytes_AsString(bytes);
    int64_t k = (int64_t)cxlp_sampler_next(self->s, out, (size_t)max);
    PyObject *a = array_new(bytes, out, CXLP_DT_I64, 1, &k);
    Py_DECREF(bytes);
    return a;
}

/* at(j), epoch_at(p), position(id): one u64 in, one u64 out; errors in
 * the thread's message (the C calls are const). */
static PyObject *u64_call(SamplerObject *self, PyObject *arg,
                          int (*fn)(const cxlp_sampler *, uint64_t, uint64_t *))
{
    if (!sampler_ok(self, 0))
        return NULL;
    unsigned long long x = PyLong_AsUnsignedLongLong(arg);
    if (x == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    uint64_t y;
    int rc = fn(self->s, x, &y);
    if (rc == CXLP_ERANGE)
        return PyErr_Format(PyExc_IndexError, "%s", cxlp_errmsg(NULL));
    if (rc)
        return core_raise(rc, NULL);
    return PyLong_FromUnsignedLongLong(y);
}

static PyObject *sampler_at(SamplerObject *self, PyObject *arg)
{
    return u64_call(self, arg, cxlp_sampler_at);
}

static PyObject *sampler_epoch_at(SamplerObject *self, PyObject *arg)
{
    return u64_call(self, arg, cxlp_sampler_epoch_at);
}

static PyObject *sampler_position(SamplerObject *self, PyObject *arg)
{
    return u64_call(self, arg, cxlp_sampler_position);
}

static PyObject *sampler_source(SamplerObject *self, PyObject *arg)
{
    if (!sampler_ok(self, 0))
        return NULL;
    unsigned long long id = PyLong_AsUnsignedLongLong(arg);
    if (id == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    uint32_t src;
    uint64_t inner;
    int rc = cxlp_sampler_source(self->s, id, &src, &inner);
    if (rc == CXLP_ERANGE)
        return PyErr_Format(PyExc_IndexError, "%s", cxlp_errmsg(NULL));
    if (rc)
        return core_raise(rc, NULL);
    return Py_BuildValue("(IK)", src, (unsigned long long)inner);
}

static PyObject *sampler_host_of(SamplerObject *self, PyObject *arg)
{
    if (!sampler_ok(self, 0))
        return NULL;
    unsigned long long id = PyLong_AsUnsignedLongLong(arg);
    if (id == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    uint32_t host;
    uint64_t index;
    int rc = cxlp_sampler_host_of(self->s, id, &host, &index);
    if (rc == CXLP_ERANGE)
        return PyErr_Format(PyExc_IndexError, "%s", cxlp_errmsg(NULL));
    if (rc)
        return core_raise(rc, NULL);
    return Py_BuildValue("(IK)", host, (unsigned long long)index);
}

static PyObject *sampler_host_share(SamplerObject *self, PyObject *arg)
{
    if (!sampler_ok(self, 0))
        return NULL;
    unsigned long h = PyLong_AsUnsignedLong(arg);
    if (h == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    uint64_t samples, blocks;
    int rc = cxlp_sampler_host_share(self->s, h > UINT32_MAX ? UINT32_MAX : (uint32_t)h,
                                     &samples, &blocks);
    if (rc == CXLP_ERANGE)
        return PyErr_Format(PyExc_IndexError, "%s", cxlp_errmsg(NULL));
    if (rc)
        return core_raise(rc, NULL);
    return Py_BuildValue("(KK)", (unsigned long long)samples, (unsigned long long)blocks);
}

static PyObject *sampler_host_reads(SamplerObject *self, PyObject *arg)
{
    if (!sampler_ok(self, 0))
        return NULL;
    PyObject *fast = PySequence_Fast(arg, "memory must be a sequence of fractions");
    if (!fast)
        return NULL;
    Py_ssize_t k = core_fast_size(fast);
    double *m = PyMem_Malloc((size_t)(k ? k : 1) * sizeof *m);
    if (!m) {
        Py_DECREF(fast);
        return PyErr_NoMemory();
    }
    for (Py_ssize_t i = 0; i < k; i++) {
        m[i] = PyFloat_AsDouble(core_fast_item(fast, i));
        if (m[i] == -1.0 && PyErr_Occurred()) {
            PyMem_Free(m);
            Py_DECREF(fast);
            return NULL;
        }
    }
    Py_DECREF(fast);
    uint64_t samples, blocks, counts[3];
    int rc = cxlp_sampler_host_share(self->s, 0, &samples, &blocks);
    if (rc == CXLP_EARG) { /* another kind */
        PyMem_Free(m);
        return core_raise(rc, NULL);
    }
    /* one fraction per host: hosts 0..k-1 exist, host k does not */
    if (!k || k > CXLP_HOSTS_MAX ||
        cxlp_sampler_host_share(self->s, (uint32_t)(k - 1), &samples, &blocks) ||
        cxlp_sampler_host_share(self->s, (uint32_t)k, &samples, &blocks) != CXLP_ERANGE) {
        PyMem_Free(m);
        return PyErr_Format(PyExc_ValueError, "memory: %zd fractions, not one per host", k);
    }
    rc = cxlp_sampler_host_reads(self->s, m, counts);
    PyMem_Free(m);
    if (rc)
        return core_raise(rc, NULL);
    return Py_BuildValue("{s:K,s:K,s:K}", "local", (unsigned long long)counts[0], "peer",
                         (unsigned long long)counts[1], "home", (unsigned long long)counts[2]);
}

static PyObject *sampler_host_block(SamplerObject *self, PyObject *args)
{
    if (!sampler_ok(self, 0))
        return NULL;
    unsigned int h;
    unsigned long long k;
    if (!PyArg_ParseTuple(args, "IK", &h, &k))
        return NULL;
    uint64_t block;
    int rc = cxlp_sampler_host_block(self->s, h, k, &block);
    if (rc == CXLP_ERANGE)
        return PyErr_Format(PyExc_IndexError, "%s", cxlp_errmsg(NULL));
    if (rc)
        return core_raise(rc, NULL);
    return PyLong_FromUnsignedLongLong(block);
}

static PyObject *sampler_released(SamplerObject *self, PyObject *arg)
{
    if (!sampler_ok(self, 0))
        return NULL;
    unsigned long long p = PyLong_AsUnsignedLongLong(arg);
    if (p == (unsigned long long)-1 && PyErr_Occurred())
        return NULL;
    return PyLong_FromUnsignedLongLong(cxlp_sampler_released(self->s, p));
}

static PyObject *sampler_state(SamplerObject *self, PyObject *unused)
{
    (void)unused;
    if (!sampler_ok(self, 1))
        return NULL;
    struct cxlp_sampler_state st;
    int rc = cxlp_sampler_state(self->s, &st);
    if (rc)
        return core_raise(rc, NULL);
    return Py_BuildValue("{sKsKsKsK}", "seed", (unsigned long long)st.seed, "epoch",
                         (unsigned long long)st.epoch, "consumed",
                         (unsigned long long)st.consumed, "fingerprint",
                         (unsigned long long)st.fingerprint);
}

static int dict_u64(PyObject *d, const char *key, uint64_t *v)
{
    PyObject *o = PyMapping_GetItemString(d, key);
    if (!o) {
        PyErr_Format(PyExc_KeyError, "sampler state lacks '%s'", key);
        return -1;
    }
    *v = PyLong_AsUnsignedLongLong(o);
    Py_DECREF(o);
    if (*v == (uint64_t)-1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_ValueError, "sampler state '%s' must be a non-negative integer",
                     key);
        return -1;
    }
    return 0;
}

static PyObject *sampler_restore(SamplerObject *self, PyObject *d)
{
    if (!sampler_ok(self, 1))
        return NULL;
    struct cxlp_sampler_state st;
    if (dict_u64(d, "seed", &st.seed) < 0 || dict_u64(d, "epoch", &st.epoch) < 0 ||
        dict_u64(d, "consumed", &st.consumed) < 0 ||
        dict_u64(d, "fingerprint", &st.fingerprint) < 0)
        return NULL;
    int rc = cxlp_sampler_restore(self->s, &st);
    if (rc)
        return core_raise(rc, self->s);
    Py_RETURN_NONE;
}

static PyObject *sampler_get(SamplerObject *self, void *c)
{
    if (!sampler_ok(self, 0))
        return NULL;
    switch ((int)(intptr_t)c) {
    case 0: return PyLong_FromUnsignedLongLong(self->fingerprint);
    case 1: return PyLong_FromUnsignedLongLong(self->id_bound);
    default: return PyBool_FromLong(self->busy > 0);
    }
}

static PyMethodDef sampler_methods[] = {
    {"create_blend", (PyCFunction)(void (*)(void))sampler_create_blend,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "create_blend(sizes, weights, *, n=0, seed=0, epoch=0, world=1, rank=0, drop_last=False, "
     "shuffle=True): integer weights, exact proportions over any prefix."},
    {"create_hosts", (PyCFunction)(void (*)(void))sampler_create_hosts,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "create_hosts(weights, rank_hosts, *, n, seed, epoch, shard_size, window, world, rank, "
     "drop_last, keep): the hosts order."},
    {"host_of", (PyCFunction)sampler_host_of, METH_O,
     "host_of(id): HOSTS (host, index of the id's block in the host's share)."},
    {"host_block", (PyCFunction)sampler_host_block, METH_VARARGS,
     "host_block(h, k): HOSTS the k-th block host h's stream reads this epoch."},
    {"host_reads", (PyCFunction)sampler_host_reads, METH_O,
     "host_reads(memory): HOSTS this rank's draws left this epoch counted as local, peer and "
     "home reads, host h's memory holding the fraction memory[h] of the dataset."},
    {"host_share", (PyCFunction)sampler_host_share, METH_O,
     "host_share(h): HOSTS (samples, blocks) of host h this epoch."},
    {"create_curriculum", (PyCFunction)(void (*)(void))sampler_create_curriculum,
     METH_VARARGS | METH_KEYWORDS | METH_CLASS,
     "create_curriculum(difficulty=float64 buffer | group=int64 buffer | store=Store, *, "
     "field=None, pacing='linear', start=0.1, steps=1, total=0, n=0, seed=0, epoch=0, "
     "world=1, rank=0, drop_last=False)"},
    {"set_epoch", (PyCFunction)sampler_set_epoch, METH_O, "Start epoch e from its beginning."},
    {"rank_len", (PyCFunction)sampler_rank_len, METH_NOARGS, "Per-rank count (any size)."},
    {"epoch_len", (PyCFunction)sampler_epoch_len, METH_NOARGS, "Epoch length L."},
    {"next", (PyCFunction)sampler_next, METH_VARARGS,
     "next(max=4096): this rank's next ids as an int64 Array (empty at the end)."},
    {"at", (PyCFunction)sampler_at, METH_O, "at(j): the rank view's j-th id."},
    {"epoch_at", (PyCFunction)sampler_epoch_at, METH_O, "epoch_at(p): the epoch order at p."},
    {"position", (PyCFunction)sampler_position, METH_O, "position(id): RANDOM inverse."},
    {"source", (PyCFunction)sampler_source, METH_O, "source(id): BLEND (source, inner)."},
    {"released", (PyCFunction)sampler_released, METH_O,
     "released(p): CURRICULUM released count at epoch position p."},
    {"state", (PyCFunction)sampler_state, METH_NOARGS,
     "dict(seed, epoch, consumed, fingerprint)."},
    {"restore", (PyCFunction)sampler_restore, METH_O,
     "restore(state): continue from state under this sampler's world and rank."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef sampler_getset[] = {
    {"fingerprint", (getter)sampler_get, NULL, "hash of what defines the order", (void *)0},
    {"id_bound", (getter)sampler_get, NULL, "every id drawn is below this", (void *)1},
    {"busy", (getter)sampler_get, NULL, "True while a Loader draws from it", (void *)2},
    {NULL, NULL, NULL, NULL, NULL},
};


static PyType_Slot SamplerType_slots[] = {
    {Py_tp_doc, (void *)"Sampler(kind='random', n=0, seed=0, epoch=0, shard_size=0, window=0, world=1, "
              "rank=0, drop_last=False, ramp=False): an order over ids 0..n-1 for one rank."},
    {Py_tp_new, (void *)PyType_GenericNew},
    {Py_tp_init, (void *)sampler_init},
    {Py_tp_dealloc, (void *)sampler_dealloc},
    {Py_tp_methods, (void *)sampler_methods},
    {Py_tp_getset, (void *)sampler_getset},
    {Py_sq_length, (void *)sampler_len},
    {0, NULL},
};
PyType_Spec SamplerType_spec = {
    .name = "cxl_dataloader._core.Sampler",
    .basicsize = sizeof(SamplerObject),
    .flags = Py_TPFLAGS_DEFAULT,
    .slots = SamplerType_slots,
};
PyTypeObject *SamplerTypeP;
