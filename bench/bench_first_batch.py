#!/usr/bin/env python3
"""Time from opening a pool that holds a 16 GiB dataset to the first batch.

Builds (unless --keep finds it) a file pool on disk (/var/tmp by default)
holding one dataset of 8 KiB records (2048 int32) totalling --gib GiB: the
source is a sparse raw file whose first records carry their id in element 0,
imported by `cxlpool ingest`. Then, --runs times, a new Python process
(torch and cxl_dataloader already imported: interpreter start-up is not the
loader's) times
    CXLMemoryPool(spec) -> CXLDataset(pool, name) -> CXLDataLoader(ds,
    batch_size=32, ...) -> next(iter(loader))
with perf_counter, for a sequential loader, a shuffle=True one (the engine draws the C keyed
permutation of (seed, epoch); nothing of size N is built) and one over a
RandomCXLSampler (the engine's threads draw ids from the C sampler), and
checks the first sequential batch holds records 0..31. The pool file is read
once into the page cache before the runs (cold-ish: new process, new
mapping, nothing of the loader warm; a pool larger than the free page cache
still pays disk reads for random records).
The pool and the source are removed at the end unless --keep.

    python3 bench/bench_first_batch.py [--gib 16] [--runs 5] [--dir /var/tmp] [--keep]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REC = 8192

CHILD = r"""
import json, sys, time
import glob
if glob.glob(sys.argv[1] + "/cxl_dataloader/_core*.so"):
    sys.path.insert(0, sys.argv[1])  # an in-tree build; else the installed package
import torch
from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool, RandomCXLSampler
spec, name, kind = sys.argv[2], sys.argv[3], sys.argv[4]
t0 = time.perf_counter()
pool = CXLMemoryPool(spec, readonly=True)
t1 = time.perf_counter()
ds = CXLDataset(pool, name)
t2 = time.perf_counter()
if kind == "cxl_sampler":
    dl = CXLDataLoader(ds, batch_size=32, sampler=RandomCXLSampler(ds, seed=0), num_workers=2)
else:
    dl = CXLDataLoader(ds, batch_size=32, shuffle=kind == "shuffled", num_workers=2)
t3 = time.perf_counter()
it = iter(dl)
b = next(it)
t4 = time.perf_counter()
print(json.dumps({"open_ms": 1e3 * (t1 - t0), "dataset_ms": 1e3 * (t2 - t1),
                  "loader_ms": 1e3 * (t3 - t2), "first_batch_ms": 1e3 * (t4 - t3),
                  "total_ms": 1e3 * (t4 - t0), "records": len(ds),
                  "bytes": len(ds) * ds[0].numel() * ds[0].element_size(),
                  "first_ids": b[:, 0].tolist(), "shape": list(b.shape)}))
"""


def build(cli: str, spec: str, path: Path, src: Path, gib: int) -> None:
    n = gib * (1 << 30) // REC
    with open(src, "wb") as f:
        f.truncate(n * REC)  # sparse: holes read as zeros
        for i in range(64):  # ids in element 0 of the first records
            f.seek(i * REC)
            f.write(int(i).to_bytes(4, "little"))
    size = n * REC + (256 << 20)
    subprocess.run([cli, "create", spec, str(size)], check=True)
    subprocess.run([cli, "ingest", spec, "rec8k", str(src), "--format", "raw", "--record-size",
                    str(REC), "--dtype", "int32", "--no-progress"], check=True)
    src.unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gib", type=int, default=16)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--keep", action="store_true", help="reuse the pool if there, keep it after")
    ap.add_argument("--cli", default=os.environ.get("CXLPOOL", str(ROOT / "build" / "cxlpool")))
    ap.add_argument("--json", default=str(ROOT / "build" / "bench_first_batch.json"))
    a = ap.parse_args()
    d = Path(a.dir) / f"cxlp-first-batch-{a.gib}g"
    d.mkdir(parents=True, exist_ok=True)
    path = d / "pool"
    spec = f"file:{path}"
    try:
        if not (a.keep and path.exists()):
            if path.exists():
                subprocess.run([a.cli, "destroy", spec, "--yes"], check=True)
            build(a.cli, spec, path, d / "src.bin", a.gib)
        # the pool file in the page cache, as a pool in use would be
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
        runs: dict[str, list[dict]] = {"sequential": [], "shuffled": [], "cxl_sampler": []}
        for r in range(a.runs):
            for kind in runs:
                out = subprocess.run([sys.executable, "-c", CHILD, str(ROOT / "python"), spec,
                                      "rec8k", kind],
                                     check=True, capture_output=True, text=True).stdout
                res = json.loads(out)
                if kind == "sequential":
                    assert res["first_ids"] == list(range(32)), res["first_ids"]
                runs[kind].append(res)
    finally:
        if not a.keep:
            subprocess.run([a.cli, "destroy", spec, "--yes"], check=False)
            (d / "src.bin").unlink(missing_ok=True)
            try:
                d.rmdir()
            except OSError:
                pass
    summary = {}
    for kind, rs in runs.items():
        summary[kind] = {k: statistics.median(x[k] for x in rs)
                         for k in ("open_ms", "dataset_ms", "loader_ms", "first_batch_ms",
                                   "total_ms")}
        summary[kind]["max_total_ms"] = max(x["total_ms"] for x in rs)
    rec = runs["sequential"][0]
    doc = {"gib": a.gib, "records": rec["records"], "bytes": rec["bytes"], "runs": a.runs,
           "summary": summary, "per_run": runs, "loadavg": os.getloadavg()}
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(doc, indent=1))
    print(f"first batch: {spec}, {rec['records']} records of {REC} B "
          f"({rec['bytes'] / (1 << 30):.2f} GiB), batch 32, median of {a.runs} new processes "
          f"(load average {os.getloadavg()[0]:.1f})")
    print(f"{'order':11} {'open':>8} {'dataset':>8} {'loader':>8} {'1st batch':>10} "
          f"{'total ms':>9} {'max':>7}")
    for kind, s in summary.items():
        print(f"{kind:11} {s['open_ms']:8.2f} {s['dataset_ms']:8.2f} {s['loader_ms']:8.2f} "
              f"{s['first_batch_ms']:10.2f} {s['total_ms']:9.2f} {s['max_total_ms']:7.2f}")
    for kind, s in summary.items():
        print(f"goal: first batch within 100 ms of opening, {kind}: "
              f"{'met' if s['total_ms'] <= 100 else 'MISSED'} (median {s['total_ms']:.1f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
