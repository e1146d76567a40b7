"""Megatron-core over the pool: its data stack runs unchanged on pool datasets.

Megatron-LM reads tokens through three layers: ``IndexedDataset`` (a
``.bin``/``.idx`` pair: sequences, their lengths, document boundaries),
``GPTDataset`` (samples of ``sequence_length + 1`` tokens cut across
documents through three index arrays: document, sample and shuffle index)
and ``BlendedMegatronDatasetBuilder`` (splits and blends, by path prefixes).

- ``CXLIndexedDataset(pool, name)`` is ``IndexedDataset``'s interface over a
  dataset ingested with ``format="megatron"`` (``cxlpool ingest --format
  megatron``): ``__len__``, ``__getitem__`` (an int or a contiguous slice),
  ``get(idx, offset, length)``, ``sequence_lengths``, ``document_indices``,
  ``sequence_modes``; each sequence a NumPy view of the pool (no copy).
- ``CXLGPTDataset`` (``on_pool(GPTDataset)``; any ``MegatronDataset``
  subclass the same way) is GPTDataset with the one hook Megatron provides for
  where data comes from, ``build_low_level_dataset(dataset_path, config)``,
  taking ``cxl://POOL/NAME`` prefixes (other prefixes are Megatron's files, as
  before). Megatron's builder is given the class:
  ``BlendedMegatronDatasetBuilder(CXLGPTDataset, sizes, is_built_on_rank,
  config)`` with ``blend=(["cxl://train/web", "cxl://train/code"], [0.7,
  0.3])``. Nothing else of GPTDataset changes: its samples are Megatron's own
  code's (tests/python/test_integrations_megatron.py compares them, token by
  token, with GPTDataset over Megatron's files).
- Index caches in the pool: with ``path_to_cache=None`` (Megatron would
  write beside the data, here the pool) the document, sample and shuffle
  index of a pool dataset are built by Megatron's own code once per pool
  (the first process of the host takes the ingest lock and builds, the
  others wait and attach) and stored as pool datasets
  ``NAME.gpt-HASH-SPLIT-{doc,sample,shuffle}``; every rank then maps the one
  copy. A ``path_to_cache`` directory keeps Megatron's own files.
- ``GPTBatches(dataset, micro_batch_size)`` yields, per rank, the batches a
  torch DataLoader over ``dataset`` yields with Megatron's pretraining
  sampler (rank r takes micro-batch r of each global batch), built without a
  Python call per sample: the pieces of each sample are computed from the
  three index arrays for the whole batch at once and copied from the pool in
  one C call. For GPTDataset and BlendedDataset over pool datasets.

Why not a subclass of ``IndexedDataset``: its constructor opens files and
asserts they exist; GPTDataset only uses the interface above (duck typing),
which is what Megatron's own mock dataset does too.
"""
from __future__ import annotations

import copy
import logging
import operator
import time
from typing import Any, Iterator, Optional, Union

import numpy as np
import torch

from .. import _core
from ..dataset import CXLDataset
from ..pool import CXLMemoryPool, make_spec

PREFIX = "cxl://"


def parse_path(path: str) -> tuple[str, str]:
    """(pool, dataset name) of ``cxl://POOL/NAME``; POOL is a pool name or a
    spec (``cxl://file:/data/pool.img/web``: the name is what follows the
    last slash). ValueError naming the path otherwise."""
    if not isinstance(path, str) or not path.startswith(PREFIX):
        raise ValueError(f"{path!r}: a pool dataset path is cxl://POOL/NAME")
    pool, _, name = path[len(PREFIX):].rpartition("/")
    if not pool or not name:
        raise ValueError(f"{path!r}: a pool dataset path is cxl://POOL/NAME")
    return pool, name


def is_pool_path(path: Any) -> bool:
    return isinstance(path, str) and path.startswith(PREFIX)


