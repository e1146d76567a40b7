#!/usr/bin/env bash
# Edges of the CLI that once hung or let odd input through (issue 12):
#   issue 12 item 7: a FIFO as the source of an ingest, and a FIFO planted
#     where a pool should be, are refused at once with a message naming the
#     path (no command blocks on the FIFO);
#   issue 12 item 16: an empty source (an empty file, a /proc file whose size
#     reads 0) is refused with CXLP_EBADINPUT "no records" unless
#     --allow-empty; the dataset names "." and ".." are refused like "/".
# Every command runs under `timeout`: a hang is a failure, not a stuck CI.
source "$(dirname "$0")/lib.sh"

# run CODE PATTERN CMD...: expect under a 20 s timeout (124 = it hung).
run() {
  local want=$1 pat=$2; shift 2
  expect "$want" "$pat" timeout 10 "$@"
}

pool_name P edges
run 0 "" "$CXLPOOL" create "$P" 16M
head -c 4096 /dev/urandom >"$T/good.raw"
run 0 "" "$CXLPOOL" ingest "$P" keep "$T/good.raw" --record-size 512 --no-progress
state "$P" >"$T/before"

# --- issue 12 item 7: FIFOs ---------------------------------------------
mkfifo "$T/fifo"
run 1 "fifo.*(not a regular file|FIFO)" "$CXLPOOL" ingest "$P" f1 "$T/fifo" --format raw --record-size 4 --no-progress
grep -q CXLP_EBADINPUT "$T/err" && ok || fail "FIFO source: not CXLP_EBADINPUT: $(cat "$T/err")"
# format auto sniffs the file's first bytes: that must not block either
run 1 "fifo.*(not a regular file|FIFO)" "$CXLPOOL" ingest "$P" f2 "$T/fifo" --record-size 4 --no-progress
run 1 "fifo.*(not a regular file|FIFO)" "$CXLPOOL" ingest "$P" f3 "$T/fifo" --format npy --no-progress
unchanged "$P" "$T/before" "FIFO sources"

# a FIFO where a pool should be: shm name and file: path
pool_name Q planted
mkfifo "/dev/shm/cxlp.$Q"
run 3 "cxlp\.$Q.*FIFO" "$CXLPOOL" verify "$Q"
for cmd in ls stat; do
  run 1 "cxlp\.$Q.*FIFO" "$CXLPOOL" "$cmd" "$Q"
done
run 1 "cxlp\.$Q.*FIFO" "$CXLPOOL" ingest "$Q" x "$T/good.raw" --record-size 512 --no-progress
rm -f "/dev/shm/cxlp.$Q"
run 1 "fifo.*FIFO" "$CXLPOOL" ls "file:$T/fifo"
run 3 "fifo.*FIFO" "$CXLPOOL" verify "file:$T/fifo"

# --- issue 12 item 16: empty sources, "." and ".." -------------------
: >"$T/empty.raw"
run 1 "empty\.raw.*no records" "$CXLPOOL" ingest "$P" e1 "$T/empty.raw" --record-size 8 --no-progress
grep -q CXLP_EBADINPUT "$T/err" && ok || fail "empty source: not CXLP_EBADINPUT: $(cat "$T/err")"
# a /proc file reads as size 0 to stat: no records either, not an empty dataset
run 1 "/proc/self/status.*no records" "$CXLPOOL" ingest "$P" e2 /proc/self/status --record-size 1 --no-progress
unchanged "$P" "$T/before" "empty sources"
# an empty .npy (shape (0, 4)) holds no records as well
python3 -c 'import numpy as np; np.save("'"$T"'/empty.npy", np.zeros((0, 4), dtype=np.float32))' 2>/dev/null &&
  run 1 "empty\.npy.*no records" "$CXLPOOL" ingest "$P" e3 "$T/empty.npy" --no-progress
# asked for, an empty dataset is made
run 0 "" "$CXLPOOL" ingest "$P" e4 "$T/empty.raw" --record-size 8 --allow-empty --no-progress
run 0 "" "$CXLPOOL" stat "$P" e4 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))["dataset"]; assert d["records"] == 0, d' "$T/out" 2>/dev/null &&
  ok || fail "--allow-empty: $(cat "$T/out")"
run 0 "" "$CXLPOOL" rm "$P" e4
state "$P" >"$T/before"
for bad in . .. a/b; do
  run 2 "dataset name" "$CXLPOOL" ingest "$P" "$bad" "$T/good.raw" --record-size 512 --no-progress
done
unchanged "$P" "$T/before" "names . and .."
run 0 "" "$CXLPOOL" verify "$P" --quiet

# a shm (or numa) pool larger than /dev/shm can ever hold: refused at create
# (usage, exit 2), naming the size and the limit, nothing left behind
pool_name B big
run 2 "cxlp\.$B: size 512000000000000 bytes is more than /dev/shm can hold \([0-9]+ bytes, its tmpfs size\)" \
  "$CXLPOOL" create "$B" 512TB
run 2 "cxlp\.$B: size 512000000000000 bytes is more than (/dev/shm can hold|NUMA node 0 holds)" \
  "$CXLPOOL" create "numa:interleave=0:$B" 512TB
[ ! -e "/dev/shm/cxlp.$B" ] && ok || fail "a refused create left /dev/shm/cxlp.$B"
# an interleaved numa pool: stat says so
run 0 "" "$CXLPOOL" create "numa:interleave=0:$B" 16M
run 0 "" "$CXLPOOL" stat "numa:interleave=0:$B" --json
grep -q '"numa_interleave": true, "numa_nodes": "0", "near_node": 0' "$T/out" && ok ||
  fail "stat --json of an interleaved pool: $(head -c 300 "$T/out")"
finish
