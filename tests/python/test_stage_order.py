"""The block order window="auto" takes (docs/tiers.md, "Sequential runs"
and "Start-up"): the probe of the home recorded once in the pool, runs of
staging units, the ramp of epoch 0, and one choice for every rank."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from cxl_dataloader import (CXLDataLoader, CXLDataset, CXLMemoryPool, DistributedCXLSampler,
                            RandomCXLSampler)
from cxl_dataloader.samplers import staging_budget

ROWS, COLS = 24576, 64          # int64 records of 512 bytes: 12 MiB
SHARD = 64 * 1024               # 128 records


@pytest.fixture
def tiered(tmp_path: Path) -> Iterator[tuple[CXLMemoryPool, str]]:
    """A dram tier of 6 MiB before a home file on disk (O_DIRECT reads)."""
    name = f"pyt-order-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tier_file = f"/var/tmp/cxlp-{name}.tier"
    p = CXLMemoryPool(name, create=True, meta_bytes=4 << 20,
                      tiers=[f"dram=shm:{name}.d:6M", f"nvme=file:{tier_file}:32M"])
    src = tmp_path / "d.npy"
    np.save(src, np.arange(ROWS * COLS, dtype=np.int64).reshape(ROWS, COLS))
    p._pool.import_("d", str(src), format="npy", shard_bytes=SHARD)
    try:
        yield p, name
    finally:
        p.close()
        CXLMemoryPool.destroy(name)


def cli_order(name: str, *args: str) -> dict:
    out = subprocess.run(["cxlpool", "order", "--auto", name, "d", "--json", "--first", "1",
                          *args], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def test_the_probe_runs_once_per_pool_and_every_process_reads_its_verdict(tiered) -> None:
    p, name = tiered
    ds = CXLDataset(p, "d")
    first = ds.stage_order()
    assert first["probe"] == "measured" and first["seq_bps"] > 0 and first["random_bps"] > 0
    # recorded in thousandths, at most 1.023
    assert first["random_ratio"] == pytest.approx(
        min(first["random_bps"] / first["seq_bps"], 1.023), abs=1e-3)
    again = ds.stage_order()
    assert again["probe"] == "recorded" and again["seq_bps"] == 0
    assert again["random_ratio"] == first["random_ratio"]
    assert {k: again[k] for k in ("block_records", "window", "run_units")} == \
        {k: first[k] for k in ("block_records", "window", "run_units")}
    # another process: the pool's record, the same blocks and window
    other = cli_order(name)
    assert other["staging"]["probe"] == "recorded"
    assert other["staging"]["random_ratio"] == pytest.approx(first["random_ratio"], abs=1e-6)
    assert (other["shard_size"], other["window"]) == (first["block_records"], first["window"])
    assert other["staging"]["ramp"] is True
    assert cli_order(name, "--no-ramp")["staging"]["ramp"] is False


def test_runs_join_adjacent_units_into_the_order_s_blocks(tiered) -> None:
    p, _ = tiered
    ds = CXLDataset(p, "d")
    none = ds.stage_order(runs=0)
    # 64 KiB shards are under 1/16 of the 4.5 MiB budget: staged whole
    assert none["unit_records"] == 128 and none["run_units"] == 1
    assert none["block_records"] == 128
    W = none["window"]
    budget = p.tiers()[0]["capacity"] // 4 * 3
    assert W == budget // 2 // none["unit_bytes"] > 8  # half the budget in units
    two = ds.stage_order(runs=2)
    assert (two["run_units"], two["block_records"], two["window"]) == (2, 256, W // 2)
    on = ds.stage_order(runs=True)  # runs of 64 MiB, at most a quarter of the window
    assert on["run_units"] == W // 4 and on["window"] == W // on["run_units"]
    with pytest.raises(ValueError, match="runs"):
        ds.stage_order(runs=-7)


def test_a_sampler_with_runs_cuts_their_blocks_and_ramps_epoch_0(tiered) -> None:
    p, _ = tiered
    ds = CXLDataset(p, "d")
    s = RandomCXLSampler(ds, seed=3, window="auto", runs=2)
    assert s.shard_size == 256 and s.ramp and s.order == "block"
    e0 = list(s)
    assert sorted(e0) == list(range(ROWS))
    # the ramp: epoch 0's first window is one block
    assert len({i // 256 for i in e0[:256]}) == 1
    s.set_epoch(1)
    e1 = list(s)
    assert sorted(e1) == list(range(ROWS)) and len({i // 256 for i in e1[:256]}) > 1
    flat = RandomCXLSampler(ds, seed=3, window="auto", runs=2, ramp=False)
    f0 = list(flat)
    assert len({i // 256 for i in f0[:256]}) > 1
    assert flat.fingerprint != s.fingerprint
    # window="auto" with runs=False: blocks of one unit
    assert RandomCXLSampler(ds, seed=3, window="auto", runs=False).shard_size == 128


def test_a_ramped_epoch_resumes_exactly(tiered) -> None:
    p, _ = tiered
    ds = CXLDataset(p, "d")
    s = RandomCXLSampler(ds, seed=11, window="auto", runs=0)
    full = list(s)
    s.set_epoch(0)  # a second pass is epoch 1 otherwise
    it = iter(s)
    head = [next(it) for _ in range(1000)]
    state = s.state_dict()
    again = RandomCXLSampler(ds, seed=11, window="auto", runs=0)
    again.load_state_dict(state)
    assert head + list(again) == full


def test_bad_runs_and_ramp_arguments_are_refused(tiered) -> None:
    p, _ = tiered
    ds = CXLDataset(p, "d")
    with pytest.raises(ValueError, match="runs="):
        RandomCXLSampler(ds, window="auto", runs="sometimes")
    with pytest.raises(ValueError, match='runs are chosen with window="auto"'):
        RandomCXLSampler(ds, shard_size=128, window=4, runs=3)
    with pytest.raises(ValueError, match="ramp=True is for the block order"):
        RandomCXLSampler(ds, ramp=True)


DDP_RANK = r"""
import json, sys
import torch.distributed as dist
from cxl_dataloader import CXLDataset, CXLMemoryPool, DistributedCXLSampler
name, init, rank, budget, out = (sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]),
                                 sys.argv[5])
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=2)
pool = CXLMemoryPool(name)
ds = CXLDataset(pool, "d")
s = DistributedCXLSampler(ds, seed=5, window="auto", memory_budget=budget)
with open(out, "w") as f:
    json.dump({"block": s.base.shard_size, "window": s.base.window, "ids": list(s)}, f)
