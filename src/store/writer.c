/*
 * writer.c - the streaming ingest: records go straight into reserved pool
 * extents, shards are sealed as they fill, and the dataset appears to
 * readers in one catalog flip at commit.
 *
 * Space. The writer holds reservations (pool_reserve_many) and carves
 * shards out of them back to back, each shard at a 4 KiB aligned offset:
 *   reservation = [shard][shard]...[docs?][unused tail]
 * When the caller gives expected_bytes of fixed-size records, the whole
 * dataset is reserved at begin, sized exactly: one extent if a hole holds
 * it, else one extent per shard in one transaction, else CXLP_EFULL before
 * any data is read. Otherwise shards are reserved in batches of one shard
 * extent each (spares), the batch doubling up to SPARE_MAX, so N shards
 * cost O(log N + N / SPARE_MAX) catalog transactions, not N (issue 12
 * item 8); with expected_bytes of variable-size records, a batch holds no
 * more than the whole shards still to come, and the last shard's extent
 * only what is left when the record count is announced too
 * (writer_expect_records): reserved extents are backed at once, on 2 MiB
 * pages zeroed, so spares never used cost as much as written ones. Unused tails go back to free space at publish, unused spares in
 * one transaction; everything goes back at abort. A killed writer's
 * reservations are reclaimed by the pool (they name their owner).
 *
 * Invariants (s = the open shard, r = the last reservation):
 *   s.off + s.cap <= r.off + r.len
 *   s.len <= s.data_cap  (s.len: bytes of the primary column)
 *   layout_need(columns so far, s.n) <= s.cap
 *   s.hashed <= s.len: primary data [0, hashed) is in the running XXH3
 *   state; a staged column is hashed as each piece lands in its buffer
 *   n_records == sum of sealed shards' n_records + s.n
 * Fixed-size shards hold per_shard = max(1, shard_bytes / record_size)
 * records each, so all but the last have the same count and the reader maps
 * a record to its shard by one division.
 *
 * Columns. Each schema field is a column of the shard (shard.h). One
 * column, the primary, is written in place from SHARD_DATA_OFF up, exactly
 * as a one-field dataset always was; the others collect in private staging
 * buffers (at most one shard's worth) and are copied after the primary when
 * the shard is sealed. The primary of each new shard is the field with the
 * most bytes so far (first shard: the first variable-length field, else the
 * largest), so the second copy falls on the small columns: labels next to
 * tokens cost a few bytes per record, not a second pass over the tokens.
 * A shard is full when its columns and their index bounds would pass the
 * extent (fixed-size records: at per_shard records, as below).
 *
 * Copies. append() copies each record once, from the caller into pool
 * memory (other columns: twice, see Columns); direct()/commit_direct() let
 * an importer read() into pool memory with no copy at all (one field). Data is hashed in chunks of HASH_CHUNK right after it
 * lands (still in cache), never re-read from memory at seal; a direct chunk
 * is hashed at its commit_direct, so importers that read 256 KiB..1 MiB at a
 * time hash from L2 (with 4 MiB chunks the hash's CPU time doubles).
 * The shard's block sums (version 4) are taken in the same step, over the
 * same bytes, at the block size the shard's extent implies (shard_bsums):
 * a full shard ends with that block size, so sealing hashes only what it
 * writes itself (staged columns, indexes). A shard that ends short of the
 * size at which its extent's block size was needed gets smaller blocks
 * than were hashed (XXH3 sums do not combine), so sealing hashes it once
 * more: mostly a dataset's last shard.
 * Hashing at the smallest block size always and combining is not possible
 * for the same reason; fixing the block size from the extent for good
 * would give a small last shard coarse blocks, which cost partial reads.
 * (Blocks are 4 KiB up to extents of 976 MiB, so this is rare.) A shard
 * whose sums do not fit its header page (past about 1.9 MiB) keeps them in
 * a sums area after its indexes: each extent sets its size aside
 * (shard_room), so records never take the sums' room.
 *
 * Alternatives rejected: staging records in private memory and copying whole
 * shards (a second copy of every byte); one reservation of a guessed size
 * when the size is unknown (either too small or holding the pool hostage);
 * hashing at seal (re-reads 256 MiB that has left the cache);
 * madvise(MADV_POPULATE_WRITE) of each new shard to save the per-page write
 * faults (measured: more system time than the faults it replaces).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>
#ifdef CXLP_HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h> /* XXH3 at the CPU's widest vectors: same sums */
#endif

#include "pool/pool.h"
#include "pool/pool_format.h"
#include "store/shard.h"
#include "store/store.h"

#define DEFAULT_SHARD_BYTES (UINT64_C(256) << 20)
#define SHARD_ALIGN 4096u
#define HASH_CHUNK (UINT64_C(256) << 10)
#define HASH_PIECE (UINT64_C(16) << 10) /* hash_upto's step: fits L1 */
#define PROGRESS_STEP (UINT64_C(4) << 20)
/* Most shard extents reserved ahead in one batch (see Space above). */
#define SPARE_MAX 64u

struct resv {
    struct pool_extent ext;
    uint64_t used;            /* bytes from ext.off taken by shards/docs */
    int where;                /* the ingest tier, or POOL_META (docs) */
};

/* A column of the open shard other than the primary. */
struct stage {
    uint8_t *buf;
    uint64_t len, cap;
    uint64_t *starts;         /* var: start of each record in buf */
    uint64_t cap_starts;
    XXH3_state_t *hash;       /* absorbed buf[0, len) */
};

struct cxlp_writer {
    struct obj obj;
    cxlp_pool *p;
    int tier;                 /* the ingest tier: where shards (and spares) go */
    uint8_t *base;            /* its writable mapping */
    char name[CXLP_NAME_MAX];
    struct cxlp_schema schema;
    uint64_t unit;            /* record_size (fixed) or element size (var) */
    uint32_t nf;              /* fields (columns) */
    uint64_t fsize[CXLP_MAX_FIELDS];  /* fixed-shape field: bytes per record; var: 0 */
    uint64_t felem[CXLP_MAX_FIELDS];  /* element size */
    uint64_t fbytes[CXLP_MAX_FIELDS]; /* bytes written per field, all shards */
    uint32_t prim;            /* the open shard's primary column */
    struct stage stage[CXLP_MAX_FIELDS]; /* the other columns (stage[prim] unused) */
    int huge;                 /* reservations on 2 MiB pages where the media allows */
    uint64_t shard_bytes;
    uint64_t expected;
    uint64_t expected_records; /* writer_expect_records; 0: unknown */
    void (*progress)(void *ctx, uint64_t done, uint64_t total);
    void *progress_ctx;
    uint64_t progress_last;
    int failed;               /* first fatal error; later calls return it */
    int fault_done;
    uint64_t replaces;        /* writer_begin_over: the version the commit replaces */
    struct pool_ingest ingest; /* writer_set_shuffle; flags 0: none */

    struct resv *res;
    size_t n_res, cap_res;
    struct pool_extent *spare; /* reserved, not yet carved; used from spare_next */
    size_t n_spare, spare_next, cap_spare;
    uint64_t batch;           /* shard extents the next batch reserves */

    struct pool_shard *shards;  /* sealed */
    size_t n_shards, cap_shards;

