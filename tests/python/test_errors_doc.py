"""docs/errors.md, section "Import", row by row (issue 12 acceptance: the
doc states nothing a test does not check).

Each row of the table is reproduced through the C API (libcxlpool.so by
ctypes: the codes and messages the doc is about), and the return code must
be the row's, and the message must have the form of the row's example: the
same text with the file names, numbers and "..." of the example standing for
whatever this run's file gives. A row without a reproduction here fails the
test, so a row added to the doc needs one."""
from __future__ import annotations

import ctypes
import errno
import os
import re
import struct
import uuid
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "build" / "libcxlpool.so"

CODES = {"CXLP_EPANIC": -30000, "CXLP_ECORRUPT": -30001, "CXLP_EFORMAT": -30002,
         "CXLP_ELAYOUT": -30003, "CXLP_ENOTFOUND": -30004, "CXLP_EEXIST": -30005,
         "CXLP_EFULL": -30006, "CXLP_EBUSY": -30007, "CXLP_EUNSUPPORTED": -30008,
         "CXLP_EBADINPUT": -30009, "CXLP_EOWNER": -30010, "CXLP_ERANGE": -30011,
         "CXLP_ENODEV": -30012, "CXLP_ECATFULL": -30013, "CXLP_EARG": -30014,
         "CXLP_EREADONLY": -30015}
RAW, NPY, MEGATRON = 1, 2, 3


def doc_rows(section: str) -> list[tuple[str, str, str]]:
    text = (ROOT / "docs" / "errors.md").read_text()
    body = text.split(f"### {section}", 1)[1].split("\n#", 1)[0]
    rows = []
    for line in body.splitlines():
        if not line.startswith("| ") or line.startswith("| condition") or line.startswith("|---"):
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]
        rows.append((cells[0], cells[1], cells[2]))
    return rows


class Opts(ctypes.Structure):
    _fields_ = [("format", ctypes.c_int), ("record_size", ctypes.c_uint64),
                ("dtype", ctypes.c_int), ("shard_bytes", ctypes.c_uint64),
                ("progress", ctypes.c_void_p), ("progress_ctx", ctypes.c_void_p),
                ("allow_empty", ctypes.c_int), ("no_hugepages", ctypes.c_int),
                ("shuffle", ctypes.c_int), ("shuffle_seed", ctypes.c_uint64)]


PROGRESS = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_uint64)


@pytest.fixture(scope="module")
def lib():
    if not LIB.exists():
        pytest.skip(f"{LIB} not built (cmake -S . -B build && ninja -C build)")
    lib = ctypes.CDLL(str(LIB))
    lib.cxlp_errmsg.restype = ctypes.c_char_p
    lib.cxlp_pool_create.argtypes = [ctypes.c_char_p, ctypes.c_uint64, ctypes.c_void_p,
                                     ctypes.POINTER(ctypes.c_void_p)]
    lib.cxlp_import.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p,
                                ctypes.POINTER(Opts)]
    lib.cxlp_format_parse.argtypes = [ctypes.c_char_p]
    lib.cxlp_pool_close.argtypes = [ctypes.c_void_p]
    lib.cxlp_pool_destroy.argtypes = [ctypes.c_char_p]
    lib.cxlp_pool_list.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t,
                                   ctypes.POINTER(ctypes.c_size_t)]
    return lib


@pytest.fixture
def cpool(lib):
    spec = f"pyt-errdoc-{uuid.uuid4().hex[:8]}".encode()
    p = ctypes.c_void_p()
    assert lib.cxlp_pool_create(spec, 32 << 20, None, ctypes.byref(p)) == 0
    yield p
    lib.cxlp_pool_close(p)
    lib.cxlp_pool_destroy(spec)


# ---- sources ------------------------------------------------------------------------

def npy(path: Path, header: bytes, data: bytes = b"", version: bytes = b"\x01\x00",
        magic: bytes = b"\x93NUMPY") -> Path:
    pad = (-(10 + len(header) + 1)) % 64
    h = header + b" " * pad + b"\n"
    path.write_bytes(magic + version + struct.pack("<H", len(h)) + h + data)
    return path


