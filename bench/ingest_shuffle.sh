#!/usr/bin/env bash
# What --shuffle costs an ingest: `cxlpool ingest` of one SIZE raw file
# (default 1 GiB of random bytes, in /var/tmp) with and without --shuffle,
# for each record size in RECORD_SIZES (default 128 4096 1048576: records
# copied from the mapped input, and from 64 KiB up one pread each), ROUNDS
# rounds (default 3), the two orders alternating which goes first, into one
# shm pool (the dataset removed between runs). Before each timed ingest the
# file is read again (cat > /dev/null) and `fincore` prints how much of it is
# in the page cache: the figures are of an input in memory, not of a disk.
#
#   bash bench/ingest_shuffle.sh [BUILD_DIR]     (default build)
set -euo pipefail
B=${1:-build}
X="$B/cxlpool"
SIZE=${SIZE:-1G}
ROUNDS=${ROUNDS:-3}
RECORD_SIZES=${RECORD_SIZES:-128 4096 1048576}
SRC=$(mktemp /var/tmp/ingest_shuffle.XXXXXX)
P="shm:ingshuf.$$"
trap 'rm -f "$SRC"; "$X" destroy "$P" --yes >/dev/null 2>&1 || true' EXIT
head -c "$SIZE" /dev/urandom >"$SRC"
bytes=$(stat -c %s "$SRC")
"$X" create "$P" $((bytes / 1048576 + 256))M >/dev/null
echo "source $SRC: $bytes bytes; $(nproc) CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
run() { # run RS ARGS...: prints seconds of one ingest
  local rs=$1; shift
  cat "$SRC" >/dev/null
  fincore -n -o RES,SIZE "$SRC" | awk '{print "    page cache:", $1, "of", $2}' >&2
  "$X" ingest "$P" d "$SRC" --record-size "$rs" --json --no-progress "$@" |
    python3 -c 'import json,sys; print(json.load(sys.stdin)["seconds"])'
  "$X" rm "$P" d >/dev/null
}
for rs in $RECORD_SIZES; do
  plain=(); shuf=()
  for ((r = 0; r < ROUNDS; r++)); do
    if ((r % 2 == 0)); then
      plain+=("$(run "$rs")"); shuf+=("$(run "$rs" --shuffle "$r")")
    else
      shuf+=("$(run "$rs" --shuffle "$r")"); plain+=("$(run "$rs")")
    fi
  done
  python3 - "$rs" "$bytes" "${plain[*]}" "${shuf[*]}" <<'PY'
import statistics, sys
rs, n = int(sys.argv[1]), int(sys.argv[2])
p = [float(x) for x in sys.argv[3].split()]
s = [float(x) for x in sys.argv[4].split()]
mp, ms = statistics.median(p), statistics.median(s)
print(f"| {rs} | {n // rs} | {mp:.3f} ({min(p):.3f}-{max(p):.3f}) | "
      f"{ms:.3f} ({min(s):.3f}-{max(s):.3f}) | {ms / mp:.2f} | {n / ms / 1e9:.2f} |")
PY
done
