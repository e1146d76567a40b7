/*
 * wire.h - the messages of remote pools (docs/remote.md): what a client of
 * `cxlpool serve` sends and what it gets back, encoded and decoded over
 * plain bytes. No transport here: UCX carries the bytes (net/server.c,
 * net/client.c); this file only says what they mean, so that the decoders
 * can be fuzzed alone (fuzz/fuzz_wire.c).
 *
 * Glossary
 *   request   client -> server, one UCX active message (id WIRE_AM_REQ)
 *             whose header is the whole request; no data part.
 *   reply     server -> client, one active message (id WIRE_AM_REP): a
 *             header (status, message, payload length) and a data part of
 *             payload_len bytes: a listing, a shard table, or shard bytes.
 *   served    a dataset of the served pool at one catalog version; a READ
 *             names the version its shard table came from.
 *
 * Layout, little-endian, no padding:
 *   request  u32 magic "CXRQ", u16 version, u16 op, u64 id,
 *            u16 name_len, name, u16 token_len, token,
 *            READ and DOCS only: u64 ds_version, u64 shard, u64 off, u64 len
 *   reply    u32 magic "CXRS", u16 version, u16 op, u64 id, i32 status,
 *            u16 msg_len, msg, u64 payload_len
 *   LIST payload    u32 n, then n of: u16 name_len, name, u64 version,
 *                   n_records, data_bytes, stored_bytes, u32 n_shards,
 *                   u32 fixed, u64 record_size, n_docs, created_unix
 *   SHARDS payload  u64 ds_version, u64 n, then n of: u64 first_record,
 *                   n_records, bytes, data_len, checksum
 *   READ payload    the bytes [off, off + len) of the shard
 *   META payload    u64 ds_version, u32 fixed, u64 record_size, u32 n_fields,
 *                   then n_fields of: u16 name_len, name, u32 dtype, u32 ndim,
 *                   ndim u64 shape, u64 offset; then u64 n_docs, u64
 *                   docs_checksum (XXH3-64 of the document index's bytes)
 *   HELD payload    u64 ds_version, u64 n, then ceil(n / 8) bytes: bit k
 *                   (byte k / 8, bit k % 8) set when shard k has a copy in
 *                   a memory tier of the served pool; the bits past n zero
 *   DOCS payload    the bytes [off, off + len) of the document index (n_docs
 *                   + 1 int64, little-endian as the pool holds them); shard 0
 *
 * Invariants (what every decoder checks, whatever the bytes):
 *   - a decoder consumes exactly the bytes it is given: no trailing bytes,
 *     no field read past the end;
 *   - names are 1..WIRE_NAME_MAX bytes without NUL; a token is
 *     0..WIRE_TOKEN_MAX bytes and appears in HELLO only; a message is at
 *     most WIRE_MSG_MAX bytes;
 *   - a READ or DOCS asks for 1..WIRE_READ_MAX bytes, off + len without
 *     overflow (the server then bounds it by the served shard or document
 *     index: net/server.c); a DOCS names shard 0;
 *   - a schema has 1..CXLP_MAX_FIELDS fields, each named 1..31 bytes
 *     without NUL, a known dtype and 0..CXLP_MAX_DIMS dimensions;
 *   - a shard table is contiguous: first_record[k+1] = first_record[k] +
 *     n_records[k], data_len <= bytes, and its count fits the payload.
 *
 * Rejected: a text protocol (every length would be parsed twice), protobuf
 * or flatbuffers (a dependency for five messages), and carrying the shard
 * geometry (headers, columns) on the wire: the client reads a shard's own
 * bytes and verifies them with the shard format's checksums, so the wire
 * need not be trusted for integrity, only for bounds.
 */
#ifndef CXLP_NET_WIRE_H
#define CXLP_NET_WIRE_H

#include <stddef.h>
#include <stdint.h>

#include "cxlpool.h"

#define WIRE_REQ_MAGIC 0x51525843u  /* "CXRQ" */
#define WIRE_REP_MAGIC 0x53525843u  /* "CXRS" */
#define WIRE_VERSION 1u
#define WIRE_AM_REQ 11u             /* UCX active message ids */
#define WIRE_AM_REP 12u
#define WIRE_NAME_MAX 63u           /* a dataset or pool name (catalog: 64 with NUL) */
#define WIRE_TOKEN_MAX 256u
#define WIRE_MSG_MAX 400u
#define WIRE_READ_MAX (UINT64_C(16) << 20) /* bytes one READ may ask for */
#define WIRE_REQ_MAX (24u + 2u + WIRE_NAME_MAX + 2u + WIRE_TOKEN_MAX + 32u)
#define WIRE_REP_MAX (24u + 2u + WIRE_MSG_MAX + 8u)
#define WIRE_SHARD_BYTES 40u        /* one shard table entry */

