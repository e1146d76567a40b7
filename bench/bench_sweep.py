#!/usr/bin/env python3
"""The fast path against a plain C gather, over record size x batch size x
collate, each point paired in one run.

For each record size a dataset of --mib MiB is made and ingested into a
shm pool (one shard, as `cxlpool ingest` does by default on 2 MiB pages):
  stack   fixed-size records of 256 B, 4 KiB, 8 KiB, 64 KiB (random bytes)
  pack    uint16 token documents (Megatron .bin/.idx) whose sizes are
          uniform in [s/2, 3s/2] for the same four sizes s, plus "logu":
          log-uniform 100 B .. 32 KiB; rows of 1024 tokens
and read at batch sizes 8, 16, 64, 256 (stack: records per batch; pack:
rows per batch), in a full shuffle (the keyed permutation of
CXLDataLoader(shuffle=True)), by
  fast    CXLDataLoader(ds, batch_size=B, shuffle=True[, seq_len=1024]):
          one epoch, `for b in loader: pass`
  plain   bench/plain_gather.c through ctypes, with as many threads as the
          loader has gather threads, over the same pool mapping (the same
          pages) and the same order: record id at base + id * size (stack),
          or elements [off[id], off[id+1]) packed into rows (pack), where
          each batch starts being computed before the clock starts; into
          one batch buffer per thread, which stays in the core's cache
  ring    the same, into as many batch buffers per thread (used in turn) as
          the loader's ring has slots: the loader writes into that much
          memory, and one buffer per thread is most of what makes plain
          cheaper per byte
  order   plain, but drawing the order in the timed loop as the loader must
          (each thread the ids of its batch, through the library's
          cxlp_sampler_next on a sampler of the same seed and epoch,
          build/libcxlpool.so): plain reads an order drawn before its clock
          starts, which the loader's contract (a keyed permutation drawn as
          it goes) does not allow; both comparisons are reported
Rounds rotate which goes first. Per round: throughput (payload bytes per
second) of each, and CPU seconds per record: the process's CPU time over
the epoch for the fast path (Python, engine start, gather threads), the
gathering threads' CPU time for plain and ring. Figures are medians over rounds;
ratios are medians of the per-round ratios, with their range. Before the
rounds, the first batch of each path is compared byte for byte.

Python time per batch: one more epoch, each next() timed with
perf_counter_ns, minus what the engine reports it waited (stall_ns, timed in
C around the wait): the median over that epoch's batches. In that tight
loop the engine is behind at large batches, so next() mostly follows a
sleep in the wait. A paced measure (python_paced) runs one more epoch
that pauses between batches as training does, and times torch's own
torch.from_numpy after the same pause: after a sleep the caches are cold,
and the reference shows how much of the figure that is.

One command writes the raw JSON and the heat-map PNG (docs/benchmarks/
sweep-DATE.json and .png) and the table in docs/benchmarks.md (between
the sweep markers; move the table it replaces to docs/benchmarks/history.md):

    python3 bench/bench_sweep.py [--mib 2048] [--rounds 5] [--quick]
    python3 bench/bench_sweep.py --page docs/benchmarks/sweep-DATE.json  # the table again

The default dataset, 2 GiB per record size, is over 4x the last-level cache
of the machine the figures come from (480 MiB): on 512 MiB datasets part of
each epoch is read from that cache, and the ratios came out lower than on
2 GiB (docs/benchmarks/history.md has both runs).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import shutil
import statistics
import struct
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
if list((ROOT / "python" / "cxl_dataloader").glob("_core*.so")):
    sys.path.insert(0, str(ROOT / "python"))  # an in-tree build; else the installed package

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool, _core  # noqa: E402

SIZES = (256, 4096, 8192, 65536)
BATCHES = (8, 16, 64, 256)
SEQ_LEN = 1024
MIB = 2048  # default dataset per record size (see the docstring)
SEED = 0  # of the loader's permutation (shuffle=True, seed=SEED), set_epoch per pass
ITEM = 2  # uint16 tokens
ORDER_RANDOM = 1  # enum cxlp_order
BEGIN, END = "<!-- sweep:begin -->", "<!-- sweep:end -->"


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def llc_bytes() -> int:
    """The largest CPU cache cpu0 reports (sysfs), 0 when unknown. A dataset
    that fits in it times the cache, not the memory: some VMs report a last
    level of hundreds of MiB (480 MiB on the Intel VM of docs/benchmarks.md)."""
    best = 0
    for d in Path("/sys/devices/system/cpu/cpu0/cache").glob("index*"):
        try:
            txt = (d / "size").read_text().strip()
        except OSError:
            continue
        mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(txt[-1:], 1)
        digits = txt.rstrip("KMG")
        if digits.isdigit():
            best = max(best, int(digits) * mult)
    return best


def loadavg() -> float:
    return os.getloadavg()[0]


# ---------------------------------------------------------------- plain C --

def plain_lib(build: Path) -> ctypes.CDLL:
    src = ROOT / "bench" / "plain_gather.c"
    so = build / "plain_gather.so"
    if not so.exists() or so.stat().st_mtime < src.stat().st_mtime:
        build.mkdir(parents=True, exist_ok=True)
        cc = os.environ.get("CC", "cc")
        subprocess.run([cc, "-O2", "-g", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                        "-o", str(so), str(src), "-lpthread"], check=True)
    lib = ctypes.CDLL(str(so))
    u64p = ctypes.POINTER(ctypes.c_uint64)
    dp = ctypes.POINTER(ctypes.c_double)
    lib.plain_stack.restype = ctypes.c_double
    lib.plain_stack.argtypes = [ctypes.c_void_p, ctypes.c_uint64, u64p, ctypes.c_uint64,
                                ctypes.c_uint32, ctypes.c_int, ctypes.c_int, ctypes.c_void_p, dp]
    lib.plain_pack.restype = ctypes.c_double
    lib.plain_pack.argtypes = [ctypes.c_void_p, u64p, ctypes.c_uint32, u64p, ctypes.c_uint64,
                               ctypes.c_uint32, ctypes.c_uint64, u64p, u64p, ctypes.c_uint64,
                               ctypes.c_int, ctypes.c_int, ctypes.c_void_p, dp]
    lib.plain_one.restype = None
    lib.plain_one.argtypes = [ctypes.c_void_p, ctypes.c_uint64, u64p, ctypes.c_uint32, u64p,
                              ctypes.c_uint64, ctypes.c_uint32, ctypes.c_uint64, u64p, u64p,
                              ctypes.c_uint64, ctypes.c_void_p]
    return lib


class SamplerConfig(ctypes.Structure):  # struct cxlp_sampler_config (include/cxlpool.h)
    _fields_ = [("kind", ctypes.c_int), ("n", ctypes.c_uint64), ("seed", ctypes.c_uint64),
                ("epoch", ctypes.c_uint64), ("shard_size", ctypes.c_uint64),
                ("window", ctypes.c_uint64), ("world", ctypes.c_uint32),
                ("rank", ctypes.c_uint32), ("drop_last", ctypes.c_int)]


class SamplerState(ctypes.Structure):  # struct cxlp_sampler_state
    _fields_ = [("seed", ctypes.c_uint64), ("epoch", ctypes.c_uint64),
                ("consumed", ctypes.c_uint64), ("fingerprint", ctypes.c_uint64)]


class Draw(ctypes.Structure):  # struct draw (plain_gather.c)
    _fields_ = [("next", ctypes.c_void_p), ("restore", ctypes.c_void_p),
                ("samplers", ctypes.POINTER(ctypes.c_void_p)), ("st", SamplerState)]


class Drawer:
    """One RANDOM sampler per plain thread, from build/libcxlpool.so, at
    (SEED, epoch): what plain's "order" variant draws from."""

    def __init__(self, build: Path) -> None:
        lib = ctypes.CDLL(str(build / "libcxlpool.so"))
        lib.cxlp_sampler_create.argtypes = [ctypes.POINTER(SamplerConfig),
                                            ctypes.POINTER(ctypes.c_void_p)]
        lib.cxlp_sampler_state.argtypes = [ctypes.c_void_p, ctypes.POINTER(SamplerState)]
        lib.cxlp_sampler_free.argtypes = [ctypes.c_void_p]
        lib.cxlp_sampler_free.restype = None
        lib.cxlp_sampler_next.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
                                          ctypes.c_size_t]
        lib.cxlp_sampler_next.restype = ctypes.c_size_t
        self.lib = lib

    def make(self, n: int, epoch: int, threads: int) -> tuple[Draw, Any]:
        hs = (ctypes.c_void_p * threads)()
        cfg = SamplerConfig(kind=ORDER_RANDOM, n=n, seed=SEED, epoch=epoch)
        for t in range(threads):
            h = ctypes.c_void_p()
            if self.lib.cxlp_sampler_create(ctypes.byref(cfg), ctypes.byref(h)):
                raise RuntimeError("cxlp_sampler_create failed")
            hs[t] = h.value
        st = SamplerState()
        self.lib.cxlp_sampler_state(hs[0], ctypes.byref(st))
        d = Draw(next=ctypes.cast(self.lib.cxlp_sampler_next, ctypes.c_void_p).value,
                 restore=ctypes.cast(self.lib.cxlp_sampler_restore, ctypes.c_void_p).value,
                 samplers=ctypes.cast(hs, ctypes.POINTER(ctypes.c_void_p)), st=st)
        return d, hs

    def free(self, hs: Any) -> None:
        for h in hs:
            self.lib.cxlp_sampler_free(h)

    def first(self, n: int, epoch: int, k: int) -> np.ndarray:
        """The first k ids the plain threads' samplers draw."""
        _, hs = self.make(n, epoch, 1)
        out = np.zeros(k, dtype=np.uint64)
        got = self.lib.cxlp_sampler_next(hs[0], u64(out), k)
        self.free(hs)
        return out[:got]


