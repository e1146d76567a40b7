/*
 * numa_lib.h - libnuma, loaded when first used (dlopen "libnuma.so.1"),
 * and the NUMA system calls, made directly.
 *
 * A process that never touches NUMA placement must not need libnuma: a
 * wheel carries no system library, and a machine without libnuma1 still
 * runs every pool that is not on the numa backend. So the few libnuma
 * functions the library calls are renamed here to wrappers (numa_lib.c)
 * that resolve them at first use; without libnuma, numa_available() says
 * -1 (as libnuma itself does on a kernel without NUMA), so every caller
 * already on the "no NUMA" path stays on it, and numa_lib_error() names
 * what is missing for the one place that must refuse (numa: media).
 * mbind(2) and move_pages(2) are system calls: they are made directly
 * (what libnuma's own wrappers do), so ring-slot placement and the census
 * of a pool's pages need nothing loaded.
 *
 * Include this instead of <numa.h> / <numaif.h>: the renames must come
 * before them (numa.h's inline functions call what they rename).
 * Rejected: linking libnuma (a wheel would then need it or carry it);
 * reading sysfs for everything (libnuma's node and CPU masks are what the
 * kernel interfaces take, and it is the well-kept library for them).
 */
#ifndef CXLP_MEDIA_NUMA_LIB_H
#define CXLP_MEDIA_NUMA_LIB_H

#ifdef CXLP_NUMA_LINKED
/* a static program (the QEMU guest of scripts/qemu-numa-check.sh) links
 * libnuma itself and loads nothing */
#include <numa.h>
#include <numaif.h>
static inline const char *numa_lib_error(void)
{
    return 0;
}
#else
#define numa_available numa_lib_available
#define numa_max_node numa_lib_max_node
#define numa_node_to_cpus numa_lib_node_to_cpus
#define numa_allocate_cpumask numa_lib_allocate_cpumask
#define numa_bitmask_free numa_lib_bitmask_free
#define numa_bitmask_weight numa_lib_bitmask_weight
#define numa_bitmask_isbitset numa_lib_bitmask_isbitset
#define numa_node_size64 numa_lib_node_size64
#define numa_distance numa_lib_distance
#define numa_run_on_node numa_lib_run_on_node
#define mbind numa_lib_mbind
#define move_pages numa_lib_move_pages

#include <numa.h>
#include <numaif.h>

/* NULL when libnuma is loaded (or loads now); else why not, naming the
 * library ("libnuma.so.1: cannot open shared object file: ..."). Any
 * thread. */
const char *numa_lib_error(void);

#endif /* CXLP_NUMA_LINKED */
#endif
