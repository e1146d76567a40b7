#!/usr/bin/env bash
# Usage errors exit 2 with a message naming the command and the argument;
# --help works on the whole tool and on each command (exit 0, stdout).
source "$(dirname "$0")/lib.sh"

expect 0 "" "$CXLPOOL" --help
grep -q "exit codes" "$T/out" && grep -q "not found" "$T/out" && ok || fail "--help lacks exit codes"
expect 0 "" "$CXLPOOL" --version
grep -Eq '^cxlpool [0-9]+\.[0-9]+' "$T/out" && ok || fail "--version output: $(cat "$T/out")"

for c in topo create ingest ls stat verify cat rm destroy bench; do
  expect 0 "" "$CXLPOOL" "$c" --help
  grep -q "usage: cxlpool $c" "$T/out" && ok || fail "$c --help: $(head -c 200 "$T/out")"
done

expect 2 "usage" "$CXLPOOL"
expect 2 "unknown command 'frobnicate'" "$CXLPOOL" frobnicate
expect 2 "ls: unknown option '--bogus'" "$CXLPOOL" ls somepool --bogus
expect 2 "ls: missing argument" "$CXLPOOL" ls
expect 2 "ls: unexpected argument 'extra'" "$CXLPOOL" ls p extra
expect 2 "create: SIZE: '12Q' is not a size" "$CXLPOOL" create p 12Q
expect 2 "create: SIZE" "$CXLPOOL" create p 0
expect 2 "create: --mode" "$CXLPOOL" create p 1M --mode 999
expect 2 "create: option '--mode' needs a value" "$CXLPOOL" create p 1M --mode
expect 2 "ingest: --format: 'csv'" "$CXLPOOL" ingest p d f --format csv
expect 2 "ingest: --dtype: unknown dtype 'int7'" "$CXLPOOL" ingest p d f --dtype int7
expect 2 "ingest: --record-size" "$CXLPOOL" ingest p d f --record-size 0
expect 2 "ingest: missing argument" "$CXLPOOL" ingest p d
expect 2 "cat: INDEX: 'x1'" "$CXLPOOL" cat p d x1
expect 2 "cat: --format: 'yaml'" "$CXLPOOL" cat p d 0 --format yaml
expect 2 "destroy: refusing to destroy p without --yes" "$CXLPOOL" destroy p
expect 2 "bench: which benchmark" "$CXLPOOL" bench
expect 2 "bench: unknown benchmark 'scatter'" "$CXLPOOL" bench scatter p d
expect 2 "bench: --threads" "$CXLPOOL" bench gather p d --threads 0,2
expect 2 "bench: --batch" "$CXLPOOL" bench gather p d --batch 0
expect 2 "topo: unexpected argument" "$CXLPOOL" topo extra

# Sizes take binary suffixes and fractions.
pool_name P usage
expect 0 "" "$CXLPOOL" create "$P" 12.5MiB
expect 0 "" "$CXLPOOL" stat "$P" --json
python3 - "$T/out" <<'PY' && ok || fail "1.5MiB pool size"
import json, sys
s = json.load(open(sys.argv[1]))
sys.exit(0 if 13107200 <= s["size"] <= 13 * 1048576 else 1)
PY
expect 1 "exist" "$CXLPOOL" create "$P" 16M
expect 0 "" "$CXLPOOL" destroy "$P" --yes
# Arguments the library rejects are usage errors too.
pool_name P small
expect 2 "too small" "$CXLPOOL" create "$P" 1M
expect 2 "bogus" "$CXLPOOL" ls "bogus:thing"
finish
