/*
 * fuzz_pool.c - a pool image from untrusted bytes must never crash or hang
 * the library: open (read-only and writable), stat, list, the lease listing
 * (which reads the host registry), pool_check, a lookup of every listed
 * name, and one write transaction.
 *
 * The input is a pool image in two pieces: its first FUZZ_META bytes are the
 * start of the pool (header, host registry, leases, catalog slots), the rest
 * (but the last byte) the start of the data area at POOL_DATA_ALIGN, where
 * shard tables and states live. They are written to a memfd of FUZZ_IMG
 * bytes (the rest zero, like a sparse pool) opened through
 * file:/proc/self/fd/N. The image's writer lock word is cleared before
 * opening: a lock word crafted as "held by someone live" is a denial of
 * service that any process sharing a pool can cause (the writer gives up
 * after the lock timeout), not a memory safety bug, and would only make the
 * fuzzer report hangs.
 *
 * The last input byte is not part of the image but flags: bit 0 re-signs
 * the header checksum, bit 1 the current catalog's checksum, bit 2 every
 * dataset's shard table checksum (before the catalog's). Without them
 * nearly every mutation dies at a checksum and the structural checks behind
 * it (geometry, counts, extents, names, tables, location words) would go
 * unexplored.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include "pool/pool_internal.h"

#define FUZZ_IMG (4u << 20)
#define FUZZ_META (64u << 10)

/* successful opens, for the test that checks the seeds are valid pools */
static unsigned fuzz_opens;

static void ignore(void *ctx, const char *line)
{
    (void)ctx;
    (void)line;
}

static void exercise(cxlp_pool *p)
{
    struct cxlp_pool_stat st;
    cxlp_pool_stat(p, &st);
    struct cxlp_tier_info ti[POOL_MAX_TIERS];
    size_t nt;
    cxlp_pool_tiers(p, ti, POOL_MAX_TIERS, &nt);
    struct cxlp_lease_info li[4];
    size_t nl;
    cxlp_pool_leases(p, li, 4, &nl);
    struct cxlp_dataset_info inf[8];
    size_t n = 0;
    if (cxlp_pool_list(p, inf, 8, &n) == 0) {
        for (size_t i = 0; i < n && i < 8; i++) {
            struct pool_dataset ds;
            struct pool_shard *sh;
            struct attach *a;
            uint64_t gen;
            char name[sizeof inf[i].name];
            memcpy(name, inf[i].name, sizeof name);
            name[sizeof name - 1] = 0;
            if (pool_lookup(p, name, &ds, &sh, &a, &gen) == 0) {
                /* every extent handed out must lie inside the mapping */
                const uint8_t *base = attach_base(a);
                const uint8_t *b0 = attach_tier(a, (uint32_t)pool_ingest_tier(p))->base;
                volatile uint8_t sink = 0;
                for (uint32_t k = 0; k < ds.n_shards; k++)
                    if (sh[k].len && sh[k].off)
                        sink ^= b0[sh[k].off] ^ b0[sh[k].off + sh[k].len - 1];
                if (ds.docs.len)
                    sink ^= base[ds.docs.off + ds.docs.len - 1];
                (void)sink;
                attach_unpin(a, gen);
                attach_unref(a);
                free(sh);
            }
            /* the store layer on top: open checks every shard header */
            cxlp_store *s;
            if (cxlp_store_open(p, name, &s) == 0) {
                struct cxlp_view v;
                uint64_t c = cxlp_store_count(s);
                if (c)
                    cxlp_store_read(s, c - 1, &v);
                cxlp_store_close(s);
            }
        }
    }
    pool_check(p, ignore, NULL);
}

/* XXH3 of [off, off+len) of the memfd, or 0 when out of the image. */
static uint64_t hash_range(int fd, uint64_t off, uint64_t len)
{
    if (off > FUZZ_IMG || len > FUZZ_IMG - off)
        return 0;
    uint8_t *b = malloc(len ? len : 1);
    uint64_t h = 0;
    if (b && pread(fd, b, len, (off_t)off) == (ssize_t)len)
        h = XXH3_64bits(b, len);
    free(b);
    return h;
}

