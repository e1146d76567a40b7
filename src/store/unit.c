/*
 * unit.c - staging units: copies of runs of a shard's records in a memory
 * tier (unit.h has the copy's layout; pool/units.c the pool's record and
 * words).
 *
 * Glossary
 *   unit        the records of block b of ids ([b * R, (b + 1) * R), R =
 *               per_unit) that lie in shard k; units are numbered shard
 *               after shard (ufirst[k] is shard k's first)
 *   need        a range of the shard's bytes a unit's records use: per
 *               fixed-size column its records' bytes; per variable-size
 *               column the index directory entries of its records, their
 *               deltas, and their bytes
 *   image       the shard's bytes held as segments somewhere (a copy of a
 *               unit, or the private scratch a stager reads the indexes
 *               into), with the offset of each
 *   view        a column seen through an image: its windows (shard.h)
 *
 * Invariants
 *   a segment holds whole blocks of the shard's block sums, or whole pages
 *   of its sums area, or (segment 0) its header page; so every byte of a
 *   copy but the table is verified against the shard's own sums, and a
 *   copy of a unit has the same bytes whoever made it (its length is its
 *   unit word 0)
 *   a copy holds every need of its unit's records: its view reads them
 *   without a miss (store_unit_locate checks it, as the stager did)
 *
 * Staging one unit (store_unit_copy):
 *   1. the header page, from a whole copy of the shard in memory or the
 *      home (the store's kept pages first), checked against the shard table
 *   2. variable-size columns: their directory entries, then their deltas,
 *      read into private scratch and verified: they say where the records'
 *      bytes are (at most two rounds of small reads)
 *   3. the layout: every need widened to whole blocks, merged, with the
 *      pages of sums those blocks need; its length is the copy's
 *   4. room reserved in the tier (the claim on the unit)
 *   5. every segment read straight into the copy (io_uring, O_DIRECT, from
 *      the home; memcpy from a memory copy), then verified: header, pages
 *      of sums, blocks
 *   6. the table written, the word published (pool/place.c)
 *
 * Rejected: re-encoding a unit as a shard of its own (a second copy of
 * every byte through the CPU, and a copy no other reader could verify
 * against the home's sums); units as byte ranges of the shard (a record
 * would straddle two of them, and the planner would need the index to know
 * which units a record needs); reading the whole index of a shard for
 * each unit (a quarter of a 4 MiB unit's bytes for 256-byte records).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "common/atomic.h"
#include "pool/loc.h"
#include "pool/pool_format.h"
#include "store/remote_tier.h"
#include "store/unit.h"

/* Units are for shards larger than 1/UNIT_WHOLE of the budget: below, the
 * window of a block order (half the budget) holds 8 whole shards or more,
 * and a whole copy costs one reservation, not several. */
#define UNIT_WHOLE 16u
#define UNIT_MIN_BYTES (UINT64_C(64) << 10)
#define UNIT_MAX_BYTES (UINT64_C(16) << 20)

/* ------------------------------------------------------------ geometry */

/* The engine's default budget: 3/4 of the fastest memory tier. */
static uint64_t default_budget(const cxlp_store *s)
{
    return s->n_mem ? attach_tier(s->a, s->mem[0])->data_len / 4 * 3 : 0;
}

/* The largest power of two at most x (x >= 1). */
static uint64_t pow2_floor(uint64_t x)
{
    return UINT64_C(1) << (63 - __builtin_clzll(x));
}

/* Units of R records over the store's shards; ufirst (n_shards + 1
 * entries) filled when not NULL. */
static uint64_t count_units(const cxlp_store *s, uint64_t R, uint64_t *ufirst)
{
    uint64_t n = 0;
    for (uint64_t k = 0; k < s->n_shards; k++) {
        if (ufirst)
            ufirst[k] = n;
        uint64_t nk = s->loc[k].n_records;
        if (nk)
            n += (s->first[k] + nk - 1) / R - s->first[k] / R + 1;
    }
    if (ufirst)
        ufirst[s->n_shards] = n;
    return n;
}

/* The shard format of the dataset (s->version once a shard was checked,
 * else shard 0's header read). */
static int shard_format(cxlp_store *s, uint32_t *v)
{
    *v = at_load_acquire(&s->version);
    if (*v || !s->n_shards)
        return 0;
    uint8_t *page = NULL;
    if (posix_memalign((void **)&page, 4096, SHARD_DATA_OFF))
        return seterr(NULL, -ENOMEM, "dataset %s: out of memory", s->name);
    struct shard g;
    struct shard_col cols[SHARD_MAX_COLS];
    int rc = store_read_head(s, 0, page, &g, cols);
    free(page);
    *v = rc ? 0 : g.version;
    return rc;
}

int store_unit_rule(cxlp_store *s, uint64_t budget, uint64_t *per_unit, uint64_t *unit_bytes)
{
    *per_unit = 0;
    *unit_bytes = 0;
    if (!s->tiered || !s->n_mem || !s->count)
        return 0;
    const struct store_units *su = at_load_acquire(&s->units);
    uint64_t avg = MAX(1, s->ds.info.stored_bytes / s->count), R;
    if (su) {
        R = su->pu.per_unit;
    } else {
        struct pool_units pu;
        if (pool_units_get(s->a, s->ds.states_off, &pu) == 0) {
            R = pu.per_unit; /* made earlier: the dataset's */
        } else {
            /* a window of a block order is half the budget: 24 units,
             * never fewer than 2 of at least 64 KiB (16 blocks) */
            uint64_t b = budget ? budget : default_budget(s);
            uint64_t target = MIN(MAX(pow2_floor(MAX(b / 48, 1)), UNIT_MIN_BYTES), UNIT_MAX_BYTES);
            target = MAX(MIN(target, pow2_floor(MAX(b / 4, 1))), UNIT_MIN_BYTES / 4);
            if (store_max_shard(s) <= b / UNIT_WHOLE)
                return 0; /* whole shards are small enough */
            uint32_t v;
            int rc = shard_format(s, &v);
            if (rc)
                return rc;
            if (v < SHARD_VERSION_V3)
                return 0; /* no block sums: a copy is verified whole */
            R = MAX(1, target / avg);
            uint64_t P = s->per_shard;
            if (P && R < P) {
                /* equal shards: the unit size nearest the target that
                 * divides them (at most 1/4 above it), so every block of
                 * ids is one unit */
                uint64_t m = (P + R - 1) / R, best = 0;
                for (uint64_t j = MAX(1, m / 2); j <= 2 * m; j++) {
                    uint64_t q = P / j;
                    if (P % j == 0 && 4 * q <= 5 * R &&
                        (!best || (q > R ? q - R : R - q) < (best > R ? best - R : R - best)))
                        best = q;
                }
                if (best)
                    R = best;
            } else if (!P && R > SHARD_BLOCK) {
                R -= R % SHARD_BLOCK; /* whole blocks of index entries */
            }
        }
    }
    *per_unit = R;
    *unit_bytes = R * avg;
    return 0;
}

