# lib.sh - helpers the CLI shell tests source (not a test itself).
# Each test: `source "$(dirname "$0")/lib.sh"`; uses $CXLPOOL (the binary),
# $T (a private temp dir, removed at exit), pool_name (unique shm names, all
# destroyed at exit), expect (exit code + message check), same_state.
set -uo pipefail

CXLPOOL=${CXLPOOL_BIN:?CXLPOOL_BIN must point at the cxlpool binary}
DATA=${CXLP_TEST_DATA:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../data" && pwd)}
T=$(mktemp -d "${TMPDIR:-/tmp}/cxlp-cli.XXXXXX")
chmod 755 "$T"
POOLS=()
FAILS=0
CHECKS=0

cleanup() {
  for p in "${POOLS[@]}"; do "$CXLPOOL" destroy "$p" --yes >/dev/null 2>&1; done
  rm -rf "$T"
}
trap cleanup EXIT

# pool_name VAR PREFIX: sets VAR to a unique shm pool name, destroyed at exit.
# (Not used as $(pool_name ...): a subshell would lose the POOLS entry.)
pool_name() {
  local n="clitest.$2.$$.$RANDOM"
  POOLS+=("$n")
  printf -v "$1" '%s' "$n"
}
# track SPEC: destroy SPEC at exit too (file: pools).
track() { POOLS+=("$1"); }

fail() { echo "FAIL: $*" >&2; FAILS=$((FAILS + 1)); }
ok() { CHECKS=$((CHECKS + 1)); }

# expect CODE PATTERN CMD...: runs CMD (stdout -> $T/out, stderr -> $T/err),
# checks its exit code, and that stderr matches the extended regex PATTERN
# (skipped when PATTERN is empty).
expect() {
  local want=$1 pat=$2; shift 2
  "$@" >"$T/out" 2>"$T/err" </dev/null
  local rc=$?
  if [ "$rc" -ne "$want" ]; then
    fail "'$*' exited $rc, want $want; stderr: $(head -c 600 "$T/err")"
    return 1
  fi
  if [ -n "$pat" ] && ! grep -Eq -- "$pat" "$T/err"; then
    fail "'$*' stderr does not match /$pat/: $(head -c 600 "$T/err")"
    return 1
  fi
  ok
  return 0
}

# is_json FILE: parses as JSON.
# The port of a `cxlpool serve` whose stdout is file, once it says it
# listens (within 10 s); nothing when it did not.
listen_port() {
  local _
  for _ in $(seq 100); do grep -q "listening on" "$1" && break; sleep 0.1; done
  sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$1"
}

# A free TCP port on 127.0.0.1 (bound, then released).
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

is_json() {
  if python3 -m json.tool "$1" >/dev/null 2>"$T/jsonerr"; then ok; else
    fail "not JSON ($1): $(head -c 300 "$T/jsonerr"); text: $(head -c 300 "$1")"; fi
}

# state POOL: the observable state of a pool (listing + allocation figures).
state() {
  "$CXLPOOL" ls "$1" --json 2>&1
  "$CXLPOOL" stat "$1" --json 2>&1 | python3 -c '
import json, sys
s = json.load(sys.stdin)
print({k: s[k] for k in ("generation", "datasets", "used_bytes", "reserved_bytes", "free_bytes")})'
}

# unchanged POOL BEFORE_FILE WHAT: the pool state equals the saved one.
unchanged() {
  state "$1" >"$T/after"
  if cmp -s "$2" "$T/after"; then ok; else
    fail "$3: pool changed: $(diff "$2" "$T/after" | head -10)"; fi
}

finish() {
  if [ "$FAILS" -ne 0 ]; then
    echo "$(basename "$0"): $FAILS of $((CHECKS + FAILS)) checks failed"
    exit 1
  fi
  echo "$(basename "$0"): $CHECKS checks passed"
  exit 0
}