dist.destroy_process_group()
"""


def test_distributed_ranks_with_other_budgets_take_rank_0_s_blocks(tiered, tmp_path) -> None:
    """Ranks that would choose different blocks (here: different budgets, as
    hosts of different pools would) all cut rank 0's, and read disjoint
    halves of one order."""
    p, name = tiered
    ds = CXLDataset(p, "d")
    own = [RandomCXLSampler(ds, window="auto", memory_budget=b, runs=0)
           for b in (4 << 20, 1 << 20)]
    assert own[0].window != own[1].window
    init = f"file://{tmp_path}/pg"
    # each rank writes its answer to a file: printed to a pipe that the
    # parent drained one rank after the other, the second rank's 80 KB line
    # came back cut at 64 KiB (the pipe's size) with exit status 0, in about
    # half the runs (cause not found; a file avoids the pipe)
    files = [tmp_path / f"rank{r}.json" for r in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", DDP_RANK, name, init, str(r), str(b),
                               str(files[r])])
             for r, b in enumerate((4 << 20, 1 << 20))]
    assert [pr.wait(timeout=120) for pr in procs] == [0, 0]
    outs = [json.loads(f.read_text()) for f in files]
    assert outs[0]["block"] == outs[1]["block"] and outs[0]["window"] == outs[1]["window"]
    assert sorted(outs[0]["ids"] + outs[1]["ids"]) == list(range(ROWS))


def top_once(name: str) -> str:
    return subprocess.run(["cxlpool", "top", name, "--count", "1", "--interval", "0.05"],
                          check=True, capture_output=True, text=True).stdout


@pytest.mark.parametrize("policy,why", [
    ("lru", "lru stages only on a miss"),
    ("lookahead", None),
])
def test_top_shows_each_loader_and_why_it_misses(tiered, policy: str, why) -> None:
    """cxlpool top, from another process, lists a running loader with its
    budget, unit and kept copies, and names the cause of its misses."""
    from cxl_dataloader import CXLDataLoader
    p, name = tiered
    ds = CXLDataset(p, "d")
    loader = CXLDataLoader(ds, batch_size=256, sampler=RandomCXLSampler(ds, seed=1),
                           memory_policy=policy)
    it = iter(loader)
    for _ in range(40):
        next(it)
    out = top_once(name)
    line = [ln for ln in out.splitlines() if ln.startswith(f"{os.getpid()} ")]
    assert len(line) == 1 and f" d " in line[0] and policy in line[0], out
    reasons = ["lru stages only on a miss", "the home is behind", "kept copies",
               "the memory tier is full", "larger than its budget"]
    said = [ln for ln in out.splitlines() if ln.strip().startswith("misses:")]
    if why:
        assert len(said) == 1 and why in said[0], out
    else:
        assert all(any(r in s for r in reasons) for s in said), out
    del it
    loader.close()


def test_topology_on_a_pool_of_tiers_takes_the_auto_window(tiered, tmp_path: Path) -> None:
    """DistributedCXLSampler(topology=...) over a dataset on a pool of
    tiers windows each host's share as window="auto" does (a share read in
    one window outgrows a loader's budget); an explicit window, or a pool
    of one tier, keeps its own (every block of a host's share)."""
    p, name = tiered
    ds = CXLDataset(p, "d")
    # the hosts order's loaders take the whole memory tier as budget, and
    # its "auto" window is sized by that
    whole = staging_budget(ds, None, whole=True)
    auto = RandomCXLSampler(ds, seed=1, window="auto", memory_budget=whole)
    s = DistributedCXLSampler(ds, num_replicas=2, rank=0, seed=1, topology=[0, 1])
    assert (s.base.shard_size, s.base.window) == (auto.shard_size, auto.window)
    assert s.base.keep_blocks  # topology='s default: one deal for every epoch
    blocks = -(-len(ds) // auto.shard_size)
    assert auto.window < blocks  # a window, not every block
    wide = DistributedCXLSampler(ds, num_replicas=2, rank=0, seed=1, topology=[0, 1],
                                 shard_size=auto.shard_size, window=2)
    assert wide.base.window == 2
    # its loader reads scattered records of the other host's blocks in
    # part (docs/tiers.md, "Sparse items"); a block order's does not
    n_shards = ds.shards()["n_shards"]
    # rank 0 of hosts [0, 0, 1]: host 0's two ranks read 2/3 of the samples
    # and hold 1/2, so they read some of host 1's blocks too
    s = DistributedCXLSampler(ds, num_replicas=3, rank=0, seed=1, topology=[0, 0, 1])
    for sampler, sparse in ((s, True), (auto, False)):
        held = {k for k in range(n_shards) if ds.store.shard_tiers(k) & 1}  # in dram now
        loader = CXLDataLoader(ds, batch_size=16, sampler=sampler)
        assert sum(1 for _ in loader) == len(loader)
        st = loader.stats()
        assert st["sparse"] is sparse
        assert (st["budget"] == whole) is sparse  # the hosts order: the whole tier
        assert st["peer_reads"] == st["peer_records"] == 0  # no remote tier
        if sparse:
            # the shards of no block of host 0's share: never staged here
            # (tier_away), read in part; the others staged
            away = np.unpackbits(np.frombuffer(loader._away(), np.uint8), bitorder="little")
            mine = {ds.store.locate(i)["shard"] for i in range(len(ds))
                    if s.host_of(i)[0] == 0}
            assert [k for k in range(n_shards) if not away[k]] == sorted(mine)
            assert 0 < len(mine) < n_shards and not away[n_shards:].any()
            new = {k for k in range(n_shards) if ds.store.shard_tiers(k) & 1} - held
            assert new and new <= mine, new - mine
            assert st["sparse_reads"] > 0  # host 1's records: read in part
        loader.close()
    src = tmp_path / "d.npy"
    np.save(src, np.arange(ROWS * COLS, dtype=np.int64).reshape(ROWS, COLS))
    one = CXLMemoryPool(f"{name}-one", create=True, size=64 << 20)
    try:
        one._pool.import_("d", str(src), format="npy", shard_bytes=SHARD)
        flat = CXLDataset(one, "d")
        f = DistributedCXLSampler(flat, num_replicas=2, rank=0, seed=1, topology=[0, 1])
        assert f.base.window == -(-len(flat) // f.base.shard_size)
        del flat
    finally:
        one.close()
        CXLMemoryPool.destroy(f"{name}-one")
