#!/usr/bin/env bash
# `cxlpool order`: the first ids are the library's order (a permutation,
# split over ranks like torch's DistributedSampler), counts per rank, quality
# figures, JSON, and usage errors.
source "$(dirname "$0")/lib.sh"

# --first N prints a permutation of 0..N-1; the same seed prints the same.
expect 0 "" "$CXLPOOL" order --n 1000 --seed 7 --first 1000
tail -n +4 "$T/out" >"$T/ids"
if [ "$(sort -n "$T/ids" | tr '\n' ' ')" = "$(seq 0 999 | tr '\n' ' ')" ]; then ok; else
  fail "--first 1000 is not a permutation of 0..999"; fi
"$CXLPOOL" order --n 1000 --seed 7 --first 1000 | tail -n +4 | cmp -s - "$T/ids" && ok \
  || fail "same seed, other order"
"$CXLPOOL" order --n 1000 --seed 7 --epoch 1 --first 1000 | tail -n +4 | cmp -s - "$T/ids" \
  && fail "epoch 1 repeats epoch 0" || ok

# Ranks: disjoint, union is the epoch plus padding; counts as torch computes them.
for r in 0 1 2; do "$CXLPOOL" order --n 100 --world 3 --rank $r --first 1000 --json; done \
  >"$T/ranks.json"
python3 - "$T/ranks.json" <<'PY' && ok || fail "rank split"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
ids = [i for r in rs for i in r["first"]]
assert [len(r["first"]) for r in rs] == [34, 34, 34], [len(r["first"]) for r in rs]
assert sorted(set(ids)) == list(range(100)) and len(ids) == 102
PY
expect 0 "" "$CXLPOOL" order --n 10 --world 4 --counts --json
is_json "$T/out"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["counts"]==[3]*4 and d["padded"]==2 and d["dropped"]==0, d' "$T/out" && ok || fail "padded counts: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" order --n 10 --world 4 --counts --drop-last --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["counts"]==[2]*4 and d["dropped"]==2 and d["padded"]==0, d' "$T/out" && ok || fail "drop_last counts: $(cat "$T/out")"

# Quality: the full permutation passes the uniformity test, sequential and
# narrow block orders do not; block keeps at most W shards per batch.
expect 0 "" "$CXLPOOL" order --n 262144 --quality --json
python3 -c 'import json,sys; q=json.load(open(sys.argv[1]))["quality"]; assert q["uniform"] and abs(q["spearman"])<0.02 and q["shards_per_batch"]>0.9*q["expected_shards_per_batch"], q' "$T/out" && ok || fail "full quality: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" order --n 262144 --kind sequential --quality --json
python3 -c 'import json,sys; q=json.load(open(sys.argv[1]))["quality"]; assert not q["uniform"] and q["spearman"]>0.999 and q["shards_per_batch"]==1, q' "$T/out" && ok || fail "sequential quality: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" order --n 262144 --kind block --shard-size 4096 --window 4 --quality --json
python3 -c 'import json,sys; q=json.load(open(sys.argv[1]))["quality"]; assert not q["uniform"] and q["shards_per_batch"]<=4, q' "$T/out" && ok || fail "block quality: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" order --n 100000 --quality
grep -q "shards/batch" "$T/out" && grep -q "spearman" "$T/out" && grep -q "chi2" "$T/out" && ok \
  || fail "quality text: $(cat "$T/out")"

# Over a dataset: n is its record count.
pool_name P order
expect 0 "" "$CXLPOOL" create "$P" 16M
head -c 6400 /dev/zero >"$T/rec.raw"
expect 0 "" "$CXLPOOL" ingest "$P" d "$T/rec.raw" --format raw --record-size 64 --no-progress
expect 0 "" "$CXLPOOL" order "$P" d --first 100 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["n"]==100 and sorted(d["first"])==list(range(100)) and d["dataset"]=="d", d' "$T/out" && ok || fail "dataset order: $(cat "$T/out")"

