/*
 * pool_format.h - the pool's on-media layout (shared by every process and,
 * over a CXL switch, every host that maps the pool). docs/pool-format.md is
 * the prose version; this header is the authority.
 *
 * A pool is one or more media objects. Object 0, named by the pool spec,
 * holds the metadata; in a pool made of one tier it also holds that tier's
 * data. Each further tier of a tiered pool is an object of its own (a shm
 * object, a numa-bound shm object, a file, a dax device) whose first page
 * names the pool it belongs to.
 *
 *   object 0:
 *   [0, 8192)                     header pages: struct pool_hdr at 0
 *                                 (geometry, tiers, objects, then the
 *                                 mutable words), the host registry
 *                                 (POOL_HOSTS x struct pool_host) at
 *                                 POOL_HOST_OFF
 *   [lease_off, +lease_slots*64)  lease table, one cacheline per attachment
 *   [stage_off, +stage_bytes)     staging registry (tiered pools; else 0)
 *   [cat_off, +cat_bytes)         catalog slot 0
 *   [cat_off+cat_bytes, +cat_bytes) catalog slot 1
 *   [data_off, data_off+data_len) data area: extents, 4 KiB aligned;
 *                                 data_off is 2 MiB aligned (devdax, THP)
 *   object i > 0:
 *   [0, 4096)                     struct pool_objhdr (magic, pool uuid, i)
 *   [data_off, data_off+data_len) its data area (data_off = 2 MiB)
 *
 * Invariants (checked at open and by pool_check):
 *   hdr_size = 8192 = lease_off
 *   stage_off = ALIGN_UP(lease_off + lease_slots * 64, 4096), stage_bytes % 4096 = 0
 *   cat_off >= stage_off + stage_bytes, cat_off % 4096 = 0
 *   data_off >= cat_off + 2 * cat_bytes, data_off % 2 MiB = 0
 *   data_off + data_len <= size <= media size, data_len % 4096 = 0
 *   catalog slot (G & 1) holds the blob of generation G, where the header's
 *   gen word is (G << POOL_EPOCH_BITS) | writer epoch
 *   POOL_MIN_EXPIRY_MS <= expiry_ms <= POOL_MAX_EXPIRY_MS
 *   1 <= n_tiers <= POOL_MAX_TIERS, 1 <= n_objects <= POOL_MAX_OBJECTS,
 *   every tier's object < n_objects; object 0 holds metadata extents
 *
 * What lives where. The catalog is a small copy-on-write blob: the dataset
 * records, the free extents of every object, reservations and deferred
 * frees. A dataset's per-shard metadata is not in it: each dataset owns two
 * extents of object 0, written once at publish and referenced from its
 * record:
 *   shard table     n_shards x struct pool_shent (immutable, checksummed in
 *                   the record): what a reader needs without touching data
 *   shard states    n_shards x (1 + n_tiers) words updated in place:
 *                   word 0 counts accesses (heat, for hot_first), word 1+t
 *                   is the shard's location in tier t (pool/loc.h)
 * A location changes in place by one versioned word store, without a new
 * catalog, by the holder of the writer lock only (fenced like a publish:
 * place.c); the catalog changes only for what the location gives up or
 * takes (a reservation becomes a copy, a copy becomes a deferred free).
 *
 * Format 3 is format 2 of the hosts work (host registry, heartbeats, the
 * cross-host writer lock, coherence flag) with the tiers above; pools of
 * format 1 or 2 are refused at open with the conversion to use
 * (docs/pool-format.md).
 *
 * The header splits into an immutable part (covered by checksum, written
 * once at create) and mutable words, each in its own cacheline so that the
 * generation word that every reader polls does not share a line with the
 * writer lock that writers bounce between them, nor with the pool clock
 * that every attached process advances. docs/hosts.md says what the words
 * mean across hosts (src/pool/host.c owns them).
 *
 * Rejected: the catalog of format 1, one blob with a record per shard,
 * copied whole on every publish. At 10^6 shards (hundreds of TB of 256 MiB
 * shards) it is 48 MB per flip, and migration changes locations all the
 * time. Also rejected: shard records in place in shared memory as a B-tree
 * or linked records (readers would chase offsets a writer changes: locks or
 * per-record versioning); per-shard tables are immutable and location words
 * are single atomic words, so readers need neither.
 */