def npy_dict(descr: str = "'<f4'", fortran: str = "False", shape: str = "(2, 3)",
             extra: str = "") -> bytes:
    return f"{{'descr': {descr}, 'fortran_order': {fortran}, 'shape': {shape}, {extra}}}".encode()


def megatron(prefix: Path, lens=(3, 4, 2, 5, 1), docs=(0, 2, 5), dtype: int = 4,
             version: int = 1, magic: bytes = b"MMIDIDX\x00\x00", ptrs=None, bin_bytes=None,
             tail: bytes = b"", cut: int = 0) -> Path:
    """A Megatron .bin/.idx pair (int32 tokens: dtype code 4); the fields can
    be made wrong one at a time."""
    lens = np.array(lens, np.int32)
    if ptrs is None:
        ptrs = np.zeros(len(lens), np.int64)
        ptrs[1:] = np.cumsum(lens[:-1].astype(np.int64) * 4)
    ptrs = np.array(ptrs, np.int64)
    nbin = int(lens.sum()) * 4 if bin_bytes is None else bin_bytes
    Path(f"{prefix}.bin").write_bytes(b"\x01" * nbin)
    idx = (magic + struct.pack("<Q", version) + struct.pack("<B", dtype)
           + struct.pack("<Q", len(lens)) + struct.pack("<Q", len(docs))
           + lens.tobytes() + ptrs.tobytes() + np.array(docs, np.int64).tobytes() + tail)
    Path(f"{prefix}.idx").write_bytes(idx[:len(idx) - cut] if cut else idx)
    return prefix


# Each reproduction returns (what to import, opts, the path the message
# starts with); a call of its own returns (rc, message) instead.
Repro = Callable[..., tuple]


def raw_file(t: Path, size: int) -> Path:
    p = t / "x.dat"
    p.write_bytes(b"\x00" * size)
    return p


