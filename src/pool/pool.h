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

/* A refcounted attachment: the mappings of the pool's objects plus this
 * process's lease slot. The pool handle holds one reference; every open
 * cxlp_store holds one, so a store outlives cxlp_pool_close. Thread-safe
 * refcount. */
struct attach;
void attach_ref(struct attach *a);
void attach_unref(struct attach *a);
/* Base address and size of object 0's mapping (valid while a reference is
 * held). */
const uint8_t *attach_base(const struct attach *a);
uint64_t attach_size(const struct attach *a);
/* 0 while the attachment's mappings are whole and its lease is its own;
 * CXLP_ECORRUPT once an object shrank under them (media_guard_lost),
 * CXLP_EBUSY once the lease was taken (expired while the process was
 * stopped). Message on o (NULL: the thread's message). One load when
 * nothing happened: read paths call it. */
int attach_lost(struct attach *a, struct obj *o);
/* 1 when the pool was declared non-coherent at create: readers then
 * invalidate (common/flush.h) what they are about to read, in every tier. */
int attach_noncoherent(const struct attach *a);
/* 1 when the attachment holds a lease: its pins protect what it reads. A
 * process that may not write the pool object (a pool of mode 0644 opened
 * by another user) has none. */
int attach_leased(const struct attach *a);
/* Base of the private copy-on-write mapping of object 0 (media_map_private):
 * same offsets as attach_base. 0 or its error. Thread-safe. */
int attach_private(struct attach *a, uint8_t **base);
/* media_collapse of [off, off+len) of object 0's mapping. */
int attach_collapse(struct attach *a, uint64_t off, uint64_t len);
/* Media of object i (0: the pool object; kind, node, descriptor, mapping);
 * borrowed. */
struct media *attach_media(struct attach *a, uint32_t i);
/* Lease pins: while pinned, extents visible in catalog generation gen are
 * not reused. Thread-safe. */
void attach_pin(struct attach *a, uint64_t gen);
void attach_unpin(struct attach *a, uint64_t gen);
/* Location epoch pins (loc.h): pins the pool's current location epoch and
 * returns it; copies dropped after it are not freed until the matching
 * unpin. Pin before loading location words, unpin after the last access to
 * the copies they name. Thread-safe; nests. */
uint64_t attach_pin_epoch(struct attach *a);
void attach_unpin_epoch(struct attach *a, uint64_t epoch);

/* The pool's tiers as an attachment sees them (immutable after open). */
struct attach_tier {
    const uint8_t *base;      /* mapping of the tier's object (read-only for
                                 read-only handles); NULL if not mapped */
    uint64_t size;            /* the object's size */
    uint64_t data_off, data_len; /* where copies may lie */
    int kind;                 /* enum cxlp_tier_kind */
    int node;                 /* NUMA node; -1 */
    uint32_t flags;           /* TIER_PERSISTENT, TIER_STAGED (pool_format.h) */
    uint32_t object;
    int fd;                   /* the object's descriptor (staged reads) */
    int media;                /* enum cxlp_media_kind of the object */
    const char *path;         /* the object's path */
};
uint32_t attach_n_tiers(const struct attach *a);
/* This process's liveness domain key (host id, boot, PID namespace: host.c). */
uint64_t attach_domain(const struct attach *a);
const struct attach_tier *attach_tier(const struct attach *a, uint32_t t);
/* The home tier (copies never dropped), or POOL_NO_HOME. */
uint32_t attach_home(const struct attach *a);
/* Shard states of a dataset (from pool_lookup's ds->states_off): the words
 * of shard k are states[k * stride .. + stride): heat, then one location
 * word per tier. Lives as long as a generation that lists the dataset is
 * pinned. */
uint64_t *attach_states(const struct attach *a, uint64_t states_off);
uint32_t attach_stride(const struct attach *a);
/* The pool's staging registry (tier layer): writable base and *bytes, or
 * NULL (a pool of one tier, or no writable mapping). */
uint8_t *attach_stage(const struct attach *a, uint64_t *bytes);
/* The same area through the read-only mapping (every handle has one). */
const uint8_t *attach_stage_ro(const struct attach *a, uint64_t *bytes);
/* Per tier counters in the pool header (pool_format.h), or NULL. */
struct pool_tier_ctr;
struct pool_tier_ctr *attach_ctr(const struct attach *a, uint32_t t);

/* Extents are allocated in multiples of this, at offsets aligned to it. */
#define POOL_EXTENT_ALIGN 4096u
/* Tiers and media objects a pool may have (pool_format.h). */
#define POOL_MAX_TIERS 8
#define POOL_MAX_OBJECTS (POOL_MAX_TIERS + 1)
#define POOL_NO_HOME UINT32_MAX
/* The "tier" argument that names object 0's metadata extents. */
#define POOL_META (-1)

