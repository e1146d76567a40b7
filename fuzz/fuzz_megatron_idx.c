/* libFuzzer target: the Megatron-LM .idx validator over arbitrary bytes. The
 * first 8 bytes give the length of a fake .bin; the rest is the .idx. Every
 * accepted sequence is then read back as the importer would, within a .bin
 * of that length, so an accepted out-of-range pointer would be caught. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "store/megatron.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 8)
        return 0;
    uint64_t bin_len = 0;
    memcpy(&bin_len, data, 8);
    bin_len %= 1ULL << 20; /* the fake .bin is allocated below */
    struct megatron_idx m;
    char err[ERRMSG_MAX];
    int rc = megatron_idx_parse(data + 8, size - 8, bin_len, "fuzz.idx", "fuzz.bin", &m,
                                err, sizeof err);
    if (rc != 0) {
        if (rc != CXLP_EBADINPUT && rc != CXLP_EUNSUPPORTED)
            abort();
        return 0;
    }
    uint8_t *bin = malloc(bin_len ? bin_len : 1);
    if (!bin)
        return 0;
    memset(bin, 0xab, bin_len);
    uint64_t sum = 0, total = 0;
    for (uint64_t i = 0; i < m.n_seqs; i++) {
        uint64_t p = (uint64_t)megatron_seq_ptr(&m, i);
        uint64_t n = (uint64_t)megatron_seq_len(&m, i) * (uint64_t)m.itemsize;
        if (n)
            sum += bin[p] + bin[p + n - 1];
        total += n;
    }
    if (total != m.total_bytes || megatron_doc(&m, 0) != 0 ||
        (uint64_t)megatron_doc(&m, m.n_doc_entries - 1) != m.n_seqs)
        abort();
    free(bin);
    return (int)(sum & 0);
}
