#!/usr/bin/env python3
"""What `cxlpool rewrite` buys a dataset written by an earlier build, and
what it costs: a full shuffle of a dataset larger than memory, read in part
from its home tier, before and after the rewrite, and the rewrite's time
beside an ingest of the same records, in one run.

The dataset (--mib of 8 KiB records, int32, record i starts with i) is
ingested into the nvme home of a pool of tiers (a --tier-mib dram tier
before a file tier on --dir, read with O_DIRECT: the page cache never holds
it) by --old-cli, the cxlpool binary of an earlier build (shard format 3:
blocks of 64 KiB to 1 MiB), in shards of --shard-kib. Without --old-cli,
this build ingests it (format 4), and the table shows what a rewrite costs
when there is nothing to gain. Rows: the epoch before (as
bench/bench_tier_order.py's "part" row), the rewrite (seconds, and the
same records ingested again by this build from the .npy, for the ratio),
the epoch after. Before each epoch the page cache is written back and
dropped (root; else it says so): the rewrite has just written the new
shards through the home file's mapping. Every record is checked to come
exactly once.

    python3 bench/bench_rewrite.py [--old-cli PATH] [--mib 256] [--shard-kib 65536]
                                   [--tier-mib 48]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_tier_order import REC, disk_read_bytes, epoch, tiered_run  # noqa: E402

from cxl_dataloader import CXLDataset  # noqa: E402


def drop_caches() -> str:
    """Writes back and drops the page cache; "" or why it could not."""
    os.sync()
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return ""
    except OSError as e:
        return f" (page cache not dropped: {e.strerror})"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old-cli", help="cxlpool of an earlier build (writes format 3)")
    ap.add_argument("--mib", type=int, default=256, help="dataset size (default 256 MiB)")
    ap.add_argument("--shard-kib", type=int, default=64 << 10, help="shard size at ingest")
    ap.add_argument("--tier-mib", type=int, default=48, help="dram tier (default 48 MiB)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--dir", default="/var/tmp/rewrite")
    a = ap.parse_args()
    n = (a.mib << 20) // REC
    with tiered_run(a.dir, "rewrite", n, a.tier_mib,
                    3 * n * REC + (64 << 20)) as (name, src, pool):
        spec = f"shm:{name}"
        shard = a.shard_kib << 10
        t = time.perf_counter()
        if a.old_cli:
            subprocess.run([a.old_cli, "ingest", spec, "d", str(src), "--shard-bytes",
                            str(shard), "--no-progress"], check=True, stdout=subprocess.DEVNULL)
        else:
            pool._pool.import_("d", str(src), format="npy", shard_bytes=shard)
        t_old = time.perf_counter() - t
        ds = CXLDataset(pool, "d")
        f0 = ds.shard_format()
        print(f"{a.mib} MiB of {REC}-byte records in {ds.shards()['n_shards']} shards of "
              f"{a.shard_kib} KiB, a {a.tier_mib} MiB dram tier, batch {a.batch}; written by "
              f"{a.old_cli or 'this build'} in {t_old:.2f} s; load {os.getloadavg()[0]:.1f}")
        print("| step | shard format (block) | seconds | samples/s | home bytes / dataset | "
              "disk bytes / dataset | hits | misses | complete |")
        print("|---|---|---:|---:|---:|---:|---:|---:|---|")
        part = dict(shuffle=True, seed=1)
        why = drop_caches()
        print(f"| full shuffle, read in part{why} | {f0['version']} ({f0['block_bytes']}) | "
              f"{epoch(ds, n, a.batch, part)}", flush=True)
        del ds
        disk0 = disk_read_bytes()
        t = time.perf_counter()
        pool.rewrite("d", progress=False)
        t_rw = time.perf_counter() - t
        disk = (disk_read_bytes() - disk0) / (n * REC)
        t = time.perf_counter()
        pool._pool.import_("ref", str(src), format="npy", shard_bytes=shard)
        t_ing = time.perf_counter() - t
        pool.remove("ref")
        ds = CXLDataset(pool, "d")
        f1 = ds.shard_format()
        print(f"| rewrite (an ingest of the same records by this build: {t_ing:.2f} s, "
              f"ratio {t_rw / t_ing:.2f}) | {f0['version']} -> {f1['version']} "
              f"({f1['block_bytes']}) | {t_rw:.2f} | {n / t_rw:,.0f} | | {disk:.2f} | | | |",
              flush=True)
        why = drop_caches()
        print(f"| full shuffle, read in part{why} | {f1['version']} ({f1['block_bytes']}) | "
              f"{epoch(ds, n, a.batch, part)}", flush=True)
        del ds
    return 0


if __name__ == "__main__":
    sys.exit(main())
