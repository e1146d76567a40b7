/* smaps.h - what the kernel says this test process maps with 2 MiB entries. */
#ifndef CXLP_TEST_SMAPS_H
#define CXLP_TEST_SMAPS_H

#include <stdint.h>
#include <stdio.h>

/* kB of shared memory this process maps with 2 MiB entries. */
static inline uint64_t pmd_mapped_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "re");
    if (!f)
        return 0;
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "ShmemPmdMapped: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return kb;
}

#endif
