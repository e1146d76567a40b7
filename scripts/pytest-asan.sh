#!/usr/bin/env bash
# Runs pytest against the extension built with AddressSanitizer + UBSan.
#
#   scripts/pytest-asan.sh [pytest args]   (default: the lifetime, dataset,
#                                           loader and multi-field tests)
#
# Builds _core with -DCXLP_SANITIZE=ON in build-pyasan/ (BUILD_DIR), puts it
# in a package tree of its own (build-pyasan/pkg: the .py files linked from
# python/, the sanitized .so beside them), so the normal in-tree or installed
# build is left alone, and runs python with libasan preloaded: the
# interpreter is not built with ASan, so the runtime must come first.
# detect_leaks=0: CPython keeps objects alive at exit by design.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD_DIR:-build-pyasan}
mkdir -p "$B"
cmake -S . -B "$B" -G Ninja -DCXLP_SANITIZE=ON -DCXLP_PYTHON=ON -DCXLP_TESTS=OFF \
  -DCMAKE_BUILD_TYPE=Debug >"$B/configure.log" 2>&1 || { cat "$B/configure.log"; exit 1; }
ninja -C "$B" -j"${JOBS:-2}" _core
pkg="$B/pkg/cxl_dataloader"
rm -rf "$B/pkg"
mkdir -p "$pkg"
for f in python/cxl_dataloader/*.py; do ln -s "$PWD/$f" "$pkg/"; done
cp "$B"/_core*.so "$pkg/"
if [ $# -eq 0 ]; then
  set -- tests/python/test_lifetime.py \
    "tests/python/test_dataset.py::test_tensors_outlive_dataset_and_pool" \
    "tests/python/test_loader.py::test_batches_outlive_the_loader" \
    tests/python/test_loader.py tests/python/test_dataset.py tests/python/test_fields.py
fi
export LD_PRELOAD="$(gcc -print-file-name=libasan.so)" \
ASAN_OPTIONS="detect_leaks=0:abort_on_error=1:${ASAN_OPTIONS:-}" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:${UBSAN_OPTIONS:-}" \
  PYTHONPATH="$PWD/$B/pkg"
# the sanitized build is the one imported, and its runtime is live
python3 -c 'import cxl_dataloader._core as c, sys; assert "/pkg/" in c.__file__, c.__file__'
nm -D "$pkg"/_core*.so | grep __asan_report >/dev/null || { echo "not an ASan build" >&2; exit 1; }
python3 -m pytest -q -p no:cacheprovider "$@"
