/*
 * host.c - several hosts on one pool: host identity, the registry of
 * liveness domains, the pool clock and heartbeats, the cross-host writer
 * lock, and the coherence discipline for the pool's shared words.
 * host.h has the glossary and the invariants; docs/hosts.md the user's
 * view (memory model, guarantees, caveats).
 *
 * Liveness. A process can judge another by pid only inside its domain
 * (same host id, boot and PID namespace, and a /proc of that namespace).
 * Everything else is judged by beats: the owner stamps the pool clock into
 * its lease every POOL_TICK_MS / 2 (a thread per process, below); a beat
 * more than expiry_ticks behind the clock means the owner stopped or died.
 * The pool clock is itself advanced by the attachers: whoever sees it
 * unchanged for a tick of its own monotonic clock moves it by one (CAS), so
 * it advances about once per tick while anyone runs, needs no synchronized
 * clocks between hosts, and stands still while nobody could be watching
 * (an expiry is then counted from the first attacher that comes back).
 *
 * The reboot rule: a host keeps its host id across reboots (the id file),
 * so an entry with our host id and another boot id belongs to a boot that
 * is over: its leases, reservations and lock are dead at once (after 3
 * ticks of silence, which tells a rebooted host from a clone that shares
 * our id file while alive). Domains of other hosts that never come back
 * expire after expiry_ticks of the clock.
 *
 * The writer lock is one word: (registry index + 1, pid, beat). A writer
 * CASes it from 0, or from a holder that is gone (dead pid of our domain,
 * previous boot, expired beat), then bumps the epoch in the gen word. The
 * holder's heartbeat renews the beat by CAS. Publishing is a CAS of the gen
 * word from exactly (G, our epoch): a holder deposed while stopped fails
 * there, whatever instant it resumes at, and nothing of its becomes
 * visible.
 *
 * Rejected:
 *   - the boot id as host identity: a second host (or a container with
 *     another boot id view) looked like a reboot and wiped the lease table;
 *   - the process-shared robust mutex across hosts: futex waits and owner
 *     death are per kernel, so a waiter on another host is never woken and
 *     a dead owner on another host is never noticed;
 *   - wall-clock timestamps as beats: they need clocks synchronized across
 *     hosts, and one host whose clock runs ahead would expire everyone;
 *   - each observer timing a beat counter on its own: a short-lived command
 *     could never conclude anything; the pool clock lets anyone judge at
 *     once;
 *   - a double-width CAS of (gen, lock): cmpxchg16b is not on every CPU
 *     and C11 gives no lock-free guarantee for it across processes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>

#include "common/atomic.h"
#include "common/flush.h"
#include "pool/host.h"

#define HOST_ID_FILE "/var/lib/cxlpool/host-id"
#define PID_MASK 0xffffffffull
#define TICK_NS ((uint64_t)POOL_TICK_MS * 1000000ull)
/* lock word: (registry index + 1) << 54 | pid << 32 | beat (32 bits) */
#define WL_PID_MAX ((UINT64_C(1) << 22) - 1)

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ coherence */

uint64_t host_load(const struct attach *a, const uint64_t *p)
{
    if (a->noncoherent)
        cache_invalidate(p, sizeof *p);
    /* pairs with the release half of host_store / host_cas */
    return at_load_acquire(p);
}

void host_store(const struct attach *a, uint64_t *p, uint64_t v)
{
    at_store_release(p, v);
    if (a->noncoherent)
        cache_writeback(p, sizeof *p);
}

int host_cas(const struct attach *a, uint64_t *p, uint64_t *expected, uint64_t desired)
{
    if (a->noncoherent)
        cache_invalidate(p, sizeof *p);
    int ok = at_cas_acq_rel(p, expected, desired);
    if (a->noncoherent)
        cache_writeback(p, sizeof *p);
    return ok;
}

/* ------------------------------------------------------------- identity */

static ssize_t read_small(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    return n;
}

static uint64_t parse_hex_id(const char *s)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 16);
    while (*end == '\n' || *end == ' ')
        end++;
    return errno || end == s || *end ? 0 : (uint64_t)v;
}

