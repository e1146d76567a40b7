"""The design's dataset and loader names, each a thin class over the engine.

Each dataset class is a ``CXLDataset`` that takes its data where the
design's snippets do, a file or URL (or, for nested records, the records
themselves) and ``pool=``, and ingests it into the pool on first use, once
per pool (the first process ingests, the others wait and attach; later runs
find it there: ``CXLDataset(data_source=..., cxl_pool=...)``), then opens it:

- ``CXLMemmapDataset(path, pool=..., dtype=None, shape=None)``: what
  ``np.memmap`` maps, one copy in the pool: a ``.npy`` file (its own dtype
  and shape; record i is row i) or a raw file of fixed-size records
  (``dtype`` and ``shape``, the shape of one record). ``ds[i]`` is a
  zero-copy view in that shape.
- ``CXLArrowDataset(path, pool=..., columns=None)``: Arrow IPC or Parquet
  (a file, directory, glob or fsspec URL; by extension, or ``format=``).
- ``CXLWebDataset(urls, pool=..., columns=None)``: WebDataset tars.
- ``CXLNestedDataset(records, pool=..., name=...)``: records of several
  fields, some of variable length (a list of dicts, a ``pyarrow.Table``
  or a Hugging Face ``datasets.Dataset``): stored column-wise, each field
  readable alone; ``ds[i]`` a dict of zero-copy tensors.

``CXLDistributedDataLoader(dataset, batch_size, shuffle=True, seed=0,
drop_last=False, **kw)`` is a ``CXLDataLoader`` that builds its own
``DistributedCXLSampler`` (world size and rank from torch.distributed, or
``num_replicas``/``rank``): equal, disjoint shares per rank, and
``set_epoch`` on the loader reaches the sampler.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence, Union

from .dataset import CXLDataset, source_name
from .loader import CXLDataLoader
from .pool import CXLMemoryPool, default_pool_name
from .samplers import DistributedCXLSampler

Pool = Union[CXLMemoryPool, str, None]


def _pool(pool: Pool) -> Union[CXLMemoryPool, str]:
    return default_pool_name() if pool is None else pool


class CXLMemmapDataset(CXLDataset):
    """np.memmap's data in the pool: a .npy file, or a raw file of records
    of ``dtype`` in ``shape`` (one record's shape); see the module's doc."""

    def __init__(self, path: Union[str, os.PathLike], pool: Pool = None, *,
                 dtype: Any = None, shape: Optional[Sequence[int]] = None,
                 name: Optional[str] = None, **kw: Any) -> None:
        import numpy as np
        path = os.fspath(path)
        if path.endswith(".npy"):
            if dtype is not None or shape is not None:
                raise ValueError(f"{path}: a .npy file says its own dtype and shape")
            fmt, opts, self.record_shape = "npy", {}, None
        else:
            if dtype is None:
                raise ValueError(f"{path}: a raw file needs dtype= (and shape=, one record's)")
            dt = np.dtype(dtype)
            self.record_shape = tuple(int(d) for d in (shape or (1,)))
            n = int(np.prod(self.record_shape))
            if n <= 0:
                raise ValueError(f"shape={shape!r}: every dimension > 0")
            fmt, opts = "raw", {"record_size": n * dt.itemsize, "dtype": dt.name}
            # the same file read in another record layout is another dataset
            name = name or source_name(f"{path}|{dt.name}|{self.record_shape}")
        super().__init__(_pool(pool), name, data_source=path, format=fmt,
                         ingest_options=opts, **kw)

    def __getitem__(self, i: int) -> Any:
        rec = super().__getitem__(i)
        return rec if self.record_shape is None else rec.view(self.record_shape)

    def __getstate__(self) -> dict:
        return dict(super().__getstate__(), record_shape=self.record_shape)

    def __setstate__(self, state: dict) -> None:
        self.record_shape = state.get("record_shape")
        super().__setstate__(state)


class CXLArrowDataset(CXLDataset):
    """Arrow IPC or Parquet data in the pool; see the module's doc."""

    def __init__(self, path: Any, pool: Pool = None, *, columns: Optional[Sequence[str]] = None,
                 format: Optional[str] = None, name: Optional[str] = None, **kw: Any) -> None:
        from .ingest import detect_format
        fmt = format or detect_format(path, kw.get("ingest_options", {}).get("storage_options"))
        if fmt not in ("arrow", "parquet"):
            raise ValueError(f"{path!r}: not Arrow or Parquet (found {fmt or 'no known format'}; "
                             "give format='arrow' or 'parquet')")
        opts = dict(kw.pop("ingest_options", None) or {})
        if columns is not None:
            opts["columns"] = list(columns)
        super().__init__(_pool(pool), name, data_source=path, format=fmt, ingest_options=opts,
                         **kw)


class CXLWebDataset(CXLDataset):
    """WebDataset tars in the pool; see the module's doc."""

    def __init__(self, urls: Any, pool: Pool = None, *, columns: Optional[Sequence[str]] = None,
                 name: Optional[str] = None, **kw: Any) -> None:
        opts = dict(kw.pop("ingest_options", None) or {})
        if columns is not None:
            opts["columns"] = list(columns)
        super().__init__(_pool(pool), name, data_source=urls, format="webdataset",
                         ingest_options=opts, **kw)


class CXLNestedDataset(CXLDataset):
    """Records of several fields, some of variable length, in the pool; see
    the module's doc. records: a list of dicts (each field a number, a 1-D
    list or array, bytes or str), a pyarrow.Table or a datasets.Dataset.
    Records in memory have no name of their own: name= is required."""

    def __init__(self, records: Any, pool: Pool = None, *, name: str, **kw: Any) -> None:
        if not name:
            raise TypeError("CXLNestedDataset needs name=: records in memory have no name")
        if isinstance(records, (list, tuple)):
            import pyarrow as pa
            if not records or not all(isinstance(r, dict) for r in records):
                raise ValueError("CXLNestedDataset: records is a non-empty list of dicts")
            records = pa.Table.from_pylist([{k: (v.tolist() if hasattr(v, "tolist") else v)
                                             for k, v in r.items()} for r in records])
        super().__init__(_pool(pool), name, data_source=records, format="arrow", **kw)


class CXLDistributedDataLoader(CXLDataLoader):
    """A CXLDataLoader over its own DistributedCXLSampler; see the module's doc."""

    def __init__(self, dataset: CXLDataset, batch_size: int = 1, shuffle: bool = True,
                 seed: int = 0, drop_last: bool = False, *, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, **kw: Any) -> None:
        if "sampler" in kw:
            raise TypeError("CXLDistributedDataLoader builds its own DistributedCXLSampler: "
                            "give shuffle, seed, num_replicas, rank instead of sampler=")
        sampler = DistributedCXLSampler(dataset, num_replicas=num_replicas, rank=rank,
                                        shuffle=shuffle, seed=seed, drop_last=drop_last)
        super().__init__(dataset, batch_size=batch_size, sampler=sampler, drop_last=drop_last,
                         **kw)


__all__ = ["CXLMemmapDataset", "CXLArrowDataset", "CXLWebDataset", "CXLNestedDataset",
           "CXLDistributedDataLoader"]
