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
 *   remote   a pool served to other hosts over UCX (cxlpool serve), and its
 *            client (docs/remote.md)
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
 *                           file on disk that may be far larger than RAM; or
 *                           a block device (sized by the device, claimed
 *                           O_EXCL, never created or removed)
 *   numa:NODE:NAME          shared memory bound to NUMA node NODE with mbind
 *                           (how CXL memory in kmem mode is used)
 *   numa:interleave=NODES:NAME  the same, its pages interleaved over NODES
 *                           (a list: "0,1", "0-3"; MPOL_INTERLEAVE)
 * A shm or numa pool larger than /dev/shm's tmpfs size, or a numa pool
 * larger than its nodes' memory, is refused at create (CXLP_EARG).
 *   devdax:/dev/daxX.Y      a device-dax character device (2 MiB aligned)
 *   pci:PATH                a fixed-size memory region that is a file: a PCI
 *                           BAR (/sys/bus/pci/devices/D/resourceN, e.g. the
 *                           shared memory of an ivshmem device), never
 *                           created, resized or removed by the library
 *
 * Caveats (docs/hosts.md has them all):
 *   - Several hosts may attach one pool (a CXL switch, or any memory they all
 *     map). Writers of all hosts serialize on a lock word in the pool; a
 *     writer or reader whose heartbeat stops for the pool's expiry (default
 *     30 s: a stopped or frozen process) loses its lock or lease, and its
 *     publish fails. Host ids: docs/hosts.md.
 *   - A pool declared non-coherent at create (its hosts' caches are not kept
 *     coherent by the hardware) is written back and invalidated line by line
 *     around every publish and read; atomics across hosts are then not
 *     guaranteed, so only one host may write at a time, by arrangement.
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
    CXLP_MEDIA_PCI = 4,
    CXLP_MEDIA_UCX = 5,      /* a remote tier: other hosts' pools, read over UCX
                                (docs/remote.md); no media of this host */
};

/* "shm", "file", "numa", "devdax", "pci", "ucx"; "?" for an unknown value. */
CXLP_API const char *cxlp_media_name(int kind);

/* What a tier of a pool is (docs/tiers.md). Memory tiers (DRAM, CXL) are
 * read in place; an NVME tier is never read through a mapping: copies of
 * its shards are staged into a memory tier. */
enum cxlp_tier_kind {
    CXLP_TIER_DRAM = 0,      /* local memory: shm, numa on a node with CPUs */
    CXLP_TIER_CXL = 1,       /* CXL memory: numa on a memory-only node, devdax */
    CXLP_TIER_REMOTE = 2,    /* other hosts' pools served over UCX: their
                                datasets listed here, their shards staged into
                                a memory tier (docs/remote.md) */
    CXLP_TIER_NVME = 3,      /* a file on storage, read by staged copies */
};
/* "dram", "cxl", "remote", "nvme"; "?" for an unknown value. */
CXLP_API const char *cxlp_tier_name(int kind);
/* Inverse of cxlp_tier_name; -1 for an unknown name. */
CXLP_API int cxlp_tier_parse(const char *name);

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
    uint64_t meta_bytes;     /* tiered create: the pool object's area for shard
                                tables and states (48 bytes a shard with 3 tiers);
                                0 means 128 MiB */
    int noncoherent;         /* create: the hosts' caches are not coherent over
                                this memory (docs/hosts.md); 0: coherent */
    uint32_t expiry_ms;      /* create: a lease or lock whose heartbeat stops
                                this long expires; 0 means 30000 (500..86400000) */
};

/* Creates a new pool of size bytes at spec (see top of file) and attaches it.
 * Fails with CXLP_EEXIST if it exists, CXLP_EARG for a bad spec or size.
 * A sparse file pool of any size creates in O(1) time. opts may be NULL. */
CXLP_API int cxlp_pool_create(const char *spec, uint64_t size,
                              const struct cxlp_pool_opts *opts, cxlp_pool **out);
/* Creates a pool made of tiers (docs/tiers.md), fastest first: tiers[i] is
 * "KIND=MEDIA" with KIND dram, cxl or nvme and MEDIA one of
 *   shm:SIZE, shm:NAME:SIZE            (/dev/shm/cxlp.NAME; NAME defaults
 *                                       to POOLNAME.KIND)
 *   numa:NODE:SIZE, numa:NODE:NAME:SIZE (shm memory bound to NUMA node NODE)
 *   devdax:/dev/daxX.Y[:SIZE]          (no SIZE: the whole device)
 *   file:PATH:SIZE                     (nvme tiers only)
 *   file:/dev/BLOCKDEV[:SIZE]          (nvme tiers only; no SIZE: the whole
 *                                       device, which is claimed O_EXCL)
 * e.g. {"dram=shm:1G", "cxl=numa:1:8G", "nvme=file:/data/train.tier:2T"};
 * or "remote=ucx://HOST:PORT/POOL[,ucx://HOST:PORT/POOL...]": the servers
 * (cxlpool serve) of other hosts' pools, whose datasets this pool lists
 * and reads (docs/remote.md; a pool with one needs a memory tier).
 * spec names the pool object, which holds the metadata (opts->meta_bytes of
 * room for shard tables). The last nvme tier is the home: ingests write
 * there and every shard keeps its copy there. Every spec is checked before
 * anything is created: CXLP_EARG (syntax, order, a size too small, two
 * tiers on one object, a bad url), CXLP_EUNSUPPORTED (remote in a build
 * without UCX), CXLP_ENODEV (a numa
 * node or device that is not there), CXLP_EEXIST (an object exists, or a
 * device already holds a pool or tier object), CXLP_EBUSY (a block device
 * mounted or claimed), CXLP_EFULL (a file larger than its filesystem's free
 * space); the message names the tier. */
CXLP_API int cxlp_pool_create_tiered(const char *spec, const char *const *tiers,
                                     size_t n_tiers, const struct cxlp_pool_opts *opts,
                                     cxlp_pool **out);
/* Parses a byte size as the CLI takes it: "4096", "64K", "1.5G", "2GiB"
 * (powers of 1024), "1TB", "500MB" (powers of 1000); units K M G T P in
 * either case; a fraction rounds down to a whole byte. 0, or CXLP_EARG with a
 * message naming the text (no sign, whitespace or exponent; overflow of 64
 * bits). Thread-safe. */
CXLP_API int cxlp_size_parse(const char *s, uint64_t *out);
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

/* Sizes are summed over the pool's objects (one, unless it has tiers). */
struct cxlp_pool_stat {
    uint64_t size;           /* the pool object (metadata; data too with one tier) */
    uint64_t data_bytes;     /* extent areas */
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
    int emulated;            /* 1 when the media stands in for CXL (shm, file); pci:
                                1 a QEMU ivshmem BAR, 2 a plain file (no PCI device) */
    int numa_node;           /* numa backend's node, else -1 (also interleaved) */
    int numa_interleave;     /* numa backend: 1 when pages interleave over numa_nodes */
    char numa_nodes[64];     /* the nodes the pool's memory is on, as a list ("1",
                                "0-3"): a numa pool's node set; other media: the
                                nodes of its resident pages, from a sample of 64
                                pages; "" when none is known (devdax, pci) */
    int near_node;           /* the node with CPUs nearest that memory (the one a
                                loader's numa_bind=True runs on); -1 none known */
    uint32_t format_version;
    uint8_t uuid[16];
    char path[256];          /* backing object */
    int coherent;            /* 0: declared non-coherent at create */
    uint64_t expiry_ms;      /* heartbeat expiry across hosts */
    uint64_t host_id;        /* this host's id (docs/hosts.md) */
    char host_id_source[96]; /* where it came from */
    uint32_t hosts;          /* liveness domains in the registry */
    uint32_t n_tiers;        /* 1 for a pool of one tier (cxlp_pool_tiers) */
    uint64_t reserved_dead_bytes; /* of reserved_bytes, those whose ingest (or copy)
                                     died: the pool's next write frees them */
};
CXLP_API int cxlp_pool_stat(cxlp_pool *p, struct cxlp_pool_stat *st);

/* One attached process, as the lease table shows it. */
struct cxlp_lease_info {
    uint32_t slot;
    uint32_t pid;            /* in the owner's PID namespace */
    uint64_t domain;         /* the owner's domain: host id + boot + PID namespace */
    uint64_t host_id;        /* 0 when its domain left the registry */
    char host[16];           /* hostname; "" when unknown */
    int same_domain;         /* this process judges it by pid */
    int this_process;
    int live;                /* 0: dead or expired; the next writer reclaims it */
    double age_s;            /* since its last heartbeat, on the pool clock */
    uint64_t pinned_gen;     /* smallest pinned generation; UINT64_MAX none */
};
/* Lists the occupied lease slots (up to cap; *n is the total). */
CXLP_API int cxlp_pool_leases(cxlp_pool *p, struct cxlp_lease_info *out, size_t cap,
                              size_t *n);
/* Forces the expiry of every lease, and of the writer lock, of the hosts that
 * match host (a hostname, a host id or a domain, in hex as cxlp_pool_leases
 * gives them), except this handle's own lease. Their processes, if alive,
 * lose the protection of their pins: extents they read may be reused. Needs
 * a writable handle. *n_expired gets the count; CXLP_ENOTFOUND when no host
 * matches. */
CXLP_API int cxlp_pool_expire_host(cxlp_pool *p, const char *host, uint32_t *n_expired);

/* One tier of a pool as cxlp_pool_tiers reports it. Counters are the
 * pool's since it was created, summed over every process (cxlpool top
 * shows their rates). */
