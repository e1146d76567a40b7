"""The design's constructor (issue 11 item 6): its snippet runs as written
(a local or fsspec source and sizes that fit), its keywords are aliases of
existing arguments, and each does what docs/python.md says: numa_nodes
interleaves the pool's pages, memory_policy="interleave" the ring slots',
numa_bind=True runs the gather threads on the node nearest the pool's
memory, prefetch_depth sets the gather ring's depth."""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import pickle
import re
import uuid
import warnings
from pathlib import Path
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import cxl_dataloader as cx
from cxl_dataloader import CXLDataLoader, CXLDataset, CXLError, CXLMemoryPool

# The design's usage, read from docs/python.md ("The design's constructor";
# tests/python/test_docs.py counts it as run here), but for the three values
# a machine decides: the pool's size, its nodes, and where the data is.
def _design() -> str:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "python.md").read_text()
    (code,) = [b for b in re.findall(r"^```python\n(.*?)^```", doc, re.S | re.M)
               if 'pool_size="512TB"' in b]
    for old, new in (('pool_size="512TB"', 'pool_size="{size}"'),
                     ("numa_nodes=[0, 1, 2, 3]", "numa_nodes={nodes}"),
                     ('data_source="s3://bucket/train"', 'data_source="{source}"')):
        assert old in code, old
        code = code.replace(old, new)
    return code


DESIGN = _design()

MPOL_BIND, MPOL_INTERLEAVE = 2, 3
# records: 39 full batches of 256 and a short one, more than the ring's
# 2 x 4 x threads + 2 slots, so the gather threads are still there (waiting
# for a slot) when the first batch is looked at
N = 10_000


def nodes_here() -> list[int]:
    return sorted(int(d[4:]) for d in os.listdir("/sys/devices/system/node")
                  if d.startswith("node") and d[4:].isdigit())


def node_cpus(node: int) -> set[int]:
    out: set[int] = set()
    text = Path(f"/sys/devices/system/node/node{node}/cpulist").read_text().strip()
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out & os.sched_getaffinity(0)


def mempolicy(addr: int) -> tuple[int, int]:
    """(mode, node mask of nodes 0..63) of the page at addr (get_mempolicy
    with MPOL_F_ADDR: the policy of the memory there, not of the thread)."""
    lib = ctypes.CDLL(ctypes.util.find_library("numa"), use_errno=True)
    mode = ctypes.c_int(-1)
    mask = (ctypes.c_ulong * 16)()
    rc = lib.get_mempolicy(ctypes.byref(mode), mask, ctypes.c_ulong(1024),
                           ctypes.c_void_p(addr), ctypes.c_ulong(2))  # MPOL_F_ADDR
    assert rc == 0, os.strerror(ctypes.get_errno())
    return mode.value, mask[0]


def gather_threads() -> list[Path]:
    return [t for t in Path("/proc/self/task").iterdir()
            if (t / "comm").read_text().strip() == "cxlp-gather"]


def cpus_allowed(task: Path) -> set[int]:
    line = next(x for x in (task / "status").read_text().splitlines()
                if x.startswith("Cpus_allowed_list:"))
    out: set[int] = set()
    for part in line.split(":", 1)[1].strip().split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def table(lo: int, hi: int) -> pa.Table:
    ids = np.arange(lo, hi, dtype=np.int64)
    return pa.table({"id": ids, "y": ids.astype(np.float64) * 0.5})


@pytest.fixture
def pool_name(monkeypatch) -> Iterator[str]:
    """The pool the design's CXLMemoryPool (no name) makes: $CXLP_POOL."""
    name = f"pyt-design-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("CXLP_POOL", name)
    yield name
    try:
        CXLMemoryPool.destroy(name)
    except CXLError:
        pass


@pytest.fixture(params=["local", "memory"])
def source(request, tmp_path) -> Iterator[str]:
    """A directory of two Parquet files: local, or an fsspec memory:// URL
    (as s3://bucket/train is in the design)."""
    if request.param == "local":
        d = tmp_path / "train"
        d.mkdir()
        pq.write_table(table(0, 6000), d / "part-0.parquet")
        pq.write_table(table(6000, N), d / "part-1.parquet")
        yield str(d)
        return
    import fsspec
    fs = fsspec.filesystem("memory")
    root = f"/bucket-{uuid.uuid4().hex[:8]}/train"
    for k, (lo, hi) in enumerate([(0, 6000), (6000, N)]):
        with fs.open(f"{root}/part-{k}.parquet", "wb") as f:
            pq.write_table(table(lo, hi), f)
    yield f"memory://{root}"
    fs.rm(root, recursive=True)