REPROS: dict[str, Repro] = {
    "source file missing / unreadable": lambda t: (t / "x.npy", dict(format=NPY), t / "x.npy"),
    "source is a directory": lambda t: (t, dict(format=RAW, record_size=8), t),
    "source is not a regular file (checked before anything can block on it: a FIFO fails at once)":
        lambda t: (os.mkfifo(t / "fifo") or t / "fifo", dict(format=RAW, record_size=8),
                   t / "fifo"),
    "source without records (an empty file; a /proc file, whose size reads 0; an .npy of shape "
    "(0, ...); an .idx of no sequences), unless `allow_empty` (`--allow-empty`)":
        lambda t: ((t / "empty.raw").write_bytes(b"") or t / "empty.raw",
                   dict(format=RAW, record_size=8), t / "empty.raw"),
    "unknown `opts->format` value": lambda t: (raw_file(t, 64), dict(format=42), t / "x.dat"),
    "raw: `record_size` 0": lambda t: (raw_file(t, 64), dict(format=RAW), t / "x.dat"),
    "AUTO fell back to raw (e.g. a .bin without its .idx) and `record_size` is 0":
        lambda t: ((t / "tok.bin").write_bytes(b"\x00" * 64) and t / "tok.bin", dict(format=0),
                   t / "tok.bin"),
    "raw: unknown `dtype`": lambda t: (raw_file(t, 64), dict(format=RAW, record_size=8, dtype=99),
                                       t / "x.dat"),
    "raw: `record_size` not a multiple of the itemsize":
        lambda t: (raw_file(t, 64), dict(format=RAW, record_size=10, dtype=11), t / "x.dat"),
    "raw: file size not a multiple of `record_size`":
        lambda t: (raw_file(t, 13000), dict(format=RAW, record_size=999), t / "x.dat"),
    "npy: file shorter than the preamble":
        lambda t: ((t / "x.npy").write_bytes(b"\x93NUM") and t / "x.npy", dict(format=NPY),
                   t / "x.npy"),
    "npy: bad magic": lambda t: (npy(t / "x.npy", npy_dict(), magic=b"\x93NUMPZ"),
                                 dict(format=NPY), t / "x.npy"),
    "npy: version not 1.0, 2.0 or 3.0": lambda t: (npy(t / "x.npy", npy_dict(),
                                                        version=b"\x07\x00"),
                                                    dict(format=NPY), t / "x.npy"),
    "npy: header longer than the file, or than 1 MiB":
        lambda t: ((t / "x.npy").write_bytes(b"\x93NUMPY\x01\x00" + struct.pack("<H", 118)
                                             + b"{'descr'") and t / "x.npy",
                   dict(format=NPY), t / "x.npy"),
    "npy: header dict syntax": lambda t: (npy(t / "x.npy", npy_dict(shape="(-2, 3)")),
                                          dict(format=NPY), t / "x.npy"),
    "npy: unknown, duplicate or missing key": lambda t: (npy(t / "x.npy", npy_dict(extra="'x': 1, ")),
                                                         dict(format=NPY), t / "x.npy"),
    "npy: unsupported dtype (string, object, big-endian, complex, datetime, void)":
        lambda t: (npy(t / "x.npy", npy_dict(descr="'<U4'")), dict(format=NPY), t / "x.npy"),
    "npy: structured dtype": lambda t: (npy(t / "x.npy", npy_dict(descr="[('a', '<f4')]")),
                                        dict(format=NPY), t / "x.npy"),
    "npy: `fortran_order` True": lambda t: (npy(t / "x.npy", npy_dict(fortran="True"), b"\0" * 24),
                                            dict(format=NPY), t / "x.npy"),
    "npy: `fortran_order` not a bool": lambda t: (npy(t / "x.npy", npy_dict(fortran="1")),
                                                  dict(format=NPY), t / "x.npy"),
    "npy: more than CXLP_MAX_DIMS-1 (3) axes after the first":
        lambda t: (npy(t / "x.npy", npy_dict(shape="(2, 1, 1, 1, 1)"), b"\0" * 8),
                   dict(format=NPY), t / "x.npy"),
    "npy: shape product overflows 64 bits, or more than 64 axes":
        lambda t: (npy(t / "x.npy", npy_dict(shape="(4294967296, 4294967296)")),
                   dict(format=NPY), t / "x.npy"),
    "npy: records of 0 bytes (a trailing axis is 0)":
        lambda t: (npy(t / "x.npy", npy_dict(shape="(4, 0)")), dict(format=NPY), t / "x.npy"),
    "npy: data length != prod(shape) * itemsize":
        lambda t: (npy(t / "x.npy", npy_dict(), b"\0" * 20), dict(format=NPY), t / "x.npy"),
    "megatron: .idx or .bin missing":
        lambda t: ((megatron(t / "tok"), os.unlink(t / "tok.bin"))[0], dict(format=MEGATRON),
                   t / "tok.bin"),
    "megatron: .idx truncated in a header field":
        lambda t: (megatron(t / "tok", lens=(), docs=(), cut=4), dict(format=MEGATRON),
                   t / "tok.idx"),
    "megatron: .idx truncated in an array":
        lambda t: (megatron(t / "tok", cut=30), dict(format=MEGATRON), t / "tok.idx"),
    "megatron: bytes after the arrays (other than one int8 mode per sequence)":
        lambda t: (megatron(t / "tok", tail=b"\x00"), dict(format=MEGATRON), t / "tok.idx"),
    "megatron: bad magic": lambda t: (megatron(t / "tok", magic=b"MMIDIDY\x00\x00"),
                                      dict(format=MEGATRON), t / "tok.idx"),
    "megatron: version != 1": lambda t: (megatron(t / "tok", version=3), dict(format=MEGATRON),
                                         t / "tok.idx"),
    "megatron: unknown dtype code": lambda t: (megatron(t / "tok", dtype=42),
                                               dict(format=MEGATRON), t / "tok.idx"),
    "megatron: negative sequence length":
        lambda t: (megatron(t / "tok", lens=(3, 4, -2147483648, 5, 1), ptrs=(0, 12, 28, 28, 48),
                            bin_bytes=60),
                   dict(format=MEGATRON), t / "tok.idx"),
    "megatron: pointer negative or decreasing":
        lambda t: (megatron(t / "tok", ptrs=(0, 12, 28, 4, 56)), dict(format=MEGATRON),
                   t / "tok.idx"),
    "megatron: sequence past the end of the .bin (pointer out of range, .bin too short)":
        lambda t: (megatron(t / "tok", bin_bytes=59), dict(format=MEGATRON), t / "tok.idx"),
    "megatron: document_count 0":
        lambda t: (megatron(t / "tok", docs=()), dict(format=MEGATRON), t / "tok.idx"),
    "megatron: document index not 0 first, decreasing, > sequence_count, or last != sequence_count":
        lambda t: (megatron(t / "tok", docs=(0, 2, 4)), dict(format=MEGATRON), t / "tok.idx"),
    "megatron: `shuffle` (`--shuffle`) asked for (checked after the .idx)":
        lambda t: (megatron(t / "tok"), dict(format=MEGATRON, shuffle=1), t / "tok.idx"),
}


