/*
 * probe.c - the start-up probe of a dataset's home, and the block order
 * a loader's staging keeps up with (cxlp_store_stage_order).
 *
 * Why a probe. A block order reads its window's staging units (store/
 * unit.c) wherever they lie in the home file: on a disk that reads whole
 * units in a random order as fast as in file order, the order of the
 * windows is free; on one that does not (the VM this project is measured
 * on read random 8 MiB pieces at 0.66 of its sequential rate), lookahead
 * could not pass that fraction of the disk's speed. So where a probe finds
 * random reads of the unit clearly slower than sequential ones, the order's
 * windows are made of runs of adjacent units (the block order's blocks
 * become runs), and the staging engine reads each run in file order.
 *
 * The probe: RUNS_READS reads of the unit's size (a power of two) at random
 * offsets of the dataset's home extents, and as many back to back from a
 * random offset, with O_DIRECT (so the page cache says nothing), timed. A
 * home the page cache serves (no O_DIRECT: tmpfs) or a memory home is not
 * probed: no runs.
 *
 * The verdict is recorded in the pool, once (the home tier's counters,
 * struct pool_tier_ctr.probe: 4 slots of 16 bits, one per read size, each
 * set once by CAS): every rank, worker and host of the pool, and a job
 * resumed on it, then cuts the same blocks, which one order across ranks
 * and an exact resume need; a timing measured again could fall on the
 * other side of the rule. A reader that may not write the pool keeps its
 * own verdict, per home file, for the process's life.
 *
 * The rule (what window="auto" takes, docs/tiers.md): a window of half the
 * budget in units; runs when random reads run below RUNS_SLOWER of the
 * sequential rate, of RUN_BYTES (enough for this project's disks to read
 * at their sequential rate), at most a quarter of the window (a batch then
 * draws from 4 runs or more).
 *
 * Rejected: runs always (they cost shuffle quality a disk that does not
 * need them should not pay); a probe per loader (the same answer, read
 * again for every epoch's loader).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "common/atomic.h"
#include "pool/host.h"
#include "media/media.h"
#include "pool/loc.h"
#include "pool/pool_format.h"
#include "store/fetch.h"
#include "store/remote_tier.h"
#include "store/store.h"
#include "store/unit.h"

#define RUNS_READS 6
#define RUNS_SLOWER 0.8
#define RUN_BYTES (UINT64_C(64) << 20)
#define PROBE_KEEP 16
/* a verdict slot: VALID | (log2 of the read size - 12) << 10 | random
 * reads' rate in thousandths of the sequential one (at most 1023) */
#define SLOT_VALID 0x8000u
#define SLOT_SLOTS 4

struct probe_kept {
    dev_t dev;
    ino_t ino;
    unsigned lg;
    double ratio;
};
static struct probe_kept kept[PROBE_KEEP];
static unsigned n_kept;
static pthread_mutex_t kept_mu = PTHREAD_MUTEX_INITIALIZER;

static unsigned slot_of(unsigned lg, double ratio)
{
    double m = ratio * 1000 + 0.5;
    return SLOT_VALID | (lg - 12) << 10 | (unsigned)(m > 1023 ? 1023 : m < 0 ? 0 : m);
}

/* The pool's verdict for reads of 2^lg bytes from tier t: 1 with *ratio. */
static int verdict_get(const struct attach *a, uint32_t t, unsigned lg, double *ratio)
{
    uint64_t w = host_load(a, &a->hdr->ctr[t].probe);
    for (int i = 0; i < SLOT_SLOTS; i++) {
        unsigned v = (unsigned)(w >> (16 * i)) & 0xffff;
        if ((v & SLOT_VALID) && ((v >> 10) & 31) == lg - 12) {
            *ratio = (v & 1023) / 1000.0;
            return 1;
        }
    }
    return 0;
}

/* Records a verdict unless one for that read size is there (the first
 * recorded is everyone's: *ratio becomes it). Without a writable mapping,
 * nothing. */
