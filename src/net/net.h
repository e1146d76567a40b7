/*
 * net.h - what the server and the client of remote pools share beyond the
 * wire format (wire.h): the token file, the url, and the client's raw
 * request, which the tests use to send bytes no encoder would produce.
 */
#ifndef CXLP_NET_H
#define CXLP_NET_H

#include <stddef.h>
#include <stdint.h>

#include "net/wire.h"

/* Reads the shared secret from path into tok (WIRE_TOKEN_MAX bytes), its
 * length to *len: a regular file owned by this user that neither group nor
 * others may access (mode 0600 or 0400), of 1..WIRE_TOKEN_MAX bytes after
 * a trailing newline is cut. 0, or CXLP_EARG / -errno with err naming the
 * file and the reason. */
int net_token_read(const char *path, uint8_t *tok, size_t *len, char *err, size_t errlen);

/* Splits "ucx://HOST:PORT/POOL": host (cap bytes), port 1..65535, pool (a
 * name of 1..WIRE_NAME_MAX bytes). 0 or CXLP_EARG naming the part. */
int net_url_parse(const char *url, char *host, size_t cap, int *port, char *pool, char *err,
                  size_t errlen);

/* Splits "ADDR:PORT" (PORT 0..65535). 0 or CXLP_EARG. */
int net_addr_parse(const char *s, char *host, size_t cap, int *port, char *err, size_t errlen);

struct cxlp_remote;
/* Sends req (len bytes, sent as they are: no encoding, no check) and waits
 * for its reply: the decoded header to *rep, and its payload (at most cap
 * bytes) to buf, its length to *got. 0 when a reply came (rep->status says
 * how the server took it), or the client's error (timeout, connection
 * lost, a malformed reply). */
int remote_raw(struct cxlp_remote *r, const void *req, size_t len, struct wire_rep *rep,
               void *buf, uint64_t cap, uint64_t *got);

/* A dataset's schema, document count and index digest (META), at the
 * dataset's current version (m->ds_version). 0 or the call's error. */
int remote_meta(struct cxlp_remote *r, const char *name, struct wire_meta *m);
/* Bytes [off, off + len) of name's document index at version ver (DOCS,
 * in requests of at most WIRE_READ_MAX). */
int remote_docs(struct cxlp_remote *r, const char *name, uint64_t ver, uint64_t off, uint64_t len,
                void *buf);
/* Bytes [off, off + len) of shard k of name at version ver (READ). */
int remote_read_at(struct cxlp_remote *r, const char *name, uint64_t ver, uint64_t k,
                   uint64_t off, uint64_t len, void *buf);
/* Which of name's n shards the served pool has in a memory tier: n bits
 * into bits (byte k / 8, bit k % 8), its version of the dataset to *ver.
 * CXLP_ENOTFOUND when it holds another number of shards. */
int remote_held(struct cxlp_remote *r, const char *name, uint64_t *ver, uint8_t *bits,
                uint64_t n);
/* "ucx://HOST:PORT/POOL" of the handle. */
const char *remote_url(const struct cxlp_remote *r);

#endif