#ifndef CXLP_POOL_FORMAT_H
#define CXLP_POOL_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#include "pool/pool.h"

#define POOL_MAGIC "CXLPOOL"           /* 8 bytes with the NUL */
#define POOL_OBJ_MAGIC "CXLPOBJ"       /* first page of a tier object */
#define POOL_FORMAT_VERSION 3u
#define POOL_HDR_SIZE 8192u
#define POOL_DATA_ALIGN (2ull << 20)
#define POOL_LEASE_SIZE 64u
#define POOL_MIN_CAT_BYTES 4096ull
#define POOL_DEF_CAT_BYTES (4ull << 20)
#define POOL_DEF_LEASES 256u
#define POOL_MAX_LEASES (1u << 20)
#define POOL_MAX_CAT_BYTES (1ull << 32)
#define POOL_SPEC_MAX 232u
#define CAT_MAGIC 0x00334143504c5843ULL /* "CXLPCA3\0" little-endian */
/* A catalog that lists staging units (struct cat_units) or their deferred
 * copies: the blob of CAT_MAGIC followed by them. A build that does not
 * know units refuses it by its magic instead of misreading it; a catalog
 * with none is written as CAT_MAGIC, which every build of pool format 3
 * reads. */
#define CAT_MAGIC_UNITS 0x00554143504c5843ULL /* "CXLPCAU\0" */
/* A catalog that also lists ingest records (struct cat_ingest): the blob
 * of CAT_MAGIC_UNITS (its units' count, 0 when none), then the count of
 * ingest records and the records. Written only while some dataset has one,
 * so pools without shuffled ingests keep a catalog every build of format 3
 * reads; a build that does not know ingest records refuses it by its
 * magic. */
#define CAT_MAGIC_INGEST 0x00494143504c5843ULL /* "CXLPCAI\0" */
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
/* host registry: in the second header page */
#define POOL_HOST_OFF 4096u
#define POOL_HOSTS 48u

/* A tier: where copies of shards live, fastest first (tier 0). */
enum pool_tier_flag {
    TIER_PERSISTENT = 1u,      /* survives a reboot (file media): may be home */
    TIER_STAGED = 2u,          /* never read in place: copies are staged from it */
    TIER_REMOTE = 4u,          /* another host's pool (docs/remote.md): its object
                                  is a span of addresses, no media; the words of
                                  the datasets mirrored from a peer name their
                                  shards there (kind CXLP_TIER_REMOTE, staged) */
};
/* media_kind of a remote tier's object: its spec is the peers' urls */
#define POOL_OBJ_REMOTE 0x52454d4fu  /* "OMER" */
/* The span of a remote tier's object: addresses for the shards mirrored
 * from peers, allocated like extents (no memory behind them). */
#define POOL_REMOTE_SPAN (UINT64_C(1) << 50)

struct pool_tier {
    uint32_t kind;             /* enum cxlp_tier_kind */
    uint32_t object;           /* object whose data area holds its extents */
    int32_t node;              /* NUMA node of its memory; -1 unknown/none */
    uint32_t flags;            /* enum pool_tier_flag */
    uint64_t capacity;         /* bytes it may use (its object's data area) */
};

struct pool_object {
    char spec[POOL_SPEC_MAX];  /* media spec; object 0: the pool's own */
    uint32_t media_kind;       /* enum cxlp_media_kind */
    uint32_t pad;
    uint64_t size;             /* media bytes */
    uint64_t data_off;         /* extent area */
    uint64_t data_len;
};

/* Per tier counters, written with relaxed atomic adds by whoever stages,
 * evicts or reads; informational (stats, cxlpool top), never trusted. */