int store_units_use(cxlp_store *s, uint64_t budget, int create)
{
    if (at_load_acquire(&s->units))
        return 0;
    struct pool_units pu;
    int rc = pool_units_get(s->a, s->ds.states_off, &pu);
    if (rc == CXLP_ENOTFOUND && create && !s->unpinned) {
        uint64_t R, bytes;
        cxlp_pool *wp;
        if ((rc = store_unit_rule(s, budget, &R, &bytes)))
            return rc;
        if (!R)
            return CXLP_ENOTFOUND;
        if ((rc = store_pool_rw(s, &wp)))
            return rc;
        rc = pool_units_ensure(wp, s->ds.states_off, R, count_units(s, R, NULL), &pu);
        if (rc)
            return seterr(NULL, rc, "dataset %s: staging units: %s", s->name, cxlp_errmsg(NULL));
        /* its words in our own mapping (the writable handle's may differ) */
        rc = pool_units_get(s->a, s->ds.states_off, &pu);
    }
    if (rc)
        return rc;
    struct store_units *su = calloc(1, sizeof *su);
    uint64_t *uf = malloc((s->n_shards + 1) * sizeof *uf);
    if (!su || !uf) {
        free(su);
        free(uf);
        return seterr(NULL, -ENOMEM, "dataset %s: out of memory for its units", s->name);
    }
    if (count_units(s, pu.per_unit, uf) != pu.n_units) {
        free(su);
        free(uf);
        return seterr(NULL, CXLP_ECORRUPT, "dataset %s: its units record lists %" PRIu64 " units "
                      "of %" PRIu64 " records; its shards make %" PRIu64, s->name, pu.n_units,
                      pu.per_unit, count_units(s, pu.per_unit, NULL));
    }
    su->pu = pu;
    su->ufirst = uf;
    su->per_div = fastdiv_init(pu.per_unit);
    pthread_mutex_lock(&s->mu);
    int first = !s->units;
    if (first)
        at_store_release(&s->units, su); /* pairs with the acquires of the readers */
    pthread_mutex_unlock(&s->mu);
    if (!first) { /* another thread was first */
        free(uf);
        free(su);
    }
    return 0;
}

void store_unit_span(const cxlp_store *s, uint64_t u, uint64_t *k, uint64_t *r0, uint64_t *r1)
{
    const struct store_units *su = s->units;
    uint64_t lo = 0, hi = s->n_shards; /* ufirst[lo] <= u < ufirst[hi] */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (su->ufirst[mid] <= u)
            lo = mid;
        else
            hi = mid;
    }
    const uint64_t R = su->pu.per_unit, f = s->first[lo], n = s->loc[lo].n_records;
    uint64_t b = f / R + (u - su->ufirst[lo]);
    *k = lo;
    *r0 = MAX(b * R, f) - f;
    *r1 = MIN(b * R + R, f + n) - f;
}

uint64_t store_unit_bytes(const cxlp_store *s, uint64_t u)
{
    const struct store_units *su = s->units;
    uint64_t w0 = at_load_relaxed(&su->pu.words[u * su->pu.stride]);
    if (w0)
        return w0;
    uint64_t k, r0, r1;
    store_unit_span(s, u, &k, &r0, &r1);
    const struct pool_shard *l = &s->loc[k];
    /* its records' share of the shard, the header page and table, and a
     * block of slack per column at each end */
    uint64_t share = l->n_records ? (l->len - SHARD_DATA_OFF) / l->n_records * (r1 - r0) : 0;
    return ALIGN_UP(UNIT_HEAD + share + 2 * s->ncols * 4096, POOL_EXTENT_ALIGN);
}

/* ------------------------------------------------------------ images */

/* The shard's bytes held as segments at base (seg[0]: the header page). */
struct img {
    uint8_t *base;
    uint64_t len;
    uint32_t n;
    struct unit_seg seg[UNIT_MAX_SEGS];
};

/* A range of the shard's bytes a unit's records need. */
struct need {
    uint64_t lo, hi;
};

/* The segment of m that holds [lo, hi), or NULL. */
static const struct unit_seg *img_find(const struct img *m, uint64_t lo, uint64_t hi)
{
    for (uint32_t i = 0; i < m->n; i++) {
        const struct unit_seg *g = &m->seg[i];
        if (g->off <= lo && hi <= g->off + g->len)
            return g;
    }
    return NULL;
}

/* A window over [base_off, base_off + base_len) (a column's data, or its
 * index) that m holds, covering [lo, hi) (shard offsets): *p at window byte
 * *wlo, *whi its end, all relative to base_off. 1 when m holds it; else 0
 * with *need set. */
static int window(const struct img *m, uint64_t lo, uint64_t hi, uint64_t base_off,
                  uint64_t base_len, const uint8_t **p, uint64_t *wlo, uint64_t *whi,
                  struct need *need)
{
    if (lo == hi) { /* nothing to read: an empty window where it would be */
        *p = m->base;
        *wlo = *whi = lo - base_off;
        return 1;
    }
    const struct unit_seg *g = img_find(m, lo, hi);
    if (!g) {
        *need = (struct need){lo, hi};
        return 0;
    }
    uint64_t a = MAX(g->off, base_off), b = MIN(g->off + g->len, base_off + base_len);
    *p = m->base + g->at + (a - g->off);
    *wlo = a - base_off;
    *whi = b - base_off;
    return 1;
}