struct cxlp_tier_info {
    int kind;                /* enum cxlp_tier_kind */
    int media;               /* enum cxlp_media_kind of its object */
    int emulated;            /* 1: a cxl tier on media that stands in for CXL
                                memory (shm, file, a numa node of local DRAM);
                                the tier of a pool of one tier: the pool's own
                                emulated (cxlp_pool_stat) */
    int numa_node;           /* numa media's node, else -1 */
    int home;                /* 1: every shard keeps a copy here */
    int staged;              /* 1: never read in place (nvme) */
    char path[256];          /* backing object */
    uint64_t capacity;       /* bytes for copies */
    uint64_t used;           /* bytes not free (copies, reservations, deferred
                                frees; metadata too in a pool of one tier) */
    uint64_t copies;         /* shard copies it holds */
    uint64_t copy_bytes;     /* their bytes (4 KiB pages) */
    uint64_t hits;           /* records read from a copy here without waiting */
    uint64_t misses;         /* records whose shard had to be fetched first */
    uint64_t bytes_in;       /* bytes copied in (staged, migrated) */
    uint64_t bytes_out;      /* bytes of copies evicted or migrated away */
    uint64_t stall_ns;       /* time readers waited for fetches into it */
    uint64_t fetches;        /* shard copies made here */
    uint64_t evictions;      /* copies dropped from here */
};
/* Fills out[0..min(cap, n)) and *n with the pool's tiers, fastest first. */
CXLP_API int cxlp_pool_tiers(cxlp_pool *p, struct cxlp_tier_info *out, size_t cap,
                             size_t *n);

/* A staging engine (a loader's or a stager's) of this host at work on a
 * pool of tiers, as cxlp_pool_stagers reports it (cxlpool top's loaders):
 * its counters since it began, and the main cause of its misses. */
struct cxlp_stager_info {
    uint32_t pid;
    char dataset[64];        /* CXLP_NAME_MAX */
    int policy;              /* enum cxlp_policy */
    uint64_t budget;         /* bytes its copies may hold */
    uint64_t unit_bytes;     /* bytes of what it stages: a shard or a unit */
    uint64_t kept_bytes;     /* bytes of kept copies (a migration's, another
                                policy's) counted in its budget */
    uint64_t hits, misses;   /* records found in memory, and not */
    uint64_t no_room;        /* items read from the home: the tier was full */
    uint64_t stall_ns;       /* time its batches waited */
    uint64_t bytes_staged;   /* bytes it copied from the home */
    char why[256];           /* why it misses, in words; "" with no miss */
};
/* Fills out[0..min(cap, n)) and *n with the live staging engines of this
 * host (liveness domain) on p; 0 with *n 0 for a pool of one tier. */
CXLP_API int cxlp_pool_stagers(cxlp_pool *p, struct cxlp_stager_info *out, size_t cap,
                               size_t *n);

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
/* The datasets of the pool. A pool with a remote tier lists its peers'
 * datasets too: each one this pool does not hold is mirrored into its
 * catalog the first time (docs/remote.md); peers are asked at most once a
 * second per handle, and a peer that does not answer adds nothing. */
CXLP_API int cxlp_pool_list(cxlp_pool *p, struct cxlp_dataset_info *infos,
                            size_t cap, size_t *n_out);
/* 1 when dataset name was shuffled at ingest (cxlp_import_opts.shuffle),
 * with *seed (may be NULL) its seed; 0 when its records are in input order
 * (*seed 0). Reads the catalog only (no shard table): what `cxlpool ls`
 * shows per dataset. CXLP_ENOTFOUND. See also cxlp_store_ingest_shuffle. */
CXLP_API int cxlp_pool_ingest_shuffle(cxlp_pool *p, const char *name, uint64_t *seed);
/* Removes a dataset from the catalog (one atomic flip). Its extents are freed
 * once no lease can still see it. */
CXLP_API int cxlp_pool_remove(cxlp_pool *p, const char *name);

/* ======================================================================
 * store: datasets of immutable records
 * ====================================================================== */

/* CXLP_DT_STR is UTF-8 text, one byte per element, for variable-length
 * fields only (its bytes are checked to be valid UTF-8 when written). */
enum cxlp_dtype {
    CXLP_DT_U8 = 0, CXLP_DT_I8, CXLP_DT_U16, CXLP_DT_I16, CXLP_DT_U32,
    CXLP_DT_I32, CXLP_DT_U64, CXLP_DT_I64, CXLP_DT_F16, CXLP_DT_BF16,
    CXLP_DT_F32, CXLP_DT_F64, CXLP_DT_BOOL, CXLP_DT_STR,
    CXLP_DT_COUNT
};
CXLP_API const char *cxlp_dtype_name(int dtype);   /* "uint8", "int32", "str", ... */
CXLP_API int cxlp_dtype_size(int dtype);           /* bytes; -1 unknown */
CXLP_API int cxlp_dtype_parse(const char *name);   /* inverse; -1 unknown */

#define CXLP_MAX_FIELDS 8
#define CXLP_MAX_STAGERS 8 /* cxlp_loader_opts.tier_stagers */
#define CXLP_MAX_DIMS 4
#define CXLP_NAME_MAX 64
struct cxlp_field {
    char name[32];           /* 1..31 bytes, unique in the schema */
    int dtype;               /* enum cxlp_dtype */
    int ndim;                /* 0..CXLP_MAX_DIMS */
    uint64_t shape[CXLP_MAX_DIMS]; /* ndim == 1 && shape[0] == 0: variable length */
    uint64_t offset;         /* fixed-size records: byte offset inside the row form */
};
/* A schema: 1..CXLP_MAX_FIELDS named fields. A field is fixed-shape (dtype and
 * shape, every dimension > 0; ndim 0 is a scalar) or variable-length (ndim 1
 * with shape[0] == 0: each record holds a 1-D array of any length of dtype,
 * e.g. a token sequence, an encoded image as uint8, a caption as str).
 * fixed == 1 when every field is fixed-shape: a record then also has a row
 * form, the fields laid back to back (offset of field k = sum of the sizes
 * before it, record_size = the total), which cxlp_writer_append takes and
 * cxlp_store_read returns for one-field datasets. fixed == 0 when some field
 * is variable-length (record_size 0, offsets 0). Each field is stored as its
 * own column in every shard, so one field reads without the others
 * (cxlp_store_read_field). Compatibility: fixed == 0 with one field of ndim 0
 * (how schemas said "variable-length" before) means that field is
 * variable-length; the stored schema then has ndim 1, shape[0] == 0. */
struct cxlp_schema {
    int fixed;
    uint64_t record_size;    /* fixed: sum of field sizes */
    uint32_t n_fields;
    struct cxlp_field fields[CXLP_MAX_FIELDS];
};
/* 1 when field f of a normalized schema is variable-length. */
#define CXLP_FIELD_VAR(f) ((f)->ndim == 1 && (f)->shape[0] == 0)

typedef struct cxlp_store cxlp_store;          /* an open dataset (reader) */
typedef struct cxlp_writer cxlp_writer;        /* an ingest in progress */

struct cxlp_view {           /* borrowed; valid while its cxlp_store is open */
    const void *data;
    uint64_t len;
};

/* Opens dataset name of the current catalog. The handle pins that catalog
 * generation (through the pool's lease) and keeps the pool mapped even after
 * cxlp_pool_close. Validates every shard header and index bounds. A name
 * the pool does not hold that a peer of its remote tier serves is mirrored
 * first (docs/remote.md); a peer's error then says which peer and why. */
CXLP_API int cxlp_store_open(cxlp_pool *p, const char *name, cxlp_store **out);
CXLP_API int cxlp_store_close(cxlp_store *s);
CXLP_API uint64_t cxlp_store_count(const cxlp_store *s);
CXLP_API int cxlp_store_info(const cxlp_store *s, struct cxlp_dataset_info *info);
CXLP_API const struct cxlp_schema *cxlp_store_schema(const cxlp_store *s);
/* Record idx (0..count-1) as a borrowed view. O(1). Thread-safe.
 * CXLP_ERANGE past the end; CXLP_ECORRUPT if the index points outside the
 * shard (checked on every call). Datasets of one field, and fixed-size
 * multi-field datasets written before shard format 2 (rows), give the whole
 * record; a dataset whose fields are stored in columns has no whole-record
 * form: CXLP_EARG, read its fields with cxlp_store_read_field. On a pool of
 * tiers a shard with no copy in a memory tier is fetched first (a miss;
 * CXLP_EFULL when no memory tier has room), and the view holds its copy
 * until close (cxlp_store_tiered); so does cxlp_store_read_field's. */
CXLP_API int cxlp_store_read(const cxlp_store *s, uint64_t idx, struct cxlp_view *v);
/* Field `field` (0..n_fields-1) of record idx as a borrowed view: for a
 * variable-length field its elements (len a multiple of the dtype size), for
 * a fixed-shape field its bytes. O(1), reads only that field's column.
 * Thread-safe. CXLP_ERANGE past the end or for a field number out of range;
 * CXLP_ECORRUPT as cxlp_store_read. */
CXLP_API int cxlp_store_read_field(const cxlp_store *s, uint64_t idx, uint32_t field,
                                   struct cxlp_view *v);
/* Field number of name, or -1. */
CXLP_API int cxlp_schema_field(const struct cxlp_schema *s, const char *name);
/* Record idx copied into buf (cap bytes); *len receives its length
 * (CXLP_ERANGE when cap is shorter, with *len set). Any pool; on a pool of
 * tiers the copy it reads is pinned only for the call, and a shard with no
 * copy in a memory tier is fetched first (a miss), so nothing is held
 * afterwards; where no memory tier has room for that copy (or the dataset
 * was removed or rewritten since the store opened, so none can be placed
 * for it), the record is read from the shard's home copy (its blocks,
 * verified, in shard formats 3 and 4; else the whole shard, verified) into memory freed before the call
 * returns, as a batch reads it. Thread-safe. */
CXLP_API int cxlp_store_read_copy(const cxlp_store *s, uint64_t idx, void *buf, uint64_t cap,
                                  uint64_t *len);
/* Field `field` of record idx copied into buf, as cxlp_store_read_copy
 * (the same pin, fetch and CXLP_ERANGE rules); CXLP_ERANGE also for a field
 * number out of range. Any dataset, rows or columns. */
CXLP_API int cxlp_store_read_field_copy(const cxlp_store *s, uint64_t idx, uint32_t field,
                                        void *buf, uint64_t cap, uint64_t *len);
