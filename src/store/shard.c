/*
 * shard.c - shard header and index: validation, checksums, sealing.
 *
 * The format is described in shard.h and docs/store-format.md. This file
 * holds the parts that are not on the read hot path: shard_open (every header
 * field and directory entry checked against the extent, in an order where
 * each check only relies on fields checked before it), shard_verify, and the
 * encoder.
 *
 * Invariants a shard that passes shard_open satisfies:
 *   SHARD_HDR_BYTES <= data_off,  data_off + data_len <= index_off,
 *   index_off + index_len <= extent_len,  index_off % 8 == 0
 *   fixed: record_size > 0, n_records * record_size == data_len, index_len == 0
 *   var:   n_blocks == ceil(n_records / 64),
 *          n_blocks * 16 <= every block's delta position,
 *          delta position + count * width <= index_len,
 *          anchors non-decreasing and <= data_len
 * The read path re-checks what it loads from the directory, so these hold
 * for the entries it uses even if the shard changes after open.
 */
#include <stdio.h>
#include <inttypes.h>
#include <stddef.h>
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "store/shard.h"

#define HDR_SUM_BYTES offsetof(struct shard_hdr, hdr_checksum)

uint64_t shard_layout(void)
{
    const uint64_t facts[] = {
        sizeof(struct shard_hdr),
        offsetof(struct shard_hdr, n_records),
        offsetof(struct shard_hdr, checksum),
        offsetof(struct shard_hdr, hdr_checksum),
        SHARD_DATA_OFF, SHARD_BLOCK, SHARD_DIRENT_BYTES, 56 /* width shift */,
    };
    return layout_signature(facts, sizeof facts / sizeof facts[0]);
}

#define FAIL(rc, ...) (snprintf(err, errlen, __VA_ARGS__), (rc))
#define HOFF(f) ((unsigned)offsetof(struct shard_hdr, f))

int shard_open(struct shard *s, const void *base, uint64_t extent_len,
               char *err, size_t errlen)
{
    struct shard_hdr h;
    if (extent_len < sizeof h)
        return FAIL(CXLP_ECORRUPT, "extent of %" PRIu64 " bytes is shorter than a shard header",
                    extent_len);
    memcpy(&h, base, sizeof h); /* one private copy: later checks cannot race */
    if (memcmp(h.magic, SHARD_MAGIC, 8) != 0)
        return FAIL(CXLP_EFORMAT, "bad shard magic at offset 0");
    if (h.version != SHARD_VERSION)
        return FAIL(CXLP_EFORMAT, "shard format version %u at offset %u, this build reads %u",
                    h.version, HOFF(version), SHARD_VERSION);
    if (h.layout != shard_layout())
        return FAIL(CXLP_ELAYOUT, "shard layout signature %016" PRIx64 " at offset %u, this build has %016" PRIx64,
                    h.layout, HOFF(layout), shard_layout());
    uint64_t hs = XXH3_64bits(&h, HDR_SUM_BYTES);
    if (hs != h.hdr_checksum)
        return FAIL(CXLP_ECORRUPT, "shard header checksum mismatch at offset %u (stored %016" PRIx64 ", computed %016" PRIx64 ")",
                    HOFF(hdr_checksum), h.hdr_checksum, hs);
    if (h.kind != SHARD_KIND_FIXED && h.kind != SHARD_KIND_VAR)
        return FAIL(CXLP_ECORRUPT, "shard kind %u at offset %u", h.kind, HOFF(kind));
    if (h.data_off < sizeof h || !range_ok(h.data_off, h.data_len, extent_len))
        return FAIL(CXLP_ECORRUPT, "shard data [%" PRIu64 ", +%" PRIu64 ") (header offset %u) outside extent of %" PRIu64 " bytes",
                    h.data_off, h.data_len, HOFF(data_off), extent_len);
    if (h.index_off % 8 || h.index_off < h.data_off + h.data_len ||
        !range_ok(h.index_off, h.index_len, extent_len))
        return FAIL(CXLP_ECORRUPT, "shard index [%" PRIu64 ", +%" PRIu64 ") (header offset %u) outside extent of %" PRIu64 " bytes or overlapping data",
                    h.index_off, h.index_len, HOFF(index_off), extent_len);

    memset(s, 0, sizeof *s);
    s->base = base;
    s->extent_len = extent_len;
    s->data = (const uint8_t *)base + h.data_off;
    s->data_len = h.data_len;
    s->n_records = h.n_records;
    s->kind = h.kind;
    s->index = (const uint8_t *)base + h.index_off;
    s->index_off = h.index_off;
    s->index_len = h.index_len;
    s->checksum = h.checksum;

    if (h.kind == SHARD_KIND_FIXED) {
        uint64_t total;
        if (h.record_size == 0 || mul_overflow_u64(h.n_records, h.record_size, &total) ||
            total != h.data_len)
            return FAIL(CXLP_ECORRUPT, "fixed shard: %" PRIu64 " records of %" PRIu64 " bytes do not make data_len %" PRIu64 " (header offset %u)",
                        h.n_records, h.record_size, h.data_len, HOFF(record_size));
        if (h.index_len != 0 || h.n_blocks != 0)
            return FAIL(CXLP_ECORRUPT, "fixed shard has an index (header offset %u)", HOFF(index_len));
        s->record_size = h.record_size;
        return 0;
    }

    if (h.block_records != SHARD_BLOCK)
        return FAIL(CXLP_ECORRUPT, "index block of %" PRIu64 " records at header offset %u, expected %u",
                    h.block_records, HOFF(block_records), SHARD_BLOCK);
    uint64_t nb = h.n_records / SHARD_BLOCK + (h.n_records % SHARD_BLOCK != 0);
    if (h.n_blocks != nb || nb > h.index_len / SHARD_DIRENT_BYTES)
        return FAIL(CXLP_ECORRUPT, "index of %" PRIu64 " blocks (header offset %u) does not fit %" PRIu64 " records in %" PRIu64 " index bytes",
                    h.n_blocks, HOFF(n_blocks), h.n_records, h.index_len);
    if (h.n_records == 0 && h.data_len != 0)
        return FAIL(CXLP_ECORRUPT, "shard without records has %" PRIu64 " data bytes (header offset %u)",
                    h.data_len, HOFF(data_len));
    s->n_blocks = nb;
    uint64_t prev = 0;
    for (uint64_t b = 0; b < nb; b++) {
        const uint8_t *e = s->index + b * SHARD_DIRENT_BYTES;
        uint64_t anchor, pw;
        memcpy(&anchor, e, 8);
        memcpy(&pw, e + 8, 8);
        if (!shard_dirent_ok(s, b, anchor, pw) || anchor < prev)
            return FAIL(CXLP_ECORRUPT, "index block %" PRIu64 " at offset %" PRIu64 ": anchor %" PRIu64 ", deltas at %" PRIu64 " width %u out of bounds",
                        b, h.index_off + b * SHARD_DIRENT_BYTES, anchor, pw & SHARD_POS_MASK,
                        (unsigned)(pw >> 56));
        prev = anchor;
    }
    return 0;
}

