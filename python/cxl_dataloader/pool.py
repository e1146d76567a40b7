"""CXLMemoryPool: create or attach a pool by name and backend."""
from __future__ import annotations

import operator
import os
import sys
import time
import warnings
from typing import Any, Callable, Optional, Union

from . import _core

_BACKENDS = ("shm", "file", "numa", "devdax")

# The placement policies of a pool of tiers (a dataset's tier_policy, the
# pool-wide default for its datasets, and a loader's memory_policy).
TIER_POLICIES = ("lookahead", "lru", "streaming", "hot_first", "full_prefetch")


def tier_policy_check(name: str, policy: Optional[str]) -> Optional[str]:
    """policy, or ValueError naming argument name and the policies there are
    (cxlp_policy_parse, the names the C library and the CLI take)."""
    if policy is not None and (not isinstance(policy, str) or _core.policy_parse(policy) <= 0):
        raise ValueError(f"{name}={policy!r}: expected None or one of {', '.join(TIER_POLICIES)}")
    return policy


def default_pool_name() -> str:
    """The pool a CXLMemoryPool without a name is: $CXLP_POOL, else "default"
    (every process of a job that runs the same line shares it)."""
    return os.environ.get("CXLP_POOL") or "default"


def node_exists(node: int) -> bool:
    """Whether this machine has NUMA node `node` (sysfs)."""
    return os.path.isdir(f"/sys/devices/system/node/node{node}")


def numa_nodes_check(name: str, nodes: Any) -> list[int]:
    """A list of distinct NUMA node numbers that exist on this machine, or a
    ValueError (TypeError for a non-list) naming the argument and the node."""
    if isinstance(nodes, (str, bytes)) or not hasattr(nodes, "__iter__"):
        raise TypeError(f"{name} should be a list of NUMA node numbers, got {nodes!r}")
    out = []
    for n in nodes:
        if isinstance(n, bool) or not hasattr(n, "__index__") or operator.index(n) < 0:
            raise ValueError(f"{name}={list(nodes)!r}: {n!r} is not a NUMA node number")
        n = operator.index(n)
        if not node_exists(n):
            have = sorted(int(d[4:]) for d in os.listdir("/sys/devices/system/node")
                          if d.startswith("node") and d[4:].isdigit())
            raise ValueError(f"{name}={list(nodes)!r}: NUMA node {n} does not exist on this "
                             f"machine (nodes: {', '.join(map(str, have)) or 'none'})")
        if n in out:
            raise ValueError(f"{name}={list(nodes)!r}: node {n} named twice")
        out.append(n)
    if not out:
        raise ValueError(f"{name}=[]: name at least one NUMA node")
    return out


def parse_size(name: str, value: Union[int, str]) -> int:
    """Bytes from an int, or from text as the CLI takes it ("512G", "1.5GiB",
    "1TB": cxlp_size_parse, the one parser both use). Never wraps: a
    negative value is a ValueError, one of 2**64 or more an OverflowError,
    a float or a bool a TypeError."""
    if isinstance(value, str):
        try:
            return _core.size_parse(value)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise TypeError(f"{name} should be an int or a size string like '512G', got "
                        f"{type(value).__name__} {value!r}")
    v = operator.index(value)
    if v < 0:
        raise ValueError(f"{name} should be >= 0, got {v}")
    if v >= 1 << 64:
        raise OverflowError(f"{name}={v} does not fit in 64 bits")
    return v


def make_spec(name: str, backend: str = "shm", numa_node: Optional[int] = None,
              numa_nodes: Optional[list[int]] = None) -> str:
    """Pool spec string for (name, backend): "shm:NAME", "file:PATH",
    "numa:NODE:NAME", "devdax:/dev/daxX.Y"; with numa_nodes (a checked
    list), "numa:interleave=N,M,...:NAME". A name that already holds a colon
    is taken as a full spec."""
    if ":" in name:
        if numa_nodes is not None:
            raise ValueError(f"numa_nodes with a full pool spec {name!r}: give a pool name")
        return name
    if backend not in _BACKENDS:
        raise ValueError(f"backend {backend!r}: expected one of {', '.join(_BACKENDS)}")
    if numa_nodes is not None:
        if backend not in ("shm", "numa") or numa_node is not None:
            raise ValueError(f"numa_nodes={numa_nodes!r} makes a numa pool interleaved over "
                             f"those nodes: not with backend={backend!r}"
                             f"{', numa_node' if numa_node is not None else ''}")
        return f"numa:interleave={','.join(map(str, numa_nodes))}:{name}"
    if backend == "numa":
        if numa_node is None:
            raise ValueError("backend 'numa' needs numa_node")
        return f"numa:{int(numa_node)}:{name}"
    return f"{backend}:{name}"


