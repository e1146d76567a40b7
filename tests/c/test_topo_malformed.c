/* Damaged sysfs trees (built here under /tmp): garbage numbers, overflowing
 * values, over-long lists, out-of-bound ids, a FIFO where a file should be,
 * missing directories, too many devices. Each gives unknown figures and a
 * warning, never a crash, a hang or a wrong number; the JSON stays valid. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test.h"

static char base[256];

static void mkdirs(const char *rel)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    for (char *s = p + strlen(base) + 1; *s; s++) {
        if (*s == '/') {
            *s = '\0';
            mkdir(p, 0755);
            *s = '/';
        }
    }
    mkdir(p, 0755);
}

static void put(const char *rel, const char *text)
{
    char p[1024], dir[1024];
    snprintf(dir, sizeof dir, "%s", rel);
    char *slash = strrchr(dir, '/');
    if (slash) {
        *slash = '\0';
        mkdirs(dir);
    }
    snprintf(p, sizeof p, "%s/%s", base, rel);
    FILE *f = fopen(p, "w");
    CHECK(f);
    CHECK(fputs(text, f) >= 0);
    CHECK(fclose(f) == 0);
}

static void link_to(const char *rel, const char *target)
{
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", base, rel);
    CHECK(symlink(target, p) == 0);
}

static char *report(const cxlp_topo *t, int json)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f);
    CHECK_OK(cxlp_topo_print(t, f, json));
    CHECK(fclose(f) == 0);
    return buf;
}

static void json_parses(const char *json)
{
    if (system("python3 -c 'pass' >/dev/null 2>&1") != 0)
        return;
    FILE *p = popen("python3 -c 'import json,sys; json.load(sys.stdin)'", "w");
    CHECK(p);
    fputs(json, p);
    int st = pclose(p);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        fprintf(stderr, "invalid JSON:\n%s\n", json);
        exit(1);
    }
}

static void new_root(const char *tag)
{
    /* a quote and a non-ASCII byte in the root: the JSON must escape them */
    snprintf(base, sizeof base, "/tmp/topo\"%s\xc3.%d.XXXXXX", tag, (int)getpid());
    CHECK(mkdtemp(base));
}

static void rm_root(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", base);
    CHECK(system(cmd) == 0);
}

#define N "sys/devices/system/node/"

