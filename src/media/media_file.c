/*
 * media_file.c - a pool in any file: a DAX-mounted filesystem (real
 * byte-addressable memory), hugetlbfs, or a plain file on disk. Created
 * sparse with ftruncate, so a file pool may be far larger than RAM (or than
 * the free disk: extents get real blocks through fallocate when reserved,
 * where a full disk is a clean -ENOSPC).
 *
 * Emulation label: a file counts as real pool memory only on a filesystem
 * mounted with the "dax" option (found in /proc/self/mountinfo); otherwise it
 * is page cache over storage and stats say "emulated".
 *
 * A block device (an NVMe namespace, local or reached over a fabric; a
 * partition; a loop device) holds an object the way a device-dax device
 * holds a pool: it exists before us and after us. Its size is the device's
 * (ioctl BLKGETSIZE64: st_size is 0 for a device), or the size asked at
 * create when smaller; "create" claims it (opened O_EXCL, which the kernel
 * refuses for a device that is mounted or claimed, and refused when its
 * first page already holds a pool or tier object); destroy zeroes the first
 * page, and only when it holds one of ours, so a wrong path cannot wipe a
 * disk; nothing is ever truncated, fallocated or unlinked. It is mapped
 * through the device's page cache like a file (emulated), and a staged
 * tier's reads go to the device with O_DIRECT (media/io.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "media/media_impl.h"

/* 1 when the longest mount point that prefixes path carries a dax option. */
static int on_dax_mount(const char *path)
{
    char real[4096];
    if (!realpath(path, real))
        return 0;
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return 0;
    char line[4096];
    size_t best = 0;
    int dax = 0;
    while (fgets(line, sizeof line, f)) {
        /* id parent maj:min root mountpoint options ... - fstype source superopts */
        char mnt[2048], opts[1024], super[1024] = "";
        if (sscanf(line, "%*s %*s %*s %*s %2047s %1023s", mnt, opts) != 2)
            continue;
        char *dash = strstr(line, " - ");
        if (dash)
            sscanf(dash + 3, "%*s %*s %1023s", super);
        size_t n = strlen(mnt);
        int prefix = strncmp(real, mnt, n) == 0 &&
                     (real[n] == '/' || real[n] == '\0' || (n == 1 && mnt[0] == '/'));
        if (prefix && n >= best) {
            best = n;
            dax = strstr(opts, "dax") != NULL || strstr(super, "dax") != NULL;
        }
    }
    fclose(f);
    return dax;
}

int media_file_is_blk(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISBLK(st.st_mode);
}

/* The pool-format facts the media layer knows (as devdax does for one):
 * the magic of a pool's first page and of a tier object's, so that a
 * device holding either is neither claimed twice nor wiped when it holds
 * neither. 1 when fd's first page starts with one; -errno when unreadable. */
static int holds_ours(int fd)
{
    char head[8];
    ssize_t n = pread(fd, head, sizeof head, 0);
    if (n < 0)
        return -errno;
    return n == (ssize_t)sizeof head &&
           (memcmp(head, "CXLPOOL", 8) == 0 || memcmp(head, "CXLPOBJ", 8) == 0);
}

/* Opens the block device m->path (flags: access mode and O_EXCL) and sets
 * m->size to its size. */
static int blk_attach(struct media *m, int flags, char *err, size_t errlen)
{
    m->fd = open(m->path, flags | O_CLOEXEC);
    if (m->fd < 0) {
        int e = errno;
        if (e == ENOENT || e == ENXIO || e == ENODEV)
            return errbuf_set(err, errlen, CXLP_ENODEV, "%s: no such block device", m->path);
        if (e == EBUSY)
            return errbuf_set(err, errlen, CXLP_EBUSY, "%s: block device in use (mounted or "
                              "claimed)", m->path);
        return errbuf_set(err, errlen, -e, "%s: open%s: %s", m->path,
                          (flags & O_ACCMODE) == O_RDONLY ? "" : " for writing", strerror(e));
    }
    struct stat st;
    uint64_t bytes = 0;
    if (fstat(m->fd, &st) < 0 || !S_ISBLK(st.st_mode))
        return errbuf_set(err, errlen, CXLP_ENODEV, "%s: not a block device", m->path);
    if (ioctl(m->fd, BLKGETSIZE64, &bytes) < 0)
        return errbuf_set(err, errlen, -errno, "%s: BLKGETSIZE64: %s", m->path, strerror(errno));
    if (bytes == 0)
        return errbuf_set(err, errlen, CXLP_ENODEV, "%s: block device of 0 bytes", m->path);
    m->blkdev = 1;
    m->owner = st.st_uid;
    m->size = bytes;
    m->emulated = 1; /* the device's page cache, not memory */
    return 0;
}

