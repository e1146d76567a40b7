#!/usr/bin/env python3
"""The PyTorch layer against its two references, in one run.

One dataset of 8 KiB records (2048 int32 tokens; token 0 of record i is i),
in a shm pool and, for torch, in a .npy file in the page cache. Every path
reads every record once per pass, in a random order, in batches of 32, with
2 threads or workers:
  raw     `cxlpool bench gather POOL NAME --batch 32 --threads 2 --rounds 3`:
          the same records memcpy'd from the pool in C (cxlp_store_read +
          memcpy into a batch buffer); its figure is the pool path
          ("pool_records_s"); the private-copy figure is reported beside it
  fast    CXLDataLoader(ds, batch_size=32, shuffle=True, num_workers=2): the
          fast path (2 C gather threads); the loop only counts batches
  torch   torch.utils.data.DataLoader over a Dataset that reads an np.memmap
          of the .npy (np.array(mm[i]) -> tensor, default collate), 2
          workers, shuffle=True, persistent workers (their start-up is not
          charged to any round)
Rounds interleave the three, rotating which goes first, so machine noise
hits all of them. Within a round, raw and fast each run --passes passes
(default 3; raw's median comes from the CLI's --rounds) and keep their
median pass; torch runs one (its margin is wide). Figures are medians over
rounds, and each ratio is the median of the per-round ratios.

Python time per batch of the fast path: each next() on the loader is timed
with perf_counter_ns; the engine reports (stall_ns, timed in C around the
blocking wait with the GIL released) how long it waited for a batch that was
not ready. next() time minus stall is what Python spends per batch: the
generator, the C call that wraps the slot (Batch, DLPack capsule, resume
point), torch.from_dlpack, and freeing the previous batch (which returns its
slot to the ring). Reported as the median over rounds of each pass's mean.

    python3 bench/bench_loader.py [--mib 256] [--rounds 9] [--passes 3] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
if list((ROOT / "python" / "cxl_dataloader").glob("_core*.so")):
    sys.path.insert(0, str(ROOT / "python"))  # an in-tree build; else the installed package

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool  # noqa: E402

TOKENS = 2048          # int32 per record: 8 KiB
BATCH = 32
THREADS = 2


class MemmapDataset(torch.utils.data.Dataset):
    """What a user writes for a .npy of fixed-size records: a memmap opened
    in each worker, one record copied out per item."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.n = np.load(path, mmap_mode="r").shape[0]
        self.mm = None

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> torch.Tensor:
        if self.mm is None:
            self.mm = np.load(self.path, mmap_mode="r")
        return torch.from_numpy(np.array(self.mm[i]))


def run_raw(cli: str, spec: str, name: str, passes: int) -> dict:
    out = subprocess.run([cli, "bench", "gather", spec, name, "--batch", str(BATCH),
                          "--threads", str(THREADS), "--rounds", str(passes), "--json"],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)["results"][0]
    return {"records_s": r["pool_records_s"], "plain_records_s": r["plain_records_s"],
            "gb_s": r["pool_gb_s"]}


def run_fast(dl: CXLDataLoader, n: int) -> dict:
    it = iter(dl)
    seen = 0
    py_ns = []
    clock = time.perf_counter_ns
    t0 = time.perf_counter()
    while True:
        s0 = dl.stall_ns
        a = clock()
        try:
            b = next(it)
        except StopIteration:
            break
        e = clock()
        py_ns.append((e - a) - (dl.stall_ns - s0))
        seen += b.shape[0]
    el = time.perf_counter() - t0
    assert seen == n, (seen, n)
    return {"records_s": n / el, "py_us_mean": statistics.fmean(py_ns) / 1e3,
            "py_us_median": statistics.median(py_ns) / 1e3}


