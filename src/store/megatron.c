/*
 * megatron.c - validation of a Megatron-LM indexed dataset index (.idx), as
 * megatron/core/datasets/indexed_dataset.py (_IndexWriter) writes it:
 *
 *   offset  size        field
 *   0       9           magic "MMIDIDX\0\0"
 *   9       8           version, u64 LE, == 1
 *   17      1           dtype code (DType: 1 uint8, 2 int8, 3 int16, 4 int32,
 *                       5 int64, 6 float64, 7 float32, 8 uint16)
 *   18      8           sequence_count S, u64 LE
 *   26      8           document_count D, u64 LE (entries of document_indices)
 *   34      4*S         sequence_lengths, int32 LE (elements, not bytes)
 *   34+4S   8*S         sequence_pointers, int64 LE (byte offsets into .bin)
 *   34+12S  8*D         document_indices, int64 LE
 *   34+12S+8D  S        sequence_modes, int8 (multimodal datasets only)
 *
 * Invariants of an accepted index (what Megatron's builder writes):
 *   len == 34 + 12S + 8D, or + S more when sequence modes follow
 *   0 <= lengths[i];  0 <= pointers[i] <= pointers[i+1]
 *   pointers[i] + lengths[i] * itemsize <= bin_len
 *   D >= 1, docs[0] == 0, docs[D-1] == S, docs non-decreasing
 *
 * Alternatives rejected:
 *   - Trusting counts and reading lazily, as Megatron's numpy reader does: a
 *     truncated or corrupt index would then fail in the middle of an ingest
 *     (or read out of bounds); validating everything first costs one pass
 *     over 12 bytes per sequence and keeps the pool untouched on bad input.
 *   - Requiring contiguous pointers: merged datasets are contiguous, but
 *     the format does not promise it; we only need monotone and in range.
 */
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "store/megatron.h"


int megatron_dtype(int code, int *itemsize)
{
    static const int sizes[9] = {0, 1, 1, 2, 4, 8, 8, 4, 2};
    if (code >= 1 && code <= 8)
        *itemsize = sizes[code];
    switch (code) {
    case 1: return CXLP_DT_U8;
    case 2: return CXLP_DT_I8;
    case 3: return CXLP_DT_I16;
    case 4: return CXLP_DT_I32;
    case 5: return CXLP_DT_I64;
    case 6: return CXLP_DT_F64;
    case 7: return CXLP_DT_F32;
    case 8: return CXLP_DT_U16;
    default: return -1;
    }
}

typedef unsigned long long ull;

/* A truncated fixed field: names it, its offset and the file's size. */
static int truncated(char *err, size_t cap, const char *name, const char *field,
                     uint64_t off, uint64_t need, uint64_t len)
{
    return errbuf_set(err, cap, CXLP_EBADINPUT,
                "%s: truncated: field '%s' at byte offset %llu needs %llu bytes, "
                "file is %llu bytes", name, field, (ull)off, (ull)need, (ull)len);
}

