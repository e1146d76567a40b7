"""CXLDataLoader's arguments: every one of torch DataLoader's, plus
memory_policy, pin_to_cxl, numa_bind, device; pin_memory without CUDA."""
from __future__ import annotations

import ctypes
import ctypes.util
import gc
import inspect
import os
import subprocess
import uuid
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLError, CXLMemoryPool

no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="tests the path without CUDA")


@pytest.fixture
def fixed(pool: CXLMemoryPool, tmp_path) -> tuple[CXLDataset, np.ndarray]:
    arr = np.arange(300 * 8, dtype=np.int32).reshape(300, 8)
    np.save(tmp_path / "f.npy", arr)
    return CXLDataset.ingest(pool, "f", tmp_path / "f.npy"), arr


def seen(loader) -> list[int]:
    return sorted(int(r[0]) // 8 for b in loader for r in b)


def mark_worker(worker_id: int) -> None:
    torch.utils.data.get_worker_info().dataset.marked = True


def test_accepts_every_torch_dataloader_argument() -> None:
    ours = inspect.signature(CXLDataLoader).parameters
    theirs = inspect.signature(torch.utils.data.DataLoader).parameters
    missing = [n for n in theirs if n not in ours]
    assert not missing, f"torch DataLoader arguments CXLDataLoader lacks: {missing}"
    for n, p in theirs.items():  # same kind (positional or keyword-only) and default
        assert ours[n].kind == p.kind and ours[n].default == p.default, n
    for extra in ("memory_policy", "pin_to_cxl", "numa_bind", "device"):
        assert extra in ours


def test_fast_path_with_every_argument_spelled_out(fixed) -> None:
    ds, _ = fixed
    g = torch.Generator().manual_seed(5)
    dl = CXLDataLoader(ds, batch_size=32, shuffle=True, sampler=None, batch_sampler=None,
                       num_workers=2, collate_fn=None, pin_memory=False, drop_last=True,
                       timeout=5.0, worker_init_fn=None, multiprocessing_context=None,
                       generator=g, prefetch_factor=3, persistent_workers=True,
                       pin_memory_device="", in_order=True, memory_policy=None,
                       pin_to_cxl=False, numa_bind=None, device="cpu")
    assert dl.fast
    got = seen(dl)
    assert len(got) == 288 and len(set(got)) == 288  # 9 full batches, no repeats


def test_general_path_passes_every_argument_to_torch(fixed) -> None:
    ds, arr = fixed
    dl = CXLDataLoader(ds, batch_size=25, shuffle=False, num_workers=2,
                       collate_fn=torch.utils.data.default_collate, pin_memory=False,
                       drop_last=False, timeout=60, worker_init_fn=mark_worker,
                       multiprocessing_context="fork", generator=None, prefetch_factor=2,
                       persistent_workers=True, in_order=True, device="cpu")
    assert not dl.fast
    t = dl._torch
    assert (t.num_workers, t.timeout, t.prefetch_factor, t.persistent_workers, t.in_order) == \
        (2, 60, 2, True, True)
    assert t.worker_init_fn is mark_worker
    for _ in range(2):  # persistent workers serve a second epoch
        assert torch.equal(torch.cat(list(dl)), torch.from_numpy(arr))


def test_worker_init_fn_takes_the_general_path(fixed) -> None:
    ds, _ = fixed
    dl = CXLDataLoader(ds, batch_size=50, num_workers=1, worker_init_fn=mark_worker)
    assert not dl.fast and seen(dl) == list(range(300))


def test_bad_arguments_are_refused(fixed) -> None:
    ds, _ = fixed
    with pytest.raises(ValueError, match="memory_policy"):
        CXLDataLoader(ds, memory_policy="fastest")
    with pytest.raises(ValueError, match="numa_bind"):
        CXLDataLoader(ds, numa_bind=4095)
    with pytest.raises(ValueError, match="timeout"):
        CXLDataLoader(ds, timeout=-1)
    with pytest.raises(ValueError, match="prefetch_factor"):
        CXLDataLoader(ds, prefetch_factor=0)
    with pytest.raises(ValueError, match="shuffle"):
        CXLDataLoader(ds, shuffle=True, sampler=range(10))


def test_memory_policy_on_a_pool_of_one_tier_says_it_places_nothing(fixed) -> None:
    ds, _ = fixed
    for policy in ("hot_first", "streaming", "full_prefetch", "lookahead", "lru"):
        with pytest.warns(UserWarning, match="one tier"):
            dl = CXLDataLoader(ds, batch_size=64, memory_policy=policy)
        assert dl.memory_policy == policy and seen(dl) == list(range(300))
    # the staging engine's other arguments too, each named
    with pytest.warns(UserWarning, match=r"memory_budget=1048576, stagers=2: .*one tier"):
        dl = CXLDataLoader(ds, batch_size=64, memory_budget=1 << 20, stagers=2)
    assert seen(dl) == list(range(300))
    with pytest.warns(UserWarning, match=r"read_in_part=False: .*one tier"):
        dl = CXLDataLoader(ds, batch_size=64, read_in_part=False)
    assert seen(dl) == list(range(300))
    with pytest.raises(ValueError, match="memory_policy"):
        CXLDataLoader(ds, memory_policy="adaptive")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CXLDataLoader(ds, memory_policy=None)


def test_memory_budget_takes_a_size_string(fixed, tmp_path) -> None:
    """issue 34: memory_budget="2M" goes through the one size parser (it was
    a bare int() ValueError): the loader's engine and RandomCXLSampler's
    window="auto" take it as 2 MiB; bad text names the argument."""
    from cxl_dataloader import RandomCXLSampler
    ds, _ = fixed
    with pytest.warns(UserWarning, match=r"memory_budget=16777216: .*one tier"):
        CXLDataLoader(ds, batch_size=64, memory_budget="16M")
    for bad, err in (("16Q", ValueError), ("-1", ValueError), (1.5, TypeError)):
        with pytest.raises(err, match="memory_budget"):
            CXLDataLoader(ds, batch_size=64, memory_budget=bad)
    name = f"pyt-budget-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    pool = CXLMemoryPool(name, create=True, meta_bytes="4M",
                         tiers=["dram=shm:8M", f"nvme=file:{tmp_path / 'b.tier'}:32M"])
    try:
        np.save(tmp_path / "t.npy", np.arange(1 << 18, dtype=np.int64).reshape(-1, 64))
        pool._pool.import_("t", str(tmp_path / "t.npy"), shard_bytes=256 << 10)
        tds = CXLDataset(pool, "t")
        text = RandomCXLSampler(tds, seed=1, window="auto", memory_budget="2M")
        assert text.window == RandomCXLSampler(tds, seed=1, window="auto",
                                               memory_budget=2 << 20).window
        dl = CXLDataLoader(tds, batch_size=64, sampler=text, memory_budget="2M")
        assert sum(len(b) for b in dl) == len(tds) and dl.stats()["budget"] == 2 << 20
        dl.close()
    finally:
        pool.close()
        CXLMemoryPool.destroy(name)


