/*
 * host_emu.h - emulated hosts for the multi-host tests: each "host" is a
 * process tree in its own mount, PID and UTS namespaces, with its own boot
 * id bind-mounted over /proc/sys/kernel/random/boot_id, its own hostname
 * and its own host id file (CXLP_HOST_ID_FILE, created at its first
 * attach). /dev/shm stays shared: that is the pool memory the hosts share.
 * This is emulation (one kernel, one memory); the two-kernel run is
 * scripts/qemu-numa-check.sh --hosts.
 *
 * Process tree of emu_spawn: outer (our child, in our namespaces; waits)
 * -> init (pid 1 of the new PID namespace: mounts, then waits) -> role
 * (pid 2, or deeper when the role forks: runs fn). The role is not pid 1
 * because a namespace's init ignores the signals it raises on itself
 * (SIGSTOP, SIGKILL), which the fault points rely on. Needs CAP_SYS_ADMIN;
 * emu_available() says whether this process has it.
 */
#ifndef CXLP_TEST_HOST_EMU_H
#define CXLP_TEST_HOST_EMU_H

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "test.h"

struct emu_host {
    const char *name;        /* hostname, <= 15 bytes */
    char boot[40];           /* boot id text; "" keeps the real one (a container) */
    char idfile[256];        /* host id file; the host's persistent id */
};

/* Makes h a host with a fresh random boot id and an id file under dir. */
static inline void emu_host_init(struct emu_host *h, const char *name, const char *dir)
{
    h->name = name;
    uint64_t r[2];
    int fd = open("/dev/urandom", O_RDONLY);
    CHECK(fd >= 0 && read(fd, r, sizeof r) == (ssize_t)sizeof r);
    close(fd);
    snprintf(h->boot, sizeof h->boot, "%08x-%04x-%04x-%04x-%012llx",
             (unsigned)r[0], (unsigned)(r[0] >> 32) & 0xffff, (unsigned)(r[0] >> 48),
             (unsigned)r[1] & 0xffff, (unsigned long long)(r[1] >> 16) & 0xffffffffffffull);
    snprintf(h->idfile, sizeof h->idfile, "%s/%s.host-id", dir, name);
}

static inline int emu_wait(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return 255;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Forks host h running fn(arg) in it; returns the pid of its outer process
 * (emu_wait gives fn's return, or 128 + the signal that ended the role). */
static inline pid_t emu_spawn(const struct emu_host *h, int (*fn)(void *), void *arg)
{
    fflush(NULL);
    pid_t outer = fork();
    CHECK(outer >= 0);
    if (outer)
        return outer;
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS) != 0 ||
        mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) {
        perror("emu: unshare");
        _exit(90);
    }
    pid_t init = fork();
    if (init < 0)
        _exit(91);
    if (init)
        _exit(emu_wait(init));
    /* pid 1 of the host */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) != 0) {
        perror("emu: mount /proc");
        _exit(92);
    }
    if (h->boot[0]) {
        char f[300];
        snprintf(f, sizeof f, "%s.boot", h->idfile);
        FILE *bf = fopen(f, "w");
        if (!bf || fprintf(bf, "%s\n", h->boot) < 0 || fclose(bf) != 0 ||
            mount(f, "/proc/sys/kernel/random/boot_id", NULL, MS_BIND, NULL) != 0) {
            perror("emu: boot id");
            _exit(93);
        }
    }
    if (sethostname(h->name, strlen(h->name)) != 0)
        _exit(94);
    setenv("CXLP_HOST_ID_FILE", h->idfile, 1);
    pid_t role = fork();
    if (role < 0)
        _exit(95);
    if (role == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int rc = fn(arg);
        fflush(NULL);
        _exit(rc);
    }
    _exit(emu_wait(role));
}

/* The first child of parent (by /proc), in our namespace's numbering. */
static inline pid_t emu_child_of(pid_t parent)
{
    for (int tries = 0; tries < 2000; tries++) {
        DIR *d = opendir("/proc");
        CHECK(d);
        struct dirent *e;
        pid_t found = 0;
        while (!found && (e = readdir(d))) {
            char path[300], buf[512];
            if (e->d_name[0] < '0' || e->d_name[0] > '9')
                continue;
            snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
            int fd = open(path, O_RDONLY);
            if (fd < 0)
                continue;
            ssize_t k = read(fd, buf, sizeof buf - 1);
            close(fd);
            if (k <= 0)
                continue;
            buf[k] = 0;
            const char *p = strrchr(buf, ')');
            int ppid;
            if (p && sscanf(p + 2, "%*c %d", &ppid) == 1 && ppid == parent)
                found = atoi(e->d_name);
        }
        closedir(d);
        if (found)
            return found;
        usleep(1000);
    }
    return 0;
}

/* The role process of an emu_spawn (outer -> init -> role), in our
 * numbering: for SIGSTOP, SIGCONT, SIGKILL and /proc. */
static inline pid_t emu_role(pid_t outer)
{
    pid_t init = emu_child_of(outer);
    return init ? emu_child_of(init) : 0;
}

/* The state letter of pid (R, S, T, Z...), 0 when gone. */
static inline char emu_state(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    ssize_t k = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (k <= 0)
        return 0;
    buf[k] = 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] ? p[2] : 0;
}

/* Waits (up to 60 s) for pid to be stopped; 1 when it is. */
static inline int emu_wait_stopped(pid_t pid)
{
    for (int i = 0; i < 60000; i++) {
        char s = emu_state(pid);
        if (s == 'T' || s == 't')
            return 1;
        if (s == 0 || s == 'Z')
            return 0;
        usleep(1000);
    }
    return 0;
}

static int emu_probe(void *arg)
{
    (void)arg;
    return 0;
}

/* 1 when this process may make emulated hosts (root: unshare, mount). */
static inline int emu_available(void)
{
    struct emu_host h;
    emu_host_init(&h, "probe", "/tmp");
    h.boot[0] = 0;
    return emu_wait(emu_spawn(&h, emu_probe, NULL)) == 0;
}

#endif
