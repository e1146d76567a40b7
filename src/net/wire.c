/*
 * wire.c - encoders and decoders of the remote pool messages (wire.h has
 * the layout and the invariants). A cursor over a byte range: every get
 * checks the bytes left first, so no input can make a decoder read past
 * its buffer; a decode that ends with bytes left over is refused.
 */
#include <string.h>

#include "common/common.h"
#include "net/wire.h"

struct cur {
    const uint8_t *p;
    size_t left;
    int bad;
};

static void get(struct cur *c, void *dst, size_t n)
{
    if (c->bad || c->left < n) {
        c->bad = 1;
        memset(dst, 0, n);
        return;
    }
    memcpy(dst, c->p, n);
    c->p += n;
    c->left -= n;
}

static uint16_t get16(struct cur *c)
{
    uint8_t b[2];
    get(c, b, 2);
    return (uint16_t)(b[0] | b[1] << 8);
}

static uint32_t get32(struct cur *c)
{
    uint8_t b[4];
    get(c, b, 4);
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t get64(struct cur *c)
{
    uint64_t lo = get32(c);
    return lo | (uint64_t)get32(c) << 32;
}

struct out {
    uint8_t *p;      /* NULL: count only */
    size_t n, cap;
};

static void put(struct out *o, const void *src, size_t n)
{
    if (o->p && o->n + n <= o->cap)
        memcpy(o->p + o->n, src, n);
    o->n += n;
}

static void put16(struct out *o, uint16_t v)
{
    uint8_t b[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
    put(o, b, 2);
}

static void put32(struct out *o, uint32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(o, b, 4);
}

static void put64(struct out *o, uint64_t v)
{
    put32(o, (uint32_t)v);
    put32(o, (uint32_t)(v >> 32));
}

const char *wire_op_name(uint32_t op)
{
    switch (op) {
    case WIRE_HELLO: return "HELLO";
    case WIRE_LIST: return "LIST";
    case WIRE_SHARDS: return "SHARDS";
    case WIRE_READ: return "READ";
    case WIRE_META: return "META";
    case WIRE_DOCS: return "DOCS";
    case WIRE_HELD: return "HELD";
    default: return "?";
    }
}

/* A name of 1..WIRE_NAME_MAX bytes without NUL into dst (NUL-terminated). */
static int get_name(struct cur *c, char *dst, int optional)
{
    uint16_t n = get16(c);
    if (c->bad || n > WIRE_NAME_MAX || (n == 0 && !optional) || c->left < n)
        return -1;
    get(c, dst, n);
    dst[n] = '\0';
    return memchr(dst, '\0', n) ? -1 : 0;
}

static int name_ok(const char *name, int optional)
{
    size_t n = strnlen(name, WIRE_NAME_MAX + 1);
    return n <= WIRE_NAME_MAX && (n > 0 || optional);
}

static int op_has_name(uint32_t op)
{
    return op == WIRE_HELLO || op == WIRE_SHARDS || op == WIRE_READ || op == WIRE_META ||
           op == WIRE_DOCS || op == WIRE_HELD;
}

/* READ and DOCS carry a range (DOCS of shard 0). */
static int op_has_range(uint32_t op)
{
    return op == WIRE_READ || op == WIRE_DOCS;
}

size_t wire_req_encode(const struct wire_req *r, uint8_t *buf, size_t cap)
{
    if (r->op < WIRE_HELLO || r->op > WIRE_OP_LAST || !name_ok(r->name, !op_has_name(r->op)) ||
        r->token_len > WIRE_TOKEN_MAX || (r->op != WIRE_HELLO && r->token_len))
        return 0;
    if (op_has_range(r->op) &&
        (r->len == 0 || r->len > WIRE_READ_MAX || r->off + r->len < r->off ||
         (r->op == WIRE_DOCS && r->shard)))
        return 0;
    struct out o = {buf, 0, cap};
    size_t nl = strlen(r->name);
    put32(&o, WIRE_REQ_MAGIC);
    put16(&o, WIRE_VERSION);
    put16(&o, (uint16_t)r->op);
    put64(&o, r->id);
    put16(&o, (uint16_t)nl);
    put(&o, r->name, nl);
    put16(&o, (uint16_t)r->token_len);
    put(&o, r->token, r->token_len);
    if (op_has_range(r->op)) {
        put64(&o, r->ds_version);
        put64(&o, r->shard);
        put64(&o, r->off);
        put64(&o, r->len);
    }
    return o.n <= cap ? o.n : 0;
}

int wire_req_decode(const void *buf, size_t len, struct wire_req *out, char *err, size_t errlen)
{
    struct cur c = {buf, len, 0};
    struct wire_req r;
    memset(&r, 0, sizeof r);
    uint32_t magic = get32(&c);
    uint16_t ver = get16(&c);
    r.op = get16(&c);
    r.id = get64(&c);
    if (c.bad)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "request of %zu bytes: shorter than a header",
                          len);
    if (magic != WIRE_REQ_MAGIC)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "request: bad magic 0x%08x", magic);
    if (ver != WIRE_VERSION)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "request: version %u (this build speaks %u)",
                          ver, WIRE_VERSION);
    if (r.op < WIRE_HELLO || r.op > WIRE_OP_LAST)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "request: unknown op %u", r.op);
    if (get_name(&c, r.name, !op_has_name(r.op)))
        return errbuf_set(err, errlen, CXLP_EBADINPUT,
                          "%s request: bad name (1..%u bytes without NUL)", wire_op_name(r.op),
                          WIRE_NAME_MAX);
    uint16_t tl = get16(&c);
    if (c.bad || tl > WIRE_TOKEN_MAX || (tl && r.op != WIRE_HELLO) || c.left < tl)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "%s request: bad token length %u",
                          wire_op_name(r.op), tl);
    r.token_len = tl;
    get(&c, r.token, tl);
    if (op_has_range(r.op)) {
        r.ds_version = get64(&c);
        r.shard = get64(&c);
        r.off = get64(&c);
        r.len = get64(&c);
        if (c.bad)
            return errbuf_set(err, errlen, CXLP_EBADINPUT, "%s request: truncated",
                              wire_op_name(r.op));
        if (r.len == 0 || r.len > WIRE_READ_MAX || r.off + r.len < r.off)
            return errbuf_set(err, errlen, CXLP_EBADINPUT,
                              "%s request: length %llu at %llu (1..%llu bytes)",
                              wire_op_name(r.op), (unsigned long long)r.len,
                              (unsigned long long)r.off, (unsigned long long)WIRE_READ_MAX);
        if (r.op == WIRE_DOCS && r.shard)
            return errbuf_set(err, errlen, CXLP_EBADINPUT, "DOCS request: shard %llu (0 only)",
                              (unsigned long long)r.shard);
    }
    if (c.bad || c.left)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "%s request: %zu bytes left over",
                          wire_op_name(r.op), c.left);
    *out = r;
    return 0;
}

