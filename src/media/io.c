/*
 * io.c - reading a staged tier (a file on storage) into memory: io_uring,
 * O_DIRECT where the request is aligned, large requests kept in flight.
 *
 * An nvme tier is never read through its mapping: a page fault per 4 KiB
 * (readahead helps a little) would make every miss of a gather thread a
 * synchronous disk read, and the page cache would keep a second copy of
 * what the memory tier already holds. A copy is read with requests of
 * IO_CHUNK bytes, IO_DEPTH of them in flight, straight into the memory
 * tier's extent (O_DIRECT: no page cache). Ranges that are not aligned to
 * the device's logical block (or a filesystem that refuses O_DIRECT, such
 * as tmpfs) are read through the page cache by the same ring.
 *
 * ThreadSanitizer cannot see a ring's other side (the kernel), nor
 * liburing's mmap and munmap of rings (raw system calls): a ring mapped
 * where another thread's closed one was would look like a race. The TSan
 * build leaves this file uninstrumented (CMakeLists.txt); the buffers a
 * ring fills belong to its caller, whose accesses are instrumented.
 *
 * Rejected: a thread pool of pread()s (a thread per request in flight, and
 * no way to keep the queue full from one thread); libaio (O_DIRECT only,
 * and io_uring is what liburing on the target kernels gives); mmap +
 * MADV_WILLNEED (still faults, still the page cache).
 */
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/common.h"
#include "media/media.h"

#define IO_CHUNK MEDIA_IO_CHUNK
#define IO_DEPTH MEDIA_IO_DEPTH
#define IO_ALIGN 4096u

struct media_reader {
    const struct media_reader_ops *ops; /* a reader of another kind (a remote tier) */
    void *ctx;
    struct io_uring ring;
    int fd_direct;            /* O_DIRECT descriptor, or -1 */
    int fd;                   /* buffered descriptor */
    char path[MEDIA_PATH_MAX];
};

int media_reader_open(struct media_reader **out, const char *path, char *err, size_t errlen)
{
    struct media_reader *r = calloc(1, sizeof *r);
    if (!r)
        return errbuf_set(err, errlen, -ENOMEM, "%s: out of memory", path);
    strlcpy0(r->path, path, sizeof r->path);
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->fd < 0) {
        int e = errno;
        free(r);
        return errbuf_set(err, errlen, -e, "%s: open: %s", path, strerror(e));
    }
    r->fd_direct = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT); /* -1: tmpfs and the like */
    int rc = io_uring_queue_init(IO_DEPTH * 2, &r->ring, 0);
    if (rc < 0) {
        if (r->fd_direct >= 0)
            close(r->fd_direct);
        close(r->fd);
        free(r);
        return errbuf_set(err, errlen, rc, "%s: io_uring_queue_init: %s", path, strerror(-rc));
    }
    *out = r;
    return 0;
}

int media_reader_custom(struct media_reader **out, const struct media_reader_ops *ops, void *ctx)
{
    struct media_reader *r = calloc(1, sizeof *r);
    if (!r)
        return -ENOMEM;
    r->ops = ops;
    r->ctx = ctx;
    r->fd = r->fd_direct = -1;
    *out = r;
    return 0;
}

void media_reader_close(struct media_reader *r)
{
    if (!r)
        return;
    if (r->ops) {
        r->ops->close(r->ctx);
        free(r);
        return;
    }
    io_uring_queue_exit(&r->ring);
    if (r->fd_direct >= 0)
        close(r->fd_direct);
    close(r->fd);
    free(r);
}

int media_reader_direct(const struct media_reader *r)
{
    return r->fd_direct >= 0;
}

/* One request: dst[0..len) from file offset off; short reads resubmit. */
struct req {
    uint8_t *dst;
    uint64_t off, len, done;
};

int media_read(struct media_reader *r, uint64_t off, uint64_t len, void *dst, int *direct)
{
    struct media_read_range v = {off, len, dst};
    return media_readv(r, &v, 1, direct);
}

