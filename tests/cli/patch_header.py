#!/usr/bin/env python3
"""Rewrites fields of a pool header the way another build would have written
them, keeping the header checksum valid, so a test meets exactly the check it
aims at. The offsets follow struct pool_hdr (src/pool/pool_format.h):

    0 magic[8] | 8 version u32 | 12 hdr_size u32 | 16 layout_sig u64 |
    24 uuid[16] | 40..131 sizes, offsets, created, media | 132 flags u32 |
    136 expiry_ms u64 | 144 tier counts | 160 tiers[8] | 352 objects[9] |
    2728 checksum u64
    checksum = XXH3-64 of bytes [0, 2728), little-endian

usage: patch_header.py layout POOLFILE   (flips the layout signature)
       patch_header.py version POOLFILE  (format version 99)
       patch_header.py v1 POOLFILE       (format version 1: a pool of before hosts and tiers)
       patch_header.py v2 POOLFILE       (format version 2: a pool of the hosts work, before tiers)
XXH3 comes from the python xxhash module when present, else from xxhsum -H3.
"""
import struct
import subprocess
import sys

CK_OFF = 2728


def xxh3(data):
    try:
        import xxhash
        return xxhash.xxh3_64_intdigest(data)
    except ImportError:
        out = subprocess.run(["xxhsum", "-H3", "-"], input=data, capture_output=True,
                             check=True).stdout.decode()
        return int(out.split("=")[-1].strip() if "=" in out else out.split()[0], 16)


what, path = sys.argv[1], sys.argv[2]
with open(path, "r+b") as f:
    hdr = bytearray(f.read(CK_OFF + 8))
    if hdr[:8] != b"CXLPOOL\0":
        sys.exit("%s: not a pool header" % path)
    (old_ck,) = struct.unpack_from("<Q", hdr, CK_OFF)
    if xxh3(bytes(hdr[:CK_OFF])) != old_ck:
        sys.exit("%s: checksum does not match before patching (format changed?)" % path)
    if what == "layout":
        (sig,) = struct.unpack_from("<Q", hdr, 16)
        struct.pack_into("<Q", hdr, 16, sig ^ 0x5a5a5a5a5a5a5a5a)
    elif what == "version":
        struct.pack_into("<I", hdr, 8, 99)
    elif what in ("v1", "v2"):
        struct.pack_into("<I", hdr, 8, int(what[1]))
    else:
        sys.exit("unknown patch " + what)
    struct.pack_into("<Q", hdr, CK_OFF, xxh3(bytes(hdr[:CK_OFF])))
    f.seek(0)
    f.write(hdr)