    /* the open shard */
    int open;
    uint64_t s_off, s_cap, s_len, s_n, s_hashed;
    uint64_t s_room;          /* of s_cap, what data and indexes may fill (shard_room) */
    uint64_t s_data_cap;      /* fixed: per_shard * field size; var: s_room - SHARD_DATA_OFF */
    uint64_t s_rec_cap;       /* fixed: records this shard takes; var: UINT64_MAX */
    uint64_t *starts;         /* primary var column: data offset of each record */
    uint64_t cap_starts;
    XXH3_state_t *hash;
    struct shard_bsums bsums; /* block sums of [SHARD_DATA_OFF, + s_hashed) */
    uint64_t direct_len;      /* bytes handed out by direct(), not committed */
    uint64_t direct_n;        /* var: records announced to writer_direct_var */

    uint64_t n_records, data_bytes;
    int64_t *docs;
    uint64_t n_docs;
};

static int fail(cxlp_writer *w, int rc)
{
    if (!w->failed)
        w->failed = rc;
    return rc;
}

/* Pool failures: keep the pool's words, prefixed with the dataset. */
static int pool_fail(cxlp_writer *w, int rc, const char *what)
{
    seterr(&w->obj, rc, "dataset %s: %s: %s", w->name, what, cxlp_errmsg(pool_obj(w->p)));
    return fail(w, rc);
}

static uint64_t per_shard_records(const cxlp_writer *w)
{
    uint64_t n = w->shard_bytes / w->unit;
    return n ? n : 1;
}

/* Extent bytes a shard whose data and indexes end at end takes: with the
 * sums area it may need, rounded to the carve alignment. */
static uint64_t extent_for(const cxlp_writer *w, uint64_t end)
{
    return ALIGN_UP(shard_cap_for(end, w->nf), SHARD_ALIGN);
}

/* Extent bytes a fixed-size shard of n records takes (every column at its
 * 64-byte aligned start). One field: the header page and n * record_size. */
static uint64_t fixed_shard_extent(const cxlp_writer *w, uint64_t n)
{
    uint64_t end = SHARD_DATA_OFF;
    for (uint32_t k = 0; k < w->nf; k++)
        end = ALIGN_UP(end, SHARD_COL_ALIGN) + n * w->fsize[k];
    return extent_for(w, end);
}

/* Bytes the shard's columns take with add[k] more bytes in column k and n
 * records in all, the index deltas sized for a data area of wcap: the
 * primary from SHARD_DATA_OFF, the others each at a 64-byte aligned offset
 * after it, then the index of each variable-length column. fresh: an empty
 * shard whose primary is not chosen yet (an upper bound for any choice). */
static uint64_t layout_need(const cxlp_writer *w, int fresh, const uint64_t *add, uint64_t n,
                            uint64_t wcap)
{
    uint64_t end = SHARD_DATA_OFF;
    if (fresh) {
        for (uint32_t k = 0; k < w->nf; k++)
            end += ALIGN_UP(add[k], SHARD_COL_ALIGN);
    } else {
        end += w->s_len + add[w->prim];
        for (uint32_t k = 0; k < w->nf; k++)
            if (k != w->prim)
                end = ALIGN_UP(end, SHARD_COL_ALIGN) + w->stage[k].len + add[k];
    }
    end = ALIGN_UP(end, 8);
    for (uint32_t k = 0; k < w->nf; k++)
        if (!w->fsize[k])
            end += ALIGN_UP(shard_index_bound(n, wcap), 8);
    return end;
}

/* Room for need entries of elsz bytes in *arrp (capacity *cap, doubling). */
static int grow(cxlp_writer *w, void *arrp, size_t *cap, size_t need, size_t elsz)
{
    void **arr = arrp;
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? 2 * *cap : 16;
    while (nc < need)
        nc *= 2;
    void *p = realloc(*arr, nc * elsz);
    if (!p)
        return fail(w, seterr(&w->obj, -ENOMEM, "dataset %s: out of memory", w->name));
    *arr = p;
    *cap = nc;
    return 0;
}

/* The column written in place: the one with the most bytes so far; before
 * any, the first variable-length field, else the largest. */
static uint32_t pick_primary(const cxlp_writer *w)
{
    uint32_t best = 0;
    for (uint32_t k = 1; k < w->nf; k++)
        if (w->fbytes[k] > w->fbytes[best])
            best = k;
    if (w->fbytes[best])
        return best;
    for (uint32_t k = 0; k < w->nf; k++)
        if (!w->fsize[k])
            return k;
    for (uint32_t k = 1; k < w->nf; k++)
        if (w->fsize[k] > w->fsize[best])
            best = k;
    return best;
}

/* Reserves n extents of lens[i] bytes in where's object in one
 * transaction: the first becomes the current reservation unless to_spares,
 * the rest spares (of the ingest tier only). */
static int reserve_batch(cxlp_writer *w, int where, const uint64_t *lens, uint64_t n,
                         int to_spares)
{
    if (grow(w, &w->spare, &w->cap_spare, w->n_spare + n, sizeof *w->spare) ||
        grow(w, &w->res, &w->cap_res, w->n_res + 1, sizeof *w->res))
        return w->failed;
    int rc = pool_reserve_many(w->p, where, lens, n, w->huge, w->spare + w->n_spare);
    if (rc == CXLP_EARG) /* our lengths are nonzero: one exceeds the whole data area */
        rc = CXLP_EFULL;
    if (rc)
        return pool_fail(w, rc, "reserving an extent");
    struct pool_extent *got = w->spare + w->n_spare;
    if (to_spares) {
        w->n_spare += n;
        return 0;
    }
    w->res[w->n_res++] = (struct resv){.ext = got[0], .used = 0, .where = where};
    memmove(got, got + 1, (n - 1) * sizeof *got);
    w->n_spare += n - 1;
    return 0;
}

static int reserve(cxlp_writer *w, int where, uint64_t len)
{
    return reserve_batch(w, where, &len, 1, 0);
}

/* Makes the next spare of at least need bytes the current reservation;
 * spares too small for this shard stay for later ones. 0 when none. */
static int take_spare(cxlp_writer *w, uint64_t need)
{
    for (size_t i = w->spare_next; i < w->n_spare; i++) {
        if (w->spare[i].len < need)
            continue;
        if (grow(w, &w->res, &w->cap_res, w->n_res + 1, sizeof *w->res))
            return 0;
        struct pool_extent e = w->spare[i];
        w->spare[i] = w->spare[w->spare_next];
        w->spare[w->spare_next++] = e;
        w->res[w->n_res++] = (struct resv){.ext = e, .used = 0, .where = w->tier};
        return 1;
    }
    return 0;
}

/* Shard extents still to come when the dataset's size is announced; 0 when
 * unknown (or when more than announced was written). Variable-size records:
 * the whole shard_bytes in the announced bytes not yet written, at least 1:
 * the remainder gets an extent of its own size later (var_want), and a
 * shard that ends short of shard_bytes (a run that did not fit) only means
 * one more open_shard. Without this bound the doubling batches reserved,
 * backed and (on 2 MiB pages) zeroed up to twice the dataset: a 1 GiB
 * Megatron ingest into a large pool held 7 shard extents of 256 MiB for the
 * 4 full ones and one of 1 MiB. */