/* Column c of g (header geometry) seen through m for records [r0, r1):
 * *out gets its windows as far as m holds them; what it still needs goes
 * to *need (lo == hi: nothing), its kind in *is_index. 0, or CXLP_ECORRUPT
 * for index entries that do not check out. */
static int col_view(const struct shard *g, uint32_t c, const struct img *m, uint64_t r0,
                    uint64_t r1, struct shard_col *out, struct need *need, int *is_index)
{
    const struct shard_col *gc = &g->col[c];
    *out = *gc;
    *need = (struct need){0, 0};
    *is_index = 0;
    if (gc->kind == SHARD_KIND_FIXED) {
        uint64_t lo = gc->data_off + r0 * gc->record_size, hi = gc->data_off + r1 * gc->record_size;
        window(m, lo, hi, gc->data_off, gc->data_len, &out->data, &out->lo, &out->hi, need);
        return 0;
    }
    const uint64_t n = gc->n_records, last = r1 < n ? r1 : r1 - 1;
    const uint64_t b0 = r0 / SHARD_BLOCK, bl = last / SHARD_BLOCK, io = gc->index_off;
    *is_index = 1;
    if (!window(m, io + b0 * SHARD_DIRENT_BYTES, io + (bl + 1) * SHARD_DIRENT_BYTES, io,
                gc->index_len, &out->index, &out->dir_lo, &out->dir_hi, need))
        return 0;
    uint64_t e[2][2];
    const uint64_t bs[2] = {b0, bl};
    for (int j = 0; j < 2; j++) {
        memcpy(e[j], out->index + (bs[j] * SHARD_DIRENT_BYTES - out->dir_lo), 16);
        if (!shard_dirent_ok(gc, bs[j], e[j][0], e[j][1]))
            return CXLP_ECORRUPT;
    }
    uint64_t dlo = (e[0][1] & SHARD_POS_MASK) + (r0 % SHARD_BLOCK) * (e[0][1] >> 56);
    uint64_t dhi = (e[1][1] & SHARD_POS_MASK) + (last % SHARD_BLOCK + 1) * (e[1][1] >> 56);
    if (dlo >= dhi || dhi > gc->index_len)
        return CXLP_ECORRUPT;
    if (!window(m, io + dlo, io + dhi, io, gc->index_len, &out->dl, &out->dl_lo, &out->dl_hi,
                need))
        return 0;
    uint64_t start, end = gc->data_len;
    if (shard_var_start(out, r0, &start) || (r1 < n && shard_var_start(out, r1, &end)) ||
        start > end || end > gc->data_len)
        return CXLP_ECORRUPT;
    *is_index = 0;
    window(m, gc->data_off + start, gc->data_off + end, gc->data_off, gc->data_len, &out->data,
           &out->lo, &out->hi, need);
    return 0;
}

static int need_cmp(const void *a, const void *b)
{
    const struct need *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/* Lays out m (base unset) for the needs v[0..n) of a shard of geometry g:
 * each need widened to whole blocks, the pages of sums those blocks need
 * (a sums area), merged where they touch, each segment at a 4 KiB aligned
 * offset after UNIT_HEAD; seg[0] the header page. m->len: the copy's
 * bytes. CXLP_ECORRUPT for a need outside the blocks, CXLP_ERANGE for more
 * segments than a table holds. */
static int img_layout(const struct shard *g, struct need *v, size_t n, struct img *m)
{
    const unsigned sh = g->bsum_shift;
    struct need w[2 * UNIT_MAX_SEGS];
    size_t nw = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i].lo == v[i].hi)
            continue;
        if (v[i].lo < SHARD_DATA_OFF || v[i].hi > g->bend)
            return CXLP_ECORRUPT;
        uint64_t b0 = v[i].lo >> sh, b1 = (v[i].hi - 1) >> sh;
        if (nw + 2 > sizeof w / sizeof *w)
            return CXLP_ERANGE;
        w[nw++] = (struct need){MAX(b0 << sh, (uint64_t)SHARD_DATA_OFF),
                                MIN((b1 + 1) << sh, g->bend)};
        if (g->sums_off) /* the pages that hold blocks b0..b1's sums */
            w[nw++] = (struct need){g->sums_off + b0 / SHARD_PAGE_SUMS * SHARD_SUMS_PAGE,
                                    MIN(g->sums_off + (b1 / SHARD_PAGE_SUMS + 1) * SHARD_SUMS_PAGE,
                                        g->used)};
    }
    qsort(w, nw, sizeof *w, need_cmp);
    m->seg[0] = (struct unit_seg){0, SHARD_DATA_OFF, 0};
    m->n = 1;
    uint64_t at = UNIT_HEAD;
    for (size_t i = 0; i < nw; i++) {
        struct unit_seg *l = &m->seg[m->n - 1];
        /* a sums area's pages stay segments of their own (kept pages) */
        int same_side = !g->sums_off || (l->off >= g->sums_off) == (w[i].lo >= g->sums_off);
        if (m->n > 1 && w[i].lo <= l->off + l->len && same_side) {
            uint64_t end = MAX(l->off + l->len, w[i].hi);
            at += ALIGN_UP(end - l->off, 4096) - ALIGN_UP(l->len, 4096);
            l->len = end - l->off;
            continue;
        }
        if (m->n == UNIT_MAX_SEGS)
            return CXLP_ERANGE;
        m->seg[m->n++] = (struct unit_seg){w[i].lo, w[i].hi - w[i].lo, at};
        at += ALIGN_UP(w[i].hi - w[i].lo, 4096);
    }
    m->len = at;
    return 0;
}

/* Verifies what m holds of shard k (geometry g from the header page at
 * m's segment 0): every page of sums against its page sum first, then
 * every block against its sum. where names m in messages. */
