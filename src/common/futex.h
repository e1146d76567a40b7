/*
 * futex.h - sleeping on a 32-bit word without a mutex (Linux futex(2),
 * process-private), and the parking spot built on it.
 *
 * A thread parks until some condition, kept elsewhere in atomics, may have
 * become true, without a lock around the condition:
 *   waiter:   key = park_prepare(p);    (reads the count, says "parked")
 *             if (condition) park_cancel(p); else park_wait(p, key, 0);
 *             then re-checks the condition (a wake may be early)
 *   notifier: make the condition true (a seq_cst store or RMW), then
 *             unpark(p)
 * Why no wake-up is lost: the waiter's store of parked and the notifier's
 * load of it are seq_cst, as are the condition's store and the waiter's
 * re-check. Either the notifier sees the thread parked (then it takes it
 * out, bumps seq, and the waiter's futex wait on the old key returns at
 * once or is woken), or the waiter's re-check comes after the condition
 * was made true and sees it. A notifier that finds nobody parked costs one
 * load, and of several notifiers only the one whose CAS takes the thread
 * out makes the system call: a thread is woken once per park, not once per
 * notification (an event count with a waiter counter woke the consumer
 * about five times per sleep when batches came fast). A waiter may bound
 * its sleep (park_wait's ns): one that wakes on its own timer costs the
 * notifiers nothing (the loader's consumer, loader.c).
 *
 * Rejected: pthread condition variables, which need the mutex around every
 * condition change, so the consumer and the gather threads would take a
 * lock per batch; semaphores, which count wake-ups one by one where a wait
 * here is for "anything changed, look again".
 */
#ifndef CXLP_FUTEX_H
#define CXLP_FUTEX_H

#include <errno.h>
#include <linux/futex.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* Sleeps while *addr == val, at most ns nanoseconds (0: no limit); 1 when
 * the time ran out. Returns at once when *addr != val; EINTR and spurious
 * wakes are the caller's re-check. */
static inline int futex_wait_for(uint32_t *addr, uint32_t val, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    return syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, val, ns ? &ts : NULL, NULL, 0) < 0 &&
           errno == ETIMEDOUT;
}

static inline void futex_wake(uint32_t *addr, int n)
{
    (void)syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
}

/* One thread's parking spot. */
struct park {
    uint32_t seq;
    uint32_t parked;
};

static inline uint32_t park_prepare(struct park *p)
{
    uint32_t key = __atomic_load_n(&p->seq, __ATOMIC_SEQ_CST);
    __atomic_store_n(&p->parked, 1, __ATOMIC_SEQ_CST);
    return key;
}

static inline void park_cancel(struct park *p)
{
    __atomic_store_n(&p->parked, 0, __ATOMIC_SEQ_CST);
}

/* At most ns nanoseconds (0: until woken); 1 when the time ran out (the
 * caller re-checks its condition either way). */
static inline int park_wait(struct park *p, uint32_t key, uint64_t ns)
{
    int out = futex_wait_for(&p->seq, key, ns);
    __atomic_store_n(&p->parked, 0, __ATOMIC_SEQ_CST);
    return out;
}

static inline int park_is_parked(struct park *p)
{
    return __atomic_load_n(&p->parked, __ATOMIC_SEQ_CST) != 0;
}

/* Wakes the thread if it is parked. 1 when this call woke it. */
static inline int unpark(struct park *p)
{
    uint32_t one = 1;
    if (!__atomic_load_n(&p->parked, __ATOMIC_SEQ_CST) ||
        !__atomic_compare_exchange_n(&p->parked, &one, 0, 0, __ATOMIC_SEQ_CST,
                                     __ATOMIC_SEQ_CST))
        return 0;
    __atomic_fetch_add(&p->seq, 1, __ATOMIC_SEQ_CST);
    futex_wake(&p->seq, 1);
    return 1;
}

/* A pause between spins: lets the sibling hyperthread run, saves power. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
