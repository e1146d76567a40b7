/*
 * pool_internal.h - what the pool's source files share among themselves:
 * the attachment and handle structs, the private catalog representation,
 * and the helpers of catalog.c, extent.c, attach.c and txn.c.
 *
 * Glossary:
 *   attachment  one mapping of a pool in this process plus one lease slot;
 *               refcounted (pool handle + open stores)
 *   layout      the header's geometry, copied to private memory once it has
 *               been validated; later code never re-reads it from the pool,
 *               so a hostile writer cannot move areas after the check
 *   catalog     the copy-on-write blob that names datasets, shards, free
 *               extents, reservations and deferred frees
 *   footprint   the 4 KiB aligned ranges a dataset's extents cover; what the
 *               allocator accounts as "used"
 */
#ifndef CXLP_POOL_INTERNAL_H
#define CXLP_POOL_INTERNAL_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/pool.h"
#include "pool/pool_format.h"

struct pool_layout {
    uint64_t size, lease_off, lease_slots, cat_off, cat_bytes, data_off, data_len;
};

struct pin {
    uint64_t gen, count;
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
    struct media m;            /* the pool mapping (read-only for ro handles) */
    struct media lm;           /* ro handles: writable second mapping that
                                  carries the lease; lm.base NULL if none */
    struct pool_layout L;
    struct pool_hdr *hdr;      /* header in m */
    struct pool_hdr *whdr;     /* writable view of the header (m or lm); NULL if none */
    struct pool_lease *leases; /* lease table, writable when lease != NULL */
    struct pool_lease *lease;  /* own slot; NULL when leaseless */
    uint64_t lease_seq;
    uint64_t lease_lost;       /* atomic: the slot was taken from us (expired) */
    struct pin *pins;
    size_t n_pins, cap_pins;
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
};

/* Private, mutable catalog. Arrays are malloc'd and owned. */
struct cat {
    uint64_t gen;
    struct cat_ds *ds;
    struct pool_shard *sh;
    struct pool_extent *fr;    /* sorted by off, coalesced */
    struct cat_resv *resv;
    struct cat_def *def;
    uint64_t n_ds, n_sh, n_fr, n_resv, n_def;
    uint64_t cap_ds, cap_sh, cap_fr, cap_resv, cap_def;
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
/* Appends el to a growable array. -ENOMEM. */
int arr_push(void *arrp, uint64_t *n, uint64_t *cap, size_t elsz, const void *el);
void arr_del(void *arr, uint64_t *n, size_t elsz, uint64_t i);

/* extent.c */
int ext_free(struct cat *c, uint64_t off, uint64_t len);
int ext_alloc(struct cat *c, uint64_t len, uint64_t *off);
uint64_t ext_free_bytes(const struct cat *c, uint64_t *largest);
/* Merged footprint of dataset i (malloc'd array). -ENOMEM. */
int ds_footprint(const struct cat *c, uint64_t i, struct pool_extent **out, uint64_t *n);
int ext_cmp(const void *a, const void *b);

/* attach.c */
int attach_lease_claim(struct attach *a, struct obj *o);
/* Scans the lease table: live holders and their minimum pinned generation;
 * with reclaim, frees the slots of dead holders (CAS). Liveness: host.c. */
void lease_scan(struct attach *a, int reclaim, uint64_t *min_gen, uint32_t *live);

/* Write transactions (txn.c): every writer (ingest, remove, migration)
 * changes the catalog as
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
int txn_commit(struct txn *t, int faults);
void txn_end(struct txn *t);

/* pool.c */
uint64_t pool_layout_signature(void);
int hdr_validate(const struct pool_hdr *h, uint64_t media_size, struct pool_layout *L,
                 struct obj *o, const char *path);
/* The same, also giving the header's flags and expiry (NULL: not wanted). */
int hdr_validate_ex(const struct pool_hdr *h, uint64_t media_size, struct pool_layout *L,
                    uint32_t *flags, uint64_t *expiry_ms, struct obj *o, const char *path);

#endif
