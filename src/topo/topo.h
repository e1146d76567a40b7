/*
 * topo.h - private interface of the topology layer: the handle behind
 * cxlp_topo, and the bounded sysfs readers and parsers it is built from.
 *
 * Everything under the sysfs root is untrusted text (a captured tree may be
 * damaged or hostile): every read is bounded by TOPO_READ_MAX, every number
 * is validated, every id is bounded by TOPO_MAX_NODE, and a file that cannot
 * be parsed leaves its figure unknown and adds a warning line.
 */
#ifndef CXLP_TOPO_H
#define CXLP_TOPO_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

#define TOPO_MAX_NODE 1023           /* node ids 0..TOPO_MAX_NODE */
#define TOPO_NODE_BITS (TOPO_MAX_NODE + 1)
#define TOPO_MAX_TIER 1048576        /* memory_tierK with K <= this */
#define TOPO_MAX_DEVS 4096           /* dax or cxl entries kept */
#define TOPO_MAX_WARN 32
#define TOPO_WARN_LEN 200
#define TOPO_READ_MAX 65536         /* longest sysfs file we accept */
#define TOPO_PATH_MAX 512           /* relative path inside the root */

/* A set of node ids 0..TOPO_MAX_NODE. */
struct topo_nodeset {
    uint8_t bits[TOPO_NODE_BITS / 8];
};

static inline int topo_nodeset_has(const struct topo_nodeset *s, uint64_t id)
{
    return id <= TOPO_MAX_NODE && (s->bits[id / 8] >> (id % 8)) & 1;
}

struct topo_node {
    struct cxlp_topo_node pub;      /* what cxlp_topo_node() hands out */
    int normal_memory;              /* in has_normal_memory: 1, 0, -1 unknown */
    char why_cxl[64];               /* evidence for pub.is_cxl, "" when 0 */
};

struct cxlp_topo {
    struct obj obj;
    char root[1024];
    int nodes_known;                /* the node directory was readable */
    struct topo_node *nodes;        /* sorted by id */
    size_t n_nodes;
    struct cxlp_topo_dax *dax;      /* sorted by name (natural order) */
    size_t n_dax, cap_dax;
    struct cxlp_topo_cxl *cxl;      /* sorted by name (natural order) */
    size_t n_cxl, cap_cxl;
    char warn[TOPO_MAX_WARN][TOPO_WARN_LEN];
    size_t n_warn;                  /* may exceed TOPO_MAX_WARN: the rest dropped */
};

/* Adds one warning line (a file that exists but could not be used). */
void topo_warn(struct cxlp_topo *t, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- sysfs.c: bounded reads and strict parsers (all named topo_*: the
 * library is one namespace, and libnuma.a already has a sysfs_read) ---- */

/* Reads the regular file rel (relative to the directory rootfd) into buf,
 * NUL-terminated. Returns its length, -ENOENT when absent, -EFBIG when it is
 * longer than cap - 1 bytes, -EINVAL when it is not a regular file, or
 * another -errno. Never blocks on a FIFO. */
long topo_read(int rootfd, const char *rel, char *buf, size_t cap);

/* Basename of the symlink rel's target into out (cap bytes). Returns 0,
 * -ENOENT when absent, -EINVAL when rel is not a link, -ENAMETOOLONG. */
int topo_link_base(int rootfd, const char *rel, char *out, size_t cap);

/* Builds a relative path with snprintf; -ENAMETOOLONG when it does not fit. */
int topo_path(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One unsigned number: decimal, or hex with a 0x prefix (what the CXL bus
 * prints); trailing whitespace allowed, nothing else. 0, -EINVAL, -ERANGE. */
int topo_parse_u64(const char *s, uint64_t *out);

/* One signed decimal in [min, max]; trailing whitespace allowed. */
int topo_parse_int(const char *s, long min, long max, long *out);

/* A kernel list ("0-3,8,10-11\n"; empty means the empty set). Each id must be
 * <= maxid (-ERANGE otherwise); a > b in "a-b" is -EINVAL. Sets the ids in
 * set when not NULL (then maxid must be <= TOPO_MAX_NODE). *count gets the
 * number of ids listed, duplicates counted again. */
int topo_parse_list(const char *s, uint64_t maxid, struct topo_nodeset *set, uint64_t *count);

/* "Node 0 MemTotal:  16384 kB" anywhere in a nodeN/meminfo text: bytes.
 * 0, -ENOENT (no MemTotal line), -EINVAL, -ERANGE. */
int topo_parse_meminfo(const char *s, uint64_t *bytes);

/* "node12" -> 12 (bounded by maxid); "dax3.1", "decoder0.2" split likewise.
 * Returns 0 when name is prefix followed by a decimal in [0, maxid]. */
int topo_parse_name_id(const char *name, const char *prefix, uint64_t maxid, uint64_t *id);

/* Natural order for names: "dax2.0" < "dax10.0". */
int topo_natural_cmp(const char *a, const char *b);

#endif
