/*
 * util.c - process identity, boot identity, layout signatures.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/common.h"

uint64_t read_alarm;

uint64_t layout_signature(const uint64_t *facts, size_t n)
{
    /* ABI facts every shared layout depends on. */
    const union { uint32_t u; uint8_t b[4]; } endian = {.u = 0x01020304};
    uint64_t base[6] = {sizeof(void *), sizeof(long), _Alignof(uint64_t),
                        CACHELINE, endian.b[0], 1 /* layout family */};
    return XXH3_64bits_withSeed(facts, n * sizeof *facts,
                                XXH3_64bits(base, sizeof base));
}

uint64_t proc_starttime(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* comm (field 2) may hold spaces and parens: parse after the last ')'. */
    char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    p++;
    /* fields 3..22: skip 19 fields to reach starttime (22). */
    for (int f = 3; f < 22 && p; f++) {
        p = strchr(p + 1, ' ');
    }
    if (!p)
        return 0;
    /* a zombie still has a stat file: treat it as dead */
    char state = buf[(strrchr(buf, ')') - buf) + 2];
    if (state == 'Z' || state == 'X')
        return 0;
    return strtoull(p + 1, NULL, 10);
}

int proc_alive(pid_t pid, uint64_t starttime)
{
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) < 0 && errno == ESRCH)
        return 0;
    uint64_t st = proc_starttime(pid);
    if (st == 0)
        return 0;
    return starttime == 0 || st == starttime;
}

void boot_id(uint8_t out[16])
{
    memset(out, 0, 16);
    char buf[64];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return;
    buf[n] = '\0';
    int j = 0;
    for (ssize_t i = 0; i < n && j < 32; i++) {
        char c = buf[i];
        int v;
        if (c >= '0' && c <= '9') v = c - '0';
        else if (c >= 'a' && c <= 'f') v = c - 'a' + 10;
        else continue;
        if (j % 2 == 0) out[j / 2] = (uint8_t)(v << 4);
        else out[j / 2] |= (uint8_t)v;
        j++;
    }
}

const char *file_kind(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG: return "a regular file";
    case S_IFIFO: return "a FIFO";
    case S_IFSOCK: return "a socket";
    case S_IFDIR: return "a directory";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFLNK: return "a symbolic link";
    default: return "an unknown file type";
    }
}

int list_all(list_fn fn, void *h, struct cxlp_dataset_info **out, size_t *n)
{
    struct cxlp_dataset_info *v = NULL;
    size_t cap = 0;
    for (;;) {
        size_t got = 0;
        int rc = fn(h, v, cap, &got);
        if (rc || got <= cap) {
            if (rc || !got) {
                free(v);
                v = NULL;
            }
            *out = v;
            *n = rc ? 0 : got;
            return rc;
        }
        free(v);
        cap = got + 8; /* room for a few added before the next call */
        if (!(v = calloc(cap, sizeof *v)))
            return -ENOMEM;
    }
}

size_t strlcpy0(char *dst, const char *src, size_t cap)
{
    size_t n = strlen(src);
    if (cap) {
        size_t c = n < cap - 1 ? n : cap - 1;
        memcpy(dst, src, c);
        dst[c] = '\0';
    }
    return n;
}

int fault_hit(const char *name)
{
    const char *f = getenv("CXLP_FAULT");
    size_t n = strlen(name);
    return f && strncmp(f, name, n) == 0 && (f[n] == 0 || f[n] == ':');
}

void fault_point(const char *name)
{
    if (!fault_hit(name))
        return;
    const char *f = getenv("CXLP_FAULT");
    raise(strcmp(f + strlen(name), ":stop") == 0 ? SIGSTOP : SIGKILL);
}
