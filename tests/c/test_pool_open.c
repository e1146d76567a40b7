/* Opening pools that are not what they claim: each kind of damage has its
 * own code and a message naming the object; ownership and permissions; and
 * the O(1) create + attach of a 1 TiB sparse file pool. */
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "test_pool_util.h"
#include "pool/pool_internal.h"

#define MiB (1ull << 20)

static char spec[300];
static const char *path;

static void make_pool(int with_ds)
{
    snprintf(spec, sizeof spec, "file:/tmp/%s", test_name("cxlp-open"));
    path = spec + 5;
    struct cxlp_pool_opts o = {.catalog_bytes = 16384, .lease_slots = 8};
    cxlp_pool *p;
    CHECK_OK(cxlp_pool_create(spec, 8 * MiB, &o, &p));
    if (with_ds)
        CHECK_OK(tp_publish(p, "ds", 2, 8192, NULL));
    CHECK_OK(cxlp_pool_close(p));
}

static void poke(uint64_t off, const void *b, size_t n)
{
    int fd = open(path, O_RDWR);
    CHECK(fd >= 0);
    CHECK(pwrite(fd, b, n, (off_t)off) == (ssize_t)n);
    close(fd);
}

static void peek(uint64_t off, void *b, size_t n)
{
    int fd = open(path, O_RDONLY);
    CHECK(fd >= 0);
    CHECK(pread(fd, b, n, (off_t)off) == (ssize_t)n);
    close(fd);
}

/* flips one byte at off, expects rc from both open modes, restores it */
static void flip_expect(uint64_t off, int want, const char *msg_part)
{
    uint8_t b, x;
    peek(off, &b, 1);
    x = b ^ 0x5a;
    poke(off, &x, 1);
    cxlp_pool *p;
    CHECK_RC(cxlp_pool_open(spec, NULL, &p), want);
    if (!strstr(cxlp_errmsg(NULL), path))
        fprintf(stderr, "message '%s' lacks the path\n", cxlp_errmsg(NULL));
    CHECK(strstr(cxlp_errmsg(NULL), path) != NULL);
    if (msg_part && !strstr(cxlp_errmsg(NULL), msg_part)) {
        fprintf(stderr, "message '%s' lacks '%s'\n", cxlp_errmsg(NULL), msg_part);
        CHECK(0);
    }
    struct cxlp_pool_opts ro = {.readonly = 1};
    CHECK_RC(cxlp_pool_open(spec, &ro, &p), want);
    poke(off, &b, 1);
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    CHECK_OK(cxlp_pool_close(p));
}

static void corrupt_header(void)
{
    make_pool(1);
    flip_expect(offsetof(struct pool_hdr, magic), CXLP_EFORMAT, "magic");
    flip_expect(offsetof(struct pool_hdr, magic) + 7, CXLP_EFORMAT, "magic");
    flip_expect(offsetof(struct pool_hdr, version), CXLP_EFORMAT, "version");
    flip_expect(offsetof(struct pool_hdr, hdr_size) + 1, CXLP_EFORMAT, "header size");
    flip_expect(offsetof(struct pool_hdr, layout_sig), CXLP_ELAYOUT, "layout signature");
    flip_expect(offsetof(struct pool_hdr, layout_sig) + 7, CXLP_ELAYOUT, "layout signature");
    flip_expect(offsetof(struct pool_hdr, uuid) + 3, CXLP_ECORRUPT, "checksum");
    flip_expect(offsetof(struct pool_hdr, data_len) + 2, CXLP_ECORRUPT, "checksum");
    flip_expect(offsetof(struct pool_hdr, checksum), CXLP_ECORRUPT, "checksum");

    /* geometry that passes the checksum but points outside the media */
    struct pool_hdr h;
    peek(0, &h, sizeof h);
    struct pool_hdr bad = h;
    bad.data_len = 1ull << 40;
    bad.checksum = XXH3_64bits(&bad, offsetof(struct pool_hdr, checksum));
    poke(0, &bad, offsetof(struct pool_hdr, gen));
    cxlp_pool *p;
    CHECK_RC(cxlp_pool_open(spec, NULL, &p), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(NULL), "data area") != NULL);
    bad = h;
    bad.cat_off = 1ull << 62;
    bad.checksum = XXH3_64bits(&bad, offsetof(struct pool_hdr, checksum));
    poke(0, &bad, offsetof(struct pool_hdr, gen));
    CHECK_RC(cxlp_pool_open(spec, NULL, &p), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(NULL), "catalog") != NULL);
    bad = h;
    bad.lease_slots = 1ull << 61; /* slots * 64 overflows */
    bad.checksum = XXH3_64bits(&bad, offsetof(struct pool_hdr, checksum));
    poke(0, &bad, offsetof(struct pool_hdr, gen));
    CHECK_RC(cxlp_pool_open(spec, NULL, &p), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(NULL), "lease") != NULL);
    bad = h;
    bad.size = 1ull << 50; /* larger than the file */
    bad.checksum = XXH3_64bits(&bad, offsetof(struct pool_hdr, checksum));
    poke(0, &bad, offsetof(struct pool_hdr, gen));
    CHECK_RC(cxlp_pool_open(spec, NULL, &p), CXLP_ECORRUPT);
    poke(0, &h, offsetof(struct pool_hdr, gen));
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    CHECK_OK(cxlp_pool_close(p));

    /* truncated object */
    CHECK(truncate(path, 100) == 0);
    CHECK_RC(cxlp_pool_open(spec, NULL, &p), CXLP_EFORMAT);
    CHECK(truncate(path, 0) == 0);
    CHECK(cxlp_pool_open(spec, NULL, &p) < 0);
    CHECK_OK(cxlp_pool_destroy(spec));
}