size_t wire_rep_encode(const struct wire_rep *r, uint8_t *buf, size_t cap)
{
    size_t ml = strnlen(r->msg, WIRE_MSG_MAX + 1);
    if (ml > WIRE_MSG_MAX || r->op > WIRE_OP_LAST || r->status > 0 || (r->status == 0 && ml))
        return 0;
    struct out o = {buf, 0, cap};
    put32(&o, WIRE_REP_MAGIC);
    put16(&o, WIRE_VERSION);
    put16(&o, (uint16_t)r->op);
    put64(&o, r->id);
    put32(&o, (uint32_t)r->status);
    put16(&o, (uint16_t)ml);
    put(&o, r->msg, ml);
    put64(&o, r->payload_len);
    return o.n <= cap ? o.n : 0;
}

int wire_rep_decode(const void *buf, size_t len, struct wire_rep *out, char *err, size_t errlen)
{
    struct cur c = {buf, len, 0};
    struct wire_rep r;
    memset(&r, 0, sizeof r);
    uint32_t magic = get32(&c);
    uint16_t ver = get16(&c);
    r.op = get16(&c);
    r.id = get64(&c);
    r.status = (int32_t)get32(&c);
    uint16_t ml = get16(&c);
    if (c.bad)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "reply of %zu bytes: shorter than a header",
                          len);
    if (magic != WIRE_REP_MAGIC || ver != WIRE_VERSION)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "reply: bad magic 0x%08x or version %u",
                          magic, ver);
    if (r.op > WIRE_OP_LAST || r.status > 0 || ml > WIRE_MSG_MAX ||
        (r.status == 0 && ml))
        return errbuf_set(err, errlen, CXLP_EBADINPUT,
                          "reply: op %u, status %d, message of %u bytes", r.op, (int)r.status, ml);
    get(&c, r.msg, ml);
    r.msg[ml] = '\0';
    if (!c.bad && memchr(r.msg, '\0', ml))
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "reply: NUL inside its message");
    r.payload_len = get64(&c);
    if (c.bad || c.left)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "reply: %s", c.bad ? "truncated" :
                          "bytes left over");
    if (r.status && r.payload_len)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "reply: an error with a payload");
    *out = r;
    return 0;
}