/* A device m attached holds size bytes and no pool or tier object. */
static int blk_claimable(const struct media *m, uint64_t size, char *err, size_t errlen)
{
    if (size > m->size)
        return errbuf_set(err, errlen, CXLP_EARG, "%s: %llu bytes wanted, the device holds "
                          "%llu", m->path, (unsigned long long)size,
                          (unsigned long long)m->size);
    int rc = holds_ours(m->fd);
    if (rc < 0)
        return errbuf_set(err, errlen, rc, "%s: read of its first page: %s", m->path,
                          strerror(-rc));
    if (rc > 0)
        return errbuf_set(err, errlen, CXLP_EEXIST, "%s: device already holds a pool or tier "
                          "object", m->path);
    return 0;
}

static int blk_create(struct media *m, uint64_t size, char *err, size_t errlen)
{
    int rc = blk_attach(m, O_RDWR | O_EXCL, err, errlen);
    if (!rc)
        rc = blk_claimable(m, size, err, errlen);
    if (rc)
        return rc;
    if (size)
        m->size = size;
    return media_map_fd(m, err, errlen);
}

int media_blk_probe(struct media *m, uint64_t size, char *err, size_t errlen)
{
    struct media t = *m;
    int rc = blk_attach(&t, O_RDONLY | O_EXCL, err, errlen); /* refused as create would be */
    if (!rc)
        rc = blk_claimable(&t, size, err, errlen);
    if (t.fd >= 0)
        close(t.fd);
    return rc;
}

static int file_create(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen)
{
    if (media_file_is_blk(m->path))
        return blk_create(m, size, err, errlen);
    if (size == 0)
        return errbuf_set(err, errlen, CXLP_EARG, "%s: size must be > 0", m->path);
    m->fd = open(m->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
    if (m->fd < 0)
        return media_open_errno(m, errno, 1, err, errlen);
    m->emulated = !on_dax_mount(m->path);
    int rc = media_init_created(m, size, mode, err, errlen);
    if (rc)
        unlink(m->path);
    return rc;
}

static int file_open(struct media *m, char *err, size_t errlen)
{
    if (media_file_is_blk(m->path)) {
        int rc = blk_attach(m, m->writable ? O_RDWR : O_RDONLY, err, errlen);
        return rc ? rc : media_map_fd(m, err, errlen);
    }
    m->fd = open(m->path, (m->writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK);
    if (m->fd < 0)
        return media_open_errno(m, errno, 0, err, errlen);
    int rc = media_fstat(m, err, errlen);
    if (rc)
        return rc;
    m->emulated = !on_dax_mount(m->path);
    return media_map_fd(m, err, errlen);
}

/* A block device loses its first page, only when that page is ours. */
static int blk_destroy(struct media *m, char *err, size_t errlen)
{
    int rc = blk_attach(m, O_RDWR, err, errlen);
    if (!rc) {
        rc = holds_ours(m->fd);
        if (rc == 0)
            rc = errbuf_set(err, errlen, CXLP_ENOTFOUND, "%s: no pool or tier object on this "
                            "device", m->path);
        else if (rc < 0)
            rc = errbuf_set(err, errlen, rc, "%s: read of its first page: %s", m->path,
                            strerror(-rc));
        else
            rc = media_wipe_header(m, 4096, 0, err, errlen);
    }
    if (m->fd >= 0)
        close(m->fd);
    m->fd = -1;
    return rc;
}

/* Block devices are backed already: nothing to allocate (and a failed
 * fallocate's punch would zero device blocks). */
static int file_prepare(struct media *m, uint64_t off, uint64_t len)
{
    return m->blkdev ? 0 : media_fallocate(m, off, len);
}

static int file_destroy(struct media *m, char *err, size_t errlen)
{
    if (media_file_is_blk(m->path))
        return blk_destroy(m, err, errlen);
    if (unlink(m->path) < 0) {
        int e = errno;
        if (e == ENOENT)
            return errbuf_set(err, errlen, CXLP_ENOTFOUND, "%s: no such pool", m->path);
        return errbuf_set(err, errlen, -e, "%s: unlink: %s", m->path, strerror(e));
    }
    return 0;
}

const struct media_ops media_file_ops = {
    .name = "file",
    .create = file_create,
    .open = file_open,
    .sync = media_msync,
    .prepare = file_prepare,
    .destroy = file_destroy,
    .migrate = NULL,
};
