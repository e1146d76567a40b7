/*
 * media.h - where pool bytes live. One narrow interface, one file per backend
 * (media_shm.c, media_file.c, media_numa.c, media_devdax.c); the pool layer
 * sees only this header. A pool is one media object mapped whole.
 *
 *   shm     POSIX shm object /dev/shm/cxlp.NAME (the embedded default; stands
 *           in for a CXL pool with local DRAM: emulated)
 *   file    any path; created sparse with ftruncate, so a file pool may be far
 *           larger than RAM (emulated unless it is on a DAX filesystem); or
 *           a block device (an NVMe namespace, local or over a fabric; a
 *           loop device): sized by the device, never created or removed
 *   numa    a shm object /dev/shm/cxlp.NAME whose pages are bound to one NUMA
 *           node with mbind(MPOL_BIND) before first touch (how CXL memory in
 *           kmem mode is used), or interleaved over several nodes
 *           (MPOL_INTERLEAVE, "numa:interleave=0-3:NAME"); pages move with
 *           move_pages(2)
 *   devdax  /dev/daxX.Y mapped MAP_SHARED at the device's alignment (2 MiB);
 *           size fixed by the device; no NUMA policy applies
 *   pci     a fixed-size region that is a file: a PCI BAR in sysfs (the
 *           shared memory of an ivshmem device in a QEMU guest); never
 *           created, resized or removed, only formatted and wiped
 *
 * All mappings are MAP_SHARED | MAP_NORESERVE of the whole object, except
 * the private copy-on-write one media_map_private makes on request.
 */
#ifndef CXLP_MEDIA_H
#define CXLP_MEDIA_H

#include <stdint.h>
#include <sys/types.h>

#define MEDIA_PATH_MAX 256
/* Mappings start at a multiple of this (or of the backend's alignment). */
#define MEDIA_HUGE_ALIGN (UINT64_C(2) << 20)
/* NUMA node numbers a spec may name: 0..MEDIA_MAX_NODES-1. */
#define MEDIA_MAX_NODES 1024
#define MEDIA_NODE_WORDS (MEDIA_MAX_NODES / (8 * sizeof(unsigned long)))

struct media_ops;

/* media.emulated of a pci region that is a plain file rather than a device's
 * BAR (cxlp_pool_stat passes it on: the CLI says which it is). */
#define MEDIA_EMULATED_FILE 2

struct media {
    const struct media_ops *ops;
    int kind;                 /* enum cxlp_media_kind */
    int fd;                   /* -1 when closed */
    int writable;
    int numa_node;            /* numa: bound node; else -1 (also when interleaved) */
    int numa_interleave;      /* numa: 1 when the pages interleave over numa_mask */
    unsigned long numa_mask[MEDIA_NODE_WORDS]; /* numa: its node(s), bit n = node n */
    int emulated;             /* 1 when this stands in for CXL hardware; pci:
                                 MEDIA_EMULATED_FILE for a plain file (not a
                                 PCI BAR) standing in */
    int blkdev;               /* file: the path is a block device */
    uint64_t size;            /* bytes mapped (whole object) */
    uint64_t align;           /* mapping alignment the backend needs */
    void *base;               /* NULL when unmapped */
    void *priv;               /* media_map_private's mapping; NULL until asked */
    uid_t owner;              /* st_uid of the backing object */
    char path[MEDIA_PATH_MAX];/* backing object, for messages */
};

/* Backend vtable (internal to src/media). */
struct media_ops {
    const char *name;
    int (*create)(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen);
    int (*open)(struct media *m, char *err, size_t errlen);
    int (*sync)(struct media *m, uint64_t off, uint64_t len);
    int (*prepare)(struct media *m, uint64_t off, uint64_t len);
    int (*destroy)(struct media *m, char *err, size_t errlen);
    /* Move [off, off+len) to NUMA node; -EOPNOTSUPP where pages cannot move. */
    int (*migrate)(struct media *m, uint64_t off, uint64_t len, int node, uint64_t *moved);
};

/* Parses a pool spec ("NAME", "shm:NAME", "file:PATH", "numa:NODE:NAME",
 * "numa:interleave=NODES:NAME" with NODES a list such as "0,1" or "0-3",
 * "devdax:/dev/daxX.Y", "pci:PATH") into m->kind, m->path, m->numa_node,
 * m->numa_interleave and m->numa_mask. Does not open.
 * Returns 0 or CXLP_EARG with a message in err. */
int media_parse(struct media *m, const char *spec, char *err, size_t errlen);

/* 1 when path names a block device (a file: spec there claims the device
 * rather than creating a file). */
int media_file_is_blk(const char *path);

