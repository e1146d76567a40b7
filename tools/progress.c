/*
 * progress.c - the ingest progress bar: one stderr line rewritten in place
 * with \r (bytes done/total, percent, MB/s, ETA).
 *
 * Drawn only when stderr is a terminal (the caller decides; a log file or a
 * pipe gets just the summary line) and at most ten times a second, so a fast
 * importer calling back per chunk does not spend its time on the terminal.
 */
#include <inttypes.h>
#include <stdio.h>

#include "cli.h"

static void draw(struct progress *pg, uint64_t done, uint64_t total, double t)
{
    double el = t - pg->t0;
    double mbs = el > 0 ? (double)done / el / 1e6 : 0;
    char bd[32], bt[32], eta[32] = "--:--";
    cli_fmt_bytes(done, bd);
    if (total) {
        cli_fmt_bytes(total, bt);
        if (mbs > 0 && total >= done) {
            double left = (double)(total - done) / (mbs * 1e6);
            unsigned s = left > 359999 ? 359999 : (unsigned)(left + 0.5);
            if (s >= 3600)
                snprintf(eta, sizeof eta, "%u:%02u:%02u", s / 3600, s / 60 % 60, s % 60);
            else
                snprintf(eta, sizeof eta, "%u:%02u", s / 60, s % 60);
        }
        double pct = 100.0 * (double)done / (double)total;
        int width = 24, fill = (int)(pct / 100.0 * width);
        if (fill > width)
            fill = width;
        char bar[32];
        for (int i = 0; i < width; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[width] = 0;
        fprintf(stderr, "\r[%s] %s / %s %5.1f%% %8.1f MB/s ETA %s   ", bar, bd, bt, pct, mbs,
                eta);
    } else {
        fprintf(stderr, "\r%s %8.1f MB/s   ", bd, mbs);
    }
    fflush(stderr);
    pg->drawn = 1;
    pg->last_draw = t;
}

void cli_progress_cb(void *ctx, uint64_t done, uint64_t total)
{
    struct progress *pg = ctx;
    double t = cli_now_sec();
    if (pg->drawn && t - pg->last_draw < 0.1 && (total == 0 || done < total))
        return;
    draw(pg, done, total, t);
}

void cli_progress_end(struct progress *pg)
{
    if (pg->drawn)
        fputc('\n', stderr);
    pg->drawn = 0;
}

void cli_shards_progress(void *ctx, uint64_t done, uint64_t total)
{
    struct shards_progress *m = ctx;
    double now = cli_now_sec();
    if (!m->show || (now - m->last < 0.2 && done < total))
        return;
    m->last = now;
    fprintf(stderr, "\r%s: %" PRIu64 "/%" PRIu64 " shards (%.0f%%)", m->what, done, total,
            100.0 * (double)done / (double)(total ? total : 1));
    if (done == total)
        fprintf(stderr, "\n");
}