static uint64_t shards_to_come(const cxlp_writer *w)
{
    if (!w->expected)
        return 0;
    if (!w->schema.fixed) {
        if (w->expected <= w->data_bytes)
            return 0;
        return MAX((w->expected - w->data_bytes) / w->shard_bytes, 1);
    }
    uint64_t total = w->expected / w->unit, per = per_shard_records(w);
    uint64_t left = total > w->n_records ? total - w->n_records : 0;
    return left / per + (left % per != 0);
}

/* Opens a new shard able to take at least need extent bytes (want when
 * possible), in the current reservation if it has room, else in a spare,
 * else in a new batch of reservations. */
static int open_shard(cxlp_writer *w, uint64_t need, uint64_t want)
{
    struct resv *r = w->n_res ? &w->res[w->n_res - 1] : NULL;
    uint64_t room = 0, at = 0;
    if (r) {
        at = ALIGN_UP(r->used, SHARD_ALIGN);
        room = at < r->ext.len ? r->ext.len - at : 0;
    }
    if (room < need && !take_spare(w, need)) {
        if (w->failed)
            return w->failed;
        /* a batch of whole shards if the pool has them, else smaller pieces
         * down to what the next record needs: a pool smaller than
         * shard_bytes still takes datasets that fit */
        uint64_t len = MAX(need, want), k = MAX(w->batch, 1), left = shards_to_come(w);
        if (left)
            k = MIN(k, left);
        /* a run larger than a shard gets one extent of its size: a batch
         * of such extents would hold the whole shards to come at the size
         * of one rare run (a Megatron import of runs up to 1.4 MB in
         * 256 KiB shards filled a 256 MiB pool with 56 MB of data) */
        if (need > want)
            k = 1;
        int rc;
        for (;;) {
            uint64_t lens[SPARE_MAX];
            for (uint64_t i = 0; i < k; i++)
                lens[i] = len;
            rc = reserve_batch(w, w->tier, lens, k, 0);
            if (rc != CXLP_EFULL || (len == need && k == 1))
                break;
            w->failed = 0;
            if (k > 1)
                k = 1;
            else
                len = MAX(need, ALIGN_UP(len / 2, SHARD_ALIGN));
        }
        if (rc)
            return rc;
        w->batch = MIN(2 * MAX(w->batch, 1), SPARE_MAX);
    }
    r = &w->res[w->n_res - 1];
    at = ALIGN_UP(r->used, SHARD_ALIGN);
    room = at < r->ext.len ? r->ext.len - at : 0;
    w->open = 1;
    w->s_off = r->ext.off + at;
    w->s_cap = MIN(room, MAX(need, want));
    w->s_room = shard_room(w->s_cap, w->nf);
    w->s_len = w->s_n = w->s_hashed = 0;
    r->used = at + w->s_cap; /* provisional; trimmed at seal */
    w->prim = pick_primary(w);
    for (uint32_t k = 0; k < w->nf; k++) {
        w->stage[k].len = 0;
        if (w->stage[k].hash)
            XXH3_64bits_reset(w->stage[k].hash);
    }
    if (w->schema.fixed) {
        /* columns after the first may each start up to 63 bytes late */
        uint64_t slack = w->nf > 1 ? (uint64_t)SHARD_COL_ALIGN * w->nf : 0;
        uint64_t fit = w->s_room > SHARD_DATA_OFF + slack
                       ? (w->s_room - SHARD_DATA_OFF - slack) / w->unit : 0;
        w->s_rec_cap = MIN(fit, per_shard_records(w));
        w->s_data_cap = w->s_rec_cap * w->fsize[w->prim];
    } else {
        w->s_rec_cap = UINT64_MAX;
        w->s_data_cap = w->s_room > SHARD_DATA_OFF ? w->s_room - SHARD_DATA_OFF : 0;
    }
    XXH3_64bits_reset(w->hash);
    if (shard_bsums_begin(&w->bsums, w->bsums.st, w->s_cap, w->nf))
        return fail(w, seterr(&w->obj, -ENOMEM, "dataset %s: out of memory for the block sums "
                              "of a shard of %" PRIu64 " bytes", w->name, w->s_cap));
    return 0;
}

static uint8_t *shard_data(const cxlp_writer *w)
{
    return w->base + w->s_off + SHARD_DATA_OFF;
}

/* The primary's data [s_hashed, end) into its column checksum and the
 * shard's block sums: one piece at a time, so that the block sums read
 * what the column's hash just brought into L1. */
static void hash_upto(cxlp_writer *w, uint64_t end)
{
    while (w->s_hashed < end) {
        uint64_t e = MIN(end, w->s_hashed + HASH_PIECE);
        XXH3_64bits_update(w->hash, shard_data(w) + w->s_hashed, e - w->s_hashed);
        shard_bsums_update(&w->bsums, w->base + w->s_off, SHARD_DATA_OFF + e);
        w->s_hashed = e;
    }
}

static int seal_shard(cxlp_writer *w)
{
    if (!w->open)
        return 0;
    w->open = 0;
    struct resv *r = &w->res[w->n_res - 1];
    if (w->s_n == 0) {
        r->used = w->s_off - r->ext.off; /* give the space back to the carve */
        return 0;
    }
    hash_upto(w, w->s_len);
    /* the primary lies at SHARD_DATA_OFF; the staged columns follow it */
    struct shard_col_in cols[CXLP_MAX_FIELDS];
    uint8_t *sb = w->base + w->s_off;
    uint64_t end = SHARD_DATA_OFF + w->s_len;
    for (uint32_t k = 0; k < w->nf; k++) {
        struct shard_col_in *c = &cols[k];
        c->kind = w->fsize[k] ? SHARD_KIND_FIXED : SHARD_KIND_VAR;
        c->record_size = w->fsize[k];
        if (k == w->prim) {
            *c = (struct shard_col_in){c->kind, c->record_size, SHARD_DATA_OFF, w->s_len,
                                       w->starts, w->hash};
            continue;
        }
        struct stage *st = &w->stage[k];
        uint64_t off = ALIGN_UP(end, SHARD_COL_ALIGN);
        if (off > w->s_cap || st->len > w->s_cap - off)
            return fail(w, seterr(&w->obj, CXLP_EPANIC, "dataset %s: shard %zu: column %u does "
                                  "not fit its extent", w->name, w->n_shards, k));
        memset(sb + end, 0, off - end);
        if (st->len)
            memcpy(sb + off, st->buf, st->len);
        *c = (struct shard_col_in){c->kind, c->record_size, off, st->len, st->starts, st->hash};
        end = off + st->len;
    }
    uint64_t used;
    int rc = shard_seal2_sums(sb, w->s_cap, w->s_n, cols, w->nf, &w->bsums, &used);
    if (rc)
        return fail(w, seterr(&w->obj, CXLP_EPANIC, "dataset %s: shard %zu does not fit its extent "
                              "(%" PRIu64 " records, %" PRIu64 " bytes in %" PRIu64 ")",
                              w->name, w->n_shards, w->s_n, end, w->s_cap));
    rc = pool_sync(w->p, w->tier, w->s_off, used);
    if (rc)
        return pool_fail(w, rc, "syncing a shard");
    /* what the pool's shard table keeps of it: copies are checked by it */
    struct shard sealed;
    struct shard_col scols[SHARD_MAX_COLS];
    char err[ERRMSG_MAX];
    uint64_t digest_len, digest;
    if (shard_open(&sealed, scols, SHARD_MAX_COLS, w->base + w->s_off, used, err, sizeof err))
        return fail(w, seterr(&w->obj, CXLP_EPANIC, "dataset %s: shard %zu just sealed does "
                              "not open: %s", w->name, w->n_shards, err));
    shard_digest(&sealed, &digest_len, &digest);
    if (w->n_shards == w->cap_shards) {
        size_t nc = w->cap_shards ? 2 * w->cap_shards : 16;
        struct pool_shard *s = realloc(w->shards, nc * sizeof *s);
        if (!s)
            return fail(w, seterr(&w->obj, -ENOMEM, "dataset %s: out of memory", w->name));
        w->shards = s;
        w->cap_shards = nc;
    }
    w->shards[w->n_shards++] = (struct pool_shard){
        .off = w->s_off, .len = used, .first_record = w->n_records - w->s_n,
        .n_records = w->s_n, .data_len = digest_len, .checksum = digest,
    };
    r->used = w->s_off - r->ext.off + used;
    return 0;
}