int media_readv(struct media_reader *r, const struct media_read_range *v, size_t n, int *direct)
{
    if (r->ops) {
        if (direct)
            *direct = 0;
        return r->ops->readv(r->ctx, v, n);
    }
    int all_direct = r->fd_direct >= 0;
    for (size_t k = 0; k < n; k++)
        if (v[k].off % IO_ALIGN || v[k].len % IO_ALIGN || (uintptr_t)v[k].dst % IO_ALIGN)
            all_direct = 0;
    /* one descriptor for the whole call: O_DIRECT when every range allows it */
    int fd = all_direct ? r->fd_direct : r->fd;
    if (direct)
        *direct = all_direct;
    struct req q[IO_DEPTH];
    size_t ri = 0;     /* the range being handed to requests */
    uint64_t next = 0; /* bytes of v[ri] handed to requests so far */
    unsigned inflight = 0;
    int rc = 0;
    for (unsigned i = 0; i < IO_DEPTH; i++)
        q[i].len = 0;
    while ((ri < n || inflight) && !rc) {
        /* keep IO_DEPTH requests in flight */
        while (ri < n && inflight < IO_DEPTH) {
            if (next == v[ri].len) {
                ri++;
                next = 0;
                continue;
            }
            unsigned i = 0;
            while (q[i].len)
                i++;
            uint64_t c = MIN(IO_CHUNK, v[ri].len - next);
            q[i] = (struct req){(uint8_t *)v[ri].dst + next, v[ri].off + next, c, 0};
            struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
            if (!sqe) {
                rc = -EBUSY;
                break;
            }
            io_uring_prep_read(sqe, fd, q[i].dst, (unsigned)c, q[i].off);
            io_uring_sqe_set_data(sqe, &q[i]);
            next += c;
            inflight++;
        }
        if (rc || !inflight)
            break;
        int s = io_uring_submit_and_wait(&r->ring, 1);
        if (s < 0 && s != -EINTR) {
            rc = s;
            break;
        }
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&r->ring, head, cqe)
        {
            struct req *x = io_uring_cqe_get_data(cqe);
            int res = cqe->res;
            seen++;
            if (res <= 0 || rc) {
                /* an error, or the file ends inside the range */
                if (!rc)
                    rc = res < 0 ? res : -EIO;
                x->len = 0;
                inflight--;
                continue;
            }
            x->done += (uint64_t)res;
            if (x->done < x->len) {
                /* short read (O_DIRECT stops at a block boundary): go on
                 * buffered from there */
                struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
                if (!sqe) {
                    rc = -EBUSY;
                    continue;
                }
                io_uring_prep_read(sqe, r->fd, x->dst + x->done, (unsigned)(x->len - x->done),
                                   x->off + x->done);
                io_uring_sqe_set_data(sqe, x);
            } else {
                x->len = 0;
                inflight--;
            }
        }
        io_uring_cq_advance(&r->ring, seen);
    }
    /* on failure, reap what is still in flight before the buffers go */
    while (rc && inflight) {
        struct io_uring_cqe *cqe;
        if (io_uring_wait_cqe(&r->ring, &cqe) < 0)
            break;
        struct req *x = io_uring_cqe_get_data(cqe);
        io_uring_cqe_seen(&r->ring, cqe);
        if (x->len && (cqe->res <= 0 || x->done + (uint64_t)cqe->res >= x->len)) {
            x->len = 0;
            inflight--;
        } else if (x->len) {
            x->done += (uint64_t)cqe->res;
            struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);
            if (sqe) {
                io_uring_prep_read(sqe, r->fd, x->dst + x->done, (unsigned)(x->len - x->done),
                                   x->off + x->done);
                io_uring_sqe_set_data(sqe, x);
                io_uring_submit(&r->ring);
            } else {
                x->len = 0;
                inflight--;
            }
        }
    }
    return rc;
}
