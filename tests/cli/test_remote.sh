#!/usr/bin/env bash
# cxlpool serve and remote-cat on loopback (docs/remote.md): a raw ingest
# read back through the server byte for byte, its catalog listed; serve
# refuses to start without a token file or with one others may read; a
# client with a wrong token or none refused, the log naming the client and
# the reason; /metrics in Prometheus text; SIGTERM: exit 0. A build
# without UCX: serve and remote-cat say so.
source "$(dirname "$0")/lib.sh"

pool_name P remote
expect 0 "" "$CXLPOOL" create "$P" 64M
head -c 3000000 /dev/urandom >"$T/src.bin"
expect 0 "" "$CXLPOOL" ingest "$P" raw "$T/src.bin" --format raw --record-size 1000 \
  --shard-bytes 256K --no-progress
printf 'cli-secret\n' >"$T/tok"; chmod 600 "$T/tok"
printf 'wrong\n' >"$T/bad"; chmod 600 "$T/bad"
printf 'cli-secret\n' >"$T/open"; chmod 644 "$T/open"

"$CXLPOOL" remote-cat "ucx://127.0.0.1:1/$P" raw --timeout 5s >/dev/null 2>"$T/err" </dev/null
if grep -q "no UCX" "$T/err"; then
  expect 1 "no UCX.*CXLP_UCX=OFF" "$CXLPOOL" serve "$P" --listen 127.0.0.1:0 --token-file "$T/tok"
  expect 1 "no UCX" "$CXLPOOL" remote-cat "ucx://127.0.0.1:1/$P" raw
  echo "no UCX in this build"
  finish
fi

# refusals before listening
expect 2 "token-file F is required" "$CXLPOOL" serve "$P" --listen 127.0.0.1:0
expect 2 "$T/open: mode 0644 lets group or others" \
  "$CXLPOOL" serve "$P" --listen 127.0.0.1:0 --token-file "$T/open"
expect 4 "no-such-file: No such file" \
  "$CXLPOOL" serve "$P" --listen 127.0.0.1:0 --token-file "$T/no-such-file"
expect 2 "expected ADDR:PORT" "$CXLPOOL" serve "$P" --listen nowhere --token-file "$T/tok"

MP=$(free_port)  # for /metrics
"$CXLPOOL" serve "$P" --listen 127.0.0.1:0 --token-file "$T/tok" --metrics-port "$MP" \
  >"$T/serve.out" 2>"$T/serve.log" </dev/null &
SRV=$!
PORT=$(listen_port "$T/serve.out")
[ -n "$PORT" ] && ok || { fail "serve did not listen: $(cat "$T/serve.log")"; kill "$SRV"; exit 1; }
URL="ucx://127.0.0.1:$PORT/$P"

expect 0 "3000 records, 3000000 bytes, 12 shards verified" \
  "$CXLPOOL" remote-cat "$URL" raw --token-file "$T/tok"
cmp -s "$T/out" "$T/src.bin" && ok || fail "remote-cat bytes differ from the source"
expect 0 "" "$CXLPOOL" remote-cat "$URL" --list --token-file "$T/tok"
grep -q "^raw	3000 records	12 shards	3000000 bytes$" "$T/out" && ok || fail "list: $(cat "$T/out")"
expect 4 "no dataset 'nope'" "$CXLPOOL" remote-cat "$URL" nope --token-file "$T/tok"
expect 1 "wrong token" "$CXLPOOL" remote-cat "$URL" raw --token-file "$T/bad"
expect 1 "no token" "$CXLPOOL" remote-cat "$URL" raw
grep -Eq "client 127\.0\.0\.1:[0-9]+ refused: wrong token" "$T/serve.log" && ok ||
  fail "log: wrong token: $(cat "$T/serve.log")"
grep -Eq "client 127\.0\.0\.1:[0-9]+ refused: no token" "$T/serve.log" && ok ||
  fail "log: no token: $(cat "$T/serve.log")"

# /metrics: a plain HTTP GET
exec 3<>"/dev/tcp/127.0.0.1/$MP"
printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3
cat <&3 >"$T/metrics"
exec 3<&-
grep -q "^HTTP/1.0 200 OK" "$T/metrics" && ok || fail "metrics status: $(head -3 "$T/metrics")"
python3 - "$T/metrics" <<'PY' && ok || fail "metrics content: $(cat "$T/metrics")"
import sys
text = open(sys.argv[1], newline="").read().split("\r\n\r\n", 1)[1]
m = {}
for line in text.splitlines():
    if line and not line.startswith("#"):
        k, v = line.rsplit(" ", 1)
        m[k] = float(v)
assert m["cxlpool_serve_bytes_total"] >= 3000000, m
assert m["cxlpool_serve_home_bytes_total"] == 0, m  # a pool of one tier: memory
assert m['cxlpool_serve_requests_total{op="held"}'] == 0, m
assert m['cxlpool_serve_requests_total{op="read"}'] >= 12, m
assert m["cxlpool_serve_refused_total"] == 2, m
assert m["cxlpool_serve_clients_total"] == 5, m
assert m['cxlpool_serve_request_seconds_bucket{le="+Inf"}'] == m["cxlpool_serve_request_seconds_count"] > 0, m
# buckets cumulative
b = [v for k, v in m.items() if k.startswith("cxlpool_serve_request_seconds_bucket")]
assert b == sorted(b), b
PY

kill -TERM "$SRV"
wait "$SRV"
rc=$?
[ "$rc" -eq 0 ] && ok || fail "serve after SIGTERM exited $rc: $(tail -3 "$T/serve.log")"
grep -q "stopped" "$T/serve.log" && ok || fail "serve log: $(tail -3 "$T/serve.log")"
expect 1 "127.0.0.1:$PORT" "$CXLPOOL" remote-cat "$URL" raw --token-file "$T/tok" --timeout 3s

finish