size_t wire_list_encode(const struct cxlp_dataset_info *infos, uint32_t n, uint8_t *buf)
{
    struct out o = {buf, 0, SIZE_MAX};
    put32(&o, n);
    for (uint32_t i = 0; i < n; i++) {
        const struct cxlp_dataset_info *d = &infos[i];
        size_t nl = strnlen(d->name, WIRE_NAME_MAX);
        put16(&o, (uint16_t)nl);
        put(&o, d->name, nl);
        put64(&o, d->version);
        put64(&o, d->n_records);
        put64(&o, d->data_bytes);
        put64(&o, d->stored_bytes);
        put32(&o, d->n_shards);
        put32(&o, (uint32_t)d->fixed);
        put64(&o, d->record_size);
        put64(&o, d->n_docs);
        put64(&o, d->created_unix);
    }
    return o.n;
}

int wire_list_decode(const void *buf, size_t len, struct cxlp_dataset_info *infos, size_t cap,
                     size_t *n, char *err, size_t errlen)
{
    struct cur c = {buf, len, 0};
    uint32_t cnt = get32(&c);
    /* every entry takes at least 2 + 1 + 64 bytes: a count the payload
     * cannot hold is refused before any loop runs that long */
    if (c.bad || cnt > c.left / 67)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "listing: %u datasets in %zu bytes", cnt,
                          len);
    for (uint32_t i = 0; i < cnt; i++) {
        struct cxlp_dataset_info d;
        memset(&d, 0, sizeof d);
        if (get_name(&c, d.name, 0))
            return errbuf_set(err, errlen, CXLP_EBADINPUT, "listing: entry %u: bad name", i);
        d.version = get64(&c);
        d.n_records = get64(&c);
        d.data_bytes = get64(&c);
        d.stored_bytes = get64(&c);
        d.n_shards = get32(&c);
        uint32_t fixed = get32(&c);
        d.record_size = get64(&c);
        d.n_docs = get64(&c);
        d.created_unix = get64(&c);
        if (c.bad || fixed > 1)
            return errbuf_set(err, errlen, CXLP_EBADINPUT, "listing: entry %u: %s", i,
                              c.bad ? "truncated" : "bad fixed flag");
        d.fixed = (int)fixed;
        if (i < cap)
            infos[i] = d;
    }
    if (c.left)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "listing: %zu bytes left over", c.left);
    *n = cnt;
    return 0;
}

size_t wire_shards_encode(uint64_t ds_version, const struct wire_shard *s, uint64_t n,
                          uint8_t *buf)
{
    struct out o = {buf, 0, SIZE_MAX};
    put64(&o, ds_version);
    put64(&o, n);
    for (uint64_t k = 0; k < n; k++) {
        put64(&o, s[k].first_record);
        put64(&o, s[k].n_records);
        put64(&o, s[k].bytes);
        put64(&o, s[k].data_len);
        put64(&o, s[k].checksum);
    }
    return o.n;
}

int wire_shards_decode(const void *buf, size_t len, uint64_t *ds_version, struct wire_shard *out,
                       size_t cap, uint64_t *n, char *err, size_t errlen)
{
    struct cur c = {buf, len, 0};
    uint64_t ver = get64(&c), cnt = get64(&c);
    if (c.bad || cnt > c.left / WIRE_SHARD_BYTES || c.left != cnt * WIRE_SHARD_BYTES)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "shard table: %llu shards in %zu bytes",
                          (unsigned long long)cnt, len);
    uint64_t next = 0;
    for (uint64_t k = 0; k < cnt; k++) {
        struct wire_shard s;
        s.first_record = get64(&c);
        s.n_records = get64(&c);
        s.bytes = get64(&c);
        s.data_len = get64(&c);
        s.checksum = get64(&c);
        if ((k && s.first_record != next) || s.data_len > s.bytes ||
            add_overflow_u64(s.first_record, s.n_records, &next))
            return errbuf_set(err, errlen, CXLP_EBADINPUT,
                              "shard table: shard %llu: first record %llu, %llu records, "
                              "%llu bytes, %llu of data", (unsigned long long)k,
                              (unsigned long long)s.first_record, (unsigned long long)s.n_records,
                              (unsigned long long)s.bytes, (unsigned long long)s.data_len);
        if (k < cap)
            out[k] = s;
    }
    *ds_version = ver;
    *n = cnt;
    return 0;
}

