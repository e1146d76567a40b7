/*
 * qemu-numa-guest.c - runs as part of the initramfs of the guest that
 * scripts/qemu-numa-check.sh boots: a real kernel with a CPU-less NUMA node
 * carrying HMAT figures, the way a host with kmem CXL memory looks.
 *
 * It discovers the live topology (sysfs root NULL), prints the report, and
 * checks what the guest was started with: node 0 with CPUs and memory, node
 * 1 memory-only with the numa backend and the HMAT latency and bandwidth the
 * script passed (QEMU_EXPECT_* on the kernel command line reach us as
 * environment variables). It then binds a buffer to node 1 with mbind and
 * asks the kernel where the pages landed: the numa backend's premise; then
 * pools on node 1 and interleaved over nodes 0 and 1.
 *
 * Then a pool of two tiers, dram on node 0 and cxl on node 1: a dataset
 * migrates both ways while four reader processes verify every record they
 * read, and after each migration every copy the shards' location words name
 * is checked page by page with move_pages (query mode) and get_mempolicy:
 * the pages are on the node of the tier the word belongs to.
 *
 * With the argument "cxl" it checks the other guest the script can boot
 * (--cxl): an emulated CXL type-3 device enumerated by the kernel's CXL
 * drivers, whose /sys/bus/cxl/devices must show the memdev with its
 * persistent capacity, the root and ports, and decoders.
 *
 * With "hostA" or "hostB" it is one of two guests (--hosts) started at the
 * same time with the same host file as an ivshmem device: two kernels on
 * one memory, the shared CXL pool across hosts. The memory is BAR 2 of the
 * device (vendor 0x1af4, device 0x1110), a pool spec pci:.../resource2.
 * A creates the pool, ingests and publishes dataset "fromA"; B, running at
 * the same time, attaches as soon as the pool exists, lists it, waits for
 * "fromA", reads every record against its expected bytes and verifies every
 * checksum, sees A's lease as another host's, then writes "fromB"; A waits
 * for "fromB" and reads and verifies it. Each guest prints its verdict.
 *
 * Prints "GUEST-PASS" or "GUEST-FAIL: reason" as its last line; the script
 * reads that from the serial console. Built static: the initramfs has no
 * shared libraries.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <numaif.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cxlpool.h"
#include "load/loader.h"
#include "media/media.h"
#include "pool/loc.h"
#include "pool/pool.h"
#include "store/store.h"

static int fails;

static void expect(int ok, const char *what)
{
    printf("  %-52s %s\n", what, ok ? "ok" : "FAILED");
    if (!ok)
        fails++;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 10) : dflt;
}

/* mbind a fresh buffer to node and report where its first page lives. */
static int page_node_after_mbind(int node)
{
    size_t len = 4 << 20;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -errno;
    unsigned long mask[16] = {0};
    mask[node / (8 * sizeof mask[0])] |= 1UL << (node % (8 * sizeof mask[0]));
    if (mbind(p, len, MPOL_BIND, mask, sizeof mask * 8, MPOL_MF_STRICT) != 0) {
        int rc = -errno;
        munmap(p, len);
        return rc;
    }
    memset(p, 0x5a, len);
    int where = -1;
    if (get_mempolicy(&where, NULL, 0, p, MPOL_F_NODE | MPOL_F_ADDR) != 0)
        where = -errno;
    munmap(p, len);
    return where;
}

static const struct cxlp_topo_cxl *find_cxl(const cxlp_topo *t, const char *name)
{
    for (size_t i = 0; i < cxlp_topo_cxl_count(t); i++)
        if (!strcmp(cxlp_topo_cxl(t, i)->name, name))
            return cxlp_topo_cxl(t, i);
    return NULL;
}

static int count_kind(const cxlp_topo *t, const char *kind)
{
    int n = 0;
    for (size_t i = 0; i < cxlp_topo_cxl_count(t); i++)
        n += !strcmp(cxlp_topo_cxl(t, i)->kind, kind);
    return n;
}

/* The guest's live topology, printed for the log; NULL (after a GUEST-FAIL
 * line) when discovery fails. */
static cxlp_topo *discover_and_print(void)
{
    cxlp_topo *t;
    if (cxlp_topo_discover(NULL, &t) != 0) {
        printf("GUEST-FAIL: cxlp_topo_discover: %s\n", cxlp_errmsg(NULL));
        return NULL;
    }
    cxlp_topo_print(t, stdout, 0);
    printf("checks:\n");
    return t;
}

/* The last line the script reads from the serial console. */
static int verdict(void)
{
    if (fails) {
        printf("GUEST-FAIL: %d check(s) failed\n", fails);
        return 1;
    }
    printf("GUEST-PASS\n");
    return 0;
}

static int check_cxl(void)
{
    uint64_t size = env_u64("QEMU_EXPECT_CXL_SIZE", 256ULL << 20);
    cxlp_topo *t = discover_and_print();
    if (!t)
        return 1;
    const struct cxlp_topo_cxl *mem0 = find_cxl(t, "mem0"), *root0 = find_cxl(t, "root0");
    expect(mem0 && !strcmp(mem0->kind, "memdev"), "mem0 is a memdev");
    expect(mem0 && mem0->size == size, "mem0 capacity (ram + pmem) as configured");
    expect(root0 && !strcmp(root0->kind, "port"), "root0 is a port");
    expect(count_kind(t, "port") >= 3, "root, host bridge port and endpoint");
    expect(count_kind(t, "decoder") >= 1, "decoders enumerated");
    expect(count_kind(t, "region") == 0, "no region configured");
    /* a device without a region onlines no memory: no node may be CXL */
    int any = 0;
    for (size_t i = 0; i < cxlp_topo_node_count(t); i++)
        any |= cxlp_topo_node(t, i)->is_cxl;
    expect(!any, "no node claimed as CXL without a region");
    cxlp_topo_free(t);
    return verdict();
}

/* Dataset "recs" of p: 1024 records of 4 KiB, record i filled with i & 0xff. */
static int write_recs(cxlp_pool *p)
{
    struct cxlp_schema sc = {.fixed = 1, .record_size = 4096, .n_fields = 1,
                             .fields = {{.name = "data", .dtype = CXLP_DT_U8, .ndim = 1,
                                         .shape = {4096}}}};
    cxlp_writer *w = NULL;
    static uint8_t rec[4096];
    int rc = cxlp_writer_begin(p, "recs", &sc, NULL, &w);
    for (int i = 0; rc == 0 && i < 1024; i++) {
        memset(rec, i & 0xff, sizeof rec);
        rc = cxlp_writer_append(w, rec, sizeof rec);
    }
    if (rc == 0)
        return cxlp_writer_commit(w);
    cxlp_writer_abort(w);
    return rc;
}

