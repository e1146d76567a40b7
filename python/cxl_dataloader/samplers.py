"""torch Samplers over the C orders of libcxlpool (``cxlp_sampler_*``).

Every order is a pure function of (seed, epoch, position): no index table
exists (memory does not depend on the dataset size, except the curriculum's
O(n) ranking), and a checkpoint is four integers::

    {"seed": s, "epoch": e, "consumed": c, "fingerprint": f}

``consumed`` counts the leading positions of the epoch order that all ranks
together have read. Ranks draw interleaved positions (rank r reads
``base + r, base + r + world, ...``, as torch's DistributedSampler), so after
every rank has consumed ``k`` samples the positions read are exactly the
prefix ``[0, base + k * world)``, whatever the world size. Restoring a state
under another world size splits the rest of the epoch again: nothing is
repeated or skipped.

How a training loop checkpoints: take the state *after a synchronous step*
(every rank has consumed the same number of samples) and count what the loop
consumed, not what a prefetching DataLoader has drawn ahead::

    seen = 0
    for step, batch in enumerate(loader):
        train(batch); seen += len(batch)
        if step % 1000 == 0:
            ckpt = {"sampler": sampler.state_dict(samples_seen=seen), ...}
    # later, under any world size:
    sampler.load_state_dict(ckpt["sampler"])

``CXLDataLoader`` does this counting itself (its ``state_dict()`` carries the
sampler state after the batches it delivered), and on its fast path the C
gather engine draws from the C sampler directly: no index enters Python.

An iterator that ran to its end moves the sampler to the next epoch when it
is iterated again; ``set_epoch(e)`` (as with DistributedSampler) sets it
explicitly. Unlike torch's DistributedSampler, an order therefore changes per
epoch even without set_epoch.
"""
from __future__ import annotations

import bisect
import math
import numbers
import operator
from fractions import Fraction
from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np
import torch

from . import _core
from .dataset import runs_code
from .pool import parse_size

_CHUNK = 4096
_MAX_PERIOD = 1 << 24
_MAX_N = 1 << 63


def _size(data_source_or_n: Any) -> int:
    """n from an integer (any that operator.index accepts) or a sized dataset;
    never wraps: 0 <= n <= 2**63, the largest order a sampler draws."""
    if isinstance(data_source_or_n, numbers.Integral):
        n = operator.index(data_source_or_n)
    elif hasattr(data_source_or_n, "__len__") and not isinstance(data_source_or_n, (str, bytes)):
        n = len(data_source_or_n)
    else:
        raise TypeError(f"expected a number of samples (int) or a sized dataset, got "
                        f"{type(data_source_or_n).__name__}")
    if n < 0:
        raise ValueError(f"number of samples must be >= 0, got {n}")
    if n > _MAX_N:
        raise OverflowError(f"number of samples {n} exceeds 2**63")
    return n


def _dist_world_rank(num_replicas: Optional[int], rank: Optional[int]) -> tuple[int, int]:
    """World size and rank as torch's DistributedSampler takes them: from the
    default process group when not given (its ValueError when there is none:
    a sampler made before init_process_group must not silently be world 1)."""
    dist = torch.distributed
    if num_replicas is None:
        if not dist.is_available():
            raise RuntimeError("Requires distributed package to be available")
        num_replicas = dist.get_world_size()
    if rank is None:
        if not dist.is_available():
            raise RuntimeError("Requires distributed package to be available")
        rank = dist.get_rank()
    num_replicas, rank = operator.index(num_replicas), operator.index(rank)
    _check_rank(num_replicas, rank)
    return num_replicas, rank


def _rank0_choice(values: list[int], world: int) -> list[int]:
    """values as rank 0 of the default process group has them (a broadcast),
    where there is one of ``world`` ranks; else values."""
    dist = torch.distributed
    if world == 1 or not (dist.is_available() and dist.is_initialized()) or \
            dist.get_world_size() != world:
        return values
    box = [list(values)]
    dist.broadcast_object_list(box, src=0)
    return [int(v) for v in box[0]]


def _check_rank(num_replicas: int, rank: int) -> None:
    if num_replicas < 1:
        raise ValueError(f"num_replicas should be a positive integer, got {num_replicas}")
    if rank >= num_replicas or rank < 0:
        raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                         f"[0, {num_replicas - 1}]")


def torch_seed() -> int:
    """A seed drawn from torch's default generator exactly as torch's
    RandomSampler draws one per pass (so torch.manual_seed governs it)."""
    return int(torch.empty((), dtype=torch.int64).random_().item())


