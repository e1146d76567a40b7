/*
 * pool_meta_v2.c - for side-by-side benchmarks against a build of pool
 * format 1 (before hosts: issue 8): writes to OUT the metadata bytes
 * [0, cat_off + 2 * cat_bytes) that make the format-1 pool file IN a
 * format-2 pool holding the same datasets at the same offsets. Swapping the
 * two metadata images in place (pwrite) lets both builds read the very same
 * data pages, which matters on a VM where two pools made minutes apart can
 * read 2x apart (their pages' host backing differs). bench/ab_same_pages.py
 * drives it. Leases are freed, reservations must be none.
 *
 * usage: pool_meta_v2 IN OUT
 *
 * Format 1, as bench needs it: header fields as in format 2 up to offset
 * 116, checksum at 120, the generation word at 128 (a plain generation);
 * lease slots of 64 bytes at 4096 (owner first); catalog blob as in format
 * 2 but reservations of 32 bytes.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>

#include "pool/pool_internal.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: pool_meta_v2 IN OUT\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY);
    uint8_t hdr[4096];
    if (fd < 0 || pread(fd, hdr, sizeof hdr, 0) != (ssize_t)sizeof hdr) {
        perror(argv[1]);
        return 1;
    }
    uint32_t version;
    uint64_t lease_slots, cat_off, cat_bytes, gen;
    memcpy(&version, hdr + 8, 4);
    memcpy(&lease_slots, hdr + 56, 8);
    memcpy(&cat_off, hdr + 64, 8);
    memcpy(&cat_bytes, hdr + 72, 8);
    memcpy(&gen, hdr + 128, 8);
    uint64_t meta = cat_off + 2 * cat_bytes;
    if (version != 1 || meta > (64u << 20)) {
        fprintf(stderr, "%s: not a format-1 pool\n", argv[1]);
        return 1;
    }
    uint8_t *in = malloc(meta), *out = calloc(1, meta);
    if (!in || !out || pread(fd, in, meta, 0) != (ssize_t)meta)
        return 1;
    close(fd);
    memcpy(out, in, meta);
    struct pool_hdr *h = (struct pool_hdr *)out;
    memset(out + 116, 0, POOL_HDR_SIZE - 116);
    h->version = POOL_FORMAT_VERSION;
    h->layout_sig = pool_layout_signature();
    h->flags = 0;
    h->expiry_ms = POOL_DEF_EXPIRY_MS;
    h->checksum = XXH3_64bits(h, offsetof(struct pool_hdr, checksum));
    h->gen = gen << POOL_EPOCH_BITS;
    for (uint64_t i = 0; i < lease_slots; i++) {
        struct pool_lease *l = (struct pool_lease *)(out + POOL_HDR_SIZE + i * POOL_LEASE_SIZE);
        l->owner &= ~0xffffffffull;
        l->min_gen = UINT64_MAX;
    }
    const uint8_t *slot = in + cat_off + (gen & 1) * cat_bytes;
    struct cat_hdr ch;
    memcpy(&ch, slot, sizeof ch);
    if (ch.magic != CAT_MAGIC || ch.n_resv) {
        fprintf(stderr, "%s: catalog unreadable or reservations present\n", argv[1]);
        return 1;
    }
    const uint8_t *p = slot + sizeof ch;
    struct cat c = {.gen = ch.gen, .n_ds = ch.n_ds, .n_sh = ch.n_sh, .n_fr = ch.n_free,
                    .n_def = ch.n_def};
    c.ds = (struct cat_ds *)p;
    p += c.n_ds * sizeof *c.ds;
    c.sh = (struct pool_shard *)p;
    p += c.n_sh * sizeof *c.sh;
    c.fr = (struct pool_extent *)p;
    p += c.n_fr * sizeof *c.fr;
    c.def = (struct cat_def *)p;
    uint8_t *dst = out + cat_off + (gen & 1) * cat_bytes;
    memset(dst, 0, cat_bytes);
    cat_encode(&c, dst);
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(out, 1, meta, f) != meta || fclose(f) != 0) {
        perror(argv[2]);
        return 1;
    }
    printf("%s: %llu metadata bytes of generation %llu, %llu datasets\n", argv[2],
           (unsigned long long)meta, (unsigned long long)gen, (unsigned long long)c.n_ds);
    return 0;
}