static uint64_t random_id(void)
{
    uint64_t v = 0;
    while (v == 0) {
        if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
            uint64_t x[3] = {now_ns(), (uint64_t)getpid(), (uint64_t)time(NULL)};
            v = XXH3_64bits(x, sizeof x);
        }
    }
    return v;
}

/* Reads the host id from path, creating it (a random id, written to a
 * temporary file and linked into place so that concurrent first attaches
 * agree on one) when absent. 0 when it can be neither read nor made. */
static uint64_t id_from_file(const char *path, int *created)
{
    char buf[64];
    if (read_small(path, buf, sizeof buf) > 0)
        return parse_hex_id(buf);
    char dir[PATH_MAX];
    strlcpy0(dir, path, sizeof dir);
    char *slash = strrchr(dir, '/');
    if (slash && slash != dir) {
        *slash = 0;
        (void)mkdir(dir, 0755);
    }
    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.XXXXXX", path);
    int fd = mkstemp(tmp);
    if (fd < 0)
        return 0;
    uint64_t v = random_id();
    int len = snprintf(buf, sizeof buf, "%016" PRIx64 "\n", v);
    int ok = fchmod(fd, 0644) == 0 && write(fd, buf, (size_t)len) == len && fsync(fd) == 0;
    close(fd);
    if (ok && link(tmp, path) == 0)
        *created = 1;
    unlink(tmp);
    /* the winner of a race of first attaches is what everyone reads */
    return read_small(path, buf, sizeof buf) > 0 ? parse_hex_id(buf) : 0;
}

void host_identity(struct host_self *s)
{
    memset(s, 0, sizeof *s);
    boot_id(s->boot);
    struct stat st;
    if (stat("/proc/self/ns/pid", &st) == 0)
        s->pidns = (uint64_t)st.st_ino;
    /* pids mean something to us only when /proc is our namespace's */
    char link[32];
    ssize_t k = readlink("/proc/self", link, sizeof link - 1);
    if (k > 0) {
        link[k] = 0;
        s->pid_checks = strtoll(link, NULL, 10) == (long long)getpid();
    }
    const char *env = getenv("CXLP_HOST_ID");
    const char *path = getenv("CXLP_HOST_ID_FILE");
    if (!path || !*path)
        path = HOST_ID_FILE;
    int created = 0;
    if (env && *env && (s->host_id = parse_hex_id(env)) != 0) {
        snprintf(s->id_source, sizeof s->id_source, "CXLP_HOST_ID");
    } else if ((s->host_id = id_from_file(path, &created)) != 0) {
        snprintf(s->id_source, sizeof s->id_source, "%.80s%s", path,
                 created ? " (created)" : "");
    } else {
        char mid[64];
        if (read_small("/etc/machine-id", mid, sizeof mid) > 8) {
            s->host_id = XXH3_64bits(mid, strlen(mid)) | 1;
            snprintf(s->id_source, sizeof s->id_source, "/etc/machine-id (%.60s not writable)",
                     path);
        } else {
            s->host_id = XXH3_64bits(s->boot, sizeof s->boot) | 1;
            snprintf(s->id_source, sizeof s->id_source, "boot id (no host id file or machine-id)");
        }
    }
    char hn[256];
    if (gethostname(hn, sizeof hn) == 0) {
        hn[sizeof hn - 1] = 0;
        strlcpy0(s->name, hn, sizeof s->name);
    }
    uint64_t facts[6] = {s->host_id, 0, 0, s->pidns, 0, 0};
    memcpy(&facts[1], s->boot, 16);
    if (!s->pid_checks) {
        /* a domain of its own: nobody judges this process by pid */
        facts[4] = (uint64_t)getpid();
        facts[5] = proc_starttime(getpid()) ^ now_ns();
    }
    s->key = XXH3_64bits(facts, sizeof facts);
    if (s->key == 0)
        s->key = 1;
}

/* ------------------------------------------------------------- registry */

static struct pool_host *reg(const struct attach *a, int writable)
{
    return (struct pool_host *)((uint8_t *)(writable ? a->whdr : a->hdr) + POOL_HOST_OFF);
}

const struct pool_host *host_find(const struct attach *a, uint64_t key)
{
    if (key == 0)
        return NULL;
    const struct pool_host *r = reg(a, 0);
    for (uint32_t i = 0; i < POOL_HOSTS; i++)
        if (host_load(a, &r[i].key) == key)
            return &r[i];
    return NULL;
}

