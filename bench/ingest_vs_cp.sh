#!/usr/bin/env bash
# Ingest throughput against cp of the same bytes into /dev/shm, same run.
# For each format in FORMATS (default: raw npy megatron) a SIZE source (default
# 1 GiB of random bytes) is written once:
#   raw       one file, records of RECORD_SIZE bytes (default 4096)
#   npy       a C-order float32 array of shape (N, RECORD_SIZE / 4)
#   megatron  PREFIX.bin + PREFIX.idx: uint16 token sequences of 16..4095
#             tokens, back to back, documents of 1..8 sequences (as
#             Megatron-LM's preprocess_data.py writes them)
# Then ROUNDS rounds (default 5) each time `cp` of the source file(s) into
# /dev/shm, `cxlpool ingest` into a fresh shm pool of POOL_MIB (default twice
# the source: a pool with room, as users have; a pool just the source's size
# hides reservations made ahead) with records on 2 MiB pages (the default),
# and `cxlpool ingest --no-hugepages` (4 KiB pages), every format in every
# round, rotating which goes first.
#
# Before each timed command, untimed and the same for all three: the
# command's sources are read again (cat > /dev/null) so they are in the page
# cache whatever reclaim did meanwhile, fincore then says how much of them is
# resident (printed: the least seen before any command), and SETTLE seconds
# (default 0) pass. On a VM with free page reporting (virtio-balloon; the
# script says whether this kernel has it), 2 MiB blocks the guest frees go
# back to the host about 2 s later and the next allocation of them faults on
# the host; SETTLE=5 makes every command start from that state, SETTLE=0 lets
# each take what the previous command freed.
#
# REUSE=1 (the default) ingests every round into one pool that held the
# dataset before (an untimed ingest first): `cxlpool rm` then `ingest`, as a
# user refreshes a dataset; the pool keeps the extents rm frees (it never
# hands them back to the kernel), so the ingest writes pages that are
# already there. REUSE=0 makes a fresh pool for every ingest (each then
# faults in pages the kernel may have handed back to the host).
#
# Wall time and CPU time (user + system, /usr/bin/time) of each whole
# command (process start to exit) count; pool creation is not timed. Prints
# per format the medians, the ratio of the medians' throughputs, the median
# of the per-round ratios (each round's commands run back to back and share
# that moment's load, so on a busy machine this one is the steadier figure),
# and the same two ratios of CPU time. Target: ingest throughput >= 0.70 of
# cp's.
#
# GATHER=1 then checks what the default ingest gives a reader: the raw
# source ingested once by default and once with --no-hugepages, `cxlpool
# stat` of both (the page sizes), and `cxlpool bench gather` (pool gather
# against a plain memcpy of the same records, same run) on the default one
# as it is, on the --no-hugepages one as it is, and on the --no-hugepages one
# with --hugepages (moved onto 2 MiB pages first: the opt-in path's figure).
#
# usage: bench/ingest_vs_cp.sh [SIZE_MIB] [ROUNDS] [FORMATS]
#        (CXLPOOL: the binary, default build/cxlpool; BENCH_DIR: where sources
#        go; SETTLE, POOL_MIB, GATHER as above)
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-1024}
ROUNDS=${2:-5}
FORMATS=${3:-raw npy megatron}
X=${CXLPOOL:-build/cxlpool}
REC=${RECORD_SIZE:-4096}
DIR=${BENCH_DIR:-${TMPDIR:-/tmp}}
SETTLE=${SETTLE:-0}
POOL_MIB=${POOL_MIB:-$((2 * MIB + 64))}
GATHER=${GATHER:-0}
REUSE=${REUSE:-1}
SRCDIR=$(mktemp -d "$DIR/cxlp-bench-src.XXXXXX")
DST="/dev/shm/cxlp-bench-cp.$$"
POOL="cxlp-bench-ingest.$$"
TIMES="$SRCDIR/times"
RESIDENT="$SRCDIR/resident"
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

if [ -d /sys/module/page_reporting ]; then
  reporting="free page reporting: on (page_reporting_order $(cat /sys/module/page_reporting/parameters/page_reporting_order 2>/dev/null || echo '?'))"
else
  reporting="free page reporting: not in this kernel"
fi
load0=$(cut -d' ' -f1-3 /proc/loadavg)

