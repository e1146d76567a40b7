#!/usr/bin/env bash
# `cxlpool sim`: a preset runs and writes JSON, the same bytes twice; --set
# and --out; a sweep's table; --calibrate writes a configuration that runs
# (and leaves no file behind); bad configurations and options are refused
# (exit 2) with the file and the key named.
source "$(dirname "$0")/lib.sh"

expect 0 "this-machine, lookahead, the block order: [0-9]+ events" "$CXLPOOL" sim this-machine
cp "$T/out" "$T/a.json"
is_json "$T/a.json"
"$CXLPOOL" sim this-machine 2>/dev/null | cmp -s - "$T/a.json" && ok || fail "two runs differ"
python3 - "$T/a.json" <<'PY' && ok || fail "this-machine JSON fields"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["policy"] == "lookahead" and r["granularity"]["unit"] == "shard"
assert "not measurements" in r["note"]
assert [t["name"] for t in r["tiers"]] == ["dram", "nvme"]
assert sum(k["samples"] for k in r["ranks"]) == 1048576
assert 0 <= r["stall_fraction"] <= 1 and r["epochs"][0]["home"] == 1
assert r["per_host"]["catalog_bytes"] > 0 and r["per_host"]["engine_bytes"] > 0
PY

expect 0 "" "$CXLPOOL" sim this-machine --set policy=lru --set epochs=2 --out "$T/lru.json"
is_json "$T/lru.json"
grep -q '"policy": "lru"' "$T/lru.json" && ok || fail "--set policy=lru"
[ ! -s "$T/out" ] && ok || fail "--out still wrote to stdout"

expect 0 "" "$CXLPOOL" sim this-machine --sweep policy=lookahead,streaming --sweep order.window=2,4
[ "$(wc -l <"$T/out")" -eq 5 ] && ok || fail "sweep rows: $(cat "$T/out")"
head -1 "$T/out" | grep -q "^key	value	stall_fraction" && ok || fail "sweep header"
grep -q "^order.window	4	" "$T/out" && ok || fail "sweep row"

printf '{"preset": "this-machine", "order": {"windw": 4}}' >"$T/bad.json"
expect 2 "bad.json: unknown key order.windw" "$CXLPOOL" sim "$T/bad.json"
printf '{"preset": "this-machine", "tiers": [{"name": "d", "kind": "dram", "capacity": 1e9, "bandwidth": -1, "concurrency": 1}]}' >"$T/bw.json"
expect 2 "bw.json: key tiers\[0\].bandwidth" "$CXLPOOL" sim "$T/bw.json"
printf '{"preset": "this-machine",\n "seed": }' >"$T/syn.json"
expect 2 "syn.json: line 2" "$CXLPOOL" sim "$T/syn.json"
expect 2 "not a preset" "$CXLPOOL" sim "$T/none.json"
expect 2 "unknown key colour" "$CXLPOOL" sim this-machine --set colour=red
expect 2 "" "$CXLPOOL" sim

mkdir "$T/cal"
expect 0 "calibrated \(measured now, on this machine\): dram [0-9.]+ GB/s" \
  "$CXLPOOL" sim --calibrate "$T/cal" --calibrate-bytes 64M --out "$T/cal.json"
python3 - "$T/cal.json" <<'PY' && ok || fail "calibrated configuration"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["preset"] == "this-machine" and all(t["bandwidth"] > 0 for t in c["tiers"])
PY
[ -z "$(ls -A "$T/cal")" ] && ok || fail "--calibrate left $(ls "$T/cal")"
expect 0 "" "$CXLPOOL" sim "$T/cal.json"
expect 1 "--calibrate .*no-such-dir: No such file" "$CXLPOOL" sim --calibrate "$T/no-such-dir" --calibrate-bytes 64M
expect 2 "" "$CXLPOOL" sim this-machine --calibrate "$T/cal"
finish
