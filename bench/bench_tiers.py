#!/usr/bin/env python3
"""A dataset larger than memory: one epoch per placement policy, side by side.

    python3 bench/bench_tiers.py [--gib 8] [--mem 1G] [--dir /var/tmp/tiers]
                                 [--quick] [--no-mosaic] [--demand-only]
                                 [--shard-kib K] [--window-x 1]
                                 [--policies lookahead,...] [--rounds 3]
                                 [--demand 0.8] [--demand-policies lookahead]
                                 [--demand-epochs 2] [--setup-s 0]
                                 [--seconds 120] [--home-rate off]
                                 [--out docs/benchmarks/tiers-DATE]

An N GiB dataset of 8 KiB records is homed on an nvme tier (a file under
--dir) of a pool whose one memory tier (dram, shm) holds --mem. Each run
drops the page cache first (root writes /proc/sys/vm/drop_caches; the tier
is read with O_DIRECT so the cache could not hide it anyway) and its dram
copies (migrate to the home), then reads one full epoch through
CXLDataLoader with one memory_policy, in the same order for every policy:
RandomCXLSampler(window="auto"), the block order whose window of shards
fills half the memory budget. Every record carries its id in its first 8
bytes and derived words after it; every batch is checked (each id once,
contents intact) inside the timed loop.

Measured in the same run, as limits:
  seq read    the tier file's sequential bandwidth with the tier's own reads
              (build/bench_seqread: io_uring, O_DIRECT, 1 MiB x 8 in flight)
  shard read  the same bytes as the stagers read them: pieces of one shard's
              size in a random order, as many at once as the loader has
              stagers (bench_seqread with SHARD STREAMS); not part of the
              bound, it shows what the shuffled order costs the disk
  all-DRAM    the same records in a pool of one shm tier (the fast path, no
              staging), same loader, same order
and the peer built for this case:
  mosaic      MosaicML Streaming over the same records written by its
              MDSWriter into a "remote" directory on the same disk, in shards
              of the same records, its cache (local) in /dev/shm limited to
              the same memory (cache_limit), a shuffle of the same reach as
              our window (py1br, shuffle_block_size = the window's records),
              StreamingDataLoader(num_workers=2); one epoch or --seconds
and the demand runs: lookahead (--demand-policies) again with a sleep per
batch standing in for compute, at --demand (80%) of min(all-DRAM, seq read)
samples/s, the seq read measured again right before each demand run (this VM's
disk drifts by tens of percent over minutes), paced per batch (batch i's
compute ends at t0 + (i + 1) * period + the stall so far: a late batch delays
the steps after it) and by a fixed schedule (at t0 + (i + 1) * period:
after a late batch the loop asks faster until back on time); the stall (time the loop waited for batches) as a
share of the epoch, split into start-up (the first batch: the first
window's shards, needed by it, staged on demand), the rest of the first
window and the steady state. Each demand run reads --demand-epochs epochs
back to back through one loader (the first cold, the next ones after an
epoch that staged their first shards during its last window), each its
own row; --setup-s waits that long between the loader's construction and
the first epoch (the model being built: the loader stages meanwhile).
--demand-only runs the limits once and the demand runs only
(OUT-demand.json).

Each policy's epoch also gets the seq read made just before it: the table's
"vs bound just before" is each round's epoch against min(that read, the
round's all-DRAM), median and range over rounds (the disk drifts).

Regimes: --shard-kib sets the dataset's shard size at ingest (its layout,
not the order's function; without it, the importer's default, 256 MiB, as
a user gets it), --window-x the sampler's window as a multiple of what
window="auto" gives (above 2 its blocks no longer fit the budget); a
policy written POLICY:K in --policies runs with K stager threads (the C
loader option tier_stagers; default 2 for staging units of 8 MiB and more,
up to 4 below). The loaders stage what the engine chooses for the
dataset: its staging units (docs/tiers.md, "Staging units") or its
shards; the order is window="auto"'s (runs of units where the home's
probe asks for them, the ramp in epoch 0), recorded in the JSON
("stage_order").

--home-rate RATE holds reads of the disk under --dir at RATE bytes/s (K/M/G:
binary units) for the whole run, with the kernel's block throttle
(bench/throttle.py; root): a steady disk, below its worst, for figures the
disk's drift would otherwise decide. The default, off, runs the disk as it is.

Writes OUT.json and OUT.png (samples/s per policy, with the limits; by
default docs/benchmarks/tiers-DATE, dated so that no run overwrites
another's), and prints the markdown table docs/benchmarks.md carries. Removes every file
and pool it made.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
LIMITS = ("seq read", "shard read", "all-DRAM")
REC = 8192
WORDS = REC // 8
BATCH = 256
K1 = np.uint64(0x9E3779B97F4A7C15)
K2 = np.uint64(0xBF58476D1CE4E5B9)
POLICIES = ["lookahead", "hot_first", "streaming", "full_prefetch", "lru"]


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def drop_caches() -> None:
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def records(ids: np.ndarray) -> np.ndarray:
    """Records ids as (len(ids), WORDS) uint64: id, id * K1 + j, mix(id)."""
    ids = ids.astype(np.uint64)
    w = np.empty((len(ids), WORDS), dtype=np.uint64)
    with np.errstate(over="ignore"):
        w[:, 1:-1] = ids[:, None] * K1 + np.arange(1, WORDS - 1, dtype=np.uint64)
        w[:, -1] = (ids * K2) ^ (ids >> np.uint64(31))
    w[:, 0] = ids
    return w


class Checker:
    """Each id once; every record's words as records() makes them."""

    def __init__(self, n: int) -> None:
        self.seen = np.zeros(n, dtype=bool)
        self.count = 0
        self.bad = 0
        self.mid = np.uint64(WORDS // 2)

    def batch(self, rows: np.ndarray) -> None:
        w = rows.view(np.uint64).reshape(len(rows), WORDS)
        ids = w[:, 0]
        if (ids >= len(self.seen)).any() or self.seen[ids].any():
            self.bad += len(rows)
            return
        self.seen[ids] = True
        with np.errstate(over="ignore"):
            ok = (w[:, WORDS // 2] == ids * K1 + self.mid) & \
                 (w[:, -1] == ((ids * K2) ^ (ids >> np.uint64(31))))
        self.bad += int((~ok).sum())
        self.count += len(rows)

    def complete(self) -> bool:
        return self.bad == 0 and bool(self.seen.all())


def write_npy(path: Path, n: int) -> None:
    arr = np.lib.format.open_memmap(path, mode="w+", dtype=np.uint8, shape=(n, REC))
    step = 32768
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        arr[lo:hi] = records(np.arange(lo, hi)).view(np.uint8).reshape(hi - lo, REC)
    arr.flush()
    del arr


def machine() -> dict:
    la = open("/proc/loadavg").read().strip()
    return {"cpu": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
            "uname": " ".join(platform.uname()), "loadavg": la,
            "free_m": subprocess.run(["free", "-m"], capture_output=True, text=True).stdout,
            "python": platform.python_version()}


def cxl_epoch(spec: str, name: str, n: int, policy: str | None, budget: int, mem_tier: int,
              demand_sps: float = 0.0, pacing: str = "batch", seed: int = 7,
              window_x: float = 1.0, epochs: int = 1, setup_s: float = 0.0) -> dict:
    """One epoch through CXLDataLoader (or several: see epochs); returns
    figures and checks.

    demand_sps: the loop stands in for compute, BATCH / demand_sps seconds a
    batch, the batch's check included. pacing "batch": each batch's compute
    ends at t0 + (i + 1) * period + the loop's stall so far (a training
    step: a late batch delays the steps after it, it does not shorten them);
    "schedule": at t0 + (i + 1) * period (a fixed arrival rate: after a late
    batch the loop runs without compute until it is back on schedule, asking
    for batches faster than the demand meanwhile).

    The loop's stall (time in next()) is split into the first batch's (the
    start-up: the first window's shards staged on demand), the rest of the
    first window (records of the sampler's first window of shards) and the
    steady state after it.

    epochs > 1: that many epochs back to back through the same loader (the
    next begins as the last batch's compute ends), each timed and checked
    on its own; the figures above are the first epoch's, "later" lists the
    others' (an epoch's staging engine stages the next epoch's first shards
    during its last window: docs/tiers.md, "Staging ahead of a pass").
    setup_s: seconds between the loader's construction and the first
    iter(), standing in for building the model (the loader stages the first
    epoch's first shards meanwhile); 0: iter() at once."""
    import torch  # noqa: F401
    from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool, RandomCXLSampler
    pool = CXLMemoryPool(spec)
    ds = CXLDataset(pool, name)
    sampler = RandomCXLSampler(ds, seed=seed, window="auto", memory_budget=budget)
    if ds.tiered and window_x != 1.0:  # a window of window_x times what "auto" gives
        sampler = RandomCXLSampler(ds, seed=seed, shard_size=sampler.shard_size,
                                   window=max(1, round(sampler.window * window_x)))
    kw: dict = dict(batch_size=BATCH, sampler=sampler, threads=2)
    policy, _, stagers = (policy or "").partition(":")
    if ds.tiered:
        kw.update(memory_policy=policy, memory_budget=budget)
    period = BATCH / demand_sps if demand_sps else 0.0
    first_window = sampler.window * sampler.shard_size  # records
    runs = []
    before = pool.tiers()
    prev_next = 0  # bytes the previous epoch staged for this one
    loader = CXLDataLoader(ds, **kw)
    if stagers:  # "policy:K": K stager threads (the C option tier_stagers)
        loader._tier["tier_stagers"] = int(stagers)
        loader._let_go()
        loader._stage_ahead()
    if setup_s:
        time.sleep(setup_s)
    for ep in range(epochs):
        chk = Checker(n)
        stall = [0, 0, 0]  # ns: first batch, rest of the first window, after it
        seen = 0
        s0 = loader.stall_ns
        ru0 = resource.getrusage(resource.RUSAGE_SELF)
        t0 = time.perf_counter()
        for i, b in enumerate(loader):
            s_now = loader.stall_ns - s0
            stall[0 if i == 0 else 1 if seen < first_window else 2] += s_now - sum(stall)
            seen += len(b)
            chk.batch(b.numpy())
            if period:  # compute, standing in: the loop is busy until its slot
                end = t0 + (i + 1) * period + (s_now / 1e9 if pacing == "batch" else 0.0)
                wait = end - time.perf_counter()
                if wait > 0:
                    time.sleep(wait)
        dt = time.perf_counter() - t0
        ru1 = resource.getrusage(resource.RUSAGE_SELF)
        st = loader.stats()
        after = pool.tiers()
        total = loader.stall_ns - s0
        stall[2] += total - sum(stall)  # the wait for the end of the stream
        out = {"policy": policy + (f":{stagers}" if stagers else "") or "all-DRAM",
               "epoch": ep, "seconds": dt,
               "samples_per_s": chk.count / dt, "gb_per_s": chk.count * REC / dt / 1e9,
               "records": chk.count, "complete": chk.complete(), "bad": chk.bad,
               "window": sampler.window, "shard_size": sampler.shard_size,
               "stall_s": total / 1e9, "stall_share": total / 1e9 / dt,
               "stall_first_batch_s": stall[0] / 1e9, "stall_first_window_s": stall[1] / 1e9,
               "stall_steady_s": stall[2] / 1e9, "first_window_records": first_window,
               "cpu_s": (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)}
        if ds.tiered:
            out.update(hits=st["hits"], misses=st["misses"],
                       hit_rate=st["hits"] / max(1, st["hits"] + st["misses"]),
                       stage_stall_s=st["stage_stall_ns"] / 1e9, prefetched=st["prefetched"],
                       fetched=st["fetched"], placed=st["placed"], evictions=st["evictions"],
                       private_reads=st["private_reads"], partial_reads=st["partial_reads"],
                       partial_bytes=st["partial_bytes"],
                       # copies staged (the tier's counter: a stager's before
                       # the first epoch, and the next epoch's first shards
                       # staged during this one, count here), plus the shards
                       # batches read into their own memory (no tier had room:
                       # a whole shard each, not counted by the tier), plus
                       # the blocks batches read in part instead (format 3)
                       nvme_bytes=after[mem_tier]["bytes_in"] - before[mem_tier]["bytes_in"] +
                       st["private_reads"] * ds.shards()["max_bytes"] + st["partial_bytes"])
            # this epoch's own: less what it staged for the next epoch's
            # first windows (the next reads those), plus what the previous
            # staged for it
            out.update(next_pass_bytes=st["next_pass_bytes"],
                       nvme_bytes_epoch=out["nvme_bytes"] - st["next_pass_bytes"] + prev_next)
            prev_next = st["next_pass_bytes"]
        before = after
        runs.append(out)
    loader.close()
    del loader, ds
    pool.close()
    first = runs[0]
    if epochs > 1:
        first["later"] = runs[1:]
    if setup_s:
        first["setup_s"] = setup_s
    return first


def mosaic_epoch(remote: Path, cache: Path, n: int, limit: str, workers: int,
                 seconds: float, block: int) -> dict:
    """MosaicML Streaming for one epoch or `seconds`, whichever ends first,
    in this (child) process. Configured as our side is: shards of the same
    bytes (MDSWriter size_limit), the cache (`local`) in /dev/shm as our dram
    tier is, limited to the same memory (cache_limit), and a shuffle of the
    same reach: py1br, blocks of 0.75..1.25 x `block` samples (our window
    of shards, in records), predownload the same number of samples (our
    engine's horizon), one canonical node (one host). Its defaults would shuffle
    blocks of max(4,000,000 / num_canonical_nodes, 2^18) samples: here the
    whole dataset, whose shards do not fit the cache (every sample a
    shard download: thrashing). samples/s from iter() on (the first batch
    included, as ours), and from its first batch on."""
    sys.path.insert(0, str(REPO / "bench"))
    import run_peers
    run_peers.stub_streaming_imports()
    import torch
    from streaming import StreamingDataLoader, StreamingDataset
    ds = StreamingDataset(remote=str(remote), local=str(cache), cache_limit=limit, shuffle=True,
                          shuffle_algo="py1br", shuffle_block_size=block, predownload=block,
                          num_canonical_nodes=1, batch_size=BATCH, shuffle_seed=7)
    dl = StreamingDataLoader(ds, batch_size=BATCH, num_workers=workers, drop_last=False,
                             collate_fn=lambda xs: torch.from_numpy(np.stack([x["rec"] for x in xs])))
    chk = Checker(n)
    t_start = time.perf_counter()
    it = iter(dl)
    chk.batch(next(it).numpy())
    t0 = time.perf_counter()
    first = chk.count
    for b in it:
        chk.batch(b.numpy())
        if time.perf_counter() - t0 > seconds:
            break
    t1 = time.perf_counter()
    dt = t1 - t0
    return {"policy": "mosaic", "seconds": t1 - t_start, "first_batch_s": t0 - t_start,
            "samples_per_s": chk.count / (t1 - t_start),
            "samples_per_s_after_first": (chk.count - first) / dt,
            "gb_per_s": chk.count * REC / (t1 - t_start) / 1e9, "records": chk.count,
            "epoch_share": chk.count / n, "complete": chk.complete(), "bad": chk.bad,
            "shuffle_block_size": block, "cache_limit": limit, "workers": workers}


def write_mds(npy: Path, out: Path, n: int, size_limit: int) -> None:
    sys.path.insert(0, str(REPO / "bench"))
    import run_peers
    run_peers.stub_streaming_imports()
    from streaming import MDSWriter
    arr = np.load(npy, mmap_mode="r")
    with MDSWriter(out=str(out), columns={"rec": f"ndarray:uint8:{REC}"},
                   size_limit=size_limit) as w:
        for i in range(n):
            w.write({"rec": np.asarray(arr[i])})


def child(a: argparse.Namespace) -> int:
    res = mosaic_epoch(Path(a.remote), Path(a.cache), a.n, a.limit, a.workers, a.seconds,
                       a.block)
    print(json.dumps(res))
    return 0


def median_run(runs: list[dict]) -> dict:
    """The run whose samples/s is the median of the rounds', with the
    spread (min, max) of every round."""
    srt = sorted(runs, key=lambda r: r["samples_per_s"])
    m = dict(srt[len(srt) // 2])
    m["min_samples_per_s"] = srt[0]["samples_per_s"]
    m["max_samples_per_s"] = srt[-1]["samples_per_s"]
    m["rounds"] = len(srt)
    return m


def default_stagers(shard: int) -> int:
    """The engine's default stager count for shards of this many bytes
    (src/tier/engine.c def_stagers: two queues of 8 x 1 MiB reads)."""
    q = 8 << 20
    return min(max(2 * q // min(max(shard, 1), q), 2), 4)


def chart(res: dict, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in res["runs"] if "samples_per_s" in r]
    names = [r["policy"] for r in rows]
    vals = [r["samples_per_s"] for r in rows]
    fig, ax = plt.subplots(figsize=(8, 4))
    colors = ["#888888" if r["policy"] in LIMITS else
              "#cc7722" if r["policy"] == "mosaic" else "#2266aa" for r in rows]
    lo = [r["samples_per_s"] - r.get("min_samples_per_s", r["samples_per_s"]) for r in rows]
    hi = [r.get("max_samples_per_s", r["samples_per_s"]) - r["samples_per_s"] for r in rows]
    ax.barh(names, vals, color=colors, xerr=[lo, hi], capsize=3)
    for i, v in enumerate(vals):
        ax.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("samples/s (8 KiB records)")
    ax.set_title(f"{res['gib']} GiB dataset on an nvme tier, {res['mem']} memory tier, one epoch")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=8.0)
    ap.add_argument("--mem", default="1G")
    ap.add_argument("--shard-kib", type=int, default=0,
                    help="bytes of records per shard at ingest, KiB (the dataset's layout; "
                         "MosaicML's MDS shards get the same size); 0: the importer's "
                         "default")
    ap.add_argument("--dir", default="/var/tmp/tiers")
    ap.add_argument("--quick", action="store_true", help="512 MiB and 64 MiB: a smoke run")
    ap.add_argument("--no-mosaic", action="store_true")
    ap.add_argument("--demand-only", action="store_true",
                    help="the limits (one round) and the demand runs only: no policy "
                         "rounds, no MosaicML; writes OUT-demand.json")
    ap.add_argument("--window-x", type=float, default=1.0,
                    help="the sampler's window, as a multiple of what window=\"auto\" gives "
                         "(> 2: the window's shards no longer fit the budget)")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help="the policies of the rounds, comma-separated")
    ap.add_argument("--demand", type=float, default=0.8,
                    help="the demand runs' rate, as a share of the bound (default 0.8)")
    ap.add_argument("--demand-epochs", type=int, default=2,
                    help="epochs back to back per demand run (the first cold)")
    ap.add_argument("--setup-s", type=float, default=0.0,
                    help="demand runs: seconds between the loader's construction and the "
                         "first epoch (building the model, standing in)")
    ap.add_argument("--demand-policies", default="lookahead",
                    help="the policies of the demand runs, comma-separated")
    ap.add_argument("--out", default=None,
                    help="OUT of OUT.json and OUT.png (default docs/benchmarks/tiers-DATE)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--remote", help=argparse.SUPPRESS)
    ap.add_argument("--cache", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--limit", help=argparse.SUPPRESS)
    ap.add_argument("--workers", type=int, default=2, help=argparse.SUPPRESS)
    ap.add_argument("--block", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--seconds", type=float, default=120,
                    help="time budget of the MosaicML run (it stops at the epoch's end first)")
    ap.add_argument("--home-rate", default="off",
                    help="hold the disk under --dir at this read rate (bytes/s, K/M/G), "
                         "with the kernel's block throttle; off: as it is")
    ap.add_argument("--rounds", type=int, default=3,
                    help="rounds of the limits and the policies, interleaved; medians reported")
    a = ap.parse_args()
    if a.child:
        return child(a)
    if a.quick:
        a.gib, a.mem = 0.5, "64M"
    if a.demand_only:
        a.rounds, a.no_mosaic = 1, True
    from cxl_dataloader import CXLMemoryPool
    mem = {"G": 1 << 30, "M": 1 << 20}[a.mem[-1]] * int(a.mem[:-1])
    n = int(a.gib * (1 << 30)) // REC
    work = Path(a.dir) / f"bench-{uuid.uuid4().hex[:8]}"
    work.mkdir(parents=True)
    throttle = None
    if a.home_rate != "off":
        sys.path.insert(0, str(REPO / "bench"))
        from throttle import Throttle, disk_of, parse_size
        throttle = Throttle(disk_of(work), parse_size(a.home_rate))
        throttle.join()
    name = f"bt{uuid.uuid4().hex[:6]}"
    res: dict = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                 "command": "python3 bench/bench_tiers.py " + " ".join(sys.argv[1:]),
                 "gib": a.gib, "mem": a.mem, "records": n, "batch": BATCH,
                 "home_rate": a.home_rate, "throttle": throttle.kind if throttle else None,
                 "machine": machine(), "runs": []}
    seqread = REPO / "build" / "bench_seqread"
    if not seqread.exists():
        print(f"{seqread} missing: cmake -S . -B build -G Ninja && ninja -C build", file=sys.stderr)
        return 1
    t_all = time.perf_counter()
    try:
        npy = work / "src.npy"
        log(f"writing {n} records ({a.gib} GiB) to {npy}")
        write_npy(npy, n)
        shard = a.shard_kib << 10  # 0: the importer's default
        home = work / "home.tier"
        spec = f"shm:{name}"
        pool = CXLMemoryPool(spec, create=True, meta_bytes=64 << 20,
                             tiers=[f"dram=shm:{name}.dram:{mem + (2 << 20)}",
                                    f"nvme=file:{home}:{int(n * REC * 1.05) + (64 << 20)}"])
        log("ingest into the nvme home tier")
        t = time.perf_counter()
        kw_shard = {"shard_bytes": shard} if shard else {}
        pool._pool.import_("d", str(npy), format="npy", **kw_shard)
        res["ingest_s"] = time.perf_counter() - t
        tiers = pool.tiers()
        mem_tier = next(i for i, t in enumerate(tiers) if not t["staged"])
        budget = tiers[mem_tier]["capacity"] // 4 * 3
        res["budget"] = budget
        from cxl_dataloader import CXLDataset
        ds_ = CXLDataset(pool, "d")
        shard = ds_.shards()["max_bytes"]
        res["shard_bytes"] = shard
        res["stage_order"] = ds_.stage_order(budget)
        unit = res["stage_order"]["unit_bytes"] or shard  # what the stagers read
        log(f"shards of {shard >> 20} MiB; staging {res['stage_order']}")
        del ds_
        # all in DRAM: a pool of one shm tier, alive for every round
        dname = name + "dram"
        dpool = CXLMemoryPool(dname, create=True, size=int(n * REC * 1.05) + (64 << 20))
        dpool._pool.import_("d", str(npy), format="npy", **kw_shard)
        def disk_read(*shard_order: int) -> dict:
            """bench_seqread over the dataset's bytes of the tier file, the
            page cache dropped first: sequential, or with (SHARD, STREAMS,
            SEED) whole shards in a random order."""
            drop_caches()
            p = subprocess.run([str(seqread), str(home), str(2 << 20), str(n * REC),
                                *map(str, shard_order)],
                               capture_output=True, text=True, check=True)
            sr = json.loads(p.stdout)
            sr["samples_per_s"] = sr["gb_per_s"] * 1e9 / REC
            return sr

        rounds: list[list[dict]] = []
        for rnd in range(a.rounds):
            runs: list[dict] = []
            # the tier's own sequential read bandwidth over the dataset's bytes
            sr = disk_read()
            runs.append({"policy": "seq read", "samples_per_s": sr["samples_per_s"],
                         "gb_per_s": sr["gb_per_s"], "o_direct": sr["o_direct"]})
            # the same bytes read as the stagers read them: whole units in
            # a random order, as many at once as there are stagers
            sr = disk_read(unit, default_stagers(unit), rnd + 1)
            runs.append({"policy": "shard read", "samples_per_s": sr["samples_per_s"],
                         "gb_per_s": sr["gb_per_s"], "o_direct": sr["o_direct"],
                         "streams": sr["streams"]})
            drop_caches()
            runs.append(cxl_epoch(f"shm:{dname}", "d", n, None, budget, 0))
            dram_now = runs[-1]["samples_per_s"]
            for pol in [] if a.demand_only else a.policies.split(","):
                pool.migrate("d", "nvme")  # no copies in memory: every run starts cold
                # the disk drifts within minutes: each epoch also gets the
                # sequential read just before it, and its share of that bound
                seq_now = disk_read()["samples_per_s"]
                drop_caches()
                log(f"round {rnd}: {pol}")
                r = cxl_epoch(spec, "d", n, pol, budget, mem_tier, window_x=a.window_x)
                r["seq_read_before_sps"] = seq_now
                r["vs_bound_before"] = r["samples_per_s"] / min(seq_now, dram_now)
                runs.append(r)
            for r in runs:
                log(f"round {rnd}: {r['policy']}: {r['samples_per_s']:.0f} samples/s" +
                    (f", {r['vs_bound_before']:.2f} of the bound read just before it"
                     if "vs_bound_before" in r else "") +
                    (f", hit rate {r['hit_rate']:.3f}, nvme {r['nvme_bytes'] / (n * REC):.3f}x, "
                     f"loop stall {r['stall_share']:.3f}, complete {r['complete']}"
                     if "hit_rate" in r else ""))
            rounds.append(runs)
        res["rounds"] = rounds
        res["runs"] = [median_run([rd[i] for rd in rounds]) for i in range(len(rounds[0]))]
        dpool.close()
        CXLMemoryPool.destroy(dname)
        all_dram = next(r["samples_per_s"] for r in res["runs"] if r["policy"] == "all-DRAM")
        res["demand_runs"] = []
        for pol in [p_ for p_ in a.demand_policies.split(",") if p_]:
            for pacing in ("batch", "schedule"):
                pool.migrate("d", "nvme")
                # the disk's rate drifts over minutes on a shared VM: the
                # bound of this demand run is read again right before it
                seq_now = disk_read()["samples_per_s"]
                bound = min(seq_now, all_dram)
                drop_caches()
                r = cxl_epoch(spec, "d", n, pol, budget, mem_tier, demand_sps=a.demand * bound,
                              pacing=pacing, window_x=a.window_x, epochs=a.demand_epochs,
                              setup_s=a.setup_s)
                r["policy"] = f"{pol} @{a.demand:.0%}"
                r["demand_sps"] = a.demand * bound
                r["bound_sps"] = bound
                r["seq_read_before_sps"] = seq_now
                r["pacing"] = pacing
                res["demand_runs"].append(r)
                log(f"{pol} at {a.demand:.0%} of {bound:.0f}, pacing {pacing}: "
                    f"{r['samples_per_s']:.0f} samples/s, stall {r['stall_share']:.4f} of the "
                    f"epoch (first batch {r['stall_first_batch_s']:.3f} s, rest of the first "
                    f"window {r['stall_first_window_s']:.3f} s, after it "
                    f"{r['stall_steady_s']:.3f} s of {r['seconds']:.2f} s)" +
                    "".join(f"; epoch {x['epoch']}: {x['samples_per_s']:.0f} samples/s, stall "
                            f"{x['stall_share']:.4f} (first batch {x['stall_first_batch_s']:.3f} "
                            f"s), complete {x['complete']}" for x in r.get("later", [])))
        res["demand"] = res["demand_runs"][0] if res["demand_runs"] else None
        pool.close()
        if not a.no_mosaic:
            remote = work / "mds"
            cache = Path("/dev/shm") / f"mds-{name}"  # its cache in memory, as our dram tier
            log("MDS shards for MosaicML Streaming")
            t = time.perf_counter()
            # the same records per shard as ours (size_limit counts the
            # shard file: records, 4-byte offsets, a header; the slack is
            # less than one record), but no more than a quarter of the
            # cache: Streaming refuses a cache_limit below four of its
            # largest shards
            write_mds(npy, remote, n, min(shard + REC, 256 << 20, mem // 4 - 2 * REC))
            res["mds_write_s"] = time.perf_counter() - t
            # our window, in records (any policy's run: the order is the same)
            la = next(r for r in res["runs"] if r["policy"] not in LIMITS)
            block = la["window"] * la["shard_size"]
            drop_caches()
            try:
                p = subprocess.run([sys.executable, __file__, "--child", "--remote", str(remote),
                                    "--cache", str(cache), "--n", str(n), "--limit",
                                    f"{mem >> 20}mb", "--workers", "2", "--seconds",
                                    str(a.seconds), "--block", str(block)],
                                   capture_output=True, text=True)
            finally:
                shutil.rmtree(cache, ignore_errors=True)
            if p.returncode:
                res["runs"].append({"policy": "mosaic", "error": p.stderr[-2000:]})
                log("mosaic failed: " + p.stderr[-500:])
            else:
                r = json.loads(p.stdout.strip().splitlines()[-1])
                res["runs"].append(r)
                log(f"mosaic {r['samples_per_s']:.0f} samples/s, complete {r['complete']}")
        CXLMemoryPool.destroy(spec)
    finally:
        for n_ in (name, name + "dram"):  # before the tier file goes
            try:
                CXLMemoryPool.destroy(n_)
            except Exception:  # noqa: BLE001
                pass
        shutil.rmtree(work, ignore_errors=True)
        if throttle:
            throttle.close()
    res["wall_s"] = time.perf_counter() - t_all
    res["loadavg_end"] = open("/proc/loadavg").read().strip()
    out = Path(a.out) if a.out else REPO / "docs" / "benchmarks" / (
        "tiers-" + res["date"][:13] + res["date"][14:16])
    if a.demand_only:
        out.with_name(out.name + "-demand.json").write_text(json.dumps(res, indent=1))
        print(demand_table(res))
        return 0
    out.with_suffix(".json").write_text(json.dumps(res, indent=1))
    chart(res, out.with_suffix(".png"))
    print(table(res))
    print()
    by = {r["policy"]: r for r in res["runs"]}
    if "lookahead" in by and "shard read" in by:
        print(f"lookahead / shard read: {by['lookahead']['samples_per_s'] / by['shard read']['samples_per_s']:.2f}; "
              f"shard read / seq read: {by['shard read']['samples_per_s'] / by['seq read']['samples_per_s']:.2f}")
        print()
    print(demand_table(res))
    return 0


def nvme_cell(r: dict, res: dict) -> str:
    """The epoch's own home bytes over the dataset, and in parentheses all
    it read (with the next epoch's first windows staged during its last),
    where the loader counted both."""
    if "nvme_bytes" not in r:
        return ""
    ds = res["records"] * REC
    if "nvme_bytes_epoch" not in r:
        return f"{r['nvme_bytes'] / ds:.3f}"
    return f"{r['nvme_bytes_epoch'] / ds:.3f} ({r['nvme_bytes'] / ds:.3f})"


def table(res: dict) -> str:
    by = {r["policy"]: r for r in res["runs"]}
    bound = min(by["seq read"]["samples_per_s"], by["all-DRAM"]["samples_per_s"])
    # vs bound: against the median limits of all rounds; vs bound just
    # before: each round's epoch against the sequential read made right
    # before it (and that round's all-DRAM), median and range over rounds
    before: dict = {}
    for rd in res.get("rounds", []):
        for r in rd:
            if "vs_bound_before" in r:
                before.setdefault(r["policy"], []).append(r["vs_bound_before"])
    L = ["| run | samples/s (median; min..max) | GB/s | vs bound | vs bound just before "
         "(median; min..max) | nvme bytes / dataset: the epoch's (all read) | hit rate | "
         "loop stall | "
         "staging stall s | complete |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in res["runs"]:
        if "error" in r:
            L.append(f"| {r['policy']} | failed | | | | | | | | |")
            continue
        b = sorted(before.get(r["policy"], []))
        vb = f"{statistics.median(b):.2f} ({b[0]:.2f}..{b[-1]:.2f})" if b else ""
        nb = nvme_cell(r, res)
        hr = f"{r['hit_rate']:.3f}" if "hit_rate" in r else ""
        st = f"{r['stall_share']:.3f}" if "stall_share" in r else ""
        ss = f"{r['stage_stall_s']:.2f}" if "stage_stall_s" in r else ""
        ok = "" if "complete" not in r else ("yes" if r["complete"] else "NO")
        spread = (f" ({r['min_samples_per_s']:,.0f}..{r['max_samples_per_s']:,.0f})"
                  if "min_samples_per_s" in r else "")
        L.append(f"| {r['policy']} | {r['samples_per_s']:,.0f}{spread} | {r['gb_per_s']:.2f} | "
                 f"{r['samples_per_s'] / bound:.2f} | {vb} | {nb} | {hr} | {st} | {ss} | {ok} |")
    return "\n".join(L)


def demand_table(res: dict) -> str:
    """The demand runs (lookahead at 80% of the bound, the bound read again
    before each): the loop's stall split into start-up (the first batch),
    the rest of the first window and the steady state after it, each as a
    share of the epoch."""
    by = {r["policy"]: r for r in res["runs"]}
    bound = min(by["seq read"]["samples_per_s"], by["all-DRAM"]["samples_per_s"])
    L = ["| policy | pacing | epoch | samples/s | vs bound | epoch s | loop stall, share | "
         "start-up (first batch) | rest of first window | steady state | staging stall s | "
         "nvme bytes / dataset: the epoch's (all read) | complete |",
         "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r, d in ((r, x) for r in res.get("demand_runs", []) for x in [r] + r.get("later", [])):
        dt = d["seconds"]
        L.append(f"| {r['policy'].split(' ')[0]} | {r['pacing']} | {d.get('epoch', 0)} | "
                 f"{d['samples_per_s']:,.0f} | "
                 f"{d['samples_per_s'] / r.get('bound_sps', bound):.2f} | "
                 f"{dt:.2f} | {d['stall_s']:.3f} s, {d['stall_share']:.4f} | "
                 f"{d['stall_first_batch_s']:.3f} s, {d['stall_first_batch_s'] / dt:.4f} | "
                 f"{d['stall_first_window_s']:.3f} s, {d['stall_first_window_s'] / dt:.4f} | "
                 f"{d['stall_steady_s']:.3f} s, {d['stall_steady_s'] / dt:.4f} | "
                 f"{d['stage_stall_s']:.2f} | {nvme_cell(d, res)} | "
                 f"{'yes' if d['complete'] else 'NO'} |")
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
