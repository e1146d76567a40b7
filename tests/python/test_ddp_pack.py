"""Packed rows under DDP (issue 12 item 2): a real 2-rank torchrun job."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from cxl_dataloader import CXLDataset, CXLMemoryPool

HERE = Path(__file__).resolve().parent


def test_two_rank_ddp_over_packed_megatron_rows_finishes_three_epochs(
        pool: CXLMemoryPool, tokens, tmp_path) -> None:
    """issue 12 item 2: with collate="pack" under DistributedCXLSampler,
    ranks pack different numbers of rows; each rank must still yield the same
    number of batches per epoch (the smallest; the rest is dropped), equal to
    len(loader) on every rank, or DDP blocks at the first missing all-reduce.
    A 2-rank torchrun job (gloo, CPU) runs 3 epochs of DDP training."""
    prefix, _ = tokens
    CXLDataset.ingest(pool, "tok", prefix, format="megatron")
    out = tmp_path / "counts.json"
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", "2", str(HERE / "ddp_pack_train.py"), pool.spec,
                        "tok", str(out)], capture_output=True, text=True, timeout=240, env=env)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    ranks = [json.loads(Path(f"{out}.{i}").read_text()) for i in range(2)]
    assert all(x["world"] == 2 for x in ranks)
    for e in range(3):
        got = [x["epochs"][e] for x in ranks]
        assert got[0] == got[1], got
        assert got[0]["batches"] == got[0]["len"] > 0
