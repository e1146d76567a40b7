/*
 * media.c - pool specs and dispatch to the backends.
 *
 * A pool lives on exactly one media object, mapped whole, MAP_SHARED |
 * MAP_NORESERVE: the mapping costs address space, not memory, so a sparse
 * 1 TiB file maps instantly and pages arrive on first touch. Backends differ
 * only in how the object is named, created, bound and made durable; that is
 * all the vtable carries (the OS-specific part, like mimalloc's prim/).
 *
 * Rejected: a pool spread over several media objects. Tiers (later) place
 * whole shards on other pools; one object per pool keeps offsets simple.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/common.h"
#include "media/media_impl.h"

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25 /* Linux 6.1 ABI; older kernels answer EINVAL */
#endif

const char *cxlp_media_name(int kind)
{
    switch (kind) {
    case CXLP_MEDIA_SHM: return "shm";
    case CXLP_MEDIA_FILE: return "file";
    case CXLP_MEDIA_NUMA: return "numa";
    case CXLP_MEDIA_DEVDAX: return "devdax";
    case CXLP_MEDIA_PCI: return "pci";
    case CXLP_MEDIA_UCX: return "ucx";
    default: return "?";
    }
}

static const struct media_ops *ops_for(int kind)
{
    switch (kind) {
    case CXLP_MEDIA_SHM: return &media_shm_ops;
    case CXLP_MEDIA_FILE: return &media_file_ops;
    case CXLP_MEDIA_NUMA: return &media_numa_ops;
    case CXLP_MEDIA_DEVDAX: return &media_devdax_ops;
    case CXLP_MEDIA_PCI: return &media_pci_ops;
    default: return NULL;
    }
}

/* Shared-memory names: the object is /dev/shm/cxlp.NAME. A name is one path
 * component of safe characters so no spec can reach outside /dev/shm. */
static int valid_shm_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 200 || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

static int parse_shm_name(struct media *m, const char *name, const char *spec,
                          char *err, size_t errlen)
{
    if (!valid_shm_name(name))
        return errbuf_set(err, errlen, CXLP_EARG,
                         "pool spec '%s': name '%s' must be 1-200 characters of "
                         "[A-Za-z0-9._-]", spec, name);
    snprintf(m->path, sizeof m->path, "/dev/shm/cxlp.%s", name);
    return 0;
}

/* "N:..." (bind to node N) or "interleave=LIST:..." with LIST items N or
 * N-M separated by commas, each node 0..MEDIA_MAX_NODES-1: sets the numa
 * fields of m, returns the ':' that ends the nodes, NULL when malformed. */
static const char *parse_numa_nodes(struct media *m, const char *p)
{
    const size_t W = 8 * sizeof(unsigned long);
    int interleave = strncmp(p, "interleave=", 11) == 0;
    if (interleave)
        p += 11;
    for (;;) {
        char *end;
        long lo, hi;
        if (*p < '0' || *p > '9')
            return NULL;
        errno = 0;
        lo = hi = strtol(p, &end, 10);
        if (interleave && *end == '-') {
            if (end[1] < '0' || end[1] > '9')
                return NULL;
            hi = strtol(end + 1, &end, 10);
        }
        if (errno || lo < 0 || hi < lo || hi >= MEDIA_MAX_NODES)
            return NULL;
        for (long n = lo; n <= hi; n++)
            m->numa_mask[n / W] |= 1UL << (n % W);
        if (!interleave) {
            m->numa_node = (int)lo;
            return *end == ':' ? end : NULL;
        }
        if (*end == ':') {
            m->numa_interleave = 1;
            return end;
        }
        if (*end != ',')
            return NULL;
        p = end + 1;
    }
}

