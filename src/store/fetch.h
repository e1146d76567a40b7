/*
 * fetch.h - copies of a dataset's shards between tiers (fetch.c): what a
 * miss, a staging policy and a migration do to one shard.
 */
#ifndef CXLP_STORE_FETCH_H
#define CXLP_STORE_FETCH_H

#include <stdint.h>

#include "common/common.h"
#include "pool/pool.h"

enum fetch_flags {
    FETCH_WAIT = 1u,          /* another process is copying it: wait for its copy */
    FETCH_KEEP = 2u,          /* a placed copy (migration), not an evictable cache copy */
};

/* Readers of staged tiers for one thread (io_uring rings), made on first
 * use; store_io_close releases them. Zero-initialize. */
struct store_io {
    struct media_reader *r[POOL_MAX_TIERS];
    uint64_t staged_bytes;    /* bytes read_source read with it from staged
                               * tiers, all told (a server's metrics) */
    uint64_t peer_parts;      /* shards store_read_parts read in part from a
                               * peer that had them in memory */
    uint64_t peer_records;    /* the records asked of them */
};
void store_io_close(struct store_io *io);

/* What a copy cost. */
struct copy_stat {
    uint64_t bytes;           /* bytes read into the new copy */
    uint64_t direct_bytes;    /* of them, read with O_DIRECT from a staged tier */
    uint64_t dropped;         /* bytes of copies dropped in the same step */
    int waited;               /* 1: another process made the copy; we waited */
};

/* Makes shard k's copy in memory tier t: reads the fastest other copy
 * (memcpy from a memory tier, io_uring from a staged one), verifies it
 * against the shard's checksum and header, and publishes it, dropping the
 * copies of drop_mask in the same step. 0; CXLP_EEXIST when t already holds
 * one (nothing done; with FETCH_KEEP it is marked kept); CXLP_EBUSY when
 * another process is copying it (without FETCH_WAIT); CXLP_EFULL; CXLP_ECORRUPT
 * when the source does not verify (nothing published). io may be NULL (a
 * reader is made for the call); st may be NULL. Thread-safe. */
int store_copy(cxlp_store *s, uint64_t k, uint32_t t, unsigned flags, uint32_t drop_mask,
               struct store_io *io, struct copy_stat *st);
/* A miss: shard k into the fastest memory tier with room, as a cache copy,
 * waiting for another process's copy when there is one; counts the miss and
 * the wait in the tier's counters. */
int store_fetch(cxlp_store *s, uint64_t k, unsigned flags);
/* Shard k read, checked and verified into private memory (*buf, for
 * free()), described by g: what a batch reads when no memory tier has
 * room for a copy (its columns in cols[0..ncols)). Nothing in the pool
 * changes. */
struct shard;
struct shard_col;
int store_read_private(cxlp_store *s, uint64_t k, struct store_io *io, uint8_t **buf,
                       struct shard *g, struct shard_col *cols);
/* A partial read (shard format 3 or 4): of shard k's home copy on a staged tier,
 * only the blocks that hold records rec[0..n) (shard-local indices, any
 * order, repeats allowed) in any column, with the header page and the
 * variable-size columns' indexes, read with one io_uring call per step
 * (header; indexes; records) into a private sparse mapping the extent's
 * size (*buf, *buf_len bytes, for munmap), each block verified against its
 * sum before anything is read through it; the header page's bytes are read
 * once. g (columns in cols) describes the mapping: read only records rec[]
 * through it. *bytes: bytes read from the tier (also on failure, and the
 * header of a shard found to have no block sums). 0; 1 when the shard
 * cannot be read so (format 1 or 2: no block sums, and after one such
 * shard none of the dataset is tried again; home not a staged tier);
 * CXLP_ECORRUPT naming the block when one does not verify; or an I/O error. */
int store_read_partial(cxlp_store *s, uint64_t k, const uint64_t *rec, size_t n,
                       struct store_io *io, uint8_t **buf, uint64_t *buf_len,
                       struct shard *g, struct shard_col *cols, uint64_t *bytes);
