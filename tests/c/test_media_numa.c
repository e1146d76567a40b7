/* numa backend: pages of a shared pool land on the bound node; move_pages
 * moves them; a node that does not exist is refused by name. */
#include <numa.h>
#include <numaif.h>
#include "test.h"
#include "common/common.h"
#include "media/media.h"

int main(void)
{
    if (numa_available() < 0)
        SKIP("libnuma: NUMA not available on this kernel");
    char spec[160], err[256];
    int node = numa_max_node(); /* the highest node: a CXL node sorts last */
    long long fr;
    while (node > 0 && numa_node_size64(node, &fr) <= 0)
        node--;
    snprintf(spec, sizeof spec, "numa:%d:%s", node, test_name("tnuma"));
    struct media m;
    CHECK_OK(media_create(&m, spec, 4 << 20, 0, err, sizeof err));
    CHECK(m.kind == CXLP_MEDIA_NUMA && m.numa_node == node);
    struct bitmask *cpus = numa_allocate_cpumask();
    numa_node_to_cpus(node, cpus);
    CHECK(m.emulated == (numa_bitmask_weight(cpus) > 0));
    numa_free_cpumask(cpus);

    /* first touch allocates on the bound node */
    memset(m.base, 0xab, 4 << 20);
    for (uint64_t off = 0; off < (4u << 20); off += 1 << 20) {
        int where = -1;
        CHECK(get_mempolicy(&where, NULL, 0, (char *)m.base + off, MPOL_F_NODE | MPOL_F_ADDR) == 0);
        CHECK(where == node);
    }
    /* the policy is the object's: another attacher sees the same placement */
    struct media m2;
    CHECK_OK(media_open(&m2, spec, 1, err, sizeof err));
    CHECK(((unsigned char *)m2.base)[123] == 0xab);

    /* move_pages to node 0 (on a one-node machine: already there) */
    uint64_t moved = 0;
    CHECK_OK(media_migrate(&m, 0, 4 << 20, 0, &moved));
    CHECK(moved == (4u << 20) / (uint64_t)sysconf(_SC_PAGESIZE));
    int where = -1;
    CHECK(get_mempolicy(&where, NULL, 0, m.base, MPOL_F_NODE | MPOL_F_ADDR) == 0 && where == 0);
    CHECK_RC(media_migrate(&m, 0, 4096, 4000, NULL), CXLP_ENODEV);
    media_close(&m2);
    media_close(&m);
    CHECK_OK(media_destroy(spec, err, sizeof err));

    /* a node beyond the machine */
    char bad[160];
    snprintf(bad, sizeof bad, "numa:%d:%s", numa_max_node() + 1, test_name("tnuma"));
    CHECK_RC(media_create(&m, bad, 1 << 20, 0, err, sizeof err), CXLP_ENODEV);
    CHECK(strstr(err, "does not exist"));

    /* interleaved over every node with memory: the object's policy is
     * MPOL_INTERLEAVE over that set, for this mapping and another
     * attacher's; page i lands on the i-th node of the set (mod its size) */
    char list[64] = "", il[200];
    int nodes[MEDIA_MAX_NODES], nn = 0;
    for (int n = 0; n <= numa_max_node(); n++)
        if (numa_node_size64(n, &fr) > 0) {
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%d", nn ? "," : "", n);
            nodes[nn++] = n;
        }
    snprintf(il, sizeof il, "numa:interleave=%s:%s", list, test_name("tnuma"));
    CHECK_OK(media_create(&m, il, 4 << 20, 0, err, sizeof err));
    CHECK(m.numa_interleave && m.numa_node == -1);
    CHECK_OK(media_open(&m2, il, 0, err, sizeof err));
    for (struct media *mm = &m; mm; mm = mm == &m ? &m2 : NULL) {
        int mode = -1;
        unsigned long mask[MEDIA_NODE_WORDS] = {0};
        CHECK(get_mempolicy(&mode, mask, MEDIA_MAX_NODES, mm->base, MPOL_F_ADDR) == 0);
        CHECK(mode == MPOL_INTERLEAVE);
        CHECK(memcmp(mask, m.numa_mask, sizeof mask) == 0);
    }
    memset(m.base, 1, 4 << 20);
    uint32_t seen[MEDIA_MAX_NODES] = {0};
    for (uint64_t off = 0; off < (4u << 20); off += 4096) {
        int where = -1;
        CHECK(get_mempolicy(&where, NULL, 0, (char *)m.base + off, MPOL_F_NODE | MPOL_F_ADDR) == 0);
        CHECK(where >= 0 && where < MEDIA_MAX_NODES);
        seen[where]++;
    }
    for (int i = 0; i < nn; i++)
        CHECK(seen[nodes[i]] > 0); /* every node of the set got pages */
    uint32_t w[MEDIA_MAX_NODES];
    CHECK(media_nodes(&m, w) == nn);
    int near = media_nearest_cpu_node(w);
    CHECK(near >= 0 && near <= numa_max_node());
    media_close(&m2);
    media_close(&m);
    CHECK_OK(media_destroy(il, err, sizeof err));

    /* a node list naming a node beyond the machine is refused by number */
    snprintf(il, sizeof il, "numa:interleave=0,%d:%s", numa_max_node() + 1, test_name("tnuma"));
    CHECK_RC(media_create(&m, il, 1 << 20, 0, err, sizeof err), CXLP_ENODEV);
    char want[64];
    snprintf(want, sizeof want, "NUMA node %d does not exist", numa_max_node() + 1);
    CHECK(strstr(err, want));
    /* more than the nodes' memory: refused, naming the size and what they hold */
    snprintf(il, sizeof il, "numa:interleave=%s:%s", list, test_name("tnuma"));
    CHECK_RC(media_create(&m, il, UINT64_C(1) << 60, 0, err, sizeof err), CXLP_EARG);
    CHECK(strstr(err, "1152921504606846976 bytes is more than NUMA node"));
    printf("ok (node %d; interleave over %s, nearest CPU node %d)\n", node, list, near);
    return 0;
}
