/*
 * discover.c - what memory this machine has: NUMA nodes with and without
 * CPUs, their size, HMAT access figures, memory tiers, dax devices and the
 * CXL bus, read from sysfs under a root path.
 *
 * Sources (kernel ABI documents in parentheses):
 *   devices/system/node/{online,has_cpu,has_memory,has_normal_memory},
 *   nodeN/{meminfo,cpulist}, and the HMAT figures
 *   nodeN/access0/initiators/{read,write}_{latency,bandwidth}
 *                                               (stable/sysfs-devices-node)
 *   devices/virtual/memory_tiering/memory_tierK/nodelist
 *                                       (testing/sysfs-kernel-mm-memory-tiers;
 *                                        the document says "nodes", kernels
 *                                        since 6.1 create "nodelist": we read
 *                                        nodelist and fall back to nodes)
 *   bus/dax/devices/daxX.Y/{size,align,target_node,driver}
 *                                                   (testing/sysfs-bus-dax)
 *   bus/cxl/devices/{memX/{ram,pmem}/size,regionZ/size,decoderX.Y/size}
 *                                                   (testing/sysfs-bus-cxl)
 *
 * The CXL rule (docs/topology.md): a node is CXL when it has memory, has no
 * CPUs, and
 *     a dax device in kmem mode targets it, or
 *     a CXL region exists on the CXL bus, or
 *     its memory tier K > the largest tier of any node with CPUs
 * (the last is the conservative case: kmem-onlined memory lands in a slower
 * tier than DRAM even when the dax/cxl views are hidden). A memory-only node
 * without any of these (HBM in flat mode, a NUMA-emulated node, a far
 * socket's memory in a guest) is reported as memory-only, not as CXL.
 *
 * Backend per node: memory-only -> "numa" (mbind to the node: how kmem CXL
 * memory is used); node with CPUs and memory -> "shm" (local DRAM: the
 * default that emulates a CXL pool); no memory -> "none". devdax devices
 * map with the "devdax" backend.
 *
 * Invariants: node ids <= TOPO_MAX_NODE; nodes sorted by id and unique;
 * n_dax, n_cxl <= TOPO_MAX_DEVS; every figure is either validated or
 * CXLP_TOPO_UNKNOWN (tier -1, target_node -1, sizes 0 where the header says).
 * A missing file is silent; a present but unusable one adds a warning.
 *
 * Rejected: hwloc. hwloc 2.9 (Debian 12) reports HMAT memory attributes but
 * neither memory tiers nor CXL/dax roles (those arrive in 2.10), and it reads
 * the live machine only unless its HWLOC_FSROOT environment is set, which is
 * process-global: we need a root per call to test captured trees alongside
 * the live machine. libdaxctl/libcxl: extra runtime dependencies for a few
 * attribute files, and neither takes a root path either.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "topo/topo.h"

#define NODE_DIR "sys/devices/system/node"
#define TIER_DIR "sys/devices/virtual/memory_tiering"
#define DAX_DIR "sys/bus/dax/devices"
#define CXL_DIR "sys/bus/cxl/devices"

struct disc {
    struct cxlp_topo *t;
    int rootfd;
    char *buf;                       /* TOPO_READ_MAX bytes */
};

void topo_warn(struct cxlp_topo *t, const char *fmt, ...)
{
    if (t->n_warn < TOPO_MAX_WARN) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->warn[t->n_warn], TOPO_WARN_LEN, fmt, ap);
        va_end(ap);
    }
    t->n_warn++;
}

/* Reads rel into d->buf. 1 when there is text, 0 when absent (silent) or
 * unusable (warned). */
static int read_text(struct disc *d, const char *rel)
{
    long n = topo_read(d->rootfd, rel, d->buf, TOPO_READ_MAX);
    if (n >= 0)
        return 1;
    if (n != -ENOENT && n != -ENOTDIR)
        topo_warn(d->t, "%s: %s", rel,
                  n == -EFBIG    ? "longer than 64 KiB"
                  : n == -EINVAL ? "not a regular text file"
                                 : cxlp_strerror((int)n));
    return 0;
}

