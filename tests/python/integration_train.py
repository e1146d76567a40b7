"""One rank of a framework's training run over a pool (the acceptance tests
of issue 31: tests/python/test_integrations_*.py), started by torchrun.

    integration_train.py FRAMEWORK SPEC NAME OUT CKPT_DIR [--kill-at K] [--resume]

Trains a toy model for 2 epochs on dataset NAME (records {"idx", "x"}), 4
records a batch, checkpointing every EVERY steps (the framework's own
checkpointing) into CKPT_DIR. Each step appends the batch's record ids to
OUT.RANK (flushed: what a killed run consumed is on disk). --kill-at K:
rank 0 SIGKILLs itself at step K (torchrun then ends the other rank).
--resume: resume from the checkpoint of step RESUME_STEP in CKPT_DIR.
Writes OUT.RANK.json with what the framework did to the loader.
"""
from __future__ import annotations

import json
import os
import signal
import sys

import torch

BATCH, EVERY, EPOCHS, RESUME_STEP = 4, 5, 2, 10


class Toy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)

    def forward(self, x: torch.Tensor, idx: torch.Tensor = None) -> dict:
        return {"loss": ((self.lin(x.float().view(-1, 1)) - 1.0) ** 2).mean()}


def main() -> None:
    fw, spec, name, out, ckdir = sys.argv[1:6]
    kill_at = int(sys.argv[sys.argv.index("--kill-at") + 1]) if "--kill-at" in sys.argv else None
    resume = "--resume" in sys.argv
    rank = int(os.environ.get("RANK", "0"))
    log = open(f"{out}.{rank}", "a")
    meta: dict = {}

    def record(step: int, idx: torch.Tensor) -> None:
        log.write(" ".join(str(int(i)) for i in idx) + "\n")
        log.flush()
        if kill_at is not None and step == kill_at and rank == 0:
            os.kill(os.getpid(), signal.SIGKILL)

    torch.manual_seed(0)
    if fw == "lightning":
        run_lightning(spec, name, ckdir, resume, record, meta)
    elif fw == "hf":
        run_hf(spec, name, ckdir, resume, record, meta)
    else:
        raise SystemExit(f"unknown framework {fw}")
    with open(f"{out}.{rank}.json", "w") as f:
        json.dump(meta, f)


def run_lightning(spec, name, ckdir, resume, record, meta) -> None:
    import glob

    import lightning.pytorch as pl
    from lightning.pytorch.callbacks import ModelCheckpoint

    from cxl_dataloader import CXLDataLoader
    from cxl_dataloader.integrations.lightning import CXLDataModule

    class Module(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.net = Toy()

        def training_step(self, batch: dict, batch_idx: int) -> torch.Tensor:
            record(self.global_step + 1, batch["idx"])
            return self.net(batch["x"])["loss"]

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return torch.optim.SGD(self.parameters(), lr=0.01)

        def on_train_epoch_start(self) -> None:
            loader = self.trainer.train_dataloader
            meta.setdefault("loaders", []).append(
                {"ours": isinstance(loader, CXLDataLoader),
                 "sampler": type(loader.sampler).__name__,
                 "rank": getattr(loader.sampler, "rank", None),
                 "world": getattr(loader.sampler, "num_replicas", None)})

    dm = CXLDataModule(spec, name, batch_size=BATCH, seed=5)
    ck = ModelCheckpoint(dirpath=ckdir, every_n_train_steps=EVERY, save_top_k=-1)
    trainer = pl.Trainer(accelerator="cpu", devices=int(os.environ.get("WORLD_SIZE", "1")),
                         strategy="ddp", max_epochs=EPOCHS, callbacks=[ck], logger=False,
                         enable_progress_bar=False, enable_model_summary=False,
                         use_distributed_sampler=True)
    path = None
    if resume:
        path = glob.glob(os.path.join(ckdir, f"*step={RESUME_STEP}.ckpt"))[0]
        meta["ckpt_loader_state"] = torch.load(path, weights_only=False)["loops"]["fit_loop"][
            "state_dict"]["combined_loader"]
    trainer.fit(Module(), datamodule=dm, ckpt_path=path)


def run_hf(spec, name, ckdir, resume, record, meta) -> None:
    from transformers import Trainer, TrainingArguments

    from cxl_dataloader import CXLDataset
    from cxl_dataloader.integrations.hf import CXLTrainerMixin

    class Logged(Toy):
        def forward(self, x: torch.Tensor, idx: torch.Tensor = None) -> dict:
            if self.training:
                record(trainer.state.global_step + 1, idx)
            return super().forward(x)

    class CXLTrainer(CXLTrainerMixin, Trainer):
        def _load_optimizer_and_scheduler(self, checkpoint: str) -> None:
            # Trainer loads these with map_location=args.device under DDP,
            # which on CPU is "cpu:RANK", a location torch 2.13's loader
            # refuses ("don't know how to restore data location"): the same
            # files, loaded to the CPU
            if checkpoint is None:
                return
            for obj, f in ((self.optimizer, "optimizer.pt"), (self.lr_scheduler, "scheduler.pt")):
                obj.load_state_dict(torch.load(os.path.join(checkpoint, f), map_location="cpu",
                                               weights_only=True))

    args = TrainingArguments(output_dir=ckdir, per_device_train_batch_size=BATCH,
                             num_train_epochs=EPOCHS, save_strategy="steps", save_steps=EVERY,
                             logging_strategy="no", report_to=[], use_cpu=True,
                             ddp_backend="gloo", seed=5, disable_tqdm=True, learning_rate=0.01)
    trainer = CXLTrainer(model=Logged(), args=args, train_dataset=CXLDataset(spec, name))
    trainer.train(resume_from_checkpoint=os.path.join(ckdir, f"checkpoint-{RESUME_STEP}")
                  if resume else None)
    meta["loaders"] = [{"ours": True, "sampler": type(trainer.cxl_loader.sampler).__name__,
                        "rank": trainer.cxl_loader.sampler.rank,
                        "world": trainer.cxl_loader.sampler.num_replicas}]


if __name__ == "__main__":
    main()