/* Says, without creating anything, whether media_create(spec, size) of
 * this parsed media could succeed: the object must not exist (CXLP_EEXIST),
 * a numa node must exist and hold memory and a devdax device must exist and
 * hold size bytes (CXLP_ENODEV), a file's filesystem must have size bytes
 * free (CXLP_EFULL: files are sparse, so a tier larger than the disk would
 * fail later, at an ingest); a block device must hold size bytes (CXLP_EARG)
 * and no pool or tier object already (CXLP_EEXIST). size 0: a device's
 * whole size (devdax, block device). Message in err names the path. */
int media_probe(struct media *m, uint64_t size, char *err, size_t errlen);
/* Creates the backing object exclusively (O_EXCL; CXLP_EEXIST if present)
 * with mode (0 -> 0600), sizes it, and maps it writable. devdax and a file:
 * spec naming a block device: claims the device (CXLP_ENODEV when absent,
 * CXLP_EEXIST when it already holds a pool or tier object), size bytes of
 * it, or all of it with size 0 (only devices take 0). On failure nothing
 * is left behind. */
int media_create(struct media *m, const char *spec, uint64_t size, uint32_t mode,
                 char *err, size_t errlen);
/* Opens and maps an existing object whole (read-only when !writable).
 * -ENOENT (as CXLP_ENOTFOUND) when absent, -EACCES when not permitted. */
int media_open(struct media *m, const char *spec, int writable, char *err, size_t errlen);
/* A second mapping of the whole object, MAP_PRIVATE, readable and writable
 * (also for a read-only handle): reads share the object's pages (no copy, no
 * memory per mapping), the first write to a page gives this mapping a copy
 * of that page, and nothing written there reaches the object or any other
 * mapping. Made on the first call (thread-safe: racing callers get the same
 * one), unmapped by media_close. *out is its base; offsets are the shared
 * mapping's. -EINVAL where the media refuses private mappings (devdax),
 * -ENOMEM (address space, or strict overcommit), CXLP_EARG when unmapped. */
int media_map_private(struct media *m, uint8_t **out);
/* Unmaps and closes. Safe on a closed media. */
void media_close(struct media *m);
/* Makes [off, off+len) durable where the backend persists (file: msync;
 * devdax: the range's cache lines written back and fenced, its files
 * having no fsync; shm/numa: no-op). */
int media_sync(struct media *m, uint64_t off, uint64_t len);
/* Backs [off, off+len) with storage now (fallocate), so that a full /dev/shm
 * or disk is an error here (-ENOSPC) instead of a SIGBUS on first touch of a
 * sparse mapping. devdax memory is always there: no-op. The range must hold
 * nothing (free space, or a pool being formatted): on failure it is punched
 * out again, so a full disk keeps no blocks of a failed call (ext4 keeps
 * what a failed fallocate got; tmpfs undoes it itself). */
int media_prepare(struct media *m, uint64_t off, uint64_t len);
/* Asks the kernel to put the whole 2 MiB pieces of [off, off+len) on 2 MiB
 * pages (madvise MADV_COLLAPSE): the object's own pages change, so every
 * mapping of it gains, not only this one. tmpfs allows an explicit collapse
 * even with shmem_enabled=never (only "deny" refuses it). Costs a copy of
 * the range; the range's contents are unchanged. 0; -EOPNOTSUPP where the
 * kernel or the media cannot (Linux < 6.1, a file system without large
 * folios); -ENOMEM/-EAGAIN when no free 2 MiB pages could be had (pieces
 * already done stay done). devdax: 0, nothing to do. */
int media_collapse(struct media *m, uint64_t off, uint64_t len);
/* media_prepare, with the whole 2 MiB pieces of the range on 2 MiB pages
 * where the media is a tmpfs object (shm, numa), at no copy: each piece
 * gets one page first (fallocate of 4 KiB), MADV_COLLAPSE then builds the
 * 2 MiB page from that page and zeroes (a collapse of a fully backed piece
 * would copy 512 pages, ~10x the cost), and media_prepare backs the rest,
 * which finds the pieces done. Writes through the descriptor or the mapping
 * then fill those 2 MiB pages in place. Best effort: where the kernel
 * cannot (Linux < 6.1, no free 2 MiB page), the pieces stay on 4 KiB pages
 * and only media_prepare's own errors are returned. Other media: exactly
 * media_prepare (devdax is mapped at 2 MiB already). */
int media_prepare_huge(struct media *m, uint64_t off, uint64_t len);
/* Of the ranges [r[i].off, +r[i].len) (n of them, inside the object), the
 * bytes that lie in whole 2 MiB pieces (*whole) and those of them mapped by
 * one page-table entry per piece (*huge), as any process mapping the object
 * sees them: a new read-only mapping over the ranges is made, one byte of
 * each whole piece read, and the kernel's count of PMD-mapped bytes for
 * that mapping taken from /proc/self/smaps (ShmemPmdMapped +
 * FilePmdMapped); then it goes. hugetlbfs files and devdax: every whole
 * piece. 0, CXLP_ERANGE, or -errno. */
struct media_range {
    uint64_t off, len;
};
int media_huge_bytes(const struct media *m, const struct media_range *r, size_t n,
                     uint64_t *whole, uint64_t *huge);