def call(lib, p, src: Path, opts: dict, name: bytes = b"x", progress=None) -> tuple[int, str]:
    o = Opts(format=opts.get("format", 0), record_size=opts.get("record_size", 0),
             dtype=opts.get("dtype", -1), shard_bytes=opts.get("shard_bytes", 0),
             shuffle=opts.get("shuffle", 0))
    if progress is not None:
        o.progress = ctypes.cast(progress, ctypes.c_void_p)
    rc = lib.cxlp_import(p, name, str(src).encode(), ctypes.byref(o))
    return rc, lib.cxlp_errmsg(p).decode()


def pattern(example: str) -> str:
    """The example message as a regex: its paths, numbers and "..." stand for
    whatever this run gives."""
    example = example.replace("\\|", "|")  # a table cell escapes its pipes
    out = []
    for tok in re.split(r"([0-9a-f]+\.\.\.|\b[0-9a-f]{16}\b|\.\.\.|/data/[A-Za-z0-9_./]*|"
                        r"/dev/stdin|/dev/shm/cxlp\.[A-Za-z0-9._-]+|/data\b|\d+)", example):
        if tok.endswith("...") and tok != "...":
            out.append("[0-9a-f]+")
        elif re.fullmatch(r"[0-9a-f]{16}", tok):
            out.append("[0-9a-f]{16}")
        elif tok == "...":
            out.append(".*")
        elif tok.startswith("/data") or tok.startswith("/dev/"):
            out.append(r"\S+")
        elif tok.isdigit():
            out.append(r"-?\d+")
        else:
            out.append(re.escape(tok))
    return "".join(out)


def code_of(cell: str) -> int:
    name = re.findall(r"`([^`]+)`", cell)[0]
    if name.startswith("-E"):
        return -getattr(errno, name[1:])
    return CODES[name]


def special(lib, cpool, t: Path, cond: str):
    """The rows that need a call of their own: (rc, message, path)."""
    if cond == "unknown format name":
        rc = lib.cxlp_format_parse(b"csv")
        return rc, lib.cxlp_errmsg(None).decode(), "format"
    if cond == "file shrank while being read":
        src = raw_file(t, 12 << 20)

        def shrink(ctx, done, total):
            if done < total:
                os.truncate(src, 4 << 20)

        cb = PROGRESS(shrink)
        rc, msg = call(lib, cpool, src, dict(format=RAW, record_size=4096), progress=cb)
        return rc, msg, src
    if cond == "dataset name taken":
        src = npy(t / "x.npy", npy_dict(), b"\0" * 24)
        assert call(lib, cpool, src, dict(format=NPY))[0] == 0
        rc, msg = call(lib, cpool, src, dict(format=NPY))
        return rc, msg, src
    if cond == "pool too small":
        src = raw_file(t, 64 << 20)
        rc, msg = call(lib, cpool, src, dict(format=RAW, record_size=4096), name=b"big")
        return rc, msg, src
    return None


@pytest.mark.parametrize("row", doc_rows("Import (cxlp_import, cxlp_format_parse)"),
                         ids=lambda r: r[0][:60])
