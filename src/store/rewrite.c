/*
 * rewrite.c - cxlp_pool_rewrite: a dataset written again in this build's
 * shard format, published in its own place.
 *
 * A dataset keeps the shard format it was written in. Format 3 took blocks
 * of 64 KiB to 1 MiB for its block sums (1 MiB at the writer's default 256
 * MiB shards), so a record of a shard with no copy in memory cost that
 * much disk read; format 4 takes 4 KiB (docs/store-format.md). The rewrite
 * turns one into the other without the source files the dataset was
 * ingested from.
 *
 * How: each old shard, read from one copy (fastest tier first) and verified
 * whole, goes through the public writer as columns (cxlp_writer_append_columns:
 * each field's bytes and, for variable-length fields, the element offsets
 * read from the old index), so the new shards are whatever an ingest of
 * the same records writes today, checksums included. The commit publishes
 * the new dataset in the old one's place in one catalog flip
 * (pool_publish_over), only if the name still holds the dataset that was
 * read (its version); the old one then goes as cxlp_pool_remove takes it.
 *
 * Crash safety is the writer's and the publish's: killed before the flip,
 * the new shards are an unpublished ingest's reservations, reclaimed by the
 * next writer; after it, the old dataset is a removed one's deferred frees.
 *
 * Alternatives rejected: re-encoding each shard in place (a header and a
 * sums area written into memory that readers read, and formats 1 and 2
 * place their columns differently); rewriting only the header page and
 * sums area beside the old bytes (the new sums area needs room after the
 * indexes that the old extent does not have).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool.h"
#include "store/fetch.h"
#include "store/store.h"

/* Appends the records of shard k (validated as g) to w. */
static int append_shard(cxlp_store *s, cxlp_writer *w, uint64_t k, const struct shard *g,
                        int64_t **off, uint64_t *cap_off)
{
    const uint64_t n = g->n_records;
    if (n == 0)
        return 0;
    if (s->rows) /* format 1, the fields inside whole rows: the writer splits them */
        return cxlp_writer_append_fixed(w, g->col[0].data, n);
    if (n + 1 > *cap_off) {
        for (uint32_t c = 0; c < g->n_cols; c++) {
            int64_t *m = realloc(off[c], (n + 1) * sizeof *m);
            if (!m)
                return seterr(NULL, -ENOMEM, "dataset %s: out of memory", s->name);
            off[c] = m;
        }
        *cap_off = n + 1;
    }
    struct cxlp_column cols[SHARD_MAX_COLS];
    for (uint32_t c = 0; c < g->n_cols; c++) {
        const struct cxlp_field *f = &s->ds.schema.fields[c];
        cols[c] = (struct cxlp_column){.data = g->col[c].data, .len = g->col[c].data_len};
        if (g->col[c].kind == SHARD_KIND_VAR) {
            char err[ERRMSG_MAX];
            if (shard_col_offsets(g, c, (uint64_t)cxlp_dtype_size(f->dtype), off[c], err,
                                  sizeof err))
                return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": %s", s->name,
                              k, err);
            cols[c].offsets = off[c];
        }
    }
    return cxlp_writer_append_columns(w, n, cols);
}

/* The shard payload the old dataset was cut at: a fixed-size dataset's
 * records per shard, else its largest shard's bytes after the header page
 * (data and indexes: what the writer's shard_bytes bounds). */
static uint64_t old_shard_bytes(const cxlp_store *s)
{
    if (s->ds.schema.fixed)
        return s->per_shard ? s->per_shard * s->ds.schema.record_size
                            : s->n_shards ? s->loc[0].data_len : 0;
    uint64_t m = store_max_shard(s);
    return m > SHARD_DATA_OFF ? m - SHARD_DATA_OFF : 0;
}

