"""CXLDataLoader: torch DataLoader's interface over the C gather engine.

Fast path (a CXLDataset, no collate_fn, no batch_sampler, no worker_init_fn,
batch_size not None): the sample order comes from the sampler (or
shuffle/generator, as torch does; one of our samplers is handed to the
engine as its C sampler, so the engine's threads draw the ids themselves and
no index passes through Python), C threads copy records straight from the
pool into a ring of batch slots, and each batch is handed out as tensors
viewing its slot (no copy); the slot returns to the ring when those tensors
are freed.
  fixed-size records        -> Tensor [batch, *record_shape]
                               (several fields, or columns=: a dict by field
                               name, each [batch, *field_shape])
  variable-size, seq_len    -> dict(<field>=[batch, seq_len], lengths=[batch])
                               for every chosen field: variable-length ones
                               padded/packed alike, fixed-shape ones one
                               value per row (pad) or per segment (pack)
                               collate="pack" (default) concatenates records
                               into full rows and adds the document
                               boundaries: seg_row, seg_start, seg_len,
                               seg_offset, seg_id (one entry per piece of a
                               record in a row); collate="pad" pads each record
General path (anything else): torch's DataLoader with the same arguments.

Arguments beyond torch's (docs/python.md): memory_policy (validated; placement
comes with the tier layer), pin_to_cxl (ring slots bound to a numa pool's
node), numa_bind (gather threads on a node's CPUs), device (each batch copied
there; non_blocking from CUDA-registered slots when pin_memory is on).
"""
from __future__ import annotations

import collections
import os
import warnings
from typing import Any, Callable, Iterator, Optional

import numpy as np
import torch

from . import _core
from .dataset import CXLDataset
from .samplers import CXLSamplerBase

MEMORY_POLICIES = ("hot_first", "streaming", "full_prefetch", "lookahead", "adaptive")

def _warn(msg: str) -> None:
    # Python's default filter shows a warning once per call site
    warnings.warn(msg, UserWarning, stacklevel=3)


def _node_exists(node: int) -> bool:
    return os.path.isdir(f"/sys/devices/system/node/node{node}")


def _pool_node(spec: str) -> Optional[int]:
    """The NUMA node of a "numa:NODE:NAME" pool; None for other backends."""
    parts = spec.split(":")
    if parts[0] == "numa" and len(parts) >= 3 and parts[1].isdigit():
        return int(parts[1])
    return None