static int img_verify(const cxlp_store *s, uint64_t k, const struct shard *g, const struct img *m,
                      const char *where)
{
    const unsigned sh = g->bsum_shift;
    const uint8_t *head = m->base; /* segment 0 */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t i = 1; i < m->n; i++) {
            const struct unit_seg *x = &m->seg[i];
            const uint8_t *p = m->base + x->at;
            uint64_t lo = x->off, hi = x->off + x->len;
            if (pass == 0) { /* the pages of a sums area it holds */
                if (!g->sums_off || hi <= g->sums_off)
                    continue;
                uint64_t a = MAX(lo, g->sums_off);
                if ((a - g->sums_off) % SHARD_SUMS_PAGE)
                    goto split;
                for (uint64_t q = (a - g->sums_off) / SHARD_SUMS_PAGE;
                     g->sums_off + q * SHARD_SUMS_PAGE < hi; q++) {
                    uint64_t plo = g->sums_off + q * SHARD_SUMS_PAGE, want;
                    uint64_t cnt = q * SHARD_PAGE_SUMS < g->n_bsums
                                   ? MIN((uint64_t)SHARD_PAGE_SUMS, g->n_bsums - q * SHARD_PAGE_SUMS)
                                   : 0;
                    if (!cnt || plo + cnt * 8 > hi)
                        goto split;
                    memcpy(&want, head + shard_bsum_off(g->n_cols) + q * 8, 8);
                    if (XXH3_64bits(p + (plo - lo), cnt * 8) != want)
                        return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 " (%s): "
                                      "page %" PRIu64 " of the block sums (bytes [%" PRIu64 ", %"
                                      PRIu64 ")) does not match its page sum", s->name, k, where,
                                      q, plo, plo + cnt * 8);
                }
                continue;
            }
            /* its blocks, each against its sum */
            if (g->sums_off)
                hi = MIN(hi, g->bend);
            for (uint64_t b = lo >> sh; lo < hi && (b << sh) < hi; b++) {
                uint64_t blo, bhi, want;
                if (b >= g->n_bsums)
                    goto split;
                shard_block_span(g, b, &blo, &bhi);
                if (blo >= bhi)
                    continue; /* block 0 of 4 KiB blocks: the header page's */
                if (blo < lo || bhi > x->off + x->len)
                    goto split;
                const uint8_t *sum;
                if (g->sums_off) {
                    const struct unit_seg *y =
                        img_find(m, g->sums_off + b * 8, g->sums_off + b * 8 + 8);
                    if (!y)
                        goto split;
                    sum = m->base + y->at + (g->sums_off + b * 8 - y->off);
                } else {
                    sum = head + shard_bsum_off(g->n_cols) + b * 8;
                }
                memcpy(&want, sum, 8);
                if (XXH3_64bits(p + (blo - x->off), bhi - blo) != want)
                    return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 " (%s): block %"
                                  PRIu64 " (bytes [%" PRIu64 ", %" PRIu64 ")) does not match its "
                                  "block sum", s->name, k, where, b, blo, bhi);
            }
            continue;
        split:
            return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 " (%s): segment %u "
                          "(bytes [%" PRIu64 ", %" PRIu64 ")) is not made of whole blocks or pages "
                          "of sums, or lacks their sums", s->name, k, where, i, x->off,
                          x->off + x->len);
        }
    }
    return 0;
}

/* ------------------------------------------------------------ sources */

/* Where a unit's bytes are read from: a whole copy of its shard in a
 * memory tier (read under an epoch pin), else its home copy. */
struct src {
    cxlp_store *s;
    uint64_t k;
    uint32_t tier;             /* the tier read */
    const uint8_t *base;       /* a memory copy; NULL: the home, off in its file */
    uint64_t off, word;
    uint64_t pin;              /* the epoch pinned for a memory copy */
    struct media_reader *r;
};

static int src_open(cxlp_store *s, uint64_t k, uint32_t not_tier, struct store_io *io,
                    struct src *x)
{
    *x = (struct src){.s = s, .k = k};
    x->pin = attach_pin_epoch(s->a);
    for (uint32_t i = 0; i < s->n_mem; i++) {
        uint32_t t = s->mem[i];
        uint64_t w = store_word(s, k, t);
        if (t == not_tier || !loc_present(w))
            continue;
        int rc = store_word_in_tier(s, k, t, loc_off(w), ALIGN_UP(s->loc[k].len, POOL_EXTENT_ALIGN));
        if (rc) {
            attach_unpin_epoch(s->a, x->pin);
            return rc;
        }
        x->tier = t;
        x->base = attach_tier(s->a, t)->base + loc_off(w);
        return 0;
    }
    /* the home copy stays while the store's generation pin holds the
     * dataset: no epoch pin across the I/O (it would hold back frees) */
    attach_unpin_epoch(s->a, x->pin);
    x->tier = store_home(s);
    x->word = store_word(s, k, x->tier);
    x->off = loc_off(x->word);
    if (x->tier >= attach_n_tiers(s->a) || !loc_present(x->word))
        return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": no copy in memory and "
                      "none at home", s->name, k);
    int rc = store_word_in_tier(s, k, x->tier, x->off, ALIGN_UP(s->loc[k].len, POOL_EXTENT_ALIGN));
    if (!rc)
        rc = store_tier_reader(s, k, x->tier, io, &x->r);
    return rc;
}

static void src_close(struct src *x)
{
    if (x->base)
        attach_unpin_epoch(x->s->a, x->pin);
    x->base = NULL;
}

/* Where the pages a store keeps of a shard's home copy (read once, then
 * taken by every unit of the shard that needs them) start: its variable-
 * size columns' indexes, which lie after all the data, and its sums area.
 * A unit needs a few index entries and a few sums; reading their whole
 * blocks for each unit of 256 KiB read 1.09x a dataset of variable-size
 * records instead of 1.0x. UINT64_MAX: nothing. */
static uint64_t keep_from(const struct shard *g)
{
    uint64_t from = g->sums_off ? g->sums_off : UINT64_MAX;
    for (uint32_t c = 0; c < g->n_cols; c++)
        if (g->col[c].kind == SHARD_KIND_VAR)
            from = MIN(from, g->col[c].index_off & ~(uint64_t)(SHARD_SUMS_PAGE - 1));
    return from;
}

/* The key of the 4 KiB page at shard offset off among the store's kept
 * pages: page q of a sums area is q + 1, as partial reads keep them. */
