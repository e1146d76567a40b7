#!/usr/bin/env python3
"""Stall against GPU demand for each policy, from `cxlpool sim --sweep`.

Runs `cxlpool sim CONFIG --set policy=P --sweep rank.demand=D1,D2,...` for
each policy, writes the rows to OUT/sim_sweep.tsv and a Markdown table to
stdout, and, where matplotlib is installed, the chart OUT/sim_sweep.png
(stall fraction against demand, one line a policy). A simulation: the
figures are the configuration's, not measurements (docs/sim.md).

    python3 bench/sim_sweep.py --cxlpool build/cxlpool --config design-cluster \
        --demands 0.5e9,1e9,2e9,4e9 --out /tmp/sweep
"""
import argparse
import os
import subprocess
import sys

POLICIES = "lookahead,lru,streaming,hot_first"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cxlpool", default="build/cxlpool")
    ap.add_argument("--config", default="design-cluster")
    ap.add_argument("--policies", default=POLICIES)
    ap.add_argument("--demands", default="0.5e9,1e9,2e9,4e9", help="bytes/s per rank")
    ap.add_argument("--set", action="append", default=[], help="KEY=VALUE for every run")
    ap.add_argument("--out", required=True)
    ap.add_argument("--plot-only", action="store_true",
                    help="draw OUT/sim_sweep.tsv again, running nothing")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    rows = []
    if a.plot_only:
        with open(os.path.join(a.out, "sim_sweep.tsv")) as f:
            head = f.readline().rstrip("\n").split("\t")
            rows = [dict(zip(head, ln.rstrip("\n").split("\t"))) for ln in f]
        a.policies = ",".join(dict.fromkeys(r["policy"] for r in rows))
    for pol in ([] if a.plot_only else a.policies.split(",")):
        cmd = [a.cxlpool, "sim", a.config, "--set", f"policy={pol}"]
        for s in a.set:
            cmd += ["--set", s]
        cmd += ["--sweep", f"rank.demand={a.demands}"]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
        lines = out.strip().splitlines()
        head = lines[0].split("\t")
        for ln in lines[1:]:
            r = dict(zip(head, ln.split("\t")))
            r["policy"] = pol
            rows.append(r)
    cols = ["policy", "value", "stall_fraction", "memory_hit_rate", "samples_per_s",
            "home_bytes_per_epoch", "sim_seconds"]
    if not a.plot_only:
        with open(os.path.join(a.out, "sim_sweep.tsv"), "w") as f:
            f.write("\t".join(cols) + "\n")
            for r in rows:
                f.write("\t".join(r[c] for c in cols) + "\n")
    print("| policy | demand (GB/s a GPU) | stall | memory hit rate | samples/s | home TB/epoch |")
    print("|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['policy']} | {float(r['value']) / 1e9:g} | {float(r['stall_fraction']):.3f} "
              f"| {float(r['memory_hit_rate']):.3f} | {float(r['samples_per_s']):,.0f} "
              f"| {float(r['home_bytes_per_epoch']) / 1e12:.1f} |")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart", file=sys.stderr)
        return 0
    fig, ax = plt.subplots(figsize=(6, 4))
    # policies with the same figures (lookahead and streaming when both
    # stage the window ahead) overlap: each its own line style and marker size
    styles = ["-", "--", ":", "-."]
    for i, pol in enumerate(a.policies.split(",")):
        xs = [float(r["value"]) / 1e9 for r in rows if r["policy"] == pol]
        ys = [float(r["stall_fraction"]) for r in rows if r["policy"] == pol]
        ax.plot(xs, ys, marker="o", markersize=9 - 2 * (i % 4), linestyle=styles[i % 4],
                label=pol)
    ax.set_xlabel("demand per GPU (GB/s)")
    ax.set_ylabel("stall fraction")
    ax.set_title(f"cxlpool sim {a.config} (simulated)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "sim_sweep.png"), dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
