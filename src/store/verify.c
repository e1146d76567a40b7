/*
 * verify.c - cxlp_pool_verify: the pool's structure (pool_check), then every
 * dataset of the current catalog opened and its checksums recomputed.
 *
 * A dataset of an earlier shard format (larger blocks, or none, for partial
 * reads) is named as such with the fix, `cxlpool rewrite`.
 *
 * It goes on after a failure so the report lists every bad item, and returns
 * the first failure with its message on the pool handle. A dataset removed
 * between the listing and its open is reported and skipped: the listing is
 * a snapshot, not a lock.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool/pool.h"

static void line(void (*report)(void *, const char *), void *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void line(void (*report)(void *, const char *), void *ctx, const char *fmt, ...)
{
    if (!report)
        return;
    char buf[ERRMSG_MAX + 128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    report(ctx, buf);
}

int cxlp_pool_verify(cxlp_pool *p, void (*report)(void *ctx, const char *line), void *ctx)
{
    if (!p)
        return seterr(NULL, CXLP_EARG, "pool_verify: pool is NULL");
    int rc = pool_check(p, report, ctx);
    if (rc)
        return rc;

    struct cxlp_dataset_info *infos = NULL;
    size_t n = 0;
    if ((rc = pool_list_all(p, 0, &infos, &n)))
        return rc == -ENOMEM ? seterr(pool_obj(p), rc, "pool_verify: out of memory") : rc;

    int first = 0;
    char msg[ERRMSG_MAX];
    for (size_t i = 0; i < n; i++) {
        const char *name = infos[i].name;
        cxlp_store *s = NULL;
        rc = cxlp_store_open(p, name, &s);
        if (rc == CXLP_ENOTFOUND) {
            line(report, ctx, "dataset %s: removed while verifying, skipped", name);
            continue;
        }
        if (!rc) {
            rc = cxlp_store_verify(s);
            if (rc)
                strlcpy0(msg, cxlp_errmsg(s), sizeof msg);
        } else {
            strlcpy0(msg, cxlp_errmsg(p), sizeof msg);
        }
        if (rc) {
            line(report, ctx, "dataset %s: FAILED: %s", name, msg);
            if (!first) {
                first = rc;
                seterr(pool_obj(p), rc, "%s", msg);
            }
        } else {
            struct cxlp_dataset_info in;
            cxlp_store_info(s, &in);
            /* a dataset of an earlier shard format: what it costs, the fix */
            uint32_t format = 0;
            uint64_t block = 0;
            char old[128] = "", what[48] = "no block sums";
            if (cxlp_store_format(s, &format, &block, NULL) == 0 && format && format < 4) {
                if (block)
                    snprintf(what, sizeof what, "blocks of %" PRIu64 " KiB", block >> 10);
                snprintf(old, sizeof old, "; shard format %u, %s: `cxlpool rewrite` for 4 KiB "
                         "blocks", format, what);
            }
            line(report, ctx, "dataset %s: ok: %" PRIu64 " records, %" PRIu64 " bytes in %u shards, checksums match%s",
                 name, in.n_records, in.data_bytes, in.n_shards, old);
        }
        cxlp_store_close(s);
    }
    free(infos);
    if (first)
        seterr(NULL, first, "%s", cxlp_errmsg(p));
    return first;
}
