"""The hosts order (docs/sampling.md, "Hosts"): DistributedCXLSampler(
topology="auto") over real processes of a gloo group whose pools report
different host ids, resume mid-epoch from state_dict (same world and
another), BalancedCXLSampler, and `cxlpool order --stats` against a
simulated run of the sampler."""
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

from cxl_dataloader import (BalancedCXLSampler, CXLDataset, CXLMemoryPool,
                            DistributedCXLSampler, HostsCXLSampler)
from cxl_dataloader import _core

ROWS = 6000
PER_SHARD = 100            # int64 records of 64 bytes, 100 a shard: 60 shards


@pytest.fixture
def shared(tmp_path: Path) -> Iterator[tuple[CXLMemoryPool, str]]:
    name = f"pyt-hosts-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    p = CXLMemoryPool(name, create=True, size=64 << 20)
    src = tmp_path / "d.npy"
    np.save(src, np.arange(ROWS * 8, dtype=np.int64).reshape(ROWS, 8))
    p._pool.import_("d", str(src), format="npy", shard_bytes=PER_SHARD * 64)
    try:
        yield p, name
    finally:
        p.close()
        CXLMemoryPool.destroy(name)


RANK = r"""
import json, sys
import torch.distributed as dist
from cxl_dataloader import CXLDataset, CXLMemoryPool, DistributedCXLSampler
name, init, rank, world, out, resume = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                        int(sys.argv[4]), sys.argv[5], sys.argv[6])
dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
ds = CXLDataset(CXLMemoryPool(name), "d")
def make():
    return DistributedCXLSampler(ds, seed=7, topology="auto", window=3, keep_blocks=False)
s = make()
res = {"rank_hosts": s.base.rank_hosts, "weights": s.base.weights,
       "host_id": CXLMemoryPool(name).stat()["host_id"]}
if resume == "-":
    res["epochs"] = []
    for e in range(2):
        s.set_epoch(e)
        ids = list(s)
        res["epochs"].append({"ids": ids, "hosts": [s.host_of(i)[0] for i in ids]})
    # stop in the middle of epoch 1, save, and resume in a fresh sampler
    cut = 516
    s.set_epoch(1)
    it = iter(s)
    head = [next(it) for _ in range(cut)]
    state = s.state_dict(samples_seen=cut)
    again = make()
    again.load_state_dict(state)
    again.set_epoch(1)
    res.update(head=head, state=state, rest=list(again))
else:
    s.load_state_dict(json.loads(resume))
    s.set_epoch(1)
    res["rest"] = list(s)
with open(out, "w") as f:
    json.dump(res, f)
dist.destroy_process_group()
"""


def run_group(tmp_path: Path, name: str, host_ids: list[str], tag: str,
              resume: str = "-") -> list[dict]:
    """One process per rank, CXLP_HOST_ID making each rank's pool report
    the host id given; each writes its answer to a file."""
    init = f"file://{tmp_path}/pg-{tag}"
    world = len(host_ids)
    files = [tmp_path / f"{tag}-{r}.json" for r in range(world)]
    procs = [subprocess.Popen([sys.executable, "-c", RANK, name, init, str(r), str(world),
                               str(files[r]), resume],
                              env={**os.environ, "CXLP_HOST_ID": host_ids[r]})
             for r in range(world)]
    assert [p.wait(timeout=180) for p in procs] == [0] * world
    return [json.loads(f.read_text()) for f in files]


