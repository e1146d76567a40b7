/* Pool specs name a backend and an object; bad specs are refused by name. */
#include "test.h"
#include "common/common.h"
#include "media/media.h"

static void ok(const char *spec, int kind, const char *path, int node)
{
    struct media m;
    char err[256];
    int rc = media_parse(&m, spec, err, sizeof err);
    if (rc) {
        fprintf(stderr, "spec %s: %s\n", spec, err);
        exit(1);
    }
    CHECK(m.kind == kind);
    CHECK(strcmp(m.path, path) == 0);
    CHECK(m.numa_node == node);
    CHECK(m.fd == -1 && m.base == NULL);
}

static void bad(const char *spec, const char *needle)
{
    struct media m;
    char err[256] = "";
    CHECK_RC(media_parse(&m, spec, err, sizeof err), CXLP_EARG);
    if (!strstr(err, needle)) {
        fprintf(stderr, "spec '%s': message '%s' lacks '%s'\n", spec, err, needle);
        exit(1);
    }
}

int main(void)
{
    ok("train", CXLP_MEDIA_SHM, "/dev/shm/cxlp.train", -1);
    ok("shm:a.b-c_1", CXLP_MEDIA_SHM, "/dev/shm/cxlp.a.b-c_1", -1);
    ok("file:/var/tmp/p.pool", CXLP_MEDIA_FILE, "/var/tmp/p.pool", -1);
    ok("file:rel/p", CXLP_MEDIA_FILE, "rel/p", -1);
    ok("numa:1:big", CXLP_MEDIA_NUMA, "/dev/shm/cxlp.big", 1);
    ok("devdax:/dev/dax0.0", CXLP_MEDIA_DEVDAX, "/dev/dax0.0", -1);
    /* a node list interleaves (no single node); one node binds */
    ok("numa:interleave=0-2,5:il", CXLP_MEDIA_NUMA, "/dev/shm/cxlp.il", -1);
    {
        struct media m;
        char err[256];
        CHECK_OK(media_parse(&m, "numa:interleave=0-2,5:il", err, sizeof err));
        CHECK(m.numa_interleave && m.numa_mask[0] == 0x27);
        char text[64];
        media_nodes_text(m.numa_mask, text, sizeof text);
        CHECK(strcmp(text, "0-2,5") == 0);
        CHECK_OK(media_parse(&m, "numa:interleave=0:il", err, sizeof err));
        CHECK(m.numa_interleave && m.numa_mask[0] == 1 && m.numa_node == -1);
        CHECK_OK(media_parse(&m, "numa:3:b", err, sizeof err));
        CHECK(!m.numa_interleave && m.numa_mask[0] == 8 && m.numa_node == 3);
        CHECK_OK(media_parse(&m, "numa:interleave=1000-1023:il", err, sizeof err));
        media_nodes_text(m.numa_mask, text, sizeof text);
        CHECK(strcmp(text, "1000-1023") == 0);
    }

    bad("", "empty");
    bad("shm:", "name");
    bad("shm:../etc", "name");
    bad("a/b", "name"); /* no colon: a shm name, and a slash is not allowed */
    bad("shm:x/y", "name");
    bad("file:", "path is empty");
    bad("numa:x:n", "numa:NODE:NAME");
    bad("numa:1", "numa:NODE:NAME");
    bad("numa:-1:n", "numa:NODE:NAME");
    bad("numa:5000:n", "numa:NODE:NAME");
    bad("numa:0-3:n", "numa:interleave=NODES:NAME"); /* a range needs interleave= */
    bad("numa:interleave=:n", "numa:interleave=NODES:NAME");
    bad("numa:interleave=0,:n", "numa:interleave=NODES:NAME");
    bad("numa:interleave=3-1:n", "numa:interleave=NODES:NAME");
    bad("numa:interleave=0-1024:n", "numa:interleave=NODES:NAME");
    bad("numa:interleave=0;1:n", "numa:interleave=NODES:NAME");
    bad("numa:interleave=0-:n", "numa:interleave=NODES:NAME");
    bad("numa:interleave=0,1", "numa:interleave=NODES:NAME");
    bad("devdax:/tmp/x", "devdax:/dev/daxX.Y");
    bad("s3:bucket", "unknown backend");

    CHECK(strcmp(cxlp_media_name(CXLP_MEDIA_SHM), "shm") == 0);
    CHECK(strcmp(cxlp_media_name(CXLP_MEDIA_DEVDAX), "devdax") == 0);
    CHECK(strcmp(cxlp_media_name(99), "?") == 0);
    printf("ok\n");
    return 0;
}
