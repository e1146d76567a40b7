/* The strict parsers under topology discovery, on the inputs the sysfs trees
 * cannot easily carry: exact overflow edges, list grammar corners, names. */
#include "test.h"
#include "topo/topo.h"

static int u64(const char *s, uint64_t *v)
{
    return topo_parse_u64(s, v);
}

int main(void)
{
    uint64_t v = 0;
    CHECK(u64("0\n", &v) == 0 && v == 0);
    CHECK(u64("18446744073709551615", &v) == 0 && v == UINT64_MAX);
    CHECK(u64("18446744073709551616", &v) == -ERANGE);
    CHECK(u64("0xffffffffffffffff\n", &v) == 0 && v == UINT64_MAX);
    CHECK(u64("0x10000000000000000", &v) == -ERANGE);
    CHECK(u64("0x0000000000000000000010", &v) == 0 && v == 16);
    CHECK(u64("0x", &v) == -EINVAL);
    CHECK(u64("", &v) == -EINVAL);
    CHECK(u64(" 1", &v) == -EINVAL);
    CHECK(u64("-1", &v) == -EINVAL);
    CHECK(u64("+1", &v) == -EINVAL);
    CHECK(u64("12 kB", &v) == -EINVAL);
    CHECK(u64("010", &v) == 0 && v == 10);     /* decimal, never octal */

    long l = 0;
    CHECK(topo_parse_int("-1\n", -1, 1023, &l) == 0 && l == -1);
    CHECK(topo_parse_int("-2", -1, 1023, &l) == -ERANGE);
    CHECK(topo_parse_int("1024", -1, 1023, &l) == -ERANGE);
    CHECK(topo_parse_int("99999999999999999999", -1, 1023, &l) == -ERANGE);
    CHECK(topo_parse_int("-", -1, 1023, &l) == -EINVAL);
    CHECK(topo_parse_int("1x", -1, 1023, &l) == -EINVAL);

    struct topo_nodeset s;
    uint64_t n;
    memset(&s, 0, sizeof s);
    CHECK(topo_parse_list("0-3,8,10-11\n", TOPO_MAX_NODE, &s, &n) == 0 && n == 7);
    CHECK(topo_nodeset_has(&s, 0) && topo_nodeset_has(&s, 3) && !topo_nodeset_has(&s, 4));
    CHECK(topo_nodeset_has(&s, 8) && topo_nodeset_has(&s, 11) && !topo_nodeset_has(&s, 12));
    CHECK(!topo_nodeset_has(&s, 5000));
    CHECK(topo_parse_list("\n", TOPO_MAX_NODE, NULL, &n) == 0 && n == 0);
    CHECK(topo_parse_list("", TOPO_MAX_NODE, NULL, &n) == 0 && n == 0);
    CHECK(topo_parse_list("1023", TOPO_MAX_NODE, NULL, &n) == 0 && n == 1);
    CHECK(topo_parse_list("1024", TOPO_MAX_NODE, NULL, &n) == -ERANGE);
    CHECK(topo_parse_list("0-18446744073709551616", UINT32_MAX, NULL, &n) == -ERANGE);
    CHECK(topo_parse_list("0-4294967295", UINT32_MAX, NULL, &n) == 0 && n == 4294967296ULL);
    CHECK(topo_parse_list("3-1", TOPO_MAX_NODE, NULL, &n) == -EINVAL);
    CHECK(topo_parse_list("1,", TOPO_MAX_NODE, NULL, &n) == -EINVAL);
    CHECK(topo_parse_list(",1", TOPO_MAX_NODE, NULL, &n) == -EINVAL);
    CHECK(topo_parse_list("1,,2", TOPO_MAX_NODE, NULL, &n) == -EINVAL);
    CHECK(topo_parse_list("1-", TOPO_MAX_NODE, NULL, &n) == -EINVAL);
    CHECK(topo_parse_list("0-3:2/4", TOPO_MAX_NODE, NULL, &n) == -EINVAL);
    CHECK(topo_parse_list("1 2", TOPO_MAX_NODE, NULL, &n) == -EINVAL);

    CHECK(topo_parse_meminfo("Node 0 MemTotal:       16384 kB\nNode 0 MemFree: 1 kB\n", &v) == 0 &&
          v == 16384 * 1024);
    CHECK(topo_parse_meminfo("Node 0 MemFree: 1 kB\n", &v) == -ENOENT);
    CHECK(topo_parse_meminfo("Node 0 MemTotal: 12 MB\n", &v) == -EINVAL);
    CHECK(topo_parse_meminfo("Node 0 MemTotal: 18014398509481984 kB\n", &v) == -ERANGE);
    CHECK(topo_parse_meminfo("Node 0 MemTotal: 18014398509481983 kB", &v) == 0);

    CHECK(topo_parse_name_id("node12", "node", TOPO_MAX_NODE, &v) == 0 && v == 12);
    CHECK(topo_parse_name_id("node0", "node", TOPO_MAX_NODE, &v) == 0 && v == 0);
    CHECK(topo_parse_name_id("node01", "node", TOPO_MAX_NODE, &v) != 0);
    CHECK(topo_parse_name_id("node1024", "node", TOPO_MAX_NODE, &v) != 0);
    CHECK(topo_parse_name_id("node", "node", TOPO_MAX_NODE, &v) != 0);
    CHECK(topo_parse_name_id("nodes", "node", TOPO_MAX_NODE, &v) != 0);

    CHECK(topo_natural_cmp("dax2.0", "dax10.0") < 0);
    CHECK(topo_natural_cmp("dax10.0", "dax2.0") > 0);
    CHECK(topo_natural_cmp("dax1.10", "dax1.9") > 0);
    CHECK(topo_natural_cmp("mem0", "mem0") == 0);
    CHECK(topo_natural_cmp("mem", "mem0") < 0);
    CHECK(topo_natural_cmp("a007", "a7") == 0);
    printf("ok\n");
    return 0;
}
