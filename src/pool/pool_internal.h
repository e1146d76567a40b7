/*
 * pool_internal.h - what the pool's source files share among themselves:
 * the attachment and handle structs, the private catalog representation,
 * and the helpers of catalog.c, extent.c, attach.c, txn.c and place.c.
 *
 * Glossary:
 *   attachment  the mappings of a pool's objects in this process plus one
 *               lease slot; refcounted (pool handle + open stores)
 *   object      one media object of a pool; object 0 holds the metadata
 *   tier        a place for copies of shards, on one object, fastest first
 *   layout      the header's geometry, copied to private memory once it has
 *               been validated; later code never re-reads it from the pool,
 *               so a hostile writer cannot move areas after the check
 *   catalog     the copy-on-write blob that names datasets, free extents,
 *               reservations and deferred frees
 *   states      a dataset's in-place words: heat and one location per tier
 *   footprint   the 4 KiB aligned ranges a dataset's extents cover in an
 *               object (its metadata extents, its copies); what the
 *               allocator accounts as "used"
 */
#ifndef CXLP_POOL_INTERNAL_H
#define CXLP_POOL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/loc.h"
#include "pool/pool.h"
#include "pool/pool_format.h"

struct pool_layout {
    uint64_t size, lease_off, lease_slots, stage_off, stage_bytes, cat_off, cat_bytes;
    uint32_t n_tiers, n_objects, home, flags; /* flags: POOL_F_* */
    uint64_t expiry_ms;
    struct pool_tier tiers[POOL_MAX_TIERS];
    struct {
        uint64_t size, data_off, data_len;
    } obj[POOL_MAX_OBJECTS];
};

struct pin {
    uint64_t gen, count;
};

struct pins {
    struct pin *v;
    size_t n, cap;
};

/* Who this process is, across hosts (host.c): taken at every attach, since
 * a fork may since have entered another PID namespace. */
struct host_self {
    uint64_t host_id;          /* persistent per host (docs/hosts.md) */
    uint8_t boot[16];          /* boot id */
    uint64_t pidns;            /* inode of /proc/self/ns/pid */
    int pid_checks;            /* /proc shows this PID namespace: pids are judged */
    uint64_t key;              /* domain key: XXH3(host_id, boot, pidns) */
    char name[16];             /* hostname */
    char id_source[96];        /* where host_id came from, for `cxlpool stat` */
};

/* The pool clock as this attachment last saw it (host.c). */
struct clock_seen {
    uint64_t tick;             /* value seen */
    uint64_t since_ns;         /* CLOCK_MONOTONIC when it was first seen */
};

struct attach {
    pthread_mutex_t mu;        /* process-local: guards pins, clk, wlock_word */
    uint64_t refs;             /* atomic */
    struct media m;            /* object 0 (read-only for ro handles) */
    struct media lm;           /* ro handles: writable second mapping that
                                  carries the lease; lm.base NULL if none */
    struct media om[POOL_MAX_OBJECTS]; /* objects 1..n_objects-1 */
    struct pool_layout L;
    struct attach_tier t[POOL_MAX_TIERS];
    struct pool_hdr *hdr;      /* header in m */
    struct pool_hdr *whdr;     /* writable view of the header (m or lm); NULL if none */
    struct pool_lease *leases; /* lease table, writable when lease != NULL */
    struct pool_lease *lease;  /* own slot; NULL when leaseless */
    uint64_t lease_seq;
    uint64_t lease_lost;       /* atomic: the slot was taken from us (expired) */
    struct pins gens, epochs;
    /* across hosts (host.c) */
    struct host_self self;
    int noncoherent;           /* header flag POOL_F_NONCOHERENT */
    uint64_t expiry_ticks;     /* header expiry_ms in pool clock ticks */
    uint32_t host_idx;         /* our registry entry; POOL_HOSTS if none */
    struct clock_seen clk;
    uint64_t wlock_word;       /* our writer lock word while held, else 0 */
    int watched;               /* on the heartbeat thread's list */
};

struct cxlp_pool {
    struct obj obj;
    struct attach *a;
    int writable;
    uint64_t remote_asked_ms;         /* when cxlp_pool_list last asked the
                                         remote tier's peers (monotonic ms) */
};