static void corrupt_catalog(void)
{
    make_pool(1);
    struct pool_hdr h;
    peek(0, &h, sizeof h);
    uint64_t slot = h.cat_off + ((h.gen >> POOL_EPOCH_BITS) & 1) * h.cat_bytes;
    /* a flipped byte in the blob body: checksum */
    flip_expect(slot + sizeof(struct cat_hdr) + 5, CXLP_ECORRUPT, "checksum");
    /* the generation names the slot that holds an older catalog */
    uint64_t g = h.gen + (UINT64_C(1) << POOL_EPOCH_BITS);
    poke(offsetof(struct pool_hdr, gen), &g, 8);
    cxlp_pool *p;
    CHECK_RC(cxlp_pool_open(spec, NULL, &p), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(NULL), "gen") != NULL);
    poke(offsetof(struct pool_hdr, gen), &h.gen, 8);

    /* records that pass the checksum but point outside the data area, or
     * counts that do not fit: rewritten through the catalog encoder */
    for (int kind = 0; kind < 6; kind++) {
        CHECK_OK(cxlp_pool_open(spec, NULL, &p));
        struct attach *a = pool_attach(p);
        struct cat c;
        uint64_t gen;
        CHECK_OK(cat_snapshot(a, &c, 0, &gen, pool_obj(p)));
        CHECK(c.n_ds == 1 && c.ds[0].d.n_shards == 2 && c.n_fr >= 1);
        const char *want = "outside";
        switch (kind) {
        case 0: c.ds[0].table.off = a->L.obj[0].data_off + a->L.obj[0].data_len; want = "shard table"; break;
        case 1: c.ds[0].states.len = UINT64_MAX - 5; want = "states"; break;
        case 2: c.fr[0].off = 4096; break;
        case 3: memset(c.ds[0].d.info.name, 'x', sizeof c.ds[0].d.info.name); want = "name"; break;
        case 4: c.ds[0].d.n_shards = 3; c.ds[0].d.info.n_shards = 3; want = "3 shards"; break;
        case 5: c.fr[0].object = POOL_MAX_OBJECTS - 1; want = "object"; break;
        }
        cat_encode(&c, pool_base_rw(p, 0) + a->L.cat_off + (gen & 1) * a->L.cat_bytes);
        cat_free(&c);
        CHECK_OK(cxlp_pool_close(p));
        CHECK_RC(cxlp_pool_open(spec, NULL, &p), CXLP_ECORRUPT);
        if (!strstr(cxlp_errmsg(NULL), want)) {
            fprintf(stderr, "kind %d: '%s' lacks '%s'\n", kind, cxlp_errmsg(NULL), want);
            CHECK(0);
        }
        CHECK_OK(cxlp_pool_destroy(spec));
        make_pool(1);
    }

    /* a shard table that does not match its checksum: the pool opens, the
     * dataset does not */
    CHECK_OK(cxlp_pool_open(spec, NULL, &p));
    struct attach *a = pool_attach(p);
    struct cat c;
    uint64_t gen;
    CHECK_OK(cat_snapshot(a, &c, 0, &gen, pool_obj(p)));
    uint8_t *tb = pool_base_rw(p, POOL_META) + c.ds[0].table.off;
    tb[8] ^= 1;
    struct pool_dataset ds;
    struct pool_shard *sh;
    struct attach *la;
    uint64_t lgen;
    CHECK_RC(pool_lookup(p, "ds", &ds, &sh, &la, &lgen), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(pool_obj(p)), "shard table") != NULL);
    tb[8] ^= 1;
    CHECK_OK(pool_lookup(p, "ds", &ds, &sh, &la, &lgen));
    free(sh);
    attach_unpin(la, lgen);
    attach_unref(la);

    /* overlapping extents pass decode (per record) but not pool_check */
    uint64_t *st = attach_states(a, c.ds[0].states.off);
    const uint32_t stride = attach_stride(a);
    uint64_t w1 = st[stride + 1];
    st[stride + 1] = st[1]; /* shard 1 now aliases shard 0, its pages are lost */
    CHECK_RC(pool_check(p, NULL, NULL), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(pool_obj(p)), "bytes lost") != NULL);
    st[stride + 1] = w1;
    tp_check(p);
    uint64_t d = c.fr[0].off - loc_off(st[1]); /* free list overlaps the dataset */
    c.fr[0].off -= d;
    c.fr[0].len += d;
    cat_encode(&c, pool_base_rw(p, 0) + a->L.cat_off + (gen & 1) * a->L.cat_bytes);
    cat_free(&c);
    CHECK_RC(pool_check(p, NULL, NULL), CXLP_ECORRUPT);
    CHECK(strstr(cxlp_errmsg(pool_obj(p)), "overlaps") != NULL);
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(spec));
}