def test_import_row(lib, cpool, tmp_path, row) -> None:
    """docs/errors.md, Import: each documented condition gives the row's code
    and a message of the row's form, starting with the file it is about; the
    pool is unchanged (no dataset published)."""
    cond, code_cell, example_cell = row
    got = special(lib, cpool, tmp_path, cond)
    if got is None:
        assert cond in REPROS, f"docs/errors.md row without a test: {cond!r}"
        src, opts, path = REPROS[cond](tmp_path)
        rc, msg = call(lib, cpool, src, opts)
    else:
        rc, msg, path = got
    assert rc == code_of(code_cell), (cond, rc, msg)
    examples = re.findall(r"`([^`]+)`", example_cell)
    if "followed by" in example_cell:  # a prefix, then another layer's message
        assert re.match(pattern(examples[0]), msg), (cond, msg)
    else:
        assert re.fullmatch(pattern(examples[0]), msg), (cond, examples[0], msg)
    assert msg.startswith(str(path)), (cond, msg)
    n = ctypes.c_size_t(0)
    assert lib.cxlp_pool_list(cpool, None, 0, ctypes.byref(n)) == 0
    assert n.value == (1 if cond == "dataset name taken" else 0)


# ---- Store: datasets, writer, reader, verify ------------------------------------------

class Field(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char * 32), ("dtype", ctypes.c_int), ("ndim", ctypes.c_int),
                ("shape", ctypes.c_uint64 * 4), ("offset", ctypes.c_uint64)]


class Schema(ctypes.Structure):
    _fields_ = [("fixed", ctypes.c_int), ("record_size", ctypes.c_uint64),
                ("n_fields", ctypes.c_uint32), ("fields", Field * 8)]


class WriterOpts(ctypes.Structure):
    _fields_ = [("shard_bytes", ctypes.c_uint64), ("expected_bytes", ctypes.c_uint64),
                ("progress", ctypes.c_void_p), ("progress_ctx", ctypes.c_void_p)]


class View(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("len", ctypes.c_uint64)]


U8, U16, F32 = 0, 2, 10


def schema(fixed: bool, fields=(("x", U8, (32,)),)) -> Schema:
    s = Schema(fixed=int(fixed), n_fields=len(fields))
    for i, (name, dt, shape) in enumerate(fields):
        s.fields[i].name = name.encode()
        s.fields[i].dtype = dt
        s.fields[i].ndim = len(shape) if fixed else 0
        for d, v in enumerate(shape):
            s.fields[i].shape[d] = v
    return s