size_t wire_held_encode(uint64_t ds_version, const uint8_t *bits, uint64_t n, uint8_t *buf)
{
    uint64_t nb = n / 8 + (n % 8 != 0);
    if (!buf)
        return (size_t)(16 + nb);
    struct out o = {buf, 0, SIZE_MAX};
    put64(&o, ds_version);
    put64(&o, n);
    put(&o, bits, nb);
    if (n % 8)
        buf[o.n - 1] &= (uint8_t)((1u << (n % 8)) - 1); /* the bits past n: zero */
    return o.n;
}

int wire_held_decode(const void *buf, size_t len, uint64_t *ds_version, uint8_t *bits,
                     size_t cap, uint64_t *n, char *err, size_t errlen)
{
    struct cur c = {buf, len, 0};
    uint64_t ver = get64(&c), cnt = get64(&c);
    uint64_t nb = cnt / 8 + (cnt % 8 != 0);
    if (c.bad || c.left != nb)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "held shards: %llu shards in %zu bytes",
                          (unsigned long long)cnt, len);
    const uint8_t *p = (const uint8_t *)buf + 16;
    if (cnt % 8 && (p[nb - 1] >> (cnt % 8)))
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "held shards: bits set past shard %llu",
                          (unsigned long long)cnt);
    if (bits && nb <= cap)
        memcpy(bits, p, nb);
    *ds_version = ver;
    *n = cnt;
    return 0;
}

size_t wire_meta_encode(const struct wire_meta *m, uint8_t *buf)
{
    struct out o = {buf, 0, SIZE_MAX};
    const struct cxlp_schema *sc = &m->schema;
    put64(&o, m->ds_version);
    put32(&o, (uint32_t)sc->fixed);
    put64(&o, sc->record_size);
    put32(&o, sc->n_fields);
    for (uint32_t i = 0; i < sc->n_fields && i < CXLP_MAX_FIELDS; i++) {
        const struct cxlp_field *f = &sc->fields[i];
        size_t nl = strnlen(f->name, sizeof f->name - 1);
        put16(&o, (uint16_t)nl);
        put(&o, f->name, nl);
        put32(&o, (uint32_t)f->dtype);
        put32(&o, (uint32_t)f->ndim);
        for (int d = 0; d < f->ndim && d < CXLP_MAX_DIMS; d++)
            put64(&o, f->shape[d]);
        put64(&o, f->offset);
    }
    put64(&o, m->n_docs);
    put64(&o, m->docs_checksum);
    return o.n;
}

int wire_meta_decode(const void *buf, size_t len, struct wire_meta *out, char *err,
                     size_t errlen)
{
    struct cur c = {buf, len, 0};
    struct wire_meta m;
    memset(&m, 0, sizeof m);
    m.ds_version = get64(&c);
    uint32_t fixed = get32(&c);
    m.schema.record_size = get64(&c);
    uint32_t nf = get32(&c);
    if (c.bad || fixed > 1 || nf == 0 || nf > CXLP_MAX_FIELDS)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "schema: %s (fixed %u, %u fields; 1..%d)",
                          c.bad ? "truncated" : "bad header", fixed, nf, CXLP_MAX_FIELDS);
    m.schema.fixed = (int)fixed;
    m.schema.n_fields = nf;
    for (uint32_t i = 0; i < nf; i++) {
        struct cxlp_field *f = &m.schema.fields[i];
        uint16_t nl = get16(&c);
        if (c.bad || nl == 0 || nl >= sizeof f->name || c.left < nl)
            return errbuf_set(err, errlen, CXLP_EBADINPUT, "schema: field %u: name of %u bytes "
                              "(1..%zu)", i, nl, sizeof f->name - 1);
        get(&c, f->name, nl);
        f->name[nl] = '\0';
        if (memchr(f->name, '\0', nl))
            return errbuf_set(err, errlen, CXLP_EBADINPUT, "schema: field %u: NUL in its name", i);
        uint32_t dt = get32(&c), nd = get32(&c);
        if (c.bad || dt >= CXLP_DT_COUNT || nd > CXLP_MAX_DIMS)
            return errbuf_set(err, errlen, CXLP_EBADINPUT, "schema: field %u: dtype %u, %u "
                              "dimensions", i, dt, nd);
        f->dtype = (int)dt;
        f->ndim = (int)nd;
        for (uint32_t d = 0; d < nd; d++)
            f->shape[d] = get64(&c);
        f->offset = get64(&c);
        if (c.bad)
            return errbuf_set(err, errlen, CXLP_EBADINPUT, "schema: field %u: truncated", i);
    }
    m.n_docs = get64(&c);
    m.docs_checksum = get64(&c);
    if (c.bad || c.left)
        return errbuf_set(err, errlen, CXLP_EBADINPUT, "meta: %s", c.bad ? "truncated" :
                          "bytes left over");
    *out = m;
    return 0;
}
