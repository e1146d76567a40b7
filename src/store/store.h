/*
 * store.h - the store layer's private interface: schema checks shared by the
 * writer and the reader, and what importers may use beyond the public writer
 * API.
 */
#ifndef CXLP_STORE_H
#define CXLP_STORE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "common/atomic.h"
#include "common/common.h"
#include "common/fastdiv.h"
#include "common/flush.h"
#include "pool/loc.h"
#include "pool/pool.h"
#include "sample/feistel.h"
#include "store/shard.h"

struct store_io;
struct head_page;
struct rt_idle;

/* An open dataset (reader.c): immutable after open except where noted. */
struct cxlp_store {
    struct obj obj;
    struct attach *a;
    uint64_t gen;             /* catalog generation pinned for the lifetime */
    struct pool_dataset ds;
    uint64_t count;
    uint64_t n_shards;
    uint64_t per_shard;       /* nonzero: shard = idx / per_shard */
    struct fastdiv per_div;   /* that division, by multiplication */
    uint64_t *first;          /* first record of each shard */
    struct shard *shards;     /* validated geometry (tiered: once ready[k]) */
    struct shard_col *cols;   /* n_shards * ncols, shard-major */
    uint32_t ncols;           /* columns per shard: n_fields, or 1 (format 1) */
    int rows;                 /* format 1 with several fields: fields inside the record */
    uint32_t version;         /* shard format of the first shard validated; 0 none yet */
    uint32_t no_bsums;        /* a partial read found a shard without block sums
                               * (format 1 or 2): the next ones read whole */
    struct pool_shard *loc;   /* the shard table, private copy */
    const int64_t *docs;      /* NULL when absent */
    const char *name;         /* ds.info.name */
    struct pool_ingest ingest; /* how it was ingested (flags 0: plainly) */
    struct feistel shuf;      /* INGEST_SHUFFLED: record k is input record shuf(k) */
    /* tiered pools */
    int tiered;               /* more than one tier: shards move */
    int unpinned;             /* tiered, and the attachment holds no lease (a
                               * process that may not write the pool): its
                               * pins protect nothing, so no memory copy is
                               * read (one freed and reused meanwhile would
                               * give another shard's bytes); records come
                               * from the home copy, every block verified */
    const uint64_t *states;   /* shard k's words at states[k * stride] */
    uint32_t stride;
    int remote;               /* the remote tier holding a mirrored dataset
                               * (store/remote_tier.c), its home; -1 none */
    struct rt_idle *rt_idle;  /* its idle connections to peers, under rt_mu:
                               * a reader takes one and gives it back */
    int rt_peer;              /* the peer that answered last (under rt_mu) */
    struct rt_held *rt_held;  /* per peer: the shards it has in memory
                               * (remote_tier.c), under rt_held_mu */
    pthread_mutex_t rt_held_mu;
    int local_only;           /* reads no remote tier: a server's store, so
                               * that a peer's read never chains to a third
                               * host (net/server.c) */
    uint64_t tier_bw[POOL_MAX_TIERS]; /* bytes/s its reads of each staged
                               * tier moved (fetch.c: a moving average) */
    uint64_t tier_down[POOL_MAX_TIERS]; /* monotonic ns until which a staged
                               * tier whose read failed is tried last */
    pthread_mutex_t rt_mu;
    uint32_t n_mem;           /* memory tiers (read in place), fastest first */
    uint32_t mem[POOL_MAX_TIERS];
    uint8_t *ready;           /* per shard, atomic: shards[k] is valid */
    pthread_mutex_t mu;       /* validating geometry; the lifetime pin */
    int mu_init;
    int life_pinned;          /* cxlp_store_read views: epoch pinned until close */
    uint64_t life_pin;
    cxlp_pool *wp;            /* writable handle for copies (fetch.c), under mu */
    struct store_io *home_io; /* readers of staged tiers for reads of records
                               * from their home copies (read_copy_home),
                               * under home_mu; made on first use */
    pthread_mutex_t home_mu;
    struct head_page *heads;  /* verified header pages of home copies read in
                               * part (fetch.c), n_heads of them by shard,
                               * under heads_mu; made on first use */
    uint32_t n_heads;
    struct head_page *sums;   /* verified pages of sums areas (format 4)
                               * read in part, n_sums of them by shard and
                               * page, under heads_mu; made on first use */
    uint32_t n_sums;
    pthread_mutex_t heads_mu; /* not home_mu: a home read holds that one */
    int nc;                   /* non-coherent pool: invalidate before reading */
    struct store_units *units; /* its staging units (unit.c), once known: set
                               * once under mu, read with acquire; NULL: none
                               * known (the stage unit is the shard) */
};

/* Shard k's location word in tier t, its line invalidated first on a
 * non-coherent pool; pairs with the release stores of pool/place.c. */
static inline uint64_t store_word(const cxlp_store *s, uint64_t k, uint32_t t)
{
    const uint64_t *w = &s->states[k * s->stride + 1 + t];
    if (s->nc)
        cache_invalidate(w, sizeof *w);
    return at_load_acquire(w);
}