static void mid_shard_fault(cxlp_writer *w)
{
    /* a kill here leaves a reservation with sealed shards and a half-written
     * one: what the crash tests must see reclaimed */
    if (!w->fault_done && (w->n_shards > 0 || w->s_len * 2 >= w->s_data_cap)) {
        w->fault_done = 1;
        fault_point("writer-mid-shard");
    }
}

/* Accounts n records of bytes just placed in the open shard (its s_len and
 * s_n already moved): dataset totals, the running checksum (now, or once a
 * HASH_CHUNK is pending), and the crash tests' mid-shard fault point. */
static void written(cxlp_writer *w, uint64_t n, uint64_t bytes, int hash_now)
{
    w->n_records += n;
    w->data_bytes += bytes;
    if (hash_now || w->s_len - w->s_hashed >= HASH_CHUNK)
        hash_upto(w, w->s_len);
    mid_shard_fault(w);
}

static void progress(cxlp_writer *w, int force)
{
    if (w->progress && (force || w->data_bytes - w->progress_last >= PROGRESS_STEP)) {
        w->progress_last = w->data_bytes;
        w->progress(w->progress_ctx, w->data_bytes, w->expected);
    }
}

static int check_usable(cxlp_writer *w)
{
    if (!w || w->obj.magic != OBJ_MAGIC)
        return seterr(NULL, CXLP_EARG, "writer handle is NULL or invalid");
    if (w->failed)
        return seterr(&w->obj, w->failed, "dataset %s: writer failed earlier: %s", w->name,
                      cxlp_strerror(w->failed));
    return 0;
}

int cxlp_writer_begin(cxlp_pool *p, const char *name, const struct cxlp_schema *schema,
                      const struct cxlp_writer_opts *opts, cxlp_writer **out)
{
    return writer_begin_over(p, name, schema, opts, 0, out);
}

int writer_begin_over(cxlp_pool *p, const char *name, const struct cxlp_schema *schema,
                      const struct cxlp_writer_opts *opts, uint64_t replaces, cxlp_writer **out)
{
    char err[ERRMSG_MAX];
    struct cxlp_schema norm;
    if (!p || !out)
        return seterr(NULL, CXLP_EARG, "writer_begin: %s is NULL", p ? "out" : "pool");
    int rc = store_name_check(name, err, sizeof err);
    if (rc)
        return seterr(pool_obj(p), rc, "%s", err);
    rc = schema_normalize(schema, &norm, err, sizeof err);
    if (rc)
        return seterr(pool_obj(p), rc, "dataset %s: %s", name, err);
    if (!pool_writable(p) || !pool_base_rw(p, pool_ingest_tier(p)))
        return seterr(pool_obj(p), CXLP_EREADONLY, "dataset %s: pool handle is read-only", name);

    struct pool_dataset ds;
    struct pool_shard *sh = NULL;
    struct attach *a = NULL;
    uint64_t gen;
    rc = pool_lookup(p, name, &ds, &sh, &a, &gen);
    if (rc == 0) {
        free(sh);
        attach_unpin(a, gen);
        attach_unref(a);
        if (!replaces)
            return seterr(pool_obj(p), CXLP_EEXIST, "dataset %s already exists", name);
    } else if (rc != CXLP_ENOTFOUND || replaces) {
        return rc;
    }
    rc = 0;

    cxlp_writer *w = calloc(1, sizeof *w);
    if (!w)
        return seterr(pool_obj(p), -ENOMEM, "dataset %s: out of memory", name);
    obj_init(&w->obj);
    w->p = p;
    w->tier = pool_ingest_tier(p);
    w->base = pool_base_rw(p, w->tier);
    strlcpy0(w->name, name, sizeof w->name);
    w->replaces = replaces;
    w->schema = norm;
    w->unit = schema_unit(&norm);
    w->nf = norm.n_fields;
    for (uint32_t k = 0; k < w->nf; k++) {
        w->fsize[k] = schema_field_size(&norm.fields[k]);
        w->felem[k] = (uint64_t)cxlp_dtype_size(norm.fields[k].dtype);
    }
    w->shard_bytes = opts && opts->shard_bytes ? opts->shard_bytes : DEFAULT_SHARD_BYTES;
    w->huge = !(opts && opts->no_hugepages);
    w->expected = opts ? opts->expected_bytes : 0;
    w->progress = opts ? opts->progress : NULL;
    w->progress_ctx = opts ? opts->progress_ctx : NULL;
    w->hash = XXH3_createState();
    w->bsums.st = XXH3_createState();
    int nomem = !w->hash || !w->bsums.st;
    for (uint32_t k = 0; k < w->nf && w->nf > 1; k++)
        nomem |= !(w->stage[k].hash = XXH3_createState());
    if (nomem) {
        cxlp_writer_abort(w);
        return seterr(pool_obj(p), -ENOMEM, "dataset %s: out of memory", name);
    }
    if (w->shard_bytes > UINT64_MAX / 4 || w->expected > UINT64_MAX / 4) {
        cxlp_writer_abort(w);
        return seterr(pool_obj(p), CXLP_EARG, "dataset %s: shard_bytes or expected_bytes too large", name);
    }

    /* Reserve now, so a pool too small fails before any data is read: in
     * one extent when a hole holds the dataset, else one extent per shard,
     * all in one transaction; when that fails too, the dataset does not fit
     * (issue 12 item 8: fail at once, not after filling the pool). */
    if (norm.fixed && w->expected) {
        uint64_t n = w->expected / w->unit + (w->expected % w->unit != 0);
        uint64_t per = per_shard_records(w);
        uint64_t full = n / per, last = n % per;
        uint64_t total = full * fixed_shard_extent(w, per);
        if (last)
            total += fixed_shard_extent(w, last);
        if (n == 0)
            total = fixed_shard_extent(w, 0);
        rc = reserve(w, w->tier, total);
        if (rc == CXLP_EFULL && n > per) {
            w->failed = 0;
            uint64_t k = full + (last != 0);
            uint64_t *lens = malloc(k * sizeof *lens);
            if (!lens) {
                rc = fail(w, seterr(&w->obj, -ENOMEM, "dataset %s: out of memory", name));
            } else {
                for (uint64_t i = 0; i < k; i++)
                    lens[i] = fixed_shard_extent(w, i < full ? per : last);
                rc = reserve_batch(w, w->tier, lens, k, 1);
                free(lens);
            }
        }
    }
    /* Variable-size records with announced bytes: the first shard opens
     * at the first append, after writer_expect_records can size it (a
     * dataset smaller than one shard then reserves what it needs). */
    if (!rc && (norm.fixed || !w->expected)) {
        uint64_t want = norm.fixed ? fixed_shard_extent(w, per_shard_records(w))
                                   : ALIGN_UP(SHARD_DATA_OFF + w->shard_bytes, SHARD_ALIGN);
        rc = open_shard(w, fixed_shard_extent(w, norm.fixed ? 1 : 0), want);
    }
    if (rc) {
        seterr(pool_obj(p), rc, "%s", w->obj.err);
        cxlp_writer_abort(w);
        return rc;
    }
    *out = w;
    return 0;
}

