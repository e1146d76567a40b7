"""Importers for what users have: Arrow and Parquet (through pyarrow, also
straight from a ``pyarrow.Table`` or a Hugging Face ``datasets.Dataset``),
WebDataset tar shards (Python's ``tarfile``, streamed, never extracted),
JSONL text through a Hugging Face ``tokenizers`` tokenizer, from any
fsspec URL (``s3://``, ``gs://``, ``http(s)://``, ``hf://``, local paths).

Every importer turns its source into batches of records held column-wise
and hands each batch to the C streaming writer in one call
(``_core.Writer.append_columns``, GIL released). No format is parsed here:
pyarrow reads Arrow and Parquet, tarfile reads tar, json reads JSON, the
tokenizers library tokenizes.

Resumable, and never partial. Each source file becomes a dataset of its own
(a *part*, named ``~<key>.<file>.<n>``: key from the dataset name and the
import's options, file from the source's path, size and modification time
or ETag) and is published when that file is done. When every file is done,
one catalog flip (``Pool.concat``) publishes the dataset as the parts'
records in source order and removes the parts; no byte is copied. A process
killed at any instant leaves the dataset absent (parts already published
stay; the half-written one is reclaimed by the pool), and a rerun skips the
files whose part it finds. One ingest per dataset and pool at a time: the
others wait on a lock on the pool's backing object (ingest_lock) and then
find the dataset there.

Memory is bounded: Parquet is read a row group at a time, Arrow IPC a
record batch at a time, tar members and JSONL lines in batches of
``batch_bytes``; a writer stages at most one shard of its smaller columns.

Pages: every column lands on 2 MiB pages where the pool's memory comes in
4 KiB pages (shm, numa), as with the C importers; ``hugepages=False``
(``--no-hugepages``) keeps them on 4 KiB pages.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import itertools
import json
import os
import queue
import re
import signal
import stat
import struct
import sys
import tarfile
import threading
from typing import Any, Callable, Iterable, Iterator, Optional, Sequence

import numpy as np

from . import _core

FORMATS = ("arrow", "parquet", "webdataset", "jsonl")
EXTENSIONS = {".parquet": "parquet", ".pq": "parquet", ".arrow": "arrow", ".feather": "arrow",
              ".tar": "webdataset", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl"}
BATCH_BYTES = 32 << 20   # records handed to the writer per call, at most about
ENCODE_BYTES = 256 << 10  # text per Tokenizer.encode_batch call
TASK_BYTES = 8 << 20      # JSONL text per tokenizer task (2 per worker in flight)


class IngestError(ValueError):
    """A source that cannot be imported: the message names the file (or
    URL), the record (row, line, tar member) and the field."""


# ------------------------------------------------------------------ sources

def _name_format(name: str) -> Optional[str]:
    """The format a file name's extension says, or None."""
    base = name.rstrip("/").split("?")[0]
    for ext, fmt in EXTENSIONS.items():
        if base.endswith(ext) or base.endswith(ext + ".gz"):
            return fmt
    if re.search(r"\.(parquet|arrow|tar|jsonl)\b", base):
        return EXTENSIONS["." + re.search(r"\.(parquet|arrow|tar|jsonl)\b", base).group(1)]
    return None


def detect_format(source: Any, storage_options: Optional[dict] = None) -> Optional[str]:
    """The format a source's type or name says, or None. A directory (a
    local path or an fsspec URL such as s3://bucket/train) says it by its
    files' extensions; files of several formats there are an IngestError."""
    if _is_arrow_object(source):
        return "arrow"
    path = os.fspath(source) if isinstance(source, (str, os.PathLike)) else ""
    fmt = _name_format(path)
    if fmt or not path or any(c in path for c in "*?["):
        return fmt
    import fsspec
    try:
        fs, p = fsspec.core.url_to_fs(path, **(storage_options or {}))
    except ValueError:  # not a URL fsspec knows: a plain file for the C importers
        return None
    if not fs.isdir(p):
        return None
    # the metadata of a Hugging Face save_to_disk directory is not data
    meta = ("state.json", "dataset_info.json", "dataset_dict.json")
    found = sorted({f for f in map(_name_format, (q for q in fs.find(p)
                                                  if q.rsplit("/", 1)[-1] not in meta)) if f})
    if len(found) > 1:
        raise IngestError(f"{path}: a directory of {' and '.join(found)} files: name one "
                          "with format=")
    return found[0] if found else None


def _is_arrow_object(x: Any) -> bool:
    t = type(x)
    return (t.__module__.startswith("pyarrow") and t.__name__ in ("Table", "RecordBatch")) \
        or (t.__module__.startswith("datasets") and t.__name__ == "Dataset")


class Source:
    """One source file: an fsspec filesystem and path, with the fingerprint
    a rerun compares (path, size, and the modification time or ETag)."""

    def __init__(self, fs: Any, path: str, info: dict) -> None:
        self.fs, self.path = fs, path
        self.size = int(info.get("size") or 0)
        stamp = [info.get(k) for k in ("ETag", "etag", "mtime", "LastModified", "last_modified",
                                        "created") if info.get(k) is not None]
        self.fingerprint = f"{fs.unstrip_protocol(path)}|{self.size}|{stamp}"

    @property
    def url(self) -> str:
        return self.fs.unstrip_protocol(self.path)

    @property
    def local(self) -> Optional[str]:
        """The path, when the file is on a local filesystem: pyarrow then
        reads it natively (no Python file object between)."""
        proto = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        return self.path if "file" in proto or "local" in proto else None

    def open(self) -> Any:
        return self.fs.open(self.path, "rb")


