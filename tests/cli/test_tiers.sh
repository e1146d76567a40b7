#!/usr/bin/env bash
# Pools of tiers from the CLI: create --tier (and what it refuses, before
# anything exists), ingest into the nvme home, stat (table and JSON), cat
# (a miss staged into dram), migrate both ways, top, policy, verify,
# destroy (every object gone, also when a tier file was deleted first).
source "$(dirname "$0")/lib.sh"

pool_name P tiers
TF="$T/home.tier"
"$CXLPOOL" create "$P" --tier "dram=shm:$P.dram:16M" --tier "nvme=file:$TF:64M" \
  --meta-bytes 4M >"$T/create" 2>&1 || fail "create: $(cat "$T/create")"
grep -q "nvme .* home" "$T/create" && ok || fail "create prints the tier table: $(cat "$T/create")"
python3 -c "import numpy as np; np.save('$T/d.npy', np.arange(1<<20, dtype=np.int32).reshape(-1, 256))"
expect 0 "" "$CXLPOOL" ingest "$P" d "$T/d.npy" --shard-bytes 256K --no-progress
"$CXLPOOL" stat "$P" --json >"$T/stat.json" && is_json "$T/stat.json"
python3 - "$T/stat.json" <<'PY' && ok || fail "stat --json tiers"
import json, sys
s = json.load(open(sys.argv[1]))
t = s["tiers"]
assert [x["kind"] for x in t] == ["dram", "nvme"], t
assert t[1]["home"] and t[1]["staged"] and t[1]["copies"] == 16 and t[0]["copies"] == 0, t
assert t[0]["capacity"] == 14 << 20, t
assert not t[0]["emulated"] and not t[1]["emulated"], t  # DRAM is DRAM, a file is storage
PY
# a record of a shard only the home holds: staged into dram, counted a miss
"$CXLPOOL" cat "$P" d 1000 --format json >"$T/rec.json" && is_json "$T/rec.json"
python3 -c "
import json; r = json.load(open('$T/rec.json'))
assert r['fields'][0]['values'][:3] == [256000, 256001, 256002], r" && ok || fail "cat through a miss"
"$CXLPOOL" stat "$P" --json | python3 -c "
import json, sys; t = json.load(sys.stdin)['tiers'][0]
assert t['copies'] == 1 and t['misses'] == 1 and t['fetches'] == 1, t" && ok || fail "the miss counted"
expect 0 "" "$CXLPOOL" migrate "$P" d dram --json --no-progress
python3 -c "
import json; m = json.load(open('$T/out'))
assert m['shards'] == 16 and m['copied'] + m['already'] == 16, m" && ok || fail "migrate --json"
expect 0 "" "$CXLPOOL" top "$P" --interval 0.1 --count 2
grep -q "^d  *16  *16  *16" "$T/out" && ok || fail "top: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" verify "$P" --quiet
expect 0 "" "$CXLPOOL" migrate "$P" d nvme --no-progress
# a dataset's stat on a pool of tiers: no page sizes (copies move), the
# shard format read from the header of its only copy, on the nvme home
expect 0 "" "$CXLPOOL" stat "$P" d
grep -q "^pages: *not reported on a pool of tiers" "$T/out" && \
  grep -q "^format: *shard format 4, blocks of 4.00 KiB$" "$T/out" && ok || \
  fail "stat of a dataset of tiers: $(cat "$T/out")"
"$CXLPOOL" stat "$P" d --json | python3 -c "
import json, sys; s = json.load(sys.stdin)
assert s['pages'] is None and s['shard_format'] == {'version': 4, 'block_bytes': 4096, 'sums_area': False}, s
" && ok || fail "stat --json of a dataset of tiers"
expect 0 "" "$CXLPOOL" policy "$P" d lru
expect 0 "" "$CXLPOOL" policy "$P" d
grep -q "^d: lru" "$T/out" && ok || fail "policy shows lru: $(cat "$T/out")"
expect 2 "POLICY" "$CXLPOOL" policy "$P" d fifo
expect 2 "tier 'ssd'" "$CXLPOOL" migrate "$P" d ssd
expect 4 "no dataset" "$CXLPOOL" migrate "$P" nope dram
# a dataset larger than the dram tier does not fit it: refused, nothing moved
python3 -c "import numpy as np; np.save('$T/big.npy', np.zeros((96, 1<<18), dtype=np.uint8))"
expect 0 "" "$CXLPOOL" ingest "$P" big "$T/big.npy" --shard-bytes 1M --no-progress
expect 1 "no free extent" "$CXLPOOL" migrate "$P" big dram --no-progress
# shards of 1 MiB (257 blocks of 4 KiB) keep their sums in the header page;
# the same records in 3 MiB shards have a sums area
expect 0 "" "$CXLPOOL" stat "$P" big
grep -q "^format: *shard format 4, blocks of 4.00 KiB$" "$T/out" && ok || fail "stat big: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" ingest "$P" big3 "$T/big.npy" --shard-bytes 3M --no-progress
expect 0 "" "$CXLPOOL" stat "$P" big3
grep -q "^format: *shard format 4, blocks of 4.00 KiB, sums in a sums area$" "$T/out" && ok || \
  fail "stat big3: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" rm "$P" big3