uint32_t host_count(const struct attach *a)
{
    const struct pool_host *r = reg(a, 0);
    uint32_t n = 0;
    for (uint32_t i = 0; i < POOL_HOSTS; i++)
        n += host_load(a, &r[i].key) != 0;
    return n;
}

static uint64_t age(uint64_t clock, uint64_t beat)
{
    return clock > beat ? clock - beat : 0;
}

/* Entry e ran in a boot of this host that is over (the reboot rule). */
static int prev_boot(const struct attach *a, const struct pool_host *e, uint64_t clock)
{
    if (!e || host_load(a, &e->host_id) != a->self.host_id)
        return 0;
    uint8_t b[16];
    if (a->noncoherent)
        cache_invalidate(e->boot, sizeof b);
    memcpy(b, e->boot, sizeof b);
    return memcmp(b, a->self.boot, sizeof b) != 0 && age(clock, host_load(a, &e->beat)) >= 3;
}

static void fill_entry(struct attach *a, struct pool_host *e, uint64_t clock)
{
    host_store(a, &e->host_id, a->self.host_id);
    memcpy(e->boot, a->self.boot, sizeof e->boot);
    memcpy(e->name, a->self.name, sizeof e->name);
    if (a->noncoherent)
        cache_writeback(e, sizeof *e);
    host_store(a, &e->pidns, a->self.pidns);
    host_store(a, &e->beat, clock);
}

/* Frees the entries of domains that are over: silent for twice the expiry,
 * or a previous boot of this host, with no live lease naming them and not
 * named by the lock word. Reservations name domains too, but their
 * liveness goes through their lease, never through the registry. */
static void recycle(struct attach *a, uint64_t clock)
{
    struct pool_host *r = reg(a, 1);
    uint64_t w = host_load(a, &a->hdr->wlock);
    for (uint32_t i = 0; i < POOL_HOSTS; i++) {
        uint64_t key = host_load(a, &r[i].key);
        if (key == 0 || key == a->self.key || (w && (w >> 54) == i + 1))
            continue;
        if (age(clock, host_load(a, &r[i].beat)) <= 2 * a->expiry_ticks && !prev_boot(a, &r[i], clock))
            continue;
        int named = 0;
        for (uint64_t s = 0; s < a->L.lease_slots && !named; s++) {
            const struct pool_lease *l = &a->leases[s];
            uint64_t o = host_load(a, &l->owner);
            named = (o & PID_MASK) && host_load(a, &l->host) == key &&
                    host_lease_live(a, l, o, clock);
        }
        if (!named)
            host_cas(a, &r[i].key, &key, 0);
    }
}

int host_register(struct attach *a, struct obj *o)
{
    a->host_idx = POOL_HOSTS;
    if (!a->whdr)
        return 0;
    struct pool_host *r = reg(a, 1);
    uint64_t clock = host_clock(a);
    for (int attempt = 0; attempt < 2; attempt++) {
        for (uint32_t i = 0; i < POOL_HOSTS; i++) {
            if (host_load(a, &r[i].key) == a->self.key) {
                fill_entry(a, &r[i], clock);
                a->host_idx = i;
                return 0;
            }
        }
        for (uint32_t i = 0; i < POOL_HOSTS; i++) {
            uint64_t zero = 0;
            if (host_cas(a, &r[i].key, &zero, a->self.key)) {
                fill_entry(a, &r[i], clock);
                a->host_idx = i;
                return 0;
            }
        }
        recycle(a, clock);
    }
    return seterr(o, CXLP_EBUSY, "%s: host registry full: %u domains (host, boot, PID "
                  "namespace) are attached or not yet expired", a->m.path, POOL_HOSTS);
}

/* ---------------------------------------------------------------- clock */

uint64_t host_clock(struct attach *a)
{
    uint64_t t = host_load(a, &a->hdr->clock), now = now_ns();
    pthread_mutex_lock(&a->mu);
    if (t != a->clk.tick || a->clk.since_ns == 0) {
        a->clk.tick = t;
        a->clk.since_ns = now;
    } else if (now - a->clk.since_ns >= TICK_NS && a->whdr) {
        /* unchanged for a tick of our clock: move it (or see who did) */
        uint64_t exp = t;
        host_cas(a, &a->whdr->clock, &exp, t + 1);
        t = exp == t ? t + 1 : exp;
        a->clk.tick = t;
        a->clk.since_ns = now;
    }
    pthread_mutex_unlock(&a->mu);
    return t;
}

