/*
 * cxlpool.h - the one public header of libcxlpool.
 *
 * libcxlpool keeps training datasets in a memory pool that many processes
 * (and, on a shared CXL pool, many hosts) attach at once. One copy of a
 * dataset serves every reader; readers take no locks.
 *
 * Layers, bottom up (each section below is one layer):
 *   errors   return codes, cxlp_strerror(), cxlp_errmsg()
 *   media    where the bytes live: shm (default), file, numa, devdax
 *   topo     what memory this machine has (NUMA nodes, HMAT, tiers, dax, CXL)
 *   pool     a named region: header, catalog, extent allocator, leases
 *   store    immutable checksummed datasets of records; the streaming writer
 *   import   raw fixed-size records, NumPy .npy, Megatron-LM .bin/.idx
 *
 * Conventions (every function follows them unless its comment says otherwise):
 *   - Functions return 0 on success or a negative code: -errno for an OS
 *     failure, or one of the CXLP_E* codes below (a reserved range that no
 *     errno reaches). cxlp_strerror() names any of them.
 *   - After a failure, cxlp_errmsg(handle) says what failed with context
 *     (path, offset, field). cxlp_errmsg(NULL) is the calling thread's last
 *     message, for failures where no handle exists yet (create, open).
 *   - Handles are opaque. A handle is used by one thread at a time unless the
 *     function says "thread-safe". Readers of the same pool in different
 *     threads should each use the read functions, which are thread-safe.
 *   - Out-parameters are written only on success.
 *   - Sizes, offsets and counts are uint64_t everywhere: there is no 32-bit
 *     limit on any of them.
 *
 * Pool specs (the POOL argument of the CLI and of cxlp_pool_create/open):
 *   NAME or shm:NAME        POSIX shared memory /dev/shm/cxlp.NAME (default;
 *                           emulates a CXL pool with local DRAM)
 *   file:PATH               any file: a DAX-mounted fs, hugetlbfs, or a sparse
 *                           file on disk that may be far larger than RAM
 *   numa:NODE:NAME          shared memory bound to NUMA node NODE with mbind
 *                           (how CXL memory in kmem mode is used)
 *   devdax:/dev/daxX.Y      a device-dax character device (2 MiB aligned)
 *
 * Caveats:
 *   - The writer lock is a process-shared robust mutex inside the pool: it
 *     serializes writers of one host. Hosts sharing one CXL pool need a
 *     cross-host lock (not provided yet); readers on any host are safe.
 *   - A pool is mapped whole into each process's address space; the mapping
 *     reserves address space, not memory (MAP_NORESERVE).
 *   - Views returned by the read functions borrow pool memory: they stay valid
 *     until the dataset handle they came from is closed.
 */
#ifndef CXLPOOL_H
#define CXLPOOL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(CXLP_BUILDING) && defined(__GNUC__)
#define CXLP_API __attribute__((visibility("default")))
#else
#define CXLP_API
#endif

#define CXLP_VERSION_MAJOR 0
#define CXLP_VERSION_MINOR 1
#define CXLP_VERSION_PATCH 0
CXLP_API const char *cxlp_version(void);

/* ======================================================================
 * errors
 * ====================================================================== */

/* Library codes live in [-CXLP_ERR_LAST, -CXLP_ERR_BASE]; errno never does. */
#define CXLP_ERR_BASE 30000
enum cxlp_err {
    CXLP_EPANIC = -30000,       /* handle poisoned by a fatal inconsistency */
    CXLP_ECORRUPT = -30001,     /* checksum mismatch or impossible structure */
    CXLP_EFORMAT = -30002,      /* not our format: bad magic or version */
    CXLP_ELAYOUT = -30003,      /* layout signature differs (other ABI/build) */
    CXLP_ENOTFOUND = -30004,    /* no such pool, dataset or record */
    CXLP_EEXIST = -30005,       /* name already taken */
    CXLP_EFULL = -30006,        /* pool has no free extent large enough */
    CXLP_EBUSY = -30007,        /* lease table full, or lock not available */
    CXLP_EUNSUPPORTED = -30008, /* valid input we do not handle (dtype, order) */
    CXLP_EBADINPUT = -30009,    /* malformed source file (importers) */
    CXLP_EOWNER = -30010,       /* pool owned by another user, opened to write */
    CXLP_ERANGE = -30011,       /* index or offset out of range */
    CXLP_ENODEV = -30012,       /* backend device absent (devdax, numa node) */
    CXLP_ECATFULL = -30013,     /* catalog slot has no room for more entries */
    CXLP_EARG = -30014,         /* bad argument (names the argument) */
    CXLP_EREADONLY = -30015,    /* write through a read-only handle */
};
#define CXLP_ERR_LAST 30015

