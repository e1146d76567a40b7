#!/usr/bin/env bash
# The main path through the CLI: create, ingest raw / .npy / Megatron, ls,
# stat, cat in every format (the bytes and values match the source), verify,
# rm, destroy. Every --json output parses. No progress bar when stderr is not
# a terminal; one when it is.
source "$(dirname "$0")/lib.sh"
python3 -c 'import numpy' 2>/dev/null || { echo "SKIP: numpy missing"; exit 77; }
python3 "$(dirname "$0")/mkdata.py" "$T" || { fail "mkdata.py"; finish; }

pool_name P rt
expect 0 "" "$CXLPOOL" create "$P" 64M
grep -q "created pool $P" "$T/out" && ok || fail "create output: $(cat "$T/out")"

# raw, with stderr a file: summary on stdout, no progress bar on stderr.
expect 0 "" "$CXLPOOL" ingest "$P" raw "$T/good.raw" --format raw --record-size 256
grep -Eq "ingested raw: 64 records, 16384 bytes .* GB/s" "$T/out" && ok \
  || fail "ingest summary: $(cat "$T/out")"
if grep -q $'\r' "$T/err" || grep -q "ETA" "$T/err"; then fail "progress bar drawn on a non-tty"; else ok; fi
[ ! -s "$T/err" ] && ok || fail "ingest wrote to stderr: $(cat "$T/err")"

expect 0 "" "$CXLPOOL" ingest "$P" arr "$T/good.npy"
expect 0 "" "$CXLPOOL" ingest "$P" f32 "$T/good_f32.npy" --format npy --json
is_json "$T/out"
expect 0 "" "$CXLPOOL" ingest "$P" mt "$T/good_mt" --format megatron
grep -q "6 records" "$T/out" && grep -q "3 documents" "$T/out" && ok || fail "megatron summary: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" ingest "$P" mt2 "$T/good_mt.bin"

# A terminal gets the progress bar (script(1) provides a pty).
if command -v script >/dev/null; then
  script -qec "'$CXLPOOL' ingest '$P' tty '$T/good.raw' --format raw --record-size 64 >/dev/null" \
    "$T/typescript" >/dev/null 2>&1 </dev/null
  grep -q "ETA" "$T/typescript" && grep -q $'\r' "$T/typescript" && ok \
    || fail "no progress bar on a terminal: $(head -c 300 "$T/typescript" | od -c | head)"
  expect 0 "" "$CXLPOOL" ingest "$P" tty2 "$T/good.raw" --format raw --record-size 64 --no-progress
fi

expect 0 "" "$CXLPOOL" ls "$P"
for n in raw arr f32 mt; do grep -q "^$n " "$T/out" && ok || fail "ls lacks $n: $(cat "$T/out")"; done
expect 0 "" "$CXLPOOL" ls "$P" --json
is_json "$T/out"
python3 - "$T/out" <<'PY' && ok || fail "ls --json content: $(cat "$T/out")"
import json, sys
d = {x["name"]: x for x in json.load(open(sys.argv[1]))}
assert d["raw"]["records"] == 64 and d["raw"]["fixed"] and d["raw"]["record_size"] == 256
assert d["arr"]["records"] == 100 and d["arr"]["record_size"] == 48
assert d["mt"]["records"] == 6 and not d["mt"]["fixed"] and d["mt"]["docs"] == 3
assert d["mt"]["data_bytes"] == 47 * 4
PY

expect 0 "" "$CXLPOOL" stat "$P"
grep -q "media: *shm (emulated CXL: local DRAM)" "$T/out" && ok || fail "stat media line: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" stat "$P" --json
is_json "$T/out"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["media"]=="shm" and s["emulated"] and s["datasets"]>=5' "$T/out" \
  && ok || fail "stat --json: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" stat "$P" arr --json
is_json "$T/out"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); f=s["schema"]["fields"][0]; assert f["dtype"]=="int32" and f["shape"]==[3,4], f' "$T/out" \
  && ok || fail "stat arr --json schema: $(cat "$T/out")"

