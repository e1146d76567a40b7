/*
 * remote_util.h - what the remote pool tests share: a pool with two
 * datasets (variable-length token sequences; two fixed fields stored as
 * columns), a token file, a server in a child process (so that it can be
 * stopped, killed or sent SIGTERM) whose port comes back through a pipe,
 * and a byte of a record flipped in a pool's or tier's file.
 */
#ifndef CXLP_REMOTE_UTIL_H
#define CXLP_REMOTE_UTIL_H

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "records.h"
#include "test.h"

#define RU_VAR_N 4000u
#define RU_FIX_N 3000u

static inline uint64_t ru_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Ingests "var" (u16 sequences of 0..299 elements) and "fix" (u64 id and a
 * 2x3 f32 field) into a new shm pool, shards of a few tens of KiB. */
static inline void ru_make_pool(const char *spec, uint64_t seed)
{
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 64u << 20, NULL, &p));
    struct cxlp_schema vs;
    memset(&vs, 0, sizeof vs);
    vs.n_fields = 1;
    strcpy(vs.fields[0].name, "tokens");
    vs.fields[0].dtype = CXLP_DT_U16;
    struct cxlp_writer_opts wo = {.shard_bytes = 48u << 10};
    cxlp_writer *w;
    CHECK_OK(cxlp_writer_begin(p, "var", &vs, &wo, &w));
    uint16_t rec[300];
    uint64_t s = seed | 1;
    for (uint32_t i = 0; i < RU_VAR_N; i++) {
        uint32_t n = (uint32_t)(ru_rand(&s) % 300);
        for (uint32_t j = 0; j < n; j++)
            rec[j] = (uint16_t)ru_rand(&s);
        CHECK_OK(cxlp_writer_append(w, rec, n * 2u));
    }
    CHECK_OK(cxlp_writer_commit(w));
    struct cxlp_schema fs;
    memset(&fs, 0, sizeof fs);
    fs.fixed = 1;
    fs.n_fields = 2;
    strcpy(fs.fields[0].name, "id");
    fs.fields[0].dtype = CXLP_DT_U64;
    strcpy(fs.fields[1].name, "vec");
    fs.fields[1].dtype = CXLP_DT_F32;
    fs.fields[1].ndim = 2;
    fs.fields[1].shape[0] = 2;
    fs.fields[1].shape[1] = 3;
    wo.shard_bytes = 16u << 10;
    CHECK_OK(cxlp_writer_begin(p, "fix", &fs, &wo, &w));
    for (uint32_t i = 0; i < RU_FIX_N; i++) {
        uint8_t r[32];
        uint64_t id = i;
        float v[6];
        for (int j = 0; j < 6; j++)
            v[j] = (float)(ru_rand(&s) % 1000) / 7.0f;
        memcpy(r, &id, 8);
        memcpy(r + 8, v, 24);
        CHECK_OK(cxlp_writer_append(w, r, 32));
    }
    CHECK_OK(cxlp_writer_commit(w));
    CHECK_OK(cxlp_pool_close(p));
}