/* Static string naming rc (negative errno or CXLP_E*). Never NULL. */
CXLP_API const char *cxlp_strerror(int rc);

/* Last error message with context for handle (any cxlp_* handle), or for the
 * calling thread when handle is NULL. Valid until the next call on the handle
 * (or, for NULL, the next failing call in this thread). Never NULL. */
CXLP_API const char *cxlp_errmsg(const void *handle);

/* ======================================================================
 * media
 * ====================================================================== */

enum cxlp_media_kind {
    CXLP_MEDIA_SHM = 0,
    CXLP_MEDIA_FILE = 1,
    CXLP_MEDIA_NUMA = 2,
    CXLP_MEDIA_DEVDAX = 3,
};

/* "shm", "file", "numa", "devdax"; "?" for an unknown value. */
CXLP_API const char *cxlp_media_name(int kind);

/* ======================================================================
 * topo: what memory this machine has
 * ====================================================================== */

typedef struct cxlp_topo cxlp_topo;

#define CXLP_TOPO_UNKNOWN UINT64_MAX /* a figure sysfs does not expose */

struct cxlp_topo_node {
    int id;
    int has_cpu;             /* listed in node/has_cpu */
    int has_memory;          /* listed in node/has_memory */
    uint64_t mem_total;      /* bytes, from nodeN/meminfo; 0 if absent */
    int tier;                /* memory_tierK that lists the node; -1 unknown */
    /* HMAT access class 0 (nodeN/access0/initiators/); CXLP_TOPO_UNKNOWN if absent */
    uint64_t read_latency_ns, write_latency_ns;
    uint64_t read_bandwidth_mbs, write_bandwidth_mbs;
    int is_cxl;              /* memory-only node backed by a CXL region or kmem dax */
    const char *backend;     /* backend a pool tier on this node would use:
                                "numa" (memory-only node), "shm" (DRAM node:
                                emulated CXL), "none" (node without memory) */
};

struct cxlp_topo_dax {
    char name[32];           /* "dax0.0" */
    uint64_t size;           /* bytes */
    uint64_t align;          /* bytes; 0 if unknown */
    int target_node;         /* -1 if unknown */
    char mode[16];           /* "devdax" (driver device_dax), "kmem", "unbound", or
                                "other" (bound to another driver) */
    char devpath[64];        /* "/dev/dax0.0" */
};

struct cxlp_topo_cxl {
    char name[32];           /* "mem0", "region0", ... from /sys/bus/cxl/devices */
    char kind[16];           /* "memdev", "region", "decoder", "port", "other" */
    uint64_t size;           /* ram+pmem size for memdevs, region size; 0 unknown */
};

/* Reads the topology under sysfs_root (NULL or "" means "/"; tests point it
 * at a captured tree). Missing files are not errors: figures stay unknown;
 * files present but unusable add a warning to the reports. Returns 0,
 * -ENOMEM, CXLP_EARG (out NULL), or -errno when sysfs_root cannot be read at
 * all. The handle does not change after discovery: the accessors are
 * thread-safe. */
CXLP_API int cxlp_topo_discover(const char *sysfs_root, cxlp_topo **out);
CXLP_API void cxlp_topo_free(cxlp_topo *t);
CXLP_API size_t cxlp_topo_node_count(const cxlp_topo *t);
CXLP_API const struct cxlp_topo_node *cxlp_topo_node(const cxlp_topo *t, size_t i);
CXLP_API size_t cxlp_topo_dax_count(const cxlp_topo *t);
CXLP_API const struct cxlp_topo_dax *cxlp_topo_dax(const cxlp_topo *t, size_t i);
CXLP_API size_t cxlp_topo_cxl_count(const cxlp_topo *t);
CXLP_API const struct cxlp_topo_cxl *cxlp_topo_cxl(const cxlp_topo *t, size_t i);
/* Human-readable (json=0) or JSON (json=1) report to f. CXLP_EARG, or -EIO
 * when f fails. */