struct pool_tier_ctr {
    uint64_t hits, misses;     /* record reads served in place / after a fetch */
    uint64_t bytes_in;         /* bytes copied into the tier */
    uint64_t bytes_out;        /* bytes of copies dropped from the tier */
    uint64_t stall_ns;         /* time readers waited for a fetch into it */
    uint64_t fetches;          /* shards copied in */
    uint64_t evictions;        /* copies dropped */
    uint64_t probe;            /* the tier's probe verdicts (store/probe.c):
                                  4 slots of 16 bits, set once each by CAS */
};

struct pool_hdr {
    /* immutable after create; checksum covers [0, offsetof(checksum)) */
    char magic[8];
    uint32_t version;
    uint32_t hdr_size;
    uint64_t layout_sig;
    uint8_t uuid[16];
    uint64_t size;             /* object 0's bytes; <= the media's size */
    uint64_t lease_off;
    uint64_t lease_slots;
    uint64_t stage_off;        /* staging registry (tiered pools) */
    uint64_t stage_bytes;
    uint64_t cat_off;          /* slot i at cat_off + i * cat_bytes */
    uint64_t cat_bytes;
    uint64_t data_off;         /* object 0's data area */
    uint64_t data_len;
    uint64_t extent_align;     /* POOL_EXTENT_ALIGN */
    uint64_t created_unix;
    uint32_t media_kind;       /* media of object 0 */
    uint32_t flags;            /* POOL_F_* */
    uint64_t expiry_ms;        /* a heartbeat silent this long has expired */
    uint32_t n_tiers;
    uint32_t n_objects;
    uint32_t home;             /* home tier, POOL_NO_HOME when none */
    uint32_t pad;
    struct pool_tier tiers[POOL_MAX_TIERS];
    struct pool_object objects[POOL_MAX_OBJECTS];
    uint64_t checksum;         /* XXH3-64 */
    /* mutable */
    _Alignas(64) uint64_t gen;         /* (generation << POOL_EPOCH_BITS) | epoch */
    _Alignas(64) uint64_t wlock;       /* writer lock: 0 or (host+1, pid, beat) */
    _Alignas(64) uint64_t clock;       /* pool clock, in ticks */
    _Alignas(64) uint64_t loc_epoch;   /* location epoch (loc.h) */
    _Alignas(64) struct pool_tier_ctr ctr[POOL_MAX_TIERS];
};

/* First page of every object but object 0. */
struct pool_objhdr {
    char magic[8];             /* POOL_OBJ_MAGIC */
    uint32_t version;          /* POOL_FORMAT_VERSION */
    uint32_t index;            /* object index in the pool header */
    uint8_t uuid[16];          /* the pool's */
    uint64_t checksum;         /* XXH3-64 of the bytes before it */
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
    uint64_t min_epoch;        /* smallest pinned location epoch; UINT64_MAX none */
    uint64_t host;             /* the owner's domain key (struct pool_host) */
    uint64_t beat;             /* pool clock at the owner's last heartbeat */
    uint64_t pad;
};

/* One shard in a dataset's shard table. len is what the shard occupies from
 * its first byte (every copy has the same bytes); data_len and checksum are
 * the store layer's (payload bytes, checksum of data and index), kept here
 * so that a shard is described, staged and verified without reading it. */
struct pool_shent {
    uint64_t len;
    uint64_t n_records;
    uint64_t data_len;
    uint64_t checksum;
};

/* Catalog blob: cat_hdr, then n_ds cat_ds, n_free cat_free, n_resv cat_resv,
 * n_def cat_def, back to back. checksum is XXH3-64 of the header bytes
 * before it followed by the body. */
struct cat_hdr {
    uint64_t magic;
    uint64_t gen;
    uint64_t bytes;            /* whole blob, header included */
    uint64_t n_ds, n_free, n_resv, n_def;
    uint64_t checksum;
};

