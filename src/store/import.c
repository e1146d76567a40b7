/*
 * import.c - datasets from what users already have: raw fixed-size records,
 * NumPy .npy arrays and Megatron-LM indexed datasets (.bin + .idx), written
 * through the public streaming writer.
 *
 * Invariants:
 *   - Bad input leaves the pool as it was: every check that can be made
 *     before the first pool write is made first (sizes, headers, the whole
 *     .idx), and any later failure aborts the writer, which returns its
 *     reservations; nothing is published.
 *   - raw/npy: dataset bytes == file bytes [data_offset, data_offset + n *
 *     record_size), copied by the kernel straight into the pool memory that
 *     cxlp_writer_direct hands out (see struct sink), in chunks of whole
 *     records, committed chunk by chunk; chunk <= MAX(CHUNK, record_size)
 *     and <= writer_room(), so every shard but the last holds the same
 *     number of records.
 *   - Megatron: record i == .bin[pointers[i], pointers[i] + lengths[i] *
 *     itemsize); docs == document_indices. Sequences move in runs: a run is
 *     sequences i..i+n-1 with pointers[j+1] == pointers[j] + bytes of j
 *     (back to back in the .bin), sum of bytes <= MAX(run limit, bytes of
 *     sequence i) with run limit = MIN(CHUNK, shard_bytes / 8), n <=
 *     RUN_SEQS; one kernel copy per run, as for raw.
 *   - Shuffled (opts->shuffle, raw and npy): record k of the dataset ==
 *     input record P(k), P = ingest_perm(n, seed), a keyed bijection of
 *     [0, n) computed per id (no table); see ingest_shuffled for how the
 *     input is read. Megatron is refused: a shuffle of sequences would cut
 *     documents apart, and one of whole documents would need the document
 *     index to be rewritten (rejected below).
 *   - Every message starts with the file it is about.
 *
 * Alternatives rejected:
 *   - A bounce buffer (read, then append): a second pass over every byte, the
 *     ingest would run at half the speed of a copy.
 *   - mmap of raw/npy sources: page faults on the source plus on the pool
 *     per 4 KiB; a kernel copy into the pool is one copy with large requests.
 *   - Chunks of 4 MiB: the writer hashes each chunk right after it lands,
 *     and 1 MiB still sits in L2 then; measured faster on the same files.
 *   - Megatron, one cxlp_writer_append per sequence from a mapping of the
 *     .bin: a memcpy into fresh pool pages, each 4 KiB paying a write fault
 *     and the zeroing of a page about to be overwritten; it held Megatron
 *     ingest to ~70% of cp while raw reached ~85%. Runs of sequences go
 *     through the same kernel copy as raw chunks instead. The .bin stays
 *     mapped read-only for the short runs of a .bin whose sequences are not
 *     back to back (a syscall per short sequence would cost more than the
 *     faults); a .bin truncated during the import could then raise SIGBUS: a
 *     file being rewritten under the importer is outside what we promise.
 *   - Shuffled Megatron by whole documents (documents permuted, sequences
 *     of a document kept together, the index rebuilt): possible, but a
 *     Megatron dataset is read through its document index and its own
 *     samplers, which mix documents already; refused with a message until
 *     someone needs it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "pool/pool.h"
#include "pool/pool_format.h"
#include "store/megatron.h"
#include "store/npy.h"
#include "store/store.h"
#include "sample/feistel.h"

/* Bytes per copy: large enough that syscall cost vanishes, small enough to
 * stay in L2 between the kernel's copy and the writer's hash. */
#define CHUNK (1ull << 20)
/* Megatron: progress is reported about this often. */
#define PROGRESS_STEP (4ull << 20)
/* Megatron: at most this many sequences per run (bounds the lengths array;
 * a run of empty sequences would otherwise be unbounded). */
#define RUN_SEQS 65536u
/* Megatron: runs shorter than this are copied from the .bin's mapping. They
 * occur only at the end of the file or where sequences are not back to
 * back. */
#define SMALL_RUN (64ull << 10)

typedef unsigned long long ull;

struct src {
    int fd;
    uint64_t size;
    const char *path;
};

