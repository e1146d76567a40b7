/*
 * pool_format.h - the pool's on-media layout (shared by every process and,
 * over a CXL switch, every host that maps the pool). docs/pool-format.md is
 * the prose version; this header is the authority.
 *
 *   [0, 4096)                     header page: struct pool_hdr at 0, the
 *                                 host registry (POOL_HOSTS x struct
 *                                 pool_host) at POOL_HOST_OFF
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
 *   catalog slot (G & 1) holds the blob of generation G, where the header's
 *   gen word is (G << POOL_EPOCH_BITS) | writer epoch
 *   POOL_MIN_EXPIRY_MS <= expiry_ms <= POOL_MAX_EXPIRY_MS
 *
 * The header splits into an immutable part (covered by checksum, written
 * once at create) and mutable words, each in its own cacheline so that the
 * generation word that every reader polls does not share a line with the
 * writer lock that writers bounce between them, nor with the pool clock
 * that every attached process advances. docs/hosts.md says what the words
 * mean across hosts (src/pool/host.c owns them).
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

#include <stddef.h>
#include <stdint.h>

#include "pool/pool.h"

#define POOL_MAGIC "CXLPOOL"           /* 8 bytes with the NUL */
#define POOL_FORMAT_VERSION 2u
#define POOL_HDR_SIZE 4096u
#define POOL_DATA_ALIGN (2ull << 20)
#define POOL_LEASE_SIZE 64u
#define POOL_MIN_CAT_BYTES 4096ull
#define POOL_DEF_CAT_BYTES (4ull << 20)
#define POOL_DEF_LEASES 256u
#define POOL_MAX_LEASES (1u << 20)
#define POOL_MAX_CAT_BYTES (1ull << 32)
#define CAT_MAGIC 0x00544143504c5843ULL /* "CXLPCAT\0" little-endian */
/* header flags */
#define POOL_F_NONCOHERENT 1u          /* hosts' caches are not coherent */
/* gen word = (generation << POOL_EPOCH_BITS) | epoch; the epoch changes at
 * every acquisition of the writer lock, so a holder that lost the lock
 * cannot publish (host.c) */
#define POOL_EPOCH_BITS 20
#define POOL_EPOCH_MASK ((UINT64_C(1) << POOL_EPOCH_BITS) - 1)
/* the pool clock advances one tick per POOL_TICK_MS of some live attacher */
#define POOL_TICK_MS 100u
#define POOL_DEF_EXPIRY_MS 30000u
#define POOL_MIN_EXPIRY_MS 500u
#define POOL_MAX_EXPIRY_MS (24u * 3600u * 1000u)
/* host registry: in the header page, after struct pool_hdr */
#define POOL_HOST_OFF 1024u
#define POOL_HOSTS 48u

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
    uint32_t flags;            /* POOL_F_* */
    uint64_t expiry_ms;        /* a heartbeat silent this long has expired */
    uint64_t checksum;         /* XXH3-64 */
    /* mutable */
    _Alignas(64) uint64_t gen;         /* (generation << POOL_EPOCH_BITS) | epoch */
    _Alignas(64) uint64_t wlock;       /* writer lock: 0 or (host+1, pid, beat) */
    _Alignas(64) uint64_t clock;       /* pool clock, in ticks */
};

/* One liveness domain (host.c): processes that share a host id, a boot and
 * a PID namespace, so can judge each other by pid. Claimed by CAS of key
 * from 0; the rest is written after the claim and read for messages and the
 * reboot rule only. */
struct pool_host {
    uint64_t key;              /* XXH3 of (host id, boot id, pid namespace); 0 free */
    uint64_t host_id;          /* the host's persistent id */
    uint8_t boot[16];          /* its boot id */
    uint64_t pidns;            /* inode of its PID namespace */
    uint64_t beat;             /* pool clock when one of its processes last ran */
    char name[16];             /* hostname, for messages */
};

/* One attachment's lease. owner = (seq << 32) | pid; pid 0 means free. seq
 * grows on every claim so a CAS that clears a dead holder cannot hit a new
 * holder that reused the pid (ABA). host and starttime are valid only when
 * st_seq == seq (written by the claimer after its CAS); beat is written
 * before the CAS (so a claim in progress looks fresh) and renewed by the
 * owner's heartbeat. */
struct pool_lease {
    uint64_t owner;
    uint64_t st_seq;
    uint64_t starttime;
    uint64_t min_gen;          /* smallest pinned generation; UINT64_MAX none */
    uint64_t host;             /* the owner's domain key (struct pool_host) */
    uint64_t beat;             /* pool clock at the owner's last heartbeat */
    uint64_t pad[2];
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
    uint64_t host;             /* owner's domain key */
    uint64_t lease;            /* owner's lease: (slot << 32) | seq */
};

struct cat_def {
    uint64_t off, len;
    uint64_t freed_gen;        /* generation whose catalog dropped it */
};

#endif