class C:
    """A pool through the C API, and the dataset operations the table needs."""

    def __init__(self, lib, spec: bytes) -> None:
        self.lib, self.spec = lib, spec
        self.path = Path(f"/dev/shm/cxlp.{spec.decode()}")
        for f, args in (("cxlp_pool_open", [ctypes.c_char_p, ctypes.c_void_p,
                                            ctypes.POINTER(ctypes.c_void_p)]),
                        ("cxlp_writer_begin", [ctypes.c_void_p, ctypes.c_char_p,
                                               ctypes.POINTER(Schema), ctypes.POINTER(WriterOpts),
                                               ctypes.POINTER(ctypes.c_void_p)]),
                        ("cxlp_writer_append", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint64]),
                        ("cxlp_writer_direct", [ctypes.c_void_p, ctypes.c_uint64,
                                                ctypes.POINTER(ctypes.c_void_p)]),
                        ("cxlp_writer_commit_direct", [ctypes.c_void_p, ctypes.c_uint64]),
                        ("cxlp_writer_set_docs", [ctypes.c_void_p, ctypes.c_void_p,
                                                  ctypes.c_uint64]),
                        ("cxlp_writer_commit", [ctypes.c_void_p]),
                        ("cxlp_writer_abort", [ctypes.c_void_p]),
                        ("cxlp_store_open", [ctypes.c_void_p, ctypes.c_char_p,
                                             ctypes.POINTER(ctypes.c_void_p)]),
                        ("cxlp_store_read", [ctypes.c_void_p, ctypes.c_uint64,
                                             ctypes.POINTER(View)]),
                        ("cxlp_store_verify", [ctypes.c_void_p]),
                        ("cxlp_store_close", [ctypes.c_void_p])):
            getattr(lib, f).argtypes = args

    def msg(self) -> str:
        return self.lib.cxlp_errmsg(None).decode()

    def open(self, readonly: bool = False) -> ctypes.c_void_p:
        # struct cxlp_pool_opts: u32 mode, u64 catalog_bytes, u32 lease_slots, int readonly,
        # int noncoherent, u32 expiry_ms
        opts = (ctypes.c_uint32 * 8)()
        opts[5] = int(readonly)
        p = ctypes.c_void_p()
        assert self.lib.cxlp_pool_open(self.spec, opts, ctypes.byref(p)) == 0, self.msg()
        return p

    def begin(self, p, name: str, sc: Schema, shard_bytes: int = 0, expected: int = 0):
        w = ctypes.c_void_p()
        o = WriterOpts(shard_bytes=shard_bytes, expected_bytes=expected)
        rc = self.lib.cxlp_writer_begin(p, name.encode(), ctypes.byref(sc), ctypes.byref(o),
                                        ctypes.byref(w))
        return rc, w

    def write(self, p, name: str, sc: Schema, recs, shard_bytes: int = 0, docs=None) -> None:
        rc, w = self.begin(p, name, sc, shard_bytes)
        assert rc == 0, self.msg()
        for r in recs:
            assert self.lib.cxlp_writer_append(w, r, len(r)) == 0, self.msg()
        if docs is not None:
            d = np.array(docs, np.int64)
            assert self.lib.cxlp_writer_set_docs(w, d.ctypes.data, len(d) - 1) == 0, self.msg()
        assert self.lib.cxlp_writer_commit(w) == 0, self.msg()

    def store(self, p, name: str) -> tuple[int, ctypes.c_void_p]:
        s = ctypes.c_void_p()
        return self.lib.cxlp_store_open(p, name.encode(), ctypes.byref(s)), s

    def shards(self) -> list[int]:
        data = self.path.read_bytes()
        return [m.start() for m in re.finditer(b"CXLPSHD1", data)]

    def poke(self, off: int, data: bytes, fix_header_at: int = -1) -> None:
        with open(self.path, "r+b") as f:
            f.seek(off)
            f.write(data)
            if fix_header_at >= 0:  # keep the shard header's own checksum right
                f.seek(fix_header_at)
                hdr = f.read(128)
                # format 2: over header bytes 0..119 and the column
                # directory; formats 3 and 4: then the block sums after it
                # (format 4 with a sums area: the page sums, one per 512)
                version, n_cols = struct.unpack("<II", hdr[8:16])
                n_bsums = struct.unpack("<I", hdr[52:56])[0] if version in (3, 4) else 0
                if version == 4 and struct.unpack("<Q", hdr[56:64])[0]:
                    n_bsums = (n_bsums + 511) // 512
                body = hdr[:120] + f.read(64 * n_cols + 8 * n_bsums)
                xxh = ctypes.CDLL("libxxhash.so.0")
                xxh.XXH3_64bits.restype = ctypes.c_uint64
                xxh.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
                f.seek(fix_header_at + 120)
                f.write(struct.pack("<Q", xxh.XXH3_64bits(body, len(body))))


VAR = schema(False, (("x", U16, ()),))


def var_records(n: int = 300) -> list[bytes]:
    return [bytes([i % 251]) * (2 * (i % 97)) for i in range(n)]


def open_fails(c: C, name: str) -> tuple[int, str]:
    p = c.open(readonly=True)
    rc, s = c.store(p, name)
    return rc, c.msg()


