#!/usr/bin/env bash
# Bad input files: each ingest fails with a non-zero exit, a message that
# names the file (and the field where there is one), and the pool unchanged
# (listing and allocation figures identical before and after).
source "$(dirname "$0")/lib.sh"
python3 -c 'import numpy' 2>/dev/null || { echo "SKIP: numpy missing"; exit 77; }
python3 "$(dirname "$0")/mkdata.py" "$T" || { fail "mkdata.py"; finish; }

pool_name P bad
expect 0 "" "$CXLPOOL" create "$P" 16M
expect 0 "" "$CXLPOOL" ingest "$P" keep "$T/good.raw" --format raw --record-size 256
state "$P" >"$T/before"

# bad CASE_NAME PATTERN SRC [ARGS]: ingest must exit 1 with PATTERN in stderr.
bad() {
  local what=$1 pat=$2; shift 2
  expect 1 "$pat" "$CXLPOOL" ingest "$P" "x_$what" "$@" || echo "  (case: $what)" >&2
  unchanged "$P" "$T/before" "$what"
}

bad truncated_idx   "trunc_idx\.idx"                        "$T/trunc_idx" --format megatron
bad corrupt_idx     "magic_idx\.idx.*magic|magic.*magic_idx" "$T/magic_idx" --format megatron
bad version_idx     "version_idx\.idx.*version|version.*version_idx" "$T/version_idx" --format megatron
bad short_bin       "short_bin\.bin"                        "$T/short_bin" --format megatron
bad doc_order       "baddoc_idx\.idx"                       "$T/baddoc_idx" --format megatron
bad npy_dtype       "complex\.npy.*(descr|dtype)|(descr|dtype).*complex\.npy" "$T/complex.npy"
bad npy_fortran     "fortran\.npy.*fortran_order|fortran_order.*fortran\.npy" "$T/fortran.npy"
bad npy_header      "object_hdr\.npy"                       "$T/object_hdr.npy"
bad raw_multiple    "odd\.raw.*(1000|record)"               "$T/odd.raw" --format raw --record-size 64
# A raw import without --record-size: an argument error (2).
expect 2 "record_size|record-size" "$CXLPOOL" ingest "$P" x "$T/good.raw" --format raw
unchanged "$P" "$T/before" "raw without record size"
# the name is taken
expect 1 "keep" "$CXLPOOL" ingest "$P" keep "$T/good.raw" --format raw --record-size 256
unchanged "$P" "$T/before" "name taken"

# Pool full: 16 MiB of records into a 16 MiB pool (6 MiB of it data area).
head -c $((16 << 20)) /dev/zero >"$T/big.raw"
bad pool_full       "full|FULL"                             "$T/big.raw" --format raw --record-size 4096

# The pool still verifies and the kept dataset is intact.
expect 0 "" "$CXLPOOL" verify "$P" --quiet
expect 0 "" "$CXLPOOL" cat "$P" keep 3 --format raw
cmp -s "$T/out" <(head -c 256 "$T/good.raw") && ok || fail "kept dataset changed"
finish