/* A pool interleaved over node 0 (DRAM, CPUs) and node 1 (memory only):
 * the object's policy is MPOL_INTERLEAVE over both for a second attacher,
 * its record pages alternate between the nodes, and the node with CPUs
 * nearest its memory is node 0. */
static void check_interleave_pool(void)
{
    const char *spec = "numa:interleave=0-1:guestil";
    cxlp_pool *p = NULL;
    int rc = cxlp_pool_create(spec, 64ULL << 20, NULL, &p);
    printf("  pool %s: %s\n", spec, rc ? cxlp_errmsg(NULL) : "created");
    expect(rc == 0, "create a pool interleaved over nodes 0 and 1");
    if (rc)
        return;
    struct cxlp_pool_stat st;
    expect(cxlp_pool_stat(p, &st) == 0 && st.numa_interleave && !strcmp(st.numa_nodes, "0-1") &&
               st.numa_node == -1 && st.emulated == 1 && st.near_node == 0,
           "stat: interleaved over nodes 0-1, emulated (node 0 is DRAM), nearest CPU node 0");
    rc = write_recs(p);
    expect(rc == 0, "ingest 4 MiB of records into the interleaved pool");
    cxlp_pool *q = NULL;
    cxlp_store *s = NULL;
    rc = rc ? rc : cxlp_pool_open(spec, &(struct cxlp_pool_opts){.readonly = 1}, &q);
    rc = rc ? rc : cxlp_store_open(q, "recs", &s);
    expect(rc == 0, "a second, read-only attacher opens the dataset");
    int on[2] = {0, 0}, same = 0, interleaved = 0, n = 0;
    for (uint64_t i = 0; s && i < 1024; i++, n++) {
        struct cxlp_view v;
        if (cxlp_store_read(s, i, &v) != 0)
            break;
        int where = -1, mode = -1;
        unsigned long mask[16] = {0};
        get_mempolicy(&where, NULL, 0, (void *)v.data, MPOL_F_NODE | MPOL_F_ADDR);
        get_mempolicy(&mode, mask, sizeof mask * 8, (void *)v.data, MPOL_F_ADDR);
        if (where == 0 || where == 1)
            on[where]++;
        interleaved += mode == MPOL_INTERLEAVE && mask[0] == 3;
        same += ((const uint8_t *)v.data)[100] == (i & 0xff);
    }
    printf("  record pages: %d on node 0, %d on node 1\n", on[0], on[1]);
    expect(n == 1024 && same == n && interleaved == n,
           "every record reads back under MPOL_INTERLEAVE over nodes 0-1");
    expect(on[0] + on[1] == n && on[0] >= n / 4 && on[1] >= n / 4,
           "the record pages are spread over both nodes");
    cxlp_store_close(s);
    cxlp_pool_close(q);
    cxlp_pool_close(p);
    expect(cxlp_pool_destroy(spec) == 0, "destroy the interleaved pool");
}

/* The numa backend on a real memory-only node: a pool on numa:1 gets its
 * record pages from node 1, its checksums verify, and a second attacher
 * reads the same bytes; then the same over nodes 0 and 1 interleaved. */
static void check_numa_pool(void)
{
    check_interleave_pool();
    cxlp_pool *p = NULL;
    int rc = cxlp_pool_create("numa:1:guest", 64ULL << 20, NULL, &p);
    printf("  pool numa:1:guest: %s\n", rc ? cxlp_errmsg(NULL) : "created");
    expect(rc == 0, "create a pool on the numa backend, node 1");
    if (rc)
        return;
    struct cxlp_pool_stat st;
    expect(cxlp_pool_stat(p, &st) == 0 && st.media == CXLP_MEDIA_NUMA && st.numa_node == 1 &&
               st.emulated == 0, "stat: numa media on node 1, not emulated (node has no CPUs)");
    rc = write_recs(p);
    expect(rc == 0, "ingest 4 MiB of records into the numa pool");
    cxlp_pool *q = NULL;
    cxlp_store *s = NULL;
    rc = rc ? rc : cxlp_pool_open("numa:1:guest", &(struct cxlp_pool_opts){.readonly = 1}, &q);
    rc = rc ? rc : cxlp_store_open(q, "recs", &s);
    expect(rc == 0, "a second, read-only attacher opens the dataset");
    int on1 = 0, same = 0;
    for (uint64_t i = 0; s && i < 1024; i += 97) {
        struct cxlp_view v;
        if (cxlp_store_read(s, i, &v) != 0)
            break;
        int where = -1;
        get_mempolicy(&where, NULL, 0, (void *)v.data, MPOL_F_NODE | MPOL_F_ADDR);
        on1 += where == 1;
        same += ((const uint8_t *)v.data)[100] == (i & 0xff);
    }
    printf("  record pages on node 1: %d of 11\n", on1);
    expect(on1 == 11 && same == 11, "every sampled record lives on node 1 and reads back");
    uint64_t pb = 0, ph = 0;
    if (s && cxlp_store_pages(s, &pb, &ph) == 0)
        printf("  dataset pages: %" PRIu64 " of %" PRIu64 " bytes on 2 MiB pages\n", ph, pb);
    /* gather threads for records on the CPU-less node 1 run on the nearest
     * node with CPUs */
    int chosen = -1, cpus = loader_cpus(-1, 1, &chosen);
    printf("  gather threads for node 1's records: node %d, %d CPUs\n", chosen, cpus);
    expect(chosen == 0 && cpus >= 1, "gather threads for a CPU-less node's records run on node 0");
    expect(cxlp_pool_verify(p, NULL, NULL) == 0, "cxlp_pool_verify passes");
    cxlp_store_close(s);
    cxlp_pool_close(q);
    cxlp_pool_close(p);
    expect(cxlp_pool_destroy("numa:1:guest") == 0, "destroy the numa pool");
}

/* Record i of the tier dataset: 4 KiB of bytes derived from i. */
static void tier_record(uint8_t *b, uint64_t i)
{
    for (int k = 0; k < 4096; k++)
        b[k] = (uint8_t)(i * 31 + (uint64_t)k * 7);
}

/* Dataset name of p: n records of 4 KiB (tier_record) in shards of
 * shard_bytes. */
