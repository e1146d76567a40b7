"""CXLMemoryPool: create or attach a pool by name and backend."""
from __future__ import annotations

import operator
import os
import sys
import warnings
from typing import Any, Callable, Optional, Union

from . import _core

_BACKENDS = ("shm", "file", "numa", "devdax")


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


def make_spec(name: str, backend: str = "shm", numa_node: Optional[int] = None) -> str:
    """Pool spec string for (name, backend): "shm:NAME", "file:PATH",
    "numa:NODE:NAME", "devdax:/dev/daxX.Y". A name that already holds a
    colon is taken as a full spec."""
    if ":" in name:
        return name
    if backend not in _BACKENDS:
        raise ValueError(f"backend {backend!r}: expected one of {', '.join(_BACKENDS)}")
    if backend == "numa":
        if numa_node is None:
            raise ValueError("backend 'numa' needs numa_node")
        return f"numa:{int(numa_node)}:{name}"
    return f"{backend}:{name}"


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
    """

    def __init__(self, name: str, backend: str = "shm", *, create: bool = False,
                 size: Union[int, str] = 0, mode: int = 0o600, readonly: bool = False,
                 numa_node: Optional[int] = None, exist_ok: bool = False,
                 tiers: Optional[list[str]] = None, meta_bytes: Union[int, str] = 0) -> None:
        self.spec = make_spec(name, backend, numa_node)
        self.readonly = readonly
        if tiers is not None and not create:
            raise ValueError("tiers= is for create=True (an existing pool keeps its tiers)")
        if create:
            nbytes = parse_size("size", size)
            try:
                self._pool = _core.Pool(self.spec, create=True, size=nbytes, mode=mode,
                                        tiers=list(tiers) if tiers is not None else None,
                                        meta_bytes=parse_size("meta_bytes", meta_bytes))
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
        media and whether it is emulated, as a dict."""
        return self._pool.stat()

    def verify(self) -> list[str]:
        """Checks the structure and every checksum; one line per item checked.
        CXLCorruptError (naming dataset, shard and offset) on the first
        failure."""
        return self._pool.verify()

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

    def migrate(self, name: str, tier: str, *, threads: int = 1) -> dict:
        """Moves dataset name to tier ("dram", "cxl", "nvme" or an index)
        while readers keep reading (see cxlp_migrate); returns what moved."""
        return self._pool.migrate(name, str(tier), threads=int(threads))

    def ingest(self, name: str, source: Any, *, format: str = "auto",
               record_size: Union[int, str] = 0, dtype: Optional[str] = None,
               progress: Optional[bool] = None, hugepages: bool = True, **kw: Any) -> None:
        """Import source as dataset name: a raw, .npy or Megatron (.bin/.idx)
        file (the C importers; record_size, for raw: bytes, or text as the
        CLI takes it, "4K"), or Arrow, Parquet, WebDataset or JSONL from a
        path or fsspec URL, or a pyarrow Table / datasets.Dataset in memory
        (cxl_dataloader.ingest; its keyword arguments: columns, text_field,
        tokenizer, eod, workers, shard_bytes, storage_options). Shows a
        progress bar when stderr is a terminal (progress=None).
        The records land on 2 MiB pages where the pool's memory comes in
        4 KiB pages (shm, numa), at no extra cost; hugepages=False keeps
        them on 4 KiB pages (CXLDataset.pages() says what they got)."""
        from . import ingest as importers
        fmt = format if format != "auto" else importers.detect_format(source)
        if fmt in importers.FORMATS:
            importers.ingest(self._pool, name, source, fmt, progress=progress,
                             hugepages=hugepages, **kw)
            return
        if kw:
            raise TypeError(f"format {format!r} (raw, npy, megatron) takes no "
                            f"{', '.join(sorted(kw))}")
        cb: Optional[Callable[[int, int], None]] = None
        bar = None
        if progress or (progress is None and sys.stderr.isatty()):
            from tqdm import tqdm
            bar = tqdm(total=0, unit="B", unit_scale=True, desc=f"ingest {name}")

            def cb(done: int, total: int) -> None:
                if bar.total != total:
                    bar.total = total
                bar.update(done - bar.n)
        try:
            self._pool.import_(name, os.fspath(source), format=format,
                               record_size=parse_size("record_size", record_size), dtype=dtype,
                               progress=cb, hugepages=hugepages)
        finally:
            if bar is not None:
                bar.close()

    @staticmethod
    def destroy(name: str, backend: str = "shm", numa_node: Optional[int] = None) -> None:
        """Removes a pool's backing object (attached processes keep their
        mappings until they close). CXLNotFoundError when there is none."""
        _core.destroy(make_spec(name, backend, numa_node))

    def __repr__(self) -> str:
        return f"CXLMemoryPool({self.spec!r}{', closed' if self.closed else ''})"
