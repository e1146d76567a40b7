"""CXLDataLoader: fast path order and content, packing, resume, general path."""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool


@pytest.fixture
def fixed(pool: CXLMemoryPool, tmp_path) -> tuple[CXLDataset, np.ndarray]:
    arr = np.arange(1000 * 8, dtype=np.int32).reshape(1000, 8)
    np.save(tmp_path / "f.npy", arr)
    return CXLDataset.ingest(pool, "f", tmp_path / "f.npy"), arr


def rows(loader: CXLDataLoader) -> list[int]:
    return [int(r[0]) // 8 for b in loader for r in b]


def test_sequential_matches_dataset(fixed) -> None:
    ds, arr = fixed
    batches = list(CXLDataLoader(ds, batch_size=64))
    assert [b.shape[0] for b in batches] == [64] * 15 + [40]
    assert torch.equal(torch.cat(batches), torch.from_numpy(arr))
    assert len(CXLDataLoader(ds, batch_size=64)) == 16
    assert len(CXLDataLoader(ds, batch_size=64, drop_last=True)) == 15


def test_shuffle_is_a_permutation_that_changes_per_epoch(fixed) -> None:
    ds, _ = fixed
    dl = CXLDataLoader(ds, batch_size=100, shuffle=True, seed=3, num_workers=2)
    e0, e1 = rows(dl), rows(dl)
    assert sorted(e0) == list(range(1000)) and sorted(e1) == list(range(1000))
    assert e0 != e1 and dl.epoch == 1 and dl.state_dict()["epoch"] == 2
    dl2 = CXLDataLoader(ds, batch_size=100, shuffle=True, seed=3)
    assert rows(dl2) == e0  # same seed, same epoch, same order


def test_any_torch_sampler(fixed) -> None:
    ds, _ = fixed
    sampler = torch.utils.data.SubsetRandomSampler(list(range(0, 1000, 3)),
                                                   generator=torch.Generator().manual_seed(1))
    got = rows(CXLDataLoader(ds, batch_size=50, sampler=sampler))
    assert sorted(got) == list(range(0, 1000, 3))


def test_resume_mid_epoch_yields_exactly_the_rest(fixed) -> None:
    ds, _ = fixed
    full = rows(CXLDataLoader(ds, batch_size=32, shuffle=True, seed=9))
    dl = CXLDataLoader(ds, batch_size=32, shuffle=True, seed=9)
    it = iter(dl)
    first = [int(r[0]) // 8 for _ in range(5) for r in next(it)]
    state = dl.state_dict()
    assert state["position"] == 160
    dl2 = CXLDataLoader(ds, batch_size=32, shuffle=True, seed=9)
    dl2.load_state_dict(state)
    assert first + rows(dl2) == full


def test_packed_tokens_are_the_concatenated_stream(pool: CXLMemoryPool, tokens) -> None:
    prefix, seqs = tokens
    ds = CXLDataset.ingest(pool, "tok", prefix, format="megatron")
    dl = CXLDataLoader(ds, batch_size=4, seq_len=65, threads=2)
    got = []
    for b in dl:
        for row, n in zip(b["tokens"], b["lengths"]):
            got.extend(row[: int(n)].tolist())
    assert got == np.concatenate(seqs).tolist()


def test_packed_resume(pool: CXLMemoryPool, tokens) -> None:
    prefix, seqs = tokens
    ds = CXLDataset.ingest(pool, "tok", prefix, format="megatron")
    stream = []
    dl = CXLDataLoader(ds, batch_size=2, seq_len=50, shuffle=True, seed=4)
    for b in dl:
        stream.append(b["tokens"].clone())
    dl = CXLDataLoader(ds, batch_size=2, seq_len=50, shuffle=True, seed=4)
    it = iter(dl)
    head = [next(it)["tokens"].clone() for _ in range(7)]
    dl2 = CXLDataLoader(ds, batch_size=2, seq_len=50, shuffle=True, seed=4)
    dl2.load_state_dict(dl.state_dict())
    tail = [b["tokens"].clone() for b in dl2]
    assert all(torch.equal(a, b) for a, b in zip(head + tail, stream)) and len(head + tail) == len(stream)


def test_batches_outlive_the_loader(fixed) -> None:
    ds, arr = fixed
    dl = CXLDataLoader(ds, batch_size=10, threads=2)
    kept = []
    for i, b in enumerate(dl):
        if i % 10 == 0:
            kept.append((i, b))
    del dl, ds
    import gc
    gc.collect()
    for i, b in kept:
        assert torch.equal(b, torch.from_numpy(arr[i * 10:(i + 1) * 10]))


def test_general_path_runs_user_collate(fixed) -> None:
    ds, arr = fixed
    dl = CXLDataLoader(ds, batch_size=10, collate_fn=lambda xs: torch.stack(xs).sum(), num_workers=2)
    assert not dl.fast
    assert sum(int(x) for x in dl) == int(arr.sum())


def test_packed_rows_carry_document_boundaries(pool: CXLMemoryPool, tokens) -> None:
    prefix, seqs = tokens
    ds = CXLDataset.ingest(pool, "tok", prefix, format="megatron")
    # by default a packed batch is the rows and their lengths, nothing else
    plain = [b for b in CXLDataLoader(ds, batch_size=3, seq_len=40, shuffle=True, seed=2)]
    assert all(set(b) == {"tokens", "lengths"} for b in plain)
    dl = CXLDataLoader(ds, batch_size=3, seq_len=40, shuffle=True, seed=2, return_segments=True)
    pieces = 0
    for k, b in enumerate(dl):
        assert set(b) == {"tokens", "lengths", "seg_row", "seg_start", "seg_len", "seg_offset",
                          "seg_id"}
        assert all(b[f].dtype == torch.int64 for f in b if f != "tokens")
        # the same rows with or without the boundaries
        assert torch.equal(b["tokens"], plain[k]["tokens"])
        assert torch.equal(b["lengths"], plain[k]["lengths"])
        t = b["tokens"]
        for r, c, n, off, i in zip(b["seg_row"].tolist(), b["seg_start"].tolist(),
                                   b["seg_len"].tolist(), b["seg_offset"].tolist(),
                                   b["seg_id"].tolist()):
            assert t[r, c:c + n].tolist() == seqs[i][off:off + n].tolist()
            pieces += 1
        # segments tile each row's valid part exactly
        for r, n in enumerate(b["lengths"].tolist()):
            assert sum(L for R, L in zip(b["seg_row"].tolist(), b["seg_len"].tolist()) if R == r) == n
    assert pieces >= sum(1 for s in seqs if len(s))


def test_stall_time_is_counted_and_settable(fixed) -> None:
    """stall_seconds only grows during a pass, never past the pass's wall
    time, and can be set (to 0 per logging interval)."""
    import time
    ds, _ = fixed
    dl = CXLDataLoader(ds, batch_size=50, threads=1)
    t0 = time.perf_counter()
    seen = []
    for _ in dl:
        seen.append(dl.stall_ns)
    wall = time.perf_counter() - t0
    assert seen == sorted(seen) and 0 <= dl.stall_seconds <= wall
    dl.stall_seconds = 0
    assert dl.stall_seconds == 0
    list(dl)
    assert dl.stall_seconds >= 0


def test_ring_starts_with_the_documented_slots(fixed) -> None:
    """The ring starts with 2 x prefetch_factor x threads + 2 slots; no
    worker-count warning from torch on the fast path (no processes)."""
    import warnings
    ds, _ = fixed
    for workers, pf in ((1, 1), (2, 2), (3, 4)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            dl = CXLDataLoader(ds, batch_size=10, num_workers=workers, prefetch_factor=pf)
        it = iter(dl)
        next(it)
        # the engine never runs more threads than the CPUs it may use
        assert dl.threads == min(workers, len(os.sched_getaffinity(0)))
        assert dl._engine.n_slots == 2 * pf * dl.threads + 2


def test_stats_of_a_pool_of_one_tier(fixed) -> None:
    """issue 34: stats() on a pool of one tier counts the batches and records
    the loop took (no staging engine there), and its one tier on shm says
    emulated, as the pool's stat() does."""
    import itertools
    ds, arr = fixed
    dl = CXLDataLoader(ds, batch_size=64)
    assert sum(b.shape[0] for b in dl) == len(arr)
    st = dl.stats()
    assert (st["batches"], st["records"]) == (16, 1000)
    assert st["hits"] == st["misses"] == st["prefetched"] == 0
    pool = CXLMemoryPool(ds.spec)
    try:
        assert pool.stat()["emulated"] and pool.stat()["media"] == "shm"
    finally:
        pool.close()
    assert [t["emulated"] for t in st["tiers"]] == [True]
    for _ in itertools.islice(dl, 3):
        pass
    st = dl.stats()
    assert (st["batches"], st["records"]) == (3, 192)


def test_a_refused_capsule_is_the_error_not_the_end(fixed, monkeypatch) -> None:
    """issue 34 (found with torch 2.8, which refuses versioned DLPack
    capsules): when the converter refuses a batch's capsule, the pass raises
    its error; the capsule's destructor used to clear it, and the pass
    looked like an empty epoch (StopIteration). A torch older than the
    floor is refused at import (cxl_dataloader.loader.TORCH_FLOOR)."""
    import cxl_dataloader.loader as ld
    ds, _ = fixed

    def refuse(cap):
        raise RuntimeError("from_dlpack received an invalid capsule (test)")
    monkeypatch.setattr(ld, "_from_capsule", refuse)
    with pytest.raises(RuntimeError, match="invalid capsule \\(test\\)"):
        next(iter(CXLDataLoader(ds, batch_size=8)))
    assert torch.__version__ >= ld.TORCH_FLOOR
