/*
 * api.c - the tier layer's small public functions: policy names and a
 * dataset's default policy.
 */
#include <string.h>

#include "pool/pool.h"
#include "store/store.h"

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