def auto_window(dataset: Any, shard_size: Optional[int], memory_budget: Union[int, str, None],
                runs: Union[str, bool, int] = "auto") -> tuple[int, int]:
    """(shard_size, window) for a block order that a staging engine can keep
    ahead of: the window's blocks take at most half of the memory budget
    (the other half holds the next window while this one is read). The
    budget defaults to what a loader's engine uses, 3/4 of the fastest memory
    tier; the block to what the engine stages: the dataset's staging unit
    where its shards are larger than the budget calls for (docs/tiers.md,
    "Staging units"), else its own shards; and where the home reads units
    in a random order clearly slower than in file order (a probe, once per
    process), a run of adjacent units of about 64 MiB (``runs``: "auto",
    True, False, or units per run; docs/tiers.md, "Sequential runs"). On a
    pool of one tier everything is in memory already: the window is every
    shard (a full shuffle of the shards' order and of the records inside)."""
    if not (hasattr(dataset, "shards") and hasattr(dataset, "spec")):
        raise ValueError('window="auto" needs a CXLDataset (its shards and its pool\'s tiers)')
    sh = dataset.shards()
    tiered = getattr(dataset, "tiered", False)
    budget = staging_budget(dataset, memory_budget) if tiered else None
    if not tiered or budget is None:
        per = int(shard_size or sh["per_shard"])
        if per <= 0:
            raise ValueError('window="auto": the dataset\'s shards hold different numbers of '
                             "records; give shard_size")
        return per, max(1, -(-len(dataset) // per))
    if shard_size:  # a block of the caller's: the window from its bytes
        unit = dataset.stage_unit(budget)
        per = int(shard_size)
        block_bytes = order_block_bytes(sh, unit, per)
        return per, max(1, min(-(-len(dataset) // per), budget // (2 * block_bytes)))
    order = dataset.stage_order(budget, runs)
    return int(order["block_records"]), int(order["window"])


def order_block_bytes(shards: dict, unit: dict, per: int) -> int:
    """Bytes a block of ``per`` records of the block order takes in a memory
    tier: its share of a staging unit (``unit``: the dataset's stage_unit(),
    records 0 when it stages whole shards), else of a shard."""
    if unit["records"]:
        return max(1, unit["bytes"] * per // unit["records"])
    return order_shard_bytes(shards, per)


def order_shard_bytes(shards: dict, per: int) -> int:
    """Bytes of one shard of the block order (per records) in a memory tier,
    from the dataset's shards() (max_bytes a copy of one of its own shards
    takes, per_shard records each)."""
    return max(1, shards["max_bytes"] * per // max(1, shards["per_shard"] or per))


def staging_budget(dataset: Any, memory_budget: Union[int, str, None],
                   whole: bool = False) -> Optional[int]:
    """The bytes a loader's staging engine may keep copies in: memory_budget,
    else what the engine takes by default, 3/4 of the pool's fastest memory
    tier (whole: all of it, the hosts order's default); None when the pool
    has no memory tier."""
    if memory_budget is not None:
        return parse_size("memory_budget", memory_budget)
    pool = _core.Pool(dataset.spec, readonly=True)
    try:
        mem = [t for t in pool.tiers() if not t["staged"]]
    finally:
        pool.close()
    if not mem:
        return None
    return mem[0]["capacity"] if whole else mem[0]["capacity"] // 4 * 3


class CXLSamplerBase(torch.utils.data.Sampler):
    """What every order shares: epoch, split over ranks, state and resume.

    Passes and epochs: each pass (an ``iter()``, or a CXLDataLoader epoch)
    that no ``set_epoch`` or ``load_state_dict`` came before starts the next
    epoch, whether the previous pass ran to its end or was broken off, so a
    new ``for`` never replays the order of the last one (torch's
    RandomSampler draws a fresh permutation per ``iter()`` the same way).
    ``set_epoch(e)`` makes the next pass epoch ``e`` (as torch's
    DistributedSampler's does; that one never advances by itself).

    Subclasses define ``_create(world, rank, drop_last)``, returning a fresh
    ``_core.Sampler`` for ``self.seed`` / ``self.epoch``.
    """

    def __init__(self, seed: Optional[int], num_replicas: int = 1, rank: int = 0,
                 drop_last: bool = False) -> None:
        num_replicas, rank = operator.index(num_replicas), operator.index(rank)
        _check_rank(num_replicas, rank)
        # seed None: a fresh seed per pass from torch's default generator
        self._torch_seed = seed is None
        self.seed = 0 if seed is None else operator.index(seed)
        if not 0 <= self.seed < 1 << 64:
            raise ValueError(f"seed must be in [0, 2**64), got {self.seed}")
        self.epoch = 0
        self.num_replicas = num_replicas
        self.rank = rank
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got "
                             f"drop_last={drop_last!r}")
        self.drop_last = drop_last
        self._explicit = True        # the next pass is self.epoch, not self.epoch + 1
        self._seed_pinned = False    # the next pass keeps self.seed (restored state)
        self._pass: Optional[str] = None  # None (none since explicit), "live", "ended"
        self._resume: Optional[int] = None  # consumed to start the next pass at
        self._base = 0                      # consumed when the current pass began
        self._drawn = 0                     # this rank's draws in the current pass
        self._iter_len: Optional[int] = None
        self._probe_cache: Optional[_core.Sampler] = None

    # -- to define ------------------------------------------------------------
    def _create(self, world: int, rank: int, drop_last: bool) -> "_core.Sampler":
        raise NotImplementedError

    # -- the C sampler -----------------------------------------------------------
    def _probe(self) -> "_core.Sampler":
        """A sampler of this order (for its length and fingerprint)."""
        if self._probe_cache is None:
            self._probe_cache = self._create(self.num_replicas, self.rank, self.drop_last)
        return self._probe_cache

    @property
    def fingerprint(self) -> int:
        """Hash of what defines the order (not the seed, epoch or world)."""
        return self._probe().fingerprint

    def epoch_len(self) -> int:
        """Length of the epoch order (all ranks together)."""
        return self._probe().epoch_len()

    def _core_sampler(self) -> "_core.Sampler":
        """A fresh C sampler at the start of this sampler's next pass: epoch
        set, positioned at the restored point if any."""
        s = self._create(self.num_replicas, self.rank, self.drop_last)
        if self._resume:
            s.restore({"seed": self.seed, "epoch": self.epoch, "consumed": self._resume,
                       "fingerprint": s.fingerprint})
        return s

    def _upcoming_key(self) -> Optional[tuple[int, int, int]]:
        """(seed, epoch, consumed) of the pass the next iter() starts if
        nothing (set_epoch, load_state_dict) comes before it; None where its
        seed is drawn when it starts (seed=None: from torch's generator,
        which anything may draw from meanwhile)."""
        if self._torch_seed and not self._seed_pinned:
            return None
        if self._explicit:
            return self.seed, self.epoch, self._resume or 0
        return self.seed, self.epoch + 1, 0

    def _upcoming(self, key: tuple[int, int, int]) -> "_core.Sampler":
        """A fresh C sampler of the pass _upcoming_key() named key, for
        staging its first shards before it starts."""
        saved = self.epoch, self._resume
        self.epoch, self._resume = key[1], key[2]
        try:
            return self._core_sampler()
        finally:
            self.epoch, self._resume = saved

    def _begin(self) -> "_core.Sampler":
        """Starts a pass (Python's iterator or the gather engine's)."""
        if not self._explicit:
            self.epoch += 1
            self._resume = None
        self._explicit = False
        if self._torch_seed and not self._seed_pinned:
            self.seed = torch_seed()
        self._seed_pinned = False
        s = self._core_sampler()
        self._base = self._resume or 0
        self._resume = None
        self._drawn = 0
        self._iter_len = s.rank_len()
        self._pass = "live"
        self._pass_epoch = self.epoch
        return s

    def _finish(self) -> None:
        """Ends the pass, run out or broken off: the next one is a new epoch."""
        self._pass = "ended"

    def __getstate__(self) -> dict:
        # the C handle is a cache: rebuilt from the parameters on demand
        state = dict(self.__dict__)
        state["_probe_cache"] = None
        return state

    # -- torch Sampler ----------------------------------------------------------
    def __iter__(self) -> Iterator[int]:
        s = self._begin()
        try:
            while True:
                ids = np.frombuffer(s.next(_CHUNK), dtype=np.int64)
                if ids.size == 0:
                    break
                for i in ids.tolist():
                    self._drawn += 1
                    yield i
        finally:
            self._finish()

    def rank_len(self) -> int:
        """This rank's count for the current pass (while one runs) or the next."""
        if self._pass == "live" and self._iter_len is not None:
            return self._iter_len
        rest = self.epoch_len() - (self._resume or 0)
        w = self.num_replicas
        return rest // w if self.drop_last else -(-rest // w)

    def __len__(self) -> int:
        return self.rank_len()

    def full_len(self) -> int:
        """This rank's count for a whole epoch, restored position or not."""
        n, w = self.epoch_len(), self.num_replicas
        return n // w if self.drop_last else -(-n // w)

    def set_epoch(self, epoch: int) -> None:
        """Makes the next pass epoch `epoch`. A restored position is kept when
        it belongs to that epoch (so the usual ``load_state_dict();
        set_epoch(saved_epoch)`` loop resumes)."""
        epoch = operator.index(epoch)
        if epoch < 0:
            raise ValueError(f"epoch must be >= 0, got {epoch}")
        if epoch != self.epoch:
            self._resume = None
        self.epoch = epoch
        self._explicit = True

    # -- state ---------------------------------------------------------------------
    def state_dict(self, samples_seen: Optional[int] = None) -> dict:
        """Four integers: where the next sample comes from. samples_seen: what
        this rank's training loop consumed of the current (or last) pass
        (default: what the iterator handed out, which a prefetching
        DataLoader runs ahead of). Take it when every rank has consumed the
        same number of samples. Without samples_seen, a pass that ended (ran
        out or was broken off) is over: the state is the next epoch's start,
        where the next pass begins."""
        if self._explicit or self._iter_len is None:
            return {"seed": self.seed, "epoch": self.epoch, "consumed": self._resume or 0,
                    "fingerprint": self.fingerprint}
        return self._pass_state(samples_seen)

    def _pass_state(self, samples_seen: Optional[int] = None) -> dict:
        """state_dict() of the current (or last) pass, even where set_epoch
        was called during it (as Lightning calls it, with the running
        epoch): what a loader checkpointing inside that pass saves."""
        if samples_seen is None:
            seen = self._drawn if self._pass == "live" else self._iter_len
        else:
            seen = operator.index(samples_seen)
        if seen < 0 or seen > self._iter_len:
            raise ValueError(f"samples_seen {seen} outside 0..{self._iter_len}")
        epoch = getattr(self, "_pass_epoch", self.epoch)
        if seen == self._iter_len:
            epoch, consumed = epoch + 1, 0
        else:
            consumed = self._base + seen * self.num_replicas
        return {"seed": self.seed, "epoch": epoch, "consumed": consumed,
                "fingerprint": self.fingerprint}

    def load_state_dict(self, state: dict) -> None:
        """Continues from state under this sampler's own world size and rank
        (which may differ from the saver's). ValueError for a state of
        another order (other n, kind, shard size, sources...)."""
        fp = int(state["fingerprint"])
        if fp != self.fingerprint:
            raise ValueError(f"sampler state fingerprint {fp:#x} is of another order "
                             f"(this sampler's: {self.fingerprint:#x})")
        consumed = int(state["consumed"])
        if not 0 <= consumed <= self.epoch_len():
            raise ValueError(f"sampler state consumed {consumed} outside the epoch "
                             f"(length {self.epoch_len()})")
        self.seed = int(state["seed"])
        self.epoch = int(state["epoch"])
        self._probe_cache = None
        self._resume = consumed
        self._explicit = True
        self._seed_pinned = True
        self._pass = None
        self._iter_len = None

    def __repr__(self) -> str:
        seed = "from torch" if self._torch_seed else self.seed
        world = (f", rank {self.rank} of {self.num_replicas}"
                 f"{', drop_last' if self.drop_last else ''}" if self.num_replicas > 1 else "")
        return f"{type(self).__name__}({self.epoch_len()} samples, seed {seed}, epoch " \
               f"{self.epoch}{world})"


class RandomCXLSampler(CXLSamplerBase):
    """A full permutation of 0..N-1, different each epoch, for any N up to
    2^63 in O(1) memory (a keyed Feistel bijection).

    Block mode (``shard_size`` given): ids are cut into shards of shard_size
    consecutive ids, the shards are permuted, and samples are shuffled within
    windows of ``window`` shards, so at most ``window`` shards are read at
    once (the working set a fast tier keeps). ``window`` is the quality knob:
    1 reads shard after shard, >= the number of shards is a full shuffle.
    ``window="auto"`` (a CXLDataset) takes the window from the memory budget
    (``memory_budget``, else 3/4 of the pool's fastest memory tier) and the
    shard size from the dataset's shards (see ``auto_window``).

    ``order="sequential"`` gives 0..N-1 (with the same split and state).

    ``seed=None`` draws a fresh seed from torch's default generator at each
    pass, as torch's RandomSampler does (``torch.manual_seed`` then governs
    the orders); the state records the seed drawn, so resume stays exact.
    """

    def __init__(self, data_source_or_n: Any, seed: Optional[int] = 0, *,
                 shard_size: Optional[int] = None, window: Union[int, str, None] = None,
                 order: Optional[str] = None, num_replicas: int = 1, rank: int = 0,
                 drop_last: bool = False, memory_budget: Union[int, str, None] = None,
                 runs: Union[str, bool, int] = "auto", ramp: Optional[bool] = None) -> None:
        super().__init__(seed, num_replicas, rank, drop_last)
        self.n = _size(data_source_or_n)
        runs_code(runs)
        auto = window == "auto"
        if auto:
            if order not in (None, "block"):
                raise ValueError('window="auto" is for the block order')
            shard_size, window = auto_window(data_source_or_n, shard_size, memory_budget, runs)
        elif isinstance(window, str):
            raise ValueError(f"window={window!r}: a number of shards or \"auto\"")
        elif runs_code(runs) not in (-1, 0):
            raise ValueError(f'runs={runs!r}: runs are chosen with window="auto"')
        # the ramp: epoch 0's windows grow from one block (a cold staging
        # tier's start), by default where window="auto" stages a dataset
        if ramp is None:
            ramp = auto and getattr(data_source_or_n, "tiered", False)
        self.ramp = bool(ramp)
        if order is None:
            order = "block" if shard_size else "random"
        if order not in ("random", "block", "sequential"):
            raise ValueError(f"order '{order}': expected random, block or sequential")
        if order == "block" and not shard_size:
            raise ValueError("block order needs shard_size")
        self.order = order
        self.shard_size = int(shard_size or 0)
        self.window = int(window or 1) if order == "block" else 0
        if self.ramp and order != "block":
            raise ValueError("ramp=True is for the block order")
        if self._torch_seed and self.num_replicas > 1:
            raise ValueError("seed=None draws a seed per process from torch; ranks of one "
                             "order need the same integer seed")
        self._probe()  # checks the arguments now

    def _create(self, world: int, rank: int, drop_last: bool) -> "_core.Sampler":
        return _core.Sampler(self.order, n=self.n, seed=self.seed, epoch=self.epoch,
                             shard_size=self.shard_size, window=self.window, world=world,
                             rank=rank, drop_last=drop_last, ramp=self.ramp)


def integer_host_weights(values: Sequence[Any], what: str = "host_weights") -> list[int]:
    """Per-host weights as integers of the same proportions (what the C
    order apportions blocks by): integers as given; other numbers scaled so
    the largest is 2^32 and rounded (a positive weight stays >= 1)."""
    vals = list(values)
    if not vals:
        raise ValueError(f"{what}: no hosts")
    for i, v in enumerate(vals):
        f = float(v)
        if not math.isfinite(f) or f < 0:
            raise ValueError(f"{what}[{i}] must be a finite number >= 0, got {v!r}")
    if all(isinstance(v, (int, np.integer)) for v in vals) and max(vals) < 1 << 40:
        q = [int(v) for v in vals]
    else:
        top = max(float(v) for v in vals)
        q = [max(1, round(float(v) / top * (1 << 32))) if float(v) > 0 else 0 for v in vals] \
            if top > 0 else [0] * len(vals)
    if not any(q):
        raise ValueError(f"{what}: every weight is 0 (at least one host must take blocks)")
    return q


def host_capability(dataset: Any) -> int:
    """This host's weight for topology="auto": the capacity of its pool's
    memory tiers (MiB) times the read bandwidth of their NUMA nodes as
    cxlp_topo reports it (HMAT, MB/s; a tier of no node of its own, such
    as shm, counts the node nearest the pool's memory; where the kernel
    gives no bandwidth, the capacity alone). Staged tiers (nvme, remote:
    a remote tier's span of addresses is no memory) do not count."""
    pool = _core.Pool(dataset.spec, readonly=True)
    try:
        tiers = [t for t in pool.tiers() if not t["staged"]]
        st = pool.stat()
    finally:
        pool.close()
    bw = {n["id"]: n["read_bandwidth_mbs"] for n in _core.topo_nodes()}
    total = 0
    for t in tiers or [{"capacity": st["size"], "numa_node": -1}]:
        node = t["numa_node"] if t["numa_node"] >= 0 else st["near_node"]
        total += max(1, int(t["capacity"]) >> 20) * (bw.get(node) or 1)
    return max(1, total)


def _host_layout(dataset: Any, topology: Any, world: int, ranks_per_host: Optional[int]
                 ) -> tuple[list[Any], Optional[list[int]]]:
    """(host label of every rank, each rank's capability or None): from an
    explicit list of labels; from ranks_per_host (host = rank // k); from
    the process group (every rank's pool host_id and capability, gathered);
    from LOCAL_WORLD_SIZE."""
    import os
    if not isinstance(topology, str):
        labels = list(topology)
        if len(labels) != world:
            raise ValueError(f"topology: {len(labels)} host labels for {world} ranks")
        return labels, None
    if topology != "auto":
        raise ValueError(f'topology={topology!r}: "auto", a host label per rank, or None')
    dist = torch.distributed
    if ranks_per_host is None and dist.is_available() and dist.is_initialized() and \
            dist.get_world_size() == world:
        if not hasattr(dataset, "spec"):
            raise ValueError('topology="auto" over a process group needs a CXLDataset (its '
                             "pool's host_id); give topology=[host per rank] otherwise")
        pool = _core.Pool(dataset.spec, readonly=True)
        try:
            mine = [int(pool.stat()["host_id"]), host_capability(dataset)]
        finally:
            pool.close()
        everyone: list[Any] = [None] * world
        dist.all_gather_object(everyone, mine)
        return [e[0] for e in everyone], [int(e[1]) for e in everyone]
    if ranks_per_host is None:
        env = os.environ.get("LOCAL_WORLD_SIZE")
        if env is None:
            raise ValueError('topology="auto" needs a process group, LOCAL_WORLD_SIZE or '
                             "ranks_per_host to know which ranks share a host")
        ranks_per_host = int(env)
    k = operator.index(ranks_per_host)
    if k < 1:
        raise ValueError(f"ranks_per_host must be >= 1, got {k}")
    return [r // k for r in range(world)], None


class HostsCXLSampler(CXLSamplerBase):
    """The hosts order (docs/sampling.md, "Hosts"): each epoch the blocks of
    ``shard_size`` ids are dealt to hosts in proportion to ``weights``, each
    host's blocks are read in a block order of their own (``window`` blocks
    at a time, records random inside), the hosts' streams are interleaved,
    and every step a rank takes a sample of its own host's blocks when the
    step has one for it. ``rank_hosts``: the host index (0..H-1) of every
    rank. ``keep_blocks=True`` deals the blocks once (by the seed) and
    keeps them on their hosts every epoch, each host's order still new per
    epoch: no block moves between hosts' memories after the first epoch.
    Built by DistributedCXLSampler(topology=...) and BalancedCXLSampler;
    usable alone."""

    def __init__(self, data_source_or_n: Any, weights: Sequence[Any], rank_hosts: Sequence[int],
                 seed: int = 0, *, shard_size: int, window: Optional[int] = None,
                 num_replicas: int = 1, rank: int = 0, drop_last: bool = False,
                 keep_blocks: bool = False) -> None:
        super().__init__(seed, num_replicas, rank, drop_last)
        if self._torch_seed:
            raise ValueError("the hosts order needs the same integer seed on every rank")
        self.n = _size(data_source_or_n)
        self.weights = integer_host_weights(weights, "weights")
        self.rank_hosts = [operator.index(h) for h in rank_hosts]
        if len(self.rank_hosts) != num_replicas:
            raise ValueError(f"rank_hosts: {len(self.rank_hosts)} entries for {num_replicas} "
                             "ranks")
        self.shard_size = operator.index(shard_size)
        if self.shard_size < 1:
            raise ValueError(f"shard_size must be >= 1, got {self.shard_size}")
        blocks = max(1, -(-self.n // self.shard_size))
        self.window = blocks if window is None else operator.index(window)
        self.keep_blocks = bool(keep_blocks)
        self.order = "hosts"
        self._probe()

    def _create(self, world: int, rank: int, drop_last: bool) -> "_core.Sampler":
        return _core.Sampler.create_hosts(self.weights, self.rank_hosts, n=self.n,
                                          seed=self.seed, epoch=self.epoch,
                                          shard_size=self.shard_size, window=self.window,
                                          world=world, rank=rank, drop_last=drop_last,
                                          keep=self.keep_blocks)

    def _epoch_probe(self) -> "_core.Sampler":
        s = self._probe()
        if s.state()["epoch"] != self.epoch or s.state()["seed"] != self.seed:
            self._probe_cache = None
            s = self._probe()
        return s

    def host_of(self, i: int) -> tuple[int, int]:
        """(host, index of the block in the host's share) of id i, this epoch."""
        return self._epoch_probe().host_of(int(i))

    def host_share(self, host: int) -> tuple[int, int]:
        """(samples, blocks) dealt to host this epoch."""
        return self._epoch_probe().host_share(int(host))

    def host_blocks(self, host: int) -> list[int]:
        """The blocks host reads this epoch, in the order its stream reads
        them (window by window: what its memory stages, in order)."""
        s = self._epoch_probe()
        return [s.host_block(int(host), k) for k in range(s.host_share(int(host))[1])]

    def host_reads(self, memory: Sequence[float]) -> dict:
        """This rank's reads of its next pass (the epoch, or its rest after
        a restored state) counted as local, peer and home when host h's
        memory holds the fraction memory[h] of the dataset (docs/sampling.md,
        "Local, peer and home"). Walks every draw of the pass, in C."""
        return self._core_sampler().host_reads([float(m) for m in memory])


class DistributedCXLSampler(CXLSamplerBase):
    """torch's DistributedSampler over the C orders: disjoint ranks, equal
    counts (``drop_last`` drops the tail, else the first ids are repeated as
    padding, as torch does), ``set_epoch``; world size and rank from
    torch.distributed when it is initialized.

    ``order``: "random" (default; "sequential" when shuffle=False), "block"
    (with ``shard_size`` and ``window``), or another CXL sampler whose order
    is then split over the ranks (a BlendedCXLSampler, a
    CurriculumCXLSampler, a RandomCXLSampler in block mode); the seed is
    then that sampler's.
    A state saved under one world size restores under another.

    ``topology``: the hosts order (docs/sampling.md, "Hosts"). "auto" takes
    each rank's host from its pool's ``host_id`` and each host's weight from
    its memory capacity times bandwidth (``host_capability``), gathered over
    the process group; without one, hosts from ``ranks_per_host`` or
    LOCAL_WORLD_SIZE (host = rank // k) and equal weights. A list gives a
    host label per rank. ``host_weights`` (one per host, in the order hosts
    first appear among the ranks) overrides the weights; ``ranks_per_host``
    the layout. Blocks: ``shard_size`` ids (default: the dataset's records
    per shard), ``window`` blocks per host window ("auto": as
    window="auto", half the staging budget; the default for a dataset on
    a pool of tiers; else the default is all of a host's blocks; a
    CXLDataLoader's default budget for this order is its whole memory tier,
    and "auto" sizes by it). ``keep_blocks`` (default True here): the blocks
    stay on their hosts every epoch, each host's in a new order, so its
    memory is a cache across epochs; False deals them again each epoch (see
    HostsCXLSampler), and a host then stages its new share from the home
    (docs/remote.md, "Three emulated hosts").
    """

    def __init__(self, dataset: Any, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, *, order: Union[str, CXLSamplerBase] = "random",
                 shard_size: Optional[int] = None, window: Union[int, str, None] = None,
                 memory_budget: Union[int, str, None] = None, runs: Union[str, bool, int] = "auto",
                 ramp: Optional[bool] = None, topology: Any = None,
                 host_weights: Optional[Sequence[Any]] = None,
                 ranks_per_host: Optional[int] = None,
                 keep_blocks: Optional[bool] = None) -> None:
        world, r = _dist_world_rank(num_replicas, rank)
        if topology is not None:
            if isinstance(order, CXLSamplerBase) or order not in ("random", "block", "hosts"):
                raise ValueError("topology= builds the hosts order; it does not take order="
                                 f"{order!r}")
            if not shuffle:
                raise ValueError("topology= shuffles (the hosts order); shuffle=False is "
                                 "the sequential order")
            base = _hosts_base(dataset, seed, world, topology, host_weights, ranks_per_host,
                               shard_size, window, memory_budget, runs,
                               True if keep_blocks is None else bool(keep_blocks))
            super().__init__(seed, world, r, drop_last)
            self.base = base
            self.shuffle = shuffle
            self.dataset = dataset
            self._probe()
            return
        if host_weights is not None or ranks_per_host is not None or keep_blocks is not None:
            raise ValueError("host_weights, ranks_per_host and keep_blocks go with topology=")
        if isinstance(order, CXLSamplerBase):
            base = order
            if base._torch_seed:
                raise ValueError("a distributed order needs the same seed on every rank: "
                                 "give the base sampler an integer seed")
            seed = base.seed
        else:
            if not shuffle:
                order = "sequential"
            if window == "auto" and order == "random":
                order = "block"
            base = RandomCXLSampler(dataset, seed, shard_size=shard_size, window=window,
                                    order=order, memory_budget=memory_budget, runs=runs,
                                    ramp=ramp)
            if window == "auto":
                # every rank cuts rank 0's blocks: hosts of other pools (or
                # budgets) would choose others, and ranks of different
                # orders would read overlapping samples
                block = _rank0_choice([base.shard_size, base.window, int(base.ramp)], world)
                if block != [base.shard_size, base.window, int(base.ramp)]:
                    base = RandomCXLSampler(dataset, seed, shard_size=block[0], window=block[1],
                                            order="block", ramp=bool(block[2]))
        super().__init__(seed, world, r, drop_last)
        self.base = base
        self.shuffle = shuffle
        self.dataset = dataset
        self._probe()

    def _create(self, world: int, rank: int, drop_last: bool) -> "_core.Sampler":
        self.base.seed, self.base.epoch = self.seed, self.epoch
        return self.base._create(world, rank, drop_last)

    def host_of(self, i: int) -> tuple[int, int]:
        """The hosts order: (host, index of the block in the host's share)
        of id i this epoch."""
        if not isinstance(self.base, HostsCXLSampler):
            raise ValueError("host_of is for topology= (the hosts order)")
        self.base.seed, self.base.epoch = self.seed, self.epoch
        return self.base.host_of(i)

    def host_reads(self, memory: Sequence[float]) -> dict:
        """The hosts order: this rank's reads of its next pass counted as
        local, peer and home (see HostsCXLSampler.host_reads)."""
        if not isinstance(self.base, HostsCXLSampler):
            raise ValueError("host_reads is for topology= (the hosts order)")
        return self._core_sampler().host_reads([float(m) for m in memory])

    @property
    def num_samples(self) -> int:
        """Per-rank count of a whole epoch (torch's attribute)."""
        L, w = self.epoch_len(), self.num_replicas
        return L // w if self.drop_last else -(-L // w)

    @property
    def total_size(self) -> int:
        """num_samples x num_replicas (torch's attribute)."""
        return self.num_samples * self.num_replicas


def _hosts_base(dataset: Any, seed: int, world: int, topology: Any,
                host_weights: Optional[Sequence[Any]], ranks_per_host: Optional[int],
                shard_size: Optional[int], window: Union[int, str, None],
                memory_budget: Union[int, str, None], runs: Union[str, bool, int],
                keep_blocks: bool = False) -> HostsCXLSampler:
    """The HostsCXLSampler a DistributedCXLSampler(topology=...) splits."""
    labels, caps = _host_layout(dataset, topology, world, ranks_per_host)
    hosts: dict[Any, int] = {}
    for lab in labels:
        hosts.setdefault(lab, len(hosts))
    rank_hosts = [hosts[lab] for lab in labels]
    if host_weights is not None:
        weights = list(host_weights)
        if len(weights) != len(hosts):
            raise ValueError(f"host_weights: {len(weights)} weights for {len(hosts)} hosts")
    elif caps is not None:
        weights = [0] * len(hosts)
        for r, h in enumerate(rank_hosts):
            if not weights[h]:
                weights[h] = caps[r]   # the host's first rank's figure
    else:
        weights = [1] * len(hosts)
    if window is None and getattr(dataset, "tiered", False):
        # a host's share in one window (a full shuffle within it) outgrows
        # a loader's budget: every miss stages a shard again
        # (docs/remote.md, "Three emulated hosts")
        window = "auto"
    if window == "auto":
        if memory_budget is None and getattr(dataset, "tiered", False):
            memory_budget = staging_budget(dataset, None, whole=True)  # the loader's default
        shard_size, window = auto_window(dataset, shard_size, memory_budget, runs)
        block = _rank0_choice([shard_size, window], world)
        shard_size, window = block[0], block[1]
    elif isinstance(window, str):
        raise ValueError(f"window={window!r}: a number of blocks or \"auto\"")
    if not shard_size:
        per = dataset.shards()["per_shard"] if hasattr(dataset, "shards") else 0
        if not per:
            raise ValueError("topology= needs shard_size (ids per block): the dataset's shards "
                             "do not give one")
        shard_size = per
    return HostsCXLSampler(dataset, weights, rank_hosts, seed, shard_size=int(shard_size),
                           window=None if window is None else int(window),
                           num_replicas=world, keep_blocks=keep_blocks)


class BalancedCXLSampler(DistributedCXLSampler):
    """The hosts order weighted by measured per-host throughput: ``rates``
    holds one figure per host (samples/s or bytes/s a host's memory serves,
    in the order hosts first appear among the ranks), and each epoch deals
    the blocks in proportion to it, so a host that serves faster holds and
    serves more of them. Every rank still draws its equal share; state and
    resume are those of every sampler here (a state restores only under the
    same rates: they are part of the order's fingerprint)."""

    def __init__(self, dataset: Any, rates: Sequence[Any], num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, seed: int = 0, drop_last: bool = False, *,
                 topology: Any = "auto", ranks_per_host: Optional[int] = None,
                 shard_size: Optional[int] = None, window: Union[int, str, None] = None,
                 memory_budget: Union[int, str, None] = None,
                 runs: Union[str, bool, int] = "auto",
                 keep_blocks: Optional[bool] = None) -> None:
        self.rates = list(rates)
        integer_host_weights(self.rates, "rates")
        super().__init__(dataset, num_replicas, rank, True, seed, drop_last,
                         topology=topology, host_weights=self.rates,
                         ranks_per_host=ranks_per_host, shard_size=shard_size, window=window,
                         memory_budget=memory_budget, runs=runs, keep_blocks=keep_blocks)


# ---- blending -----------------------------------------------------------------

def integer_weights(weights: Sequence[Any]) -> list[int]:
    """Weights as integers with the same proportions: integers as given;
    floats as the decimals they print as (0.3 -> 3/10), scaled to a common
    denominator and reduced by the gcd. When that exceeds the blend period
    limit (2^24), the proportions are rounded to multiples of 2^-20."""
    if not weights:
        raise ValueError("no weights")
    if any(float(w) < 0 or not math.isfinite(float(w)) for w in weights):
        raise ValueError("weights must be finite and >= 0")
    if all(isinstance(w, (int, np.integer)) for w in weights):
        q = [int(w) for w in weights]
    else:
        fr = [Fraction(repr(float(w))) if isinstance(w, (float, np.floating)) else Fraction(w)
              for w in weights]
        den = math.lcm(*(f.denominator for f in fr))
        q = [int(f * den) for f in fr]
    g = math.gcd(*q)
    if g == 0:
        raise ValueError("at least one weight must be > 0")
    q = [x // g for x in q]
    if sum(q) > _MAX_PERIOD:
        total = sum(q)
        q = [max(1, round(x * (1 << 20) / total)) if x else 0 for x in q]
        g = math.gcd(*q)
        q = [x // g for x in q]
    return q


class BlendedCXLDataset(torch.utils.data.Dataset):
    """Several datasets laid end to end: global id = offset of its source +
    id inside the source (the id space of BlendedCXLSampler)."""

    def __init__(self, datasets: Sequence[Any]) -> None:
        self.datasets = list(datasets)
        if not self.datasets:
            raise ValueError("no datasets")
        self.sizes = [len(d) for d in self.datasets]
        self.offsets = [0]
        for s in self.sizes:
            self.offsets.append(self.offsets[-1] + s)

    def __len__(self) -> int:
        return self.offsets[-1]

    def locate(self, i: int) -> tuple[int, int]:
        """(source, id inside the source) of global id i."""
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"id {i} out of range for {len(self)} samples")
        src = bisect.bisect_right(self.offsets, i) - 1
        return src, i - self.offsets[src]

    def __getitem__(self, i: int) -> Any:
        src, inner = self.locate(i)
        return self.datasets[src][inner]


class BlendedCXLSampler(CXLSamplerBase):
    """Weighted blend of several datasets with exact proportions: after any
    prefix of k samples each source's count is within 1 of k * w_i / sum(w)
    (deterministic, like Megatron's BlendedDataset but exact). Ids are those
    of a BlendedCXLDataset over the same datasets. Each source is read in a
    fresh random order per pass (shuffle=True) or in storage order.

    num_samples: epoch length (default: the sum of the source sizes).
    """

    def __init__(self, dataset_or_sizes: Any, weights: Sequence[Any], *,
                 num_samples: Optional[int] = None, seed: int = 0, shuffle: bool = True,
                 num_replicas: int = 1, rank: int = 0, drop_last: bool = False) -> None:
        super().__init__(seed, num_replicas, rank, drop_last)
        if isinstance(dataset_or_sizes, BlendedCXLDataset):
            self.sizes = list(dataset_or_sizes.sizes)
        else:
            self.sizes = [_size(x) for x in dataset_or_sizes]
        if len(self.sizes) != len(weights):
            raise ValueError(f"{len(self.sizes)} sources but {len(weights)} weights")
        self.weights = integer_weights(weights)
        self.num_samples = int(num_samples or 0)
        self.shuffle = shuffle
        self._probe()

    def _create(self, world: int, rank: int, drop_last: bool) -> "_core.Sampler":
        return _core.Sampler.create_blend(self.sizes, self.weights, n=self.num_samples,
                                          seed=self.seed, epoch=self.epoch, world=world,
                                          rank=rank, drop_last=drop_last, shuffle=self.shuffle)

    def source(self, i: int) -> tuple[int, int]:
        """(source, id inside the source) of global id i."""
        return self._probe().source(int(i))


# ---- curriculum ---------------------------------------------------------------

DIFFICULTY_SUFFIX = ".difficulty"


def write_difficulty(pool: Any, name: str, values: Any, tmpdir: Optional[str] = None) -> str:
    """Stores per-sample difficulty for dataset `name` as the sibling dataset
    ``<name>.difficulty`` of the same pool (float64 records, one per sample),
    ingested from a .npy. Returns the sibling's name."""
    import os
    import tempfile
    v = np.ascontiguousarray(np.asarray(values, dtype=np.float64).reshape(-1))
    with tempfile.TemporaryDirectory(dir=tmpdir) as d:
        path = os.path.join(d, "difficulty.npy")
        np.save(path, v)
        pool.ingest(name + DIFFICULTY_SUFFIX, path, progress=False)
    return name + DIFFICULTY_SUFFIX


class CurriculumCXLSampler(CXLSamplerBase):
    """Samples released from easiest to hardest by a pacing schedule.

    Difficulty comes from, in this order: ``difficulty`` (an array, one value
    per sample), ``group`` (integer stage per sample, ascending = harder), a
    scalar ``field`` of a CXLDataset's own records, or the sibling dataset
    ``<name>.difficulty`` of the CXLDataset's pool (see write_difficulty).
    Samples are ranked by (value, id); equal values are released together.

    pacing g(t), t = progress in [0, 1] over ``total`` positions (default one
    epoch): "linear" g0 + (1-g0) t; "root" sqrt(g0^2 + (1-g0^2) t); "step"
    g0 + (1-g0) floor(steps t)/steps; g0 = ``start``. At t the ceil(g n)
    easiest samples are released and drawn uniformly (distinct while the
    released set holds), so easy samples repeat early in an epoch.
    """

    def __init__(self, dataset: Any = None, difficulty: Any = None, *, group: Any = None,
                 field: Optional[str] = None, pacing: str = "linear", start: float = 0.1,
                 steps: int = 4, total: int = 0, num_samples: Optional[int] = None,
                 seed: int = 0, num_replicas: int = 1, rank: int = 0,
                 drop_last: bool = False) -> None:
        super().__init__(seed, num_replicas, rank, drop_last)
        self._src: dict[str, Any] = {}
        self._store_ds: Any = None  # a CXLDataset holding the values (pickles by reference)
        self._field: Optional[str] = None
        if difficulty is not None:
            self._src["difficulty"] = np.ascontiguousarray(difficulty, dtype=np.float64)
        elif group is not None:
            self._src["group"] = np.ascontiguousarray(group, dtype=np.int64)
        elif dataset is not None and hasattr(dataset, "store"):
            if field is not None:
                self._store_ds, self._field = dataset, field
            else:
                from .dataset import CXLDataset
                self._store_ds = CXLDataset(dataset.spec, dataset.name + DIFFICULTY_SUFFIX)
                self._field = None
        else:
            raise ValueError("give difficulty=, group=, or a CXLDataset with a scalar field= "
                             "or a '<name>.difficulty' sibling dataset")
        self.pacing, self.start, self.steps, self.total = pacing, float(start), int(steps), \
            int(total)
        self.num_samples = int(num_samples or 0)
        n = self._probe().id_bound
        if dataset is not None and not isinstance(dataset, int) and len(dataset) != n:
            raise ValueError(f"{n} difficulty values for a dataset of {len(dataset)} samples")

    def _create(self, world: int, rank: int, drop_last: bool) -> "_core.Sampler":
        src = dict(self._src)
        if self._store_ds is not None:
            src = {"store": self._store_ds.store, "field": self._field}
        return _core.Sampler.create_curriculum(
            **src, pacing=self.pacing, start=self.start, steps=self.steps,
            total=self.total, n=self.num_samples, seed=self.seed, epoch=self.epoch,
            world=world, rank=rank, drop_last=drop_last)

    def released(self, position: int) -> int:
        """Samples released at position `position` of the current epoch."""
        s = self._probe()
        if s.state()["epoch"] != self.epoch:  # the pace runs over epochs too
            self._probe_cache = None
            s = self._probe()
        return s.released(int(position))


__all__ = ["CXLSamplerBase", "RandomCXLSampler", "DistributedCXLSampler", "BlendedCXLSampler",
           "BalancedCXLSampler", "HostsCXLSampler", "integer_host_weights", "host_capability",
           "BlendedCXLDataset", "CurriculumCXLSampler", "integer_weights", "write_difficulty"]