/* Private, mutable catalog. Arrays are malloc'd and owned. */
struct cat {
    uint64_t gen;
    struct cat_ds *ds;
    struct cat_free *fr;       /* sorted by (object, off), coalesced */
    struct cat_resv *resv;
    struct cat_def *def;
    struct cat_units *units;   /* CAT_MAGIC_UNITS catalogs; else none */
    struct cat_ingest *ingest; /* CAT_MAGIC_INGEST catalogs; else none */
    uint64_t n_ds, n_fr, n_resv, n_def, n_units, n_ingest;
    uint64_t cap_ds, cap_fr, cap_resv, cap_def, cap_units, cap_ingest;
};

/* catalog.c */
void cat_free(struct cat *c);
/* Validates an untrusted blob (len bytes, private copy) of generation gen and
 * decodes it. CXLP_ECORRUPT with a message naming the field otherwise. */
int cat_decode(const uint8_t *blob, uint64_t len, const struct pool_layout *L,
               uint64_t gen, struct cat *out, struct obj *o);
uint64_t cat_encoded_size(const struct cat *c);
void cat_encode(const struct cat *c, uint8_t *buf);
/* Lock-free snapshot of the current catalog. With pin, the returned
 * generation is pinned in the lease (the caller unpins). */
int cat_snapshot(struct attach *a, struct cat *out, int pin, uint64_t *gen, struct obj *o);
/* Copies the slot that would hold generation gen (no retry; for checks). */
int cat_read_slot(struct attach *a, uint64_t slot, struct cat *out, struct obj *o);
int64_t cat_find(const struct cat *c, const char *name);
/* Index of the dataset whose states extent starts at off, or -1. */
int64_t cat_find_states(const struct cat *c, uint64_t off);
/* Appends el to a growable array. -ENOMEM. */
int arr_push(void *arrp, uint64_t *n, uint64_t *cap, size_t elsz, const void *el);
void arr_del(void *arr, uint64_t *n, size_t elsz, uint64_t i);
/* Words per shard in the states of a pool with n_tiers tiers. */
static inline uint32_t states_stride(uint32_t n_tiers)
{
    return 1 + n_tiers;
}

/* units.c: a dataset's staging units (struct cat_units) */
/* Index of the units record of the dataset whose states are at states_off, or -1. */
int64_t cat_find_units(const struct cat *c, uint64_t states_off);
/* The unit words at words_off (object 0). */
uint64_t *units_words(const struct attach *a, uint64_t words_off);
/* The location words (word 1 of its stride: index them by tier) of unit
 * target (POOL_UNIT_TARGET | u) of the dataset of states_off, and in *len
 * its word 0 (a copy's bytes, 0 before the first); NULL when the dataset
 * has no units record or u is past them. */
uint64_t *unit_target_words(const struct attach *a, const struct cat *c, uint64_t states_off,
                            uint64_t target, uint64_t *len);
/* Calls fn for every copy the n_units unit words at words_off name (unit,
 * tier, its object, offset and length); stops at fn's first nonzero return
 * and returns it. CXLP_ECORRUPT, before any call for the bad word's unit,
 * for words outside object 0 or a copy outside its tier. */
int units_walk(const struct attach *a, uint64_t words_off, uint64_t n_units,
               int (*fn)(void *ctx, uint64_t u, uint32_t tier, uint32_t object, uint64_t off,
                         uint64_t len),
               void *ctx);
/* The units of the dataset of states_off (if any) go as the dataset goes at
 * generation g: their copies (DEF_UCOPIES) and their words (DEF_EXTENT)
 * become deferred frees and the record leaves c. -ENOMEM. */
int units_defer(struct cat *c, uint64_t states_off, uint64_t g);

/* extent.c */
int ext_free(struct cat *c, uint32_t object, uint64_t off, uint64_t len);
int ext_alloc(struct cat *c, uint32_t object, uint64_t len, uint64_t *off);
/* Free bytes of object; its largest free extent and their number when asked
 * (NULL: not). */
uint64_t ext_free_bytes(const struct cat *c, uint32_t object, uint64_t *largest,
                        uint64_t *n_extents);
int ext_cmp(const void *a, const void *b);
/* An extent of one object (footprints, checks). */
struct oext {
    uint64_t off, len;
    uint32_t object;
};
/* Appends to *v the footprint of dataset i: its metadata extents in object
 * 0 (its units' words too) and every copy its states and unit words name
 * (widened to POOL_EXTENT_ALIGN), in no particular order. -ENOMEM; CXLP_ECORRUPT for a word outside its tier. */
