#!/usr/bin/env python3
"""Two builds of the library side by side on the same pages, in one run:
the per-record read cost (build/bench_read: cxlp_store_read alone, as reads
per second), the C read path (`cxlpool bench gather`, 1 and 2 threads) and
the PyTorch fast path (CXLDataLoader, batch 32, shuffle, 2 gather threads),
build A and build B in alternation (A B, B A, ...), each ratio A/B taken
round by round so that the machine's drift cancels. Every figure is a
throughput: A/B above 1 means A is faster.

Same pages: one pool is made by build B and read by both. On a VM two pools
made minutes apart can read 2x apart (their pages' host backing differs),
which would swamp any difference of code. When the builds' pool formats
differ, --convert TOOL writes A's metadata for B's pool (for format 1 ->
2: build/pool_meta_v2, built up to commit a1b3047; no tool converts
format 2 -> 3), and the metadata bytes [0, cat_off + 2*cat_bytes)
are swapped in place before each run; the data pages never change.

    python3 bench/ab_builds.py --a-root DIR --a-python PY --b-root DIR --b-python PY
                               [--convert TOOL] [--rounds 8] [--mib 128] [--rt] [--json PATH]

DIR is a source tree with build/cxlpool and build/bench_read; PY is a Python
with that tree's package installed (and no in-tree build of it in DIR).
Prints each measure's medians and the median A/B ratio with its min and max
over rounds, and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

RECORD = 8192

LOADER = r"""
import statistics, sys, time
from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool
pool = CXLMemoryPool(sys.argv[1])
ds = CXLDataset(pool, "rec8k")
dl = CXLDataLoader(ds, batch_size=32, shuffle=True, num_workers=2)
def one_pass():
    t = time.perf_counter(); n = 0
    for b in dl:
        n += b.shape[0]
    return n / (time.perf_counter() - t)
one_pass()
print(statistics.median(one_pass() for _ in range(3)))
del dl, ds
pool.close()
"""


def run(cmd: list[str]) -> str:
    return subprocess.run(cmd, check=True, capture_output=True, text=True, cwd="/").stdout


def measure(root: str, py: str, pool: str, rt: list[str]) -> dict:
    out = run(rt + [f"{root}/build/bench_read", pool, "rec8k", "5000000", "5"])
    res = {"read_per_s": 1e9 / float(out.split("reads: ")[1].split(" ns/read")[0])}
    for t in (1, 2):
        doc = json.loads(run((rt if t == 1 else []) +
                             [f"{root}/build/cxlpool", "bench", "gather", pool, "rec8k",
                              "--batch", "32", "--threads", str(t), "--rounds", "3", "--json"]))
        res[f"gather_{t}t"] = doc["results"][0]["pool_records_s"]
    res["loader_fast"] = float(run([py, "-c", LOADER, pool]).strip())
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for side in ("a", "b"):
        ap.add_argument(f"--{side}-root", required=True)
        ap.add_argument(f"--{side}-python", required=True)
    ap.add_argument("--convert", help="writes A's metadata for B's pool: TOOL POOLFILE OUT")
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--json", default=None)
    ap.add_argument("--rt", action="store_true",
                    help="one-thread measures on CPU 1 at real-time priority (chrt -f 50): "
                         "the other tenants of a shared machine cannot preempt them")
    a = ap.parse_args()
    rt = ["chrt", "-f", "50", "taskset", "-c", "1"] if a.rt else []
    sides = {s: {"root": getattr(a, f"{s}_root"), "py": getattr(a, f"{s}_python")}
             for s in ("a", "b")}
    tmp = Path(tempfile.mkdtemp(dir="/var/tmp"))
    src = tmp / "rec8k.raw"
    src.write_bytes(os.urandom(a.mib << 20))
    pool = f"ab-{os.getpid()}"
    path = f"/dev/shm/cxlp.{pool}"
    b_cli = f"{a.b_root}/build/cxlpool"
    rounds = []
    try:
        run([b_cli, "create", pool, f"{a.mib + 64}M"])
        run([b_cli, "ingest", pool, "rec8k", str(src), "--record-size", str(RECORD),
             "--no-progress"])
        with open(path, "rb") as f:
            hdr = f.read(80)
            cat_off, cat_bytes = struct.unpack_from("<QQ", hdr, 64)
            f.seek(0)
            meta = {"b": f.read(cat_off + 2 * cat_bytes)}
        if a.convert:
            run([a.convert, path, str(tmp / "meta_a")])
            meta["a"] = (tmp / "meta_a").read_bytes()
        else:
            meta["a"] = meta["b"]
        for r in range(a.rounds):
            res = {}
            for s in (["a", "b"] if r % 2 == 0 else ["b", "a"]):
                with open(path, "r+b") as f:  # this build's metadata, the same data pages
                    f.write(meta[s])
                res[s] = measure(sides[s]["root"], sides[s]["py"], pool, rt)
            rounds.append(res)
            print(f"round {r}: " + ", ".join(f"{k} A/B {res['a'][k] / res['b'][k]:.3f}"
                                             for k in res["a"]), file=sys.stderr)
    finally:
        subprocess.run(["rm", "-f", path])
        subprocess.run(["rm", "-rf", str(tmp)])
    load = os.getloadavg()
    print(f"ab_builds: A={a.a_root} B={a.b_root}, {a.rounds} rounds (A B / B A alternating), "
          f"one pool of {a.mib} MiB of {RECORD} B records read by both, load average "
          f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'measure':16} {'A /s':>12} {'B /s':>12} {'A/B median':>11} {'min':>7} {'max':>7}")
    summary = {}
    for k in rounds[0]["a"]:
        ratios = sorted(r["a"][k] / r["b"][k] for r in rounds)
        am = statistics.median(r["a"][k] for r in rounds)
        bm = statistics.median(r["b"][k] for r in rounds)
        summary[k] = {"a": am, "b": bm, "ratio_median": statistics.median(ratios),
                      "ratio_min": ratios[0], "ratio_max": ratios[-1]}
        print(f"{k:16} {am:12.0f} {bm:12.0f} {statistics.median(ratios):11.3f} "
              f"{ratios[0]:7.3f} {ratios[-1]:7.3f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"loadavg": load, "rounds": rounds,
                                            "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