int cxlp_format_parse(const char *name)
{
    if (!name)
        return seterr(NULL, CXLP_EARG, "format: NULL (expected raw, npy, megatron or auto)");
    if (strcmp(name, "auto") == 0)
        return CXLP_FMT_AUTO;
    if (strcmp(name, "raw") == 0)
        return CXLP_FMT_RAW;
    if (strcmp(name, "npy") == 0)
        return CXLP_FMT_NPY;
    if (strcmp(name, "megatron") == 0)
        return CXLP_FMT_MEGATRON;
    return seterr(NULL, CXLP_EARG, "format '%s': expected raw, npy, megatron or auto", name);
}

/* Opens a source file. O_NONBLOCK: an open of a FIFO for reading waits for
 * a writer, so the type is checked on the descriptor before anything can
 * block (the flag means nothing to a regular file and is cleared anyway). */
static int src_open(struct obj *o, const char *path, struct src *s)
{
    s->path = path;
    s->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (s->fd < 0)
        return seterr(o, -errno, "%s: open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(s->fd, &st) != 0) {
        int rc = -errno;
        close(s->fd);
        s->fd = -1;
        return seterr(o, rc, "%s: stat: %s", path, strerror(-rc));
    }
    if (!S_ISREG(st.st_mode)) {
        close(s->fd);
        s->fd = -1;
        if (S_ISDIR(st.st_mode))
            return seterr(o, -EISDIR, "%s: is a directory", path);
        return seterr(o, CXLP_EBADINPUT, "%s: not a regular file (%s)", path,
                      file_kind(st.st_mode));
    }
    (void)fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) & ~O_NONBLOCK);
    s->size = (uint64_t)st.st_size;
    return 0;
}

/* An import that found no records: refused unless asked for. A size of 0
 * is also what stat says of /proc and sysfs files, whose bytes appear only
 * when read: those are not datasets either. */
static int no_records(struct obj *o, const char *path, const struct cxlp_import_opts *opts,
                      const char *why)
{
    if (opts->allow_empty)
        return 0;
    return seterr(o, CXLP_EBADINPUT, "%s: no records (%s); allow_empty (--allow-empty) "
                  "makes an empty dataset", path, why);
}

static void src_close(struct src *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}

/* Reads exactly len bytes at off; a short file is bad input (it changed
 * size since fstat), an I/O error keeps its errno. */
static int read_exact(struct obj *o, const struct src *s, void *dst, uint64_t len,
                      uint64_t off)
{
    uint8_t *d = dst;
    uint64_t done = 0;
    while (done < len) {
        size_t want = (size_t)MIN(len - done, (uint64_t)1 << 30);
        ssize_t n = pread(s->fd, d + done, want, (off_t)(off + done));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return seterr(o, -errno, "%s: read at byte offset %llu: %s", s->path,
                          (ull)(off + done), strerror(errno));
        }
        if (n == 0)
            return seterr(o, CXLP_EBADINPUT,
                          "%s: ended at byte offset %llu, expected %llu bytes (did the "
                          "file shrink during the import?)", s->path, (ull)(off + done),
                          (ull)s->size);
        done += (uint64_t)n;
    }
    return 0;
}

/* Populates the pool pages of [dst, dst+n) in one call before read() fills
 * them: otherwise the kernel's copy takes one page fault per 4 KiB of pool
 * memory, which costs more than the copy itself. Best effort: kernels before
 * 5.14 (EINVAL) and file pools past EOF simply fault as before. */
static void prefault(void *dst, uint64_t n)
{
#ifdef MADV_POPULATE_WRITE
    uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)dst & ~(pg - 1);
    uintptr_t e = ((uintptr_t)dst + n + pg - 1) & ~(pg - 1);
    (void)madvise((void *)a, e - a, MADV_POPULATE_READ);
#else
    (void)dst, (void)n;
#endif
}

/* Records a writer failure on the pool handle, prefixed with the source. The
 * writer's own message is read before it is freed. */
static int writer_fail(struct obj *o, cxlp_writer *w, int rc, const char *path)
{
    char msg[ERRMSG_MAX];
    strlcpy0(msg, w ? cxlp_writer_errmsg(w) : cxlp_errmsg(NULL), sizeof msg);
    cxlp_writer_abort(w);
    return seterr(o, rc, "%s: %s", path, msg);
}

static void progress(const struct cxlp_import_opts *opts, uint64_t done, uint64_t total)
{
    if (opts->progress)
        opts->progress(opts->progress_ctx, done, total);
}