def store_rows(c: C, p, cond: str):
    lib = c.lib
    if cond.startswith("dataset name empty"):
        return c.begin(p, "a/b", schema(True))[0], c.msg()
    if cond == "dataset name `.` or `..`":
        return c.begin(p, "..", schema(True))[0], c.msg()
    if cond.startswith("dataset already published"):
        c.write(p, "fixed", schema(True), [b"\0" * 32])
        return c.begin(p, "fixed", schema(True))[0], c.msg()
    if cond.startswith("schema:"):
        sc = schema(True, (("a", F32, (4,)), ("vec", F32, (4, 0))))
        return c.begin(p, "x", sc)[0], c.msg()
    if cond == "write through a read-only pool handle":
        return c.begin(c.open(readonly=True), "x", schema(True))[0], c.msg()
    if cond == "fixed record of the wrong length":
        rc, w = c.begin(p, "fixed", schema(True))
        return lib.cxlp_writer_append(w, b"\0" * 31, 31), c.msg()
    if cond == "variable record not a whole number of elements":
        rc, w = c.begin(p, "var", VAR)
        return lib.cxlp_writer_append(w, b"\0" * 3, 3), c.msg()
    if cond.startswith("`direct` on variable records"):
        rc, w = c.begin(p, "d", schema(True))
        return lib.cxlp_writer_commit_direct(w, 64), c.msg()
    if cond.startswith("pool full during ingest") or cond == "any call after the writer failed":
        rc, w = c.begin(p, "toobig", VAR, shard_bytes=1 << 20)
        big = b"\0" * (1 << 20)
        while (rc := lib.cxlp_writer_append(w, big, len(big))) == 0:
            pass
        if cond == "any call after the writer failed":
            return lib.cxlp_writer_append(w, b"\0\0", 2), c.msg(), rc
        return rc, c.msg()
    if cond.startswith("`expected_bytes` larger"):
        c.write(p, "some", VAR, [b"\0" * (1 << 20)] * 4)
        return c.begin(p, "huge", schema(True), expected=20 << 20)[0], c.msg()
    if cond.startswith("document index that does not run"):
        rc, w = c.begin(p, "baddocs", VAR)
        assert lib.cxlp_writer_append(w, b"\0\0", 2) == 0
        d = np.array([0, 5], np.int64)
        assert lib.cxlp_writer_set_docs(w, d.ctypes.data, 1) == 0
        return lib.cxlp_writer_commit(w), c.msg()
    if cond == "no such dataset":
        return c.store(p, "nosuch")[0], c.msg()
    if cond == "record index past the end":
        c.write(p, "fixed", schema(True), [b"\0" * 32] * 10)
        rc, s = c.store(p, "fixed")
        v = View()
        return lib.cxlp_store_read(s, 10, ctypes.byref(v)), c.msg()
    # corruption: a dataset written here, bytes of its shard changed in the
    # pool object, then opened (read, verified) through a new handle
    if cond == "document index corrupt":
        docs = [0, 3, 7, 11, 19, 23, 29, 31, 37, 299, 300]
        c.write(p, "m", VAR, var_records(), docs=docs)
        at = c.path.read_bytes().find(np.array(docs, np.int64).tobytes())
        c.poke(at + 8, b"\x04")
        rc, s = c.store(c.open(readonly=True), "m")
        return (rc or lib.cxlp_store_verify(s)), c.msg()
    name = "var" if "var shard" in cond_example[cond] else "d"
    c.write(p, name, VAR, var_records(), shard_bytes=8192)
    shard = c.shards()[1]
    if cond == "shard magic or version not ours":
        c.poke(shard, b"X")
        return open_fails(c, name)
    if cond.startswith("shard of a format version this build does not read"):
        c.poke(shard + 8, b"\x09")
        return open_fails(c, name)
    if cond == "shard written by another ABI/build":
        c.poke(shard + 16, b"\xff", fix_header_at=shard)
        return open_fails(c, name)
    if cond == "shard header changed":
        c.poke(shard + 100, b"\x01")  # a reserved byte: only the header checksum sees it
        return open_fails(c, name)
    # formats 2 and 3 (docs/store-format.md): n_records at header offset 24, column
    # 0's directory entry at 128 (index_off at +32 of it)
    if cond == "shard fields outside the extent / inconsistent":
        c.poke(shard + 128 + 32, struct.pack("<Q", 1 << 40), fix_header_at=shard)
        return open_fails(c, name)
    if cond == "catalog and shards disagree":
        n = struct.unpack("<Q", c.path.read_bytes()[shard + 24:shard + 32])[0]
        c.poke(shard + 24, struct.pack("<Q", n - 1), fix_header_at=shard)
        return open_fails(c, name)
    if cond == "index entry or delta bad at read time":
        shard = c.shards()[0]  # the shard of record 5
    ent = c.path.read_bytes()[shard + 128:shard + 192]
    index_off = struct.unpack("<Q", ent[32:40])[0]
    if cond == "index directory entry out of bounds (at open)":
        c.poke(shard + index_off + 15, b"\x82")  # width byte of block 0: 130
        return open_fails(c, name)
    if cond == "index entry or delta bad at read time":
        pos = struct.unpack("<Q", c.path.read_bytes()[shard + index_off + 8:
                                                       shard + index_off + 16])[0] & ((1 << 56) - 1)
        c.poke(shard + index_off + pos + 5 * 2, b"\xff\xff")  # record 5's delta (2 bytes wide)
        rc, s = c.store(c.open(readonly=True), name)
        assert rc == 0, c.msg()
        v = View()
        return lib.cxlp_store_read(s, 5, ctypes.byref(v)), c.msg()
    if cond == "data or index bytes changed (verify)":
        c.poke(shard + 4096 + 10, b"\xee")
        rc, s = c.store(c.open(readonly=True), name)
        return (rc or lib.cxlp_store_verify(s)), c.msg()
    return None


