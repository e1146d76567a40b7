#!/usr/bin/env bash
# Staging through a remote tier (docs/remote.md, "The remote tier"), on
# loopback with UCX_TLS=tcp: pool A (one tier, SIZE_MB of raw records in
# 16 MiB shards) served by `cxlpool serve`; pool B (a dram tier and a
# remote tier naming A's server) migrates the dataset into dram (every
# shard read from the peer, verified, placed) with 1 and 2 threads, after a
# migration back to the remote tier each time; in the same run,
# ucx_perftest ucp_am_bw at 16 MiB (what one READ moves) and remote-cat.
# Usage: [SHARD=BYTES] bench/remote_tier.sh [CXLPOOL] [SIZE_MB] [ROUNDS]
# (SHARD: the ingest's --shard-bytes and ucp_am_bw's message, default 16 MiB)
set -u
C=${1:-build/cxlpool}
SIZE_MB=${2:-256}
ROUNDS=${3:-3}
SHARD=${SHARD:-16777216}
command -v ucx_perftest >/dev/null || { echo "ucx_perftest missing (ucx-utils)"; exit 77; }
export UCX_TLS=tcp
T=$(mktemp -d /tmp/cxlp-rtbench.XXXXXX)
A=rtbench.a.$$ B=rtbench.b.$$
SRV=
cleanup() {
  [ -n "$SRV" ] && kill "$SRV" 2>/dev/null
  "$C" destroy "$A" --yes >/dev/null 2>&1; "$C" destroy "$B" --yes >/dev/null 2>&1
  rm -rf "$T"
}
trap cleanup EXIT
"$C" create "$A" $((SIZE_MB + 64))M >/dev/null || exit 1
head -c $((SIZE_MB << 20)) /dev/urandom >"$T/src.bin"
"$C" ingest "$A" raw "$T/src.bin" --format raw --record-size 4096 --shard-bytes "$SHARD" \
  --no-progress >/dev/null || exit 1
printf 'bench\n' >"$T/tok"; chmod 600 "$T/tok"
export CXLPOOL_TOKEN_FILE="$T/tok"
"$C" serve "$A" --listen 127.0.0.1:0 --token-file "$T/tok" >"$T/serve.out" 2>"$T/serve.log" &
SRV=$!
for _ in $(seq 100); do grep -q "listening on" "$T/serve.out" && break; sleep 0.1; done
PORT=$(sed -n 's/^listening on 127.0.0.1:\([0-9]*\)$/\1/p' "$T/serve.out")
"$C" create "$B" --tier dram=shm:$((SIZE_MB + 64))M --tier "remote=ucx://127.0.0.1:$PORT/$A" \
  >/dev/null || exit 1
"$C" ls "$B" >/dev/null
# MB/s of a migration's own figure ("... copied in S s")
mig() {
  "$C" migrate "$B" raw remote --no-progress >/dev/null
  "$C" migrate "$B" raw dram --threads "$1" --no-progress |
    awk '{for (i = 1; i < NF; i++) if ($i == "copied" && $(i+1) == "in") {s = $(i+2)}}
         END {printf "%.0f", '"$SIZE_MB"' * 1048576 / s / 1e6}'
}
amb() {
  local p=$((30000 + RANDOM % 20000))
  ucx_perftest -p "$p" >/dev/null 2>&1 & local s=$!
  sleep 0.5
  ucx_perftest 127.0.0.1 -p "$p" -t ucp_am_bw -s "$SHARD" -n $(( (1600 << 20) / SHARD + 10 )) -w 10 -f 2>&1 |
    awk '$1 ~ /^[0-9]+$/ && NF == 8 {print $(NF-2)}' | tail -1
  kill "$s" 2>/dev/null; wait "$s" 2>/dev/null
}
printf "%-6s %12s %12s %14s %16s\n" round "1 thread" "2 threads" "ucp_am_bw $SHARD" "remote-cat s"
for r in $(seq "$ROUNDS"); do
  m1=$(mig 1); m2=$(mig 2); a=$(amb)
  t0=$(date +%s.%N)
  "$C" remote-cat "ucx://127.0.0.1:$PORT/$A" raw --token-file "$T/tok" >/dev/null 2>&1
  t1=$(date +%s.%N)
  printf "%-6s %12s %12s %14.0f %16.2f\n" "$r" "$m1" "$m2" "${a:-0}" "$(echo "$t1 - $t0" | bc)"
done
