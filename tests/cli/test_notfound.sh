#!/usr/bin/env bash
# A missing pool, dataset or record exits 4 and names what is missing.
source "$(dirname "$0")/lib.sh"

NOPE="clitest.absent.$$"
for c in ls stat verify; do
  expect 4 "$NOPE" "$CXLPOOL" "$c" "$NOPE"
  grep -q "cxlpool: $c: " "$T/err" && ok || fail "$c: message prefix: $(cat "$T/err")"
done
expect 4 "$NOPE" "$CXLPOOL" cat "$NOPE" d 0
expect 4 "$NOPE" "$CXLPOOL" rm "$NOPE" d
expect 4 "$NOPE" "$CXLPOOL" destroy "$NOPE" --yes
expect 4 "$NOPE" "$CXLPOOL" ingest "$NOPE" d /etc/hostname --format raw --record-size 1
expect 4 "$NOPE" "$CXLPOOL" bench gather "$NOPE" d
expect 4 "$NOPE" "$CXLPOOL" ls "file:$T/$NOPE.pool"

pool_name P nf
expect 0 "" "$CXLPOOL" create "$P" 16M
expect 4 "nosuch" "$CXLPOOL" cat "$P" nosuch 0
expect 4 "nosuch" "$CXLPOOL" rm "$P" nosuch
expect 4 "nosuch" "$CXLPOOL" stat "$P" nosuch
expect 4 "nosuch" "$CXLPOOL" bench gather "$P" nosuch
head -c 4096 /dev/urandom >"$T/rec.raw"
expect 0 "" "$CXLPOOL" ingest "$P" small "$T/rec.raw" --format raw --record-size 512
expect 4 "" "$CXLPOOL" cat "$P" small 8
expect 0 "" "$CXLPOOL" cat "$P" small 7 --format raw
# A missing source file is a runtime error (1), not a missing pool (4).
expect 1 "$T/none.raw" "$CXLPOOL" ingest "$P" x "$T/none.raw" --format raw --record-size 8
finish
