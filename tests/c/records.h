/*
 * records.h - self-checking records for the store's multi-process tests.
 * Record i of a dataset with seed s has a length drawn from (s, i) and
 * carries XXH3(i, seed s) in its first 8 bytes, then bytes derived from i:
 * a reader can check any record knowing only (s, i), with no shared state.
 */
#ifndef CXLP_TEST_RECORDS_H
#define CXLP_TEST_RECORDS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "cxlpool.h"

#define REC_FIXED_SIZE 1024u
#define REC_VAR_MAX 8192u

static inline uint64_t rec_len(int fixed, uint64_t seed, uint64_t i)
{
    if (fixed)
        return REC_FIXED_SIZE;
    uint64_t h = XXH3_64bits_withSeed(&i, sizeof i, seed ^ 0x5bd1e995u);
    return 8 + h % (REC_VAR_MAX - 8 + 1);
}

static inline void rec_fill(uint8_t *b, uint64_t len, uint64_t seed, uint64_t i)
{
    uint64_t h = XXH3_64bits_withSeed(&i, sizeof i, seed);
    memcpy(b, &h, 8);
    for (uint64_t k = 8; k < len; k++)
        b[k] = (uint8_t)(i * 31 + k);
}

/* 1 when the view holds record i of the dataset (fixed, seed). */
static inline int rec_ok(const void *data, uint64_t len, int fixed, uint64_t seed, uint64_t i)
{
    if (len != rec_len(fixed, seed, i))
        return 0;
    const uint8_t *b = data;
    uint64_t h = XXH3_64bits_withSeed(&i, sizeof i, seed), got;
    memcpy(&got, b, 8);
    if (got != h)
        return 0;
    for (uint64_t k = 8; k < len; k++)
        if (b[k] != (uint8_t)(i * 31 + k))
            return 0;
    return 1;
}

/* Writes records until about bytes of payload; returns the record count in
 * *n. 0 or the first error. *progress (may be NULL; shared memory in the
 * crash test) follows the payload bytes appended, then ends at UINT64_MAX
 * once the commit returned. */
static inline int rec_ingest(cxlp_pool *p, const char *name, int fixed, uint64_t seed,
                             uint64_t bytes, uint64_t shard_bytes, uint64_t *n,
                             volatile uint64_t *progress)
{
    struct cxlp_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.fixed = fixed;
    sc.n_fields = 1;
    strcpy(sc.fields[0].name, "bytes");
    sc.fields[0].dtype = CXLP_DT_U8;
    if (fixed) {
        sc.fields[0].ndim = 1;
        sc.fields[0].shape[0] = REC_FIXED_SIZE;
    }
    struct cxlp_writer_opts o = {.shard_bytes = shard_bytes};
    cxlp_writer *w;
    int rc = cxlp_writer_begin(p, name, &sc, &o, &w);
    if (rc)
        return rc;
    static uint8_t buf[16 * REC_VAR_MAX];
    uint64_t done = 0, i = 0;
    while (done < bytes && rc == 0) {
        if (fixed) {
            for (uint64_t k = 0; k < 16; k++)
                rec_fill(buf + k * REC_FIXED_SIZE, REC_FIXED_SIZE, seed, i + k);
            rc = cxlp_writer_append_fixed(w, buf, 16);
            i += 16;
            done += 16 * REC_FIXED_SIZE;
        } else {
            uint64_t len = rec_len(0, seed, i);
            rec_fill(buf, len, seed, i);
            rc = cxlp_writer_append(w, buf, len);
            i++;
            done += len;
        }
        if (progress)
            __atomic_store_n(progress, done, __ATOMIC_RELAXED);
    }
    if (rc) {
        cxlp_writer_abort(w);
        return rc;
    }
    *n = i;
    rc = cxlp_writer_commit(w);
    if (progress && rc == 0)
        __atomic_store_n(progress, UINT64_MAX, __ATOMIC_RELAXED);
    return rc;
}

/* 1 when every row of batch b (padded rows of a variable-size dataset:
 * b->lengths) is a record of the dataset (fixed, seed) not seen before among
 * its n records; marks them in seen[n]. 0 with *bad the first id that is
 * not. */
