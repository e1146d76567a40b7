#!/usr/bin/env bash
# The one run to make on a CUDA machine (docs/gpu.md): builds the extension
# for that machine's Python from .gpudeps/ (bench/gpu_build.sh), runs the
# tests that need CUDA (and the stand-in ones beside them), then
# bench/gpu_check.py, which measures every acceptance figure of the GPU path
# and prints a short table last. Logs and gpu_check.json go to $OUT (the
# current directory's gpu_check_out/ when OUT is unset).
#   bash bench/gpu_check.sh            (PYTHON=... to pick the interpreter)
set -uo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-/opt/torch/.venv/bin/python3}
[ -x "$PY" ] || PY=python3
OUT=${OUT:-$PWD/gpu_check_out}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
t0=$(date +%s)
echo "=== build ($PY)"
if ! bash bench/gpu_build.sh "$PY" >"$OUT/build.log" 2>&1; then
  tail -30 "$OUT/build.log"; echo "gpu_check.sh: build failed"; exit 1
fi
export "$(tail -1 "$OUT/build.log")"   # PYTHONPATH=...
echo "built in $(( $(date +%s) - t0 )) s: $PYTHONPATH"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null
echo "=== tests: tests/python/test_gpu.py test_gds.py (CUDA ones included)"
"$PY" -m pytest -q -p no:cacheprovider tests/python/test_gpu.py tests/python/test_gds.py \
  >"$OUT/pytest.log" 2>&1
rc_tests=$?
tail -12 "$OUT/pytest.log"
echo "=== bench/gpu_check.py"
"$PY" bench/gpu_check.py --out "$OUT" 2>&1 | tee "$OUT/gpu_check.log"
rc_bench=${PIPESTATUS[0]}
echo "gpu_check.sh: tests rc=$rc_tests, checks rc=$rc_bench, $(( $(date +%s) - t0 )) s in all"
[ $rc_tests -eq 0 ] && [ $rc_bench -eq 0 ]
