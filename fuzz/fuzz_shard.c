/*
 * fuzz_shard.c - libFuzzer target for the shard header and index parser.
 *
 * The input bytes are one shard extent, as a pool would hold it: validate it,
 * read every record (each view must lie inside the data area), verify the
 * checksum. Any input must end in 0 or an error code, never in a crash or an
 * access outside the buffer. Seeds: fuzz/corpus/fuzz_shard/ (written by
 * `test_store_format --write-seeds DIR`).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <xxhash.h>

#include "store/shard.h"

static void scan(uint8_t *buf, size_t size)
{
    char err[512];
    struct shard s;
    if (shard_open(&s, buf, size, err, sizeof err) == 0) {
        uint64_t sum = 0;
        for (uint64_t i = 0; i < s.n_records; i++) {
            const uint8_t *p;
            uint64_t len;
            if (shard_record(&s, i, &p, &len) != 0) {
                shard_explain(&s, i, err, sizeof err);
                continue;
            }
            if (p < s.data || len > s.data_len || (uint64_t)(p - s.data) > s.data_len - len)
                abort();
            if (len)
                sum += p[0] + p[len - 1];
        }
        (void)shard_verify(&s, err, sizeof err);
        (void)sum;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* a private copy at an allocation of exactly size bytes, so ASan flags
     * any read past the extent */
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    scan(buf, size);
    /* Mutations rarely keep the header checksum right, which would stop
     * them at the first check: scan again with it recomputed, so the field
     * and index checks behind it are explored too. */
    if (size >= sizeof(struct shard_hdr)) {
        uint64_t h = XXH3_64bits(buf, offsetof(struct shard_hdr, hdr_checksum));
        memcpy(buf + offsetof(struct shard_hdr, hdr_checksum), &h, 8);
        scan(buf, size);
    }
    free(buf);
    return 0;
}
