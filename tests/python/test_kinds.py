"""The design's names (issue 31 item 6), each used as the design's snippets
use it: a dataset class taking a path (or records) and pool=, ingesting on
first use and opening; CXLDistributedDataLoader building its own
DistributedCXLSampler."""
from __future__ import annotations

import multiprocessing as mp
import pickle
from pathlib import Path

import numpy as np
import pytest
import torch

from cxl_dataloader import (CXLArrowDataset, CXLDataLoader, CXLDistributedDataLoader,
                            CXLMemmapDataset, CXLMemoryPool, CXLNestedDataset, CXLWebDataset,
                            DistributedCXLSampler)
from test_formats import write_wds


def test_memmap_dataset_npy_and_raw(pool: CXLMemoryPool, tmp_path: Path) -> None:
    arr = np.arange(600, dtype=np.float32).reshape(100, 2, 3)
    np.save(tmp_path / "a.npy", arr)
    ds = CXLMemmapDataset(tmp_path / "a.npy", pool=pool)
    mm = np.load(tmp_path / "a.npy", mmap_mode="r")
    assert len(ds) == len(mm) and all(np.array_equal(ds[i].numpy(), mm[i]) for i in (0, 57, 99))
    assert ds[3].data_ptr() == ds[3].data_ptr()  # a view of the pool, not a copy
    again = CXLMemmapDataset(tmp_path / "a.npy", pool=pool)  # found, not ingested again
    assert again.ingested == {"existed": True} and ds.ingested["existed"] is False
    arr.tofile(tmp_path / "a.raw")
    raw = CXLMemmapDataset(tmp_path / "a.raw", pool=pool, dtype="float32", shape=(2, 3))
    mm = np.memmap(tmp_path / "a.raw", dtype=np.float32, mode="r").reshape(-1, 2, 3)
    assert len(raw) == 100 and raw[42].shape == (2, 3)
    assert np.array_equal(raw[42].numpy(), mm[42])
    flat = CXLMemmapDataset(tmp_path / "a.raw", pool=pool, dtype="float32", shape=(6,))
    assert flat.name != raw.name and flat[1].shape == (6,)
    assert pickle.loads(pickle.dumps(raw))[42].shape == (2, 3)
    with pytest.raises(ValueError, match="dtype"):
        CXLMemmapDataset(tmp_path / "a.raw", pool=pool)


def test_arrow_dataset_parquet_and_arrow(pool: CXLMemoryPool, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    t = pa.table({"ids": pa.array([[1, 2, 3], [4], [5, 6]], type=pa.list_(pa.int32())),
                  "label": [0, 1, 2]})
    pq.write_table(t, tmp_path / "t.parquet")
    ds = CXLArrowDataset(tmp_path / "t.parquet", pool=pool)
    assert ds[0]["ids"].tolist() == [1, 2, 3] and ds[2]["label"].item() == 2
    with pa.OSFile(str(tmp_path / "t.arrow"), "wb") as f, pa.ipc.new_file(f, t.schema) as w:
        w.write_table(t)
    only = CXLArrowDataset(tmp_path / "t.arrow", pool=pool, columns=["ids"])
    assert only.fields == ["ids"] and only[1].tolist() == [4]
    with pytest.raises(ValueError, match="not Arrow or Parquet"):
        CXLArrowDataset(tmp_path / "a.npy", pool=pool)


def test_nested_dataset(pool: CXLMemoryPool) -> None:
    recs = [{"tokens": np.arange(k, dtype=np.int32), "mask": [1] * k, "label": k % 3,
             "text": f"doc {k}"} for k in range(1, 40)]
    ds = CXLNestedDataset(recs, pool=pool, name="nested")
    assert len(ds) == 39 and ds.fields == ["tokens", "mask", "label", "text"]
    r = ds[9]
    assert r["tokens"].tolist() == list(range(10)) and r["mask"].tolist() == [1] * 10
    assert r["label"].item() == 1 and r["text"] == "doc 10"
    loader = CXLDataLoader(ds, batch_size=4, seq_len=16, columns=["tokens", "mask"],
                           collate="pad")
    b = next(iter(loader))
    assert b["tokens"].shape == (4, 16) and b["lengths"].tolist() == [1, 2, 3, 4]
    with pytest.raises(TypeError, match="name"):
        CXLNestedDataset(recs, pool=pool, name="")


def test_web_dataset(pool: CXLMemoryPool, tmp_path: Path) -> None:
    samples = write_wds(tmp_path / "train-000.tar", 30)
    ds = CXLWebDataset(str(tmp_path / "train-000.tar"), pool=pool, columns=["jpg", "cls"])
    assert len(ds) == 30 and bytes(ds[4]["jpg"].numpy()) == samples[4]["jpg"]
    assert ds[4]["cls"].item() == samples[4]["cls"]


def _rank(spec: str, rank: int, q) -> None:
    from cxl_dataloader import CXLDataset
    ds = CXLDataset(spec, "d")
    loader = CXLDistributedDataLoader(ds, batch_size=5, seed=9, num_replicas=2, rank=rank)
    out = []
    for epoch in range(2):
        loader.set_epoch(epoch)
        out.append([int(v) for b in loader for v in b[:, 0]])
    q.put((rank, out, type(loader.sampler).__name__))


def test_distributed_loader_builds_its_own_sampler(pool: CXLMemoryPool, tmp_path) -> None:
    arr = np.repeat(np.arange(100, dtype=np.int64)[:, None], 2, axis=1)
    np.save(tmp_path / "d.npy", arr)
    pool.ingest("d", tmp_path / "d.npy")
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=_rank, args=(pool.spec, r, q)) for r in range(2)]
    for p in ps:
        p.start()
    got = dict((r, (o, s)) for r, o, s in (q.get(timeout=120) for _ in ps))
    for p in ps:
        p.join(timeout=30)
    assert all(s == "DistributedCXLSampler" for _, s in got.values())
    for e in range(2):
        a, b = got[0][0][e], got[1][0][e]
        assert len(a) == len(b) == 50 and sorted(a + b) == list(range(100))
    assert got[0][0][0] != got[0][0][1]  # set_epoch reached the sampler
    with pytest.raises(TypeError, match="its own"):
        from cxl_dataloader import CXLDataset
        ds = CXLDataset(pool, "d")
        CXLDistributedDataLoader(ds, sampler=DistributedCXLSampler(ds, num_replicas=1, rank=0))
    if not torch.distributed.is_initialized():  # torch's DistributedSampler's error, as ours
        with pytest.raises(ValueError):
            CXLDistributedDataLoader(CXLDataset(pool, "d"), batch_size=2)
