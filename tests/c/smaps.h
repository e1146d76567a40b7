/* smaps.h - what the kernel says about this test process's memory. */
#ifndef CXLP_TEST_SMAPS_H
#define CXLP_TEST_SMAPS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* kB of /proc/self/smaps_rollup's line `key` ("ShmemPmdMapped",
 * "Anonymous", ...); 0 when absent. */
static inline uint64_t smaps_rollup_kb(const char *key)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "re");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    size_t n = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, n) && line[n] == ':' && sscanf(line + n + 1, "%llu", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

/* kB of shared memory this process maps with 2 MiB entries. */
static inline uint64_t pmd_mapped_kb(void)
{
    return smaps_rollup_kb("ShmemPmdMapped");
}

#endif
