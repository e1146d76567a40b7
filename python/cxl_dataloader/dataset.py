"""CXLDataset: a map-style torch Dataset over one dataset of a pool."""
from __future__ import annotations

import hashlib
import operator
import os
import re
import warnings
from typing import Any, Optional, Sequence, Union

import torch

from . import _core
from .pool import CXLMemoryPool, make_spec, migrate_report, tier_policy_check


def source_name(source: Any) -> str:
    """The dataset name a data_source gets when no name is given: the last
    part of its path (letters, digits, ., _, -) and a hash of the whole
    source string, e.g. "train.3f2a9c1b" for "s3://bucket/train"."""
    text = os.fspath(source) if isinstance(source, (str, os.PathLike)) else repr(source)
    parts = [q for q in text.split("/") if q and not any(c in q for c in "*?[")]
    stem = re.sub(r"[^A-Za-z0-9._-]", "", parts[-1] if parts else "")
    return f"{stem[:40] or 'data'}.{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def ingest_once(pool: Union[CXLMemoryPool, str], name: str, source: Any,
                format: Optional[str], options: dict) -> dict:
    """Ingests source as dataset name unless the pool has it: once per pool,
    whoever comes first; the others wait on the ingest lock and find it
    done (cxl_dataloader.ingest). Returns the importer's figures, with
    "existed": True when another process (or an earlier run) made it."""
    from . import ingest as importers
    own = not isinstance(pool, CXLMemoryPool) or pool.readonly or pool.closed
    p = _core.Pool(make_spec(pool) if isinstance(pool, str) else pool.spec) if own else pool._pool
    try:
        if any(d["name"] == name for d in p.list()):
            return {"existed": True}
        fmt = (format if format not in (None, "auto")
               else importers.detect_format(source, options.get("storage_options")))
        if fmt in importers.FORMATS:
            return importers.ingest(p, name, source, fmt, **options)
        with importers.ingest_lock(p, name):  # raw, npy, Megatron: the C importers
            if any(d["name"] == name for d in p.list()):
                return {"existed": True}
            p.import_(name, os.fspath(source), format=format or "auto", **options)
            return {"existed": False}
    finally:
        if own:
            p.close()


def runs_code(runs: Union[str, bool, int]) -> int:
    """The library's code of a ``runs`` argument (cxlp_store_stage_order):
    "auto" -1, True -2, False 0, a number of staging units itself (0: none)."""
    if isinstance(runs, str) and runs == "auto":
        return -1
    if isinstance(runs, bool):
        return -2 if runs else 0
    if isinstance(runs, int) and 0 <= runs < 1 << 30:
        return runs
    raise ValueError(f'runs={runs!r}: "auto", True, False or a number of staging units')


