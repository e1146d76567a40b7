/* devdax backend: written to the kernel interface; needs a real device.
 * Absent devices give CXLP_ENODEV by name; with a device present the test
 * only runs when CXLP_TEST_DEVDAX names it (it overwrites the device). */
#include <glob.h>
#include "test.h"
#include "common/common.h"
#include "media/media.h"

int main(void)
{
    char err[256];
    struct media m;
    CHECK_RC(media_open(&m, "devdax:/dev/dax999.9", 1, err, sizeof err), CXLP_ENODEV);
    CHECK(strstr(err, "/dev/dax999.9"));
    CHECK_RC(media_create(&m, "devdax:/dev/dax999.9", 1 << 21, 0, err, sizeof err), CXLP_ENODEV);

    const char *dev = getenv("CXLP_TEST_DEVDAX");
    if (!dev) {
        glob_t g;
        int found = glob("/dev/dax*", 0, NULL, &g) == 0 ? (int)g.gl_pathc : 0;
        if (found)
            globfree(&g);
        SKIP("%s; set CXLP_TEST_DEVDAX=/dev/daxX.Y to run against a device (it is overwritten)",
             found ? "device-dax present but not named" : "no /dev/dax* device on this machine");
    }
    char spec[128];
    snprintf(spec, sizeof spec, "devdax:%s", dev);
    CHECK_OK(media_create(&m, spec, 1, 0, err, sizeof err));
    CHECK(m.size % m.align == 0 && m.size >= m.align && m.emulated == 0);
    memcpy(m.base, "not a pool", 11);
    CHECK_OK(media_sync(&m, 0, 4096));
    media_close(&m);
    CHECK_OK(media_open(&m, spec, 0, err, sizeof err));
    CHECK(memcmp(m.base, "not a pool", 11) == 0);
    media_close(&m);
    CHECK_OK(media_destroy(spec, err, sizeof err));
    printf("ok\n");
    return 0;
}
