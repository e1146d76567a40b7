/*
 * pool.h - the pool layer's private interface to the store layer above it.
 *
 * The store layer never sees the catalog's shared-memory layout: it asks for
 * a private snapshot of one dataset (pool_lookup) and hands complete records
 * to pool_publish. Extents of an ingest in progress are reservations owned by
 * the ingesting process (pid + start time): they become a dataset's extents
 * in the same atomic catalog flip that publishes it, and are reclaimed by the
 * next writer when their owner is dead.
 */
#ifndef CXLP_POOL_H
#define CXLP_POOL_H

#include <stdint.h>

#include "common/common.h"
#include "media/media.h"

/* A refcounted attachment: the mapping plus this process's lease slot. The
 * pool handle holds one reference; every open cxlp_store holds one, so a
 * store outlives cxlp_pool_close. Thread-safe refcount. */
struct attach;
void attach_ref(struct attach *a);
void attach_unref(struct attach *a);
/* Base address and size of the mapping (valid while a reference is held). */
const uint8_t *attach_base(const struct attach *a);
uint64_t attach_size(const struct attach *a);
/* 0 while the attachment's mappings are whole and its lease is its own;
 * CXLP_ECORRUPT once the object shrank under them (media_guard_lost),
 * CXLP_EBUSY once the lease was taken (expired while the process was
 * stopped). Message on o (NULL: the thread's message). One load when
 * nothing happened: read paths call it. */
int attach_lost(struct attach *a, struct obj *o);
/* 1 when the pool was declared non-coherent at create: readers then
 * invalidate (common/flush.h) what they are about to read. */
int attach_noncoherent(const struct attach *a);
/* Base of the private copy-on-write mapping of the pool (media_map_private):
 * same offsets as attach_base. 0 or its error. Thread-safe. */
int attach_private(struct attach *a, uint8_t **base);
/* media_collapse of [off, off+len) of the attachment's mapping. */
int attach_collapse(struct attach *a, uint64_t off, uint64_t len);
/* The attachment's media (kind, node, descriptor, mapping); borrowed. */
const struct media *attach_media(const struct attach *a);
/* Lease pins: while pinned, extents visible in catalog generation gen are
 * not reused. pin returns a token for unpin. Thread-safe. */
void attach_pin(struct attach *a, uint64_t gen);
void attach_unpin(struct attach *a, uint64_t gen);

/* Extents are allocated in multiples of this, at offsets aligned to it. */
#define POOL_EXTENT_ALIGN 4096u

/* One extent of pool memory, as an offset from the region start. */
struct pool_extent {
    uint64_t off;
    uint64_t len;
};

/* One shard of a dataset: a whole extent holding one store-format shard. */
struct pool_shard {
    uint64_t off;             /* extent offset in the region */
    uint64_t len;             /* extent length (shard header..end) */
    uint64_t first_record;    /* global id of the shard's first record */
    uint64_t n_records;
    uint64_t version;         /* location version (bumped by migration) */
    uint32_t media;           /* media index; 0 = the pool's own media */
    uint32_t pad;
};

/* A dataset's catalog record as the store layer builds and reads it. */
struct pool_dataset {
    struct cxlp_dataset_info info;  /* name, counts, sizes (version set by pool) */
    struct cxlp_schema schema;
    struct pool_extent docs;        /* int64 doc index (n_docs+1); len 0 if none */
    uint64_t docs_checksum;         /* XXH3-64 of the docs extent bytes */
    uint32_t n_shards;
};

/* Catalog snapshot for one dataset. On success *shards is malloc'd (caller
 * frees), *a is a new reference, and *gen is the catalog generation pinned
 * for the caller (attach_unpin(a, gen) when done). CXLP_ENOTFOUND if absent. */
int pool_lookup(cxlp_pool *p, const char *name, struct pool_dataset *ds,
                struct pool_shard **shards, struct attach **a, uint64_t *gen);