/* A partial read of several shards of one dataset at once, as
 * store_read_partial reads one: each step (headers; indexes; records) of
 * every shard in one io_uring call, so a batch whose records lie in many
 * shards pays three round trips, not three per shard. v[i] names shard k,
 * its records rec[0..n) and where to describe it (g, cols); on 0 buf and
 * buf_len are its mapping (for munmap), on anything else every buf is
 * NULL. *bytes: bytes read from the tier. 0, 1 or an error as
 * store_read_partial. */
struct store_part {
    uint64_t k;
    const uint64_t *rec;
    size_t n;
    struct shard *g;
    struct shard_col *cols;
    uint8_t *buf;
    uint64_t buf_len;
};
int store_read_parts(cxlp_store *s, struct store_part *v, size_t n, struct store_io *io,
                     uint64_t *bytes);
/* The shards v[0..n) read from their home copies into private memory
 * (where no memory tier has room for a copy, or a batch reads in part): in
 * part (store_read_parts) where their format allows, else each whole
 * (store_read_private; *whole says how many, n or 0). v[i].buf_len is the
 * partial read's mapping size, 0 for a whole read; free each with
 * store_home_free. 0, or as those two with every buf NULL. */
int store_read_home(cxlp_store *s, struct store_part *v, size_t n, struct store_io *io,
                    uint64_t *bytes, size_t *whole);
/* Shard k's header page (page: SHARD_DATA_OFF bytes, 4 KiB aligned), read
 * from its fastest copy and checked as a partial read's first step is
 * (shard_open_head: the header, the directory and the sums it holds): g
 * (columns in cols) describes the header's fields only; no record may be
 * read through it. 0 or an error naming the shard. */
int store_read_head(cxlp_store *s, uint64_t k, uint8_t *page, struct shard *g,
                    struct shard_col *cols);
/* Bytes [at, at + len) of shard k, as stored (raw: not verified), from its
 * fastest copy: a memory tier's, else the staged holders cheapest first
 * (the home, a peer's through the remote tier). CXLP_ERANGE for a range
 * outside the shard. */
int store_read_range(cxlp_store *s, uint64_t k, uint64_t at, uint64_t len, uint8_t *dst,
                     struct store_io *io);
/* Frees what store_read_home read (buf NULL: nothing). */
void store_home_free(uint8_t *buf, uint64_t map_len);
/* The writable handle staging uses (opened on first use; owned by s). */
int store_pool_rw(cxlp_store *s, cxlp_pool **out);

/* What fetch.c shares with unit.c (the store layer only). */
/* Drops one cache copy of another dataset in tier t (a miss that found
 * the tier full): 1 when it dropped one. */
int store_room_from_others(cxlp_store *s, uint32_t t);
/* 0 when tier u's word for shard k, at off, holds len bytes inside the
 * tier; else CXLP_ECORRUPT naming them. */
int store_word_in_tier(const cxlp_store *s, uint64_t k, uint32_t u, uint64_t off, uint64_t len);
/* Why a read of staged tier u failed with rc, for a message: the remote
 * tier's reader said it (which peers, which shard) in the thread's message,
 * copied to buf; else cxlp_strerror(rc). */
const char *store_read_why(const cxlp_store *s, uint32_t u, int rc, char *buf, size_t cap);
/* io's reader of staged tier u, opened on first use (k names the shard in
 * messages). */
struct media_reader;
int store_tier_reader(const cxlp_store *s, uint64_t k, uint32_t u, struct store_io *io,
                      struct media_reader **r);
/* Waits for another process's copy of shard k (or unit: POOL_UNIT_TARGET |
 * u, of want bytes) in tier t: 0 once its word is there, -EAGAIN when the
 * claim went without a copy (try again), CXLP_EBUSY after 300 s. */
int store_wait_copy(cxlp_store *s, cxlp_pool *wp, uint64_t k, uint32_t t, uint64_t want);
/* The store's kept pages of home copies read in part: page p of shard k
 * (0 its header page, i + 1 page i of its sums area) read at home word w.
 * store_kept_page copies it to dst (4 KiB) if kept: 1, else 0;
 * store_keep_page keeps a checked one. */
int store_kept_page(cxlp_store *s, uint64_t k, uint64_t p, uint64_t w, uint8_t *dst);
void store_keep_page(cxlp_store *s, uint64_t k, uint64_t p, uint64_t w, const uint8_t *src);

#endif
