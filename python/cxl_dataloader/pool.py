"""CXLMemoryPool: create or attach a pool by name and backend."""
from __future__ import annotations

import os
import sys
from typing import Any, Callable, Optional

from . import _core

_BACKENDS = ("shm", "file", "numa", "devdax")


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

    ``CXLMemoryPool("train", create=True, size=8 << 30)`` makes an 8 GiB
    pool in /dev/shm (emulated CXL); ``CXLMemoryPool("train")`` attaches it.
    Datasets opened from the pool stay usable after ``close()``.
    """

    def __init__(self, name: str, backend: str = "shm", *, create: bool = False,
                 size: int = 0, mode: int = 0o600, readonly: bool = False,
                 numa_node: Optional[int] = None, exist_ok: bool = False) -> None:
        self.spec = make_spec(name, backend, numa_node)
        self.readonly = readonly
        if create:
            try:
                self._pool = _core.Pool(self.spec, create=True, size=int(size), mode=mode)
            except _core.CXLError as e:
                if not (exist_ok and e.args[0] == _core.EEXIST):
                    raise
                self._pool = _core.Pool(self.spec, readonly=readonly)
        else:
            self._pool = _core.Pool(self.spec, readonly=readonly)

    # context manager ---------------------------------------------------
    def __enter__(self) -> "CXLMemoryPool":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._pool.close()

    @property
    def closed(self) -> bool:
        return bool(self._pool.closed)

    # catalog ------------------------------------------------------------
    def datasets(self) -> list[dict]:
        return self._pool.list()

    def __contains__(self, name: str) -> bool:
        return any(d["name"] == name for d in self._pool.list())

    def stat(self) -> dict:
        return self._pool.stat()

    def verify(self) -> list[str]:
        return self._pool.verify()

    def remove(self, name: str) -> None:
        self._pool.remove(name)

    def ingest(self, name: str, source: Any, *, format: str = "auto",
               record_size: int = 0, dtype: Optional[str] = None,
               progress: Optional[bool] = None, **kw: Any) -> None:
        """Import source as dataset name: a raw, .npy or Megatron (.bin/.idx)
        file (the C importers), or Arrow, Parquet, WebDataset or JSONL from a
        path or fsspec URL, or a pyarrow Table / datasets.Dataset in memory
        (cxl_dataloader.ingest; its keyword arguments: columns, text_field,
        tokenizer, eod, workers, shard_bytes, storage_options). Shows a
        progress bar when stderr is a terminal (progress=None)."""
        from . import ingest as importers
        fmt = format if format != "auto" else importers.detect_format(source)
        if fmt in importers.FORMATS:
            importers.ingest(self._pool, name, source, fmt, progress=progress, **kw)
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
                               record_size=record_size, dtype=dtype, progress=cb)
        finally:
            if bar is not None:
                bar.close()

    @staticmethod
    def destroy(name: str, backend: str = "shm", numa_node: Optional[int] = None) -> None:
        _core.destroy(make_spec(name, backend, numa_node))

    def __repr__(self) -> str:
        return f"CXLMemoryPool({self.spec!r}{', closed' if self.closed else ''})"