int media_parse(struct media *m, const char *spec, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    m->fd = -1;
    m->numa_node = -1;
    if (!spec || !*spec)
        return errbuf_set(err, errlen, CXLP_EARG, "pool spec is empty");
    const char *colon = strchr(spec, ':');
    int rc;
    if (!colon) {
        m->kind = CXLP_MEDIA_SHM;
        rc = parse_shm_name(m, spec, spec, err, errlen);
    } else if (strncmp(spec, "shm:", 4) == 0) {
        m->kind = CXLP_MEDIA_SHM;
        rc = parse_shm_name(m, spec + 4, spec, err, errlen);
    } else if (strncmp(spec, "file:", 5) == 0) {
        m->kind = CXLP_MEDIA_FILE;
        if (!spec[5])
            return errbuf_set(err, errlen, CXLP_EARG, "pool spec '%s': file path is empty", spec);
        if (strlen(spec + 5) >= sizeof m->path)
            return errbuf_set(err, errlen, CXLP_EARG, "pool spec '%s': path too long", spec);
        strlcpy0(m->path, spec + 5, sizeof m->path);
        rc = 0;
    } else if (strncmp(spec, "numa:", 5) == 0) {
        m->kind = CXLP_MEDIA_NUMA;
        const char *end = parse_numa_nodes(m, spec + 5);
        if (!end)
            return errbuf_set(err, errlen, CXLP_EARG,
                             "pool spec '%s': expected numa:NODE:NAME or "
                             "numa:interleave=NODES:NAME (NODE 0..1023; NODES a list such as "
                             "0,1 or 0-3)", spec);
        rc = parse_shm_name(m, end + 1, spec, err, errlen);
    } else if (strncmp(spec, "devdax:", 7) == 0) {
        m->kind = CXLP_MEDIA_DEVDAX;
        const char *p = spec + 7;
        if (strncmp(p, "/dev/dax", 8) != 0 || strlen(p) >= sizeof m->path)
            return errbuf_set(err, errlen, CXLP_EARG,
                             "pool spec '%s': expected devdax:/dev/daxX.Y", spec);
        strlcpy0(m->path, p, sizeof m->path);
        rc = 0;
    } else if (strncmp(spec, "pci:", 4) == 0) {
        m->kind = CXLP_MEDIA_PCI;
        if (!spec[4] || strlen(spec + 4) >= sizeof m->path)
            return errbuf_set(err, errlen, CXLP_EARG, "pool spec '%s': expected pci:PATH of "
                              "a memory region (e.g. /sys/bus/pci/devices/D/resource2)", spec);
        strlcpy0(m->path, spec + 4, sizeof m->path);
        rc = 0;
    } else {
        return errbuf_set(err, errlen, CXLP_EARG,
                         "pool spec '%s': unknown backend (use NAME, shm:NAME, file:PATH, "
                         "numa:NODE:NAME, devdax:/dev/daxX.Y or pci:PATH)", spec);
    }
    if (rc == 0) {
        m->ops = ops_for(m->kind);
        m->align = 4096;
    }
    return rc;
}

int media_fstat(struct media *m, char *err, size_t errlen)
{
    struct stat st;
    if (fstat(m->fd, &st) < 0)
        return errbuf_set(err, errlen, -errno, "%s: fstat: %s", m->path, strerror(errno));
    /* shm and file pools are regular files; anything else planted under the
     * name (a FIFO would block a read, a device map something else) is not
     * a pool. The descriptor was opened O_NONBLOCK for this check. */
    if (!S_ISREG(st.st_mode))
        return errbuf_set(err, errlen, CXLP_EFORMAT, "%s: not a pool: %s, not a regular file",
                          m->path, file_kind(st.st_mode));
    (void)fcntl(m->fd, F_SETFL, fcntl(m->fd, F_GETFL) & ~O_NONBLOCK);
    m->owner = st.st_uid;
    m->size = (uint64_t)st.st_size;
    return 0;
}

int media_open_errno(struct media *m, int e, int creating, char *err, size_t errlen)
{
    if (creating && e == EEXIST)
        return errbuf_set(err, errlen, CXLP_EEXIST, "%s: pool already exists", m->path);
    if (!creating && e == ENOENT)
        return errbuf_set(err, errlen, CXLP_ENOTFOUND, "%s: no such pool", m->path);
    return errbuf_set(err, errlen, -e, "%s: %s%s: %s", m->path, creating ? "create" : "open",
                     !creating && m->writable ? " for writing" : "", strerror(e));
}

