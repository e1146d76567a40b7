/* list_all: a catalog that grows between the count and the copy is listed
 * again, whole, and never written past the array (ASan sees an overrun). */
#include "test.h"
#include "common/common.h"

struct growing {
    size_t n;      /* entries now */
    size_t grow;   /* added after each call, this many times */
    int calls;
    int fail_at;   /* this call fails (0: none) */
};

static int list_growing(void *h, struct cxlp_dataset_info *infos, size_t cap, size_t *n)
{
    struct growing *g = h;
    if (++g->calls == g->fail_at)
        return -EIO;
    for (size_t i = 0; i < g->n && i < cap; i++)
        snprintf(infos[i].name, sizeof infos[i].name, "d%zu", i);
    *n = g->n;
    if (g->grow) { /* an ingest finished meanwhile */
        g->n += 20;
        g->grow--;
    }
    return 0;
}

int main(void)
{
    struct cxlp_dataset_info *v = NULL;
    size_t n = 99;
    struct growing empty = {0, 0, 0, 0};
    CHECK(list_all(list_growing, &empty, &v, &n) == 0 && n == 0 && v == NULL);

    /* grows by 20 after each of the first three calls: more than the slack
     * of 8 each time, so the copy must be asked for again */
    struct growing g = {5, 3, 0, 0};
    CHECK(list_all(list_growing, &g, &v, &n) == 0);
    CHECK(g.calls == 5 && n == 65);
    for (size_t i = 0; i < n; i++) {
        char want[24];
        snprintf(want, sizeof want, "d%zu", i);
        CHECK(strcmp(v[i].name, want) == 0);
    }
    free(v);

    struct growing bad = {5, 1, 0, 2};
    v = (void *)1;
    CHECK(list_all(list_growing, &bad, &v, &n) == -EIO && v == NULL && n == 0);
    printf("ok\n");
    return 0;
}
