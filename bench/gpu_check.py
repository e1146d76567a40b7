"""Every acceptance figure of the GPU path in one run on a CUDA machine
(docs/gpu.md says how to run it: bench/gpu_check.sh builds first).

  h2d       host-to-device bandwidth of the same batches (8 KiB token
            records x 256 = 2 MiB) from registered ring slots, from torch
            pinned tensors, and the torch way (pageable -> pin_memory() ->
            device); ratios registered/pinned (>= 0.9) and registered/torch
            way (>= 1.5)
  loader    CXLDataLoader(batch 256, 8 threads, shuffle) -> GPU, against
            min(registered H2D, the same loader on the CPU alone); >= 0.9
  overlap   a bf16 matmul loop consuming the batches on the device, its step
            sized so the loop asks for about half what the loader delivers;
            the time it waits for data: (T_loader - T_resident) / T_loader,
            < 2%
  gds       an 8 GiB dataset of a file: pool read into device memory by the
            file tier's reader (cuFile: gds, else compat, else posix: the
            mode is printed) against an O_DIRECT read of the same bytes into
            host memory with the same threads and chunks; >= 0.8
  leak      1000 epochs of a tiny dataset with device="cuda": device memory
            (allocated, reserved, free), the process's resident and pinned
            memory, registrations, at epoch 10 and at the end
Ratios of figures measured in this run, medians of `--rounds` alternating
rounds with their spread. Writes everything to OUT/gpu_check.json and prints
a short table last. Environment: GDS_GIB (default 8), LEAK_EPOCHS (1000).
"""
from __future__ import annotations

import argparse
import itertools
import json
import mmap
import os
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

import numpy as np
import torch

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool, gds

REC = 8192          # 8 KiB token records (4096 uint16)
BATCH = 256
THREADS = 8
GiB = 1 << 30


def log(*a: Any) -> None:
    print(*a, flush=True)


def med(xs: list[float]) -> dict:
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def status_kb(key: str) -> int:
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return -1