static inline int rec_batch_ok(const struct cxlp_batch *b, uint8_t *seen, uint64_t n, int fixed,
                               uint64_t seed, uint64_t *bad)
{
    for (uint32_t r = 0; r < b->rows; r++) {
        uint64_t id = b->ids[r];
        const uint8_t *row = (const uint8_t *)b->data + (uint64_t)r * b->row_bytes;
        uint64_t len = fixed ? REC_FIXED_SIZE : (uint64_t)b->lengths[r];
        if (id >= n || seen[id] || !rec_ok(row, len, fixed, seed, id)) {
            *bad = id;
            return 0;
        }
        seen[id] = 1;
    }
    return 1;
}

/* Takes loader l's batches until its end or an error, checking each with
 * rec_batch_ok (seen: n bytes); *got counts the records taken. 0 at the
 * end, the loader's error, or 1 when a record is wrong or repeated (said
 * on stderr, after what). */
static inline int rec_drain(cxlp_loader *l, uint8_t *seen, uint64_t n, int fixed, uint64_t seed,
                            uint64_t *got, const char *what)
{
    struct cxlp_batch *b;
    int rc;
    *got = 0;
    while ((rc = cxlp_loader_next(l, &b)) == 0 && b) {
        uint64_t bad = 0;
        int ok = rec_batch_ok(b, seen, n, fixed, seed, &bad);
        *got += b->rows;
        cxlp_loader_release(l, b);
        if (!ok) {
            fprintf(stderr, "%s: record %llu wrong or repeated\n", what, (unsigned long long)bad);
            return 1;
        }
    }
    return rc;
}

/* Expected record count of rec_ingest(fixed, seed, bytes). */
static inline uint64_t rec_count(int fixed, uint64_t seed, uint64_t bytes)
{
    uint64_t done = 0, i = 0;
    while (done < bytes) {
        if (fixed) {
            i += 16;
            done += 16 * REC_FIXED_SIZE;
        } else {
            done += rec_len(0, seed, i++);
        }
    }
    return i;
}

/* Creates pool name of two tiers for the tier tests: dram (shm, dram_size)
 * and its nvme home, the file /tmp/cxlp-NAME.tier of nvme_size (sizes as
 * cxlp_size_parse reads them); 4 MiB of metadata, lease_slots leases. */
static inline int rec_tier_pool(const char *name, const char *dram_size, const char *nvme_size,
                                uint32_t lease_slots, cxlp_pool **out)
{
    char dram[192], nvme[256];
    snprintf(dram, sizeof dram, "dram=shm:%s.d:%s", name, dram_size);
    snprintf(nvme, sizeof nvme, "nvme=file:/tmp/cxlp-%s.tier:%s", name, nvme_size);
    const char *tiers[] = {dram, nvme};
    struct cxlp_pool_opts po = {.meta_bytes = 4u << 20, .lease_slots = lease_slots};
    return cxlp_pool_create_tiered(name, tiers, 2, &po, out);
}

/* A loader's index source over a C sampler (ctx: the cxlp_sampler). */
static inline int rec_sampler_fn(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    *n = cxlp_sampler_next(ctx, out, max);
    return 0;
}

/* A loader over dataset s in the order cfg (*sm, for cxlp_sampler_free)
 * with opts o: variable-size records (fixed 0) collated PAD to
 * REC_VAR_MAX. 0 or the failing call's code. */
static inline int rec_loader(cxlp_store *s, int fixed, const struct cxlp_sampler_config *cfg,
                             struct cxlp_loader_opts o, cxlp_sampler **sm, cxlp_loader **l)
{
    int rc = cxlp_sampler_create(cfg, sm);
    if (rc)
        return rc;
    if (!fixed) {
        o.collate = CXLP_COLLATE_PAD;
        o.seq_len = REC_VAR_MAX;
    }
    if ((rc = cxlp_loader_create(s, &o, rec_sampler_fn, *sm, l)))
        cxlp_sampler_free(*sm);
    return rc;
}


/* ---- a dataset of three fields: tokens (uint16, variable), label (int32),
 * text (str, variable), and documents of 10 records; record i's fields are
 * a function of (i, seed) */

