/*
 * media_numa.c - shared memory whose pages live on one NUMA node.
 *
 * This is how CXL memory in kmem mode is used: the device's capacity is a
 * NUMA node with memory and no CPUs, and a pool is a shm object whose range
 * carries an MPOL_BIND policy for that node (shmem keeps the policy with the
 * object, so every process that maps it allocates there). The policy is set
 * before the first touch; pages are moved later with move_pages(2), whose
 * per-page status is reported, not hidden.
 *
 * A pool may instead interleave its pages over several nodes
 * ("numa:interleave=0-3:NAME": MPOL_INTERLEAVE, page i of the object on the
 * i-th node of the set, round robin), to spread bandwidth over CXL devices
 * and sockets; set before first touch too, and kept by the object.
 *
 * Emulation label: binding to a node that has CPUs is local DRAM standing in
 * for CXL (emulated); a memory-only node is the real thing. An interleaved
 * pool is emulated when any node of its set has CPUs.
 *
 * Rejected: numa_alloc_onnode (private anonymous memory: other processes
 * could not attach the pool).
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/common.h"
#include "media/media_impl.h"
#include "media/numa_lib.h"

#define MAX_NODES MEDIA_MAX_NODES
#define WBITS (8 * sizeof(unsigned long))

static int in_mask(const unsigned long *mask, int n)
{
    return (mask[n / WBITS] >> (n % WBITS)) & 1;
}

static int cpus_of(int node)
{
    struct bitmask *cpus = numa_allocate_cpumask();
    int ncpu = 0;
    if (cpus && numa_node_to_cpus(node, cpus) == 0)
        ncpu = (int)numa_bitmask_weight(cpus);
    if (cpus)
        numa_free_cpumask(cpus);
    return ncpu;
}

/* Every node of the set exists and has memory; emulated when one has CPUs. */
int media_numa_check(struct media *m, char *err, size_t errlen)
{
    const char *why = numa_lib_error();
    if (why)
        return errbuf_set(err, errlen, CXLP_EUNSUPPORTED,
                          "%s: numa: media need libnuma, which could not be loaded (%s); "
                          "install it (Debian, Ubuntu: libnuma1; Fedora: numactl-libs)",
                          m->path, why);
    if (numa_available() < 0)
        return errbuf_set(err, errlen, CXLP_ENODEV,
                         "%s: NUMA is not available on this kernel", m->path);
    m->emulated = 0;
    for (int n = 0; n < MAX_NODES; n++) {
        if (!in_mask(m->numa_mask, n))
            continue;
        if (n > numa_max_node())
            return errbuf_set(err, errlen, CXLP_ENODEV,
                             "%s: NUMA node %d does not exist (max node %d)", m->path, n,
                             numa_max_node());
        long long free_b = 0;
        if (numa_node_size64(n, &free_b) <= 0)
            return errbuf_set(err, errlen, CXLP_ENODEV, "%s: NUMA node %d has no memory",
                             m->path, n);
        m->emulated |= cpus_of(n) > 0;
    }
    return 0;
}

static int bind_range(struct media *m, uint64_t off, uint64_t len, int node, unsigned flags)
{
    unsigned long mask[MAX_NODES / (8 * sizeof(unsigned long))];
    memset(mask, 0, sizeof mask);
    mask[node / (8 * sizeof(unsigned long))] |= 1UL << (node % (8 * sizeof(unsigned long)));
    if (mbind((uint8_t *)m->base + off, len, MPOL_BIND, mask, MAX_NODES, flags) < 0)
        return -errno;
    return 0;
}

