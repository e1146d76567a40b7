"""CXLDataset: zero-copy tensors, pickling by reference, workers, lifetime."""
from __future__ import annotations

import gc
import pickle

import numpy as np
import pytest
import torch

from cxl_dataloader import CXLDataset, CXLMemoryPool


def test_getitem_is_a_view_of_pool_memory(pool: CXLMemoryPool, tmp_path) -> None:
    arr = np.random.default_rng(0).standard_normal((500, 4, 8)).astype(np.float32)
    np.save(tmp_path / "x.npy", arr)
    ds = CXLDataset.ingest(pool, "x", tmp_path / "x.npy")
    assert len(ds) == 500
    for i in (0, 1, 250, 499, -1):
        t = ds[i]
        assert t.dtype == torch.float32 and t.shape == (4, 8)
        assert torch.equal(t, torch.from_numpy(arr[i]))
    # the same record twice is the same memory: no copy was made
    assert ds[7].data_ptr() == ds[7].data_ptr()
    assert ds[8].data_ptr() - ds[7].data_ptr() == 4 * 8 * 4


def test_token_dataset_and_documents(pool: CXLMemoryPool, tokens) -> None:
    prefix, seqs = tokens
    ds = CXLDataset.ingest(pool, "tok", prefix, format="megatron")
    assert len(ds) == len(seqs)
    for i in (0, 5, 299):
        assert torch.equal(ds[i], torch.from_numpy(seqs[i]))
    assert ds.documents().tolist() == list(range(0, 301, 10))


def test_pickles_as_a_reference(pool: CXLMemoryPool, tmp_path) -> None:
    np.save(tmp_path / "big.npy", np.zeros((4096, 256), dtype=np.uint8))
    ds = CXLDataset.ingest(pool, "big", tmp_path / "big.npy")
    blob = pickle.dumps(ds)
    assert len(blob) < 512  # 1 MiB of data, a few bytes of reference
    ds2 = pickle.loads(blob)
    assert len(ds2) == 4096 and ds2[3].data_ptr() != 0


def test_works_in_torch_dataloader_with_workers(pool: CXLMemoryPool, tmp_path) -> None:
    arr = np.arange(64 * 16, dtype=np.int64).reshape(64, 16)
    np.save(tmp_path / "w.npy", arr)
    ds = CXLDataset.ingest(pool, "w", tmp_path / "w.npy")
    dl = torch.utils.data.DataLoader(ds, batch_size=8, num_workers=2)
    got = torch.cat(list(dl))
    assert torch.equal(got, torch.from_numpy(arr))


def test_tensors_outlive_dataset_and_pool(pool: CXLMemoryPool, tmp_path) -> None:
    arr = np.arange(1000, dtype=np.int32).reshape(100, 10)
    np.save(tmp_path / "l.npy", arr)
    ds = CXLDataset.ingest(pool, "l", tmp_path / "l.npy")
    kept = [ds[i] for i in range(0, 100, 9)]
    del ds
    pool.close()
    gc.collect()
    for k, t in zip(range(0, 100, 9), kept):
        assert t.tolist() == arr[k].tolist()


def test_hugepages_keeps_contents(pool: CXLMemoryPool, tmp_path) -> None:
    import warnings
    arr = np.random.default_rng(1).integers(0, 1 << 30, size=(2048, 2048), dtype=np.int32)
    np.save(tmp_path / "h.npy", arr)  # 16 MiB: several whole 2 MiB pieces
    CXLDataset.ingest(pool, "h", tmp_path / "h.npy", hugepages=False)
    assert CXLDataset(pool, "h").pages()["huge_bytes"] == 0  # opted out: 4 KiB pages
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        ds = CXLDataset(pool, "h", hugepages=True)  # moved onto 2 MiB pages afterwards
    # best effort: either collapsed, or a warning says why not
    assert all("4 KiB pages" in str(x.message) for x in w)
    if not w:
        assert ds.pages()["huge_bytes"] >= 4 * (2 << 20)
    for i in (0, 511, 2047):
        assert torch.equal(ds[i], torch.from_numpy(arr[i]))
    pool.verify()
    assert pickle.loads(pickle.dumps(ds)).hugepages is False


def test_ingest_puts_records_on_2mib_pages(pool: CXLMemoryPool, tmp_path) -> None:
    """By default the records land on 2 MiB pages as they are written (no
    collapse afterwards), where the kernel can: all of one shard but its
    partial 2 MiB ends."""
    arr = np.random.default_rng(2).integers(0, 1 << 30, size=(2048, 2048), dtype=np.int32)
    np.save(tmp_path / "p.npy", arr)
    ds = CXLDataset.ingest(pool, "p", tmp_path / "p.npy")
    pg = ds.pages()
    assert pg["bytes"] >= arr.nbytes
    if pg["huge_bytes"] == 0:
        pytest.skip("this kernel gave shm no 2 MiB pages")
    assert pg["huge_bytes"] >= pg["bytes"] - (4 << 20)
    for i in (0, 1023, 2047):
        assert torch.equal(ds[i], torch.from_numpy(arr[i]))
    pool.verify()