/* One extent of pool memory, as an offset from its object's start. */
struct pool_extent {
    uint64_t off;
    uint64_t len;
};

/* One shard of a dataset. At publish: the extent of its first copy (in the
 * ingest tier: pool_ingest_tier) and the store layer's description of it;
 * at lookup: the same, with first_record filled in and off naming the
 * ingest tier's copy as the lookup saw it (0 when there was none). */
struct pool_shard {
    uint64_t off;             /* 4 KiB aligned */
    uint64_t len;             /* bytes from off that the shard occupies */
    uint64_t first_record;    /* global id of the shard's first record */
    uint64_t n_records;
    uint64_t data_len;        /* store layer: payload bytes */
    uint64_t checksum;        /* store layer: checksum of data and index */
};

/* A dataset's catalog record as the store layer builds and reads it. */
struct pool_dataset {
    struct cxlp_dataset_info info;  /* name, counts, sizes (version set by pool) */
    struct cxlp_schema schema;
    struct pool_extent docs;        /* object 0: int64 doc index (n_docs+1); len 0 if none */
    uint64_t docs_checksum;         /* XXH3-64 of the docs extent bytes */
    uint32_t n_shards;
    uint32_t policy;                /* default placement policy (tier layer's), 0 none */
    uint64_t states_off;            /* lookup: object 0 offset of the shard states */
};

/* How a dataset was ingested, where that changes what its ids mean
 * (pool_format.h, struct cat_ingest): flags INGEST_SHUFFLED and the seed,
 * or flags 0. */
struct pool_ingest {
    uint64_t flags;
    uint64_t seed;
};
/* Catalog snapshot for one dataset. On success *shards is malloc'd (caller
 * frees: the dataset's validated shard table), *a is a new reference, and
 * *gen is the catalog generation pinned for the caller (attach_unpin(a, gen)
 * when done). ds->states_off names the dataset's shard states.
 * CXLP_ENOTFOUND if absent; CXLP_ECORRUPT (message names the dataset) when
 * its shard table or states do not check out. */
int pool_lookup(cxlp_pool *p, const char *name, struct pool_dataset *ds,
                struct pool_shard **shards, struct attach **a, uint64_t *gen);
/* pool_lookup, and *ing set from the same snapshot (flags 0: none). */
int pool_lookup_ingest(cxlp_pool *p, const char *name, struct pool_dataset *ds,
                       struct pool_shard **shards, struct attach **a, uint64_t *gen,
                       struct pool_ingest *ing);

/* The catalog's current generation: one load, no copy (pairs with the CAS
 * of the gen word in host_publish_gen). A reader that saw generation g
 * and reads g again knows no dataset was published or removed since. */
uint64_t cat_generation(const struct attach *a);

/* The pool handle's attachment (borrowed) and its error object. */
struct attach *pool_attach(cxlp_pool *p);
struct obj *pool_obj(cxlp_pool *p);
int pool_writable(const cxlp_pool *p);
/* The tier that ingests write to: the home tier, or the slowest tier of a
 * pool without one. Datasets are published with their copies there. */
int pool_ingest_tier(const cxlp_pool *p);
/* Writable base address of where's object (where: a tier, or POOL_META for
 * object 0); NULL for read-only handles. */
uint8_t *pool_base_rw(cxlp_pool *p, int where);
uint64_t pool_size(const cxlp_pool *p);
/* A descriptor of where's object for bulk writes into this process's
 * reservations at file offset == mapping offset (copy_file_range, splice,
 * pwrite): the kernel copies into the object's pages with no page fault and
 * no zeroing on the mapping. -1 when the handle is read-only or the media
 * takes writes only through the mapping (numa, devdax); callers then write
 * through pool_base_rw. Borrowed: valid until cxlp_pool_close; the caller
 * keeps its writes inside its reservations. */
int pool_write_fd(cxlp_pool *p, int where);

/* Writer side. Each call takes and releases the writer lock itself.
 *
 * pool_reserve_many: allocates n extents of lens[i] bytes (each rounded up
 * to the extent alignment) in where's object (a tier, or POOL_META) in one
 * transaction and records them as reservations of this process, published
 * durably, then backs them with storage (media_prepare) outside the writer
 * lock. All or nothing: CXLP_EFULL with a message when they do not all fit
 * (nothing committed); -ENOSPC (the media's error) when backing fails (all
 * given back). out[i] gets extent i. pool_reserve is the n = 1 case. */
int pool_reserve_many(cxlp_pool *p, int where, const uint64_t *lens, uint64_t n, int huge,
                      struct pool_extent *out);
