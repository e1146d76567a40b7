/*
 * _core.h - what the CPython extension's files share. One .c per Python
 * type; errors become exceptions in one place (core_raise).
 *
 * Ownership chain (each arrow is a strong reference), so that memory a
 * tensor views stays mapped as long as the tensor lives:
 *   tensor -> DLPack capsule ctx -> Array -> owner (Store | Batch)
 *   Batch -> Loader -> Store;  Store holds the C store, which holds the pool
 *   mapping (attachment) even after the Pool object is closed.
 */
#ifndef CXLP_CORE_H
#define CXLP_CORE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h> /* Python.h under the limited API includes neither */
#include <string.h>

#include "cxlpool.h"

#define MIN_U64(a, b) ((uint64_t)(a) < (uint64_t)(b) ? (uint64_t)(a) : (uint64_t)(b))

extern PyObject *CoreError;
/* The types are heap types made from specs at import (PyType_FromSpec: the
 * limited API, one abi3 extension for every CPython >= 3.11); XType names
 * the type object, as a static type's name would. */
extern PyType_Spec PoolType_spec, StoreType_spec, ArrayType_spec, LoaderType_spec,
    BatchType_spec, SamplerType_spec, WriterType_spec, StagerType_spec, PassType_spec;
extern PyTypeObject *PoolTypeP, *StoreTypeP, *ArrayTypeP, *LoaderTypeP, *BatchTypeP,
    *SamplerTypeP, *WriterTypeP, *StagerTypeP, *PassTypeP;
#define PoolType (*PoolTypeP)
#define StoreType (*StoreTypeP)
#define ArrayType (*ArrayTypeP)
#define LoaderType (*LoaderTypeP)
#define BatchType (*BatchTypeP)
#define SamplerType (*SamplerTypeP)
#define WriterType (*WriterTypeP)
#define StagerType (*StagerTypeP)
#define PassType (*PassTypeP)

/* What the limited API leaves out, spelled with what it has. */
#define CORE_SETREF(dst, src)                                                     \
    do {                                                                          \
        PyObject *old_ = (PyObject *)(dst);                                       \
        (dst) = (src);                                                            \
        Py_DECREF(old_);                                                          \
    } while (0)
#define CORE_XSETREF(dst, src)                                                    \
    do {                                                                          \
        PyObject *old_ = (PyObject *)(dst);                                       \
        (dst) = (src);                                                            \
        Py_XDECREF(old_);                                                         \
    } while (0)
/* Size and borrowed item i of what PySequence_Fast returned (a list or a tuple). */
static inline Py_ssize_t core_fast_size(PyObject *f)
{
    return PyList_Check(f) ? PyList_Size(f) : PyTuple_Size(f);
}
static inline PyObject *core_fast_item(PyObject *f, Py_ssize_t i)
{
    return PyList_Check(f) ? PyList_GetItem(f, i) : PyTuple_GetItem(f, i);
}

/* Frees self, an instance of a heap type made here, and lets go of the
 * reference to its type every instance holds. */
void core_free(PyObject *self);

/* Raises the CXLError subclass for rc (see _core.c) with the handle's
 * message (NULL: the thread's). Returns NULL for `return core_raise(...)`.
 * core_raise_dataset: the same where "not found" is about a dataset of an
 * open pool (a KeyError too). */
PyObject *core_raise(int rc, const void *handle);
PyObject *core_raise_dataset(int rc, const void *handle);

/* "O&" converters for uint64_t / uint32_t arguments that refuse what PyArg's
 * K and I would wrap: TypeError (not an integer), ValueError (negative),
 * OverflowError (too large). */
int core_u64(PyObject *o, void *out);
int core_u32(PyObject *o, void *out);

typedef struct {
    PyObject_HEAD
    cxlp_pool *p;
    PyObject *spec;
} PoolObject;

typedef struct {
    PyObject_HEAD
    cxlp_store *s;
    PyObject *name;
    int closed;              /* close() asked; the C store goes at dealloc */
    int copying;             /* no private mapping: records are copied (warned) */
} StoreObject;

