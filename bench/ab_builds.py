#!/usr/bin/env python3
"""Two builds of the library side by side, in one run: the C read path
(`cxlpool bench gather`) and the PyTorch fast path (bench/bench_loader.py's
CXLDataLoader figure), build A and build B in alternation (A B B A ...), each
ratio A/B taken round by round so that the machine's drift cancels.

For claims like "nothing in the single-host fast path slows down": A is a
branch, B is main. Each build reads its own pool (two builds may not share a
pool format), holding the same records.

    python3 bench/ab_builds.py --a-root DIR --a-python PY --b-root DIR --b-python PY
                               [--rounds 6] [--mib 128] [--json PATH]

DIR is a source tree whose CLI is built at DIR/build/cxlpool; PY is a Python
with that tree's package installed (and no in-tree build of it in DIR).
Prints, per measure, the median A/B ratio with its min and max over rounds,
and the load average.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

RECORD = 8192


def run_json(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def gather(cli: str, pool: str) -> dict:
    doc = run_json([cli, "bench", "gather", pool, "rec8k", "--batch", "32", "--threads", "1,2",
                    "--rounds", "3", "--json"])
    return {f"gather_{r['threads']}t": r["pool_records_s"] for r in doc["results"]}


def loader(py: str, root: str, mib: int) -> dict:
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([py, f"{root}/bench/bench_loader.py", "--mib", str(mib), "--rounds", "5",
                        "--passes", "1", "--json", f.name, "--cli", f"{root}/build/cxlpool"],
                       check=True, capture_output=True, text=True, cwd="/")
        s = json.load(open(f.name))["summary"]
    return {"loader_fast": s["fast_records_s"]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for side in ("a", "b"):
        ap.add_argument(f"--{side}-root", required=True)
        ap.add_argument(f"--{side}-python", required=True)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--json", default=None)
    ap.add_argument("--gather-only", action="store_true", help="skip bench_loader.py")
    a = ap.parse_args()
    sides = {s: {"root": getattr(a, f"{s}_root"), "py": getattr(a, f"{s}_python")}
             for s in ("a", "b")}
    src = Path(tempfile.mkdtemp(dir="/var/tmp")) / "rec8k.raw"
    with open(src, "wb") as f:
        f.write(os.urandom(a.mib << 20))
    pools = {}
    try:
        for s, d in sides.items():
            cli = f"{d['root']}/build/cxlpool"
            pools[s] = f"ab-{s}-{os.getpid()}"
            subprocess.run([cli, "create", pools[s], f"{a.mib + 64}M"], check=True,
                           capture_output=True)
            subprocess.run([cli, "ingest", pools[s], "rec8k", str(src), "--record-size",
                            str(RECORD), "--no-progress"], check=True, capture_output=True)
        rounds = []
        for r in range(a.rounds):
            order = ["a", "b"] if r % 2 == 0 else ["b", "a"]
            res = {}
            for s in order:
                d = sides[s]
                res[s] = gather(f"{d['root']}/build/cxlpool", pools[s])
                if not a.gather_only:
                    res[s].update(loader(d["py"], d["root"], a.mib))
            rounds.append(res)
            print(f"round {r}: " + ", ".join(f"{k} A/B {res['a'][k] / res['b'][k]:.3f}"
                                             for k in res["a"]), file=sys.stderr)
    finally:
        for s, name in pools.items():
            subprocess.run([f"{sides[s]['root']}/build/cxlpool", "destroy", name, "--yes"],
                           capture_output=True)
        src.unlink(missing_ok=True)
        src.parent.rmdir()
    load = os.getloadavg()
    print(f"ab_builds: A={a.a_root} B={a.b_root}, {a.rounds} rounds (A B / B A alternating), "
          f"{a.mib} MiB of {RECORD} B records, load average {load[0]:.1f} {load[1]:.1f} "
          f"{load[2]:.1f} on {os.cpu_count()} CPUs")
    print(f"{'measure':28} {'A rec/s':>11} {'B rec/s':>11} {'A/B median':>11} {'min':>7} {'max':>7}")
    summary = {}
    for k in rounds[0]["a"]:
        ratios = sorted(r["a"][k] / r["b"][k] for r in rounds)
        am = statistics.median(r["a"][k] for r in rounds)
        bm = statistics.median(r["b"][k] for r in rounds)
        summary[k] = {"a": am, "b": bm, "ratio_median": statistics.median(ratios),
                      "ratio_min": ratios[0], "ratio_max": ratios[-1]}
        print(f"{k:28} {am:11.0f} {bm:11.0f} {statistics.median(ratios):11.3f} "
              f"{ratios[0]:7.3f} {ratios[-1]:7.3f}")
    if a.json:
        Path(a.json).write_text(json.dumps({"loadavg": load, "rounds": rounds,
                                            "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