class CXLDataset(torch.utils.data.Dataset):
    """``ds[i]`` is a tensor viewing record i in pool memory (no copy); in a
    pool of tiers, a tensor holding a copy of the record (``tiered``).

    A dataset of several fields gives a dict by field name: each numeric or
    bytes (uint8) field a tensor viewing pool memory (a variable-length
    field 1-D), each ``str`` field a Python ``str`` (decoded, so a copy).
    ``columns=[...]`` selects the fields ``ds[i]`` returns (and the ones a
    ``CXLDataLoader`` collates by default); only those fields are read.

    Tensors are read-only views: the dataset attaches its pool read-only, so
    the pages are mapped without write permission and a write through a
    tensor faults instead of corrupting the pool. Clone a tensor before
    modifying it in place. A tensor keeps the mapping alive after the dataset
    and pool objects are gone.

    Pickling sends a reference (pool spec and dataset name), not data: each
    DataLoader worker attaches the same pool.

    ``CXLDataset(data_source=URL, cxl_pool=pool)`` ingests on first use: a
    path, glob or fsspec URL (s3://, gs://, http(s)://, hf://) of Parquet,
    Arrow, WebDataset or JSONL (``format=``, else by extension;
    ``ingest_options=`` go to the importer, e.g. tokenizer), or a raw/npy/
    Megatron file. Once per pool: the first process ingests, the others wait
    and attach; later runs find it there. The dataset's name is ``name=`` or
    ``source_name(data_source)``.

    A dataset ingested by this version is on 2 MiB pages already (see
    ``pages()``). ``hugepages=True`` moves the records of one that is not
    (ingested with ``hugepages=False``, or by an older version) onto 2 MiB
    pages once (for every process attached to the pool): random gathers from
    a shm or numa pool then pay no TLB miss per record. Best effort, see
    ``_collapse``.

    ``tier_policy`` (default: the pool object's) and ``prefetch_depth`` (in
    batches) are defaults of the loaders over this dataset: on a pool of
    tiers their ``memory_policy`` and ``lookahead``; on a pool of one tier,
    where records are read in place, prefetch_depth is the gather engine's
    batches in flight per thread (the loader's prefetch_factor, when it
    gives none). docs/python.md, "The design's constructor".
    """

    def __init__(self, pool: Union[CXLMemoryPool, str, None] = None, name: Optional[str] = None,
                 *, hugepages: bool = False, columns: Optional[Sequence[str]] = None,
                 data_source: Any = None, cxl_pool: Union[CXLMemoryPool, str, None] = None,
                 format: Optional[str] = None, ingest_options: Optional[dict] = None,
                 tier_policy: Optional[str] = None, prefetch_depth: Optional[int] = None) -> None:
        if cxl_pool is not None:
            if pool is not None:
                raise TypeError("CXLDataset: give the pool once (pool or cxl_pool)")
            pool = cxl_pool
        if tier_policy is None and isinstance(pool, CXLMemoryPool):
            tier_policy = pool.tier_policy
        self.tier_policy = tier_policy_check("tier_policy", tier_policy)
        if prefetch_depth is not None and (isinstance(prefetch_depth, bool) or not isinstance(
                prefetch_depth, int) or prefetch_depth < 1):
            raise ValueError(f"prefetch_depth={prefetch_depth!r}: batches, an integer >= 1")
        self.prefetch_depth = prefetch_depth
        if pool is None:
            raise TypeError("CXLDataset needs a pool (pool= or cxl_pool=)")
        self.spec = pool.spec if isinstance(pool, CXLMemoryPool) else make_spec(pool)
        self.ingested: Optional[dict] = None
        if data_source is not None:
            name = name or source_name(data_source)
            self.ingested = ingest_once(pool, name, data_source, format, ingest_options or {})
        elif name is None:
            raise TypeError("CXLDataset needs a dataset name, or data_source= to ingest from")
        self.name = name
        self.hugepages = hugepages
        self.columns = list(columns) if columns is not None else None
        self._attach()

    def _attach(self) -> None:
        pool = _core.Pool(self.spec, readonly=True)
        try:
            self._store = _core.Store(pool, self.name)
        finally:
            pool.close()  # the store keeps the mapping
        self._len = len(self._store)
        self.schema = self._store.schema()
        self._fields = None if self.columns is None else self.field_numbers(self.columns)
        if self.hugepages:
            self._collapse()

    @property
    def fields(self) -> list[str]:
        """The dataset's field names, in schema order."""
        return [f["name"] for f in self.schema["fields"]]

    def field_numbers(self, columns: Sequence[str]) -> list[int]:
        """Schema numbers of the named fields; ValueError naming an unknown
        one and the fields there are."""
        names = self.fields
        if isinstance(columns, str) or not columns:
            raise ValueError(f"columns={columns!r}: a non-empty list of field names")
        out = []
        for c in columns:
            if c not in names:
                raise ValueError(f"columns: dataset {self.name!r} has no field {c!r} "
                                 f"(fields: {', '.join(names)})")
            out.append(names.index(c))
        return out

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
    def ingest(cls, pool: CXLMemoryPool, name: str, source: Any, *,
               format: str = "auto", record_size: Union[int, str] = 0,
               dtype: Optional[str] = None, progress: Optional[bool] = None,
               hugepages: bool = True, columns: Optional[Sequence[str]] = None,
               **kw: Any) -> "CXLDataset":
        """Imports source into pool as dataset name (CXLMemoryPool.ingest:
        every format, docs/formats.md) and opens it. columns= chooses the
        fields to import (Arrow, Parquet, WebDataset); hugepages: as there
        (the records land on 2 MiB pages while they are written, no copy
        after)."""
        if columns is not None:
            kw["columns"] = columns
        pool.ingest(name, source, format=format, record_size=record_size, dtype=dtype,
                    progress=progress, hugepages=hugepages, **kw)
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
        """Record i (negative counts from the end) as a tensor, or a dict by
        field name for several fields (str fields as str). i is an integer
        (int, numpy or 0-d torch integer): a float or a string is an
        IndexError, as in numpy, never truncated."""
        try:
            i = operator.index(i)
        except TypeError:
            raise IndexError(f"only integers are valid indices of a CXLDataset, got "
                             f"{type(i).__name__} {i!r}") from None
        rec = self._store.get(i, self._fields)
        if isinstance(rec, dict):
            return {k: v if isinstance(v, str) else torch.from_dlpack(v) for k, v in rec.items()}
        return rec if isinstance(rec, str) else torch.from_dlpack(rec)

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

    @property
    def ingest_shuffle(self) -> Optional[int]:
        """The seed of a shuffled ingest (``ingest(..., shuffle=SEED)``,
        ``cxlpool ingest --shuffle SEED``), or None: records in input order."""
        return self._store.ingest_shuffle()

    def source_index(self, i: int) -> int:
        """The input position of record i: P(i) for a shuffled ingest, i
        otherwise. IndexError past the end."""
        return self._store.source_index(self._check_index(i))

    def record_of_source(self, j: int) -> int:
        """The record that holds input record j (the inverse of
        source_index). IndexError past the end."""
        return self._store.record_of_source(self._check_index(j))

    def _check_index(self, i: int) -> int:
        """i as an int in [0, len): any integer type (operator.index), no
        negative counting from the end (an input position is absolute)."""
        if isinstance(i, bool):
            raise TypeError("index: expected an int, not bool")
        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(f"index: expected an int, not {type(i).__name__}") from None
        if not 0 <= i < self._len:
            raise IndexError(f"index {i} out of range for {self._len} records")
        return i

    def shards(self) -> dict:
        """How the records are cut into shards: n_shards, per_shard (records
        in each; 0 when they differ) and max_bytes (what a copy of one takes
        in a memory tier)."""
        return self._store.shards()

    def shard_format(self) -> dict:
        """The shard format the dataset was written in: version (4 in this
        build; 1 to 3 written by earlier ones; 0 without shards),
        block_bytes (what a partial read reads per block: 4096 in format 4,
        64 KiB and up in format 3, 0 for formats without block sums) and
        sums_area (the block sums lie outside the header page). On a pool
        of tiers this reads the first shard's header page."""
        return self._store.format()

    def units(self) -> dict:
        """The dataset's staging units (docs/tiers.md, "Staging units"):
        n_units runs of per_unit records of one shard each (0 and 0 until a
        loader or a read made them: a dataset whose shards are small enough
        for the staging budget stages whole shards), and copies: per tier of
        the pool, how many units have a copy there now."""
        return self._store.units()

    def stage_unit(self, memory_budget: Optional[int] = None) -> dict:
        """What a loader with ``memory_budget`` bytes of staging (None: the
        default, 3/4 of the fastest memory tier) stages: records (0: whole
        shards) and about how many bytes a copy of one takes."""
        return self._store.stage_unit(int(memory_budget or 0))

    def stage_order(self, memory_budget: Optional[int] = None,
                    runs: Union[str, bool, int] = "auto") -> dict:
        """The block order a loader with ``memory_budget`` bytes of staging
        keeps up with (what ``window="auto"`` takes): block_records,
        window, unit_records, unit_bytes, run_units, and the probe of the
        home's reads: probe ("none", "measured" now, or "recorded" in the
        pool earlier), random_ratio (random reads' rate over sequential
        ones'), seq_bps and random_bps (when measured). runs: "auto" (the
        probe decides), True (runs without a probe), False (none), or
        staging units per run."""
        return self._store.stage_order(int(memory_budget or 0), runs_code(runs))

    def shard_tiers(self, shard: int) -> list[int]:
        """The tiers (indexes into the pool's ``tiers()``) that hold a copy
        of shard ``shard`` now, fastest first: a moment's view, as copies
        are staged and evicted. IndexError past the dataset's shards."""
        shard = operator.index(shard)
        n = self._store.shards()["n_shards"]
        if not 0 <= shard < n:
            raise IndexError(f"shard {shard} of dataset {self.name!r} ({n} shards)")
        mask = self._store.shard_tiers(shard)
        return [t for t in range(32) if mask >> t & 1]

    def locate(self, i: int) -> dict:
        """Where record ``i`` is now (the design's metadata service):
        ``shard`` and ``index`` (its place in that shard, of
        ``shard_records``), ``tiers`` (the names of the pool's tiers holding
        a copy of the shard now, fastest first: a moment's view), ``tier``
        (the first of them: where ``ds[i]`` reads it), ``host`` (the id of
        the host whose process asks, as ``cxlpool stat`` prints it: every
        tier of a pool is mapped here), ``version`` (the catalog
        generation that published the dataset) and ``heat`` (the records
        loaders took from that shard, counted in the pool by every process:
        what ``hot_first`` ranks by; 0 on a pool of one tier, which keeps
        no counts). Negative ``i`` counts from the end; IndexError outside."""
        n = len(self)
        i = operator.index(i)
        if not -n <= i < n:
            raise IndexError(f"record {i} of dataset {self.name!r} ({n} records)")
        loc = self._store.locate(i % n)
        pool = _core.Pool(self.spec, readonly=True)
        try:
            tiers, host = pool.tiers(), pool.stat()["host_id"]
        finally:
            pool.close()
        held = [t["kind"] for t in tiers if loc["tiers"] >> t["tier"] & 1]
        loc.update(tiers=held, tier=held[0] if held else None, host=f"{host:016x}")
        return loc

    @property
    def tiered(self) -> bool:
        """True when the pool has tiers: records are then copied out by
        ``ds[i]`` (a copy of a shard may move or be evicted while a view of
        it would live), and the loader stages shards by its memory_policy."""
        return bool(self._store.tiered)

    def migrate_to(self, tier: str, *, threads: int = 1) -> dict:
        """Moves this dataset's shards to tier ("dram", "cxl", "nvme", or a
        tier index) while every reader keeps reading: a copy in a memory
        tier (kept until the next migration), the other copies dropped but
        the home's; to the home tier, every other copy dropped. Returns the
        counts, as CXLMemoryPool.migrate (``cxlpool migrate --json``)."""
        pool = _core.Pool(self.spec)  # a writer: the dataset's own handle is read-only
        try:
            return migrate_report(pool, self.name, tier, threads)
        finally:
            pool.close()

    def __getstate__(self) -> dict:
        return {"spec": self.spec, "name": self.name, "columns": self.columns,
                "tier_policy": self.tier_policy, "prefetch_depth": self.prefetch_depth}

    def __setstate__(self, state: dict) -> None:
        self.spec = state["spec"]
        self.name = state["name"]
        self.columns = state.get("columns")
        self.tier_policy = state.get("tier_policy")
        self.prefetch_depth = state.get("prefetch_depth")
        self.hugepages = False  # the pool's pages were changed by the sender
        self._attach()

    def __repr__(self) -> str:
        return f"CXLDataset({self.spec!r}, {self.name!r}, {self._len} records)"
