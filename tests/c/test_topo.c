/* Topology discovery against captured sysfs trees (tests/data/sysfs/<tree>):
 * every figure of each tree, the CXL rule, the backend mapping, and both
 * report formats (the JSON must parse; the text must label emulation). */
#include <sys/wait.h>

#include "test.h"

static char root_buf[4096];

static const char *tree(const char *name)
{
    const char *data = getenv("CXLP_TEST_DATA");
    if (!data)
        SKIP("CXLP_TEST_DATA not set");
    snprintf(root_buf, sizeof root_buf, "%s/sysfs/%s", data, name);
    return root_buf;
}

/* The report as a string (caller frees). */
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

/* Feeds json to python3 with an assertion script; 1 when python is absent. */
static void check_json(const char *json, const char *asserts)
{
    if (system("python3 -c 'pass' >/dev/null 2>&1") != 0) {
        printf("python3 absent: JSON not checked by a parser\n");
        return;
    }
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "python3 -c 'import json,sys; d=json.load(sys.stdin); %s'", asserts);
    FILE *p = popen(cmd, "w");
    CHECK(p);
    fputs(json, p);
    int st = pclose(p);
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        fprintf(stderr, "JSON check failed (%s) on:\n%s\n", asserts, json);
        exit(1);
    }
}

static const struct cxlp_topo_cxl *find_cxl(const cxlp_topo *t, const char *name)
{
    for (size_t i = 0; i < cxlp_topo_cxl_count(t); i++)
        if (!strcmp(cxlp_topo_cxl(t, i)->name, name))
            return cxlp_topo_cxl(t, i);
    return NULL;
}

static void test_plain(void)
{
    cxlp_topo *t;
    CHECK_OK(cxlp_topo_discover(tree("plain"), &t));
    CHECK(cxlp_topo_node_count(t) == 1);
    const struct cxlp_topo_node *n = cxlp_topo_node(t, 0);
    CHECK(n->id == 0 && n->has_cpu && n->has_memory);
    CHECK(n->mem_total == 16777216ULL * 1024);
    CHECK(n->tier == 4);
    CHECK(n->read_latency_ns == CXLP_TOPO_UNKNOWN && n->write_latency_ns == CXLP_TOPO_UNKNOWN);
    CHECK(n->read_bandwidth_mbs == CXLP_TOPO_UNKNOWN && n->write_bandwidth_mbs == CXLP_TOPO_UNKNOWN);
    CHECK(!n->is_cxl);
    CHECK(!strcmp(n->backend, "shm"));
    CHECK(cxlp_topo_node(t, 1) == NULL);
    CHECK(cxlp_topo_dax_count(t) == 0 && cxlp_topo_dax(t, 0) == NULL);
    CHECK(cxlp_topo_cxl_count(t) == 0 && cxlp_topo_cxl(t, 0) == NULL);

    char *txt = report(t, 0);
    CHECK(strstr(txt, "emulated: no CXL memory found; pools on shm use local DRAM"));
    CHECK(strstr(txt, "no HMAT figures"));
    CHECK(!strstr(txt, "warnings"));
    free(txt);
    char *js = report(t, 1);
    check_json(js, "n=d[\"nodes\"]; assert len(n)==1 and n[0][\"tier\"]==4; "
                   "assert n[0][\"read_latency_ns\"] is None and n[0][\"backend\"]==\"shm\"; "
                   "assert d[\"emulated\"] is True and d[\"cxl_nodes\"] is False; "
                   "assert d[\"dax\"]==[] and d[\"cxl\"]==[] and d[\"warnings\"]==[]");
    free(js);
    cxlp_topo_free(t);
}

