"""Pools of tiers from Python: create, ingest into the nvme home, read
records (copied out), migrate_to, one epoch per memory_policy with every
record once and intact, loader.stats(), window="auto", bad tier specs."""
from __future__ import annotations

import os
import time
import uuid
import warnings
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pytest
import torch

from cxl_dataloader import (CXLDataLoader, CXLDataset, CXLError, CXLMemoryPool,
                            DistributedCXLSampler, RandomCXLSampler)

ROWS, COLS = 24576, 64          # int64 records of 512 bytes: 12 MiB
SHARD = 64 * 1024


@pytest.fixture
def tiered(tmp_path: Path) -> Iterator[tuple[CXLMemoryPool, str, np.ndarray]]:
    name = f"pyt-tier-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tier_file = f"/var/tmp/cxlp-{name}.tier"
    p = CXLMemoryPool(name, create=True, meta_bytes=4 << 20,
                      tiers=[f"dram=shm:{name}.d:6M", f"nvme=file:{tier_file}:32M"])
    data = np.arange(ROWS * COLS, dtype=np.int64).reshape(ROWS, COLS)
    src = tmp_path / "d.npy"
    np.save(src, data)
    p._pool.import_("d", str(src), format="npy", shard_bytes=SHARD)
    try:
        yield p, name, data
    finally:
        p.close()
        CXLMemoryPool.destroy(name)
        assert not os.path.exists(tier_file)