/* 1 when a memory tier (read in place) has a copy of shard k whole; a
 * pool of one tier is memory. */
static inline int store_in_memory(const cxlp_store *s, uint64_t k)
{
    if (!s->tiered)
        return 1;
    for (uint32_t i = 0; i < s->n_mem; i++)
        if (loc_present(store_word(s, k, s->mem[i])))
            return 1;
    return 0;
}

/* A dataset's staging units as a store knows them (unit.c): the pool's
 * record and, per shard, its first unit. */
struct store_units {
    struct pool_units pu;
    uint64_t *ufirst;          /* n_shards + 1 entries; ufirst[n_shards] = n_units */
    struct fastdiv per_div;    /* division by pu.per_unit */
};

/* Unit u's location word in tier t (u < n_units of s->units), as store_word. */
static inline uint64_t store_unit_word(const cxlp_store *s, uint64_t u, uint32_t t)
{
    const struct store_units *su = at_load_acquire(&s->units);
    const uint64_t *w = &su->pu.words[u * su->pu.stride + 1 + t];
    if (s->nc)
        cache_invalidate(w, sizeof *w);
    return at_load_acquire(w);
}

/* Checks a copy of shard k at base against the shard table and the schema
 * and fills g with its columns in cols[0..ncols) (pointers into that
 * copy); where names it in messages. With settle, the first shard checked
 * fixes the dataset's shard format (s->version, s->rows): callers with
 * settle serialize (open, or under mu); without, a shard is compared with
 * the format once it is fixed. */
int store_shard_check(cxlp_store *s, uint64_t k, const uint8_t *base, struct shard *g,
                      struct shard_col *cols, int settle, const char *where);

/* store_shard_check from shard k's header page alone (4 KiB at page):
 * the header checksum, the directory and its bounds, the sums the page
 * holds, against the shard table's records, bytes and digest and the
 * schema; no index entry is read, so *g (columns in cols) may serve only
 * reads that check every index entry they load (the read path does). */
int store_head_check(cxlp_store *s, uint64_t k, const uint8_t *page, struct shard *g,
                     struct shard_col *cols, int settle, const char *where);

