#!/usr/bin/env python3
"""What equal packed batch counts per rank cost: the per-epoch count.

Under a distributed sampler, CXLDataLoader(collate="pack") makes every rank
yield the smallest of the ranks' batch counts, which each rank finds from
the record lengths of every rank's order (an index lookup per record of the
epoch). This times that count (len(loader) of a new epoch, cache cold)
against one pass of the fast path over the same rank's share, for a
Megatron-style token dataset of --records variable-length records.

    python3 bench/bench_pack_count.py [--records 2000000] [--world 8] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import statistics
import struct
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if list((ROOT / "python" / "cxl_dataloader").glob("_core*.so")):
    sys.path.insert(0, str(ROOT / "python"))

import numpy as np  # noqa: E402

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool, DistributedCXLSampler  # noqa: E402


def write_megatron(prefix: str, lens: np.ndarray) -> None:
    with open(f"{prefix}.bin", "wb") as f:
        f.truncate(int(lens.sum()) * 2)
    ptrs = np.zeros(len(lens), np.int64)
    ptrs[1:] = np.cumsum(lens[:-1].astype(np.int64) * 2)
    with open(f"{prefix}.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 8))
        f.write(struct.pack("<Q", len(lens)) + struct.pack("<Q", 2))
        f.write(lens.astype(np.int32).tobytes() + ptrs.tobytes())
        f.write(np.array([0, len(lens)], np.int64).tobytes())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    lens = np.random.default_rng(0).integers(1, 200, a.records)
    name = f"bench-pack-{uuid.uuid4().hex[:8]}"
    pool = CXLMemoryPool(name, create=True, size=int(lens.sum()) * 2 + a.records * 4 + (64 << 20))
    try:
        with tempfile.TemporaryDirectory(dir="/var/tmp") as d:
            write_megatron(os.path.join(d, "t"), lens)
            pool.ingest("t", os.path.join(d, "t"), format="megatron", progress=False)
        ds = CXLDataset(pool.spec, "t")
        count, one_pass = [], []
        for epoch in range(a.rounds):
            s = DistributedCXLSampler(ds, num_replicas=a.world, rank=0, seed=1)
            s.set_epoch(epoch)
            dl = CXLDataLoader(ds, batch_size=8, seq_len=2049, sampler=s)
            t0 = time.perf_counter()
            n = len(dl)
            count.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            got = sum(1 for _ in dl)
            one_pass.append(time.perf_counter() - t0)
            assert got == n
        c, p = statistics.median(count), statistics.median(one_pass)
        print(f"pack count: {a.records} records, world {a.world}: count {c * 1e3:.0f} ms "
              f"({c / a.records * 1e9:.0f} ns per record of the epoch), one rank's pass "
              f"{p * 1e3:.0f} ms; count/pass {c / p:.2f} (median of {a.rounds}; load "
              f"{os.getloadavg()[0]:.1f})")
    finally:
        pool.close()
        CXLMemoryPool.destroy(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
