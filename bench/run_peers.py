#!/usr/bin/env python3
"""Side-by-side benchmark of cxl_dataloader against the loaders users run today.

    python3 bench/run_peers.py [--quick]

One run, one machine state, one dataset per workload, written once in each
system's own format from the same records:
  w1  fixed 2048-token int32 sequences (8 KiB), full shuffle, batch 32
  w2  variable-length int32 documents (log-normal, 200 B .. 64 KiB) packed
      into rows of 2048 tokens
  w3  4 consumer processes on one host reading w1 (memory: total PSS)
Every record carries its id in its first 8 bytes (int64), so the order each
system delivers is observable (shuffle quality) without trusting its API.

Each system runs in its own child process (clean peak RSS, no shared import
state); each child makes >= 5 timed runs. A run builds a fresh iterator,
waits for the first batch (time to first batch), then counts samples for a
fixed time budget or until the epoch ends. Throughput excludes the first
batch, so worker start-up shows in TTFB, not in samples/s.

Writes docs/benchmarks/peers.{md,json,png}. Peers come from the optional
`bench` extra (pyproject.toml); a peer that cannot be imported is recorded
with the reason, never silently dropped. Alternatives rejected: timing whole
epochs (slow peers would need minutes per run on 2 cores) and one process
for all systems (each system's imports and shared memory would leak into
the next one's RSS).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
import types
import uuid
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import numpy as np

REPO = Path(__file__).resolve().parent.parent
SEQ = 2048                 # tokens per fixed record and per packed row
ITEM = 4                   # int32
REC_BYTES = SEQ * ITEM     # 8 KiB
BATCH = 32
WARM = 4                   # batches after the first one, not timed
SHARD_RECS = 1024          # logical shard for shuffle quality: 8 MiB of storage order
PIN = {"megatron-core": "0.16.1", "mosaicml-streaming": "0.13.0", "litdata": "0.2.76",
       "webdataset": "1.0.2", "matplotlib": "3.11.2", "torch": "2.13.0"}

if (REPO / "python" / "cxl_dataloader").is_dir() and \
        any((REPO / "python" / "cxl_dataloader").glob("_core*.so")):
    sys.path.insert(0, str(REPO / "python"))


# --------------------------------------------------------------------------
# memory accounting
def _children(pid: int) -> list[int]:
    out: list[int] = []
    try:
        for t in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{t}/children") as f:
                out += [int(x) for x in f.read().split()]
    except OSError:
        pass
    return out


def tree(pid: int) -> list[int]:
    pids, todo = [], [pid]
    while todo:
        p = todo.pop()
        pids.append(p)
        todo += _children(p)
    return pids


def pss_kib(pids: Iterable[int], fields: tuple = ("Pss:",)) -> int:
    """Sum of smaps_rollup fields (kB) over pids: Pss by default;
    ("Private_Clean:", "Private_Dirty:") gives USS, memory no other process
    shares (the mapped dataset excluded)."""
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup") as f:
                for line in f:
                    if line.startswith(fields):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


USS = ("Private_Clean:", "Private_Dirty:")


def rss_kib(pids: Iterable[int]) -> int:
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


# --------------------------------------------------------------------------
# data
def doc_sizes(n_bytes: int, rng: np.random.Generator) -> np.ndarray:
    """Token counts of documents whose byte sizes are log-normal, clipped to
    200 B .. 64 KiB (median 2 KiB), adding up to about n_bytes."""
    out, total = [], 0
    while total < n_bytes:
        b = np.clip(rng.lognormal(np.log(2048), 1.0, 65536), 200, 65536)
        t = (b // ITEM).astype(np.int64)
        t = np.maximum(t, 2)
        out.append(t)
        total += int(t.sum()) * ITEM
    t = np.concatenate(out)
    c = np.cumsum(t) * ITEM
    return t[: int(np.searchsorted(c, n_bytes)) + 1]


def make_data(work: Path, fixed_mib: int, var_mib: int, log: Callable[[str], None]) -> dict:
    """Writes the records once (Megatron .bin/.idx through Megatron's own
    builder when it imports, else the same bytes by hand) and returns
    where everything is."""
    rng = np.random.default_rng(1234)
    meta: dict = {"work": str(work)}
    n1 = fixed_mib * (1 << 20) // REC_BYTES
    arr = rng.integers(0, 50257, size=(n1, SEQ), dtype=np.int32)
    arr.view(np.int64)[:, 0] = np.arange(n1, dtype=np.int64)
    sizes = doc_sizes(var_mib << 20, rng)
    n2 = len(sizes)
    offs = np.zeros(n2 + 1, dtype=np.int64)
    offs[1:] = np.cumsum(sizes)
    flat = rng.integers(0, 50257, size=int(offs[-1]), dtype=np.int32)
    pairs = np.arange(n2, dtype="<i8").view(np.int32).reshape(-1, 2)
    flat[offs[:-1]] = pairs[:, 0]
    flat[offs[:-1] + 1] = pairs[:, 1]
    meta.update(n1=n1, n2=n2, tokens2=int(offs[-1]), mean_doc_tokens=float(sizes.mean()),
                doc_bytes_min=int(sizes.min() * ITEM), doc_bytes_max=int(sizes.max() * ITEM))
    for tag in ("w1", "w2"):
        prefix = work / f"megatron_{tag}"
        t0 = time.perf_counter()
        if tag == "w1":
            arr.tofile(f"{prefix}.bin")
            write_idx(f"{prefix}.idx", np.full(n1, SEQ, dtype=np.int32))
        else:
            flat.tofile(f"{prefix}.bin")
            write_idx(f"{prefix}.idx", sizes.astype(np.int32))
        log(f"  megatron {tag}: {time.perf_counter() - t0:.1f} s")
    np.save(work / "w2_offsets.npy", offs)
    return meta


def write_idx(path: str, lens: np.ndarray) -> None:
    """Megatron-LM MMIDIDX v1 index, int32 tokens (dtype code 4), one
    sequence per document: exactly what megatron-core's
    IndexedDatasetBuilder.finalize writes (the bytes are checked against
    the builder in check_idx)."""
    import struct
    ptrs = np.zeros(len(lens), dtype=np.int64)
    if len(lens) > 1:
        ptrs[1:] = np.cumsum(lens[:-1].astype(np.int64) * ITEM)
    with open(path, "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 4))
        f.write(struct.pack("<Q", len(lens)) + struct.pack("<Q", len(lens) + 1))
        f.write(lens.tobytes() + ptrs.tobytes() + np.arange(len(lens) + 1, dtype=np.int64).tobytes())


def check_idx(work: Path) -> Optional[str]:
    """Writes a small dataset with megatron-core's own builder and compares
    its .idx bytes to write_idx's: the bulk writer is only a faster path to
    the same file."""
    try:
        import torch
        from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder
    except Exception as e:  # noqa: BLE001 - any import failure is reported
        return f"megatron-core import failed: {e!r}"
    lens = np.array([5, 9, 2], dtype=np.int32)
    b = IndexedDatasetBuilder(str(work / "chk.bin"), dtype=np.int32)
    for n in lens:
        b.add_item(torch.zeros(int(n), dtype=torch.int32))
        b.end_document()
    b.finalize(str(work / "chk.idx"))
    write_idx(str(work / "mine.idx"), lens)
    same = (work / "chk.idx").read_bytes() == (work / "mine.idx").read_bytes()
    return None if same else "index bytes differ from megatron-core's builder"


_REC_CACHE: dict = {}


def _records(tag: str, work: Path):
    key = (tag, str(work))
    if key not in _REC_CACHE:
        _REC_CACHE[key] = _open_records(tag, work)
    return _REC_CACHE[key]


def _open_records(tag: str, work: Path):
    mm = np.memmap(work / f"megatron_{tag}.bin", dtype=np.int32, mode="r")
    if tag == "w1":
        m = mm.reshape(-1, SEQ)
        return len(m), (lambda i: m[i])
    offs = np.load(work / "w2_offsets.npy")
    return len(offs) - 1, (lambda i: mm[offs[i]:offs[i + 1]])


def _litdata_items(arg):
    tag, work, lo, hi = arg
    _, get = _records(tag, Path(work))
    for i in range(lo, hi):
        yield np.array(get(i))


def write_mds(work: Path, tag: str) -> None:
    stub_streaming_imports()
    from streaming import MDSWriter
    n, get = _records(tag, work)
    col = f"ndarray:int32:{SEQ}" if tag == "w1" else "ndarray:int32"
    with MDSWriter(out=str(work / f"mds_{tag}"), columns={"tokens": col}) as w:
        for i in range(n):
            w.write({"tokens": np.array(get(i))})


def write_litdata(work: Path, tag: str) -> None:
    from litdata import optimize
    n, _ = _records(tag, work)
    optimize(fn=_litdata_items, inputs=[(tag, str(work), i, min(n, i + 1024)) for i in range(0, n, 1024)],
             output_dir=str(work / f"litdata_{tag}"), chunk_bytes="64MB", num_workers=2,
             mode="overwrite")


def write_wds(work: Path, tag: str) -> None:
    import webdataset as wds
    n, get = _records(tag, work)
    d = work / f"wds_{tag}"
    d.mkdir(exist_ok=True)
    with wds.ShardWriter(str(d / "shard-%06d.tar"), maxsize=64 << 20, maxcount=10 ** 7,
                         verbose=0) as w:
        for i in range(n):
            w.write({"__key__": f"{i:010d}", "tok": np.array(get(i)).tobytes()})


def ingest_pool(pool: str, work: Path, size: int) -> None:
    from cxl_dataloader import CXLMemoryPool
    p = CXLMemoryPool(pool, create=True, size=size)
    p.ingest("w1", work / "megatron_w1.bin", format="raw", record_size=REC_BYTES, dtype="int32",
             progress=False)
    p.ingest("w2", str(work / "megatron_w2"), format="megatron", progress=False)
    p.close()


# --------------------------------------------------------------------------
# loaders: each factory returns (make_iter(run) -> iterator of batches, info)
def pack_collate(docs: list) -> Any:
    """Concatenates a batch of documents and cuts it into full rows of SEQ
    tokens; the tail shorter than a row is dropped (a stateless collate
    cannot carry it into the next batch, which may come from another
    worker)."""
    import torch
    flat = np.concatenate([np.asarray(d).reshape(-1) for d in docs])
    rows = len(flat) // SEQ
    return torch.from_numpy(flat[: rows * SEQ].reshape(rows, SEQ))


class MemmapFixed:
    """The map-style Dataset users write over a token file: np.memmap,
    one row per index, copied into a tensor."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.mm = np.memmap(path, dtype=np.int32, mode="r").reshape(-1, SEQ)

    def __len__(self) -> int:
        return len(self.mm)

    def __getitem__(self, i: int):
        import torch
        return torch.from_numpy(np.array(self.mm[i]))


