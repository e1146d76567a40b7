#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_wire: valid messages of each kind, laid
out as src/net/wire.h says (little-endian), each behind the byte that picks
its decoder (0 request, 1 reply, 2 listing, 3 shard table, 4 dataset meta).
Run from the repository root: python3 fuzz/gen_wire_corpus.py
"""
import os
import struct

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz_wire")
os.makedirs(root, exist_ok=True)


def put(name, sel, data):
    with open(os.path.join(root, name), "wb") as f:
        f.write(bytes([sel]) + data)


def req(op, rid, name=b"", token=b"", read=None):
    b = struct.pack("<IHHQ", 0x51525843, 1, op, rid)
    b += struct.pack("<H", len(name)) + name + struct.pack("<H", len(token)) + token
    if read:
        b += struct.pack("<QQQQ", *read)
    return b


def rep(op, rid, status=0, msg=b"", payload=0):
    return (struct.pack("<IHHQi", 0x53525843, 1, op, rid, status) +
            struct.pack("<H", len(msg)) + msg + struct.pack("<Q", payload))


put("req_hello", 0, req(1, 1, b"pool", b"secret-token"))
put("req_list", 0, req(2, 2))
put("req_shards", 0, req(3, 3, b"ds"))
put("req_read", 0, req(4, 4, b"ds", read=(7, 2, 4096, 65536)))
put("req_read_max", 0, req(4, 5, b"d" * 63, read=(1, 0, 0, 16 << 20)))
put("rep_ok", 1, rep(4, 4, 0, b"", 65536))
put("rep_err", 1, rep(3, 3, -30004, b"no dataset 'x' in pool p"))
put("rep_op0", 1, rep(0, 0, -30009, b"request: bad magic 0x00000000"))
ent = lambda name, *v: struct.pack("<H", len(name)) + name + struct.pack("<QQQQIIQQQ", *v)
put("list_two", 2, struct.pack("<I", 2) + ent(b"ds", 7, 3000, 3000000, 3100000, 12, 1, 1000,
                                              0, 1765000000) +
    ent(b"tokens", 9, 10, 400, 8192, 1, 0, 0, 10, 1765000001))
put("list_empty", 2, struct.pack("<I", 0))
sh = struct.pack("<QQ", 7, 3)
first = 0
for k in range(3):
    sh += struct.pack("<QQQQQ", first, 250, 262144, 250000, 0x1234567890abcdef + k)
    first += 250
put("shards_three", 3, sh)
put("shards_none", 3, struct.pack("<QQ", 1, 0))
put("req_meta", 0, req(5, 6, b"ds"))
put("req_docs", 0, req(6, 7, b"ds", read=(7, 0, 0, 4096)))
put("rep_meta", 1, rep(5, 6, 0, b"", 120))


def field(name, dtype, shape, off):
    return (struct.pack("<H", len(name)) + name + struct.pack("<II", dtype, len(shape)) +
            b"".join(struct.pack("<Q", d) for d in shape) + struct.pack("<Q", off))


put("meta_fixed", 4, struct.pack("<QIQI", 7, 1, 40, 2) + field(b"x", 10, [4, 2], 0) +
    field(b"y", 7, [], 32) + struct.pack("<QQ", 0, 0))
put("meta_var_docs", 4, struct.pack("<QIQI", 9, 0, 0, 1) + field(b"tokens", 4, [0], 0) +
    struct.pack("<QQ", 10, 0x0123456789abcdef))
