"""CXLDataLoader: torch DataLoader's interface over the C gather engine.

Fast path (a CXLDataset, no collate_fn, no batch_sampler): the sample order
comes from the sampler (or shuffle/generator, as torch does; one of our
samplers is handed to the engine as its C sampler, so the engine's threads
draw the ids themselves and no index passes through Python), C threads copy
records straight from the pool into a ring of batch slots, and each batch is
handed out as tensors viewing its slot (no copy); the slot returns to the
ring when those tensors are freed.
  fixed-size records        -> Tensor [batch, *record_shape]
  variable-size, seq_len    -> dict(tokens=[batch, seq_len], lengths=[batch])
                               collate="pack" (default) concatenates records
                               into full rows; collate="pad" pads each record
General path (anything else): torch's DataLoader with the same arguments.
"""
from __future__ import annotations

import time
from typing import Any, Callable, Iterator, Optional

import numpy as np
import torch

from . import _core
from .dataset import CXLDataset
from .samplers import CXLSamplerBase


class CXLDataLoader:
    def __init__(self, dataset: Any, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0,
                 collate_fn: Optional[Callable] = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Optional[Callable] = None,
                 multiprocessing_context: Any = None, generator: Optional[torch.Generator] = None,
                 *, prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 memory_policy: Optional[str] = None, pin_to_cxl: bool = False,
                 numa_bind: Optional[int] = None, device: Any = None,
                 seq_len: Optional[int] = None, collate: str = "auto", pad_value: int = 0,
                 threads: Optional[int] = None, seed: int = 0) -> None:
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.device = torch.device(device) if device is not None else None
        self.seed = seed
        self.epoch = 0
        self._resume: Optional[dict] = None
        self._pos = 0
        self._off = 0
        self.stall_seconds = 0.0  # time next() waited on the engine
        self.fast = (isinstance(dataset, CXLDataset) and collate_fn is None
                     and batch_sampler is None and batch_size is not None)
        if not self.fast:
            kw: dict[str, Any] = dict(batch_size=batch_size, shuffle=shuffle, sampler=sampler,
                                      batch_sampler=batch_sampler, num_workers=num_workers,
                                      collate_fn=collate_fn, pin_memory=pin_memory,
                                      drop_last=drop_last, timeout=timeout,
                                      worker_init_fn=worker_init_fn,
                                      multiprocessing_context=multiprocessing_context,
                                      generator=generator, persistent_workers=persistent_workers)
            if prefetch_factor is not None:
                kw["prefetch_factor"] = prefetch_factor
            self._torch = torch.utils.data.DataLoader(dataset, **kw)
            return
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self.sampler = sampler
        self.shuffle = bool(shuffle)
        self.generator = generator
        schema = dataset.schema
        if schema["fixed"]:
            self.collate = _core.COLLATE_STACK
        else:
            if not seq_len:
                raise ValueError("variable-size records need seq_len (tokens per row)")
            self.collate = {"auto": _core.COLLATE_PACK, "pack": _core.COLLATE_PACK,
                            "pad": _core.COLLATE_PAD}[collate]
        self.seq_len = int(seq_len or 0)
        self.pad_value = pad_value
        self.threads = threads or max(1, num_workers) if (threads or num_workers) else 2
        depth = prefetch_factor or 2
        self.slots = max(2, depth * self.threads) + 2
        self.numa_node = -1 if numa_bind is None else int(numa_bind)

    # -- order -------------------------------------------------------------
    def _order(self) -> np.ndarray:
        n = len(self.dataset)
        if self.sampler is not None:
            return np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        if self.shuffle:
            g = self.generator
            if g is None:
                g = torch.Generator()
                g.manual_seed(self.seed + self.epoch)
            return torch.randperm(n, generator=g).numpy().astype(np.int64)
        return np.arange(n, dtype=np.int64)

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)

    def __len__(self) -> int:
        if not self.fast:
            return len(self._torch)
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        if self.collate != _core.COLLATE_STACK:
            raise TypeError("a packed loader's length depends on record lengths")
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    # -- iteration ---------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        if not self.fast:
            yield from self._torch
            return
        start, off = 0, 0
        if self._resume is not None:
            start, off = self._resume["position"], self._resume["offset"]
            self._resume = None
        cxl = isinstance(self.sampler, CXLSamplerBase)
        if cxl:
            # positioned by the sampler's own (restored) state; the sampler
            # counts what we deliver so its state_dict() is the consumer's
            order: Any = self.sampler._begin()
            start = 0
        else:
            order = self._order()[start:]
        self._pos, self._off = start, off
        eng = _core.Loader(self.dataset.store, order, self.batch_size,
                           threads=self.threads, slots=self.slots, collate=self.collate,
                           seq_len=self.seq_len, pad_value=self.pad_value,
                           drop_last=self.drop_last, numa_node=self.numa_node,
                           first_offset=off)
        while True:
            t0 = time.perf_counter()
            try:
                b = next(eng)
            except StopIteration:
                break
            self.stall_seconds += time.perf_counter() - t0
            self._pos = start + b.resume_records
            self._off = b.resume_offset
            if cxl:
                self.sampler._drawn = b.resume_records
            yield self._tensors(b)
        if cxl:
            self.sampler._finish()
        self.epoch += 1
        self._pos, self._off = 0, 0

    def _tensors(self, b: Any) -> Any:
        data = torch.from_dlpack(b.data)
        if self.collate == _core.COLLATE_STACK:
            out: Any = data
        else:
            out = {"tokens": data, "lengths": torch.from_dlpack(b.lengths)}
        if self.device is not None and self.device.type != "cpu":
            if isinstance(out, dict):
                return {k: v.to(self.device, non_blocking=True) for k, v in out.items()}
            return out.to(self.device, non_blocking=True)
        return out

    # -- resume ------------------------------------------------------------
    def state_dict(self) -> dict:
        """Where the next batch starts: epoch, records consumed in the epoch
        and (packed rows) elements of the next record already delivered.
        With one of our samplers, also the sampler's state after the
        delivered batches ("sampler"), which restores under another world
        size as well (see samplers.py)."""
        st = {"epoch": self.epoch, "position": self._pos, "offset": self._off,
              "seed": self.seed}
        if self.fast and isinstance(self.sampler, CXLSamplerBase):
            st["sampler"] = self.sampler.state_dict()
        return st

    def load_state_dict(self, state: dict) -> None:
        self.epoch = int(state["epoch"])
        self.seed = int(state.get("seed", self.seed))
        self._resume = {"position": int(state["position"]), "offset": int(state["offset"])}
        if "sampler" in state and isinstance(getattr(self, "sampler", None), CXLSamplerBase):
            self.sampler.load_state_dict(state["sampler"])