class MemmapVar:
    def __init__(self, path: str, offs: str) -> None:
        self.mm = np.memmap(path, dtype=np.int32, mode="r")
        self.offs = np.load(offs)

    def __len__(self) -> int:
        return len(self.offs) - 1

    def __getitem__(self, i: int):
        return np.array(self.mm[self.offs[i]:self.offs[i + 1]])


def _docs_per_batch(meta: dict) -> int:
    return max(1, round(BATCH * SEQ / meta["mean_doc_tokens"]))


def torch_loader(ds, tag: str, meta: dict, workers: int):
    import torch
    kw: dict = dict(num_workers=workers, drop_last=True)
    if workers:
        kw["prefetch_factor"] = 2
    if tag == "w1":
        kw.update(batch_size=BATCH)
    else:
        kw.update(batch_size=_docs_per_batch(meta), collate_fn=pack_collate)

    def make(run: int):
        g = torch.Generator()
        g.manual_seed(run)
        return iter(torch.utils.data.DataLoader(ds, shuffle=True, generator=g, **kw))
    return make


def build(system: str, tag: str, work: Path, pool: str, meta: dict):
    """Returns (make_iter, config text)."""
    if system == "cxl_fast":
        from cxl_dataloader import CXLDataLoader, CXLDataset
        # the project's recommended set-up for random access: records on
        # 2 MiB pages (CXLDataset(hugepages=True), once per pool)
        ds = CXLDataset(pool, tag, hugepages=True)

        def make(run: int):
            kw = dict(seq_len=SEQ, collate="pack") if tag == "w2" else {}
            return iter(CXLDataLoader(ds, batch_size=BATCH, shuffle=True, threads=2,
                                      drop_last=True, seed=run, **kw))
        return make, "CXLDataLoader(CXLDataset, batch_size=32, shuffle=True, threads=2" + \
            (", seq_len=2048, collate='pack')" if tag == "w2" else ")")
    if system.startswith("cxl_torch_w"):
        from cxl_dataloader import CXLDataset
        w = int(system[-1])
        return torch_loader(CXLDataset(pool, tag), tag, meta, w), \
            f"torch DataLoader(CXLDataset, num_workers={w}, shuffle=True)"
    if system.startswith("memmap_w"):
        w = int(system[-1])
        ds = MemmapFixed(str(work / "megatron_w1.bin")) if tag == "w1" else \
            MemmapVar(str(work / "megatron_w2.bin"), str(work / "w2_offsets.npy"))
        return torch_loader(ds, tag, meta, w), \
            f"torch DataLoader(np.memmap Dataset, num_workers={w}, shuffle=True)"
    if system == "megatron":
        from megatron.core.datasets.indexed_dataset import IndexedDataset
        ds = IndexedDataset(str(work / f"megatron_{tag}"), mmap=True)
        return torch_loader(ds, tag, meta, 2), \
            "torch DataLoader(megatron IndexedDataset(prefix, mmap=True), num_workers=2, shuffle=True)"
    nw = 0 if system.endswith("_w0") else 2
    system = system.removesuffix("_w0")
    if system == "mosaic":
        stub_streaming_imports()
        from streaming import StreamingDataLoader, StreamingDataset
        bs = BATCH if tag == "w1" else _docs_per_batch(meta)

        def make(run: int):
            ds = StreamingDataset(local=str(work / f"mds_{tag}"), shuffle=True, batch_size=bs,
                                  shuffle_seed=run + 1)
            kw: dict = dict(batch_size=bs, num_workers=nw, drop_last=True)
            if tag == "w2":
                kw["collate_fn"] = lambda xs: pack_collate([x["tokens"] for x in xs])
            else:
                kw["collate_fn"] = _mosaic_collate
            return _keep(iter(StreamingDataLoader(ds, **kw)), ds)
        return make, ("StreamingDataset(local=MDS dir, shuffle=True, shuffle_algo='py1e' "
                      "(default), batch_size) + StreamingDataLoader(num_workers=%d)" % nw)
    if system == "litdata":
        from litdata import StreamingDataLoader, StreamingDataset
        bs = BATCH if tag == "w1" else _docs_per_batch(meta)

        def make(run: int):
            ds = StreamingDataset(str(work / f"litdata_{tag}"), shuffle=True, seed=run + 1,
                                  drop_last=True)
            kw: dict = dict(batch_size=bs, num_workers=nw)
            if tag == "w2":
                kw["collate_fn"] = pack_collate
            return iter(StreamingDataLoader(ds, **kw))
        return make, ("StreamingDataset(optimize() output, shuffle=True) + "
                      "StreamingDataLoader(num_workers=%d); optimize(chunk_bytes='64MB')" % nw)
    if system == "wds":
        import webdataset as wds
        urls = sorted(str(p) for p in (work / f"wds_{tag}").glob("shard-*.tar"))
        bs = BATCH if tag == "w1" else _docs_per_batch(meta)

        def make(run: int):
            import torch
            ds = (wds.WebDataset(urls, shardshuffle=len(urls), seed=run + 1,
                                 empty_check=False)
                  .shuffle(1000, seed=run + 1)
                  .map(lambda s: np.frombuffer(s["tok"], dtype=np.int32))
                  .batched(bs, collation_fn=(pack_collate if tag == "w2" else
                                             (lambda xs: torch.from_numpy(np.stack(xs)))),
                           partial=False))
            return iter(wds.WebLoader(ds, batch_size=None, num_workers=nw))
        return make, ("WebDataset(tar shards, shardshuffle, .shuffle(1000)) .batched() + "
                      "WebLoader(num_workers=%d); sequential reads" % nw)
    raise ValueError(system)


