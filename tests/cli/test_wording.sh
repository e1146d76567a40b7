#!/usr/bin/env bash
# What the CLI tells a new user, said so that it is true (issue 34 item 7):
#   create names each number it prints (a pool of one tier: size and data
#     area; a pool of tiers: the tiers' room for shards and the pool
#     object's metadata);
#   stat of a pci: pool on a plain file does not claim a QEMU ivshmem device;
#   stat marks the reservation of an ingest that died as such, and the next
#     write frees it.
source "$(dirname "$0")/lib.sh"

pool_name P wording
expect 0 "" "$CXLPOOL" create "$P" 16M
grep -Eq "^created pool $P: size 16.00 MiB, data area [0-9.]+ MiB, at /dev/shm/cxlp.$P, media shm \(emulated CXL\)" "$T/out" &&
  ok || fail "create of one tier: $(cat "$T/out")"

pool_name Q tiers
track "$Q"
expect 0 "" "$CXLPOOL" create "$Q" --tier dram=shm:20M --tier "nvme=file:$T/q.tier:64M" --meta-bytes 4M
grep -Eq "^created pool $Q: 2 tiers, 80.00 MiB for shards \(below\); pool object [0-9.]+ MiB of metadata \(shard tables: 4.00 MiB, --meta-bytes\)" "$T/out" &&
  ok || fail "create of tiers: $(cat "$T/out")"
expect 0 "" "$CXLPOOL" destroy "$Q" --yes

truncate -s 16M "$T/region"
track "pci:$T/region"
expect 0 "" "$CXLPOOL" create "pci:$T/region" 16M
expect 0 "" "$CXLPOOL" stat "pci:$T/region"
grep -q "^media: *pci (emulated CXL: a plain file, no PCI device)" "$T/out" && ok ||
  fail "stat of pci on a plain file: $(grep media: "$T/out")"
grep -q ivshmem "$T/out" && fail "stat of a plain file names ivshmem: $(cat "$T/out")" || ok
expect 0 "" "$CXLPOOL" stat "pci:$T/region" --json
grep -q '"emulated": true' "$T/out" && ok || fail "stat --json: $(head -c 300 "$T/out")"
expect 0 "" "$CXLPOOL" destroy "pci:$T/region" --yes

# an ingest killed in the middle of a shard (the fault point kills it)
head -c $((3 << 20)) /dev/urandom >"$T/big.raw"
CXLP_FAULT=writer-mid-shard "$CXLPOOL" ingest "$P" dead "$T/big.raw" --record-size 4096 --no-progress \
  >/dev/null 2>&1
[ $? -eq 137 ] && ok || fail "the fault point did not kill the ingest"
expect 0 "" "$CXLPOOL" stat "$P"
grep -Eq "reserved [0-9.]+ [KM]iB \(([0-9.]+ [KM]iB) of it by ingests that died: freed at the next write\)" "$T/out" &&
  ok || fail "stat of a dead ingest's reservation: $(grep 'data area' "$T/out")"
expect 0 "" "$CXLPOOL" stat "$P" --json
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["reserved_dead_bytes"] == s["reserved_bytes"] > 0, s' "$T/out" &&
  ok || fail "stat --json reserved_dead_bytes: $(head -c 400 "$T/out")"
# the next write reclaims it
head -c 4096 /dev/urandom >"$T/small.raw"
expect 0 "" "$CXLPOOL" ingest "$P" small "$T/small.raw" --record-size 4096 --no-progress
expect 0 "" "$CXLPOOL" stat "$P" --json
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["reserved_dead_bytes"] == s["reserved_bytes"] == 0, s' "$T/out" &&
  ok || fail "after the next write: $(head -c 400 "$T/out")"
expect 0 "" "$CXLPOOL" stat "$P"
grep -q "died" "$T/out" && fail "stat after the reclaim: $(grep 'data area' "$T/out")" || ok
finish
