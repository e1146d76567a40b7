#!/bin/bash
# ingest_fragmented.sh CLI [DIR]: times a 250 MiB ingest in 64 KiB shards
# (4000 shards) into a pool whose free space is two 200 MiB holes, which no
# single extent can hold (issue 12 item 8). Run it with two builds' CLIs in
# turn to compare them; DIR (default /var/tmp) holds the zero-filled sources.
set -e
B=$1; P=frag.$$; D=${2:-/var/tmp}
[ -f "$D/f200" ] || head -c $((200 << 20)) /dev/zero >"$D/f200"
[ -f "$D/f4" ] || head -c $((4 << 20)) /dev/zero >"$D/f4"
[ -f "$D/f250" ] || head -c $((250 << 20)) /dev/zero >"$D/f250"
$B create $P 520M --lease-slots 8 >/dev/null
$B ingest $P a1 $D/f200 --record-size 4096 --no-progress >/dev/null
$B ingest $P s1 $D/f4 --record-size 4096 --no-progress >/dev/null
$B ingest $P a2 $D/f200 --record-size 4096 --no-progress >/dev/null
$B ingest $P s2 $D/f4 --record-size 4096 --no-progress >/dev/null
$B rm $P a1 >/dev/null; $B rm $P a2 >/dev/null
s=$(date +%s.%N)
$B ingest $P big $D/f250 --record-size 4096 --shard-bytes 64K --no-progress >/dev/null
e=$(date +%s.%N)
echo "$B: $(echo "$e - $s" | bc) s"
$B destroy $P --yes >/dev/null
