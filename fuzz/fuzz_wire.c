/* Fuzz target: the remote pool messages (src/net/wire.c), every decoder of
 * bytes a server or a client takes from the network. The first byte picks
 * the decoder (request, reply, listing, shard table, dataset meta, held shards); the
 * rest is the message. A request or reply that decodes must encode back to the same
 * bytes (the layout has one encoding per message), and a decoded READ must
 * keep its bounds (1..WIRE_READ_MAX bytes, no overflow); a shard table
 * that decodes must be contiguous; a held-shards bitmap must encode back to
 * the same bytes; a meta that decodes must keep its schema's
 * bounds and encode back to the same bytes. */
#include <stdlib.h>
#include <string.h>

#include "net/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const uint8_t *p = data + 1;
    size_t n = size - 1;
    char err[256];
    switch (data[0] % 6) {
    case 0: {
        struct wire_req r;
        uint8_t buf[WIRE_REQ_MAX];
        if (wire_req_decode(p, n, &r, err, sizeof err))
            break;
        if ((r.op == WIRE_READ || r.op == WIRE_DOCS) && (r.len == 0 || r.len > WIRE_READ_MAX || r.off + r.len < r.off))
            abort();
        size_t m = wire_req_encode(&r, buf, sizeof buf);
        if (m != n || memcmp(buf, p, n))
            abort();
        break;
    }
    case 1: {
        struct wire_rep r;
        uint8_t buf[WIRE_REP_MAX];
        if (wire_rep_decode(p, n, &r, err, sizeof err))
            break;
        size_t m = wire_rep_encode(&r, buf, sizeof buf);
        if (m != n || memcmp(buf, p, n))
            abort();
        break;
    }
    case 2: {
        struct cxlp_dataset_info infos[4];
        size_t cnt;
        (void)wire_list_decode(p, n, infos, 4, &cnt, err, sizeof err);
        break;
    }
    case 4: {
        struct wire_meta m;
        if (wire_meta_decode(p, n, &m, err, sizeof err))
            break;
        if (m.schema.n_fields == 0 || m.schema.n_fields > CXLP_MAX_FIELDS)
            abort();
        for (uint32_t i = 0; i < m.schema.n_fields; i++)
            if (m.schema.fields[i].ndim > CXLP_MAX_DIMS || !m.schema.fields[i].name[0] ||
                (unsigned)m.schema.fields[i].dtype >= CXLP_DT_COUNT)
                abort();
        size_t len = wire_meta_encode(&m, NULL);
        uint8_t *buf = malloc(len);
        if (!buf)
            break;
        wire_meta_encode(&m, buf);
        if (len != n || memcmp(buf, p, n))
            abort();
        free(buf);
        break;
    }
    case 3: {
        struct wire_shard t[8];
        uint64_t ver, cnt;
        if (wire_shards_decode(p, n, &ver, t, 8, &cnt, err, sizeof err))
            break;
        for (uint64_t k = 1; k < cnt && k < 8; k++)
            if (t[k].first_record != t[k - 1].first_record + t[k - 1].n_records ||
                t[k].data_len > t[k].bytes)
                abort();
        break;
    }
    case 5: {
        uint8_t bits[16], buf[32];
        uint64_t ver, cnt;
        if (wire_held_decode(p, n, &ver, bits, sizeof bits, &cnt, err, sizeof err))
            break;
        if (wire_held_encode(ver, NULL, cnt, NULL) != n)
            abort();
        if (n <= sizeof buf && (wire_held_encode(ver, bits, cnt, buf) != n || memcmp(buf, p, n)))
            abort();
        break;
    }
    default:
        break;
    }
    return 0;
}
