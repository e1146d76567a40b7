#!/usr/bin/env python3
"""What the home sends per epoch: a pool of tiers read for several epochs
through one loader, per policy, with runs or without, builds side by side.

    python3 bench/bench_home_bytes.py [--gib 1] [--mem 256M] [--epochs 2]
                                      [--policies lookahead,streaming]
                                      [--runs on,off] [--sleep-ms 2] [--rounds 3]
                                      [--python PY[,PY...]] [--dir /var/tmp]

A dataset of --gib GiB of 8 KiB records is homed on an nvme tier (a file
under --dir; the page cache serves it, which is the point: the stagers
then run ahead of the consumer as far as the budget lets them, where a
copy staged too early is most likely to be evicted before its use and
read again) behind one --mem dram tier. A loader per (policy, runs) reads
--epochs epochs of RandomCXLSampler(window="auto", runs=...) (the ramp in
epoch 0), the consumer sleeping --sleep-ms per batch of 256. Per epoch:
all the home sent (the dram tier's bytes_in over the epoch) and the
epoch's own (less what it staged for the next epoch alone,
stats()["next_pass_bytes"], plus what the previous staged for it), over
the dataset's bytes; every record is checked once per epoch.

--python runs each configuration under each interpreter in turn (A B, B
A, ...: another build of the package installed in each), so two builds'
figures come from one run.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throttle import parse_size  # noqa: E402

REC = 8192
BATCH = 256


def child(a: argparse.Namespace) -> None:
    import numpy as np
    from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool, RandomCXLSampler
    n = int(a.gib * (1 << 30)) // REC
    mem = parse_size(a.mem)
    runs = {"on": True, "off": False, "auto": "auto"}[a.run]
    name = f"hb{uuid.uuid4().hex[:6]}"
    d = os.path.join(a.dir, f"home-bytes-{name}")
    os.makedirs(d)
    try:
        src = np.lib.format.open_memmap(f"{d}/src.npy", mode="w+", dtype=np.uint8,
                                        shape=(n, REC))
        src[:, :8] = np.arange(n, dtype=np.uint64).view(np.uint8).reshape(n, 8)
        src.flush()
        del src
        pool = CXLMemoryPool(f"shm:{name}", create=True, meta_bytes=16 << 20,
                             tiers=[f"dram=shm:{name}.dram:{mem + (2 << 20)}",
                                    f"nvme=file:{d}/home:{int(n * REC * 1.05) + (64 << 20)}"])
        try:
            pool._pool.import_("d", f"{d}/src.npy", format="npy")
            ds = CXLDataset(pool, "d")
            budget = pool.tiers()[0]["capacity"] // 4 * 3
            s = RandomCXLSampler(ds, seed=7, window="auto", memory_budget=budget, runs=runs)
            loader = CXLDataLoader(ds, batch_size=BATCH, sampler=s, threads=2,
                                   memory_policy=a.policy, memory_budget=budget)
            out = {"block_records": s.shard_size, "window": s.window, "epochs": []}
            before, prev_next = pool.tiers()[0]["bytes_in"], 0
            for ep in range(a.epochs):
                seen = np.zeros(n, dtype=bool)
                for b in loader:
                    ids = b.numpy()[:, :8].copy().view(np.uint64).ravel()
                    if seen[ids].any():
                        raise SystemExit(f"epoch {ep}: a record twice")
                    seen[ids] = True
                    time.sleep(a.sleep_ms / 1000)
                if not seen.all():
                    raise SystemExit(f"epoch {ep}: {int((~seen).sum())} records missing")
                after, st = pool.tiers()[0]["bytes_in"], loader.stats()
                got = after - before
                nxt = st.get("next_pass_bytes")  # None: a build that does not count it
                own = None if nxt is None else (got - nxt + prev_next) / (n * REC)
                out["epochs"].append({"all": got / (n * REC), "own": own,
                                      "evictions": st["evictions"],
                                      "staged": st["prefetched"] + st["fetched"]})
                before, prev_next = after, nxt or 0
            loader.close()
            del loader, ds
        finally:
            pool.close()
            CXLMemoryPool.destroy(f"shm:{name}")
    finally:
        shutil.rmtree(d, ignore_errors=True)
    print(json.dumps(out))


def fmt(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.3f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=1.0)
    ap.add_argument("--mem", default="256M")
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--policies", default="lookahead,streaming")
    ap.add_argument("--runs", default="on,off")
    ap.add_argument("--sleep-ms", type=float, default=2.0)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--python", default=sys.executable,
                    help="interpreters, comma-separated, each with a build installed")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--json", default=None)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--policy", help=argparse.SUPPRESS)
    ap.add_argument("--run", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        child(a)
        return 0
    pys = a.python.split(",")
    rows: dict = {}
    for rnd in range(a.rounds):
        order = pys if rnd % 2 == 0 else pys[::-1]
        for pol in a.policies.split(","):
            for run in a.runs.split(","):
                for py in order:
                    p = subprocess.run([py, __file__, "--child", "--policy", pol, "--run", run,
                                        "--gib", str(a.gib), "--mem", a.mem, "--epochs",
                                        str(a.epochs), "--sleep-ms", str(a.sleep_ms), "--dir",
                                        a.dir], capture_output=True, text=True)
                    if p.returncode:
                        print(p.stderr[-2000:], file=sys.stderr)
                        return 1
                    r = json.loads(p.stdout.strip().splitlines()[-1])
                    rows.setdefault((py, pol, run), []).append(r)
                    print(f"round {rnd} {py} {pol} runs={run}: " + ", ".join(
                        f"epoch {i} {e['all']:.3f} ({fmt(e['own'])} own)"
                        for i, e in enumerate(r["epochs"])), file=sys.stderr, flush=True)
    print(f"{a.gib:g} GiB of 8 KiB records over a {a.mem} dram tier, {a.epochs} epochs, "
          f"{a.sleep_ms:g} ms a batch; medians of {a.rounds} rounds (min..max); load "
          f"{open('/proc/loadavg').read().split()[0:3]}")
    print()
    print("| build | policy | runs | " + " | ".join(
        f"epoch {i}: the epoch's own (all read)" for i in range(a.epochs)) +
        " | all read, mean of the epochs (min..max) |")
    print("|---|---|---|" + "---:|" * (a.epochs + 1))
    for (py, pol, run), rs in rows.items():
        cells = []
        for i in range(a.epochs):
            own = [r["epochs"][i]["own"] for r in rs]
            al = [r["epochs"][i]["all"] for r in rs]
            mo = statistics.median(own) if None not in own else None
            cells.append(f"{fmt(mo)} ({statistics.median(al):.3f})")
        means = sorted(statistics.mean(e["all"] for e in r["epochs"]) for r in rs)
        cells.append(f"{statistics.median(means):.3f} ({means[0]:.3f}..{means[-1]:.3f})")
        print(f"| {py} | {pol} | {run} | " + " | ".join(cells) + " |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"args": vars(a), "rows": [{"python": k[0], "policy": k[1], "runs": k[2],
                                                   "rounds": v} for k, v in rows.items()]},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
