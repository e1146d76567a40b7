/* Fuzz target: the sysfs text parsers of the topology layer (numbers, kernel
 * lists, meminfo, device names). Any input must parse or fail cleanly, and a
 * parsed list must only name ids inside its bound. */
#include <stdlib.h>
#include <string.h>

#include "topo/topo.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    uint64_t v, n;
    long l;
    struct topo_nodeset set;
    memset(&set, 0, sizeof set);
    (void)topo_parse_u64(s, &v);
    (void)topo_parse_int(s, -1, TOPO_MAX_NODE, &l);
    if (topo_parse_list(s, TOPO_MAX_NODE, &set, &n) == 0) {
        uint64_t seen = 0;
        for (uint64_t id = 0; id <= TOPO_MAX_NODE; id++)
            seen += (uint64_t)topo_nodeset_has(&set, id);
        if (seen > n)
            abort();
    }
    (void)topo_parse_list(s, UINT32_MAX, NULL, &n);
    (void)topo_parse_meminfo(s, &v);
    (void)topo_parse_name_id(s, "node", TOPO_MAX_NODE, &v);
    /* compare the two halves both ways: the order must be antisymmetric */
    char *half = s + strlen(s) / 2;
    char *b = strdup(half);
    if (b) {
        *half = '\0';
        int x = topo_natural_cmp(s, b), y = topo_natural_cmp(b, s);
        if ((x < 0 && y <= 0) || (x > 0 && y >= 0) || (x == 0 && y != 0))
            abort();
        free(b);
    }
    free(s);
    return 0;
}
