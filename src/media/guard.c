/*
 * guard.c - a pool object shrunk under its mappings must not kill the
 * process (issue 12 item 6).
 *
 * Any process that may write a pool's backing object can truncate it; the
 * pages past the new end then raise SIGBUS at the next touch, in whatever
 * code touches them: our gather threads, or torch reading a zero-copy
 * tensor. Sealing (F_SEAL_SHRINK) would forbid the truncate, but only a
 * memfd can be sealed, and a memfd has no name that other processes could
 * attach by. So every pool mapping is registered here, and a SIGBUS
 * handler that finds the faulting address inside one maps private zero
 * pages over the lost range (MAP_FIXED) and lets the access retry: the
 * reader reads zeros instead of dying (the private copy-on-write mapping
 * that samples are read through is registered too, and so is the window
 * media_huge_bytes maps for its census). The mapping is marked, read_alarm
 * moves (common.h), and the library checks that counter on its read paths
 * (one load) and fails every later call on that pool with CXLP_ECORRUPT naming
 * the object and its new size; the gather engine fails the batch that met
 * the fault. A SIGBUS anywhere else goes to the handler installed before
 * ours, or gets the default action.
 *
 * The lost range is [page_up(new size), end) when fstat says the object
 * shrank below the fault, else the faulting page alone (a page the media
 * could not supply, e.g. tmpfs out of memory).
 *
 * Async-signal safety: the handler reads a fixed table without locks
 * (entries are published by a release store of their base), and calls only
 * fstat and mmap (system calls).
 *
 * Limits: a handler installed after ours for SIGBUS (e.g. Python's
 * faulthandler enabled after the first attach) sees the fault first.
 * Rejected: an fstat before every read (a system call per record).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/atomic.h"
#include "common/common.h"
#include "media/media.h"

#define GUARD_MAX 1024

struct guarded {
    uintptr_t base;           /* 0: free; published last (release) */
    uint64_t size;
    uint64_t off;             /* object offset of base */
    int fd;
    int prot;
    uint64_t lost_from;       /* first lost offset; UINT64_MAX while intact */
    uint64_t size_now;        /* object size seen at the fault */
};

static struct guarded table[GUARD_MAX];
static pthread_mutex_t table_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct sigaction previous;
static uint64_t guard_faults;     /* faults absorbed, in this process */

static void chain(int sig, siginfo_t *si, void *uc)
{
    if (previous.sa_flags & SA_SIGINFO) {
        previous.sa_sigaction(sig, si, uc);
        return;
    }
    if (previous.sa_handler == SIG_IGN || previous.sa_handler == SIG_DFL) {
        /* a fault repeats when we return: now with the default action */
        signal(sig, SIG_DFL);
        if (si->si_code <= 0)
            raise(sig);
        return;
    }
    previous.sa_handler(sig);
}

static void on_sigbus(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    uintptr_t a = (uintptr_t)si->si_addr;
    if (si->si_code > 0) { /* raised by a fault, not by kill() */
        for (int i = 0; i < GUARD_MAX; i++) {
            /* pairs with the release store of base in media_guard_add */
            uintptr_t b = at_load_acquire(&table[i].base);
            struct guarded *g = &table[i];
            if (!b || a < b || a - b >= g->size)
                continue;
            uint64_t pg = 4096, at = (a - b) & ~(pg - 1), from = at;
            struct stat st;
            uint64_t now = g->size;
            if (fstat(g->fd, &st) == 0) {
                now = (uint64_t)st.st_size;
                uint64_t cut = (now + pg - 1) & ~(pg - 1);
                if (cut <= g->off + at)
                    from = cut > g->off ? cut - g->off : 0;
            }
            uint64_t len = from == at && now > g->off + at ? pg : g->size - from;
            void *r = mmap((void *)(b + from), (size_t)len, g->prot,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
            if (r == MAP_FAILED)
                break;
            if (from < at_load_relaxed(&g->lost_from))
                at_store_relaxed(&g->lost_from, from);
            at_store_relaxed(&g->size_now, now);
            at_fetch_add_acq_rel(&guard_faults, 1);
            at_fetch_add_acq_rel(&read_alarm, 1);
            errno = saved;
            return;
        }
    }
    errno = saved;
    chain(sig, si, uc);
}

/* A fork while another thread adds or removes a mapping must not leave the
 * child the table's mutex held. */
static void fork_prepare(void)
{
    pthread_mutex_lock(&table_mu);
}

static void fork_done(void)
{
    pthread_mutex_unlock(&table_mu);
}

static void install(void)
{
    pthread_atfork(fork_prepare, fork_done, fork_done);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, &previous);
}