/* The object's policy over its whole mapping: bind or interleave. */
static int set_policy(struct media *m, char *err, size_t errlen)
{
    int rc;
    if (m->numa_interleave)
        rc = mbind(m->base, m->size, MPOL_INTERLEAVE, m->numa_mask, MAX_NODES, 0) < 0 ? -errno : 0;
    else
        rc = bind_range(m, 0, m->size, m->numa_node, 0);
    if (rc) {
        char nodes[64];
        media_nodes_text(m->numa_mask, nodes, sizeof nodes);
        return errbuf_set(err, errlen, rc, "%s: mbind (%s node%s %s): %s", m->path,
                         m->numa_interleave ? "interleave over" : "bind to",
                         m->numa_interleave ? "s" : "", nodes, strerror(-rc));
    }
    return 0;
}

/* The size fits the memory of the node set: a larger object could never be
 * filled, and would fail at an ingest, far from the cause. */
static int size_check(struct media *m, uint64_t size, char *err, size_t errlen)
{
    uint64_t total = 0;
    int count = 0;
    for (int n = 0; n < MAX_NODES; n++) {
        long long free_b = 0, sz = in_mask(m->numa_mask, n) ? numa_node_size64(n, &free_b) : 0;
        total += sz > 0 ? (uint64_t)sz : 0;
        count += in_mask(m->numa_mask, n);
    }
    if (size > total) {
        char nodes[64];
        media_nodes_text(m->numa_mask, nodes, sizeof nodes);
        return errbuf_set(err, errlen, CXLP_EARG, "%s: size %llu bytes is more than NUMA "
                         "node%s %s hold%s (%llu bytes of memory)", m->path,
                         (unsigned long long)size, count > 1 ? "s" : "", nodes,
                         count > 1 ? "" : "s", (unsigned long long)total);
    }
    return 0;
}

static int numa_create(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen)
{
    int rc = media_numa_check(m, err, errlen);
    if (!rc)
        rc = size_check(m, size, err, errlen);
    if (rc)
        return rc;
    rc = shm_create_common(m, size, mode, err, errlen);
    if (rc)
        return rc;
    rc = set_policy(m, err, errlen);
    if (rc)
        shm_destroy_common(m, NULL, 0);
    return rc;
}

static int numa_open(struct media *m, char *err, size_t errlen)
{
    int rc = media_numa_check(m, err, errlen);
    if (rc)
        return rc;
    rc = shm_open_common(m, err, errlen);
    if (rc)
        return rc;
    /* Re-asserting the policy on a writable mapping is harmless; a read-only
     * attacher only reads pages that exist and needs no policy. */
    return m->writable ? set_policy(m, err, errlen) : 0;
}

static int numa_sync(struct media *m, uint64_t off, uint64_t len)
{
    (void)m; (void)off; (void)len;
    return 0;
}

/* Rebinds the range to node (future pages) and moves present pages with
 * move_pages. Pages mapped by other processes need MPOL_MF_MOVE_ALL
 * (CAP_SYS_NICE); without it their status is -EACCES and is reported. Pages
 * never touched (-ENOENT) are not an error: they will be allocated on node. */
static int numa_migrate(struct media *m, uint64_t off, uint64_t len, int node, uint64_t *moved)
{
    if (node < 0 || node > numa_max_node())
        return CXLP_ENODEV;
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = off & ~(pg - 1), end = ALIGN_UP(off + len, pg);
    if (end > m->size)
        end = m->size;
    int rc = bind_range(m, start, end - start, node, 0);
    if (rc)
        return rc;
    enum { CHUNK = 512 };
    void *pages[CHUNK];
    int nodes[CHUNK], status[CHUNK];
    int flags = geteuid() == 0 ? MPOL_MF_MOVE_ALL : MPOL_MF_MOVE;
    int first_bad = 0;
    for (uint64_t a = start; a < end;) {
        unsigned long n = 0;
        for (; n < CHUNK && a < end; n++, a += pg) {
            pages[n] = (uint8_t *)m->base + a;
            nodes[n] = node;
        }
        if (move_pages(0, n, pages, nodes, status, flags) < 0)
            return -errno;
        for (unsigned long i = 0; i < n; i++) {
            if (status[i] == node)
                (*moved)++;
            else if (status[i] < 0 && status[i] != -ENOENT && !first_bad)
                first_bad = status[i];
        }
    }
    return first_bad;
}