static void ownership(void)
{
    make_pool(0);
    CHECK(chown(path, 65534, 65534) == 0);
    cxlp_pool *p;
    CHECK_RC(cxlp_pool_open(spec, NULL, &p), CXLP_EOWNER);
    const char *m = cxlp_errmsg(NULL);
    CHECK(strstr(m, path) && strstr(m, "65534"));
    char me[32];
    snprintf(me, sizeof me, "uid %u", (unsigned)geteuid());
    CHECK(strstr(m, me) != NULL);
    /* reading another user's pool is the OS's call (root may) */
    struct cxlp_pool_opts ro = {.readonly = 1};
    CHECK_OK(cxlp_pool_open(spec, &ro, &p));
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK_OK(cxlp_pool_close(p));
    CHECK(chown(path, 0, 0) == 0);

    /* an unprivileged user can neither read nor write a 0600 pool */
    if (geteuid() != 0) {
        CHECK_OK(cxlp_pool_destroy(spec));
        return;
    }
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        if (setgid(65534) || setuid(65534))
            _exit(3);
        cxlp_pool *q;
        int rc = cxlp_pool_open(spec, &ro, &q);
        if (rc != -EACCES || !strstr(cxlp_errmsg(NULL), path))
            _exit(4);
        rc = cxlp_pool_open(spec, NULL, &q);
        if (rc != -EACCES || !strstr(cxlp_errmsg(NULL), path))
            _exit(5);
        /* nor create a pool where it may not write */
        rc = cxlp_pool_create("file:/proc/cxlp-no-such-dir/pool", 16 * MiB, NULL, &q);
        if (rc >= 0)
            _exit(6);
        _exit(0);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        fprintf(stderr, "unprivileged child: status %#x\n", status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK_OK(cxlp_pool_destroy(spec));
}

static double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + tv.tv_usec / 1e6;
}

static void terabyte(void)
{
    char s[300];
    snprintf(s, sizeof s, "file:/var/tmp/%s", test_name("cxlp-1tib"));
    cxlp_pool *p;
    double t0 = now_s();
    int rc = cxlp_pool_create(s, 1ull << 40, NULL, &p);
    if (rc == -EFBIG || rc == -ENOSPC || rc == -EOPNOTSUPP) {
        printf("1 TiB sparse pool: not supported by /var/tmp (%s)\n", cxlp_errmsg(NULL));
        return;
    }
    CHECK_OK(rc);
    double t1 = now_s();
    CHECK_OK(cxlp_pool_close(p));
    double t2 = now_s();
    CHECK_OK(cxlp_pool_open(s, NULL, &p));
    double t3 = now_s();
    struct cxlp_pool_stat st;
    CHECK_OK(cxlp_pool_stat(p, &st));
    CHECK(st.size == 1ull << 40 && st.free_bytes == st.data_bytes);
    CHECK(st.data_bytes > (1ull << 40) - (16ull << 20));
    /* the data area is still a hole */
    struct stat sb;
    CHECK(stat(s + 5, &sb) == 0);
    printf("1 TiB sparse file pool: create %.3f s, open %.3f s, %lld KiB allocated\n",
           t1 - t0, t3 - t2, (long long)sb.st_blocks / 2);
    CHECK((uint64_t)sb.st_blocks * 512 < (64ull << 20));
    CHECK(t1 - t0 < 10 && t3 - t2 < 10);
    /* a reservation backs only its own pages */
    struct pool_extent e;
    CHECK_OK(pool_reserve(p, 0, 1ull << 20, &e));
    CHECK_OK(pool_unreserve(p, 0, e));
    CHECK_OK(cxlp_pool_close(p));
    CHECK_OK(cxlp_pool_destroy(s));
}

int main(void)
{
    corrupt_header();
    corrupt_catalog();
    ownership();
    terabyte();
    printf("ok\n");
    return 0;
}
