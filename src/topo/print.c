/*
 * print.c - the topology as a person reads it (text) and as tools read it
 * (JSON), for `cxlpool topo [--json]`.
 *
 * The one rule this file exists for: emulation is never mistaken for
 * hardware. Unless a CXL node or a device-dax device was found, the report
 * says in so many words that pools on shm use local DRAM, and the JSON says
 * "emulated": true. Unknown figures print as "?" (text) and null (JSON),
 * never as a number.
 *
 * JSON strings are escaped for '"', '\\' and control bytes, and bytes >= 0x80
 * are written as \u00XX: names are validated ASCII, but the sysfs root and
 * warning lines come from the caller and may hold anything, and the output
 * must stay valid JSON (RFC 8259 requires UTF-8) whatever they hold.
 *
 * Rejected: a JSON library (one more dependency for one flat document).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "topo/topo.h"

static const char *fmt_bytes(uint64_t v, char *buf, size_t cap)
{
    static const char *unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    int u = 0;
    double x = (double)v;
    while (x >= 1024.0 && u < 6) {
        x /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%" PRIu64 " B", v);
    else
        snprintf(buf, cap, "%.1f %s", x, unit[u]);
    return buf;
}

static const char *fmt_fig(uint64_t v, const char *unit, char *buf, size_t cap)
{
    if (v == CXLP_TOPO_UNKNOWN)
        snprintf(buf, cap, "?");
    else
        snprintf(buf, cap, "%" PRIu64 " %s", v, unit);
    return buf;
}

static int has_cxl_node(const struct cxlp_topo *t)
{
    for (size_t i = 0; i < t->n_nodes; i++)
        if (t->nodes[i].pub.is_cxl)
            return 1;
    return 0;
}

static int has_devdax(const struct cxlp_topo *t)
{
    for (size_t i = 0; i < t->n_dax; i++)
        if (!strcmp(t->dax[i].mode, "devdax"))
            return 1;
    return 0;
}

static void print_text(const struct cxlp_topo *t, FILE *f)
{
    char a[32], b[32], c[32], d[32], e[32];
    fprintf(f, "topology (sysfs root %s)\n", t->root);
    if (t->n_nodes == 0)
        fprintf(f, "NUMA nodes: none found%s\n",
                t->nodes_known ? "" : " (no " "sys/devices/system/node)");
    else
        fprintf(f, "NUMA nodes: %zu\n", t->n_nodes);
    for (size_t i = 0; i < t->n_nodes; i++) {
        const struct topo_node *tn = &t->nodes[i];
        const struct cxlp_topo_node *n = &tn->pub;
        fprintf(f, "  node %d: %s, memory %s", n->id,
                n->has_cpu ? "cpus" : n->has_memory ? "memory-only" : "no cpus",
                n->has_memory ? fmt_bytes(n->mem_total, a, sizeof a) : "none");
        if (n->has_memory && tn->normal_memory == 0)
            fprintf(f, " (ZONE_MOVABLE only)");
        if (n->tier >= 0)
            fprintf(f, ", tier %d", n->tier);
        else
            fprintf(f, ", tier ?");
        if (n->read_latency_ns == CXLP_TOPO_UNKNOWN && n->write_latency_ns == CXLP_TOPO_UNKNOWN &&
            n->read_bandwidth_mbs == CXLP_TOPO_UNKNOWN && n->write_bandwidth_mbs == CXLP_TOPO_UNKNOWN)
            fprintf(f, ", no HMAT figures");
        else
            fprintf(f, ", read %s %s, write %s %s",
                    fmt_fig(n->read_latency_ns, "ns", b, sizeof b),
                    fmt_fig(n->read_bandwidth_mbs, "MiB/s", c, sizeof c),
                    fmt_fig(n->write_latency_ns, "ns", d, sizeof d),
                    fmt_fig(n->write_bandwidth_mbs, "MiB/s", e, sizeof e));
        if (n->is_cxl)
            fprintf(f, ", CXL (%s)", tn->why_cxl);
        fprintf(f, ", backend %s", n->backend);
        if (!strcmp(n->backend, "shm"))
            fprintf(f, " (local DRAM)");
        fprintf(f, "\n");
    }
    if (t->n_dax) {
        fprintf(f, "dax devices: %zu\n", t->n_dax);
        for (size_t i = 0; i < t->n_dax; i++) {
            const struct cxlp_topo_dax *x = &t->dax[i];
            fprintf(f, "  %s: %s, size %s, align %s", x->name, x->mode,
                    fmt_bytes(x->size, a, sizeof a),
                    x->align ? fmt_bytes(x->align, b, sizeof b) : "?");
            if (x->target_node >= 0)
                fprintf(f, ", target node %d", x->target_node);
            fprintf(f, ", %s", x->devpath);
            if (!strcmp(x->mode, "devdax"))
                fprintf(f, ", backend devdax");
            fprintf(f, "\n");
        }
    }
    if (t->n_cxl) {
        fprintf(f, "CXL bus: %zu devices\n", t->n_cxl);
        for (size_t i = 0; i < t->n_cxl; i++) {
            const struct cxlp_topo_cxl *x = &t->cxl[i];
            fprintf(f, "  %s: %s", x->name, x->kind);
            if (x->size)
                fprintf(f, ", size %s", fmt_bytes(x->size, a, sizeof a));
            fprintf(f, "\n");
        }
    }

    /* the summary: which backend stands for what */
    for (size_t i = 0; i < t->n_nodes; i++) {
        const struct cxlp_topo_node *n = &t->nodes[i].pub;
        if (n->is_cxl)
            fprintf(f, "CXL memory: node %d, %s (pool spec numa:%d:NAME)\n", n->id,
                    fmt_bytes(n->mem_total, a, sizeof a), n->id);
        else if (n->has_memory && !n->has_cpu)
            fprintf(f, "memory-only node %d, not identified as CXL (pool spec numa:%d:NAME)\n",
                    n->id, n->id);
    }
    for (size_t i = 0; i < t->n_dax; i++)
        if (!strcmp(t->dax[i].mode, "devdax"))
            fprintf(f, "device-dax memory: %s, %s (pool spec devdax:%s)\n", t->dax[i].devpath,
                    fmt_bytes(t->dax[i].size, a, sizeof a), t->dax[i].devpath);
    if (!has_cxl_node(t) && !has_devdax(t))
        fprintf(f, "emulated: no CXL memory found; pools on shm use local DRAM\n");
    if (t->n_warn) {
        fprintf(f, "warnings (figures left unknown):\n");
        for (size_t i = 0; i < t->n_warn && i < TOPO_MAX_WARN; i++)
            fprintf(f, "  %s\n", t->warn[i]);
        if (t->n_warn > TOPO_MAX_WARN)
            fprintf(f, "  ... and %zu more\n", t->n_warn - TOPO_MAX_WARN);
    }
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p >= 0x7f)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}