def run_torch(dl: torch.utils.data.DataLoader, n: int) -> dict:
    seen = 0
    t0 = time.perf_counter()
    for b in dl:
        seen += b.shape[0]
    el = time.perf_counter() - t0
    assert seen == n, (seen, n)
    return {"records_s": n / el}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256, help="dataset size (default 256 MiB)")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--passes", type=int, default=3,
                    help="passes of raw and fast per round; the round keeps their median")
    ap.add_argument("--json", default=str(ROOT / "build" / "bench_loader.json"))
    ap.add_argument("--cli", default=os.environ.get("CXLPOOL", str(ROOT / "build" / "cxlpool")))
    ap.add_argument("--dir", default="/var/tmp", help="where the .npy goes (disk, page cache)")
    a = ap.parse_args()
    if a.rounds < 5:
        ap.error("--rounds: at least 5")
    n = a.mib * (1 << 20) // (TOKENS * 4)
    name = f"bench-loader-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    npy = Path(a.dir) / f"{name}.npy"
    pool = None
    try:
        rng = np.random.default_rng(1)
        arr = rng.integers(0, 50000, size=(n, TOKENS), dtype=np.int32)
        arr[:, 0] = np.arange(n, dtype=np.int32)
        np.save(npy, arr)
        del arr
        pool = CXLMemoryPool(name, create=True, size=(a.mib + 64) << 20)
        ds = CXLDataset.ingest(pool, "rec8k", npy, progress=False)
        np.load(npy, mmap_mode="r").sum(dtype=np.int64)  # the page cache holds the file
        fast = CXLDataLoader(ds, batch_size=BATCH, shuffle=True, num_workers=THREADS)
        tdl = torch.utils.data.DataLoader(MemmapDataset(str(npy)), batch_size=BATCH, shuffle=True,
                                          num_workers=THREADS, persistent_workers=True)
        # warm-up: every path once, untimed (worker start-up, slot faults)
        run_fast(fast, n)
        run_torch(tdl, n)
        def fast_passes() -> dict:
            ps = sorted((run_fast(fast, n) for _ in range(a.passes)),
                        key=lambda x: x["records_s"])
            return ps[len(ps) // 2]  # the median pass

        paths = {"raw": lambda: run_raw(a.cli, pool.spec, "rec8k", a.passes),
                 "fast": fast_passes,
                 "torch": lambda: run_torch(tdl, n)}
        order = list(paths)
        rounds = []
        for r in range(a.rounds):
            res = {}
            for k in order[r % 3:] + order[:r % 3]:
                res[k] = paths[k]()
            rounds.append(res)
            print(f"round {r}: raw {res['raw']['records_s']:.0f} rec/s, fast "
                  f"{res['fast']['records_s']:.0f} rec/s ({res['fast']['py_us_mean']:.1f} us "
                  f"Python/batch), torch {res['torch']['records_s']:.0f} rec/s", file=sys.stderr)
        del fast, tdl, ds
    finally:
        if pool is not None:
            pool.close()
            CXLMemoryPool.destroy(name)
        npy.unlink(missing_ok=True)

    med = lambda xs: statistics.median(xs)  # noqa: E731
    summary = {
        "raw_records_s": med([r["raw"]["records_s"] for r in rounds]),
        "raw_plain_copy_records_s": med([r["raw"]["plain_records_s"] for r in rounds]),
        "fast_records_s": med([r["fast"]["records_s"] for r in rounds]),
        "torch_memmap_records_s": med([r["torch"]["records_s"] for r in rounds]),
        "fast_over_raw": med([r["fast"]["records_s"] / r["raw"]["records_s"] for r in rounds]),
        "fast_over_torch": med([r["fast"]["records_s"] / r["torch"]["records_s"] for r in rounds]),
        "python_us_per_batch_mean": med([r["fast"]["py_us_mean"] for r in rounds]),
        "python_us_per_batch_median": med([r["fast"]["py_us_median"] for r in rounds]),
    }
    doc = {"records": n, "record_bytes": TOKENS * 4, "batch": BATCH, "threads": THREADS,
           "rounds": a.rounds, "passes": a.passes, "loadavg": os.getloadavg(), "cpus": os.cpu_count(),
           "torch": torch.__version__, "summary": summary, "per_round": rounds}
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(doc, indent=1))
    gb = lambda rs: rs * TOKENS * 4 / 1e9  # noqa: E731
    s = summary
    print(f"bench_loader: {n} records of {TOKENS * 4} B ({a.mib} MiB), random order, batch {BATCH}, "
          f"{THREADS} threads/workers, median of {a.rounds} interleaved rounds of "
          f"{a.passes} passes "
          f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs)")
    print(f"{'path':44} {'records/s':>12} {'GB/s':>7}")
    for label, key in (("raw gather (cxlpool bench gather, pool path)", "raw_records_s"),
                       ("  private-copy memcpy, same run", "raw_plain_copy_records_s"),
                       ("CXLDataLoader fast path", "fast_records_s"),
                       ("torch DataLoader + np.memmap", "torch_memmap_records_s")):
        print(f"{label:44} {s[key]:12.0f} {gb(s[key]):7.2f}")
    spread = sorted(r["fast"]["records_s"] / r["raw"]["records_s"] for r in rounds)
    print(f"per-round fast/raw: {' '.join(f'{x:.2f}' for x in spread)}")
    print(f"fast / raw   {s['fast_over_raw']:.3f}   (goal >= 0.80: "
          f"{'met' if s['fast_over_raw'] >= 0.8 else 'MISSED'})")
    print(f"fast / torch {s['fast_over_torch']:.1f}x  (goal >= 10x: "
          f"{'met' if s['fast_over_torch'] >= 10 else 'MISSED'})")
    print(f"Python per batch: mean {s['python_us_per_batch_mean']:.1f} us, median "
          f"{s['python_us_per_batch_median']:.1f} us (goal <= 20 us: "
          f"{'met' if s['python_us_per_batch_mean'] <= 20 else 'MISSED'})")
    print(f"json: {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