def list_sources(source: Any, fmt: str, storage_options: Optional[dict] = None) -> list[Source]:
    """The files of a source URL or path, in the order their records go in:
    a file; a directory (its files of the format, sorted; a Hugging Face
    save_to_disk directory in the order its state.json lists); or a glob."""
    import fsspec
    url = os.fspath(source)
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    if fs.isdir(path):
        state = path.rstrip("/") + "/state.json"
        if fmt == "arrow" and fs.exists(state):
            with fs.open(state, "rb") as f:
                files = [d["filename"] for d in json.load(f).get("_data_files", [])]
            paths = [path.rstrip("/") + "/" + n for n in files]
        else:
            if fs.exists(path.rstrip("/") + "/dataset_dict.json"):
                raise IngestError(f"{url}: a DatasetDict (several splits); point at one split, "
                                  f"e.g. {url.rstrip('/')}/train")
            exts = tuple(e for e, f in EXTENSIONS.items() if f == fmt)
            paths = sorted(p for p in fs.find(path)
                           if p.endswith(exts) or p.endswith(tuple(e + ".gz" for e in exts)))
    elif any(c in path for c in "*?["):
        paths = sorted(fs.glob(path))
    else:
        paths = [path]
    if not paths:
        raise IngestError(f"{url}: no {fmt} files there")
    out = []
    for p in paths:
        try:
            info = fs.info(p)
        except FileNotFoundError:
            raise IngestError(f"{fs.unstrip_protocol(p)}: no such file") from None
        if info.get("type") == "directory":
            continue
        src = Source(fs, p, info)
        _regular(src)
        out.append(src)
    return out


def _regular(src: Source) -> None:
    """IngestError for a local source that is not a regular file: opening a
    FIFO (or reading a device) would wait for a writer for ever; the C
    importers refuse them the same way."""
    if src.local is None:
        return
    mode = os.stat(src.path).st_mode
    if not stat.S_ISREG(mode):
        kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a character device" if stat.S_ISCHR(mode)
                else "a block device" if stat.S_ISBLK(mode) else "not a file")
        raise IngestError(f"{src.path}: not a regular file ({kind})")


# ------------------------------------------------------------ the writing

def _offsets(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


class Fields:
    """A dataset's fields as the writer takes them: [(name, dtype, shape)],
    shape (None,) for a variable-length field."""

    def __init__(self, fields: list[tuple[str, str, tuple]]) -> None:
        if not fields:
            raise IngestError("no fields to import")
        if len(fields) > 8:
            raise IngestError(f"{len(fields)} fields ({', '.join(f[0] for f in fields)}): a "
                              "dataset holds at most 8; choose some with columns=[...]")
        for name, _, _ in fields:
            if not 0 < len(name.encode()) < 32:
                raise IngestError(f"field name {name!r}: 1..31 bytes")
        self.fields = fields

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Fields) and self.fields == other.fields

    def __repr__(self) -> str:
        return ", ".join(f"{n} {d}{'[var]' if s == (None,) else list(s) if s else ''}"
                         for n, d, s in self.fields)