/* A number file: value, or CXLP_TOPO_UNKNOWN when absent or malformed. */
static uint64_t read_u64(struct disc *d, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static uint64_t read_u64(struct disc *d, const char *fmt, ...)
{
    char rel[TOPO_PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(rel, sizeof rel, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof rel)
        return CXLP_TOPO_UNKNOWN;
    if (!read_text(d, rel))
        return CXLP_TOPO_UNKNOWN;
    uint64_t v;
    int rc = topo_parse_u64(d->buf, &v);
    if (rc) {
        topo_warn(d->t, "%s: not a number", rel);
        return CXLP_TOPO_UNKNOWN;
    }
    /* our sentinel is never a real figure */
    if (v == CXLP_TOPO_UNKNOWN) {
        topo_warn(d->t, "%s: out of range", rel);
        return CXLP_TOPO_UNKNOWN;
    }
    return v;
}

/* A node list file into set. 1 known, 0 absent or malformed. */
static int read_nodeset(struct disc *d, const char *rel, struct topo_nodeset *set)
{
    memset(set, 0, sizeof *set);
    if (!read_text(d, rel))
        return 0;
    uint64_t count;
    int rc = topo_parse_list(d->buf, TOPO_MAX_NODE, set, &count);
    if (rc) {
        memset(set, 0, sizeof *set);
        topo_warn(d->t, "%s: %s", rel,
                  rc == -ERANGE ? "node id out of range 0..1023" : "not a node list");
        return 0;
    }
    return 1;
}

/* Entry names of directory rel; calls fn for each that is not "." or "..".
 * Returns 0, or -errno when the directory cannot be opened. */
static int scan_dir(struct disc *d, const char *rel,
                    void (*fn)(struct disc *, const char *, void *), void *ctx)
{
    int fd = openat(d->rootfd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        int rc = -errno;
        close(fd);
        return rc;
    }
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        fn(d, e->d_name, ctx);
    }
    closedir(dir);
    return 0;
}

static void dir_warn(struct disc *d, const char *rel, int rc)
{
    if (rc && rc != -ENOENT && rc != -ENOTDIR)
        topo_warn(d->t, "%s: %s", rel, cxlp_strerror(rc));
}

/* ---- nodes ---- */

static void collect_node_dir(struct disc *d, const char *name, void *ctx)
{
    uint64_t id;
    (void)d;
    if (topo_parse_name_id(name, "node", TOPO_MAX_NODE, &id) == 0) {
        struct topo_nodeset *ids = ctx;
        ids->bits[id / 8] |= (uint8_t)(1u << (id % 8));
    }
}

static void read_hmat(struct disc *d, struct cxlp_topo_node *n)
{
    const char *base = NODE_DIR "/node%d/access0/initiators/%s";
    n->read_latency_ns = read_u64(d, base, n->id, "read_latency");
    n->write_latency_ns = read_u64(d, base, n->id, "write_latency");
    n->read_bandwidth_mbs = read_u64(d, base, n->id, "read_bandwidth");
    n->write_bandwidth_mbs = read_u64(d, base, n->id, "write_bandwidth");
}

static int read_nodes(struct disc *d)
{
    struct cxlp_topo *t = d->t;
    struct topo_nodeset ids, online, cpu, mem, normal;
    memset(&ids, 0, sizeof ids);
    int rc = scan_dir(d, NODE_DIR, collect_node_dir, &ids);
    dir_warn(d, NODE_DIR, rc);
    t->nodes_known = rc == 0;
    if (read_nodeset(d, NODE_DIR "/online", &online))
        for (size_t i = 0; i < sizeof ids.bits; i++)
            ids.bits[i] |= online.bits[i];
    int cpu_known = read_nodeset(d, NODE_DIR "/has_cpu", &cpu);
    int mem_known = read_nodeset(d, NODE_DIR "/has_memory", &mem);
    int normal_known = read_nodeset(d, NODE_DIR "/has_normal_memory", &normal);

    size_t count = 0;
    for (uint64_t id = 0; id <= TOPO_MAX_NODE; id++)
        count += (size_t)topo_nodeset_has(&ids, id);
    if (count == 0)
        return 0;
    t->nodes = calloc(count, sizeof *t->nodes);
    if (!t->nodes)
        return -ENOMEM;
    char rel[TOPO_PATH_MAX];
    for (uint64_t id = 0; id <= TOPO_MAX_NODE; id++) {
        if (!topo_nodeset_has(&ids, id))
            continue;
        struct topo_node *tn = &t->nodes[t->n_nodes++];
        struct cxlp_topo_node *n = &tn->pub;
        n->id = (int)id;
        n->tier = -1;

        n->mem_total = 0;
        if (topo_path(rel, sizeof rel, NODE_DIR "/node%d/meminfo", n->id) == 0 &&
            read_text(d, rel)) {
            uint64_t bytes;
            rc = topo_parse_meminfo(d->buf, &bytes);
            if (rc == 0)
                n->mem_total = bytes;
            else
                topo_warn(t, "%s: no valid MemTotal line", rel);
        }

        if (cpu_known) {
            n->has_cpu = topo_nodeset_has(&cpu, id);
        } else if (topo_path(rel, sizeof rel, NODE_DIR "/node%d/cpulist", n->id) == 0 &&
                   read_text(d, rel)) {
            /* no has_cpu file (old kernel, partial capture): the node's own
             * cpulist says the same thing */
            uint64_t ncpu;
            if (topo_parse_list(d->buf, UINT32_MAX, NULL, &ncpu) == 0)
                n->has_cpu = ncpu > 0;
            else
                topo_warn(t, "%s: not a cpu list", rel);
        }
        n->has_memory = mem_known ? topo_nodeset_has(&mem, id) : n->mem_total > 0;
        tn->normal_memory = normal_known ? topo_nodeset_has(&normal, id) : -1;
        read_hmat(d, n);
    }
    return 0;
}

static struct topo_node *find_node(struct cxlp_topo *t, uint64_t id)
{
    for (size_t i = 0; i < t->n_nodes; i++)
        if ((uint64_t)t->nodes[i].pub.id == id)
            return &t->nodes[i];
    return NULL;
}

/* ---- memory tiers ---- */

static void read_tier(struct disc *d, const char *name, void *ctx)
{
    uint64_t k;
    char rel[TOPO_PATH_MAX];
    struct topo_nodeset set;
    (void)ctx;
    if (topo_parse_name_id(name, "memory_tier", TOPO_MAX_TIER, &k))
        return;
    if (topo_path(rel, sizeof rel, TIER_DIR "/%s/nodelist", name))
        return;
    int known = read_nodeset(d, rel, &set);
    if (!known && topo_path(rel, sizeof rel, TIER_DIR "/%s/nodes", name) == 0)
        known = read_nodeset(d, rel, &set);
    if (!known)
        return;
    for (uint64_t id = 0; id <= TOPO_MAX_NODE; id++) {
        if (!topo_nodeset_has(&set, id))
            continue;
        struct topo_node *tn = find_node(d->t, id);
        if (!tn)
            continue;
        /* a node is in one tier; if a damaged tree lists it twice, the
         * faster claim wins so the result does not depend on readdir order */
        if (tn->pub.tier < 0 || (uint64_t)tn->pub.tier > k)
            tn->pub.tier = (int)k;
    }
}

/* ---- devices: shared growth ---- */

static int grow(void **arr, size_t *cap, size_t n, size_t elem)
{
    if (n < *cap)
        return 0;
    size_t ncap = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, ncap * elem);
    if (!p)
        return -ENOMEM;
    *arr = p;
    *cap = ncap;
    return 0;
}