def _mosaic_collate(xs: list):
    import torch
    return torch.from_numpy(np.stack([x["tokens"] for x in xs]))


class _keep:
    """An iterator that keeps an object (a dataset holding shared memory)
    alive as long as the iteration runs."""

    def __init__(self, it, obj) -> None:
        self.it, self.obj = it, obj

    def __iter__(self):
        return self

    def __next__(self):
        return next(self.it)


def stub_streaming_imports() -> None:
    """mosaicml-streaming imports torchvision and transformers at package
    import for its vision/text dataset classes, which MDS token data never
    uses. torchvision has no wheel for this CPU-only torch here; where it is
    missing, empty stand-ins let `import streaming` succeed."""
    try:
        import torchvision  # noqa: F401
        return
    except Exception:  # noqa: BLE001
        pass
    import torch
    tv = types.ModuleType("torchvision")
    dsm = types.ModuleType("torchvision.datasets")
    tr = types.ModuleType("torchvision.transforms")
    fn = types.ModuleType("torchvision.transforms.functional")

    class VisionDataset(torch.utils.data.Dataset):
        pass
    dsm.VisionDataset = VisionDataset
    for n in ("CIFAR10", "ImageFolder", "CocoDetection"):
        setattr(dsm, n, VisionDataset)
    fn.to_tensor = lambda x: x
    tv.datasets, tv.transforms, tr.functional = dsm, tr, fn
    import importlib.machinery
    for m in (tv, dsm, tr, fn):
        m.__spec__ = importlib.machinery.ModuleSpec(m.__name__, None)
    sys.modules.update({"torchvision": tv, "torchvision.datasets": dsm,
                        "torchvision.transforms": tr, "torchvision.transforms.functional": fn})


# --------------------------------------------------------------------------
# the child: one system, one workload, N runs
def batch_ids(b: Any) -> np.ndarray:
    import torch
    if isinstance(b, dict):
        b = b["tokens"]
    if isinstance(b, torch.Tensor):
        b = b.numpy()
    b = np.ascontiguousarray(np.asarray(b)[:, :2])
    return b.view(np.int64).reshape(-1)


def batch_rows(b: Any) -> int:
    if isinstance(b, dict):
        b = b["tokens"]
    return int(b.shape[0])


def child(a: argparse.Namespace) -> int:
    work = Path(a.work)
    meta = json.loads((work / "meta.json").read_text())
    res: dict = {"system": a.system, "workload": a.tag}
    try:
        make, cfg = build(a.system, a.tag, work, a.pool, meta)
    except Exception as e:  # noqa: BLE001 - recorded, not hidden
        res["error"] = f"{type(e).__name__}: {e}"
        print(json.dumps(res), flush=True)
        return 0
    res["config"] = cfg
    runs, ids_first = [], None
    for r in range(a.runs):
        raw = paired_raw(a, r) if a.system == "cxl_fast" and not a.hold else None
        t0 = time.perf_counter()
        it = make(r)
        b = next(it)
        t1 = time.perf_counter()
        ids = [batch_ids(b)] if r == 0 else None
        for _ in range(WARM):  # worker start-up and prefetch fill: not steady state
            try:
                b = next(it)
            except StopIteration:
                break
            if ids is not None:
                ids.append(batch_ids(b))
        n, nb = 0, 0
        t = t1 = time.perf_counter()
        while t - t1 < a.budget:
            try:
                b = next(it)
            except StopIteration:
                break
            n += batch_rows(b)
            nb += 1
            if ids is not None:
                ids.append(batch_ids(b))
            t = time.perf_counter()
        dt = t - t1
        if r == 0:
            pids = tree(os.getpid())
            ids_first = ids
            res["pss_kib"] = pss_kib(pids)
            res["uss_kib"] = pss_kib(pids, USS)
            res["worker_hwm_kib"] = max([rss_kib([q]) for q in pids[1:]] or [0])
        runs.append({"ttfb_s": t1 - t0, "samples": n, "seconds": dt, "batches": nb,
                     "samples_s": n / dt if dt > 0 else 0.0})
        if raw:
            runs[-1]["raw_plain_gb_s"] = raw
            runs[-1]["vs_raw"] = runs[-1]["samples_s"] * REC_BYTES / 1e9 / raw
        del it, b
    res["runs"] = runs
    # VmHWM, not ru_maxrss: ru_maxrss survives execve and would report the
    # parent's peak from before the fork
    res["peak_rss_kib"] = rss_kib([os.getpid()])
    if a.tag == "w1" and ids_first:
        res["shuffle"] = shuffle_quality(ids_first, meta["n1"])
    if a.hold:
        print(json.dumps(res), flush=True)
        sys.stdin.readline()  # the parent samples PSS of all consumers, then releases us
        return 0
    print(json.dumps(res), flush=True)
    return 0


