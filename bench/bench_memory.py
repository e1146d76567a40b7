#!/usr/bin/env python3
"""Memory of 4 data-parallel ranks reading one dataset: one pool vs own copies.

Three runs of 4 ranks (torch.multiprocessing.spawn, each in a gloo process
group), measured while all 4 are alive, after they finished their work:
  baseline  each rank imports torch and cxl_dataloader, joins the group and
            does nothing else
  pool      each rank iterates the whole dataset (every record, shuffled with
            its own seed, batch 32) through CXLDataset + CXLDataLoader from
            one shm pool, so every rank maps every page of it
  getitem   each rank reads every record as ds[i] (shuffled), which views the
            pool through the dataset's private copy-on-write mapping, and
            writes into one of them (its own copy of that page)
  copy      each rank np.fromfile's its own copy of the same bytes
Rank 0 gathers the ranks' pids and sums Pss from /proc/PID/smaps_rollup.
PSS divides each shared page among the processes mapping it, so the pool's
pages count once in the total however many ranks map them; the page cache
of the source file is in no process and is not counted.

Bound (pool, getitem): total PSS <= 1.2 x dataset + total PSS of the
baseline run.

    python3 bench/bench_memory.py [--gib 4] [--copy-gib N] [--dir /var/tmp]
The environment variable CXLP_BENCH_MEMORY_GIB overrides --gib's default
(CI uses 1). --copy-gib (default: --gib) sizes the copy run separately,
because 4 private copies need 4 x the dataset in RAM.
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if list((ROOT / "python" / "cxl_dataloader").glob("_core*.so")):
    sys.path.insert(0, str(ROOT / "python"))  # an in-tree build; else the installed package

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.multiprocessing as mp  # noqa: E402

WORLD = 4
REC = 8192


def pss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise RuntimeError(f"no Pss in /proc/{pid}/smaps_rollup")


def rank_main(rank: int, mode: str, spec: str, src: str, port: int, out: str) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    import cxl_dataloader  # noqa: F401  (the baseline imports it too)
    from cxl_dataloader import CXLDataLoader, CXLDataset
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    keep = None
    records = 0
    t0 = time.perf_counter()
    if mode == "pool":
        ds = CXLDataset(spec, "data")
        dl = CXLDataLoader(ds, batch_size=32, shuffle=True, seed=rank, num_workers=2)
        for b in dl:
            records += b.shape[0]
        keep = (ds, dl)
    elif mode == "getitem":
        ds = CXLDataset(spec, "data")
        for i in np.random.default_rng(rank).permutation(len(ds)).tolist():
            records += ds[i][0].item() >= 0
        t = ds[rank]
        t += 1  # a write stays in this rank: one page of its own
        keep = (ds, t)
    elif mode == "copy":
        keep = np.fromfile(src, dtype=np.uint8)
        records = keep.size // REC
    el = time.perf_counter() - t0
    pids = [None] * WORLD
    dist.all_gather_object(pids, os.getpid())
    dist.barrier()  # everyone is done and still holds what it read
    if rank == 0:
        per = {pid: pss_kib(pid) for pid in pids}
        Path(out).write_text(json.dumps({"pss_kib": list(per.values()),
                                         "total_kib": sum(per.values()),
                                         "records_rank0": records, "seconds_rank0": el}))
    dist.barrier()
    del keep
    dist.destroy_process_group()


def run(mode: str, spec: str, src: str) -> dict:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = f"/tmp/bench-memory-{os.getpid()}-{mode}.json"
    mp.spawn(rank_main, args=(mode, spec, src, port, out), nprocs=WORLD, join=True)
    res = json.loads(Path(out).read_text())
    os.unlink(out)
    return res


def make_source(path: Path, nbytes: int) -> None:
    """Random-looking bytes (not a sparse file: the copy run must read real
    data), written in 64 MiB pieces."""
    rng = np.random.default_rng(0)
    piece = rng.integers(0, 256, size=64 << 20, dtype=np.uint8)
    with open(path, "wb") as f:
        left = nbytes
        while left:
            k = min(left, piece.size)
            f.write(piece[:k].tobytes())
            piece[:8] += 1
            left -= k


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=float, default=float(os.environ.get("CXLP_BENCH_MEMORY_GIB", 4)))
    ap.add_argument("--copy-gib", type=float, default=None)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--json", default=str(ROOT / "build" / "bench_memory.json"))
    a = ap.parse_args()
    copy_gib = a.gib if a.copy_gib is None else a.copy_gib
    from cxl_dataloader import CXLMemoryPool
    name = f"bench-mem-{uuid.uuid4().hex[:8]}"
    src = Path(a.dir) / f"{name}.bin"
    nbytes = int(a.gib * (1 << 30)) // REC * REC
    cbytes = int(copy_gib * (1 << 30)) // REC * REC
    res = {}
    pool = None
    try:
        make_source(src, max(nbytes, cbytes))
        pool = CXLMemoryPool(name, create=True, size=nbytes + (256 << 20))
        # the first nbytes of the source
        with open(src, "rb") as f:
            cut = Path(a.dir) / f"{name}.cut"
            if cbytes != nbytes:
                with open(cut, "wb") as g:
                    left = nbytes
                    while left:
                        buf = f.read(min(left, 64 << 20))
                        g.write(buf)
                        left -= len(buf)
            else:
                cut = src
        pool.ingest("data", cut, format="raw", record_size=REC, progress=False)
        if cut != src:
            cut.unlink()
        pool.close()
        res["baseline"] = run("baseline", "", "")
        res["pool"] = run("pool", f"shm:{name}", "")
        res["getitem"] = run("getitem", f"shm:{name}", "")
        CXLMemoryPool.destroy(name)
        pool = None
        if cbytes != os.path.getsize(src):
            os.truncate(src, cbytes)
        res["copy"] = run("copy", "", str(src))
    finally:
        if pool is not None:
            pool.close()
            CXLMemoryPool.destroy(name)
        src.unlink(missing_ok=True)
    mib = lambda kib: kib / 1024  # noqa: E731
    ds_mib = nbytes / (1 << 20)
    base = res["baseline"]["total_kib"]
    bound = 1.2 * nbytes / 1024 + base
    doc = {"dataset_bytes": nbytes, "copy_bytes": cbytes, "world": WORLD, "runs": res,
           "bound_kib": bound, "loadavg": os.getloadavg()}
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(doc, indent=1))
    print(f"bench_memory: {WORLD} ranks (gloo), dataset {ds_mib:.0f} MiB "
          f"(copy run: {cbytes / (1 << 20):.0f} MiB), PSS from /proc/PID/smaps_rollup")
    print(f"{'run':10} {'per rank MiB':>40} {'total MiB':>10}")
    for k in ("baseline", "pool", "getitem", "copy"):
        r = res[k]
        per = " ".join(f"{mib(x):8.0f}" for x in r["pss_kib"])
        print(f"{k:10} {per:>40} {mib(r['total_kib']):10.0f}")
    tp = res["pool"]["total_kib"]
    print(f"pool total {mib(tp):.0f} MiB vs bound 1.2 x {ds_mib:.0f} + {mib(base):.0f} = "
          f"{mib(bound):.0f} MiB: {'met' if tp <= bound else 'MISSED'} "
          f"(pool - baseline = {(tp - base) / (nbytes / 1024):.2f} x dataset)")
    tg = res["getitem"]["total_kib"]
    print(f"getitem total {mib(tg):.0f} MiB: {'met' if tg <= bound else 'MISSED'} "
          f"(getitem - baseline = {(tg - base) / (nbytes / 1024):.2f} x dataset)")
    print(f"copy total - baseline = {(res['copy']['total_kib'] - base) / (cbytes / 1024):.2f} "
          f"x its dataset")
    print(f"rank 0 read {res['pool']['records_rank0']} records in "
          f"{res['pool']['seconds_rank0']:.1f} s through the loader")
    return 0


if __name__ == "__main__":
    sys.exit(main())