/* Kernel device names are short and plain; anything else is not ours. */
static int plain_name(const char *name, size_t cap)
{
    size_t n = strlen(name);
    if (n == 0 || n >= cap)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-' || c == ':'))
            return 0;
    }
    return 1;
}

/* ---- dax ---- */

static void read_dax(struct disc *d, const char *name, void *ctx)
{
    struct cxlp_topo *t = d->t;
    int *err = ctx;
    uint64_t region;
    const char *dot = strchr(name, '.');
    char head[32];
    struct cxlp_topo_dax x;

    /* daxX.Y with decimal X and Y */
    if (!dot || !plain_name(name, sizeof x.name) || (size_t)(dot - name) >= sizeof head)
        return;
    memcpy(head, name, (size_t)(dot - name));
    head[dot - name] = '\0';
    uint64_t sub;
    if (topo_parse_name_id(head, "dax", UINT32_MAX, &region) ||
        topo_parse_name_id(dot, ".", UINT32_MAX, &sub))
        return;
    if (t->n_dax >= TOPO_MAX_DEVS) {
        topo_warn(t, DAX_DIR ": more than %d devices, rest ignored", TOPO_MAX_DEVS);
        return;
    }

    memset(&x, 0, sizeof x);
    strlcpy0(x.name, name, sizeof x.name);
    snprintf(x.devpath, sizeof x.devpath, "/dev/%s", name);
    uint64_t v = read_u64(d, DAX_DIR "/%s/size", name);
    x.size = v == CXLP_TOPO_UNKNOWN ? 0 : v;
    v = read_u64(d, DAX_DIR "/%s/align", name);
    x.align = v == CXLP_TOPO_UNKNOWN ? 0 : v;

    char rel[TOPO_PATH_MAX];
    x.target_node = -1;
    if (topo_path(rel, sizeof rel, DAX_DIR "/%s/target_node", name) == 0 &&
        read_text(d, rel)) {
        long node;
        /* -1 is the kernel's NUMA_NO_NODE */
        if (topo_parse_int(d->buf, -1, TOPO_MAX_NODE, &node) == 0)
            x.target_node = (int)node;
        else
            topo_warn(t, "%s: not a node id in -1..%d", rel, TOPO_MAX_NODE);
    }

    char drv[64];
    strlcpy0(x.mode, "unbound", sizeof x.mode);
    if (topo_path(rel, sizeof rel, DAX_DIR "/%s/driver", name) == 0) {
        int rc = topo_link_base(d->rootfd, rel, drv, sizeof drv);
        if (rc == 0) {
            if (!strcmp(drv, "device_dax"))
                strlcpy0(x.mode, "devdax", sizeof x.mode);
            else if (!strcmp(drv, "kmem"))
                strlcpy0(x.mode, "kmem", sizeof x.mode);
            else
                strlcpy0(x.mode, "other", sizeof x.mode);
        } else if (rc != -ENOENT) {
            topo_warn(t, "%s: %s", rel, cxlp_strerror(rc));
        }
    }

    if (grow((void **)&t->dax, &t->cap_dax, t->n_dax, sizeof *t->dax)) {
        *err = -ENOMEM;
        return;
    }
    t->dax[t->n_dax++] = x;
}