int media_init_created(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen)
{
    /* the umask does not decide a pool's mode: the caller's mode does */
    if (fchmod(m->fd, (mode_t)mode) < 0 || ftruncate(m->fd, (off_t)size) < 0)
        return errbuf_set(err, errlen, -errno, "%s: size %llu: %s", m->path,
                         (unsigned long long)size, strerror(errno));
    m->size = size;
    m->owner = geteuid();
    return media_map_fd(m, err, errlen);
}

/* Maps the whole object at a 2 MiB boundary (or the backend's larger
 * alignment): a 2 MiB page of the object is mapped by one page-table entry
 * only where address and file offset agree modulo 2 MiB, and tmpfs without
 * huge= hands out 4 KiB aligned addresses. Reserves the slack as PROT_NONE,
 * maps over it, returns the ends. 0 or -errno. */
static int map_aligned(const struct media *m, int prot, int flags, void **out)
{
    uint64_t al = MAX(m->align, MEDIA_HUGE_ALIGN);
    size_t span = (size_t)(m->size + al);
    uint8_t *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        return -errno;
    uint8_t *a = (uint8_t *)ALIGN_UP((uintptr_t)r, (uintptr_t)al);
    void *p = mmap(a, (size_t)m->size, prot, flags | MAP_NORESERVE | MAP_FIXED, m->fd, 0);
    if (p == MAP_FAILED) {
        int e = errno;
        munmap(r, span);
        return -e;
    }
    if (a > r)
        munmap(r, (size_t)(a - r));
    if (a + m->size < r + span)
        munmap(a + m->size, (size_t)(r + span - (a + m->size)));
    *out = p;
    return 0;
}

int media_map_fd(struct media *m, char *err, size_t errlen)
{
    if (m->size == 0)
        return errbuf_set(err, errlen, CXLP_EFORMAT, "%s: empty object, not a pool", m->path);
    if (m->size > (uint64_t)SIZE_MAX - MAX(m->align, MEDIA_HUGE_ALIGN))
        return errbuf_set(err, errlen, CXLP_EARG, "%s: too large to map", m->path);
    void *p = NULL;
    int rc = map_aligned(m, PROT_READ | (m->writable ? PROT_WRITE : 0), MAP_SHARED, &p);
    if (rc)
        return errbuf_set(err, errlen, rc, "%s: mmap of %llu bytes: %s", m->path,
                         (unsigned long long)m->size, strerror(-rc));
    m->base = p;
    media_guard_add(m);
    /* Random gathers touch a new page per record: 2 MiB pages cut the TLB
     * misses that dominate them. Shared memory gets transparent huge pages
     * only where the administrator allows it (shmem_enabled "advise" or
     * "always"); elsewhere this is a no-op, so its result is not an error,
     * and cxlp_store_hugepages collapses a dataset when asked. */
    if (m->kind == CXLP_MEDIA_SHM || m->kind == CXLP_MEDIA_NUMA)
        (void)madvise(p, (size_t)m->size, MADV_HUGEPAGE);
    return 0;
}