static void damaged_nodes(void)
{
    new_root("nodes");
    put(N "online", "0-1,garbage\n");          /* not a list: nodes come from the dirs */
    put(N "has_cpu", "99999999999999999999999\n");  /* overflows */
    char *huge = malloc(200001);
    CHECK(huge);
    for (int i = 0; i < 100000; i++)
        memcpy(huge + 2 * i, "0,", 2);
    huge[200000] = '\0';
    put(N "has_memory", huge);                 /* longer than any real list */
    free(huge);
    put(N "has_normal_memory", "0-5000\n");    /* id beyond 1023 */
    put(N "node0/meminfo", "Node 0 MemTotal: 99999999999999999999 kB\n");
    put(N "node0/cpulist", "0-3\n");
    put(N "node1/meminfo", "Node 1 MemTotal: 18014398509481984 kB\n"); /* kB * 1024 overflows */
    mkdirs(N "node1");
    char fifo[1024];
    snprintf(fifo, sizeof fifo, "%s/" N "node1/cpulist", base);
    CHECK(mkfifo(fifo, 0600) == 0);            /* must not block the reader */
    put(N "node0/access0/initiators/read_latency", "abc\n");
    put(N "node0/access0/initiators/write_latency", "-5\n");
    put(N "node0/access0/initiators/read_bandwidth", "0x\n");
    put(N "node0/access0/initiators/write_bandwidth", "18446744073709551615\n");
    put(N "node1/access0/initiators/read_latency", "0x00000000000000fa\n");
    put(N "node1/access0/initiators/write_latency", "12 34\n");
    mkdirs(N "node5000");                       /* beyond the id bound: ignored */
    mkdirs(N "node01");                         /* not a kernel name: ignored */
    mkdirs(N "nodeX");
    put("sys/devices/virtual/memory_tiering/memory_tier4/nodelist", "0\n");
    put("sys/devices/virtual/memory_tiering/memory_tier2/nodes", "1\n"); /* old attribute name */
    put("sys/devices/virtual/memory_tiering/memory_tier7/nodelist", "1-0\n");
    put("sys/devices/virtual/memory_tiering/memory_tier99999999999/nodelist", "0\n");
    put("sys/devices/virtual/memory_tiering/memory_tierX/nodelist", "0\n");

    cxlp_topo *t;
    CHECK_OK(cxlp_topo_discover(base, &t));
    CHECK(cxlp_topo_node_count(t) == 2);
    const struct cxlp_topo_node *n0 = cxlp_topo_node(t, 0), *n1 = cxlp_topo_node(t, 1);
    CHECK(n0->id == 0 && n1->id == 1);
    CHECK(n0->mem_total == 0 && n1->mem_total == 0);
    /* has_cpu unusable: node0's own cpulist says it has CPUs; node1's is a FIFO */
    CHECK(n0->has_cpu && !n1->has_cpu);
    /* has_memory unusable and no MemTotal: not known to have memory */
    CHECK(!n0->has_memory && !n1->has_memory);
    CHECK(n0->read_latency_ns == CXLP_TOPO_UNKNOWN && n0->write_latency_ns == CXLP_TOPO_UNKNOWN);
    CHECK(n0->read_bandwidth_mbs == CXLP_TOPO_UNKNOWN && n0->write_bandwidth_mbs == CXLP_TOPO_UNKNOWN);
    CHECK(n1->read_latency_ns == 250 && n1->write_latency_ns == CXLP_TOPO_UNKNOWN);
    CHECK(n0->tier == 4 && n1->tier == 2);
    CHECK(!n0->is_cxl && !n1->is_cxl);
    CHECK(!strcmp(n1->backend, "none"));

    char *txt = report(t, 0);
    CHECK(strstr(txt, "warnings"));
    CHECK(strstr(txt, N "has_memory: longer than 64 KiB"));
    CHECK(strstr(txt, N "has_cpu: "));
    CHECK(strstr(txt, N "node0/access0/initiators/read_latency: not a number"));
    CHECK(strstr(txt, N "node1/cpulist: "));
    CHECK(strstr(txt, "emulated: no CXL memory found"));
    free(txt);
    char *js = report(t, 1);
    json_parses(js);
    free(js);
    cxlp_topo_free(t);
    rm_root();
}

static void many_nodes_and_devices(void)
{
    new_root("many");
    /* the largest node set we accept, with no node directories */
    put(N "online", "0-1023\n");
    put(N "has_memory", "0-1023\n");
    put(N "has_cpu", "0\n");
    cxlp_topo *t;
    CHECK_OK(cxlp_topo_discover(base, &t));
    CHECK(cxlp_topo_node_count(t) == 1024);
    CHECK(cxlp_topo_node(t, 1023)->id == 1023);
    /* memory-only but no evidence of CXL: numa backend, not CXL */
    CHECK(!cxlp_topo_node(t, 1023)->is_cxl);
    CHECK(!strcmp(cxlp_topo_node(t, 1023)->backend, "numa"));
    cxlp_topo_free(t);

    /* more CXL entries than we keep */
    char rel[128];
    for (int i = 0; i < 4100; i++) {
        snprintf(rel, sizeof rel, "sys/bus/cxl/devices/port%d", i);
        mkdirs(rel);
    }
    mkdirs("sys/bus/cxl/devices/bad name");
    CHECK_OK(cxlp_topo_discover(base, &t));
    CHECK(cxlp_topo_cxl_count(t) == 4096);
    for (size_t i = 0; i < cxlp_topo_cxl_count(t); i++)
        CHECK(strcmp(cxlp_topo_cxl(t, i)->name, "bad name") != 0);
    char *txt = report(t, 0);
    CHECK(strstr(txt, "rest ignored"));
    free(txt);
    cxlp_topo_free(t);
    rm_root();
}

