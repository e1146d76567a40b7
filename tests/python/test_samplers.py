"""Samplers: properties over N, seeds, world sizes, cut points and world-size
changes (hypothesis prints the falsifying example; seeds are arguments)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cxl_dataloader import (BlendedCXLDataset, BlendedCXLSampler, CurriculumCXLSampler,
                            DistributedCXLSampler, RandomCXLSampler, _core)
from cxl_dataloader.samplers import integer_weights

FAST = settings(deadline=None, max_examples=40, suppress_health_check=[HealthCheck.too_slow])
PRIMES = [2, 3, 5, 7, 11, 13, 31, 97, 257, 65537, 1000003]
sizes = st.one_of(st.sampled_from([0, 1] + PRIMES[:-1]), st.integers(0, 5000))
seeds = st.integers(0, 2**64 - 1)


def draw_all(s: _core.Sampler) -> np.ndarray:
    out = []
    while True:
        a = np.frombuffer(s.next(1 << 20), dtype=np.int64)
        if not a.size:
            return np.concatenate(out) if out else np.zeros(0, np.int64)
        out.append(a.copy())


# ---- permutation -----------------------------------------------------------------

@FAST
@given(n=sizes, seed=seeds, epoch=st.integers(0, 1000))
def test_every_epoch_is_a_permutation(n: int, seed: int, epoch: int) -> None:
    s = RandomCXLSampler(n, seed=seed)
    s.set_epoch(epoch)
    got = list(s)
    assert len(got) == len(s) == n
    assert sorted(got) == list(range(n))


@pytest.mark.parametrize("n", [1000003, 10**6, 2**20 + 1])
def test_large_n_fully_enumerated(n: int) -> None:
    ids = draw_all(_core.Sampler("random", n=n, seed=n))
    assert ids.size == n and np.array_equal(np.sort(ids), np.arange(n))
    assert not np.array_equal(ids[:100], np.arange(100))


@settings(deadline=None, max_examples=10)
@given(n=st.integers(1, 10**6), seed=seeds)
def test_random_n_up_to_a_million(n: int, seed: int) -> None:
    ids = draw_all(_core.Sampler("random", n=n, seed=seed))
    assert np.array_equal(np.sort(ids), np.arange(n))


@pytest.mark.parametrize("n", [2**40, 10**12, 2**63 - 1])
def test_huge_n_sampled(n: int) -> None:
    s = RandomCXLSampler(n, seed=5)
    core = s._core_sampler()
    rng = np.random.default_rng(n % 1000)
    pos = np.unique(np.concatenate([np.arange(5000), rng.integers(0, n, 5000, dtype=np.uint64)
                                    .astype(object)])).tolist()
    ids = [core.epoch_at(int(p)) for p in pos]
    assert len(set(ids)) == len(ids) and all(0 <= i < n for i in ids)
    assert all(core.position(i) == int(p) for i, p in zip(ids[:200], pos[:200]))
    first = [i for _, i in zip(range(3000), iter(s))]
    assert first == ids[:3000]
    assert s.rank_len() == n


@FAST
@given(pos=st.lists(st.integers(0, 2**40 - 1), min_size=1, max_size=300, unique=True),
       seed=seeds, epoch=st.integers(0, 2**40))
def test_2_40_sampled_positions_distinct_ids(pos: list[int], seed: int, epoch: int) -> None:
    n = 2**40
    s = _core.Sampler("random", n=n, seed=seed, epoch=epoch)
    ids = [s.epoch_at(p) for p in pos]
    assert len(set(ids)) == len(ids) and all(0 <= i < n for i in ids)
    assert [s.position(i) for i in ids] == pos


def test_epochs_and_seeds_differ() -> None:
    a = list(RandomCXLSampler(1000, seed=1))
    s = RandomCXLSampler(1000, seed=1)
    e0, e1 = list(s), list(s)  # a finished iteration moves to the next epoch
    assert e0 == a and e1 != e0 and s.epoch == 1
    s.set_epoch(0)
    assert list(s) == a
    assert list(RandomCXLSampler(1000, seed=2)) != a


@FAST
@given(n=st.integers(0, 4000), shard=st.integers(1, 300), window=st.integers(1, 40),
       seed=seeds)
def test_block_mode_is_a_permutation_with_w_shards_active(n: int, shard: int, window: int,
                                                          seed: int) -> None:
    got = list(RandomCXLSampler(n, seed=seed, shard_size=shard, window=window))
    assert sorted(got) == list(range(n))
    sh = np.array(got, dtype=np.int64) // shard
    if n:
        first = {}
        last = {}
        for p, x in enumerate(sh.tolist()):
            first.setdefault(x, p)
            last[x] = p
        active = np.zeros(n + 1, np.int64)
        for x in first:
            active[first[x]] += 1
            active[last[x] + 1] -= 1
        assert np.cumsum(active).max() <= window


# ---- distribution ------------------------------------------------------------------

@FAST
@given(n=sizes, world=st.integers(1, 64), drop_last=st.booleans(), seed=seeds,
       shuffle=st.booleans())
def test_ranks_disjoint_equal_union_is_epoch_like_torch(n: int, world: int, drop_last: bool,
                                                        seed: int, shuffle: bool) -> None:
    if n == 0 and not drop_last:
        n = 1  # torch's DistributedSampler cannot pad an empty dataset
    data = range(n)
    ranks = [list(DistributedCXLSampler(data, world, r, shuffle=shuffle, seed=seed,
                                        drop_last=drop_last)) for r in range(world)]
    ref = [torch.utils.data.DistributedSampler(data, world, r, shuffle=shuffle, seed=seed,
                                               drop_last=drop_last) for r in range(world)]
    counts = {len(x) for x in ranks}
    assert counts == {len(ref[0])}
    assert len(DistributedCXLSampler(data, world, 0, drop_last=drop_last)) == len(ref[0])
    order = list(RandomCXLSampler(n, seed=seed, order="random" if shuffle else "sequential"))
    total = len(ranks[0]) * world
    epoch = [order[p % n] for p in range(total)] if n else []
    assert sorted(sum(ranks, [])) == sorted(epoch)
    for r in range(world):  # interleaved: rank r reads positions r, r + world, ...
        assert ranks[r] == epoch[r::world]
    if not shuffle:  # identical to torch's for the storage order
        assert ranks == [list(x) for x in ref]
    if drop_last:
        assert len(set(sum(ranks, []))) == total


def test_world_and_rank_from_torch_distributed(monkeypatch) -> None:
    monkeypatch.setattr(torch.distributed, "is_available", lambda: True)
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.distributed, "get_world_size", lambda: 4)
    monkeypatch.setattr(torch.distributed, "get_rank", lambda: 3)
    s = DistributedCXLSampler(range(10))
    assert (s.num_replicas, s.rank, len(s), s.total_size) == (4, 3, 3, 12)
    with pytest.raises(ValueError):
        DistributedCXLSampler(range(10), num_replicas=2, rank=2)


# ---- resume ------------------------------------------------------------------------

def make(kind: str, n: int, seed: int, world: int, rank: int, drop_last: bool):
    if kind == "blend":
        base = BlendedCXLSampler([n // 3 + 1, n // 2 + 1, 7], [3, 2, 1], num_samples=n,
                                 seed=seed)
        return DistributedCXLSampler(None, world, rank, drop_last=drop_last, order=base)
    if kind == "curriculum":
        base = CurriculumCXLSampler(difficulty=np.arange(n, dtype=np.float64) % 17,
                                    pacing="root", seed=seed)
        return DistributedCXLSampler(None, world, rank, drop_last=drop_last, order=base)
    return DistributedCXLSampler(range(n), world, rank, seed=seed, drop_last=drop_last,
                                 order=kind, shard_size=16 if kind == "block" else None,
                                 window=3)


kinds = st.sampled_from(["random", "block", "sequential", "blend", "curriculum"])


@FAST
@given(kind=kinds, n=st.integers(1, 3000), world=st.integers(1, 64), drop_last=st.booleans(),
       seed=seeds, cut=st.floats(0, 1), epoch=st.integers(0, 5))
def test_resume_mid_epoch_is_exact(kind: str, n: int, world: int, drop_last: bool, seed: int,
                                   cut: float, epoch: int) -> None:
    for r in sorted({0, world - 1}):
        full = make(kind, n, seed, world, r, drop_last)
        full.set_epoch(epoch)
        ref = list(full)
        k = int(cut * len(ref))
        s = make(kind, n, seed, world, r, drop_last)
        s.set_epoch(epoch)
        it = iter(s)
        head = [next(it) for _ in range(k)]
        state = s.state_dict()
        assert set(state) == {"seed", "epoch", "consumed", "fingerprint"}
        s2 = make(kind, n, seed, world, r, drop_last)
        s2.load_state_dict(state)
        if k == len(ref) and k:  # a finished epoch: the state is the next one's start
            assert (state["epoch"], state["consumed"]) == (epoch + 1, 0)
            continue
        s2.set_epoch(epoch)  # the usual loop calls it again: the restored point stays
        assert len(s2) == len(ref) - k
        assert head + list(s2) == ref


@FAST
@given(kind=kinds, n=st.integers(1, 3000), w1=st.integers(1, 64), w2=st.integers(1, 64),
       drop_last=st.booleans(), seed=seeds, cut=st.floats(0, 1))
def test_elastic_resume_neither_repeats_nor_skips(kind: str, n: int, w1: int, w2: int,
                                                  drop_last: bool, seed: int,
                                                  cut: float) -> None:
    before = [make(kind, n, seed, w1, r, drop_last) for r in range(w1)]
    per = len(before[0])
    k = int(cut * per)
    if k == per:
        k = max(0, per - 1)
    read = []
    for s in before:  # every rank consumes k samples: a synchronous step boundary
        it = iter(s)
        read += [next(it) for _ in range(k)]
    state = before[0].state_dict(samples_seen=k)
    assert all(s.state_dict(samples_seen=k) == state for s in before)
    after = []
    for r in range(w2):
        s = make(kind, n, seed, w2, r, drop_last)
        s.load_state_dict(state)
        after.append(list(s))
    assert len({len(a) for a in after}) == 1
    ref = make(kind, n, seed, 1, 0, True)
    L = ref.epoch_len()
    order = list(ref)
    c = state["consumed"]
    assert c == k * w1
    rest = L - c
    if drop_last:
        expect = order[:c] + order[c:L - rest % w2]
    else:
        pad = -(-rest // w2) * w2 - rest
        expect = order + [order[(c + i) % L] for i in range(rest, rest + pad)]
    assert sorted(read + sum(after, [])) == sorted(expect)


def test_state_of_another_order_is_refused() -> None:
    s = RandomCXLSampler(100, seed=1)
    with pytest.raises(ValueError, match="another order"):
        s.load_state_dict(RandomCXLSampler(101, seed=1).state_dict())
    with pytest.raises(ValueError, match="outside the epoch"):
        s.load_state_dict(dict(s.state_dict(), consumed=101))
    core = _core.Sampler("random", n=100)
    with pytest.raises(_core.CXLError, match="fingerprint"):
        core.restore(dict(core.state(), fingerprint=1))


def test_core_sampler_api() -> None:
    s = _core.Sampler("block", n=1000, seed=3, shard_size=10, window=4, world=3, rank=2,
                      drop_last=True)
    assert len(s) == s.rank_len() == 333 and s.epoch_len() == 1000 and s.id_bound == 1000
    ids = np.frombuffer(s.next(10**6), dtype=np.int64).tolist()
    assert ids == [s.at(j) for j in range(333)] == [s.epoch_at(2 + 3 * j) for j in range(333)]
    assert s.state()["consumed"] == 999
    with pytest.raises(IndexError):
        s.at(333)
    with pytest.raises(ValueError, match="kind"):
        _core.Sampler("nope", n=3)
    with pytest.raises(_core.CXLError, match="rank"):
        _core.Sampler("random", n=3, world=2, rank=2)


# ---- blending ----------------------------------------------------------------------

@FAST
@given(weights=st.lists(st.integers(0, 50), min_size=1, max_size=8).filter(any),
       seed=seeds, length=st.integers(1, 3000))
def test_blend_prefix_counts_within_one(weights: list[int], seed: int, length: int) -> None:
    data = BlendedCXLDataset([list(range(1 + 37 * i)) for i in range(len(weights))])
    s = BlendedCXLSampler(data, weights, num_samples=length, seed=seed)
    D = sum(weights)
    counts = np.zeros(len(weights), dtype=np.int64)
    for k, i in enumerate(s, 1):
        src, inner = data.locate(i)
        assert (src, inner) == s.source(i) and inner < data.sizes[src]
        counts[src] += 1
        # |c_i - k w_i / D| < 1, in integers
        assert np.all(np.abs(counts * D - k * np.array(weights)) < D)
    assert counts.sum() == length


def test_float_weights_rationalized() -> None:
    assert integer_weights([0.5, 0.3, 0.2]) == [5, 3, 2]
    assert integer_weights([2, 4, 0]) == [1, 2, 0]
    assert integer_weights([1 / 3, 2 / 3]) == [1, 2] or sum(integer_weights([1 / 3, 2 / 3])) \
        <= 1 << 24
    with pytest.raises(ValueError):
        integer_weights([0, 0])
    s = BlendedCXLSampler([100, 100, 100], [0.5, 0.3, 0.2], num_samples=1000, seed=1)
    src = [s.source(i)[0] for i in s]
    assert [src.count(i) for i in range(3)] == [500, 300, 200]


def test_blended_dataset_maps_ids() -> None:
    d = BlendedCXLDataset([["a", "b"], ["c"], ["d", "e", "f"]])
    assert len(d) == 6 and [d[i] for i in range(6)] == list("abcdef")
    assert d.locate(2) == (1, 0) and d.locate(-1) == (2, 2)
    with pytest.raises(IndexError):
        d[6]


# ---- curriculum ----------------------------------------------------------------------

def schedule(pacing: str, g0: float, steps: int, t: float) -> float:
    if pacing == "linear":
        return g0 + (1 - g0) * t
    if pacing == "root":
        return math.sqrt(g0 * g0 + (1 - g0 * g0) * t)
    return g0 + (1 - g0) * math.floor(steps * t) / steps


@FAST
@given(n=st.integers(1, 2000), pacing=st.sampled_from(["linear", "root", "step"]),
       start=st.floats(0.01, 1), steps=st.integers(1, 10), seed=seeds,
       epoch_len=st.integers(1, 3000))
def test_curriculum_releases_per_schedule(n: int, pacing: str, start: float, steps: int,
                                          seed: int, epoch_len: int) -> None:
    rng = np.random.default_rng(seed % 2**32)
    diff = rng.permutation(n).astype(np.float64)  # distinct values: groups of one
    s = CurriculumCXLSampler(difficulty=diff, pacing=pacing, start=start, steps=steps,
                             num_samples=epoch_len, seed=seed)
    rank = np.argsort(diff, kind="stable")  # easiest first
    prev = 0
    for p, i in enumerate(s):
        R = s.released(p)
        t = min(1.0, p / epoch_len)
        want = max(1, math.ceil(schedule(pacing, start, steps, t) * n - 1e-9))
        assert abs(R - min(n, want)) <= 1, (p, R, want)
        assert R >= prev
        prev = R
        assert i in set(rank[:R].tolist())


def test_curriculum_from_the_pool(pool, tmp_path) -> None:
    from cxl_dataloader import CXLDataset
    from cxl_dataloader.samplers import write_difficulty
    np.save(tmp_path / "x.npy", np.arange(50, dtype=np.int32).reshape(50, 1))
    ds = CXLDataset.ingest(pool, "x", tmp_path / "x.npy")
    diff = (np.arange(50) * 7919 % 50).astype(np.float64)
    assert write_difficulty(pool, "x", diff) == "x.difficulty"
    s = CurriculumCXLSampler(ds, pacing="linear", start=0.2, seed=3)
    a = list(s)
    b = list(CurriculumCXLSampler(difficulty=diff, pacing="linear", start=0.2, seed=3))
    assert a == b
    assert s.released(0) == 10  # the easiest fifth first
    assert all(diff[i] < s.released(p) for p, i in enumerate(a))  # diff[i] is i's rank
    with pytest.raises(ValueError, match="difficulty values"):
        CurriculumCXLSampler(ds, difficulty=diff[:10])
    # the dataset's own scalar field
    np.save(tmp_path / "z.npy", diff.astype(np.float32))
    z = CXLDataset.ingest(pool, "z", tmp_path / "z.npy")
    assert list(CurriculumCXLSampler(z, field="data", start=0.2, seed=3)) == a
    with pytest.raises(ValueError, match="no field"):
        CurriculumCXLSampler(z, field="nope")
    with pytest.raises(_core.CXLError, match="z.difficulty"):
        CurriculumCXLSampler(z)  # no sibling dataset z.difficulty


def test_samplers_pickle_and_keep_their_state(pool, tmp_path) -> None:
    import pickle
    from cxl_dataloader import CXLDataset
    from cxl_dataloader.samplers import write_difficulty
    np.save(tmp_path / "y.npy", np.arange(40, dtype=np.float32))
    ds = CXLDataset.ingest(pool, "y", tmp_path / "y.npy")
    write_difficulty(pool, "y", np.arange(40)[::-1])
    for s in [RandomCXLSampler(40, seed=2, shard_size=8, window=2),
              DistributedCXLSampler(ds, 3, 1, seed=4),
              BlendedCXLSampler([20, 20], [1, 3], seed=1),
              CurriculumCXLSampler(ds, pacing="root", seed=5)]:
        it = iter(s)
        head = [next(it) for _ in range(5)]
        s2 = pickle.loads(pickle.dumps(s))
        assert s2.state_dict() == s.state_dict()
        s.load_state_dict(s.state_dict())
        s2.load_state_dict(s.state_dict())
        assert list(s2) == list(s) and len(head) == 5
