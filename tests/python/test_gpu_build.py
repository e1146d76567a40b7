"""bench/gpu_build.sh, the build recipe of the CUDA machine (which has a
compiler, CMake and Python but no package index): the extension builds and
imports with the libraries taken from the Debian packages in .gpudeps/ alone.
Run in a mount namespace where the system's headers, libraries and
pkg-config files of xxhash and numa (and pkg-config itself) are hidden
under /dev/null, so nothing can come from the system. Slow (a build) and
needs .gpudeps/ (scripts/gpu-deps.sh) and unshare: opt-in."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HIDE = ["/usr/include/xxhash.h", "/usr/include/numa.h", "/usr/include/numaif.h",
        "/usr/include/hwloc.h", "/usr/lib/x86_64-linux-gnu/libxxhash.so",
        "/usr/lib/x86_64-linux-gnu/libxxhash.so.0", "/usr/lib/x86_64-linux-gnu/libnuma.so",
        "/usr/lib/x86_64-linux-gnu/libnuma.so.1",
        "/usr/lib/x86_64-linux-gnu/pkgconfig/libxxhash.pc",
        "/usr/lib/x86_64-linux-gnu/pkgconfig/numa.pc", "/usr/bin/pkg-config",
        "/usr/bin/pkgconf"]


@pytest.mark.slow
@pytest.mark.skipif(os.environ.get("CXLP_SLOW_TESTS") != "1", reason="slow: set CXLP_SLOW_TESTS=1")
def test_the_extension_builds_and_imports_from_the_deb_prefix_alone(tmp_path) -> None:
    if not list((ROOT / ".gpudeps").glob("*.deb")):
        pytest.skip("no .gpudeps/*.deb: run scripts/gpu-deps.sh")
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private mount namespace")
    hide = "; ".join(f'[ -e {f} ] && mount --bind /dev/null {f}' for f in HIDE)
    script = f"""set -e
{hide}
[ ! -s /usr/include/xxhash.h ]
out=$(GPU_BUILD_DIR={tmp_path}/build GPUDEPS_PREFIX={tmp_path}/prefix \\
      bash {ROOT}/bench/gpu_build.sh {sys.executable} | tail -1)
export "$out"
cd {tmp_path}
{sys.executable} -c 'import cxl_dataloader._core as c, cxl_dataloader as d; print("imported", c.__file__)'
"""
    r = subprocess.run(["unshare", "-m", "bash", "-c", script], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert f"imported {tmp_path}/build/py/cxl_dataloader/_core" in r.stdout
    so = next((tmp_path / "build").glob("_core*.so"))
    dyn = subprocess.run(["readelf", "-d", str(so)], capture_output=True, text=True).stdout
    assert f"{tmp_path}/prefix/usr/lib/x86_64-linux-gnu" in dyn  # the run path into the prefix