# Usage errors exit 2 and name the option; missing things exit 4.
expect 2 "shard-size" "$CXLPOOL" order --n 10 --kind block
expect 2 "--rank" "$CXLPOOL" order --n 10 --world 2 --rank 2
expect 2 "--kind" "$CXLPOOL" order --n 10 --kind blend
expect 2 "POOL NAME" "$CXLPOOL" order
expect 2 "takes no POOL" "$CXLPOOL" order "$P" d --n 5
expect 2 "--seed" "$CXLPOOL" order --n 10 --seed x
expect 2 "cfg.n" "$CXLPOOL" order --n 18446744073709551615
expect 2 "quality" "$CXLPOOL" order --n 1000000000 --quality
[ -s "$T/out" ] && fail "output on a usage error: $(cat "$T/out")" || ok
expect 4 "nosuch" "$CXLPOOL" order "$P" nosuch
expect 4 "" "$CXLPOOL" order "clitest.absent.$$" d
# The hosts order: ranks disjoint, each id once, equal counts; --stats
# over a dataset, JSON whole; its usage errors name the option.
for r in 0 1 2 3; do "$CXLPOOL" order --n 1000 --kind hosts --shard-size 10 --weights 1,3 \
  --ranks-per-host 1,3 --rank $r --first 1000 --json; done >"$T/hosts.json"
python3 - "$T/hosts.json" <<'PY' && ok || fail "hosts split"
import json, sys
rs = [json.loads(l) for l in open(sys.argv[1])]
ids = [i for r in rs for i in r["first"]]
assert [len(r["first"]) for r in rs] == [250] * 4 and sorted(ids) == list(range(1000))
assert len({r["fingerprint"] for r in rs}) == 1 and rs[0]["kind"] == "hosts"
PY
expect 0 "" "$CXLPOOL" order "$P" d --stats --shard-size 10 --hosts 2 --memory 0.3 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); s=d["stats"]; e=s["epochs"]; assert d["n"]==100 and len(e)==2 and [h["capacity_blocks"] for h in s["hosts"]]==[3,3] and all(abs(x["local"]+x["peer"]+x["home"]-1)<1e-9 and x["home"]>0.3 for x in e), d' "$T/out" && ok || fail "stats: $(cat "$T/out")"
# quality: with every block of a host in its window the interleaved
# streams pass as a uniform shuffle; a window of one block does not (a
# batch of 256 spans at most two blocks of each of the 3 hosts here)
expect 0 "" "$CXLPOOL" order --n 100000 --stats --shard-size 100 --hosts 3 --memory 0.4 --ranks-per-host 2,1,1 --json
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); q=d["quality"]; e=d["stats"]["epochs"]; assert q["uniform"] and q["shards_per_batch"]>0.95*q["expected_shards_per_batch"] and abs(e[0]["local"]-0.834)<1e-9 and abs(e[1]["staged_peer"]-0.672)<1e-9, d' "$T/out" && ok || fail "hosts quality: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" order --n 100000 --stats --shard-size 100 --hosts 3 --window 1 --json
python3 -c 'import json,sys; q=json.load(open(sys.argv[1]))["quality"]; assert not q["uniform"] and q["shards_per_batch"]<=6, q' "$T/out" && ok || fail "hosts window 1 quality: $(cat "$T/out")"
expect 2 "--ranks-per-host: 3 values for 2 hosts" "$CXLPOOL" order --n 100 --stats --shard-size 5 --hosts 2 --ranks-per-host 1,2,3
expect 2 "--memory" "$CXLPOOL" order --n 100 --stats --shard-size 5 --memory -1
expect 2 "--kind hosts" "$CXLPOOL" order --n 100 --keep-blocks
expect 2 "hosts.weight" "$CXLPOOL" order --n 100 --stats --shard-size 5 --weights 0,0
expect 2 "--weights: 'x' is not an unsigned integer" "$CXLPOOL" order --n 100 --stats --shard-size 5 --weights 1,x
expect 2 "--memory: '0.4y' is not a fraction" "$CXLPOOL" order --n 100 --stats --shard-size 5 --memory 0.4y
expect 2 "--hosts" "$CXLPOOL" order --n 100 --stats --shard-size 5 --hosts 5000
# Huge N: the first ids come at once (O(1) memory).
expect 0 "" "$CXLPOOL" order --n 9223372036854775808 --first 3 --json
is_json "$T/out"
finish