/* How the dataset is cut into shards: their number, the records of each
 * (0 when they differ: variable-size records), and the largest's bytes
 * (what a copy of it takes in a memory tier). Any argument may be NULL. */
CXLP_API int cxlp_store_shards(const cxlp_store *s, uint64_t *n_shards, uint64_t *per_shard,
                               uint64_t *max_bytes);
/* Where the dataset's shards are now: copies[t] receives the number of its
 * shards with a copy in tier t (cap entries at most; the pool's tier count
 * in *n). A pool of one tier: every shard in tier 0. Any thread. */
CXLP_API int cxlp_store_copies(const cxlp_store *s, uint64_t *copies, size_t cap, size_t *n);
/* Where shard k is now: bit t of *mask set when tier t holds a copy (a
 * moment's view: copies come and go). A pool of one tier: bit 0.
 * CXLP_ERANGE for k past the dataset's shards. Any thread. */
CXLP_API int cxlp_store_shard_tiers(const cxlp_store *s, uint64_t k, uint32_t *mask);
/* Where record idx is now (the design's locate): its shard and its place
 * in it, the tiers holding a copy of that shard now (bit t: tier t; a
 * moment's view), the records that loaders' batches took from that shard,
 * counted in the pool by every process (its heat, what hot_first ranks by;
 * pools of tiers only: 0 on a pool of one tier, which keeps no counts), and
 * the catalog generation that published the dataset. CXLP_ERANGE for idx
 * past the dataset's records. Any thread. */
struct cxlp_record_loc {
    uint64_t shard;
    uint64_t index;          /* the record's position in its shard */
    uint64_t shard_records;  /* records in that shard */
    uint64_t version;        /* as cxlp_dataset_info.version */
    uint64_t heat;
    uint32_t tiers;          /* as cxlp_store_shard_tiers */
};
CXLP_API int cxlp_store_locate(const cxlp_store *s, uint64_t idx, struct cxlp_record_loc *out);
/* Staging units (docs/tiers.md, "Staging units"): what a memory tier of a
 * pool of tiers holds of a dataset whose shards are larger than a loader's
 * staging budget calls for: runs of per_unit records of one shard each.
 * cxlp_store_stage_unit: the unit a loader with budget bytes of staging
 * (0: the default, 3/4 of the fastest memory tier) stages: *records
 * records (0: whole shards, which are small enough or have no block sums)
 * of about *bytes each; a dataset whose units were made keeps theirs. May
 * read a shard's header page. cxlp_store_units: the dataset's units as the
 * pool holds them now: *n_units of *per_unit records (0 and 0: none made),
 * and copies[t] how many have a copy in tier t (cap entries at most; the
 * pool's tier count in *n). Any thread. */
CXLP_API int cxlp_store_stage_unit(cxlp_store *s, uint64_t budget, uint64_t *records,
                                   uint64_t *bytes);
CXLP_API int cxlp_store_units(cxlp_store *s, uint64_t *n_units, uint64_t *per_unit,
                              uint64_t *copies, size_t cap, size_t *n);
/* The block order a loader's staging keeps up with (what window="auto"
 * takes; docs/tiers.md, "Sequential runs"): blocks of block_records ids
 * (run_units staging units of unit_records, about unit_bytes each), window
 * blocks to a window (half the budget). runs: CXLP_RUNS_AUTO (a probe of
 * the home's reads of a unit: random ones clearly slower than sequential
 * ones make runs of about 64 MiB, at most a quarter of the window; the
 * verdict is recorded in the pool once, so that every process of it cuts
 * the same blocks),
 * CXLP_RUNS_ON (those runs without a probe), 0 (no runs), or units per
 * run. On a pool of one tier: the dataset's shards, a window of all of
 * them. budget 0: the engine's default. The first call on a pool may read
 * tens of MiB of the home (O_DIRECT). */
#define CXLP_RUNS_AUTO (-1)
#define CXLP_RUNS_ON (-2)
struct cxlp_stage_order {
    uint64_t block_records;
    uint64_t window;
    uint64_t unit_records, unit_bytes;
    uint64_t run_units;
    int probed;              /* 0 not probed (no runs), 1 probed now,
                                2 the verdict the pool recorded earlier */
    double random_ratio;     /* random reads' rate / sequential reads' */
    double seq_bps, random_bps; /* with probed 1: what it measured */
};
CXLP_API int cxlp_store_stage_order(cxlp_store *s, uint64_t budget, int runs,
                                    struct cxlp_stage_order *out);
/* 1 when the dataset's pool has more than one tier: its shards move, and
 * each view cxlp_store_read returns keeps the copy it points into (and every
 * copy dropped after it) until cxlp_store_close. */
CXLP_API int cxlp_store_tiered(const cxlp_store *s);
/* Document boundaries of a Megatron import: docs[i] is the first record of
 * document i; n_docs+1 entries (the last is count). NULL/0 when absent. */
CXLP_API int cxlp_store_docs(const cxlp_store *s, const int64_t **docs, uint64_t *n_docs);
/* 1 when the dataset's records were shuffled at ingest
 * (cxlp_import_opts.shuffle), with *seed (may be NULL) its seed; 0 when
 * they are in input order (*seed 0). Kept by cxlp_pool_rewrite. */
CXLP_API int cxlp_store_ingest_shuffle(const cxlp_store *s, uint64_t *seed);
/* The input position of record idx: P(idx) for a shuffled ingest (see
 * cxlp_import), idx otherwise. O(1). CXLP_ERANGE past the end. */
CXLP_API int cxlp_store_source_index(const cxlp_store *s, uint64_t idx, uint64_t *src);
/* The inverse: the record that holds input record src. O(1). CXLP_ERANGE
 * past the end. */
CXLP_API int cxlp_store_record_of_source(const cxlp_store *s, uint64_t src, uint64_t *idx);
/* Where records [first, first+n) lie in the pool: one span per shard they
 * cross, in record order. A span is the bytes of records [first, first +
 * count) of one shard, back to back; off is their pool offset, which for a
 * file: pool is their offset in the file (a pool is mapped whole from
 * offset 0), so a reader that bypasses the mapping (O_DIRECT, GPUDirect
 * Storage) can read a range of records straight from the file. Writes at
 * most cap spans to out and the number the range needs to *n_out (at most
 * the dataset's shard count; n = 0 needs none). CXLP_ERANGE when the range
 * is not inside 0..count (a message names it); CXLP_ECORRUPT as
 * cxlp_store_read when an index entry is damaged; CXLP_EARG for NULL
 * arguments. Thread-safe. */
struct cxlp_span {
    uint64_t off;            /* pool offset of the first record's first byte */
    uint64_t len;            /* bytes of the records of this span */
    uint64_t first;          /* first record (dataset id) */
    uint64_t count;          /* records */
};
CXLP_API int cxlp_store_spans(const cxlp_store *s, uint64_t first, uint64_t n,
                              struct cxlp_span *out, size_t cap, size_t *n_out);
/* The bytes [data, data+len) of a view from this store (cxlp_store_read,
 * cxlp_store_docs) as seen through a private copy-on-write mapping of the
 * pool: reading there shares the pool's pages (no copy, no memory per
 * process); the first write to a page gives this process its own copy of
 * that page, and nothing written there reaches the pool or any other
 * process. For handing pool memory to code that may write into it (torch
 * tensors have no read-only flag): such a write then neither faults nor
 * corrupts the one copy every reader shares. The mapping (the whole pool,
 * address space only) is made on the first call and lives as long as the
 * store's pool mapping. Thread-safe. CXLP_ERANGE when the bytes are not in
 * the pool mapping; -EINVAL on devdax, whose driver refuses private
 * mappings; -ENOMEM when the address space (or strict overcommit) has no
 * room for a second mapping of the pool. */
CXLP_API int cxlp_store_private(const cxlp_store *s, const void *data, uint64_t len,
                                void **out);
/* Recomputes every shard checksum of this dataset. */
CXLP_API int cxlp_store_verify(cxlp_store *s);
/* Moves the dataset's records onto 2 MiB pages where the pool's memory
 * comes in 4 KiB pages (shm, numa, file on tmpfs): a random gather then
 * pays no TLB miss per record. The pool object's pages change, so every
 * process attached to the pool gains, and later calls find the work done.
 * Costs one copy of the dataset's bytes, in the calling thread; contents,
 * offsets and checksums are unchanged; readers may read meanwhile. Best
 * effort: the whole 2 MiB pieces inside each shard are collapsed (madvise
 * MADV_COLLAPSE). 0 when done (devdax: nothing to do); CXLP_EUNSUPPORTED
 * where the kernel (< 6.1) or the media cannot; -ENOMEM or -EAGAIN when the
 * system had no free 2 MiB pages for some piece (the pieces done stay
 * done). Thread-safe. */
CXLP_API int cxlp_store_hugepages(cxlp_store *s);
/* What page size the dataset's shards really have, as any process mapping
 * the pool sees them: its shards take *bytes of the pool (headers, records,
 * indexes), of which *huge_bytes are on 2 MiB pages mapped whole; the rest
 * is on 4 KiB pages. Only whole 2 MiB pieces of the pool can be on 2 MiB
 * pages, so the < 2 MiB ends of each shard always count as 4 KiB. A fresh
 * ingest on shm or numa has all its whole pieces on 2 MiB pages unless it
 * asked for no_hugepages or the system had no free 2 MiB pages; hugetlbfs
 * and devdax pools have them always. Reads one byte per 2 MiB piece through
 * a mapping of its own. Thread-safe. */
CXLP_API int cxlp_store_pages(const cxlp_store *s, uint64_t *bytes, uint64_t *huge_bytes);
/* The shard format the dataset was written in (every shard of a dataset has
 * the one its first shard has): *format 1 to 4; *block_bytes the block a
 * partial read reads and verifies (format 4: 4 KiB up to shards of 976 MiB;
 * format 3: 64 KiB and up; formats 1 and 2: 0, no block sums: read whole);
 * *sums_area 1 when the block sums lie outside the header page (format 4,
 * shards past about 1.9 MiB). A dataset without shards: *format 0, no
 * blocks. Any pointer may be NULL. On a pool of tiers
 * reads the first shard's header page from its fastest copy. 0, or an
 * error naming the shard. Thread-safe. */