def u64(a: Optional[np.ndarray]) -> Any:
    if a is None:
        return None
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_uint64))


# ---------------------------------------------------------------- datasets -

def doc_lengths(kind: Any, total_bytes: int, rng: np.random.Generator) -> np.ndarray:
    """Token counts of documents adding up to about total_bytes."""
    if kind == "logu":  # 100 B .. 32 KiB, log-uniform
        lo, hi = math.log(100 / ITEM), math.log(32768 / ITEM)
        mean = (32768 - 100) / ITEM / (hi - lo)
    else:
        lo, hi = kind // ITEM // 2, kind // ITEM * 3 // 2
        mean = (lo + hi) / 2
    n = int(total_bytes / ITEM / mean) + 1
    if kind == "logu":
        lens = np.exp(rng.uniform(lo, hi, n)).astype(np.int64)
    else:
        lens = rng.integers(lo, hi + 1, n)
    return np.maximum(lens, 1).astype(np.int64)


def write_megatron(prefix: Path, lens: np.ndarray, rng: np.random.Generator) -> None:
    """MMIDIDX v1, uint16 tokens (dtype code 8), one document per sequence."""
    total = int(lens.sum())
    with open(f"{prefix}.bin", "wb") as f:
        step = 1 << 26
        for s in range(0, total, step):
            f.write(rng.integers(0, 65535, min(step, total - s), dtype=np.uint16).tobytes())
    ptrs = np.zeros(len(lens), dtype=np.int64)
    ptrs[1:] = np.cumsum(lens[:-1]) * ITEM
    with open(f"{prefix}.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<QB", 1, 8))
        f.write(struct.pack("<QQ", len(lens), len(lens) + 1))
        f.write(lens.astype(np.int32).tobytes() + ptrs.tobytes()
                + np.arange(len(lens) + 1, dtype=np.int64).tobytes())