static int ingest_tier_records(cxlp_pool *p, const char *name, uint64_t n, uint64_t shard_bytes)
{
    struct cxlp_schema sc = {.fixed = 1, .record_size = 4096, .n_fields = 1,
                             .fields = {{.name = "data", .dtype = CXLP_DT_U8, .ndim = 1,
                                         .shape = {4096}}}};
    struct cxlp_writer_opts wo = {.shard_bytes = shard_bytes};
    cxlp_writer *w = NULL;
    static uint8_t rec[4096];
    int rc = cxlp_writer_begin(p, name, &sc, &wo, &w);
    for (uint64_t i = 0; rc == 0 && i < n; i++) {
        tier_record(rec, i);
        rc = cxlp_writer_append(w, rec, sizeof rec);
    }
    return rc ? (cxlp_writer_abort(w), rc) : cxlp_writer_commit(w);
}

/* The nodes of the pages of every copy in tier t: n pages counted, how
 * many move_pages and get_mempolicy both place on want. */
static void pages_on(cxlp_pool *p, const char *name, uint32_t t, int want, int *n, int *ok)
{
    struct pool_dataset ds;
    struct pool_shard *sh;
    struct attach *a;
    uint64_t gen;
    *n = *ok = 0;
    if (pool_lookup(p, name, &ds, &sh, &a, &gen) != 0)
        return;
    const uint64_t *st = attach_states(a, ds.states_off);
    const struct attach_tier *at = attach_tier(a, t);
    uint32_t stride = attach_stride(a);
    for (uint32_t k = 0; k < ds.n_shards; k++) {
        uint64_t w = __atomic_load_n(&st[k * stride + 1 + t], __ATOMIC_ACQUIRE);
        if (!loc_present(w))
            continue;
        for (uint64_t off = 0; off < sh[k].len; off += 4096) {
            void *pg = (void *)(at->base + loc_off(w) + off);
            int status = -1, where = -1;
            /* move_pages answers for pages mapped in this process: the copy
             * was written through another mapping of the tier's object */
            (void)*(volatile const uint8_t *)pg;
            move_pages(0, 1, &pg, NULL, &status, 0);
            get_mempolicy(&where, NULL, 0, pg, MPOL_F_NODE | MPOL_F_ADDR);
            (*n)++;
            *ok += status == want && where == want;
        }
    }
    free(sh);
    attach_unpin(a, gen);
    attach_unref(a);
}

static void copies_in(cxlp_pool *p, uint64_t *c0, uint64_t *c1)
{
    struct cxlp_tier_info ti[2];
    size_t nt = 0;
    *c0 = *c1 = UINT64_MAX;
    if (cxlp_pool_tiers(p, ti, 2, &nt) == 0 && nt == 2) {
        *c0 = ti[0].copies;
        *c1 = ti[1].copies;
    }
}

/* A pool of two tiers, dram on node 0 and cxl on node cxl_node; a dataset
 * of n 4 KiB records in shards of 64 KiB migrated both ways, rounds times,
 * under nreaders verifying reader processes; every copy's pages where its
 * tier is after each move. */
static void check_tier_migration(int cxl_node, int nreaders, uint64_t n, int rounds)
{
    const char *spec = "guesttiers";
    char cxl_tier[48];
    snprintf(cxl_tier, sizeof cxl_tier, "cxl=numa:%d:48M", cxl_node);
    const char *tiers[] = {"dram=numa:0:48M", cxl_tier};
    struct cxlp_pool_opts o = {.meta_bytes = 4ULL << 20};
    cxlp_pool *p = NULL;
    int rc = cxlp_pool_create_tiered(spec, tiers, 2, &o, &p);
    printf("  pool %s (dram=numa:0, %s): %s\n", spec, cxl_tier,
           rc ? cxlp_errmsg(NULL) : "created");
    expect(rc == 0, "create a pool of two tiers, dram on node 0 and cxl on the other");
    if (rc)
        return;
    const uint64_t shards = (n + 15) / 16; /* 16 records a shard */
    rc = ingest_tier_records(p, "moving", n, 64 << 10);
    printf("  ingest %" PRIu64 " KiB in %" PRIu64 " shards into the cxl tier: %s\n", n * 4,
           shards, rc ? cxlp_errmsg(p) : "ok");
    expect(rc == 0, "ingest into the slowest tier (cxl)");
    uint64_t c0, c1;
    copies_in(p, &c0, &c1);
    expect(c0 == 0 && c1 == shards, "every shard copy in the cxl tier");
    int pn, pok;
    pages_on(p, "moving", 1, cxl_node, &pn, &pok);
    printf("  after ingest: %d of %d pages of cxl copies on node %d\n", pok, pn, cxl_node);
    expect(pn > 0 && pok == pn, "move_pages and get_mempolicy: cxl copies on the cxl node");

    /* the readers verify records until told to stop */
    volatile uint64_t *shared = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                                     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    pid_t kid[8];
    nreaders = nreaders < 1 ? 1 : nreaders > 8 ? 8 : nreaders;
    for (int r = 0; r < nreaders; r++) {
        kid[r] = fork();
        if (kid[r] == 0) {
            cxlp_pool *q;
            cxlp_store *s;
            if (cxlp_pool_open(spec, &(struct cxlp_pool_opts){.readonly = 1}, &q) ||
                cxlp_store_open(q, "moving", &s))
                _exit(2);
            uint8_t got[4096], want[4096];
            uint64_t x = (uint64_t)r + 1;
            while (!__atomic_load_n(&shared[0], __ATOMIC_ACQUIRE)) {
                x = x * 6364136223846793005ULL + 1442695040888963407ULL;
                uint64_t i = (x >> 20) % n, len;
                if (cxlp_store_read_copy(s, i, got, sizeof got, &len) != 0)
                    _exit(3);
                tier_record(want, i);
                if (len != 4096 || memcmp(got, want, 4096) != 0)
                    __atomic_fetch_add(&shared[2 + r], 1, __ATOMIC_RELAXED);
                __atomic_fetch_add(&shared[1], 1, __ATOMIC_RELAXED);
            }
            _exit(0);
        }
    }
    int moves_ok = 1;
    for (int round = 0; round < rounds; round++) { /* both ways */
        struct cxlp_migrate_stat ms;
        rc = cxlp_migrate(p, "moving", "dram", NULL, &ms);
        moves_ok &= rc == 0;
        copies_in(p, &c0, &c1);
        pages_on(p, "moving", 0, 0, &pn, &pok);
        printf("  round %d, to dram: %s; copies %llu/%llu; %d of %d pages on node 0\n", round,
               rc ? cxlp_errmsg(p) : "moved", (unsigned long long)c0, (unsigned long long)c1,
               pok, pn);
        moves_ok &= c0 == shards && c1 == 0 && pn > 0 && pok == pn;
        rc = cxlp_migrate(p, "moving", "cxl", NULL, &ms);
        moves_ok &= rc == 0;
        copies_in(p, &c0, &c1);
        pages_on(p, "moving", 1, cxl_node, &pn, &pok);
        printf("  round %d, to cxl: %s; copies %llu/%llu; %d of %d pages on node %d\n", round,
               rc ? cxlp_errmsg(p) : "moved", (unsigned long long)c0, (unsigned long long)c1,
               pok, pn, cxl_node);
        moves_ok &= c0 == 0 && c1 == shards && pn > 0 && pok == pn;
    }
    __atomic_store_n(&shared[0], 1, __ATOMIC_RELEASE);
    int readers_ok = 1;
    uint64_t bad = 0;
    for (int r = 0; r < nreaders; r++) {
        int status;
        readers_ok &= waitpid(kid[r], &status, 0) == kid[r] && WIFEXITED(status) &&
                      WEXITSTATUS(status) == 0;
    }
    for (int r = 0; r < nreaders; r++)
        bad += shared[2 + r];
    printf("  %d readers verified %llu records during the migrations, %llu mismatches\n",
           nreaders, (unsigned long long)shared[1], (unsigned long long)bad);
    expect(moves_ok, "migrate both ways; every copy's pages on its tier's node after each move");
    expect(readers_ok && bad == 0 && shared[1] > 0, "the readers: no error, no mismatch");
    expect(cxlp_pool_verify(p, NULL, NULL) == 0, "cxlp_pool_verify passes");
    cxlp_pool_close(p);
    expect(cxlp_pool_destroy(spec) == 0, "destroy the tiered pool");
}