CXLP_API int cxlp_store_format(cxlp_store *s, uint32_t *format, uint64_t *block_bytes,
                               int *sums_area);

struct cxlp_writer_opts {
    uint64_t shard_bytes;    /* target shard payload; 0 means 256 MiB */
    uint64_t expected_bytes; /* total payload if known (lets the writer reserve
                                exactly once); 0 when streaming */
    /* progress(ctx, done_bytes, total_bytes) after each chunk; may be NULL */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    /* 0 (default): the records go onto 2 MiB pages where the pool's media
     * comes in 4 KiB pages (shm, numa): each reserved extent is backed by
     * 2 MiB pages before anything is written to it (no copy; see
     * cxlp_store_pages for what a dataset really got; best effort: without
     * free 2 MiB pages or kernel support, 4 KiB pages as with 1). 1: no 2
     * MiB pages are made for this ingest: the media's own pages (4 KiB on
     * shm), except where free space that an earlier ingest backed with 2
     * MiB pages and gave back still has them. */
    int no_hugepages;
};
/* Starts an ingest of dataset name (CXLP_EEXIST if published already).
 * Nothing is visible to readers until cxlp_writer_commit. A process killed at
 * any point leaves the catalog as it was; its reserved extents are reclaimed
 * by the next writer. */
CXLP_API int cxlp_writer_begin(cxlp_pool *p, const char *name,
                               const struct cxlp_schema *schema,
                               const struct cxlp_writer_opts *opts, cxlp_writer **out);
/* Appends one record: fixed-size records in their row form (len must equal
 * record_size; a multi-field record is split into its columns here);
 * variable-size records of a one-field schema as that field's elements.
 * Multi-field variable-size records go through cxlp_writer_append_columns. */
CXLP_API int cxlp_writer_append(cxlp_writer *w, const void *rec, uint64_t len);
/* Appends n fixed-size records stored back to back (row form). */
CXLP_API int cxlp_writer_append_fixed(cxlp_writer *w, const void *recs, uint64_t n);
/* n records given column-wise, the way Arrow holds them: cols[k] is field
 * k's values. A fixed-shape field: data holds n values of the field's size
 * back to back (len == n * size). A variable-length field: offsets holds
 * n+1 non-decreasing element positions into data (len bytes, a multiple of
 * the dtype size); record i is elements [offsets[i], offsets[i+1]);
 * offsets[0] need not be 0 (an Arrow slice). str fields must be valid
 * UTF-8. Every column is checked before anything is copied: CXLP_EARG names
 * the field and the record (the writer stays usable); the copy itself may
 * fail like cxlp_writer_append (the writer is then failed). Copies each
 * byte once into pool memory (the largest field) or a staging buffer of at
 * most one shard (the others, placed after it when the shard is sealed). */
struct cxlp_column {
    const void *data;
    uint64_t len;            /* bytes at data */
    const int64_t *offsets;  /* variable-length fields: n+1 entries; else NULL */
};
CXLP_API int cxlp_writer_append_columns(cxlp_writer *w, uint64_t n,
                                        const struct cxlp_column *cols);
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
/* Publishes dataset name as the records of datasets parts[0..n_parts) one
 * after another, and removes the parts, in one atomic catalog flip: no byte
 * is copied (the parts' shards become name's). What a resumable ingest
 * does: each source file becomes a part as it is done, a rerun after a kill
 * keeps the parts it finds, and the dataset appears whole or not at all.
 * The parts must share one schema and have no document index. CXLP_EEXIST,
 * CXLP_ENOTFOUND (a part), CXLP_EARG (names, a part twice, other schemas),
 * CXLP_EUNSUPPORTED (document index), CXLP_ECATFULL. */
CXLP_API int cxlp_pool_concat(cxlp_pool *p, const char *name, const char *const *parts,
                              size_t n_parts);
CXLP_API const char *cxlp_writer_errmsg(const cxlp_writer *w);

struct cxlp_rewrite_opts {
    uint64_t shard_bytes;    /* target shard payload; 0: the dataset's own
                                (its largest shard's payload) */
    int no_hugepages;        /* as cxlp_writer_opts */
    /* progress(ctx, shards_done, n_shards) after each shard; may be NULL */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
};
/* Writes dataset name again in this build's shard format (format 4: 4 KiB
 * block sums, what a record read in part costs; cxlp_store_format says what
 * a dataset has) and puts it in the old one's place in one atomic catalog
 * flip: the same records, schema, document index and placement policy,
 * shards of opts->shard_bytes. Each old shard is read from one copy
 * (fastest first; a pool of tiers reads its home copy from the file when no
 * memory tier holds one) and verified whole, every checksum, before a byte
 * of it is written again; the new shards go where an ingest writes. Needs
 * room for a second copy of the dataset meanwhile (CXLP_EFULL before
 * anything changes, when the pool has none). Readers keep reading: a store
 * opened before keeps the old dataset until it closes, then its space is
 * freed; a store opened after the flip reads the new one. Killed at any
 * instant, the pool holds the old dataset or the new one, never both and
 * never a part (the new shards are reclaimed as an aborted ingest's are).
 * CXLP_ENOTFOUND (no such dataset, or removed meanwhile), CXLP_EBUSY (the
 * name holds another dataset now: published again, or rewritten by another
 * writer meanwhile; nothing replaced),
 * CXLP_ECORRUPT (an old shard fails its checksums: nothing replaced), and
 * cxlp_writer_begin's codes. opts may be NULL. */
CXLP_API int cxlp_pool_rewrite(cxlp_pool *p, const char *name,
                               const struct cxlp_rewrite_opts *opts);

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
    int allow_empty;         /* 1: a source without records makes an empty
                                dataset; 0: CXLP_EBADINPUT "no records" */
    int no_hugepages;        /* see cxlp_writer_opts: 0 puts records on 2 MiB pages */
    int shuffle;             /* 1: records in a pseudo-random order keyed by
                                shuffle_seed (raw and npy only; see below) */
    uint64_t shuffle_seed;
};
/* Imports src into a new dataset name. src is a file (raw, .npy) or a Megatron
 * prefix (PREFIX.bin + PREFIX.idx; "PREFIX", "PREFIX.bin" and "PREFIX.idx" are
 * all accepted). Bad input fails with CXLP_EBADINPUT / CXLP_EUNSUPPORTED and
 * cxlp_errmsg(p) naming the file and field; the pool is left unchanged. A
 * source that is not a regular file (a FIFO, a device) is CXLP_EBADINPUT
 * without blocking on it; one without records (an empty file, a /proc file
 * whose size reads 0, an .npy of shape (0, ...), an .idx of no sequences)
 * is CXLP_EBADINPUT "no records" unless opts->allow_empty.
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
 * total) is called after each chunk of about 4 MiB, in the calling thread.
 * Shuffled ingest (opts->shuffle): record k of the dataset is record P(k) of
 * the input, P a permutation of [0, n) keyed by shuffle_seed (the same seed
 * and n give the same P on every build: cxlp_store_source_index), read in
 * groups of records with bounded memory whatever the input's size; the
 * dataset records the seed (cxlp_store_ingest_shuffle). raw and npy only:
 * CXLP_EUNSUPPORTED naming shuffle for megatron (documents would be cut
 * apart). Caveat: records under 64 KiB are copied from a read-only mapping
 * of src, so a src truncated during a shuffled ingest raises SIGBUS in the
 * caller instead of CXLP_EBADINPUT (as a Megatron .bin's mapping can). */
CXLP_API int cxlp_import(cxlp_pool *p, const char *name, const char *src,
                         const struct cxlp_import_opts *opts);

/* ======================================================================
 * tier: where copies of a dataset live (docs/tiers.md)
 * ====================================================================== */

/* Placement policies of the staging engine a loader runs on a tiered
 * pool (docs/tiers.md defines each). */
enum cxlp_policy {
    CXLP_POLICY_DEFAULT = 0,       /* the dataset's (cxlp_pool_set_policy), else LOOKAHEAD */
    CXLP_POLICY_LOOKAHEAD = 1,     /* stage the next batches of every rank of the host,
                                      evict what is needed farthest (Belady) */
    CXLP_POLICY_LRU = 2,           /* fetch on a miss, evict the least recently used */
    CXLP_POLICY_STREAMING = 3,     /* a window in sampler order, nothing retained */
    CXLP_POLICY_HOT_FIRST = 4,     /* the hottest 10% in the fastest memory, next 30%
                                      in the next, by access counts in the pool */
    CXLP_POLICY_FULL_PREFETCH = 5, /* everything into memory before the first batch */
};
/* "default", "lookahead", "lru", "streaming", "hot_first", "full_prefetch";
 * "?" otherwise. */
CXLP_API const char *cxlp_policy_name(int policy);
/* Inverse of cxlp_policy_name; -1 for an unknown name. */
CXLP_API int cxlp_policy_parse(const char *name);
/* Sets the default placement policy of dataset name (one catalog flip);
 * loaders use it unless their options say otherwise. CXLP_EARG for an
 * unknown policy, CXLP_ENOTFOUND. */
CXLP_API int cxlp_pool_set_policy(cxlp_pool *p, const char *name, int policy);
/* The dataset's default placement policy (CXLP_POLICY_DEFAULT: none set). */
CXLP_API int cxlp_store_policy(const cxlp_store *s);

