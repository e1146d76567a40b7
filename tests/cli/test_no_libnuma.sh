#!/usr/bin/env bash
# Without libnuma (issue 34): the library loads libnuma when first used, so
# on a machine without it a numa: pool is refused with an error naming
# libnuma, and every other pool works. Here libnuma is hidden from the
# commands by a mount namespace of their own, an empty file bound over it
# (root and unshare(1) needed, else skipped: exit 77). scripts/wheel-check.sh
# runs the same on a Debian root where libnuma was never installed.
source "$(dirname "$0")/lib.sh"

lib=$(readlink -f "$(ldconfig -p | awk '/libnuma\.so\.1 / {print $NF; exit}')" 2>/dev/null)
if [ "$(id -u)" -ne 0 ] || ! command -v unshare >/dev/null || [ -z "$lib" ] ||
   ! unshare -m true 2>/dev/null; then
  echo "skipped: needs root, unshare and an installed libnuma.so.1 to hide"
  exit 77
fi
# UCX's libucs needs libnuma when it is loaded: a cxlpool built with remote
# pools (CXLP_UCX, docs/remote.md) cannot start without it. The wheel is
# built without UCX, and scripts/wheel-check.sh runs these checks on it in a
# root where libnuma was never installed.
# (ldd's whole output first: grep -q stops reading at the match, and under
# pipefail ldd's SIGPIPE would fail the pipeline)
needs=$(ldd "$CXLPOOL" 2>/dev/null || true)
if [[ "$needs" == *libucp* ]]; then
  echo "skipped: this cxlpool links UCX (CXLP_UCX), whose libucs loads libnuma; the build without UCX is checked by scripts/wheel-check.sh"
  exit 77
fi
: >"$T/empty"
# nolib CMD...: CMD with libnuma.so.1 an empty file
nolib() { unshare -m sh -c 'mount --bind "$0" "$1" && shift && exec "$@"' "$T/empty" "$lib" "$@"; }

pool_name P nolib
expect 1 "numa: media need libnuma, which could not be loaded \(.*libnuma\.so\.1.*\); install it" \
  nolib "$CXLPOOL" create "numa:0:$P" 16M
grep -q CXLP_EUNSUPPORTED "$T/err" && ok || fail "no libnuma: not CXLP_EUNSUPPORTED: $(cat "$T/err")"
[ ! -e "/dev/shm/cxlp.$P" ] && ok || fail "a refused numa create left /dev/shm/cxlp.$P"
expect 1 "libnuma" nolib "$CXLPOOL" create "numa:interleave=0:$P" 16M
# everything else
head -c 65536 /dev/urandom >"$T/r.raw"
expect 0 "" nolib "$CXLPOOL" create "$P" 16M
expect 0 "" nolib "$CXLPOOL" ingest "$P" r "$T/r.raw" --record-size 4096 --no-progress
expect 0 "" nolib "$CXLPOOL" verify "$P" --quiet
expect 0 "" nolib "$CXLPOOL" stat "$P"
expect 0 "" nolib "$CXLPOOL" bench gather "$P" r --rounds 1 --threads 1
expect 0 "" nolib "$CXLPOOL" topo
finish