static inline uint64_t mv_tokens(uint64_t i)
{
    return (i * 7) % 50;
}

static inline void mv_record(uint64_t i, uint64_t seed, uint16_t *tok, int32_t *label,
                             char *text, uint64_t *tlen)
{
    for (uint64_t j = 0; j < mv_tokens(i); j++)
        tok[j] = (uint16_t)(i + j * 3 + seed);
    *label = (int32_t)(uint32_t)(i * 2654435761u);
    *tlen = 0;
    for (uint64_t r = 0; r < i % 5; r++)
        *tlen += (uint64_t)sprintf(text + *tlen, "r%llu;", (unsigned long long)i);
}

/* Ingests n such records in shards of shard_bytes; 0 or the first error. */
static inline int mv_write(cxlp_pool *p, const char *name, uint64_t n, uint64_t seed,
                           uint64_t shard_bytes)
{
    struct cxlp_schema sc;
    memset(&sc, 0, sizeof sc);
    sc.n_fields = 3;
    strcpy(sc.fields[0].name, "tokens");
    sc.fields[0].dtype = CXLP_DT_U16;
    sc.fields[0].ndim = 1;
    strcpy(sc.fields[1].name, "label");
    sc.fields[1].dtype = CXLP_DT_I32;
    strcpy(sc.fields[2].name, "text");
    sc.fields[2].dtype = CXLP_DT_STR;
    sc.fields[2].ndim = 1;
    struct cxlp_writer_opts o = {.shard_bytes = shard_bytes};
    cxlp_writer *w;
    int rc = cxlp_writer_begin(p, name, &sc, &o, &w);
    if (rc)
        return rc;
    static uint16_t tok[100 * 50];
    static int32_t lab[100];
    static char text[100 * 64];
    int64_t ot[101], ox[101];
    for (uint64_t i0 = 0; i0 < n && !rc; i0 += 100) {
        uint64_t m = n - i0 < 100 ? n - i0 : 100, nt = 0, nx = 0;
        for (uint64_t k = 0; k < m; k++) {
            uint64_t tl;
            ot[k] = (int64_t)nt;
            ox[k] = (int64_t)nx;
            mv_record(i0 + k, seed, tok + nt, &lab[k], text + nx, &tl);
            nt += mv_tokens(i0 + k);
            nx += tl;
        }
        ot[m] = (int64_t)nt;
        ox[m] = (int64_t)nx;
        struct cxlp_column cols[3] = {
            {.data = tok, .len = nt * 2, .offsets = ot},
            {.data = lab, .len = m * 4},
            {.data = text, .len = nx, .offsets = ox},
        };
        rc = cxlp_writer_append_columns(w, m, cols);
    }
    int64_t docs[(n + 9) / 10 + 1];
    uint64_t nd = 0;
    for (uint64_t i = 0; i < n; i += 10)
        docs[nd++] = (int64_t)i;
    docs[nd] = (int64_t)n;
    if (!rc)
        rc = cxlp_writer_set_docs(w, docs, nd);
    if (rc) {
        cxlp_writer_abort(w);
        return rc;
    }
    return cxlp_writer_commit(w);
}

/* How many of records [from, from + n) read back right, every field, with
 * cxlp_store_read_field_copy (the first wrong one ends the count). */
static inline uint64_t mv_read_ok(cxlp_store *s, uint64_t from, uint64_t n, uint64_t seed)
{
    uint16_t tok[50], got[64];
    int32_t lab;
    char text[64];
    uint64_t tl, len;
    for (uint64_t i = from; i < from + n; i++) {
        mv_record(i, seed, tok, &lab, text, &tl);
        if (cxlp_store_read_field_copy(s, i, 0, got, sizeof got, &len) ||
            len != mv_tokens(i) * 2 || memcmp(got, tok, len) ||
            cxlp_store_read_field_copy(s, i, 1, got, sizeof got, &len) || len != 4 ||
            memcmp(got, &lab, 4) ||
            cxlp_store_read_field_copy(s, i, 2, got, sizeof got, &len) || len != tl ||
            memcmp(got, text, tl))
            return i - from;
    }
    return n;
}

#endif
