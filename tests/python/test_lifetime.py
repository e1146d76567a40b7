"""Lifetime: tensors from ds[i] and from loader batches (stacked and packed)
outlive the loader, its iterator, the dataset, the pool object and even the
pool's name; they read intact and nothing crashes. scripts/pytest-asan.sh
runs this file under AddressSanitizer."""
from __future__ import annotations

import gc
import uuid

import numpy as np
import pytest
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


def _mapping(addr: int) -> tuple[int, int] | None:
    """The (start, end) of the mapping of this process that holds addr."""
    with open("/proc/self/maps") as f:
        for line in f:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            if lo <= addr < hi:
                return lo, hi
    return None


def test_ring_reused_across_passes_never_under_a_held_batch(tmp_path) -> None:
    """The next pass's loader takes the last pass's ring (the library keeps
    a freed loader's ring memory: no page faults and no zeroing again);
    a batch still held keeps its memory out of it; close() unmaps what is
    kept. Every batch of every pass reads the right records."""
    name = f"pyt-ring-{uuid.uuid4().hex[:8]}"
    pool = CXLMemoryPool(name, create=True, size=64 << 20)
    arr = np.arange(400 * 33, dtype=np.float32).reshape(400, 33)
    np.save(tmp_path / "a.npy", arr)
    ds = CXLDataset.ingest(pool, "a", tmp_path / "a.npy")
    dl = CXLDataLoader(ds, batch_size=16, shuffle=True, seed=4)

    def check(b: torch.Tensor) -> None:
        ids = (b[:, 0] / 33).long()
        assert torch.equal(b, torch.from_numpy(arr[ids.numpy()]))

    def one_pass() -> tuple[set, int]:
        ptrs, seen = set(), 0
        for b in dl:
            check(b)
            ptrs.add(b.data_ptr())
            seen += len(b)
        assert seen == 400
        return ptrs, seen

    first, _ = one_pass()
    second, _ = one_pass()
    assert second & first, "the second pass's ring is not the first's"

    # a batch held across passes: its slot is not handed to the next ring
    it = iter(dl)
    held = next(it)
    check(held)
    copy = held.clone()
    for b in it:
        check(b)
    del b, it
    third, _ = one_pass()
    assert held.data_ptr() not in third
    assert torch.equal(held, copy)
    ptr = held.data_ptr()
    del held
    gc.collect()  # its loader goes now, and its ring is kept mapped
    m = _mapping(ptr)
    assert m is not None, "a freed loader's ring was unmapped"
    # the next pass's loader takes it (and the third pass's ring, kept when
    # that pass's loader went at this iter(), was unmapped as not taken)
    fourth, _ = one_pass()
    assert any(m[0] <= p < m[1] for p in fourth)
    ptr = next(iter(fourth))
    m = _mapping(ptr)
    assert m is not None
    dl.close()  # the last pass's loader goes, and what is kept is unmapped
    assert _mapping(ptr) != m
    one_pass()  # fresh memory, the same records
    del dl, ds
    pool.close()
    CXLMemoryPool.destroy(name)


def test_a_pass_ends_once_however_it_ends(tmp_path) -> None:
    """The fast path's iterator (_core.Pass: the per-batch loop in C, where
    a generator ran before) ends its pass exactly once, however the loop
    ends: run out, close(), freed unfinished (a break), collected in a
    reference cycle, or an error inside a batch (which still reaches the
    caller); a batch held past the end stays intact, and the sampler's
    count follows every batch."""
    from types import SimpleNamespace

    from cxl_dataloader import _core

    name = f"pyt-pass-{uuid.uuid4().hex[:8]}"
    pool = CXLMemoryPool(name, create=True, size=64 << 20)
    arr = np.arange(100 * 8, dtype=np.int64).reshape(100, 8)
    np.save(tmp_path / "a.npy", arr)
    ds = CXLDataset.ingest(pool, "a", tmp_path / "a.npy")
    order = np.random.default_rng(0).permutation(100).astype(np.int64)
    ends: list[str] = []

    def make(tag: str, tensor=torch._C._from_dlpack, drawn=None):
        eng = _core.Loader(ds.store, order, 10, tensor=tensor)
        return _core.Pass(eng, lambda: ends.append(tag), drawn)

    drawn = SimpleNamespace(_drawn=-1)
    p = make("out", drawn=drawn)
    assert iter(p) is p
    got = []
    for k, b in enumerate(p):
        got.append(b)
        assert drawn._drawn == 10 * (k + 1) and ends == []
    assert ends == ["out"]
    assert torch.equal(torch.cat(got), torch.from_numpy(arr[order]))
    p.close()
    del p
    gc.collect()
    assert ends == ["out"]

    p = make("close")
    held = next(p)
    p.close()
    p.close()
    assert ends == ["out", "close"]
    assert list(p) == []
    del p
    assert torch.equal(held, torch.from_numpy(arr[order[:10]]))

    for b in make("break"):
        break
    assert ends[-1] == "break" and len(ends) == 3

    # a cycle through the Pass: its on_end holds a list that holds it
    cell: list = []
    p = _core.Pass(_core.Loader(ds.store, order, 10, tensor=torch._C._from_dlpack),
                   lambda c=cell: ends.append(("cycle", len(c))))
    cell.append(p)
    next(p)
    del p, cell
    gc.collect()
    assert ends[-1] == ("cycle", 1) and len(ends) == 4

    def fails_at_third(cap, n=[0]):  # noqa: B006 - the count of calls
        n[0] += 1
        if n[0] == 3:
            raise RuntimeError("converter failed")
        return torch._C._from_dlpack(cap)

    p = make("error", tensor=fails_at_third)
    next(p), next(p)
    with pytest.raises(RuntimeError, match="converter failed"):
        next(p)
    assert ends[-1] == "error" and len(ends) == 5
    assert list(p) == []
    del p
    gc.collect()
    assert len(ends) == 5

    # the loader's own passes: a break ends the pass (the state names the
    # next epoch) and the sampler's count is the batches handed out
    dl = CXLDataLoader(ds, batch_size=10, shuffle=True, seed=1)
    it = iter(dl)
    assert isinstance(it, _core.Pass)
    next(it), next(it)
    assert dl.state_dict()["sampler"]["consumed"] == 20
    del it
    st = dl.state_dict()
    assert st["epoch"] == 1 and st["sampler"]["consumed"] == 0
    del dl, ds
    pool.close()
    CXLMemoryPool.destroy(name)