def test_topology_auto_over_processes_of_three_hosts(shared, tmp_path) -> None:
    p, name = shared
    outs = run_group(tmp_path, name, ["a1", "a1", "b2", "c3"], "four")
    # hosts from the pools' host ids, in the order they first appear
    assert [o["host_id"] for o in outs] == [0xa1, 0xa1, 0xb2, 0xc3]
    assert all(o["rank_hosts"] == [0, 0, 1, 2] for o in outs)
    # one pool: the same capability, equal weights, on every rank
    assert all(o["weights"] == outs[0]["weights"] for o in outs)
    assert len(set(outs[0]["weights"])) == 1
    layout = [0, 0, 1, 2]
    for e in range(2):
        per = [o["epochs"][e]["ids"] for o in outs]
        assert [len(x) for x in per] == [ROWS // 4] * 4          # equal shares
        assert sorted(sum(per, [])) == list(range(ROWS))          # each sample once
        # every rank agrees on where each id's block is
        where: dict[int, int] = {}
        for o in outs:
            for i, h in zip(o["epochs"][e]["ids"], o["epochs"][e]["hosts"]):
                assert where.setdefault(i, h) == h
        # blocks whole on one host, a third of them each
        for b in range(ROWS // PER_SHARD):
            assert len({where[i] for i in range(b * PER_SHARD, (b + 1) * PER_SHARD)}) == 1
        assert sorted(sum(1 for i in where if where[i] == h) for h in range(3)) == \
            [2000, 2000, 2000]
        # host 0 reads 1/2 of the samples and holds 1/3: its own third all
        # local; hosts 1 and 2 each read 1/4 < 1/3: all local
        local = [sum(where[i] == layout[r] for i in per[r]) for r in range(4)]
        assert local[2] == local[3] == ROWS // 4
        assert local[0] + local[1] == pytest.approx(2000, abs=40)
    # the epochs deal the blocks differently
    a = {i: h for o in outs for i, h in zip(o["epochs"][0]["ids"], o["epochs"][0]["hosts"])}
    b = {i: h for o in outs for i, h in zip(o["epochs"][1]["ids"], o["epochs"][1]["hosts"])}
    assert sum(a[i] != b[i] for i in range(ROWS)) > ROWS // 3
    # resume mid-epoch from state_dict: the same remaining order, every rank
    for o in outs:
        full = o["epochs"][1]["ids"]
        assert o["head"] == full[:516] and o["rest"] == full[516:]
        assert o["state"]["consumed"] == 516 * 4 and o["state"]["epoch"] == 1
    # elastic: three ranks, one per host, read the rest of epoch 1
    state = json.dumps(outs[0]["state"])
    three = run_group(tmp_path, name, ["a1", "b2", "c3"], "three", state)
    assert all(t["rank_hosts"] == [0, 1, 2] for t in three)
    done = set(x for o in outs for x in o["epochs"][1]["ids"][:516])
    rest = [x for t in three for x in t["rest"]]
    assert len(rest) == len(set(rest)) and not done & set(rest)
    assert len(done) + len(rest) == ROWS      # 6000 - 2064 = 3936 splits 3 ways exactly: no padding


def test_host_capability_is_memory_times_bandwidth(shared, tmp_path) -> None:
    from cxl_dataloader.samplers import host_capability
    p, _ = shared
    ds = CXLDataset(p, "d")
    (tier,) = p.tiers()
    bw = {n["id"]: n["read_bandwidth_mbs"] for n in _core.topo_nodes()}
    near = p.stat()["near_node"]
    assert host_capability(ds) == (tier["capacity"] >> 20) * (bw.get(near) or 1)
    big = CXLMemoryPool(p.spec.split(":")[-1] + "-big", create=True, size=256 << 20)
    try:
        (tmp_path / "r.raw").write_bytes(bytes(6400))
        big._pool.import_("d", str(tmp_path / "r.raw"), format="raw", record_size=64)
        assert host_capability(CXLDataset(big, "d")) > host_capability(ds)
    finally:
        big.close()
        CXLMemoryPool.destroy(big.spec.split(":")[-1])


def test_host_capability_counts_no_remote_tier() -> None:
    """A remote tier (a span of 1 PiB addresses, no memory) adds nothing
    to a host's weight: a pool of a dram tier and a remote tier weighs as
    one of the same dram tier and an nvme home (issue 33's 3-host run
    found hosts with a remote tier outweighing the home's host 2^30 to 1)."""
    from types import SimpleNamespace
    from cxl_dataloader.samplers import host_capability
    from cxl_dataloader import CXLError
    tag = f"pyt-cap-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    try:
        rem = CXLMemoryPool(tag + "-r", create=True, meta_bytes=4 << 20,
                            tiers=[f"dram=shm:{tag}-rd:32M", "remote=ucx://127.0.0.1:9/x"])
    except CXLError as e:
        if "no UCX" in str(e):
            pytest.skip("this build of the extension has no UCX")
        raise
    home = f"/dev/shm/{tag}-home.tier"
    try:
        loc = CXLMemoryPool(tag + "-h", create=True, meta_bytes=4 << 20,
                            tiers=[f"dram=shm:{tag}-hd:32M", f"nvme=file:{home}:64M"])
        try:
            kinds = [t["kind"] for t in rem.tiers()]
            assert kinds == ["dram", "remote"] and rem.tiers()[1]["capacity"] >= 1 << 50
            assert host_capability(SimpleNamespace(spec=rem.spec)) == \
                host_capability(SimpleNamespace(spec=loc.spec))
        finally:
            loc.close()
            CXLMemoryPool.destroy(tag + "-h")
    finally:
        rem.close()
        CXLMemoryPool.destroy(tag + "-r")
        if os.path.exists(home):
            os.unlink(home)


def test_hosts_sampler_in_process_matches_the_processes_and_refuses_other_weights() -> None:
    ss = [DistributedCXLSampler(ROWS, num_replicas=4, rank=r, seed=7, topology=[5, 5, 9, 1],
                                shard_size=PER_SHARD, window=3, keep_blocks=False)
          for r in range(4)]
    assert ss[0].base.rank_hosts == [0, 0, 1, 2] and ss[0].base.weights == [1, 1, 1]
    ids = [list(s) for s in ss]
    assert sorted(sum(ids, [])) == list(range(ROWS))
    # pickled (as DataLoader workers get it): the same order
    import pickle
    again = pickle.loads(pickle.dumps(ss[2]))
    again.set_epoch(0)
    assert list(again) == ids[2]
    st = ss[0].state_dict()
    other = DistributedCXLSampler(ROWS, num_replicas=4, rank=0, seed=7, topology=[5, 5, 9, 1],
                                  host_weights=[1, 1, 2], shard_size=PER_SHARD, window=3)
    with pytest.raises(ValueError, match="fingerprint"):
        other.load_state_dict(st)
    with pytest.raises(ValueError, match="host_weights: 2 weights for 3 hosts"):
        DistributedCXLSampler(ROWS, num_replicas=4, rank=0, topology=[5, 5, 9, 1],
                              host_weights=[1, 2], shard_size=PER_SHARD)
    with pytest.raises(ValueError, match="topology: 3 host labels for 4 ranks"):
        DistributedCXLSampler(ROWS, num_replicas=4, rank=0, topology=[5, 5, 9],
                              shard_size=PER_SHARD)
    with pytest.raises(ValueError, match="ranks_per_host"):
        DistributedCXLSampler(ROWS, num_replicas=4, rank=0, topology="auto", shard_size=10)
    # host_blocks: host 1's blocks in the order its stream reads them
    hb = ss[0].base.host_blocks(1)
    assert sorted(hb) == sorted({i // PER_SHARD for i in range(ROWS) if ss[0].host_of(i)[0] == 1})
    seen = [i // PER_SHARD for i in ids[2]]                   # rank 2 is host 1's only rank
    firsts = [b for k, b in enumerate(seen) if b not in seen[:k]]
    own = [b for b in firsts if b in hb]
    assert [hb.index(b) // 3 for b in own] == sorted(hb.index(b) // 3 for b in own)
    # keep_blocks (topology='s default): every block on the same host every
    # epoch, in a new order
    k = DistributedCXLSampler(ROWS, num_replicas=4, rank=0, seed=7, topology=[5, 5, 9, 1],
                              shard_size=PER_SHARD, window=3)
    assert k.base.keep_blocks and k.fingerprint != ss[0].fingerprint
    e0 = list(k)
    where0 = [k.host_of(i) for i in range(ROWS)]
    k.set_epoch(1)
    e1 = list(k)
    assert [k.host_of(i) for i in range(ROWS)] == where0 and e0 != e1
    with pytest.raises(ValueError, match="go with topology="):
        DistributedCXLSampler(ROWS, num_replicas=4, rank=0, keep_blocks=True)
    # host_reads: this rank's pass counted; one fraction per host
    reads = ss[1].host_reads([1, 1, 1])
    assert reads["home"] == 0 and reads["local"] + reads["peer"] == ROWS // 4
    with pytest.raises(ValueError, match="not one per host"):
        ss[1].host_reads([1, 1])
    with pytest.raises(ValueError, match="host_reads is for topology="):
        DistributedCXLSampler(ROWS, num_replicas=4, rank=0).host_reads([1])
    # LOCAL_WORLD_SIZE / ranks_per_host: host = rank // k
    s = DistributedCXLSampler(ROWS, num_replicas=4, rank=3, topology="auto", ranks_per_host=2,
                              shard_size=PER_SHARD)
    assert s.base.rank_hosts == [0, 0, 1, 1]


def test_balanced_sampler_deals_blocks_by_rate_and_resumes() -> None:
    layout = [0, 0, 1, 1]
    mk = lambda r: BalancedCXLSampler(ROWS, [1.0, 3.0], num_replicas=4, rank=r, seed=2,  # noqa: E731
                                      topology=layout, shard_size=PER_SHARD, window=2,
                                      drop_last=True)
    ss = [mk(r) for r in range(4)]
    assert [ss[0].base.host_share(h) for h in range(2)] == [(1500, 15), (4500, 45)]
    ids = [list(s) for s in ss]
    assert [len(x) for x in ids] == [1500] * 4 and sorted(sum(ids, [])) == list(range(ROWS))
    # host 0's ranks read half the samples, its memory serves a quarter
    local = sum(ss[0].host_of(i)[0] == layout[r] for r in range(4) for i in ids[r])
    assert local == 1500 + 3000
    # mid-epoch state, restored in another sampler: the same remaining ids
    for r in range(4):
        s = mk(r)
        s.set_epoch(3)
        it = iter(s)
        head = [next(it) for _ in range(200)]
        st = s.state_dict(samples_seen=200)
        again = mk(r)
        again.load_state_dict(st)
        again.set_epoch(3)
        full = mk(r)
        full.set_epoch(3)
        assert head + list(again) == list(full)
    with pytest.raises(ValueError, match="rates"):
        BalancedCXLSampler(ROWS, [1.0, -1.0], num_replicas=4, rank=0, topology=layout,
                           shard_size=PER_SHARD)
    with pytest.raises(ValueError, match="2 weights for 3 hosts"):
        BalancedCXLSampler(ROWS, [1, 2], num_replicas=3, rank=0, topology=[0, 1, 2],
                           shard_size=PER_SHARD)


def simulate(n: int, S: int, weights: list[int], ranks: list[int], memory: list[float],
             epoch: int, drop_last: bool, keep: bool) -> dict:
    """Every rank's reads of one epoch, counted by the assignment: local
    when the id's block is in the rank's host's share and within what its
    memory holds (floor(memory * M) blocks, the share's first), peer
    when held by another host, home when held by none."""
    layout = [h for h, k in enumerate(ranks) for _ in range(k)]
    cap = [min(M, int(m * M + 1e-9)) for m in memory for M in [-(-n // S)]]
    counts = {"local": 0, "peer": 0, "home": 0}
    for r in range(len(layout)):
        s = HostsCXLSampler(n, weights, layout, 11, shard_size=S, num_replicas=len(layout),
                            rank=r, drop_last=drop_last, keep_blocks=keep)
        s.set_epoch(epoch)
        core = s._core_sampler()
        ids = np.frombuffer(core.next(1 << 24), dtype=np.int64)
        mine = {"local": 0, "peer": 0, "home": 0}
        for i in ids.tolist():
            h, idx = core.host_of(i)
            if idx >= cap[h]:
                mine["home"] += 1
            elif h == layout[r]:
                mine["local"] += 1
            else:
                mine["peer"] += 1
        # the rank's own count, in C, is the same
        assert s.host_reads(memory) == mine
        for k in counts:
            counts[k] += mine[k]
    total = sum(counts.values())
    return {k: v / total for k, v in counts.items()}


@pytest.mark.parametrize("weights,ranks,memory,drop,keep", [
    ([1, 1, 1], [2, 1, 1], [0.4, 0.4, 0.4], False, False),     # the 3 hosts, 4 ranks
    ([1, 1, 1], [2, 1, 1], [0.4, 0.4, 0.4], False, True),
    ([2, 1, 1], [1, 2, 1], [0.3, 0.2, 0.1], True, False),      # memory short of the dataset
    ([5, 1], [3, 3], [0.5, 0.9], False, True),
    ([2, 1, 1], [2, 1, 1], [1.0, 1.0, 1.0], False, False),    # weights that match the ranks
])
def test_order_stats_predict_a_simulated_run(weights, ranks, memory, drop, keep) -> None:
    n, S = 30011, 97
    args = ["cxlpool", "order", "--n", str(n), "--stats", "--shard-size", str(S), "--seed", "11",
            "--weights", ",".join(map(str, weights)), "--ranks-per-host",
            ",".join(map(str, ranks)), "--memory", ",".join(map(str, memory)),
            "--epochs", "3", "--json"] + (["--drop-last"] if drop else []) + \
        (["--keep-blocks"] if keep else [])
    out = json.loads(subprocess.run(args, check=True, capture_output=True, text=True).stdout)
    st = out["stats"]
    assert st["world"] == sum(ranks) and st["keep_blocks"] is keep
    assert out["window"] == -(-n // S)     # every block of a host by default
    M = -(-n // S)
    assert [h["capacity_blocks"] for h in st["hosts"]] == [min(M, int(m * M + 1e-9))
                                                            for m in memory]
    assert out["quality"]["uniform"] in (True, False)
    for ep in st["epochs"]:
        sim = simulate(n, S, weights, ranks, memory, ep["epoch"], drop, keep)
        assert ep["fractions"] == "counted"     # few draws: every rank's walked
        for k in ("local", "peer", "home"):
            assert ep[k] == pytest.approx(sim[k], abs=1e-6), (ep, sim)
        if weights == ranks and min(memory) == 1:
            assert sim["local"] > 0.995 and ep["local"] > 0.995
        # staging, counted block by block from the two epochs' assignments
        cap = [min(M, int(m * M + 1e-9)) for m in memory]
        mk = lambda e: _core.Sampler.create_hosts(weights, [0], n=n, seed=11, epoch=e,  # noqa: E731
                                                  shard_size=S, window=1 << 40, keep=keep)
        now = mk(ep["epoch"])
        before = mk(ep["epoch"] - 1) if ep["epoch"] else None
        peer = home = 0
        for b in range(-(-n // S)):
            size = min(S, n - b * S)
            h, i = now.host_of(b * S)
            if i >= cap[h]:
                continue
            if before is None:
                home += size
                continue
            h2, i2 = before.host_of(b * S)
            if h2 == h and i2 < cap[h]:
                continue
            if i2 < cap[h2]:
                peer += size
            else:
                home += size
        assert ep["staged_peer"] == pytest.approx(peer / n, abs=1e-6)
        assert ep["staged_home"] == pytest.approx(home / n, abs=1e-6)
        if keep and ep["epoch"]:
            assert peer == home == 0   # the memories hold the same blocks every epoch


def test_order_stats_bad_arguments_name_the_option() -> None:
    def err(*a: str) -> str:
        r = subprocess.run(["cxlpool", "order", "--n", "1000", *a], capture_output=True,
                           text=True)
        assert r.returncode != 0
        return r.stderr
    assert "--shard-size" in err("--stats")
    assert "--weights: 2 values for 3 hosts" in err("--stats", "--shard-size", "10",
                                                    "--hosts", "3", "--weights", "1,2")
    assert "--memory" in err("--stats", "--shard-size", "10", "--memory", "x")
    assert "--world 5 is not the 4 ranks" in err("--stats", "--shard-size", "10",
                                                 "--ranks-per-host", "2,2", "--world", "5")
    assert "--kind hosts" in err("--memory", "0.5")


def test_cxl_data_loader_draws_the_hosts_order_in_c(shared) -> None:
    """CXLDataLoader's fast path (the C engine drawing from the C sampler):
    each rank's batches are its sampler's ids, in order, and its state
    resumes mid-epoch."""
    from cxl_dataloader import CXLDataLoader
    p, _ = shared
    ds = CXLDataset(p, "d")
    layout = [0, 1, 1]
    for r in range(3):
        mk = lambda: DistributedCXLSampler(ds, num_replicas=3, rank=r, seed=4,  # noqa: E731
                                           topology=layout, window=2)
        want = list(mk())
        loader = CXLDataLoader(ds, batch_size=100, sampler=mk())
        got = [int(row[0]) // 8 for b in loader for row in b.reshape(-1, 8)]
        assert got == want
        # stop after 7 batches, resume in a new loader
        loader = CXLDataLoader(ds, batch_size=100, sampler=mk())
        it = iter(loader)
        head = [int(row[0]) // 8 for _ in range(7) for row in next(it).reshape(-1, 8)]
        st = loader.state_dict()
        again = CXLDataLoader(ds, batch_size=100, sampler=mk())
        again.load_state_dict(st)
        rest = [int(row[0]) // 8 for b in again for row in b.reshape(-1, 8)]
        assert head + rest == want


def test_order_stats_predicts_where_counting_would_be_slow() -> None:
    """Over 2^22 draws an epoch `--stats` predicts instead of counting; at
    that size the prediction and the count of a slightly smaller epoch
    agree (the prediction's min() over the epoch, not per round, matters
    only for small epochs)."""
    def stats(n: int) -> dict:
        args = ["cxlpool", "order", "--n", str(n), "--stats", "--shard-size", "1000",
                "--hosts", "3", "--memory", "0.4", "--ranks-per-host", "2,1,1",
                "--epochs", "1", "--json"]
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
        return json.loads(out)["stats"]["epochs"][0]
    counted, predicted = stats(4_000_000), stats(4_400_000)
    assert counted["fractions"] == "counted" and predicted["fractions"] == "predicted"
    for k in ("local", "peer", "home"):
        assert predicted[k] == pytest.approx(counted[k], abs=0.002), (counted, predicted)
    assert sum(predicted[k] for k in ("local", "peer", "home")) == pytest.approx(1)
