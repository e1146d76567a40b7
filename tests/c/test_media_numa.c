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
    printf("ok (node %d)\n", node);
    return 0;
}
