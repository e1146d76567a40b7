#!/usr/bin/env bash
# A pool written before pool format 3 (tests/data/shard-format1.bin.xz:
# `cxlpool create file:... 4M --catalog-bytes 64K`, then a .npy of 5x3x4
# int32, 1 KiB of raw uint16 records of 64 bytes and a Megatron dataset of 5
# uint16 sequences in 2 documents, in shard format 1; its pool metadata in
# pool format 2, as the hosts build writes it). Pool format 3 (hosts and
# tiers: per-dataset shard tables and location words) cannot read format 2's
# catalog, so every command refuses the pool, naming it and its version and
# saying what to do, and changes no byte of it. (Shards of format 1 inside a
# format 3 pool are read: tests/c/test_columns.c, "v1rows".)
source "$(dirname "$0")/lib.sh"
F="$T/shard-format1.bin"
python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
  "$DATA/shard-format1.bin.xz" "$F" || { fail "unpacking the pool image"; finish; }
P="file:$F"
sum0=$(sha256sum "$F" | cut -d' ' -f1)
want="shard-format1.bin: format version 2 .hosts.*this build reads format version 3.*recreate the pool"
expect 1 "$want" "$CXLPOOL" ls "$P"
expect 3 "$want" "$CXLPOOL" verify "$P"
expect 1 "$want" "$CXLPOOL" cat "$P" arr 4 --format json
expect 1 "$want" "$CXLPOOL" stat "$P" mt
head -c 640 /dev/urandom > "$T/new.raw"
expect 1 "$want" "$CXLPOOL" ingest "$P" new "$T/new.raw" --record-size 64
[ "$(sha256sum "$F" | cut -d' ' -f1)" = "$sum0" ] && ok || fail "a command wrote to the old pool"
finish