class CXLIndexedDataset(torch.utils.data.Dataset):
    """Megatron-core's ``IndexedDataset`` interface over pool dataset ``name``
    (ingested from Megatron's ``.bin``/``.idx``; any dataset of one
    variable-length numeric field works, its records the sequences).

    Sequences are NumPy arrays viewing the pool (its copy-on-write mapping:
    a write stays in the process); ``get(idx, offset, length)`` a slice of
    one. ``sequence_lengths`` (int32) and ``document_indices`` (int64) are
    what Megatron's index holds; a dataset without document boundaries has
    one document per sequence. Pickling sends (pool, name): DataLoader
    workers attach the same pool."""

    def __init__(self, pool: Union[CXLMemoryPool, str], name: str,
                 multimodal: bool = False) -> None:
        super().__init__()
        if multimodal:
            raise ValueError(f"CXLIndexedDataset({name!r}): multimodal datasets (sequence "
                             "modes) are not imported into the pool; ingest the text dataset")
        self._ds = CXLDataset(pool, name)
        fields = self._ds.schema["fields"]
        if len(fields) != 1 or not fields[0]["variable"] or fields[0]["dtype"] == "str":
            raise ValueError(f"CXLIndexedDataset: dataset {name!r} is not one variable-length "
                             "numeric field (ingest Megatron's .bin/.idx with format='megatron')")
        self.name = name
        self.pool = self._ds.spec
        spec = self.pool
        self.path_prefix = f"{PREFIX}{spec[4:] if spec.startswith('shm:') else spec}/{name}"
        self.multimodal = False
        self.dtype = np.dtype(fields[0]["dtype"])
        self._n = len(self._ds)
        self._lengths: Optional[np.ndarray] = None
        self._docs: Optional[np.ndarray] = None

    @classmethod
    def from_path(cls, path: str) -> "CXLIndexedDataset":
        """The dataset a ``cxl://POOL/NAME`` path names."""
        pool, name = parse_path(path)
        return cls(pool, name)

    @staticmethod
    def exists(path: str) -> bool:
        """Whether ``cxl://POOL/NAME`` names a dataset (IndexedDataset.exists)."""
        pool, name = parse_path(path)
        try:
            p = _core.Pool(make_spec(pool), readonly=True)
        except _core.CXLError:
            return False
        try:
            return any(d["name"] == name for d in p.list())
        finally:
            p.close()

    def __len__(self) -> int:
        return self._n

    def _seq(self, idx: Any) -> np.ndarray:
        i = operator.index(idx)
        return np.from_dlpack(self._ds.store.get(i))

    def __getitem__(self, idx: Union[int, np.integer, slice]) -> Any:
        """Sequence idx (an ndarray viewing the pool), or a list of them for a
        contiguous slice; as IndexedDataset (step != 1 is a ValueError,
        anything else a TypeError)."""
        if isinstance(idx, (int, np.integer)):
            return self._seq(idx)
        if isinstance(idx, slice):
            start, stop, step = idx.indices(self._n)
            if step != 1:
                raise ValueError("Slices into indexed_dataset must be contiguous")
            return [self._seq(i) for i in range(start, stop)]
        raise TypeError("Unexpected type received for idx: {}".format(type(idx)))

    def get(self, idx: int, offset: int = 0, length: Optional[int] = None) -> np.ndarray:
        """Elements [offset, offset + length) of sequence idx (to its end when
        length is None), a view of the pool. IndexError when they are not
        all inside the sequence (Megatron's reader would read past it)."""
        seq = self._seq(idx)
        offset = operator.index(offset)
        end = len(seq) if length is None else offset + operator.index(length)
        if not 0 <= offset <= end <= len(seq):
            raise IndexError(f"{self.path_prefix}: sequence {idx} has {len(seq)} elements; "
                             f"asked for [{offset}, {end})")
        return seq[offset:end]

    @property
    def sequence_lengths(self) -> np.ndarray:
        """int32 length of every sequence (read once from the dataset's index)."""
        if self._lengths is None:
            out = np.empty(self._n, dtype=np.int32)
            self._ds.store.lengths(out)
            self._lengths = out
        return self._lengths

    @property
    def document_indices(self) -> np.ndarray:
        """int64 document starts, n_docs + 1 entries, the last len(self)."""
        if self._docs is None:
            d = self._ds.store.docs()
            self._docs = (np.from_dlpack(d) if d is not None
                          else np.arange(self._n + 1, dtype=np.int64))
        return self._docs

    def get_document_indices(self) -> np.ndarray:
        return self.document_indices

    def set_document_indices(self, document_indices: np.ndarray) -> None:
        self._docs = np.asarray(document_indices)

    @property
    def sequence_modes(self) -> np.ndarray:
        """Multimodal datasets only; a text dataset has none (Megatron's
        IndexedDataset asserts there; this raises ValueError)."""
        raise ValueError(f"{self.path_prefix}: a text dataset has no sequence modes")

    @property
    def store(self) -> "_core.Store":
        return self._ds.store

    def __getstate__(self) -> dict:
        return {"pool": self.pool, "name": self.name}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["pool"], state["name"])  # type: ignore[misc]

    def __repr__(self) -> str:
        return f"CXLIndexedDataset({self.path_prefix!r}, {self._n} sequences)"