struct cat_ds {
    struct pool_dataset d;
    struct pool_extent table;  /* object 0: n_shards pool_shent */
    uint64_t table_checksum;   /* XXH3-64 of the table bytes */
    struct pool_extent states; /* object 0: n_shards * (1 + n_tiers) words */
};

struct cat_free {
    uint64_t off, len;
    uint32_t object, pad;
};

/* A reservation. target names the location word that will adopt it (a
 * copy being staged or migrated), so a reclaim after its owner died keeps an
 * extent the word already references; target_states 0 means none (ingest). */
struct cat_resv {
    uint64_t off, len;
    uint64_t pid, starttime;   /* owner process */
    uint64_t host;             /* owner's domain key */
    uint64_t lease;            /* owner's lease: (slot << 32) | seq */
    uint32_t object, tier;
    uint64_t target_states;    /* states extent offset of the dataset, or 0 */
    uint64_t target_shard;
};

enum cat_def_kind {
    DEF_EXTENT = 0,            /* [off, off+len) of object */
    DEF_COPIES = 1,            /* every copy a removed dataset's states name:
                                  off = its states extent, len = n_shards,
                                  target_shard = its table extent offset */
    DEF_UCOPIES = 2,           /* every copy a removed dataset's unit words
                                  name: off = its words extent, len = n_units
                                  (CAT_MAGIC_UNITS catalogs only) */
};

/* Staging units of one dataset (pool/units.c; docs/tiers.md, "Staging
 * units"): where the memory tiers hold parts of its shards instead of
 * whole shards, so that a shard of any size stages into a tier of a few
 * MiB. Record ids are cut into blocks of per_unit; a unit is one block's
 * records inside one shard (a block that crosses a shard's end makes two
 * units), numbered shard after shard. Its words are per unit, stride
 * 1 + n_tiers as a shard's states: word 0 the bytes of a copy of the unit
 * (0 until the first copy is placed; every copy of a unit has the same
 * bytes), word 1 + t its location in tier t (pool/loc.h; never the home
 * tier's: a unit's home copy is its shard's). Copies of units are cache or
 * kept like copies of shards, named in reservations and deferred frees by
 * target_shard = POOL_UNIT_TARGET | unit. */
struct cat_units {
    uint64_t states_off;       /* the dataset: its states extent */
    struct pool_extent words;  /* object 0: n_units * (1 + n_tiers) words */
    uint64_t per_unit;         /* records per block of ids */
    uint64_t n_units;
};
#define POOL_UNIT_TARGET (UINT64_C(1) << 63)

/* How a dataset was ingested, where that changes what its record ids mean
 * (docs/formats.md, "Shuffled ingest"): record k of the dataset is record
 * P(k) of the input, P the keyed bijection of [0, n_source) of
 * src/sample/feistel.h with key derive_key(seed, 0, INGEST_SHUFFLE_TAG, 0).
 * One per dataset at most, named by its states extent (a dataset with
 * shards; an empty dataset has nothing to shuffle). A record whose dataset
 * is gone is dropped when the catalog is written (cat_encode), so removal
 * and replacement need no step of their own. */
#define INGEST_SHUFFLED 1u
#define INGEST_SHUFFLE_TAG 0x5348554646ULL /* "SHUFF" */
struct cat_ingest {
    uint64_t states_off;       /* the dataset: its states extent */
    uint64_t flags;            /* INGEST_SHUFFLED */
    uint64_t seed;
    uint64_t n_source;         /* input records: the dataset's record count */
};
enum cat_clock { CLOCK_GEN = 0, CLOCK_EPOCH = 1 };

/* A free deferred until no lease can still see what it frees: freed <= the
 * smallest live pin of its clock (generation or location epoch). A deferred
 * copy (target_states != 0) is dropped without freeing when the word it was
 * taken from still names it: its writer died before clearing the word. */
struct cat_def {
    uint64_t off, len;
    uint64_t freed;
    uint32_t object, kind;     /* enum cat_def_kind */
    uint32_t clock, tier;      /* enum cat_clock; tier of a dropped copy */
    uint64_t target_states, target_shard;
};

#endif