static void add(uintptr_t base, uint64_t size, uint64_t off, int fd, int prot)
{
    pthread_once(&once, install);
    pthread_mutex_lock(&table_mu);
    for (int i = 0; i < GUARD_MAX; i++) {
        struct guarded *g = &table[i];
        if (g->base)
            continue;
        g->size = size;
        g->off = off;
        g->fd = fd;
        g->prot = prot;
        g->lost_from = UINT64_MAX;
        g->size_now = size;
        /* pairs with the acquire load in on_sigbus */
        at_store_release(&g->base, base);
        break;
    }
    pthread_mutex_unlock(&table_mu);
}

void media_guard_add(struct media *m)
{
    if (m->base && m->fd >= 0)
        add((uintptr_t)m->base, m->size, 0, m->fd, PROT_READ | (m->writable ? PROT_WRITE : 0));
}

void media_guard_add_private(struct media *m, void *base)
{
    if (base && m->fd >= 0)
        add((uintptr_t)base, m->size, 0, m->fd, PROT_READ | PROT_WRITE);
}

void media_guard_add_window(const struct media *m, void *base, uint64_t off, uint64_t len)
{
    add((uintptr_t)base, len, off, m->fd, PROT_READ);
}

static struct guarded *find(uintptr_t base)
{
    for (int i = 0; i < GUARD_MAX; i++)
        if (base && at_load_relaxed(&table[i].base) == base)
            return &table[i];
    return NULL;
}

void media_guard_del_window(void *base)
{
    pthread_mutex_lock(&table_mu);
    struct guarded *g = find((uintptr_t)base);
    if (g)
        at_store_release(&g->base, 0);
    pthread_mutex_unlock(&table_mu);
}

void media_guard_del(struct media *m)
{
    pthread_mutex_lock(&table_mu);
    struct guarded *g = find((uintptr_t)m->base);
    if (g)
        at_store_release(&g->base, 0);
    if ((g = find((uintptr_t)m->priv)))
        at_store_release(&g->base, 0);
    pthread_mutex_unlock(&table_mu);
}

int media_guard_lost(const struct media *m, char *err, size_t errlen)
{
    if (!m->base || at_load_relaxed(&guard_faults) == 0)
        return 0;
    pthread_mutex_lock(&table_mu);
    uint64_t from = UINT64_MAX, now = m->size;
    const struct guarded *gs[2] = {find((uintptr_t)m->base), find((uintptr_t)m->priv)};
    for (int i = 0; i < 2; i++) {
        if (gs[i] && at_load_relaxed(&gs[i]->lost_from) < from) {
            from = at_load_relaxed(&gs[i]->lost_from);
            now = at_load_relaxed(&gs[i]->size_now);
        }
    }
    pthread_mutex_unlock(&table_mu);
    if (from == UINT64_MAX)
        return 0;
    if (now < m->size)
        return errbuf_set(err, errlen, CXLP_ECORRUPT,
                          "%s: pool object shrank to %llu bytes while mapped (%llu expected; "
                          "truncated by another process?): reads past it returned zeros",
                          m->path, (unsigned long long)now, (unsigned long long)m->size);
    return errbuf_set(err, errlen, CXLP_ECORRUPT,
                      "%s: the page at offset %llu could not be read (SIGBUS: the media "
                      "could not supply it); it reads as zeros", m->path,
                      (unsigned long long)from);
}
