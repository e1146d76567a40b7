/*
 * media_pci.c - a fixed-size memory region that is a file: a PCI BAR
 * through sysfs (/sys/bus/pci/devices/DDDD:BB:DD.F/resourceN). That is how
 * a guest sees the shared memory of an ivshmem device (two QEMU guests
 * started with the same host file: two kernels on one memory), and how a
 * host sees the memory BAR of a device.
 *
 * The region exists before us and after us: "create" formats it (refusing
 * one that already holds a pool, like devdax), destroy wipes the header
 * page, and nothing is ever created, truncated, extended or unlinked. Its
 * size is the file's (sysfs gives the BAR size in st_size; lseek to the end
 * says 0). Mapped MAP_SHARED whole; no page cache, no fallocate, nothing to
 * sync. Any regular file of fixed size works the same way (the tests use
 * one on a machine without such a device).
 *
 * Emulation label: the BAR of a QEMU ivshmem device (vendor 0x1af4, device
 * 0x1110, read from the device's sysfs directory) is host memory standing
 * in for a shared CXL pool: emulated. A file outside a PCI device's sysfs
 * directory is emulated too; another device's BAR is not.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/common.h"
#include "media/media_impl.h"

/* The u16 in file dir/name ("0x1af4\n"); -1 when absent. */
static long sysfs_id(const char *dir, const char *name)
{
    char p[PATH_MAX + 16], buf[32];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "re");
    if (!f)
        return -1;
    char *ok = fgets(buf, sizeof buf, f);
    fclose(f);
    return ok ? strtol(buf, NULL, 0) : -1;
}

static int is_emulated(const char *path)
{
    char dir[PATH_MAX];
    strlcpy0(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (!slash)
        return 1;
    *slash = 0;
    long vendor = sysfs_id(dir, "vendor"), device = sysfs_id(dir, "device");
    if (vendor < 0)
        return MEDIA_EMULATED_FILE; /* not a PCI device's resource: a file standing in */
    return vendor == 0x1af4 && device == 0x1110;
}

static int pci_attach(struct media *m, char *err, size_t errlen)
{
    /* O_NONBLOCK: whatever is planted under the path must not block us */
    m->fd = open(m->path, (m->writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK);
    if (m->fd < 0) {
        int e = errno;
        if (e == ENOENT)
            return errbuf_set(err, errlen, CXLP_ENODEV, "%s: no such memory region", m->path);
        return errbuf_set(err, errlen, -e, "%s: open%s: %s", m->path,
                          m->writable ? " for writing" : "", strerror(e));
    }
    int rc = media_fstat(m, err, errlen);
    if (rc)
        return rc;
    if (m->size == 0)
        return errbuf_set(err, errlen, CXLP_ENODEV, "%s: region of 0 bytes", m->path);
    m->emulated = is_emulated(m->path);
    return 0;
}

static int pci_create(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen)
{
    (void)mode; /* the region's mode is the administrator's */
    int rc = pci_attach(m, err, errlen);
    if (rc)
        return rc;
    if (size > m->size)
        return errbuf_set(err, errlen, CXLP_EARG, "%s: pool size %llu exceeds the region "
                          "(%llu bytes)", m->path, (unsigned long long)size,
                          (unsigned long long)m->size);
    rc = media_map_fd(m, err, errlen);
    if (rc)
        return rc;
    /* the one pool-format fact the media layer knows (as devdax) */
    if (memcmp(m->base, "CXLPOOL", 8) == 0)
        return errbuf_set(err, errlen, CXLP_EEXIST, "%s: region already holds a pool", m->path);
    return 0;
}

static int pci_open(struct media *m, char *err, size_t errlen)
{
    int rc = pci_attach(m, err, errlen);
    return rc ? rc : media_map_fd(m, err, errlen);
}

static int pci_destroy(struct media *m, char *err, size_t errlen)
{
    m->writable = 1;
    int rc = pci_attach(m, err, errlen);
    if (rc == 0)
        rc = m->size < 4096 ? errbuf_set(err, errlen, CXLP_EFORMAT, "%s: too small to hold a "
                                         "pool", m->path)
                            : media_wipe_header(m, 4096, 1, err, errlen);
    if (m->fd >= 0)
        close(m->fd);
    m->fd = -1;
    return rc;
}

const struct media_ops media_pci_ops = {
    .name = "pci",
    .create = pci_create,
    .open = pci_open,
    .sync = NULL,
    .prepare = NULL,
    .destroy = pci_destroy,
    .migrate = NULL,
};
