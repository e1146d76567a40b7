"""Resume after SIGKILL: a training run is killed mid-epoch after a
checkpoint; the resumed run yields exactly the rest of that epoch."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool

SCRIPT = Path(__file__).with_name("resume_train.py")
N, BATCH, EVERY, SEED = 2000, 16, 10, 11


def test_sigkill_mid_epoch_then_resume_yields_exactly_the_rest(pool: CXLMemoryPool,
                                                               tmp_path: Path) -> None:
    arr = np.zeros((N, 16), dtype=np.int64)
    arr[:, 0] = np.arange(N)
    arr[:, 1:] = np.arange(N)[:, None] * 7
    np.save(tmp_path / "r.npy", arr)
    ds = CXLDataset.ingest(pool, "r", tmp_path / "r.npy")
    # the reference: one full epoch of the same loader in this process
    ref = [int(r[0]) for b in CXLDataLoader(ds, batch_size=BATCH, shuffle=True, seed=SEED,
                                             num_workers=2) for r in b]
    assert sorted(ref) == list(range(N))

    ckpt, ids1, ids2 = tmp_path / "ckpt.json", tmp_path / "ids1", tmp_path / "ids2"
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    cmd = [sys.executable, str(SCRIPT), pool.spec, "r", str(ckpt)]
    p = subprocess.Popen(cmd + [str(ids1), "--every", str(EVERY), "--sleep", "0.01"],
                         stdout=subprocess.PIPE, text=True, env=env)
    try:
        for line in p.stdout:
            if line.strip() == f"ckpt {3 * EVERY}":
                break
        else:
            raise AssertionError("the run ended before its third checkpoint")
        # let it consume a few batches past the checkpoint, then kill it
        deadline = time.monotonic() + 30
        while len(ids1.read_text().split()) < (3 * EVERY + 3) * BATCH:
            assert time.monotonic() < deadline and p.poll() is None
            time.sleep(0.005)
        p.send_signal(signal.SIGKILL)
    finally:
        p.wait(timeout=60)
    assert p.returncode == -signal.SIGKILL
    state = json.loads(ckpt.read_text())
    pos = state["position"]
    consumed = [int(x) for x in ids1.read_text().split()]
    assert pos == 3 * EVERY * BATCH and pos < len(consumed) < N  # killed mid-epoch, past it
    assert consumed == ref[:len(consumed)]

    r = subprocess.run(cmd + [str(ids2), "--every", str(EVERY), "--resume"],
                       capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    resumed = [int(x) for x in ids2.read_text().split()]
    assert resumed == ref[pos:]
    assert sorted(consumed[:pos] + resumed) == list(range(N))