static void resign(int fd, int flags)
{
    struct pool_hdr h;
    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h)
        return;
    if (flags & 1) {
        h.checksum = XXH3_64bits(&h, offsetof(struct pool_hdr, checksum));
        if (pwrite(fd, &h.checksum, 8, offsetof(struct pool_hdr, checksum)) != 8)
            abort();
    }
    if (!(flags & 6))
        return;
    uint64_t slot;
    if (h.cat_bytes > FUZZ_IMG || h.cat_off > FUZZ_IMG)
        return;
    slot = h.cat_off + ((h.gen >> POOL_EPOCH_BITS) & 1) * h.cat_bytes;
    if (slot + sizeof(struct cat_hdr) > FUZZ_IMG)
        return;
    struct cat_hdr c;
    if (pread(fd, &c, sizeof c, (off_t)slot) != (ssize_t)sizeof c)
        return;
    uint64_t body = c.bytes > sizeof c ? c.bytes - sizeof c : 0;
    if (body > h.cat_bytes || slot + sizeof c + body > FUZZ_IMG)
        return;
    uint8_t *b = malloc(body ? body : 1);
    if (!b || pread(fd, b, body, (off_t)(slot + sizeof c)) != (ssize_t)body) {
        free(b);
        return;
    }
    if (flags & 4) {
        for (uint64_t i = 0; i < c.n_ds && (i + 1) * sizeof(struct cat_ds) <= body; i++) {
            struct cat_ds *d = (struct cat_ds *)(b + i * sizeof(struct cat_ds));
            d->table_checksum = hash_range(fd, d->table.off, d->table.len);
        }
        if (pwrite(fd, b, body, (off_t)(slot + sizeof c)) != (ssize_t)body)
            abort();
    }
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    XXH3_64bits_update(&st, &c, offsetof(struct cat_hdr, checksum));
    XXH3_64bits_update(&st, b, body);
    c.checksum = XXH3_64bits_digest(&st);
    free(b);
    if ((flags & 2) &&
        pwrite(fd, &c.checksum, 8, (off_t)(slot + offsetof(struct cat_hdr, checksum))) != 8)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static char spec[64];
    if (fd < 0) {
        fd = memfd_create("fuzz_pool", MFD_CLOEXEC);
        if (fd < 0)
            abort();
        snprintf(spec, sizeof spec, "file:/proc/self/fd/%d", fd);
    }
    if (ftruncate(fd, 0) || ftruncate(fd, FUZZ_IMG))
        abort();
    int flags = size ? data[size - 1] : 0;
    size = size ? size - 1 : 0;
    size_t n = size < FUZZ_META ? size : FUZZ_META;
    if (n && pwrite(fd, data, n, 0) != (ssize_t)n)
        abort();
    size_t rest = size > FUZZ_META ? size - FUZZ_META : 0;
    if (rest > FUZZ_IMG - POOL_DATA_ALIGN)
        rest = FUZZ_IMG - POOL_DATA_ALIGN;
    if (rest && pwrite(fd, data + FUZZ_META, rest, POOL_DATA_ALIGN) != (ssize_t)rest)
        abort();
    static const uint8_t zero[8];
    if (pwrite(fd, zero, sizeof zero, offsetof(struct pool_hdr, wlock)) != sizeof zero)
        abort();
    resign(fd, flags);

    cxlp_pool *p;
    struct cxlp_pool_opts ro = {.readonly = 1};
    if (cxlp_pool_open(spec, &ro, &p) == 0) {
        fuzz_opens++;
        exercise(p);
        cxlp_pool_close(p);
    }
    if (cxlp_pool_open(spec, NULL, &p) == 0) {
        fuzz_opens++;
        exercise(p);
        struct pool_extent e;
        if (pool_reserve(p, 0, 4096, &e) == 0)
            pool_unreserve(p, 0, e);
        /* placement on whatever the first dataset's states say */
        struct cxlp_dataset_info one[1];
        size_t n1;
        if (cxlp_pool_list(p, one, 1, &n1) == 0 && n1 > 0) {
            one[0].name[sizeof one[0].name - 1] = 0;
            struct pool_dataset ds;
            struct pool_shard *sh;
            struct attach *a;
            uint64_t gen;
            if (pool_lookup(p, one[0].name, &ds, &sh, &a, &gen) == 0) {
                uint64_t bytes;
                pool_copy_drop(p, ds.states_off, 0, ~0u, 0, &bytes);
                if (pool_copy_reserve(p, ds.states_off, 0, 0, 0, &e) == 0)
                    pool_unreserve(p, 0, e);
                /* and on its staging units, if the catalog lists them */
                struct pool_units u;
                if (pool_units_get(pool_attach(p), ds.states_off, &u) == 0) {
                    pool_copy_drop(p, ds.states_off, POOL_UNIT_TARGET, ~0u, 0, &bytes);
                    if (pool_copy_reserve(p, ds.states_off, POOL_UNIT_TARGET, 0, 8192, &e) == 0)
                        pool_unreserve(p, 0, e);
                }
                attach_unpin(a, gen);
                attach_unref(a);
                free(sh);
            }
        }
        struct cxlp_dataset_info inf[1];
        size_t nd;
        if (cxlp_pool_list(p, inf, 1, &nd) == 0 && nd > 0) {
            inf[0].name[sizeof inf[0].name - 1] = 0;
            cxlp_pool_remove(p, inf[0].name);
        }
        pool_check(p, ignore, NULL);
        cxlp_pool_close(p);
    }
    return 0;
}
