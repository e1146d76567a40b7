/* Return codes have names; messages carry context per handle and per thread. */
#include "test.h"
#include "common/common.h"

int main(void)
{
    /* every library code has its own text, distinct from "unknown error" */
    for (int rc = CXLP_EPANIC; rc >= -CXLP_ERR_LAST; rc--) {
        const char *s = cxlp_strerror(rc);
        CHECK(s && strcmp(s, "unknown error") != 0);
        for (int rc2 = rc - 1; rc2 >= -CXLP_ERR_LAST; rc2--)
            CHECK(strcmp(s, cxlp_strerror(rc2)) != 0);
    }
    CHECK(strcmp(cxlp_strerror(-ENOENT), strerror(ENOENT)) == 0);
    CHECK(strcmp(cxlp_strerror(0), "success") == 0);
    CHECK(strcmp(cxlp_strerror(-CXLP_ERR_LAST - 1), "unknown error") == 0);

    struct obj o;
    obj_init(&o);
    CHECK(seterr(&o, CXLP_ECORRUPT, "pool %s: offset %d", "x", 42) == CXLP_ECORRUPT);
    CHECK(strcmp(cxlp_errmsg(&o), "pool x: offset 42") == 0);
    CHECK(strcmp(cxlp_errmsg(NULL), "pool x: offset 42") == 0);
    seterr(NULL, CXLP_EARG, "only thread");
    CHECK(strcmp(cxlp_errmsg(&o), "pool x: offset 42") == 0);
    CHECK(strcmp(cxlp_errmsg(NULL), "only thread") == 0);
    CHECK(!o.panic);
    panic_obj(&o, CXLP_EPANIC, "bad");
    CHECK(o.panic);
    uint64_t junk[64] = {0};
    CHECK(strstr(cxlp_errmsg(junk), "not a cxlpool handle") != NULL);

    /* process identity: we are alive; a bogus start time is not us */
    uint64_t st = proc_starttime(getpid());
    CHECK(st > 0);
    CHECK(proc_alive(getpid(), st));
    CHECK(!proc_alive(getpid(), st + 12345));
    CHECK(!proc_alive(0, 0));
    printf("ok\n");
    return 0;
}
