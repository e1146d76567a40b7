#!/usr/bin/env bash
# `cxlpool sim` on the hosts order (order.kind "hosts"): its per-epoch
# local and peer fractions agree with `cxlpool order --kind hosts --stats`
# for the same order (blocks, window, weights, ranks per host, seed) when
# every host's memory holds its share; another weight gives another
# simulation; the same configuration the same bytes; bad keys refused.
#
# Tolerance 0.001: --stats estimates a host's local reads from its share
# (min of its positions and its ranks' draws, over the epoch), the
# simulation walks each rank's draws through the sampler. The two part
# only in rounds where a host's count of positions falls on the other side
# of its rank count than its mean (the +-1 of each split), one read each:
# none when every host's mean is at least 1 away from its ranks (weights
# 3,1,1,1 over 4 hosts of 8 ranks: 16 and 5.3 positions a round for 8
# ranks; measured 1e-5, the padding of the last round), few with equal
# weights (8 a round for 8 ranks but where the 1563 blocks do not split
# evenly; measured 1.5e-4). A mean within 1 of the rank count can part
# by more (test_sim.c has one at 0.014, and checks the simulation against
# the order's exact count, cxlp_sampler_host_reads, instead).
source "$(dirname "$0")/lib.sh"

cfg() { # weights keep -> a configuration on stdout
  cat <<JSON
{"preset": "this-machine", "seed": 3, "hosts": 4, "gpus_per_host": 8, "epochs": 2,
 "dataset": {"samples": 200001, "sample_bytes": 4096, "shard_bytes": 524288},
 "order": {"kind": "hosts", "window": 16, "host_weights": [$1], "keep_blocks": $2},
 "rank": {"demand": 1e8, "batch": 16},
 "tiers": [{"name": "dram", "kind": "dram", "capacity": 2e9, "latency_ns": 100, "bandwidth": 10e9, "concurrency": 8},
  {"name": "rdma", "kind": "peer", "latency_ns": 3000, "bandwidth": 10e9, "concurrency": 16},
  {"name": "nvme", "kind": "nvme", "capacity": 1e12, "latency_ns": 100000, "bandwidth": 10e9, "concurrency": 16, "shared": true, "home": true}]}
JSON
}

compare() { # weights keep-flag(true/false) order-flags...
  local w=$1 keep=$2
  shift 2
  cfg "$w" "$keep" >"$T/h.json"
  expect 0 "h.json, lookahead, the hosts order: [0-9]+ events" "$CXLPOOL" sim "$T/h.json" --out "$T/sim.json"
  "$CXLPOOL" order --kind hosts --stats --json --n 200001 --shard-size 128 --window 16 \
    --seed 3 --weights "$w" --ranks-per-host 8 --world 32 "$@" >"$T/stats.json" \
    || fail "order --stats"
  python3 - "$T/sim.json" "$T/stats.json" <<'PY' && ok || fail "sim against --stats ($w, keep $keep)"
import json, sys
sim, st = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["stats"]
assert sim["order"]["kind"] == "hosts"
for a, b in zip(sim["epochs"], st["epochs"]):
    assert a["epoch"] == b["epoch"]
    for k in ("local", "peer"):
        assert abs(a[k] - b[k]) < 0.001, (a["epoch"], k, a[k], b[k])
print("epochs", [(round(a["local"], 5), round(b["local"], 5)) for a, b in
                 zip(sim["epochs"], st["epochs"])], file=sys.stderr)
PY
}

compare 3,1,1,1 false
cp "$T/sim.json" "$T/skew.json"
compare 3,1,1,1 true --keep-blocks
compare 1,1,1,1 false
cmp -s "$T/sim.json" "$T/skew.json" && fail "weights 1,1,1,1 and 3,1,1,1 gave the same" || ok

# the same configuration, the same bytes
"$CXLPOOL" sim "$T/h.json" 2>/dev/null | cmp -s - "$T/sim.json" && ok || fail "two runs differ"
# --set of the order's keys
expect 0 "" "$CXLPOOL" sim "$T/h.json" --set order.host_weights=3,1,1,1 --out "$T/set.json"
python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['epochs']; b=json.load(open(sys.argv[2]))['epochs']; assert a==b" \
  "$T/set.json" "$T/skew.json" && ok || fail "--set order.host_weights"

printf '{"preset": "this-machine", "order": {"kind": "shuffle"}}' >"$T/bad.json"
expect 2 "bad.json: key order.kind: block or hosts" "$CXLPOOL" sim "$T/bad.json"
expect 2 "key order.host_weights: 3 weights for the order's 4 hosts" \
  "$CXLPOOL" sim "$T/h.json" --set order.host_weights=1,2,3
expect 2 "key order.host_weights: for order.kind hosts" \
  "$CXLPOOL" sim this-machine --set order.host_weights=1
finish
