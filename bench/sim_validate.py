#!/usr/bin/env python3
"""The simulator against this machine: predicted and measured, one run.

    python3 bench/sim_validate.py [--gib 8] [--mem 1G] [--dir /var/tmp/tiers]
                                  [--home-rate 600M | --home-rate off]
                                  [--policies lookahead,lru,streaming,hot_first]
                                  [--demand 0.8] [--rounds 1] [--tolerance 0.15]
                                  [--quick] [--out docs/benchmarks/sim-validate-DATE]

Measured: bench/bench_tiers.py's runs (an N GiB dataset of 8 KiB records
homed on an nvme tier, one --mem dram tier, one epoch per policy with the
defaults: RandomCXLSampler(window="auto"), CXLDataLoader(threads=2)), and
its demand run (lookahead at --demand of the bound, two epochs, the first
cold, paced per batch and by a fixed schedule).

Predicted: `cxlpool sim` with a configuration written from that same run
and nothing else:
  - the dataset: its records, record size, and the block order's block as
    the loader staged it (the staging unit, or the run of units; from
    `ds.stage_order()`), the window the sampler used, seed 7 and the ramp
    in epoch 0, as the loader's sampler had them;
  - the home link: the same round's "shard read" (bench_seqread reading
    the home file's bytes as whole staging units in a random order, as
    many at once as the loader has stagers), its latency and concurrency
    the preset's;
  - the dram link and the loop's demand: the same round's all-DRAM run
    (the same loader and order over a one-tier shm pool: the rate at which
    batches are gathered from memory);
  - for the demand run, the demand it was paced at.
Each row: samples/s and home bytes per epoch, predicted / measured. A row
is within the tolerance when both ratios are in [1 - tol, 1 + tol]; the
script exits 1 when one is not.

--home-rate RATE (default 600M: MiB/s) holds the home link at RATE bytes/s with
the kernel's block throttle (cgroup v2 io.max rbps, or v1
blkio.throttle.read_bps_device) on the disk under --dir, for the whole of
bench_tiers (bench/throttle.py): this VM's disk drifts by 20-30% within minutes, more than
the tolerance, so without it the comparison measures the weather. The
simulation still takes the rate from the measured shard read, not from
RATE. --home-rate off runs the disk as it is. Needs root for the cgroup
(and for bench_tiers' drop_caches).

Writes OUT.json (both columns, the measured run whole, the
configurations) and prints the markdown table docs/scale.md carries.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throttle import Throttle, disk_of, parse_size  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
REC = 8192
BATCH = 256
SEED = 7  # bench_tiers' sampler seed


def sim_config(run: dict, res: dict, limits: dict, policy: str, epochs: int,
               demand_bps: float) -> dict:
    """The simulator's configuration for one measured epoch (see the module's
    docstring: everything from the same run)."""
    so = res["stage_order"]
    block = run["shard_size"]  # records a block of the order (a unit, or a run of units)
    unit = so["unit_records"] or block
    stagers = limits["shard read"]["streams"]
    return {
        "preset": "this-machine",
        "seed": SEED,
        "epochs": epochs,
        "policy": policy,
        "dataset": {"samples": res["records"], "sample_bytes": REC, "shard_bytes": block * REC},
        "order": {"window": run["window"], "ramp": True},
        "rank": {"demand": demand_bps, "batch": BATCH},
        "staging": {"stagers": stagers},
        "tiers": [
            {"name": "dram", "kind": "dram", "capacity": parse_size(res["mem"]),
             "latency_ns": 100, "bandwidth": limits["all-DRAM"]["gb_per_s"] * 1e9,
             "concurrency": 2},
            {"name": "nvme", "kind": "nvme", "capacity": res["records"] * REC * 2,
             "latency_ns": 100000, "bandwidth": limits["shard read"]["gb_per_s"] * 1e9,
             "concurrency": 64, "home": True},
        ],
        "_from": {"unit_records": unit, "block_records": block, "window": run["window"],
                  "shard_read_gb_per_s": limits["shard read"]["gb_per_s"],
                  "all_dram_gb_per_s": limits["all-DRAM"]["gb_per_s"]},
    }


def own(run: dict) -> float:
    """A measured epoch's home bytes: its own (less the next epoch's first
    windows staged during its last, plus what the previous staged for it:
    the simulation of the same epochs stages no epoch after its last) where
    the loader counted them, else all it read."""
    return run.get("nvme_bytes_epoch", run["nvme_bytes"])


def simulate(cxlpool: Path, cfg: dict, path: Path) -> dict:
    path.write_text(json.dumps({k: v for k, v in cfg.items() if not k.startswith("_")},
                               indent=1))
    p = subprocess.run([str(cxlpool), "sim", str(path)], capture_output=True, text=True)
    if p.returncode:
        raise SystemExit(f"cxlpool sim {path}: {p.stderr.strip()}")
    return json.loads(p.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gib", type=float, default=8.0)
    ap.add_argument("--mem", default="1G")
    ap.add_argument("--dir", default="/var/tmp/tiers")
    ap.add_argument("--home-rate", default="600M",
                    help="hold the home disk's reads at this rate (bytes/s, K/M/G) for the "
                         "measured runs; off: as it is")
    ap.add_argument("--policies", default="lookahead,lru,streaming,hot_first")
    ap.add_argument("--demand", type=float, default=0.8)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--tolerance", type=float, default=0.15)
    ap.add_argument("--quick", action="store_true", help="512 MiB and 64 MiB: a smoke run")
    ap.add_argument("--cxlpool", default=str(REPO / "build" / "cxlpool"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--measured", default=None,
                    help="simulate against this saved run (an OUT.json of this script, or "
                         "bench_tiers' JSON) instead of measuring")
    a = ap.parse_args()
    if a.quick:
        a.gib, a.mem = 0.5, "64M"
    date = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    out = Path(a.out) if a.out else REPO / "docs" / "benchmarks" / (
        "sim-validate-" + date[:13] + date[14:16])
    work = out.parent / (out.name + ".d")
    work.mkdir(parents=True, exist_ok=True)
    Path(a.dir).mkdir(parents=True, exist_ok=True)
    throttle = None
    command = "python3 bench/sim_validate.py " + " ".join(sys.argv[1:])
    if a.measured:
        doc = json.loads(Path(a.measured).read_text())
        res = doc.get("measured", doc)
        date = doc.get("date", res["date"])
        command = doc.get("command", res["command"])
        a.home_rate = doc.get("home_rate", "unknown")
        kind, dev = doc.get("throttle"), doc.get("throttle_dev")
    else:
        if a.home_rate != "off":
            throttle = Throttle(disk_of(Path(a.dir)), parse_size(a.home_rate))
        kind, dev = (throttle.kind, throttle.dev) if throttle else (None, None)
        cmd = [sys.executable, str(REPO / "bench" / "bench_tiers.py"), "--gib", str(a.gib),
               "--mem", a.mem, "--dir", a.dir, "--no-mosaic", "--rounds", str(a.rounds),
               "--policies", a.policies, "--demand", str(a.demand), "--demand-policies",
               "lookahead", "--demand-epochs", "2", "--out", str(work / "measured")]
        print("measured:", " ".join(cmd[1:]), file=sys.stderr, flush=True)
        try:
            subprocess.run(cmd, check=True, stdout=sys.stderr,
                           preexec_fn=throttle.join if throttle else None)
        finally:
            if throttle:
                throttle.close()
        res = json.loads((work / "measured.json").read_text())
    rows = []
    dataset = res["records"] * REC
    for rnd, runs in enumerate(res["rounds"]):
        limits = {r["policy"]: r for r in runs if r["policy"] in ("seq read", "shard read",
                                                                  "all-DRAM")}
        gather = limits["all-DRAM"]["gb_per_s"] * 1e9  # the loop's rate from memory
        for r in runs:
            if r["policy"] in limits:
                continue
            cfg = sim_config(r, res, limits, r["policy"], 1, gather)
            s = simulate(Path(a.cxlpool), cfg, work / f"sim-{r['policy']}-{rnd}.json")
            # bench_tiers times an epoch from iter(); the loader places
            # hot_first's copies when it is made, before: so the simulated
            # epoch is timed from the end of its placement
            rows.append({"run": r["policy"], "round": rnd, "epoch": "0", "config": cfg,
                         "judged": True,
                         "pred_sps": res["records"] / (s["ranks"][0]["seconds"] -
                                                       s["placement_s"]),
                         "meas_sps": r["samples_per_s"],
                         "pred_home": s["epochs"][0]["home_bytes_moved"],
                         "meas_home": own(r),
                         "pred_stall": s["epochs"][0]["stall_fraction"],
                         "meas_stall": None})
    # the demand runs: the limits of the last round (bench_tiers' bound is
    # the medians'), the demand each was paced at
    limits = {r["policy"]: r for r in res["runs"] if r["policy"] in ("seq read", "shard read",
                                                                    "all-DRAM")}
    for d in res["demand_runs"]:
        if d["pacing"] != "batch":
            # the other pacing (a fixed schedule: a late batch is made up
            # by asking faster) is not what a simulated rank does
            continue
        pol = d["policy"].split(" ")[0]
        cfg = sim_config(d, res, limits, pol, 2, d["demand_sps"] * REC)
        s = simulate(Path(a.cxlpool), cfg, work / f"sim-{pol}-demand-{d['pacing']}.json")
        # the simulated rank's samples/s over both epochs, split by the
        # epochs' ends
        ends = [e["end_s"] for e in s["epochs"]]
        starts = [s["placement_s"]] + ends[:-1]
        eps = [d] + d.get("later", [])
        run = f"{pol} @{a.demand:.0%}"
        for ep, m in enumerate(eps):
            t = ends[ep] - starts[ep]
            rows.append({"run": run, "round": 0, "epoch": str(ep), "config": cfg,
                         "judged": False,
                         "pred_sps": res["records"] / t, "meas_sps": m["samples_per_s"],
                         "pred_home": s["epochs"][ep]["home_bytes_moved"],
                         "meas_home": own(m),
                         "pred_stall": s["epochs"][ep]["stall_fraction"],
                         "meas_stall": m["stall_share"]})
        # judged over the run: which epoch a copy staged across an epoch's
        # end counts in is each side's bookkeeping (the loader's counters
        # read when the loop's epoch ends; the simulator's home bytes while
        # the rank is in the epoch), so the per-epoch figure judged is the
        # mean over the run's epochs
        n_ep = len(eps)
        rows.append({"run": run, "round": 0, "epoch": f"mean of {n_ep}", "config": cfg,
                     "judged": True,
                     "pred_sps": res["records"] * n_ep / (ends[-1] - starts[0]),
                     "meas_sps": res["records"] * n_ep / sum(m["seconds"] for m in eps),
                     "pred_home": sum(e["home_bytes_moved"] for e in s["epochs"]) / n_ep,
                     "meas_home": sum(own(m) for m in eps) / n_ep,
                     "pred_stall": sum(e["stall_fraction"] * (ends[i] - starts[i])
                                       for i, e in enumerate(s["epochs"])) /
                                   (ends[-1] - starts[0]),
                     "meas_stall": sum(m["stall_s"] for m in eps) /
                                   sum(m["seconds"] for m in eps)})
    ok = True
    for r in rows:
        r["sps_ratio"] = r["pred_sps"] / r["meas_sps"]
        r["home_ratio"] = r["pred_home"] / r["meas_home"] if r["meas_home"] else float("nan")
        r["within"] = all(abs(x - 1) <= a.tolerance for x in (r["sps_ratio"], r["home_ratio"]))
        ok &= r["within"] or not r["judged"]
    doc = {"date": date, "command": command,
           "home_rate": a.home_rate, "throttle": kind, "throttle_dev": dev,
           "tolerance": a.tolerance,
           "within": ok, "rows": rows, "measured": res}
    out.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    for f in work.iterdir():
        f.unlink()
    work.rmdir()
    print(table(doc))
    return 0 if ok else 1


def table(doc: dict) -> str:
    res = doc["measured"]
    lim = {r["policy"]: r for r in res["runs"] if "hit_rate" not in r}
    L = [f"{res['gib']:g} GiB of 8 KiB records, a {res['mem']} dram tier; the home link "
         + (f"held at {doc['home_rate']}iB/s ({doc['throttle']})" if doc["throttle"]
            else "as the disk gave it") +
         f"; measured shard read {lim['shard read']['gb_per_s']:.3f} GB/s, "
         f"all-DRAM {lim['all-DRAM']['samples_per_s']:,.0f} samples/s; {doc['date']}",
         "",
         "| run | epoch | samples/s predicted | measured | ratio | home bytes / dataset "
         "predicted | measured | ratio | stall predicted | measured | judged |",
         "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    ds = res["records"] * REC
    for r in doc["rows"]:
        ms = "" if r["meas_stall"] is None else f"{r['meas_stall']:.4f}"
        L.append(f"| {r['run']} | {r['epoch']} | {r['pred_sps']:,.0f} | {r['meas_sps']:,.0f} | "
                 f"{r['sps_ratio']:.3f} | {r['pred_home'] / ds:.3f} | {r['meas_home'] / ds:.3f} | "
                 f"{r['home_ratio']:.3f} | {r['pred_stall']:.4f} | {ms} | "
                 f"{('yes' if r['within'] else 'NO') if r['judged'] else 'shown'} |")
    L.append("")
    L.append(f"every judged row within {doc['tolerance']:.0%}: "
             f"{'yes' if doc['within'] else 'NO'}")
    return "\n".join(L)


if __name__ == "__main__":
    sys.exit(main())