STORE = doc_rows("Store: datasets, writer, reader, verify")
cond_example = {cond: ex for cond, _, ex in STORE}


@pytest.mark.parametrize("row", STORE, ids=lambda r: r[0][:60])
def test_store_row(lib, tmp_path, row) -> None:
    """docs/errors.md, Store: each documented condition gives the row's code
    and a message of the row's form (dataset, shard, pool offset, field)."""
    cond, code_cell, example_cell = row
    spec = f"pyt-errdoc-{uuid.uuid4().hex[:8]}".encode()
    p = ctypes.c_void_p()
    assert lib.cxlp_pool_create(spec, 32 << 20, None, ctypes.byref(p)) == 0
    try:
        c = C(lib, spec)
        got = store_rows(c, p, cond)
        assert got is not None, f"docs/errors.md row without a test: {cond!r}"
        rc, msg = got[0], got[1]
        want = got[2] if code_cell == "first error" else code_of(code_cell)
        assert rc == want and rc != 0, (cond, rc, msg)
        example = re.findall(r"`([^`]+)`", example_cell)[0]
        assert re.fullmatch(pattern(example), msg), (cond, example, msg)
    finally:
        lib.cxlp_pool_close(p)
        lib.cxlp_pool_destroy(spec)


def test_verify_report_lines(pool, tmp_path) -> None:
    """docs/errors.md, the cxlp_pool_verify paragraph: one line per dataset,
    `dataset NAME: ok: N records, B bytes in S shards, checksums match`, or
    `dataset NAME: FAILED: <the message>`, and the first failure raised."""
    from cxl_dataloader import CXLCorruptError
    np.save(tmp_path / "fixed.npy", np.arange(10000 * 8, dtype=np.int32).reshape(10000, 8))
    pool.ingest("fixed", tmp_path / "fixed.npy")
    lines = pool.verify()["checked"]
    assert any(re.fullmatch(r"dataset fixed: ok: 10000 records, 320000 bytes in \d+ shards?, "
                            r"checksums match", x) for x in lines), lines
    path = pool.stat()["path"]
    data = bytearray(Path(path).read_bytes())
    at = data.find(np.arange(5000 * 8, 5000 * 8 + 4, dtype=np.int32).tobytes())
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(b"\x07")
    with pytest.raises(CXLCorruptError) as e:
        pool.verify()
    assert re.fullmatch(r"dataset fixed shard \d+ \(pool offset \d+, \d+ bytes\): shard checksum "
                        r"mismatch over data \[\d+, \+\d+\)(: | and ).*", str(e.value)), str(e.value)
