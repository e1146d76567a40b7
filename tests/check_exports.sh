#!/bin/bash
# Every dynamic symbol the library defines starts with cxlp_.
set -euo pipefail
lib="$1"
bad=$(nm -D --defined-only "$lib" | awk '{print $3}' | grep -v '^cxlp_' | grep -v '^CXLPOOL_0$' || true)
if [ -n "$bad" ]; then
  echo "non-cxlp_ exports in $lib:"; echo "$bad"; exit 1
fi
n=$(nm -D --defined-only "$lib" | grep -c ' cxlp_' || true)
[ "$n" -gt 10 ] || { echo "only $n cxlp_ exports"; exit 1; }
echo "ok: $n exports, all cxlp_"