def make_tokens(path: str, n: int) -> None:
    """n records of 4096 uint16 tokens: one 64 MiB piece of a pattern
    (record i's token j is (i * 7 + j) % 65521) written over and over, so
    that making 8 GiB costs a write, not a computation."""
    per = min(n, (64 << 20) // REC)
    ids = np.arange(per, dtype=np.uint32)[:, None] * 7
    piece = ((ids + np.arange(REC // 2, dtype=np.uint32)) % 65521).astype(np.uint16).tobytes()
    with open(path, "wb") as f:
        for lo in range(0, n, per):
            f.write(piece[:min(per, n - lo) * REC])


def ingest(pool: CXLMemoryPool, name: str, n: int, scratch: str) -> CXLDataset:
    src = f"{scratch}/{name}.raw"
    make_tokens(src, n)
    try:
        pool.ingest(name, src, format="raw", record_size=REC, dtype="uint16", progress=False)
    finally:
        os.remove(src)
    return CXLDataset(pool, name)


def timed(fn: Callable[[], Any]) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return time.perf_counter() - t0


# -- h2d ---------------------------------------------------------------------
def check_h2d(ds: CXLDataset, rounds: int) -> dict:
    """The same 16 batches (2 MiB each) copied 20 times each way."""
    k, reps = 16, 20
    dl = CXLDataLoader(ds, batch_size=BATCH, num_workers=THREADS, pin_memory=True, seed=1,
                       shuffle=True)
    it = iter(dl)
    slots = [next(it) for _ in range(k)]  # tensors viewing registered ring slots
    dev = [torch.empty_like(s, device="cuda") for s in slots]
    pinned = [torch.empty_like(s).pin_memory() for s in slots]
    for p, s in zip(pinned, slots):
        p.copy_(s)
    pageable = [s.clone() for s in slots]
    nbytes = sum(s.numel() * s.element_size() for s in slots) * reps
    stream = torch.cuda.Stream()

    def copies(src: list) -> Callable[[], None]:
        def run() -> None:
            with torch.cuda.stream(stream):
                for _ in range(reps):
                    for d, h in zip(dev, src):
                        d.copy_(h, non_blocking=True)
            stream.synchronize()
        return run

    def torch_way() -> None:
        for _ in range(reps):
            for d, h in zip(dev, pageable):
                d.copy_(h.pin_memory(), non_blocking=True)

    reg, pin, tw = [], [], []
    for _ in range(rounds):
        reg.append(nbytes / timed(copies(slots)) / 1e9)
        pin.append(nbytes / timed(copies(pinned)) / 1e9)
        tw.append(nbytes / timed(torch_way) / 1e9)
    assert torch.equal(dev[-1].cpu(), slots[-1]), "copied bytes differ from the slot's"
    del slots
    it.close()
    st = dl.stats()["gpu"]["slots"]
    return {"registered_GBps": med(reg), "pinned_GBps": med(pin), "torch_way_GBps": med(tw),
            "ratio_registered_pinned": statistics.median(r / p for r, p in zip(reg, pin)),
            "ratio_registered_torch_way": statistics.median(r / t for r, t in zip(reg, tw)),
            "slot_registration": st, "bytes_per_round": nbytes}


# -- loader -> GPU ------------------------------------------------------------
def run_loader(ds: CXLDataset, device: Any, nb: int, seed: int) -> float:
    dl = CXLDataLoader(ds, batch_size=BATCH, num_workers=THREADS, shuffle=True, seed=seed,
                       device=device)
    it = iter(dl)
    next(it)  # threads started, ring filled: the steady state is timed
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in itertools.islice(it, nb):
        pass
    torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    it.close()
    return nb * BATCH * REC / dt / 1e9


def check_loader(ds: CXLDataset, h2d: float, rounds: int) -> dict:
    nb = min(len(ds) // BATCH - 2, 1000)
    cpu, gpu_ = [], []
    for r in range(rounds):
        cpu.append(run_loader(ds, None, nb, seed=r))
        gpu_.append(run_loader(ds, "cuda", nb, seed=r))
    bound = min(h2d, statistics.median(cpu))
    return {"cpu_GBps": med(cpu), "gpu_GBps": med(gpu_), "h2d_GBps": h2d, "bound_GBps": bound,
            "ratio_to_bound": statistics.median(gpu_) / bound, "batches": nb}


# -- overlap --------------------------------------------------------------------
def check_overlap(ds: CXLDataset, loader_rate: float, rounds: int) -> dict:
    """Step: consume the batch (sum as bf16) and one n x n bf16 matmul; n the
    smallest whose step takes at least twice a batch's delivery time."""
    batch_s = BATCH * REC / (loader_rate * 1e9)
    x0 = torch.zeros(BATCH, REC // 2, dtype=torch.uint16, device="cuda")
    acc = torch.zeros((), dtype=torch.float32, device="cuda")
    chosen = None
    for n in (1024, 2048, 3072, 4096, 6144, 8192, 12288, 16384):
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)

        def step(x: torch.Tensor) -> None:
            acc.add_(x.to(torch.bfloat16).sum(dtype=torch.float32))
            torch.mm(a, b)
        for _ in range(3):
            step(x0)
        t = timed(lambda: [step(x0) for _ in range(50)]) / 50
        if t >= 2 * batch_s:
            chosen = (n, t)
            break
    assert chosen is not None
    n, t_step = chosen
    steps = min(1000, len(ds) // BATCH - 2)
    waits, stalls, t_res, t_load = [], [], [], []
    for r in range(rounds):
        tr = timed(lambda: [step(x0) for _ in range(steps)])
        dl = CXLDataLoader(ds, batch_size=BATCH, num_workers=THREADS, shuffle=True, seed=10 + r,
                           device="cuda")
        it = iter(dl)
        step(next(it))
        dl.stall_seconds = 0

        def consume() -> None:
            for x in itertools.islice(it, steps):
                step(x)
        tl = timed(consume)
        stalls.append(dl.stall_seconds / tl)
        it.close()
        t_res.append(tr)
        t_load.append(tl)
        waits.append(max(0.0, (tl - tr) / tl))
    return {"matmul_n": n, "step_ms": t_step * 1e3, "batch_delivery_ms": batch_s * 1e3,
            "demand_over_bound": batch_s / t_step, "steps": steps,
            "resident_s": med(t_res), "loader_s": med(t_load), "wait_fraction": med(waits),
            "engine_stall_fraction": med(stalls)}


# -- GDS ------------------------------------------------------------------------
def odirect_read(path: str, reads: list[tuple[int, int, int]], threads: int, chunk: int) -> float:
    """GB/s of reading the same bytes with O_DIRECT into host memory (one
    page-aligned buffer per thread, reused), widened to 4 KiB where a read
    is not aligned."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    bufs = [mmap.mmap(-1, chunk + 8192) for _ in range(threads)]
    shares = [reads[i::threads] for i in range(threads)]

    def worker(i: int) -> int:
        mv = memoryview(bufs[i])
        got = 0
        for off, n, _ in shares[i]:
            lo = off - off % 4096
            hi = -(-(off + n) // 4096) * 4096
            k = os.preadv(fd, [mv[:hi - lo]], lo)
            assert k == hi - lo, (off, n, k)
            got += n
        return got
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        total = sum(ex.map(worker, range(threads)))
    dt = time.perf_counter() - t0
    os.close(fd)
    return total / dt / 1e9


def drop_cache(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)


def check_gds(scratch_disk: str, scratch_mem: str, gib: float, rounds: int) -> dict:
    n = int(gib * GiB) // REC
    path = f"{scratch_disk}/gds-{uuid.uuid4().hex[:8]}.pool"
    spec = f"file:{path}"
    t0 = time.perf_counter()
    pool = CXLMemoryPool(spec, create=True, size=n * REC + n * REC // 16 + (256 << 20))
    try:
        ds = ingest(pool, "gds", n, scratch_mem)
        make_s = time.perf_counter() - t0
        chunk = 8 << 20
        r = gds.FileRangeReader(ds, "cuda", threads=THREADS, chunk=chunk)
        reads = r.plan(0, n)
        od, gd = [], []
        probe = None
        for _ in range(rounds):
            drop_cache(path)
            od.append(odirect_read(path, reads, THREADS, chunk))
            drop_cache(path)
            torch.cuda.synchronize()
            t1 = time.perf_counter()
            out = r.read(0, n)
            torch.cuda.synchronize()
            gd.append(n * REC / (time.perf_counter() - t1) / 1e9)
            probe = (out[[0, n // 2, n - 1]].cpu(), [0, n // 2, n - 1])
            del out
        rows, ids = probe
        ok = all(torch.equal(rows[i], ds[j]) for i, j in enumerate(ids))
        st = r.stats()
        r.close()
        return {"gib": n * REC / GiB, "mode": st["mode"], "why": st["why"],
                "gds_GBps": med(gd), "odirect_GBps": med(od),
                "ratio_gds_odirect": statistics.median(g / o for g, o in zip(gd, od)),
                "rows_checked_equal": ok, "aligned_reads": st["aligned_reads"],
                "unaligned_reads": st["unaligned_reads"], "setup_s": make_s, "path": path}
    finally:
        pool.close()
        CXLMemoryPool.destroy(spec)


# -- leak ---------------------------------------------------------------------
def check_leak(pool: CXLMemoryPool, scratch: str, epochs: int) -> dict:
    ds = ingest(pool, "tiny", 64, scratch)
    dl = CXLDataLoader(ds, batch_size=16, num_workers=2, shuffle=True, seed=3, device="cuda")

    def snap() -> dict:
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        return {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved(),
                "device_free": free, "rss_kb": status_kb("VmRSS"), "pinned_kb": status_kb("VmPin")}
    at = {}
    t0 = time.perf_counter()
    for e in range(epochs):
        n = 0
        for b in dl:
            n += int(b.shape[0])
        assert n == 64
        if e + 1 == 10:
            at["epoch10"] = snap()
    at["end"] = snap()
    st = dl.stats()["gpu"]
    a, z = at["epoch10"], at["end"]
    flat = (z["allocated"] == a["allocated"] and z["reserved"] == a["reserved"]
            and z["rss_kb"] - a["rss_kb"] < 16 << 10 and z["pinned_kb"] <= a["pinned_kb"]
            and st["slots"]["chunks"] == 0)
    return {"epochs": epochs, "seconds": time.perf_counter() - t0, "snapshots": at,
            "passes": st["passes"], "batches": st["batches"], "last_pass_slots": st["slots"],
            "flat": flat}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--dataset-gib", type=float, default=2.0)
    ap.add_argument("--skip", default="", help="comma list of checks to skip")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("gpu_check: no CUDA device", file=sys.stderr)
        return 2
    skip = set(filter(None, args.skip.split(",")))
    scratch_mem = "/dev/shm"
    scratch_disk = os.environ.get("GDS_DIR", "/var/tmp")
    res: dict[str, Any] = {
        "env": {"torch": torch.__version__, "cuda": torch.version.cuda,
                "device": torch.cuda.get_device_name(0), "python": sys.version.split()[0],
                "cpus": os.cpu_count(), "loadavg_start": os.getloadavg(),
                "rounds": args.rounds}}
    try:
        from cuda.bindings import cufile
        res["env"]["cufile_version"] = cufile.get_version()
    except Exception as e:
        res["env"]["cufile_version"] = f"unavailable: {e}"
    log("env:", json.dumps(res["env"]))
    name = f"gpucheck-{uuid.uuid4().hex[:8]}"
    n = int(args.dataset_gib * GiB) // REC
    pool = CXLMemoryPool(name, create=True, size=n * REC + n * REC // 16 + (512 << 20))
    t_all = time.perf_counter()
    try:
        ds = ingest(pool, "tokens", n, scratch_mem)
        log(f"dataset: {len(ds)} records of {REC} B in shm:{name}")
        if "h2d" not in skip:
            res["h2d"] = check_h2d(ds, args.rounds)
            log("h2d:", json.dumps(res["h2d"]))
        h2d = res.get("h2d", {}).get("registered_GBps", {}).get("median", float("inf"))
        if "loader" not in skip:
            res["loader"] = check_loader(ds, h2d, args.rounds)
            log("loader:", json.dumps(res["loader"]))
        if "overlap" not in skip:
            rate = res.get("loader", {}).get("gpu_GBps", {}).get("median", 10.0)
            res["overlap"] = check_overlap(ds, rate, args.rounds)
            log("overlap:", json.dumps(res["overlap"]))
        if "leak" not in skip:
            res["leak"] = check_leak(pool, scratch_mem, int(os.environ.get("LEAK_EPOCHS", 1000)))
            log("leak:", json.dumps(res["leak"]))
    finally:
        pool.close()
        CXLMemoryPool.destroy(name)
    if "gds" not in skip:
        res["gds"] = check_gds(scratch_disk, scratch_mem, float(os.environ.get("GDS_GIB", 8)),
                               max(1, args.rounds - 1))
        log("gds:", json.dumps(res["gds"]))
    res["env"]["loadavg_end"] = os.getloadavg()
    res["env"]["seconds"] = time.perf_counter() - t_all
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "gpu_check.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)

    rows = []

    def row(what: str, value: float, want: str, ok: bool) -> None:
        rows.append((what, f"{value:.3f}", want, "PASS" if ok else "FAIL"))
    if "h2d" in res:
        h = res["h2d"]
        row("H2D registered slots / torch pinned", h["ratio_registered_pinned"], ">= 0.90",
            h["ratio_registered_pinned"] >= 0.9)
        row("H2D registered slots / torch pin_memory way", h["ratio_registered_torch_way"],
            ">= 1.50", h["ratio_registered_torch_way"] >= 1.5)
    if "loader" in res:
        lo = res["loader"]
        row("loader->GPU / min(H2D, CPU gather)", lo["ratio_to_bound"], ">= 0.90",
            lo["ratio_to_bound"] >= 0.9)
    if "overlap" in res:
        w = res["overlap"]["wait_fraction"]["median"]
        row("matmul loop time waiting for data", w, "< 0.02", w < 0.02)
    if "gds" in res:
        g = res["gds"]
        row(f"GDS ({g['mode']}) / O_DIRECT, {g['gib']:.0f} GiB", g["ratio_gds_odirect"],
            ">= 0.80", g["ratio_gds_odirect"] >= 0.8 and g["rows_checked_equal"])
    if "leak" in res:
        lk = res["leak"]
        row(f"{lk['epochs']} epochs: memory flat (1 = yes)", float(lk["flat"]), "= 1", lk["flat"])
    log("")
    log(f"gpu_check on {res['env']['device']}, torch {res['env']['torch']}, load "
        f"{res['env']['loadavg_start'][0]:.1f}->{res['env']['loadavg_end'][0]:.1f}, "
        f"{res['env']['seconds']:.0f} s; JSON: {os.path.join(args.out, 'gpu_check.json')}")
    w0 = max(len(r[0]) for r in rows)
    for r in rows:
        log(f"{r[0]:<{w0}}  {r[1]:>8}  {r[2]:>8}  {r[3]}")
    return 0 if all(r[3] == "PASS" for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