def migrate_report(pool: Any, name: str, tier: Union[str, int], threads: int) -> dict:
    """_core.Pool pool's migrate of dataset name to tier, reported as
    ``cxlpool migrate --json`` reports it."""
    return {"dataset": name, "tier": str(tier),
            **pool.migrate(name, str(tier), threads=int(threads))}


def _progress_bar(progress: Optional[bool], desc: str,
                  unit: str) -> tuple[Any, Optional[Callable[[int, int], None]]]:
    """A tqdm bar and the (done, total) callback that moves it, when asked
    (progress=True) or when stderr is a terminal (progress=None)."""
    if not (progress or (progress is None and sys.stderr.isatty())):
        return None, None
    from tqdm import tqdm
    bar = tqdm(total=0, unit=unit, unit_scale=unit == "B", desc=desc)

    def cb(done: int, total: int) -> None:
        if bar.total != total:
            bar.total = total
        bar.update(done - bar.n)
    return bar, cb


class CXLMemoryPool:
    """A pool attached to this process.

    ``CXLMemoryPool("train", create=True, size="8G")`` makes an 8 GiB pool in
    /dev/shm (emulated CXL); ``CXLMemoryPool("train")`` attaches it. ``name``
    is a pool name, or a full spec with a colon (``shm:NAME``,
    ``file:PATH``, ``numa:NODE:NAME``, ``devdax:/dev/daxX.Y``). ``size`` is
    bytes, or text as the CLI takes it ("512G", "1.5GiB", "1TB").
    ``exist_ok=True`` attaches a pool that exists already, and warns when its
    size is not the one asked. Datasets opened from the pool stay usable
    after ``close()``. Failures raise CXLError subclasses (FileNotFoundError,
    FileExistsError, PermissionError, ...) whose str() names the file.

    ``tiers=["dram=shm:1G", "cxl=numa:1:8G", "nvme=file:/data/train.tier:2T"]``
    makes a pool of tiers, fastest first (the strings of ``cxlpool create
    --tier``; docs/tiers.md): datasets are ingested into the nvme tier (their
    home) and read from copies in the memory tiers, which ``migrate`` and the
    loader's ``memory_policy`` place (``meta_bytes``: room for the shard
    tables, bytes or text).

    The design's keywords (docs/python.md, "The design's constructor"):
    ``pool_size=S`` is ``create=True, size=S, exist_ok=True`` (every rank
    runs the same line: the first creates, the others attach);
    ``numa_nodes=[0, 1]`` makes a numa pool whose pages interleave over those
    nodes (mbind MPOL_INTERLEAVE, spec ``numa:interleave=0,1:NAME``; a node
    that does not exist is a ValueError naming it); ``tier_policy`` is the
    default tier_policy of the datasets opened with ``cxl_pool=`` this pool.
    Without a name the pool is ``$CXLP_POOL``, else ``"default"``, which
    every nameless pool of the host shares (a UserWarning says so, naming
    its path).
    """

    def __init__(self, name: Optional[str] = None, backend: str = "shm", *,
                 create: bool = False, size: Union[int, str] = 0, mode: int = 0o600,
                 readonly: bool = False, numa_node: Optional[int] = None,
                 exist_ok: bool = False, tiers: Optional[list[str]] = None,
                 meta_bytes: Union[int, str] = 0, pool_size: Union[int, str, None] = None,
                 numa_nodes: Optional[list[int]] = None,
                 tier_policy: Optional[str] = None) -> None:
        if pool_size is not None:  # the design's keyword: create, or attach the existing one
            if size:
                raise TypeError("CXLMemoryPool: give the size once (size or pool_size)")
            size, create, exist_ok = pool_size, True, True
        nodes = None if numa_nodes is None else numa_nodes_check("numa_nodes", numa_nodes)
        self.tier_policy = tier_policy_check("tier_policy", tier_policy)
        self.spec = make_spec(default_pool_name() if name is None else name, backend, numa_node,
                              nodes)
        self.readonly = readonly
        if tiers is not None and not create:
            raise ValueError("tiers= is for create=True (an existing pool keeps its tiers)")
        made = False
        if create:
            nbytes = parse_size("size", size)
            try:
                self._pool = _core.Pool(self.spec, create=True, size=nbytes, mode=mode,
                                        tiers=list(tiers) if tiers is not None else None,
                                        meta_bytes=parse_size("meta_bytes", meta_bytes))
                made = True
            except _core.CXLExistsError:
                if not exist_ok:
                    raise
                self._pool = _core.Pool(self.spec, readonly=readonly)
                have = self._pool.stat()["size"]
                if tiers is None and have != nbytes:
                    warnings.warn(f"{self.spec}: exists with {have} bytes, not the {nbytes} "
                                  f"asked (size={size!r}); attached as it is", UserWarning,
                                  stacklevel=2)
        else:
            self._pool = _core.Pool(self.spec, readonly=readonly)
        if name is None and not os.environ.get("CXLP_POOL"):
            # a pool every nameless CXLMemoryPool of the host shares: said,
            # so that two jobs do not meet in it unawares
            path = os.path.abspath(self._pool.stat()["path"])
            warnings.warn(f"CXLMemoryPool without a name and without $CXLP_POOL: "
                          f"{'created' if made else 'attached'} the pool named 'default' "
                          f"({path}), which every CXLMemoryPool without a name on this host "
                          f"shares; give a name (or set CXLP_POOL) to keep jobs apart",
                          UserWarning, stacklevel=2)

    # context manager ---------------------------------------------------
    def __enter__(self) -> "CXLMemoryPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Detaches this handle (datasets opened from it stay usable)."""
        self._pool.close()

    @property
    def closed(self) -> bool:
        """True after close()."""
        return bool(self._pool.closed)

    # catalog ------------------------------------------------------------
    def datasets(self) -> list[dict]:
        """The datasets of the catalog, one dict each with the keys of
        ``cxlpool ls --json``: name, version, records, data_bytes,
        stored_bytes, shards, fixed, record_size, docs, created_unix."""
        return self._pool.list()

    def __contains__(self, name: str) -> bool:
        return any(d["name"] == name for d in self._pool.list())

    def stat(self) -> dict:
        """Space (size, used_bytes, free_bytes, largest_free...), leases,
        media and whether it is emulated, as a dict; numa_nodes (the nodes
        its memory is on, e.g. "0-3"), numa_interleave, and near_node (the
        node with CPUs nearest that memory, where numa_bind=True runs a
        loader's threads), and host_id (this host's id, docs/hosts.md)."""
        return self._pool.stat()

    # verify, rewrite and migrate return what they did as a dict with the
    # keys and values of `cxlpool verify|rewrite|migrate --json` (one
    # convention: the report a script reads is the same from Python and
    # from the CLI); a failure raises.
    def verify(self) -> dict:
        """Checks the structure and every checksum: {"pool": spec,
        "checked": one line per item checked, "ok": True, "items": how
        many}, as ``cxlpool verify --json``. CXLCorruptError (naming
        dataset, shard and offset) on the first failure."""
        lines = self._pool.verify()
        return {"pool": self.spec, "checked": lines, "ok": True, "items": len(lines)}

    def remove(self, name: str) -> None:
        """Removes dataset name (one atomic catalog flip; readers that have it
        open keep reading it). CXLDatasetNotFoundError (a KeyError) when it
        is not there."""
        self._pool.remove(name)

    def tiers(self) -> list[dict]:
        """The pool's tiers, fastest first: kind, media, capacity, used,
        copies held, and the counters every process adds to (hits, misses,
        bytes_in, bytes_out, stall_ns, fetches, evictions)."""
        return self._pool.tiers()

    def migrate(self, name: str, tier: Union[str, int], *, threads: int = 1) -> dict:
        """Moves dataset name to tier ("dram", "cxl", "nvme" or an index)
        while readers keep reading (see cxlp_migrate); returns what moved,
        as ``cxlpool migrate --json``: dataset, tier, shards, copied,
        already, bytes_copied, direct_bytes, bytes_dropped, seconds."""
        return migrate_report(self._pool, name, tier, threads)

    def ingest(self, name: str, source: Any, *, format: str = "auto",
               record_size: Union[int, str] = 0, dtype: Optional[str] = None,
               progress: Optional[bool] = None, hugepages: bool = True,
               allow_empty: bool = False, shuffle: Optional[int] = None,
               **kw: Any) -> None:
        """Import source as dataset name: a raw, .npy or Megatron (.bin/.idx)
        file (the C importers; record_size, for raw: bytes, or text as the
        CLI takes it, "4K"), or Arrow, Parquet, WebDataset or JSONL from a
        path or fsspec URL, or a pyarrow Table / datasets.Dataset in memory
        (cxl_dataloader.ingest; its keyword arguments: columns, text_field,
        tokenizer, eod, workers, shard_bytes, storage_options). Shows a
        progress bar when stderr is a terminal (progress=None).
        The records land on 2 MiB pages where the pool's memory comes in
        4 KiB pages (shm, numa), at no extra cost; hugepages=False keeps
        them on 4 KiB pages (CXLDataset.pages() says what they got).
        A source of no records is refused in every format (CXLError
        EBADINPUT from the C importers, IngestError from the others) unless
        allow_empty=True, which makes an empty dataset.
        shuffle=SEED (raw and npy; an int from 0 to 2**64-1) stores the
        records in a pseudo-random order keyed by SEED: record k is input
        record P(k) (CXLDataset.source_index, .record_of_source,
        .ingest_shuffle); other formats refuse it (ValueError)."""
        from . import ingest as importers
        fmt = format if format != "auto" else importers.detect_format(source)
        if shuffle is not None and (fmt in importers.FORMATS or fmt == "megatron"):
            raise ValueError(f"shuffle: only raw and npy sources are shuffled at ingest, "
                             f"not {fmt}")
        if fmt in importers.FORMATS:
            importers.ingest(self._pool, name, source, fmt, progress=progress,
                             hugepages=hugepages, allow_empty=allow_empty, **kw)
            return
        if kw:
            raise TypeError(f"format {format!r} (raw, npy, megatron) takes no "
                            f"{', '.join(sorted(kw))}")
        bar, cb = _progress_bar(progress, f"ingest {name}", "B")
        try:
            self._pool.import_(name, os.fspath(source), format=format,
                               record_size=parse_size("record_size", record_size), dtype=dtype,
                               progress=cb, hugepages=hugepages, allow_empty=allow_empty,
                               shuffle=shuffle)
        finally:
            if bar is not None:
                bar.close()

    def rewrite(self, name: str, *, shard_bytes: Union[int, str, None] = None,
                progress: Optional[bool] = None, hugepages: bool = True) -> dict:
        """Writes dataset name again in this build's shard format (format 4:
        4 KiB block sums, what a record read in part costs;
        CXLDataset.shard_format() says what a dataset has) and puts it in
        the old one's place in one atomic catalog flip: the same records,
        schema, documents and placement policy, in shards of shard_bytes
        (default: the dataset's own; an int or text such as "64M"). Every
        old shard is verified before it is copied. Needs room for a second
        copy meanwhile (a CXLError with code CXLError.EFULL, raised before
        anything changes). A CXLDataset opened before keeps reading the old
        dataset until it is closed; one opened after reads the new. Shows a progress bar when
        stderr is a terminal (progress=None). Returns what it did, as
        ``cxlpool rewrite --json``: {"dataset", "before", "after",
        "seconds"}, before and after each {"version", "block_bytes",
        "sums_area", "shards"}."""
        sb = 0 if shard_bytes is None else parse_size("shard_bytes", shard_bytes)
        if shard_bytes is not None and sb <= 0:
            raise ValueError(f"shard_bytes: {shard_bytes!r} is not a positive size")
        before = self._shard_format(name)
        bar, cb = _progress_bar(progress, f"rewrite {name}", "shard")
        t0 = time.perf_counter()
        try:
            self._pool.rewrite(name, shard_bytes=sb, progress=cb, hugepages=hugepages)
        finally:
            if bar is not None:
                bar.close()
        secs = time.perf_counter() - t0
        return {"dataset": name, "before": before, "after": self._shard_format(name),
                "seconds": secs}

    def _shard_format(self, name: str) -> dict:
        """{"version", "block_bytes", "sums_area", "shards"} of dataset name."""
        store = _core.Store(self._pool, name)
        try:
            return {**store.format(), "shards": store.shards()["n_shards"]}
        finally:
            store.close()

    @staticmethod
    def destroy(name: str, backend: str = "shm", numa_node: Optional[int] = None) -> None:
        """Removes a pool's backing object (attached processes keep their
        mappings until they close). CXLNotFoundError when there is none."""
        _core.destroy(make_spec(name, backend, numa_node))

    def __repr__(self) -> str:
        return f"CXLMemoryPool({self.spec!r}{', closed' if self.closed else ''})"