CXLP_API int cxlp_topo_print(const cxlp_topo *t, FILE *f, int json);

/* ======================================================================
 * pool
 * ====================================================================== */

typedef struct cxlp_pool cxlp_pool;

struct cxlp_pool_opts {
    uint32_t mode;           /* file mode of a new pool; 0 means 0600 */
    uint64_t catalog_bytes;  /* per catalog slot; 0 means 4 MiB */
    uint32_t lease_slots;    /* reader lease table size; 0 means 256 */
    int readonly;            /* open: map read-only (no writes; a lease is still taken) */
};

/* Creates a new pool of size bytes at spec (see top of file) and attaches it.
 * Fails with CXLP_EEXIST if it exists, CXLP_EARG for a bad spec or size.
 * A sparse file pool of any size creates in O(1) time. opts may be NULL. */
CXLP_API int cxlp_pool_create(const char *spec, uint64_t size,
                              const struct cxlp_pool_opts *opts, cxlp_pool **out);
/* Attaches an existing pool. Validates magic, version, layout signature and
 * header checksum (CXLP_EFORMAT / CXLP_ELAYOUT / CXLP_ECORRUPT). Opening to
 * write a pool owned by another uid fails with CXLP_EOWNER. Takes a reader
 * lease (CXLP_EBUSY when the lease table is full of live holders). */
CXLP_API int cxlp_pool_open(const char *spec, const struct cxlp_pool_opts *opts,
                            cxlp_pool **out);
/* Releases the lease and unmaps. Views from this pool's datasets must not be
 * used afterwards, unless their dataset handles are still open (a dataset
 * keeps the mapping alive). NULL is a no-op. */
CXLP_API int cxlp_pool_close(cxlp_pool *p);
/* Removes the pool's backing object (shm object or file); devdax: wipes the
 * header. Attached processes keep their mappings until they close. */
CXLP_API int cxlp_pool_destroy(const char *spec);

struct cxlp_pool_stat {
    uint64_t size;           /* whole region */
    uint64_t data_bytes;     /* extent area */
    uint64_t used_bytes;     /* extents held by datasets */
    uint64_t reserved_bytes; /* extents held by unfinished ingests */
    uint64_t deferred_bytes; /* freed extents still visible to a lease */
    uint64_t free_bytes;
    uint64_t largest_free;
    uint64_t generation;     /* catalog generation */
    uint32_t n_datasets;
    uint32_t live_leases;
    uint32_t lease_slots;
    int media;               /* enum cxlp_media_kind */
    int emulated;            /* 1 when the media stands in for CXL (shm, file) */
    int numa_node;           /* numa backend's node, else -1 */
    uint32_t format_version;
    uint8_t uuid[16];
    char path[256];          /* backing object */
};
CXLP_API int cxlp_pool_stat(cxlp_pool *p, struct cxlp_pool_stat *st);

/* Checks the header, both catalog slots' structure, the extent map (no
 * overlap, inside the region), every shard header and every checksum of every
 * dataset. Returns 0 or the first problem (CXLP_ECORRUPT...), with
 * cxlp_errmsg naming dataset, shard and offset. report(ctx, line) receives
 * one line per checked item when not NULL. */
CXLP_API int cxlp_pool_verify(cxlp_pool *p,
                              void (*report)(void *ctx, const char *line), void *ctx);

/* Dataset listing from the current catalog. */
struct cxlp_dataset_info {
    char name[64];
    uint64_t version;        /* catalog generation that published it */
    uint64_t n_records;
    uint64_t data_bytes;     /* record payload bytes */
    uint64_t stored_bytes;   /* extents incl. headers and indexes */
    uint32_t n_shards;
    int fixed;               /* 1: fixed-size records; 0: variable-size */
    uint64_t record_size;    /* fixed only */
    uint64_t n_docs;         /* document count (Megatron import), else 0 */
    uint64_t created_unix;
};
CXLP_API int cxlp_pool_list(cxlp_pool *p, struct cxlp_dataset_info *infos,
                            size_t cap, size_t *n_out);
