#!/usr/bin/env bash
# Ingest throughput against cp of the same bytes into /dev/shm, same run.
# For each format in FORMATS (default: raw npy megatron) a SIZE source (default
# 1 GiB of random bytes) is written once and read once so it sits in the page
# cache:
#   raw       one file, records of RECORD_SIZE bytes (default 4096)
#   npy       a C-order float32 array of shape (N, RECORD_SIZE / 4)
#   megatron  PREFIX.bin + PREFIX.idx: uint16 token sequences of 16..4095
#             tokens, back to back, documents of 1..8 sequences (as
#             Megatron-LM's preprocess_data.py writes them)
# Then ROUNDS rounds (default 5) each time `cp` of the source file(s) into
# /dev/shm, `cxlpool ingest` into a fresh shm pool (records on 2 MiB pages,
# the default) and `cxlpool ingest --no-hugepages` (4 KiB pages), every
# format in every round, rotating which goes first. Wall time of each whole
# command (process start to exit) counts; pool creation is not timed. Prints
# per format the medians, the ratio of the medians' throughputs, and the
# median of the per-round ratios (each round's commands run back to back
# and share that moment's load, so on a busy machine this one is the steadier
# figure). Target: ingest throughput >= 0.70 of cp's.
#
# usage: bench/ingest_vs_cp.sh [SIZE_MIB] [ROUNDS] [FORMATS]
#        (CXLPOOL: the binary, default build/cxlpool; BENCH_DIR: where sources go)
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-1024}
ROUNDS=${2:-5}
FORMATS=${3:-raw npy megatron}
X=${CXLPOOL:-build/cxlpool}
REC=${RECORD_SIZE:-4096}
DIR=${BENCH_DIR:-${TMPDIR:-/tmp}}
SRCDIR=$(mktemp -d "$DIR/cxlp-bench-src.XXXXXX")
DST="/dev/shm/cxlp-bench-cp.$$"
POOL="cxlp-bench-ingest.$$"
TIMES="$SRCDIR/times"
cleanup() {
  rm -rf "$SRCDIR" "$DST"
  "$X" destroy "$POOL" --yes >/dev/null 2>&1 || true
}
trap cleanup EXIT

python3 - "$SRCDIR" "$MIB" "$REC" "$FORMATS" <<'PY'
import os, struct, sys
import numpy as np
d, mib, rec, formats = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4].split()
size = mib << 20
rng = np.random.default_rng(7)
def randbytes(n, f):
    step = 64 << 20
    for o in range(0, n, step):
        f.write(rng.integers(0, 256, size=min(step, n - o), dtype=np.uint8).tobytes())
if "raw" in formats:
    with open(f"{d}/src.raw", "wb") as f:
        randbytes(size // rec * rec, f)
if "npy" in formats:
    n = size // rec
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (n, rec // 4)
    hdr += " " * (-(10 + len(hdr) + 1) % 64) + "\n"
    with open(f"{d}/src.npy", "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        randbytes(n * rec, f)
if "megatron" in formats:
    lens = []
    total = 0
    while total < size:
        k = int(rng.integers(16, 4096))
        k = min(k, (size - total) // 2) or 1
        lens.append(k)
        total += 2 * k
    lens = np.array(lens, dtype=np.int32)
    ptrs = np.zeros(len(lens), dtype=np.int64)
    ptrs[1:] = np.cumsum(lens[:-1].astype(np.int64) * 2)
    docs = [0]
    while docs[-1] < len(lens):
        docs.append(min(len(lens), docs[-1] + int(rng.integers(1, 9))))
    with open(f"{d}/src.bin", "wb") as f:
        randbytes(total, f)
    with open(f"{d}/src.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QBQQ", 1, 8, len(lens), len(docs)))
        f.write(lens.tobytes())
        f.write(ptrs.tobytes())
        f.write(np.array(docs, dtype=np.int64).tobytes())
PY
cat "$SRCDIR"/src.* >/dev/null

srcs() {
  case $1 in
    raw) echo "$SRCDIR/src.raw" ;;
    npy) echo "$SRCDIR/src.npy" ;;
    megatron) echo "$SRCDIR/src.bin $SRCDIR/src.idx" ;;
  esac
}
now() { echo "$EPOCHREALTIME"; }
time_cp() {
  rm -rf "$DST"; mkdir "$DST"
  local a b; a=$(now); cp $(srcs "$1") "$DST/"; b=$(now)
  echo "$1 cp $a $b" >>"$TIMES"
  rm -rf "$DST"
}
time_ingest() { # format, label, extra args
  local args
  case $1 in
    raw) args=("$SRCDIR/src.raw" --format raw --record-size "$REC") ;;
    npy) args=("$SRCDIR/src.npy" --format npy) ;;
    megatron) args=("$SRCDIR/src" --format megatron) ;;
  esac
  "$X" destroy "$POOL" --yes >/dev/null 2>&1 || true
  "$X" create "$POOL" $((MIB + 64))M >/dev/null
  local a b; a=$(now)
  "$X" ingest "$POOL" data "${args[@]}" "${@:3}" --no-progress >/dev/null
  b=$(now)
  echo "$1 $2 $a $b" >>"$TIMES"
  "$X" destroy "$POOL" --yes >/dev/null
}
for ((r = 0; r < ROUNDS; r++)); do
  for f in $FORMATS; do
    case $((r % 3)) in
      0) time_cp "$f"; time_ingest "$f" ingest; time_ingest "$f" ingest4k --no-hugepages ;;
      1) time_ingest "$f" ingest; time_ingest "$f" ingest4k --no-hugepages; time_cp "$f" ;;
      2) time_ingest "$f" ingest4k --no-hugepages; time_cp "$f"; time_ingest "$f" ingest ;;
    esac
  done
done
sizes=""
for f in $FORMATS; do sizes+="$f=$(cat $(srcs "$f") | wc -c) "; done
python3 - "$TIMES" "$MIB" "$REC" "$ROUNDS" "$sizes" <<'PY'
import statistics, sys
times, mib, rec, rounds, sizes = sys.argv[1:6]
nbytes = dict(kv.split("=") for kv in sizes.split())
t = {}
for line in open(times):
    f, what, a, b = line.split()
    t.setdefault(f, {}).setdefault(what, []).append(float(b) - float(a))
print(f"ingest vs cp into /dev/shm: {mib} MiB sources in page cache, {rounds} rounds, "
      f"cp, ingest and ingest --no-hugepages rotating first")
for f in t:
    n = int(nbytes[f])
    cp = t[f]["cp"]
    mc = statistics.median(cp)
    desc = {"raw": f"records of {rec} B", "npy": f"float32 rows of {rec} B",
            "megatron": ".bin + .idx, uint16 sequences of 16..4095 tokens"}[f]
    print(f"{f}: {n} bytes, {desc}")
    print(f"  cp          : median {mc:.3f} s  {n / mc / 1e9:.2f} GB/s  (rounds: {' '.join(f'{x:.3f}' for x in cp)})")
    for what, label in (("ingest", "cxlpool ingest (2 MiB pages)"),
                        ("ingest4k", "cxlpool ingest --no-hugepages")):
        ing = t[f][what]
        mi = statistics.median(ing)
        print(f"  {label}: median {mi:.3f} s  {n / mi / 1e9:.2f} GB/s  (rounds: {' '.join(f'{x:.3f}' for x in ing)})")
        paired = statistics.median(c / i for c, i in zip(cp, ing))
        print(f"    ratio to cp throughput: {mc / mi:.2f} of medians, {paired:.2f} median per round (target >= 0.70)")
PY
