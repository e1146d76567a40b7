/*
 * pool_format.h - the pool's on-media layout (shared by every process and,
 * over a CXL switch, every host that maps the pool). docs/pool-format.md is
 * the prose version; this header is the authority.
 *
 *   [0, 4096)                     header page (struct pool_hdr)
 *   [lease_off, +lease_slots*64)  lease table, one cacheline per attachment
 *   [cat_off, +cat_bytes)         catalog slot 0
 *   [cat_off+cat_bytes, +cat_bytes) catalog slot 1
 *   [data_off, data_off+data_len) data area: extents, 4 KiB aligned;
 *                                 data_off is 2 MiB aligned (devdax, THP)
 *
 * Invariants (checked at open and by pool_check):
 *   hdr_size = 4096, lease_off = 4096, lease_off % 4096 = 0
 *   cat_off >= lease_off + lease_slots * 64, cat_off % 4096 = 0
 *   data_off >= cat_off + 2 * cat_bytes, data_off % 2 MiB = 0
 *   data_off + data_len <= size <= media size, data_len % 4096 = 0
 *   catalog slot (gen & 1) holds the blob of generation gen
 *
 * The header splits into an immutable part (covered by checksum, written
 * once at create) and mutable words, each in its own cacheline so that the
 * generation counter that every reader polls does not share a line with the
 * writer mutex that writers bounce between them.
 *
 * Rejected: a catalog that lives in place in shared memory (B-tree, linked
 * records). It would need readers to chase offsets written concurrently by a
 * writer, i.e. locks or per-record versioning; a copy-on-write blob flipped
 * by one generation store gives readers a consistent snapshot with one
 * checksum and no lock, and the catalog is small (datasets and shards number
 * thousands, not millions).
 */
#ifndef CXLP_POOL_FORMAT_H
#define CXLP_POOL_FORMAT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "pool/pool.h"

#define POOL_MAGIC "CXLPOOL"           /* 8 bytes with the NUL */
#define POOL_FORMAT_VERSION 1u
#define POOL_HDR_SIZE 4096u
#define POOL_DATA_ALIGN (2ull << 20)
#define POOL_LEASE_SIZE 64u
#define POOL_MIN_CAT_BYTES 4096ull
#define POOL_DEF_CAT_BYTES (4ull << 20)
#define POOL_DEF_LEASES 256u
#define POOL_MAX_LEASES (1u << 20)
#define POOL_MAX_CAT_BYTES (1ull << 32)
#define CAT_MAGIC 0x00544143504c5843ULL /* "CXLPCAT\0" little-endian */

struct pool_hdr {
    /* immutable after create; checksum covers [0, offsetof(checksum)) */
    char magic[8];
    uint32_t version;
    uint32_t hdr_size;
    uint64_t layout_sig;
    uint8_t uuid[16];
    uint64_t size;             /* pool bytes; <= the media's size */
    uint64_t lease_off;
    uint64_t lease_slots;
    uint64_t cat_off;          /* slot i at cat_off + i * cat_bytes */
    uint64_t cat_bytes;
    uint64_t data_off;
    uint64_t data_len;
    uint64_t extent_align;     /* POOL_EXTENT_ALIGN */
    uint64_t created_unix;
    uint32_t media_kind;       /* media the pool was created on */
    uint32_t pad0;
    uint64_t checksum;         /* XXH3-64 */
    /* mutable */
    _Alignas(64) uint64_t gen;         /* current catalog generation */
    _Alignas(64) uint64_t boot[2];     /* boot id the lock/leases belong to */
    _Alignas(64) pthread_mutex_t lock; /* robust, process-shared writer lock */
};

/* One attachment's lease. owner = (seq << 32) | pid; pid 0 means free. seq
 * grows on every claim so a CAS that clears a dead holder cannot hit a new
 * holder that reused the pid (ABA). starttime is valid only when
 * st_seq == seq (written by the claimer after its CAS). */
struct pool_lease {
    uint64_t owner;
    uint64_t st_seq;
    uint64_t starttime;
    uint64_t min_gen;          /* smallest pinned generation; UINT64_MAX none */
    uint64_t pad[4];
};

/* Catalog blob: cat_hdr, then n_ds cat_ds, n_sh pool_shard, n_free
 * pool_extent, n_resv cat_resv, n_def cat_def, back to back. checksum is
 * XXH3-64 of the header bytes before it followed by the body. */
struct cat_hdr {
    uint64_t magic;
    uint64_t gen;
    uint64_t bytes;            /* whole blob, header included */
    uint64_t n_ds, n_sh, n_free, n_resv, n_def;
    uint64_t checksum;
};

struct cat_ds {
    struct pool_dataset d;
    uint64_t first_shard;      /* index into the shard array */
};

struct cat_resv {
    uint64_t off, len;
    uint64_t pid, starttime;   /* owner process */
};

struct cat_def {
    uint64_t off, len;
    uint64_t freed_gen;        /* generation whose catalog dropped it */
};

#endif