int shard_verify(const struct shard *s, char *err, size_t errlen)
{
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, s->data, s->data_len);
    XXH3_64bits_update(&st, s->index, s->index_len);
    uint64_t h = XXH3_64bits_digest(&st);
    if (h != s->checksum)
        return FAIL(CXLP_ECORRUPT, "shard checksum mismatch over data [%" PRIu64 ", +%" PRIu64 ") and index [%" PRIu64 ", +%" PRIu64 "): stored %016" PRIx64 ", computed %016" PRIx64,
                    (uint64_t)(s->data - s->base), s->data_len, s->index_off, s->index_len,
                    s->checksum, h);
    return 0;
}

void shard_explain(const struct shard *s, uint64_t i, char *err, size_t errlen)
{
    if (i >= s->n_records) {
        snprintf(err, errlen, "record %" PRIu64 " past the shard's %" PRIu64, i, s->n_records);
        return;
    }
    uint64_t b = i / SHARD_BLOCK;
    uint64_t eoff = s->index_off + b * SHARD_DIRENT_BYTES;
    uint64_t anchor, pw;
    memcpy(&anchor, s->index + b * SHARD_DIRENT_BYTES, 8);
    memcpy(&pw, s->index + b * SHARD_DIRENT_BYTES + 8, 8);
    if (!shard_dirent_ok(s, b, anchor, pw)) {
        snprintf(err, errlen, "record %" PRIu64 ": index block %" PRIu64 " at offset %" PRIu64 " out of bounds (anchor %" PRIu64 ", deltas at %" PRIu64 " width %u)",
                 i, b, eoff, anchor, pw & SHARD_POS_MASK, (unsigned)(pw >> 56));
        return;
    }
    unsigned w = (unsigned)(pw >> 56);
    uint64_t doff = s->index_off + (pw & SHARD_POS_MASK) + (i % SHARD_BLOCK) * w;
    snprintf(err, errlen, "record %" PRIu64 ": offsets from index block %" PRIu64 " (delta at offset %" PRIu64 ") fall outside the data area of %" PRIu64 " bytes",
             i, b, doff, s->data_len);
}