static void test_cxl_kmem(void)
{
    cxlp_topo *t;
    CHECK_OK(cxlp_topo_discover(tree("cxl-kmem"), &t));
    CHECK(cxlp_topo_node_count(t) == 2);
    const struct cxlp_topo_node *n0 = cxlp_topo_node(t, 0), *n1 = cxlp_topo_node(t, 1);
    CHECK(n0->id == 0 && n0->has_cpu && n0->has_memory);
    CHECK(n1->id == 1 && !n1->has_cpu && n1->has_memory);
    CHECK(n0->mem_total == 16ULL << 30 && n1->mem_total == 8ULL << 30);
    CHECK(n0->tier == 4 && n1->tier == 22);
    CHECK(n0->read_latency_ns == 80 && n0->write_latency_ns == 80);
    CHECK(n0->read_bandwidth_mbs == 100000 && n0->write_bandwidth_mbs == 100000);
    CHECK(n1->read_latency_ns == 250 && n1->write_latency_ns == 250);
    CHECK(n1->read_bandwidth_mbs == 32768 && n1->write_bandwidth_mbs == 32768);
    CHECK(!n0->is_cxl && n1->is_cxl);
    CHECK(!strcmp(n0->backend, "shm") && !strcmp(n1->backend, "numa"));

    CHECK(cxlp_topo_dax_count(t) == 1);
    const struct cxlp_topo_dax *x = cxlp_topo_dax(t, 0);
    CHECK(!strcmp(x->name, "dax0.0") && !strcmp(x->mode, "kmem"));
    CHECK(x->size == 8ULL << 30 && x->align == 2097152 && x->target_node == 1);
    CHECK(!strcmp(x->devpath, "/dev/dax0.0"));

    CHECK(cxlp_topo_cxl_count(t) == 5);
    /* natural order of names */
    CHECK(!strcmp(cxlp_topo_cxl(t, 0)->name, "decoder0.0"));
    CHECK(!strcmp(cxlp_topo_cxl(t, 4)->name, "root0"));
    const struct cxlp_topo_cxl *c;
    CHECK((c = find_cxl(t, "mem0")) && !strcmp(c->kind, "memdev") && c->size == 8ULL << 30);
    CHECK((c = find_cxl(t, "region0")) && !strcmp(c->kind, "region") && c->size == 8ULL << 30);
    CHECK((c = find_cxl(t, "decoder0.0")) && !strcmp(c->kind, "decoder") && c->size == 16ULL << 30);
    CHECK((c = find_cxl(t, "port1")) && !strcmp(c->kind, "port") && c->size == 0);
    CHECK((c = find_cxl(t, "root0")) && !strcmp(c->kind, "port"));

    char *txt = report(t, 0);
    CHECK(!strstr(txt, "emulated"));
    CHECK(strstr(txt, "CXL memory: node 1"));
    CHECK(strstr(txt, "kmem dax0.0"));
    CHECK(strstr(txt, "(ZONE_MOVABLE only)"));
    CHECK(strstr(txt, "read 250 ns 32768 MiB/s"));
    free(txt);
    char *js = report(t, 1);
    check_json(js, "n=d[\"nodes\"]; assert [x[\"id\"] for x in n]==[0,1]; "
                   "assert n[1][\"is_cxl\"] and not n[0][\"is_cxl\"]; "
                   "assert n[1][\"tier\"]==22 and n[1][\"read_latency_ns\"]==250; "
                   "assert n[1][\"normal_memory\"] is False and n[1][\"backend\"]==\"numa\"; "
                   "assert d[\"dax\"][0][\"mode\"]==\"kmem\" and d[\"dax\"][0][\"target_node\"]==1; "
                   "assert {c[\"name\"]:c[\"kind\"] for c in d[\"cxl\"]}[\"region0\"]==\"region\"; "
                   "assert d[\"emulated\"] is False and d[\"cxl_nodes\"] is True");
    free(js);
    cxlp_topo_free(t);
}

static void test_devdax(void)
{
    cxlp_topo *t;
    CHECK_OK(cxlp_topo_discover(tree("devdax"), &t));
    /* node 1 is possible but not online: it is the node the device would
     * create, not one that exists */
    CHECK(cxlp_topo_node_count(t) == 1);
    CHECK(!cxlp_topo_node(t, 0)->is_cxl);
    CHECK(cxlp_topo_dax_count(t) == 1);
    const struct cxlp_topo_dax *x = cxlp_topo_dax(t, 0);
    CHECK(!strcmp(x->name, "dax1.0") && !strcmp(x->mode, "devdax"));
    CHECK(x->size == 4294967296ULL && x->align == 2097152 && x->target_node == 1);
    CHECK(!strcmp(x->devpath, "/dev/dax1.0"));
    CHECK(cxlp_topo_cxl_count(t) == 0);
    char *txt = report(t, 0);
    CHECK(strstr(txt, "pool spec devdax:/dev/dax1.0"));
    CHECK(!strstr(txt, "emulated"));
    free(txt);
    char *js = report(t, 1);
    check_json(js, "x=d[\"dax\"][0]; assert x[\"mode\"]==\"devdax\" and x[\"size\"]==4294967296; "
                   "assert x[\"align\"]==2097152 and d[\"devdax\"] is True and d[\"emulated\"] is False");
    free(js);
    cxlp_topo_free(t);
}

static void test_errors(void)
{
    cxlp_topo *t = (cxlp_topo *)0x1;
    CHECK_RC(cxlp_topo_discover("/nonexistent/sysfs/root", &t), -ENOENT);
    CHECK(t == (cxlp_topo *)0x1);      /* out untouched on failure */
    CHECK(strstr(cxlp_errmsg(NULL), "/nonexistent/sysfs/root"));
    CHECK_RC(cxlp_topo_discover(tree("plain"), NULL), CXLP_EARG);
    /* a file, not a directory */
    char path[4200];
    snprintf(path, sizeof path, "%s/sys/devices/system/node/online", tree("plain"));
    CHECK_RC(cxlp_topo_discover(path, &t), -ENOTDIR);
    CHECK_RC(cxlp_topo_print(NULL, stdout, 0), CXLP_EARG);
    CHECK_OK(cxlp_topo_discover(tree("cxl-kmem"), &t));
    CHECK_RC(cxlp_topo_print(t, NULL, 0), CXLP_EARG);
    /* a report that cannot be written is an error, named on the handle */
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        CHECK_RC(cxlp_topo_print(t, full, 1), -EIO);
        CHECK(strstr(cxlp_errmsg(t), "write failed"));
        fclose(full);
    }
    cxlp_topo_free(t);
    cxlp_topo_free(NULL);
    CHECK(cxlp_topo_node_count(NULL) == 0 && cxlp_topo_node(NULL, 0) == NULL);
}

int main(void)
{
    test_plain();
    test_cxl_kmem();
    test_devdax();
    test_errors();
    printf("ok\n");
    return 0;
}