struct cxlp_migrate_opts {
    uint32_t threads;        /* shards copied at once; 0 means 1 */
    /* progress(ctx, shards_done, n_shards) after each shard; may be NULL */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
};
struct cxlp_migrate_stat {
    uint64_t shards;         /* of the dataset */
    uint64_t copied;         /* shards copied into the tier */
    uint64_t already;        /* shards that had a copy there already */
    uint64_t bytes_copied;
    uint64_t direct_bytes;   /* of them, read with O_DIRECT from an nvme tier */
    uint64_t bytes_dropped;  /* of copies dropped from other tiers */
    double seconds;
};
/* Moves dataset name to tier ("dram", "cxl", "nvme": the first tier of
 * that kind, or a tier index) while readers keep reading: to a memory tier,
 * each shard gets a copy there (kept: placement policies do not evict it)
 * and loses its copies in other tiers but the home's; to the home tier,
 * every other copy goes. Each shard is one crash-safe step: a migration
 * killed at any instant loses nothing and leaks nothing. Copies dropped are
 * freed once no reader can still see them. CXLP_EARG (bad tier, one-tier
 * pool), CXLP_EUNSUPPORTED (an nvme tier that is not the home),
 * CXLP_EFULL (the tier has no room; shards already moved stay moved),
 * CXLP_ENOTFOUND. Runs in opts->threads threads; the caller waits. */
CXLP_API int cxlp_migrate(cxlp_pool *p, const char *name, const char *tier,
                          const struct cxlp_migrate_opts *opts, struct cxlp_migrate_stat *st);

/* ======================================================================
 * sample: orders over dataset ids
 *
 * Every order is a pure function of (seed, epoch, position, world, rank):
 * no table of indices exists anywhere, so memory does not depend on n (the
 * curriculum alone keeps its O(n) difficulty ranking), and resuming needs
 * only the few integers of struct cxlp_sampler_state.
 *
 * Glossary:
 *   epoch order   the sequence order(0..L-1) of ids for one epoch; L is the
 *                 epoch length (n for sequential, random and block orders).
 *   position      an index p into the epoch order.
 *   rank view     rank r draws positions base+r, base+r+world, ... (the
 *                 interleaved split of torch's DistributedSampler); base is 0
 *                 after cxlp_sampler_set_epoch and the restored "consumed"
 *                 after cxlp_sampler_restore.
 *   consumed      the number of leading positions of the epoch order that
 *                 all ranks together have drawn: base + world * drawn, where
 *                 drawn is what this rank took from cxlp_sampler_next since
 *                 base. It is exact when every rank has drawn the same number
 *                 of indices (true at any step boundary of synchronous data
 *                 parallel training): then positions [0, consumed) and no
 *                 others have been handed out.
 *   per-rank len  R = L - base remaining positions; drop_last: floor(R/world)
 *                 each (the last R mod world positions are dropped); padding
 *                 (drop_last = 0): ceil(R/world) each, where a position
 *                 p >= L reads order(p mod L) (the first ids of the epoch
 *                 order repeat, as torch pads).
 *
 * Orders (enum cxlp_order):
 *   SEQUENTIAL   order(p) = p.
 *   RANDOM       a keyed bijection of [0, n) (Feistel network with cycle
 *                walking), key = f(seed, epoch). Any n up to 2^63.
 *   BLOCK        ids are cut into shards of shard_size consecutive ids (the
 *                last may be short); the shards are permuted; windows of
 *                `window` consecutive shards of that shard order are
 *                emitted one after another, each window's samples in a
 *                random order of their own. At most `window` shards are
 *                active during a window.
 *   BLEND        K sources mixed with exact proportions (see
 *                cxlp_sampler_create_blend).
 *   CURRICULUM   samples released from easy to hard by a pacing schedule
 *                (see cxlp_sampler_create_curriculum).
 *
 * Thread-safety: a sampler handle is used by one thread at a time, except
 * the functions taking a const handle (cxlp_sampler_at, _epoch_at,
 * _position, _source, _len, _released, _state), which only read it and may
 * run concurrently with each other. For the same reason their failures
 * leave the message in cxlp_errmsg(NULL), not on the handle; set_epoch and
 * restore set it on the handle.
 *
 * Workers: the orders are per rank. Loader threads or processes of one rank
 * share that rank's stream (the gather engine takes index ranges from
 * cxlp_sampler_next), so the number of workers is not part of the state and
 * may change at a resume.
 * ====================================================================== */

typedef struct cxlp_sampler cxlp_sampler;

enum cxlp_order {
    CXLP_ORDER_SEQUENTIAL = 0,
    CXLP_ORDER_RANDOM = 1,
    CXLP_ORDER_BLOCK = 2,
    CXLP_ORDER_BLEND = 3,        /* only through cxlp_sampler_create_blend */
    CXLP_ORDER_CURRICULUM = 4,   /* only through cxlp_sampler_create_curriculum */
    CXLP_ORDER_HOSTS = 5,        /* only through cxlp_sampler_create_hosts */
};
/* "sequential", "random", "block", "blend", "curriculum", "hosts"; "?"
 * otherwise. */
CXLP_API const char *cxlp_order_name(int kind);
/* Inverse of cxlp_order_name; -1 for an unknown name. */
CXLP_API int cxlp_order_parse(const char *name);

#define CXLP_SAMPLER_MAX_N (UINT64_C(1) << 63)

struct cxlp_sampler_config {
    int kind;                /* enum cxlp_order */
    uint64_t n;              /* ids are 0..n-1 (n <= 2^63). BLEND, CURRICULUM:
                                epoch length L; 0 means the natural length
                                (sum of source sizes; number of samples) */
    uint64_t seed;
    uint64_t epoch;          /* first epoch (cxlp_sampler_set_epoch changes it) */
    uint64_t shard_size;     /* BLOCK: ids per shard (>= 1) */
    uint64_t window;         /* BLOCK: shards per window W (>= 1; W >= the
                                number of shards makes one window) */
    uint32_t world;          /* number of ranks; 0 means 1 */
    uint32_t rank;           /* 0..world-1 */
    int drop_last;           /* 1: drop the tail; 0: pad by wrapping around */
    int ramp;                /* BLOCK: 1: in epoch 0 the windows grow from one
                                shard to window, each at most 5/4 of the one
                                before (a cold staging tier's first batch
                                after one shard, not a window: docs/tiers.md,
                                "Start-up"); other epochs as with 0 */
};

/* Resume state: a handful of integers. */
struct cxlp_sampler_state {
    uint64_t seed;
    uint64_t epoch;
    uint64_t consumed;       /* see "consumed" above; <= L */
    uint64_t fingerprint;    /* hash of what defines the order (kind, n,
                                shard_size, window, sources, difficulties,
                                pacing); world, rank and drop_last are not in
                                it, so a state restores under another world */
};

/* Creates a SEQUENTIAL, RANDOM or BLOCK sampler. CXLP_EARG with a message
 * naming the field (cfg.kind, cfg.n, cfg.rank, cfg.shard_size, cfg.window)
 * in cxlp_errmsg(NULL); -ENOMEM. Memory is O(1) in n. */
CXLP_API int cxlp_sampler_create(const struct cxlp_sampler_config *cfg,
                                 cxlp_sampler **out);

/* One source of a blend: ids size, mixed in proportion weight / sum(weights).
 * Weights are integers so proportions are exact (3:1:1, or a float weight
 * rationalized by the caller). */
struct cxlp_blend_source {
    uint64_t size;           /* samples in this source (>= 1 if weight > 0) */
    uint64_t weight;         /* >= 0; at least one source > 0 */
};
#define CXLP_BLEND_MAX_SOURCES 4096
#define CXLP_BLEND_MAX_PERIOD (UINT64_C(1) << 24) /* sum of reduced weights */
/* Creates a BLEND sampler over k sources (cfg->kind is ignored; cfg->n is the
 * epoch length, 0 meaning the sum of sizes). Ids are global over the sources
 * laid end to end: source i owns [off_i, off_i + size_i), off_i = sum of
 * earlier sizes (cxlp_sampler_source() splits an id back).
 * Deterministic like Megatron's BlendedDataset, but exact: position p draws
 * by earliest deadline first over the windows in which each source's next
 * draw must fall (D = sum of weights, c_i its draws before p):
 * among sources with c_i * D < (p+1) * w_i, the smallest
 * ceil((c_i+1) * D / w_i), ties to the lowest i. After every prefix of k
 * positions |c_i - k * w_i / D| < 1 (Megatron's largest-deficit rule can
 * exceed 1 with several sources). The c-th draw of source i is
 * pi_{i,pass}(c mod size_i), pass = c / size_i, where pi is a keyed
 * permutation of the source (shuffle = 1) or the identity (shuffle = 0); a
 * source drawn more than its size starts a fresh permutation.
 * Weights are reduced by their gcd; the reduced sum D must be <=
 * CXLP_BLEND_MAX_PERIOD (the order repeats its source pattern every D
 * positions, and random access keeps count checkpoints within a period:
 * 4 * K * (D / e + 1) bytes with e = max(64, D / 65536) rounded up to a power
 * of two, and replays at most e steps of O(K) per cxlp_sampler_at). Create
 * walks one period: O(K * D). cxlp_sampler_next costs O(K * world) per id. */
CXLP_API int cxlp_sampler_create_blend(const struct cxlp_sampler_config *cfg,
                                       const struct cxlp_blend_source *src,
                                       size_t k, int shuffle, cxlp_sampler **out);
/* BLEND: splits a global id into source index and id inside the source.
 * CXLP_EARG for another kind, CXLP_ERANGE for an id past the last source. */
CXLP_API int cxlp_sampler_source(const cxlp_sampler *s, uint64_t id,
                                 uint32_t *source, uint64_t *inner);

enum cxlp_pacing {
    CXLP_PACE_LINEAR = 0,    /* g(t) = g0 + (1 - g0) * t */
    CXLP_PACE_ROOT = 1,      /* g(t) = sqrt(g0^2 + (1 - g0^2) * t) */
    CXLP_PACE_STEP = 2,      /* g(t) = g0 + (1 - g0) * floor(steps * t) / steps */
};
/* Curriculum: n samples each with a difficulty; released from easiest to
 * hardest. Exactly one of difficulty / group is given (n entries each):
 * samples are ranked by (value, id); equal values form a group that is
 * released whole. Progress t = min(1, (epoch * L + p) / total) at position p
 * (total = 0 means L: the pace runs over one epoch). At t the released
 * portion is the R(t) easiest samples, R(t) = ceil(g(t) * n) rounded up to
 * the end of its group, at least the first group. Position p draws
 * rank_sorted[pi_R(p mod R)], pi_R a keyed permutation of [0, R): uniform
 * over the released portion, and any R consecutive positions during which R
 * stays constant draw R distinct samples. The epoch order is therefore not
 * a permutation of the dataset: easy samples repeat, as in competence-based
 * curricula. The arrays are copied (O(n) memory). */