# -- index caches in the pool ------------------------------------------------

_INDEX_KINDS = ("doc", "sample", "shuffle")


def _cache_names(ds: Any) -> dict[str, str]:
    base = f"{ds.dataset.name[:24]}.gpt-{ds.unique_description_hash[:12]}-{ds.index_split.name[:5]}"
    return {k: f"{base}-{k}" for k in _INDEX_KINDS}


def _pool_array(spec: str, name: str) -> np.ndarray:
    """A pool dataset written by _store_array, as one ndarray viewing the pool
    (its records lie in one shard), else a copy of its records."""
    ds = CXLDataset(spec, name)
    n = len(ds)
    try:
        return np.from_dlpack(ds.store.rows(0, n))
    except ValueError:  # more than one shard, or a pool of tiers
        return np.stack([ds[i].numpy() for i in range(n)])


def _store_array(p: "_core.Pool", name: str, a: np.ndarray) -> None:
    """Publishes array a (1-D, or 2-D rows) as pool dataset name: one record
    per row, in one shard, so that it maps back as one array."""
    a = np.ascontiguousarray(a)
    shape = tuple(a.shape[1:])
    w = _core.Writer(p, name, [("v", a.dtype.name, shape)],
                     shard_bytes=max(a.nbytes + (1 << 20), 1 << 22))
    try:
        w.append_columns(len(a), [a])
        w.commit()
    finally:
        w.abort()


def _build_indices_in_memory(ds: Any, build: Any) -> tuple:
    """Megatron's own _build_document_sample_shuffle_indices with no cache
    directory: the branch that builds the three arrays in memory (a config
    without path_to_cache that is a 'mock' one is what takes it; nothing
    else of the config differs, and the config is put back)."""
    cfg = copy.copy(ds.config)
    cfg.path_to_cache = None
    cfg.mock = True
    for attr in ("fast_cache_load", "defer_npy_index_mmap"):
        if hasattr(cfg, attr):
            setattr(cfg, attr, False)
    saved = ds.config
    ds.config = cfg
    log = logging.getLogger("megatron.core.datasets.gpt_dataset")
    level = log.level
    log.setLevel(logging.ERROR)  # its "Unable to save ... path_to_cache is None" is not so here
    try:
        return build(ds)
    finally:
        ds.config = saved
        log.setLevel(level)