/* Where chunk bytes go. For pools in a shm object or a file, the kernel
 * copies source pages into the pool object's own page cache through its
 * descriptor (pool_write_fd), as cp does: copy_file_range within one filesystem, splice
 * through a pipe across filesystems (copy_file_range refuses those with
 * EXDEV). Either way there is one copy, no page fault on the pool mapping
 * and no zeroing of pages about to be overwritten, which the
 * read()-into-the-mapping path pays per 4 KiB and which held it to two
 * thirds of cp. The numa backend keeps read() into the mapping, because its
 * placement is a policy on the mapping that writes through a descriptor
 * would not follow; so does devdax (a character device). */
enum sink_mode { SINK_READ, SINK_COPY, SINK_SPLICE };

struct sink {
    enum sink_mode mode;
    int fd;                  /* pool object (borrowed from the pool), or -1 */
    int pipe[2];             /* SINK_SPLICE: read end, write end */
    const uint8_t *base;     /* the writable mapping: dst - base = file offset */
};

static void sink_open(cxlp_pool *p, struct sink *k)
{
    k->pipe[0] = k->pipe[1] = -1;
    int t = pool_ingest_tier(p); /* where the writer's shards are */
    k->base = pool_base_rw(p, t);
    k->fd = k->base ? pool_write_fd(p, t) : -1;
    k->mode = k->fd >= 0 ? SINK_COPY : SINK_READ;
}

static void sink_close(struct sink *k)
{
    for (int i = 0; i < 2; i++)
        if (k->pipe[i] >= 0)
            close(k->pipe[i]);
    k->fd = k->pipe[0] = k->pipe[1] = -1;
    k->mode = SINK_READ;
}

static int src_shrank(struct obj *o, const struct src *s, uint64_t at)
{
    return seterr(o, CXLP_EBADINPUT,
                  "%s: ended at byte offset %llu, expected %llu bytes (did the file "
                  "shrink during the import?)", s->path, (ull)at, (ull)s->size);
}

/* Moves up to len bytes from s at *in to the pool object at *out through the
 * pipe. Returns bytes moved (> 0), 0 at end of file, or -errno. Whatever
 * entered the pipe is drained before returning, so a failure leaves it
 * empty. */
static ssize_t splice_once(struct sink *k, const struct src *s, loff_t *in, loff_t *out,
                           size_t len)
{
    ssize_t got = splice(s->fd, in, k->pipe[1], NULL, len, SPLICE_F_MOVE);
    if (got <= 0)
        return got < 0 ? -errno : 0;
    ssize_t left = got;
    while (left > 0) {
        ssize_t put = splice(k->pipe[0], NULL, k->fd, out, (size_t)left, SPLICE_F_MOVE);
        if (put < 0 && errno == EINTR)
            continue;
        if (put <= 0)
            return put < 0 ? -errno : -EIO;
        left -= put;
    }
    return got;
}

/* Fills dst[0..n) from s at off, by the sink's mode; a mode the kernel
 * refuses for this pair of files falls back to the next one (copy, splice,
 * read), from the byte where it stopped. */
static int fill(struct obj *o, struct sink *k, const struct src *s, void *dst, uint64_t n,
                uint64_t off)
{
    uint64_t done = 0;
    while (k->mode != SINK_READ && done < n) {
        loff_t in = (loff_t)(off + done);
        loff_t out = (loff_t)((const uint8_t *)dst - k->base + done);
        size_t want = (size_t)MIN(n - done, (uint64_t)1 << 30);
        ssize_t c;
        if (k->mode == SINK_COPY) {
            c = copy_file_range(s->fd, &in, k->fd, &out, want, 0);
            if (c < 0)
                c = -errno;
        } else {
            c = splice_once(k, s, &in, &out, want);
        }
        if (c > 0) {
            done += (uint64_t)c;
            continue;
        }
        if (c == 0)
            return src_shrank(o, s, off + done);
        if (c == -EINTR)
            continue;
        if (k->mode == SINK_COPY && pipe2(k->pipe, O_CLOEXEC) == 0) {
            /* a bigger pipe moves a chunk in fewer calls; best effort */
            (void)fcntl(k->pipe[1], F_SETPIPE_SZ, (int)CHUNK);
            k->mode = SINK_SPLICE;
        } else {
            sink_close(k); /* read() from here on */
        }
    }
    if (done == n)
        return 0;
    prefault((uint8_t *)dst + done, n - done);
    return read_exact(o, s, (uint8_t *)dst + done, n - done, off + done);
}

