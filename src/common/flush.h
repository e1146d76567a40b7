/*
 * flush.h - CPU cache maintenance for pools whose memory is not coherent
 * across the hosts that map it (docs/hosts.md states the memory model).
 *
 * A host's stores sit in its own caches until written back; another host's
 * loads may hit stale lines of its own caches. On a pool declared
 * non-coherent at create, the library therefore
 *   writer: writes data, cache_writeback()s it, cache_fence()s, then
 *           stores the generation (and writes that line back too);
 *   reader: cache_invalidate()s the generation word, the catalog slot and
 *           every shard header, index and record before loading them.
 * Coherent pools (the default) skip all of it: callers test the pool's
 * flag first, so the fast path pays one predictable branch.
 *
 * Instructions (x86-64; chosen once from CPUID):
 *   write back (line may stay cached): clwb, else clflushopt, else clflush
 *   invalidate (line leaves the cache): clflushopt, else clflush
 * clwb and clflushopt are weakly ordered: cache_fence() (sfence) orders
 * them before later stores (the generation store); clflush is ordered by
 * itself but the fence costs nothing next to it. Other architectures: the
 * functions are no-ops and cache_available() is 0, so a non-coherent pool
 * is refused there (pool.c) rather than run unsafely.
 *
 * Counters (relaxed atomics, per process) and an optional hook let tests
 * prove the non-coherent path runs, not just compiles: every line written
 * back or invalidated is counted, and the hook sees each range and fence in
 * program order.
 */
#ifndef CXLP_FLUSH_H
#define CXLP_FLUSH_H

#include <stddef.h>
#include <stdint.h>

#define CACHE_LINE 64u

enum cache_op { CACHE_WRITEBACK = 1, CACHE_INVALIDATE = 2, CACHE_FENCE = 3 };

struct cache_stats {
    uint64_t wb_lines;        /* lines written back */
    uint64_t inval_lines;     /* lines invalidated */
    uint64_t fences;
};

/* 1 when this CPU has the instructions (x86-64: clflush at least). */
int cache_available(void);
/* Names of the instructions in use, e.g. "clwb+clflushopt", for messages. */
const char *cache_insns(void);
/* Writes back every line of [p, p+len) to memory. */
void cache_writeback(const void *p, size_t len);
/* Drops every line of [p, p+len) from this CPU's caches (after writing
 * back a dirty one), so the next load comes from memory. */
void cache_invalidate(const void *p, size_t len);
/* Orders the write-backs before it against the stores after it. */
void cache_fence(void);

/* The counters since the process started (tests read deltas). */
void cache_stats_get(struct cache_stats *out);
/* Test hook: called with every range and fence, in order; NULL removes. */
void cache_hook_set(void (*hook)(void *ctx, enum cache_op op, const void *p, size_t len),
                    void *ctx);

#endif