#define ARRAY_MAX_DIMS 5
/* A borrowed n-d view of memory owned by owner; exports DLPack and the
 * buffer protocol, writable: ring slots are the loader's, and pool memory is
 * seen through the private copy-on-write mapping (see _core_store.c). */
typedef struct {
    PyObject_HEAD
    PyObject *owner;
    void *data;
    int dtype;               /* enum cxlp_dtype */
    int ndim;
    int64_t shape[ARRAY_MAX_DIMS];
    Py_ssize_t bshape[ARRAY_MAX_DIMS], bstrides[ARRAY_MAX_DIMS];
} ArrayObject;

/* New Array over data; takes a new reference to owner. */
PyObject *array_new(PyObject *owner, void *data, int dtype, int ndim, const int64_t *shape);

/* A DLPack capsule ("dltensor_versioned" if versioned, else "dltensor") for
 * a C-contiguous view of data; manager_ctx holds a new reference to owner
 * until the consumer's tensor is freed. */
PyObject *dlpack_capsule(PyObject *owner, void *data, int dtype, int ndim,
                         const int64_t *dims, int readonly, int versioned);

/* A DLPack tensor descriptor kept per ring slot and field (the Loader owns
 * it): each batch from that slot fills in the data address and the first
 * dimension and wraps it in a "dltensor_versioned" capsule whose
 * manager_ctx holds a new reference to owner; no allocation per batch. A
 * slot (and so its template) is reused only after every tensor made from
 * it is gone. */
typedef struct dl_tmpl dl_tmpl;
dl_tmpl *dl_tmpl_new(int dtype, int ndim, const int64_t *dims);
PyObject *dl_tmpl_capsule(dl_tmpl *t, PyObject *owner, void *data, int64_t dim0);
void dl_tmpl_free(dl_tmpl *t);

/* What take() builds per batch, in dict order: the collated fields (keyed
 * by field name; F_FIELD + k is the k-th), lengths (PAD and PACK), then
 * (PACK with segments) the document boundaries. */
enum { F_LENGTHS, F_SEG_ROW, F_SEG_START, F_SEG_LEN, F_SEG_OFFSET, F_SEG_ID, F_FIELD,
       N_TMPL = F_FIELD + CXLP_MAX_FIELDS };

typedef struct {
    PyObject_HEAD
    cxlp_loader *l;
    PyObject *store;         /* StoreObject */
    Py_buffer order;         /* the sample ids, int64 or uint64 */
    uint64_t pos;            /* next position in order handed to the engine */
    PyObject *sampler;       /* SamplerObject when the order is a Sampler, else NULL */
    PyObject *next;          /* SamplerObject of the next pass (staged for), or NULL */
    int collate;
    uint64_t seq_len;
    uint64_t stall_ns;       /* time next() / take() waited on the engine */
    uint32_t nfields;        /* fields collated (schema numbers in fields[]) */
    uint32_t fields[CXLP_MAX_FIELDS];
    PyObject *keys[CXLP_MAX_FIELDS]; /* their names, take()'s dict keys */
    int many;                /* STACK: take() gives a dict by field name, not one tensor */
    uint32_t seg_fields;     /* bit k: field k has one value per segment (PACK, fixed-shape) */
    PyObject *tensor;        /* take(): capsule -> tensor (torch's from_dlpack); NULL:
                                take() returns the capsules themselves */
    int segments;            /* take(), PACK: add the seg_* fields */
    dl_tmpl *(*tmpl)[N_TMPL]; /* per ring slot */
    uint32_t n_tmpl;
    uint64_t resume_records; /* of the last batch taken */
    uint64_t resume_offset;
} LoaderObject;

/* A cxlp_sampler; busy while a Loader draws from it (see _core_sampler.c). */
typedef struct {
    PyObject_HEAD
    cxlp_sampler *s;
    uint64_t id_bound;       /* every id drawn is < id_bound */
    uint64_t fingerprint;    /* fixed at create (read without touching the handle) */
    int busy;                /* Loaders drawing from it */
} SamplerObject;

typedef struct {
    PyObject_HEAD
    PyObject *loader;        /* LoaderObject */
    struct cxlp_batch *b;    /* released in dealloc */
} BatchObject;

#endif