static void verdict_put(const struct attach *a, uint32_t t, unsigned lg, double *ratio)
{
    struct pool_tier_ctr *c = attach_ctr(a, t);
    if (!c)
        return;
    uint64_t w = host_load(a, &c->probe);
    for (;;) {
        if (verdict_get(a, t, lg, ratio))
            return;
        int i = 0;
        while (i < SLOT_SLOTS && ((w >> (16 * i)) & SLOT_VALID))
            i++;
        if (i == SLOT_SLOTS)
            i = (int)(lg % SLOT_SLOTS); /* all taken: a size no dataset uses now, likely */
        uint64_t nw = (w & ~(UINT64_C(0xffff) << (16 * i))) |
                      (uint64_t)slot_of(lg, *ratio) << (16 * i);
        if (host_cas(a, &c->probe, &w, nw))
            return;
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t xorshift(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* Times n reads of chunk bytes at off[i] of r into buf: bytes per second. */
static int timed(struct media_reader *r, const uint64_t *off, int n, uint64_t chunk,
                 uint8_t *buf, double *bps)
{
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        int rc = media_read(r, off[i], chunk, buf, NULL);
        if (rc)
            return rc;
    }
    double dt = now_s() - t0;
    *bps = dt > 0 ? (double)n * (double)chunk / dt : 0;
    return 0;
}

static uint64_t pow2_floor(uint64_t x)
{
    return x ? UINT64_C(1) << (63 - __builtin_clzll(x)) : 0;
}

/* The verdict on s's home for reads of about chunk bytes: 0 with
 * out->probed (0: not probed, 1: measured now, with seq_bps and
 * random_bps, 2: the pool's record) and out->random_ratio; or an I/O
 * error. */
static int probe(cxlp_store *s, uint64_t chunk, struct cxlp_stage_order *out)
{
    struct attach *a = s->a;
    uint32_t home = store_home(s);
    if (!s->tiered || home >= attach_n_tiers(a) ||
        !(attach_tier(a, home)->flags & TIER_STAGED) || !s->n_shards)
        return 0;
    if (attach_tier(a, home)->flags & TIER_REMOTE)
        return 0; /* a peer's pool: not a file to probe */
    const char *path = attach_tier(a, home)->path;
    struct stat st;
    if (stat(path, &st))
        return 0;
    chunk = pow2_floor(MAX(chunk, (uint64_t)MEDIA_IO_CHUNK));
    const unsigned lg = (unsigned)__builtin_ctzll(chunk);
    if (lg > 12 + 31)
        return 0;
    if (verdict_get(a, home, lg, &out->random_ratio)) {
        out->probed = 2;
        return 0;
    }
    const int writable = attach_ctr(a, home) != NULL;
    pthread_mutex_lock(&kept_mu);
    for (unsigned i = 0; !writable && i < MIN(n_kept, PROBE_KEEP); i++)
        if (kept[i].dev == st.st_dev && kept[i].ino == st.st_ino && kept[i].lg == lg) {
            out->random_ratio = kept[i].ratio;
            out->probed = 2;
            pthread_mutex_unlock(&kept_mu);
            return 0;
        }
    pthread_mutex_unlock(&kept_mu);
    /* the dataset's extents in the home file */
    uint64_t lo = UINT64_MAX, hi = 0;
    for (uint64_t k = 0; k < s->n_shards; k++) {
        uint64_t w = store_word(s, k, home);
        if (!loc_present(w))
            continue;
        lo = MIN(lo, loc_off(w));
        hi = MAX(hi, loc_off(w) + s->loc[k].len);
    }
    if (lo >= hi || hi - lo < (RUNS_READS + 1) * chunk)
        return 0; /* too small to tell, or to matter */
    char err[ERRMSG_MAX];
    struct media_reader *r;
    int rc = media_reader_open(&r, path, err, sizeof err);
    if (rc)
        return seterr(&s->obj, rc, "dataset %s: probing its home: %s", s->name, err);
    if (!media_reader_direct(r)) {
        media_reader_close(r);
        return 0; /* the page cache's speed, not the device's */
    }
    uint8_t *buf = NULL;
    if (posix_memalign((void **)&buf, 4096, chunk)) {
        media_reader_close(r);
        return seterr(&s->obj, -ENOMEM, "dataset %s: out of memory", s->name);
    }
    uint64_t x = (uint64_t)st.st_ino * 0x9e3779b97f4a7c15u | 1, off[RUNS_READS];
    const uint64_t span = (hi - lo) / 4096 - chunk / 4096 * (RUNS_READS + 1);
    uint64_t start = lo + xorshift(&x) % (span + 1) * 4096;
    for (int i = 0; i < RUNS_READS; i++)
        off[i] = start + (uint64_t)i * chunk;
    rc = timed(r, off, RUNS_READS, chunk, buf, &out->seq_bps);
    for (int i = 0; !rc && i < RUNS_READS; i++)
        off[i] = lo + xorshift(&x) % ((hi - lo - chunk) / 4096 + 1) * 4096;
    if (!rc)
        rc = timed(r, off, RUNS_READS, chunk, buf, &out->random_bps);
    free(buf);
    media_reader_close(r);
    if (rc)
        return seterr(&s->obj, rc, "dataset %s: probing its home %s: %s", s->name, path,
                      cxlp_strerror(rc));
    if (out->seq_bps <= 0)
        return 0;
    out->probed = 1;
    /* as the pool records it (thousandths), so that this process decides
     * as every later one will */
    out->random_ratio = (slot_of(lg, out->random_bps / out->seq_bps) & 1023) / 1000.0;
    if (writable) {
        verdict_put(a, home, lg, &out->random_ratio);
        return 0;
    }
    pthread_mutex_lock(&kept_mu);
    kept[n_kept++ % PROBE_KEEP] = (struct probe_kept){st.st_dev, st.st_ino, lg, out->random_ratio};
    pthread_mutex_unlock(&kept_mu);
    return 0;
}

int cxlp_store_stage_order(cxlp_store *s, uint64_t budget, int runs,
                           struct cxlp_stage_order *out)
{
    if (!s || !out)
        return seterr(NULL, CXLP_EARG, "store_stage_order: NULL argument");
    memset(out, 0, sizeof *out);
    if (runs < 0 && runs != CXLP_RUNS_AUTO && runs != CXLP_RUNS_ON)
        return seterr(&s->obj, CXLP_EARG, "store_stage_order: runs %d: CXLP_RUNS_AUTO, 0 (none) or "
                      "units per run", runs);
    if (!s->tiered || !s->n_mem || !s->count) {
        out->block_records = out->unit_records = s->per_shard ? s->per_shard : s->count;
        out->window = s->n_shards ? s->n_shards : 1; /* everything in memory: a full shuffle */
        out->run_units = 1;
        return 0;
    }
    uint64_t b = budget ? budget : attach_tier(s->a, s->mem[0])->data_len / 4 * 3;
    uint64_t R, bytes;
    int rc = store_unit_rule(s, b, &R, &bytes);
    if (rc)
        return rc;
    if (!R) { /* whole shards: the dataset's own, when they are equal */
        R = s->per_shard;
        bytes = store_max_shard(s);
        if (!R)
            return seterr(&s->obj, CXLP_EARG, "dataset %s: its shards hold different numbers of "
                          "records and are small enough to stage whole: give the block order "
                          "a shard size", s->name);
    }
    out->unit_records = R;
    out->unit_bytes = bytes;
    uint64_t units = (s->count + R - 1) / R;
    uint64_t W = MAX(1, MIN(units, b / 2 / MAX(bytes, 1)));
    uint64_t L = 1;
    if (runs == CXLP_RUNS_AUTO) {
        if ((rc = probe(s, bytes, out)))
            return rc;
        if (out->probed && out->random_ratio < RUNS_SLOWER)
            L = MAX(1, MIN(RUN_BYTES / MAX(bytes, 1), W / 4));
    } else if (runs == CXLP_RUNS_ON) {
        L = MAX(1, MIN(RUN_BYTES / MAX(bytes, 1), W / 4));
    } else if (runs > 0) {
        L = MIN((uint64_t)runs, W);
    }
    out->run_units = L;
    out->block_records = L * R;
    out->window = MAX(1, W / L);
    return 0;
}