def test_records_come_from_the_nvme_home_through_the_dram_tier(tiered) -> None:
    p, name, data = tiered
    tiers = p.tiers()
    assert [t["kind"] for t in tiers] == ["dram", "nvme"]
    assert tiers[1]["home"] and tiers[1]["staged"] and not tiers[0]["staged"]
    assert tiers[1]["copies"] == tiers[1]["copies"] > 0 and tiers[0]["copies"] == 0
    ds = CXLDataset(p, "d")
    assert ds.tiered and len(ds) == ROWS
    for i in (0, 1, ROWS // 2, ROWS - 1):
        assert torch.equal(ds[i], torch.from_numpy(data[i]))
    t = p.tiers()
    assert t[0]["copies"] == 3 and t[0]["misses"] == 3 and t[0]["fetches"] == 3


def test_migrate_to_dram_and_back_under_a_reader(tiered) -> None:
    p, name, data = tiered
    ds = CXLDataset(p, "d")
    n = ds.shards()["n_shards"]
    with pytest.raises(CXLError, match="no free extent"):
        ds.migrate_to("dram")            # 12 MiB do not fit 4 MiB of dram
    p.migrate("d", "nvme")
    st = ds.migrate_to(1)                # the home, by index: drops every copy
    assert st["shards"] == n and st["copied"] == 0
    assert p.tiers()[0]["copies"] == 0
    assert torch.equal(ds[123], torch.from_numpy(data[123]))
    with pytest.raises(CXLError, match="tier 'ssd'"):
        ds.migrate_to("ssd")


def test_getitem_pins_only_for_its_copy(tiered, tmp_path: Path) -> None:
    """ds[i] of a tiered dataset copies the record (or each field of a dict)
    out under a pin held for the copy alone: a copy dropped while the
    dataset stays open is freed at the next transaction, not at close."""
    p, name, data = tiered
    n = 2000
    t = pa.table({"ids": [list(range(i % 40)) for i in range(n)],
                  "label": np.arange(n, dtype=np.int64), "caption": [f"c{i}" for i in range(n)]})
    CXLDataset.ingest(p, "m", t, shard_bytes=SHARD)
    rec, multi = CXLDataset(p, "d"), CXLDataset(p, "m")
    tick = np.zeros((1, 8), dtype=np.int64)
    for k, (ds, ids) in enumerate([(rec, (0, ROWS // 2, ROWS - 1)), (multi, (3, n // 2, n - 1))]):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # nothing says records are copied
            got = [ds[i] for i in ids]
        if ds is rec:
            assert all(torch.equal(g, torch.from_numpy(data[i])) for g, i in zip(got, ids))
        else:
            assert [g["caption"] for g in got] == [f"c{i}" for i in ids]
            assert [g["ids"].tolist() for g in got] == [list(range(i % 40)) for i in ids]
            assert [g["label"].item() for g in got] == list(ids)
        assert p.tiers()[0]["copies"] == 3 and p.tiers()[0]["used"] > 0
        p.migrate(ds.name, "nvme")           # drops the dram copies: deferred frees
        np.save(tmp_path / "tick.npy", tick)
        p._pool.import_(f"tick{k}", str(tmp_path / "tick.npy"), format="npy")  # a transaction
        dram = p.tiers()[0]
        assert dram["copies"] == 0 and dram["used"] == 0, dram  # freed with ds still open
    got[0]["label"][...] = -1  # the copies are Python's own
    assert multi[3]["label"].item() == 3
    assert p.verify()


def epoch(loader: CXLDataLoader, data: np.ndarray) -> int:
    seen = np.zeros(len(data), dtype=bool)
    n = 0
    ids = iter(loader.sampler) if loader.sampler is not None else None
    for batch in loader:
        rows = batch.numpy()
        first = rows[:, 0] // COLS
        assert not seen[first].any()
        seen[first] = True
        assert (rows == data[first]).all()
        n += len(rows)
    del ids
    return n


@pytest.mark.parametrize("policy", ["lookahead", "lru", "streaming", "hot_first", "full_prefetch"])
def test_one_epoch_per_policy_every_record_once_and_intact(tiered, policy) -> None:
    p, name, data = tiered
    p.migrate("d", "nvme")
    ds = CXLDataset(p, "d")
    # runs=0: the geometry asserted is the block order's of units; "auto"
    # asks the home's probe, which a loaded disk can tip towards runs
    sampler = RandomCXLSampler(ds, seed=5, window="auto", memory_budget=2 << 20, runs=0)
    assert sampler.order == "block" and sampler.shard_size == SHARD // 512
    assert sampler.window == max(1, (2 << 20) // (2 * (SHARD + 4096)))
    loader = CXLDataLoader(ds, batch_size=64, sampler=sampler, memory_policy=policy,
                           memory_budget=2 << 20, lookahead=4)
    assert epoch(loader, data) == ROWS
    st = loader.stats()
    assert st["policy"] == policy and st["records"] == ROWS
    assert st["hits"] + st["misses"] == ROWS and st["private_reads"] == 0
    assert st["bytes_staged"] > 0 and st["tiers"][0]["kind"] == "dram"
    assert st["stagers"] == 4  # the default for shards of 64 KiB (docs/tiers.md)
    if policy in ("lookahead", "streaming"):
        assert st["prefetched"] > 0
    if policy == "lru":
        assert st["prefetched"] == 0 and st["fetched"] > 0
    if policy in ("hot_first", "full_prefetch"):
        assert st["placed"] > 0
    assert p.verify()


def test_staging_ahead_of_a_pass_at_construction_after_set_epoch_and_as_an_epoch_ends(
        tiered) -> None:
    """docs/tiers.md, "Staging ahead of a pass": the shards of the first
    lookahead batches of the pass the next iter() starts are staged into
    the dram tier before it starts, from a cold pool: at construction,
    during the last window of the epoch before, after set_epoch() of
    another epoch and after load_state_dict() of a new loader; close()
    stops it; with seed=None (drawn when the pass starts) nothing is.
    Each epoch still delivers every record once and intact."""
    p, name, data = tiered
    p.migrate("d", "nvme")
    ds = CXLDataset(p, "d")
    per = ds.shards()["per_shard"]
    batch, ahead = 64, 4

    def sampler() -> RandomCXLSampler:
        return RandomCXLSampler(ds, seed=5, window="auto", memory_budget=2 << 20)

    def first_shards(epoch: int) -> set[int]:
        s = sampler()
        s.set_epoch(epoch)
        it = iter(s)
        return {next(it) // per for _ in range(batch * ahead)}

    def await_in_dram(shards: set[int]) -> None:
        # the stagers copy on their own threads: a minute bounds a stage
        # that never comes (it takes milliseconds), it measures nothing
        for _ in range(6000):
            if all(0 in ds.shard_tiers(k) for k in shards):
                return
            time.sleep(0.01)
        missing = sorted(k for k in shards if 0 not in ds.shard_tiers(k))
        raise AssertionError(f"shards {missing} of the next pass were not staged")

    assert not any(0 in ds.shard_tiers(k) for k in range(ds.shards()["n_shards"]))
    loader = CXLDataLoader(ds, batch_size=batch, sampler=sampler(), memory_policy="lookahead",
                           memory_budget=2 << 20, lookahead=ahead)
    await_in_dram(first_shards(0))            # at construction
    assert epoch(loader, data) == ROWS
    await_in_dram(first_shards(1))            # as epoch 0 ended
    st = loader.stats()
    assert st["records"] == ROWS and st["hits"] + st["misses"] == ROWS
    # what epoch 0 staged for epoch 1 alone is counted apart; no copy
    # found a full memory tier
    assert 0 < st["next_pass_bytes"] < st["bytes_staged"] and st["no_room"] == 0
    # the sparse rule is for the hosts order (docs/tiers.md, "Sparse
    # items"): off here, none read in part for sparseness
    assert st["sparse_reads"] == 0 and not st["sparse"]
    p.migrate("d", "nvme")
    loader.set_epoch(6)                       # another epoch than the one staged for
    await_in_dram(first_shards(6))
    assert epoch(loader, data) == ROWS and loader.epoch == 6
    state = loader.state_dict()               # the start of epoch 7
    loader.close()                            # stops staging for epoch 7
    assert loader._ahead is None and loader._last_engine is None
    p.migrate("d", "nvme")
    again = CXLDataLoader(ds, batch_size=batch, sampler=sampler(), memory_policy="lookahead",
                          memory_budget=2 << 20, lookahead=ahead)
    again.load_state_dict(state)              # a restored pass
    await_in_dram(first_shards(7))
    assert epoch(again, data) == ROWS and again.epoch == 7
    again.close()
    with pytest.raises(IndexError, match="shard 999"):
        ds.shard_tiers(999)
    # a seed drawn from torch's generator when the pass starts: its order is
    # not known before, so nothing is staged for it
    unknown = CXLDataLoader(ds, batch_size=batch, sampler=RandomCXLSampler(
        ds, seed=None, window="auto", memory_budget=2 << 20), memory_policy="lookahead")
    assert unknown._ahead is None
    assert p.verify()


def staged_per_record(loader: CXLDataLoader, batches: int) -> float:
    """Bytes read from the home tier (whole shards and parts) per record
    delivered, over the first batches of a pass."""
    n = 0
    for i, b in enumerate(loader):
        n += len(b)
        if i + 1 == batches:
            break
    st = loader.stats()
    return (st["bytes_staged"] + st["partial_bytes"]) / n


def test_shard_format_and_the_warning_for_an_earlier_one(tiered) -> None:
    """ds.shard_format(): format 4 with 4 KiB blocks, the sums in the header
    page for these 64 KiB shards. The full shuffle's warning adds nothing for
    it; for a dataset of an earlier format (shard_format() as such a dataset
    answers: format 3's 64 KiB blocks, format 2 without block sums) it names
    what a record read in part costs and the fix."""
    p, name, data = tiered
    p.migrate("d", "nvme")
    ds = CXLDataset(p, "d")
    assert ds.shard_format() == {"version": 4, "block_bytes": 4096, "sums_area": False}
    with pytest.warns(UserWarning, match="full shuffle") as rec:
        CXLDataLoader(ds, batch_size=64, shuffle=True, seed=1)
    assert not any("rewrite it" in str(w.message) for w in rec)
    for fmt, cost in (({"version": 3, "block_bytes": 65536, "sums_area": False},
                       "shard format 3, .* costs whole blocks of 65536 bytes"),
                      ({"version": 2, "block_bytes": 0, "sums_area": False},
                       r"shard format 2, .* costs whole shards \(no block sums\)")):
        ds.shard_format = lambda fmt=fmt: fmt  # type: ignore[method-assign]
        with pytest.warns(UserWarning, match=f"full shuffle .*{cost}; rewrite it for 4 KiB "
                                             r"blocks: pool.rewrite\('d'\) or cxlpool rewrite "
                                             r"POOL d\)"):
            CXLDataLoader(ds, batch_size=64, shuffle=True, seed=1)
        # read_in_part=False stages: nothing is read in part, no advice
        with pytest.warns(UserWarning, match="full shuffle") as rec:
            CXLDataLoader(ds, batch_size=64, shuffle=True, seed=1, read_in_part=False)
        assert not any("rewrite it" in str(w.message) for w in rec)


def test_an_order_that_cannot_be_staged_is_warned_of(tiered) -> None:
    """A dataset larger than the staging budget read in a full shuffle
    (shuffle=True, RandomCXLSampler's random order, torch's RandomSampler,
    a distributed random order), or in a block order whose window is more
    than the budget, warns with the fix; window="auto" and a sequential
    order do not. What the warning says, measured: the full shuffle reads
    more from the home tier per record than window="auto" (read in part, a
    4 KiB block for each 512-byte record not in memory: 1.9x to 8x here)."""
    p, name, data = tiered
    p.migrate("d", "nvme")
    ds = CXLDataset(p, "d")
    full = [dict(shuffle=True, seed=1), dict(sampler=RandomCXLSampler(ds, seed=1)),
            dict(sampler=torch.utils.data.RandomSampler(ds)),
            dict(sampler=DistributedCXLSampler(ds, num_replicas=2, rank=0))]
    for kw in full:
        with pytest.warns(UserWarning, match=r"full shuffle of dataset 'd' .*staging budget "
                                             r".*window=\"auto\""):
            CXLDataLoader(ds, batch_size=64, **kw)
    wide = RandomCXLSampler(ds, seed=1, shard_size=SHARD // 512, window=150)
    with pytest.warns(UserWarning, match=r"window of 150 blocks of 128 records .* more than the staging budget"):
        CXLDataLoader(ds, batch_size=64, sampler=wide)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = CXLDataLoader(ds, batch_size=64,
                             sampler=RandomCXLSampler(ds, seed=1, window="auto"))
        CXLDataLoader(ds, batch_size=64)
    with pytest.warns(UserWarning, match="full shuffle"):
        shuffled = CXLDataLoader(ds, batch_size=64, shuffle=True, seed=1)
    per_full = staged_per_record(shuffled, 30)
    p.migrate("d", "nvme")
    per_auto = staged_per_record(auto, 30)
    assert per_full > 1.5 * per_auto, (per_full, per_auto)


def test_stagers_argument_sets_the_count_and_bad_values_are_refused(tiered) -> None:
    """stagers= (docs/python.md): the threads copying shards ahead, 1..8,
    reported by stats(); the default follows the shard size (4 for 64 KiB
    shards); 0, 9 and a pool of one tier are refused or warned by name."""
    p, name, data = tiered
    p.migrate("d", "nvme")
    ds = CXLDataset(p, "d")
    for n in (1, 3):
        loader = CXLDataLoader(ds, batch_size=64,
                               sampler=RandomCXLSampler(ds, seed=2, window="auto"), stagers=n)
        assert epoch(loader, data) == ROWS
        assert loader.stats()["stagers"] == n
        loader.close()
    for bad in (0, 9, -1):
        with pytest.raises(ValueError, match=f"stagers={bad}: threads copying shards ahead, 1..8"):
            CXLDataLoader(ds, batch_size=64, stagers=bad)


def test_a_full_shuffle_larger_than_the_budget_reads_in_part(tiered) -> None:
    """read_in_part (docs/python.md): by default a full shuffle of a dataset
    larger than the staging budget copies shards only into the budget's
    room and evicts none; each batch reads the blocks of its other records
    from the home tier, verified. The batches are the sampler's order,
    every record once and intact. read_in_part=False stages as before (and
    the warning says what that costs); read_in_part=True reads a block
    order in part too; a bad value is refused."""
    p, name, data = tiered
    p.migrate("d", "nvme")
    ds = CXLDataset(p, "d")
    budget = 2 << 20

    def order(sampler: RandomCXLSampler) -> np.ndarray:
        return np.fromiter(iter(sampler), dtype=np.int64)

    def batches_in_order(loader: CXLDataLoader, ids: np.ndarray) -> None:
        at = 0
        for b in loader:
            assert torch.equal(b, torch.from_numpy(data[ids[at:at + len(b)]]))
            at += len(b)
        assert at == len(data)

    s = RandomCXLSampler(ds, seed=3)
    with pytest.warns(UserWarning, match="each batch reads the blocks of its other records"):
        loader = CXLDataLoader(ds, batch_size=64, sampler=s, memory_budget=budget)
    batches_in_order(loader, order(RandomCXLSampler(ds, seed=3)))
    st = loader.stats()
    assert st["read_in_part"] and st["bytes_staged"] <= budget and st["evictions"] == 0
    assert st["fetched"] == 0 and st["hits"] + st["misses"] == ROWS and st["misses"] > ROWS // 2
    assert st["partial_reads"] >= len(loader) and st["private_reads"] == 0
    assert st["sparse_reads"] == 0 and not st["sparse"]  # reading in part anyway
    loader.close()

    p.migrate("d", "nvme")
    with pytest.warns(UserWarning, match="read from the home tier many times per epoch"):
        staged = CXLDataLoader(ds, batch_size=64, shuffle=True, seed=3, read_in_part=False,
                               memory_budget=budget)
    staged_per_record(staged, 10)
    st = staged.stats()
    assert not st["read_in_part"] and st["bytes_staged"] > 0
    staged.close()

    p.migrate("d", "nvme")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        block = CXLDataLoader(ds, batch_size=64, read_in_part=True, memory_budget=budget,
                              sampler=RandomCXLSampler(ds, seed=4, window="auto",
                                                       memory_budget=budget))
    batches_in_order(block, order(RandomCXLSampler(ds, seed=4, window="auto",
                                                   memory_budget=budget)))
    st = block.stats()
    assert st["read_in_part"] and st["evictions"] == 0 and st["partial_reads"] > 0
    block.close()
    with pytest.raises(ValueError, match="read_in_part='yes': True, False or None"):
        CXLDataLoader(ds, batch_size=64, read_in_part="yes")  # type: ignore[arg-type]
    assert p.verify()


@pytest.mark.parametrize("policy", ["lookahead", "lru"])
def test_with_no_room_for_a_copy_batches_read_in_part(tmp_path: Path, policy: str) -> None:
    """Shards of 2 MiB (513 blocks of 4 KiB, their sums in a sums area) and
    a dram tier full of kept copies of another dataset: no miss can make a
    copy, not even of a staging unit, so where a batch read a private copy
    of a whole shard it reads in part the blocks of its 8 records from the
    nvme home (docs/tiers.md, "Partial reads"), verified, and the epoch
    delivers every record once and intact."""
    name = f"pyt-tierpr-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tier_file = f"/var/tmp/cxlp-{name}.tier"
    p = CXLMemoryPool(name, create=True, meta_bytes=4 << 20,
                      tiers=[f"dram=shm:{name}.d:4M", f"nvme=file:{tier_file}:32M"])
    try:
        rows = 8192
        data = np.arange(rows * COLS, dtype=np.int64).reshape(rows, COLS)
        np.save(tmp_path / "d.npy", data)
        p._pool.import_("d", str(tmp_path / "d.npy"), format="npy", shard_bytes=2 << 20)
        # the filler in small shards: its kept copies fill the dram tier
        p._pool.import_("fill", str(tmp_path / "d.npy"), format="npy", shard_bytes=128 << 10)
        with pytest.raises(CXLError, match="no free extent"):
            p.migrate("fill", "dram")
        ds = CXLDataset(p, "d")
        assert ds.shards()["n_shards"] == 2
        assert ds.shard_format() == {"version": 4, "block_bytes": 4096, "sums_area": True}
        in_dram = p.tiers()[0]["copies"]
        # ds[i] too: no room for a copy, so from the home copy's blocks
        for i in (0, 4095, 4096, rows - 1):
            assert torch.equal(ds[i], torch.from_numpy(data[i]))
        assert p.tiers()[0]["copies"] == in_dram  # nothing placed: read from home
        assert ds.units()["copies"][0] == 0 and ds.shard_tiers(0) == [1]
        sampler = RandomCXLSampler(ds, seed=3, window="auto", memory_budget=256 << 10, runs=0)
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a window of one unit: in the budget
            loader = CXLDataLoader(ds, batch_size=8, sampler=sampler, memory_policy=policy,
                                   memory_budget=256 << 10, lookahead=4)
        assert epoch(loader, data) == rows
        st = loader.stats()
        assert st["records"] == rows and st["hits"] + st["misses"] == rows
        assert st["fetched"] == 0 and st["private_reads"] == 0
        # at least one partial read per batch; each reads the blocks of the
        # batch's records (at most 8 of 513, 4 KiB each), the pages of sums
        # they need (at most 2), and the header page the first time
        assert st["partial_reads"] >= st["batches"] == rows // 8
        assert 4 << 10 <= st["partial_bytes"] / st["partial_reads"] <= 11 * (4 << 10)
        assert p.verify()
        del loader, ds
    finally:
        p.close()
        CXLMemoryPool.destroy(name)


def test_a_dataset_default_policy_and_distributed_ranks_share_copies(tiered) -> None:
    p, name, data = tiered
    ds = CXLDataset(p, "d", tier_policy="lru")
    s0 = DistributedCXLSampler(ds, num_replicas=2, rank=0, seed=1, window="auto")
    s1 = DistributedCXLSampler(ds, num_replicas=2, rank=1, seed=1, window="auto")
    l0 = CXLDataLoader(ds, batch_size=32, sampler=s0)
    l1 = CXLDataLoader(ds, batch_size=32, sampler=s1)
    got = []
    for a, b in zip(l0, l1):
        got.append(a[:, 0] // COLS)
        got.append(b[:, 0] // COLS)
    ids = torch.cat(got).numpy()
    assert len(ids) == ROWS and len(set(ids.tolist())) == ROWS
    assert l0.stats()["policy"] == "lru" and l1.stats()["policy"] == "lru"
    with pytest.raises(ValueError, match="tier_policy"):
        CXLDataset(p, "d", tier_policy="fifo")


def test_bad_tier_specs_are_refused_and_leave_nothing(tmp_path: Path) -> None:
    name = f"pyt-badtier-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    cases = [
        (["nvme=file:%s/x.tier:64M" % tmp_path, "dram=shm:8M"], "fastest first"),
        (["dram=shm:8M", "nvme=file:%s/x.tier:100P" % tmp_path], "free on its filesystem"),
        (["cxl=numa:999:8M"], "999"),
        (["cxl=devdax:/dev/dax97.0"], "dax97.0"),
        (["dram=shm:1M"], "smaller than a tier"),
        (["dram=shm:a.b:8M", "cxl=shm:a.b:8M"], "same object"),
        # the wheel has no UCX: refused as such; a build with it refuses the url
        (["dram=shm:8M", "remote=shm:8M"], "no UCX|ucx://HOST:PORT/POOL"),
    ]
    for tiers, msg in cases:
        with pytest.raises(CXLError, match=msg):
            CXLMemoryPool(name, create=True, tiers=tiers, meta_bytes=4 << 20)
        assert not os.path.exists(f"/dev/shm/cxlp.{name}")
        assert not (tmp_path / "x.tier").exists()
    with pytest.raises(ValueError, match="create=True"):
        CXLMemoryPool(name, tiers=["dram=shm:8M"])


def test_a_rewrite_under_a_running_loader(tiered) -> None:
    """pool.rewrite on a pool of tiers while a loader reads the dataset in
    a shuffle: that loader's epoch goes on, every record once (no copy can
    be placed for the old dataset any more, so what is not in memory comes
    from its home copies); the dataset opened before still reads by index;
    one opened after is of shard format 4 with the same records."""
    p, name, data = tiered
    ds = CXLDataset(p, "d")
    with pytest.warns(UserWarning, match="full shuffle"):  # larger than the budget: in part
        it = iter(CXLDataLoader(ds, batch_size=64, shuffle=True, seed=4))
    first = [next(it) for _ in range(3)]
    p.rewrite("d", progress=False)
    got = torch.cat(first + list(it))
    assert sorted((got[:, 0] // COLS).tolist()) == list(range(ROWS))
    assert all(torch.equal(ds[i], torch.from_numpy(data[i])) for i in range(0, ROWS, 37))
    new = CXLDataset(p, "d")
    assert new.shard_format()["version"] == 4
    assert torch.equal(torch.cat(list(CXLDataLoader(new, batch_size=256))), torch.from_numpy(data))


def test_locate_says_where_a_record_is_and_counts_its_shard_s_heat(tiered) -> None:
    """The design's locate(i): shard and place in it, the tiers holding it
    now (home only, then the dram copy a read made), the publishing
    generation, the host, and the heat loaders' batches add in the pool."""
    p, name, data = tiered
    ds = CXLDataset(p, "d")
    per = ds.shards()["per_shard"]
    i = ROWS - 1
    loc = ds.locate(i)
    assert (loc["shard"], loc["index"], loc["shard_records"]) == (i // per, i % per, per)
    assert loc["tiers"] == ["nvme"] and loc["tier"] == "nvme" and loc["heat"] == 0
    assert loc["version"] == ds.info()["version"]
    assert ds.locate(-1) == loc and ds.locate(i - per)["shard"] == loc["shard"] - 1
    assert int(loc["host"], 16) != 0 and len(loc["host"]) == 16
    assert torch.equal(ds[i], torch.from_numpy(data[i]))
    after = ds.locate(i)
    assert after["tiers"] == ["dram", "nvme"] and after["tier"] == "dram" and after["heat"] == 0
    for _ in range(2):  # two epochs: every record of every shard taken twice
        for _ in CXLDataLoader(ds, batch_size=64, sampler=RandomCXLSampler(ds, window="auto"),
                               memory_policy="lookahead"):
            pass
    assert [ds.locate(k * per)["heat"] for k in range(ds.shards()["n_shards"])] == \
        [2 * ds.locate(k * per)["shard_records"] for k in range(ds.shards()["n_shards"])]
    for bad in (ROWS, -ROWS - 1):
        with pytest.raises(IndexError, match="record"):
            ds.locate(bad)


def test_locate_on_a_pool_of_one_tier(pool) -> None:
    """One tier: every shard in it, no heat counted."""
    pool.ingest("pts", pa.table({"x": np.arange(5000, dtype=np.float32)}))
    ds = CXLDataset(pool, "pts")
    loc = ds.locate(4999)
    assert loc["tiers"] == [pool.tiers()[0]["kind"]] and loc["heat"] == 0
    assert loc["shard"] == ds.shards()["n_shards"] - 1
    assert loc["index"] == loc["shard_records"] - 1