struct cxlp_curriculum {
    uint64_t n;              /* number of samples (ids 0..n-1), >= 1 */
    const double *difficulty;/* n values (no NaN), or NULL */
    const uint64_t *group;   /* n group ids (ascending = harder), or NULL */
    int pacing;              /* enum cxlp_pacing */
    double start;            /* g0 in (0, 1]: fraction released at t = 0 */
    uint32_t steps;          /* STEP: number of steps (>= 1) */
    uint64_t total;          /* positions over which g runs to 1; 0 = L */
};
/* Creates a CURRICULUM sampler (cfg->kind ignored; cfg->n = epoch length L,
 * 0 meaning cur->n). CXLP_EARG naming cur.difficulty[i], cur.start, ... */
CXLP_API int cxlp_sampler_create_curriculum(const struct cxlp_sampler_config *cfg,
                                            const struct cxlp_curriculum *cur,
                                            cxlp_sampler **out);
/* CURRICULUM: R, the released count, at epoch position p (for tests, the CLI
 * and prefetch planning). 0 for other kinds. */
CXLP_API uint64_t cxlp_sampler_released(const cxlp_sampler *s, uint64_t p);

/* HOSTS: one cache across hosts (docs/sampling.md, "Hosts").
 * Ids are cut into blocks of cfg->shard_size consecutive ids, as in BLOCK.
 * Each epoch the blocks are permuted (keyed by seed and epoch) and the
 * permutation is cut into H segments, host h's the next M_h blocks, M_h
 * the largest-remainder share of M blocks in proportion to weight[h]: the
 * blocks host h's memory stages and serves that epoch. Host h's stream is
 * the block order over its own segment (windows of cfg->window blocks,
 * records random inside a window). The epoch order interleaves the H
 * streams in proportion to their sizes (exactly: a tree of two-way
 * Bresenham splits), and ranks split it by the usual rounds: the j-th draw
 * of every rank comes from positions [base + j*world, base + (j+1)*world),
 * as for every order, so counts, drop_last, padding, state and elastic
 * resume are the same. Inside a round the positions go to ranks by host:
 * a rank takes a position of its own host's stream when the round has one
 * for it (its k-th rank on the host the host's k-th), the rest pair up in
 * order. rank_host names the host each rank runs on; it is how the epoch
 * order is split, not what it is: the fingerprint covers n, shard_size,
 * window, keep and the weights (reduced by their gcd), not world or
 * rank_host.
 * CXLP_EARG naming hosts.n_hosts, hosts.weight, hosts.rank_host[i],
 * cfg.shard_size, cfg.window, cfg.ramp (not supported). Memory is O(H);
 * a draw costs O(H) (an O(log H) walk when the rank takes its own host's
 * position). */
#define CXLP_HOSTS_MAX 1024
struct cxlp_hosts {
    uint32_t n_hosts;            /* H, 1..CXLP_HOSTS_MAX */
    const uint64_t *weight;      /* H capability weights >= 0, sum 1..2^63 */
    const uint32_t *rank_host;   /* cfg->world entries in 0..H-1; NULL: all
                                    ranks on host 0 */
    int keep;                    /* 1: the blocks are dealt once (keyed by
                                    the seed alone) and stay on their host
                                    every epoch; each host's block order
                                    still changes per epoch. 0: dealt
                                    afresh each epoch */
};
CXLP_API int cxlp_sampler_create_hosts(const struct cxlp_sampler_config *cfg,
                                       const struct cxlp_hosts *hosts, cxlp_sampler **out);
/* HOSTS: the host whose segment holds id's block this epoch, and the
 * block's index in that segment (0 = the segment's first block).
 * CXLP_EARG for another kind, CXLP_ERANGE for id >= n. */
CXLP_API int cxlp_sampler_host_of(const cxlp_sampler *s, uint64_t id, uint32_t *host,
                                  uint64_t *index);
/* HOSTS: this rank's draws from its current point (the epoch's start, or
 * the restored point) to the end of the epoch, counted as the reads
 * they are when host h's memory holds the fraction memory[h] of the
 * dataset's M blocks, floor(memory[h] * M + 1e-9) of them (docs/sampling.md,
 * "Local, peer and home"): counts[0] local,
 * [1] peer, [2] home. Walks every draw: O(draws * H) at worst. CXLP_EARG
 * for another kind or a memory[h] that is not a finite number >= 0. */
CXLP_API int cxlp_sampler_host_reads(const cxlp_sampler *s, const double *memory,
                                     uint64_t counts[3]);
/* HOSTS: the k-th block (k < the blocks of host h's share) that host h's
 * stream reads this epoch: its window is k / window, and the windows are
 * read in order, so a host stages its share in this order. CXLP_ERANGE
 * past the share. */
CXLP_API int cxlp_sampler_host_block(const cxlp_sampler *s, uint32_t h, uint64_t k,
                                     uint64_t *block);
/* HOSTS: host h's segment this epoch: its samples and its blocks. */
CXLP_API int cxlp_sampler_host_share(const cxlp_sampler *s, uint32_t h, uint64_t *samples,
                                     uint64_t *blocks);

/* Starts epoch `epoch` from its beginning (base = 0, nothing drawn). */
CXLP_API int cxlp_sampler_set_epoch(cxlp_sampler *s, uint64_t epoch);
/* Per-rank count from base (see "per-rank len"): what this rank draws from
 * the beginning of the epoch, or from the restored point, to its end. */
CXLP_API uint64_t cxlp_sampler_len(const cxlp_sampler *s);
/* Epoch length L (the length of the epoch order, not per rank). */
CXLP_API uint64_t cxlp_sampler_epoch_len(const cxlp_sampler *s);
/* Fills out[0..max) with this rank's next ids; returns how many were written
 * (0 at the end of the epoch). The gather engine's fast path: no allocation,
 * no error once created. */
CXLP_API size_t cxlp_sampler_next(cxlp_sampler *s, uint64_t *out, size_t max);
/* The rank view's j-th id (0 <= j < cxlp_sampler_len), independent of what
 * next() has drawn. CXLP_ERANGE past the end. */
CXLP_API int cxlp_sampler_at(const cxlp_sampler *s, uint64_t j, uint64_t *id);
/* The epoch order itself: order(p), 0 <= p < L. CXLP_ERANGE past the end. */
CXLP_API int cxlp_sampler_epoch_at(const cxlp_sampler *s, uint64_t p, uint64_t *id);
/* RANDOM only: the position of id in the epoch order (the inverse of
 * order). CXLP_EARG for another kind, CXLP_ERANGE for id >= n. */
CXLP_API int cxlp_sampler_position(const cxlp_sampler *s, uint64_t id, uint64_t *p);
/* Current state (consumed = min(base + world * drawn, L)). */
CXLP_API int cxlp_sampler_state(const cxlp_sampler *s, struct cxlp_sampler_state *st);
/* Continues from st under this sampler's own world and rank: base =
 * st->consumed, nothing drawn. CXLP_EARG when the fingerprint differs (an
 * order with other parameters) or consumed > L, naming the field. */
CXLP_API int cxlp_sampler_restore(cxlp_sampler *s, const struct cxlp_sampler_state *st);
/* NULL is a no-op. */
CXLP_API void cxlp_sampler_free(cxlp_sampler *s);

/* ======================================================================
 * load: the gather engine
 *
 * Worker threads take batches of sample ids from an index source (a sampler),
 * copy the records straight from the pool into slots of a batch ring, and
 * publish the slots in order. The consumer borrows a slot (cxlp_loader_next)
 * and hands it back (cxlp_loader_release) when the tensors that view it are
 * gone; a slot is reused only after that. Collation:
 *   STACK  fixed-size records back to back: n * record_size bytes
 *   PAD    variable-length 1-D records, one per row of seq_len elements,
 *          cut at seq_len, the rest filled with pad_value; lengths[] per row
 *   PACK   variable-length records concatenated into rows of exactly seq_len
 *          elements (a record may continue on the next row, or the next
 *          batch); segments[] marks where each record starts in each row
 * Several fields (opts.n_fields, e.g. tokens + labels): each chosen field
 * gets its own region of the slot (cxlp_batch.field_data). STACK stacks
 * every field; PAD and PACK pad or pack every variable-length field the
 * same way (their element counts must be equal in each record, as with
 * input_ids and per-token labels) and give a fixed-shape field one value
 * per row (PAD) or per segment (PACK: the record each piece comes from).
 * ====================================================================== */

typedef struct cxlp_loader cxlp_loader;

enum cxlp_collate { CXLP_COLLATE_STACK = 0, CXLP_COLLATE_PAD = 1, CXLP_COLLATE_PACK = 2 };

/* The index source: writes up to max sample ids to out and their count to *n;
 * *n == 0 ends the stream. Called by one loader thread at a time (under the
 * loader's planning lock), never concurrently. Returns 0 or a negative code,
 * which the consumer receives in place of the next batch. */
typedef int (*cxlp_index_fn)(void *ctx, uint64_t *out, size_t max, size_t *n);

