/*
 * api.c - the tier layer's small public functions: policy names, a
 * dataset's default policy, and the staging engines at work on a pool
 * (cxlpool top's loaders, with why they miss).
 */
#include <stdio.h>
#include <string.h>

#include "pool/pool.h"
#include "store/store.h"
#include "tier/registry.h"

static const char *const names[] = {"default", "lookahead", "lru", "streaming", "hot_first",
                                     "full_prefetch"};
#define N_NAMES (sizeof names / sizeof names[0])

const char *cxlp_policy_name(int policy)
{
    return policy >= 0 && (size_t)policy < N_NAMES ? names[policy] : "?";
}

int cxlp_policy_parse(const char *name)
{
    for (size_t i = 0; name && i < N_NAMES; i++)
        if (strcmp(name, names[i]) == 0)
            return (int)i;
    return -1;
}

int cxlp_pool_set_policy(cxlp_pool *p, const char *name, int policy)
{
    if (!p || !name)
        return seterr(NULL, CXLP_EARG, "cxlp_pool_set_policy: %s is NULL", p ? "name" : "pool");
    if (policy < 0 || (size_t)policy >= N_NAMES)
        return seterr(pool_obj(p), CXLP_EARG, "cxlp_pool_set_policy: %d is not a policy (0..%zu)",
                      policy, N_NAMES - 1);
    return pool_set_policy(p, name, (uint32_t)policy);
}

int cxlp_store_policy(const cxlp_store *s)
{
    return s ? (int)s->ds.policy : 0;
}

static void fmt_mib(uint64_t b, char *out, size_t cap)
{
    snprintf(out, cap, "%.1f MiB", (double)b / 1048576.0);
}

/* The main cause of an engine's misses, in the order a user would fix
 * them: nothing fits, the tier is full, kept copies hold the budget, the
 * policy stages only on a miss, else the home cannot keep up. */
static void why_of(const struct cxlp_stager_info *x, char *out, size_t cap)
{
    char a[32], b[32];
    if (!x->misses) {
        out[0] = 0;
        return;
    }
    fmt_mib(x->unit_bytes, a, sizeof a);
    fmt_mib(x->budget, b, sizeof b);
    if (x->unit_bytes > x->budget)
        snprintf(out, cap, "its staging unit (%s) is larger than its budget (%s): give it a "
                 "larger memory_budget", a, b);
    else if (x->no_room)
        snprintf(out, cap, "the memory tier is full (%llu items read from the home): other "
                 "datasets' copies fill it; migrate those not in use to the home",
                 (unsigned long long)x->no_room);
    else if (x->kept_bytes * 2 >= x->budget)
        snprintf(out, cap, "kept copies (a migration's, another policy's) hold %.0f%% of its "
                 "budget: they go as it needs room; `cxlpool migrate POOL %.64s <home tier>` "
                 "drops them", 100.0 * (double)x->kept_bytes / (double)(x->budget ? x->budget : 1),
                 x->dataset);
    else if (x->policy == CXLP_POLICY_LRU)
        snprintf(out, cap, "lru stages only on a miss; lookahead stages ahead of the order");
    else if (x->policy != CXLP_POLICY_LOOKAHEAD && x->policy != CXLP_POLICY_STREAMING)
        snprintf(out, cap, "%s placed what fits before the first batch, the rest is staged on "
                 "a miss; lookahead stages ahead of the order", cxlp_policy_name(x->policy));
    else
        snprintf(out, cap, "the home is behind: staging ahead did not keep up (%.1f s waited); "
                 "the home reads slower than the loader asks", (double)x->stall_ns / 1e9);
}

int cxlp_pool_stagers(cxlp_pool *p, struct cxlp_stager_info *out, size_t cap, size_t *n)
{
    if (!p || !n || (cap && !out))
        return seterr(p ? pool_obj(p) : NULL, CXLP_EARG, "cxlp_pool_stagers: NULL argument");
    *n = 0;
    struct attach *a = pool_attach(p);
    uint64_t bytes;
    const uint8_t *area = attach_stage_ro(a, &bytes);
    struct reg_info ri[64];
    size_t nr = registry_list(area, bytes, attach_domain(a), ri, cap < 64 ? cap : 64);
    if (!nr)
        return 0;
    struct cxlp_dataset_info ds[256];
    size_t nd = 0;
    int rc = cxlp_pool_list(p, ds, 256, &nd);
    if (rc)
        return rc;
    uint64_t keys[256];
    for (size_t d = 0; d < nd && d < 256; d++) {
        cxlp_store *s;
        keys[d] = UINT64_MAX;
        if (cxlp_store_open(p, ds[d].name, &s) == 0) {
            keys[d] = s->ds.states_off;
            cxlp_store_close(s);
        }
    }
    for (size_t i = 0; i < nr; i++) {
        struct cxlp_stager_info *x = &out[*n];
        memset(x, 0, sizeof *x);
        x->pid = ri[i].pid;
        for (size_t d = 0; d < nd && d < 256; d++)
            if (keys[d] == (ri[i].key & ~UINT64_C(1)))
                snprintf(x->dataset, sizeof x->dataset, "%s", ds[d].name);
        if (!x->dataset[0])
            continue; /* a dataset deleted since */
        x->budget = ri[i].why[REG_WHY_BUDGET];
        x->unit_bytes = ri[i].why[REG_WHY_UNIT];
        x->kept_bytes = ri[i].why[REG_WHY_KEPT];
        x->hits = ri[i].why[REG_WHY_HITS];
        x->misses = ri[i].why[REG_WHY_MISSES];
        x->no_room = ri[i].why[REG_WHY_NO_ROOM];
        x->policy = (int)ri[i].why[REG_WHY_POLICY];
        x->stall_ns = ri[i].why[REG_WHY_STALL_NS];
        x->bytes_staged = ri[i].why[REG_WHY_STAGED];
        why_of(x, x->why, sizeof x->why);
        (*n)++;
    }
    return 0;
}