static int map_ro(struct obj *o, const struct src *s, const uint8_t **out);
static void unmap_ro(const struct src *s, const uint8_t *m);

void ingest_perm(struct feistel *f, uint64_t n, uint64_t seed)
{
    feistel_init(f, n, derive_key(seed, 0, INGEST_SHUFFLE_TAG, 0));
}

/* Shuffled ingest: records per group, and the group's bytes in the pool.
 * Arrays of 8 + 16 bytes per record of a group: at most 1.5 MiB of memory
 * whatever the input's size. */
#define SHUF_GROUP 65536u
#define SHUF_BYTES (4ull << 20)

struct shuf_ent {
    uint64_t src;            /* input record */
    uint64_t slot;           /* record of the group it becomes */
};

static int by_src(const void *a, const void *b)
{
    uint64_t x = ((const struct shuf_ent *)a)->src, y = ((const struct shuf_ent *)b)->src;
    return (x > y) - (x < y);
}

/* raw and npy, shuffled: record k = input record P(k) of the n records at
 * bytes [off, off + n * rec) of s.
 *
 * How the input is read. Records are written in dataset order, a group of
 * up to SHUF_GROUP records (and SHUF_BYTES) at a time straight into the
 * pool (cxlp_writer_direct); P of the group's ids is computed in one call
 * (feistel_apply_n), the (input record, slot) pairs are sorted by input
 * record, and each record is copied in that ascending order. Why sorted:
 * a group's records are scattered over the whole input; in ascending order
 * the reads of one group sweep the file once (one pass of the disk's head,
 * readahead that can help when neighbours fall in one group) instead of
 * jumping back and forth. Why groups and not the whole dataset: sorting all
 * n pairs would take 16 bytes per record of memory (16 GiB for 10^9
 * records); a group bounds it at 1.5 MiB, and every input record is still
 * read exactly once, by the group that holds its slot. Small records (< SMALL_RUN) are copied from a
 * read-only mapping of the input: a syscall per record of 100 bytes would
 * cost more than the copy, and the mapping holds only clean page cache the
 * kernel drops under pressure, so an input larger than memory works (as
 * Megatron's .bin mapping above; a file truncated meanwhile can raise
 * SIGBUS, the same promise). Larger records take one pread each. */
static int ingest_shuffled(struct obj *o, cxlp_writer *w, const struct src *s, uint64_t off,
                           uint64_t n, uint64_t rec, const struct cxlp_import_opts *opts)
{
    const uint8_t *map = NULL;
    int rc = 0;
    if (rec < SMALL_RUN && (rc = map_ro(o, s, &map)))
        return rc;
    posix_fadvise(s->fd, (off_t)off, (off_t)(n * rec), POSIX_FADV_RANDOM);
    struct feistel f;
    ingest_perm(&f, n, opts->shuffle_seed);
    uint64_t gmax = MIN((uint64_t)SHUF_GROUP, MAX(SHUF_BYTES / rec, 1));
    uint64_t *ids = malloc(gmax * sizeof *ids);
    struct shuf_ent *e = malloc(gmax * sizeof *e);
    if (!ids || !e)
        rc = seterr(o, -ENOMEM, "%s: shuffle: out of memory", s->path);
    for (uint64_t k = 0; !rc && k < n;) {
        uint64_t room = writer_room(w) / rec;
        uint64_t g = MIN(gmax, n - k);
        if (room)
            g = MIN(g, room);
        void *dst;
        if ((rc = cxlp_writer_direct(w, g * rec, &dst))) {
            rc = writer_fail(o, w, rc, s->path);
            w = NULL;
            break;
        }
        for (uint64_t i = 0; i < g; i++)
            ids[i] = k + i;
        feistel_apply_n(&f, ids, (size_t)g);
        for (uint64_t i = 0; i < g; i++)
            e[i] = (struct shuf_ent){.src = ids[i], .slot = i};
        qsort(e, (size_t)g, sizeof *e, by_src);
        prefault(dst, g * rec);
        uint8_t *d = dst;
        for (uint64_t i = 0; !rc && i < g; i++) {
            if (map)
                memcpy(d + e[i].slot * rec, map + off + e[i].src * rec, rec);
            else
                rc = read_exact(o, s, d + e[i].slot * rec, rec, off + e[i].src * rec);
        }
        if (rc)
            break;
        if ((rc = cxlp_writer_commit_direct(w, g * rec))) {
            rc = writer_fail(o, w, rc, s->path);
            w = NULL;
            break;
        }
        k += g;
        progress(opts, k * rec, n * rec);
    }
    free(ids);
    free(e);
    if (map)
        unmap_ro(s, map);
    if (rc && w)
        cxlp_writer_abort(w);
    return rc;
}

