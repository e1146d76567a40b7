#!/usr/bin/env bash
# Runs every test of the project:
#   1. normal build (RelWithDebInfo): ctest
#   2. ASan+UBSan build (Debug): ctest
#   3. clang-14 libFuzzer build: replays each committed corpus, then fuzzes
#      each target for FUZZ_SECONDS (default 10; CI uses 30); a clang-14
#      ThreadSanitizer build runs the migration soak as threads for 10 s
#   4. scripts/qemu-numa-check.sh --cxl --hosts --region --fabric: topology
#      discovery and a numa-backed pool on a real kernel with a CPU-less NUMA
#      node (with a pool of two tiers migrated between its nodes), then a CXL
#      device, then two kernels sharing one pool (two guests, one memory),
#      then a CXL region used as devdax and as kmem, then the nvme tier on
#      an NVMe/TCP namespace exported by a second guest
#   5. the Python package: pip install . and pytest tests/python
#   6. the lifetime, dataset and loader tests under ASan (scripts/pytest-asan.sh)
#   7. the wheel (scripts/wheel-check.sh): the sdist built, the wheel built
#      from it and repaired to a manylinux tag, installed with CPU torch into
#      a Debian 12 root without libxxhash, libnuma or liburing, and run there
# Every step runs even when an earlier one failed; the exit code is 0 only if
# all passed. Build dirs: build/, build-asan/, build-fuzz/, build-tsan/
# (BUILD_PREFIX).
set -uo pipefail
cd "$(dirname "$0")/.."

FUZZ_SECONDS=${FUZZ_SECONDS:-10}
JOBS=${JOBS:-2}
B=${BUILD_PREFIX:-build}
failed=()

step() { echo; echo "=== $*"; }

ctest_build() { # dir, cmake args...
  local dir=$1; shift
  mkdir -p "$dir"
  if ! cmake -S . -B "$dir" -G Ninja "$@" >"$dir/configure.log" 2>&1; then
    cat "$dir/configure.log"; return 1
  fi
  ninja -C "$dir" -j"$JOBS" || return 1
  ctest --test-dir "$dir" --output-on-failure -j"$JOBS"
}

step "normal build + ctest ($B)"
ctest_build "$B" -DCMAKE_BUILD_TYPE=RelWithDebInfo || failed+=("ctest normal")

step "ASan+UBSan build + ctest ($B-asan)"
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
  ctest_build "$B-asan" -DCXLP_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug || failed+=("ctest asan")