void media_nodes_text(const unsigned long *mask, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = 0;
    for (int n = 0; n < MAX_NODES; n++) {
        if (!in_mask(mask, n))
            continue;
        int e = n;
        while (e + 1 < MAX_NODES && in_mask(mask, e + 1))
            e++;
        int w = e > n ? snprintf(buf + at, cap - at, "%s%d-%d", at ? "," : "", n, e)
                      : snprintf(buf + at, cap - at, "%s%d", at ? "," : "", n);
        if (w < 0 || (size_t)w >= cap - at) {
            buf[at] = 0; /* a list longer than buf: cut at the last whole item */
            return;
        }
        at += (size_t)w;
        n = e;
    }
}

int media_nodes(const struct media *m, uint32_t *weight)
{
    memset(weight, 0, MAX_NODES * sizeof *weight);
    int found = 0;
    if (m->kind == CXLP_MEDIA_NUMA) {
        for (int n = 0; n < MAX_NODES; n++)
            if (in_mask(m->numa_mask, n))
                weight[n] = 1, found++;
        return found;
    }
    if (!m->base || numa_available() < 0 || m->kind == CXLP_MEDIA_DEVDAX ||
        m->kind == CXLP_MEDIA_PCI)
        return 0; /* device memory: no pages the kernel places */
    enum { SAMPLES = 64 };
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE), pages = m->size / pg;
    void *addr[SAMPLES];
    int status[SAMPLES];
    unsigned long n = 0;
    for (uint64_t i = 0; i < SAMPLES && i < pages; i++) {
        uint8_t *a = (uint8_t *)m->base + (i * (pages / MIN(pages, SAMPLES))) * pg;
        unsigned char in = 0;
        if (mincore(a, pg, &in) == 0 && (in & 1)) {
            /* resident in the object: a read maps it here, allocating nothing */
            (void)*(volatile uint8_t *)a;
            addr[n++] = a;
        }
    }
    if (n == 0 || move_pages(0, n, addr, NULL, status, 0) < 0)
        return 0;
    for (unsigned long i = 0; i < n; i++)
        if (status[i] >= 0 && status[i] < MAX_NODES)
            found += weight[status[i]]++ == 0;
    return found;
}

int media_nearest_cpu_node(const uint32_t *weight)
{
    if (numa_available() < 0)
        return -1;
    cpu_set_t aff;
    if (sched_getaffinity(0, sizeof aff, &aff) < 0)
        return -1;
    struct bitmask *cpus = numa_allocate_cpumask();
    int best = -1, maxn = numa_max_node();
    uint64_t bestd = 0;
    for (int c = 0; cpus && c <= maxn; c++) {
        int usable = 0;
        if (numa_node_to_cpus(c, cpus) == 0)
            for (unsigned k = 0; k < cpus->size && k < CPU_SETSIZE && !usable; k++)
                usable = numa_bitmask_isbitset(cpus, k) && CPU_ISSET(k, &aff);
        if (!usable)
            continue;
        uint64_t d = 0, w = 0;
        for (int n = 0; n <= maxn && n < MAX_NODES; n++) {
            int dist = weight[n] ? numa_distance(c, n) : 0;
            d += (uint64_t)weight[n] * (uint64_t)(dist > 0 ? dist : 255);
            w += weight[n];
        }
        if (w && (best < 0 || d < bestd)) {
            best = c;
            bestd = d;
        }
    }
    if (cpus)
        numa_free_cpumask(cpus);
    return best;
}

const struct media_ops media_numa_ops = {
    .name = "numa",
    .create = numa_create,
    .open = numa_open,
    .sync = numa_sync,
    .prepare = media_fallocate,
    .destroy = shm_destroy_common,
    .migrate = numa_migrate,
};