srcs() {
  case $1 in
    raw) echo "$SRCDIR/src.raw" ;;
    npy) echo "$SRCDIR/src.npy" ;;
    megatron) echo "$SRCDIR/src.bin $SRCDIR/src.idx" ;;
  esac
}
# Untimed, before every timed command: its sources into the page cache, how
# much of them is resident, then SETTLE seconds.
prepare() {
  local f res size
  for f in $(srcs "$1"); do
    cat "$f" >/dev/null
    read -r res size < <(fincore --bytes --noheadings --output RES,SIZE "$f")
    echo "$1 $res $size" >>"$RESIDENT"
  done
  sleep "$SETTLE"
}
# Runs a command with wall and CPU time appended to TIMES as
# "format label wall cpu".
timed() { # format, label, command...
  local a b cpu
  a=$EPOCHREALTIME
  /usr/bin/time -f "%U %S" -o "$SRCDIR/cpu" "${@:3}" >/dev/null
  b=$EPOCHREALTIME
  cpu=$(awk '{print $1 + $2}' "$SRCDIR/cpu")
  echo "$1 $2 $(awk -v a="$a" -v b="$b" 'BEGIN {print b - a}') $cpu" >>"$TIMES"
}
time_cp() {
  rm -rf "$DST"; mkdir "$DST"
  prepare "$1"
  timed "$1" cp cp $(srcs "$1") "$DST/"
  rm -rf "$DST"
}
time_ingest() { # format, label, extra args
  local args
  case $1 in
    raw) args=("$SRCDIR/src.raw" --format raw --record-size "$REC") ;;
    npy) args=("$SRCDIR/src.npy" --format npy) ;;
    megatron) args=("$SRCDIR/src" --format megatron) ;;
  esac
  if [ "$REUSE" = 1 ]; then
    if ! "$X" stat "$POOL" >/dev/null 2>&1; then
      "$X" create "$POOL" "${POOL_MIB}M" >/dev/null
      "$X" ingest "$POOL" data "${args[@]}" --no-progress >/dev/null # untimed: the pool held it
    fi
    "$X" rm "$POOL" data >/dev/null
  else
    "$X" destroy "$POOL" --yes >/dev/null 2>&1 || true
    "$X" create "$POOL" "${POOL_MIB}M" >/dev/null
  fi
  prepare "$1"
  timed "$1" "$2" "$X" ingest "$POOL" data "${args[@]}" "${@:3}" --no-progress
  [ "$REUSE" = 1 ] || "$X" destroy "$POOL" --yes >/dev/null
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
load1=$(cut -d' ' -f1-3 /proc/loadavg)
sizes=""
for f in $FORMATS; do sizes+="$f=$(cat $(srcs "$f") | wc -c) "; done
python3 - "$TIMES" "$RESIDENT" "$MIB" "$REC" "$ROUNDS" "$sizes" "$SETTLE" "$POOL_MIB" \
  "$reporting" "$load0" "$load1" <<'PY'
import statistics, sys
times, resident, mib, rec, rounds, sizes, settle, pool_mib, reporting, load0, load1 = sys.argv[1:12]
nbytes = dict(kv.split("=") for kv in sizes.split())
t = {}
for line in open(times):
    f, what, wall, cpu = line.split()
    t.setdefault(f, {}).setdefault(what, []).append((float(wall), float(cpu)))
res = {}
for line in open(resident):
    f, r, s = line.split()
    res[f] = min(res.get(f, 1.0), int(r) / int(s) if int(s) else 1.0)
print(f"ingest vs cp into /dev/shm: {mib} MiB sources, {rounds} rounds, cp, ingest and "
      f"ingest --no-hugepages rotating first; pools of {pool_mib} MiB; before each command "
      f"its sources re-read and {settle} s pause (untimed); {reporting}; "
      f"load average {load0} before, {load1} after")
for f in t:
    n = int(nbytes[f])
    cp = t[f]["cp"]
    cw = [w for w, _ in cp]
    cc = [c for _, c in cp]
    mc, mcc = statistics.median(cw), statistics.median(cc)
    desc = {"raw": f"records of {rec} B", "npy": f"float32 rows of {rec} B",
            "megatron": ".bin + .idx, uint16 sequences of 16..4095 tokens"}[f]
    print(f"{f}: {n} bytes, {desc}; sources resident before every command: "
          f">= {100 * res.get(f, 0):.1f}% (fincore)")
    fmt = lambda xs: " ".join(f"{x:.3f}" for x in xs)
    print(f"  cp          : median {mc:.3f} s  {n / mc / 1e9:.2f} GB/s, CPU {mcc:.3f} s  "
          f"(rounds: {fmt(cw)}; CPU {fmt(cc)})")
    for what, label in (("ingest", "cxlpool ingest (2 MiB pages)"),
                        ("ingest4k", "cxlpool ingest --no-hugepages")):
        ing = t[f][what]
        iw = [w for w, _ in ing]
        ic = [c for _, c in ing]
        mi, mic = statistics.median(iw), statistics.median(ic)
        print(f"  {label}: median {mi:.3f} s  {n / mi / 1e9:.2f} GB/s, CPU {mic:.3f} s  "
              f"(rounds: {fmt(iw)}; CPU {fmt(ic)})")
        rw = [c / i for c, i in zip(cw, iw)]
        rc = [c / i for c, i in zip(cc, ic)]
        print(f"    ratio to cp throughput: {mc / mi:.2f} of medians, {statistics.median(rw):.2f} "
              f"median per round ({min(rw):.2f}-{max(rw):.2f}) (target >= 0.70); per CPU "
              f"second: {mcc / mic:.2f} of medians, {statistics.median(rc):.2f} per round "
              f"({min(rc):.2f}-{max(rc):.2f})")
PY

if [ "$GATHER" = 1 ] && [[ " $FORMATS " == *" raw "* ]]; then
  echo
  echo "gather after ingest (raw, $REC B records): default ingest vs --no-hugepages vs --no-hugepages + --hugepages; load average $(cut -d' ' -f1-3 /proc/loadavg)"
  "$X" destroy "$POOL" --yes >/dev/null 2>&1 || true
  "$X" create "$POOL" $((3 * MIB + 256))M >/dev/null
  "$X" ingest "$POOL" fresh "$SRCDIR/src.raw" --format raw --record-size "$REC" --no-progress
  "$X" ingest "$POOL" small "$SRCDIR/src.raw" --format raw --record-size "$REC" --no-progress --no-hugepages
  "$X" stat "$POOL" fresh | grep -E '^ *pages'
  "$X" stat "$POOL" small | grep -E '^ *pages'
  echo "-- default ingest, no flag:"
  "$X" bench gather "$POOL" fresh --rounds "$ROUNDS"
  echo "-- --no-hugepages ingest, no flag:"
  "$X" bench gather "$POOL" small --rounds "$ROUNDS"
  echo "-- --no-hugepages ingest, bench --hugepages (moved onto 2 MiB pages first):"
  "$X" bench gather "$POOL" small --rounds "$ROUNDS" --hugepages
  "$X" destroy "$POOL" --yes >/dev/null
fi
