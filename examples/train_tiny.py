"""The main job: train a small byte-level transformer from a pool.

    python examples/train_tiny.py --pool cxlp-demo --dataset common-licenses

The dataset is a token dataset in the pool (e.g. a Megatron .bin/.idx
ingested by `cxlpool ingest`). CXLDataLoader packs its records into rows of
seq_len + 1 tokens in C threads and hands each batch over without a copy; the
training loop is the ordinary one. Prints loss, samples/s and the time the
loop waited on the loader (stall).
"""
from __future__ import annotations

import argparse
import math
import sys
import time

import torch
import torch.nn as nn

from cxl_dataloader import CXLDataLoader, CXLDataset


class TinyLM(nn.Module):
    """A decoder-only transformer over byte tokens (vocabulary 256)."""

    def __init__(self, vocab: int = 256, d: int = 128, layers: int = 2, heads: int = 4,
                 seq_len: int = 128) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(seq_len, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(seq_len),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[1]
        h = self.tok(x) + self.pos(torch.arange(n, device=x.device))
        h = self.blocks(h, mask=self.mask[:n, :n], is_causal=True)
        return self.head(self.norm(h))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pool", default="cxlp-demo", help="pool spec (default shm:cxlp-demo)")
    ap.add_argument("--dataset", default="common-licenses")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2, help="C gather threads")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-progress", action="store_true")
    a = ap.parse_args(argv)

    torch.manual_seed(a.seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    ds = CXLDataset(a.pool, a.dataset)
    if ds.schema["fixed"]:
        print(f"{a.dataset}: expected a token dataset (variable-size records)", file=sys.stderr)
        return 2
    loader = CXLDataLoader(ds, batch_size=a.batch_size, shuffle=True, seq_len=a.seq_len + 1,
                           threads=a.threads, drop_last=True, seed=a.seed, dtype=torch.long)
    model = TinyLM(seq_len=a.seq_len)
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 20) * 0.5 * (1 + math.cos(math.pi * min(s, a.steps) / a.steps)))
    print(f"training TinyLM ({sum(p.numel() for p in model.parameters()) / 1e6:.2f} M params) "
          f"on {ds} from pool {ds.spec}: {a.steps} steps of {a.batch_size} x {a.seq_len} tokens")

    bar = None
    if not a.no_progress:
        from tqdm import tqdm
        bar = tqdm(total=a.steps, unit="step", disable=None)
    step, samples, t0, first_loss, loss_ema = 0, 0, time.perf_counter(), None, None
    while step < a.steps:
        for batch in loader:
            tokens = batch["tokens"]
            x, y = tokens[:, :-1], tokens[:, 1:]
            loss = nn.functional.cross_entropy(model(x).reshape(-1, 256), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            samples += x.shape[0]
            lv = loss.item()
            first_loss = lv if first_loss is None else first_loss
            loss_ema = lv if loss_ema is None else 0.9 * loss_ema + 0.1 * lv
            if bar is not None:
                bar.update(1)
                bar.set_postfix(loss=f"{loss_ema:.3f}")
            if step % 50 == 0 or step == a.steps:
                dt = time.perf_counter() - t0
                msg = (f"step {step:4d}  loss {loss_ema:.3f}  {samples / dt:7.1f} samples/s  "
                       f"loader stall {1e3 * loader.stall_seconds / step:.3f} ms/step")
                (bar.write if bar is not None else print)(msg)
            if step >= a.steps:
                break
    if bar is not None:
        bar.close()
    dt = time.perf_counter() - t0
    print(f"done: {step} steps, loss {first_loss:.3f} -> {loss_ema:.3f}, "
          f"{samples / dt:.1f} samples/s, loader stall {loader.stall_seconds:.3f} s of {dt:.1f} s "
          f"({100 * loader.stall_seconds / dt:.2f}%), {loader.epoch + 1} epochs begun")
    return 0


if __name__ == "__main__":
    sys.exit(main())