/* ------------------------------------------------ two hosts, one memory */

#define HOSTS_RECORDS 4096u
#define HOSTS_RECORD 2048u

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The ivshmem device's shared memory: "pci:/sys/bus/pci/devices/D/resource2". */
static int find_ivshmem(char *spec, size_t cap)
{
    DIR *d = opendir("/sys/bus/pci/devices");
    if (!d)
        return -1;
    struct dirent *e;
    int found = -1;
    while (found && (e = readdir(d))) {
        char p[512], buf[32];
        unsigned long v = 0, dev = 0;
        snprintf(p, sizeof p, "/sys/bus/pci/devices/%s/vendor", e->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        if (fgets(buf, sizeof buf, f))
            v = strtoul(buf, NULL, 0);
        fclose(f);
        snprintf(p, sizeof p, "/sys/bus/pci/devices/%s/device", e->d_name);
        if ((f = fopen(p, "r"))) {
            if (fgets(buf, sizeof buf, f))
                dev = strtoul(buf, NULL, 0);
            fclose(f);
        }
        if (v == 0x1af4 && dev == 0x1110) {
            snprintf(spec, cap, "pci:/sys/bus/pci/devices/%s/resource2", e->d_name);
            found = 0;
        }
    }
    closedir(d);
    return found;
}

static void fill_record(uint8_t *r, uint64_t i, uint64_t seed)
{
    for (uint32_t k = 0; k < HOSTS_RECORD; k += 8) {
        uint64_t v = (i * 0x9e3779b97f4a7c15ULL) ^ (seed << 32) ^ k;
        memcpy(r + k, &v, 8);
    }
}

static int ingest_named(cxlp_pool *p, const char *name, uint64_t seed)
{
    struct cxlp_schema sc = {.fixed = 1, .record_size = HOSTS_RECORD, .n_fields = 1,
                             .fields = {{.name = "data", .dtype = CXLP_DT_U8, .ndim = 1,
                                         .shape = {HOSTS_RECORD}}}};
    struct cxlp_writer_opts o = {.shard_bytes = 1 << 20};
    cxlp_writer *w = NULL;
    static uint8_t rec[HOSTS_RECORD];
    int rc = cxlp_writer_begin(p, name, &sc, &o, &w);
    for (uint64_t i = 0; rc == 0 && i < HOSTS_RECORDS; i++) {
        fill_record(rec, i, seed);
        rc = cxlp_writer_append(w, rec, sizeof rec);
    }
    if (rc == 0)
        return cxlp_writer_commit(w);
    cxlp_writer_abort(w);
    return rc;
}

/* Waits (up to 300 s) for dataset name; then reads every record against its
 * expected bytes and recomputes every checksum. */
static int read_named(cxlp_pool *p, const char *name, uint64_t seed)
{
    double t0 = now_s();
    cxlp_store *s = NULL;
    while (cxlp_store_open(p, name, &s) != 0) {
        if (now_s() - t0 > 300)
            return -1;
        usleep(100000);
    }
    printf("  %s appeared after %.1f s of waiting\n", name, now_s() - t0);
    static uint8_t want[HOSTS_RECORD];
    uint64_t good = 0, n = cxlp_store_count(s);
    for (uint64_t i = 0; i < n; i++) {
        struct cxlp_view v;
        fill_record(want, i, seed);
        if (cxlp_store_read(s, i, &v) == 0 && v.len == HOSTS_RECORD &&
            memcmp(v.data, want, HOSTS_RECORD) == 0)
            good++;
    }
    int vrc = cxlp_store_verify(s);
    printf("  %s: %" PRIu64 " of %" PRIu64 " records as written; checksums %s\n", name, good, n,
           vrc ? cxlp_errmsg(s) : "verified");
    cxlp_store_close(s);
    return good == HOSTS_RECORDS && n == HOSTS_RECORDS && vrc == 0 ? 0 : -1;
}

/* 1 when the lease table shows a live lease of another host. */
static int sees_other_host(cxlp_pool *p, int quiet)
{
    struct cxlp_lease_info l[16];
    size_t n = 0;
    if (cxlp_pool_leases(p, l, 16, &n) != 0)
        return 0;
    int other = 0;
    for (size_t i = 0; i < n && i < 16; i++) {
        if (!quiet)
            printf("  lease %u: host %s (id %016" PRIx64 "), pid %u, %s, %s\n", l[i].slot,
               l[i].host, l[i].host_id, l[i].pid, l[i].live ? "live" : "expired",
               l[i].this_process ? "this process" : l[i].same_domain ? "this host" : "another host");
        other |= l[i].live && !l[i].same_domain && !l[i].this_process;
    }
    return other;
}

static int check_hosts(int a)
{
    char spec[300];
    int rc = find_ivshmem(spec, sizeof spec);
    expect(rc == 0, "an ivshmem device (1af4:1110) with its BAR 2");
    if (rc)
        return verdict();
    printf("  pool spec %s\n", spec);
    cxlp_pool *p = NULL;
    if (a) {
        struct stat rs;
        rc = stat(spec + 4, &rs) == 0 ? cxlp_pool_create(spec, (uint64_t)rs.st_size, NULL, &p) : -1;
        printf("  create: %s\n", rc ? cxlp_errmsg(NULL) : "ok");
        expect(rc == 0, "host A formats a pool in the shared region");
    } else {
        double t0 = now_s();
        while ((rc = cxlp_pool_open(spec, NULL, &p)) != 0 && now_s() - t0 < 300)
            usleep(100000);
        printf("  attach: %s after %.1f s\n", rc ? cxlp_errmsg(NULL) : "ok", now_s() - t0);
        expect(rc == 0, "host B attaches the pool host A formatted");
    }
    if (rc)
        return verdict();
    struct cxlp_pool_stat st;
    if (cxlp_pool_stat(p, &st) == 0)
        printf("  media %s%s, host id %016" PRIx64 " from %s\n", cxlp_media_name(st.media),
               st.emulated ? " (emulated: ivshmem)" : "", st.host_id, st.host_id_source);
    if (a) {
        /* B attached and waiting for fromA before A ingests it */
        double t0 = now_s();
        while (!sees_other_host(p, 1) && now_s() - t0 < 300)
            usleep(100000);
        printf("  host B attached after %.1f s\n", now_s() - t0);
        expect(sees_other_host(p, 0), "host A sees host B attached before it ingests");
        expect(ingest_named(p, "fromA", 1) == 0, "host A ingests and publishes fromA");
        expect(read_named(p, "fromB", 2) == 0, "host A reads every record of fromB");
    } else {
        struct cxlp_dataset_info inf[8];
        size_t n = 0;
        expect(cxlp_pool_list(p, inf, 8, &n) == 0, "host B lists the pool");
        printf("  %zu datasets at attach\n", n);
        expect(read_named(p, "fromA", 1) == 0, "host B reads every record of fromA");
        expect(sees_other_host(p, 0), "host B sees host A's lease as another host's");
        expect(ingest_named(p, "fromB", 2) == 0, "host B ingests and publishes fromB");
    }
    expect(cxlp_pool_verify(p, NULL, NULL) == 0, "cxlp_pool_verify passes");
    cxlp_pool_close(p);
    return verdict();
}

/* ------------------------------------------------ a CXL region, two ways */

/* A loader's index source over a C sampler (ctx). */
static int rec_sampler_fn(void *ctx, uint64_t *out, size_t max, size_t *n)
{
    *n = cxlp_sampler_next(ctx, out, max);
    return 0;
}

/* One pass of a loader over dataset s of n tier_records: every row checked
 * byte for byte, every record once. after(ctx, batches) runs after each
 * batch (NULL: none). Returns the loader's code (0: the pass ended), with
 * its message in err; *records and *bad (rows wrong or repeated) say what
 * came before. */
static int loader_pass(cxlp_store *s, uint64_t n, int kind, uint64_t per_shard,
                       const struct cxlp_loader_opts *o, void (*after)(void *, uint64_t),
                       void *ctx, uint64_t *records, uint64_t *bad, char *err, size_t cap)
{
    struct cxlp_sampler_config cfg = {.kind = kind, .n = n, .seed = 29, .shard_size = per_shard,
                                      .window = 4, .world = 1};
    cxlp_sampler *sm = NULL;
    cxlp_loader *l = NULL;
    uint8_t *seen = calloc(n, 1);
    static uint8_t want[4096];
    *records = *bad = 0;
    int rc = seen ? cxlp_sampler_create(&cfg, &sm) : -ENOMEM;
    if (!rc)
        rc = cxlp_loader_create(s, o, rec_sampler_fn, sm, &l);
    if (rc)
        snprintf(err, cap, "%s", cxlp_errmsg(NULL));
    for (uint64_t batches = 0; !rc;) {
        struct cxlp_batch *b;
        if ((rc = cxlp_loader_next(l, &b))) {
            snprintf(err, cap, "%s", cxlp_errmsg(l));
            break;
        }
        if (!b)
            break;
        for (uint32_t r = 0; r < b->rows; r++) {
            uint64_t id = b->ids[r];
            tier_record(want, id < n ? id : 0);
            if (id >= n || seen[id] || b->row_bytes != 4096 ||
                memcmp((const uint8_t *)b->data + (uint64_t)r * 4096, want, 4096) != 0)
                ++*bad;
            else
                seen[id] = 1;
        }
        *records += b->rows;
        cxlp_loader_release(l, b);
        if (after)
            after(ctx, ++batches);
    }
    struct cxlp_loader_stats ls;
    if (l && o->tier_policy && cxlp_loader_stats(l, &ls) == 0)
        printf("  loader: %" PRIu64 " hits, %" PRIu64 " misses, %" PRIu64 " prefetched, %" PRIu64
               " fetched (%" PRIu64 " bytes), %" PRIu64 " partial reads (%" PRIu64
               " bytes), %" PRIu64 " private, units of %" PRIu64 " records\n",
               ls.hits, ls.misses, ls.prefetched, ls.fetched, ls.bytes_staged, ls.partial_reads,
               ls.partial_bytes, ls.private_reads, ls.unit_records);
    cxlp_loader_free(l);
    cxlp_sampler_free(sm);
    free(seen);
    return rc;
}

static const struct cxlp_topo_dax *find_dax(const cxlp_topo *t, const char *devpath)
{
    for (size_t i = 0; i < cxlp_topo_dax_count(t); i++)
        if (!strcmp(cxlp_topo_dax(t, i)->devpath, devpath))
            return cxlp_topo_dax(t, i);
    return NULL;
}

/* A pool on the dax device of a CXL region (cxl create-region, then ndctl
 * create-namespace -m devdax): created, ingested, read by a loader, every
 * record once and byte-exact, verified; left in place for `cxlpool verify`
 * and `cxlpool destroy`, which the init script runs next. */
static int check_region_devdax(const char *dev)
{
    cxlp_topo *t = discover_and_print();
    if (!t)
        return 1;
    const struct cxlp_topo_dax *d = find_dax(t, dev);
    expect(count_kind(t, "region") >= 1, "a region on the CXL bus");
    expect(d && !strcmp(d->mode, "devdax") && d->size >= (64ULL << 20),
           "its dax device, in devdax mode, in the report");
    if (d)
        printf("  %s: %" PRIu64 " bytes, align %" PRIu64 ", target node %d\n", d->name, d->size,
               d->align, d->target_node);
    cxlp_topo_free(t);
    char spec[96];
    snprintf(spec, sizeof spec, "devdax:%s", dev);
    cxlp_pool *p = NULL;
    int rc = cxlp_pool_create(spec, 64ULL << 20, NULL, &p);
    printf("  pool %s: %s\n", spec, rc ? cxlp_errmsg(NULL) : "created");
    expect(rc == 0, "create a pool on the region's dax device");
    if (rc)
        return verdict();
    struct cxlp_pool_stat st;
    expect(cxlp_pool_stat(p, &st) == 0 && st.media == CXLP_MEDIA_DEVDAX && !st.emulated,
           "stat: devdax media, not emulated");
    /* QEMU 7.2 emulates every access to the region's memory: 4 MiB */
    const uint64_t n = 1024;
    rc = ingest_tier_records(p, "region", n, 256 << 10);
    expect(rc == 0, "ingest 4 MiB of records");
    cxlp_store *s = NULL;
    rc = rc ? rc : cxlp_store_open(p, "region", &s);
    uint64_t records = 0, bad = 0;
    char err[512] = "";
    struct cxlp_loader_opts o = {.batch_size = 64, .threads = 1};
    if (!rc)
        rc = loader_pass(s, n, CXLP_ORDER_RANDOM, 0, &o, NULL, NULL, &records, &bad, err,
                         sizeof err);
    printf("  loader, random order: %" PRIu64 " records, %" PRIu64 " wrong or repeated%s%s\n",
           records, bad, rc ? ": " : "", rc ? err : "");
    expect(rc == 0 && records == n && bad == 0,
           "a loader reads every record once, byte-exact, from the device");
    expect(s && cxlp_store_verify(s) == 0, "the dataset's checksums verify");
    expect(cxlp_pool_verify(p, NULL, NULL) == 0, "cxlp_pool_verify passes");
    cxlp_store_close(s);
    cxlp_pool_close(p);
    return verdict();
}

/* The same device as the cxl tier of a pool of tiers (no size: all of
 * it), a dataset moved to dram and back, every record intact. */
static int check_region_devdax_tier(const char *dev)
{
    char cxl_tier[96];
    snprintf(cxl_tier, sizeof cxl_tier, "cxl=devdax:%s", dev);
    const char *tiers[] = {"dram=shm:40M", cxl_tier};
    struct cxlp_pool_opts o = {.meta_bytes = 4ULL << 20};
    cxlp_pool *p = NULL;
    int rc = cxlp_pool_create_tiered("daxtiers", tiers, 2, &o, &p);
    printf("  pool daxtiers (dram=shm:40M, %s): %s\n", cxl_tier,
           rc ? cxlp_errmsg(NULL) : "created");
    expect(rc == 0, "create a pool of tiers whose cxl tier is the whole dax device");
    if (rc)
        return verdict();
    struct cxlp_tier_info ti[2];
    size_t nt = 0;
    expect(cxlp_pool_tiers(p, ti, 2, &nt) == 0 && nt == 2 && ti[1].media == CXLP_MEDIA_DEVDAX &&
               !ti[1].emulated && ti[1].capacity >= (200ULL << 20),
           "the cxl tier: devdax, not emulated, the device's size");
    rc = ingest_tier_records(p, "moving", 512, 128 << 10);
    expect(rc == 0, "ingest 2 MiB into the cxl (devdax) tier");
    struct cxlp_migrate_stat ms;
    int ok = rc == 0;
    const char *to[] = {"dram", "cxl"};
    for (int k = 0; ok && k < 2; k++) {
        ok &= cxlp_migrate(p, "moving", to[k], NULL, &ms) == 0;
        cxlp_store *s = NULL;
        uint64_t good = 0;
        static uint8_t got[4096], want[4096];
        if (ok && cxlp_store_open(p, "moving", &s) == 0) {
            for (uint64_t i = 0; i < 512; i++) {
                uint64_t len = 0;
                tier_record(want, i);
                good += cxlp_store_read_copy(s, i, got, sizeof got, &len) == 0 && len == 4096 &&
                        !memcmp(got, want, 4096);
            }
            cxlp_store_close(s);
        }
        printf("  to %s: %" PRIu64 " shards copied, %" PRIu64 " of 512 records intact\n",
               to[k], ms.copied, good);
        ok &= good == 512;
    }
    expect(ok, "migrate to dram and back to the dax device, every record intact");
    expect(cxlp_pool_verify(p, NULL, NULL) == 0, "cxlp_pool_verify passes");
    cxlp_pool_close(p);
    expect(cxlp_pool_destroy("daxtiers") == 0, "destroy the pool (the device's header wiped)");
    return verdict();
}

/* After daxctl reconfigure-device --mode=system-ram: the region's memory is
 * node `node`, memory-only, onlined by kmem; discovery must call it CXL,
 * and it carries a pool tier like any memory-only node. */
static int check_region_kmem(int node)
{
    cxlp_topo *t = discover_and_print();
    if (!t)
        return 1;
    const struct cxlp_topo_node *n = NULL, *n0 = NULL;
    for (size_t i = 0; i < cxlp_topo_node_count(t); i++) {
        if (cxlp_topo_node(t, i)->id == node)
            n = cxlp_topo_node(t, i);
        if (cxlp_topo_node(t, i)->id == 0)
            n0 = cxlp_topo_node(t, i);
    }
    int kmem = 0;
    for (size_t i = 0; i < cxlp_topo_dax_count(t); i++)
        kmem |= !strcmp(cxlp_topo_dax(t, i)->mode, "kmem") &&
                cxlp_topo_dax(t, i)->target_node == node;
    expect(n && n->has_memory && !n->has_cpu, "the region's node is memory-only");
    expect(kmem, "a dax device in kmem mode targets it");
    expect(n && n->is_cxl, "discovery calls it CXL");
    expect(n && !strcmp(n->backend, "numa"), "it maps to the numa backend");
    expect(n && n0 && n->tier > n0->tier, "its memory tier is below node 0's (DRAM)");
    if (n && n->read_latency_ns != CXLP_TOPO_UNKNOWN)
        printf("  HMAT: read latency %" PRIu64 " ns, read bandwidth %" PRIu64 " MiB/s\n",
               n->read_latency_ns, n->read_bandwidth_mbs);
    else
        printf("  HMAT: no figures for node %d (the firmware's HMAT names no such domain)\n",
               node);
    cxlp_topo_free(t);
    int where = page_node_after_mbind(node);
    printf("  mbind to node %d: page on node %d\n", node, where);
    expect(where == node, "mbind places pages on the region's node");
    /* QEMU 7.2 emulates every access to the region's memory (no RAM
     * mapping): 1 MiB, both ways once, keeps this short */
    check_tier_migration(node, 2, 256, 1);
    return verdict();
}

/* ------------------------------------------------ the archive over a fabric */

/* The fabric controller's state ("live", "connecting", ...) into buf. */
static void fabric_state(char *buf, size_t cap)
{
    snprintf(buf, cap, "?");
    DIR *d = opendir("/sys/class/nvme");
    struct dirent *e;
    while (d && (e = readdir(d))) {
        char p[300], tr[16] = "";
        snprintf(p, sizeof p, "/sys/class/nvme/%s/transport", e->d_name);
        FILE *f = fopen(p, "r");
        if (!f)
            continue;
        char *ok = fgets(tr, sizeof tr, f);
        fclose(f);
        if (!ok || strncmp(tr, "tcp", 3) != 0)
            continue;
        snprintf(p, sizeof p, "/sys/class/nvme/%s/state", e->d_name);
        if ((f = fopen(p, "r"))) {
            if (fgets(buf, (int)cap, f))
                buf[strcspn(buf, "\n")] = 0;
            fclose(f);
        }
    }
    if (d)
        closedir(d);
}

struct stop_at {
    uint64_t batch;      /* after this many batches: stop the target */
    double stopped;      /* when the controller left "live" (0: not yet) */
    cxlp_pool *pool;     /* its dram tier's copies are shown at both ends */
};

static void show_dram(cxlp_pool *p, const char *when)
{
    struct cxlp_tier_info ti[2];
    size_t nt = 0;
    if (cxlp_pool_tiers(p, ti, 2, &nt) == 0 && nt > 0)
        printf("  %s: dram holds %" PRIu64 " copies (%" PRIu64 " bytes), %" PRIu64
               " bytes copied in so far\n", when, ti[0].copies, ti[0].copy_bytes, ti[0].bytes_in);
}

/* After st->batch batches: asks the script to stop the target (a line on
 * the console), then waits until the kernel has noticed (the controller
 * leaves "live"), so that the reads that follow go to a dead target. */
static void stop_target(void *ctx, uint64_t batches)
{
    struct stop_at *st = ctx;
    if (batches != st->batch)
        return;
    show_dram(st->pool, "at the request");
    printf("FABRIC-STOP-TARGET\n");
    fflush(stdout);
    char state[32] = "";
    double t0 = now_s();
    do {
        usleep(100000);
        fabric_state(state, sizeof state);
    } while (!strcmp(state, "live") && now_s() - t0 < 120);
    st->stopped = now_s();
    printf("  controller %s %.1f s after the request\n", state, st->stopped - t0);
    show_dram(st->pool, "then");
}

#define FABRIC_LIMIT_S 60 /* the error must come within this of the loss */

static int check_fabric(const char *dev)
{
    char nvme_tier[96];
    snprintf(nvme_tier, sizeof nvme_tier, "nvme=file:%s", dev);
    const char *tiers[] = {"dram=shm:8M", nvme_tier};
    struct cxlp_pool_opts po = {.meta_bytes = 4ULL << 20};
    cxlp_pool *p = NULL;
    int rc = cxlp_pool_create_tiered("fabric", tiers, 2, &po, &p);
    printf("  pool fabric (dram=shm:8M, %s): %s\n", nvme_tier, rc ? cxlp_errmsg(NULL) : "created");
    expect(rc == 0, "create a pool whose home is the fabric namespace (its whole size)");
    if (rc)
        return verdict();
    struct cxlp_tier_info ti[2];
    size_t nt = 0;
    expect(cxlp_pool_tiers(p, ti, 2, &nt) == 0 && nt == 2 && ti[1].home && ti[1].staged &&
               !strcmp(ti[1].path, dev),
           "the home tier is the block device");
    printf("  home tier %s: %" PRIu64 " bytes\n", ti[1].path, ti[1].capacity);
    const uint64_t n = 2048; /* 8 MiB in shards of 256 KiB, four times the budget */
    rc = ingest_tier_records(p, "archive", n, 256 << 10);
    expect(rc == 0, "ingest 8 MiB into the home tier over the fabric");
    expect(cxlp_pool_verify(p, NULL, NULL) == 0, "cxlp_pool_verify passes");
    struct media_reader *r = NULL;
    char err[512] = "";
    int direct = media_reader_open(&r, dev, err, sizeof err) == 0 && media_reader_direct(r);
    media_reader_close(r);
    expect(direct, "the staging reader opens the namespace with O_DIRECT (io_uring)");
    cxlp_store *s = NULL;
    if (rc || cxlp_store_open(p, "archive", &s) != 0) {
        cxlp_pool_close(p);
        return verdict();
    }
    uint64_t per = s->per_shard, records, bad;
    /* a ring of 4 batches: the default for batches this small is as many
     * as fit 8 MiB, the whole dataset, and the gather thread then filled it
     * with the rest of epoch 2 while the check waited for the kernel to
     * notice the loss (a second or so before the kill): the epoch ended
     * without reading the dead target, in 4 of 7 runs. Now at most 4
     * batches and the 2 MiB budget lie ahead of the stop: 640 of the 1536
     * records left. */
    struct cxlp_loader_opts o = {.batch_size = 32, .threads = 1, .slots = 4,
                                 .tier_policy = CXLP_POLICY_LOOKAHEAD, .tier_budget = 2ULL << 20};
    rc = loader_pass(s, n, CXLP_ORDER_BLOCK, per, &o, NULL, NULL, &records, &bad, err, sizeof err);
    struct cxlp_tier_info t2[2];
    cxlp_pool_tiers(p, t2, 2, &nt);
    printf("  epoch 1: %" PRIu64 " records, %" PRIu64 " wrong or repeated; %" PRIu64
           " bytes staged into dram%s%s\n", records, bad, t2[0].bytes_in, rc ? ": " : "",
           rc ? err : "");
    expect(rc == 0 && records == n && bad == 0, "epoch 1: every record once, byte-exact");

    /* the target stops a quarter into the epoch, which starts cold: no
     * copy of epoch 1 (nor of epoch 2's first windows, staged as epoch 1
     * ended) left in dram, where it would serve records the dead target
     * should have, so what the budget holds when the target stops is all
     * the epoch can read without it */
    expect(cxlp_migrate(p, "archive", "nvme", NULL, NULL) == 0,
           "epoch 2 starts cold (the dram copies dropped)");
    /* and the namespace's pages dropped from the page cache: the records
     * a batch reads in part go through it where a range is not aligned
     * for O_DIRECT, and a run whose cache still held epoch 1's finished
     * epoch 2 without reading the dead target (twice in five runs) */
    int cfd = open(dev, O_RDONLY);
    expect(cfd >= 0 && fdatasync(cfd) == 0 && posix_fadvise(cfd, 0, 0, POSIX_FADV_DONTNEED) == 0,
           "the namespace's cached pages dropped");
    if (cfd >= 0)
        close(cfd);
    struct stop_at st = {n / 32 / 4, 0, p};
    rc = loader_pass(s, n, CXLP_ORDER_BLOCK, per, &o, stop_target, &st, &records, &bad, err,
                     sizeof err);
    double after = st.stopped ? now_s() - st.stopped : -1;
    printf("  epoch 2: %" PRIu64 " records before the loader stopped, %" PRIu64
           " wrong or repeated; %.1f s after the loss: %s\n", records, bad, after,
           rc ? err : "(no error)");
    expect(rc != 0 && st.stopped > 0 && after <= FABRIC_LIMIT_S,
           "epoch 2: the loader fails within the limit after the target stops");
    expect(strstr(err, "shard") && strstr(err, "tier 1") && strstr(err, dev),
           "its error names the shard and the tier (index and device)");
    expect(bad == 0 && records < n, "no wrong bytes before it");

    /* the target comes back; the kernel reconnects */
    printf("FABRIC-START-TARGET\n");
    fflush(stdout);
    double t0 = now_s();
    int fd = open(dev, O_RDONLY | O_DIRECT), back = 0;
    static uint8_t page[4096] __attribute__((aligned(4096)));
    while (fd >= 0 && !back && now_s() - t0 < 180) {
        back = pread(fd, page, sizeof page, 0) == (ssize_t)sizeof page;
        if (!back)
            usleep(500000);
    }
    if (fd >= 0)
        close(fd);
    char state[32];
    fabric_state(state, sizeof state);
    printf("  namespace %s after %.1f s (controller %s)\n",
           back ? "readable again" : "not readable", now_s() - t0, state);
    expect(back, "the initiator reconnects to the returned target");
    rc = loader_pass(s, n, CXLP_ORDER_BLOCK, per, &o, NULL, NULL, &records, &bad, err, sizeof err);
    printf("  epoch 3: %" PRIu64 " records, %" PRIu64 " wrong or repeated%s%s\n", records, bad,
           rc ? ": " : "", rc ? err : "");
    expect(rc == 0 && records == n && bad == 0, "epoch 3: every record once, byte-exact");
    expect(cxlp_store_verify(s) == 0 && cxlp_pool_verify(p, NULL, NULL) == 0,
           "the dataset and the pool verify");
    cxlp_store_close(s);
    cxlp_pool_close(p);
    expect(cxlp_pool_destroy("fabric") == 0, "destroy the pool (the namespace's header wiped)");
    return verdict();
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "cxl"))
        return check_cxl();
    if (argc > 1 && (!strcmp(argv[1], "hostA") || !strcmp(argv[1], "hostB")))
        return check_hosts(argv[1][4] == 'A');
    if (argc > 2 && !strcmp(argv[1], "region-devdax"))
        return check_region_devdax(argv[2]);
    if (argc > 2 && !strcmp(argv[1], "region-devdax-tier"))
        return check_region_devdax_tier(argv[2]);
    if (argc > 2 && !strcmp(argv[1], "region-kmem"))
        return check_region_kmem(atoi(argv[2]));
    if (argc > 2 && !strcmp(argv[1], "fabric-host"))
        return check_fabric(argv[2]);
    uint64_t lat1 = env_u64("QEMU_EXPECT_LAT1", 250);
    uint64_t bw1 = env_u64("QEMU_EXPECT_BW1", 32768);
    uint64_t lat0 = env_u64("QEMU_EXPECT_LAT0", 80);

    cxlp_topo *t = discover_and_print();
    if (!t)
        return 1;
    const struct cxlp_topo_node *n0 = NULL, *n1 = NULL;
    for (size_t i = 0; i < cxlp_topo_node_count(t); i++) {
        const struct cxlp_topo_node *n = cxlp_topo_node(t, i);
        if (n->id == 0)
            n0 = n;
        if (n->id == 1)
            n1 = n;
    }
    expect(cxlp_topo_node_count(t) == 2, "two NUMA nodes");
    expect(n0 && n0->has_cpu && n0->has_memory, "node 0 has CPUs and memory");
    expect(n1 && !n1->has_cpu && n1->has_memory, "node 1 is memory-only");
    expect(n1 && n1->mem_total >= (900ULL << 20), "node 1 holds about 1 GiB");
    expect(n1 && !strcmp(n1->backend, "numa"), "node 1 maps to the numa backend");
    expect(n0 && !strcmp(n0->backend, "shm"), "node 0 maps to the shm backend");
    expect(n1 && n1->read_latency_ns == lat1, "node 1 HMAT read latency as configured");
    expect(n1 && n1->read_bandwidth_mbs == bw1, "node 1 HMAT read bandwidth as configured");
    expect(n0 && n0->read_latency_ns == lat0, "node 0 HMAT read latency as configured");
    expect(n0 && n1 && n0->tier >= 0 && n1->tier >= 0, "both nodes in a memory tier");
    /* boot-time memory is DRAM-tier and no dax/CXL device exists: the rule
     * must not call this node CXL */
    expect(n1 && !n1->is_cxl, "node 1 not claimed as CXL without evidence");
    int where = n1 ? page_node_after_mbind(1) : -1;
    printf("  mbind to node 1: page on node %d\n", where);
    expect(where == 1, "mbind places pages on node 1");
    cxlp_topo_free(t);
    if (n1) {
        check_numa_pool();
        check_tier_migration(1, 4, 2048, 2); /* 8 MiB, both ways twice */
    }
    return verdict();
}