def ingest(cli: str, spec: str, name: str, src: Path, args: list[str], shard: int,
           huge: bool) -> float:
    cmd = [cli, "ingest", spec, name, str(src), "--no-progress", "--json",
           "--shard-bytes", str(shard)] + args + ([] if huge else ["--no-hugepages"])
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["seconds"]


def pages(cli: str, spec: str, name: str) -> dict:
    out = subprocess.run([cli, "stat", spec, name, "--json"], check=True, capture_output=True,
                         text=True).stdout
    return json.loads(out).get("pages", {})


# ------------------------------------------------------------------ paths --

def fast_epoch(dl: CXLDataLoader) -> tuple[float, float]:
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in dl:
        pass
    return time.perf_counter() - t0, time.process_time() - c0


def timed_next(dl: CXLDataLoader, it: Any) -> Optional[int]:
    """Nanoseconds of one next(it) less what the engine waited in it; None
    at the end of the pass. The batch is dropped after the clock stops."""
    s0 = dl.stall_ns
    a = time.perf_counter_ns()
    try:
        b = next(it)
    except StopIteration:
        return None
    e = time.perf_counter_ns()
    del b
    return (e - a) - (dl.stall_ns - s0)


def python_per_batch(dl: CXLDataLoader) -> float:
    """Median over one epoch of (time in next() - time the engine waited)."""
    it = iter(dl)
    ns = []
    while (t := timed_next(dl, it)) is not None:
        ns.append(t)
    return statistics.median(ns) / 1e3


PACED_BATCHES = 200    # batches of the paced measure (a pass ended early)
PACE_MIN_S = 0.001     # its least pause