/* ---- cxl ---- */

static const char *cxl_kind(const char *name)
{
    static const struct { const char *prefix, *kind; } map[] = {
        {"mem", "memdev"}, {"region", "region"}, {"decoder", "decoder"},
        {"port", "port"},  {"endpoint", "port"}, {"root", "port"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t n = strlen(map[i].prefix);
        /* the kernel's names: prefix, then digits (decoderX.Y: digits.digits) */
        if (strncmp(name, map[i].prefix, n) != 0 || name[n] < '0' || name[n] > '9')
            continue;
        const char *p = name + n;
        while (*p >= '0' && *p <= '9')
            p++;
        if (*p == '.' && !strcmp(map[i].kind, "decoder")) {
            p++;
            if (*p < '0' || *p > '9')
                continue;
            while (*p >= '0' && *p <= '9')
                p++;
        }
        if (*p == '\0')
            return map[i].kind;
    }
    return "other";
}

static void read_cxl(struct disc *d, const char *name, void *ctx)
{
    struct cxlp_topo *t = d->t;
    int *err = ctx;
    struct cxlp_topo_cxl x;
    if (!plain_name(name, sizeof x.name))
        return;
    if (t->n_cxl >= TOPO_MAX_DEVS) {
        topo_warn(t, CXL_DIR ": more than %d devices, rest ignored", TOPO_MAX_DEVS);
        return;
    }
    memset(&x, 0, sizeof x);
    strlcpy0(x.name, name, sizeof x.name);
    strlcpy0(x.kind, cxl_kind(name), sizeof x.kind);
    if (!strcmp(x.kind, "memdev")) {
        uint64_t ram = read_u64(d, CXL_DIR "/%s/ram/size", name);
        uint64_t pmem = read_u64(d, CXL_DIR "/%s/pmem/size", name);
        uint64_t sum = 0;
        if (ram != CXLP_TOPO_UNKNOWN)
            sum = ram;
        if (pmem != CXLP_TOPO_UNKNOWN && add_overflow_u64(sum, pmem, &sum)) {
            topo_warn(t, CXL_DIR "/%s: ram + pmem size overflows", name);
            sum = 0;
        }
        x.size = sum;
    } else if (!strcmp(x.kind, "region") || !strcmp(x.kind, "decoder")) {
        uint64_t v = read_u64(d, CXL_DIR "/%s/size", name);
        x.size = v == CXLP_TOPO_UNKNOWN ? 0 : v;
    }
    if (grow((void **)&t->cxl, &t->cap_cxl, t->n_cxl, sizeof *t->cxl)) {
        *err = -ENOMEM;
        return;
    }
    t->cxl[t->n_cxl++] = x;
}

static int cmp_dax(const void *a, const void *b)
{
    return topo_natural_cmp(((const struct cxlp_topo_dax *)a)->name,
                       ((const struct cxlp_topo_dax *)b)->name);
}

static int cmp_cxl(const void *a, const void *b)
{
    return topo_natural_cmp(((const struct cxlp_topo_cxl *)a)->name,
                       ((const struct cxlp_topo_cxl *)b)->name);
}

/* ---- classification ---- */

static void classify(struct cxlp_topo *t)
{
    int cpu_tier = -1;
    int any_region = 0;
    for (size_t i = 0; i < t->n_nodes; i++) {
        const struct cxlp_topo_node *n = &t->nodes[i].pub;
        if (n->has_cpu && n->tier > cpu_tier)
            cpu_tier = n->tier;
    }
    for (size_t i = 0; i < t->n_cxl; i++)
        if (!strcmp(t->cxl[i].kind, "region"))
            any_region = 1;

    for (size_t i = 0; i < t->n_nodes; i++) {
        struct topo_node *tn = &t->nodes[i];
        struct cxlp_topo_node *n = &tn->pub;
        int memonly = n->has_memory && !n->has_cpu;
        n->backend = memonly ? "numa" : n->has_memory ? "shm" : "none";
        n->is_cxl = 0;
        tn->why_cxl[0] = '\0';
        if (!memonly)
            continue;
        for (size_t j = 0; j < t->n_dax; j++) {
            if (t->dax[j].target_node == n->id && !strcmp(t->dax[j].mode, "kmem")) {
                n->is_cxl = 1;
                snprintf(tn->why_cxl, sizeof tn->why_cxl, "kmem %s", t->dax[j].name);
                break;
            }
        }
        if (!n->is_cxl && any_region) {
            n->is_cxl = 1;
            strlcpy0(tn->why_cxl, "CXL region present", sizeof tn->why_cxl);
        }
        if (!n->is_cxl && n->tier >= 0 && cpu_tier >= 0 && n->tier > cpu_tier) {
            n->is_cxl = 1;
            snprintf(tn->why_cxl, sizeof tn->why_cxl, "slower tier %d > %d", n->tier, cpu_tier);
        }
    }
}

/* ---- public ---- */

int cxlp_topo_discover(const char *sysfs_root, cxlp_topo **out)
{
    if (!out)
        return seterr(NULL, CXLP_EARG, "cxlp_topo_discover: out is NULL");
    const char *root = sysfs_root && *sysfs_root ? sysfs_root : "/";
    if (strlen(root) >= sizeof(((struct cxlp_topo *)0)->root))
        return seterr(NULL, -ENAMETOOLONG, "topo: sysfs root too long");
    int rootfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rootfd < 0) {
        int rc = -errno;
        return seterr(NULL, rc, "topo: cannot open sysfs root %s: %s", root, cxlp_strerror(rc));
    }
    struct cxlp_topo *t = calloc(1, sizeof *t);
    char *buf = malloc(TOPO_READ_MAX);
    if (!t || !buf) {
        free(t);
        free(buf);
        close(rootfd);
        return seterr(NULL, -ENOMEM, "topo: out of memory");
    }
    obj_init(&t->obj);
    strlcpy0(t->root, root, sizeof t->root);
    struct disc d = {.t = t, .rootfd = rootfd, .buf = buf};

    int err = read_nodes(&d);
    if (err == 0) {
        dir_warn(&d, TIER_DIR, scan_dir(&d, TIER_DIR, read_tier, NULL));
        dir_warn(&d, DAX_DIR, scan_dir(&d, DAX_DIR, read_dax, &err));
    }
    if (err == 0)
        dir_warn(&d, CXL_DIR, scan_dir(&d, CXL_DIR, read_cxl, &err));
    free(buf);
    close(rootfd);
    if (err) {
        cxlp_topo_free(t);
        return seterr(NULL, err, "topo: out of memory reading %s", root);
    }
    if (t->n_dax)
        qsort(t->dax, t->n_dax, sizeof *t->dax, cmp_dax);
    if (t->n_cxl)
        qsort(t->cxl, t->n_cxl, sizeof *t->cxl, cmp_cxl);
    classify(t);
    *out = t;
    return 0;
}

void cxlp_topo_free(cxlp_topo *t)
{
    if (!t)
        return;
    free(t->nodes);
    free(t->dax);
    free(t->cxl);
    free(t);
}

size_t cxlp_topo_node_count(const cxlp_topo *t)
{
    return t ? t->n_nodes : 0;
}

const struct cxlp_topo_node *cxlp_topo_node(const cxlp_topo *t, size_t i)
{
    return t && i < t->n_nodes ? &t->nodes[i].pub : NULL;
}

size_t cxlp_topo_dax_count(const cxlp_topo *t)
{
    return t ? t->n_dax : 0;
}

const struct cxlp_topo_dax *cxlp_topo_dax(const cxlp_topo *t, size_t i)
{
    return t && i < t->n_dax ? &t->dax[i] : NULL;
}

size_t cxlp_topo_cxl_count(const cxlp_topo *t)
{
    return t ? t->n_cxl : 0;
}

const struct cxlp_topo_cxl *cxlp_topo_cxl(const cxlp_topo *t, size_t i)
{
    return t && i < t->n_cxl ? &t->cxl[i] : NULL;
}