int media_wipe_header(struct media *m, uint64_t maplen, int only_pool, char *err,
                      size_t errlen)
{
    void *p = mmap(NULL, (size_t)maplen, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (p == MAP_FAILED)
        return errbuf_set(err, errlen, -errno, "%s: mmap: %s", m->path, strerror(errno));
    int rc = 0;
    if (only_pool && memcmp(p, "CXLPOOL", 8) != 0) {
        rc = errbuf_set(err, errlen, CXLP_ENOTFOUND, "%s: no pool in this region", m->path);
    } else {
        memset(p, 0, 4096);
        msync(p, 4096, MS_SYNC);
    }
    munmap(p, (size_t)maplen);
    return rc;
}

int media_map_private(struct media *m, uint8_t **out)
{
    /* pairs with the release CAS below (a racing thread's mapping) */
    void *p = at_load_acquire(&m->priv);
    if (!p) {
        if (!m->base)
            return CXLP_EARG;
        void *mine = NULL;
        int rc = map_aligned(m, PROT_READ | PROT_WRITE, MAP_PRIVATE, &mine);
        if (rc)
            return rc;
        void *none = NULL;
        if (at_cas_acq_rel(&m->priv, &none, mine)) {
            p = mine;
            media_guard_add_private(m, mine);
        } else { /* another thread made one first: use it */
            munmap(mine, (size_t)m->size);
            p = none;
        }
    }
    *out = p;
    return 0;
}

int media_msync(struct media *m, uint64_t off, uint64_t len)
{
    if (!m->base || !m->writable || len == 0)
        return 0;
    if (!range_ok(off, len, m->size))
        return CXLP_ERANGE;
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = off & ~(pg - 1);
    if (msync((uint8_t *)m->base + start, (size_t)(off + len - start), MS_SYNC) < 0)
        return -errno;
    return 0;
}

int media_create(struct media *m, const char *spec, uint64_t size, uint32_t mode,
                 char *err, size_t errlen)
{
    int rc = media_parse(m, spec, err, errlen);
    if (rc)
        return rc;
    /* 0 is a device's whole size (devdax, a block device: the backend's
     * create decides); anything else must have one */
    if (size == 0 && m->kind != CXLP_MEDIA_DEVDAX && m->kind != CXLP_MEDIA_FILE)
        return errbuf_set(err, errlen, CXLP_EARG, "%s: size must be > 0", m->path);
    if (mode == 0)
        mode = 0600;
    m->writable = 1;
    rc = m->ops->create(m, size, mode, err, errlen);
    if (rc) {
        media_close(m);
        return rc;
    }
    return 0;
}

int media_open(struct media *m, const char *spec, int writable, char *err, size_t errlen)
{
    int rc = media_parse(m, spec, err, errlen);
    if (rc)
        return rc;
    m->writable = writable ? 1 : 0;
    rc = m->ops->open(m, err, errlen);
    if (rc) {
        media_close(m);
        return rc;
    }
    return 0;
}

void media_close(struct media *m)
{
    media_guard_del(m);
    if (m->priv) {
        munmap(m->priv, (size_t)m->size);
        m->priv = NULL;
    }
    if (m->base) {
        munmap(m->base, (size_t)m->size);
        m->base = NULL;
    }
    if (m->fd >= 0) {
        close(m->fd);
        m->fd = -1;
    }
}

int media_sync(struct media *m, uint64_t off, uint64_t len)
{
    if (!m->ops || !m->ops->sync)
        return 0;
    return m->ops->sync(m, off, len);
}

int media_collapse(struct media *m, uint64_t off, uint64_t len)
{
    if (!m->base || !range_ok(off, len, m->size))
        return CXLP_ERANGE;
    if (m->kind == CXLP_MEDIA_DEVDAX)
        return 0; /* mapped at the device's alignment already */
    uint64_t a = ALIGN_UP(off, MEDIA_HUGE_ALIGN), e = (off + len) & ~(MEDIA_HUGE_ALIGN - 1);
    if (e <= a)
        return 0;
    if (madvise((uint8_t *)m->base + a, (size_t)(e - a), MADV_COLLAPSE) < 0)
        return errno == EINVAL ? -EOPNOTSUPP : -errno;
    return 0;
}

int media_prepare_huge(struct media *m, uint64_t off, uint64_t len)
{
    if (!range_ok(off, len, m->size))
        return CXLP_ERANGE;
    uint64_t a = ALIGN_UP(off, MEDIA_HUGE_ALIGN), e = (off + len) & ~(MEDIA_HUGE_ALIGN - 1);
    if ((m->kind == CXLP_MEDIA_SHM || m->kind == CXLP_MEDIA_NUMA) && m->base && m->writable &&
        m->fd >= 0 && e > a) {
        int seeded = 1;
        for (uint64_t p = a; p < e && seeded; p += MEDIA_HUGE_ALIGN)
            seeded = fallocate(m->fd, 0, (off_t)p, 4096) == 0;
        /* a failed seed (a full /dev/shm) is media_prepare's to report; a
         * failed collapse leaves 4 KiB pages, which is what media_prepare
         * makes anyway */
        if (seeded)
            (void)madvise((uint8_t *)m->base + a, (size_t)(e - a), MADV_COLLAPSE);
    }
    return media_prepare(m, off, len);
}

/* kB of ShmemPmdMapped + FilePmdMapped of the mapping that starts at addr,
 * from /proc/self/smaps: its "start-end ..." line, then "Key:   N kB" lines
 * until the next mapping. The kernel writes this file; a line we do not
 * expect is skipped, a missing mapping is -ENOENT. Hand-parsed: there is no
 * library for smaps, and two fields are all we need. */
static int smaps_pmd_kb(uintptr_t addr, uint64_t *kb)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return -errno;
    char line[512];
    int in = 0, found = 0;
    uint64_t sum = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        char c;
        if (sscanf(line, "%lx-%lx %c", &lo, &hi, &c) == 3) {
            if (in)
                break; /* the next mapping */
            in = lo == addr;
            found |= in;
            continue;
        }
        unsigned long long v;
        if (in && (sscanf(line, "ShmemPmdMapped: %llu kB", &v) == 1 ||
                   sscanf(line, "FilePmdMapped: %llu kB", &v) == 1))
            sum += v;
    }
    fclose(f);
    if (!found)
        return -ENOENT;
    *kb = sum;
    return 0;
}