int megatron_idx_parse(const uint8_t *buf, uint64_t len, uint64_t bin_len,
                       const char *idx, const char *bin, struct megatron_idx *out,
                       char *err, size_t cap)
{
    struct megatron_idx m;
    memset(&m, 0, sizeof m);
    if (len < MEGATRON_MAGIC_LEN)
        return truncated(err, cap, idx, "magic", 0, MEGATRON_MAGIC_LEN, len);
    if (memcmp(buf, MEGATRON_MAGIC, MEGATRON_MAGIC_LEN) != 0)
        return errbuf_set(err, cap, CXLP_EBADINPUT,
                    "%s: field 'magic' at byte offset 0: not MMIDIDX\\0\\0 (not a "
                    "Megatron-LM .idx)", idx);
    if (len < 17)
        return truncated(err, cap, idx, "version", 9, 8, len);
    uint64_t version = (uint64_t)megatron_rd64(buf + 9);
    if (version != 1)
        return errbuf_set(err, cap, CXLP_EUNSUPPORTED,
                    "%s: field 'version' at byte offset 9: %llu is not supported (1)",
                    idx, (ull)version);
    if (len < 18)
        return truncated(err, cap, idx, "dtype", 17, 1, len);
    m.code = buf[17];
    m.dtype = megatron_dtype(m.code, &m.itemsize);
    if (m.dtype < 0)
        return errbuf_set(err, cap, CXLP_EBADINPUT,
                    "%s: field 'dtype' at byte offset 17: code %d is not a Megatron "
                    "DType (1..8)", idx, m.code);
    if (len < 26)
        return truncated(err, cap, idx, "sequence_count", 18, 8, len);
    m.n_seqs = (uint64_t)megatron_rd64(buf + 18);
    if (len < MEGATRON_HEADER_LEN)
        return truncated(err, cap, idx, "document_count", 26, 8, len);
    m.n_doc_entries = (uint64_t)megatron_rd64(buf + 26);

    /* array extents, overflow-checked: a huge count is a truncation, never a
     * wrapped offset */
    uint64_t off = MEGATRON_HEADER_LEN, sz;
    static const char *const names[3] = {"sequence_lengths", "sequence_pointers",
                                         "document_indices"};
    const uint64_t counts[3] = {m.n_seqs, m.n_seqs, m.n_doc_entries};
    const uint64_t widths[3] = {4, 8, 8};
    const uint8_t *arrays[3];
    for (int k = 0; k < 3; k++) {
        if (mul_overflow_u64(counts[k], widths[k], &sz) || !range_ok(off, sz, len))
            return errbuf_set(err, cap, CXLP_EBADINPUT,
                        "%s: truncated: field '%s' (%llu entries of %llu bytes) at byte "
                        "offset %llu runs past the end of the file (%llu bytes)",
                        idx, names[k], (ull)counts[k], (ull)widths[k], (ull)off,
                        (ull)len);
        arrays[k] = buf + off;
        off += sz;
    }
    m.lengths = arrays[0];
    m.pointers = arrays[1];
    m.docs = arrays[2];
    if (len == off + m.n_seqs && m.n_seqs > 0)
        m.multimodal = 1;
    else if (len != off)
        return errbuf_set(err, cap, CXLP_EBADINPUT,
                    "%s: field 'document_indices' ends at byte offset %llu but the file "
                    "is %llu bytes (neither nothing nor %llu sequence modes follow)",
                    idx, (ull)off, (ull)len, (ull)m.n_seqs);

    uint64_t lens_off = MEGATRON_HEADER_LEN;
    uint64_t ptrs_off = lens_off + 4 * m.n_seqs;
    uint64_t docs_off = ptrs_off + 8 * m.n_seqs;
    int64_t prev_ptr = 0;
    uint64_t expect = 0; /* where the next sequence starts if contiguous */
    m.contiguous = 1;
    for (uint64_t i = 0; i < m.n_seqs; i++) {
        int32_t n = megatron_seq_len(&m, i);
        int64_t p = megatron_seq_ptr(&m, i);
        if (n < 0)
            return errbuf_set(err, cap, CXLP_EBADINPUT,
                        "%s: field 'sequence_lengths[%llu]' at byte offset %llu: %d is "
                        "negative", idx, (ull)i, (ull)(lens_off + 4 * i), n);
        if (p < 0 || p < prev_ptr)
            return errbuf_set(err, cap, CXLP_EBADINPUT,
                        "%s: field 'sequence_pointers[%llu]' at byte offset %llu: %lld "
                        "is %s", idx, (ull)i, (ull)(ptrs_off + 8 * i), (long long)p,
                        p < 0 ? "negative" : "less than the previous pointer");
        uint64_t bytes = (uint64_t)n * (uint64_t)m.itemsize;
        if (!range_ok((uint64_t)p, bytes, bin_len))
            return errbuf_set(err, cap, CXLP_EBADINPUT,
                        "%s: field 'sequence_pointers[%llu]' at byte offset %llu: "
                        "sequence %llu at %lld + %llu bytes (%d x %d) runs past the end "
                        "of %s (%llu bytes): the .bin is shorter than the .idx says",
                        idx, (ull)i, (ull)(ptrs_off + 8 * i), (ull)i, (long long)p,
                        (ull)bytes, n, m.itemsize, bin, (ull)bin_len);
        if ((uint64_t)p != expect)
            m.contiguous = 0;
        expect = (uint64_t)p + bytes;
        /* sequences may overlap, so the sum is not bounded by bin_len */
        if (add_overflow_u64(m.total_bytes, bytes, &m.total_bytes))
            return errbuf_set(err, cap, CXLP_EBADINPUT,
                        "%s: field 'sequence_lengths[%llu]' at byte offset %llu: the "
                        "sequences add up to more than 2^64 bytes", idx, (ull)i,
                        (ull)(lens_off + 4 * i));
        prev_ptr = p;
    }

    if (m.n_doc_entries == 0)
        return errbuf_set(err, cap, CXLP_EBADINPUT,
                    "%s: field 'document_count' at byte offset 26: 0, but Megatron "
                    "writes at least the leading 0 of 'document_indices'", idx);
    int64_t prev = 0;
    for (uint64_t i = 0; i < m.n_doc_entries; i++) {
        int64_t d = megatron_doc(&m, i);
        const char *why = NULL;
        if (i == 0 && d != 0)
            why = "the first entry must be 0";
        else if (d < prev)
            why = "less than the previous entry";
        else if ((uint64_t)d > m.n_seqs)
            why = "greater than 'sequence_count'";
        else if (i == m.n_doc_entries - 1 && (uint64_t)d != m.n_seqs)
            why = "the last entry must equal 'sequence_count'";
        if (why)
            return errbuf_set(err, cap, CXLP_EBADINPUT,
                        "%s: field 'document_indices[%llu]' at byte offset %llu: %lld: "
                        "%s (sequence_count %llu)", idx, (ull)i, (ull)(docs_off + 8 * i),
                        (long long)d, why, (ull)m.n_seqs);
        prev = d;
    }
    *out = m;
    return 0;
}
