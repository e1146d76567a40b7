#!/usr/bin/env bash
# `cxlpool sim` on the hosts order (order.kind "hosts"): its per-epoch
# local and peer fractions agree with `cxlpool order --kind hosts --stats`
# for the same order (blocks, window, weights, ranks per host, seed) when
# every host's memory holds its share; another weight gives another
# simulation; the same configuration the same bytes; bad keys refused.
#
# Tolerance 1e-6: at this size (200,001 draws an epoch, under its 2^22)
# --stats counts the fractions over every rank's draws ("fractions":
# "counted"), and the simulation walks every draw of its windows (at most
# rounds_walked_per_window rounds a window), both through the sampler's
# code: they agree to --stats' six decimals. Weights 4,3,3,2 give hosts
# 1 and 2 8 positions a round on average for their 8 ranks: rounds with 7
# lose a local read (local 0.909 counted, where the epoch's shares would
# give 0.917), which both count.
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
    assert a["epoch"] == b["epoch"] and b["fractions"] == "counted"
    for k in ("local", "peer", "home"):
        assert abs(a[k] - b[k]) < 1e-6, (a["epoch"], k, a[k], b[k])
print("epochs", [(round(a["local"], 5), round(b["local"], 5)) for a, b in
                 zip(sim["epochs"], st["epochs"])], file=sys.stderr)
PY
}

compare 3,1,1,1 false
cp "$T/sim.json" "$T/skew.json"
compare 3,1,1,1 true --keep-blocks
compare 1,1,1,1 false
compare 4,3,3,2 false
cmp -s "$T/sim.json" "$T/skew.json" && fail "weights 4,3,3,2 and 3,1,1,1 gave the same" || ok

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
