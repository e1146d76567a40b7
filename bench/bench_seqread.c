/*
 * bench_seqread.c - the sequential read bandwidth of a file with the reads
 * the nvme tier uses (media/io.c: io_uring, O_DIRECT, 1 MiB requests, 8 in
 * flight), into one 64 MiB buffer reused: the limit staging from that file
 * can reach. Drop the page cache first (O_DIRECT bypasses it anyway; the
 * buffered fallback would not).
 *
 * usage: bench_seqread FILE [OFFSET=0] [BYTES=whole file] [SHARD STREAMS [SEED]]
 *
 * With SHARD and STREAMS: the bytes are read as pieces of SHARD bytes in a
 * random order (a permutation drawn from SEED), by STREAMS threads at once,
 * each piece with the same reads into a buffer of its thread: the pattern
 * of stagers copying the shards of a shuffled dataset, whose shards lie
 * anywhere in the file. Prints one JSON line either way.
 */
#include <fcntl.h>
#include <pthread.h>
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

/* shard-order reads: one thread's share of the permuted pieces */
struct stream {
    const char *path;
    const uint64_t *piece; /* offsets, in read order */
    uint64_t n, shard, bytes;
    int direct, rc;
};

static void *stream_run(void *arg)
{
    struct stream *st = arg;
    void *buf;
    struct media_reader *r;
    char err[256];
    if (posix_memalign(&buf, 4096, st->shard)) {
        st->rc = 1;
        return NULL;
    }
    if (media_reader_open(&r, st->path, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        st->rc = 1;
        free(buf);
        return NULL;
    }
    for (uint64_t i = 0; i < st->n && !st->rc; i++) {
        if ((st->rc = media_read(r, st->piece[i], st->shard, buf, &st->direct)))
            fprintf(stderr, "read at %" PRIu64 ": %d\n", st->piece[i], st->rc);
        st->bytes += st->shard;
    }
    media_reader_close(r);
    free(buf);
    return NULL;
}

static int shard_order(const char *path, uint64_t off, uint64_t bytes, uint64_t shard,
                       int streams, uint64_t seed)
{
    shard &= ~4095ull;
    if (!shard || streams < 1 || streams > 64 || bytes < shard) {
        fprintf(stderr, "SHARD (>= 4096) must fit in BYTES, STREAMS 1..64\n");
        return 2;
    }
    uint64_t n = bytes / shard;
    uint64_t *piece = malloc(n * sizeof *piece);
    if (!piece)
        return 1;
    for (uint64_t i = 0; i < n; i++)
        piece[i] = off + i * shard;
    for (uint64_t i = n - 1; i > 0; i--) { /* Fisher-Yates, splitmix64 */
        uint64_t z = (seed += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        uint64_t j = z % (i + 1), t = piece[i];
        piece[i] = piece[j];
        piece[j] = t;
    }
    struct stream st[64] = {{0}};
    pthread_t th[64];
    double t0 = now();
    for (int k = 0; k < streams; k++) {
        /* each thread a part of the one random order */
        uint64_t lo = n * (uint64_t)k / (uint64_t)streams, hi = n * (uint64_t)(k + 1) / (uint64_t)streams;
        st[k] = (struct stream){.path = path, .piece = piece + lo, .n = hi - lo, .shard = shard};
        if (pthread_create(&th[k], NULL, stream_run, &st[k])) {
            fprintf(stderr, "pthread_create failed\n");
            return 1;
        }
    }
    uint64_t done = 0;
    int rc = 0, direct = 1;
    for (int k = 0; k < streams; k++) {
        pthread_join(th[k], NULL);
        done += st[k].bytes;
        rc |= st[k].rc;
        direct &= st[k].direct;
    }
    double dt = now() - t0;
    free(piece);
    if (rc)
        return 1;
    printf("{\"bytes\": %" PRIu64 ", \"seconds\": %.4f, \"gb_per_s\": %.4f, \"o_direct\": %s, "
           "\"shard\": %" PRIu64 ", \"streams\": %d}\n",
           done, dt, (double)done / dt / 1e9, direct ? "true" : "false", shard, streams);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_seqread FILE [OFFSET] [BYTES] [SHARD STREAMS [SEED]]\n");
        return 2;
    }
    struct stat st;
    if (stat(argv[1], &st) < 0) {
        perror(argv[1]);
        return 1;
    }
    uint64_t off = argc > 2 ? strtoull(argv[2], NULL, 0) : 0;
    uint64_t bytes = argc > 3 ? strtoull(argv[3], NULL, 0) : (uint64_t)st.st_size - off;
    if (argc > 5)
        return shard_order(argv[1], off & ~4095ull, bytes & ~4095ull, strtoull(argv[4], NULL, 0),
                           atoi(argv[5]), argc > 6 ? strtoull(argv[6], NULL, 0) : 1);
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
