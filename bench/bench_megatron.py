"""GPT samples per second: Megatron's GPTDataset over its own .bin/.idx
files in a torch DataLoader with 2 workers, against GPTDataset over the pool
(CXLGPTDataset, the same blend) read by 2 ranks through GPTBatches, in
paired rounds in one run; data on tmpfs (/dev/shm). Both yield the same
batches (tests/python/test_integrations_megatron.py); tokens/s counts the
tokens of the batches delivered (micro_batch_size x sequence_length each).

    python bench/bench_megatron.py [--tokens 16000000] [--samples 4096] [--rounds 3]
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import signal
import shutil
import sys
import tempfile
import time
import uuid

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "python"))
from conftest import write_megatron  # noqa: E402

SEQ, MBS = 2048, 8


class Tok:
    vocab_size, eod, pad = 60000, 0, 59999
    unique_identifiers = {"class": "Tok"}


def config(prefixes, cache):
    from megatron.core.datasets.gpt_dataset import GPTDatasetConfig
    return GPTDatasetConfig(random_seed=1234, sequence_length=SEQ, blend=(prefixes, [0.5, 0.5]),
                            split="100,0,0", tokenizer=Tok(), reset_position_ids=False,
                            reset_attention_mask=False, eod_mask_loss=False,
                            path_to_cache=cache, create_attention_mask=False)


def build(cls, prefixes, cache, samples):
    from megatron.core.datasets.blended_megatron_dataset_builder import (
        BlendedMegatronDatasetBuilder)
    return BlendedMegatronDatasetBuilder(cls, [samples, 0, 0], lambda: True,
                                         config(prefixes, cache)).build()[0]


def theirs(prefixes, cache, samples, q) -> None:
    from megatron.core.datasets.gpt_dataset import GPTDataset
    # Megatron's BlendedDataset asks the process group for its rank when it
    # caches to files: a group of one, as a single-rank Megatron job has
    torch.distributed.init_process_group("gloo", init_method=f"file://{cache}.pg", rank=0,
                                         world_size=1)
    ds = build(GPTDataset, prefixes, cache, samples)
    n = len(ds) // MBS * MBS
    dl = torch.utils.data.DataLoader(ds, batch_size=MBS, sampler=range(n), num_workers=2)
    t = time.perf_counter()
    toks = sum(b["tokens"].numel() for b in dl)
    q.put((toks, time.perf_counter() - t))


def ours(prefixes, samples, rank, q) -> None:
    from megatron.core.datasets.gpt_dataset import GPTDataset
    from cxl_dataloader.integrations.megatron import GPTBatches, on_pool
    ds = build(on_pool(GPTDataset), prefixes, None, samples)
    t = time.perf_counter()
    toks = sum(b["tokens"].numel() for b in GPTBatches(ds, MBS, rank=rank, world_size=2))
    q.put((toks, time.perf_counter() - t))


def run(target, argss) -> float:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    ps = [ctx.Process(target=target, args=(*a, q)) for a in argss]
    for p in ps:
        p.start()
    got = []
    while len(got) < len(ps):
        try:
            got.append(q.get(timeout=5))
        except Exception:  # queue.Empty: a process that died puts nothing
            if any(p.exitcode not in (None, 0) for p in ps):
                raise SystemExit(f"{target.__name__}: a process failed")
    for p in ps:
        p.join()
    return sum(g[0] for g in got) / max(g[1] for g in got)


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # clean up (finally) when killed
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=16_000_000)
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    from cxl_dataloader import CXLMemoryPool
    d = tempfile.mkdtemp(dir="/dev/shm", prefix="cxlp-bench-meg-")
    pname = f"bench-meg-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    rng = np.random.default_rng(0)
    try:
        pool = CXLMemoryPool(pname, create=True, size=4 * a.tokens + (256 << 20))
        for name in ("web", "code"):
            lens = rng.integers(50, 2000, a.tokens // 2 // 1000)
            seqs = [rng.integers(1, 50000, int(k), dtype=np.uint16) for k in lens]
            write_megatron(f"{d}/{name}", seqs, list(range(0, len(seqs) + 1)))
            pool.ingest(name, f"{d}/{name}", format="megatron")
        files = [f"{d}/web", f"{d}/code"]
        cxl = [f"cxl://{pname}/web", f"cxl://{pname}/code"]
        run(ours, [(cxl, a.samples, r) for r in range(2)])  # builds the pool's index caches
        ratios = []
        for r in range(a.rounds):
            t = run(theirs, [(files, f"{d}/cache", a.samples)])
            o = run(ours, [(cxl, a.samples, r) for r in range(2)])
            ratios.append(o / t)
            print(f"round {r}: torch DataLoader(2 workers) over files {t / 1e6:.1f} Mtok/s, "
                  f"pool 2 ranks {o / 1e6:.1f} Mtok/s, ratio {o / t:.1f}x", flush=True)
        print(f"median ratio {np.median(ratios):.1f}x over {a.rounds} paired rounds")
        pool.close()
    finally:
        CXLMemoryPool.destroy(pname)
        shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
