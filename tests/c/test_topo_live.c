/* Topology of the machine the test runs on (sysfs root NULL and ""): at least
 * one node with memory, sizes that agree with libnuma's own reading, and
 * reports that print. */
#include <numa.h>
#include <sys/stat.h>

#include "test.h"

int main(void)
{
    struct stat st;
    if (stat("/sys/devices/system/node", &st) != 0)
        SKIP("kernel without NUMA sysfs (/sys/devices/system/node)");

    cxlp_topo *t;
    CHECK_OK(cxlp_topo_discover(NULL, &t));
    size_t with_mem = 0;
    for (size_t i = 0; i < cxlp_topo_node_count(t); i++) {
        const struct cxlp_topo_node *n = cxlp_topo_node(t, i);
        CHECK(n->id >= 0 && n->id <= 1023);
        if (i)
            CHECK(n->id > cxlp_topo_node(t, i - 1)->id);
        CHECK(n->backend != NULL);
        if (!n->has_memory)
            continue;
        with_mem++;
        CHECK(n->mem_total > 0);
        if (numa_available() >= 0) {
            long long total = numa_node_size64(n->id, NULL);
            CHECK(total > 0 && (uint64_t)total == n->mem_total);
        }
        printf("node %d: %s, %" PRIu64 " bytes, tier %d, backend %s%s\n", n->id,
               n->has_cpu ? "cpus" : "memory-only", n->mem_total, n->tier, n->backend,
               n->is_cxl ? ", CXL" : "");
    }
    CHECK(with_mem >= 1);

    cxlp_topo *t2;
    CHECK_OK(cxlp_topo_discover("", &t2));
    CHECK(cxlp_topo_node_count(t2) == cxlp_topo_node_count(t));
    cxlp_topo_free(t2);

    FILE *devnull = fopen("/dev/null", "w");
    CHECK(devnull);
    CHECK_OK(cxlp_topo_print(t, devnull, 0));
    CHECK_OK(cxlp_topo_print(t, devnull, 1));
    fclose(devnull);
    CHECK_OK(cxlp_topo_print(t, stdout, 0));
    cxlp_topo_free(t);
    printf("ok\n");
    return 0;
}
