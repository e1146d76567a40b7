"""Resume cost of Hugging Face's Trainer at 90% of an epoch of 10^7 samples:
with CXLTrainerMixin (the loader's state restored, O(1)) against Trainer's
own skip-ahead on torch's DataLoader (accelerate.skip_first_batches over
its RandomSampler), in one run.

Both resume from the same checkpoint files: a real checkpoint of a 2-step
run (model, optimizer, scheduler, RNG states) whose trainer_state.json says
global step 140625 of 156250 (90% of an epoch of 10^7 samples, batch 64),
so neither run has to train 140,625 steps first; ours adds the loader state
of that point, made by our sampler's own load_state_dict (seed, epoch,
consumed = 140625 x 64) and the loader's state_dict(). Timed: from
train(resume_from_checkpoint=...) to the first training step's batch; and
ours from the step-2 checkpoint, what a resume costs Trainer with nothing
to skip (loading the model, optimizer, scheduler and RNG states).

    python bench/bench_hf_resume.py [--samples 10000000] [--rounds 3]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import shutil
import sys
import tempfile
import time
import uuid

import numpy as np
import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool, DistributedCXLSampler
from cxl_dataloader.integrations.hf import STATE_FILE, CXLTrainerMixin

BATCH = 64


class Line(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)

    def forward(self, x, labels):
        return {"loss": ((self.lin(x.view(-1, 1))[:, 0] - labels) ** 2).mean()}


class Pairs(torch.utils.data.Dataset):
    """The same records as a torch map-style dataset (what Trainer's own
    DataLoader reads)."""

    def __init__(self, n: int) -> None:
        self.x = torch.arange(n, dtype=torch.float32) * 1e-7

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        return {"x": self.x[i], "labels": 3 * self.x[i] + 1}


class FirstBatch(TrainerCallback):
    """Notes when the first step begins, then stops the run."""

    def on_step_begin(self, args, state, control, **kw):
        self.t = time.perf_counter()
        control.should_training_stop = True
        return control


class CXLTrainer(CXLTrainerMixin, Trainer):
    pass


def args(out: str, n: int) -> TrainingArguments:
    return TrainingArguments(output_dir=out, per_device_train_batch_size=BATCH,
                             num_train_epochs=1, save_steps=2, max_steps=n // BATCH,
                             report_to=[], use_cpu=True, disable_tqdm=True, logging_strategy="no")


def timed(trainer: Trainer, ckpt: str) -> float:
    cb = FirstBatch()
    trainer.add_callback(cb)
    t = time.perf_counter()
    trainer.train(resume_from_checkpoint=ckpt)
    return cb.t - t


def main() -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # clean up (finally) when killed
    ap = argparse.ArgumentParser()
    ap.add_argument("--samples", type=int, default=10_000_000)
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args()
    n = a.samples
    step = int(0.9 * n // BATCH)
    pname = f"bench-hf-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    out = tempfile.mkdtemp(prefix="cxlp-bench-hf-")
    pool = CXLMemoryPool(pname, create=True, size=(n * 8 * 3) + (64 << 20))
    try:
        import pyarrow as pa
        x = (np.arange(n, dtype=np.float32) * 1e-7)
        pool.ingest("pairs", pa.table({"x": x, "labels": 3 * x + 1}))
        ds = CXLDataset(pool, "pairs")
        # a real checkpoint after 2 steps, then told it is at `step`
        t0 = CXLTrainer(model=Line(), args=args(out, n), train_dataset=ds)
        t0.add_callback(type("Stop", (TrainerCallback,), {"on_step_end": lambda s, a_, st, c, **k: (
            setattr(c, "should_training_stop", st.global_step >= 2) or c)})())
        t0.train()
        start = os.path.join(out, "checkpoint-2")
        ckpt = os.path.join(out, f"checkpoint-{step}")
        shutil.copytree(start, ckpt)
        with open(os.path.join(ckpt, "trainer_state.json")) as f:
            st = json.load(f)
        st["global_step"], st["epoch"] = step, step / (n // BATCH)
        with open(os.path.join(ckpt, "trainer_state.json"), "w") as f:
            json.dump(st, f)
        sampler = DistributedCXLSampler(ds, num_replicas=1, rank=0, seed=42)
        state = sampler.state_dict()
        sampler.load_state_dict(dict(state, consumed=step * BATCH))
        loader = CXLDataLoader(ds, batch_size=BATCH, sampler=sampler)
        with open(os.path.join(ckpt, STATE_FILE), "w") as f:
            json.dump(loader.state_dict(), f)
        for r in range(a.rounds):
            ours = timed(CXLTrainer(model=Line(), args=args(out, n), train_dataset=ds), ckpt)
            theirs = timed(Trainer(model=Line(), args=args(out, n), train_dataset=Pairs(n)), ckpt)
            # what any resume costs Trainer, with nothing to skip: step 2's checkpoint
            fixed = timed(CXLTrainer(model=Line(), args=args(out, n), train_dataset=ds), start)
            print(f"round {r}: resume at step {step} of {n // BATCH}: CXLTrainerMixin "
                  f"{ours:.3f} s, Trainer's skip-ahead on torch's DataLoader {theirs:.3f} s "
                  f"({theirs / ours:.0f}x); CXLTrainerMixin at step 2 {fixed:.3f} s", flush=True)
    finally:
        pool.close()
        CXLMemoryPool.destroy(pname)
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
