/*
 * atomic.h - atomics on plain integer fields of shared memory, named by
 * memory order. Shared layouts keep plain uint64_t fields (their size and
 * alignment are part of the layout signature); these wrappers are the only
 * way code touches them concurrently.
 *
 * Rule: every acquire load says in a comment which release store it pairs
 * with.
 */
#ifndef CXLP_ATOMIC_H
#define CXLP_ATOMIC_H

#include <stdint.h>

#define at_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define at_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define at_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define at_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define at_fetch_add_relaxed(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define at_fetch_add_acq_rel(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)
#define at_fetch_sub_acq_rel(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_ACQ_REL)
/* Strong CAS; on failure *expected receives the current value. */
#define at_cas_acq_rel(p, expected, desired)                                   \
    __atomic_compare_exchange_n((p), (expected), (desired), 0,                 \
                                __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
#define at_fence_seq_cst() __atomic_thread_fence(__ATOMIC_SEQ_CST)

#endif