/* raw and npy: bytes [off, off + bytes) of s become fixed-size records. */
static int ingest_fixed(cxlp_pool *p, struct obj *o, const char *name, const struct src *s,
                        uint64_t off, uint64_t bytes, const struct cxlp_schema *schema,
                        const struct cxlp_import_opts *opts)
{
    uint64_t rec = schema->record_size;
    struct cxlp_writer_opts wo = {.shard_bytes = opts->shard_bytes, .expected_bytes = bytes,
                                  .no_hugepages = opts->no_hugepages};
    cxlp_writer *w = NULL;
    int rc = cxlp_writer_begin(p, name, schema, &wo, &w);
    if (rc)
        return writer_fail(o, NULL, rc, s->path);
    if (opts->shuffle) {
        writer_set_shuffle(w, opts->shuffle_seed);
        if ((rc = ingest_shuffled(o, w, s, off, bytes / rec, rec, opts)))
            return rc;
        rc = cxlp_writer_commit(w);
        return rc ? seterr(o, rc, "%s: %s", s->path, cxlp_errmsg(NULL)) : 0;
    }
    uint64_t chunk = MAX(CHUNK / rec, 1) * rec;
    struct sink k;
    sink_open(p, &k);
    posix_fadvise(s->fd, (off_t)off, (off_t)bytes, POSIX_FADV_SEQUENTIAL);
    uint64_t done = 0;
    while (done < bytes) {
        /* never past the open shard's room: an early seal would leave
         * shards of unequal record counts */
        uint64_t room = writer_room(w);
        uint64_t n = MIN(MIN(chunk, bytes - done), room ? room : chunk);
        void *dst;
        rc = cxlp_writer_direct(w, n, &dst);
        if (rc) {
            sink_close(&k);
            return writer_fail(o, w, rc, s->path);
        }
        rc = fill(o, &k, s, dst, n, off + done);
        if (rc) {
            sink_close(&k);
            cxlp_writer_abort(w);
            return rc;
        }
        rc = cxlp_writer_commit_direct(w, n);
        if (rc) {
            sink_close(&k);
            return writer_fail(o, w, rc, s->path);
        }
        done += n;
        progress(opts, done, bytes);
    }
    sink_close(&k);
    rc = cxlp_writer_commit(w);
    if (rc)
        return seterr(o, rc, "%s: %s", s->path, cxlp_errmsg(NULL));
    return 0;
}

/* The one-field schema every importer produces: fixed records of
 * record_size bytes holding an ndim array of dtype, or (fixed 0) 1-D
 * variable-length records of dtype. */
static void one_field_schema(struct cxlp_schema *sc, const char *field, int fixed,
                             uint64_t record_size, int dtype, int ndim, const uint64_t *shape)
{
    memset(sc, 0, sizeof *sc);
    sc->fixed = fixed;
    sc->record_size = record_size;
    sc->n_fields = 1;
    strlcpy0(sc->fields[0].name, field, sizeof sc->fields[0].name);
    sc->fields[0].dtype = dtype;
    sc->fields[0].ndim = ndim;
    for (int d = 0; d < ndim; d++)
        sc->fields[0].shape[d] = shape[d];
}