# cat: raw bytes equal the source.
expect 0 "" "$CXLPOOL" cat "$P" raw 5 --format raw
cmp -s "$T/out" <(tail -c +$((5 * 256 + 1)) "$T/good.raw" | head -c 256) && ok || fail "cat raw 5 bytes differ"
expect 0 "" "$CXLPOOL" cat "$P" raw 5 --format hex
grep -q "^00000000  00 01 02 03" "$T/out" && ok || fail "hex dump: $(head -2 "$T/out")"
for i in 0 57 99; do
  expect 0 "" "$CXLPOOL" cat "$P" arr $i --format json
  is_json "$T/out"
  python3 - "$T/out" "$T/good.npy" $i <<'PY' && ok || fail "cat arr $i json values"
import json, sys
import numpy as np
j = json.load(open(sys.argv[1])); a = np.load(sys.argv[2]); i = int(sys.argv[3])
assert j["index"] == i
assert np.array_equal(np.array(j["fields"][0]["values"]), a[i]), (j, a[i])
PY
  expect 0 "" "$CXLPOOL" cat "$P" arr $i --format raw
  python3 -c 'import sys,numpy as np; a=np.load(sys.argv[2]); sys.exit(0 if open(sys.argv[1],"rb").read()==a[int(sys.argv[3])].tobytes() else 1)' \
    "$T/out" "$T/good.npy" $i && ok || fail "cat arr $i raw bytes"
done
expect 0 "" "$CXLPOOL" cat "$P" f32 3 --format json
python3 - "$T/out" "$T/good_f32.npy" <<'PY' && ok || fail "cat f32 json values"
import json, sys
import numpy as np
j = json.load(open(sys.argv[1])); a = np.load(sys.argv[2])
assert np.allclose(np.array(j["fields"][0]["values"], dtype=np.float32), a[3], rtol=1e-7)
PY
# Megatron: record 2 is the third sequence (17 tokens).
expect 0 "" "$CXLPOOL" cat "$P" mt 2 --format json
python3 - "$T/out" "$T/good_mt.bin" <<'PY' && ok || fail "cat mt 2 json: $(cat "$T/out")"
import json, sys
import numpy as np
j = json.load(open(sys.argv[1])); b = np.fromfile(sys.argv[2], dtype=np.int32)
assert j["fields"][0]["values"] == b[6:6 + 17].tolist()
PY
expect 0 "" "$CXLPOOL" cat "$P" mt 2 --format dtype
grep -Eq "int32 17\): \[" "$T/out" && ok || fail "cat dtype: $(cat "$T/out")"

expect 0 "" "$CXLPOOL" verify "$P"
grep -q "^ok: $P verified" "$T/out" && ok || fail "verify output: $(tail -2 "$T/out")"
expect 0 "" "$CXLPOOL" verify "$P" --json
is_json "$T/out"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["ok"] is True and s["items"] > 0' "$T/out" \
  && ok || fail "verify --json: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" verify "$P" --quiet
[ ! -s "$T/out" ] && ok || fail "verify --quiet printed: $(head -3 "$T/out")"

expect 0 "" "$CXLPOOL" bench gather "$P" arr --batch 8 --batches 4 --rounds 3 --json
is_json "$T/out"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert [r["threads"] for r in s["results"]]==[1,2] and all(r["pool_gb_s"]>0 and r["ratio"]>0 for r in s["results"])' "$T/out" \
  && ok || fail "bench --json: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" bench gather "$P" mt --batch 2 --batches 3 --rounds 1 --threads 1,3
grep -q "pool/plain" "$T/out" && ok || fail "bench table: $(cat "$T/out")"

for root in "$DATA"/sysfs/*/; do
  expect 0 "" "$CXLPOOL" topo --json --sysfs-root "$root"
  is_json "$T/out"
done
expect 0 "" "$CXLPOOL" topo
expect 0 "" "$CXLPOOL" topo --json
is_json "$T/out"

expect 0 "" "$CXLPOOL" rm "$P" raw
expect 4 "raw" "$CXLPOOL" cat "$P" raw 0
expect 0 "" "$CXLPOOL" destroy "$P" --yes
expect 4 "" "$CXLPOOL" ls "$P"
finish
