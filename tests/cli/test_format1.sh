#!/usr/bin/env bash
# Datasets written by the build before shard format 2 (tests/data/
# shard-format1.bin.xz: `cxlpool create file:... 4M --catalog-bytes 64K`, then
# a .npy of 5x3x4 int32, 1 KiB of raw uint16 records of 64 bytes and a
# Megatron dataset of 5 uint16 sequences in 2 documents, in shard format 1;
# its pool metadata brought to pool format 2 by bench/pool_meta_v2, as the
# hosts build writes it) still open: ls, stat, every record's values,
# verify; and new datasets go in beside the old ones.
source "$(dirname "$0")/lib.sh"
F="$T/shard-format1.bin"
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
  "$DATA/shard-format1.bin.xz" "$F" || { fail "unpacking the pool image"; finish; }
P="file:$F"
expect 0 "" "$CXLPOOL" ls "$P"
grep -Eq "^arr +5 fixed 48 B" "$T/out" && grep -Eq "^raw +16 fixed 64 B" "$T/out" \
  && grep -Eq "^mt +5 variable" "$T/out" && ok || fail "ls: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" verify "$P"
grep -q "dataset mt: ok: 5 records, 34 bytes" "$T/out" && ok || fail "verify: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" cat "$P" arr 4 --format json
python3 - "$T/out" <<'PYEOF' && ok || fail "arr 4: $(cat "$T/out")"
import json, sys
r = json.load(open(sys.argv[1]))
want = [[[(48 + 4 * i + j) * 7 - 5 for j in range(4)] for i in range(3)]]
assert r["fields"][0]["values"] == want[0], r
PYEOF
expect 0 "" "$CXLPOOL" cat "$P" mt 4 --format json
grep -q '"values": \[400, 401, 402, 403, 404, 405, 406\]' "$T/out" && ok || fail "mt 4: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" cat "$P" mt 1 --format json
grep -q '"values": \[\]' "$T/out" && ok || fail "mt 1: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" cat "$P" raw 3 --format raw
python3 -c 'import sys; b = open(sys.argv[1], "rb").read(); assert b == bytes(range(192, 256)), b' "$T/out" \
  && ok || fail "raw 3 bytes"
expect 0 "" "$CXLPOOL" stat "$P" mt
grep -q "tokens           uint16   \[variable\]" "$T/out" && ok || fail "stat mt: $(cat "$T/out")"
# a dataset of the current format beside them
head -c 640 /dev/urandom > "$T/new.raw"
expect 0 "" "$CXLPOOL" ingest "$P" new "$T/new.raw" --record-size 64
expect 0 "" "$CXLPOOL" verify "$P"
finish
