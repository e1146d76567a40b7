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
                               into full rows; return_segments=True adds the
                               document boundaries: seg_row, seg_start,
                               seg_len, seg_offset, seg_id (one entry per
                               piece of a record in a row); collate="pad"
                               pads each record
General path (anything else): torch's DataLoader with the same arguments.

Arguments beyond torch's (docs/python.md): memory_policy (a NUMA page policy
of the ring slots, "interleave" or "bind" over the nodes of the pool's
memory; or, on a pool of tiers, how the staging engine places shards,
docs/tiers.md; memory_budget, lookahead and stagers set its budget,
horizon and copying threads; read_in_part reads the records of shards not
in memory in part, by default for a full shuffle larger than the budget),
pin_to_cxl (ring slots on a numa pool's
node(s); with CUDA, the dataset's pool view registered too), numa_bind
(gather threads on a node's CPUs; True: the node nearest the pool's
memory), device (device="cuda": each batch copied
there from its CUDA-registered ring slot on a copy stream, prefetch_to_gpu
batches ahead: gpu.py), dtype (token batches cast, e.g. to torch.long for
nn.Embedding).

Passes and epochs (both paths): each iter() that no set_epoch() or
load_state_dict() came before starts the next epoch, whether the last pass
ran out or was broken off (torch draws a fresh order per iter() the same
way); state_dict() names where the next batch comes from: inside a pass its
position, after a pass the start of the next one.
"""
from __future__ import annotations

import copy
import functools
import operator
import warnings
from typing import Any, Callable, Iterator, Optional, Union

import numpy as np
import torch

from . import _core, _resume, gpu
from .dataset import CXLDataset
from .pool import TIER_POLICIES, node_exists, parse_size
from .samplers import (CXLSamplerBase, DistributedCXLSampler, HostsCXLSampler,
                       RandomCXLSampler, order_block_bytes, order_shard_bytes,
                       staging_budget)

MEMORY_POLICIES = TIER_POLICIES
# memory_policy's other namespace: how the pages of the loader's ring slots
# are placed over the nodes of the pool's memory (mbind before first touch)
NUMA_POLICIES = ("interleave", "bind")

# The extension hands batches over as versioned DLPack capsules
# (DLManagedTensorVersioned), which torch takes from 2.9 on: an older torch
# refuses every one (pyproject.toml's torch extra says the same).
TORCH_FLOOR = "2.9"
if torch.__version__ < TORCH_FLOOR:
    raise ImportError(f"cxl_dataloader needs torch >= {TORCH_FLOOR} (batches cross as versioned "
                      f"DLPack capsules, which torch takes from {TORCH_FLOOR} on); this is torch "
                      f"{torch.__version__}")

# DLPack capsule -> tensor: torch.from_dlpack without its Python-level
# dispatch (the capsule is ours, CPU, versioned); one call per tensor.
_from_capsule = torch._C._from_dlpack

def _warn(msg: str) -> None:
    # Python's default filter shows a warning once per call site
    warnings.warn(msg, UserWarning, stacklevel=3)


def _pool_memory(spec: str) -> dict:
    """The pool's stat(): its media, the nodes its memory is on (numa_nodes,
    numa_interleave) and the node with CPUs nearest them (near_node)."""
    pool = _core.Pool(spec, readonly=True)
    try:
        return pool.stat()
    finally:
        pool.close()


def _node_list(text: str) -> list[int]:
    """[0, 1, 2, 3, 5] from the C library's "0-3,5"."""
    out: list[int] = []
    for part in filter(None, text.split(",")):
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


_COLLATES = {"auto", "stack", "pad", "pack"}


def _positive_int(name: str, v: Any) -> int:
    """An int >= 1 by operator.index (no float truncation, no bool)."""
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{name} should be an integer, got {type(v).__name__} {v!r}")
    if v < 1:
        raise ValueError(f"{name} should be a positive integer value, but got {name}={v}")
    if v >= 1 << 32:
        raise OverflowError(f"{name}={v} does not fit in 32 bits")
    return int(v)


