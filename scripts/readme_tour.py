#!/usr/bin/env python3
"""The README's tour of the CLI, run for real.

    python3 scripts/readme_tour.py                   # run it, print every step
    python3 scripts/readme_tour.py --write README.md # put the output between its markers
    python3 scripts/readme_tour.py --check README.md # exit 1 when README differs

Every step's commands run in a scratch directory holding the tour's input
files (tests/cli/mkdata.py's, and a seeded raw file of 4 KiB records), with
`cxlpool` from --cli (default: build/cxlpool) on PATH, on a pool named
"demo" (--pool NAME runs it on NAME and prints "demo": /dev/shm is shared).
A README block is `<!-- tour:STEP -->`, the indented output, `<!-- /tour -->`.

--check compares the README's blocks with a fresh run after normalize(),
which keeps everything but what a run may change by itself: timings and
rates, the machine's sizes (its memory, the share of a dataset that landed
on 2 MiB pages), uuids, host ids, hostnames and pids
(tests/python/test_docs.py runs it, and plants a drift to see it fail).
"""
from __future__ import annotations

import argparse
import difflib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

# (step, commands); "cxlpool" is the binary under test, "demo" the pool
STEPS: list[tuple[str, list[str]]] = [
    ("topo", ["cxlpool topo"]),
    ("topo-kmem", ["cxlpool topo --sysfs-root tests/data/sysfs/cxl-kmem"]),
    ("ingest", ["cxlpool create demo 64M",
                "cxlpool ingest demo tokens tokens.raw --record-size 4096 --dtype uint16",
                "cxlpool ingest demo arr good.npy",
                "cxlpool ingest demo corpus good_mt --format megatron"]),
    ("inspect", ["cxlpool ls demo", "cxlpool ls demo --json", "cxlpool stat demo",
                 "cxlpool stat demo corpus", "cxlpool verify demo"]),
    ("cat", ["cxlpool cat demo arr 7 --format dtype", "cxlpool cat demo arr 7 --format json",
             "cxlpool cat demo corpus 2 --format json",
             "cxlpool cat demo arr 0 --format hex"]),
    ("bench", ["cxlpool bench gather demo tokens --rounds 3"]),
    ("errors", ["cxlpool ingest demo bad trunc_idx --format megatron",
                "cxlpool ingest demo bad fortran.npy", "cxlpool cat demo nosuch 0"]),
    ("leases", ["cxlpool leases demo"]),
    ("remove", ["cxlpool rm demo arr", "cxlpool destroy demo --yes"]),
]

# the other host of the leases step: a process whose host id is not ours
OTHER_HOST_ID = "55165c157697bf08"
HOLDER = """
import sys
from cxl_dataloader import CXLMemoryPool
pool = CXLMemoryPool(sys.argv[1])
print("attached", flush=True)
sys.stdin.read()
"""


def make_inputs(work: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / "tests" / "cli" / "mkdata.py"), str(work)],
                   check=True)
    rng = np.random.default_rng(34)
    (work / "tokens.raw").write_bytes(rng.integers(0, 1 << 16, 8 << 20, dtype=np.uint16)
                                      .tobytes())  # 16 MiB: 4096 records of 4 KiB
    (work / "tests").symlink_to(ROOT / "tests")


def run_steps(cli: Path, pool: str) -> dict[str, str]:
    """{step: its block's text} of a fresh run on pool (printed as "demo")."""
    out: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="cxlp-tour-") as tmp:
        work = Path(tmp)
        make_inputs(work)
        bindir = work / "bin"
        bindir.mkdir()
        (bindir / "cxlpool").symlink_to(cli.resolve())
        env = dict(os.environ, PATH=f"{bindir}:{os.environ['PATH']}", COLUMNS="100")
        holder = None
        try:
            for step, cmds in STEPS:
                if step == "leases":
                    holder = subprocess.Popen(
                        [sys.executable, "-c", HOLDER, pool], cwd=work, text=True,
                        stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                        env=dict(env, CXLP_HOST_ID=OTHER_HOST_ID))
                    assert holder.stdout is not None and holder.stdout.readline() == "attached\n"
                lines = []
                for cmd in cmds:
                    r = subprocess.run(["bash", "-c", cmd.replace("demo", pool)], cwd=work,
                                       env=env, capture_output=True, text=True, timeout=300)
                    lines.append(f"$ {cmd}")
                    text = (r.stdout + r.stderr).replace(pool, "demo")
                    lines += text.rstrip("\n").split("\n") if text.strip() else []
                    if r.returncode:
                        lines.append(f"[exit {r.returncode}]")
                out[step] = "\n".join(lines)
                if holder is not None:
                    holder.communicate("", timeout=60)
                    holder = None
        finally:
            if holder is not None:
                holder.kill()
            subprocess.run([str(cli), "destroy", pool, "--yes"], capture_output=True)
    return out


