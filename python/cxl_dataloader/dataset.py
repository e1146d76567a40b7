"""CXLDataset: a map-style torch Dataset over one dataset of a pool."""
from __future__ import annotations

import operator
import os
import warnings
from typing import Any, Optional, Union

import torch

from . import _core
from .pool import CXLMemoryPool, make_spec


class CXLDataset(torch.utils.data.Dataset):
    """``ds[i]`` is a tensor viewing record i in pool memory (no copy).

    Tensors are read-only views: the dataset attaches its pool read-only, so
    the pages are mapped without write permission and a write through a
    tensor faults instead of corrupting the pool. Clone a tensor before
    modifying it in place. A tensor keeps the mapping alive after the dataset
    and pool objects are gone.

    Pickling sends a reference (pool spec and dataset name), not data: each
    DataLoader worker attaches the same pool.

    A dataset ingested by this version is on 2 MiB pages already (see
    ``pages()``). ``hugepages=True`` moves the records of one that is not
    (ingested with ``hugepages=False``, or by an older version) onto 2 MiB
    pages once (for every process attached to the pool): random gathers from
    a shm or numa pool then pay no TLB miss per record. Best effort, see
    ``_collapse``.
    """

    def __init__(self, pool: Union[CXLMemoryPool, str], name: str, *,
                 hugepages: bool = False) -> None:
        self.spec = pool.spec if isinstance(pool, CXLMemoryPool) else make_spec(pool)
        self.name = name
        self.hugepages = hugepages
        self._attach()

    def _attach(self) -> None:
        pool = _core.Pool(self.spec, readonly=True)
        try:
            self._store = _core.Store(pool, self.name)
        finally:
            pool.close()  # the store keeps the mapping
        self._len = len(self._store)
        self.schema = self._store.schema()
        if self.hugepages:
            self._collapse()

    def _collapse(self) -> None:
        """Records onto 2 MiB pages, so a random gather pays no TLB miss per
        record (the pool object's pages change: every attached process gains,
        and later calls find the work done). Best effort: it costs one copy
        of the dataset and needs free 2 MiB pages; when the kernel or the
        system cannot, the dataset stays on small pages and a warning says
        why."""
        try:
            self._store.hugepages()
        except _core.CXLError as e:
            warnings.warn(f"{self!r}: records stay on 4 KiB pages: {e}",
                          RuntimeWarning, stacklevel=3)

    @classmethod
    def ingest(cls, pool: CXLMemoryPool, name: str, source: Union[str, os.PathLike], *,
               format: str = "auto", record_size: Union[int, str] = 0,
               dtype: Optional[str] = None, progress: Optional[bool] = None,
               hugepages: bool = True) -> "CXLDataset":
        """Imports source into pool as dataset name (CXLMemoryPool.ingest) and
        opens it; hugepages: as there (the records land on 2 MiB pages while
        they are written, no copy after)."""
        pool.ingest(name, source, format=format, record_size=record_size, dtype=dtype,
                    progress=progress, hugepages=hugepages)
        return cls(pool, name)

    def pages(self) -> dict:
        """{"bytes": the dataset's shards in the pool, "huge_bytes": the part
        of them on 2 MiB pages}, as every process mapping the pool sees it.
        Only whole 2 MiB pieces can be on 2 MiB pages: each shard's < 2 MiB
        ends count as 4 KiB."""
        return self._store.pages()

    def __len__(self) -> int:
        """Number of records."""
        return self._len

    def __getitem__(self, i: int) -> Any:
        """Record i (negative counts from the end) as a tensor, or a dict of
        tensors for several fields. i is an integer (int, numpy or 0-d torch
        integer): a float or a string is an IndexError, as in numpy, never
        truncated."""
        try:
            i = operator.index(i)
        except TypeError:
            raise IndexError(f"only integers are valid indices of a CXLDataset, got "
                             f"{type(i).__name__} {i!r}") from None
        rec = self._store.get(i)
        if isinstance(rec, dict):
            return {k: torch.from_dlpack(v) for k, v in rec.items()}
        return torch.from_dlpack(rec)

    @property
    def store(self) -> "_core.Store":
        """The extension's open dataset (what the gather engine reads)."""
        return self._store

    def documents(self) -> Optional[torch.Tensor]:
        """Document start ids (Megatron imports), n_docs + 1 entries."""
        d = self._store.docs()
        return None if d is None else torch.from_dlpack(d)

    def info(self) -> dict:
        """Catalog facts, with the keys of ``cxlpool ls --json``."""
        return self._store.info()

    def __getstate__(self) -> dict:
        return {"spec": self.spec, "name": self.name}

    def __setstate__(self, state: dict) -> None:
        self.spec = state["spec"]
        self.name = state["name"]
        self.hugepages = False  # the pool's pages were changed by the sender
        self._attach()

    def __repr__(self) -> str:
        return f"CXLDataset({self.spec!r}, {self.name!r}, {self._len} records)"
