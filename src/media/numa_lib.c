/*
 * numa_lib.c - libnuma through dlopen, resolved once (numa_lib.h says why).
 * Without the library every function behaves as libnuma does on a kernel
 * without NUMA: numa_available() is -1, the others fail (errno ENOSYS) or
 * report nothing; callers check numa_available() first.
 */
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "media/numa_lib.h"

#ifndef CXLP_NUMA_LINKED

#define LIBNUMA "libnuma.so.1"

static struct {
    int (*available)(void);
    int (*max_node)(void);
    int (*node_to_cpus)(int, struct bitmask *);
    struct bitmask *(*allocate_cpumask)(void);
    void (*bitmask_free)(struct bitmask *);
    unsigned int (*bitmask_weight)(const struct bitmask *);
    int (*bitmask_isbitset)(const struct bitmask *, unsigned int);
    long long (*node_size64)(int, long long *);
    int (*distance)(int, int);
    int (*run_on_node)(int);
    char error[256];
    int loaded;
} lib;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
    void *h = dlopen(LIBNUMA, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(lib.error, sizeof lib.error, "%s", e ? e : LIBNUMA ": cannot be loaded");
        return;
    }
    /* the symbols' default versions: the bitmask API (libnuma_1.2) */
    struct { void **fn; const char *name; } want[] = {
        {(void **)&lib.available, "numa_available"},
        {(void **)&lib.max_node, "numa_max_node"},
        {(void **)&lib.node_to_cpus, "numa_node_to_cpus"},
        {(void **)&lib.allocate_cpumask, "numa_allocate_cpumask"},
        {(void **)&lib.bitmask_free, "numa_bitmask_free"},
        {(void **)&lib.bitmask_weight, "numa_bitmask_weight"},
        {(void **)&lib.bitmask_isbitset, "numa_bitmask_isbitset"},
        {(void **)&lib.node_size64, "numa_node_size64"},
        {(void **)&lib.distance, "numa_distance"},
        {(void **)&lib.run_on_node, "numa_run_on_node"},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        *want[i].fn = dlsym(h, want[i].name);
        if (!*want[i].fn) {
            snprintf(lib.error, sizeof lib.error, "%s: no symbol %s", LIBNUMA, want[i].name);
            dlclose(h);
            return;
        }
    }
    lib.loaded = 1; /* the handle stays open for the process's life */
}

static int loaded(void)
{
    pthread_once(&once, load);
    return lib.loaded;
}

const char *numa_lib_error(void)
{
    return loaded() ? NULL : lib.error;
}

int numa_lib_available(void)
{
    return loaded() ? lib.available() : -1;
}

int numa_lib_max_node(void)
{
    return loaded() ? lib.max_node() : -1;
}

int numa_lib_node_to_cpus(int node, struct bitmask *mask)
{
    if (!loaded()) {
        errno = ENOSYS;
        return -1;
    }
    return lib.node_to_cpus(node, mask);
}

struct bitmask *numa_lib_allocate_cpumask(void)
{
    return loaded() ? lib.allocate_cpumask() : NULL;
}

void numa_lib_bitmask_free(struct bitmask *b)
{
    if (b && loaded()) /* only libnuma made one */
        lib.bitmask_free(b);
}

unsigned int numa_lib_bitmask_weight(const struct bitmask *b)
{
    return loaded() ? lib.bitmask_weight(b) : 0;
}

int numa_lib_bitmask_isbitset(const struct bitmask *b, unsigned int n)
{
    return loaded() ? lib.bitmask_isbitset(b, n) : 0;
}

long long numa_lib_node_size64(int node, long long *freep)
{
    if (!loaded()) {
        errno = ENOSYS;
        return -1;
    }
    return lib.node_size64(node, freep);
}

int numa_lib_distance(int a, int b)
{
    return loaded() ? lib.distance(a, b) : 0;
}

int numa_lib_run_on_node(int node)
{
    if (!loaded()) {
        errno = ENOSYS;
        return -1;
    }
    return lib.run_on_node(node);
}

long numa_lib_mbind(void *addr, unsigned long len, int mode, const unsigned long *nodemask,
                    unsigned long maxnode, unsigned flags)
{
    return syscall(SYS_mbind, addr, len, mode, nodemask, maxnode, flags);
}

long numa_lib_move_pages(int pid, unsigned long count, void **pages, const int *nodes,
                         int *status, int flags)
{
    return syscall(SYS_move_pages, pid, count, pages, nodes, status, flags);
}

#endif /* CXLP_NUMA_LINKED */