static int import_raw(cxlp_pool *p, struct obj *o, const char *name, const char *path,
                      const struct cxlp_import_opts *opts, int guessed)
{
    /* the file first: a missing source is reported as such in any case */
    struct src s;
    int rc = src_open(o, path, &s);
    if (rc)
        return rc;
    uint64_t rs = opts->record_size;
    int dtype = opts->dtype < 0 ? CXLP_DT_U8 : opts->dtype;
    int isz = cxlp_dtype_size(dtype);
    if (rs == 0)
        rc = seterr(o, CXLP_EARG,
                    "%s: record_size: required for a raw import (bytes per record)%s", path,
                    guessed ? "; format auto found no .npy suffix or magic and no "
                              "PREFIX.bin + PREFIX.idx pair" : "");
    else if (isz <= 0)
        rc = seterr(o, CXLP_EARG, "%s: dtype: %d is not a known element type", path,
                    opts->dtype);
    else if (rs % (uint64_t)isz)
        rc = seterr(o, CXLP_EARG,
                    "%s: record_size: %llu is not a multiple of the %s itemsize (%d)",
                    path, (ull)rs, cxlp_dtype_name(dtype), isz);
    else if (s.size % rs)
        rc = seterr(o, CXLP_EBADINPUT, "%s: size %llu is not a multiple of record size %llu",
                    path, (ull)s.size, (ull)rs);
    else if (s.size == 0)
        rc = no_records(o, path, opts, "the file is empty, or its size is unknown to stat "
                        "as for /proc files");
    if (rc) {
        src_close(&s);
        return rc;
    }
    struct cxlp_schema sc;
    uint64_t elems = rs / (uint64_t)isz;
    one_field_schema(&sc, "data", 1, rs, dtype, 1, &elems);
    rc = ingest_fixed(p, o, name, &s, 0, s.size, &sc, opts);
    src_close(&s);
    return rc;
}

static int import_npy(cxlp_pool *p, struct obj *o, const char *name, const char *path,
                      const struct cxlp_import_opts *opts)
{
    struct src s;
    int rc = src_open(o, path, &s);
    if (rc)
        return rc;
    char err[ERRMSG_MAX];
    uint8_t pre[NPY_PREAMBLE_V2];
    uint64_t data_offset;
    uint64_t plen = MIN(s.size, (uint64_t)sizeof pre);
    rc = read_exact(o, &s, pre, plen, 0);
    if (!rc) {
        rc = npy_preamble(pre, plen, path, &data_offset, err, sizeof err);
        if (rc)
            seterr(o, rc, "%s", err);
    }
    uint8_t *hdr = NULL;
    struct npy_header h;
    if (!rc) {
        /* the whole header, or the whole file when it claims more */
        uint64_t hlen = MIN(data_offset, s.size);
        hdr = malloc(hlen ? hlen : 1);
        if (!hdr)
            rc = seterr(o, -ENOMEM, "%s: header of %llu bytes: out of memory", path,
                        (ull)hlen);
        else if (!(rc = read_exact(o, &s, hdr, hlen, 0))) {
            rc = npy_parse(hdr, hlen, path, &h, err, sizeof err);
            if (!rc)
                rc = npy_check_size(&h, s.size, path, err, sizeof err);
            if (rc)
                seterr(o, rc, "%s", err);
            else if (h.data_bytes == 0)
                rc = no_records(o, path, opts, "axis 0 of 'shape' is 0");
        }
        free(hdr);
    }
    if (rc) {
        src_close(&s);
        return rc;
    }
    struct cxlp_schema sc;
    one_field_schema(&sc, "data", 1, h.record_bytes, h.dtype, h.ndim ? h.ndim - 1 : 0,
                     h.ndim ? &h.shape[1] : NULL);
    rc = ingest_fixed(p, o, name, &s, h.data_offset, h.data_bytes, &sc, opts);
    src_close(&s);
    return rc;
}

/* Maps a whole file read-only; an empty file maps to a static empty buffer. */
static int map_ro(struct obj *o, const struct src *s, const uint8_t **out)
{
    static const uint8_t empty[1];
    if (s->size == 0) {
        *out = empty;
        return 0;
    }
    void *m = mmap(NULL, (size_t)s->size, PROT_READ, MAP_PRIVATE, s->fd, 0);
    if (m == MAP_FAILED)
        return seterr(o, -errno, "%s: mmap of %llu bytes: %s", s->path, (ull)s->size,
                      strerror(errno));
    *out = m;
    return 0;
}

static void unmap_ro(const struct src *s, const uint8_t *m)
{
    if (s->size)
        munmap((void *)m, (size_t)s->size);
}