static void json_fig(FILE *f, const char *key, uint64_t v, int last)
{
    fprintf(f, "\"%s\": ", key);
    if (v == CXLP_TOPO_UNKNOWN)
        fprintf(f, "null");
    else
        fprintf(f, "%" PRIu64, v);
    fprintf(f, last ? "" : ", ");
}

static const char *jbool(int v)
{
    return v ? "true" : "false";
}

static void print_json(const struct cxlp_topo *t, FILE *f)
{
    fprintf(f, "{\n  \"sysfs_root\": ");
    json_str(f, t->root);
    fprintf(f, ",\n  \"nodes\": [");
    for (size_t i = 0; i < t->n_nodes; i++) {
        const struct topo_node *tn = &t->nodes[i];
        const struct cxlp_topo_node *n = &tn->pub;
        fprintf(f, "%s\n    {\"id\": %d, \"has_cpu\": %s, \"has_memory\": %s, ", i ? "," : "",
                n->id, jbool(n->has_cpu), jbool(n->has_memory));
        fprintf(f, "\"normal_memory\": %s, ",
                tn->normal_memory < 0 ? "null" : jbool(tn->normal_memory));
        fprintf(f, "\"mem_total\": %" PRIu64 ", ", n->mem_total);
        if (n->tier >= 0)
            fprintf(f, "\"tier\": %d, ", n->tier);
        else
            fprintf(f, "\"tier\": null, ");
        json_fig(f, "read_latency_ns", n->read_latency_ns, 0);
        json_fig(f, "write_latency_ns", n->write_latency_ns, 0);
        json_fig(f, "read_bandwidth_mbs", n->read_bandwidth_mbs, 0);
        json_fig(f, "write_bandwidth_mbs", n->write_bandwidth_mbs, 0);
        fprintf(f, "\"is_cxl\": %s, \"cxl_evidence\": ", jbool(n->is_cxl));
        if (n->is_cxl)
            json_str(f, tn->why_cxl);
        else
            fprintf(f, "null");
        fprintf(f, ", \"backend\": ");
        json_str(f, n->backend);
        fprintf(f, "}");
    }
    fprintf(f, "%s],\n  \"dax\": [", t->n_nodes ? "\n  " : "");
    for (size_t i = 0; i < t->n_dax; i++) {
        const struct cxlp_topo_dax *x = &t->dax[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        json_str(f, x->name);
        fprintf(f, ", \"size\": %" PRIu64 ", \"align\": %" PRIu64 ", \"target_node\": %d, \"mode\": ",
                x->size, x->align, x->target_node);
        json_str(f, x->mode);
        fprintf(f, ", \"devpath\": ");
        json_str(f, x->devpath);
        fprintf(f, "}");
    }
    fprintf(f, "%s],\n  \"cxl\": [", t->n_dax ? "\n  " : "");
    for (size_t i = 0; i < t->n_cxl; i++) {
        const struct cxlp_topo_cxl *x = &t->cxl[i];
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        json_str(f, x->name);
        fprintf(f, ", \"kind\": ");
        json_str(f, x->kind);
        fprintf(f, ", \"size\": %" PRIu64 "}", x->size);
    }
    int cxl = has_cxl_node(t), devdax = has_devdax(t);
    fprintf(f, "%s],\n  \"cxl_nodes\": %s, \"devdax\": %s, \"emulated\": %s,\n",
            t->n_cxl ? "\n  " : "", jbool(cxl), jbool(devdax), jbool(!cxl && !devdax));
    fprintf(f, "  \"warnings\": [");
    for (size_t i = 0; i < t->n_warn && i < TOPO_MAX_WARN; i++) {
        fprintf(f, "%s", i ? ", " : "");
        json_str(f, t->warn[i]);
    }
    fprintf(f, "], \"warnings_dropped\": %zu\n}\n",
            t->n_warn > TOPO_MAX_WARN ? t->n_warn - TOPO_MAX_WARN : 0);
}

int cxlp_topo_print(const cxlp_topo *t, FILE *f, int json)
{
    if (!t || !f)
        return seterr(NULL, CXLP_EARG, "cxlp_topo_print: %s is NULL", t ? "f" : "t");
    if (json)
        print_json(t, f);
    else
        print_text(t, f);
    if (ferror(f) || fflush(f) == EOF) {
        return seterr((struct obj *)&t->obj, -EIO, "cxlp_topo_print: write failed");
    }
    return 0;
}