/* Var, one field: do n more records of len bytes in all fit the open shard? */
static int var_fits(const cxlp_writer *w, uint64_t len, uint64_t n)
{
    uint64_t end, add[CXLP_MAX_FIELDS] = {0};
    if (add_overflow_u64(w->s_len, len, &end) || end > w->s_data_cap)
        return 0;
    add[0] = len;
    return layout_need(w, 0, add, w->s_n + n, w->s_cap) <= w->s_room;
}

/* Extent bytes a new variable-size shard asks for: a whole shard_bytes,
 * or when the records and bytes still to come are announced and fit in
 * less, just that (header, data, index at its widest delta): on 2 MiB pages
 * every reserved byte is zeroed, and the last shard of a large import
 * otherwise took a whole shard_bytes extent for its last few MiB. */
static uint64_t var_want(const cxlp_writer *w)
{
    uint64_t full = extent_for(w, SHARD_DATA_OFF + w->shard_bytes);
    if (w->nf != 1 || !w->expected || !w->expected_records ||
        w->expected <= w->data_bytes || w->expected_records <= w->n_records)
        return full;
    uint64_t add[CXLP_MAX_FIELDS] = {w->expected - w->data_bytes};
    if (add[0] >= w->shard_bytes)
        return full;
    uint64_t need = layout_need(w, 1, add, w->expected_records - w->n_records, UINT64_MAX);
    return MIN(extent_for(w, need), full);
}

void writer_expect_records(cxlp_writer *w, uint64_t n)
{
    if (w && w->obj.magic == OBJ_MAGIC)
        w->expected_records = n;
}

void writer_set_shuffle(cxlp_writer *w, uint64_t seed)
{
    if (w && w->obj.magic == OBJ_MAGIC)
        w->ingest = (struct pool_ingest){.flags = INGEST_SHUFFLED, .seed = seed};
}

/* Seals the open shard and opens one that takes n records of add[k] bytes
 * per column (a run larger than shard_bytes gets a shard of its size). */
static int next_shard(cxlp_writer *w, const uint64_t *add, uint64_t n)
{
    int rc = seal_shard(w);
    if (rc)
        return rc;
    uint64_t total = 0;
    for (uint32_t k = 0; k < w->nf; k++)
        if (add[k] > UINT64_MAX / 64 || add_overflow_u64(total, add[k], &total))
            total = UINT64_MAX;
    if (total > UINT64_MAX / 64 || n > UINT64_MAX / 64)
        return fail(w, seterr(&w->obj, CXLP_EARG, "dataset %s: %" PRIu64 " records are too large",
                              w->name, n));
    /* index bound at the widest delta: fits whatever the shard's size */
    uint64_t need = extent_for(w, layout_need(w, 1, add, n, UINT64_MAX));
    return open_shard(w, need, var_want(w));
}

static int var_next_shard(cxlp_writer *w, uint64_t len, uint64_t n)
{
    uint64_t add[CXLP_MAX_FIELDS] = {0};
    add[0] = len;
    int rc = next_shard(w, add, n);
    if (!rc && !var_fits(w, len, n))
        rc = fail(w, seterr(&w->obj, CXLP_EPANIC, "dataset %s: %" PRIu64 " bytes do not fit a new shard of %" PRIu64 " bytes",
                            w->name, len, w->s_cap));
    return rc;
}

/* Room in a starts[] array for need entries. */
static int grow_u64(cxlp_writer *w, uint64_t **arr, uint64_t *cap, uint64_t need)
{
    if (need <= *cap)
        return 0;
    uint64_t nc = *cap ? 2 * *cap : 1024;
    while (nc < need)
        nc *= 2;
    uint64_t *s = realloc(*arr, nc * sizeof *s);
    if (!s)
        return fail(w, seterr(&w->obj, -ENOMEM, "dataset %s: out of memory for the index", w->name));
    *arr = s;
    *cap = nc;
    return 0;
}

/* Room in starts[] for n more records of the open shard. */
static int grow_starts(cxlp_writer *w, uint64_t n)
{
    return grow_u64(w, &w->starts, &w->cap_starts, w->s_n + n);
}

/* One column of a batch of records: a fixed-shape field's record i at
 * data + i * stride; a variable-length field's record i as elements
 * [offsets[i], offsets[i+1]) of data. */
struct col_src {
    const uint8_t *data;
    uint64_t stride;
    const int64_t *offsets;
};

static uint64_t src_bytes(const cxlp_writer *w, uint32_t k, const struct col_src *c,
                          uint64_t i, uint64_t n)
{
    if (w->fsize[k])
        return n * w->fsize[k];
    return (uint64_t)(c->offsets[i + n] - c->offsets[i]) * w->felem[k];
}

/* Copies records [i, i+n) of column k to dst (contiguous); var: their
 * starts (relative to base_off) to starts[0..n). */
static void copy_col(const cxlp_writer *w, uint32_t k, const struct col_src *c, uint64_t i,
                     uint64_t n, uint8_t *dst, uint64_t *starts, uint64_t base_off)
{
    uint64_t fs = w->fsize[k];
    if (fs) {
        if (c->stride == fs) {
            memcpy(dst, c->data + i * fs, (size_t)(n * fs));
        } else {
            for (uint64_t j = 0; j < n; j++)
                memcpy(dst + j * fs, c->data + (i + j) * c->stride, (size_t)fs);
        }
        return;
    }
    uint64_t e = w->felem[k], first = (uint64_t)c->offsets[i];
    for (uint64_t j = 0; j < n; j++)
        starts[j] = base_off + ((uint64_t)c->offsets[i + j] - first) * e;
    uint64_t bytes = ((uint64_t)c->offsets[i + n] - first) * e;
    if (bytes)
        memcpy(dst, c->data + first * e, (size_t)bytes);
}