struct cxlp_loader_opts {
    uint32_t batch_size;     /* rows per batch (> 0) */
    uint32_t threads;        /* gather threads; 0: one less than the CPUs they may
                                run on (at least 1), so the consumer keeps one;
                                never more than those CPUs (see
                                cxlp_loader_threads) */
    uint32_t slots;          /* batches in the ring; 0 means 2 * prefetch * threads + 2,
                                or with prefetch 0 as for prefetch 2, raised for
                                small batches to as many as fit 8 MiB (at most 64) */
    uint32_t max_slots;      /* the ring grows by one slot when the consumer holds
                                every slot and asks for the next batch, up to
                                this; 0: no limit (a loop may keep every batch,
                                as with torch's DataLoader) */
    int collate;             /* enum cxlp_collate */
    uint64_t seq_len;        /* PAD, PACK: elements per row (> 0) */
    int64_t pad_value;       /* PAD, PACK: fill for the unused tail of a row */
    int drop_last;           /* drop a final batch with fewer than batch_size rows */
    int numa_node;           /* run gather threads on this node's CPUs; -1: on the
                                node of the pool's memory (numa pools; the
                                nearest node with CPUs when it has none),
                                else anywhere */
    uint64_t first_offset;   /* PACK resume: elements of the first record already
                                delivered (from cxlp_batch.resume_offset) */
    int bind_slots;          /* 1: bind every ring slot's memory to slot_node
                                (mbind MPOL_BIND before first touch), e.g. the
                                pool's node so batches stay on CXL memory
                                (to the nodes of slot_nodes when it names
                                any); 2: interleave it over slot_nodes
                                (MPOL_INTERLEAVE) */
    int slot_node;           /* the node for bind_slots */
    uint32_t prefetch;       /* with slots 0: batches ahead per gather thread */
    /* A dataset in a pool of tiers is read through a staging engine
     * (docs/tiers.md) that copies shards into a memory tier ahead of the
     * gather threads; these choose what it does (0: defaults). Ignored for
     * a pool of one tier. */
    int tier_policy;         /* enum cxlp_policy */
    uint64_t tier_budget;    /* bytes of staged copies the staging tier may
                                hold; 0: 3/4 of its capacity */
    uint32_t tier_horizon;   /* batches of ids held ahead (lookahead, streaming);
                                0: as many records as half the budget holds,
                                at least 8 batches */
    int tier_target;         /* staging tier index; 0 and -1: the fastest memory tier */
    uint32_t tier_stagers;   /* threads copying shards ahead, at most
                                CXLP_MAX_STAGERS; 0: 2 for shards of 8 MiB or
                                more, up to 4 for smaller ones */
    uint32_t n_fields;       /* fields to collate, numbers in fields[]; 0: every
                                field of the dataset, in schema order */
    uint32_t fields[CXLP_MAX_FIELDS];
    uint64_t slot_nodes[16]; /* bind_slots: a node set, bit n % 64 of word n / 64
                                is node n (nodes 0..1023); all zero: slot_node */
    /* The pass that follows this one, where the caller knows it (the next
     * epoch of the same order): once every id of this pass is in view, the
     * staging engine reads this source too, under the same rules as
     * index_fn, and stages the shards of its first ids after this pass's,
     * as the policy and the room allow, so that the next pass's first
     * batches find them in memory. Its ids are never handed out; an error
     * it returns ends only its ids. NULL: none. Ignored for a pool of one
     * tier. */
    cxlp_index_fn tier_next_fn;
    void *tier_next_ctx;
    /* 1: a batch reads the records whose shards are not in a memory tier
     * from their home copies in part, only the blocks that hold them,
     * verified against their block sums, every shard's reads of a step in
     * one io_uring call, into memory freed when the batch ends (stats:
     * partial_reads); no batch waits for a copy. The stagers copy shards
     * of the horizon only while the budget has room, and nothing is
     * evicted: the copies made serve later batches from memory. For an
     * order that cannot be staged: a full shuffle of a dataset larger than
     * the budget, where staging fetches whole shards again and again for
     * a record or two each. Shards with a copy in memory (placed, kept,
     * staged) are read there. A dataset whose shards have no block sums
     * (format 1 or 2) is staged as with 0, from the batch that finds it
     * out on. */
    int tier_read_in_part;
    /* 1: an item (shard or staging unit) whose records in view are too
     * few to pay for a copy is read in part by its batches, and copied
     * only into free room (docs/tiers.md, "Sparse items"): for orders
     * that read a few records of many shards, such as a host's reads of
     * other hosts' blocks in the hosts order (the Python loader sets it
     * for that order). 0: every item is staged as the policy says. No
     * effect with tier_read_in_part or shards without block sums. */
    int tier_sparse;
    /* With tier_sparse: the shards of another host's share in the hosts
     * order (docs/sampling.md, "Hosts"), bit k % 8 of tier_away[k / 8] for
     * shard k (n_shards bits; NULL: none). Their items are never staged
     * into this host's memory: batches read them in part, from a peer of
     * the remote tier that has them in memory, else from the home
     * (docs/remote.md, "Reading a peer's memory"). Copied at create. */
    const uint8_t *tier_away;
};

/* What a loader's staging engine did. On a pool of one tier there is no
 * engine: batches and records are those the consumer has taken, the rest
 * is zero. */
struct cxlp_loader_stats {
    int policy;              /* enum cxlp_policy in force */
    int tier;                /* the staging tier */
    uint64_t budget;         /* bytes */
    uint64_t batches, records; /* gathered by the engine (one tier: taken) */
    uint64_t hits;           /* records whose shard was in memory when their batch began */
    uint64_t misses;         /* records whose shard had to be fetched first */
    uint64_t stall_ns;       /* gather threads waiting for those fetches */
    uint64_t prefetched;     /* shards staged ahead by the engine */
    uint64_t fetched;        /* shards staged on a miss */
    uint64_t bytes_staged;   /* bytes of both */
    uint64_t evictions;      /* copies the engine dropped */
    uint64_t bytes_evicted;
    uint64_t placed;         /* shards placed before the first batch (hot_first,
                                full_prefetch) */
    uint64_t private_reads;  /* shards a batch read into its own memory because
                                no memory tier had room for a copy */
    uint64_t partial_reads;  /* shards a batch read in part where it would have
                                read a private copy (no memory tier had room):
                                only the blocks of its records, each verified
                                against its block sum (shard format 3) */
    uint64_t partial_bytes;  /* bytes those partial reads read from the home
                                tier, and the header read that found the
                                dataset's shards have no block sums (format 1
                                or 2: private reads after it) */
    uint32_t stagers;        /* threads copying ahead (tier_stagers or the
                                default for the dataset's shard size) */
    int read_in_part;        /* 1 while tier_read_in_part is in force */
    /* What the engine stages (its "unit"): whole shards (unit_records 0),
     * or staging units of unit_records records each, about unit_bytes a
     * copy, for a dataset whose shards are larger than the budget calls
     * for (docs/tiers.md, "Staging units"). prefetched, fetched, placed and
     * the hit counts count those units. */
    uint64_t unit_records;
    uint64_t unit_bytes;
    /* Bytes of copies of the dataset in the staging tier that were kept
     * (placed by a migration or by another loader's hot_first or
     * full_prefetch): the budget counts them, and the policy evicts them
     * like its own when it needs the room; kept_evicted of them went. */
    uint64_t kept_bytes;
    uint64_t kept_evicted;
    /* Items a batch read from the home (in part, or whole where the format
     * has no block sums) because no memory tier had room for a copy, or
     * this process may not place copies (a pool it may only read). */
    uint64_t no_room;
    /* Of bytes_staged, the copies staged for the next pass alone (its
     * first windows, planned from tier_next_fn during this pass's last
     * ones): the next pass reads them, this one does not. */
    uint64_t next_pass_bytes;
    /* Of partial_reads, the items a batch read in part because they were
     * too sparse to pay for a copy (tier_sparse): the host's records of
     * them in view take less than a quarter of a copy's bytes in blocks,
     * or rank past the budget, and the budget had no room without
     * evicting (docs/tiers.md, "Sparse items"). */
    uint64_t sparse_reads;
    int sparse;              /* 1 while the sparse rule is in force */
    /* Of partial_reads, the items read from a peer of the remote tier that
     * had them whole in memory (docs/remote.md, "Reading a peer's
     * memory"), and the records they served. */
    uint64_t peer_reads;
    uint64_t peer_records;
};
/* Fills st. Any thread. */
CXLP_API int cxlp_loader_stats(cxlp_loader *l, struct cxlp_loader_stats *st);

/* Staging ahead of a pass that has not started (a dataset in a pool of
 * tiers): the staging engine a loader with these opts would run over
 * index_fn, without gather threads. It holds the first ids of the order
 * in view (the horizon) and copies their shards into the staging tier as
 * the policy says (hot_first and full_prefetch place their copies here, as
 * a loader would), so that a loader created later over the same order
 * finds them in memory: e.g. while the model is being built. Nothing is
 * handed out; index_fn is called from the stager's threads, one at a
 * time, until cxlp_stager_free returns. CXLP_EARG for a pool of one tier. */
typedef struct cxlp_stager cxlp_stager;
CXLP_API int cxlp_stager_create(cxlp_store *s, const struct cxlp_loader_opts *opts,
                                cxlp_index_fn index_fn, void *index_ctx, cxlp_stager **out);
/* What it did, as cxlp_loader_stats (batches and records 0). */
CXLP_API int cxlp_stager_stats(cxlp_stager *st, struct cxlp_loader_stats *out);
/* Stops it (a copy in progress is finished, and published) and frees it;
 * the copies it made stay, as cache copies. NULL: nothing. */
CXLP_API void cxlp_stager_free(cxlp_stager *st);

struct cxlp_batch {          /* borrowed from the ring until cxlp_loader_release */
    uint64_t index;          /* 0, 1, 2... in delivery order */
    uint32_t rows;           /* rows in this batch (<= batch_size) */
    uint32_t slot;           /* the ring slot lent: 0..slots-1, the same for every
                                batch lent from it (consumers key per-slot caches
                                on it, e.g. a tensor descriptor) */
    uint64_t row_bytes;      /* bytes per row (STACK: record_size) */
    void *data;              /* rows * row_bytes bytes, 64-byte aligned */
    const uint64_t *ids;     /* STACK, PAD: sample id per row; PACK: per segment */
    const int64_t *lengths;  /* PAD, PACK: valid elements per row; STACK: NULL */
    /* PACK: segment s covers row seg_row[s], elements [seg_start[s],
     * seg_start[s] + seg_len[s]) of that row, holding elements
     * [seg_offset[s], seg_offset[s] + seg_len[s]) of record ids[s]. */
    uint64_t n_segments;
    const int64_t *seg_row, *seg_start, *seg_len, *seg_offset;
    /* Resume point after this batch: records fully consumed from the index
     * stream since the loader started, and (PACK) elements of the next record
     * already delivered. */
    uint64_t resume_records;
    uint64_t resume_offset;
    /* Per collated field k (in the order opts.fields gave): its values,
     * 64-byte aligned. STACK, PAD: rows x field_row_bytes[k] (a variable-
     * length field in PAD: seq_len elements per row); PACK: a variable-
     * length field rows x seq_len elements, a fixed-shape field n_segments x
     * field_row_bytes[k] (one value per segment). data and row_bytes above
     * are field 0's. */
    uint32_t n_fields;
    void *field_data[CXLP_MAX_FIELDS];
    uint64_t field_row_bytes[CXLP_MAX_FIELDS];
};