def python_paced(dl: CXLDataLoader, batch_s: float) -> tuple[float, float]:
    """Python time per batch when the loop does something else between
    batches, as training does, beside torch's own cost in the same state.
    Each of the first PACED_BATCHES batches: sleep, time torch.from_numpy
    of a small array (the reference), sleep, time next() minus the engine's
    wait. The pause (1.5x the batch's gather time, at least PACE_MIN_S)
    lets the engine have the batch ready, so the wait is near 0. After a
    sleep the thread's caches are cold (on a VM, the host ran something else
    on the CPU): both figures carry that, and ours minus the reference is
    what the loader adds. Medians in microseconds: (ours, reference)."""
    pause = max(PACE_MIN_S, 1.5 * batch_s)
    clock = time.perf_counter_ns
    arr = np.zeros(16, dtype=np.uint8)
    ours, ref = [], []
    it = iter(dl)
    try:
        for _ in range(PACED_BATCHES):
            time.sleep(pause)
            a = clock()
            t = torch.from_numpy(arr)
            ref.append(clock() - a)
            del t
            time.sleep(pause)
            if (ns := timed_next(dl, it)) is None:
                break
            ours.append(ns)
    finally:
        it.close()  # type: ignore[attr-defined]
    return statistics.median(ours) / 1e3, statistics.median(ref) / 1e3


