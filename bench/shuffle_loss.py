"""What an order does to training: examples/train_tiny.py's model on a
corpus stored sorted by source, one run per order, side by side.

    python3 bench/shuffle_loss.py [--steps 800] [--mib 8] [--sources 8]

The corpus: SOURCES synthetic byte sources (each a Markov chain of its own
over the same 64 byte values), cut into records of seq_len + 1
tokens and stored source after source (as a corpus concatenated file by
file is), ingested into a pool of tiers (a dram tier before a home file).
Each order trains the same model from the same initial weights for STEPS
steps, batches of 16 x 128 tokens, then the loss is measured on a held-out
mix of every source (the same 512 sequences for every order). The corpus
is ingested twice: as stored (sorted by source) and with the ingest-time
shuffle (`ingest(..., shuffle=SEED)`, `cxlpool ingest --shuffle SEED`:
record k is input record P(k)). Orders, on the sorted ingest:

    full shuffle          RandomCXLSampler(ds, seed=0)
    block (units)         RandomCXLSampler(ds, seed=0, window="auto", runs=False)
                          (epoch 0 ramped: the default on a pool of tiers)
    block, no ramp        the same with ramp=False
    runs                  RandomCXLSampler(ds, seed=0, window="auto", runs=True)
    storage order         torch's SequentialSampler (the floor), with --floor

and on the shuffled ingest ("shuffled ingest:" rows): full shuffle, block
(units) ramped, and runs, as above.

all with memory_budget=BUDGET (default 1 MiB: units of 64 KiB, a window of
8 units, 1/16 of an 8 MiB corpus; 800 steps of 16 read about 3 windows).
The held-out loss is taken at a quarter, half and all of the steps, and
compared with the full shuffle of the sorted ingest at each. It is a
function of the order and the seed, not of timing. Prints a table and,
with --out, writes JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from train_tiny import TinyLM  # noqa: E402

from torch.utils.data import SequentialSampler  # noqa: E402

from cxl_dataloader import (CXLDataLoader, CXLDataset, CXLMemoryPool,  # noqa: E402
                            RandomCXLSampler)

SEQ = 128


def corpus(mib: int, sources: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Records sorted by source, and a held-out mix of every source."""
    rng = np.random.default_rng(seed)
    per = (mib << 20) // (SEQ + 1) // sources
    train, held = [], []
    alphabet = rng.choice(256, 64, replace=False).astype(np.uint8)
    for s in range(sources):
        trans = rng.dirichlet(np.full(64, 0.1), size=64)      # sharp: learnable
        cum = trans.cumsum(axis=1)
        n = per + 64
        toks = np.empty((n, SEQ + 1), dtype=np.uint8)
        state = rng.integers(0, 64, n)
        for t in range(SEQ + 1):
            toks[:, t] = alphabet[state]
            u = rng.random(n)[:, None]
            state = (u > cum[state]).sum(axis=1).clip(0, 63)
        train.append(toks[:per])
        held.append(toks[per:])
    return np.concatenate(train), np.concatenate(held)


def held_loss(model: nn.Module, held: torch.Tensor) -> float:
    model.eval()
    with torch.no_grad():
        x, y = held[:, :-1], held[:, 1:]
        loss = float(nn.functional.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1)))
    model.train()
    return loss