/* Records [i, i+n) of every column into the open shard, which has room. */
static int place(cxlp_writer *w, const struct col_src *src, uint64_t i, uint64_t n,
                 const uint64_t *add)
{
    uint64_t total = 0;
    for (uint32_t k = 0; k < w->nf; k++) {
        total += add[k];
        if (k == w->prim) {
            if (!w->fsize[k] && grow_starts(w, n))
                return w->failed;
            copy_col(w, k, &src[k], i, n, shard_data(w) + w->s_len, w->starts + w->s_n, w->s_len);
            continue;
        }
        struct stage *st = &w->stage[k];
        if (st->len + add[k] > st->cap) {
            uint64_t nc = MAX(st->cap ? 2 * st->cap : (uint64_t)1 << 20, st->len + add[k]);
            uint8_t *b = realloc(st->buf, (size_t)nc);
            if (!b)
                return fail(w, seterr(&w->obj, -ENOMEM, "dataset %s: out of memory staging "
                                      "column %s (%" PRIu64 " bytes)", w->name,
                                      w->schema.fields[k].name, nc));
            st->buf = b;
            st->cap = nc;
        }
        if (!w->fsize[k] && grow_u64(w, &st->starts, &st->cap_starts, w->s_n + n))
            return w->failed;
        copy_col(w, k, &src[k], i, n, st->buf + st->len, st->starts + w->s_n, st->len);
        XXH3_64bits_update(st->hash, st->buf + st->len, (size_t)add[k]); /* while in cache */
        st->len += add[k];
        w->fbytes[k] += add[k];
    }
    w->fbytes[w->prim] += add[w->prim];
    w->s_len += add[w->prim];
    w->s_n += n;
    written(w, n, total, 0);
    return 0;
}

/* The one append path of several columns (and of a single variable-length
 * field appended record by record): as many records as fit go into the open
 * shard, then the next shard opens. */
static int append_cols(cxlp_writer *w, uint64_t n, const struct col_src *src)
{
    uint64_t i = 0;
    while (i < n) {
        uint64_t k = 0, add[CXLP_MAX_FIELDS] = {0}, one[CXLP_MAX_FIELDS];
        if (w->open && w->schema.fixed) {
            k = MIN(n - i, w->s_rec_cap - w->s_n);
            for (uint32_t f = 0; f < w->nf; f++)
                add[f] = k * w->fsize[f];
        } else if (w->open) {
            while (i + k < n) {
                uint64_t next[CXLP_MAX_FIELDS];
                for (uint32_t f = 0; f < w->nf; f++)
                    next[f] = add[f] + src_bytes(w, f, &src[f], i + k, 1);
                if (w->s_len + next[w->prim] > w->s_data_cap ||
                    layout_need(w, 0, next, w->s_n + k + 1, w->s_cap) > w->s_room)
                    break;
                memcpy(add, next, sizeof add);
                k++;
            }
        }
        if (k == 0) {
            /* full (or closed): a new shard, sized for this record if it is
             * larger than a shard */
            for (uint32_t f = 0; f < w->nf; f++)
                one[f] = src_bytes(w, f, &src[f], i, 1);
            int rc = w->schema.fixed ? seal_shard(w) : next_shard(w, one, 1);
            if (!rc && w->schema.fixed)
                rc = open_shard(w, fixed_shard_extent(w, 1), fixed_shard_extent(w, per_shard_records(w)));
            if (rc)
                return rc;
            if (w->s_rec_cap == 0 || (!w->schema.fixed && layout_need(w, 0, one, 1, w->s_cap) > w->s_room))
                return fail(w, seterr(&w->obj, CXLP_EPANIC, "dataset %s: a record does not fit a new shard of %" PRIu64 " bytes",
                                      w->name, w->s_cap));
            continue;
        }
        int rc = place(w, src, i, k, add);
        if (rc)
            return rc;
        i += k;
    }
    progress(w, 0);
    return 0;
}

static int append_fixed(cxlp_writer *w, const uint8_t *recs, uint64_t n)
{
    uint64_t rs = w->unit;
    if (w->nf > 1) { /* the row form split into its columns */
        struct col_src src[CXLP_MAX_FIELDS];
        for (uint32_t k = 0; k < w->nf; k++)
            src[k] = (struct col_src){recs + w->schema.fields[k].offset, rs, NULL};
        return append_cols(w, n, src);
    }
    while (n) {
        if (!w->open || w->s_len == w->s_data_cap) {
            int rc = seal_shard(w);
            if (!rc)
                rc = open_shard(w, fixed_shard_extent(w, 1), fixed_shard_extent(w, per_shard_records(w)));
            if (rc)
                return rc;
        }
        uint64_t k = MIN(n, (w->s_data_cap - w->s_len) / rs);
        memcpy(shard_data(w) + w->s_len, recs, k * rs);
        w->s_len += k * rs;
        w->s_n += k;
        w->fbytes[0] += k * rs;
        written(w, k, k * rs, 0);
        recs += k * rs;
        n -= k;
    }
    progress(w, 0);
    return 0;
}

int cxlp_writer_append(cxlp_writer *w, const void *rec, uint64_t len)
{
    int rc = check_usable(w);
    if (rc)
        return rc;
    if (w->direct_len || w->direct_n)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: append while direct() bytes are outstanding", w->name);
    if (len && !rec)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: rec is NULL", w->name);
    if (w->schema.fixed) {
        if (len != w->unit)
            return seterr(&w->obj, CXLP_EARG, "dataset %s: record of %" PRIu64 " bytes, the schema's record_size is %" PRIu64,
                          w->name, len, w->unit);
        return append_fixed(w, rec, 1);
    }
    if (w->nf > 1)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: %u fields with variable-length ones: "
                      "append records with cxlp_writer_append_columns", w->name, w->nf);
    if (len % w->unit || len > UINT64_MAX / 64)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: record of %" PRIu64 " bytes is not a whole number of %s elements",
                      w->name, len, cxlp_dtype_name(w->schema.fields[0].dtype));
    if (w->schema.fields[0].dtype == CXLP_DT_STR && utf8_check(rec, len) != len)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: field %s: record is not valid UTF-8 "
                      "(byte %" PRIu64 ")", w->name, w->schema.fields[0].name, utf8_check(rec, len));
    int64_t offs[2] = {0, (int64_t)(len / w->unit)};
    struct col_src src = {rec, 0, offs};
    return append_cols(w, 1, &src);
}

int cxlp_writer_append_fixed(cxlp_writer *w, const void *recs, uint64_t n)
{
    int rc = check_usable(w);
    if (rc)
        return rc;
    if (!w->schema.fixed)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: append_fixed on variable-size records", w->name);
    if (w->direct_len || w->direct_n)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: append while direct() bytes are outstanding", w->name);
    uint64_t total;
    if (n && (!recs || mul_overflow_u64(n, w->unit, &total)))
        return seterr(&w->obj, CXLP_EARG, "dataset %s: append_fixed of %" PRIu64 " records: recs NULL or size overflows",
                      w->name, n);
    return append_fixed(w, recs, n);
}

