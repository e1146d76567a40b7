#!/usr/bin/env bash
# cxlpool rewrite: a dataset written again in this build's shard format, in
# its own place (the same records, schema and policy; --shard-bytes cuts it
# anew), on a pool of one tier and on a pool of tiers (its home on an nvme
# file). What it refuses changes nothing. (Datasets of earlier shard formats,
# readers open across the rewrite and kills: tests/c/test_store_rewrite.c.)
source "$(dirname "$0")/lib.sh"

head -c $((1 << 20)) /dev/urandom >"$T/a.raw"
pool_name P rw
"$CXLPOOL" create "$P" 64M >/dev/null || fail "create"
TP="$P.t"
track "$TP"
"$CXLPOOL" create "$TP" --tier "dram=shm:$TP.dram:16M" --tier "nvme=file:$T/home.tier:64M" \
  --meta-bytes 4M >/dev/null || fail "create a pool of tiers"
for pool in "$P" "$TP"; do
  expect 0 "" "$CXLPOOL" ingest "$pool" d "$T/a.raw" --record-size 1024 --shard-bytes 256K \
    --no-progress
  expect 0 "" "$CXLPOOL" policy "$pool" d lru
  expect 0 "" "$CXLPOOL" rewrite "$pool" d --json
  is_json "$T/out"
  python3 - "$T/out" <<'PY' && ok || fail "rewrite --json on $pool: $(cat "$T/out")"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["dataset"] == "d", r
for k in ("before", "after"):
    assert r[k] == {"version": 4, "block_bytes": 4096, "sums_area": False, "shards": 4}, r
assert r["seconds"] >= 0, r
PY
  expect 0 "" "$CXLPOOL" rewrite "$pool" d --shard-bytes 64K --no-progress
  grep -Eq "^rewrote d: shard format 4, blocks of 4.00 KiB -> shard format 4, blocks of 4.00 KiB; shards 4 -> 16, in [0-9.]+ s$" "$T/out" \
    && ok || fail "rewrite's line on $pool: $(cat "$T/out")"
  # the same records, the policy kept, every checksum right
  for i in 0 517 1023; do
    "$CXLPOOL" cat "$pool" d $i --format raw | cmp -s - <(dd if="$T/a.raw" bs=1024 skip=$i count=1 2>/dev/null) \
      && ok || fail "record $i after the rewrite on $pool"
  done
  expect 0 "" "$CXLPOOL" policy "$pool" d
  grep -q "d: lru" "$T/out" && ok || fail "policy after the rewrite: $(cat "$T/out")"
  expect 0 "" "$CXLPOOL" verify "$pool"
  "$CXLPOOL" stat "$pool" d --json | python3 -c "
import json, sys; s = json.load(sys.stdin)
assert s['dataset']['shards'] == 16 and s['shard_format']['version'] == 4, s" && ok \
    || fail "stat after the rewrite on $pool"

  # refused, nothing changed
  state "$pool" >"$T/before"
  expect 4 "no dataset 'nope'" "$CXLPOOL" rewrite "$pool" nope
  expect 2 "--shard-bytes: '0' is not a positive size" "$CXLPOOL" rewrite "$pool" d --shard-bytes 0
  expect 2 "" "$CXLPOOL" rewrite "$pool"
  unchanged "$pool" "$T/before" "refused rewrites"
done
# no room for a second copy: refused before anything changes
pool_name S small
"$CXLPOOL" create "$S" 32M >/dev/null || fail "create $S"
head -c $((12 << 20)) /dev/urandom >"$T/b.raw"
expect 0 "" "$CXLPOOL" ingest "$S" big "$T/b.raw" --record-size 4096 --shard-bytes 1M --no-progress
state "$S" >"$T/before"
expect 1 "rewrite: dataset big: reserving an extent: .*no room" "$CXLPOOL" rewrite "$S" big
unchanged "$S" "$T/before" "a rewrite without room"
finish