static uint64_t page_key(const struct shard *g, uint64_t off)
{
    if (g->sums_off && off >= g->sums_off)
        return (off - g->sums_off) / SHARD_SUMS_PAGE + 1;
    return (UINT64_C(1) << 40) | off / SHARD_SUMS_PAGE;
}

/* 1 when every page of segment x the store keeps (for x's home copy):
 * copied to dst. */
static int kept_pages(struct src *x, const struct shard *g, const struct unit_seg *sg,
                      uint8_t *dst)
{
    if (x->base || sg->off < keep_from(g) || sg->off % SHARD_SUMS_PAGE)
        return 0;
    for (uint64_t at = 0; at < sg->len; at += SHARD_SUMS_PAGE)
        if (!store_kept_page(x->s, x->k, page_key(g, sg->off + at), x->word, dst + at))
            return 0;
    return 1;
}

/* Keeps the pages m holds (verified) from where keep_from says. */
static void keep_pages(struct src *x, const struct shard *g, const struct img *m)
{
    const uint64_t from = keep_from(g);
    for (uint32_t i = 1; !x->base && i < m->n; i++) {
        const struct unit_seg *sg = &m->seg[i];
        if (sg->off < from || sg->off % SHARD_SUMS_PAGE)
            continue;
        for (uint64_t at = 0; at < sg->len; at += SHARD_SUMS_PAGE)
            store_keep_page(x->s, x->k, page_key(g, sg->off + at), x->word, m->base + sg->at + at);
    }
}

/* Reads every segment of m but the header page from x into m->base: from
 * the image had (verified; may be NULL) where it holds the segment, from
 * the store's kept pages (keep_pages), else from x. */
static int src_read(struct src *x, const struct img *m, const struct shard *sg_g,
                    const struct img *had, uint64_t *bytes, uint64_t *direct_bytes)
{
    uint64_t n = 0;
    if (x->base) {
        for (uint32_t i = 1; i < m->n; i++) {
            const struct unit_seg *g = &m->seg[i];
            memcpy(m->base + g->at, x->base + g->off, g->len);
            memset(m->base + g->at + g->len, 0, ALIGN_UP(g->len, 4096) - g->len);
            n += g->len;
        }
        *bytes += n;
        return 0;
    }
    struct media_read_range v[UNIT_MAX_SEGS];
    const uint64_t end = ALIGN_UP(x->s->loc[x->k].len, POOL_EXTENT_ALIGN);
    uint32_t nv = 0;
    for (uint32_t i = 1; i < m->n; i++) {
        const struct unit_seg *g = &m->seg[i];
        const struct unit_seg *h = had && had->base ? img_find(had, g->off, g->off + g->len) : NULL;
        if (h) { /* the index entries read to lay the copy out */
            memcpy(m->base + g->at, had->base + h->at + (g->off - h->off), g->len);
            memset(m->base + g->at + g->len, 0, ALIGN_UP(g->len, 4096) - g->len);
            continue;
        }
        if (kept_pages(x, sg_g, g, m->base + g->at))
            continue;
        /* whole pages: the extent is, and so is every segment's room */
        uint64_t len = MIN(ALIGN_UP(g->len, 4096), end - g->off);
        v[nv++] = (struct media_read_range){x->off + g->off, len, m->base + g->at};
        n += len;
    }
    int direct = 0;
    int rc = nv ? media_readv(x->r, v, nv, &direct) : 0;
    char why[ERRMSG_MAX];
    if (rc)
        return seterr(NULL, rc, "dataset %s shard %" PRIu64 ": reading %u ranges of its home copy "
                      "(tier %u, %s, at %#" PRIx64 "): %s", x->s->name, x->k, nv, x->tier,
                      attach_tier(x->s->a, x->tier)->path, x->off,
                      store_read_why(x->s, x->tier, rc, why, sizeof why));
    *bytes += n;
    if (direct)
        *direct_bytes += n;
    return 0;
}

/* The header page of x's shard into page (4 KiB aligned), checked into g
 * (columns in cols). */
static int src_head(struct src *x, uint8_t *page, struct shard *g, struct shard_col *cols,
                    uint64_t *bytes)
{
    cxlp_store *s = x->s;
    int kept = 0;
    if (x->base) {
        memcpy(page, x->base, SHARD_DATA_OFF);
    } else if (!(kept = store_kept_page(s, x->k, 0, x->word, page))) {
        int rc = media_read(x->r, x->off, SHARD_DATA_OFF, page, NULL);
        char why[ERRMSG_MAX];
        if (rc)
            return seterr(NULL, rc, "dataset %s shard %" PRIu64 ": reading its header page from "
                          "tier %u (%s): %s", s->name, x->k, x->tier,
                          attach_tier(s->a, x->tier)->path,
                          store_read_why(s, x->tier, rc, why, sizeof why));
        *bytes += SHARD_DATA_OFF;
    }
    int rc = store_head_check(s, x->k, page, g, cols, 0, x->base ? "memory copy" : "home copy");
    if (!rc && !x->base && !kept)
        store_keep_page(s, x->k, 0, x->word, page);
    return rc;
}

/* ------------------------------------------------------------ copies */

static int rc_name(cxlp_store *s, uint64_t u, int rc)
{
    if (rc == CXLP_ECORRUPT && !cxlp_errmsg(NULL)[0])
        return seterr(NULL, rc, "dataset %s unit %" PRIu64 ": index entries out of bounds",
                      s->name, u);
    if (rc == CXLP_ERANGE)
        return seterr(NULL, rc, "dataset %s unit %" PRIu64 ": its records lie in more than %u "
                      "ranges of its shard", s->name, u, UNIT_MAX_SEGS);
    return rc;
}

/* The layout of unit u's copy (shard k, records [r0, r1)), its header
 * geometry in *g (columns in gcols) and header page in head (4 KiB): the
 * index entries it needs are read from x into private scratch (*sc, its
 * base for free(), NULL when none was needed) and verified. */
