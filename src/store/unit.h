/*
 * unit.h - staging units (unit.c): runs of one shard's records that a
 * memory tier holds without the rest of their shard, so that a dataset
 * stages into a tier of a few MiB whatever size its shards were written at.
 *
 * A unit's copy (in a memory tier, at its location word, word 0 bytes):
 *
 *   [0, 4096)        the shard's header page, as in the shard
 *   [4096, 8192)     struct unit_tab: which bytes of the shard follow where
 *   [8192, ...)      segments: runs of the shard's bytes, each at a 4 KiB
 *                    aligned offset of the copy: the blocks that hold the
 *                    unit's records in every column, for a variable-size
 *                    column the blocks of the index entries of those records,
 *                    and (shard format 4 with a sums area) the pages of block
 *                    sums those blocks need
 *
 * Every segment is made of whole blocks of the shard's block sums (or whole
 * pages of its sums area), so a copy is verified as a partial read is: the
 * header page against its checksum and the shard table's digest, each page
 * of sums against its page sum, each block against its sum. Only a dataset
 * whose shards have block sums (shard format 3 or 4) has units.
 */
#ifndef CXLP_STORE_UNIT_H
#define CXLP_STORE_UNIT_H

#include <stdint.h>

#include "store/fetch.h"
#include "store/store.h"

#define UNIT_HEAD 8192u           /* header page and table before the segments */
#define UNIT_MAX_SEGS 96u
#define UNIT_TAB_MAGIC "CXLPUNT1"

/* shard bytes [off, off + len) at offset at of the copy */
struct unit_seg {
    uint64_t off, len, at;
};

/* The second page of a unit's copy. checksum: XXH3-64 of the table's
 * bytes before it and its n_seg segments. */
struct unit_tab {
    char magic[8];
    uint32_t version;          /* 1 */
    uint32_t n_seg;
    uint64_t shard, unit;
    uint64_t r0, r1;           /* its records, shard-local: [r0, r1) */
    uint64_t bytes;            /* the copy's length (its unit word 0) */
    uint64_t checksum;
    uint64_t reserved[2];
    struct unit_seg seg[];
};

/* The staging unit a loader with budget bytes of staging (0: the engine's
 * default, 3/4 of the fastest memory tier) uses for s: *per_unit records
 * a unit (0: whole shards are the unit: they are small enough, or have no
 * block sums) and about *unit_bytes bytes a copy. A dataset whose units
 * record exists keeps its per_unit. 0 or the error of reading a shard
 * header. */
int store_unit_rule(cxlp_store *s, uint64_t budget, uint64_t *per_unit, uint64_t *unit_bytes);

/* Sets s->units from the dataset's units record when it has one; with
 * create, makes the record first where the rule (budget as
 * store_unit_rule) says the dataset stages in units. 0 when s->units is
 * set, CXLP_ENOTFOUND when the dataset stages in whole shards (or, without
 * create, has no units yet); the errors of the pool otherwise. */
int store_units_use(cxlp_store *s, uint64_t budget, int create);

/* The unit of record id (s->units set). */
static inline uint64_t store_unit_of(const cxlp_store *s, uint64_t id)
{
    const struct store_units *su = s->units;
    uint64_t k = store_shard_of(s, id);
    return su->ufirst[k] + fastdiv(id, su->per_div) - fastdiv(s->first[k], su->per_div);
}
/* Unit u's shard and its records there, [*r0, *r1) shard-local. */
void store_unit_span(const cxlp_store *s, uint64_t u, uint64_t *k, uint64_t *r0, uint64_t *r1);
/* Bytes a copy of unit u takes: its word 0 once a copy was made, else an
 * estimate from its records' share of its shard. */
uint64_t store_unit_bytes(const cxlp_store *s, uint64_t u);

/* Makes unit u's copy in memory tier t, as store_copy makes a shard's
 * (flags FETCH_WAIT, FETCH_KEEP; the same codes; drop_mask: copies of the
 * unit in those tiers dropped in the same step): its bytes read from a
 * whole copy of its shard in a memory tier, else from the home (io_uring,
 * O_DIRECT into the copy), verified block by block before its word is
 * published. */
int store_unit_copy(cxlp_store *s, uint64_t u, uint32_t t, unsigned flags, uint32_t drop_mask,
                    struct store_io *io, struct copy_stat *st);
/* A miss on unit u: its copy in the fastest memory tier with room (as
 * store_fetch). */
int store_unit_fetch(cxlp_store *s, uint64_t u, unsigned flags);
/* Where unit u's records can be read now: a copy of the unit in a memory
 * tier (*sh, columns in cols, describes the copy through windows: read only
 * the unit's records through it), tier in *tier. CXLP_ENOTFOUND when no
 * memory tier holds one; CXLP_ECORRUPT for a copy that does not check out.
 * The caller holds an epoch pin while it uses *sh. */
int store_unit_locate(const cxlp_store *s, uint64_t u, struct shard *sh, struct shard_col *cols,
                      uint32_t *tier);
/* Verifies every copy of every unit of s: header, table, pages of sums and
 * every block. report (may be NULL) gets a line per unit copy that fails;
 * *n_copies counts the copies verified. 0, or the first failure's code. */
int store_units_verify(cxlp_store *s, void (*report)(void *ctx, const char *line), void *ctx,
                       uint64_t *n_copies);

#endif