/* The pool handle's attachment (borrowed) and its error object. */
struct attach *pool_attach(cxlp_pool *p);
struct obj *pool_obj(cxlp_pool *p);
int pool_writable(const cxlp_pool *p);
/* Writable base address (NULL for read-only handles). */
uint8_t *pool_base_rw(cxlp_pool *p);
uint64_t pool_size(const cxlp_pool *p);
/* A descriptor of the pool object for bulk writes into this process's
 * reservations at file offset == mapping offset (copy_file_range, splice,
 * pwrite): the kernel copies into the object's pages with no page fault and
 * no zeroing on the mapping. -1 when the handle is read-only or the media
 * takes writes only through the mapping (numa, devdax); callers then write
 * through pool_base_rw. Borrowed: valid until cxlp_pool_close; the caller
 * keeps its writes inside its reservations. */
int pool_write_fd(cxlp_pool *p);

/* Writer side. Each call takes and releases the writer lock itself.
 *
 * pool_reserve_many: allocates n extents of lens[i] bytes (each rounded up
 * to the extent alignment) in one transaction and records them as
 * reservations of this process, published durably, then backs them with
 * storage (media_prepare) outside the writer lock. All or nothing:
 * CXLP_EFULL with a message when they do not all fit (nothing committed);
 * -ENOSPC (the media's error) when backing fails (all given back). out[i]
 * gets extent i. pool_reserve is the n = 1 case. */
int pool_reserve_many(cxlp_pool *p, const uint64_t *lens, uint64_t n, int huge,
                      struct pool_extent *out);
int pool_reserve(cxlp_pool *p, uint64_t len, struct pool_extent *out);
/* pool_reserve_many and pool_reserve, with huge != 0: the whole 2 MiB
 * pieces of each extent are backed by 2 MiB pages where the media allows
 * (media_prepare_huge), so what is written there lands on them with no copy. */
int pool_reserve_pages(cxlp_pool *p, uint64_t len, int huge, struct pool_extent *out);
/* Returns reservations (or pieces of them: off..off+len inside one) to free
 * space, all n in one transaction; CXLP_EARG (nothing returned) when one is
 * not this process's. Extents of length 0 are skipped. */
int pool_unreserve_many(cxlp_pool *p, const struct pool_extent *ext, uint64_t n);
int pool_unreserve(cxlp_pool *p, struct pool_extent ext);
/* Makes ds visible: every shard extent and ds->docs must lie inside this
 * process's reservations; those reservations are dropped and any part of them
 * not used by the dataset returns to free space; the dataset appears in one
 * atomic catalog flip; ds->info.version is set to the new generation.
 * Extents need not be aligned: the dataset keeps every POOL_EXTENT_ALIGN page
 * that one of its extents touches (several may share a reservation).
 * CXLP_EARG (message names shard and offset) for an extent outside the
 * caller's reservations; CXLP_ECATFULL when the catalog slot has no room.
 * CXLP_EEXIST if the name was published meanwhile (reservations then stay
 * reserved; the caller unreserves). */
int pool_publish(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards);
/* Publishes dataset name made of the records of datasets parts[0..n) in
 * that order (their shards, record ids renumbered) and removes the parts,
 * in one atomic catalog flip: no extent moves or is copied. The parts must
 * have the same schema and no document index. CXLP_EEXIST (name taken),
 * CXLP_ENOTFOUND (a part missing), CXLP_EARG (part twice, other schema),
 * CXLP_EUNSUPPORTED (document index), CXLP_ECATFULL. */
int pool_concat(cxlp_pool *p, const char *name, const char *const *parts, size_t n_parts);
/* Makes [off, off+len) durable (file backend) and, on a non-coherent pool,
 * writes its lines back to memory: every byte a publish will name goes
 * through here first. */
int pool_sync(cxlp_pool *p, uint64_t off, uint64_t len);

/* Structural check of header, catalog and extent map (no data checksums);
 * report may be NULL. Used by cxlp_pool_verify (store layer). */
int pool_check(cxlp_pool *p, void (*report)(void *ctx, const char *line), void *ctx);

#endif
