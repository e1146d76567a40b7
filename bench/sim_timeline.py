#!/usr/bin/env python3
"""The timeline of a `cxlpool sim` result as a PNG: bytes in the staging
tiers and the ranks' mean stall against simulated time (docs/sim.md).
Needs matplotlib; without it, says so and exits 2.

    build/cxlpool sim design-cluster --out /tmp/dc.json
    python3 bench/sim_timeline.py /tmp/dc.json /tmp/dc.png
"""
import json
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    r = json.load(open(sys.argv[1]))
    pts = r["timeline"]["points"]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no chart", file=sys.stderr)
        return 2
    t = [p[1] for p in pts]
    fig, ax = plt.subplots(figsize=(7, 4))
    a = ax.plot(t, [p[2] / 1e12 for p in pts], label="staged (TB, all staging tiers)")
    ax.set_xlabel("simulated time (s)")
    ax.set_ylabel("TB")
    ax.set_ylim(bottom=0)
    ax2 = ax.twinx()
    b = ax2.plot(t, [p[3] / max(p[1], 1e-9) for p in pts], color="tab:red",
                 label="stall fraction so far")
    ax2.set_ylabel("stall fraction")
    ax2.set_ylim(0, 1)
    ax.set_title(f"cxlpool sim {r['config']}, {r['policy']} (simulated)")
    ax.legend(handles=a + b, loc="center right")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