def pool_indices(ds: Any, build: Any) -> tuple:
    """The document, sample and shuffle index of GPT-style dataset ds over a
    pool dataset, from the pool: built by Megatron's code (build) once per
    pool under the ingest lock, then mapped by everyone. ds.index_cache says
    what happened: {"built": bool, "seconds": float, "names": {...}}."""
    from ..ingest import ingest_lock
    spec = ds.dataset.pool
    names = _cache_names(ds)
    t0 = time.perf_counter()
    built = False
    p = _core.Pool(spec)
    try:
        have = {d["name"] for d in p.list()}
        if names["shuffle"] not in have:  # published last: its presence means all three
            with ingest_lock(p, names["shuffle"]):
                have = {d["name"] for d in p.list()}
                if names["shuffle"] not in have:
                    arrays = _build_indices_in_memory(ds, build)
                    for k, a in zip(_INDEX_KINDS, arrays):
                        if names[k] in have:  # a half-done build: replaced
                            p.remove(names[k])
                        _store_array(p, names[k], a)
                    built = True
    finally:
        p.close()
    out = tuple(_pool_array(spec, names[k]) for k in _INDEX_KINDS)
    ds.index_cache = {"built": built, "seconds": time.perf_counter() - t0, "names": names}
    return out


_ON_POOL: dict[type, type] = {}


def on_pool(cls: type) -> type:
    """``cls`` (a MegatronDataset subclass: GPTDataset, ...) taking
    ``cxl://POOL/NAME`` dataset paths in its ``build_low_level_dataset``
    hook, with its document/sample/shuffle index in the pool when the
    config has no ``path_to_cache``. Other paths are Megatron's files. One
    class per cls."""
    if cls in _ON_POOL:
        return _ON_POOL[cls]
    parent_build = cls.build_low_level_dataset

    def build_low_level_dataset(dataset_path: str, config: Any) -> Any:
        if is_pool_path(dataset_path):
            return CXLIndexedDataset.from_path(dataset_path)
        return parent_build(dataset_path, config)

    ns: dict[str, Any] = {"build_low_level_dataset": staticmethod(build_low_level_dataset),
                          "__doc__": f"{cls.__name__} over pool datasets (cxl://POOL/NAME)"}
    parent_indices = getattr(cls, "_build_document_sample_shuffle_indices", None)
    if parent_indices is not None:
        def _build_document_sample_shuffle_indices(self: Any) -> tuple:
            if (isinstance(self.dataset, CXLIndexedDataset) and self.config.path_to_cache is None
                    and not getattr(self.config, "defer_npy_index_mmap", False)):
                return pool_indices(self, parent_indices)
            return parent_indices(self)
        ns["_build_document_sample_shuffle_indices"] = _build_document_sample_shuffle_indices
    sub = type(f"CXL{cls.__name__}", (cls,), ns)
    sub.__module__ = __name__
    _ON_POOL[cls] = sub
    return sub


def _gpt_dataset() -> type:
    from megatron.core.datasets.gpt_dataset import GPTDataset
    return GPTDataset


def __getattr__(name: str) -> Any:
    # CXLGPTDataset is made on first use, so importing this module does not
    # import Megatron's GPT code before it is asked for
    if name == "CXLGPTDataset":
        return on_pool(_gpt_dataset())
    raise AttributeError(name)


# -- GPT batches gathered in C -------------------------------------------------

