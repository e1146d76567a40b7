/*
 * errors.c - return codes to text, and the per-handle / per-thread messages.
 *
 * Codes: 0 success; -errno for OS failures; CXLP_E* (a reserved range below
 * -CXLP_ERR_BASE that no errno reaches) for library failures.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

static _Thread_local char last_err[ERRMSG_MAX];

const char *cxlp_version(void)
{
    return "0.1.0";
}

const char *cxlp_strerror(int rc)
{
    switch (rc) {
    case 0: return "success";
    case CXLP_EPANIC: return "handle poisoned by an earlier fatal inconsistency";
    case CXLP_ECORRUPT: return "corrupt data (checksum or structure mismatch)";
    case CXLP_EFORMAT: return "not a cxlpool object (bad magic or version)";
    case CXLP_ELAYOUT: return "layout signature mismatch (built for another ABI)";
    case CXLP_ENOTFOUND: return "not found";
    case CXLP_EEXIST: return "already exists";
    case CXLP_EFULL: return "pool full";
    case CXLP_EBUSY: return "busy (lease table full or lock held)";
    case CXLP_EUNSUPPORTED: return "unsupported input";
    case CXLP_EBADINPUT: return "malformed input file";
    case CXLP_EOWNER: return "pool owned by another user";
    case CXLP_ERANGE: return "out of range";
    case CXLP_ENODEV: return "no such device";
    case CXLP_ECATFULL: return "catalog full";
    case CXLP_EARG: return "invalid argument";
    case CXLP_EREADONLY: return "handle is read-only";
    default: break;
    }
    if (rc < 0 && rc > -CXLP_ERR_BASE)
        return strerror(-rc); /* glibc strerror is thread-safe for known codes */
    return "unknown error";
}

const char *cxlp_errmsg(const void *handle)
{
    const struct obj *o = handle;
    if (!o)
        return last_err;
    if (o->magic != OBJ_MAGIC)
        return "cxlp_errmsg: not a cxlpool handle";
    return o->err;
}

void obj_init(struct obj *o)
{
    o->magic = OBJ_MAGIC;
    o->panic = 0;
    o->err[0] = '\0';
}

/* Threads that share a handle (a store's stagers share its writable pool
 * handle) may fail on it at once: their messages are copied in one at a
 * time. Code that may share a handle reads its own thread's message,
 * cxlp_errmsg(NULL), which no other thread writes. */
static pthread_mutex_t obj_err_mu = PTHREAD_MUTEX_INITIALIZER;

static int vseterr(struct obj *o, int rc, const char *fmt, va_list ap)
{
    char msg[ERRMSG_MAX];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg) + 1; /* not the stack bytes after it */
    if (o) {
        pthread_mutex_lock(&obj_err_mu);
        memcpy(o->err, msg, n);
        pthread_mutex_unlock(&obj_err_mu);
    }
    memcpy(last_err, msg, n);
    return rc;
}

int seterr(struct obj *o, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vseterr(o, rc, fmt, ap);
    va_end(ap);
    return rc;
}

int panic_obj(struct obj *o, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vseterr(o, rc, fmt, ap);
    va_end(ap);
    if (o)
        o->panic = 1;
    return rc;
}

int errbuf_set(char *err, size_t cap, int rc, const char *fmt, ...)
{
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

int copyerr(struct obj *dst, const struct obj *src, int rc)
{
    if (dst && src && dst != src)
        memcpy(dst->err, src->err, sizeof dst->err);
    return rc;
}
