"""The first batch after opening a pool is right (bench/bench_first_batch.py
times it on 16 GiB; this checks content only, never time)."""
from __future__ import annotations

import numpy as np
import torch

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool


def test_first_batch_after_open_is_right(pool: CXLMemoryPool, tmp_path) -> None:
    arr = np.zeros((3000, 2048), dtype=np.int32)
    arr[:, 0] = np.arange(3000)
    arr[:, 1:] = (np.arange(3000) % 97)[:, None]
    np.save(tmp_path / "b.npy", arr)
    pool.ingest("b", tmp_path / "b.npy")
    ref = [int(r[0]) for b in CXLDataLoader(CXLDataset(pool, "b"), batch_size=32, shuffle=True,
                                             seed=4) for r in b]
    for shuffle in (False, True):
        with CXLMemoryPool(pool.spec, readonly=True) as p:  # a fresh attachment
            ds = CXLDataset(p, "b")
        b = next(iter(CXLDataLoader(ds, batch_size=32, shuffle=shuffle, seed=4, num_workers=2)))
        ids = list(range(32)) if not shuffle else ref[:32]
        assert b.shape == (32, 2048) and b.dtype == torch.int32
        assert torch.equal(b, torch.from_numpy(arr[ids]))
