#!/usr/bin/env bash
# Opt-in (CXLP_NETNS_TEST=1, root): cxlpool serve in a network namespace of
# its own, reached over a veth pair with UCX_TLS=tcp (so no shared-memory
# transport between the two processes): a raw ingest read back byte for
# byte, and remote-cat's rate printed beside ucx_perftest's ucp_am_bw on
# the same link (figures only: no timing decides this test); then pool B,
# a dram tier and a remote tier naming that server, in this namespace:
# the dataset listed, migrated into dram from the peer (every shard
# verified) and read back byte for byte.
source "$(dirname "$0")/lib.sh"
[ "${CXLP_NETNS_TEST:-0}" = 1 ] || { echo "SKIP: set CXLP_NETNS_TEST=1 (root)"; exit 77; }
[ "$(id -u)" -eq 0 ] && command -v ip >/dev/null || { echo "SKIP: needs root and ip"; exit 77; }
"$CXLPOOL" remote-cat "ucx://127.0.0.1:1/x" x --timeout 2s >/dev/null 2>"$T/ucx" </dev/null
grep -q "no UCX" "$T/ucx" && { echo "SKIP: no UCX in this build"; exit 77; }

NS=cxlp-ns.$$
VH=cxh$$; VN=cxn$$
NET=10.233.$(( $$ % 250 ))
netns_cleanup() {
  [ -n "${SRV:-}" ] && kill "$SRV" 2>/dev/null && wait "$SRV" 2>/dev/null
  [ -n "${PS:-}" ] && kill "$PS" 2>/dev/null
  ip link del "$VH" 2>/dev/null
  ip netns del "$NS" 2>/dev/null
  cleanup
}
trap netns_cleanup EXIT
ip netns add "$NS" && ip link add "$VH" type veth peer name "$VN" &&
  ip link set "$VN" netns "$NS" && ip addr add "$NET.1/30" dev "$VH" && ip link set "$VH" up &&
  ip netns exec "$NS" ip addr add "$NET.2/30" dev "$VN" &&
  ip netns exec "$NS" ip link set "$VN" up && ip netns exec "$NS" ip link set lo up &&
  ok || { fail "veth set-up"; finish; }
if [ -n "${CXLP_NETNS_RATE:-}" ]; then  # e.g. 1gbit: both directions shaped
  ip netns exec "$NS" tc qdisc add dev "$VN" root tbf rate "$CXLP_NETNS_RATE" burst 1mb \
    latency 50ms && tc qdisc add dev "$VH" root tbf rate "$CXLP_NETNS_RATE" burst 1mb \
    latency 50ms && ok || fail "tc"
fi

pool_name P netns
MB=${CXLP_NETNS_MB:-64}
expect 0 "" "$CXLPOOL" create "$P" $((MB * 2 + 64))M
head -c $((MB << 20)) /dev/urandom >"$T/src.bin"
expect 0 "" "$CXLPOOL" ingest "$P" raw "$T/src.bin" --format raw --record-size 4096 \
  --shard-bytes 16M --no-progress
printf 'ns-secret\n' >"$T/tok"; chmod 600 "$T/tok"
export UCX_TLS=tcp
ip netns exec "$NS" "$CXLPOOL" serve "$P" --listen "$NET.2:0" --token-file "$T/tok" \
  >"$T/serve.out" 2>"$T/serve.log" </dev/null &
SRV=$!
PORT=$(listen_port "$T/serve.out")
[ -n "$PORT" ] && ok || { fail "serve: $(cat "$T/serve.log")"; finish; }
t0=$(date +%s.%N)
expect 0 "verified" "$CXLPOOL" remote-cat "ucx://$NET.2:$PORT/$P" raw --token-file "$T/tok"
t1=$(date +%s.%N)
cmp -s "$T/out" "$T/src.bin" && ok || fail "bytes over the veth differ"
grep -q "client $NET.1:" "$T/serve.log" && ok || fail "log names the client: $(cat "$T/serve.log")"
rate=$(python3 -c "print('%.0f' % ($MB * 1048576 / ($t1 - $t0) / 1e6))")
PP=$((20000 + RANDOM % 20000))
ip netns exec "$NS" ucx_perftest -p "$PP" >/dev/null 2>&1 &
PS=$!
sleep 0.5
perf=$(timeout 60 ucx_perftest "$NET.2" -p "$PP" -t ucp_am_bw -s 16777216 -n 50 -w 5 -f 2>/dev/null |
       awk '$1 ~ /^[0-9]+$/ && NF == 8 {print $(NF-2)}' | tail -1)

# the remote tier over the veth
pool_name B netnsb
export CXLPOOL_TOKEN_FILE="$T/tok"
expect 0 "" "$CXLPOOL" create "$B" --tier dram=shm:$((MB + 32))M --tier "remote=ucx://$NET.2:$PORT/$P"
expect 0 "" "$CXLPOOL" ls "$B"
grep -Eq "^raw +$((MB * 256)) " "$T/out" && ok || fail "ls B: $(cat "$T/out")"
t2=$(date +%s.%N)
expect 0 "" "$CXLPOOL" migrate "$B" raw dram --no-progress --threads "${CXLP_NETNS_THREADS:-1}"
t3=$(date +%s.%N)
for i in 0 1 $((MB * 128)) $((MB * 256 - 1)); do
  expect 0 "" "$CXLPOOL" cat "$B" raw "$i" --format raw
  dd if="$T/src.bin" of="$T/want" bs=4096 skip="$i" count=1 status=none
  cmp -s "$T/out" "$T/want" && ok || fail "record $i through the remote tier differs"
done
expect 0 "" "$CXLPOOL" verify "$B"
tier=$(python3 -c "print('%.0f' % ($MB * 1048576 / ($t3 - $t2) / 1e6))")
echo "veth${CXLP_NETNS_RATE:+ at $CXLP_NETNS_RATE}: remote-cat $rate MB/s (whole process, $MB MiB);" \
     "remote tier: migrate into dram $tier MB/s (whole process, ${CXLP_NETNS_THREADS:-1} threads);" \
     "ucx_perftest ucp_am_bw 16 MiB ${perf:-?} MB/s"
finish