int ds_extents(const struct attach *a, const struct cat *c, uint64_t i, struct oext **v,
               uint64_t *n, uint64_t *cap);
/* Appends to *v every copy the n_units unit words at words_off name.
 * -ENOMEM; CXLP_ECORRUPT as units_walk. */
int units_extents(const struct attach *a, uint64_t words_off, uint64_t n_units,
                  struct oext **v, uint64_t *n, uint64_t *cap);
/* Sorts by (object, off) and merges touching/overlapping extents. */
void oext_merge(struct oext *v, uint64_t *n);

/* attach.c */
int attach_lease_claim(struct attach *a, struct obj *o);
/* Scans the lease table: live holders and their minimum pinned generation
 * and location epoch; with reclaim, frees the slots of dead holders (CAS).
 * Liveness: host.c. */
void lease_scan(struct attach *a, int reclaim, uint64_t *min_gen, uint64_t *min_epoch,
                uint32_t *live);

/* Write transactions (txn.c): every writer (ingest, remove, placement and
 * migration) changes the catalog as
 *   txn_begin (cross-host writer lock, snapshot, reclaim) -> change t->c ->
 *   txn_commit (slot, write-back, fenced generation CAS) -> txn_end
 * txn_end always runs, after a failed commit too. */
struct txn {
    cxlp_pool *p;
    struct cat c;
    uint64_t gen;              /* generation the transaction started from */
    struct wlock {
        uint64_t word;         /* our lock word when taken */
        uint64_t gen_word;     /* the header's gen word after our epoch bump */
    } lock;
};
int txn_begin(struct txn *t, cxlp_pool *p);
/* Publishes t->c as generation gen+1. faults: whether the crash points of
 * pool_publish fire. */
int txn_commit(struct txn *t, int faults);
void txn_end(struct txn *t);

/* pool.c */
uint64_t pool_layout_signature(void);
int compute_layout_staged(uint64_t size, const struct cxlp_pool_opts *opts,
                          struct pool_layout *L, const char *spec, uint64_t stage_bytes);
void pool_make_uuid(uint8_t uuid[16]);
/* Writes a new pool's metadata into object 0 (m), magic last. */
int pool_format(struct media *m, const struct pool_layout *L, const struct pool_object *objs,
                const uint8_t uuid[16]);
/* Creates object 0 of L->size bytes at spec and formats it; L->n_tiers 0
 * means a pool of one tier, described from the media. */
int pool_create_object0(const char *spec, struct pool_layout *L, struct pool_object *objs,
                        const uint8_t uuid[16], uint32_t mode, cxlp_pool **out);

/* tiers.c */
int tier_kind_of(const struct media *m);
/* Opens and checks objects 1.. of a validated header (a->hdr, a->L). */
int pool_objects_open(struct attach *a, struct obj *o);
/* Removes the tier objects of the pool at spec (best effort). */
int pool_destroy_objects(const char *spec);
int hdr_validate(const struct pool_hdr *h, uint64_t media_size, struct pool_layout *L,
                 struct obj *o, const char *path);

/* The object that where (a tier or POOL_META) allocates in; -1 if invalid. */
int where_object(const struct pool_layout *L, int where);

/* place.c */
/* 1 when the location word of (states extent, shard, tier) names the copy
 * at off: a reservation taken for it, or a deferred free taken from it, is
 * that copy. */
int word_names(const struct attach *a, const struct cat *c, uint64_t states_off,
               uint64_t shard, uint32_t tier, uint64_t off);
/* After a flip that took a dataset's shards to another (concat): the old
 * states of n_shards shards stop naming copies in every tier but the home
 * (fenced word changes, then the epoch grows). Under the writer lock t. */
struct txn;
void pool_words_retire(struct txn *t, uint64_t states_off, uint64_t n_shards);

/* txn.c */
/* Backs [off, off+len) of m with storage now (media_prepare; huge: on 2 MiB
 * pages where the media allows), so that a full disk or /dev/shm is an error
 * here and not a SIGBUS at first touch; on failure the range is given back
 * and the message names the object. */
int pool_back(cxlp_pool *p, struct media *m, uint64_t off, uint64_t len, int huge);
int writable_handle(cxlp_pool *p, const char *what);
/* A reservation of this process (pid, start time, domain, lease) of
 * [off, off+len) in object for tier (UINT32_MAX: none). */
struct cat_resv resv_mine(const struct attach *a, uint64_t off, uint64_t len, uint32_t object,
                          uint32_t tier);

#endif
