/*
 * common.h - what every layer shares: the handle header that carries a
 * per-handle error message, error helpers, assertions, small utilities.
 *
 * Every opaque public handle (cxlp_pool, cxlp_store, cxlp_writer, cxlp_topo)
 * starts with a struct obj, so cxlp_errmsg(handle) can read its message
 * without knowing its type. The magic guards against a stray pointer.
 */
#ifndef CXLP_COMMON_H
#define CXLP_COMMON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cxlpool.h"

#define OBJ_MAGIC 0x43584c504f424aULL /* "CXLPOBJ" */
#define ERRMSG_MAX 512
#define CACHELINE 64

struct obj {
    uint64_t magic;
    int panic;               /* nonzero: CXLP_EPANIC on every later call */
    char err[ERRMSG_MAX];
};

void obj_init(struct obj *o);

/* Records a message for rc on o (may be NULL) and in the thread's last-error
 * buffer. Returns rc so callers can write `return seterr(o, rc, ...)`. */
int seterr(struct obj *o, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Same as seterr, and poisons o: later calls return CXLP_EPANIC. */
int panic_obj(struct obj *o, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Formats into a caller's buffer err[cap] (nothing when err is NULL or cap
 * 0) and returns rc: for code that reports into a buffer rather than a
 * handle (media backends, the file parsers). */
int errbuf_set(char *err, size_t cap, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Copies another handle's message (e.g. pool -> writer) keeping rc. */
int copyerr(struct obj *dst, const struct obj *src, int rc);

/* Assertions. CXLP_ASSERT is for our own logic (compiled out when NDEBUG);
 * checks on untrusted bytes (pool contents, files) are plain ifs that stay in
 * release builds and return CXLP_ECORRUPT / CXLP_EBADINPUT. */
#ifdef NDEBUG
#define CXLP_ASSERT(x) ((void)0)
#else
#include <assert.h>
#define CXLP_ASSERT(x) assert(x)
#endif

#define ALIGN_UP(x, a) (((x) + ((a) - 1)) & ~((uint64_t)(a) - 1))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

/* Overflow-checked arithmetic: nonzero on overflow. */
static inline int add_overflow_u64(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_add_overflow(a, b, r);
}
static inline int mul_overflow_u64(uint64_t a, uint64_t b, uint64_t *r)
{
    return __builtin_mul_overflow(a, b, r);
}
/* 1 when [off, off+len) lies inside [0, size) without overflow. */
static inline int range_ok(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

/* Hash of the ABI facts a shared layout depends on, plus the caller's own
 * (struct sizes, offsets). Two processes agree on it iff they can share. */
uint64_t layout_signature(const uint64_t *facts, size_t n);

/* Nonzero while the read paths must look closer, raised by each event that
 * needs it: a pool object shrank under its mapping (media/guard.c), a lease
 * was taken from this process (pool/host.c), and, for as long as it is open,
 * each dataset of a non-coherent pool (store/reader.c: its reads invalidate
 * first). Read paths test it with one relaxed load; a process that meets
 * none of these never leaves the fast path. */
extern uint64_t read_alarm __attribute__((visibility("hidden")));
static inline uint64_t read_alarm_now(void)
{
    return __atomic_load_n(&read_alarm, __ATOMIC_RELAXED);
}

/* Process identity robust to pid reuse: start time in clock ticks since boot
 * (field 22 of /proc/PID/stat). 0 when the process does not exist. */
uint64_t proc_starttime(pid_t pid);
/* 1 when (pid, starttime) still names a live process. */
int proc_alive(pid_t pid, uint64_t starttime);
/* /proc/sys/kernel/random/boot_id as 16 raw bytes; zeros if unreadable. */
void boot_id(uint8_t out[16]);

/* Fault injection through the production code path: when the environment
 * variable CXLP_FAULT equals name (e.g. "publish-before-flip",
 * "publish-after-flip", "reserve-locked", "writer-mid-shard"), the process
 * raises SIGKILL right there; with ":stop" appended (CXLP_FAULT=
 * "publish-before-flip:stop") it raises SIGSTOP instead, and goes on when
 * continued. Crash tests use it for the instants that random kills rarely
 * hit. Costs one getenv per call: only on writer paths. */
void fault_point(const char *name);
/* The same switch for faults that are returned rather than crashed into:
 * 1 when CXLP_FAULT equals name (e.g. "prepare-enospc"), else 0. */
int fault_hit(const char *name);

/* What a non-regular file is, for messages: "a FIFO", "a socket", "a
 * directory", "a character device", "a block device", "a symbolic link";
 * "a regular file" or "an unknown file type" otherwise. */
const char *file_kind(mode_t mode);

/* A catalog listing as cxlp_pool_list gives it (n: the total, which may
 * exceed cap). */
typedef int (*list_fn)(void *h, struct cxlp_dataset_info *infos, size_t cap, size_t *n);
/* Every entry fn lists, in a fresh array (*out, for free(); NULL when
 * none): listed again when the catalog grew between two calls, so that a
 * dataset added meanwhile is never read past the array's end. */
int list_all(list_fn fn, void *h, struct cxlp_dataset_info **out, size_t *n);

/* Bounded string copy that always terminates; returns strlen(src). */
size_t strlcpy0(char *dst, const char *src, size_t cap);

#endif