enum wire_op {
    WIRE_HELLO = 1,   /* name: the pool; token: the shared secret */
    WIRE_LIST = 2,    /* the catalog */
    WIRE_SHARDS = 3,  /* name: a dataset; its shard table */
    WIRE_READ = 4,    /* name, ds_version, shard, off, len: shard bytes */
    WIRE_META = 5,    /* name: its schema and document index's size and digest */
    WIRE_DOCS = 6,    /* name, ds_version, off, len: document index bytes */
    WIRE_HELD = 7,    /* name: which of its shards the served pool has in memory */
};
#define WIRE_OP_LAST WIRE_HELD

struct wire_req {
    uint32_t op;
    uint64_t id;
    char name[WIRE_NAME_MAX + 1];  /* NUL-terminated */
    uint32_t token_len;
    uint8_t token[WIRE_TOKEN_MAX];
    uint64_t ds_version, shard, off, len;  /* READ, DOCS */
};

struct wire_rep {
    uint32_t op;                   /* the request's; 0 when it had none readable */
    uint64_t id;
    int32_t status;                /* 0 or a negative code */
    char msg[WIRE_MSG_MAX + 1];    /* NUL-terminated; empty when status 0 */
    uint64_t payload_len;
};

struct wire_shard {
    uint64_t first_record, n_records, bytes, data_len, checksum;
};

/* Encoders: write into buf (cap bytes, WIRE_REQ_MAX / WIRE_REP_MAX suffice)
 * and return the length, or 0 when a field breaks an invariant above. */
size_t wire_req_encode(const struct wire_req *r, uint8_t *buf, size_t cap);
size_t wire_rep_encode(const struct wire_rep *r, uint8_t *buf, size_t cap);

/* Decoders of untrusted bytes: 0, or CXLP_EBADINPUT with err naming the
 * field (err may be NULL). *r is fully written on success only. */
int wire_req_decode(const void *buf, size_t len, struct wire_req *r, char *err, size_t errlen);
int wire_rep_decode(const void *buf, size_t len, struct wire_rep *r, char *err, size_t errlen);

/* LIST payload: encode n infos into buf (NULL: only the length) and return
 * the length. Decode: writes at most cap infos, the count to *n (it may
 * exceed cap; infos beyond cap are checked and skipped). */
size_t wire_list_encode(const struct cxlp_dataset_info *infos, uint32_t n, uint8_t *buf);
int wire_list_decode(const void *buf, size_t len, struct cxlp_dataset_info *infos, size_t cap,
                     size_t *n, char *err, size_t errlen);

/* SHARDS payload: 16 + n * WIRE_SHARD_BYTES bytes. Decode writes at most
 * cap entries (out may be NULL with cap 0) and the count to *n. */
size_t wire_shards_encode(uint64_t ds_version, const struct wire_shard *s, uint64_t n,
                          uint8_t *buf);
int wire_shards_decode(const void *buf, size_t len, uint64_t *ds_version, struct wire_shard *out,
                       size_t cap, uint64_t *n, char *err, size_t errlen);

/* HELD payload: 16 + (n + 7) / 8 bytes (buf NULL: only the length). Decode
 * writes the bitmap to bits (cap bytes; it may be NULL with cap 0) when it
 * fits, the count to *n either way. */
size_t wire_held_encode(uint64_t ds_version, const uint8_t *bits, uint64_t n, uint8_t *buf);
int wire_held_decode(const void *buf, size_t len, uint64_t *ds_version, uint8_t *bits,
                     size_t cap, uint64_t *n, char *err, size_t errlen);

/* META payload: a dataset's schema, its document count and the digest of
 * its document index, at ds_version. Decode checks the schema's shape (the
 * invariants above); the caller still normalizes it (schema_normalize). */
struct wire_meta {
    uint64_t ds_version;
    struct cxlp_schema schema;
    uint64_t n_docs, docs_checksum;
};
size_t wire_meta_encode(const struct wire_meta *m, uint8_t *buf);
int wire_meta_decode(const void *buf, size_t len, struct wire_meta *m, char *err, size_t errlen);

/* "HELLO", "LIST", "SHARDS", "READ", "META", "DOCS", "HELD", "?" */
const char *wire_op_name(uint32_t op);

#endif