/* ------------------------------------------------------------- liveness */

int host_lease_live(struct attach *a, const struct pool_lease *l, uint64_t owner,
                    uint64_t clock)
{
    uint64_t pid = owner & PID_MASK, seq = owner >> 32;
    if (pid == 0)
        return 0;
    /* pairs with the release store of st_seq in attach.c try_claim */
    int fields = host_load(a, &l->st_seq) == seq;
    uint64_t host = fields ? host_load(a, &l->host) : 0;
    if (fields && host == a->self.key && a->self.pid_checks)
        return proc_alive((pid_t)pid, host_load(a, &l->starttime));
    if (fields && host != a->self.key && prev_boot(a, host_find(a, host), clock))
        return 0;
    return age(clock, host_load(a, &l->beat)) <= a->expiry_ticks;
}

int host_resv_live(struct attach *a, uint64_t pid, uint64_t starttime, uint64_t host,
                   uint64_t lease, uint64_t clock)
{
    if (host == a->self.key && a->self.pid_checks)
        return proc_alive((pid_t)pid, starttime);
    if (prev_boot(a, host_find(a, host), clock))
        return 0;
    /* another domain: alive while the lease it was made under is */
    uint64_t slot = lease >> 32, seq = lease & PID_MASK;
    if (slot >= a->L.lease_slots)
        return 0;
    const struct pool_lease *l = &a->leases[slot];
    uint64_t o = host_load(a, &l->owner);
    if (o != ((seq << 32) | (pid & PID_MASK)) || host_load(a, &l->host) != host)
        return 0;
    return host_lease_live(a, l, o, clock);
}

/* ----------------------------------------------------------- writer lock */

static uint64_t lock_timeout_ms(void)
{
    const char *e = getenv("CXLP_LOCK_TIMEOUT_MS");
    if (e && *e) {
        char *end;
        unsigned long long v = strtoull(e, &end, 10);
        if (*end == 0)
            return v;
    }
    return 30000;
}

static uint64_t wl_make(uint32_t idx, uint64_t pid, uint64_t beat)
{
    return ((uint64_t)(idx + 1) << 54) | (pid << 32) | (beat & PID_MASK);
}

static uint64_t wl_pid(uint64_t w)
{
    return (w >> 32) & WL_PID_MAX;
}

/* Ticks since the lock word's beat, on the 32 bits it keeps. */
static uint64_t wl_age(uint64_t w, uint64_t clock)
{
    uint32_t d = (uint32_t)clock - (uint32_t)w;
    return d < 0x80000000u ? d : 0;
}

static const struct pool_host *wl_host(const struct attach *a, uint64_t w)
{
    uint64_t i = (w >> 54) - 1;
    return i < POOL_HOSTS ? &reg(a, 0)[i] : NULL;
}

/* The holder of lock word w can be replaced now; *why says why. */
static int holder_gone(struct attach *a, uint64_t w, uint64_t clock, const char **why)
{
    const struct pool_host *e = wl_host(a, w);
    uint64_t key = e ? host_load(a, &e->key) : 0;
    if (key && key == a->self.key && a->self.pid_checks && !proc_alive((pid_t)wl_pid(w), 0)) {
        *why = "its process is gone";
        return 1;
    }
    if (key && prev_boot(a, e, clock)) {
        *why = "it ran in a previous boot of this host";
        return 1;
    }
    if (wl_age(w, clock) > a->expiry_ticks) {
        *why = "its heartbeat expired";
        return 1;
    }
    return 0;
}

/* "host NAME (host id X) pid P" for the holder of w. */
static void describe_holder(const struct attach *a, uint64_t w, char *buf, size_t cap)
{
    const struct pool_host *e = wl_host(a, w);
    char name[17] = "?";
    uint64_t hid = 0, key = 0;
    if (e) {
        key = host_load(a, &e->key);
        hid = host_load(a, &e->host_id);
        memcpy(name, e->name, 16);
        name[16] = 0;
        for (char *c = name; *c; c++)
            if (*c < 0x20 || *c > 0x7e)
                *c = '?';
    }
    if (key && key == a->self.key)
        snprintf(buf, cap, "pid %" PRIu64 " of this host", wl_pid(w));
    else
        snprintf(buf, cap, "host %s (host id %016" PRIx64 ") pid %" PRIu64, name, hid, wl_pid(w));
}

