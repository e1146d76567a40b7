#!/usr/bin/env python3
"""The fast path of two builds of the package over the same points, rounds
interleaved: what a change (a merge, a rewrite) did to the loader.

Each build is a Python interpreter whose installed cxl_dataloader is that
build (a venv per build; `pip install .` puts the build's cxlpool beside
it). Each runs as a worker process that ingests the same source files with
its own cxlpool (so each reads the shard format it writes, on 2 MiB pages,
one shard, as bench_sweep.py does) and runs CXLDataLoader(ds, batch_size=B,
shuffle=True[, seq_len=1024]) epochs when asked. The driver asks A and B in
turn, which goes first alternating per round, the same epoch (the same
order) to both, after checking that both deliver the same first batch.

Per round: wall seconds and process CPU seconds of one epoch (`for b in
loader: pass`); B/A is taken per round (throughput: wall A / wall B; CPU
per record: CPU B / CPU A) and given as the median with its range. Python
time per batch as bench_sweep.py measures it (next() minus the engine's
wait), the median of one epoch, three epochs per build alternating.

    python3 bench/bench_ab.py --a VENV_A/bin/python --b VENV_B/bin/python \\
        [--points stack:4096:16,stack:256:256,pack:4096:16] [--mib 512] [--rounds 7]

Point: collate:record size (pack, pad: mean document bytes, or logu for
bench_sweep.py's 100 B .. 32 KiB log-uniform documents):batch size. pack2 and pad2: the same documents
with an int64 label beside them (two columns, written by _core.Writer:
builds with several fields only), the label collated too.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import numpy as np


def worker() -> int:
    """One build: requests as JSON lines on stdin, one JSON reply each."""
    import bench_sweep as sw  # this interpreter's cxl_dataloader
    import cxl_dataloader
    import torch
    from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool

    cli = str(Path(sys.executable).parent / "cxlpool")
    pool = ds = dl = None
    name = ""
    for line in sys.stdin:
        q = json.loads(line)
        op, r = q["op"], {}
        if op == "open":
            name = f"ab-{os.getpid()}-{uuid.uuid4().hex[:6]}"
            pool = CXLMemoryPool(name, create=True, size=q["shard"] + (64 << 20))
            t0 = time.perf_counter()
            if q["fields"]:  # the documents' tokens and an int64 label: two columns
                toks = np.fromfile(f"{q['src']}.bin", dtype=np.uint16)
                lens = np.load(f"{q['src']}.lens.npy")
                offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
                w = cxl_dataloader._core.Writer(pool._pool, "d", [("tokens", "uint16", (None,)),
                                                                  ("label", "int64", ())],
                                                shard_bytes=q["shard"])
                for a in range(0, len(lens), 4096):
                    b = min(len(lens), a + 4096)
                    w.append_columns(b - a, [(toks[offs[a]:offs[b]], offs[a:b + 1] - offs[a]),
                                             np.arange(a, b, dtype=np.int64) % 1000])
                w.commit()
                secs = time.perf_counter() - t0
            else:
                secs = sw.ingest(cli, f"shm:{name}", "d", Path(q["src"]), q["args"], q["shard"],
                                 True)
            ds = CXLDataset(f"shm:{name}", "d")
            r = {"records": len(ds), "ingest_s": secs, "pages": sw.pages(cli, f"shm:{name}", "d"),
                 "package": os.path.dirname(cxl_dataloader.__file__)}
        elif op == "loader":
            c = q["collate"].rstrip("2")
            kw = {"seq_len": sw.SEQ_LEN, "collate": c} if c != "stack" else {}
            dl = CXLDataLoader(ds, batch_size=q["batch"], shuffle=True, seed=sw.SEED,
                               threads=q["threads"], **kw)
            b = next(iter(dl))
            t = b if isinstance(b, torch.Tensor) else b["tokens"]
            r = {"digest": hashlib.sha1(t.contiguous().view(torch.uint8).numpy()).hexdigest()}
            del b, t
            dl.set_epoch(1)
            sw.fast_epoch(dl)  # warm-up: engine, slots, page tables
            r["threads"] = dl.threads
        elif op == "epoch":
            dl.set_epoch(q["epoch"])
            r["wall"], r["cpu"] = sw.fast_epoch(dl)
        elif op == "py":
            dl.set_epoch(q["epoch"])
            r["us"] = sw.python_per_batch(dl)
        elif op == "close":
            dl = ds = None
            if pool is not None:
                pool.close()
                CXLMemoryPool.destroy(name)
                pool = None
        print(json.dumps(r), flush=True)
    return 0


class Build:
    def __init__(self, py: str) -> None:
        self.p = subprocess.Popen([py, __file__, "--worker"], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)

    def ask(self, **q: Any) -> dict:
        self.p.stdin.write(json.dumps(q) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.p.args[0]} died (exit {self.p.wait()})")
        return json.loads(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--a", help="python of build A (the baseline)")
    ap.add_argument("--b", help="python of build B")
    ap.add_argument("--points", default="stack:4096:16,stack:4096:256,stack:256:16,"
                    "stack:256:256,pack:4096:16")
    ap.add_argument("--mib", type=int, default=512, help="dataset size per record size")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None,
                    help="gather threads of both (default: the loader's choice)")
    ap.add_argument("--work", default=f"/var/tmp/{os.environ.get('USER', 'cxlp')}-ab")
    ap.add_argument("--json", default=None, help="write the figures there too")
    a = ap.parse_args()
    if a.worker:
        return worker()
    if not a.a or not a.b:
        ap.error("--a and --b name the two builds' interpreters")
    sys.path.insert(0, str(Path(__file__).parent))
    from bench_sweep import ITEM, doc_lengths, label, write_megatron

    groups: dict[tuple[str, Any], list[int]] = {}
    for p in a.points.split(","):
        c, s, b = p.split(":")
        groups.setdefault((c, int(s) if s.isdigit() else s), []).append(int(b))
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    A, B = Build(a.a), Build(a.b)
    out: list[dict] = []
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    try:
        for (collate, size), batches in groups.items():
            total, lens = a.mib << 20, None
            src = work / f"ab-{os.getpid()}-{collate}-{size}"
            if collate == "stack":
                n = total // size
                with open(src, "wb") as f:
                    for s in range(0, n * size, 1 << 26):
                        f.write(rng.bytes(min(1 << 26, n * size - s)))
                args, files, data = ["--format", "raw", "--record-size", str(size)], [src], n * size
            else:
                lens = doc_lengths(size, total, rng)
                write_megatron(src, lens, rng)
                np.save(f"{src}.lens.npy", lens)
                args = ["--format", "megatron"]
                files = [Path(f"{src}.bin"), Path(f"{src}.idx"), Path(f"{src}.lens.npy")]
                data = int(lens.sum()) * ITEM
            shard = data + 8 * (len(lens) if lens is not None else 0) + (16 << 20)
            info = [w.ask(op="open", src=str(src), args=args, shard=shard,
                          fields=collate.endswith("2")) for w in (A, B)]
            for f in files:
                f.unlink()
            print(f"{collate} {label(size)}: A {info[0]['package']} pages {info[0]['pages']}; "
                  f"B {info[1]['package']} pages {info[1]['pages']}", file=sys.stderr)
            for batch in batches:
                la, lb = (w.ask(op="loader", collate=collate, batch=batch, threads=a.threads)
                          for w in (A, B))
                if la["digest"] != lb["digest"]:
                    raise SystemExit(f"{collate} {size} batch {batch}: the builds' first "
                                     "batches differ")
                load = [os.getloadavg()[0]]
                rounds = []
                for r in range(a.rounds):
                    e = 2 + r
                    got = {}
                    for key, w in ((("a", A), ("b", B)) if r % 2 == 0 else (("b", B), ("a", A))):
                        got[key] = w.ask(op="epoch", epoch=e)
                    rounds.append(got)
                py = {"a": [], "b": []}
                for r in range(3):
                    for key, w in ((("a", A), ("b", B)) if r % 2 == 0 else (("b", B), ("a", A))):
                        py[key].append(w.ask(op="py", epoch=100 + r)["us"])
                load.append(os.getloadavg()[0])
                med = statistics.median
                thr = [x["a"]["wall"] / x["b"]["wall"] for x in rounds]
                cpu = [x["b"]["cpu"] / x["a"]["cpu"] for x in rounds]
                n = info[0]["records"]
                pt = {"collate": collate, "size": size, "batch": batch,
                      "threads": [la["threads"], lb["threads"]], "records": n, "bytes": data,
                      "a_gb_s": data / med(x["a"]["wall"] for x in rounds) / 1e9,
                      "b_gb_s": data / med(x["b"]["wall"] for x in rounds) / 1e9,
                      "ratio": med(thr), "ratio_min": min(thr), "ratio_max": max(thr),
                      "a_cpu_us_rec": 1e6 * med(x["a"]["cpu"] for x in rounds) / n,
                      "b_cpu_us_rec": 1e6 * med(x["b"]["cpu"] for x in rounds) / n,
                      "cpu_ratio": med(cpu), "cpu_ratio_min": min(cpu),
                      "cpu_ratio_max": max(cpu), "a_py_us": med(py["a"]), "b_py_us": med(py["b"]),
                      "load": load, "rounds": rounds}
                out.append(pt)
                print(f"  batch {batch:3d}: A {pt['a_gb_s']:.2f} GB/s, B {pt['b_gb_s']:.2f} GB/s, "
                      f"B/A {pt['ratio']:.3f} ({pt['ratio_min']:.3f}-{pt['ratio_max']:.3f}), "
                      f"CPU/rec B/A {pt['cpu_ratio']:.3f}, Python us/batch A {pt['a_py_us']:.2f} "
                      f"B {pt['b_py_us']:.2f}, load {load[0]:.1f}-{load[1]:.1f}", file=sys.stderr)
            for w in (A, B):
                w.ask(op="close")
    finally:
        for w in (A, B):
            w.p.stdin.close()
            w.p.wait()
    lines = [f"Command: `python3 bench/bench_ab.py --points {a.points} --mib {a.mib} "
             f"--rounds {a.rounds}" + (f" --threads {a.threads}" if a.threads else "") +
             f"` ({started}; {os.cpu_count()} CPUs)", "",
             "| collate | records | batch | threads A/B | A GB/s | B GB/s | B/A (rounds) "
             "| CPU µs/rec A | B | CPU B/A (rounds) | Python µs/batch A | B | load |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for p in out:
        lines.append(
            f"| {p['collate']} | {label(p['size'])} | {p['batch']} | {p['threads'][0]}/"
            f"{p['threads'][1]} | {p['a_gb_s']:.2f} | {p['b_gb_s']:.2f} "
            f"| **{p['ratio']:.3f}** ({p['ratio_min']:.3f}-{p['ratio_max']:.3f}) "
            f"| {p['a_cpu_us_rec']:.3f} | {p['b_cpu_us_rec']:.3f} "
            f"| **{p['cpu_ratio']:.3f}** ({p['cpu_ratio_min']:.3f}-{p['cpu_ratio_max']:.3f}) "
            f"| {p['a_py_us']:.2f} | {p['b_py_us']:.2f} | {p['load'][0]:.1f}-{p['load'][1]:.1f} |")
    print("\n".join(lines))
    if a.json:
        Path(a.json).write_text(json.dumps({"started": started, "a": a.a, "b": a.b,
                                            "points": out}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
