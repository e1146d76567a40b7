/*
 * media_shm.c - POSIX shared memory: the embedded default pool.
 *
 * The object is /dev/shm/cxlp.NAME (shm_open("/cxlp.NAME")). Every process on
 * the host maps the same pages, which is what a CXL pool gives every host on
 * a switch. It is local DRAM: emulated CXL, and labelled so.
 * Sized with ftruncate, so untouched space costs nothing; extents are backed
 * with fallocate when reserved (media_prepare), which turns a full /dev/shm
 * into -ENOSPC instead of a SIGBUS. A size beyond what the tmpfs can ever
 * hold (its size= limit) is refused at create, naming both: such a pool
 * could only fail later, at an ingest far from the cause.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "common/common.h"
#include "media/media_impl.h"

/* "/dev/shm/cxlp.NAME" -> "/cxlp.NAME" for shm_open */
static const char *shm_name(const struct media *m)
{
    return m->path + strlen("/dev/shm");
}

int shm_create_common(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen)
{
    struct statvfs vs; /* f_blocks 0: a tmpfs without a size limit */
    uint64_t cap = statvfs("/dev/shm", &vs) == 0 ? (uint64_t)vs.f_blocks * vs.f_frsize : 0;
    if (cap && size > cap)
        return errbuf_set(err, errlen, CXLP_EARG, "%s: size %llu bytes is more than /dev/shm "
                         "can hold (%llu bytes, its tmpfs size)", m->path,
                         (unsigned long long)size, (unsigned long long)cap);
    m->fd = shm_open(shm_name(m), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, (mode_t)mode);
    if (m->fd < 0)
        return media_open_errno(m, errno, 1, err, errlen);
    int rc = media_init_created(m, size, mode, err, errlen);
    if (rc)
        shm_unlink(shm_name(m));
    return rc;
}

int shm_open_common(struct media *m, char *err, size_t errlen)
{
    /* O_NONBLOCK: a FIFO planted under the name must not block the open
     * (media_fstat refuses it) */
    m->fd = shm_open(shm_name(m), (m->writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NONBLOCK, 0);
    if (m->fd < 0)
        return media_open_errno(m, errno, 0, err, errlen);
    int rc = media_fstat(m, err, errlen);
    return rc ? rc : media_map_fd(m, err, errlen);
}

int shm_destroy_common(struct media *m, char *err, size_t errlen)
{
    if (shm_unlink(shm_name(m)) < 0) {
        int e = errno;
        if (e == ENOENT)
            return errbuf_set(err, errlen, CXLP_ENOTFOUND, "%s: no such pool", m->path);
        return errbuf_set(err, errlen, -e, "%s: unlink: %s", m->path, strerror(e));
    }
    return 0;
}

static int shm_create(struct media *m, uint64_t size, uint32_t mode, char *err, size_t errlen)
{
    m->emulated = 1;
    return shm_create_common(m, size, mode, err, errlen);
}

static int shm_open_(struct media *m, char *err, size_t errlen)
{
    m->emulated = 1;
    return shm_open_common(m, err, errlen);
}

static int shm_sync(struct media *m, uint64_t off, uint64_t len)
{
    (void)m; (void)off; (void)len;
    return 0; /* memory is the medium: nothing to flush */
}

const struct media_ops media_shm_ops = {
    .name = "shm",
    .create = shm_create,
    .open = shm_open_,
    .sync = shm_sync,
    .prepare = media_fallocate,
    .destroy = shm_destroy_common,
    .migrate = NULL,
};