# Only the fuzz targets are built there: the shared library cannot link with
# the sanitizers' runtime under --no-undefined, and nothing needs it.
step "fuzz build ($B-fuzz): replay corpora, then ${FUZZ_SECONDS}s per target"
shopt -s nullglob
targets=(fuzz/fuzz_*.c)
if [ ${#targets[@]} -eq 0 ]; then
  echo "no fuzz targets"
elif ! command -v clang-14 >/dev/null; then
  echo "clang-14 missing (run scripts/setup.sh)"; failed+=("fuzz build")
elif ! { mkdir -p "$B-fuzz" && CC=clang-14 cmake -S . -B "$B-fuzz" -G Ninja -DCXLP_FUZZ=ON \
           -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$B-fuzz/configure.log" 2>&1 \
           || { cat "$B-fuzz/configure.log"; false; }; } \
     || ! ninja -C "$B-fuzz" -j"$JOBS" $(for s in "${targets[@]}"; do basename "$s" .c; done); then
  failed+=("fuzz build")
else
  mkdir -p "$B-fuzz/artifacts"
  for src in "${targets[@]}"; do
    t=$(basename "$src" .c)
    bin="$B-fuzz/$t"
    corpus="fuzz/corpus/$t"
    mkdir -p "$corpus"
    n=$(find "$corpus" -type f | wc -l)
    echo "--- $t: replay $n corpus files"
    if ! "$bin" -runs=0 -artifact_prefix="$B-fuzz/artifacts/$t-" "$corpus" 2>"$B-fuzz/$t.replay.log"; then
      tail -40 "$B-fuzz/$t.replay.log"; failed+=("replay $t"); continue
    fi
    echo "--- $t: fuzz ${FUZZ_SECONDS}s"
    work="$B-fuzz/corpus-$t"; mkdir -p "$work"
    if "$bin" -max_total_time="$FUZZ_SECONDS" -rss_limit_mb=2048 -timeout=10 \
         -artifact_prefix="$B-fuzz/artifacts/$t-" "$work" "$corpus" 2>"$B-fuzz/$t.fuzz.log"; then
      grep -E '^#[0-9]+.*(DONE|pulse)' "$B-fuzz/$t.fuzz.log" | tail -1
    else
      tail -40 "$B-fuzz/$t.fuzz.log"; failed+=("fuzz $t")
    fi
  done
fi

step "ThreadSanitizer ($B-tsan): migration under four readers, as threads, 10 s"
if ! command -v clang-14 >/dev/null; then
  echo "clang-14 missing (run scripts/setup.sh)"; failed+=("tsan build")
elif ! { mkdir -p "$B-tsan" && CC=clang-14 cmake -S . -B "$B-tsan" -G Ninja -DCXLP_TSAN=ON \
           -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$B-tsan/configure.log" 2>&1 \
           || { cat "$B-tsan/configure.log"; false; }; } \
     || ! ninja -C "$B-tsan" -j"$JOBS" test_tier_soak; then
  failed+=("tsan build")
elif ! CXLP_SOAK_SECONDS=10 TSAN_OPTIONS="halt_on_error=1 suppressions=$PWD/tests/tsan.supp" \
       "$B-tsan/test_tier_soak" --threads; then
  failed+=("tsan soak")
fi

step "a real kernel under QEMU: CPU-less NUMA node with HMAT, a pool on it; CXL type-3 device; two kernels on one pool; a CXL region as devdax and kmem; the archive over NVMe/TCP"
mkdir -p "$B"
bash scripts/qemu-numa-check.sh --cxl --hosts --region --fabric 2>&1 | tee "$B/qemu-check.log"
case ${PIPESTATUS[0]} in
  0) ;;
  77) echo "(skipped: see the reason above)" ;;
  *) failed+=("qemu numa/cxl check") ;;
esac

if [ -d python ]; then
  step "python: pip install . (the extension over the same C sources), then pytest"
  PY=${PYTHON:-python3}
  pipx=()
  stdlib=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
  [ -f "$stdlib/EXTERNALLY-MANAGED" ] && pipx+=(--break-system-packages)
  if "$PY" -m pip install -q --no-build-isolation --no-deps "${pipx[@]}" . ; then
    # run from the repo root: python/ is not on sys.path, the installed package is tested
    "$PY" -m pytest -q tests/python
    rc=$?
    # 5: no tests collected, not a failure of the code.
    [ $rc -eq 0 ] || [ $rc -eq 5 ] || failed+=("pytest")
  else
    failed+=("pip install")
  fi
  step "python under ASan+UBSan: the extension built with CXLP_SANITIZE ($B-pyasan)"
  BUILD_DIR="$B-pyasan" scripts/pytest-asan.sh || failed+=("pytest asan")

  # the wheel from the sdist (so the sdist is built once too); its A/B
  # against the in-tree build short (3 rounds of 64 MiB): printed, not judged
  step "the sdist and its wheel on a clean Debian 12 root (scripts/wheel-check.sh)"
  PYTHON="$PY" WHEEL_CHECK_CACHE="$B/wheel-check" WHEEL_CHECK_ROUNDS=3 WHEEL_CHECK_MIB=64 \
    bash scripts/wheel-check.sh
  case $? in
    0) ;;
    77) echo "(skipped: see the reason above)" ;;
    *) failed+=("wheel check") ;;
  esac
fi

echo
# a guest that passed only on its second boot: named here too
grep -h "^NOTE: passed on a second boot" "$B/qemu-check.log" 2>/dev/null
if [ ${#failed[@]} -eq 0 ]; then
  echo "scripts/test.sh: all steps passed"
  exit 0
fi
# the failed guests' consoles again, where a log cut to its end shows them
if [[ " ${failed[*]} " == *" qemu numa/cxl check "* ]]; then
  echo "=== the end of the QEMU check ($B/qemu-check.log)"
  sed -n '/^=== guest [a-zA-Z]* failed; the end of its console:/,$p' "$B/qemu-check.log" | tail -80
fi
echo "scripts/test.sh: FAILED: ${failed[*]}"
exit 1