def block(text: str) -> str:
    return "\n".join("    " + x if x else "" for x in text.split("\n"))


BLOCK = re.compile(r"<!-- tour:([\w-]+) -->\n(.*?)\n?<!-- /tour -->", re.S)


def readme_blocks(readme: str) -> dict[str, str]:
    """{step: the block's output, unindented} of the README's tour blocks."""
    return {m.group(1): "\n".join(x[4:] for x in m.group(2).strip("\n").split("\n"))
            for m in BLOCK.finditer(readme)}


def write(readme: str, blocks: dict[str, str]) -> str:
    missing = [s for s, _ in STEPS if f"<!-- tour:{s} -->" not in readme]
    if missing:
        raise SystemExit(f"README has no block for step(s) {', '.join(missing)}")
    return BLOCK.sub(lambda m: f"<!-- tour:{m.group(1)} -->\n\n{block(blocks[m.group(1)])}\n\n"
                     "<!-- /tour -->", readme)


# What a run may change by itself; everything else must be as the README says.
NORMALIZE = [
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<uuid>"),
    (re.compile(r"\b[0-9a-f]{16}\b"), "<id>"),
    (re.compile(r"(this host: +id <id> from ).*"), r"\1<source>"),
    (re.compile(r" in \d+\.\d+ s, \d+\.\d+ GB/s"), " in <t> s, <t> GB/s"),
    (re.compile(r'"created_unix": \d+'), '"created_unix": <t>'),
    (re.compile(r"memory \d+\.\d+ GiB(?=, tier \d+, no HMAT)"), "memory <size>"),
    (re.compile(r"2 MiB pages for [\d.]+ \w?i?B of ([\d.]+ \w?i?B) \([\d.]+%\)"),
     r"2 MiB pages for <size> of \1 (<p>%)"),
    # bench rows: threads, then rates and a ratio
    (re.compile(r"^( +\d+)( +[\d.]+%?)+$", re.M), r"\1 <rates>"),
    # leases rows: slot, hostname, host id, pid, age (one space apart: the
    # columns' padding moves with the hostname's and the pid's widths)
    (re.compile(r"^(\d+) +\S+ +<id> +\d+ +\d+\.\d+ s", re.M), r"\1 <host> <id> <pid> <t> s"),
]


def normalize(text: str) -> str:
    for pat, rep in NORMALIZE:
        text = pat.sub(rep, text)
    return text


def differences(readme: str, fresh: dict[str, str]) -> list[str]:
    """Unified diffs of the README's blocks against a fresh run, normalized;
    [] when they agree."""
    have = readme_blocks(readme)
    out = []
    for step, _ in STEPS:
        if step not in have:
            out.append(f"README has no tour block {step!r}")
            continue
        a, b = normalize(have[step]).split("\n"), normalize(fresh[step]).split("\n")
        if a != b:
            out.append("\n".join(difflib.unified_diff(a, b, f"README {step}", f"fresh {step}",
                                                      lineterm="")))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cli", default=str(ROOT / "build" / "cxlpool"))
    ap.add_argument("--pool", default="demo")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--write", metavar="README")
    g.add_argument("--check", metavar="README")
    a = ap.parse_args()
    cli = Path(a.cli) if os.sep in a.cli else Path(shutil.which(a.cli) or a.cli)
    fresh = run_steps(cli, a.pool)
    if a.write:
        p = Path(a.write)
        p.write_text(write(p.read_text(), fresh))
        return 0
    if a.check:
        diffs = differences(Path(a.check).read_text(), fresh)
        for d in diffs:
            print(d)
        return 1 if diffs else 0
    for step, _ in STEPS:
        print(f"--- {step}\n{block(fresh[step])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