/* Writes text to a new file path of mode mode. */
static inline void ru_write_file(const char *path, const char *text, mode_t mode)
{
    unlink(path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
    CHECK(fchmod(fd, mode) == 0);
    close(fd);
}

static volatile int ru_stop;
static int ru_port_fd = -1;
static pid_t ru_children[16];
static int ru_n_children;

/* Servers still running when the test exits (a CHECK failed) or hangs
 * (the alarm) are killed: none outlives its test. */
static inline void ru_kill_children(void)
{
    for (int i = 0; i < ru_n_children; i++)
        if (ru_children[i] > 0)
            kill(ru_children[i], SIGKILL);
}

static inline void ru_on_alarm(int sig)
{
    (void)sig;
    static const char m[] = "test hung: killed by its alarm\n";
    (void)!write(2, m, sizeof m - 1);
    ru_kill_children();
    _exit(1);
}

/* Kills the servers at exit, and everything after secs seconds. */
static inline void ru_guard(unsigned secs)
{
    atexit(ru_kill_children);
    signal(SIGALRM, ru_on_alarm);
    alarm(secs);
}

static inline void ru_on_term(int sig)
{
    (void)sig;
    ru_stop = 1;
}

static inline void ru_ready(void *ctx, const char *addr, int port)
{
    (void)ctx;
    (void)addr;
    CHECK(write(ru_port_fd, &port, sizeof port) == (ssize_t)sizeof port);
}

/* A server forked now, before this process holds any UCX state (a child
 * forked from a process with live UCX contexts inherits their threads'
 * locks), that starts serving spec (logging to log_path) when
 * ru_spare_go names its listen address: a host that comes back is a fresh
 * process, and a server of a pool made later can be forked early. The
 * child exits with 0 when cxlp_serve returned 0 after SIGTERM, else 1. */
struct ru_spare {
    pid_t pid;
    int go, port;             /* write: the address; read: the bound port */
};

static inline struct ru_spare ru_spare_fork(const char *spec, const char *token_file,
                                            const char *log_path)
{
    int gfd[2], pfd[2];
    CHECK(pipe(gfd) == 0 && pipe(pfd) == 0);
    fflush(stdout);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(gfd[1]);
        close(pfd[0]);
        char listen[64] = "";
        ssize_t n = read(gfd[0], listen, sizeof listen - 1);
        if (n <= 0)
            _exit(0);
        listen[n] = '\0';
        ru_port_fd = pfd[1];
        struct sigaction sa = {.sa_handler = ru_on_term};
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, NULL);
        FILE *log = fopen(log_path, "a");
        if (!log)
            _exit(1);
        struct cxlp_serve_opts o = {.listen = listen, .token_file = token_file,
                                    .stop = &ru_stop, .log = log, .ready = ru_ready};
        int rc = cxlp_serve(spec, &o);
        if (rc)
            fprintf(log, "serve failed: %s\n", cxlp_errmsg(NULL));
        fclose(log);
        _exit(rc ? 1 : 0);
    }
    close(gfd[0]);
    close(pfd[1]);
    if (ru_n_children < 16)
        ru_children[ru_n_children++] = pid;
    return (struct ru_spare){pid, gfd[1], pfd[0]};
}

/* Starts the spare on listen; 0 once it listens (its port in *port), -1
 * when it did not start (the log says why). */
static inline int ru_spare_go(struct ru_spare *sp, const char *listen, int *port)
{
    CHECK(write(sp->go, listen, strlen(listen)) == (ssize_t)strlen(listen));
    close(sp->go);
    ssize_t n = read(sp->port, port, sizeof *port);
    close(sp->port);
    return n == (ssize_t)sizeof *port ? 0 : -1;
}

/* Forks a server of spec on 127.0.0.1 (a free port) logging to log_path;
 * returns its pid and its port in *port. */
static inline pid_t ru_serve(const char *spec, const char *token_file, const char *log_path, int *port)
{
    struct ru_spare sp = ru_spare_fork(spec, token_file, log_path);
    if (ru_spare_go(&sp, "127.0.0.1:0", port)) {
        int st;
        waitpid(sp.pid, &st, 0);
        fprintf(stderr, "server did not start (log %s)\n", log_path);
        exit(1);
    }
    return sp.pid;
}

/* Flips one byte inside record i of a fixed records.h dataset (seed) in
 * the file at path: a pool's shm object or a tier's file, the record
 * found by its bytes (records.h records are unique). */
static inline void ru_flip_record(const char *path, uint64_t seed, uint64_t i)
{
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    off_t size = lseek(fd, 0, SEEK_END);
    uint8_t *m = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    CHECK(m != MAP_FAILED);
    uint8_t rec[REC_FIXED_SIZE];
    rec_fill(rec, REC_FIXED_SIZE, seed, i);
    uint8_t *at = memmem(m, (size_t)size, rec, sizeof rec);
    CHECK(at != NULL);
    at[100] ^= 0x40;
    munmap(m, (size_t)size);
    close(fd);
}

/* 1 when path's text contains needle. */
static inline int ru_file_has(const char *path, const char *needle)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return strstr(buf, needle) != NULL;
}

#endif
