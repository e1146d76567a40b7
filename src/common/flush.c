/*
 * flush.c - cache write-back and invalidation (see flush.h).
 *
 * The instructions are issued with inline assembly rather than the
 * <immintrin.h> intrinsics: those need the translation unit built for a
 * CPU that has them (-mclwb), while we pick at run time from CPUID
 * (leaf 7: EBX bit 23 clflushopt, bit 24 clwb; leaf 1: EDX bit 19 clflush).
 * No library offers this choice (PMDK's libpmem does, for persistent
 * memory, with a dependency we would not otherwise need).
 */
#include <pthread.h>
#include <stdint.h>

#include "common/atomic.h"
#include "common/flush.h"

#if defined(__x86_64__)
#include <cpuid.h>
#endif

enum { INSN_NONE = 0, INSN_CLFLUSH, INSN_CLFLUSHOPT, INSN_CLWB };

static int wb_insn, inval_insn;
static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct cache_stats stats;
static void (*hook_fn)(void *, enum cache_op, const void *, size_t);
static void *hook_ctx;

static void detect(void)
{
#if defined(__x86_64__)
    unsigned a, b, c, d;
    int has_clflush = __get_cpuid(1, &a, &b, &c, &d) && (d & (1u << 19));
    int has_opt = 0, has_clwb = 0;
    if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        has_opt = (b >> 23) & 1;
        has_clwb = (b >> 24) & 1;
    }
    inval_insn = has_opt ? INSN_CLFLUSHOPT : has_clflush ? INSN_CLFLUSH : INSN_NONE;
    wb_insn = has_clwb ? INSN_CLWB : inval_insn;
#endif
}

int cache_available(void)
{
    pthread_once(&once, detect);
    return wb_insn != INSN_NONE;
}

const char *cache_insns(void)
{
    pthread_once(&once, detect);
    static const char *names[] = {"none", "clflush", "clflushopt", "clwb"};
    static char both[32];
    if (wb_insn == inval_insn)
        return names[wb_insn];
    /* written once per process, from constant names */
    if (!both[0]) {
        const char *x = names[wb_insn], *y = names[inval_insn];
        int k = 0;
        while (*x && k < 15)
            both[k++] = *x++;
        both[k++] = '+';
        while (*y && k < 30)
            both[k++] = *y++;
        both[k] = 0;
    }
    return both;
}

#if defined(__x86_64__)
static inline void line_op(int insn, const char *p)
{
    switch (insn) {
    case INSN_CLWB:
        __asm__ volatile("clwb %0" : "+m"(*(volatile char *)p));
        break;
    case INSN_CLFLUSHOPT:
        __asm__ volatile("clflushopt %0" : "+m"(*(volatile char *)p));
        break;
    case INSN_CLFLUSH:
        __asm__ volatile("clflush %0" : "+m"(*(volatile char *)p));
        break;
    default:
        break;
    }
}
#endif

static uint64_t range_op(int insn, const void *p, size_t len)
{
    if (len == 0)
        return 0;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)(CACHE_LINE - 1);
    uintptr_t e = (uintptr_t)p + len;
    uint64_t n = 0;
    for (; a < e; a += CACHE_LINE, n++) {
#if defined(__x86_64__)
        line_op(insn, (const char *)a);
#else
        (void)insn;
#endif
    }
    return n;
}

void cache_writeback(const void *p, size_t len)
{
    pthread_once(&once, detect);
    at_fetch_add_relaxed(&stats.wb_lines, range_op(wb_insn, p, len));
    if (hook_fn)
        hook_fn(hook_ctx, CACHE_WRITEBACK, p, len);
}

void cache_invalidate(const void *p, size_t len)
{
    pthread_once(&once, detect);
    at_fetch_add_relaxed(&stats.inval_lines, range_op(inval_insn, p, len));
    if (hook_fn)
        hook_fn(hook_ctx, CACHE_INVALIDATE, p, len);
}

void cache_fence(void)
{
#if defined(__x86_64__)
    __asm__ volatile("sfence" ::: "memory");
#else
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
#endif
    at_fetch_add_relaxed(&stats.fences, 1);
    if (hook_fn)
        hook_fn(hook_ctx, CACHE_FENCE, NULL, 0);
}

void cache_stats_get(struct cache_stats *out)
{
    out->wb_lines = at_load_relaxed(&stats.wb_lines);
    out->inval_lines = at_load_relaxed(&stats.inval_lines);
    out->fences = at_load_relaxed(&stats.fences);
}

void cache_hook_set(void (*hook)(void *ctx, enum cache_op op, const void *p, size_t len),
                    void *ctx)
{
    hook_ctx = ctx;
    hook_fn = hook;
}
