#!/usr/bin/env bash
# Installs what building and testing cxl-dataloader needs on Debian 12:
# compilers, CMake/Ninja, libnuma and liburing (headers; the static
# liburing), hwloc, clang-14 with libFuzzer, QEMU and the tools its guests
# run, debootstrap (the clean root of scripts/wheel-check.sh), and the
# pinned Python packages of requirements-dev.txt. xxHash is vendored
# (third_party/); xxhsum is for tests/cli/patch_header.py.
# Idempotent: packages already present are skipped. Needs root or sudo for apt.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PKGS=(build-essential cmake ninja-build pkg-config xxhash debootstrap
          libnuma-dev numactl libhwloc-dev liburing-dev clang-14
          libclang-rt-14-dev libfuzzer-14-dev llvm-14 python3-dev python3-pip
          python3-venv util-linux
          # a real kernel with a CPU-less NUMA node and a CXL device, under
          # QEMU (scripts/qemu-numa-check.sh); the kernel itself is fetched
          # with apt-get download by that script. In its guests: cxl and
          # ndctl (ndctl), daxctl (a CXL region as devdax and kmem), nvme
          # (nvme-cli: the archive over NVMe/TCP)
          qemu-system-x86 busybox-static cpio ndctl daxctl nvme-cli
          # remote pools (cxlpool serve, cxlp_remote_*: docs/remote.md): UCX
          # 1.13 headers and libraries (CXLP_UCX=AUTO finds them with
          # pkg-config), and ucx_perftest (bench/ucx_perftest.sh)
          libucx-dev ucx-utils)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "setup.sh: need root or sudo to install packages" >&2; exit 1; fi
fi

missing=()
for p in "${APT_PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup.sh: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
else
  echo "setup.sh: system packages present"
fi

# Python: skip when every pin is already satisfied.
PY=${PYTHON:-python3}
if "$PY" - <<'PYEOF' 2>/dev/null
import sys
from importlib.metadata import version, PackageNotFoundError
ok = True
for line in open("requirements-dev.txt"):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, want = line.split("==")
    name = name.split("[")[0]  # moto[server]: the extra is not the distribution's name
    try:
        have = version(name)
    except PackageNotFoundError:
        ok = False
        continue
    if have.split("+")[0] != want:
        ok = False
sys.exit(0 if ok else 1)
PYEOF
then
  echo "setup.sh: python packages present"
else
  extra=()
  stdlib=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
  # Debian's own python3 refuses system-wide pip installs (PEP 668).
  [ -f "$stdlib/EXTERNALLY-MANAGED" ] && extra+=(--break-system-packages)
  echo "setup.sh: installing python packages from requirements-dev.txt"
  $SUDO "$PY" -m pip install -q "${extra[@]}" -r requirements-dev.txt
fi
echo "setup.sh: done"
