#!/usr/bin/env bash
# Ingest throughput against cp of the same bytes into /dev/shm, same run.
# A SIZE raw file (default 1 GiB) is written once and read once so it sits in
# the page cache; then ROUNDS rounds (default 5) each time `cp SRC
# /dev/shm/...` and `cxlpool ingest` into a fresh shm pool, alternating which
# goes first. Prints both medians and the ratio ingest/cp (target >= 0.70),
# as a ratio of the medians and as the median of each round's pair (the two
# commands of a round run back to back and share that moment's noise).
# Wall time of each whole command (process start to exit) is what counts.
#
# usage: bench/ingest_vs_cp.sh [SIZE_MIB] [ROUNDS]   (CXLPOOL: the binary)
set -euo pipefail
cd "$(dirname "$0")/.."
MIB=${1:-1024}
ROUNDS=${2:-5}
X=${CXLPOOL:-build/cxlpool}
REC=${RECORD_SIZE:-4096}
DIR=${BENCH_DIR:-${TMPDIR:-/tmp}}
SRC="$DIR/cxlp-bench-src.$$.raw"
DST="/dev/shm/cxlp-bench-cp.$$"
POOL="cxlp-bench-ingest.$$"
cleanup() { rm -f "$SRC" "$DST"; "$X" destroy "$POOL" --yes >/dev/null 2>&1 || true; }
trap cleanup EXIT

head -c $((MIB << 20)) /dev/urandom >"$SRC"
cat "$SRC" >/dev/null
BYTES=$((MIB << 20))

t_cp=(); t_in=()
now() { echo "$EPOCHREALTIME"; }
time_cp() {
  rm -f "$DST"
  local a b; a=$(now); cp "$SRC" "$DST"; b=$(now)
  t_cp+=("$a,$b")
  rm -f "$DST"
}
time_ingest() {
  "$X" destroy "$POOL" --yes >/dev/null 2>&1 || true
  "$X" create "$POOL" $((MIB + 64))M >/dev/null
  local a b; a=$(now)
  "$X" ingest "$POOL" data "$SRC" --format raw --record-size "$REC" --no-progress >/dev/null
  b=$(now)
  t_in+=("$a,$b")
  "$X" destroy "$POOL" --yes >/dev/null
}
for ((r = 0; r < ROUNDS; r++)); do
  if ((r % 2 == 0)); then time_cp; time_ingest; else time_ingest; time_cp; fi
done
python3 - "$BYTES" "${t_cp[*]}" "${t_in[*]}" "$MIB" "$REC" <<'PY'
import statistics, sys
n = int(sys.argv[1])
def secs(s):
    return [float(b) - float(a) for a, b in (x.split(",") for x in s.split())]
cp, ing = secs(sys.argv[2]), secs(sys.argv[3])
mc, mi = statistics.median(cp), statistics.median(ing)
print(f"ingest vs cp: {sys.argv[4]} MiB raw file in page cache, records of {sys.argv[5]} B, "
      f"{len(cp)} rounds alternating")
print(f"  cp SRC /dev/shm/x : median {mc:.3f} s  {n / mc / 1e9:.2f} GB/s  (rounds: {' '.join(f'{x:.3f}' for x in cp)})")
print(f"  cxlpool ingest    : median {mi:.3f} s  {n / mi / 1e9:.2f} GB/s  (rounds: {' '.join(f'{x:.3f}' for x in ing)})")
pairs = statistics.median(c / i for c, i in zip(cp, ing))
print(f"  ratio ingest/cp throughput: {mc / mi:.2f} of the medians, {pairs:.2f} median of "
      f"the per-round pairs (target >= 0.70)")
PY
