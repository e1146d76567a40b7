#!/usr/bin/env python3
"""What a batch costs in Python when the loop waits for the engine, with the
CPUs allowed to idle between batches and kept from idling.

CXLDataLoader over 1 GiB of 64 KiB records in a shm pool, one gather
thread, a full shuffle, batches of 4 MiB (64 records) and 16 MiB (256): the
gather thread is the bottleneck, so every next() waits. Python time per
batch is next()'s time less what the engine reports it waited (stall_ns,
timed in C around the wait, the GIL released): the median over an epoch,
as bench_sweep.py measures it. Each round runs every batch size twice,
once as the machine is and once with a spinner on every CPU: a process at
SCHED_IDLE (it runs only when nothing else wants the CPU) that loops, so
that no CPU goes idle while the loader's threads sleep. On a VM an idle
vCPU halts (the host may run something else on the core, and resuming it
costs a VM entry with cold caches); on bare metal a deep C-state does the
same. The difference between the two columns is what the machine's idle
costs the loop after each wait, not what the loader does.

    python3 bench/bench_python_wait.py [--rounds 3] [--epochs 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if list((ROOT / "python" / "cxl_dataloader").glob("_core*.so")):
    sys.path.insert(0, str(ROOT / "python"))  # an in-tree build; else the installed package

from bench_sweep import python_per_batch  # noqa: E402  (this interpreter's cxl_dataloader)
from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool  # noqa: E402

REC = 65536
SPIN = ("import os, sys\n"
        "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
        "os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))\n"
        "while True:\n    pass\n")


def spinners(cmd: str) -> list[subprocess.Popen]:
    """One SCHED_IDLE busy loop per CPU this process may run on: cmd (a
    program that loops forever) under taskset and chrt, or Python's."""
    if cmd:
        return [subprocess.Popen(["taskset", "-c", str(c), "chrt", "-i", "0", cmd])
                for c in sorted(os.sched_getaffinity(0))]
    return [subprocess.Popen([sys.executable, "-c", SPIN, str(c)])
            for c in sorted(os.sched_getaffinity(0))]


def python_us(ds: CXLDataset, batch: int, epochs: int) -> float:
    """Median over epochs of each epoch's median Python time per batch,
    each measured as bench_sweep.py measures it."""
    dl = CXLDataLoader(ds, batch_size=batch, shuffle=True, threads=1, seed=1)
    per = [python_per_batch(dl) for _ in range(epochs)]
    dl.close()
    return statistics.median(per)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--mib", type=int, default=1024)
    ap.add_argument("--spinner", default="",
                    help="a program that loops forever (e.g. a C `for (;;);` built with "
                         "cc); default a Python loop")
    a = ap.parse_args()
    n = (a.mib << 20) // REC
    name = f"pywait-{os.getpid()}"
    pool = CXLMemoryPool(name, create=True, size=(a.mib + 256) << 20)
    src = Path(f"/dev/shm/{name}.npy")
    try:
        arr = np.lib.format.open_memmap(src, mode="w+", dtype=np.uint8, shape=(n, REC))
        arr[:] = 7
        arr.flush()
        del arr
        pool._pool.import_("d", str(src), format="npy")
        src.unlink()
        ds = CXLDataset(pool, "d")
        print(f"{a.mib} MiB of {REC}-byte records, one gather thread, {os.cpu_count()} CPUs; "
              f"Python us per batch (median of {a.epochs} epochs' medians)")
        print("| round | batch | idle allowed | kept busy (SCHED_IDLE spinners) | load |")
        print("|---:|---|---:|---:|---|")
        for r in range(1, a.rounds + 1):
            for batch in (64, 256):
                plain = python_us(ds, batch, a.epochs)
                sp = spinners(a.spinner)
                try:
                    time.sleep(0.2)
                    busy = python_us(ds, batch, a.epochs)
                finally:
                    for p in sp:
                        p.kill()
                        p.wait()
                print(f"| {r} | {batch * REC >> 20} MiB | {plain:.2f} | {busy:.2f} | "
                      f"{os.getloadavg()[0]:.1f} |", flush=True)
        del ds
    finally:
        src.unlink(missing_ok=True)
        pool.close()
        CXLMemoryPool.destroy(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
