"""Lifetime: tensors from ds[i] and from loader batches (stacked and packed)
outlive the loader, its iterator, the dataset, the pool object and even the
pool's name; they read intact and nothing crashes. scripts/pytest-asan.sh
runs this file under AddressSanitizer."""
from __future__ import annotations

import gc
import uuid

import numpy as np
import torch

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool

from conftest import write_megatron


def test_everything_outlives_loader_dataset_and_pool(tmp_path) -> None:
    name = f"pyt-life-{uuid.uuid4().hex[:8]}"
    pool = CXLMemoryPool(name, create=True, size=64 << 20)
    arr = np.arange(400 * 33, dtype=np.float32).reshape(400, 33)
    np.save(tmp_path / "a.npy", arr)
    rng = np.random.default_rng(3)
    seqs = [rng.integers(0, 60000, size=int(n), dtype=np.uint16) for n in rng.integers(1, 90, 120)]
    write_megatron(tmp_path / "t", seqs, list(range(0, 121, 12)))
    ds = CXLDataset.ingest(pool, "a", tmp_path / "a.npy")
    tok = CXLDataset.ingest(pool, "t", tmp_path / "t", format="megatron")

    items = {i: ds[i] for i in (0, 1, 199, 399)}
    toks = {i: tok[i] for i in (0, 60, 119)}
    docs = tok.documents()
    dl = CXLDataLoader(ds, batch_size=16, shuffle=True, seed=2, num_workers=2)
    kept, order = [], []
    for k, b in enumerate(dl):
        if k % 5 == 0:
            kept.append(b)
            order.append(b[:, 0].clone())
    it = iter(CXLDataLoader(tok, batch_size=3, seq_len=40, num_workers=2))
    packed = [next(it) for _ in range(4)]
    stream = np.concatenate(seqs)

    del dl, it, ds, tok, b
    pool.close()
    del pool
    CXLMemoryPool.destroy(name)  # the name is gone; mappings stay while viewed
    gc.collect()

    for i, t in items.items():
        assert torch.equal(t, torch.from_numpy(arr[i]))
    for i, t in toks.items():
        assert torch.equal(t, torch.from_numpy(seqs[i]))
    assert docs.tolist() == list(range(0, 121, 12))
    for b, first in zip(kept, order):
        ids = (first / 33).long()
        assert torch.equal(b, torch.from_numpy(arr[ids.numpy()]))
    got = []
    for p in packed:
        for row, n in zip(p["tokens"], p["lengths"]):
            got.extend(row[: int(n)].tolist())
    assert got == stream[: len(got)].tolist() and len(got) == 4 * 3 * 40
    del items, toks, docs, kept, packed
    gc.collect()  # the last references go: the slots and mappings are freed now
