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
 * Emulation label: binding to a node that has CPUs is local DRAM standing in
 * for CXL (emulated); a memory-only node is the real thing.
 *
 * Rejected: numa_alloc_onnode (private anonymous memory: other processes
 * could not attach the pool).
 */
#include <errno.h>
#include <numa.h>
#include <numaif.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "media/media_impl.h"

#define MAX_NODES 1024

int media_numa_check(struct media *m, char *err, size_t errlen)
{
    if (numa_available() < 0)
        return errbuf_set(err, errlen, CXLP_ENODEV,
                         "%s: NUMA is not available on this kernel", m->path);
    if (m->numa_node > numa_max_node())
        return errbuf_set(err, errlen, CXLP_ENODEV,
                         "%s: NUMA node %d does not exist (max node %d)", m->path,
                         m->numa_node, numa_max_node());
    long long free_b = 0;
    if (numa_node_size64(m->numa_node, &free_b) <= 0)
        return errbuf_set(err, errlen, CXLP_ENODEV, "%s: NUMA node %d has no memory",
                         m->path, m->numa_node);
    struct bitmask *cpus = numa_allocate_cpumask();
    int ncpu = 0;
    if (cpus && numa_node_to_cpus(m->numa_node, cpus) == 0)
        ncpu = (int)numa_bitmask_weight(cpus);
    if (cpus)
        numa_free_cpumask(cpus);
    m->emulated = ncpu > 0;
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

static int numa_create(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen)
{
    int rc = media_numa_check(m, err, errlen);
    if (rc)
        return rc;
    rc = shm_create_common(m, size, mode, err, errlen);
    if (rc)
        return rc;
    rc = bind_range(m, 0, m->size, m->numa_node, 0);
    if (rc) {
        shm_destroy_common(m, NULL, 0);
        return errbuf_set(err, errlen, rc, "%s: mbind to node %d: %s", m->path,
                         m->numa_node, strerror(-rc));
    }
    return 0;
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
    if (m->writable) {
        rc = bind_range(m, 0, m->size, m->numa_node, 0);
        if (rc)
            return errbuf_set(err, errlen, rc, "%s: mbind to node %d: %s", m->path,
                             m->numa_node, strerror(-rc));
    }
    return 0;
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

const struct media_ops media_numa_ops = {
    .name = "numa",
    .create = numa_create,
    .open = numa_open,
    .sync = numa_sync,
    .prepare = media_fallocate,
    .destroy = shm_destroy_common,
    .migrate = numa_migrate,
};