/* Shard k of s appended to w from its fastest copy, verified whole first. */
static int copy_shard(cxlp_store *s, cxlp_writer *w, uint64_t k, uint8_t *buf,
                      struct store_io *io, int64_t **off, uint64_t *cap_off)
{
    struct shard g;
    struct shard_col cols[SHARD_MAX_COLS];
    if (!s->tiered) {
        int rc = store_copy_open(s, k, 0, s->loc[k].off, attach_base(s->a) + s->loc[k].off, NULL,
                                 NULL, 1, &g, cols);
        return rc ? rc : append_shard(s, w, k, &g, off, cap_off);
    }
    /* a pin keeps the copy from being freed while it is read */
    uint64_t pin = attach_pin_epoch(s->a);
    int rc = CXLP_ENOTFOUND;
    for (uint32_t t = 0; t < attach_n_tiers(s->a) && rc == CXLP_ENOTFOUND; t++) {
        uint64_t o;
        const uint8_t *base = NULL;
        rc = store_copy_in(s, k, t, &o, &base);
        if (!rc)
            rc = store_copy_open(s, k, t, o, base, buf, io, 1, &g, cols);
        if (!rc)
            rc = append_shard(s, w, k, &g, off, cap_off);
    }
    attach_unpin_epoch(s->a, pin);
    if (rc == CXLP_ENOTFOUND)
        rc = seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": no copy in any tier",
                    s->name, k);
    return rc;
}

int cxlp_pool_rewrite(cxlp_pool *p, const char *name, const struct cxlp_rewrite_opts *opts)
{
    if (!p || !name)
        return seterr(p ? pool_obj(p) : NULL, CXLP_EARG, "pool_rewrite: %s is NULL",
                      p ? "name" : "pool");
    cxlp_store *s;
    int rc = cxlp_store_open(p, name, &s);
    if (rc)
        return seterr(pool_obj(p), rc, "rewrite: %s", cxlp_errmsg(NULL));
    const struct cxlp_schema *sc = &s->ds.schema;
    struct cxlp_writer_opts wo = {
        .shard_bytes = opts && opts->shard_bytes ? opts->shard_bytes : old_shard_bytes(s),
        .no_hugepages = opts ? opts->no_hugepages : 0,
    };
    /* announced bytes let the writer reserve once (fixed) or size the last
     * shard (one variable-length field, with the record count) */
    if (sc->fixed)
        wo.expected_bytes = s->count * sc->record_size;
    else if (sc->n_fields == 1)
        wo.expected_bytes = s->ds.info.data_bytes;
    cxlp_writer *w = NULL;
    uint8_t *buf = NULL;
    struct store_io io = {0};
    int64_t *off[SHARD_MAX_COLS] = {0};
    uint64_t cap_off = 0;
    rc = writer_begin_over(p, name, sc, &wo, s->ds.info.version, &w);
    if (rc) {
        w = NULL;
        rc = seterr(pool_obj(p), rc, "rewrite: %s", cxlp_errmsg(NULL));
        goto out;
    }
    if (!sc->fixed && sc->n_fields == 1)
        writer_expect_records(w, s->count);
    if (s->tiered &&
        posix_memalign((void **)&buf, 4096, ALIGN_UP(store_max_shard(s), 4096))) {
        rc = seterr(pool_obj(p), -ENOMEM, "dataset %s: out of memory", name);
        goto out;
    }
    for (uint64_t k = 0; k < s->n_shards; k++) {
        if ((rc = copy_shard(s, w, k, buf, &io, off, &cap_off))) {
            rc = seterr(pool_obj(p), rc, "rewrite: %s", cxlp_errmsg(NULL));
            goto out;
        }
        if (opts && opts->progress)
            opts->progress(opts->progress_ctx, k + 1, s->n_shards);
    }
    const int64_t *docs;
    uint64_t n_docs;
    if (cxlp_store_docs(s, &docs, &n_docs) == 0 && docs &&
        (rc = cxlp_writer_set_docs(w, docs, n_docs))) {
        rc = seterr(pool_obj(p), rc, "rewrite: %s", cxlp_errmsg(NULL));
        goto out;
    }
    fault_point("rewrite-before-commit");
    rc = cxlp_writer_commit(w); /* frees w */
    w = NULL;
    if (rc)
        rc = seterr(pool_obj(p), rc, "rewrite: %s", cxlp_errmsg(NULL));
out:
    cxlp_writer_abort(w);
    store_io_close(&io);
    free(buf);
    for (uint32_t c = 0; c < SHARD_MAX_COLS; c++)
        free(off[c]);
    cxlp_store_close(s);
    return rc;
}