class CXLDataLoader:
    def __init__(self, dataset: Any, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0,
                 collate_fn: Optional[Callable] = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Optional[Callable] = None,
                 multiprocessing_context: Any = None, generator: Optional[torch.Generator] = None,
                 *, prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True,
                 memory_policy: Optional[str] = None, pin_to_cxl: bool = False,
                 numa_bind: Optional[int] = None, device: Any = None,
                 seq_len: Optional[int] = None, collate: str = "auto", pad_value: int = 0,
                 threads: Optional[int] = None, seed: int = 0,
                 columns: Optional[list[str]] = None) -> None:
        if memory_policy is not None:
            if memory_policy not in MEMORY_POLICIES:
                raise ValueError(f"memory_policy {memory_policy!r}: expected None or one of "
                                 f"{', '.join(MEMORY_POLICIES)}")
            _warn(f"memory_policy={memory_policy!r} is accepted but tiered "
                       "placement is not implemented yet: records are read where they lie")
        if numa_bind is not None and (int(numa_bind) < 0 or not _node_exists(int(numa_bind))):
            raise ValueError(f"numa_bind={numa_bind}: no such NUMA node "
                             f"(/sys/devices/system/node/node{numa_bind})")
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        if prefetch_factor is not None and prefetch_factor < 1:
            raise ValueError("prefetch_factor option should be positive")
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.device = torch.device(device) if device is not None else None
        if self.device is not None and self.device.type == "cuda" and not torch.cuda.is_available():
            raise RuntimeError(f"device={device!r}: CUDA is not available")
        self.memory_policy = memory_policy
        self.pin_memory = bool(pin_memory)
        self.seed = seed
        self.epoch = 0
        self._resume: Optional[dict] = None
        self._pos = 0
        self._off = 0
        self._stall_ns = 0        # engine waits of finished epochs
        self._engine: Any = None  # the running epoch's engine
        self._registered: list[int] = []  # slot addresses registered with CUDA
        self._held: collections.deque = collections.deque()  # (event, batch) until the GPU is past it
        self.fast = (isinstance(dataset, CXLDataset) and collate_fn is None
                     and batch_sampler is None and batch_size is not None
                     and worker_init_fn is None)
        if not self.fast:
            kw: dict[str, Any] = dict(batch_size=batch_size, shuffle=shuffle, sampler=sampler,
                                      batch_sampler=batch_sampler, num_workers=num_workers,
                                      collate_fn=collate_fn, pin_memory=pin_memory,
                                      drop_last=drop_last, timeout=timeout,
                                      worker_init_fn=worker_init_fn,
                                      multiprocessing_context=multiprocessing_context,
                                      generator=generator, persistent_workers=persistent_workers,
                                      pin_memory_device=pin_memory_device, in_order=in_order)
            if prefetch_factor is not None:
                kw["prefetch_factor"] = prefetch_factor
            if pin_memory_device == "":
                del kw["pin_memory_device"]  # deprecated in torch: pass only when set
            self._torch = torch.utils.data.DataLoader(dataset, **kw)
            return
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        self.sampler = sampler
        self.shuffle = bool(shuffle)
        self.generator = generator
        # the fields to collate: columns=, else the dataset's columns, else all
        cols = columns if columns is not None else dataset.columns
        self._fields = dataset.field_numbers(cols) if cols is not None else None
        chosen = [dataset.schema["fields"][k] for k in
                  (self._fields if self._fields is not None else range(len(dataset.fields)))]
        self._names = [f["name"] for f in chosen]
        # one field and no columns=: the batch is that tensor (or, for
        # variable-length records, the dict below) as it always was
        self._single = self._fields is None and len(dataset.fields) == 1
        if not any(f["variable"] for f in chosen):
            self.collate = _core.COLLATE_STACK
        else:
            if not seq_len:
                raise ValueError("variable-size records need seq_len (tokens per row)")
            self.collate = {"auto": _core.COLLATE_PACK, "pack": _core.COLLATE_PACK,
                            "pad": _core.COLLATE_PAD}[collate]
        self.seq_len = int(seq_len or 0)
        self.pad_value = pad_value
        self.threads = threads or max(1, num_workers) if (threads or num_workers) else 2
        # prefetch_factor batches in flight per thread, as torch counts per
        # worker, twice over: batches are delivered in order, so one thread
        # descheduled mid-batch must not leave the others without a free
        # slot (measured: 6 slots for 2 threads lost ~25% to that, 10 not)
        depth = prefetch_factor or 2
        self.slots = 2 * max(1, depth * self.threads) + 2
        self.numa_node = -1 if numa_bind is None else int(numa_bind)
        self.slot_node = -1
        if pin_to_cxl:
            node = _pool_node(dataset.spec)
            if node is None:
                _warn(f"pin_to_cxl: pool {dataset.spec!r} is not on the numa "
                           "backend, so ring slots stay in local memory (no-op)")
            else:
                self.slot_node = node
        self._cuda_pin = False
        if self.pin_memory:
            if torch.cuda.is_available():
                self._cuda_pin = True
            else:
                _warn("pin_memory=True without CUDA: nothing to pin (no-op)")

    # -- order -------------------------------------------------------------
    def _order(self) -> np.ndarray:
        n = len(self.dataset)
        if self.sampler is not None:
            return np.fromiter((int(i) for i in self.sampler), dtype=np.int64)
        if self.shuffle:  # with a user's generator: torch's permutation, as torch draws it
            return torch.randperm(n, generator=self.generator).numpy().astype(np.int64)
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
            if self.device is None or self.device.type == "cpu":
                yield from self._torch
            else:
                for out in self._torch:
                    yield self._to_device(out, non_blocking=self.pin_memory)
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
        elif self.shuffle and self.generator is None:
            # shuffle=True: the C keyed permutation of (seed, epoch), drawn by
            # the engine itself: nothing of size N is built, the first batch
            # does not wait for a permutation of the whole dataset
            order = _core.Sampler("random", n=len(self.dataset), seed=self.seed,
                                  epoch=self.epoch)
            if start:
                order.restore({"seed": self.seed, "epoch": self.epoch, "consumed": start,
                               "fingerprint": order.fingerprint})
        else:
            order = self._order()[start:]
        self._pos, self._off = start, off
        eng = _core.Loader(self.dataset.store, order, self.batch_size,
                           threads=self.threads, slots=self.slots, collate=self.collate,
                           seq_len=self.seq_len, pad_value=self.pad_value,
                           drop_last=self.drop_last, numa_node=self.numa_node,
                           first_offset=off, bind_slots=self.slot_node >= 0,
                           slot_node=max(self.slot_node, 0), fields=self._fields)
        self._engine = eng
        # The per-batch loop is the Python cost of the fast path: one C call
        # (take: wait, Batch, DLPack capsules, resume point) and one
        # torch.from_dlpack per tensor. Keep anything else out of it.
        take = eng.take
        from_dlpack = torch.from_dlpack
        stack = self.collate == _core.COLLATE_STACK
        pack = self.collate == _core.COLLATE_PACK
        names = self._names
        single = self._single
        pin = self._cuda_pin
        dev = self.device if self.device is not None and self.device.type != "cpu" else None
        try:
            while True:
                if pin:
                    self._retire()
                r = take()
                if r is None:
                    break
                data, lengths, batch, rr, self._off = r
                self._pos = start + rr
                if cxl:
                    self.sampler._drawn = rr
                if single:
                    data = (data,)
                out: Any = {n: from_dlpack(d) for n, d in zip(names, data)}
                if stack:
                    if single:
                        out = out[names[0]]
                else:
                    out["lengths"] = from_dlpack(lengths)
                    if pack:
                        # document boundaries: segment s is record seg_id[s],
                        # elements [seg_offset, +seg_len) of it, at row
                        # seg_row[s], columns [seg_start, +seg_len)
                        row, col, n, offset = batch.segments
                        out.update(seg_row=from_dlpack(row), seg_start=from_dlpack(col),
                                   seg_len=from_dlpack(n), seg_offset=from_dlpack(offset),
                                   seg_id=from_dlpack(batch.ids))
                if pin:
                    if eng.n_slots != len(self._registered):
                        self._register_slots(eng)
                    self._held.append((None, out))
                if dev is not None:
                    out = self._to_device(out, non_blocking=pin)
                yield out
        finally:
            self._stall_ns += eng.stall_ns
            self._engine = None
            if pin:
                self._unregister_slots()
        if cxl:
            self.sampler._finish()
        self.epoch += 1
        self._pos, self._off = 0, 0

    def _to_device(self, out: Any, non_blocking: bool) -> Any:
        if isinstance(out, dict):
            return {k: v.to(self.device, non_blocking=non_blocking) for k, v in out.items()}
        return out.to(self.device, non_blocking=non_blocking)

    # -- pin_memory (CUDA) ---------------------------------------------------
    # The ring slots themselves are registered with CUDA (page-locked in
    # place), so a batch goes to the GPU by DMA from the slot: no second
    # pinned buffer, no extra copy. A slot must not be refilled while a
    # non_blocking copy from it may still be queued on the GPU: each batch is
    # held (its slot stays lent) until an event recorded on the current stream
    # when the next batch is asked for has completed, i.e. until the GPU is
    # past everything the loop queued with that batch. Completed holds are
    # let go before waiting for the next batch, so a GPU that keeps up
    # never makes the ring grow. Copies on other
    # streams must be synchronized by the caller.
    def _register_slots(self, eng: Any) -> None:
        cudart = torch.cuda.cudart()
        for addr, size in eng.slots(len(self._registered)):
            rc = cudart.cudaHostRegister(addr, size, 0)
            if int(rc) != 0:
                raise RuntimeError(f"cudaHostRegister({addr:#x}, {size}) failed: {rc}")
            self._registered.append(addr)

    def _retire(self) -> None:
        """Called when the loop asks for the next batch: everything it queued
        with the last batch is on the stream before an event recorded now;
        batches whose event has completed are let go (their slots return)."""
        held = self._held
        if held and held[-1][0] is None:
            ev = torch.cuda.Event()
            ev.record()
            held[-1] = (ev, held[-1][1])
        while held and held[0][0].query():
            held.popleft()

    def _unregister_slots(self) -> None:
        torch.cuda.synchronize()
        self._held.clear()
        cudart = torch.cuda.cudart()
        for addr in self._registered:
            cudart.cudaHostUnregister(addr)
        self._registered = []

    @property
    def stall_ns(self) -> int:
        """Nanoseconds the loop waited on the engine (batches not ready)."""
        eng = self._engine
        return self._stall_ns + (eng.stall_ns if eng is not None else 0)

    @property
    def stall_seconds(self) -> float:
        return self.stall_ns / 1e9

    @stall_seconds.setter
    def stall_seconds(self, v: float) -> None:
        eng = self._engine
        self._stall_ns = int(v * 1e9) - (eng.stall_ns if eng is not None else 0)

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