int media_huge_bytes(const struct media *m, const struct media_range *r, size_t n,
                     uint64_t *whole, uint64_t *huge)
{
    const uint64_t H = MEDIA_HUGE_ALIGN;
    uint64_t lo = UINT64_MAX, hi = 0, w = 0;
    for (size_t i = 0; i < n; i++) {
        if (!range_ok(r[i].off, r[i].len, m->size))
            return CXLP_ERANGE;
        uint64_t a = ALIGN_UP(r[i].off, H), e = (r[i].off + r[i].len) & ~(H - 1);
        if (e > a) {
            w += e - a;
            lo = MIN(lo, a);
            hi = MAX(hi, e);
        }
    }
    *whole = w;
    *huge = 0;
    if (!w)
        return 0;
    struct statfs fs;
    if (m->kind == CXLP_MEDIA_DEVDAX ||
        (fstatfs(m->fd, &fs) == 0 && (unsigned long)fs.f_type == HUGETLBFS_MAGIC)) {
        *huge = w; /* no smaller page exists there */
        return 0;
    }
    /* the same alignment as the pool mapping (media_map_fd): address and
     * offset agree modulo 2 MiB, so a 2 MiB page can be mapped whole */
    size_t span = (size_t)(hi - lo);
    uint8_t *res = mmap(NULL, span + H, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                        -1, 0);
    if (res == MAP_FAILED)
        return -errno;
    uint8_t *p = (uint8_t *)ALIGN_UP((uintptr_t)res, H);
    int rc = 0;
    if (mmap(p, span, PROT_READ, MAP_SHARED | MAP_FIXED | MAP_NORESERVE, m->fd, (off_t)lo) ==
        MAP_FAILED) {
        rc = -errno;
    } else {
        /* an object shrunk meanwhile reads as zeros here too (guard.c) */
        media_guard_add_window(m, p, lo, span);
        (void)madvise(p, span, MADV_HUGEPAGE); /* as media_map_fd asks */
        volatile uint8_t sink = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t a = ALIGN_UP(r[i].off, H), e = (r[i].off + r[i].len) & ~(H - 1);
            for (uint64_t x = a; x < e; x += H)
                sink ^= p[x - lo];
        }
        (void)sink;
        uint64_t kb = 0;
        rc = smaps_pmd_kb((uintptr_t)p, &kb);
        if (!rc)
            *huge = MIN(kb << 10, w);
        media_guard_del_window(p);
    }
    munmap(res, span + H);
    return rc;
}

int media_write_fd(const struct media *m)
{
    if (!m->writable || m->fd < 0 || !m->base)
        return -1;
    return m->kind == CXLP_MEDIA_SHM || m->kind == CXLP_MEDIA_FILE ? m->fd : -1;
}

int media_destroy(const char *spec, char *err, size_t errlen)
{
    struct media m;
    int rc = media_parse(&m, spec, err, errlen);
    if (rc)
        return rc;
    return m.ops->destroy(&m, err, errlen);
}

