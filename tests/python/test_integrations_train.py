"""Acceptance of issue 31 for Lightning and Hugging Face's Trainer: a 2-rank
torchrun job (gloo, CPU) trains a toy model from the pool with the
framework's own loop and checkpointing, is SIGKILLed after a mid-epoch
checkpoint, and resumes from it (Trainer.fit(ckpt_path=...),
trainer.train(resume_from_checkpoint=...)): the resumed batches are the
uninterrupted run's, every record once per epoch, equal counts per rank."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cxl_dataloader import CXLMemoryPool

HERE = Path(__file__).resolve().parent
N, BATCH, EVERY, RESUME_STEP, KILL_AT, EPOCHS = 128, 4, 5, 10, 13, 2
STEPS = N // 2 // BATCH  # per rank and epoch


def _toy(pool: CXLMemoryPool) -> None:
    pa = pytest.importorskip("pyarrow")
    idx = np.arange(N, dtype=np.int64)
    pool.ingest("toy", pa.table({"idx": idx, "x": (idx * 0.01).astype(np.float32)}))


def _run(fw: str, pool: CXLMemoryPool, out: Path, ck: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false")
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                           "--nproc-per-node", "2", str(HERE / "integration_train.py"), fw,
                           pool.spec, "toy", str(out), str(ck), *extra],
                          capture_output=True, text=True, timeout=300, env=env)


def _ids(path: Path) -> list[list[int]]:
    return [[int(x) for x in line.split()] for line in path.read_text().splitlines()]


@pytest.mark.parametrize("fw", ["lightning", "hf"])
def test_kill_after_a_mid_epoch_checkpoint_then_resume(fw: str, pool: CXLMemoryPool,
                                                        tmp_path: Path) -> None:
    pytest.importorskip({"lightning": "lightning", "hf": "transformers"}[fw])
    _toy(pool)
    ref, ck = tmp_path / "ref", tmp_path / "ck"
    r = _run(fw, pool, ref, tmp_path / "ck_ref")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    refs = [_ids(Path(f"{ref}.{k}")) for k in range(2)]
    for k in range(2):
        meta = json.loads(Path(f"{ref}.{k}.json").read_text())
        # the framework kept our loader and sampler (no DistributedSampler of its own)
        assert all(m == {"ours": True, "sampler": "DistributedCXLSampler", "rank": k, "world": 2}
                   for m in meta["loaders"]), meta
        assert len(refs[k]) == EPOCHS * STEPS and all(len(b) == BATCH for b in refs[k])
    for e in range(EPOCHS):  # every record once per epoch, equal counts per rank
        epoch = [i for k in range(2) for b in refs[k][e * STEPS:(e + 1) * STEPS] for i in b]
        assert sorted(epoch) == list(range(N))
    assert refs[0][:STEPS] != refs[0][STEPS:]  # a new order each epoch

    killed = tmp_path / "killed"
    r = _run(fw, pool, killed, ck, "--kill-at", str(KILL_AT))
    assert r.returncode != 0  # rank 0 was SIGKILLed
    for k in range(2):
        got = _ids(Path(f"{killed}.{k}"))
        assert RESUME_STEP < len(got) <= KILL_AT and got == refs[k][:len(got)]
    resumed = tmp_path / "resumed"
    r = _run(fw, pool, resumed, ck, "--resume")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-5000:]
    for k in range(2):
        assert _ids(Path(f"{resumed}.{k}")) == refs[k][RESUME_STEP:]
    if fw == "lightning":  # the loader's state is in Lightning's checkpoint
        meta = json.loads(Path(f"{resumed}.0.json").read_text())
        (state,) = meta["ckpt_loader_state"]
        assert state["position"] == RESUME_STEP * BATCH and state["epoch"] == 0