@pytest.fixture
def process_group(tmp_path) -> Iterator[None]:
    """A default process group of one rank (gloo), as torchrun gives a job:
    DistributedCXLSampler(dataset) takes world size and rank from it, as
    torch's DistributedSampler does (and, like it, refuses to run without)."""
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method=f"file://{tmp_path}/pg", rank=0, world_size=1)
    try:
        yield
    finally:
        dist.destroy_process_group()


def test_the_designs_usage_runs_as_written(pool_name, source, process_group) -> None:
    node = nodes_here()[0]
    code = DESIGN.format(size="64MB", nodes=[node], source=source)
    env: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing of it is ignored or unsupported here
        exec(code, env)
    pool, dataset, loader = env["pool"], env["dataset"], env["loader"]
    # pool_size: created (exist_ok: the next rank attaches), 64 MB
    assert pool.spec == f"numa:interleave={node}:{pool_name}"
    st = pool.stat()
    assert st["size"] == 64_000_000 and st["media"] == "numa" and st["numa_interleave"]
    assert pool.tier_policy == dataset.tier_policy == "hot_first"
    assert dataset.prefetch_depth == 3 and dataset.ingested["records"] == N
    assert loader.fast and loader.num_workers == 8 and loader.prefetch == 4
    assert loader.numa_node == st["near_node"] == node
    before = {t.name for t in gather_threads()}
    seen, slots = [], set()
    it = iter(loader)
    for b in it:
        if not slots:  # the ring slots: interleaved over the pool's node(s)
            slots = {a for a, _ in loader._engine.slots()}
            for addr in slots:
                assert mempolicy(addr) == (MPOL_INTERLEAVE, 1 << node)
            # the gather threads run on the CPUs of the node nearest the pool
            threads = [t for t in gather_threads() if t.name not in before]
            assert threads and all(cpus_allowed(t) == node_cpus(node) for t in threads)
        assert set(b) == {"id", "y"} and len(b["id"]) <= 256
        assert np.array_equal(b["y"].numpy(), b["id"].numpy() * 0.5)
        seen.extend(b["id"].tolist())
    assert sorted(seen) == list(range(N))
    # the pool's own pages: interleaved (MPOL_INTERLEAVE), seen through the
    # dataset's mapping of a record
    rec = dataset[0]["id"]
    assert mempolicy(rec.data_ptr()) == (MPOL_INTERLEAVE, 1 << node)
    # every rank runs the same lines: the next attaches and finds the data
    env2: dict = {}
    exec(code, env2)
    assert env2["dataset"].ingested == {"existed": True}
    assert env2["pool"].stat()["size"] == 64_000_000
    del loader, it, env, env2, b, rec
    gc.collect()


def test_numa_nodes_that_do_not_exist_are_refused_by_node(pool_name) -> None:
    missing = nodes_here()[-1] + 1
    asked = [0, missing] if missing > 1 else [0, 1, 2, 3]
    with pytest.raises(ValueError, match=rf"numa_nodes=\[0, {asked[1]}.*\]: NUMA node "
                                         rf"{missing} does not exist on this machine \(nodes: "):
        CXLMemoryPool(pool_size="64MB", numa_nodes=asked)
    for bad in ([], [0, 0], [-1], ["0"], [True]):
        with pytest.raises(ValueError, match="numa_nodes="):
            CXLMemoryPool(pool_size="64MB", numa_nodes=bad)
    with pytest.raises(TypeError, match="numa_nodes"):
        CXLMemoryPool(pool_size="64MB", numa_nodes=0)
    with pytest.raises(ValueError, match="numa_nodes"):
        CXLMemoryPool(pool_size="64MB", numa_nodes=[0], backend="file")
    assert not os.path.exists(f"/dev/shm/cxlp.{pool_name}")