int media_migrate(struct media *m, uint64_t off, uint64_t len, int node, uint64_t *moved)
{
    uint64_t ignored;
    if (!moved)
        moved = &ignored;
    *moved = 0;
    if (!m->ops || !m->ops->migrate)
        return -EOPNOTSUPP;
    if (!range_ok(off, len, m->size))
        return CXLP_ERANGE;
    return m->ops->migrate(m, off, len, node, moved);
}

int media_prepare(struct media *m, uint64_t off, uint64_t len)
{
    if (!range_ok(off, len, m->size))
        return CXLP_ERANGE;
    if (!m->ops || !m->ops->prepare || len == 0)
        return 0;
    return m->ops->prepare(m, off, len);
}

/* fallocate for shm, numa and file objects; filesystems without it (some
 * network filesystems) fall back to touching nothing: -EOPNOTSUPP is not an
 * error, the mapping then faults pages in lazily as before.
 *
 * A failure gives the whole range back. ext4 allocates a large request in
 * pieces and keeps the pieces it got when it runs out, so without the punch
 * each failed reservation on a full disk would leave up to all the disk's
 * free blocks in a range the pool counts as free. The range holds nothing
 * (media_prepare's contract), so punching more than was allocated is
 * harmless; the punch is best effort, the caller sees the first error.
 *
 * The "prepare-enospc" fault does what a full ext4 does (half the range
 * allocated, then ENOSPC), so a test can watch the blocks come back without
 * filling a real disk. */
int media_fallocate(struct media *m, uint64_t off, uint64_t len)
{
    int rc = 0;
    if (fault_hit("prepare-enospc")) {
        (void)fallocate(m->fd, 0, (off_t)off, (off_t)(len / 2));
        rc = -ENOSPC;
    } else if (fallocate(m->fd, 0, (off_t)off, (off_t)len) < 0) {
        rc = errno == EOPNOTSUPP ? 0 : -errno;
    }
    if (rc)
        (void)fallocate(m->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)off,
                        (off_t)len);
    return rc;
}

int media_probe(struct media *m, uint64_t size, char *err, size_t errlen)
{
    struct stat st;
    int rc;
    switch (m->kind) {
    case CXLP_MEDIA_NUMA:
        if ((rc = media_numa_check(m, err, errlen)))
            return rc;
        /* fall through */
    case CXLP_MEDIA_SHM:
        if (stat(m->path, &st) == 0)
            return errbuf_set(err, errlen, CXLP_EEXIST, "%s: already exists", m->path);
        return 0;
    case CXLP_MEDIA_FILE: {
        if (media_file_is_blk(m->path))
            return media_blk_probe(m, size, err, errlen);
        if (stat(m->path, &st) == 0)
            return errbuf_set(err, errlen, CXLP_EEXIST, "%s: already exists", m->path);
        char dir[MEDIA_PATH_MAX];
        strlcpy0(dir, m->path, sizeof dir);
        char *slash = strrchr(dir, '/');
        if (!slash)
            strlcpy0(dir, ".", sizeof dir);
        else if (slash == dir)
            dir[1] = 0;
        else
            *slash = 0;
        struct statvfs vs;
        if (statvfs(dir, &vs) < 0)
            return errbuf_set(err, errlen, errno == ENOENT ? CXLP_ENOTFOUND : -errno,
                              "%s: directory %s: %s", m->path, dir, strerror(errno));
        uint64_t avail = (uint64_t)vs.f_bavail * (uint64_t)vs.f_frsize;
        if (avail < size)
            return errbuf_set(err, errlen, CXLP_EFULL,
                              "%s: %llu bytes do not fit the %llu bytes free on its filesystem",
                              m->path, (unsigned long long)size, (unsigned long long)avail);
        return 0;
    }
    case CXLP_MEDIA_DEVDAX: {
        struct media t = *m;
        t.writable = 0;
        rc = t.ops->open(&t, err, errlen);
        uint64_t have = t.size;
        media_close(&t);
        if (rc)
            return rc;
        if (size && have < size)
            return errbuf_set(err, errlen, CXLP_EARG, "%s: device holds %llu bytes, %llu wanted",
                              m->path, (unsigned long long)have, (unsigned long long)size);
        return 0;
    }
    default:
        return errbuf_set(err, errlen, CXLP_EARG, "%s: unknown media", m->path);
    }
}