def gather_threads() -> list[Path]:
    return [t for t in Path("/proc/self/task").iterdir()
            if (t / "comm").read_text().strip() == "cxlp-gather"]


def cpu_set(cpulist: str) -> set[int]:
    out: set[int] = set()
    for part in cpulist.strip().split(","):
        lo, _, hi = part.partition("-")
        out.update(range(int(lo), int(hi or lo) + 1))
    return out


def cpus_allowed(task: Path) -> set[int]:
    for line in (task / "status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return cpu_set(line.split()[1])
    raise AssertionError("no Cpus_allowed_list")


def test_numa_bind_runs_the_gather_threads_on_the_node(fixed) -> None:
    ds, _ = fixed
    # the node's CPUs, as far as this process's cpuset lets it run there (on a
    # one-node machine that is every CPU: then only naming and count are tested)
    node_cpus = cpu_set(Path("/sys/devices/system/node/node0/cpulist").read_text())
    node_cpus &= os.sched_getaffinity(0)
    # batches of one record: more of them (300) than ring slots, so the gather
    # threads are still there (parked) when they are looked at
    dl = CXLDataLoader(ds, batch_size=1, num_workers=3, numa_bind=0)
    gc.collect()  # loaders other tests left to the collector take their threads
    before = {t.name for t in gather_threads()}
    it = iter(dl)
    next(it)
    threads = [t for t in gather_threads() if t.name not in before]
    # never more gather threads than CPUs to run them on
    assert len(threads) == min(3, len(node_cpus)) == dl.threads
    assert all(cpus_allowed(t) == node_cpus for t in threads)
    rest = [int(r[0]) // 8 for b in it for r in b]
    assert len(rest) == 299


def mempolicy(addr: int) -> tuple[int, int]:
    """(mode, node mask) of the page at addr, as get_mempolicy reports it."""
    lib = ctypes.CDLL(ctypes.util.find_library("numa"), use_errno=True)
    mode = ctypes.c_int(-1)
    mask = (ctypes.c_ulong * 16)()
    MPOL_F_ADDR = 2
    rc = lib.get_mempolicy(ctypes.byref(mode), mask, ctypes.c_ulong(1024), ctypes.c_void_p(addr),
                           ctypes.c_ulong(MPOL_F_ADDR))
    assert rc == 0, os.strerror(ctypes.get_errno())
    return mode.value, mask[0]


def test_pin_to_cxl_binds_ring_slots_to_a_numa_pools_node(tmp_path) -> None:
    name = f"pyt-numa-{uuid.uuid4().hex[:8]}"
    try:
        pool = CXLMemoryPool(name, backend="numa", numa_node=0, create=True, size=32 << 20)
    except CXLError as e:
        pytest.skip(f"no numa pool here: {e}")
    try:
        arr = np.arange(200 * 16, dtype=np.int64).reshape(200, 16)
        np.save(tmp_path / "n.npy", arr)
        ds = CXLDataset.ingest(pool, "n", tmp_path / "n.npy")
        MPOL_BIND = 2
        for pin in (True, False):
            dl = CXLDataLoader(ds, batch_size=20, pin_to_cxl=pin)
            it = iter(dl)
            first = next(it)
            slots = dl._engine.slots()
            assert slots and all(size % 4096 == 0 for _, size in slots)
            for addr, _ in slots:
                mode, mask = mempolicy(addr)
                assert (mode == MPOL_BIND and mask & 1) if pin else mode != MPOL_BIND
            got = torch.cat([first] + list(it))
            assert torch.equal(got, torch.from_numpy(arr))
    finally:
        pool.close()
        CXLMemoryPool.destroy(name, backend="numa", numa_node=0)


def test_pin_to_cxl_off_numa_is_a_noop_with_a_warning(fixed) -> None:
    ds, _ = fixed
    with pytest.warns(UserWarning, match="pin_to_cxl"):
        dl = CXLDataLoader(ds, batch_size=30, pin_to_cxl=True)
    assert seen(dl) == list(range(300))


@no_cuda
def test_pin_memory_without_cuda_is_a_noop_with_a_warning(fixed) -> None:
    ds, arr = fixed
    with pytest.warns(UserWarning, match="pin_memory"):
        dl = CXLDataLoader(ds, batch_size=30, pin_memory=True)
    assert torch.equal(torch.cat(list(dl)), torch.from_numpy(arr))
    assert "gpu" not in dl.stats()  # nothing registered, nothing copied


@no_cuda
def test_device_cuda_without_cuda_is_refused_early(fixed) -> None:
    ds, _ = fixed
    with pytest.raises(RuntimeError, match="CUDA"):
        CXLDataLoader(ds, batch_size=30, device="cuda")


def test_device_cpu_hands_out_the_slot_itself(fixed) -> None:
    ds, arr = fixed
    dl = CXLDataLoader(ds, batch_size=30, device=torch.device("cpu"))
    it = iter(dl)
    b = next(it)
    assert b.device.type == "cpu"
    assert b.data_ptr() in {a for a, _ in dl._engine.slots()}  # zero-copy: the ring slot
    assert torch.equal(b, torch.from_numpy(arr[:30]))


def test_device_other_than_cpu_copies_each_batch_and_keeps_the_pass_state(fixed) -> None:
    """device= other than the CPU (here "meta", which every torch build
    has): each batch is copied there, and the pass's state (mid-pass, after
    a break, after a whole epoch) is the CPU loader's with the same seed."""
    ds, arr = fixed
    on = CXLDataLoader(ds, batch_size=30, shuffle=True, seed=5, device="meta")
    off = CXLDataLoader(ds, batch_size=30, shuffle=True, seed=5)
    states = []
    for dl in (on, off):
        it = iter(dl)
        b = next(it)
        next(it)
        assert b.shape == (30, 8) and b.device.type == ("meta" if dl is on else "cpu")
        mid = dl.state_dict()
        del it  # a break
        after = dl.state_dict()
        n = sum(len(b) for b in dl)
        states.append((mid, after, n, dl.state_dict()))
    assert states[0] == states[1]
    assert states[0][0]["sampler"]["consumed"] == 60 and states[0][1]["epoch"] == 1
    assert states[0][2] == len(arr)


def test_ring_slots_are_listed_and_grow_when_batches_are_kept(fixed) -> None:
    ds, _ = fixed
    dl = CXLDataLoader(ds, batch_size=10, num_workers=1, prefetch_factor=1)
    it = iter(dl)
    kept = [next(it)]
    n0 = dl._engine.n_slots
    kept += [next(it) for _ in range(n0 + 2)]  # holding them all forces growth
    eng = dl._engine
    assert eng.n_slots >= n0 + 3
    addrs = {a for a, _ in eng.slots()}
    assert {b.data_ptr() for b in kept} <= addrs
    assert eng.slots(eng.n_slots) == [] and len(eng.slots(n0)) == eng.n_slots - n0


def test_default_ring_of_small_batches_fits_half_the_l2(pool: CXLMemoryPool, tmp_path) -> None:
    """docs/python.md, prefetch_factor's default: small batches get as many
    slots as fit half the gather threads' L2 where that is at least 16
    (at most 64), else as many as fit 8 MiB; never fewer than 2 x 2 x
    threads + 2. Checked over batch sizes from 4 KiB to 1 MiB."""
    # glibc's sysconf, as the loader reads it (Python's os.sysconf lacks the name)
    got = subprocess.run(["getconf", "LEVEL2_CACHE_SIZE"], capture_output=True, text=True)
    l2 = int(got.stdout.strip() or 0) if got.returncode == 0 else 0
    arr = np.zeros((4096, 1024), dtype=np.uint8)
    np.save(tmp_path / "k.npy", arr)
    ds = CXLDataset.ingest(pool, "k", tmp_path / "k.npy")
    for batch in (4, 16, 32, 64, 128, 256, 1024):
        dl = CXLDataLoader(ds, batch_size=batch)
        it = iter(dl)
        next(it)
        n, t, slot = dl._engine.n_slots, dl.threads, batch * 1024
        least = 2 * 2 * t + 2
        half = max(l2, 0) * t // 2
        if l2 > 0 and max(least, 16) * slot <= half:
            assert n == min(64, half // slot) and n * slot <= half, (batch, n)
        else:
            assert n == max(least, min(64, (8 << 20) // slot)), (batch, n)
        del it
