"""Samplers driving torch's DataLoader (workers 0 and 2) and CXLDataLoader's
fast path, where the C engine draws from the C sampler itself."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cxl_dataloader import (BlendedCXLDataset, BlendedCXLSampler, CXLDataLoader, CXLDataset,
                            CXLMemoryPool, CurriculumCXLSampler, DistributedCXLSampler,
                            RandomCXLSampler, _core)
from cxl_dataloader import loader as loader_mod


@pytest.fixture
def fixed(pool: CXLMemoryPool, tmp_path) -> CXLDataset:
    arr = np.arange(1000, dtype=np.int64).reshape(1000, 1) * np.ones((1, 4), np.int64)
    np.save(tmp_path / "f.npy", arr)
    return CXLDataset.ingest(pool, "f", tmp_path / "f.npy")


def ids_of(batches) -> list[int]:
    return [int(r[0]) for b in batches for r in b]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("which", ["random", "block", "dist", "blend", "curriculum"])
def test_plain_torch_dataloader(workers: int, which: str) -> None:
    data = torch.arange(500)

    def mk():
        if which == "random":
            return RandomCXLSampler(data, seed=7)
        if which == "block":
            return RandomCXLSampler(data, seed=7, shard_size=32, window=4)
        if which == "dist":
            return DistributedCXLSampler(data, num_replicas=3, rank=1, seed=7)
        if which == "blend":
            return BlendedCXLSampler([250, 250], [3, 1], seed=7)
        return CurriculumCXLSampler(difficulty=np.arange(500.0), pacing="step", seed=7)

    s = mk()
    dl = torch.utils.data.DataLoader(data, batch_size=32, sampler=s, num_workers=workers)
    assert len(dl) == -(-len(s) // 32)
    got = torch.cat(list(dl)).tolist()
    assert got == list(mk())
    got2 = torch.cat(list(dl)).tolist()  # next epoch: another order, same set for a shuffle
    assert got2 != got
    if which in ("random", "block"):
        assert sorted(got2) == sorted(got) == list(range(500))


def test_checkpoint_recipe_with_prefetching_workers() -> None:
    """The documented loop: count what the loop consumed (the DataLoader's
    workers prefetch ahead of it); resume with another worker count and
    another world size; the epoch is read once."""
    data = torch.arange(1000)

    def dl(world: int, rank: int, workers: int):
        s = DistributedCXLSampler(data, world, rank, seed=9, drop_last=True)
        return s, torch.utils.data.DataLoader(data, batch_size=16, sampler=s,
                                              num_workers=workers)

    read, state = [], None
    for r in range(2):
        s, loader = dl(2, r, 2)
        seen = 0
        for step, batch in enumerate(loader):
            read += batch.tolist()
            seen += len(batch)
            if step == 9:
                st = s.state_dict(samples_seen=seen)
                assert s.state_dict()["consumed"] > st["consumed"]  # drawn ahead
                state = state or st
                assert st == state
                break
    assert state["consumed"] == 2 * 160
    for r in range(3):
        s, loader = dl(3, r, 0)
        s.load_state_dict(state)
        read += torch.cat(list(loader)).tolist()
    assert len(read) == len(set(read)) == 320 + 3 * (680 // 3)


def test_blended_dataset_with_torch_dataloader() -> None:
    a, b = torch.arange(100), torch.arange(1000, 1050)
    data = BlendedCXLDataset([a, b])
    s = BlendedCXLSampler(data, [1, 1], num_samples=100, seed=1)
    got = torch.cat(list(torch.utils.data.DataLoader(data, batch_size=10, sampler=s))).tolist()
    assert sum(x >= 1000 for x in got) == 50  # 1:1 exactly


def test_cxl_dataloader_fast_path_draws_in_c(fixed, monkeypatch) -> None:
    def boom(self):
        raise AssertionError("order materialized in Python")

    monkeypatch.setattr(loader_mod.CXLDataLoader, "_order", boom)
    s = RandomCXLSampler(fixed, seed=11, shard_size=64, window=4)
    dl = CXLDataLoader(fixed, batch_size=50, sampler=s, threads=2)
    assert dl.fast and len(dl) == 20
    got = ids_of(dl)
    assert got == list(RandomCXLSampler(fixed, seed=11, shard_size=64, window=4))
    assert sorted(got) == list(range(1000))
    e1 = ids_of(dl)  # the sampler moved to epoch 1
    ref = RandomCXLSampler(fixed, seed=11, shard_size=64, window=4)
    ref.set_epoch(1)
    assert e1 == list(ref)


def test_cxl_dataloader_batch_ids_match_sampler(fixed) -> None:
    s = DistributedCXLSampler(fixed, num_replicas=3, rank=2, seed=5, drop_last=True)
    dl = CXLDataLoader(fixed, batch_size=64, sampler=s)
    eng_ids = []
    for b in dl:
        eng_ids += b[:, 0].tolist()
    assert eng_ids == list(DistributedCXLSampler(fixed, num_replicas=3, rank=2, seed=5,
                                                 drop_last=True))
    assert len(eng_ids) == 333


def test_cxl_dataloader_resume_exact_and_elastic(fixed) -> None:
    def loader(world: int, rank: int):
        return CXLDataLoader(fixed, batch_size=25, sampler=DistributedCXLSampler(
            fixed, num_replicas=world, rank=rank, seed=3, drop_last=True))

    full = ids_of(loader(2, 0))
    dls = [loader(2, r) for r in range(2)]
    its = [iter(d) for d in dls]
    head = [[int(x[0]) for _ in range(4) for x in next(it)] for it in its]
    states = [d.state_dict() for d in dls]
    assert states[0]["sampler"] == states[1]["sampler"]
    assert states[0]["sampler"]["consumed"] == 2 * 100
    again = loader(2, 0)
    again.load_state_dict(states[0])
    assert head[0] + ids_of(again) == full  # exact
    rest = []
    for r in range(3):  # elastic: 2 -> 3 ranks finish the epoch
        d = loader(3, r)
        d.load_state_dict(states[0])
        rest += ids_of(d)
    seen = head[0] + head[1] + rest
    assert len(seen) == len(set(seen)) == 998  # 800 left over 3 ranks: 2 dropped
    order = list(RandomCXLSampler(fixed, seed=3))
    assert sorted(seen) == sorted(order[:998])


def test_sampler_busy_while_a_loader_draws(fixed) -> None:
    s = _core.Sampler("random", n=1000, seed=1)
    eng = _core.Loader(fixed.store, s, 10)
    assert s.busy
    with pytest.raises(RuntimeError, match="in use"):
        s.next(5)
    with pytest.raises(ValueError, match="already used"):
        _core.Loader(fixed.store, s, 10)
    first = next(eng)
    assert np.asarray(first.ids).tolist() == [_core.Sampler("random", n=1000, seed=1).at(j)
                                              for j in range(10)]
    del first, eng
    assert not s.busy
    with pytest.raises(IndexError, match="records"):
        _core.Loader(fixed.store, _core.Sampler("random", n=1001), 10)


def test_packed_rows_from_a_sampler_resume_exactly(pool: CXLMemoryPool, tokens) -> None:
    """PACK on the fast path: the stream is the sampler's records
    concatenated; a resume mid-record (offset) continues it exactly."""
    prefix, seqs = tokens
    ds = CXLDataset.ingest(pool, "tok", prefix, format="megatron")

    def dl():
        return CXLDataLoader(ds, batch_size=2, seq_len=50,
                             sampler=DistributedCXLSampler(ds, 2, 1, seed=6, order="block",
                                                           shard_size=16, window=2))

    order = list(DistributedCXLSampler(ds, 2, 1, seed=6, order="block", shard_size=16,
                                       window=2))
    stream = [b["tokens"].clone() for b in dl()]
    flat = torch.cat([t.reshape(-1) for t in stream]).tolist()
    want = np.concatenate([seqs[i] for i in order]).tolist()
    assert [x for x in flat if x != 0] == [x for x in want if x != 0]
    d = dl()
    it = iter(d)
    head = [next(it)["tokens"].clone() for _ in range(9)]
    state = d.state_dict()
    assert state["offset"] > 0 or state["position"] > 0
    d2 = dl()
    d2.load_state_dict(state)
    tail = [b["tokens"].clone() for b in d2]
    assert len(head + tail) == len(stream)
    assert all(torch.equal(a, b) for a, b in zip(head + tail, stream))
