"""Ingest-time shuffle through the Python API: CXLMemoryPool.ingest(...,
shuffle=SEED) on raw and .npy sources puts input record source_index(k) at
record k (a bijection; record_of_source its inverse), the same seed gives
the same dataset and another seed another order, the seed is visible as
CXLDataset.ingest_shuffle, and bad seeds and formats are refused naming
shuffle with nothing ingested."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from conftest import write_megatron
from cxl_dataloader import (CXLDataLoader, CXLDataset, CXLError, CXLMemoryPool,
                            RandomCXLSampler)

N = 5000


def _ids(tmp_path: Path) -> tuple[np.ndarray, Path, Path]:
    rng = np.random.default_rng(0)
    a = rng.integers(0, 2**31, size=(N, 4), dtype=np.int64)
    a[:, 0] = np.arange(N)                      # record j names itself
    raw = tmp_path / "ids.raw"
    a.tofile(raw)
    npy = tmp_path / "ids.npy"
    np.save(npy, a)
    return a, raw, npy


def _rows(ds: CXLDataset) -> np.ndarray:
    return np.stack([ds[k].numpy().view(np.int64) for k in range(len(ds))])


@pytest.mark.parametrize("kind", ["raw", "npy"])
def test_record_k_is_input_record_p_k(pool: CXLMemoryPool, tmp_path: Path, kind: str) -> None:
    a, raw, npy = _ids(tmp_path)
    if kind == "raw":
        pool.ingest("s", raw, record_size=32, shuffle=12345)
    else:
        pool.ingest("s", npy, shuffle=12345)
    ds = CXLDataset(pool, "s")
    assert ds.ingest_shuffle == 12345
    assert ds.info()["ingest_shuffle"] == {"seed": 12345}
    assert [d["ingest_shuffle"] for d in pool.datasets()] == [{"seed": 12345}]
    rows = _rows(ds).reshape(N, 4)
    src = [ds.source_index(k) for k in range(N)]
    assert sorted(src) == list(range(N))        # a bijection
    assert (rows == a[src]).all()               # record k is input record P(k)
    assert sum(s == k for k, s in enumerate(src)) < 20   # not the input order
    assert all(ds.record_of_source(j) == k for k, j in enumerate(src))
    assert ds.source_index(np.int64(3)) == src[3]
    with pytest.raises(TypeError):
        ds.source_index(1.0)
    with pytest.raises(IndexError):
        ds.source_index(N)
    with pytest.raises(IndexError):
        ds.record_of_source(-1)


def test_same_seed_same_dataset_other_seed_other_order(pool: CXLMemoryPool,
                                                       tmp_path: Path) -> None:
    _, raw, _ = _ids(tmp_path)
    pool.ingest("a", raw, record_size=32, shuffle=1)
    pool.ingest("b", raw, record_size=32, shuffle=1)
    pool.ingest("c", raw, record_size=32, shuffle=2)
    ra, rb, rc = (_rows(CXLDataset(pool, n)) for n in "abc")
    assert (ra == rb).all()
    assert (ra[:, 0] == rc[:, 0]).sum() < 20


def test_unshuffled_ingest_maps_ids_to_themselves(pool: CXLMemoryPool, tmp_path: Path) -> None:
    a, raw, _ = _ids(tmp_path)
    pool.ingest("p", raw, record_size=32)
    ds = CXLDataset(pool, "p")
    assert ds.ingest_shuffle is None
    assert ds.info()["ingest_shuffle"] is None
    assert pool.datasets()[0]["ingest_shuffle"] is None
    assert [ds.source_index(k) for k in (0, 1, N - 1)] == [0, 1, N - 1]
    assert ds.record_of_source(7) == 7
    assert (_rows(ds) == a.reshape(N, 4)).all()


def test_bad_seeds_and_formats_refused(pool: CXLMemoryPool, tmp_path: Path) -> None:
    _, raw, _ = _ids(tmp_path)
    for bad, exc in [(-1, ValueError), (2**64, ValueError), ("3", TypeError),
                     (True, TypeError), (1.0, TypeError)]:
        with pytest.raises(exc, match="shuffle"):
            pool.ingest("x", raw, record_size=32, shuffle=bad)
    write_megatron(tmp_path / "mt", [np.arange(5, dtype=np.int32)] * 3, [0, 1, 3])
    with pytest.raises(ValueError, match="shuffle: only raw and npy.*megatron"):
        pool.ingest("x", tmp_path / "mt", format="megatron", shuffle=1)
    # the C importer refuses it too, naming the argument and the format
    with pytest.raises(CXLError, match=r"shuffle \(--shuffle\): not supported for the megatron"):
        pool.ingest("x", tmp_path / "mt", shuffle=1)
    (tmp_path / "t.jsonl").write_text('{"text": "a"}\n')
    with pytest.raises(ValueError, match="shuffle: only raw and npy.*jsonl"):
        pool.ingest("x", tmp_path / "t.jsonl", tokenizer="bytes", shuffle=1)
    assert pool.datasets() == []


def test_pool_of_tiers(tmp_path: Path) -> None:
    """On a pool of tiers (a dram tier before a file home) the shuffled
    ingest lands in the home and reads back the same way; a windowed loader
    stages units of it (the catalog then holds units and the ingest record
    together) and the seed stays, the pool verifies."""
    import os
    import uuid
    a, raw, _ = _ids(tmp_path)
    name = f"pyt-shuf-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    pool = CXLMemoryPool(name, create=True, meta_bytes=4 << 20,
                         tiers=[f"dram=shm:{name}.d:4M", f"nvme=file:{tmp_path}/home:16M"])
    try:
        pool.ingest("s", raw, record_size=32, shuffle=9)
        ds = CXLDataset(pool, "s")
        assert ds.ingest_shuffle == 9
        src = [ds.source_index(k) for k in range(N)]
        assert sorted(src) == list(range(N))
        assert (_rows(ds).reshape(N, 4) == a[src]).all()
        s = RandomCXLSampler(ds, seed=0, window="auto", memory_budget=64 << 10)
        loader = CXLDataLoader(ds, batch_size=64, sampler=s, memory_budget=64 << 10)
        seen = np.concatenate([b.numpy().view(np.int64).reshape(-1, 4)[:, 0] for b in loader])
        loader.close()
        assert sorted(seen.tolist()) == list(range(N))    # every input record once
        assert ds.store.units()["n_units"] > 0             # the catalog lists units
        assert ds.ingest_shuffle == 9 and CXLDataset(pool, "s").ingest_shuffle == 9
        assert pool.verify()["ok"]
        del ds
    finally:
        pool.close()
        CXLMemoryPool.destroy(name)
