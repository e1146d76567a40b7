#!/usr/bin/env bash
# cxlpool ingest --shuffle SEED: the records of a raw and an .npy input in
# a permuted order (every input record exactly once, not the input order),
# the same order for the same seed and another for another seed; `cat
# --input J` finds input record J; the seed shown by ingest, ls and stat
# (text and --json); bad seeds and formats that are not shuffled refused naming
# --shuffle, the pool unchanged.
source "$(dirname "$0")/lib.sh"
python3 -c 'import numpy' 2>/dev/null || { echo "SKIP: numpy missing"; exit 77; }
python3 "$(dirname "$0")/mkdata.py" "$T" || { fail "mkdata.py"; finish; }
N=100
python3 - "$T" "$N" <<'PY'
import sys
import numpy as np
a = np.arange(int(sys.argv[2]), dtype=np.uint64)   # record j holds j
a.tofile(f"{sys.argv[1]}/ids.raw")
np.save(f"{sys.argv[1]}/ids.npy", a.reshape(-1, 1))
PY

pool_name P shuf
expect 0 "" "$CXLPOOL" create "$P" 64M

# records N of dataset $1, one value a line
ids() {
  for ((k = 0; k < N; k++)); do
    "$CXLPOOL" cat "$P" "$1" "$k" --format raw | od -An -tu8 | tr -d ' '
  done
}

expect 0 "" "$CXLPOOL" ingest "$P" a "$T/ids.raw" --record-size 8 --shuffle 42
grep -q "shuffled with seed 42" "$T/out" && ok || fail "ingest summary: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" ingest "$P" b "$T/ids.raw" --record-size 8 --shuffle 42
expect 0 "" "$CXLPOOL" ingest "$P" c "$T/ids.raw" --record-size 8 --shuffle 43
expect 0 "" "$CXLPOOL" ingest "$P" d "$T/ids.npy" --shuffle 18446744073709551615 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["dataset"]["ingest_shuffle"] == {"seed": 2**64-1}, d' \
  "$T/out" && ok || fail "ingest --json ingest_shuffle: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" ingest "$P" plain "$T/ids.raw" --record-size 8
ids a >"$T/a"; ids b >"$T/b"; ids c >"$T/c"; ids d >"$T/d"; ids plain >"$T/plain"
seq 0 $((N - 1)) >"$T/in"
cmp -s "$T/plain" "$T/in" && ok || fail "unshuffled ingest is not in input order"
for x in a c d; do
  # a permutation: every input record once, in another order
  sort -n "$T/$x" | cmp -s - "$T/in" && ok || fail "$x: not every input record once"
  cmp -s "$T/$x" "$T/in" && fail "$x: in input order" || ok
done
cmp -s "$T/a" "$T/b" && ok || fail "same seed, another order"
cmp -s "$T/a" "$T/c" && fail "seeds 42 and 43 gave the same order" || ok

# cat --input J: the record that holds input record J
for ((j = 0; j < N; j++)); do
  "$CXLPOOL" cat "$P" c "$j" --input --format raw | od -An -tu8 | tr -d ' '
done >"$T/c_in"
cmp -s "$T/c_in" "$T/in" && ok || fail "cat --input J is not input record J"
expect 4 "input record $N of $N" "$CXLPOOL" cat "$P" c "$N" --input

expect 0 "" "$CXLPOOL" stat "$P" a
grep -q "shuffled at ingest, seed 42" "$T/out" && ok || fail "stat: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" stat "$P" plain
grep -q "shuffled" "$T/out" && fail "stat of an unshuffled dataset: $(cat "$T/out")" || ok
expect 0 "" "$CXLPOOL" stat "$P" d --json
is_json "$T/out"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["dataset"]["ingest_shuffle"] == {"seed": 2**64-1}, d' \
  "$T/out" && ok || fail "stat --json ingest_shuffle: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" stat "$P" plain --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["dataset"]["ingest_shuffle"] is None, d' \
  "$T/out" && ok || fail "stat --json of an unshuffled dataset: $(cat "$T/out")"

expect 0 "" "$CXLPOOL" ls "$P"
grep -Eq "^a .* seed 42$" "$T/out" && grep -Eq "^plain .* -$" "$T/out" && ok \
  || fail "ls: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" ls "$P" --json
python3 -c '
import json, sys
d = {x["name"]: x["ingest_shuffle"] for x in json.load(open(sys.argv[1]))}
assert d == {"a": {"seed": 42}, "b": {"seed": 42}, "c": {"seed": 43},
             "d": {"seed": 2**64-1}, "plain": None}, d' "$T/out" && ok \
  || fail "ls --json ingest_shuffle: $(cat "$T/out")"

# bad seeds and formats: refused naming --shuffle, nothing ingested
state "$P" >"$T/before"
for bad in -1 abc "" 1.5 0x 18446744073709551616 " 3"; do
  expect 2 "--shuffle: '$bad' is not a seed" "$CXLPOOL" ingest "$P" x "$T/ids.raw" \
    --record-size 8 --shuffle "$bad"
done
expect 2 "--shuffle" "$CXLPOOL" ingest "$P" x "$T/ids.raw" --record-size 8 --shuffle
expect 1 "good_mt.idx: shuffle \(--shuffle\): not supported for the megatron format" \
  "$CXLPOOL" ingest "$P" x "$T/good_mt" --shuffle 1
expect 2 "--shuffle: only raw and npy" "$CXLPOOL" ingest "$P" x "$T/t.parquet" \
  --format parquet --shuffle 1
unchanged "$P" "$T/before" "refused --shuffle"
finish