int cxlp_writer_append_columns(cxlp_writer *w, uint64_t n, const struct cxlp_column *cols)
{
    int rc = check_usable(w);
    if (rc)
        return rc;
    if (w->direct_len || w->direct_n)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: append while direct() bytes are outstanding", w->name);
    if (!cols || n > UINT64_MAX / 64)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: append_columns: cols NULL or n too large", w->name);
    struct col_src src[CXLP_MAX_FIELDS];
    for (uint32_t k = 0; k < w->nf; k++) {
        const struct cxlp_column *c = &cols[k];
        const char *fname = w->schema.fields[k].name;
        if (!c->data && c->len)
            return seterr(&w->obj, CXLP_EARG, "dataset %s: field %s: data is NULL", w->name, fname);
        if (w->fsize[k]) {
            uint64_t need;
            if (mul_overflow_u64(n, w->fsize[k], &need) || c->len != need)
                return seterr(&w->obj, CXLP_EARG, "dataset %s: field %s: %" PRIu64 " bytes for %" PRIu64 " records of %" PRIu64 " bytes",
                              w->name, fname, c->len, n, w->fsize[k]);
            src[k] = (struct col_src){c->data, w->fsize[k], NULL};
            continue;
        }
        uint64_t e = w->felem[k], elems = c->len / e;
        if (!c->offsets || c->len % e || c->len > UINT64_MAX / 64)
            return seterr(&w->obj, CXLP_EARG, "dataset %s: field %s: variable-length values need offsets "
                          "and a whole number of %s elements (%" PRIu64 " bytes)", w->name, fname,
                          cxlp_dtype_name(w->schema.fields[k].dtype), c->len);
        for (uint64_t i = 0; i < n; i++) {
            if (c->offsets[i] < 0 || c->offsets[i + 1] < c->offsets[i] ||
                (uint64_t)c->offsets[i + 1] > elems)
                return seterr(&w->obj, CXLP_EARG, "dataset %s: field %s: record %" PRIu64 ": offsets %" PRId64 "..%" PRId64 " are decreasing or outside the %" PRIu64 " elements given",
                              w->name, fname, i, c->offsets[i], c->offsets[i + 1], elems);
        }
        /* each record on its own: a character must not straddle two */
        for (uint64_t i = 0; w->schema.fields[k].dtype == CXLP_DT_STR && i < n; i++) {
            const uint8_t *d = (const uint8_t *)c->data + c->offsets[i];
            uint64_t len = (uint64_t)(c->offsets[i + 1] - c->offsets[i]), bad = utf8_check(d, len);
            if (bad != len)
                return seterr(&w->obj, CXLP_EARG, "dataset %s: field %s: record %" PRIu64 " is not valid UTF-8 (byte %" PRIu64 " of it)",
                              w->name, fname, i, bad);
        }
        src[k] = (struct col_src){c->data, 0, c->offsets};
    }
    if (n == 0)
        return 0;
    return append_cols(w, n, src);
}

uint64_t writer_room(const cxlp_writer *w)
{
    if (!w || w->failed || !w->schema.fixed)
        return 0;
    if (!w->open || w->s_len == w->s_data_cap)
        return per_shard_records(w) * w->unit;
    return w->s_data_cap - w->s_len;
}

int cxlp_writer_direct(cxlp_writer *w, uint64_t len, void **dst)
{
    int rc = check_usable(w);
    if (rc)
        return rc;
    if (!dst || !w->schema.fixed || w->nf != 1 || len == 0 || len % w->unit)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: direct(%" PRIu64 "): needs fixed-size records and a "
                      "nonzero multiple of record_size %" PRIu64, w->name, len, w->unit);
    if (!w->open || w->s_data_cap - w->s_len < len) {
        rc = seal_shard(w);
        if (rc)
            return rc;
        uint64_t want = fixed_shard_extent(w, per_shard_records(w));
        if (len > UINT64_MAX / 2)
            return seterr(&w->obj, CXLP_EARG, "dataset %s: direct(%" PRIu64 ") too large", w->name, len);
        uint64_t need = extent_for(w, SHARD_DATA_OFF + len);
        rc = open_shard(w, need, want);
        if (rc)
            return rc;
        if (w->s_data_cap < len) /* a chunk larger than a shard: this shard grows */
            w->s_data_cap = (w->s_room - SHARD_DATA_OFF) / w->unit * w->unit;
    }
    w->direct_len = len;
    *dst = shard_data(w) + w->s_len;
    return 0;
}

int cxlp_writer_commit_direct(cxlp_writer *w, uint64_t len)
{
    int rc = check_usable(w);
    if (rc)
        return rc;
    if (len > w->direct_len || len % w->unit || w->direct_n)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: commit_direct(%" PRIu64 ") after direct(%" PRIu64 "), or not "
                      "a multiple of record_size %" PRIu64, w->name, len, w->direct_len, w->unit);
    w->direct_len = 0;
    w->s_len += len;
    w->s_n += len / w->unit;
    w->fbytes[0] += len;
    written(w, len / w->unit, len, 1); /* the importer just wrote it: still in cache */
    progress(w, 0);
    return 0;
}

int writer_direct_var(cxlp_writer *w, uint64_t bytes, uint64_t n, void **dst)
{
    int rc = check_usable(w);
    if (rc)
        return rc;
    if (!dst || w->schema.fixed || w->nf != 1 || n == 0 || bytes % w->unit || w->direct_len ||
        w->direct_n || bytes > UINT64_MAX / 64)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: direct_var(%" PRIu64 " bytes, %" PRIu64 " records): needs "
                      "variable-size records, n > 0, whole %s elements, nothing outstanding", w->name,
                      bytes, n, cxlp_dtype_name(w->schema.fields[0].dtype));
    if (!w->open || !var_fits(w, bytes, n)) {
        rc = var_next_shard(w, bytes, n);
        if (rc)
            return rc;
    }
    rc = grow_starts(w, n);
    if (rc)
        return rc;
    w->direct_len = bytes;
    w->direct_n = n; /* nonzero marks the grant */
    *dst = shard_data(w) + w->s_len;
    return 0;
}

int writer_commit_var(cxlp_writer *w, const uint64_t *lens, uint64_t n)
{
    int rc = check_usable(w);
    if (rc)
        return rc;
    uint64_t total = 0;
    int ok = w->direct_n && n <= w->direct_n && (lens || !n);
    for (uint64_t i = 0; ok && i < n; i++)
        ok = lens[i] % w->unit == 0 && !add_overflow_u64(total, lens[i], &total);
    if (!ok || total > w->direct_len)
        return seterr(&w->obj, CXLP_EARG, "dataset %s: commit_var of %" PRIu64 " records: more records or bytes "
                      "than direct_var granted, or lengths not whole elements", w->name, n);
    for (uint64_t i = 0; i < n; i++) {
        w->starts[w->s_n++] = w->s_len;
        w->s_len += lens[i];
    }
    w->direct_len = w->direct_n = 0;
    w->fbytes[0] += total;
    written(w, n, total, 1);
    progress(w, 0);
    return 0;
}

int cxlp_writer_set_docs(cxlp_writer *w, const int64_t *docs, uint64_t n_docs)
{
    int rc = check_usable(w);
    if (rc)
        return rc;
    uint64_t bytes;
    if (!docs || n_docs == UINT64_MAX || mul_overflow_u64(n_docs + 1, sizeof *docs, &bytes))
        return seterr(&w->obj, CXLP_EARG, "dataset %s: set_docs: docs NULL or n_docs too large", w->name);
    int64_t *copy = malloc(bytes);
    if (!copy)
        return seterr(&w->obj, -ENOMEM, "dataset %s: out of memory for %" PRIu64 " documents", w->name, n_docs);
    memcpy(copy, docs, bytes);
    free(w->docs);
    w->docs = copy;
    w->n_docs = n_docs;
    return 0;
}

