/*
 * bench_seqread.c - the sequential read bandwidth of a file with the reads
 * the nvme tier uses (media/io.c: io_uring, O_DIRECT, 1 MiB requests, 8 in
 * flight), into one 64 MiB buffer reused: the limit staging from that file
 * can reach. Drop the page cache first (O_DIRECT bypasses it anyway; the
 * buffered fallback would not).
 *
 * usage: bench_seqread FILE [OFFSET=0] [BYTES=whole file]   prints GB/s
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "media/media.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_seqread FILE [OFFSET] [BYTES]\n");
        return 2;
    }
    struct stat st;
    if (stat(argv[1], &st) < 0) {
        perror(argv[1]);
        return 1;
    }
    uint64_t off = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;
    uint64_t bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : (uint64_t)st.st_size - off;
    const uint64_t chunk = 64ull << 20;
    off &= ~4095ull;
    bytes &= ~4095ull;
    void *buf;
    if (posix_memalign(&buf, 4096, chunk))
        return 1;
    struct media_reader *r;
    char err[256];
    if (media_reader_open(&r, argv[1], err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    double t0 = now();
    int direct = 0;
    for (uint64_t done = 0; done < bytes;) {
        uint64_t n = bytes - done < chunk ? bytes - done : chunk;
        int rc = media_read(r, off + done, n, buf, &direct);
        if (rc) {
            fprintf(stderr, "read at %" PRIu64 ": %d\n", off + done, rc);
            return 1;
        }
        done += n;
    }
    double dt = now() - t0;
    printf("{\"bytes\": %" PRIu64 ", \"seconds\": %.4f, \"gb_per_s\": %.4f, \"o_direct\": %s}\n",
           bytes, dt, (double)bytes / dt / 1e9, direct ? "true" : "false");
    media_reader_close(r);
    free(buf);
    return 0;
}
