#!/usr/bin/env bash
# Corruption in a file: pool. A flipped byte in a shard's records makes
# verify exit 3 naming the dataset; a damaged header or a header from another
# layout signature makes every command fail (verify: 3) without writing to
# the pool file.
source "$(dirname "$0")/lib.sh"

F="$T/pool.img"
P="file:$F"
track "$P"
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 256)' >"$T/pattern.raw"
expect 0 "" "$CXLPOOL" create "$P" 16M
expect 0 "" "$CXLPOOL" ingest "$P" pat "$T/pattern.raw" --format raw --record-size 1024
expect 0 "" "$CXLPOOL" verify "$P" --quiet
cp --sparse=always "$F" "$T/clean.img"

# flip FILE OFFSET: xor one byte with 0xff.
flip() {
  python3 - "$1" "$2" <<'PY'
import sys
path, off = sys.argv[1], int(sys.argv[2])
with open(path, "r+b") as f:
    f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0xFF]))
PY
}

# 1. A record byte: find the pattern in the pool image.
off=$(python3 -c '
import sys
d = open(sys.argv[1], "rb").read()
i = d.find(bytes(range(256)) * 4)
print(i + 4096 + 77 if i >= 0 else -1)' "$F")
if [ "$off" -lt 0 ]; then fail "pattern not found in the pool image"; else
  flip "$F" "$off"
  expect 3 "pat" "$CXLPOOL" verify "$P"
  expect 3 "" "$CXLPOOL" verify "$P" --json
  is_json "$T/out"
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["ok"] is False and s["code"]=="CXLP_ECORRUPT", s' "$T/out" \
    && ok || fail "verify --json on corruption: $(cat "$T/out")"
fi

# 2. The pool header: a byte inside the checksummed header.
cp --sparse=always "$T/clean.img" "$F"
HDR_OFF=${CXLP_TEST_HDR_OFF:-24}
flip "$F" "$HDR_OFF"
sum0=$(sha256sum "$F" | cut -d' ' -f1)
expect 3 "$F" "$CXLPOOL" verify "$P"
expect 1 "$F" "$CXLPOOL" ls "$P"
expect 1 "$F" "$CXLPOOL" ingest "$P" more "$T/pattern.raw" --format raw --record-size 1024
[ "$(sha256sum "$F" | cut -d' ' -f1)" = "$sum0" ] && ok || fail "a failed command wrote to a corrupt pool"

# 3. Another layout signature (header checksum recomputed, so only the
#    signature differs): patched by tests/cli/patch_header.py.
cp --sparse=always "$T/clean.img" "$F"
if python3 "$(dirname "$0")/patch_header.py" layout "$F" 2>"$T/patch.err"; then
  sum0=$(sha256sum "$F" | cut -d' ' -f1)
  expect 3 "layout|LAYOUT" "$CXLPOOL" verify "$P"
  expect 1 "layout|LAYOUT" "$CXLPOOL" ls "$P"
  expect 1 "layout|LAYOUT" "$CXLPOOL" ingest "$P" more "$T/pattern.raw" --format raw --record-size 1024
  [ "$(sha256sum "$F" | cut -d' ' -f1)" = "$sum0" ] && ok || fail "a command wrote to a foreign-layout pool"
else
  fail "patch_header.py: $(cat "$T/patch.err")"
fi
# 4. A newer format version (checksum kept valid): refused as not ours.
cp --sparse=always "$T/clean.img" "$F"
if python3 "$(dirname "$0")/patch_header.py" version "$F" 2>"$T/patch.err"; then
  expect 3 "version" "$CXLPOOL" verify "$P"
  expect 1 "version" "$CXLPOOL" ingest "$P" more "$T/pattern.raw" --format raw --record-size 1024
else
  fail "patch_header.py version: $(cat "$T/patch.err")"
fi
# 5. A pool of format 1 (one tier, a catalog listing every shard): refused
#    with what to do about it.
cp --sparse=always "$T/clean.img" "$F"
if python3 "$(dirname "$0")/patch_header.py" v1 "$F" 2>"$T/patch.err"; then
  expect 3 "format version 1.*recreate" "$CXLPOOL" verify "$P"
  expect 1 "format version 1.*recreate" "$CXLPOOL" ls "$P"
else
  fail "patch_header.py v1: $(cat "$T/patch.err")"
fi
# 6. A pool of format 2 (hosts, a catalog listing every shard): the same.
cp --sparse=always "$T/clean.img" "$F"
if python3 "$(dirname "$0")/patch_header.py" v2 "$F" 2>"$T/patch.err"; then
  expect 3 "format version 2 .hosts.*no converter.*recreate" "$CXLPOOL" verify "$P"
  expect 1 "format version 2 .hosts.*recreate" "$CXLPOOL" stat "$P"
else
  fail "patch_header.py v2: $(cat "$T/patch.err")"
fi
finish