/* Shard of record idx (< count). */
static inline uint64_t store_shard_of(const cxlp_store *s, uint64_t idx)
{
    if (s->per_shard)
        return fastdiv(idx, s->per_div);
    uint64_t lo = 0, hi = s->n_shards; /* first[lo] <= idx < first[hi] (first[n] = count) */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (s->first[mid] <= idx)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* Tiered pools: where shard k can be read now. With a copy in a memory
 * tier, fills *sh (its columns in cols[0..ncols)) with the shard rebased
 * onto it and returns 0 with its tier in *tier; CXLP_ENOTFOUND when no
 * memory tier holds one; CXLP_ECORRUPT for a word or header that does not
 * check out (message in cxlp_errmsg(NULL)). The caller holds a location
 * epoch pin for as long as it uses *sh. */
int store_locate(const cxlp_store *s, uint64_t k, struct shard *sh, struct shard_col *cols,
                 uint32_t *tier);
/* Shard k's copy in tier t at off, checked against the shard table and the
 * schema into *g (its columns in cols[0..ncols), pointers into the copy)
 * and, with verify, verified whole: every column's checksum, the pages of
 * a sums area, every block sum. base is where a memory tier maps the copy;
 * NULL for a staged tier's, which is read whole into buf (4 KiB aligned,
 * room for ALIGN_UP(store_max_shard(s), 4096)) through io's reader of
 * tier t, opened on first use. A pool of tiers: the caller holds an epoch
 * pin while it uses *g. 0, or the error with a message naming the shard
 * and the copy. */
int store_copy_open(cxlp_store *s, uint64_t k, uint32_t t, uint64_t off, const uint8_t *base,
                    uint8_t *buf, struct store_io *io, int verify, struct shard *g,
                    struct shard_col *cols);
/* A pool of tiers: where shard k's copy in tier t is, its offset in *off
 * and, in a memory tier, its mapping in *base (NULL: a staged tier's, read
 * through a reader). CXLP_ENOTFOUND when tier t holds no copy;
 * CXLP_ECORRUPT (message) when the word names bytes outside the tier. The
 * caller holds an epoch pin while it uses the copy. */
int store_copy_in(const cxlp_store *s, uint64_t k, uint32_t t, uint64_t *off,
                  const uint8_t **base);
/* Bytes of the dataset's longest shard. */
uint64_t store_max_shard(const cxlp_store *s);
/* Fields fields[0..n) (NULL: the whole record, n = 1) of record idx, which
 * lies in shard k as sh (a validated or rebased geometry) holds it. */
int store_fields_at(const cxlp_store *s, const struct shard *sh, uint64_t k, uint64_t idx,
                    const uint32_t *fields, uint32_t n, struct cxlp_view *v);
/* A miss on record idx of a tiered dataset: a copy of its staging unit (a
 * dataset with units; made for it when the default budget calls for them)
 * or of its shard in the fastest memory tier with room, as store_fetch. */
int store_fetch_record(cxlp_store *s, uint64_t idx);
/* cxlp_store_read (fields NULL, n = 1) or store_read_fields for a caller
 * that holds an epoch pin (any pool): from a whole copy of the record's
 * shard in a memory tier, else from a copy of its staging unit. */
int store_read_pinned(const cxlp_store *s, uint64_t idx, const uint32_t *fields, uint32_t n,
                      struct cxlp_view *v);

/* Checks a dataset name: 1..63 bytes, printable ASCII, no '/'. 0 or
 * CXLP_EARG with a message in err. */
int store_name_check(const char *name, char *err, size_t errlen);

/* Checks schema in and writes its normalized form to out: fixed-size field
 * offsets and record_size filled in where the caller left them 0; nonzero
 * values that disagree with the back-to-back layout are refused. 0 or
 * CXLP_EARG naming the field. in == out is allowed. */
int schema_normalize(const struct cxlp_schema *in, struct cxlp_schema *out,
                     char *err, size_t errlen);

/* Bytes of one element of a variable-size record (the schema's one field),
 * or record_size for fixed. */
uint64_t schema_unit(const struct cxlp_schema *s);

/* Bytes per record of a fixed-shape field of a normalized schema; 0 for a
 * variable-length one. */
uint64_t schema_field_size(const struct cxlp_field *f);

/* Offset of the first byte of p[0..len) that is not valid UTF-8, or len. */
uint64_t utf8_check(const uint8_t *p, uint64_t len);

/* Fields fields[0..n) of record idx in one lookup of its shard (the gather
 * engine reads several fields of each record). Thread-safe; as
 * cxlp_store_read_field, with field numbers trusted (checked by the
 * caller). */
int store_read_fields(const cxlp_store *s, uint64_t idx, const uint32_t *fields, uint32_t n,
                      struct cxlp_view *v);

/* Fixed-size records: bytes that cxlp_writer_direct can hand out without
 * closing the current shard early (a multiple of record_size; 0 when the
 * writer failed). Importers size their read()s by it so that shards stay
 * equal and the reader finds a record's shard by one division. */
uint64_t writer_room(const cxlp_writer *w);

/* reader.c: 0 while the store's pool mapping and lease are intact, else
 * attach_lost's code and message (thread's message). For the gather
 * engine, after a batch during which read_alarm moved. */
int store_check(const void *store);

/* Variable-size records without a bounce buffer (e.g. a run of Megatron
 * sequences, contiguous in the .bin, read() straight into the pool):
 * writer_direct_var returns room for n records totalling bytes at *dst;
 * writer_commit_var(lens, n) then makes the first n (<= the announced n)
 * records of lens[i] bytes each out of what was written there (sum(lens) <=
 * bytes). A run larger than a shard gets a shard of its own size, so callers
 * keep runs near the ~1-4 MiB they read at once. CXLP_EARG on misuse. */
int writer_direct_var(cxlp_writer *w, uint64_t bytes, uint64_t n, void **dst);
int writer_commit_var(cxlp_writer *w, const uint64_t *lens, uint64_t n);
/* Announces the record count of a one-field variable-size dataset whose
 * bytes were announced (expected_bytes): the last shard's extent is then
 * sized for what is left (bytes and index) instead of a whole shard_bytes.
 * A hint: a wrong one costs space or one more shard, never correctness. */
void writer_expect_records(cxlp_writer *w, uint64_t n);
/* Records with the dataset, at commit, that its records were shuffled with
 * seed (pool_publish_ingest: record k is input record P(k)). */
void writer_set_shuffle(cxlp_writer *w, uint64_t seed);
/* The permutation P of a shuffled ingest of n records with seed: record k
 * of the dataset is input record feistel_apply(f, k) (pool_format.h, struct
 * cat_ingest; a stored format: never change it). */
void ingest_perm(struct feistel *f, uint64_t n, uint64_t seed);

/* cxlp_writer_begin for a dataset that replaces the published one of the
 * same name whose info.version is replaces (0: a new name, as
 * cxlp_writer_begin): the commit publishes it in that dataset's place in
 * one flip (pool_publish_over). The begin finds it or fails. */
int writer_begin_over(cxlp_pool *p, const char *name, const struct cxlp_schema *schema,
                      const struct cxlp_writer_opts *opts, uint64_t replaces, cxlp_writer **out);

/* Fields fields[0..nf) of records ids[0..n), record i's field j into
 * out[i * nf + j] (what store_read_fields gives for each, without a call
 * per record where the layout allows: fixed-shape fields in equal shards).
 * 0, or the first failure's code with *bad its index in ids and the message
 * in cxlp_errmsg(NULL). Field numbers trusted, as store_read_fields.
 * Thread-safe. */
int store_resolve(const cxlp_store *s, const uint64_t *ids, size_t n, const uint32_t *fields,
                  uint32_t nf, struct cxlp_view *out, size_t *bad);
/* NUMA node the dataset's memory is bound to (numa pools; a tiered
 * dataset: its fastest memory tier's), else -1. */
int store_numa_node(const cxlp_store *s);

#endif
