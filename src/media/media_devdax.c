/*
 * media_devdax.c - a device-dax character device (/dev/daxX.Y): CXL memory
 * (or pmem) handed to user space whole, not onlined as a NUMA node.
 *
 * Written to the kernel interface (drivers/dax/device.c): the device is
 * mmapped MAP_SHARED in multiples of its alignment (2 MiB by default; the
 * kernel rejects other lengths and offsets), its size and alignment are read
 * from sysfs through the char device number (/sys/dev/char/MAJ:MIN/{size,
 * align}), there is no file size, no fallocate, no NUMA policy, and no
 * msync: device-dax files have no fsync, so msync(MS_SYNC) fails with
 * EINVAL (seen on Linux 6.1 with a CXL region's device). What reaches the
 * memory is what the CPU writes back: a sync writes the range's cache lines
 * back (clwb, else clflushopt or clflush) and fences, which is what makes
 * stores durable on persistent memory (the platform's persistence domain
 * starts at the memory controller) and costs little on volatile memory.
 * The device always holds memory, so there is nothing to create: "create"
 * claims the device unless it already holds a pool.
 *
 * Where no device exists the tests skip with a printed reason.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "common/common.h"
#include "common/flush.h"
#include "media/media_impl.h"

#define DEVDAX_DEFAULT_ALIGN (2u << 20)

static int read_sysfs_u64(const char *path, uint64_t *out)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -errno;
    char buf[64];
    char *ok = fgets(buf, sizeof buf, f);
    fclose(f);
    if (!ok)
        return -EIO;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 0);
    if (errno || end == buf)
        return -EINVAL;
    *out = v;
    return 0;
}

static int devdax_attach(struct media *m, int flags, char *err, size_t errlen)
{
    m->fd = open(m->path, flags | O_CLOEXEC);
    if (m->fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENXIO || e == ENODEV)
            return errbuf_set(err, errlen, CXLP_ENODEV, "%s: no such device-dax device",
                             m->path);
        return errbuf_set(err, errlen, -e, "%s: open: %s", m->path, strerror(e));
    }
    struct stat st;
    if (fstat(m->fd, &st) < 0)
        return errbuf_set(err, errlen, -errno, "%s: fstat: %s", m->path, strerror(errno));
    if (!S_ISCHR(st.st_mode))
        return errbuf_set(err, errlen, CXLP_ENODEV, "%s: not a character device", m->path);
    m->owner = st.st_uid;
    char p[128];
    uint64_t size = 0, align = DEVDAX_DEFAULT_ALIGN;
    snprintf(p, sizeof p, "/sys/dev/char/%u:%u/size", major(st.st_rdev), minor(st.st_rdev));
    if (read_sysfs_u64(p, &size) < 0 || size == 0)
        return errbuf_set(err, errlen, CXLP_ENODEV, "%s: cannot read device size from %s",
                         m->path, p);
    snprintf(p, sizeof p, "/sys/dev/char/%u:%u/align", major(st.st_rdev), minor(st.st_rdev));
    if (read_sysfs_u64(p, &align) < 0 || align == 0 || (align & (align - 1)))
        align = DEVDAX_DEFAULT_ALIGN;
    m->align = align;
    m->size = size & ~(align - 1);
    m->emulated = 0;
    return 0;
}

static int devdax_create(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen)
{
    (void)mode; /* the device node's mode is the administrator's */
    int rc = devdax_attach(m, O_RDWR, err, errlen);
    if (rc)
        return rc;
    /* size 0: the whole device */
    uint64_t want = size ? ALIGN_UP(size, m->align) : m->size;
    if (want > m->size)
        return errbuf_set(err, errlen, CXLP_EARG,
                         "%s: pool size %llu exceeds the device (%llu bytes usable at "
                         "%llu alignment)", m->path, (unsigned long long)size,
                         (unsigned long long)m->size, (unsigned long long)m->align);
    m->size = want;
    rc = media_map_fd(m, err, errlen);
    if (rc)
        return rc;
    /* Layering note: the one pool-format fact the media layer knows, so that
     * "create" cannot silently overwrite a pool that already lives here. */
    if (memcmp(m->base, "CXLPOOL", 8) == 0)
        return errbuf_set(err, errlen, CXLP_EEXIST, "%s: device already holds a pool",
                         m->path);
    return 0;
}

static int devdax_open(struct media *m, char *err, size_t errlen)
{
    int rc = devdax_attach(m, m->writable ? O_RDWR : O_RDONLY, err, errlen);
    return rc ? rc : media_map_fd(m, err, errlen);
}

static int devdax_destroy(struct media *m, char *err, size_t errlen)
{
    int rc = devdax_attach(m, O_RDWR, err, errlen);
    if (rc == 0)
        rc = media_wipe_header(m, m->align, 0, err, errlen);
    close(m->fd);
    m->fd = -1;
    return rc;
}

static int devdax_sync(struct media *m, uint64_t off, uint64_t len)
{
    if (!m->base || !m->writable || len == 0)
        return 0;
    if (!range_ok(off, len, m->size))
        return CXLP_ERANGE;
    cache_writeback((const uint8_t *)m->base + off, (size_t)len);
    cache_fence();
    return 0;
}

const struct media_ops media_devdax_ops = {
    .name = "devdax",
    .create = devdax_create,
    .open = devdax_open,
    .sync = devdax_sync,
    .prepare = NULL,
    .destroy = devdax_destroy,
    .migrate = NULL,
};