uint64_t shard_index_len(const uint64_t *starts, uint64_t n)
{
    uint64_t len = 0;
    for (uint64_t f = 0; f < n; f += SHARD_BLOCK) {
        uint64_t cnt = MIN(SHARD_BLOCK, n - f);
        len += SHARD_DIRENT_BYTES + cnt * shard_width_for(starts[f + cnt - 1] - starts[f]);
    }
    return len;
}

static void store_le(uint8_t *p, uint64_t v, unsigned w)
{
    for (unsigned k = 0; k < w; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}

int shard_seal(uint8_t *base, uint64_t cap, uint32_t kind, uint64_t record_size,
               uint64_t n_records, uint64_t data_len, const uint64_t *starts,
               struct XXH3_state_s *data_hash, uint64_t *used)
{
    uint64_t index_len = 0, nb = 0;
    if (kind == SHARD_KIND_FIXED) {
        uint64_t total;
        if (record_size == 0 || mul_overflow_u64(n_records, record_size, &total) ||
            total != data_len)
            return CXLP_EARG;
    } else if (kind == SHARD_KIND_VAR) {
        for (uint64_t i = 0; i < n_records; i++)
            if (starts[i] > data_len || (i && starts[i] < starts[i - 1]))
                return CXLP_EARG;
        if (n_records && starts[0] != 0)
            return CXLP_EARG;
        if (!n_records && data_len)
            return CXLP_EARG;
        index_len = shard_index_len(starts, n_records);
        nb = (n_records + SHARD_BLOCK - 1) / SHARD_BLOCK;
    } else {
        return CXLP_EARG;
    }
    uint64_t need = shard_extent_need(data_len, index_len);
    if (data_len > UINT64_MAX / 2 || need > cap)
        return CXLP_EARG;
    uint64_t data_end = SHARD_DATA_OFF + data_len;
    uint64_t index_off = ALIGN_UP(data_end, 8);
    memset(base + data_end, 0, index_off - data_end);

    uint8_t *ix = base + index_off;
    uint64_t pos = nb * SHARD_DIRENT_BYTES;
    for (uint64_t b = 0; b < nb; b++) {
        uint64_t f = b * SHARD_BLOCK, cnt = MIN(SHARD_BLOCK, n_records - f);
        unsigned w = shard_width_for(starts[f + cnt - 1] - starts[f]);
        uint64_t pw = pos | ((uint64_t)w << 56);
        memcpy(ix + b * SHARD_DIRENT_BYTES, &starts[f], 8);
        memcpy(ix + b * SHARD_DIRENT_BYTES + 8, &pw, 8);
        for (uint64_t j = 0; j < cnt; j++)
            store_le(ix + pos + j * w, starts[f + j] - starts[f], w);
        pos += cnt * w;
    }

    XXH3_state_t local;
    XXH3_state_t *st = data_hash;
    if (!st) {
        st = &local;
        XXH3_64bits_reset(st);
        XXH3_64bits_update(st, base + SHARD_DATA_OFF, data_len);
    }
    XXH3_64bits_update(st, ix, index_len);

    struct shard_hdr h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, SHARD_MAGIC, 8);
    h.version = SHARD_VERSION;
    h.kind = kind;
    h.layout = shard_layout();
    h.record_size = kind == SHARD_KIND_FIXED ? record_size : 0;
    h.n_records = n_records;
    h.data_off = SHARD_DATA_OFF;
    h.data_len = data_len;
    h.index_off = index_off;
    h.index_len = index_len;
    h.block_records = kind == SHARD_KIND_VAR ? SHARD_BLOCK : 0;
    h.n_blocks = nb;
    h.checksum = XXH3_64bits_digest(st);
    h.hdr_checksum = XXH3_64bits(&h, HDR_SUM_BYTES);
    memset(base + sizeof h, 0, SHARD_DATA_OFF - sizeof h);
    memcpy(base, &h, sizeof h);
    *used = need;
    return 0;
}

int shard_build(uint8_t *buf, uint64_t cap, uint32_t kind, uint64_t record_size,
                const void *data, uint64_t data_len, const uint64_t *starts,
                uint64_t n_records, uint64_t *used)
{
    if (data_len > UINT64_MAX / 2 || SHARD_DATA_OFF + data_len > cap)
        return CXLP_EARG;
    if (data_len)
        memmove(buf + SHARD_DATA_OFF, data, data_len);
    return shard_seal(buf, cap, kind, record_size, n_records, data_len, starts, NULL, used);
}