static int plan_unit(cxlp_store *s, uint64_t u, uint64_t k, uint64_t r0, uint64_t r1,
                     struct src *x, uint8_t *head, struct shard *g, struct shard_col *gcols,
                     struct img *m, struct img *sc_out, struct copy_stat *cs)
{
    int rc = src_head(x, head, g, gcols, &cs->bytes);
    if (rc)
        return rc;
    if (!g->n_bsums)
        return seterr(NULL, CXLP_EUNSUPPORTED, "dataset %s shard %" PRIu64 ": shard format %u has "
                      "no block sums, so no part of it can be verified alone: `cxlpool rewrite` "
                      "writes it again in this build's format", s->name, k, g->version);
    struct need idx[2 * SHARD_MAX_COLS * 2], all[3 * SHARD_MAX_COLS * 2];
    size_t ni = 0;
    struct img sc = {.base = NULL};
    /* index entries first (directories, then deltas): they say where the
     * records' bytes are; two rounds at most */
    for (int round = 0;; round++) {
        size_t na = 0, fresh = 0;
        if (!sc.base) {
            sc.n = 1;
            sc.seg[0] = (struct unit_seg){0, SHARD_DATA_OFF, 0};
            sc.base = head;
        }
        for (uint32_t c = 0; c < g->n_cols && !rc; c++) {
            struct shard_col v;
            struct need nd;
            int is_index;
            rc = col_view(g, c, &sc, r0, r1, &v, &nd, &is_index);
            if (rc || nd.lo == nd.hi)
                continue;
            if (is_index) {
                idx[ni++] = nd;
                fresh++;
            }
            all[na++] = nd;
        }
        if (!rc && !fresh) {
            for (size_t i = 0; i < ni; i++)
                all[na++] = idx[i];
            rc = img_layout(g, all, na, m);
            break;
        }
        if (rc || round == 2) {
            rc = rc ? rc : CXLP_ECORRUPT;
            break;
        }
        /* the index entries known so far, read into scratch */
        if (sc.base != head)
            free(sc.base);
        sc.base = NULL;
        if ((rc = img_layout(g, idx, ni, &sc)))
            break;
        if (posix_memalign((void **)&sc.base, 4096, sc.len)) {
            sc.base = NULL;
            rc = seterr(NULL, -ENOMEM, "dataset %s: out of memory", s->name);
            break;
        }
        memcpy(sc.base, head, SHARD_DATA_OFF);
        if ((rc = src_read(x, &sc, g, NULL, &cs->bytes, &cs->direct_bytes)) ||
            (rc = img_verify(s, k, g, &sc, "index entries of a unit")))
            break;
        keep_pages(x, g, &sc);
    }
    if (sc.base == head)
        sc.base = NULL;
    if (rc) {
        free(sc.base);
        sc.base = NULL;
    }
    *sc_out = sc;
    return rc_name(s, u, rc);
}

/* Builds the view of a unit (records [r0, r1) of shard k) through image m
 * into *out (columns in cols): every column's windows; CXLP_ECORRUPT when
 * m lacks a byte its records need. */
static int unit_view(const cxlp_store *s, uint64_t k, const struct shard *g, const struct img *m,
                     uint64_t r0, uint64_t r1, struct shard *out, struct shard_col *cols)
{
    for (uint32_t c = 0; c < g->n_cols; c++) {
        struct need nd;
        int is_index;
        int rc = col_view(g, c, m, r0, r1, &cols[c], &nd, &is_index);
        if (rc || nd.lo != nd.hi)
            return seterr(NULL, CXLP_ECORRUPT, "dataset %s shard %" PRIu64 ": a unit's copy "
                          "lacks bytes [%" PRIu64 ", %" PRIu64 ") of column %u that records [%"
                          PRIu64 ", %" PRIu64 ") need", s->name, k, nd.lo, nd.hi, c, r0, r1);
    }
    *out = *g;
    out->base = m->base;
    out->extent_len = m->len;
    out->col = cols;
    return 0;
}

static void tab_write(uint8_t *copy, const struct img *m, uint64_t k, uint64_t u, uint64_t r0,
                      uint64_t r1)
{
    struct unit_tab *t = (struct unit_tab *)(copy + SHARD_DATA_OFF);
    memset(t, 0, SHARD_DATA_OFF);
    memcpy(t->magic, UNIT_TAB_MAGIC, 8);
    t->version = 1;
    t->n_seg = m->n;
    t->shard = k;
    t->unit = u;
    t->r0 = r0;
    t->r1 = r1;
    t->bytes = m->len;
    memcpy(t->seg, m->seg, m->n * sizeof *m->seg);
    t->checksum = XXH3_64bits(t, offsetof(struct unit_tab, seg) + m->n * sizeof *m->seg);
}

/* The table of the copy of unit u at base (len bytes), checked, into m. */
static int tab_read(const cxlp_store *s, uint64_t u, uint64_t k, uint64_t r0, uint64_t r1,
                    const uint8_t *base, uint64_t len, struct img *m)
{
    struct unit_tab t;
    const struct unit_tab *pt = (const struct unit_tab *)(base + SHARD_DATA_OFF);
    if (len < UNIT_HEAD)
        goto bad;
    if (s->nc)
        cache_invalidate(pt, SHARD_DATA_OFF);
    memcpy(&t, pt, sizeof t);
    if (memcmp(t.magic, UNIT_TAB_MAGIC, 8) || t.version != 1 || t.n_seg < 1 ||
        t.n_seg > UNIT_MAX_SEGS || t.shard != k || t.unit != u || t.r0 != r0 || t.r1 != r1 ||
        t.bytes != len)
        goto bad;
    memcpy(m->seg, pt->seg, t.n_seg * sizeof *m->seg);
    uint64_t sum = t.checksum;
    t.checksum = 0;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &t, sizeof t);
    XXH3_64bits_update(&st, m->seg, t.n_seg * sizeof *m->seg);
    if (XXH3_64bits_digest(&st) != sum)
        goto bad;
    m->base = (uint8_t *)base;
    m->len = len;
    m->n = t.n_seg;
    const uint64_t ext = ALIGN_UP(s->loc[k].len, POOL_EXTENT_ALIGN);
    if (m->seg[0].off != 0 || m->seg[0].len != SHARD_DATA_OFF || m->seg[0].at != 0)
        goto bad;
    for (uint32_t i = 1; i < m->n; i++) {
        const struct unit_seg *x = &m->seg[i];
        if (x->at < UNIT_HEAD || x->at % 4096 || !x->len || !range_ok(x->at, x->len, len) ||
            x->off < SHARD_DATA_OFF || !range_ok(x->off, x->len, ext))
            goto bad;
    }
    return 0;