@pytest.mark.parametrize("nodes", [None, [0]])
def test_a_pool_size_beyond_the_media_is_refused_naming_both(pool_name, nodes) -> None:
    """512 TB is more than /dev/shm (or node 0's memory) can hold here: a
    CXLError at create that names the size and what the media holds, and
    nothing left behind (not a sparse pool that would fail at an ingest)."""
    with pytest.raises(CXLError, match=r"size 512000000000000 bytes is more than "
                                       r"(/dev/shm can hold|NUMA node 0 holds) \(\d+ bytes") as e:
        CXLMemoryPool(pool_size="512TB", numa_nodes=nodes)
    assert e.value.code == CXLError.EARG
    assert not os.path.exists(f"/dev/shm/cxlp.{pool_name}")


def test_aliases_are_checked(pool_name, tmp_path) -> None:
    with pytest.raises(TypeError, match="size or pool_size"):
        CXLMemoryPool(size="1G", pool_size="1G")
    with pytest.raises(ValueError, match="tier_policy='hottest'"):
        CXLMemoryPool(pool_size="64MB", tier_policy="hottest")
    np.save(tmp_path / "a.npy", np.arange(40, dtype=np.int32).reshape(10, 4))
    with CXLMemoryPool(pool_size="64MB", tier_policy="streaming") as pool:
        assert pool.spec == f"shm:{pool_name}"
        for bad in (0, -1, 1.5, True):
            with pytest.raises(ValueError, match="prefetch_depth"):
                CXLDataset(data_source=tmp_path / "a.npy", cxl_pool=pool, prefetch_depth=bad)
        ds = CXLDataset(data_source=tmp_path / "a.npy", cxl_pool=pool, prefetch_depth=2)
        assert ds.tier_policy == "streaming"  # the pool's default
        assert CXLDataset(pool, ds.name, tier_policy="lookahead").tier_policy == "lookahead"
        back = pickle.loads(pickle.dumps(ds))
        assert (back.tier_policy, back.prefetch_depth) == ("streaming", 2)
        with pytest.raises(ValueError, match=r"NUMA page policy \(interleave, bind\).*"
                                             r"pool of tiers \("):
            CXLDataLoader(ds, memory_policy="spread")


@pytest.fixture
def shm_dataset(pool_name, tmp_path) -> Iterator[CXLDataset]:
    arr = np.arange(400 * 16, dtype=np.int64).reshape(400, 16)
    np.save(tmp_path / "r.npy", arr)
    with CXLMemoryPool(pool_size="64MB") as pool:
        yield CXLDataset(data_source=tmp_path / "r.npy", cxl_pool=pool, name="r")


def test_prefetch_depth_sets_the_gather_rings_depth(shm_dataset) -> None:
    """On a pool of one tier prefetch_depth is the engine's batches in flight
    per thread (2 x depth x threads + 2 ring slots), unless the loader gives
    prefetch_factor."""
    ds = shm_dataset
    ds.prefetch_depth = 3
    for pf, depth in ((None, 3), (5, 5)):
        dl = CXLDataLoader(ds, batch_size=8, num_workers=1, prefetch_factor=pf)
        it = iter(dl)
        next(it)
        assert dl.prefetch == depth
        assert len(dl._engine.slots()) == 2 * depth * dl.threads + 2
        assert len(list(it)) == 49
    ds.prefetch_depth = None
    assert CXLDataLoader(ds, batch_size=8).prefetch == 0  # the engine's default


@pytest.mark.parametrize("policy,mode", [("interleave", MPOL_INTERLEAVE), ("bind", MPOL_BIND)])
def test_memory_policy_places_the_ring_slots_over_the_pools_nodes(shm_dataset, policy,
                                                                  mode) -> None:
    """On a shm pool the nodes of its memory are those of its pages; the
    slots get the NUMA policy over them. "interleave" says the pool's own
    pages are not interleaved (only a pool made with numa_nodes is)."""
    ds = shm_dataset
    st = CXLMemoryPool(ds.spec).stat()
    assert st["media"] == "shm" and not st["numa_interleave"] and st["numa_nodes"]
    mask = sum(1 << int(n) for n in st["numa_nodes"].split(",") if "-" not in n)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        dl = CXLDataLoader(ds, batch_size=40, memory_policy=policy)
    assert [("not interleaved" in str(x.message)) for x in w] == ([True] if policy ==
                                                                     "interleave" else [])
    it = iter(dl)
    got = [next(it)]
    for addr, _ in dl._engine.slots():
        assert mempolicy(addr) == (mode, mask)
    got += list(it)
    assert np.array_equal(np.concatenate([b.numpy() for b in got]),
                          np.arange(400 * 16).reshape(400, 16))


