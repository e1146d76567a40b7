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
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static int file_create(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen)
{
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
    m->fd = open(m->path, (m->writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK);
    if (m->fd < 0)
        return media_open_errno(m, errno, 0, err, errlen);
    int rc = media_fstat(m, err, errlen);
    if (rc)
        return rc;
    m->emulated = !on_dax_mount(m->path);
    return media_map_fd(m, err, errlen);
}

static int file_destroy(struct media *m, char *err, size_t errlen)
{
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
    .prepare = media_fallocate,
    .destroy = file_destroy,
    .migrate = NULL,
};