def _prefetch(it: Iterator[Any], depth: int = 2) -> Iterator[Any]:
    """Runs it in a thread, depth items ahead: decoding the next batch
    (pyarrow, tarfile and network reads release the GIL) overlaps with the
    writer copying this one (it releases the GIL too)."""
    q: queue.Queue = queue.Queue(maxsize=depth)
    done = object()
    stop = threading.Event()

    def run() -> None:
        try:
            for x in it:
                while not stop.is_set():
                    try:
                        q.put((None, x), timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((None, done))
        except BaseException as e:  # handed to the consumer
            q.put((e, None))

    t = threading.Thread(target=run, name="cxlp-ingest-read", daemon=True)
    t.start()
    try:
        while True:
            err, x = q.get()
            if err is not None:
                raise err
            if x is done:
                return
            yield x
    finally:
        stop.set()
        t.join()


# ---------------------------------------------------------------- Arrow

_ARROW_NUMERIC = {"int8": "int8", "uint8": "uint8", "int16": "int16", "uint16": "uint16",
                  "int32": "int32", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
                  "halffloat": "float16", "float": "float32", "double": "float64",
                  "bool": "bool"}


def _arrow_field(field: Any, where: str) -> tuple[str, str, tuple]:
    """One Arrow field as (name, dtype, shape); IngestError for a type with
    no place in a record (struct, map, dictionary, timestamp, nested lists
    of variable length...)."""
    import pyarrow as pa
    t, shape = field.type, []
    while pa.types.is_fixed_size_list(t):
        shape.append(t.list_size)
        t = t.value_type
    if (pa.types.is_list(t) or pa.types.is_large_list(t)) and not shape:
        v = t.value_type
        if str(v) in _ARROW_NUMERIC or v == pa.float16():
            return field.name, _ARROW_NUMERIC.get(str(v), "float16"), (None,)
    elif (pa.types.is_string(t) or pa.types.is_large_string(t)) and not shape:
        return field.name, "str", (None,)
    elif (pa.types.is_binary(t) or pa.types.is_large_binary(t)) and not shape:
        return field.name, "uint8", (None,)
    elif str(t) in _ARROW_NUMERIC or t == pa.float16():
        return field.name, _ARROW_NUMERIC.get(str(t), "float16"), tuple(shape)
    raise IngestError(f"{where}: column {field.name!r} has type {field.type}, which a record "
                      "cannot hold (supported: numbers and bools, fixed-size lists of them, "
                      "lists of numbers, strings, binary); leave it out with columns=[...]")


def arrow_fields(schema: Any, columns: Optional[Sequence[str]], where: str) -> Fields:
    names = list(columns) if columns is not None else schema.names
    for c in names:
        if c not in schema.names:
            raise IngestError(f"{where}: no column {c!r} (columns: {', '.join(schema.names)})")
    return Fields([_arrow_field(schema.field(c), where) for c in names])


def _check_nulls(arr: Any, name: str, where: str, row0: int) -> None:
    if arr.null_count:
        import pyarrow.compute as pc
        first = pc.index(pc.is_null(arr), True).as_py()
        raise IngestError(f"{where}: column {name!r} is null at row {row0 + first}; records "
                          "hold no nulls (fill or drop them first)")


def _arrow_column(arr: Any, spec: tuple, where: str, row0: int) -> Any:
    """An Arrow array as the writer's column: a buffer of n values, or
    (values, int64 offsets)."""
    import pyarrow as pa
    name, dtype, shape = spec
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    _check_nulls(arr, name, where, row0)
    if shape == (None,):
        t = arr.type
        if pa.types.is_list(t) or pa.types.is_large_list(t):
            offs = np.asarray(arr.offsets, dtype=np.int64)  # the slice's, into values
            vals = arr.values
            _check_nulls(vals, name, where, row0)
            return (vals.to_numpy(zero_copy_only=dtype != "bool"), offs)
        # string / binary: offsets and data buffers as Arrow lays them out
        wide = pa.types.is_large_string(t) or pa.types.is_large_binary(t)
        bufs = arr.buffers()
        offs = np.frombuffer(bufs[1], dtype=np.int64 if wide else np.int32,
                             count=len(arr) + 1, offset=arr.offset * (8 if wide else 4))
        data = bufs[2] if bufs[2] is not None else b""
        return (data, offs.astype(np.int64, copy=False))
    while pa.types.is_fixed_size_list(arr.type):
        arr = arr.flatten()
        _check_nulls(arr, name, where, row0)
    return arr.to_numpy(zero_copy_only=dtype != "bool")


def _arrow_batches(obj: Any, rows: int) -> tuple[Any, Iterator]:
    """(schema, record batches) of an in-memory Table / RecordBatch /
    datasets.Dataset."""
    import pyarrow as pa
    if type(obj).__module__.startswith("datasets"):
        fmt = obj.with_format("arrow")
        schema = obj.features.arrow_schema if hasattr(obj.features, "arrow_schema") \
            else fmt[:0].schema
        return schema, (b for t in fmt.iter(batch_size=rows) for b in t.to_batches())
    if isinstance(obj, pa.RecordBatch):
        obj = pa.Table.from_batches([obj])
    return obj.schema, iter(obj.to_batches(max_chunksize=rows))


def _parquet_batches(f: Any, columns: Optional[Sequence[str]], size: int,
                     tick: Callable[..., None]) -> tuple[Any, Iterator, int]:
    """(schema, record batches, the file's uncompressed bytes)."""
    import pyarrow.parquet as pq
    pf = pq.ParquetFile(f)
    schema = pf.schema_arrow
    cols = list(columns) if columns is not None else None
    md = pf.metadata
    raw = sum(md.row_group(g).total_byte_size for g in range(md.num_row_groups))

    def gen() -> Iterator:
        n = pf.num_row_groups
        for g in range(n):  # one row group in memory at a time
            yield from pf.read_row_group(g, columns=cols, use_threads=True).to_batches()
            tick(size * (g + 1) // n)
    return schema, gen(), raw


def _ipc_batches(f: Any) -> tuple[Any, Iterator]:
    import pyarrow as pa
    if isinstance(f, str):
        f = pa.memory_map(f)
    head = f.read(6)
    f.seek(0)
    r = pa.ipc.open_file(f) if head == b"ARROW1" else pa.ipc.open_stream(f)
    if head == b"ARROW1":
        return r.schema, (r.get_batch(i) for i in range(r.num_record_batches))
    return r.schema, iter(r)


def _write_arrow(w: Any, fields: Fields, batches: Iterable, where: str,
                 tick: Callable[..., None]) -> int:
    n = 0
    for b in _prefetch(iter(batches)):
        if b.num_rows == 0:
            continue
        cols = [_arrow_column(b.column(name), spec, where, n)
                for spec, name in zip(fields.fields, (f[0] for f in fields.fields))]
        try:
            w.append_columns(b.num_rows, cols)
        except _core.CXLError as e:
            raise IngestError(f"{where}: rows {n}..{n + b.num_rows - 1}: {e}") from None
        n += b.num_rows
        tick()
    return n


def _arrow_error(where: str, e: Exception) -> IngestError:
    return IngestError(f"{where}: {type(e).__name__}: {e}")


# ----------------------------------------------------------- WebDataset

# webdataset's own conventions (webdataset/autodecode.py, basichandlers):
# these extensions decode to text and integers; every other is bytes
WDS_TEXT = ("txt", "text", "transcript", "json", "jsn")
WDS_INT = ("cls", "cls2", "class", "count", "index", "inx", "id")
# a member's key and extension, as webdataset's base_plus_ext splits them
_WDS_SPLIT = re.compile(r"^((?:.*/|)[^.]+)[.]([^/]*)$")


def wds_dtype(ext: str) -> tuple[str, tuple]:
    e = ext.lower().rsplit(".", 1)[-1]
    if e in WDS_INT:
        return "int64", ()
    if e in WDS_TEXT:
        return "str", (None,)
    return "uint8", (None,)


def _wds_samples(f: Any, where: str) -> Iterator[tuple[str, dict, str]]:
    """(key, {extension: bytes}, first member name) per sample, members of
    one key being consecutive in the tar, as webdataset requires."""
    try:
        tf = tarfile.open(fileobj=f, mode="r|*")
    except tarfile.TarError as e:
        raise IngestError(f"{where}: not a tar file: {e}") from None
    key, cur, first = None, {}, ""
    try:
        for m in tf:
            if not m.isfile():
                continue
            base = os.path.basename(m.name)
            if base.startswith("__") or base.startswith("."):
                continue  # webdataset skips these too
            mt = _WDS_SPLIT.match(m.name)
            if not mt:
                continue
            k, ext = mt.group(1), mt.group(2)
            if k != key:
                if key is not None:
                    yield key, cur, first
                key, cur, first = k, {}, m.name
            if ext in cur:
                raise IngestError(f"{where}: member {m.name!r} appears twice in sample {k!r}")
            data = tf.extractfile(m)
            cur[ext] = data.read() if data else b""
    except tarfile.TarError as e:
        raise IngestError(f"{where}: truncated or damaged tar after sample {key!r}: {e}") from None
    if key is not None:
        yield key, cur, first


def wds_fields(first: dict, columns: Optional[Sequence[str]]) -> Fields:
    exts = list(columns) if columns is not None else sorted(first)
    return Fields([("__key__", "str", (None,))] + [(e, *wds_dtype(e)) for e in exts])


def _write_wds(w: Any, fields: Fields, samples: Iterable, where: str, batch_bytes: int,
               strict: bool, tick: Callable[..., None]) -> int:
    """strict: a sample with members the fields do not name is an error
    (no columns= chose the fields); else those members are left out."""
    exts = [f[0] for f in fields.fields[1:]]
    want = set(exts)
    cols: list[list] = [[] for _ in fields.fields]
    n, pending, size = 0, 0, 0

    def flush() -> None:
        nonlocal pending, size, n
        if not pending:
            return
        out = []
        for (name, dtype, shape), vals in zip(fields.fields, cols):
            if shape == (None,):
                lens = np.fromiter((len(v) for v in vals), dtype=np.int64, count=len(vals))
                out.append((b"".join(vals), _offsets(lens)))
            else:
                out.append(np.asarray(vals, dtype=np.int64))
        try:
            w.append_columns(pending, out)
        except _core.CXLError as e:
            raise IngestError(f"{where}: samples {n}..{n + pending - 1}: {e}") from None
        n += pending
        pending, size = 0, 0
        for c in cols:
            c.clear()
        tick()

    for key, sample, member in samples:
        have = set(sample)
        missing = want - have
        if missing:
            raise IngestError(f"{where}: sample {key!r} (from {member!r}) has no member "
                              f"{', '.join('.' + m for m in sorted(missing))} (the dataset's "
                              f"fields: {', '.join(exts)})")
        if strict and have - want:
            raise IngestError(f"{where}: sample {key!r} has member(s) "
                              f"{', '.join('.' + m for m in sorted(have - want))} the first "
                              "sample had not; choose the fields with columns=[...]")
        cols[0].append(key.encode())
        for k, (name, dtype, shape) in enumerate(fields.fields[1:], 1):
            v = sample[name]
            if dtype == "str":
                try:
                    v.decode("utf-8")
                except UnicodeDecodeError as e:
                    raise IngestError(f"{where}: member {key}.{name} is not valid UTF-8 "
                                      f"(byte {e.start})") from None
            elif dtype == "int64":
                try:
                    v = int(v.decode("ascii").strip())
                except (UnicodeDecodeError, ValueError):
                    raise IngestError(f"{where}: member {key}.{name} is not an integer "
                                      f"({v[:40]!r})") from None
            cols[k].append(v)
            size += len(v) if isinstance(v, bytes) else 8
        pending += 1
        if size >= batch_bytes:
            flush()
    flush()
    return n


# ---------------------------------------------------------------- JSONL

def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character table, the alphabet of every
    byte-level BPE (the tokenizers library uses it inside ByteLevel but does
    not export the byte order, which the built-in tokenizer below needs)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) \
        + list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def byte_tokenizer() -> Any:
    """The built-in tokenizer ("bytes"): byte-level, token id = byte value
    (0..255), no merges, nothing to download. A tokenizers.Tokenizer like
    any other."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    vocab = {ch: b for b, ch in bytes_to_unicode().items()}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    return tok


def load_tokenizer(name: str, storage_options: Optional[dict] = None) -> tuple[str, Any]:
    """(tokenizer JSON, Tokenizer) for "bytes" or a tokenizer.json at a path
    or fsspec URL."""
    from tokenizers import Tokenizer
    if name in ("bytes", "byte", "byte-level"):
        tok = byte_tokenizer()
        return tok.to_str(), tok
    import fsspec
    try:
        with fsspec.open(name, "rb", **(storage_options or {})) as f:
            text = f.read().decode("utf-8")
    except (FileNotFoundError, IsADirectoryError):
        raise IngestError(f"tokenizer {name!r}: no such file (give a tokenizer.json path or "
                          "URL, or 'bytes' for the built-in byte-level one)") from None
    try:
        return text, Tokenizer.from_str(text)
    except Exception as e:
        raise IngestError(f"tokenizer {name}: not a tokenizers JSON file: {e}") from None


def token_dtype(vocab_size: int) -> str:
    # Megatron's preprocess_data rule: uint16 while ids fit it
    return "uint16" if vocab_size <= 65535 else "int32"


_worker_tok: Any = None


def _worker_init(tok_json: str) -> None:
    global _worker_tok
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # processes are the parallelism
    from tokenizers import Tokenizer
    _worker_tok = Tokenizer.from_str(tok_json)


class _LineError(Exception):
    """A bad line, found where the line number is not known: (byte offset
    of the line in the (decompressed) file, message). The main process turns
    it into an IngestError naming the line."""


def tokenize_lines(tok: Any, lines: list[tuple[int, bytes]], field: str, dtype: str,
                   eod: Optional[int]) -> tuple[np.ndarray, np.ndarray]:
    """Parses JSON lines ((byte offset, line) each) and tokenizes their text
    field: (tokens, int64 offsets). _LineError on a bad line."""
    texts = []
    for off, line in lines:
        try:
            obj = json.loads(line)
        except UnicodeDecodeError as e:
            raise _LineError(off, f"not valid UTF-8 (byte {e.start})") from None
        except json.JSONDecodeError as e:
            raise _LineError(off, f"bad JSON: {e.msg} at column {e.colno}") from None
        except RecursionError:  # json's parser recurses per level of nesting
            raise _LineError(off, "bad JSON: nested more deeply than the parser allows "
                                  f"(Python's recursion limit, {sys.getrecursionlimit()})") from None
        if not isinstance(obj, dict) or field not in obj:
            raise _LineError(off, f"no field {field!r} in this line")
        t = obj[field]
        if not isinstance(t, str):
            raise _LineError(off, f"field {field!r} is {type(t).__name__}, not text")
        texts.append(t)
    # encode in pieces of about ENCODE_BYTES of text: an Encoding keeps
    # tokens, offsets and masks per token (~100 bytes each), so a whole
    # task's worth at once would hold gigabytes
    parts, lens, a = [], [], 0
    while a < len(texts):
        b, size = a, 0
        while b < len(texts) and (b == a or size < ENCODE_BYTES):
            size += len(texts[b])
            b += 1
        for e in tok.encode_batch(texts[a:b], add_special_tokens=False):
            ids = e.ids
            if eod is not None:
                ids.append(eod)
            lens.append(len(ids))
            try:
                parts.append(np.array(ids, dtype=dtype))
            except OverflowError:
                raise _LineError(lines[0][0], f"token id {max(ids)} does not fit {dtype}") from None
        a = b
    flat = np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)
    return flat, _offsets(np.asarray(lens, dtype=np.int64))


def _read_range(f: Any, start: int, end: int) -> list[tuple[int, bytes]]:
    """The non-blank lines that start in [start, end) of a seekable file, as
    (offset, line): a line belongs to the range it starts in."""
    if start:
        f.seek(start - 1)
        if f.read(1) != b"\n":
            f.readline()  # the rest of a line that started before
    pos, out = f.tell(), []
    while pos < end:
        raw = f.readline()
        if not raw:
            break
        line = raw.strip()
        if line:
            out.append((pos, line))
        pos += len(raw)
    return out


def _jsonl_task(task: tuple) -> tuple[np.ndarray, np.ndarray]:
    """One task: ("range", url, storage_options, start, end, ...): a worker
    reads its own byte range (no text passes between processes); or
    ("lines", lines, ...) for a compressed file the main process read."""
    if task[0] == "range":
        import fsspec
        _, url, so, start, end, field, dtype, eod = task
        with fsspec.open(url, "rb", **so) as f:
            lines = _read_range(f, start, end)
    else:
        _, lines, field, dtype, eod = task
    return tokenize_lines(_worker_tok, lines, field, dtype, eod)


def _jsonl_tasks(src: Source, storage_options: dict, field: str, dtype: str,
                 eod: Optional[int], batch_bytes: int) -> Iterator[tuple]:
    if not src.path.endswith(".gz"):
        for start in range(0, max(src.size, 1), batch_bytes):
            yield ("range", src.url, storage_options, start, min(start + batch_bytes, src.size),
                   field, dtype, eod)
        return
    with src.open() as raw:
        f = _decompress(raw, src.path)
        chunk, size, pos, lineno = [], 0, 0, 1
        for raw_line in _gz_lines(f, src.url, lambda: lineno):
            line = raw_line.strip()
            if line:
                chunk.append((pos, line))
                size += len(line)
            pos += len(raw_line)
            lineno += 1
            if size >= batch_bytes:
                yield ("lines", chunk, field, dtype, eod)
                chunk, size = [], 0
        if chunk:
            yield ("lines", chunk, field, dtype, eod)


def _gz_lines(f: Any, where: str, lineno: Callable[[], int]) -> Iterator[bytes]:
    """The lines of a decompressing file; a corrupt or cut-short stream is an
    IngestError naming the file and the line it broke in (gzip's EOFError,
    BadGzipFile or zlib.error otherwise escaped as a traceback)."""
    import zlib
    it = iter(f)
    while True:
        try:
            line = next(it)
        except StopIteration:
            return
        except (EOFError, OSError, zlib.error) as e:
            raise IngestError(f"{where}:{lineno()}: the compressed stream is corrupt or cut "
                              f"short ({type(e).__name__}: {e})") from None
        yield line


def _line_number(src: Source, offset: int) -> int:
    import zlib
    n = 1
    with src.open() as raw:
        f = _decompress(raw, src.path)
        while offset > 0:
            try:
                b = f.read(min(offset, 1 << 20))
            except (EOFError, OSError, zlib.error):
                break  # the bad line is before the stream broke; counted so far
            if not b:
                break
            n += b.count(b"\n")
            offset -= len(b)
    return n


def _write_jsonl(w: Any, src: Source, where: str, tok: Any, pool: Any, field: str, dtype: str,
                 eod: Optional[int], batch_bytes: int, workers: int,
                 storage_options: Optional[dict], tick: Callable[..., None]) -> int:
    global _worker_tok
    n, done = 0, 0
    # tasks small enough that every worker gets several (a short file is
    # spread over all of them), large enough that a task's fixed costs vanish
    batch_bytes = min(batch_bytes, TASK_BYTES, max(1 << 20, src.size // (4 * max(1, workers))))
    tasks = _jsonl_tasks(src, storage_options or {}, field, dtype, eod, batch_bytes)
    if pool is None:
        _worker_tok = tok
        results: Iterator = map(_jsonl_task, tasks)
    else:
        results = _ordered(pool, tasks, 2 * workers)
    try:
        for toks, offs in results:
            k = len(offs) - 1
            try:
                w.append_columns(k, [(toks, offs)])
            except _core.CXLError as e:
                raise IngestError(f"{where}: {e}") from None
            n += k
            done += batch_bytes
            tick(min(done, src.size))
    except _LineError as e:
        raise IngestError(f"{where}:{_line_number(src, e.args[0])}: {e.args[1]}") from None
    return n


def _ordered(pool: Any, tasks: Iterator[tuple], window: int) -> Iterator[Any]:
    """Results of _jsonl_task in task order, at most window in flight:
    memory stays bounded however long the file."""
    pending: list = []
    for t in tasks:
        pending.append(pool.apply_async(_jsonl_task, (t,)))
        if len(pending) >= window:
            yield pending.pop(0).get()
    while pending:
        yield pending.pop(0).get()


def _decompress(f: Any, path: str) -> Any:
    if path.endswith(".gz"):
        import gzip
        return gzip.GzipFile(fileobj=f)
    return f


# ----------------------------------------------------------------- driver

# ingest locks: one byte per dataset name, this far into the pool's backing
# object (past the end of any pool: a record lock needs no bytes there)
LOCK_BASE = 1 << 62


def lock_offset(name: str) -> int:
    """The byte of the pool's backing object whose lock is dataset name's."""
    return LOCK_BASE + int.from_bytes(hashlib.sha1(name.encode()).digest()[:7], "big")


@contextlib.contextmanager
def ingest_lock(pool: Any, name: str) -> Iterator[None]:
    """Held by the one process ingesting `name` into this pool; the others
    block here. An open file description lock (fcntl F_OFD_SETLKW) on
    byte lock_offset(name) of the pool's own backing object: the kernel
    releases it when its holder closes the file or dies, and nothing is
    left behind. Rejected: a lock file beside the pool (one stayed in
    /dev/shm each time its holder was killed, and outlived the pool);
    classic POSIX record locks (a process's locks on a file go when any of
    its descriptors of that file closes, as the library's do); the pool's
    own writer lock (held per catalog transaction, not for an ingest)."""
    path = os.path.abspath(pool.stat()["path"])
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except OSError as e:
        raise IngestError(f"{path}: opening the pool's backing object to lock the ingest "
                          f"of {name!r}: {e.strerror}") from None
    try:
        lock = struct.pack("@hhqqi4x", fcntl.F_WRLCK, os.SEEK_SET, lock_offset(name), 1, 0)
        fcntl.fcntl(fd, fcntl.F_OFD_SETLKW, lock)
        yield
    finally:
        os.close(fd)  # releases the lock


def _part_key(name: str, fmt: str, options: dict) -> str:
    blob = json.dumps([name, fmt, options], sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]


def _part_name(key: str, src: Source, i: int) -> str:
    return f"~{key}.{hashlib.sha1(src.fingerprint.encode()).hexdigest()[:12]}.{i:06d}"


class _Progress:
    def __init__(self, total: int, name: str, show: Optional[bool]) -> None:
        self.bar = None
        if show or (show is None and sys.stderr.isatty()):
            from tqdm import tqdm
            self.bar = tqdm(total=total, unit="B", unit_scale=True, desc=f"ingest {name}",
                            file=sys.stderr)

    def to(self, pos: int) -> None:
        if self.bar is not None and pos > self.bar.n:
            self.bar.update(pos - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def ingest(pool: Any, name: str, source: Any, format: Optional[str] = None, *,
           columns: Optional[Sequence[str]] = None, text_field: str = "text",
           tokenizer: Optional[str] = None, eod: Optional[int] = None,
           workers: Optional[int] = None, shard_bytes: int = 0,
           batch_bytes: int = BATCH_BYTES, progress: Optional[bool] = None,
           storage_options: Optional[dict] = None, hugepages: bool = True,
           allow_empty: bool = False) -> dict:
    """Imports source into dataset `name` of pool (a _core.Pool) and returns
    {"records": n, "files": k, "skipped": files already done by an earlier
    run}. Does nothing when the dataset exists (an earlier run, or another
    rank, finished it). See the module docstring for what is kept across a
    kill. IngestError for bad input, naming file, record and field.

    Empty input, one rule for every format (the C importers' too): a
    source with no records at all is refused ("no records") unless
    allow_empty=True, which makes an empty dataset; an empty file among
    others adds no records (an empty tar, whose fields no sample says,
    adds no part either)."""
    fmt = format if format not in (None, "auto") else detect_format(source, storage_options)
    if fmt not in FORMATS:
        raise IngestError(f"{source!r}: format {format!r}: expected one of {', '.join(FORMATS)} "
                          "(or a source whose name ends in .parquet, .arrow, .tar, .jsonl)")
    if any(d["name"] == name for d in pool.list()):
        return {"records": None, "files": 0, "skipped": 0, "existed": True}
    if _is_arrow_object(source):
        if fmt != "arrow":
            raise IngestError(f"an in-memory {type(source).__name__} is Arrow data, not {fmt}")
        return _ingest_object(pool, name, source, columns, shard_bytes, hugepages, allow_empty)
    if fmt == "jsonl" and not tokenizer:
        raise IngestError("jsonl needs tokenizer= (a tokenizer.json, or 'bytes')")
    with ingest_lock(pool, name):
        if any(d["name"] == name for d in pool.list()):
            return {"records": None, "files": 0, "skipped": 0, "existed": True}
        return _ingest_files(pool, name, source, fmt, columns, text_field, tokenizer, eod,
                             workers, shard_bytes, batch_bytes, progress, storage_options,
                             hugepages, allow_empty)


def _no_records(where: str, what: str) -> IngestError:
    return IngestError(f"{where}: no records ({what}); allow_empty=True (--allow-empty) makes "
                       "an empty dataset")


def _ingest_object(pool: Any, name: str, obj: Any, columns: Optional[Sequence[str]],
                   shard_bytes: int, hugepages: bool, allow_empty: bool) -> dict:
    where = f"<{type(obj).__name__}>"
    if len(obj) == 0 and not allow_empty:
        raise _no_records(where, "a table of no rows")
    schema, batches = _arrow_batches(obj, 65536)
    fields = arrow_fields(schema, columns, where)
    w = _core.Writer(pool, name, fields.fields, shard_bytes=shard_bytes, hugepages=hugepages)
    try:
        n = _write_arrow(w, fields, batches, where, lambda: None)
        w.commit()
    finally:
        w.abort()
    return {"records": n, "files": 0, "skipped": 0}


def _ingest_files(pool: Any, name: str, source: Any, fmt: str,
                  columns: Optional[Sequence[str]], text_field: str, tokenizer: Optional[str],
                  eod: Optional[int], workers: Optional[int], shard_bytes: int,
                  batch_bytes: int, progress: Optional[bool],
                  storage_options: Optional[dict], hugepages: bool, allow_empty: bool) -> dict:
    srcs = list_sources(source, fmt, storage_options)
    opts = {"columns": list(columns) if columns is not None else None}
    tok = tok_json = None
    dtype = ""
    if fmt == "jsonl":
        tok_json, tok = load_tokenizer(tokenizer or "", storage_options)
        dtype = token_dtype(tok.get_vocab_size(with_added_tokens=True))
        opts.update(text_field=text_field, tokenizer=hashlib.sha1(tok_json.encode()).hexdigest(),
                    eod=eod)
    key = _part_key(name, fmt, opts)
    prefix = f"~{key}."
    have = {d["name"] for d in pool.list()}
    parts = [_part_name(key, s, i) for i, s in enumerate(srcs)]
    skipped = sum(p in have for p in parts)
    bar = _Progress(sum(s.size for s in srcs), name, progress)
    done_bytes = sum(s.size for s, p in zip(srcs, parts) if p in have)
    bar.to(done_bytes)
    nproc = max(1, int(workers or 1))
    mp_pool = None
    if fmt == "jsonl" and nproc > 1:
        import multiprocessing as mp
        # fork, as torch's DataLoader does on Linux: a fresh interpreter per
        # worker (spawn, forkserver) would import torch with this package,
        # seconds per process; the children run json and tokenizers only
        mp_pool = mp.get_context("fork").Pool(nproc, _worker_init, (tok_json,))
    fields: Optional[Fields] = None
    made: list[str] = []
    used: list[str] = []  # the parts the dataset is made of (not an empty tar's)
    try:
        for src, part in zip(srcs, parts):
            if part in have:
                used.append(part)
                continue
            where = src.url
            f = src.open()
            try:
                def tick(pos: Optional[int] = None, f: Any = f) -> None:
                    """Progress: pos bytes of this file done (None: where
                    the file's reader is)."""
                    with contextlib.suppress(Exception):
                        bar.to(done_bytes + (f.tell() if pos is None else pos))
                mine = _ingest_one(pool, part, src, f, fmt, fields, columns, text_field, tok,
                                   mp_pool, nproc, dtype, eod, shard_bytes, batch_bytes,
                                   storage_options, where, tick, hugepages)
            finally:
                f.close()
            if mine is not None:
                fields = mine
                made.append(part)
                used.append(part)
            done_bytes += src.size
            bar.to(done_bytes)
            if os.environ.get("CXLP_FAULT") == f"ingest-part-{len(made)}":
                os.kill(os.getpid(), signal.SIGKILL)  # the resume tests' kill point
        records = {d["name"]: d["records"] for d in pool.list()}
        if not used:
            raise IngestError(f"{os.fspath(source)}: no records (no samples in any tar, so "
                              "no fields to make a dataset of, even an empty one)")
        if not allow_empty and sum(records[p] for p in used) == 0:
            raise _no_records(os.fspath(source), "every source file is empty"
                              if len(srcs) > 1 else "the file is empty")
        pool.concat(name, used)
    except (IngestError, _core.CXLError):
        # refused input: the pool goes back to how this run found it (parts
        # of an earlier run stay for the next one)
        for part in made:
            with contextlib.suppress(_core.CXLError):
                pool.remove(part)
        raise
    finally:
        bar.close()
        if mp_pool is not None:
            mp_pool.terminate()
            mp_pool.join()
    # parts of an earlier run over files that have since changed
    for d in pool.list():
        if d["name"].startswith(prefix):
            with contextlib.suppress(_core.CXLError):
                pool.remove(d["name"])
    return {"records": sum(d["records"] for d in pool.list() if d["name"] == name),
            "files": len(srcs), "skipped": skipped}


def _ingest_one(pool: Any, part: str, src: Source, f: Any, fmt: str, fields: Optional[Fields],
                columns: Optional[Sequence[str]], text_field: str, tok: Any, mp_pool: Any,
                nproc: int, dtype: str, eod: Optional[int], shard_bytes: int, batch_bytes: int,
                storage_options: Optional[dict], where: str, tick: Callable[..., None],
                hugepages: bool) -> Optional[Fields]:
    """One source file into part (committed), checking its fields match the
    files before it; its fields, or None for a tar of no samples (no part:
    no sample says its fields)."""
    w = None
    try:
        if fmt in ("parquet", "arrow"):
            try:
                source = src.local or f
                est = src.size
                if fmt == "parquet":
                    schema, batches, est = _parquet_batches(source, columns, src.size, tick)
                else:
                    schema, batches = _ipc_batches(source)
            except (OSError, ValueError) as e:
                if isinstance(e, IngestError):
                    raise
                raise _arrow_error(where, e) from None
            mine = arrow_fields(schema, columns, where)
            fields = _same(fields, mine, where)
            if fmt == "arrow" and columns is not None:
                batches = (b.select(list(columns)) for b in batches)
            w = _core.Writer(pool, part, fields.fields, shard_bytes=part_shard(shard_bytes, est),
                             hugepages=hugepages)
            try:
                _write_arrow(w, fields, batches, where, tick)
            except (OSError, ValueError) as e:
                if isinstance(e, IngestError):
                    raise
                raise _arrow_error(where, e) from None
        elif fmt == "webdataset":
            samples = _wds_samples(_decompress(f, src.path), where)
            first = next(samples, None)
            if first is None:
                return None
            mine = wds_fields(first[1], columns)
            fields = _same(fields, mine, where)
            w = _core.Writer(pool, part, fields.fields,
                             shard_bytes=part_shard(shard_bytes, src.size), hugepages=hugepages)
            _write_wds(w, fields, itertools.chain([first], samples), where,
                       BATCH_BYTES if batch_bytes <= 0 else batch_bytes, columns is None, tick)
        else:
            mine = Fields([("tokens", dtype, (None,))])
            fields = _same(fields, mine, where)
            f.close()
            w = _core.Writer(pool, part, fields.fields,
                             shard_bytes=part_shard(shard_bytes, src.size), hugepages=hugepages)
            _write_jsonl(w, src, where, tok, mp_pool, text_field, dtype, eod, batch_bytes,
                         nproc, storage_options, tick)
        w.commit()
        return fields
    finally:
        if w is not None:
            w.abort()  # no-op after commit


DEFAULT_SHARD = 256 << 20  # the writer's default shard payload


def part_shard(shard_bytes: int, estimate: int) -> int:
    """Shard size for a part: as asked, else the writer's default cut to
    the file's data (estimated, with room): a shard's extent is reserved
    and backed when it opens, so a small file should not make the pool
    back 256 MiB for it."""
    if shard_bytes:
        return shard_bytes
    return int(min(DEFAULT_SHARD, max(4 << 20, estimate + estimate // 4)))


def _same(fields: Optional[Fields], mine: Fields, where: str) -> Fields:
    if fields is not None and fields != mine:
        raise IngestError(f"{where}: fields ({mine!r}) differ from the files before it "
                          f"({fields!r})")
    return mine


# -------------------------------------------------------------------- CLI

def main(argv: Optional[list[str]] = None) -> int:
    """`cxlpool ingest POOL NAME SRC --format arrow|parquet|webdataset|jsonl`
    runs this (python -m cxl_dataloader.ingest with the same arguments)."""
    import argparse
    import time
    ap = argparse.ArgumentParser(prog="cxlpool ingest",
                                 description="import Arrow, Parquet, WebDataset or JSONL")
    ap.add_argument("pool")
    ap.add_argument("name")
    ap.add_argument("source", help="a file, directory, glob or fsspec URL (s3://, gs://, "
                    "http(s)://, hf://)")
    ap.add_argument("--format", choices=FORMATS + ("auto",), default="auto")
    ap.add_argument("--columns", help="comma-separated fields to import (default: all)")
    ap.add_argument("--text-field", default="text")
    ap.add_argument("--tokenizer", help="tokenizer.json path or URL, or 'bytes'")
    ap.add_argument("--eod", type=int, help="token id appended to every document")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                    help="tokenizer processes (jsonl)")
    ap.add_argument("--shard-bytes", type=int, default=0, help="bytes (the C CLI parses "
                    "size strings and passes the number)")
    ap.add_argument("--no-hugepages", action="store_true",
                    help="records on 4 KiB pages (default: 2 MiB pages on shm and numa pools)")
    ap.add_argument("--allow-empty", action="store_true",
                    help="make an empty dataset of a source with no records (else refused)")
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    from .pool import make_spec
    t0 = time.monotonic()
    try:
        p = _core.Pool(make_spec(a.pool))
    except _core.CXLError as e:
        print(f"cxlpool: ingest: {a.pool}: {e} [{e.reason}]", file=sys.stderr)
        return 4 if e.code == _core.ENOTFOUND else 1
    try:
        r = ingest(p, a.name, a.source, a.format,
                   columns=a.columns.split(",") if a.columns else None,
                   text_field=a.text_field, tokenizer=a.tokenizer, eod=a.eod,
                   workers=a.workers, shard_bytes=a.shard_bytes,
                   progress=False if a.no_progress else None, hugepages=not a.no_hugepages,
                   allow_empty=a.allow_empty)
    except (IngestError, _core.CXLError) as e:
        msg = str(e)
        print(f"cxlpool: ingest: {msg}", file=sys.stderr)
        return 1
    finally:
        p.close()
    dt = time.monotonic() - t0
    if a.json:
        print(json.dumps({"dataset": a.name, **r, "seconds": round(dt, 3)}))
    elif r.get("existed"):
        print(f"{a.name}: already in the pool, nothing to do")
    else:
        print(f"ingested {a.name}: {r['records']} records from {r['files']} files "
              f"({r['skipped']} done by an earlier run) in {dt:.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