int pool_reserve(cxlp_pool *p, int where, uint64_t len, struct pool_extent *out);
/* pool_reserve_many and pool_reserve, with huge != 0: the whole 2 MiB
 * pieces of each extent are backed by 2 MiB pages where the media allows
 * (media_prepare_huge), so what is written there lands on them with no copy. */
int pool_reserve_pages(cxlp_pool *p, int where, uint64_t len, int huge, struct pool_extent *out);
/* Returns reservations in where's object (or pieces of them: off..off+len
 * inside one) to free space, all n in one transaction; CXLP_EARG (nothing
 * returned) when one is not this process's. Extents of length 0 are
 * skipped. */
int pool_unreserve_many(cxlp_pool *p, int where, const struct pool_extent *ext, uint64_t n);
int pool_unreserve(cxlp_pool *p, int where, struct pool_extent ext);
/* Makes ds visible: every shard extent must lie inside this process's
 * reservations in the ingest tier, 4 KiB aligned; ds->docs inside its
 * reservations of object 0 (POOL_META; the same object in a pool of one
 * tier). Those reservations are dropped and any part of them not used by the
 * dataset returns to free space; the dataset's shard table and states are
 * written to extents of object 0 of their own, each shard's location in the
 * ingest tier naming its extent; the dataset appears in one atomic catalog
 * flip; ds->info.version is set to the new generation. Several extents may
 * share a reservation. CXLP_EARG (message names shard and offset) for an
 * extent outside the caller's reservations or unaligned; CXLP_EFULL when
 * object 0 has no room for the table and states; CXLP_ECATFULL when the
 * catalog slot has no room. CXLP_EEXIST if the name was published meanwhile
 * (reservations then stay reserved; the caller unreserves). */
int pool_publish(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards);
/* pool_publish, replacing the published dataset of the same name whose
 * info.version is replaces (0: a new name, as pool_publish) in the same
 * flip: that dataset goes as cxlp_pool_remove takes it (its copies, table,
 * states and docs freed once no lease can still read them) and the new one
 * takes its place in the catalog, with its placement policy. CXLP_ENOTFOUND
 * when it was removed meanwhile, CXLP_EBUSY when the name now holds another
 * dataset (published again, or another writer's rewrite); nothing is
 * published then. */
int pool_publish_over(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards,
                      uint64_t replaces);
/* pool_publish_over, recording ing with the dataset in the same flip
 * (ing NULL or flags 0: none; a dataset of no shards records none). A
 * replacement without one keeps the replaced dataset's: the writers that
 * replace (cxlp_pool_rewrite) keep its records in their order. */
int pool_publish_ingest(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards,
                        uint64_t replaces, const struct pool_ingest *ing);
/* Sets the policy field of dataset name's record (one catalog flip; the
 * tier layer gives it meaning). CXLP_ENOTFOUND. */
int pool_set_policy(cxlp_pool *p, const char *name, uint32_t policy);
/* Publishes dataset name made of the records of datasets parts[0..n) in
 * that order (their shards, record ids renumbered) and removes the parts,
 * in one atomic catalog flip: no extent moves or is copied. The parts must
 * have the same schema and no document index. CXLP_EEXIST (name taken),
 * CXLP_ENOTFOUND (a part missing), CXLP_EARG (part twice, other schema),
 * CXLP_EUNSUPPORTED (document index), CXLP_ECATFULL. */
int pool_concat(cxlp_pool *p, const char *name, const char *const *parts, size_t n_parts);
/* Makes [off, off+len) of where's object durable (file backend) and, on a
 * non-coherent pool, writes its lines back to memory: every byte a publish
 * will name goes through here first. */
int pool_sync(cxlp_pool *p, int where, uint64_t off, uint64_t len);

/* Copies of shards (place.c): what staging, eviction and migration use.
 * A dataset is named by its states extent (pool_lookup's ds->states_off).
 * Every function below takes a staging unit where it takes a shard: k =
 * POOL_UNIT_TARGET | u names unit u of the dataset's units (struct
 * pool_units), whose copies live in memory tiers only.
 *
 * pool_copy_reserve: room in tier's object for a copy of shard k, reserved
 * for that target (a claim: one copier per shard and tier). *out is the
 * extent (the shard's length rounded to 4 KiB; a unit's: want, a multiple
 * of 4 KiB, which must be what its copies already hold). CXLP_EEXIST when the tier
 * holds a copy already (nothing reserved), CXLP_EBUSY when a live process
 * holds the claim, CXLP_ENOTFOUND when the dataset was removed, CXLP_EFULL
 * when the tier has no room. */
int pool_copy_reserve(cxlp_pool *p, uint64_t states_off, uint64_t k, uint32_t tier,
                      uint64_t want, struct pool_extent *out);
