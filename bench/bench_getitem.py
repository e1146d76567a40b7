#!/usr/bin/env python3
"""ds[i] from Python: random reads of 8 KiB records through CXLDataset.

Makes a pool with one dataset (RECORDS records of 8 KiB), then reads
--reads records as ds[i] in a seeded random order, touching one element of
each (the page is mapped on first touch). Prints records/s of the reads,
median of --rounds rounds. Run it under two builds of the package
(PYTHONPATH) to compare them: it uses only what every version offers.

    python3 bench/bench_getitem.py [--records 16384] [--reads 200000] [--rounds 5]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid

import numpy as np

from cxl_dataloader import CXLDataset, CXLMemoryPool

REC = 8192


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=16384)
    ap.add_argument("--reads", type=int, default=200000)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    name = f"bench-getitem-{uuid.uuid4().hex[:8]}"
    pool = CXLMemoryPool(name, create=True, size=a.records * REC + (64 << 20))
    try:
        with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
            src = os.path.join(d, "x.npy")
            np.save(src, np.arange(a.records * REC // 4, dtype=np.int32).reshape(a.records, -1))
            pool.ingest("x", src, progress=False)
        ds = CXLDataset(pool.spec, "x")
        order = np.random.default_rng(0).integers(0, a.records, a.reads).tolist()
        rates = []
        for _ in range(a.rounds):
            t0 = time.perf_counter()
            s = 0
            for i in order:
                s += int(ds[i][0])
            rates.append(a.reads / (time.perf_counter() - t0))
        print(f"ds[i]: {statistics.median(rates):.0f} records/s (median of {a.rounds}; "
              f"min {min(rates):.0f}, max {max(rates):.0f}); {a.records} records of {REC} B, "
              f"{a.reads} random reads per round")
    finally:
        pool.close()
        CXLMemoryPool.destroy(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