bad:
    return seterr(NULL, CXLP_ECORRUPT, "dataset %s unit %" PRIu64 " (shard %" PRIu64 "): the "
                  "table of its copy does not check out", s->name, u, k);
}

int store_unit_copy(cxlp_store *s, uint64_t u, uint32_t t, unsigned flags, uint32_t drop_mask,
                    struct store_io *io, struct copy_stat *st)
{
    const struct store_units *su = at_load_acquire(&s->units);
    if (!s->tiered || !su || u >= su->pu.n_units || t >= attach_n_tiers(s->a) ||
        (attach_tier(s->a, t)->flags & TIER_STAGED))
        return seterr(NULL, CXLP_EARG, "dataset %s: unit %" PRIu64 " into tier %u: not a unit of a "
                      "dataset with units, or not a memory tier", s->name, u, t);
    cxlp_pool *wp;
    int rc = store_pool_rw(s, &wp);
    if (rc)
        return rc;
    struct store_io tmp = {0};
    if (!io)
        io = &tmp;
    struct copy_stat cs = {0};
    const uint64_t so = s->ds.states_off, target = POOL_UNIT_TARGET | u;
    uint64_t k, r0, r1;
    store_unit_span(s, u, &k, &r0, &r1);
    struct src x;
    uint8_t *head = NULL;
    struct img m, sc = {.base = NULL};
    struct shard g;
    struct shard_col gcols[SHARD_MAX_COLS];
    struct pool_extent ext = {0, 0};
    int reserved = 0;
    if (loc_present(store_unit_word(s, u, t)) && !(flags & FETCH_KEEP) && !drop_mask) {
        rc = CXLP_EEXIST; /* nothing to do: the caller reads it */
        goto out_noread;
    }
    if (posix_memalign((void **)&head, 4096, SHARD_DATA_OFF)) {
        rc = seterr(NULL, -ENOMEM, "dataset %s: out of memory", s->name);
        goto out_noread;
    }
    if ((rc = src_open(s, k, UINT32_MAX, io, &x)))
        goto out_noread;
    if ((rc = plan_unit(s, u, k, r0, r1, &x, head, &g, gcols, &m, &sc, &cs)))
        goto out;
    for (;;) {
        rc = pool_copy_reserve(wp, so, target, t, m.len, &ext);
        if (rc == CXLP_EBUSY && (flags & FETCH_WAIT)) {
            src_close(&x); /* no pin held while we wait */
            rc = store_wait_copy(s, wp, target, t, m.len);
            if (rc == -EAGAIN) {
                if ((rc = src_open(s, k, UINT32_MAX, io, &x)))
                    goto out_noread;
                continue;
            }
            cs.waited = 1;
            if (rc == 0)
                rc = CXLP_EEXIST;
        }
        break;
    }
    if (rc == CXLP_EEXIST) {
        /* the copy is there: kept, and the others dropped, as asked */
        int r2 = 0;
        if (flags & FETCH_KEEP)
            r2 = pool_copy_keep(wp, so, target, t, 0);
        if (!r2 && drop_mask & ~(1u << t))
            r2 = pool_copy_drop(wp, so, target, drop_mask & ~(1u << t), 0, &cs.dropped);
        if (r2 && r2 != CXLP_ENOTFOUND)
            rc = seterr(NULL, r2, "%s", cxlp_errmsg(NULL));
        goto out;
    }
    if (rc) {
        rc = seterr(NULL, rc, "dataset %s unit %" PRIu64 ": %s", s->name, u, cxlp_errmsg(NULL));
        goto out;
    }
    reserved = 1;
    m.base = pool_base_rw(wp, (int)t) + ext.off;
    memcpy(m.base, head, SHARD_DATA_OFF);
    if (!(rc = src_read(&x, &m, &g, &sc, &cs.bytes, &cs.direct_bytes)) &&
        !(rc = img_verify(s, k, &g, &m, "new copy of a unit"))) {
        struct shard v;
        struct shard_col vcols[SHARD_MAX_COLS];
        keep_pages(&x, &g, &m);
        rc = unit_view(s, k, &g, &m, r0, r1, &v, vcols);
    }
    src_close(&x);
    if (!rc) {
        tab_write(m.base, &m, k, u, r0, r1);
        fault_point("copy-before-place");
        rc = pool_copy_place(wp, so, target, t, ext, !(flags & FETCH_KEEP), drop_mask,
                             &cs.dropped);
        reserved = 0; /* placed, or given back by the place */
        if (rc)
            rc = seterr(NULL, rc, "dataset %s unit %" PRIu64 ": %s", s->name, u,
                        cxlp_errmsg(NULL));
    }
out:
    src_close(&x);
out_noread:
    if (reserved) {
        char msg[ERRMSG_MAX];
        strlcpy0(msg, cxlp_errmsg(NULL), sizeof msg);
        pool_unreserve(wp, (int)t, ext);
        seterr(NULL, rc, "%s", msg);
    }
    free(head);
    free(sc.base);
    store_io_close(&tmp);
    if (st)
        *st = cs;
    return rc;
}

int store_unit_fetch(cxlp_store *s, uint64_t u, unsigned flags)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = CXLP_EFULL;
    uint32_t t = 0;
    for (uint32_t i = 0; i < s->n_mem; i++) {
        t = s->mem[i];
        for (int tries = 0; tries < 8; tries++) {
            rc = store_unit_copy(s, u, t, flags | FETCH_WAIT, 0, NULL, NULL);
            if (rc != CXLP_EFULL || !store_room_from_others(s, t))
                break;
        }
        if (rc != CXLP_EFULL)
            break;
    }
    if (rc == CXLP_EEXIST)
        rc = 0;
    if (rc == 0) {
        struct pool_tier_ctr *c = attach_ctr(s->a, t);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (c) {
            at_fetch_add_relaxed(&c->misses, 1);
            at_fetch_add_relaxed(&c->stall_ns, (uint64_t)(t1.tv_sec - t0.tv_sec) * 1000000000u +
                                                   (uint64_t)t1.tv_nsec - (uint64_t)t0.tv_nsec);
        }
    }
    return rc;
}