def train(loader: CXLDataLoader, steps: int, held: torch.Tensor, init: dict) -> list[float]:
    """The held-out loss at steps/4, steps/2 and steps."""
    torch.manual_seed(0)
    model = TinyLM(seq_len=SEQ)
    model.load_state_dict(init)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    step, at = 0, []
    marks = {steps // 4, steps // 2, steps}
    while step < steps:
        for batch in loader:
            tokens = batch.long()
            x, y = tokens[:, :-1], tokens[:, 1:]
            loss = nn.functional.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step in marks:
                at.append(held_loss(model, held))
            if step >= steps:
                break
    return at


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=800)
    ap.add_argument("--mib", type=int, default=8)
    ap.add_argument("--sources", type=int, default=8)
    ap.add_argument("--budget", type=int, default=1 << 20, help="bytes")
    ap.add_argument("--floor", action="store_true", help="also storage order")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--shuffle-seed", type=int, default=1, help="the ingest-time shuffle's")
    ap.add_argument("--dir", default="/var/tmp")
    ap.add_argument("--out")
    a = ap.parse_args()
    torch.set_num_threads(1)
    rows, held = corpus(a.mib, a.sources, a.seed)
    held_t = torch.from_numpy(held[::max(1, len(held) // 512)][:512].astype(np.int64))
    name = f"shufloss-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    home = f"{a.dir}/cxlp-{name}.tier"
    pool = CXLMemoryPool(name, create=True, meta_bytes=4 << 20,
                         tiers=[f"dram=shm:{name}.d:8M", f"nvme=file:{home}:{3 * a.mib + 16}M"])
    try:
        with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
            src = Path(tmp) / "corpus.npy"
            np.save(src, rows)
            pool._pool.import_("corpus", str(src), format="npy")
            t0 = time.perf_counter()
            pool.ingest("shuffled", src, format="npy", shuffle=a.shuffle_seed, progress=False)
            print(f"shuffled ingest: {time.perf_counter() - t0:.2f} s", flush=True)
        ds = CXLDataset(pool, "corpus")
        sh = CXLDataset(pool, "shuffled")
        assert sh.ingest_shuffle == a.shuffle_seed and ds.ingest_shuffle is None
        torch.manual_seed(0)
        init = TinyLM(seq_len=SEQ).state_dict()
        orders = {
            "full shuffle": lambda: RandomCXLSampler(ds, seed=0),
            "block (units)": lambda: RandomCXLSampler(ds, seed=0, window="auto", runs=False,
                                                      memory_budget=a.budget),
            "block, no ramp": lambda: RandomCXLSampler(ds, seed=0, window="auto", runs=False,
                                                       ramp=False, memory_budget=a.budget),
            "runs": lambda: RandomCXLSampler(ds, seed=0, window="auto", runs=True,
                                             memory_budget=a.budget),
        }
        if a.floor:
            orders["storage order"] = lambda: SequentialSampler(range(len(ds)))
        orders.update({
            "shuffled ingest: full shuffle": lambda: RandomCXLSampler(sh, seed=0),
            "shuffled ingest: block (units)": lambda: RandomCXLSampler(
                sh, seed=0, window="auto", runs=False, memory_budget=a.budget),
            "shuffled ingest: runs": lambda: RandomCXLSampler(
                sh, seed=0, window="auto", runs=True, memory_budget=a.budget),
        })
        res = {}
        for label, make in orders.items():
            s = make()
            on = sh if label.startswith("shuffled ingest") else ds
            loader = CXLDataLoader(on, batch_size=16, sampler=s, drop_last=True,
                                   memory_budget=a.budget)
            t0 = time.perf_counter()
            loss = train(loader, a.steps, held_t, init)
            res[label] = {"loss": loss[-1], "at": loss, "shard_size": getattr(s, "shard_size", None),
                          "window": getattr(s, "window", None),
                          "seconds": time.perf_counter() - t0}
            loader.close()
            print(f"{label:32s} held-out loss {' '.join(f'{v:.4f}' for v in loss)}  "
                  f"(block {res[label]['shard_size']}, "
                  f"window {res[label]['window']}, {res[label]['seconds']:.0f} s)", flush=True)
        full = res["full shuffle"]["at"]
        for r in res.values():
            r["vs_full"] = [v / f for v, f in zip(r["at"], full)]
        print(f"\n{len(rows)} records of {SEQ + 1} tokens from {a.sources} sources stored in "
              f"order, {a.steps} steps of 16, budget {a.budget}:")
        q = [a.steps // 4, a.steps // 2, a.steps]
        print(f"| order | loss at step {q[0]} | at {q[1]} | at {q[2]} | "
              f"vs full shuffle at {q[0]} / {q[1]} / {q[2]} |")
        print("|---|---:|---:|---:|---:|")
        for label, r in res.items():
            print(f"| {label} | " + " | ".join(f"{v:.4f}" for v in r["at"]) +
                  " | " + " / ".join(f"{v:.3f}" for v in r["vs_full"]) + " |")
        if a.out:
            Path(a.out).write_text(json.dumps({"args": vars(a), "records": len(rows),
                                               "results": res}, indent=1))
    finally:
        pool.close()
        CXLMemoryPool.destroy(name)
        if os.path.exists(home):
            os.unlink(home)
    return 0


if __name__ == "__main__":
    sys.exit(main())