class CXLDataLoader:
    """torch's DataLoader over a pool: the same arguments, attributes and
    results, with batches gathered by C threads straight from the pool.

    Fast path (a CXLDataset without collate_fn, batch_sampler or
    worker_init_fn): C threads copy each batch's records from the pool into a
    ring slot that the batch tensor views. General path (anything else):
    torch's own DataLoader over the same dataset. Both resume exactly from
    ``state_dict()``. The arguments beyond torch's are documented in
    docs/python.md; torch's are checked by torch itself, so a bad value gets
    torch's own error.
    """

    def __init__(self, dataset: Any, batch_size: Optional[int] = 1, shuffle: Optional[bool] = None,
                 sampler: Any = None, batch_sampler: Any = None, num_workers: int = 0,
                 collate_fn: Optional[Callable] = None, pin_memory: bool = False,
                 drop_last: bool = False, timeout: float = 0, worker_init_fn: Optional[Callable] = None,
                 multiprocessing_context: Any = None, generator: Optional[torch.Generator] = None,
                 *, prefetch_factor: Optional[int] = None, persistent_workers: bool = False,
                 pin_memory_device: str = "", in_order: bool = True,
                 memory_policy: Optional[str] = None, pin_to_cxl: bool = False,
                 numa_bind: Union[int, bool, None] = None, device: Any = None,
                 seq_len: Optional[int] = None, collate: str = "auto", pad_value: int = 0,
                 threads: Optional[int] = None, seed: Optional[int] = None,
                 dtype: Optional[torch.dtype] = None, return_segments: bool = False,
                 columns: Optional[list[str]] = None, prefetch_to_gpu: int = 2,
                 memory_budget: Union[int, str, None] = None, lookahead: Optional[int] = None,
                 stagers: Optional[int] = None, read_in_part: Optional[bool] = None) -> None:
        # memory_policy names a NUMA page policy of the loader's memory, or a
        # placement policy of a pool of tiers
        numa_policy = memory_policy if memory_policy in NUMA_POLICIES else None
        tier_policy = None if numa_policy else memory_policy
        if tier_policy is not None and tier_policy not in MEMORY_POLICIES:
            raise ValueError(f"memory_policy {memory_policy!r}: expected None, a NUMA page "
                             f"policy ({', '.join(NUMA_POLICIES)}) or a placement policy "
                             f"of a pool of tiers ({', '.join(MEMORY_POLICIES)})")
        if memory_budget is not None:  # bytes, or text as the CLI takes it ("16M")
            memory_budget = parse_size("memory_budget", memory_budget)
            if memory_budget <= 0:
                raise ValueError(f"memory_budget={memory_budget}: bytes, > 0")
        if lookahead is not None and int(lookahead) <= 0:
            raise ValueError(f"lookahead={lookahead}: batches, > 0")
        if read_in_part not in (None, True, False):
            raise ValueError(f"read_in_part={read_in_part!r}: True, False or None (the "
                             "default: True for a full shuffle larger than the budget)")
        if stagers is not None and not 1 <= int(stagers) <= _core.MAX_STAGERS:
            raise ValueError(f"stagers={stagers}: threads copying shards ahead, "
                             f"1..{_core.MAX_STAGERS}")
        tiered = isinstance(dataset, CXLDataset) and dataset.tiered
        given = [f"{n}={v!r}" for n, v in (("memory_policy", tier_policy),
                                           ("memory_budget", memory_budget),
                                           ("lookahead", lookahead), ("stagers", stagers),
                                           ("read_in_part", read_in_part)) if v is not None]
        if given and not tiered:
            _warn(f"{', '.join(given)}: the dataset's pool has one tier, so "
                  "there is nothing to place: records are read where they lie")
        # the dataset's tier_policy and prefetch_depth (batches ahead) are the
        # staging engine's policy and horizon unless given here
        policy = tier_policy or (getattr(dataset, "tier_policy", None) if tiered else None)
        horizon = lookahead or (getattr(dataset, "prefetch_depth", None) if tiered else None)
        self._away_key: Optional[tuple] = None
        self._away_bits: Optional[bytes] = None
        self._tier = {"tier_policy": _core.policy_parse(policy) if policy else 0,
                      "tier_budget": int(memory_budget or 0),
                      "tier_horizon": int(horizon or 0),
                      "tier_stagers": int(stagers or 0)}
        # None: on for an order that cannot be staged (_warn_order)
        self._read_in_part = read_in_part
        if read_in_part is not None:
            self._tier["tier_read_in_part"] = bool(read_in_part)
        near = numa_bind is True  # the node nearest the pool's memory (fast path setup)
        if numa_bind is False or near:
            numa_bind = None
        if numa_bind is not None and (int(numa_bind) < 0 or not node_exists(int(numa_bind))):
            raise ValueError(f"numa_bind={numa_bind}: no such NUMA node "
                             f"(/sys/devices/system/node/node{numa_bind})")
        if collate not in _COLLATES:
            raise ValueError(f"collate={collate!r}: expected one of "
                             f"{', '.join(sorted(_COLLATES))}")
        if seq_len is not None:
            seq_len = _positive_int("seq_len", seq_len)
        if threads is not None:
            threads = _positive_int("threads", threads)
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise TypeError(f"dtype should be a torch.dtype, got {dtype!r}")
        pad_value = operator.index(pad_value)
        # torch checks its own arguments, with its own errors and wording,
        # and resolves the attributes frameworks read (sampler, batch_sampler,
        # prefetch_factor...): a DataLoader is made for that, never iterated
        # on the fast path
        kw: dict[str, Any] = dict(batch_size=batch_size, shuffle=shuffle, sampler=sampler,
                                  batch_sampler=batch_sampler, num_workers=num_workers,
                                  collate_fn=collate_fn, pin_memory=pin_memory,
                                  drop_last=drop_last, timeout=timeout,
                                  worker_init_fn=worker_init_fn,
                                  multiprocessing_context=multiprocessing_context,
                                  generator=generator, prefetch_factor=prefetch_factor,
                                  persistent_workers=persistent_workers, in_order=in_order)
        if pin_memory_device != "":
            kw["pin_memory_device"] = pin_memory_device  # deprecated in torch: pass only when set
        if isinstance(dataset, CXLDataset):
            # the fields to collate: columns=, else the dataset's columns, else all
            cols = columns if columns is not None else dataset.columns
            self._fields = dataset.field_numbers(cols) if cols is not None else None
            self._chosen = [dataset.schema["fields"][k] for k in
                            (self._fields if self._fields is not None
                             else range(len(dataset.fields)))]
            self._names = [f["name"] for f in self._chosen]
            # the field whose lengths plan packed rows: the first variable one
            nums = self._fields if self._fields is not None else range(len(dataset.fields))
            self._plan_field = next((k for k, f in zip(nums, self._chosen) if f["variable"]), 0)
            # one field and no columns= (fields=None to the engine): a stacked
            # batch is that tensor, as it always was; else a dict by name
        elif columns is not None:
            raise ValueError("columns= chooses fields of a CXLDataset")
        variable = isinstance(dataset, CXLDataset) and any(f["variable"] for f in self._chosen)
        self.fast = (isinstance(dataset, CXLDataset) and collate_fn is None
                     and batch_sampler is None and batch_size is not None
                     and worker_init_fn is None
                     and not (variable and seq_len is None and batch_size == 1))
        with warnings.catch_warnings():
            if self.fast:  # num_workers are threads there: no worker processes to warn of
                warnings.filterwarnings("ignore", message="This DataLoader will create")
            spec = torch.utils.data.DataLoader(dataset, **kw)
        for attr in ("dataset", "batch_size", "drop_last", "sampler", "batch_sampler",
                     "num_workers", "collate_fn", "pin_memory", "timeout", "prefetch_factor",
                     "persistent_workers", "worker_init_fn", "multiprocessing_context",
                     "generator", "in_order", "pin_memory_device"):
            setattr(self, attr, getattr(spec, attr))
        self.device = torch.device(device) if device is not None else None
        if self.device is not None:
            gpu.require_cuda(f"device={device!r}", self.device)
        if isinstance(prefetch_to_gpu, bool) or not isinstance(prefetch_to_gpu, (int, np.integer)) \
                or prefetch_to_gpu < 0:
            raise ValueError(f"prefetch_to_gpu should be an integer >= 0 (batches copied ahead "
                             f"of the one in use), got {prefetch_to_gpu!r}")
        self.prefetch_to_gpu = int(prefetch_to_gpu)
        self.memory_policy = memory_policy
        self.dtype = dtype
        self.seed = seed
        self.shuffle = bool(shuffle)
        # passes: see the module docstring
        self.epoch = 0
        self._explicit = True      # the next pass is self.epoch, not self.epoch + 1
        self._pass = 0             # passes started
        self._live = 0             # the pass whose batches are being delivered; 0 none
        self._resume: Optional[dict] = None
        self._pos = 0
        self._off = 0
        self._batches = 0          # batches delivered in this pass (counted where needed)
        self._stall_ns = 0        # engine waits of finished epochs
        self._engine: Any = None  # the running epoch's engine
        self._last_engine: Any = None  # the last epoch's, for stats(); it stages the
        #                                next pass's first shards (_ahead_key)
        self._last_stats: Optional[dict] = None  # the last engine's, once it is let go
        self._ahead: Any = None   # a _core.Stager for the next pass, between passes
        self._ahead_key: Optional[tuple[int, int, int]] = None  # the pass staged for
        self._gpu: Optional[gpu.LoaderGPU] = None  # the CUDA side (fast path), see gpu.py
        self._at: Optional[tuple[int, int]] = None  # engine resume point of the batch handed
        #                                             out, where the GPU copies run ahead
        if not self.fast:
            self._init_general(dataset, kw)
            return
        if not any(f["variable"] for f in self._chosen):
            if collate not in ("auto", "stack"):
                raise ValueError(f"collate={collate!r} needs variable-size records; dataset "
                                 f"{dataset.name!r} has fixed-size records, which are stacked")
            self.collate = _core.COLLATE_STACK
        else:
            if seq_len is None:
                raise ValueError("variable-size records need seq_len (tokens per row) for "
                                 "batch_size > 1; batch_size=1 without it yields one record "
                                 "per batch, as torch's DataLoader does")
            if collate == "stack":
                raise ValueError(f"collate='stack' needs fixed-size records; dataset "
                                 f"{dataset.name!r} has variable-size records: use 'pack' "
                                 "or 'pad'")
            self.collate = {"auto": _core.COLLATE_PACK, "pack": _core.COLLATE_PACK,
                            "pad": _core.COLLATE_PAD}[collate]
            self._check_cut_together(dataset, "pad" if collate == "pad" else "pack")
        if self.collate == _core.COLLATE_STACK:
            self.collate_fn = torch.utils.data.default_collate  # what the C stacking equals
        else:
            self.collate_fn = None  # rows are built in C (collate="pad"/"pack")
        self.seq_len = int(seq_len or 0)
        self.pad_value = pad_value
        self.return_segments = bool(return_segments)
        if sampler is None and shuffle and generator is None:
            # shuffle=True: the C keyed permutation, drawn by the engine itself
            # (nothing of size N is built, the first batch does not wait for a
            # permutation of the whole dataset), seeded per pass from torch's
            # default generator as torch's RandomSampler seeds (seed=None), or
            # from seed; with a generator, torch's own RandomSampler
            self.sampler = RandomCXLSampler(len(dataset), seed=seed)
            self.batch_sampler = torch.utils.data.BatchSampler(self.sampler, batch_size,
                                                               drop_last)
        if self.collate == _core.COLLATE_PACK:
            self.batch_sampler = None  # a packed batch is rows of tokens, not a list of ids
        # gather threads: threads, else num_workers, else the engine's
        # choice from the topology; the engine never runs more than the
        # CPUs it may use (self.threads is what it runs)
        self._threads_asked = threads or num_workers or 0
        # prefetch_factor batches in flight per thread, as torch counts per
        # worker, twice over (the engine makes 2 * prefetch * threads + 2
        # slots): batches are delivered in order, so one thread descheduled
        # mid-batch must not leave the others without a free slot
        # (measured: 6 slots for 2 threads lost ~25% to that, 10 not).
        # None: the engine's default, which is 2 and more slots for small
        # batches (fewer wake-ups per batch)
        # the dataset's prefetch_depth: on a pool of one tier the gather
        # ring's depth, the only read-ahead there is (on a pool of tiers the
        # staging horizon, above)
        self.prefetch = prefetch_factor or (None if dataset.tiered else
                                            dataset.prefetch_depth) or 0
        mem = _pool_memory(dataset.spec) if near or pin_to_cxl or numa_policy else {}
        if near and mem["near_node"] < 0:
            _warn(f"numa_bind=True: no NUMA node is known for the memory of pool "
                  f"{dataset.spec!r} ({mem['media']}), so the gather threads are not bound")
        self.numa_node = (mem["near_node"] if near else
                          -1 if numa_bind is None else int(numa_bind))
        self.threads = dataset.store.gather_threads(self._threads_asked, self.numa_node)
        cuda_dev = self.device is not None and self.device.type == "cuda"
        cuda = cuda_dev or (self.pin_memory and torch.cuda.is_available())
        if self.pin_memory and not torch.cuda.is_available():
            _warn("pin_memory=True without CUDA: nothing to pin (no-op)")
        # the ring slots' pages: bound (1) or interleaved (2) over slot_nodes
        self._slots: dict[str, Any] = {"bind_slots": 0}
        nodes = _node_list(mem.get("numa_nodes", ""))
        if numa_policy and not nodes:
            _warn(f"memory_policy={numa_policy!r}: no NUMA node is known for the memory of "
                  f"pool {dataset.spec!r} ({mem['media']}): ring slots are placed as usual")
        elif numa_policy:
            self._slots = {"bind_slots": 2 if numa_policy == "interleave" else 1,
                           "slot_nodes": nodes}
            if numa_policy == "interleave" and not mem["numa_interleave"]:
                _warn(f"memory_policy='interleave': the pages of pool {dataset.spec!r} are not "
                      "interleaved (a pool made with numa_nodes=[...] is); the loader's ring "
                      f"slots are, over node(s) {mem['numa_nodes']}")
        if pin_to_cxl and mem["media"] == "numa":
            if not numa_policy:  # on the pool's node(s), placed as the pool's pages are
                self._slots = {"bind_slots": 2 if mem["numa_interleave"] else 1,
                               "slot_nodes": nodes}
        elif pin_to_cxl and not cuda:
            _warn(f"pin_to_cxl: pool {dataset.spec!r} is not on the numa "
                       "backend, so ring slots stay in local memory (no-op)")
        if cuda:
            # ring slots registered per pass; with pin_to_cxl the dataset's
            # view of the pool for the loader's lifetime (close())
            self._gpu = gpu.LoaderGPU(self.device if cuda_dev else None, self.prefetch_to_gpu,
                                      dataset if pin_to_cxl else None)
        if tiered:
            if isinstance(self._base_order(), HostsCXLSampler):
                # a host's ranks read a few records of many blocks of other
                # hosts' shares: those are read in part, not staged whole
                # (docs/tiers.md, "Sparse items"; docs/remote.md)
                self._tier["tier_sparse"] = True
                if memory_budget is None:
                    # the host's memory is its part of one cache across
                    # hosts: all of it holds the host's share (a share of a
                    # tier holding 40% of the dataset, 1/3 of it, outgrows
                    # 3/4 of the tier and is staged again every epoch)
                    memory_budget = staging_budget(dataset, None, whole=True)
                    self._tier["tier_budget"] = int(memory_budget or 0)
            self._warn_order(memory_budget)
        self._stage_ahead()

    def _check_cut_together(self, dataset: CXLDataset, mode: str) -> None:
        """PAD and PACK cut every chosen variable-length field of a record at
        the same element counts, so a record's variable fields must have
        equal lengths. A str field's length counts UTF-8 bytes, not the
        elements of another field: beside another variable field it is a
        ValueError here, naming it and the columns= that leaves it out
        (found now rather than by the first batch)."""
        var = [f for f in self._chosen if f["variable"]]
        text = next((f for f in var if f["dtype"] == "str"), None)
        if text is None or len(var) < 2:
            return
        other = next(f for f in var if f is not text)
        keep = [f["name"] for f in self._chosen if f is not text]
        raise ValueError(f"dataset {dataset.name!r}: field {text['name']!r} is str (its "
                         f"length counts UTF-8 bytes) and cannot be {mode}ed beside field "
                         f"{other['name']!r} ({other['dtype']}): collate={mode!r} cuts a "
                         f"record's variable-length fields at the same element counts, so "
                         f"they need equal lengths; choose the fields with columns={keep!r}")

    def _tier_args(self) -> dict:
        """The staging engine's arguments: self._tier, and for the hosts order
        the shards of other hosts' shares this epoch (tier_away)."""
        away = self._away()
        return self._tier if away is None else dict(self._tier, tier_away=away)

    def _away(self) -> Optional[bytes]:
        """The hosts order: one bit per shard, set for the shards of no block
        of this rank's host's share in the sampler's epoch. The engine never
        stages them; batches read their records in part, from the peer that
        has them in memory (docs/remote.md, "Reading a peer's memory"), so a
        host's memory holds its share alone. None for other orders. With
        keep_blocks=False the deal is the sampler's epoch now: a stager
        made before set_epoch of the pass it stages avoids the last one's."""
        base = self._base_order()
        if (not self._tier.get("tier_sparse") or not isinstance(base, HostsCXLSampler)
                or not isinstance(self.sampler, DistributedCXLSampler)):
            return None
        smp = self.sampler
        key = (smp.seed, None if base.keep_blocks else smp.epoch)  # keep: one deal
        if self._away_key == key:
            return self._away_bits
        base.seed, base.epoch = smp.seed, smp.epoch
        store, n = self.dataset.store, len(self.dataset)
        mine = np.zeros(self.dataset.shards()["n_shards"], dtype=bool)
        size = base.shard_size
        for b in base.host_blocks(base.rank_hosts[smp.rank]):
            i, hi = b * size, min(n, (b + 1) * size)
            while i < hi:
                loc = store.locate(i)
                mine[loc["shard"]] = True
                i += loc["shard_records"] - loc["index"]
        self._away_key = key
        self._away_bits = np.packbits(~mine, bitorder="little").tobytes()
        return self._away_bits

    def _base_order(self) -> Any:
        """The order the sampler splits among ranks (a DistributedCXLSampler's
        base), or the sampler itself."""
        return self.sampler.base if isinstance(self.sampler, DistributedCXLSampler) \
            else self.sampler

    def _warn_order(self, memory_budget: Optional[int]) -> None:
        """Warns when the order cannot be staged: a dataset larger than the
        staging budget read in a full shuffle (every batch draws from every
        shard, so shards are fetched again and again: a 256 MiB dataset
        behind a 48 MiB tier read 112x its bytes, docs/benchmarks/history.md), or in
        a block order whose window holds more than the budget."""
        sh = self.dataset.shards()
        budget = staging_budget(self.dataset, memory_budget)
        total = sh["n_shards"] * sh["max_bytes"]
        if budget is None or total <= budget:
            return
        s = self._base_order()
        fix = ('sampler=RandomCXLSampler(ds, window="auto") (or DistributedCXLSampler(ds, '
               'window="auto")) reads each shard once per epoch')
        if (isinstance(s, RandomCXLSampler) and s.order == "random") or \
                isinstance(s, torch.utils.data.RandomSampler):
            # staging would fetch whole shards again and again for a record
            # or two each: unless told otherwise, shards are copied only
            # into the budget's room and batches read the rest in part
            # (docs/tiers.md)
            part = self._read_in_part is not False
            self._tier["tier_read_in_part"] = part
            how = ("so shards are copied only while the budget has room and each batch reads "
                   "the blocks of its other records from the home tier" if part else
                   "so shards are read from the home tier many times per epoch")
            if part:
                how += self._rewrite_advice()
            _warn(f"a full shuffle of dataset {self.dataset.name!r} ({sh['n_shards']} shards "
                  f"of up to {sh['max_bytes']} bytes) behind a staging budget of {budget} bytes: "
                  f"every batch draws from every shard, {how}; {fix}")
        elif isinstance(s, RandomCXLSampler) and s.order == "block":
            unit = self.dataset.stage_unit(budget)
            block_bytes = order_block_bytes(sh, unit, s.shard_size)
            if s.window * block_bytes <= budget:
                return
            fmt = self.dataset.shard_format()
            if not unit["records"] and 2 * sh["max_bytes"] > budget and fmt["block_bytes"] == 0:
                # shards too large for the budget, and no block sums to stage
                # a part of one by (docs/tiers.md, "Staging units")
                _warn(f"dataset {self.dataset.name!r} is in shards of up to {sh['max_bytes']} "
                      f"bytes, too large for a staging budget of {budget} bytes, and its shard "
                      f"format {fmt['version']} has no block sums, so no part of a shard can be "
                      f"staged alone: every record is read from the home tier; rewrite it: "
                      f"pool.rewrite({self.dataset.name!r}) or cxlpool rewrite POOL "
                      f"{self.dataset.name}")
            else:
                _warn(f"the sampler's window of {s.window} blocks of {s.shard_size} records "
                      f"({s.window * block_bytes} bytes in memory) is more than the staging "
                      f"budget of {budget} bytes: blocks are read from the home tier more "
                      f"than once per epoch; use window=\"auto\" (a window of half the "
                      f"budget) or a window of at most {max(1, budget // (2 * block_bytes))}")

    def _rewrite_advice(self) -> str:
        """For a dataset read in part: nothing when its shards have 4 KiB
        blocks (shard format 4); else what its format costs per record and
        the fix (docs/store-format.md)."""
        fmt = self.dataset.shard_format()
        block = fmt["block_bytes"]
        if not fmt["version"] or block == 4096:
            return ""
        cost = (f"whole blocks of {block} bytes" if block else
                "whole shards (no block sums)")
        return (f" (its shards are of shard format {fmt['version']}, written by an earlier "
                f"build: a record read in part costs {cost}; rewrite it for 4 KiB blocks: "
                f"pool.rewrite({self.dataset.name!r}) or cxlpool rewrite POOL "
                f"{self.dataset.name})")

    def _init_general(self, dataset: Any, kw: dict) -> None:
        """The general path: torch's DataLoader with the same arguments, its
        index stream wrapped (for a map-style dataset) so that a pass can be
        replayed from a checkpoint (see _resume.PassIndex)."""
        self.collate = None
        if isinstance(dataset, torch.utils.data.IterableDataset):
            self._index = None  # no index stream to replay: state_dict() refuses
            self._torch = torch.utils.data.DataLoader(dataset, **kw)
            return
        kw = dict(kw, shuffle=None, sampler=None, drop_last=False, generator=self.generator,
                  collate_fn=self.collate_fn)
        if self.batch_sampler is None:  # batch_size=None: one sample at a time
            self._index = _resume.PassIndex(self.sampler)
            kw.update(sampler=self._index, batch_size=None, batch_sampler=None)
        else:
            self._index = _resume.PassIndex(self.batch_sampler)
            kw.update(batch_sampler=self._index, batch_size=1)
        self._torch = torch.utils.data.DataLoader(dataset, **kw)

    def __repr__(self) -> str:
        if not self.fast:
            return (f"CXLDataLoader({self.dataset!r}, batch_size={self.batch_size}, general "
                    f"path (torch's DataLoader), num_workers={self.num_workers})")
        mode = {_core.COLLATE_STACK: "stack", _core.COLLATE_PAD: "pad",
                _core.COLLATE_PACK: "pack"}[self.collate]
        rows = f", seq_len={self.seq_len}" if self.seq_len else ""
        return (f"CXLDataLoader({self.dataset!r}, batch_size={self.batch_size}, fast path, "
                f"collate={mode}{rows}, sampler={self.sampler!r}, threads={self.threads}, "
                f"epoch {self.epoch})")

    # -- order -------------------------------------------------------------
    def _order(self) -> np.ndarray:
        """The pass's ids from a torch sampler, drawn as torch draws them."""
        s = self.sampler
        n = len(self.dataset)
        if isinstance(s, torch.utils.data.SequentialSampler):
            return np.arange(n, dtype=np.int64)
        if (type(s) is torch.utils.data.RandomSampler and not s.replacement
                and s._num_samples is None):
            # torch's RandomSampler.__iter__, without a Python int per id
            g = s.generator
            if g is None:
                g = torch.Generator()
                g.manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))
                return torch.randperm(n, generator=g).numpy()
            # the second permutation it draws for the tail of its num_samples
            # (none of it used) is drawn when torch draws it: _as_torch_draws
            return torch.randperm(n, generator=g).numpy()
        ids = []
        for i in s:
            try:
                ids.append(operator.index(i))
            except TypeError:
                raise IndexError(f"{type(s).__name__} yielded {i!r}: only integers are valid "
                                 "indices of a CXLDataset") from None
        return np.array(ids, dtype=np.int64)

    def set_epoch(self, epoch: int) -> None:
        """Makes the next pass epoch `epoch` (and tells the sampler, where it
        has set_epoch); a restored position of that epoch is kept."""
        epoch = operator.index(epoch)
        if epoch != self.epoch:
            self._resume = None
        self.epoch = epoch
        self._explicit = True
        if hasattr(self.sampler, "set_epoch"):
            self.sampler.set_epoch(epoch)
            self._stage_ahead()

    # -- staging ahead of a pass (docs/tiers.md, "Staging ahead of a pass") --
    def _stages(self) -> bool:
        """True where passes run through a staging engine over a C order."""
        return (self.fast and isinstance(self.sampler, CXLSamplerBase)
                and isinstance(self.dataset, CXLDataset) and self.dataset.tiered)

    def _let_go(self) -> None:
        """Stops what stages for a pass not started: the stager, and the
        last pass's engine (its figures kept for stats())."""
        if self._ahead is not None:
            self._ahead.close()
            self._ahead = None
        if self._last_engine is not None:
            self._last_stats = dict(self._last_engine.stats())
            self._last_engine = None
        self._ahead_key = None

    def _stage_ahead(self) -> None:
        """Stages the first shards of the pass the next iter() starts,
        where its order is known now and nothing stages for it yet: at
        construction, after set_epoch or a restored state. The last pass's
        engine already stages for the pass that follows it; another pass
        named meanwhile replaces it with a stager."""
        if not self._stages() or self._resume is not None:
            self._let_go()
            return
        key = self.sampler._upcoming_key()
        if key is not None and key == self._ahead_key:
            return
        self._let_go()
        if key is None:
            return
        self._ahead = _core.Stager(self.dataset.store, self.sampler._upcoming(key),
                                   self.batch_size, **self._tier_args())
        self._ahead_key = key

    def __len__(self) -> int:
        """Batches per epoch, as len() of torch's DataLoader; packed rows: the
        batches each rank yields (see _pack_counts)."""
        if not self.fast:
            return len(self._torch)
        if self.collate == _core.COLLATE_PACK:
            return self._pack_counts(next_pass=True)[0]
        # a whole epoch's, as torch's (and torchdata's StatefulDataLoader's)
        # len() after a restored state: frameworks size their epochs by it
        s = self.sampler
        n = s.full_len() if isinstance(s, CXLSamplerBase) else len(s)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    # -- packed rows: batches per rank ------------------------------------------
    def _rank_orders(self, next_pass: bool) -> Optional[list]:
        """Every rank's order of the current (or next) pass, when the sampler
        splits one order over ranks (ours, or torch's DistributedSampler);
        None for a single order."""
        s = self.sampler
        if isinstance(s, CXLSamplerBase) and s.num_replicas > 1:
            live = s._pass == "live" and not next_pass
            seed, epoch = s.seed, s.epoch + (0 if live or s._explicit else 1)
            saved = s.seed, s.epoch
            s.seed, s.epoch = seed, epoch
            try:
                return [s._create(s.num_replicas, r, s.drop_last) for r in range(s.num_replicas)]
            finally:
                s.seed, s.epoch = saved
        if isinstance(s, torch.utils.data.DistributedSampler) and s.num_replicas > 1:
            out = []
            for r in range(s.num_replicas):
                other = copy.copy(s)
                other.rank = r
                out.append(np.fromiter(iter(other), dtype=np.int64))
            return out
        return None

    def _rows_to_batches(self, elements: int) -> int:
        """Packed batches of `elements` in order: full rows of seq_len, the
        last row partial; drop_last drops a last batch short of
        batch_size x seq_len elements (the engine's plan_pack)."""
        per = self.seq_len * self.batch_size
        return elements // per if self.drop_last else -(-elements // per)

    def _pack_counts(self, next_pass: bool) -> tuple[int, Optional[list[int]]]:
        """(batches per epoch, every rank's own count or None). Packing
        concatenates records into rows of seq_len, so a rank's row count is
        ceil(its elements / seq_len) and differs between ranks; every rank
        yields the smallest count (the remainder rule: the few rows a rank
        has beyond it are dropped for that epoch), so that synchronous data
        parallel training sees the same number of batches on every rank.
        Costs one pass over the order's record lengths (an index lookup per
        record, no data read), cached per (seed, epoch)."""
        s = self.sampler
        key = (getattr(s, "seed", None), getattr(s, "epoch", None), next_pass,
               getattr(s, "_pass", None), getattr(s, "_explicit", None))
        cache = getattr(self, "_pack_cache", None)
        if cache is not None and cache[0] == key:
            return cache[1]
        store = self.dataset.store
        orders = self._rank_orders(next_pass)
        if orders is not None:
            per = [self._rows_to_batches(store.elements(o, self._plan_field)) for o in orders]
            out = (min(per), per)
        else:
            out = (self._rows_to_batches(self._single_order_elements()), None)
        self._pack_cache = (key, out)
        return out

    def _single_order_elements(self) -> int:
        s = self.sampler
        ds = self.dataset
        if isinstance(s, (torch.utils.data.SequentialSampler, RandomCXLSampler)) or (
                type(s) is torch.utils.data.RandomSampler and not s.replacement
                and s._num_samples is None):
            if not isinstance(s, RandomCXLSampler) or s.num_replicas == 1:
                if len(ds.fields) == 1:
                    return ds.info()["data_bytes"] // _core.dtype_size(ds.schema["fields"][0]["dtype"])
                return ds.store.elements(np.arange(len(ds), dtype=np.int64), self._plan_field)
        if isinstance(s, torch.utils.data.SubsetRandomSampler):
            return ds.store.elements(np.asarray(s.indices, dtype=np.int64), self._plan_field)
        if isinstance(s, CXLSamplerBase):
            return ds.store.elements(s._core_sampler() if s._pass != "live"
                                     else s._create(s.num_replicas, s.rank, s.drop_last),
                                     self._plan_field)
        raise TypeError(f"len() of a packed loader over a {type(s).__name__}: the row count "
                        "depends on the lengths of the records it draws, which only drawing "
                        "them tells")

    # -- passes ----------------------------------------------------------------
    def _start_pass(self) -> int:
        """Epoch bookkeeping at iter(): the next epoch unless set_epoch or
        load_state_dict named it. On the fast path the base seed torch's
        DataLoader draws per iter() (from generator, else torch's default
        generator) is drawn too, so the random streams advance exactly as
        under torch (on the general path torch's own iter() draws it)."""
        if not self._explicit:
            self.epoch += 1
            self._resume = None
        self._explicit = False
        if self.fast:
            torch.empty((), dtype=torch.int64).random_(generator=self.generator)
        self._pass += 1
        self._live = self._pass
        self._batches = 0
        return self._pass

    def _end_pass(self, token: int) -> None:
        if self._live == token:
            self._live = 0

    # -- iteration ---------------------------------------------------------
    def __iter__(self) -> Iterator[Any]:
        if not self.fast:
            return self._general_pass()
        resume, self._resume = self._resume, None
        token = self._start_pass()
        g = self._torch_generator()
        if g is None:
            return self._fast_iter(token, resume)
        # torch's RandomSampler draws its permutation at the first next()
        # and its tail's at the request past its last index: the pass is
        # drawn and started there too (what a state_dict() before it needs,
        # now)
        self._snap = _resume.snapshot(self.sampler) if resume is None else resume["rng"]
        self._order_crc, self._full = None, None
        self._pos, self._off = ((resume["position"], resume["offset"]) if resume is not None
                                else (0, 0))
        return self._as_torch_draws(g, token, resume)

    def _torch_generator(self) -> Optional[torch.Generator]:
        """The generator of a torch RandomSampler that _order() draws as
        torch does (shuffle=True, generator=g), else None."""
        s = self.sampler
        if (type(s) is torch.utils.data.RandomSampler and not s.replacement
                and s._num_samples is None):
            return s.generator
        return None

    def _as_torch_draws(self, g: torch.Generator, token: int,
                        resume: Optional[dict]) -> Iterator[Any]:
        """The pass of a RandomSampler with generator g, drawing from g when
        torch's DataLoader (num_workers=0) does: the permutation when the
        first batch is asked for, and the second permutation RandomSampler
        draws for its (empty) tail when an index past the last is: as the
        last batch is made, if it is a partial one, else when the batch
        after the last is asked for. A pass broken off before that leaves g
        where torch leaves it (test_dropin.py)."""
        gen = self._fast_iter(token, resume)
        n, bs = len(self.dataset), self.batch_size
        # the batch whose making asks for an index past the last (packed
        # rows: none, the tail is drawn as the pass runs out)
        at = None if self.collate == _core.COLLATE_PACK else n // bs
        k = resume["position"] // bs if resume is not None and at is not None else 0
        try:
            for b in gen:
                if k == at:
                    torch.randperm(n, generator=g)
                k += 1
                yield b
            if at is None or k <= at:
                torch.randperm(n, generator=g)
        finally:
            gen.close()

    def _fast_iter(self, token: int, resume: Optional[dict]) -> Iterator[Any]:
        """The fast pass's batches, its order drawn and its engine started now."""
        start = off = 0
        limit = None
        cxl = isinstance(self.sampler, CXLSamplerBase)
        if cxl:
            if resume is not None and "sampler" in resume:
                self.sampler.load_state_dict(resume["sampler"])
            # positioned by the sampler's own (restored) state; the sampler
            # counts what we deliver so its state_dict() is the consumer's
            order: Any = self.sampler._begin()
            self.epoch = self.sampler.epoch
        else:
            self._snap = _resume.snapshot(self.sampler) if resume is None else resume["rng"]
            self._order_crc: Optional[int] = None
            if resume is None:
                full = self._order()
            else:
                with _resume.replaying(self.sampler, resume["rng"]):
                    full = self._order()
                if _resume.crc(full.tobytes()) != resume["order_crc"]:
                    raise _resume.mismatch("the order of the replayed pass", self.sampler)
            self._full = full
            order = full[resume["position"]:] if resume is not None else full
        if resume is not None:
            start = 0 if cxl else resume["position"]
            off = resume["offset"]
        self._pos, self._off = start, off
        if self.collate == _core.COLLATE_PACK:
            total, per = self._pack_counts(next_pass=False)
            if per is not None:
                done = resume.get("batches", 0) if resume is not None else 0
                self._batches = done
                limit = total - done
        gen = self._fast_pass(token, cxl, order, off)
        if limit is not None:
            gen = self._limited(gen, limit)
        if self.dtype is not None:
            gen = self._cast(gen)
        return gen

    def _limited(self, gen: Iterator[Any], limit: int) -> Iterator[Any]:
        """The first limit batches of gen (packed rows under a distributed
        sampler: every rank yields the same count), counted for the state."""
        try:
            for _ in range(limit):
                try:
                    b = next(gen)
                except StopIteration:
                    return
                self._batches += 1
                yield b
        finally:
            gen.close()

    def _cast(self, gen: Iterator[Any]) -> Iterator[Any]:
        """dtype=: each batch's data (tokens) as that dtype (a copy per batch)."""
        dt = self.dtype
        var = [f["name"] for f in self._chosen if f["variable"]]
        try:
            for b in gen:
                if isinstance(b, dict):
                    for k in var or list(self._names):
                        b[k] = b[k].to(dt)
                    yield b
                else:
                    yield b.to(dt)
        finally:
            gen.close()

    def _general_pass(self) -> Iterator[Any]:
        resume, self._resume = self._resume, None
        token = self._start_pass()
        if resume is not None:
            if self._index is None:
                raise TypeError("resume: this loader's dataset is iterable-style, so there is "
                                "no index stream to replay")
            self._batches = resume["batches"]
            self._index.replay = (resume["rng"], resume["batches"], resume["index_crc"])
        elif self._index is not None:
            self._index.replay = None
        return self._deliver(token)

    def _deliver(self, token: int) -> Iterator[Any]:
        dev = self.device if self.device is not None and self.device.type != "cpu" else None
        try:
            for out in self._torch:
                self._batches += 1
                if dev is not None:
                    out = self._to_device(out, non_blocking=self.pin_memory)
                yield out
        finally:
            self._end_pass(token)

    def _fast_pass(self, token: int, cxl: bool, order: Any, off: int) -> Iterator[Any]:
        """The pass's engine, started now, and its batches: a _core.Pass (the
        per-batch loop in C: one call of take() a batch, no generator frame),
        copied on with .to(device) for a device other than the CPU, or
        through the CUDA side."""
        eng = self._fast_engine(cxl, order, off)
        end = functools.partial(self._fast_end, token, cxl, eng)
        if self._gpu is not None:
            return self._gpu_gen(eng, cxl, end)
        it = _core.Pass(eng, end, self.sampler if cxl else None)
        dev = self.device if self.device is not None and self.device.type != "cpu" else None
        return it if dev is None else self._on_device(it)

    def _fast_engine(self, cxl: bool, order: Any, off: int) -> Any:
        # take() builds each batch's tensors in C, one per field, through
        # torch's DLPack import; the document boundaries of packed rows
        # (segment s is record seg_id[s], elements [seg_offset, +seg_len) of
        # it, at row seg_row[s], columns [seg_start, +seg_len)) only with
        # return_segments
        # the stager (or the last pass's engine) hands over: the copies it
        # made stay; this pass's engine stages the pass after it
        self._let_go()
        key = self.sampler._upcoming_key() if cxl and self._stages() else None
        nxt = self.sampler._upcoming(key) if key is not None else None
        eng = _core.Loader(self.dataset.store, order, self.batch_size,
                           threads=self._threads_asked, prefetch=self.prefetch,
                           collate=self.collate,
                           seq_len=self.seq_len, pad_value=self.pad_value,
                           drop_last=self.drop_last, numa_node=self.numa_node,
                           first_offset=off, tensor=_from_capsule,
                           segments=self.return_segments, fields=self._fields, **self._slots,
                           next_order=nxt, **self._tier_args())
        self._engine = eng
        self._ahead_key = key
        self.threads = eng.threads
        return eng

    def _fast_end(self, token: int, cxl: bool, eng: Any) -> None:
        """The end of a fast pass (run out, broken off or failed), once."""
        self._pos, self._off = self._where()
        self._at = None
        self._stall_ns += eng.stall_ns
        self._engine = None
        self._last_engine = eng
        if cxl:
            self.sampler._finish()
        self._end_pass(token)

    def _on_device(self, it: Any) -> Iterator[Any]:
        """The pass's batches copied to self.device."""
        try:
            for out in it:
                yield self._to_device(out, non_blocking=False)
        finally:
            it.close()

    def _gpu_gen(self, eng: Any, cxl: bool, end: Callable[[], None]) -> Iterator[Any]:
        """The fast pass's batches through the CUDA side; end() once it is over."""
        try:
            yield from self._gpu_pass(eng, cxl)
        finally:
            end()

    def _gpu_pass(self, eng: Any, cxl: bool) -> Iterator[Any]:
        """The fast path's batches through the CUDA side (gpu.LoaderGPU):
        copied to the device ahead of use, or held in registered slots
        (pin_memory). The engine runs ahead of what was handed out, so the
        resume point is the handed-out batch's, not the engine's."""
        g = self._gpu
        assert g is not None
        run = (g.device_pass if g.device is not None else g.pinned_pass)(eng, eng.take)
        try:
            for out, at in run:
                self._at = at
                if cxl:
                    self.sampler._drawn = at[0]
                yield out
        finally:
            run.close()  # queued copies waited for, slots unregistered, now

    def _to_device(self, out: Any, non_blocking: bool) -> Any:
        if isinstance(out, dict):
            return {k: v.to(self.device, non_blocking=non_blocking) for k, v in out.items()}
        return out.to(self.device, non_blocking=non_blocking)

    def close(self) -> None:
        """Lets go of what the loader holds beyond a pass: the CUDA
        registration of the dataset's pool view (pin_to_cxl with CUDA), the
        staging for the next pass (a pool of tiers; the copies made stay),
        and the last pass's ring memory, which the next pass would reuse
        (the library keeps a freed loader's ring for the next loader of the
        process; a pass running now keeps its own)."""
        if self._gpu is not None:
            self._gpu.close()
        self._let_go()
        _core.loader_trim()

    def stats(self) -> dict:
        """Figures of the loader as one dict. On a pool of tiers, what the
        running (or last) epoch's staging engine did (policy, staging tier,
        budget, hits, misses, prefetched and fetched shards, bytes staged and
        evicted, stage_stall_ns: gather threads waiting for fetches) and the
        pool's tiers with their counters ("tiers", as cxlpool stat --json);
        always the loop's own stall_ns. "gpu" (fast path with CUDA:
        device="cuda", or pin_memory=True): the copy path that ran
        ("registered": DMA from registered ring slots; "staging": through a
        pinned staging buffer, where registration failed; "mixed"), batches
        and bytes per path, the last pass's slot registrations ("slots":
        chunks, bytes, register/unregister calls, failures and the last
        failure), and with pin_to_cxl the dataset's pool registration
        ("pool")."""
        eng = self._engine if self._engine is not None else self._last_engine
        st: dict[str, Any] = (dict(eng.stats()) if eng is not None else
                              dict(self._last_stats or {}))
        st["stall_ns"] = self.stall_ns
        if isinstance(self.dataset, CXLDataset):
            pool = _core.Pool(self.dataset.spec, readonly=True)
            try:
                st["tiers"] = pool.tiers()
            finally:
                pool.close()
        if self._gpu is not None:
            st["gpu"] = self._gpu.stats()
        return st

    @property
    def stall_ns(self) -> int:
        """Nanoseconds the loop waited on the engine (batches not ready)."""
        eng = self._engine
        return self._stall_ns + (eng.stall_ns if eng is not None else 0)

    @property
    def stall_seconds(self) -> float:
        """Seconds the loop waited on the engine (settable, e.g. to 0)."""
        return self.stall_ns / 1e9

    @stall_seconds.setter
    def stall_seconds(self, v: float) -> None:
        eng = self._engine
        self._stall_ns = int(v * 1e9) - (eng.stall_ns if eng is not None else 0)

    # -- resume ------------------------------------------------------------
    def _where(self) -> tuple[int, int]:
        """(records of the epoch delivered, elements of the next record
        delivered) after the last batch handed out."""
        eng = self._engine
        if eng is None:
            return self._pos, self._off
        if self._at is not None:
            return self._pos + self._at[0], self._at[1]
        return self._pos + eng.resume_records, eng.resume_offset

    def state_dict(self) -> dict:
        """Where the next batch comes from, as a dict of plain values (JSON
        and torch.save both take it): ``epoch``; on the fast path
        ``position`` (records of the epoch delivered) and ``offset``
        (packed rows: elements of the next record delivered), with one of
        our samplers its state (``sampler``, which also restores under
        another world size), with a torch sampler what its order was drawn
        from (``rng``) and a CRC of that order; on the general path the
        batches delivered (``batches``), ``rng`` and a CRC of their indices.
        Inside a pass it is the pass's position; after a pass ended (ran out,
        or a break) it is the start of the next epoch, where the next iter()
        begins: take it inside the loop to checkpoint a pass."""
        ended = not self._live and not self._explicit and self._pass > 0
        if ended or (self._explicit and self._resume is None):
            return self._next_state(ended)
        if self._explicit:
            return dict(self._resume)
        if not self.fast:
            return self._general_state()
        pos, off = self._where()
        st: dict[str, Any] = {"path": "fast", "epoch": self.epoch, "position": pos,
                              "offset": off}
        if self.collate == _core.COLLATE_PACK:
            st["batches"] = self._batches
        if isinstance(self.sampler, CXLSamplerBase):
            st["sampler"] = self.sampler._pass_state()
        else:
            if self._order_crc is None:
                self._order_crc = _resume.crc(self._drawn_order().tobytes())
            st.update(rng=self._snap, order_crc=self._order_crc)
        return st

    def _drawn_order(self) -> np.ndarray:
        """The pass's order from a torch sampler; before its first batch
        drew it (_as_torch_draws), drawn from the pass's snapshot with the
        generators' states kept as they are."""
        if self._full is not None:
            return self._full
        gens = _resume._generators(self.sampler)
        kept = [g.get_state() for g in gens]
        try:
            with _resume.replaying(self.sampler, self._snap):
                return self._order()
        finally:
            for g, st in zip(gens, kept):
                g.set_state(st)

    def _next_state(self, ended: bool) -> dict:
        """The start of the next pass (no batch of it delivered)."""
        st: dict[str, Any] = {"path": "fast" if self.fast else "general",
                              "epoch": self.epoch + (1 if ended else 0), "start": True}
        if isinstance(self.sampler, CXLSamplerBase):
            st["sampler"] = self.sampler.state_dict()
        return st

    def _general_state(self) -> dict:
        if self._index is None:
            raise TypeError("state_dict(): this loader's dataset is iterable-style; there is "
                            "no index stream to replay, so a resume could not be exact")
        k = self._batches
        idx = self._index
        return {"path": "general", "epoch": self.epoch, "batches": k, "rng": idx.snap,
                "index_crc": idx.crcs[k - 1] if k else 0}

    def load_state_dict(self, state: dict) -> None:
        """The next iter() continues where state says (a new loader with the
        same arguments, or this one). ValueError for a state of the other
        path or one that does not fit."""
        path = state.get("path", "fast")
        if path != ("fast" if self.fast else "general"):
            raise ValueError(f"loader state of the {path} path, but this loader takes the "
                             f"{'fast' if self.fast else 'general'} path (other arguments?)")
        self.epoch = operator.index(state["epoch"])
        self._explicit = True
        if state.get("start"):
            self._resume = None
            if "sampler" in state and isinstance(self.sampler, CXLSamplerBase):
                self.sampler.load_state_dict(state["sampler"])
            elif hasattr(self.sampler, "set_epoch"):
                self.sampler.set_epoch(self.epoch)
            self._stage_ahead()
            return
        self._resume = dict(state)
        self._stage_ahead()