/* Starts threads gathering from store s in the order index_fn gives.
 * The store must stay open until cxlp_loader_free returns.
 * CXLP_EARG names a bad option (e.g. PAD on fixed-size records). */
CXLP_API int cxlp_loader_create(cxlp_store *s, const struct cxlp_loader_opts *opts,
                                cxlp_index_fn index_fn, void *index_ctx,
                                cxlp_loader **out);
/* Next batch in order; blocks until it is ready. Sets *out to NULL at the end
 * of the stream. A gather or index error is returned here (the loader stays
 * usable for cxlp_loader_free only); CXLP_EBUSY when every slot is held and
 * max_slots is reached. One consumer thread. A batch that is ready is taken
 * without a lock or a system call; otherwise the caller spins a few
 * microseconds when a CPU is spare (fewer gather threads than CPUs), then
 * sleeps until the gather thread that publishes it wakes it. */
CXLP_API int cxlp_loader_next(cxlp_loader *l, struct cxlp_batch **out);
/* 1 when cxlp_loader_next would return now without waiting (the next batch
 * is ready, or the stream has ended), else 0; never blocks. Consumer
 * thread. A binding that releases a lock around a blocking call (Python's
 * GIL) can skip that, and timing the wait, when the batch is ready. */
CXLP_API int cxlp_loader_ready(cxlp_loader *l);
/* Returns a batch's slot to the ring. Thread-safe; any order. */
CXLP_API void cxlp_loader_release(cxlp_loader *l, struct cxlp_batch *b);
/* The ring's slot memory, for registering it with a device (e.g.
 * cudaHostRegister) or inspecting its placement: writes the address and size
 * of slots first, first+1, ... (at most max of them) to addr[] and bytes[],
 * and returns how many slots the ring has now. Slots are numbered in the
 * order they were made; the ring only grows (in cxlp_loader_next), so a
 * caller that remembers the count it saw registers only the new ones. A
 * slot's memory neither moves nor goes away before cxlp_loader_free and the
 * release of the last lent batch. Any thread. */
CXLP_API uint32_t cxlp_loader_slots(cxlp_loader *l, uint32_t first, void **addr,
                                    uint64_t *bytes, uint32_t max);
/* Gather threads this loader runs (opts.threads, or its default, cut to the
 * CPUs they may run on). Any thread. */
CXLP_API uint32_t cxlp_loader_threads(const cxlp_loader *l);
/* The number of gather threads cxlp_loader_create would run for store s
 * with opts.threads = threads and opts.numa_node = numa_node, as the
 * topology is now. */
CXLP_API uint32_t cxlp_loader_default_threads(const cxlp_store *s, uint32_t threads,
                                              int numa_node);
/* Stops the threads. Batches not yet released stay valid; their memory goes
 * when the last of them is released. NULL is a no-op. */
CXLP_API void cxlp_loader_free(cxlp_loader *l);
/* The ring memory of a freed loader (its slots, when not bound to nodes) is
 * kept for the next loader of the process, which takes the mappings of its
 * sizes: no page faults and no kernel zeroing of the pages again, pass
 * after pass. The next cxlp_loader_create unmaps whatever it did not take;
 * this unmaps all that is kept now (what loaders freed since the last one
 * was made, at most 1 GiB). Any thread. */
CXLP_API void cxlp_loader_trim(void);

/* ======================================================================
 * remote: a pool served to other hosts over UCX (docs/remote.md)
 *
 * One host runs a server over its pool (cxlpool serve, or cxlp_serve);
 * others read its catalog, shard tables and shard bytes through a client
 * handle. The transport is UCX (a ucp listener over a TCP socket address,
 * active messages); a build without UCX (CXLP_UCX=OFF, the wheel) fails
 * every function here with CXLP_EUNSUPPORTED and a message saying so.
 *
 * Trust: a client proves itself with a shared secret, the token, read from
 * a file that only its owner may read (mode 0600 or 0400); the server
 * refuses a client whose first message does not carry it. Every message
 * from the network is decoded with bounds checks, and a read is bounded by
 * the served shard: a server never sends bytes outside one. A client
 * checks the bytes it is sent only for bounds: cxlp_remote_read returns
 * them as they came, and a caller that wants records verifies the shard
 * with its own checksums (cxlp_remote_fetch does).
 * ====================================================================== */

/* 1 when this build has UCX (remote pools), else 0. Thread-safe. */
CXLP_API int cxlp_remote_available(void);

struct cxlp_serve_opts {
    const char *listen;       /* "ADDR:PORT" (IPv4 address or host name; PORT
                                 0: any free port) */
    const char *token_file;   /* required: the shared secret, owner-only */
    int metrics_port;         /* > 0: Prometheus text at /metrics on this TCP
                                 port, on the listen address; 0: none */
    volatile int *stop;       /* the server drains and returns once *stop is
                                 nonzero (a SIGTERM handler sets it); polled
                                 at least every 100 ms */
    FILE *log;                /* one line per client event (accepted,
                                 refused with its reason, gone); NULL: stderr */
    void (*ready)(void *ctx, const char *addr, int port); /* called once
                                 listening, with the bound port; may be NULL */
    void *ctx;
};

/* Serves pool spec (opened read-only: the server never writes the pool) to
 * remote clients until *opts->stop, then drains: it stops listening, lets
 * the replies in flight complete (at most 5 s), closes its clients and
 * returns 0. A pool of tiers serves each shard from its fastest copy (a
 * memory tier's, else the home's), read whole into the server's memory
 * and verified there before any of it is sent. Fails before listening
 * with CXLP_EARG (no
 * token file, a token file group or others may access, not owned by this
 * user or empty, a bad listen address; the message names the file or the
 * address and the reason), CXLP_EUNSUPPORTED (no UCX), the open's codes, or
 * -errno (the port taken). Blocks the calling thread. */
CXLP_API int cxlp_serve(const char *spec, const struct cxlp_serve_opts *opts);

typedef struct cxlp_remote cxlp_remote;

struct cxlp_remote_opts {
    const char *token_file;   /* the shared secret, owner-only; NULL: send
                                 none (a server refuses the client) */
    uint32_t timeout_ms;      /* a call that waits longer for the server
                                 fails with -ETIMEDOUT; 0 means 10000 */
};

/* Connects to url "ucx://HOST:PORT/POOL" and presents the token. 0, or
 * CXLP_EARG (bad url or token file, named), -EACCES (refused: the message
 * has the server's reason), CXLP_ENOTFOUND (the server serves another
 * pool), -ETIMEDOUT, -ECONNREFUSED / -ECONNRESET (no server, or it went
 * away), CXLP_EUNSUPPORTED (no UCX). Every error message names the host.
 * opts may be NULL. */
CXLP_API int cxlp_remote_open(const char *url, const struct cxlp_remote_opts *opts,
                              cxlp_remote **out);
/* Closes the connection. NULL is a no-op. */
CXLP_API void cxlp_remote_close(cxlp_remote *r);
/* The served pool's catalog, as cxlp_pool_list. */
CXLP_API int cxlp_remote_list(cxlp_remote *r, struct cxlp_dataset_info *infos, size_t cap,
                              size_t *n_out);

/* One shard of a served dataset as its shard table has it. */
struct cxlp_remote_shard {
    uint64_t first_record;    /* global id of its first record */
    uint64_t n_records;
    uint64_t bytes;           /* the shard's bytes: what cxlp_remote_read reads */
    uint64_t data_len;        /* payload bytes */
    uint64_t checksum;        /* digest of its columns' checksums (verified
                                 by cxlp_remote_fetch) */
};

/* Dataset name's shard table: at most cap entries to out, the count to
 * *n, the catalog version it belongs to to *version (NULL allowed; reads
 * name that version). CXLP_ENOTFOUND when the pool does not hold name. */
CXLP_API int cxlp_remote_shards(cxlp_remote *r, const char *name, struct cxlp_remote_shard *out,
                                size_t cap, uint64_t *n, uint64_t *version);
/* Reads bytes [off, off + len) of shard k of name (any len: split into
 * requests of at most 16 MiB) into buf, from the version of name that the
 * handle's last cxlp_remote_shards of it gave (none yet: it reads the shard
 * table first). CXLP_ERANGE when the range is not inside the shard,
 * CXLP_ENOTFOUND when name changed since (read its shard table again), -ETIMEDOUT or -ECONNRESET when the server does
 * not answer or goes away (the message names the host, dataset and shard;
 * the handle is then unusable: open again). */
CXLP_API int cxlp_remote_read(cxlp_remote *r, const char *name, uint64_t k, uint64_t off,
                              uint64_t len, void *buf);
/* Reads shard k of name whole into a new buffer (from the shard table the
 * handle last read whole for name, else a fresh one), verifies it (its header,
 * every column's checksum, and the table's record count, bytes and digest)
 * and calls fn(ctx, first_record + i, rec, len) for each of its records i,
 * in order, with the record's fields back to back (one field: the record
 * as cxlp_store_read gives it). The bytes are freed on return. CXLP_ECORRUPT
 * (naming the host, dataset and shard) for bytes that do not verify: fn is
 * then never called; fn returning nonzero stops and returns that value. */
CXLP_API int cxlp_remote_fetch(cxlp_remote *r, const char *name, uint64_t k,
                               int (*fn)(void *ctx, uint64_t id, const void *rec, uint64_t len),
                               void *ctx);

#ifdef __cplusplus
}
#endif
#endif /* CXLPOOL_H */
