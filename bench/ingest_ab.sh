#!/usr/bin/env bash
# Ingest of one raw file by two or more cxlpool binaries, alternating in
# each round: wall, user and system seconds of each whole `cxlpool ingest`
# (4 KiB pages), then per binary the medians and the median of the
# per-round wall ratios to the first binary. The source (SIZE_MIB of random
# bytes, default 1024, records of RECORD_SIZE bytes, default 4096) is read
# before each ingest so it sits in the page cache; pool creation is not timed.
#
# usage: bench/ingest_ab.sh CXLPOOL_A CXLPOOL_B [CXLPOOL_C ...]
#        (ROUNDS: default 5; BENCH_DIR: where the source goes, default /var/tmp)
set -euo pipefail
(($# >= 2)) || { echo "usage: $0 CXLPOOL_A CXLPOOL_B [...]" >&2; exit 2; }
MIB=${SIZE_MIB:-1024}
ROUNDS=${ROUNDS:-5}
REC=${RECORD_SIZE:-4096}
DIR=${BENCH_DIR:-/var/tmp}
SRC=$(mktemp "$DIR/cxlp-ab-src.XXXXXX")
TIMES=$(mktemp "$DIR/cxlp-ab-times.XXXXXX")
POOL="cxlp-ab-ingest.$$"
cleanup() {
  rm -f "$SRC" "$TIMES"
  for x in "$@"; do "$x" destroy "shm:$POOL" --yes >/dev/null 2>&1 || true; done
}
trap 'cleanup "$@"' EXIT
head -c $((MIB << 20)) /dev/urandom >"$SRC"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for ((r = 1; r <= ROUNDS; r++)); do
  for ((k = 1; k <= $#; k++)); do
    x=${!k}
    "$x" create "shm:$POOL" $((MIB + MIB / 8 + 64))M >/dev/null
    cat "$SRC" >/dev/null
    t=$( { /usr/bin/time -f "%e %U %S" "$x" ingest "shm:$POOL" d "$SRC" --format raw \
           --record-size "$REC" --no-hugepages --no-progress >/dev/null; } 2>&1 | tail -1)
    echo "round $r binary $k ($x) wall/user/sys $t"
    echo "$r $k $t" >>"$TIMES"
    "$x" destroy "shm:$POOL" --yes >/dev/null
  done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$TIMES" "$@" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
bins = sys.argv[2:]
t = {(int(r), int(k)): (float(w), float(u), float(s)) for r, k, w, u, s in rows}
rounds = sorted({r for r, _ in t})
for k, x in enumerate(bins, 1):
    w = [t[r, k][0] for r in rounds]
    u = [t[r, k][1] for r in rounds]
    s = [t[r, k][2] for r in rounds]
    ratio = [t[r, k][0] / t[r, 1][0] for r in rounds]
    print(f"{x}: wall median {st.median(w):.2f} s ({min(w):.2f}..{max(w):.2f}), user {st.median(u):.2f} "
          f"({min(u):.2f}..{max(u):.2f}), sys {st.median(s):.2f}; wall / first binary's per round: "
          f"median {st.median(ratio):.3f} ({min(ratio):.3f}..{max(ratio):.3f})")
PY
