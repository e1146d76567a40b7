"""CXLMemoryPool.rewrite: a dataset written again in this build's shard
format and put in its own place (cxlp_pool_rewrite; datasets of earlier
shard formats, kills at any instant and readers across the flip on a pool
of tiers: tests/c/test_store_rewrite.c and tests/c/test_tier_partial.c)."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import torch

from cxl_dataloader import (CXLDataLoader, CXLDataset, CXLDatasetNotFoundError, CXLError,
                            CXLMemoryPool)


def rows(batches: list[torch.Tensor]) -> list[int]:
    return [int(r[0]) // 16 for b in batches for r in b]


def test_rewrite_keeps_the_records_and_a_checkpoint_resumes_across_it(
        pool: CXLMemoryPool, tmp_path: Path) -> None:
    """A training run's checkpoint taken before the rewrite resumes after it
    on the rewritten dataset with exactly the batches the uninterrupted run
    gets; the dataset opened before keeps reading the old one meanwhile."""
    arr = np.arange(2000 * 16, dtype=np.float32).reshape(2000, 16)
    np.save(tmp_path / "a.npy", arr)
    old = CXLDataset.ingest(pool, "d", tmp_path / "a.npy")
    assert old.shards()["n_shards"] == 1
    full = list(CXLDataLoader(old, batch_size=64, shuffle=True, seed=5))
    dl = CXLDataLoader(old, batch_size=64, shuffle=True, seed=5)
    it = iter(dl)
    first = [next(it) for _ in range(7)]
    state = dl.state_dict()

    pool.rewrite("d", shard_bytes="16K", progress=False)

    rest_old = list(it)  # the old dataset, still open, still read
    assert rows(first + rest_old) == rows(full)
    assert torch.equal(torch.cat(first + rest_old), torch.cat(full))
    new = CXLDataset(pool, "d")
    assert new.shard_format() == {"version": 4, "block_bytes": 4096, "sums_area": False}
    assert new.shards()["per_shard"] == (16 << 10) // 64
    assert new.shards()["n_shards"] == 8  # 2000 records of 64 bytes in 16 KiB shards
    assert torch.equal(torch.stack([new[i] for i in range(2000)]), torch.from_numpy(arr))
    dl2 = CXLDataLoader(new, batch_size=64, shuffle=True, seed=5)
    dl2.load_state_dict(state)
    rest = list(dl2)
    assert torch.equal(torch.cat(first + rest), torch.cat(full))
    pool.verify()


def test_rewrite_keeps_documents_and_the_packed_stream(pool: CXLMemoryPool, tokens,
                                                       capsys) -> None:
    prefix, seqs = tokens
    ds = CXLDataset.ingest(pool, "tok", prefix, format="megatron")
    docs = ds.documents()
    before = [b["tokens"].clone() for b in CXLDataLoader(ds, batch_size=4, seq_len=65)]
    capsys.readouterr()
    pool.rewrite("tok", shard_bytes=4096, progress=True)
    err = capsys.readouterr().err  # the bar, in the old dataset's shards
    assert "rewrite tok: 100%" in err and f"| {ds.shards()['n_shards']}/" in err
    new = CXLDataset(pool, "tok")
    assert torch.equal(new.documents(), docs)
    after = [b["tokens"] for b in CXLDataLoader(new, batch_size=4, seq_len=65)]
    assert len(after) == len(before) and all(torch.equal(a, b) for a, b in zip(after, before))
    assert new.shards()["n_shards"] > 1


def test_rewrite_refuses_what_it_cannot_do(pool: CXLMemoryPool, tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.zeros((10, 4), dtype=np.int64))
    CXLDataset.ingest(pool, "d", tmp_path / "a.npy")
    before = pool.datasets()
    with pytest.raises(CXLDatasetNotFoundError, match="no dataset 'nope'"):
        pool.rewrite("nope", progress=False)
    for bad in (0, "0"):
        with pytest.raises(ValueError, match="shard_bytes"):
            pool.rewrite("d", shard_bytes=bad, progress=False)
    with pytest.raises(ValueError, match="shard_bytes"):
        pool.rewrite("d", shard_bytes=-1, progress=False)
    assert pool.datasets() == before  # nothing changed


def test_rewrite_without_room_for_a_second_copy(tmp_path: Path) -> None:
    name = f"pyt-rw-{os.getpid()}"
    p = CXLMemoryPool(name, create=True, size="32M")
    try:
        arr = np.random.default_rng(1).integers(0, 255, (3072, 4096), dtype=np.uint8)
        np.save(tmp_path / "a.npy", arr)  # 12 MiB: a second copy does not fit
        CXLDataset.ingest(p, "d", tmp_path / "a.npy")
        before = p.datasets()
        with pytest.raises(CXLError, match="rewrite: dataset d: reserving an extent") as e:
            p.rewrite("d", progress=False)
        assert e.value.code == CXLError.EFULL
        assert p.datasets() == before and p.stat()["reserved_bytes"] == 0
        assert torch.equal(CXLDataset(p, "d")[3071], torch.from_numpy(arr[3071]))
    finally:
        p.close()
        CXLMemoryPool.destroy(name)