/* Megatron prefix from "PREFIX", "PREFIX.bin" or "PREFIX.idx". */
static int megatron_paths(struct obj *o, const char *src, char *idx, char *bin)
{
    size_t n = strlen(src);
    if (n >= 4 && (strcmp(src + n - 4, ".bin") == 0 || strcmp(src + n - 4, ".idx") == 0))
        n -= 4;
    if (n + 5 > PATH_MAX)
        return seterr(o, -ENAMETOOLONG, "%s: path too long", src);
    memcpy(idx, src, n);
    memcpy(idx + n, ".idx", 5);
    memcpy(bin, src, n);
    memcpy(bin + n, ".bin", 5);
    return 0;
}

static int ingest_megatron(cxlp_pool *p, struct obj *o, const char *name,
                           const struct megatron_idx *m, const struct src *bs,
                           const uint8_t *bin, const char *idx_path,
                           const struct cxlp_import_opts *opts)
{
    uint64_t n_docs = m->n_doc_entries - 1;
    int64_t *docs = malloc((size_t)m->n_doc_entries * sizeof *docs);
    if (!docs)
        return seterr(o, -ENOMEM, "%s: %llu document indices: out of memory", idx_path,
                      (ull)m->n_doc_entries);
    for (uint64_t i = 0; i < m->n_doc_entries; i++)
        docs[i] = megatron_doc(m, i);

    struct cxlp_schema sc;
    one_field_schema(&sc, "tokens", 0, 0, m->dtype, 0, NULL);
    struct cxlp_writer_opts wo = {.shard_bytes = opts->shard_bytes,
                                  .expected_bytes = m->total_bytes,
                                  .no_hugepages = opts->no_hugepages};
    cxlp_writer *w = NULL;
    int rc = cxlp_writer_begin(p, name, &sc, &wo, &w);
    if (rc) {
        free(docs);
        return writer_fail(o, NULL, rc, bs->path);
    }
    writer_expect_records(w, m->n_seqs);
    uint64_t *lens = malloc(RUN_SEQS * sizeof *lens);
    if (!lens) {
        free(docs);
        cxlp_writer_abort(w);
        return seterr(o, -ENOMEM, "%s: out of memory", bs->path);
    }
    /* A run that does not fit the open shard's room starts the next shard
     * and leaves that room unused: runs of at most 1/8 of a shard keep
     * shards >= 7/8 full (the default shards are 256 x CHUNK). */
    uint64_t run_max = opts->shard_bytes ? MIN(CHUNK, MAX(opts->shard_bytes / 8, 1)) : CHUNK;
    struct sink k;
    sink_open(p, &k);
    posix_fadvise(bs->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    uint64_t done = 0, reported = 0;
    for (uint64_t i = 0; i < m->n_seqs;) {
        uint64_t start = (uint64_t)megatron_seq_ptr(m, i), bytes = 0, n = 0;
        do {
            uint64_t len = (uint64_t)megatron_seq_len(m, i + n) * (uint64_t)m->itemsize;
            if (n && ((uint64_t)megatron_seq_ptr(m, i + n) != start + bytes ||
                      bytes + len > run_max))
                break;
            lens[n++] = len;
            bytes += len;
        } while (i + n < m->n_seqs && n < RUN_SEQS);
        void *dst;
        rc = writer_direct_var(w, bytes, n, &dst);
        if (rc)
            break;
        if (bytes >= SMALL_RUN) {
            rc = fill(o, &k, bs, dst, bytes, start);
            if (rc) {
                cxlp_writer_abort(w);
                w = NULL;
                break;
            }
        } else if (bytes) {
            memcpy(dst, bin + start, bytes);
        }
        rc = writer_commit_var(w, lens, n);
        if (rc)
            break;
        i += n;
        done += bytes;
        if (done - reported >= PROGRESS_STEP) {
            progress(opts, done, m->total_bytes);
            reported = done;
        }
    }
    sink_close(&k);
    free(lens);
    if (rc) {
        free(docs);
        return w ? writer_fail(o, w, rc, bs->path) : rc;
    }
    rc = cxlp_writer_set_docs(w, docs, n_docs);
    free(docs);
    if (rc)
        return writer_fail(o, w, rc, idx_path);
    rc = cxlp_writer_commit(w);
    if (rc)
        return seterr(o, rc, "%s: %s", bs->path, cxlp_errmsg(NULL));
    progress(opts, done, m->total_bytes);
    return 0;
}

static int import_megatron(cxlp_pool *p, struct obj *o, const char *name, const char *src,
                           const struct cxlp_import_opts *opts)
{
    char idx_path[PATH_MAX], bin_path[PATH_MAX];
    int rc = megatron_paths(o, src, idx_path, bin_path);
    if (rc)
        return rc;
    struct src is = {.fd = -1}, bs = {.fd = -1};
    const uint8_t *idx = NULL, *bin = NULL;
    if ((rc = src_open(o, idx_path, &is)) || (rc = src_open(o, bin_path, &bs)) ||
        (rc = map_ro(o, &is, &idx)))
        goto out;
    /* the whole index is validated before the pool is touched */
    struct megatron_idx m;
    char err[ERRMSG_MAX];
    rc = megatron_idx_parse(idx, is.size, bs.size, idx_path, bin_path, &m, err, sizeof err);
    if (rc) {
        seterr(o, rc, "%s", err);
        goto out;
    }
    if (m.n_seqs == 0 && (rc = no_records(o, idx_path, opts, "sequence_count is 0")))
        goto out;
    if (opts->shuffle) {
        /* after the index checks: a bad .idx is reported as such first */
        rc = seterr(o, CXLP_EUNSUPPORTED,
                    "%s: shuffle (--shuffle): not supported for the megatron format (a "
                    "shuffle of sequences would cut its documents apart); Megatron's own "
                    "samplers mix documents at read time", idx_path);
        goto out;
    }
    if ((rc = map_ro(o, &bs, &bin)))
        goto out;
    rc = ingest_megatron(p, o, name, &m, &bs, bin, idx_path, opts);
out:
    if (bin)
        unmap_ro(&bs, bin);
    if (idx)
        unmap_ro(&is, idx);
    src_close(&bs);
    src_close(&is);
    return rc;
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), k = strlen(suf);
    return n >= k && strcmp(s + n - k, suf) == 0;
}

