/*
 * calibrate.c - `cxlpool sim --calibrate`: the two bandwidths of the
 * this-machine preset measured here, the way the staging engine moves
 * bytes: the file tier's by whole shards read in a random order through
 * the engine's own reader (media/io.c: io_uring, O_DIRECT where the file
 * allows it), DRAM's by copying a buffer larger than the caches.
 *
 * A measurement of one moment of a shared machine: the figures go into a
 * configuration the user keeps (and can read), not into the presets.
 * Latencies and concurrency are not measured: the preset's stay.
 *
 * Rejected: running the tiers benchmark itself (minutes, a pool and a
 * dataset; this takes seconds); reading through the page cache (a second
 * read of the file would measure memory).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "media/media.h"
#include "sim/sim.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int dram_rate(uint64_t bytes, double *bps)
{
    size_t n = (size_t)bytes;
    char *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        free(a);
        free(b);
        return -ENOMEM;
    }
    memset(a, 0x5a, n);
    memset(b, 0, n); /* both touched: no page faults in the copies */
    double best = 0;
    for (int i = 0; i < 3; i++) {
        double t0 = now_s();
        memcpy(i & 1 ? a : b, i & 1 ? b : a, n);
        double dt = now_s() - t0;
        if (dt > 0 && (double)n / dt > best)
            best = (double)n / dt;
    }
    /* keep the copies from being elided */
    volatile char sink = a[n / 2] ^ b[n / 3];
    (void)sink;
    free(a);
    free(b);
    *bps = best;
    return 0;
}

int sim_calibrate(const char *dir, uint64_t bytes, uint64_t shard, struct sim_calib *k, char *err,
                  size_t errlen)
{
    memset(k, 0, sizeof *k);
    if (shard < (1u << 20) || shard % 4096 || bytes < shard) {
        snprintf(err, errlen, "--calibrate: shards of 1 MiB or more, 4 KiB aligned, and at "
                 "least one of them");
        return -1;
    }
    uint64_t n = bytes / shard;
    k->bytes = n * shard;
    k->shard = shard;
    char path[4096];
    snprintf(path, sizeof path, "%s/cxlpool-calibrate.XXXXXX", dir);
    int fd = mkstemp(path);
    if (fd < 0) {
        snprintf(err, errlen, "--calibrate %s: %s", dir, strerror(errno));
        return -1;
    }
    int rc = -1;
    void *buf = NULL;
    struct media_reader *rd = NULL;
    uint64_t *order = malloc(n * sizeof *order);
    if (!order || posix_memalign(&buf, 4096, shard)) {
        snprintf(err, errlen, "--calibrate: out of memory");
        goto out;
    }
    memset(buf, 0xa5, shard);
    for (uint64_t i = 0; i < n; i++) {
        const char *p = buf;
        for (uint64_t left = shard; left;) {
            ssize_t w = write(fd, p, left);
            if (w <= 0) {
                snprintf(err, errlen, "--calibrate: writing %s: %s", path,
                         w < 0 ? strerror(errno) : "short write");
                goto out;
            }
            p += w;
            left -= (uint64_t)w;
        }
    }
    if (fsync(fd)) {
        snprintf(err, errlen, "--calibrate: fsync %s: %s", path, strerror(errno));
        goto out;
    }
    /* its pages out of the page cache (clean now): reads come from the device */
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    if (media_reader_open(&rd, path, err, errlen))
        goto out;
    /* whole shards in a random order (a fixed one: xorshift from 1) */
    for (uint64_t i = 0; i < n; i++)
        order[i] = i;
    uint64_t x = 88172645463325252ull;
    for (uint64_t i = n; i > 1; i--) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        uint64_t j = x % i, t = order[i - 1];
        order[i - 1] = order[j];
        order[j] = t;
    }
    int direct = 1;
    double t0 = now_s();
    for (uint64_t i = 0; i < n; i++) {
        int d = 0;
        int r = media_read(rd, order[i] * shard, shard, buf, &d);
        if (r) {
            snprintf(err, errlen, "--calibrate: reading %s: %s", path, strerror(-r));
            goto out;
        }
        direct &= d;
    }
    double dt = now_s() - t0;
    k->file_bps = dt > 0 ? (double)k->bytes / dt : 0;
    k->direct = direct;
    if (dram_rate(MIN(bytes, UINT64_C(256) << 20), &k->dram_bps)) {
        snprintf(err, errlen, "--calibrate: out of memory");
        goto out;
    }
    if (!(k->file_bps > 0) || !(k->dram_bps > 0)) {
        snprintf(err, errlen, "--calibrate: a rate too fast to time: use more bytes");
        goto out;
    }
    rc = 0;
out:
    media_reader_close(rd);
    free(buf);
    free(order);
    close(fd);
    unlink(path);
    return rc;
}

void sim_calib_config(FILE *f, const struct sim_calib *k)
{
    struct sim_config c;
    sim_preset("this-machine", &c);
    fprintf(f, "{\n  \"preset\": \"this-machine\",\n  \"tiers\": [\n");
    fprintf(f, "    {\"name\": \"dram\", \"kind\": \"dram\", \"capacity\": %llu, \"latency_ns\": "
               "%.0f, \"bandwidth\": %.0f, \"concurrency\": %u},\n",
            (unsigned long long)c.tier[0].capacity, c.tier[0].latency_ns, k->dram_bps,
            c.tier[0].concurrency);
    fprintf(f, "    {\"name\": \"nvme\", \"kind\": \"nvme\", \"capacity\": %llu, \"latency_ns\": "
               "%.0f, \"bandwidth\": %.0f, \"concurrency\": %u, \"home\": true}\n  ]\n}\n",
            (unsigned long long)c.tier[1].capacity, c.tier[1].latency_ns, k->file_bps,
            c.tier[1].concurrency);
}