def paired_raw(a, r: int) -> Optional[float]:
    """One round of the raw limit right before fast-path run r: on a shared
    machine the load moves between minutes, so the fast path's share of the
    raw limit is taken per pair (median of per-pair ratios)."""
    cmd = [str(REPO / "build" / "cxlpool"), "bench", "gather", a.pool, a.tag, "--batch",
           str(BATCH), "--threads", "2", "--rounds", "1", "--seed", str(100 + r), "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    j = last_json(p.stdout)
    return j["results"][0]["plain_gb_s"] if j else None


def shuffle_quality(batches: list[np.ndarray], n: int) -> dict:
    distinct = [len(np.unique(b // SHARD_RECS)) for b in batches if len(b)]
    ids = np.concatenate(batches)
    rho = spearman(np.arange(len(ids)), ids)
    shards = -(-n // SHARD_RECS)
    k = len(batches[0])
    ideal = shards * (1 - (1 - 1 / shards) ** k)
    return {"distinct_shards_per_batch": float(np.mean(distinct)), "spearman": rho,
            "ideal_distinct": ideal, "observed": int(len(ids)),
            "unique_fraction": float(len(np.unique(ids)) / max(1, len(ids)))}


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    rx = np.argsort(np.argsort(x)).astype(np.float64)
    ry = np.argsort(np.argsort(y)).astype(np.float64)
    rx -= rx.mean()
    ry -= ry.mean()
    d = np.sqrt((rx * rx).sum() * (ry * ry).sum())
    return float((rx * ry).sum() / d) if d else 0.0


# --------------------------------------------------------------------------
# the parent
SYSTEMS_W1 = ["cxl_fast", "cxl_torch_w0", "cxl_torch_w1", "cxl_torch_w2", "memmap_w0",
              "memmap_w1", "memmap_w2", "megatron", "mosaic", "mosaic_w0", "litdata",
              "litdata_w0", "wds", "wds_w0"]
SYSTEMS_W2 = ["cxl_fast", "cxl_torch_w2", "memmap_w2", "megatron", "mosaic", "litdata", "wds"]
SYSTEMS_W3 = ["cxl_fast", "memmap_w0", "megatron", "mosaic", "litdata", "wds"]
LABEL = {"cxl_fast": "cxl_dataloader fast path", "cxl_torch_w0": "CXLDataset + torch DL, 0 workers",
         "cxl_torch_w1": "CXLDataset + torch DL, 1 worker", "cxl_torch_w2": "CXLDataset + torch DL, 2 workers",
         "memmap_w0": "np.memmap + torch DL, 0 workers", "memmap_w1": "np.memmap + torch DL, 1 worker",
         "memmap_w2": "np.memmap + torch DL, 2 workers", "megatron": "Megatron IndexedDataset + torch DL (2 w)",
         "mosaic": "MosaicML StreamingDataset (MDS), 2 w", "litdata": "LitData StreamingDataset, 2 w",
         "wds": "WebDataset (sequential), 2 w", "mosaic_w0": "MosaicML StreamingDataset (MDS), 0 w",
         "litdata_w0": "LitData StreamingDataset, 0 w", "wds_w0": "WebDataset (sequential), 0 w", "raw": "raw limit: C memcpy gather",
         "raw_pool": "C gather through the pool (cxlp_store_read)"}
PEERS = ["memmap_w0", "memmap_w1", "memmap_w2", "megatron", "mosaic", "mosaic_w0", "litdata",
         "litdata_w0", "wds", "wds_w0"]


def spawn(a, system: str, tag: str, work: Path, runs: int, budget: float, hold: bool = False,
          env: Optional[dict] = None) -> subprocess.Popen:
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", system, "--tag", tag,
           "--work", str(work), "--pool", a.pool_spec, "--runs", str(runs), "--budget", str(budget)]
    if hold:
        cmd.append("--hold")
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def last_json(text: str) -> Optional[dict]:
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def run_one(a, system: str, tag: str, work: Path, log) -> dict:
    t0 = time.perf_counter()
    p = spawn(a, system, tag, work, a.runs, a.budget)
    try:
        out, err = p.communicate(timeout=a.child_timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        res = {"system": system, "workload": tag, "error": f"timed out after {a.child_timeout} s"}
        log(f"  {system:14s} TIMEOUT")
        return res
    res = last_json(out) or {"system": system, "workload": tag,
                             "error": f"exit {p.returncode}: {err.strip().splitlines()[-1:] }"}
    if "error" in res and p.returncode:
        res["stderr_tail"] = err[-800:]
    summarize(res)
    log(f"  {system:14s} {fmt_res(res)}  ({time.perf_counter() - t0:.0f} s)")
    return res


def summarize(res: dict, bytes_per_sample: int = REC_BYTES) -> None:
    runs = res.get("runs")
    if not runs:
        return
    s = [r["samples_s"] for r in runs]
    res["samples_s"] = {"median": statistics.median(s), "min": min(s), "max": max(s)}
    res["gb_s"] = {k: v * bytes_per_sample / 1e9 for k, v in res["samples_s"].items()}
    res["ttfb_s"] = {"first": runs[0]["ttfb_s"], "median": statistics.median(r["ttfb_s"] for r in runs)}
    pr = [r["vs_raw"] for r in runs if "vs_raw" in r]
    if pr:
        res["paired_vs_raw"] = {"median": statistics.median(pr), "min": min(pr), "max": max(pr)}


def fmt_res(res: dict) -> str:
    if "error" in res:
        return "ERROR " + res["error"][:200]
    return (f"{res['samples_s']['median']:10.0f} samples/s  {res['gb_s']['median']:6.2f} GB/s"
            f"  ttfb {res['ttfb_s']['first']:.2f} s")


def raw_limit(a, tag: str, log) -> dict:
    cx = REPO / "build" / "cxlpool"
    cmd = [str(cx), "bench", "gather", a.pool_spec, tag, "--batch", str(BATCH), "--threads", "2",
           "--rounds", str(a.runs), "--hugepages", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True)
    j = last_json(p.stdout)
    if not j:
        return {"error": f"cxlpool bench failed: {p.stderr.strip()[-300:]}", "command": " ".join(cmd)}
    r = j["results"][0]
    p4 = subprocess.run(cmd + ["--no-thp"], capture_output=True, text=True)
    j4 = last_json(p4.stdout)
    plain4k = j4["results"][0]["plain_gb_s"] if j4 else None
    log(f"  raw            plain {r['plain_gb_s']:.2f} GB/s, pool {r['pool_gb_s']:.2f} GB/s, "
        f"plain on 4 KiB pages {plain4k or 0:.2f} GB/s")
    return {"plain_4k_gb_s": plain4k, "json_4k": j4,"command": "build/cxlpool " + " ".join(cmd[1:]), "json": j,
            "plain_gb_s": r["plain_gb_s"], "pool_gb_s": r["pool_gb_s"],
            "plain_records_s": r["plain_records_s"], "pool_records_s": r["pool_records_s"]}


def consumers(a, system: str, work: Path, log) -> dict:
    """4 consumer processes of one system at once: throughput summed, PSS
    summed over all 4 process trees while all are alive."""
    procs = [spawn(a, system, "w1", work, 1, a.budget * 2, hold=True) for _ in range(4)]
    outs, err = [], None
    for p in procs:
        line = p.stdout.readline()
        j = last_json(line)
        if j is None:
            err = (p.stderr.read() if p.poll() is not None else "")[-300:] or "no result"
        outs.append(j)
    pids = [q for p in procs for q in tree(p.pid)]
    pss = pss_kib(pids)
    uss = pss_kib(pids, USS)
    for p in procs:
        try:
            p.stdin.write("\n")
            p.stdin.flush()
        except OSError:
            pass
    for p in procs:
        try:
            p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
    if err or any(o is None or "error" in o for o in outs):
        e = err or next(o["error"] for o in outs if o and "error" in o)
        log(f"  {system:14s} ERROR {e[:200]}")
        return {"system": system, "error": e}
    tot = sum(o["runs"][0]["samples_s"] for o in outs)
    res = {"system": system, "samples_s_total": tot, "gb_s_total": tot * REC_BYTES / 1e9,
           "pss_total_kib": pss, "uss_total_kib": uss, "per_consumer_pss_kib": [o.get("pss_kib") for o in outs],
           "peak_rss_kib": [o["peak_rss_kib"] for o in outs]}
    log(f"  {system:14s} 4 consumers: {tot:10.0f} samples/s, total PSS {pss / 1024:.0f} MiB, "
        f"USS {uss / 1024:.0f} MiB")
    return res


def du(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def machine() -> dict:
    def sh(c: str) -> str:
        try:
            return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
        except OSError:
            return "?"
    model = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
    return {"cpu": model, "cpus": os.cpu_count(), "free": sh("free -m"), "uname": sh("uname -srvmo"),
            "loadavg": sh("cat /proc/loadavg"), "python": platform.python_version(),
            "thp": sh("cat /sys/kernel/mm/transparent_hugepage/enabled"),
            "shmem_thp": sh("cat /sys/kernel/mm/transparent_hugepage/shmem_enabled")}


def versions() -> dict:
    import importlib.metadata as md
    out = {}
    for n in ("torch", "numpy", "megatron-core", "mosaicml-streaming", "litdata", "webdataset",
              "matplotlib"):
        try:
            out[n] = md.version(n)
        except md.PackageNotFoundError:
            out[n] = None
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description="cxl_dataloader vs peers, one run")
    ap.add_argument("--quick", action="store_true", help="small datasets, short runs")
    ap.add_argument("--workdir", default=None, help="where peers' files go (default /tmp)")
    ap.add_argument("--out", default=str(REPO / "docs" / "benchmarks"),
                    help="where the page, JSON and PNG go")
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--budget", type=float, default=None, help="seconds per timed run")
    ap.add_argument("--only", default=None, help="comma list of systems (debugging)")
    ap.add_argument("--keep", action="store_true", help="keep the data and pool")
    ap.add_argument("--replot", action="store_true",
                    help="redraw the PNG and page from the JSON in --out, measuring nothing")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tag", default="w1", help=argparse.SUPPRESS)
    ap.add_argument("--work", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--pool", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--hold", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--child-timeout", type=float, default=300, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:
        a.system = a.child
        return child(a)

    import warnings
    warnings.filterwarnings("ignore")
    if a.replot:
        out = Path(a.out)
        res = json.loads((out / "peers.json").read_text())
        chart(res, out / "peers.png")
        (out / "peers.md").write_text(page(res))
        return 0
    fixed_mib, var_mib = (64, 32) if a.quick else (512, 256)
    a.budget = a.budget or (0.4 if a.quick else 1.0)
    a.runs = max(5, a.runs)
    started = time.time()
    argv = "python3 bench/run_peers.py" + (" " + " ".join(sys.argv[1:]) if sys.argv[1:] else "")
    work = Path(a.workdir or "/tmp") / f"cxlp-peers-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    work.mkdir(parents=True)
    pool = f"peers-{os.getpid()}"
    a.pool_spec = f"shm:{pool}"
    logs: list[str] = []

    def log(s: str) -> None:
        print(s, flush=True)
        logs.append(s)

    res: dict = {"command": argv, "quick": a.quick, "date": datetime.datetime.now(
        datetime.timezone.utc).isoformat(timespec="seconds"), "machine": machine(),
        "versions": versions(), "batch": BATCH, "seq_len": SEQ, "shard_records": SHARD_RECS,
        "runs": a.runs, "budget_s": a.budget, "unavailable": {}}
    only = set(a.only.split(",")) if a.only else None
    try:
        log(f"data: {fixed_mib} MiB fixed, {var_mib} MiB variable, in {work}")
        meta = make_data(work, fixed_mib, var_mib, log)
        chk = check_idx(work)
        meta["megatron_idx_check"] = chk or "identical to megatron-core IndexedDatasetBuilder"
        (work / "meta.json").write_text(json.dumps(meta))
        res["data"] = meta
        t0 = time.perf_counter()
        ingest_pool(pool, work, (fixed_mib + var_mib + 64) << 20)
        meta["pool_ingest_s"] = time.perf_counter() - t0
        writers = {"mosaic": write_mds, "litdata": write_litdata, "wds": write_wds}
        footprint = {"pool (shm)": du(Path(f"/dev/shm/cxlp.{pool}")),
                     "megatron .bin/.idx": sum(du(p) for p in work.glob("megatron_w*"))}
        for name, fn in writers.items():
            if only and not any(x.startswith(name) for x in only):
                continue
            for tag in ("w1", "w2"):
                t0 = time.perf_counter()
                try:
                    fn(work, tag)
                    log(f"  wrote {name} {tag} in {time.perf_counter() - t0:.1f} s")
                except Exception as e:  # noqa: BLE001 - recorded
                    res["unavailable"][name] = f"writing its format failed: {type(e).__name__}: {e}"
                    log(f"  {name}: cannot write: {e!r}")
                    break
            d = {"mosaic": "mds_w", "litdata": "litdata_w", "wds": "wds_w"}[name]
            footprint[name] = sum(du(p) for p in work.glob(d + "*"))
        res["footprint_bytes"] = footprint

        for tag, systems in (("w1", SYSTEMS_W1), ("w2", SYSTEMS_W2)):
            log(f"workload {tag}")
            res[f"raw_{tag}"] = raw_limit(a, tag, log)
            out = {}
            for s in systems:
                if only and s not in only:
                    continue
                if s.removesuffix("_w0") in res["unavailable"]:
                    continue
                out[s] = run_one(a, s, tag, work, log)
            res[tag] = out
        log("workload w3 (4 consumers)")
        res["w3"] = {}
        for s in SYSTEMS_W3:
            if (only and s not in only) or s.removesuffix("_w0") in res["unavailable"]:
                continue
            res["w3"][s] = consumers(a, s, work, log)
    finally:
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)
            try:
                from cxl_dataloader import CXLMemoryPool
                CXLMemoryPool.destroy(pool)
            except Exception:  # noqa: BLE001
                pass
            clean_streaming_shm()
            try:
                os.rmdir("/tmp/chunks")  # litdata's default cache dir, only if left empty
            except OSError:
                pass
    res["wall_s"] = time.time() - started
    res["log"] = logs
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "peers.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    chart(res, out / "peers.png")
    (out / "peers.md").write_text(page(res))
    log(f"wrote {out}/peers.{{md,json,png}} in {res['wall_s']:.0f} s")
    return 0


def clean_streaming_shm() -> None:
    try:
        stub_streaming_imports()
        from streaming.base.util import clean_stale_shared_memory
        clean_stale_shared_memory()
    except Exception:  # noqa: BLE001
        pass


# --------------------------------------------------------------------------
# report
def _med(r: dict) -> Optional[float]:
    return r["samples_s"]["median"] if r and "samples_s" in r else None


def ratios(res: dict, tag: str) -> dict:
    rows = res.get(tag, {})
    fast = _med(rows.get("cxl_fast", {}))
    raw = res.get(f"raw_{tag}", {})
    out: dict = {}
    if fast and "plain_gb_s" in raw:
        out["fast_vs_raw"] = fast * REC_BYTES / 1e9 / raw["plain_gb_s"]
    if "paired_vs_raw" in rows.get("cxl_fast", {}):
        out["fast_vs_raw_paired"] = rows["cxl_fast"]["paired_vs_raw"]
    peers = {s: _med(rows[s]) for s in PEERS if s in rows and _med(rows[s])}
    if fast and peers:
        out["fast_vs_peer"] = {s: fast / v for s, v in peers.items()}
        best = max(peers, key=peers.get)
        out["best_peer"] = best
        out["fast_vs_best_peer"] = fast / peers[best]
    if fast and _med(rows.get("memmap_w2", {})):
        out["fast_vs_memmap_w2"] = fast / _med(rows["memmap_w2"])
    return out


def chart(res: dict, path: Path) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception as e:  # noqa: BLE001
        res["chart_error"] = repr(e)
        return
    tags = [t for t in ("w1", "w2") if res.get(t)]
    fig, axes = plt.subplots(len(tags), 1, figsize=(10, 4.8 * len(tags)), squeeze=False)
    titles = {"w1": "Fixed 2048-token int32 records (8 KiB), full shuffle, batch 32",
              "w2": "Variable documents packed into 2048-token rows"}
    for ax, tag in zip(axes[:, 0], tags):
        rows = [(s, r) for s, r in res[tag].items() if "gb_s" in r]
        names = [LABEL[s] for s, _ in rows]
        med = [r["gb_s"]["median"] for _, r in rows]
        lo = [r["gb_s"]["median"] - r["gb_s"]["min"] for _, r in rows]
        hi = [r["gb_s"]["max"] - r["gb_s"]["median"] for _, r in rows]
        colors = ["#1f77b4" if s.startswith("cxl") else ("#aaaaaa" if s.startswith("wds") else "#ff7f0e")
                  for s, _ in rows]
        y = np.arange(len(rows))
        ax.barh(y, med, xerr=[lo, hi], color=colors, capsize=3)
        ax.set_xscale("log")
        ax.set_yticks(y, names)
        ax.invert_yaxis()
        for yi, m, h in zip(y, med, hi):
            ax.text((m + h) * 1.15, yi, f"{m:.2f}", va="center", fontsize=8)
        raw = res.get(f"raw_{tag}", {})
        if "plain_gb_s" in raw:
            ax.axvline(raw["plain_gb_s"], color="red", ls="--",
                       label=f"raw limit: C memcpy gather, 2 threads ({raw['plain_gb_s']:.2f} GB/s)")
            ax.legend(loc="lower right", fontsize=8)
        ax.set_xlabel("GB/s delivered to the training loop, log scale (median of runs; whiskers: min..max)")
        ax.set_title(titles[tag], fontsize=10)
    fig.suptitle("cxl_dataloader vs peers: throughput per system "
                 "(blue: this project, orange: peers, grey: sequential reader)", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def _f(v: Optional[float], spec: str = ".2f") -> str:
    return "-" if v is None else format(v, spec)


def page(res: dict) -> str:
    m = res["machine"]
    L: list[str] = []
    L.append("# Benchmarks: cxl_dataloader side by side with peers\n")
    L.append("Generated by `bench/run_peers.py`; do not edit by hand. Raw data: "
             "[peers.json](peers.json); chart: "
             "[peers.png](peers.png).\n")
    L.append(f"Command: `{res['command']}` ({res['date']}, {res['wall_s']:.0f} s wall"
             f"{', --quick: small datasets, short runs' if res['quick'] else ''}).\n")
    L.append("![throughput per system](peers.png)\n")
    L.append("## Machine\n")
    L.append(f"- CPU: {m['cpu']}, {m['cpus']} CPUs; `uname`: {m['uname']}; Python {m['python']}")
    L.append(f"- load average at start: {m['loadavg']} (the machine is shared with other builds)")
    L.append(f"- THP: `{m['thp']}`, shmem THP: `{m['shmem_thp']}`")
    L.append("- `free -m`:\n")
    L += ["      " + line for line in m["free"].splitlines()]
    L.append("")
    L.append("Versions: " + ", ".join(f"{k} {v or 'not installed'}" for k, v in res["versions"].items())
             + " (pinned in the `bench` extra of pyproject.toml).\n")
    d = res.get("data", {})
    L.append("## Data\n")
    L.append(f"- w1: {d.get('n1')} records of 2048 int32 tokens (8 KiB), "
             f"{d.get('n1', 0) * REC_BYTES / 2**20:.0f} MiB.")
    L.append(f"- w2: {d.get('n2')} documents, {d.get('tokens2', 0) * ITEM / 2**20:.0f} MiB of int32 "
             f"tokens, byte sizes log-normal (median 2 KiB, sigma 1) clipped to "
             f"{d.get('doc_bytes_min')} B .. {d.get('doc_bytes_max')} B, mean "
             f"{d.get('mean_doc_tokens', 0):.0f} tokens; packed into rows of 2048 tokens.")
    L.append("- Every record/document starts with its id as int64, so delivered order is read "
             "from the data itself.")
    L.append("- The pool is a `shm` pool (tmpfs, emulated CXL); peers' files are written to "
             "`/tmp` once and read from the page cache (warm: all written in the same run, "
             "RAM is ample), so no system reads a disk.")
    L.append(f"- Megatron .bin/.idx: written in bulk; index check: {d.get('megatron_idx_check')}.")
    fp = res.get("footprint_bytes", {})
    if fp:
        L.append("- Bytes each system stores (w1 + w2): " +
                 ", ".join(f"{k} {v / 2**20:.0f} MiB" for k, v in fp.items()) + ".")
    L.append("")
    L.append("## Set-up\n")
    L.append("The C library, the CLI and the extension, built in the tree "
             "(`cmake -S . -B build -G Ninja -DCXLP_PYTHON=ON && ninja -C build && "
             "cp build/_core*.so python/cxl_dataloader/`), then the peers at the versions of the "
             "`bench` extra. `pip install .[bench]` would let mosaicml-streaming downgrade numpy "
             "(it declares numpy<2.2) and pull a CUDA torchvision/torch, so this page was made "
             "with the peers installed without their dependency resolution, next to torch "
             "2.13.0+cpu and numpy 2.4.6:\n")
    L.append("    pip install --no-deps megatron-core==0.16.1 mosaicml-streaming==0.13.0 \\")
    L.append("        litdata==0.2.76 webdataset==1.0.2 matplotlib==3.11.2")
    L.append("    pip install --no-deps contourpy cycler fonttools kiwisolver pillow pyparsing \\")
    L.append("        python-dateutil braceexpand lightning-utilities xxhash zstd brotli catalogue \\")
    L.append("        python-snappy cramjam tifffile obstore")
    L.append("    pip install transformers==5.23.0 -c <(printf 'torch==2.13.0+cpu\\nnumpy==2.4.6\\n')\n")
    L.append("mosaicml-streaming imports torchvision at package import (for its image datasets); "
             "PyPI's torchvision wheel for torch 2.13 is built against CUDA torch and does not load "
             "next to the CPU-only torch here, so where torchvision is missing the harness puts "
             "empty stand-in modules in its place before `import streaming` (MDS token data never "
             "touches them).\n")
    L.append("## How each system is configured\n")
    L.append("Each peer is set up the way its own documentation shows for data that is "
             "already local:\n")
    L.append("- **raw limit**: `cxlpool bench gather` in the same run: a seeded random "
             "permutation of the same records gathered by `memcpy` in C (2 threads, batch 32) from a "
             "private anonymous copy (THP). The same command reports the C gather through the pool.")
    L.append("- **cxl_dataloader fast path**: `CXLDataLoader(CXLDataset(pool, name, hugepages=True), "
             "batch_size=32, shuffle=True, threads=2)` (hugepages: the pool's records moved onto 2 MiB "
             "pages once, as docs/python.md recommends for random access); w2 adds `seq_len=2048, collate='pack'` (C packs documents "
             "into full rows, carrying the remainder into the next row).")
    L.append("- **CXLDataset under torch's DataLoader**: zero-copy tensors, default collate (w1) "
             "or the pack collate below (w2), `shuffle=True`, 0/1/2 workers, prefetch_factor 2.")
    L.append("- **np.memmap + torch DataLoader**: the map-style Dataset users write "
             "(`torch.from_numpy(np.array(mm[i]))`), `shuffle=True`, 0/1/2 workers.")
    L.append("- **Megatron-core** `IndexedDataset(prefix, mmap=True)` (its reader over its "
             "own .bin/.idx format) under torch's DataLoader, `shuffle=True`, 2 workers. "
             "GPTDataset-style packing (document/sample/shuffle index building) is out of scope: "
             "w2 reads documents and packs them in the collate.")
    L.append("- **MosaicML Streaming**: shards written by its `MDSWriter` (column "
             "`ndarray:int32:2048`, w2 `ndarray:int32`; default `size_limit` 64 MiB, no compression); "
             "read with `StreamingDataset(local=DIR, shuffle=True, batch_size=B)` (local only: "
             "no `remote`, as its docs say for data already on local disk; default "
             "`shuffle_algo='py1e'`, default `shuffle_block_size`) and `StreamingDataLoader(num_workers=2)`.")
    L.append("- **LitData**: written by its `optimize(fn, inputs, output_dir, chunk_bytes='64MB', "
             "num_workers=2)`; read with `StreamingDataset(output_dir, shuffle=True)` and "
             "`StreamingDataLoader(batch_size=B, num_workers=2)`.")
    L.append("- **WebDataset** (sequential by design): tar shards written by `ShardWriter` "
             "(maxsize 64 MiB, raw `.tok` bytes, decoded by `np.frombuffer`); "
             "`WebDataset(urls, shardshuffle=N).shuffle(1000).batched(B)` under "
             "`WebLoader(batch_size=None, num_workers=2)`. Its shuffle is a 1000-sample buffer "
             "over shuffled shards, so it is not a full shuffle: compare its throughput with care.")
    L.append("- **w2 packing for peers**: batches of "
             f"{max(1, round(BATCH * SEQ / d['mean_doc_tokens'])) if d.get('mean_doc_tokens') else '-'} "
             "documents (about 32 rows' worth) go through a collate that concatenates them "
             "and cuts full 2048-token rows; the tail shorter than a row is dropped (a stateless "
             "collate cannot carry it across batches). Samples/s counts rows.")
    L.append(f"- Timing: {res['runs']} runs per system, each a fresh iterator (new shuffle seed); "
             f"time to first batch is measured from building the iterator; samples/s counts "
             f"the batches after the first for {res['budget_s']} s or to the end of the epoch. "
             "Each system runs in its own process.")
    L.append("")
    for tag, title in (("w1", "Workload 1: fixed 8 KiB records, full shuffle"),
                       ("w2", "Workload 2: variable documents packed into 2048-token rows")):
        rows = res.get(tag)
        if not rows:
            continue
        raw = res.get(f"raw_{tag}", {})
        fast = _med(rows.get("cxl_fast", {}))
        L.append(f"## {title}\n")
        if "plain_gb_s" in raw:
            L.append(f"Raw limit (`{raw['command']}`): plain memcpy gather "
                     f"**{raw['plain_gb_s']:.2f} GB/s** ({raw['plain_records_s']:.0f} records/s); "
                     f"the same gather through the pool {raw['pool_gb_s']:.2f} GB/s; "
                     f"plain memcpy from a copy on 4 KiB pages (`--no-thp`) "
                     f"{_f(raw.get('plain_4k_gb_s'))} GB/s. "
                     + ("(w2's limit gathers whole documents, not packed rows: GB/s compare, "
                        "samples/s do not.)" if tag == "w2" else "") + "\n")
        else:
            L.append(f"Raw limit: not measured: {raw.get('error')}\n")
        hdr = "| system | samples/s median (min..max) | GB/s | % of raw limit | fast path x | TTFB first / median s | peak RSS MiB (main / largest worker) | PSS MiB (all processes) |"
        if tag == "w1":
            hdr += " distinct shards/batch | Spearman |"
        L.append(hdr)
        L.append("|" + "---|" * (hdr.count("|") - 1))
        for s, r in rows.items():
            if "error" in r:
                L.append(f"| {LABEL[s]} | could not run: {r['error'][:300]} |")
                continue
            ss, g = r["samples_s"], r["gb_s"]
            pct = 100 * g["median"] / raw["plain_gb_s"] if "plain_gb_s" in raw else None
            x = fast / ss["median"] if fast and ss["median"] else None
            line = (f"| {LABEL[s]} | {ss['median']:.0f} ({ss['min']:.0f}..{ss['max']:.0f}) | "
                    f"{g['median']:.2f} | {_f(pct, '.0f')}% | {'-' if s == 'cxl_fast' else _f(x, '.1f')} | "
                    f"{r['ttfb_s']['first']:.2f} / {r['ttfb_s']['median']:.2f} | "
                    f"{r['peak_rss_kib'] / 1024:.0f} / {r.get('worker_hwm_kib', 0) / 1024:.0f} | "
                    f"{r.get('pss_kib', 0) / 1024:.0f} |")
            if tag == "w1":
                sh = r.get("shuffle", {})
                line += f" {_f(sh.get('distinct_shards_per_batch'), '.1f')} | {_f(sh.get('spearman'), '.3f')} |"
            L.append(line)
        if tag == "w1":
            sh = next((r["shuffle"] for r in rows.values() if "shuffle" in r), None)
            if sh:
                L.append(f"\nShuffle quality: a shard here is {SHARD_RECS} consecutive records "
                         f"({SHARD_RECS * REC_BYTES >> 20} MiB) of storage order, the same for every "
                         f"system; a uniform shuffle gives {sh['ideal_distinct']:.1f} distinct shards "
                         "per batch of 32 and a Spearman rank correlation (output position vs "
                         "storage position, over the first run's delivered records) near 0.")
        for s in [s for s in res.get("unavailable", {})]:
            L.append(f"\n- {LABEL[s]}: not run: {res['unavailable'][s]}")
        L.append("")
    w3 = res.get("w3")
    if w3:
        L.append("## Workload 3: 4 consumer processes on one host (w1 data)\n")
        L.append("Four processes each run the same loader at once for "
                 f"{2 * res['budget_s']} s; PSS is summed over all four process trees (and their "
                 "workers) while all are alive. A shared mapping (the pool, a memmap) counts once "
                 "in total PSS, but only the pages a process touched: a loader that reads more "
                 "of the dataset in the window shows more PSS. USS (private pages only) leaves the "
                 "dataset out and shows what each loader costs per process. Page cache a peer "
                 "reads with read() is in neither, so the stored bytes above are the other half "
                 "of the memory story.\n")
        L.append("| system | samples/s (sum of 4) | GB/s | total PSS MiB | total USS MiB (private) |")
        L.append("|---|---|---|---|---|")
        for s, r in w3.items():
            if "error" in r:
                L.append(f"| {LABEL[s]} | could not run: {r['error'][:200]} | | |")
            else:
                L.append(f"| {LABEL[s]} | {r['samples_s_total']:.0f} | {r['gb_s_total']:.2f} | "
                         f"{r['pss_total_kib'] / 1024:.0f} | {r.get('uss_total_kib', 0) / 1024:.0f} |")
        L.append("")
    L.append("## Goals\n")
    r1 = ratios(res, "w1")
    goals = []
    if "fast_vs_memmap_w2" in r1:
        v = r1["fast_vs_memmap_w2"]
        goals.append(f"- fast path vs torch DataLoader + np.memmap, 2 workers (w1): **{v:.1f}x** "
                     f"(goal 10x: {'met' if v >= 10 else f'missed by {10 - v:.1f}x'})")
    if "fast_vs_best_peer" in r1:
        v = r1["fast_vs_best_peer"]
        goals.append(f"- fast path vs the best peer ({LABEL[r1['best_peer']]}) (w1): **{v:.1f}x** "
                     f"(goal 3x: {'met' if v >= 3 else f'missed by {3 - v:.1f}x'})")
    if "fast_vs_raw_paired" in r1:
        pv = r1["fast_vs_raw_paired"]
        v = pv["median"]
        goals.append(f"- fast path vs raw limit (w1), paired (one raw round right before each of "
                     f"the {res['runs']} fast-path runs, median of the per-pair ratios): "
                     f"**{100 * v:.0f}%** (pairs {100 * pv['min']:.0f}%..{100 * pv['max']:.0f}%; "
                     f"goal 80%: {'met' if v >= 0.8 else f'missed by {100 * (0.8 - v):.0f} points'}). "
                     f"Unpaired (table medians, measured minutes apart): {100 * r1.get('fast_vs_raw', 0):.0f}%")
    elif "fast_vs_raw" in r1:
        v = r1["fast_vs_raw"]
        goals.append(f"- fast path vs raw limit (w1): **{100 * v:.0f}%** "
                     f"(goal 80%: {'met' if v >= 0.8 else f'missed by {100 * (0.8 - v):.0f} points'})")
    raw1 = res.get("raw_w1", {})
    if "fast_vs_raw" in r1 and "pool_gb_s" in raw1:
        goals.append(f"  - where the gap to the raw limit sits: the C gather through the same pool "
                     f"reaches {100 * raw1['pool_gb_s'] / raw1['plain_gb_s']:.0f}% of the raw limit "
                     f"(the pool is tmpfs with shmem THP `{res['machine']['shmem_thp']}`, the raw copy is "
                     f"anonymous memory with THP `{res['machine']['thp']}`; the raw gather from a "
                     f"copy on 4 KiB pages reaches "
                     f"{100 * (raw1.get('plain_4k_gb_s') or 0) / raw1['plain_gb_s']:.0f}%), "
                     f"the fast path {100 * r1['fast_vs_raw'] * raw1['plain_gb_s'] / raw1['pool_gb_s']:.0f}% "
                     "of that C pool gather (the rest: engine hand-off and Python per batch of 32)")
    rows = res.get("w1", {})
    f_sh = rows.get("cxl_fast", {}).get("shuffle")
    m_sh = rows.get("mosaic", {}).get("shuffle")
    if f_sh and m_sh:
        ok = (f_sh["distinct_shards_per_batch"] >= m_sh["distinct_shards_per_batch"] - 0.5
              and abs(f_sh["spearman"]) <= abs(m_sh["spearman"]) + 0.02)
        goals.append(f"- shuffle quality vs MosaicML py1e: fast path {f_sh['distinct_shards_per_batch']:.1f} "
                     f"distinct shards/batch, Spearman {f_sh['spearman']:.3f}; MosaicML "
                     f"{m_sh['distinct_shards_per_batch']:.1f}, {m_sh['spearman']:.3f} "
                     f"({'no worse' if ok else 'worse'})")
    r2 = ratios(res, "w2")
    if "fast_vs_best_peer" in r2:
        goals.append(f"- w2 (packed): fast path {r2['fast_vs_best_peer']:.1f}x the best peer "
                     f"({LABEL[r2['best_peer']]})"
                     + (f", {100 * r2['fast_vs_raw']:.0f}% of the document gather limit in GB/s"
                        if "fast_vs_raw" in r2 else ""))
    L += goals or ["- not enough systems ran to evaluate the goals"]
    L.append("")
    L.append("## Reading the table\n")
    L.append("- On 2 shared CPUs every worker process competes with the main process and with "
             "other jobs (see the load average): torch DataLoader workers cost more here than they "
             "save, which is why 0 workers is often the fastest setting of a peer. On a machine "
             "with spare cores the worker rows rise; the per-sample Python work does not go away.")
    L.append("- MosaicML's MDS reader (streaming/base/format/mds/reader.py, get_sample_data) opens "
             "the shard file, seeks and reads for every sample; its iterator hands samples over "
             "through threads. Both are per-sample costs in Python.")
    L.append("- LitData shuffles chunk order and then samples within a chunk, so a batch comes "
             "from one or two 8 MiB shards (see distinct shards/batch); WebDataset's 1000-sample "
             "buffer over shuffled shards keeps output order correlated with storage order.")
    L.append("- Peers' rows in w2 include the pack collate in Python (concatenate, reshape); the "
             "fast path packs in C.")
    L.append("")
    return "\n".join(L) + "\n"


if __name__ == "__main__":
    sys.exit(main())