class Point:
    """One (collate, size, batch) point: the loader, the plain job, the order."""

    def __init__(self, lib: ctypes.CDLL, drawer: Drawer, ds: CXLDataset, collate: str,
                 size: Any, batch: int, threads: Optional[int],
                 lens: Optional[np.ndarray]) -> None:
        self.lib, self.ds, self.collate, self.size, self.batch = lib, ds, collate, size, batch
        self.drawer, self.epoch = drawer, 0
        n = len(ds)
        kw: dict = {"seq_len": SEQ_LEN} if collate == "pack" else {}
        self.dl = CXLDataLoader(ds, batch_size=batch, shuffle=True, threads=threads, seed=SEED,
                                **kw)
        self.threads = 0  # the loader's, once it has started (check)
        self.nbuf = 1     # the loader's ring slots per thread (check)
        base = torch.from_dlpack(ds.store.get(0))
        self.base = base.data_ptr()
        if collate == "stack":
            self.rec = int(size)
            self.off = None
            self.bytes = n * self.rec
            for i in (1, n // 2, n - 1):  # one shard: record i at base + i * size
                assert torch.from_dlpack(ds.store.get(i)).data_ptr() == self.base + i * self.rec
        else:
            self.rec = 0
            self.lens = lens
            self.off = np.zeros(n + 1, dtype=np.uint64)
            self.off[1:] = np.cumsum(lens)
            self.bytes = int(self.off[-1]) * ITEM
            for i in (1, n // 2, n - 1):
                assert (torch.from_dlpack(ds.store.get(i)).data_ptr()
                        == self.base + int(self.off[i]) * ITEM)

    def order(self, epoch: int) -> None:
        """The loader's epoch order, drawn by the same C permutation."""
        n = len(self.ds)
        self.epoch = epoch
        self.dl.set_epoch(epoch)
        s = _core.Sampler("random", n=n, seed=SEED, epoch=epoch)
        self.ids = np.ascontiguousarray(np.asarray(s.next(n)), dtype=np.uint64)
        if self.collate == "pack":
            per = self.batch * SEQ_LEN
            cum = np.cumsum(self.lens[self.ids.astype(np.int64)])
            total = int(cum[-1])
            self.n_batches = -(-total // per)
            starts = np.arange(self.n_batches, dtype=np.int64) * per
            idx = np.searchsorted(cum, starts, side="right")
            before = np.where(idx > 0, cum[np.maximum(idx - 1, 0)], 0)
            self.bstart = idx.astype(np.uint64)
            self.boff = (starts - before).astype(np.uint64)
        else:
            self.n_batches = -(-n // self.batch)
            self.bstart = self.boff = None

    def plain(self, nbuf: int = 1, draw: bool = False) -> tuple[float, float]:
        """draw: the threads draw the order in the timed loop (samplers made
        before the clock starts)."""
        cpu = ctypes.c_double()
        n = len(self.ids)
        d, hs = self.drawer.make(n, self.epoch, self.threads) if draw else (None, None)
        dp = ctypes.byref(d) if d is not None else None
        try:
            if self.collate == "stack":
                el = self.lib.plain_stack(self.base, self.rec, u64(self.ids), n, self.batch,
                                          self.threads, nbuf, dp, ctypes.byref(cpu))
            else:
                el = self.lib.plain_pack(self.base, u64(self.off), ITEM, u64(self.ids), n,
                                         self.batch, SEQ_LEN, u64(self.bstart), u64(self.boff),
                                         self.n_batches, self.threads, nbuf, dp,
                                         ctypes.byref(cpu))
        finally:
            if hs is not None:
                self.drawer.free(hs)
        if el < 0:
            raise RuntimeError("plain gather: could not start its threads")
        return el, cpu.value

    def fast(self, epoch: int) -> tuple[float, float]:
        self.dl.set_epoch(epoch)
        return fast_epoch(self.dl)

    def check(self, epoch: int) -> None:
        """The loader's first batch holds the bytes the plain path copies."""
        self.order(epoch)
        it = iter(self.dl)
        b = next(it)
        slots = self.dl._engine.n_slots
        got = (b if self.collate == "stack" else b["tokens"]).contiguous().view(torch.uint8)
        want = torch.zeros(got.numel(), dtype=torch.uint8)
        self.lib.plain_one(self.base, self.rec, u64(self.off), ITEM, u64(self.ids), len(self.ids),
                           self.batch, SEQ_LEN, u64(self.bstart), u64(self.boff), 0,
                           want.data_ptr())
        del it, b
        self.threads = self.dl.threads  # what the engine runs: plain gets the same
        self.nbuf = -(-slots // self.threads)
        if not torch.equal(got.flatten(), want):
            raise AssertionError(f"{self.collate} {self.size} batch {self.batch}: the loader's "
                                 "first batch differs from the plain gather's")
        k = min(4096, len(self.ids))
        if not np.array_equal(self.drawer.first(len(self.ids), epoch, k), self.ids[:k]):
            raise AssertionError("the plain threads' sampler draws another order than the "
                                 "loader's")


def run_point(p: Point, rounds: int, epoch0: int) -> dict:
    n = len(p.ds)
    p.check(epoch0)
    p.order(epoch0)
    p.fast(epoch0)  # warm-up: engine, slots, page tables
    p.plain()
    p.plain(p.nbuf)
    p.plain(draw=True)
    res = []
    load = [loadavg()]
    paths = ["fast", "plain", "ring", "order"]
    for r in range(rounds):
        e = epoch0 + 1 + r
        p.order(e)
        got = {}
        for path in paths[r % 4:] + paths[:r % 4]:
            got[path] = (p.fast(e) if path == "fast" else
                         p.plain() if path == "plain" else
                         p.plain(p.nbuf) if path == "ring" else p.plain(draw=True))
        (fw, fc), (pw, pc), (rw, rc) = got["fast"], got["plain"], got["ring"]
        ow, oc = got["order"]
        res.append({"fast_s": fw, "fast_cpu_s": fc, "plain_s": pw, "plain_cpu_s": pc,
                    "ring_s": rw, "ring_cpu_s": rc, "order_s": ow, "order_cpu_s": oc})
    load.append(loadavg())
    p.dl.set_epoch(epoch0 + rounds + 1)
    py_us = python_per_batch(p.dl)
    p.dl.set_epoch(epoch0 + rounds + 2)
    paced_us, ref_us = python_paced(p.dl, statistics.median(x["fast_s"] for x in res)
                                    / len(p.dl))
    med = statistics.median
    ratio = [x["plain_s"] / x["fast_s"] for x in res]
    cpu = [x["fast_cpu_s"] / x["plain_cpu_s"] for x in res]
    rratio = [x["ring_s"] / x["fast_s"] for x in res]
    rcpu = [x["fast_cpu_s"] / x["ring_cpu_s"] for x in res]
    oratio = [x["order_s"] / x["fast_s"] for x in res]
    ocpu = [x["fast_cpu_s"] / x["order_cpu_s"] for x in res]
    return {
        "collate": p.collate, "size": p.size, "batch": p.batch, "threads": p.threads,
        "ring_buffers_per_thread": p.nbuf,
        "records": n, "bytes": p.bytes, "load": load,
        "fast_gb_s": p.bytes / med([x["fast_s"] for x in res]) / 1e9,
        "plain_gb_s": p.bytes / med([x["plain_s"] for x in res]) / 1e9,
        "ratio": med(ratio), "ratio_min": min(ratio), "ratio_max": max(ratio),
        "fast_cpu_us_rec": 1e6 * med([x["fast_cpu_s"] for x in res]) / n,
        "plain_cpu_us_rec": 1e6 * med([x["plain_cpu_s"] for x in res]) / n,
        "cpu_ratio": med(cpu), "cpu_ratio_min": min(cpu), "cpu_ratio_max": max(cpu),
        "ring_gb_s": p.bytes / med([x["ring_s"] for x in res]) / 1e9,
        "ring_ratio": med(rratio), "ring_ratio_min": min(rratio), "ring_ratio_max": max(rratio),
        "ring_cpu_us_rec": 1e6 * med([x["ring_cpu_s"] for x in res]) / n,
        "ring_cpu_ratio": med(rcpu), "ring_cpu_ratio_min": min(rcpu),
        "ring_cpu_ratio_max": max(rcpu),
        "order_gb_s": p.bytes / med([x["order_s"] for x in res]) / 1e9,
        "order_ratio": med(oratio), "order_ratio_min": min(oratio),
        "order_ratio_max": max(oratio),
        "order_cpu_us_rec": 1e6 * med([x["order_cpu_s"] for x in res]) / n,
        "order_cpu_ratio": med(ocpu), "order_cpu_ratio_min": min(ocpu),
        "order_cpu_ratio_max": max(ocpu),
        "python_us_per_batch": py_us, "python_us_paced": paced_us,
        "torch_from_numpy_us_paced": ref_us, "rounds": res,
    }


# ----------------------------------------------------------------- report --

def label(size: Any) -> str:
    if size == "logu":
        return "100B-32K"
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


def heatmap(points: list[dict], path: Path, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(3, 2, figsize=(11, 12.5))
    for col, collate in enumerate(("stack", "pack")):
        pts = [p for p in points if p["collate"] == collate]
        sizes = [s for s in (*SIZES, "logu") if any(p["size"] == s for p in pts)]
        for row, (key, name, cmap, lim) in enumerate((
                ("ratio", "throughput, fast / plain", "RdYlGn", (0.3, 1.1)),
                ("cpu_ratio", "CPU s per record, fast / plain", "RdYlGn_r", (0.9, 3.0)),
                ("ring_cpu_ratio", "CPU s per record, fast / plain with the loader's ring",
                 "RdYlGn_r", (0.9, 3.0)))):
            ax = axes[row][col]
            m = np.full((len(sizes), len(BATCHES)), np.nan)
            for p in pts:
                m[sizes.index(p["size"]), BATCHES.index(p["batch"])] = p[key]
            im = ax.imshow(m, cmap=cmap, vmin=lim[0], vmax=lim[1], aspect="auto")
            for i in range(len(sizes)):
                for j in range(len(BATCHES)):
                    if not np.isnan(m[i, j]):
                        ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=10)
            ax.set_xticks(range(len(BATCHES)), [str(b) for b in BATCHES])
            ax.set_yticks(range(len(sizes)), [label(s) for s in sizes])
            ax.set_xlabel("batch size" + (" (rows of 1024 tokens)" if collate == "pack" else ""))
            ax.set_ylabel("record size" + (" (documents)" if collate == "pack" else ""))
            ax.set_title(f"{collate}: {name}", fontsize=10)
            fig.colorbar(im, ax=ax, fraction=0.046)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def table(points: list[dict]) -> str:
    lines = ["| collate | records | batch | threads | fast GB/s | plain GB/s | fast / plain "
             "(rounds) | CPU µs/rec fast | plain | CPU fast / plain (rounds) "
             "| ring bufs | fast / ring | CPU fast / ring (rounds) "
             "| fast / plain+order (rounds) | CPU fast / plain+order (rounds) "
             "| Python µs/batch | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in points:
        lines.append(
            f"| {p['collate']} | {label(p['size'])} | {p['batch']} | {p['threads']} "
            f"| {p['fast_gb_s']:.2f} | {p['plain_gb_s']:.2f} "
            f"| **{p['ratio']:.2f}** ({p['ratio_min']:.2f}-{p['ratio_max']:.2f}) "
            f"| {p['fast_cpu_us_rec']:.3f} | {p['plain_cpu_us_rec']:.3f} "
            f"| **{p['cpu_ratio']:.2f}** ({p['cpu_ratio_min']:.2f}-{p['cpu_ratio_max']:.2f}) "
            f"| {p['ring_buffers_per_thread']} | {p['ring_ratio']:.2f} "
            f"| **{p['ring_cpu_ratio']:.2f}** ({p['ring_cpu_ratio_min']:.2f}-"
            f"{p['ring_cpu_ratio_max']:.2f}) "
            f"| {p['order_ratio']:.2f} ({p['order_ratio_min']:.2f}-{p['order_ratio_max']:.2f}) "
            f"| {p['order_cpu_ratio']:.2f} ({p['order_cpu_ratio_min']:.2f}-"
            f"{p['order_cpu_ratio_max']:.2f}) "
            f"| {p['python_us_per_batch']:.2f} | {p['load'][0]:.1f}-{p['load'][1]:.1f} |")
    return "\n".join(lines)


def command(meta: dict) -> str:
    """The command line of a run, from its JSON's meta."""
    return ("python3 bench/bench_sweep.py"
            + (f" --mib {meta['mib']}" if meta["mib"] != (256 if meta.get("quick") else MIB)
               else "")
            + (f" --rounds {meta['rounds']}" if meta["rounds"] != 5 else "")
            + (" --quick" if meta.get("quick") else ""))


def page_text(doc: dict, stem: str, cmd: str) -> str:
    """The page's text of a run (doc: its JSON) whose files are stem.json and
    stem.png (paths as the page links them)."""
    meta, points = doc["meta"], doc["points"]
    loads = [x for p in points for x in p["load"]]
    return (f"Command: `{cmd}` ({meta['started']} to {meta['finished']}; {meta['mib']} MiB per "
            f"dataset, {meta['rounds']} rounds; last-level cache {meta['llc_bytes'] >> 20} MiB; "
            f"load average {min(loads):.1f} to {max(loads):.1f} on {meta['cpus']} CPUs; raw "
            f"figures in {stem}.json).\n\n![fast / plain heat map]({stem}.png)\n\n"
            + table(points))


def write_doc(doc: Path, text: str) -> None:
    s = doc.read_text()
    if BEGIN not in s or END not in s:
        raise SystemExit(f"{doc}: no {BEGIN} ... {END} markers to write the table between")
    head, rest = s.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    doc.write_text(head + BEGIN + "\n" + text + "\n" + END + tail)


# ------------------------------------------------------------------- main --

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=MIB,
                    help="dataset size per record size (keep it at least 4x the last-level "
                    "cache, or both paths read from cache rather than memory)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--quick", action="store_true",
                    help="256 MiB datasets, written under build/ only (not docs/)")
    ap.add_argument("--threads", type=int, default=None,
                    help="gather threads of both paths (default: the loader's choice)")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)) + ",logu")
    ap.add_argument("--batches", default=",".join(map(str, BATCHES)))
    ap.add_argument("--collates", default="stack,pack")
    ap.add_argument("--no-hugepages", action="store_true",
                    help="ingest with --no-hugepages (records on 4 KiB pages)")
    ap.add_argument("--cli", default=os.environ.get("CXLPOOL", str(ROOT / "build" / "cxlpool")))
    ap.add_argument("--work", default=f"/var/tmp/{os.environ.get('USER', 'cxlp')}-sweep",
                    help="where source files are written (removed after each ingest)")
    ap.add_argument("--out", default=None, help="output directory (default docs/benchmarks/, "
                    "or build/ with --quick)")
    ap.add_argument("--page", default=None, metavar="JSON",
                    help="measure nothing: write the table of the run in JSON (a file of "
                    "docs/benchmarks/) into docs/benchmarks.md")
    a = ap.parse_args()
    if a.page:
        doc = json.loads(Path(a.page).read_text())
        stem = "benchmarks/" + Path(a.page).stem
        write_doc(ROOT / "docs" / "benchmarks.md", page_text(doc, stem, command(doc["meta"])))
        return 0
    if a.rounds < 5:
        ap.error("--rounds: at least 5 (the figures are medians of paired rounds)")
    mib = 256 if a.quick and a.mib == MIB else a.mib
    llc = llc_bytes()
    if not a.quick and llc and (mib << 20) < 4 * llc:
        log(f"warning: {mib} MiB per dataset is under 4x the last-level cache "
            f"({llc >> 20} MiB): part of each epoch is read from cache")
    out = Path(a.out) if a.out else ROOT / ("build" if a.quick else "docs/benchmarks")
    out.mkdir(parents=True, exist_ok=True)
    sizes = [s if s == "logu" else int(s) for s in a.sizes.split(",")]
    batches = [int(b) for b in a.batches.split(",")]
    lib = plain_lib(ROOT / "build")
    drawer = Drawer(ROOT / "build")
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    points: list[dict] = []
    meta: dict = {"started": started, "cpus": os.cpu_count(), "mib": mib, "rounds": a.rounds,
                  "seq_len": SEQ_LEN, "llc_bytes": llc, "load_start": os.getloadavg(), "torch": torch.__version__,
                  "hugepages": not a.no_hugepages, "datasets": []}
    epoch = 0
    for collate in a.collates.split(","):
        for size in sizes:
            if collate == "stack" and size == "logu":
                continue
            name = f"sweep-{os.getpid()}-{uuid.uuid4().hex[:6]}"
            spec = f"shm:{name}"
            total = mib << 20
            lens = None
            t0 = time.perf_counter()
            if collate == "stack":
                src = work / f"{name}.raw"
                n = total // size
                with open(src, "wb") as f:
                    for s in range(0, n * size, 1 << 26):
                        f.write(rng.bytes(min(1 << 26, n * size - s)))
                args = ["--format", "raw", "--record-size", str(size)]
                files = [src]
                data = n * size
            else:
                lens = doc_lengths(size, total, rng)
                src = work / name
                write_megatron(src, lens, rng)
                args = ["--format", "megatron"]
                files = [Path(f"{src}.bin"), Path(f"{src}.idx")]
                data = int(lens.sum()) * ITEM
            # one shard: the records and (documents) their index in one extent
            shard = data + 8 * (len(lens) if lens is not None else 0) + (16 << 20)
            pool = CXLMemoryPool(name, create=True, size=shard + (64 << 20))
            try:
                secs = ingest(a.cli, spec, "d", src, args, shard, not a.no_hugepages)
                for f in files:
                    f.unlink()
                pg = pages(a.cli, spec, "d")
                log(f"{collate} {label(size)}: {data >> 20} MiB made and ingested in "
                    f"{time.perf_counter() - t0:.1f} s (ingest {secs:.2f} s), pages {pg}")
                meta["datasets"].append({"collate": collate, "size": size, "bytes": data,
                                         "ingest_s": secs, "pages": pg})
                ds = CXLDataset(spec, "d")
                for b in batches:
                    p = Point(lib, drawer, ds, collate, size, b, a.threads, lens)
                    r = run_point(p, a.rounds, epoch)
                    epoch += a.rounds + 3
                    del p
                    points.append(r)
                    log(f"  batch {b:3d} x{r['threads']}: fast {r['fast_gb_s']:6.2f} GB/s, plain "
                        f"{r['plain_gb_s']:6.2f} GB/s, ratio {r['ratio']:.2f} "
                        f"({r['ratio_min']:.2f}-{r['ratio_max']:.2f}), CPU/rec x"
                        f"{r['cpu_ratio']:.2f} (vs ring of {r['ring_buffers_per_thread']}: "
                        f"x{r['ring_cpu_ratio']:.2f}; vs plain+order {r['order_ratio']:.2f}, "
                        f"CPU x{r['order_cpu_ratio']:.2f}), Python "
                        f"{r['python_us_per_batch']:.2f} us/batch (paced "
                        f"{r['python_us_paced']:.2f}, torch.from_numpy "
                        f"{r['torch_from_numpy_us_paced']:.2f}), "
                        f"load {r['load'][0]:.1f}-{r['load'][1]:.1f}")
                del ds
            finally:
                pool.close()
                CXLMemoryPool.destroy(name)
                for f in files:
                    f.unlink(missing_ok=True)
    shutil.rmtree(work, ignore_errors=True)
    meta["load_end"] = os.getloadavg()
    meta["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    meta["quick"] = a.quick
    doc = {"meta": meta, "points": points}
    # dated names: a run never overwrites the files an earlier one's text names
    stem = "sweep-" + time.strftime("%Y-%m-%dT%H%M", time.strptime(started, "%Y-%m-%d %H:%M:%S"))
    (out / f"{stem}.json").write_text(json.dumps(doc, indent=1))
    loads = [x for p in points for x in p["load"]]
    title = (f"bench_sweep: fast path / plain C gather, same pages, threads, order; "
             f"{mib} MiB per dataset, median of {a.rounds} paired rounds; "
             f"load {min(loads):.1f}-{max(loads):.1f} on {os.cpu_count()} CPUs")
    heatmap(points, out / f"{stem}.png", title)
    if a.quick or a.out:
        text = page_text(doc, stem, command(meta))
        (out / f"{stem}.md").write_text(text + "\n")
    else:
        text = page_text(doc, f"benchmarks/{stem}", command(meta))
        write_doc(ROOT / "docs" / "benchmarks.md", text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
