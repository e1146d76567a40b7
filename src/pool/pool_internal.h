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

struct attach {
    pthread_mutex_t mu;        /* process-local: guards pins */
    uint64_t refs;             /* atomic */
    struct media m;            /* the pool mapping (read-only for ro handles) */
    struct media lm;           /* ro handles: writable second mapping that
                                  carries the lease; lm.base NULL if none */
    struct pool_layout L;
    struct pool_hdr *hdr;      /* header in m */
    struct pool_lease *leases; /* lease table, writable when lease != NULL */
    struct pool_lease *lease;  /* own slot; NULL when leaseless */
    uint64_t lease_seq;
    struct pin *pins;
    size_t n_pins, cap_pins;
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
 * with reclaim, frees the slots of dead holders (CAS). */
void lease_scan(struct attach *a, int reclaim, uint64_t *min_gen, uint32_t *live);
void attach_boot_check(struct attach *a);

/* pool.c */
uint64_t pool_layout_signature(void);
int hdr_validate(const struct pool_hdr *h, uint64_t media_size, struct pool_layout *L,
                 struct obj *o, const char *path);

#endif