def test_numa_bind_true_runs_the_threads_on_the_node_nearest_the_pool(shm_dataset) -> None:
    ds = shm_dataset
    near = CXLMemoryPool(ds.spec).stat()["near_node"]
    assert near in nodes_here()
    dl = CXLDataLoader(ds, batch_size=1, num_workers=2, numa_bind=True)
    assert dl.numa_node == near
    gc.collect()
    before = {t.name for t in gather_threads()}
    it = iter(dl)
    next(it)
    threads = [t for t in gather_threads() if t.name not in before]
    assert threads and all(cpus_allowed(t) == node_cpus(near) for t in threads)
    assert len(list(it)) == 399
    assert CXLDataLoader(ds, batch_size=8, numa_bind=False).numa_node == -1


def test_the_package_exports_what_the_design_imports() -> None:
    for name in ("CXLMemoryPool", "CXLDataset", "CXLDataLoader", "DistributedCXLSampler"):
        assert name in cx.__all__


def test_a_pool_without_a_name_is_cxlp_pool_else_default(monkeypatch) -> None:
    from cxl_dataloader.pool import default_pool_name
    monkeypatch.delenv("CXLP_POOL", raising=False)
    assert default_pool_name() == "default"
    monkeypatch.setenv("CXLP_POOL", "job7")
    assert default_pool_name() == "job7"


def test_on_a_pool_of_tiers_tier_policy_and_prefetch_depth_drive_the_staging(tmp_path) -> None:
    """A pool of tiers: the pool's tier_policy reaches its datasets, and a
    dataset's tier_policy and prefetch_depth are the staging engine's policy
    and horizon (lookahead, in batches) for its loaders; the gather ring
    keeps its default depth."""
    from cxl_dataloader import _core
    name = f"pyt-design-tier-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tier_file = f"/var/tmp/cxlp-{name}.tier"
    pool = CXLMemoryPool(name, create=True, meta_bytes=4 << 20, tier_policy="hot_first",
                         tiers=[f"dram=shm:{name}.d:6M", f"nvme=file:{tier_file}:32M"])
    try:
        data = np.arange(4096 * 64, dtype=np.int64).reshape(4096, 64)
        np.save(tmp_path / "d.npy", data)
        ds = CXLDataset(data_source=tmp_path / "d.npy", cxl_pool=pool, prefetch_depth=3)
        assert ds.tiered and ds.tier_policy == "hot_first"
        dl = CXLDataLoader(ds, batch_size=256)
        assert dl._tier == {"tier_policy": _core.policy_parse("hot_first"), "tier_budget": 0,
                            "tier_horizon": 3, "tier_stagers": 0}
        assert dl.prefetch == 0
        got = np.concatenate([b.numpy() for b in dl])
        assert np.array_equal(got, data)
        assert dl.stats()["policy"] == "hot_first"
        dl = CXLDataLoader(ds, batch_size=256, memory_policy="lru", lookahead=5)
        assert dl._tier["tier_policy"] == _core.policy_parse("lru")
        assert dl._tier["tier_horizon"] == 5
        del dl, ds
    finally:
        pool.close()
        CXLMemoryPool.destroy(name)


def test_a_pool_without_a_name_says_it_is_the_shared_default(tmp_path, monkeypatch) -> None:
    """issue 34: CXLMemoryPool(pool_size=...) without a name and without
    $CXLP_POOL is the pool "default", which every nameless pool of the host
    shares: a UserWarning says so, whether it created or attached it, and
    names its path. (backend="file" keeps the test's "default" in tmp_path,
    apart from any other "default" of the host.)"""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CXLP_POOL", raising=False)
    with pytest.warns(UserWarning, match=rf"created the pool named 'default' \({tmp_path}/default\)"):
        first = CXLMemoryPool(backend="file", pool_size="16M")
    try:
        with pytest.warns(UserWarning, match="attached the pool named 'default'"):
            CXLMemoryPool(backend="file", pool_size="16M").close()
        monkeypatch.setenv("CXLP_POOL", "default")  # named on purpose: nothing to say
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            CXLMemoryPool(backend="file").close()
    finally:
        first.close()
        CXLMemoryPool.destroy(str(tmp_path / "default"), backend="file")