/* The object's descriptor when writes through it (pwrite, copy_file_range,
 * splice) land in the very pages the mapping shows: shm and file objects
 * opened writable. -1 for read-only media, numa (its placement is a policy
 * on the mapping that writes through a descriptor would not follow) and
 * devdax (a character device). Borrowed: valid until media_close. */
int media_write_fd(const struct media *m);
/* Removes the backing object (shm_unlink / unlink); devdax: zeroes the first
 * 4 KiB so the device no longer holds a pool; a block device: the same, and
 * only when its first page holds a pool or tier object (CXLP_ENOTFOUND
 * otherwise: nothing written). */
int media_destroy(const char *spec, char *err, size_t errlen);
/* numa backend: move_pages of the range to node (per-page status folded into
 * the return: 0 all moved, else the first negative status). Others:
 * -EOPNOTSUPP. */
int media_migrate(struct media *m, uint64_t off, uint64_t len, int node, uint64_t *moved);

/* The NUMA nodes m's memory is on: a numa object's node set; for other
 * media the nodes of its resident pages, from a sample of up to 64 pages
 * (the first page, which a pool's header keeps resident, and pages spread
 * over the object; mincore says which are resident, so no hole is filled
 * by looking). weight[n] counts the sampled pages on node n (a numa
 * object: 1 per node of its set); weight has MEDIA_MAX_NODES entries.
 * Returns the number of nodes found (0: none known, e.g. devdax). */
int media_nodes(const struct media *m, uint32_t *weight);
/* The node with CPUs this process may run on that is nearest memory spread
 * over nodes as weight says (MEDIA_MAX_NODES entries): the smallest
 * weighted sum of the firmware's distances (numa_distance), so a node of
 * the set that has CPUs wins, and a CPU-less (CXL) node gives its nearest
 * node with CPUs. -1 when NUMA is unavailable or weight is all zero. */
int media_nearest_cpu_node(const uint32_t *weight);
/* "0-3,5": the nodes of mask as a list in buf (cap bytes; "" when none). */
void media_nodes_text(const unsigned long *mask, char *buf, size_t cap);

/* Reads of a staged tier's file (io.c): io_uring, O_DIRECT where aligned,
 * up to MEDIA_IO_DEPTH requests of MEDIA_IO_CHUNK bytes in flight. A
 * reader is used by one thread at a time. */
#define MEDIA_IO_CHUNK (UINT64_C(1) << 20)
#define MEDIA_IO_DEPTH 8u
struct media_reader;
int media_reader_open(struct media_reader **r, const char *path, char *err, size_t errlen);
void media_reader_close(struct media_reader *r);
/* 1 when the file accepted O_DIRECT. */
int media_reader_direct(const struct media_reader *r);
/* Reads [off, off+len) of the file into dst; O_DIRECT (bypassing the page
 * cache) when off, len and dst are 4 KiB aligned and the filesystem allows
 * it, *direct says which (may be NULL). 0, -EIO when the file ends first,
 * or -errno. */
int media_read(struct media_reader *r, uint64_t off, uint64_t len, void *dst, int *direct);
/* Several ranges in one call: their requests share the ring (up to its
 * depth in flight, one submission while they fit), O_DIRECT when every
 * range is aligned. 0 or as media_read. */
struct media_read_range {
    uint64_t off, len;
    void *dst;
};
int media_readv(struct media_reader *r, const struct media_read_range *v, size_t n, int *direct);
/* A reader whose reads are ops->readv(ctx, ...) (a remote tier's, over the
 * network: store/remote_tier.c); media_reader_close calls ops->close(ctx).
 * 0 or -ENOMEM (ctx is then the caller's). */
struct media_reader_ops {
    int (*readv)(void *ctx, const struct media_read_range *v, size_t n);
    void (*close)(void *ctx);
};
int media_reader_custom(struct media_reader **r, const struct media_reader_ops *ops, void *ctx);
/* Shrink guard (guard.c): every mapping made by media_map_fd is registered,
 * and a SIGBUS inside one (the object was truncated under it) maps zero
 * pages over the lost range instead of killing the process, and bumps
 * read_alarm (common.h). media_guard_lost: 0 while m lost nothing, else
 * CXLP_ECORRUPT with a message naming the object and its new size. */
void media_guard_add(struct media *m);
/* The same for media_map_private's mapping at base. */
void media_guard_add_private(struct media *m, void *base);
/* The same for a read-only window of len bytes of m's object from offset
 * off at base (a short-lived mapping of its own); media_guard_del_window
 * forgets it, before the munmap. */
void media_guard_add_window(const struct media *m, void *base, uint64_t off, uint64_t len);
void media_guard_del_window(void *base);
/* Forgets m's mappings (shared and private). */
void media_guard_del(struct media *m);
int media_guard_lost(const struct media *m, char *err, size_t errlen);

#endif