int host_lock(struct attach *a, struct wlock *l, struct obj *o)
{
    if (!a->whdr || a->host_idx >= POOL_HOSTS)
        return seterr(o, CXLP_EREADONLY, "%s: writer lock: handle cannot write the pool",
                      a->m.path);
    uint64_t pid = (uint64_t)getpid();
    if (pid > WL_PID_MAX)
        return seterr(o, CXLP_EUNSUPPORTED, "%s: writer lock: pid %" PRIu64 " exceeds 22 bits",
                      a->m.path, pid);
    uint64_t ms = lock_timeout_ms(), start = now_ns(), nap_us = 50, w, mine;
    for (;;) {
        uint64_t clock = host_clock(a);
        mine = wl_make(a->host_idx, pid, clock);
        w = host_load(a, &a->hdr->wlock);
        const char *why = NULL;
        if (w == 0 || holder_gone(a, w, clock, &why)) {
            if (host_cas(a, &a->whdr->wlock, &w, mine))
                break;
            continue;
        }
        if (now_ns() - start >= ms * 1000000ull) {
            char who[128];
            describe_holder(a, w, who, sizeof who);
            return seterr(o, CXLP_EBUSY,
                          "%s: writer lock held by %s, heartbeat %.1f s ago (taken over "
                          "after %.1f s without one); gave up after %" PRIu64 " ms",
                          a->m.path, who, wl_age(w, clock) * POOL_TICK_MS / 1000.0,
                          a->expiry_ticks * POOL_TICK_MS / 1000.0, ms);
        }
        struct timespec ts = {0, (long)nap_us * 1000};
        nanosleep(&ts, NULL);
        /* the lock is held for a catalog write (microseconds): naps stay
         * short while a wait is that short, so the stagers and fetchers of a
         * tiered pool, which take it for every copy, are not held back a
         * whole nap each (naps of up to 5 ms made copies late enough that
         * lookahead evicted shards it had staged and fetched them again);
         * a wait past 50 ms means a stuck or stopped holder: back off */
        nap_us = MIN(nap_us * 2, now_ns() - start < 50000000ull ? 200 : 5000);
    }
    pthread_mutex_lock(&a->mu);
    a->wlock_word = mine;
    pthread_mutex_unlock(&a->mu);
    /* a new epoch: a holder deposed before us can no longer publish */
    uint64_t g = host_load(a, &a->hdr->gen), ng;
    do {
        ng = (g & ~POOL_EPOCH_MASK) | ((g + 1) & POOL_EPOCH_MASK);
    } while (!host_cas(a, &a->whdr->gen, &g, ng));
    l->word = mine;
    l->gen_word = ng;
    return 0;
}

static int lost(struct attach *a, struct obj *o)
{
    char who[128] = "another writer";
    uint64_t w = host_load(a, &a->hdr->wlock);
    if (w)
        describe_holder(a, w, who, sizeof who);
    return seterr(o, CXLP_EBUSY,
                  "%s: writer lock lost: this writer was stopped longer than the pool's "
                  "expiry (%.1f s) and %s took over; nothing was published",
                  a->m.path, a->expiry_ticks * POOL_TICK_MS / 1000.0, who);
}

int host_lock_check(struct attach *a, const struct wlock *l, struct obj *o)
{
    uint64_t clock = host_clock(a);
    pthread_mutex_lock(&a->mu);
    uint64_t held = a->wlock_word;
    pthread_mutex_unlock(&a->mu);
    uint64_t w = host_load(a, &a->hdr->wlock);
    /* a beat half-way to expiry means we were stopped: do not start writing
     * a catalog slot that a new holder may be about to write */
    if (!held || (w >> 32) != (l->word >> 32) || wl_age(w, clock) > a->expiry_ticks / 2)
        return lost(a, o);
    return 0;
}

