/*
 * media_impl.h - shared by the backends in src/media only.
 */
#ifndef CXLP_MEDIA_IMPL_H
#define CXLP_MEDIA_IMPL_H

#include <stdarg.h>
#include <stdio.h>

#include "media/media.h"

extern const struct media_ops media_shm_ops;
extern const struct media_ops media_file_ops;
extern const struct media_ops media_numa_ops;
extern const struct media_ops media_devdax_ops;
extern const struct media_ops media_pci_ops;


/* Maps the whole of m->fd (m->size bytes) per m->writable; sets m->base. */
int media_map_fd(struct media *m, char *err, size_t errlen);
/* Maps errno e of creating (EEXIST -> CXLP_EEXIST) or opening (ENOENT ->
 * CXLP_ENOTFOUND) m->path to a code and a message naming the path. */
int media_open_errno(struct media *m, int e, int creating, char *err, size_t errlen);
/* After an exclusive create of m->fd: sets mode, sizes (sparse) and maps.
 * The caller removes the object when this fails. */
int media_init_created(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen);
/* fstat of an object opened O_NONBLOCK: CXLP_EFORMAT unless a regular
 * file; then clears O_NONBLOCK and sets size and owner. */
int media_fstat(struct media *m, char *err, size_t errlen);
/* fallocate [off, off+len) of m->fd; EOPNOTSUPP tolerated; on failure the
 * range is punched out (see media_prepare). */
int media_fallocate(struct media *m, uint64_t off, uint64_t len);
/* destroy of a region that is not ours to remove (devdax, pci): zeroes the
 * first 4 KiB of m->fd through a mapping of maplen bytes, so it no longer
 * holds a pool; with only_pool, CXLP_ENOTFOUND (nothing written) unless
 * it holds one. */
int media_wipe_header(struct media *m, uint64_t maplen, int only_pool, char *err,
                      size_t errlen);
/* msync of [off, off+len) rounded out to pages. */
int media_msync(struct media *m, uint64_t off, uint64_t len);

/* media_probe of a file: spec naming a block device. */
int media_blk_probe(struct media *m, uint64_t size, char *err, size_t errlen);

/* numa: every node of the pool's set exists and has memory; sets
 * m->emulated (one has CPUs). CXLP_ENODEV naming the node otherwise. */
int media_numa_check(struct media *m, char *err, size_t errlen);

/* The shm object steps that the numa backend reuses (media_shm.c). */
int shm_create_common(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen);
int shm_open_common(struct media *m, char *err, size_t errlen);
int shm_destroy_common(struct media *m, char *err, size_t errlen);

#endif