class _GPTPart:
    """One GPTDataset over a pool dataset: its index arrays and store."""

    def __init__(self, ds: Any) -> None:
        if not isinstance(getattr(ds, "dataset", None), CXLIndexedDataset):
            raise TypeError(f"GPTBatches: {type(ds).__name__} is not over a pool dataset "
                            "(build it with CXLGPTDataset and cxl://POOL/NAME paths)")
        if ds.shuffle_index is None:  # defer_npy_index_mmap: Megatron maps them on first use
            ds._query_document_sample_shuffle_indices(0)
        self.ds = ds
        self.store = ds.dataset.store
        self.lengths = ds.dataset.sequence_lengths
        self.shuffle = np.asarray(ds.shuffle_index)
        self.sample = np.asarray(ds.sample_index)
        self.docs = np.asarray(ds.document_index)
        self.extra = int(ds.config.add_extra_token_to_sequence)
        self.width = ds.config.sequence_length + self.extra
        self.dtype = ds.dataset.dtype

    def text(self, samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Rows of tokens of samples (GPTDataset indices) in the store's dtype,
        and how many of each row are data (the rest is padding)."""
        idx = self.shuffle[samples].astype(np.int64)
        beg = self.sample[idx].astype(np.int64)
        end = self.sample[idx + 1].astype(np.int64)
        n = end[:, 0] - beg[:, 0] + 1                     # pieces per sample
        rows = np.repeat(np.arange(len(samples)), n)
        first = np.cumsum(n) - n
        k = np.arange(len(rows)) - first[rows]             # piece number in its sample
        ids = self.docs[beg[rows, 0] + k].astype(np.int64)
        off = np.where(k == 0, beg[rows, 1], 0)
        last = k == n[rows] - 1
        cnt = np.where(last, end[rows, 1] + self.extra - off, self.lengths[ids] - off)
        csum = np.cumsum(cnt)
        within = csum - cnt - (csum - cnt)[first][rows]
        dest = rows * self.width + within
        out = np.zeros((len(samples), self.width), dtype=self.dtype)
        self.store.gather(ids, off.astype(np.int64), cnt.astype(np.int64),
                          dest.astype(np.int64), out)
        return out, np.add.reduceat(cnt, first) if len(cnt) else np.zeros(0, np.int64)


class GPTBatches:
    """The batches of ``torch.utils.data.DataLoader(dataset, batch_size=
    micro_batch_size, sampler=<Megatron's pretraining sampler>)`` on this
    rank, built without a Python call per sample.

    dataset: a GPTDataset (CXLGPTDataset) over a pool dataset, or Megatron's
    BlendedDataset of them (each batch then also has "dataset_id"). Order:
    Megatron's MegatronPretrainingSampler: global batches of
    micro_batch_size x world_size consecutive samples from consumed_samples
    on, rank r taking the r-th micro-batch of each; an incomplete last global
    batch is dropped. Batches are dicts of tensors with GPTDataset's keys and
    values (tokens, labels, loss_mask, position_ids, attention_mask when the
    config creates it: one mask shared by the batch's rows, as GPTDataset
    shares its cached one). state_dict() is {"consumed_samples": n}, global
    (what Megatron checkpoints)."""

    def __init__(self, dataset: Any, micro_batch_size: int, *, rank: Optional[int] = None,
                 world_size: Optional[int] = None, consumed_samples: int = 0) -> None:
        if world_size is None or rank is None:
            dist = torch.distributed.is_available() and torch.distributed.is_initialized()
            world_size = torch.distributed.get_world_size() if dist else 1
            rank = torch.distributed.get_rank() if dist else 0
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} of world_size {world_size}")
        if micro_batch_size < 1:
            raise ValueError(f"micro_batch_size={micro_batch_size}: >= 1")
        self.dataset = dataset
        self.micro_batch_size = int(micro_batch_size)
        self.rank, self.world_size = int(rank), int(world_size)
        self.consumed_samples = int(consumed_samples)
        subs = getattr(dataset, "datasets", None)
        self.blended = subs is not None
        self.parts = [_GPTPart(d) for d in (subs if self.blended else [dataset])]
        if self.blended:
            if dataset.dataset_index is None:
                dataset[0]  # Megatron maps its deferred indices on first use
            self.ds_index = np.asarray(dataset.dataset_index)
            self.ds_sample = np.asarray(dataset.dataset_sample_index)
        cfg = self.parts[0].ds.config
        self.config = cfg
        self.pad = self.parts[0].ds._pad_token_id
        self.cacheable = not (cfg.reset_position_ids or cfg.reset_attention_mask
                              or cfg.eod_mask_loss)
        self._masks: Optional[tuple] = None

    def __len__(self) -> int:
        per = self.micro_batch_size * self.world_size
        return max(0, (len(self.dataset) - self.consumed_samples) // per)

    def state_dict(self) -> dict:
        return {"consumed_samples": self.consumed_samples}

    def load_state_dict(self, state: dict) -> None:
        self.consumed_samples = operator.index(state["consumed_samples"])

    def _positions(self) -> Iterator[np.ndarray]:
        per = self.micro_batch_size * self.world_size
        while self.consumed_samples + per <= len(self.dataset):
            start = self.consumed_samples + self.rank * self.micro_batch_size
            yield np.arange(start, start + self.micro_batch_size, dtype=np.int64)

    def _text(self, pos: np.ndarray) -> tuple[np.ndarray, Optional[np.ndarray]]:
        """The batch's samples as int64 rows, padded as GPTDataset pads, and
        the dataset of each (blends). NumPy, not torch: these are small
        arrays, and torch's intra-op threads cost more than they save here
        (each rank runs one loop, as each DataLoader worker does)."""
        if not self.blended:
            rows, used = self.parts[0].text(pos)
            text = rows.astype(np.int64)
            dsid = None
        else:
            which = self.ds_index[pos]
            local = self.ds_sample[pos].astype(np.int64)
            text = np.empty((len(pos), self.parts[0].width), dtype=np.int64)
            used = np.zeros(len(pos), dtype=np.int64)
            for d in np.unique(which):
                sel = np.nonzero(which == d)[0]
                rows, u = self.parts[int(d)].text(local[sel])
                text[sel] = rows
                used[sel] = u
            dsid = np.ascontiguousarray(which)
        if (used < text.shape[1]).any():  # GPTDataset pads a short sample with the pad token
            text[np.arange(text.shape[1])[None, :] >= used[:, None]] = self.pad
        return text, dsid

    def _batch(self, pos: np.ndarray) -> dict:
        from megatron.core.datasets.gpt_dataset import _get_ltor_masks_and_position_ids
        cfg = self.config
        text, dsid = self._text(pos)
        if cfg.add_extra_token_to_sequence:
            tokens, labels = text[:, :-1].copy(), text[:, 1:].copy()
        else:
            tokens = text
            labels = np.roll(text, -1, axis=1)
            labels[:, -1] = self.pad
        b = len(pos)
        eod = cfg.tokenizer.eod
        args = (cfg.reset_position_ids, cfg.reset_attention_mask, cfg.eod_mask_loss,
                cfg.create_attention_mask)
        if self.cacheable:  # one mask, loss mask and position ids for every row, as GPTDataset
            if self._masks is None:
                self._masks = _get_ltor_masks_and_position_ids(torch.from_numpy(tokens[0]),
                                                               eod, *args)
            att, loss1, pos1 = self._masks
            loss = np.repeat(loss1.numpy()[None, :], b, axis=0)
            position_ids = torch.from_numpy(np.repeat(pos1.numpy()[None, :], b, axis=0))
            attention = att.expand(b, *att.shape) if att is not None else None
        else:
            each = [_get_ltor_masks_and_position_ids(torch.from_numpy(tokens[r]), eod, *args)
                    for r in range(b)]
            attention = torch.stack([e[0] for e in each]) if cfg.create_attention_mask else None
            loss = torch.stack([e[1] for e in each]).numpy()
            position_ids = torch.stack([e[2] for e in each])
        loss[labels == self.pad] = 0.0
        tokens[tokens == self.pad] = 0
        labels[labels == self.pad] = 0
        out: dict = {}
        if dsid is not None:
            out["dataset_id"] = torch.from_numpy(dsid)
        out.update(tokens=torch.from_numpy(tokens), labels=torch.from_numpy(labels))
        if cfg.create_attention_mask:
            out["attention_mask"] = attention
        out.update(loss_mask=torch.from_numpy(loss), position_ids=position_ids)
        return out

    def __iter__(self) -> Iterator[dict]:
        per = self.micro_batch_size * self.world_size
        for pos in self._positions():
            batch = self._batch(pos)
            self.consumed_samples += per
            yield batch

    def __repr__(self) -> str:
        return (f"GPTBatches({len(self.parts)} dataset(s), micro_batch_size="
                f"{self.micro_batch_size}, rank {self.rank} of {self.world_size}, "
                f"consumed_samples={self.consumed_samples})")