int host_publish_gen(struct attach *a, struct wlock *l, uint64_t gen, struct obj *o)
{
    uint64_t exp = l->gen_word, want = (gen << POOL_EPOCH_BITS) | (l->gen_word & POOL_EPOCH_MASK);
    /* the release half pairs with the acquire load of the gen word in
     * catalog.c cat_snapshot: the slot written before is visible to whoever
     * sees the new generation */
    if (!host_cas(a, &a->whdr->gen, &exp, want))
        return lost(a, o);
    l->gen_word = want;
    return 0;
}

void host_unlock(struct attach *a, struct wlock *l)
{
    if (!l->word)
        return;
    pthread_mutex_lock(&a->mu);
    a->wlock_word = 0;
    pthread_mutex_unlock(&a->mu);
    uint64_t w = host_load(a, &a->hdr->wlock);
    while ((w >> 32) == (l->word >> 32) && !host_cas(a, &a->whdr->wlock, &w, 0))
        ;
    l->word = 0;
}

/* ----------------------------------------------------------- heartbeats */

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t th;
    struct attach **list;
    size_t n, cap;
    int running, stop, started;
} hb = {.mu = PTHREAD_MUTEX_INITIALIZER};
static pthread_once_t hb_once = PTHREAD_ONCE_INIT;

static void hb_prepare(void)
{
    pthread_mutex_lock(&hb.mu);
}

static void hb_parent(void)
{
    pthread_mutex_unlock(&hb.mu);
}

static void hb_cond_init(void)
{
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&hb.cv, &ca);
    pthread_condattr_destroy(&ca);
}

/* The child has no heartbeat thread and holds none of the parent's leases:
 * it starts afresh with its own attaches. The condition variable is made
 * anew: it still counts the parent thread's wait, which would block the
 * child's first signal forever. */
static void hb_child(void)
{
    pthread_mutex_unlock(&hb.mu);
    hb_cond_init();
    hb.running = hb.stop = hb.started = 0;
    hb.n = 0;
}

static void hb_init(void)
{
    hb_cond_init();
    pthread_atfork(hb_prepare, hb_parent, hb_child);
}

static void beat(struct attach *a)
{
    uint64_t clock = host_clock(a);
    if (a->lease) {
        uint64_t mine = (a->lease_seq << 32) | (uint64_t)getpid();
        uint64_t o = host_load(a, &a->lease->owner);
        if (o != mine) {
            /* taken from us: we were stopped past the expiry (or someone
             * forced it); our pins protect nothing any more */
            if (!at_load_relaxed(&a->lease_lost)) {
                at_store_relaxed(&a->lease_lost, 1);
                at_fetch_add_acq_rel(&read_alarm, 1);
            }
        } else if (host_load(a, &a->lease->beat) != clock) {
            host_store(a, &a->lease->beat, clock);
        }
    }
    if (a->whdr && a->host_idx < POOL_HOSTS) {
        struct pool_host *e = &reg(a, 1)[a->host_idx];
        if (host_load(a, &e->key) != a->self.key)
            (void)host_register(a, NULL); /* recycled under us: register again */
        else if (host_load(a, &e->beat) != clock)
            host_store(a, &e->beat, clock);
    }
    pthread_mutex_lock(&a->mu);
    uint64_t w = a->wlock_word;
    uint64_t nw = (w & ~PID_MASK) | (clock & PID_MASK);
    if (w && nw != w)
        a->wlock_word = host_cas(a, &a->whdr->wlock, &w, nw) ? nw : 0;
    pthread_mutex_unlock(&a->mu);
}

static void *hb_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&hb.mu);
    hb.started = 1;
    pthread_cond_broadcast(&hb.cv);
    while (!hb.stop) {
        for (size_t i = 0; i < hb.n; i++)
            beat(hb.list[i]);
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        uint64_t ns = (uint64_t)ts.tv_nsec + TICK_NS / 2;
        ts.tv_sec += (time_t)(ns / 1000000000ull);
        ts.tv_nsec = (long)(ns % 1000000000ull);
        pthread_cond_timedwait(&hb.cv, &hb.mu, &ts);
    }
    pthread_mutex_unlock(&hb.mu);
    return NULL;
}

