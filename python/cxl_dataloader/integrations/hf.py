"""Hugging Face ``Trainer`` fed from the pool, with an O(1) resume.

``class MyTrainer(CXLTrainerMixin, Trainer)`` and ``MyTrainer(model, args,
train_loader=CXLDataLoader(...))`` (or ``train_dataset=`` a ``CXLDataset``:
the mixin then makes the loader, a ``DistributedCXLSampler`` of the run's
world size and rank, ``args.per_device_train_batch_size`` and
``args.seed``).

- ``get_train_dataloader()`` returns that loader as it is: no
  ``accelerator.prepare`` (which would rebuild it as a torch DataLoader with
  its own sampler); the ranks' shares are our sampler's.
- ``CXLStateCallback`` (added by the mixin) writes the loader's
  ``state_dict()`` into every checkpoint directory Trainer saves
  (``cxl_loader_state.json``, one per rank, written atomically).
- ``train(resume_from_checkpoint=...)`` restores that state into the loader
  before the first batch: the rest of the epoch comes next, at the cost of
  reading a small JSON file. Trainer's own resume would instead skip the
  epoch's consumed batches one by one (``accelerate.skip_first_batches``),
  which for a loader that is not a torch DataLoader means building a torch
  DataLoader in its place; so while the restored state is in force the
  mixin sets ``args.ignore_data_skip`` (Trainer's switch for "do not skip")
  and puts it back afterwards. A checkpoint without the file (made without
  the mixin) is refused with ``FileNotFoundError`` rather than resumed at
  the wrong batch.
"""
from __future__ import annotations

import json
import os
from typing import Any, Optional

from transformers import TrainerCallback

from ..dataset import CXLDataset
from ..loader import CXLDataLoader
from ..samplers import DistributedCXLSampler

STATE_FILE = "cxl_loader_state.json"


def _rank_file(checkpoint: str, rank: int) -> str:
    return os.path.join(checkpoint, STATE_FILE if rank == 0 else f"cxl_loader_state.{rank}.json")


class CXLStateCallback(TrainerCallback):
    """Saves ``loader.state_dict()`` into each checkpoint directory."""

    def __init__(self, loader: CXLDataLoader) -> None:
        self.loader = loader

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        ckpt = os.path.join(args.output_dir, f"checkpoint-{state.global_step}")
        os.makedirs(ckpt, exist_ok=True)
        path = _rank_file(ckpt, args.process_index)
        tmp = f"{path}.tmp"
        with open(tmp, "w") as f:
            json.dump(self.loader.state_dict(), f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
        return control


class CXLTrainerMixin:
    """Put before ``Trainer`` in the bases: ``class T(CXLTrainerMixin,
    Trainer)``. Takes ``train_loader=`` (a ``CXLDataLoader``), else makes
    one over ``train_dataset`` when it is a ``CXLDataset``."""

    def __init__(self, *args: Any, train_loader: Optional[CXLDataLoader] = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[call-arg]
        self._cxl_loader = train_loader
        self._cxl_callback: Optional[CXLStateCallback] = None

    @property
    def cxl_loader(self) -> CXLDataLoader:
        if self._cxl_loader is None:
            ds = getattr(self, "train_dataset", None)
            if not isinstance(ds, CXLDataset):
                raise TypeError("CXLTrainerMixin: give train_loader=CXLDataLoader(...), or a "
                                f"CXLDataset as train_dataset (got {type(ds).__name__})")
            a = self.args  # type: ignore[attr-defined]
            sampler = DistributedCXLSampler(ds, num_replicas=a.world_size, rank=a.process_index,
                                            seed=a.seed, drop_last=a.dataloader_drop_last)
            self._cxl_loader = CXLDataLoader(ds, batch_size=a.per_device_train_batch_size,
                                             sampler=sampler, drop_last=a.dataloader_drop_last)
        return self._cxl_loader

    def get_train_dataloader(self) -> CXLDataLoader:
        return self.cxl_loader

    def train(self, resume_from_checkpoint: Any = None, *args: Any, **kwargs: Any) -> Any:
        loader = self.cxl_loader
        if self._cxl_callback is None:
            self._cxl_callback = CXLStateCallback(loader)
            self.add_callback(self._cxl_callback)  # type: ignore[attr-defined]
        a = self.args  # type: ignore[attr-defined]
        ckpt = resume_from_checkpoint
        if ckpt is True:
            from transformers.trainer_utils import get_last_checkpoint
            ckpt = get_last_checkpoint(a.output_dir)
            if ckpt is None:
                raise ValueError(f"No valid checkpoint found in output directory ({a.output_dir})")
        if not ckpt:
            return super().train(resume_from_checkpoint, *args, **kwargs)  # type: ignore[misc]
        path = _rank_file(ckpt, a.process_index)
        if not os.path.exists(path):
            raise FileNotFoundError(f"{path}: checkpoint {ckpt} has no loader state (was it "
                                    "saved by a Trainer with CXLTrainerMixin?)")
        with open(path) as f:
            loader.load_state_dict(json.load(f))
        skip = a.ignore_data_skip
        a.ignore_data_skip = True  # the restored state replaces Trainer's skip-ahead
        try:
            return super().train(ckpt, *args, **kwargs)  # type: ignore[misc]
        finally:
            a.ignore_data_skip = skip
