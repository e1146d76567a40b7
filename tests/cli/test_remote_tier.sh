#!/usr/bin/env bash
# A pool with a remote tier (docs/remote.md, "The remote tier"), from the
# CLI: `cxlpool serve A` in one process; pool B (a dram tier and
# remote=ucx://HOST:PORT/A) created by another lists A's dataset, prints
# its records byte for byte as the source, verifies, migrates it into dram;
# with the server killed B still lists it and reads what dram holds, and a
# record whose shard is only at the peer fails naming the peer and the
# shard. A build without UCX refuses the tier.
source "$(dirname "$0")/lib.sh"

pool_name A rta
pool_name B rtb
expect 0 "" "$CXLPOOL" create "$A" 64M
head -c 3000000 /dev/urandom >"$T/src.bin"
expect 0 "" "$CXLPOOL" ingest "$A" raw "$T/src.bin" --format raw --record-size 1000 \
  --shard-bytes 256K --no-progress
printf 'tier-secret\n' >"$T/tok"; chmod 600 "$T/tok"
export CXLPOOL_TOKEN_FILE="$T/tok" CXLPOOL_REMOTE_TIMEOUT_MS=2000

"$CXLPOOL" remote-cat "ucx://127.0.0.1:1/$A" raw --timeout 2s >/dev/null 2>"$T/err" </dev/null
if grep -q "no UCX" "$T/err"; then
  expect 1 "no UCX" "$CXLPOOL" create "$B" --tier dram=shm:8M --tier "remote=ucx://127.0.0.1:1/$A"
  [ ! -e "/dev/shm/cxlp.$B" ] && ok || fail "objects left by a refused remote tier"
  echo "no UCX in this build"
  finish
fi

"$CXLPOOL" serve "$A" --listen 127.0.0.1:0 --token-file "$T/tok" \
  >"$T/serve.out" 2>"$T/serve.log" </dev/null &
SRV=$!
PORT=$(listen_port "$T/serve.out")
[ -n "$PORT" ] && ok || { fail "serve did not listen: $(cat "$T/serve.log")"; kill "$SRV"; exit 1; }
URL="ucx://127.0.0.1:$PORT/$A"

expect 2 "expected remote=ucx://HOST:PORT/POOL" "$CXLPOOL" create "$B" --tier dram=shm:8M \
  --tier "remote=$URL,"
expect 2 "memory tier of this host" "$CXLPOOL" create "$B" --tier "remote=$URL"
expect 0 "" "$CXLPOOL" create "$B" --tier dram=shm:8M --tier "remote=$URL"
grep -Eq "remote +ucx" "$T/out" && ok || fail "create: no remote tier: $(cat "$T/out")"

# A's dataset, listed and read on B
expect 0 "" "$CXLPOOL" ls "$B"
grep -Eq "^raw +3000 " "$T/out" && ok || fail "ls B: $(cat "$T/out")"
for i in 0 1 255 999 1777 2999; do
  expect 0 "" "$CXLPOOL" cat "$B" raw "$i" --format raw
  dd if="$T/src.bin" of="$T/want" bs=1000 skip="$i" count=1 status=none
  cmp -s "$T/out" "$T/want" && ok || fail "record $i read on B differs from the source"
done
expect 0 "" "$CXLPOOL" verify "$B"
expect 0 "" "$CXLPOOL" migrate "$B" raw dram --no-progress
expect 0 "" "$CXLPOOL" stat "$B" --json
python3 - "$T/out" <<'PY' && ok || fail "stat B: $(cat "$T/out")"
import json, sys
t = json.load(open(sys.argv[1]))["tiers"]
assert [x["kind"] for x in t] == ["dram", "remote"], t
assert t[1]["media"] == "ucx" and t[1]["staged"] and t[1]["copies"] == 12, t
assert t[0]["copies"] == 12, t
PY

# the server killed: B lists the dataset and reads what dram holds ...
kill -KILL "$SRV"; wait "$SRV" 2>/dev/null
expect 0 "" "$CXLPOOL" ls "$B"
grep -Eq "^raw +3000 " "$T/out" && ok || fail "ls B without its peer: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" cat "$B" raw 1234 --format raw
dd if="$T/src.bin" of="$T/want" bs=1000 skip=1234 count=1 status=none
cmp -s "$T/out" "$T/want" && ok || fail "record 1234 from dram differs"
# ... and a shard only the peer holds fails, naming the peer and the shard
expect 0 "" "$CXLPOOL" migrate "$B" raw remote --no-progress
start=$(date +%s)
expect 1 "shard 0.*127\.0\.0\.1:$PORT" "$CXLPOOL" cat "$B" raw 5 --format raw
[ $(( $(date +%s) - start )) -lt 30 ] && ok || fail "a read of a dead peer took $(( $(date +%s) - start )) s"
expect 0 "" "$CXLPOOL" stat "$B"

# a served pool of tiers counts what it read from its home
# (cxlpool_serve_home_bytes_total): all of a dataset read from the home
# alone, nothing more once its copies are in the server's dram
pool_name H rth
expect 0 "" "$CXLPOOL" create "$H" --tier dram=shm:8M --tier "nvme=file:$T/h.tier:16M"
expect 0 "" "$CXLPOOL" ingest "$H" raw "$T/src.bin" --format raw --record-size 1000 \
  --shard-bytes 256K --no-progress
MP=$(free_port)
"$CXLPOOL" serve "$H" --listen 127.0.0.1:0 --token-file "$T/tok" --metrics-port "$MP" \
  >"$T/hserve.out" 2>"$T/hserve.log" </dev/null &
HSRV=$!
HPORT=$(listen_port "$T/hserve.out")
home_bytes() {
  python3 - "$MP" <<'PY'
import sys, urllib.request
for line in urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/metrics").read().decode().splitlines():
    if line.startswith("cxlpool_serve_home_bytes_total "):
        print(int(float(line.split()[1])))
PY
}
STORED=$("$CXLPOOL" ls "$H" --json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stored_bytes"])')
"$CXLPOOL" remote-cat "ucx://127.0.0.1:$HPORT/$H" raw --token-file "$T/tok" >"$T/hcat" 2>"$T/err" </dev/null &&
  cmp -s "$T/hcat" "$T/src.bin" && ok || fail "remote-cat of a pool of tiers: $(cat "$T/err")"
h1=$(home_bytes)
[ -n "$h1" ] && [ "$h1" -ge "$STORED" ] && ok || fail "home bytes after a read of all: '$h1' of $STORED"
expect 0 "" "$CXLPOOL" migrate "$H" raw dram --no-progress
"$CXLPOOL" remote-cat "ucx://127.0.0.1:$HPORT/$H" raw --token-file "$T/tok" >"$T/hcat" 2>"$T/err" </dev/null &&
  cmp -s "$T/hcat" "$T/src.bin" && ok || fail "remote-cat from dram: $(cat "$T/err")"
h2=$(home_bytes)
[ "$h2" = "$h1" ] && ok || fail "home bytes moved reading from dram: $h1 then $h2"
kill "$HSRV"; wait "$HSRV" 2>/dev/null
"$CXLPOOL" destroy "$H" --yes >/dev/null 2>&1

finish