/* under hb.mu. Returns once the thread runs our code: a fork while a new
 * thread is still being set up (its runtime allocating, e.g. ASan's) could
 * leave the child an allocator lock held forever. */
static int hb_start(void)
{
    hb.stop = hb.started = 0;
    int rc = pthread_create(&hb.th, NULL, hb_main, NULL);
    if (rc)
        return -rc;
    pthread_setname_np(hb.th, "cxlp-heartbeat");
    hb.running = 1;
    while (!hb.started)
        pthread_cond_wait(&hb.cv, &hb.mu);
    return 0;
}

void host_watch(struct attach *a)
{
    pthread_once(&hb_once, hb_init);
    pthread_mutex_lock(&hb.mu);
    if (hb.n == hb.cap) {
        size_t nc = hb.cap ? 2 * hb.cap : 8;
        struct attach **l = realloc(hb.list, nc * sizeof *l);
        if (!l) {
            pthread_mutex_unlock(&hb.mu);
            return; /* unwatched: other hosts will expire its lease */
        }
        hb.list = l;
        hb.cap = nc;
    }
    hb.list[hb.n++] = a;
    a->watched = 1;
    if (!hb.running)
        (void)hb_start();
    beat(a);
    pthread_mutex_unlock(&hb.mu);
}

void host_unwatch(struct attach *a)
{
    if (!a->watched)
        return;
    pthread_mutex_lock(&hb.mu);
    for (size_t i = 0; i < hb.n; i++) {
        if (hb.list[i] == a) {
            hb.list[i] = hb.list[--hb.n];
            break;
        }
    }
    a->watched = 0;
    if (hb.n == 0 && hb.running) {
        hb.stop = 1;
        pthread_cond_signal(&hb.cv);
        pthread_t th = hb.th;
        pthread_mutex_unlock(&hb.mu);
        pthread_join(th, NULL);
        pthread_mutex_lock(&hb.mu);
        hb.running = 0;
        if (hb.n > 0) /* watched again while we joined */
            (void)hb_start();
        else {
            free(hb.list);
            hb.list = NULL;
            hb.cap = 0;
        }
    }
    pthread_mutex_unlock(&hb.mu);
}

/* --------------------------------------------------------------- expire */

static int matches(const struct attach *a, const struct pool_host *e, uint64_t key,
                   const char *who, uint64_t who_id)
{
    if (who_id && (who_id == key || (e && who_id == host_load(a, &e->host_id))))
        return 1;
    if (e) {
        char name[17];
        memcpy(name, e->name, 16);
        name[16] = 0;
        return name[0] && strcmp(name, who) == 0;
    }
    return 0;
}

int host_expire(struct attach *a, const char *who, uint32_t *n, struct obj *o)
{
    if (!a->whdr)
        return seterr(o, CXLP_EREADONLY, "%s: expire: handle cannot write the pool", a->m.path);
    uint64_t who_id = parse_hex_id(who);
    uint32_t count = 0;
    int any = 0;
    for (uint64_t s = 0; s < a->L.lease_slots; s++) {
        struct pool_lease *l = &a->leases[s];
        uint64_t ow = host_load(a, &l->owner);
        if (!(ow & PID_MASK) || l == a->lease || host_load(a, &l->st_seq) != ow >> 32)
            continue;
        uint64_t key = host_load(a, &l->host);
        if (!matches(a, host_find(a, key), key, who, who_id))
            continue;
        any = 1;
        if (host_cas(a, &l->owner, &ow, ow & ~PID_MASK))
            count++;
    }
    uint64_t w = host_load(a, &a->hdr->wlock);
    const struct pool_host *e = w ? wl_host(a, w) : NULL;
    if (e && matches(a, e, host_load(a, &e->key), who, who_id)) {
        any = 1;
        host_cas(a, &a->whdr->wlock, &w, 0);
    }
    for (uint32_t i = 0; i < POOL_HOSTS && !any; i++) {
        const struct pool_host *r = &reg(a, 0)[i];
        uint64_t key = host_load(a, &r->key);
        any = key && matches(a, r, key, who, who_id);
    }
    if (!any)
        return seterr(o, CXLP_ENOTFOUND, "%s: no host matches '%s' (cxlpool leases lists "
                      "them by name, host id and domain)", a->m.path, who);
    *n = count;
    return 0;
}