expect 0 "" "$CXLPOOL" verify "$P" --quiet
# --lock: the same check from a writable handle (docs/cli.md)
expect 0 "" "$CXLPOOL" verify "$P" --lock
grep -q "^ok: .* verified" "$T/out" || fail "verify --lock: $(head -c 300 "$T/out")"
# a full nvme tier: an ingest that does not fit fails before writing
python3 -c "import numpy as np; np.save('$T/huge.npy', np.zeros((80, 1<<20), dtype=np.uint8))"
state "$P" >"$T/before"
expect 1 "no free extent|EFULL" "$CXLPOOL" ingest "$P" huge "$T/huge.npy" --no-progress
"$CXLPOOL" migrate "$P" d nvme --no-progress >/dev/null # a writer: reclaims
unchanged "$P" "$T/before" "a failed ingest"

# refused before anything is created
pool_name Q badtiers
# a remote tier is a list of ucx:// urls; a build without UCX refuses it
REMOTE_BAD="ucx://"
"$CXLPOOL" remote-cat "ucx://127.0.0.1:1/x" x --timeout 2s >/dev/null 2>"$T/ucx" </dev/null
grep -q "no UCX" "$T/ucx" && REMOTE_BAD="no UCX"
for spec in "nvme=file:$T/x.tier:64M dram=shm:8M|fastest first" \
            "dram=shm:8M nvme=file:$T/x.tier:900P|free on its filesystem" \
            "cxl=numa:999:8M|999" "cxl=devdax:/dev/dax99.1|dax99.1" \
            "dram=shm:1M|smaller than a tier" "dram=shm:$Q.a:8M cxl=shm:$Q.a:8M|same object" \
            "dram=shm:8M remote=shm:8M|$REMOTE_BAD" "ssd=shm:8M|unknown kind"; do
  args=() ; for t in ${spec%%|*}; do args+=(--tier "$t"); done
  code=2; case ${spec##*|} in "free on"*) code=1;; 999|dax99.1) code=1;; "no UCX") code=1;; esac
  expect $code "${spec##*|}" "$CXLPOOL" create "$Q" "${args[@]}" --meta-bytes 4M
  [ ! -e "/dev/shm/cxlp.$Q" ] && [ ! -e "$T/x.tier" ] && ok || fail "objects left by '$spec'"
done
expect 2 "meta-bytes" "$CXLPOOL" create "$Q" 8M --meta-bytes 4M
expect 2 "meta_bytes" "$CXLPOOL" create "$Q" --tier dram=shm:8M --meta-bytes 4K

expect 0 "" "$CXLPOOL" destroy "$P" --yes
[ ! -e "$TF" ] && [ ! -e "/dev/shm/cxlp.$P.dram" ] && ok || fail "destroy left tier objects"
# a tier file overwritten by something else, then deleted: refused, named;
# destroy still removes the pool's other objects
"$CXLPOOL" create "$P" --tier "dram=shm:$P.dram:16M" --tier "nvme=file:$TF:64M" \
  --meta-bytes 4M >/dev/null 2>&1 || fail "create again"
printf X | dd of="$TF" bs=1 conv=notrunc 2>/dev/null
expect 1 "$TF is not object 2 of this pool" "$CXLPOOL" stat "$P"
rm "$TF"
expect 4 "tier object 2: $TF" "$CXLPOOL" stat "$P"
expect 0 "" "$CXLPOOL" destroy "$P" --yes
[ ! -e "/dev/shm/cxlp.$P" ] && [ ! -e "/dev/shm/cxlp.$P.dram" ] && ok ||
  fail "destroy of a pool without its tier file left its dram object"
finish