/* AUTO: .npy -> npy; PREFIX(.bin|.idx) with both files -> megatron; a file
 * starting with the .npy magic -> npy; anything else -> raw. */
static int guess_format(const char *src)
{
    if (has_suffix(src, ".npy"))
        return CXLP_FMT_NPY;
    char idx[PATH_MAX], bin[PATH_MAX];
    if (megatron_paths(NULL, src, idx, bin) == 0 && exists(idx) && exists(bin))
        return CXLP_FMT_MEGATRON;
    /* not a regular file (a FIFO would block the read): raw, whose open
     * says what the file is */
    int fd = open(src, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd >= 0) {
        uint8_t magic[6];
        struct stat st;
        ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode)
                        ? pread(fd, magic, sizeof magic, 0) : -1;
        close(fd);
        if (n == (ssize_t)sizeof magic && memcmp(magic, "\x93NUMPY", 6) == 0)
            return CXLP_FMT_NPY;
    }
    return CXLP_FMT_RAW;
}

int cxlp_import(cxlp_pool *p, const char *name, const char *src,
                const struct cxlp_import_opts *opts)
{
    if (!p)
        return seterr(NULL, CXLP_EARG, "cxlp_import: pool: NULL");
    struct obj *o = pool_obj(p);
    if (!name || !src)
        return seterr(o, CXLP_EARG, "cxlp_import: %s: NULL", name ? "src" : "name");
    const struct cxlp_import_opts def = {.format = CXLP_FMT_AUTO, .dtype = -1};
    if (!opts)
        opts = &def;
    int fmt = opts->format == CXLP_FMT_AUTO ? guess_format(src) : opts->format;
    switch (fmt) {
    case CXLP_FMT_RAW:
        return import_raw(p, o, name, src, opts, opts->format == CXLP_FMT_AUTO);
    case CXLP_FMT_NPY:
        return import_npy(p, o, name, src, opts);
    case CXLP_FMT_MEGATRON:
        return import_megatron(p, o, name, src, opts);
    default:
        return seterr(o, CXLP_EARG, "%s: format: %d is not a known format", src,
                      opts->format);
    }
}