static void damaged_devices(void)
{
    new_root("dev");
    put(N "online", "0-1\n");
    put(N "has_cpu", "0\n");
    put(N "has_memory", "0-1\n");
    put(N "node1/meminfo", "Node 1 MemTotal: 1024 kB\n");
    put("sys/bus/dax/devices/dax0.0/size", "garbage\n");
    put("sys/bus/dax/devices/dax0.0/target_node", "5000\n");
    link_to("sys/bus/dax/devices/dax0.0/driver", "../../drivers/foo");
    put("sys/bus/dax/devices/dax2.0/size", "4096\n");
    put("sys/bus/dax/devices/dax2.0/target_node", "-1\n");
    put("sys/bus/dax/devices/dax2.0/driver", "kmem\n");   /* a file, not a link */
    put("sys/bus/dax/devices/dax10.0/target_node", "1\n");
    link_to("sys/bus/dax/devices/dax10.0/driver", "../../drivers/kmem/");
    put("sys/bus/dax/devices/daxfoo/size", "1\n");         /* not a dax name */
    put("sys/bus/dax/devices/dax3.x/size", "1\n");
    put("sys/bus/cxl/devices/mem0/ram/size", "0xffffffffffffffffff\n");
    put("sys/bus/cxl/devices/mem0/pmem/size", "0x10\n");
    put("sys/bus/cxl/devices/mem1/ram/size", "0x8000000000000000\n");
    put("sys/bus/cxl/devices/mem1/pmem/size", "0x8000000000000000\n");
    put("sys/bus/cxl/devices/nvdimm-bridge0/uevent", "");
    put("sys/bus/cxl/devices/decoder2.x/size", "0x10\n");

    cxlp_topo *t;
    CHECK_OK(cxlp_topo_discover(base, &t));
    CHECK(cxlp_topo_dax_count(t) == 3);
    const struct cxlp_topo_dax *x0 = cxlp_topo_dax(t, 0), *x2 = cxlp_topo_dax(t, 1),
                               *x10 = cxlp_topo_dax(t, 2);
    CHECK(!strcmp(x0->name, "dax0.0") && !strcmp(x2->name, "dax2.0") && !strcmp(x10->name, "dax10.0"));
    CHECK(x0->size == 0 && x0->align == 0 && x0->target_node == -1 && !strcmp(x0->mode, "other"));
    CHECK(x2->size == 4096 && x2->target_node == -1 && !strcmp(x2->mode, "unbound"));
    CHECK(!strcmp(x10->mode, "kmem") && x10->target_node == 1);
    /* kmem dax10.0 on the memory-only node 1 makes it CXL */
    CHECK(cxlp_topo_node(t, 1)->is_cxl && !cxlp_topo_node(t, 0)->is_cxl);

    CHECK(cxlp_topo_cxl_count(t) == 4);
    const struct cxlp_topo_cxl *c0 = cxlp_topo_cxl(t, 1), *c1 = cxlp_topo_cxl(t, 2);
    CHECK(!strcmp(cxlp_topo_cxl(t, 0)->name, "decoder2.x"));
    CHECK(!strcmp(cxlp_topo_cxl(t, 0)->kind, "other"));
    CHECK(!strcmp(c0->name, "mem0") && !strcmp(c0->kind, "memdev") && c0->size == 16);
    CHECK(!strcmp(c1->name, "mem1") && c1->size == 0);
    CHECK(!strcmp(cxlp_topo_cxl(t, 3)->kind, "other"));
    char *txt = report(t, 0);
    CHECK(strstr(txt, "ram + pmem size overflows"));
    CHECK(strstr(txt, "dax0.0/target_node: not a node id"));
    free(txt);
    char *js = report(t, 1);
    json_parses(js);
    free(js);
    cxlp_topo_free(t);
    rm_root();
}

static void missing_dirs(void)
{
    /* an empty root: nothing known, not an error */
    new_root("empty");
    cxlp_topo *t;
    CHECK_OK(cxlp_topo_discover(base, &t));
    CHECK(cxlp_topo_node_count(t) == 0 && cxlp_topo_dax_count(t) == 0 &&
          cxlp_topo_cxl_count(t) == 0);
    char *txt = report(t, 0);
    CHECK(strstr(txt, "NUMA nodes: none found"));
    CHECK(strstr(txt, "emulated: no CXL memory found; pools on shm use local DRAM"));
    free(txt);
    char *js = report(t, 1);
    json_parses(js);
    free(js);
    cxlp_topo_free(t);
    /* a file where the node directory should be */
    put("sys/devices/system/node", "x");
    CHECK_OK(cxlp_topo_discover(base, &t));
    CHECK(cxlp_topo_node_count(t) == 0);
    cxlp_topo_free(t);
    rm_root();
}

int main(void)
{
    damaged_nodes();
    many_nodes_and_devices();
    damaged_devices();
    missing_dirs();
    printf("ok\n");
    return 0;
}
