"""The checks scripts/wheel-check.sh runs with the installed wheel, in a
Debian 12 root without libxxhash, libnuma or liburing (run from a directory
holding README.md): the README's quick start as written; cxlpool create,
ingest, a shuffled epoch through CXLDataLoader checking every byte of every
record, cxlpool verify; a numa: pool and numa_nodes= refused naming
libnuma. Exits non-zero, saying what failed, on the first failure."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLError, CXLMemoryPool


def run(cmd: str, ok: bool = True, show: int = 20) -> subprocess.CompletedProcess:
    """cmd in bash, printed with the first `show` lines of its output."""
    r = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True)
    out = (r.stdout + r.stderr).splitlines()
    print("\n".join([f"$ {cmd}"] + out[:show] + ([f"[{len(out) - show} more lines]"]
                                                 if len(out) > show else [])))
    if ok and r.returncode:
        sys.exit(f"wheel_check: {cmd!r} exited {r.returncode}")
    return r


def quick_start() -> None:
    """The README's quick start: its first line is what installed this
    wheel (here from the wheelhouse); the other four run as written."""
    sec = Path("README.md").read_text().split("## Quick start", 1)[1]
    lines = [x[4:] for x in re.search(r"\n\n((?:    .*\n)+)", sec).group(1).splitlines()]
    assert lines[0].startswith("pip install"), lines[0]
    np.save("tokens.npy", np.random.default_rng(0).integers(0, 60000, (1000, 128),
                                                             dtype=np.uint16))
    r = run("set -e\n" + "\n".join(lines[1:]), show=8)
    assert r.stdout.count("torch.Size([32, 128])") == 31, r.stdout[-500:]
    run("cxlpool destroy train --yes")


def checked_epoch() -> None:
    """4096 records of 1 KiB whose first 8 bytes are their id: every batch
    of a shuffled epoch holds exactly the records it names, each record
    once."""
    n, size = 4096, 1024
    recs = np.random.default_rng(34).integers(0, 256, (n, size), dtype=np.uint8)
    recs[:, :8] = np.arange(n, dtype=np.int64).view(np.uint8).reshape(n, 8)
    recs.tofile("recs.raw")
    run("cxlpool create wheelpool 64M")
    run(f"cxlpool ingest wheelpool recs recs.raw --record-size {size} --no-progress")
    ds = CXLDataset("wheelpool", "recs")
    seen = np.zeros(n, dtype=np.int64)
    for batch in CXLDataLoader(ds, batch_size=64, shuffle=True, num_workers=2):
        rows = batch.numpy()
        ids = rows[:, :8].copy().view(np.int64).ravel()
        assert (rows == recs[ids]).all(), "a batch's bytes differ from the records it names"
        seen[ids] += 1
    assert (seen == 1).all(), "an epoch did not deliver every record once"
    print(f"epoch: {n} records of {size} B, shuffled, every byte checked")
    run("cxlpool verify wheelpool --quiet")
    run("cxlpool destroy wheelpool --yes")


def numa_without_libnuma() -> None:
    r = run("cxlpool create numa:0:wheelnuma 16M", ok=False)
    assert r.returncode == 1 and "libnuma" in r.stderr, r.stderr
    try:
        CXLMemoryPool("wheelnuma", pool_size="16M", numa_nodes=[0])
    except CXLError as e:
        assert "libnuma" in str(e), str(e)
        print(f"numa_nodes=[0]: CXLError: {e}")
    else:
        sys.exit("wheel_check: numa_nodes=[0] made a pool without libnuma")


def main() -> int:
    print(f"python {sys.version.split()[0]}, torch {torch.__version__}")
    quick_start()
    checked_epoch()
    numa_without_libnuma()
    return 0


if __name__ == "__main__":
    sys.exit(main())
