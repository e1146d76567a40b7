#!/usr/bin/env python3
"""What the order costs a dataset larger than memory: one epoch of the same
records on a pool of tiers, read by CXLDataLoader in a full shuffle
(shuffle=True: every batch draws from every shard), read in part (the
loader's default for that order: nothing staged, each batch reads its
records' blocks) and staged as other orders are (read_in_part=False), and
in the block order
the staging engine is built for (RandomCXLSampler(ds, window="auto")), in
one run, each from a cold start (every copy sent home first).

Records of 8 KiB (int32, record i starts with i), a dram tier of --tier-mib
before a file tier on --dir read with O_DIRECT (the page cache never holds
it), the loader's default policy (lookahead) and budget. Reported per
order: seconds, samples/s, bytes read from the home tier (whole shards
staged plus partial reads, as the loader counts them) over the dataset's
bytes, the same from the kernel (read_bytes of /proc/self/io: what the
process read from the disk, whoever counted it), hits and misses; every
record is checked to come exactly once.

    python3 bench/bench_tier_order.py [--mib 256] [--tier-mib 48] [--shard-kib 1024]
                                      [--rows part,staged,block,wide,wide-part]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
import warnings
from pathlib import Path
from typing import Iterator

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if list((ROOT / "python" / "cxl_dataloader").glob("_core*.so")):
    sys.path.insert(0, str(ROOT / "python"))  # an in-tree build; else the installed package

from cxl_dataloader import (CXLDataLoader, CXLDataset, CXLMemoryPool,  # noqa: E402
                            RandomCXLSampler)

REC = 8192


def disk_read_bytes() -> int:
    """Bytes this process (every thread, io_uring's workers too) read from
    block devices: the O_DIRECT reads of the home tier."""
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


@contextlib.contextmanager
def tiered_run(top: str, prefix: str, n: int, tier_mib: int,
               home_bytes: int) -> Iterator[tuple[str, Path, CXLMemoryPool]]:
    """A run's scratch: a directory under top holding a.npy (n records of
    REC bytes, int32, record i starting with i) and the home file of a pool
    PREFIX-PID of a tier_mib dram tier before a home_bytes file tier.
    Yields the pool's name, the source and the pool; afterwards the pool is
    closed and destroyed, the directory removed."""
    work = Path(top) / f"run-{os.getpid()}"
    work.mkdir(parents=True)
    name = f"{prefix}-{os.getpid()}"
    pool = None
    try:
        src = work / "a.npy"
        arr = np.lib.format.open_memmap(src, mode="w+", dtype=np.int32, shape=(n, REC // 4))
        arr[:, 0] = np.arange(n)
        arr.flush()
        del arr
        pool = CXLMemoryPool(name, create=True, meta_bytes=16 << 20,
                             tiers=[f"dram=shm:{name}.dram:{tier_mib << 20}",
                                    f"nvme=file:{work / 'home'}:{home_bytes}"])
        yield name, src, pool
    finally:
        if pool is not None:
            pool.close()
            CXLMemoryPool.destroy(name)
        shutil.rmtree(work, ignore_errors=True)


def epoch(ds: CXLDataset, n: int, batch: int, kw: dict) -> str:
    """One epoch of ds (n records of REC bytes whose first int32 is their id)
    from a cold start (every copy sent home first) through CXLDataLoader(ds,
    batch_size=batch, **kw); the table's cells after the order: seconds,
    samples/s, home bytes and disk bytes over the dataset's, hits, misses,
    whether every record came exactly once."""
    ds.migrate_to("nvme")  # cold: every copy home
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the full shuffle's warning is the point
        dl = CXLDataLoader(ds, batch_size=batch, **kw)
    seen = np.zeros(n, dtype=np.int32)
    disk0 = disk_read_bytes()
    t = time.perf_counter()
    for b in dl:
        np.add.at(seen, b[:, 0].numpy(), 1)
    dt = time.perf_counter() - t
    disk = (disk_read_bytes() - disk0) / (n * REC)
    st = dl.stats()
    home = (st["bytes_staged"] + st["partial_bytes"]) / (n * REC)
    dl.close()
    return (f"{dt:.2f} | {n / dt:,.0f} | {home:.2f} | {disk:.2f} | {st['hits']} | "
            f"{st['misses']} | {'yes' if (seen == 1).all() else 'NO'} |")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mib", type=int, default=256, help="dataset size (default 256 MiB)")
    ap.add_argument("--tier-mib", type=int, default=48, help="dram tier (default 48 MiB)")
    ap.add_argument("--shard-kib", type=int, default=1024, help="shard size at ingest")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dir", default="/var/tmp/tier-order")
    ap.add_argument("--rows", default="part,staged,block",
                    help="which to run: part, staged, block, wide, wide-part "
                         "(default the first three)")
    a = ap.parse_args()
    n = (a.mib << 20) // REC
    with tiered_run(a.dir, "order", n, a.tier_mib, n * REC + (64 << 20)) as (_, src, pool):
        pool._pool.import_("d", str(src), format="npy", shard_bytes=a.shard_kib << 10)
        src.unlink()
        ds = CXLDataset(pool, "d")
        print(f"{a.mib} MiB of {REC}-byte records in {ds.shards()['n_shards']} shards, "
              f"a {a.tier_mib} MiB dram tier, batch {a.batch}; load {os.getloadavg()[0]:.1f}")
        print("| order | seconds | samples/s | home bytes / dataset | disk bytes / dataset | "
              "hits | misses | complete |")
        print("|---|---:|---:|---:|---:|---:|---:|---|")
        rows = {"part": ("full shuffle (shuffle=True), read in part (the default)",
                         dict(shuffle=True, seed=1)),
                "staged": ("full shuffle, staged (read_in_part=False)",
                           dict(shuffle=True, seed=1, read_in_part=False)),
                "block": ('block, window="auto"',
                          dict(sampler=RandomCXLSampler(ds, seed=1, window="auto")))}
        # a block order whose window holds 3x what the budget does: staged
        # (the default for it) and read in part
        wide = 3 * RandomCXLSampler(ds, seed=1, window="auto").window
        rows["wide"] = (f"block, window={wide} (3x auto), staged",
                        dict(sampler=RandomCXLSampler(ds, seed=1, window=wide)))
        rows["wide-part"] = (f"block, window={wide} (3x auto), read_in_part=True",
                             dict(sampler=RandomCXLSampler(ds, seed=1, window=wide),
                                  read_in_part=True))
        for label, kw in (rows[r] for r in a.rows.split(",")):
            print(f"| {label} | {epoch(ds, n, a.batch, kw)}", flush=True)
        del ds
    return 0


if __name__ == "__main__":
    sys.exit(main())