/* Shard k's header geometry, validated once from the header page at page
 * (a unit's copy), under mu (the lazily filled part of the store). */
static int ready_head(const cxlp_store *s, uint64_t k, const uint8_t *page, uint32_t t)
{
    cxlp_store *m = (cxlp_store *)s;
    pthread_mutex_lock(&m->mu);
    int rc = 0;
    if (!at_load_acquire(&m->ready[k])) {
        char where[64];
        snprintf(where, sizeof where, "a unit's copy in tier %u", t);
        rc = store_head_check(m, k, page, &m->shards[k], &m->cols[k * m->ncols], 1, where);
        if (!rc)
            at_store_release(&m->ready[k], 1); /* pairs with the acquires of the readers */
    }
    pthread_mutex_unlock(&m->mu);
    return rc;
}

/* The copy of unit u in tier t (word w) as an image, checked; k, r0, r1 its
 * span. */
static int unit_copy_img(const cxlp_store *s, uint64_t u, uint32_t t, uint64_t w, uint64_t k,
                         uint64_t r0, uint64_t r1, struct img *m)
{
    const struct store_units *su = s->units;
    uint64_t len = at_load_acquire(&su->pu.words[u * su->pu.stride]); /* stored before w */
    const struct attach_tier *at = attach_tier(s->a, t);
    uint64_t off = loc_off(w);
    if (!len || off < at->data_off || !range_ok(off - at->data_off, len, at->data_len))
        return seterr(NULL, CXLP_ECORRUPT, "dataset %s unit %" PRIu64 ": tier %u word names %#"
                      PRIx64 "+%" PRIu64 ", outside the tier", s->name, u, t, off, len);
    return tab_read(s, u, k, r0, r1, at->base + off, len, m);
}

int store_unit_locate(const cxlp_store *s, uint64_t u, struct shard *sh, struct shard_col *cols,
                      uint32_t *tier)
{
    const struct store_units *su = at_load_acquire(&s->units);
    if (!su || u >= su->pu.n_units)
        return CXLP_ENOTFOUND;
    for (uint32_t i = 0; i < s->n_mem; i++) {
        uint32_t t = s->mem[i];
        uint64_t w = store_unit_word(s, u, t);
        if (!loc_present(w))
            continue;
        uint64_t k, r0, r1;
        store_unit_span(s, u, &k, &r0, &r1);
        struct img m;
        int rc = unit_copy_img(s, u, t, w, k, r0, r1, &m);
        /* pairs with at_store_release(&ready[k]) in ready_head and make_ready */
        if (!rc && !at_load_acquire(&s->ready[k]))
            rc = ready_head(s, k, m.base, t);
        if (!rc)
            rc = unit_view(s, k, &s->shards[k], &m, r0, r1, sh, cols);
        if (rc)
            return rc;
        *tier = t;
        return 0;
    }
    return CXLP_ENOTFOUND;
}

int store_units_verify(cxlp_store *s, void (*report)(void *ctx, const char *line), void *ctx,
                       uint64_t *n_copies)
{
    *n_copies = 0;
    if (store_units_use(s, 0, 0))
        return 0; /* no units */
    const struct store_units *su = s->units;
    int first = 0;
    for (uint64_t u = 0; u < su->pu.n_units; u++) {
        for (uint32_t i = 0; i < s->n_mem; i++) {
            uint32_t t = s->mem[i];
            uint64_t pin = attach_pin_epoch(s->a);
            uint64_t w = store_unit_word(s, u, t);
            int rc = 0;
            if (loc_present(w)) {
                uint64_t k, r0, r1;
                store_unit_span(s, u, &k, &r0, &r1);
                struct img m;
                struct shard g, v;
                struct shard_col gcols[SHARD_MAX_COLS], vcols[SHARD_MAX_COLS];
                char where[64];
                snprintf(where, sizeof where, "copy of unit %" PRIu64 " in tier %u", u, t);
                if (!(rc = unit_copy_img(s, u, t, w, k, r0, r1, &m)) &&
                    !(rc = store_head_check(s, k, m.base, &g, gcols, 0, where)) &&
                    !(rc = img_verify(s, k, &g, &m, where)))
                    rc = unit_view(s, k, &g, &m, r0, r1, &v, vcols);
                ++*n_copies;
            }
            attach_unpin_epoch(s->a, pin);
            if (rc) {
                if (report)
                    report(ctx, cxlp_errmsg(NULL));
                if (!first)
                    first = rc;
            }
        }
    }
    return first;
}

int cxlp_store_stage_unit(cxlp_store *s, uint64_t budget, uint64_t *records, uint64_t *bytes)
{
    if (!s || !records || !bytes)
        return seterr(NULL, CXLP_EARG, "store_stage_unit: NULL argument");
    return store_unit_rule(s, budget, records, bytes);
}

int cxlp_store_units(cxlp_store *s, uint64_t *n_units, uint64_t *per_unit, uint64_t *copies,
                     size_t cap, size_t *n)
{
    if (!s || !n_units || !per_unit || !n || (cap && !copies))
        return seterr(NULL, CXLP_EARG, "store_units: NULL argument");
    uint32_t nt = attach_n_tiers(s->a);
    for (size_t t = 0; t < cap; t++)
        copies[t] = 0;
    *n = nt;
    *n_units = *per_unit = 0;
    if (!s->tiered)
        return 0;
    int rc = store_units_use(s, 0, 0);
    if (rc == CXLP_ENOTFOUND)
        return 0;
    if (rc)
        return rc;
    const struct store_units *su = s->units;
    *n_units = su->pu.n_units;
    *per_unit = su->pu.per_unit;
    for (uint64_t u = 0; u < su->pu.n_units; u++)
        for (uint32_t t = 0; t < nt && t < cap; t++)
            copies[t] += loc_present(store_unit_word(s, u, t));
    return 0;
}