/* Removes a dataset from the catalog (one atomic flip). Its extents are freed
 * once no lease can still see it. */
CXLP_API int cxlp_pool_remove(cxlp_pool *p, const char *name);

/* ======================================================================
 * store: datasets of immutable records
 * ====================================================================== */

enum cxlp_dtype {
    CXLP_DT_U8 = 0, CXLP_DT_I8, CXLP_DT_U16, CXLP_DT_I16, CXLP_DT_U32,
    CXLP_DT_I32, CXLP_DT_U64, CXLP_DT_I64, CXLP_DT_F16, CXLP_DT_BF16,
    CXLP_DT_F32, CXLP_DT_F64, CXLP_DT_BOOL,
    CXLP_DT_COUNT
};
CXLP_API const char *cxlp_dtype_name(int dtype);   /* "uint8", "int32", ... */
CXLP_API int cxlp_dtype_size(int dtype);           /* bytes; -1 unknown */
CXLP_API int cxlp_dtype_parse(const char *name);   /* inverse; -1 unknown */

#define CXLP_MAX_FIELDS 8
#define CXLP_MAX_DIMS 4
#define CXLP_NAME_MAX 64
struct cxlp_field {
    char name[32];
    int dtype;               /* enum cxlp_dtype */
    int ndim;                /* 0..CXLP_MAX_DIMS; fixed-size records */
    uint64_t shape[CXLP_MAX_DIMS];
    uint64_t offset;         /* byte offset inside a fixed-size record */
};
/* A schema: fixed-size records are n_fields fields laid out back to back;
 * variable-size records have exactly one field of ndim 0 and element dtype
 * dtype: a record is a 1-D array of that dtype (e.g. a token sequence). */
struct cxlp_schema {
    int fixed;
    uint64_t record_size;    /* fixed: sum of field sizes */
    uint32_t n_fields;
    struct cxlp_field fields[CXLP_MAX_FIELDS];
};

typedef struct cxlp_store cxlp_store;          /* an open dataset (reader) */
typedef struct cxlp_writer cxlp_writer;        /* an ingest in progress */

struct cxlp_view {           /* borrowed; valid while its cxlp_store is open */
    const void *data;
    uint64_t len;
};

/* Opens dataset name of the current catalog. The handle pins that catalog
 * generation (through the pool's lease) and keeps the pool mapped even after
 * cxlp_pool_close. Validates every shard header and index bounds. */
CXLP_API int cxlp_store_open(cxlp_pool *p, const char *name, cxlp_store **out);
CXLP_API int cxlp_store_close(cxlp_store *s);
CXLP_API uint64_t cxlp_store_count(const cxlp_store *s);
CXLP_API int cxlp_store_info(const cxlp_store *s, struct cxlp_dataset_info *info);
CXLP_API const struct cxlp_schema *cxlp_store_schema(const cxlp_store *s);
/* Record idx (0..count-1) as a borrowed view. O(1). Thread-safe.
 * CXLP_ERANGE past the end; CXLP_ECORRUPT if the index points outside the
 * shard (checked on every call). */
CXLP_API int cxlp_store_read(const cxlp_store *s, uint64_t idx, struct cxlp_view *v);
/* Document boundaries of a Megatron import: docs[i] is the first record of
 * document i; n_docs+1 entries (the last is count). NULL/0 when absent. */
CXLP_API int cxlp_store_docs(const cxlp_store *s, const int64_t **docs, uint64_t *n_docs);
/* Recomputes every shard checksum of this dataset. */
CXLP_API int cxlp_store_verify(cxlp_store *s);

struct cxlp_writer_opts {
    uint64_t shard_bytes;    /* target shard payload; 0 means 256 MiB */
    uint64_t expected_bytes; /* total payload if known (lets the writer reserve
                                exactly once); 0 when streaming */
    /* progress(ctx, done_bytes, total_bytes) after each chunk; may be NULL */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
};
/* Starts an ingest of dataset name (CXLP_EEXIST if published already).
 * Nothing is visible to readers until cxlp_writer_commit. A process killed at
 * any point leaves the catalog as it was; its reserved extents are reclaimed
 * by the next writer. */