/* Publishes the reserved extent, now holding a verified copy, as shard k's
 * copy in tier (cache: the copy may be evicted by placement policies), and
 * in the same step drops its copies in the tiers of drop_mask (never the
 * home's, never the last). Dropped copies are freed once no epoch pin can
 * see them. CXLP_EEXIST / CXLP_ENOTFOUND: the tier got a copy meanwhile, or
 * the dataset went; the reservation is returned either way. */
int pool_copy_place(cxlp_pool *p, uint64_t states_off, uint64_t k, uint32_t tier,
                    struct pool_extent ext, int cache, uint32_t drop_mask, uint64_t *dropped);
/* Drops shard k's copies in the tiers of drop_mask (only those staged as
 * cache with only_cache), never the home's or the last one; *bytes (may be
 * NULL) receives the bytes dropped. */
int pool_copy_drop(cxlp_pool *p, uint64_t states_off, uint64_t k, uint32_t drop_mask,
                   int only_cache, uint64_t *bytes);
/* Bytes of tier's object that dropped copies hold until no reader's epoch
 * pin can see them (deferred frees of the current catalog; the next writer
 * frees those whose pins have gone). 0 or the snapshot's error. */
int pool_tier_deferred(cxlp_pool *p, uint32_t tier, uint64_t *bytes);
/* Drops one cache copy (evictable, staged by a placement policy) in tier of
 * a dataset other than the one of skip_states; *bytes its size, 0 when
 * there was none. */
int pool_drop_one_cache(cxlp_pool *p, uint32_t tier, uint64_t skip_states, uint64_t *bytes);
/* Marks tier's copy of shard k as cache (evictable) or kept. CXLP_ENOTFOUND
 * when the tier has no copy. */
int pool_copy_keep(cxlp_pool *p, uint64_t states_off, uint64_t k, uint32_t tier, int cache);
/* A dataset's staging units (units.c; pool_format.h, struct cat_units):
 * unit u's words at words + u * stride (word 0: a copy's bytes; word 1 + t:
 * its location in tier t). Records are cut into blocks of per_unit ids; a
 * unit is one block's records in one shard. */
struct pool_units {
    uint64_t *words;
    uint64_t per_unit, n_units;
    uint32_t stride;
};
/* The dataset's units record, from a snapshot of the catalog (no lock; a
 * read-only attachment reads it too), its words in a's mapping.
 * CXLP_ENOTFOUND when it has none. */
int pool_units_get(struct attach *a, uint64_t states_off, struct pool_units *out);
/* The dataset's units record, made if it has none: n_units units of
 * per_unit records (what the caller computed from the shard table), their
 * words zero. A record made earlier stays as it is (its per_unit may
 * differ from the one asked for). CXLP_ENOTFOUND (no such dataset),
 * CXLP_EFULL (no room for the words in the pool object). */
int pool_units_ensure(cxlp_pool *p, uint64_t states_off, uint64_t per_unit, uint64_t n_units,
                      struct pool_units *out);
/* cxlp_pool_list without asking the remote tier's peers. */
int pool_list_local(cxlp_pool *p, struct cxlp_dataset_info *infos, size_t cap, size_t *n_out);
/* The whole listing (local: pool_list_local's, else cxlp_pool_list's), as
 * list_all gives it. */
int pool_list_all(cxlp_pool *p, int local, struct cxlp_dataset_info **out, size_t *n);
/* pool_publish with the shards' copies in tier instead of the ingest tier
 * (a remote tier: a dataset mirrored from a peer, store/remote_tier.c). */
int pool_publish_in(cxlp_pool *p, struct pool_dataset *ds, const struct pool_shard *shards,
                    uint32_t tier);
/* 1 when p has a remote tier. */
int pool_has_remote(const cxlp_pool *p);
/* Mirrors the datasets the peers of p's remote tiers list and p does not
 * (name: that one only) into p's catalog (store/remote_tier.c). 0;
 * CXLP_ENOTFOUND when p has no remote tier or (name) no peer lists it; a
 * peer's error (its message names the peer). */
int pool_remote_mirror(cxlp_pool *p, const char *name);
/* A writable handle on the pool an attachment maps (for staging from a
 * read-only store). */
int pool_open_writable(struct attach *a, cxlp_pool **out);

/* Structural check of header, catalog, shard tables, locations and the
 * extent map of every object (no data checksums); report may be NULL. Used
 * by cxlp_pool_verify (store layer). */
int pool_check(cxlp_pool *p, void (*report)(void *ctx, const char *line), void *ctx);
/* Tries of an unlocked check before a writable handle takes the writer
 * lock for it (check.c; tests lower it). */
extern int pool_check_tries;

#endif
