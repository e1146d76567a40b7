#!/usr/bin/env bash
# Permissions: pools are created 0600; another user (uid 65534) can neither
# read nor write them; a pool shared read-only (0644) can be listed but not
# written by another user (owner check); an unreadable source file is named.
# Every failure leaves the pool unchanged.
source "$(dirname "$0")/lib.sh"
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root to switch to uid 65534"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: setpriv missing"; exit 77; }
nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups -- "$@"; }

head -c 8192 /dev/urandom >"$T/src.raw"
chmod 644 "$T/src.raw"

pool_name P perm
expect 0 "" "$CXLPOOL" create "$P" 16M
mode=$(stat -c %a "/dev/shm/cxlp.$P")
[ "$mode" = 600 ] && ok || fail "new pool has mode $mode, want 600"
expect 0 "" "$CXLPOOL" ingest "$P" d "$T/src.raw" --format raw --record-size 512
state "$P" >"$T/before"

expect 1 "cxlp\.$P|$P" nobody "$CXLPOOL" ls "$P"
grep -Eq "EACCES|ermission" "$T/err" && ok || fail "no-permission message: $(cat "$T/err")"
expect 1 "$P" nobody "$CXLPOOL" ingest "$P" e "$T/src.raw" --format raw --record-size 512
expect 1 "$P" nobody "$CXLPOOL" rm "$P" d
unchanged "$P" "$T/before" "no permission"

# file: pools too.
F="$T/pool.img"
track "file:$F"
expect 0 "" "$CXLPOOL" create "file:$F" 16M
mode=$(stat -c %a "$F")
[ "$mode" = 600 ] && ok || fail "new file pool has mode $mode, want 600"
expect 1 "$F" nobody "$CXLPOOL" stat "file:$F"

# Readable by others: reading works, writing is refused by owner.
pool_name Q shared
expect 0 "" "$CXLPOOL" create "$Q" 16M --mode 0644
expect 0 "" "$CXLPOOL" ingest "$Q" d "$T/src.raw" --format raw --record-size 512
state "$Q" >"$T/before"
expect 0 "" nobody "$CXLPOOL" ls "$Q"
expect 0 "" nobody "$CXLPOOL" cat "$Q" d 1 --format raw
cmp -s "$T/out" <(tail -c +513 "$T/src.raw" | head -c 512) && ok || fail "nobody read wrong bytes"
expect 1 "owner|OWNER|EACCES|ermission" nobody "$CXLPOOL" ingest "$Q" e "$T/src.raw" --format raw --record-size 512
unchanged "$Q" "$T/before" "write by non-owner"

# A source file the user cannot read: the message names it.
pool_name R mine
expect 0 "" nobody "$CXLPOOL" create "$R" 16M
state "$R" >"$T/before.r"
chmod 600 "$T/src.raw"
expect 1 "src\.raw" nobody "$CXLPOOL" ingest "$R" d "$T/src.raw" --format raw --record-size 512
unchanged "$R" "$T/before.r" "unreadable source"
finish