CXLP_API int cxlp_writer_begin(cxlp_pool *p, const char *name,
                               const struct cxlp_schema *schema,
                               const struct cxlp_writer_opts *opts, cxlp_writer **out);
/* Appends one record (fixed: len must equal record_size). */
CXLP_API int cxlp_writer_append(cxlp_writer *w, const void *rec, uint64_t len);
/* Appends n fixed-size records stored back to back. */
CXLP_API int cxlp_writer_append_fixed(cxlp_writer *w, const void *recs, uint64_t n);
/* Reserves room for len bytes of fixed-size records and returns where to
 * write them, for importers that read() straight into the pool. The bytes
 * become n records at the next cxlp_writer_commit_direct. */
CXLP_API int cxlp_writer_direct(cxlp_writer *w, uint64_t len, void **dst);
CXLP_API int cxlp_writer_commit_direct(cxlp_writer *w, uint64_t len);
/* Document boundaries (see cxlp_store_docs); n_docs+1 entries. */
CXLP_API int cxlp_writer_set_docs(cxlp_writer *w, const int64_t *docs, uint64_t n_docs);
/* Seals the last shard, checksums, and publishes the dataset in one atomic
 * catalog flip. Frees w in all cases. */
CXLP_API int cxlp_writer_commit(cxlp_writer *w);
/* Drops the ingest and returns its extents. Frees w. NULL is a no-op. */
CXLP_API void cxlp_writer_abort(cxlp_writer *w);
CXLP_API const char *cxlp_writer_errmsg(const cxlp_writer *w);

/* ======================================================================
 * import: what users already have
 * ====================================================================== */

enum cxlp_format { CXLP_FMT_AUTO = 0, CXLP_FMT_RAW, CXLP_FMT_NPY, CXLP_FMT_MEGATRON };
/* "raw", "npy", "megatron", "auto" -> enum cxlp_format; anything else (or
 * NULL) -> CXLP_EARG with cxlp_errmsg(NULL) naming it. */
CXLP_API int cxlp_format_parse(const char *name);

struct cxlp_import_opts {
    int format;              /* enum cxlp_format; AUTO guesses by extension */
    uint64_t record_size;    /* raw: bytes per record (required) */
    int dtype;               /* raw: element dtype; -1 means uint8 */
    uint64_t shard_bytes;    /* 0: default */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
};
/* Imports src into a new dataset name. src is a file (raw, .npy) or a Megatron
 * prefix (PREFIX.bin + PREFIX.idx; "PREFIX", "PREFIX.bin" and "PREFIX.idx" are
 * all accepted). Bad input fails with CXLP_EBADINPUT / CXLP_EUNSUPPORTED and
 * cxlp_errmsg(p) naming the file and field; the pool is left unchanged.
 * Megatron: one record per sequence (dtype from the .idx), document
 * boundaries kept (cxlp_store_docs). npy: one record per row of axis 0.
 * Format AUTO: ".npy" -> npy; "PREFIX", "PREFIX.bin" or "PREFIX.idx" where
 * both PREFIX.bin and PREFIX.idx exist -> megatron; a file starting with the
 * .npy magic -> npy; anything else -> raw.
 * Schemas: raw and npy give fixed-size records with one field "data" (raw: a
 * 1-D field of record_size / itemsize elements of opts->dtype; npy: the
 * array's dtype and its shape without axis 0, at most CXLP_MAX_DIMS-1 axes,
 * C order, little-endian numeric dtypes only); megatron gives variable-size
 * records with one field "tokens". Other codes: CXLP_EARG (record_size 0 for
 * raw, bad dtype or format), -errno (e.g. -ENOENT naming the path),
 * CXLP_EEXIST, CXLP_EFULL. opts may be NULL (AUTO); progress(ctx, done,
 * total) is called after each chunk of about 4 MiB, in the calling thread. */
CXLP_API int cxlp_import(cxlp_pool *p, const char *name, const char *src,
                         const struct cxlp_import_opts *opts);

#ifdef __cplusplus
}
#endif
#endif /* CXLPOOL_H */
