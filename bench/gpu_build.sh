#!/usr/bin/env bash
# Builds the extension (cxl_dataloader._core) and the CLI for a given
# Python on a machine without a package index: the libraries come from the
# Debian packages scripts/gpu-deps.sh put in .gpudeps/, unpacked into a
# prefix; pkgconf from there finds them (PKG_CONFIG_SYSROOT_DIR), and the
# extension is linked with a run path into the prefix, so nothing needs
# LD_LIBRARY_PATH at run time. The package is laid out in build-gpu/py:
# the last line printed is the PYTHONPATH to use.
#   bench/gpu_build.sh [PYTHON]     (default: $PYTHON, else python3)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${1:-${PYTHON:-python3}}
P=${GPUDEPS_PREFIX:-/tmp/cxlp-gpudeps}
B=${GPU_BUILD_DIR:-build-gpu}
shopt -s nullglob
debs=(.gpudeps/*.deb)
if [ ${#debs[@]} -eq 0 ]; then
  echo "gpu_build.sh: no .gpudeps/*.deb: run scripts/gpu-deps.sh where apt works" >&2
  exit 1
fi
inc=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
if [ ! -f "$inc/Python.h" ]; then
  echo "gpu_build.sh: $PY has no C headers ($inc/Python.h): cannot build the extension" >&2
  exit 1
fi
rm -rf "$P"
mkdir -p "$P"
for f in "${debs[@]}"; do
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$f" "$P"
  else  # a .deb is an ar archive holding data.tar.*
    t=$(mktemp -d)
    (cd "$t" && ar x "$OLDPWD/$f" && tar -xf data.tar.* -C "$P")
    rm -rf "$t"
  fi
done
LIB=$P/usr/lib/x86_64-linux-gnu
export PKG_CONFIG=$P/usr/bin/pkgconf
export PKG_CONFIG_LIBDIR=$LIB/pkgconfig:$P/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$P
export LD_LIBRARY_PATH=$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}  # pkgconf's own libpkgconf
"$PKG_CONFIG" --modversion libxxhash numa >/dev/null
mkdir -p "$B"
cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCXLP_PYTHON=ON -DCXLP_TESTS=OFF \
      -DPython_EXECUTABLE="$(command -v "$PY")" -DCMAKE_BUILD_RPATH="$LIB" >"$B/configure.log" 2>&1 \
  || { cat "$B/configure.log"; exit 1; }
ninja -C "$B" _core cxlpool_cli >"$B/build.log" 2>&1 || { tail -40 "$B/build.log"; exit 1; }
rm -rf "$B/py"
mkdir -p "$B/py/cxl_dataloader"
cp python/cxl_dataloader/*.py python/cxl_dataloader/py.typed "$B/py/cxl_dataloader/"
cp "$B"/_core*.so "$B/py/cxl_dataloader/"
echo "PYTHONPATH=$(cd "$B" && pwd)/py"
