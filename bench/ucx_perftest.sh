#!/usr/bin/env bash
# The transfer choice of `cxlpool serve` (docs/remote.md), measured with
# ucx_perftest (ucx-utils) on loopback: UCP GET (one-sided, served over TCP
# by the responder's active messages) against UCP active-message and
# tag-matched sends (what a request plus a server-side send does), at the
# sizes a read of a shard moves. Usage: bench/ucx_perftest.sh [TLS] [ITERS]
# TLS defaults to tcp (UCX_TLS); sizes 64 KiB, 1 MiB, 4 MiB.
set -u
TLS=${1:-tcp}
ITERS=${2:-2000}
PORT=$((20000 + RANDOM % 20000))
command -v ucx_perftest >/dev/null || { echo "ucx_perftest missing (ucx-utils)"; exit 77; }
printf "%-10s %10s %12s %s\n" test bytes "MB/s" tls
for size in 65536 1048576 4194304; do
  n=$ITERS
  [ "$size" -ge 1048576 ] && n=$((ITERS / 4))
  for t in ucp_get ucp_am_bw tag_bw; do
    PORT=$((PORT + 1))
    UCX_TLS=$TLS ucx_perftest -p "$PORT" >/dev/null 2>&1 &
    srv=$!
    sleep 0.5
    out=$(UCX_TLS=$TLS timeout 120 ucx_perftest 127.0.0.1 -p "$PORT" -t "$t" -s "$size" \
          -n "$n" -w 50 -f 2>&1)
    kill "$srv" 2>/dev/null; wait "$srv" 2>/dev/null
    # -f: one line of figures; the third from the end is the overall bandwidth (MB/s)
    bw=$(printf '%s\n' "$out" | awk '$1 ~ /^[0-9]+$/ && NF == 8 {print $(NF-2)}' | tail -1)
    printf "%-10s %10s %12s %s\n" "$t" "$size" "${bw:-?}" "$TLS"
    [ -z "$bw" ] && printf '%s\n' "$out" | tail -3
  done
done