static void writer_free(cxlp_writer *w)
{
    if (w->hash)
        XXH3_freeState(w->hash);
    if (w->bsums.st)
        XXH3_freeState(w->bsums.st);
    shard_bsums_free(&w->bsums);
    for (uint32_t k = 0; k < CXLP_MAX_FIELDS; k++) {
        if (w->stage[k].hash)
            XXH3_freeState(w->stage[k].hash);
        free(w->stage[k].buf);
        free(w->stage[k].starts);
    }
    free(w->res);
    free(w->spare);
    free(w->shards);
    free(w->starts);
    free(w->docs);
    w->obj.magic = 0;
    free(w);
}

/* Gives back the unused spares and the reservations that hold nothing (all
 * of them with all = 1), one transaction per object they are in; the rest
 * stay listed. */
static void unreserve_unused(cxlp_writer *w, int all)
{
    size_t n = 0, keep = 0;
    struct pool_extent *back = malloc((w->n_res + w->n_spare + 1) * sizeof *back);
    for (int pass = 0; pass < 2; pass++) {
        /* pass 0: the ingest tier's (spares among them), pass 1: the docs' */
        int where = pass == 0 ? w->tier : POOL_META;
        n = 0;
        for (size_t i = 0; i < w->n_res; i++) {
            if (w->res[i].where != where || !(all || w->res[i].used == 0))
                continue;
            if (back)
                back[n++] = w->res[i].ext;
            else
                pool_unreserve(w->p, where, w->res[i].ext);
            w->res[i].ext.len = 0; /* given back */
        }
        for (size_t i = w->spare_next; pass == 0 && i < w->n_spare; i++) {
            if (back)
                back[n++] = w->spare[i];
            else
                pool_unreserve(w->p, where, w->spare[i]);
        }
        if (back && n)
            pool_unreserve_many(w->p, where, back, n);
    }
    for (size_t i = 0; i < w->n_res; i++)
        if (w->res[i].ext.len)
            w->res[keep++] = w->res[i];
    w->n_res = keep;
    w->n_spare = w->spare_next = 0;
    free(back);
}

static void unreserve_all(cxlp_writer *w)
{
    unreserve_unused(w, 1);
}

void cxlp_writer_abort(cxlp_writer *w)
{
    if (!w || w->obj.magic != OBJ_MAGIC)
        return;
    unreserve_all(w);
    writer_free(w);
}

/* Copies the document index into an extent of the pool object's metadata
 * area (readers map it whole, whatever tier the shards are on) and checks it
 * against the records: docs[0] == 0, non-decreasing, docs[n_docs] ==
 * n_records. */
static int write_docs(cxlp_writer *w, struct pool_dataset *ds)
{
    uint64_t bytes = (w->n_docs + 1) * sizeof(int64_t);
    if (w->docs[0] != 0 || (uint64_t)w->docs[w->n_docs] != w->n_records)
        return fail(w, seterr(&w->obj, CXLP_EARG, "dataset %s: document index must run from 0 to %" PRIu64 " records (got %" PRId64 "..%" PRId64 ")",
                              w->name, w->n_records, w->docs[0], w->docs[w->n_docs]));
    for (uint64_t i = 0; i < w->n_docs; i++)
        if (w->docs[i + 1] < w->docs[i])
            return fail(w, seterr(&w->obj, CXLP_EARG, "dataset %s: document index decreases at entry %" PRIu64,
                                  w->name, i + 1));
    int rc = reserve(w, POOL_META, bytes);
    if (rc)
        return rc;
    struct resv *r = &w->res[w->n_res - 1];
    uint8_t *meta = pool_base_rw(w->p, POOL_META);
    memcpy(meta + r->ext.off, w->docs, bytes);
    ds->docs = (struct pool_extent){.off = r->ext.off, .len = bytes};
    ds->docs_checksum = XXH3_64bits(meta + r->ext.off, bytes);
    ds->info.n_docs = w->n_docs;
    r->used = bytes;
    rc = pool_sync(w->p, POOL_META, r->ext.off, bytes);
    return rc ? pool_fail(w, rc, "syncing the document index") : 0;
}

int cxlp_writer_commit(cxlp_writer *w)
{
    int rc = check_usable(w);
    if (rc) {
        cxlp_writer_abort(w);
        return rc;
    }
    w->direct_len = w->direct_n = 0;
    if (!w->fault_done) {
        w->fault_done = 1;
        fault_point("writer-mid-shard");
    }
    struct pool_dataset ds;
    memset(&ds, 0, sizeof ds);
    rc = seal_shard(w);
    if (!rc && w->docs)
        rc = write_docs(w, &ds);
    if (rc)
        goto out;
    /* reservations and spares that hold nothing go back now; used ones are
     * trimmed by the publish itself */
    unreserve_unused(w, 0);

    strlcpy0(ds.info.name, w->name, sizeof ds.info.name);
    ds.info.n_records = w->n_records;
    ds.info.data_bytes = w->data_bytes;
    ds.info.n_shards = (uint32_t)w->n_shards;
    ds.info.fixed = w->schema.fixed;
    ds.info.record_size = w->schema.record_size;
    ds.info.created_unix = (uint64_t)time(NULL);
    uint64_t stored = ds.docs.len;
    for (size_t i = 0; i < w->n_shards; i++)
        stored += w->shards[i].len;
    ds.info.stored_bytes = stored;
    ds.schema = w->schema;
    ds.n_shards = (uint32_t)w->n_shards;
    if (w->n_shards > UINT32_MAX) {
        rc = seterr(&w->obj, CXLP_EUNSUPPORTED, "dataset %s: %zu shards, the catalog holds at most %u",
                    w->name, w->n_shards, UINT32_MAX);
        goto out;
    }
    progress(w, 1);
    rc = pool_publish_ingest(w->p, &ds, w->shards, w->replaces, &w->ingest);
    if (rc)
        pool_fail(w, rc, "publishing");
    else
        w->n_res = 0; /* the dataset owns them now */
out:
    unreserve_all(w);
    if (rc) /* after the unreserve, whose failure must not replace the words */
        seterr(NULL, rc, "%s", w->obj.err); /* w is freed: keep them */
    writer_free(w);
    return rc;
}

int cxlp_pool_concat(cxlp_pool *p, const char *name, const char *const *parts, size_t n_parts)
{
    char err[ERRMSG_MAX];
    if (!p || !parts || n_parts == 0)
        return seterr(p ? pool_obj(p) : NULL, CXLP_EARG, "pool_concat: %s",
                      p ? "no parts" : "pool is NULL");
    int rc = store_name_check(name, err, sizeof err);
    for (size_t k = 0; !rc && k < n_parts; k++)
        rc = store_name_check(parts[k], err, sizeof err);
    if (rc)
        return seterr(pool_obj(p), rc, "concat: %s", err);
    return pool_concat(p, name, parts, n_parts);
}

const char *cxlp_writer_errmsg(const cxlp_writer *w)
{
    return cxlp_errmsg(w);
}
