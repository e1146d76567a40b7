"""The file tier's GPUDirect Storage reader (cxl_dataloader/gds.py).

No GPU and no cuFile here, so the reader runs against a stand-in for
cuda.bindings.cufile (StandInCuFile) with host memory standing in for
device memory: its read() does what cuFileRead does with a registered
handle (pread of the file at the given offset, into base + device offset),
records every call, and can be told to refuse strict (GDS) mode, to fail a
read, or to read short. What is checked: the records that arrive, the plan
(one span per shard, chunks, alignment, device offsets), the fallback
order gds -> compat -> posix and what stats say about it, the error
messages, and that every handle and the driver are let go. The `cuda`
test reads through the real cuFile and skips here with the reason.
"""
from __future__ import annotations

import ctypes
import enum
import errno
import fcntl
import os
import uuid
from typing import Any, Optional

import numpy as np
import pytest
import torch

from cxl_dataloader import CXLDataset, CXLMemoryPool, gds


class OpError(enum.IntEnum):
    SUCCESS = 0
    DRIVER_NOT_INITIALIZED = 5001
    IO_NOT_SUPPORTED = 5011
    INVALID_VALUE = 5022


class cuFileError(Exception):
    def __init__(self, status: int) -> None:
        self.status = status
        super().__init__(f"{OpError(status).name} ({status})")


class StandInCuFile:
    """The parts of cuda.bindings.cufile the reader uses."""
    OpError = OpError
    cuFileError = cuFileError

    class BoolConfigParameter(enum.IntEnum):
        PROPERTIES_ALLOW_COMPAT_MODE = 1

    class FileHandleType(enum.IntEnum):
        OPAQUE_FD = 1

    def __init__(self, gds: bool = True, returns_count: bool = True) -> None:
        self.gds = gds                  # False: the driver refuses strict mode
        self.returns_count = returns_count  # older bindings return the count, newer None
        self.allow_compat = True
        self.open = False
        self.opens = 0
        self.handles: dict[int, int] = {}   # handle -> fd
        self.descrs: dict[int, Any] = {}
        self.reads: list[tuple[int, int, int, int]] = []  # (handle, file off, bytes, dev off)
        self.registered: dict[int, int] = {}
        self.fail_read: Optional[Any] = None  # (off) -> None, or what to do

    def get_version(self) -> int:
        return 1150

    def set_parameter_bool(self, param: int, value: bool) -> None:
        assert not self.open, "cuFile reads its settings when the driver opens"
        self.allow_compat = value

    def driver_open(self) -> None:
        assert not self.open
        if not self.gds and not self.allow_compat:
            raise cuFileError(OpError.DRIVER_NOT_INITIALIZED)
        self.open = True
        self.opens += 1

    def driver_close(self) -> None:
        assert self.open and not self.handles, "driver closed under open handles"
        self.open = False

    class Descr:
        def __init__(self) -> None:
            class H:
                fd = -1
            self.handle = H()
            self.type = 0
            self.fs_ops = None
            self.ptr = id(self)

    def handle_register(self, ptr: int) -> int:
        d = next(d for d in _live_descrs if d.ptr == ptr)
        assert self.open and d.type == self.FileHandleType.OPAQUE_FD and d.fs_ops == 0
        strict = not self.allow_compat
        if strict and not (fcntl.fcntl(d.handle.fd, fcntl.F_GETFL) & os.O_DIRECT):
            raise cuFileError(OpError.IO_NOT_SUPPORTED)
        h = 1000 + len(self.handles) + len(self.reads)
        # cuFile reads an O_DIRECT file at any offset (bounce buffers inside);
        # the stand-in reads through a second, buffered descriptor of it
        self.handles[h] = os.open(f"/proc/self/fd/{d.handle.fd}", os.O_RDONLY)
        return h

    def handle_deregister(self, h: int) -> None:
        os.close(self.handles.pop(h))

    def buf_register(self, base: int, n: int, flags: int) -> None:
        self.registered[base] = n

    def buf_deregister(self, base: int) -> None:
        del self.registered[base]

    def read(self, h: int, base: int, n: int, off: int, dev_off: int) -> Optional[int]:
        self.reads.append((h, off, n, dev_off))
        if self.fail_read is not None:
            r = self.fail_read(off)
            if r is not None:
                if isinstance(r, Exception):
                    raise r
                return r
        data = os.pread(self.handles[h], n, off)
        ctypes.memmove(base + dev_off, data, len(data))
        return len(data) if self.returns_count else None


_live_descrs: list = []


@pytest.fixture(autouse=True)
def track_descrs(monkeypatch) -> None:
    """Lets the stand-in find a Descr by its .ptr, as the real one reads memory."""
    _live_descrs.clear()
    orig = StandInCuFile.Descr.__init__

    def init(self: Any) -> None:
        orig(self)
        _live_descrs.append(self)
    monkeypatch.setattr(StandInCuFile.Descr, "__init__", init)


@pytest.fixture
def file_pool(tmp_path) -> Any:
    path = tmp_path / f"tier-{uuid.uuid4().hex[:8]}.pool"
    p = CXLMemoryPool(f"file:{path}", create=True, size=64 << 20)
    yield p
    p.close()
    CXLMemoryPool.destroy(f"file:{path}")


@pytest.fixture
def fixed(file_pool, tmp_path) -> tuple[CXLDataset, np.ndarray]:
    """3000 records of 1 KiB (512 int16) in shards of 256 KiB."""
    arr = (np.arange(3000 * 512, dtype=np.int64) % 30011).astype(np.int16).reshape(3000, 512)
    np.save(tmp_path / "r.npy", arr)
    file_pool._pool.import_("r", str(tmp_path / "r.npy"), shard_bytes=256 << 10)
    return CXLDataset(file_pool, "r"), arr


def test_plan_cuts_spans_at_chunk_boundaries_and_lays_them_back_to_back() -> None:
    K = 4096
    assert gds.plan_reads([(K, 3 * K)], chunk=2 * K) == [(K, K, 0), (2 * K, 2 * K, K)]
    # an unaligned span starts at its own 4 KiB phase in the buffer, so only
    # its first and last read are unaligned
    reads = gds.plan_reads([(100, 10 * K), (20 * K, 5)], chunk=4 * K)
    assert reads[0] == (100, 4 * K - 100, 100)
    assert all(gds._aligned(r) for r in reads[1:-2]) and len(reads) == 4
    assert not gds._aligned(reads[-2])  # the first span's tail
    assert reads[-1] == (20 * K, 5, 100 + 10 * K)  # the second span right after the first
    assert sum(n for _, n, _ in reads) == 10 * K + 5
    for (o1, n1, d1), (o2, n2, d2) in zip(reads, reads[1:]):
        assert d2 == d1 + n1
    assert gds.plan_reads([], chunk=K) == []
    with pytest.raises(ValueError, match="chunk"):
        gds.plan_reads([(0, 1)], chunk=K + 1)


@pytest.mark.parametrize("returns_count", [True, False])
def test_gds_mode_reads_record_ranges_into_device_memory(fixed, returns_count) -> None:
    ds, arr = fixed
    cf = StandInCuFile(gds=True, returns_count=returns_count)
    with gds.FileRangeReader(ds, "cpu", cufile=cf, chunk=64 << 10, threads=4) as r:
        assert r.mode == "gds" and r.stats()["why"] == []
        assert fcntl.fcntl(r._io.fd, fcntl.F_GETFL) & os.O_DIRECT  # GDS opens the file O_DIRECT
        rng = np.random.default_rng(11)
        for lo, n in [(0, 3000), (0, 1), (2999, 1), (255, 3)] + \
                [(int(a), int(b)) for a, b in zip(rng.integers(0, 2999, 20), rng.integers(1, 400, 20))]:
            n = min(n, 3000 - lo)
            cf.reads.clear()
            t = r.read(lo, n)
            assert t.shape == (n, 512) and t.dtype == torch.int16
            assert torch.equal(t, torch.from_numpy(arr[lo:lo + n]))
            spans = ds.store.spans(lo, n)
            # the reads are exactly the spans' bytes, in chunks that never
            # cross a chunk boundary of the file
            got = sorted((off, m) for _, off, m, _ in cf.reads)
            assert sum(m for _, m in got) == sum(s[1] for s in spans) == n * 1024
            assert all(off // (64 << 10) == (off + m - 1) // (64 << 10) for off, m in got)
        st = r.stats()
        assert st["aligned_reads"] > 0 and st["buffer_registered"] > 0
        assert cf.registered == {}  # each destination deregistered after its reads
    assert cf.handles == {} and not cf.open  # handle and driver let go


def test_no_gds_support_falls_back_to_compat_mode_and_says_why(fixed) -> None:
    ds, arr = fixed
    cf = StandInCuFile(gds=False)
    with gds.FileRangeReader(ds, "cpu", cufile=cf) as r:
        st = r.stats()
        assert st["mode"] == "compat" and "DRIVER_NOT_INITIALIZED" in st["why"][0]
        assert torch.equal(r.read(10, 500), torch.from_numpy(arr[10:510]))
        assert r.stats()["buffer_registered"] == 0  # cuFile's own bounce buffers
    assert not cf.open and cf.opens == 1


def test_a_file_that_refuses_odirect_is_compat(fixed, monkeypatch) -> None:
    """GDS needs O_DIRECT; where open() refuses it (tmpfs, ...) the driver
    is reopened in compatibility mode and the file opened without it."""
    ds, arr = fixed
    real = os.open

    def no_direct(path: Any, flags: int, *a: Any) -> int:
        if flags & os.O_DIRECT:
            raise OSError(errno.EINVAL, "Invalid argument", path)
        return real(path, flags, *a)
    monkeypatch.setattr(gds.os, "open", no_direct)
    cf = StandInCuFile(gds=True)
    with gds.FileRangeReader(ds, "cpu", cufile=cf) as r:
        assert r.mode == "compat" and "Invalid argument" in r.stats()["why"][0]
        assert torch.equal(r.read(0, 3000), torch.from_numpy(arr))
    assert cf.opens == 2 and not cf.open  # strict, then compatibility


def test_without_cufile_the_posix_path_reads_and_says_so(fixed, monkeypatch) -> None:
    ds, arr = fixed
    monkeypatch.setattr(gds, "_load_cufile", lambda: (None, "no cuFile binding (test)"))
    with gds.FileRangeReader(ds, "cpu", chunk=16 << 10) as r:
        st = r.stats()
        assert st["mode"] == "posix" and st["why"] == ["no cuFile binding (test)"]
        assert torch.equal(r.read(100, 2000), torch.from_numpy(arr[100:2100]))
    with pytest.raises(gds.GDSError, match="no cuFile binding"):
        gds.FileRangeReader(ds, "cpu", mode="gds")


def test_variable_records_arrive_as_their_elements_back_to_back(file_pool, tokens) -> None:
    prefix, seqs = tokens
    file_pool._pool.import_("tok", str(prefix), shard_bytes=8 << 10)
    ds = CXLDataset(file_pool, "tok")
    assert len(ds.store.spans(0, len(ds))) > 2
    cf = StandInCuFile(gds=True)
    with gds.FileRangeReader(ds, "cpu", cufile=cf, chunk=4096) as r:
        for lo, n in [(0, 300), (17, 120), (299, 1)]:
            t = r.read(lo, n)
            assert t.dtype == torch.uint16
            assert torch.equal(t, torch.from_numpy(np.concatenate(seqs[lo:lo + n])))


def test_errors_name_the_file_and_offset_and_leave_nothing_open(fixed) -> None:
    ds, arr = fixed
    cf = StandInCuFile(gds=True)
    r = gds.FileRangeReader(ds, "cpu", cufile=cf, chunk=64 << 10)
    # a cuFile failure (raised by newer bindings)
    bad_off = ds.store.spans(1000, 1)[0][0] // (64 << 10) * (64 << 10)
    cf.fail_read = lambda off: cuFileError(OpError.IO_NOT_SUPPORTED) if off == bad_off else None
    with pytest.raises(gds.GDSError, match=rf"{r.path}: reading \d+ bytes at file offset "
                                           rf"{bad_off}: cuFileRead: IO_NOT_SUPPORTED"):
        r.read(0, 3000)
    # a negated cuFile code and a short count (older bindings return them)
    cf.fail_read = lambda off: -int(OpError.INVALID_VALUE) if off == bad_off else None
    with pytest.raises(gds.GDSError, match="INVALID_VALUE"):
        r.read(0, 3000)
    cf.fail_read = lambda off: 7 if off == bad_off else None
    with pytest.raises(gds.GDSError, match="7 bytes read"):
        r.read(0, 3000)
    cf.fail_read = None
    assert cf.registered == {}  # deregistered after failures too
    # a range outside the dataset: the store's own error
    with pytest.raises(Exception, match="not inside"):
        r.read(2990, 20)
    assert torch.equal(r.read(2990, 10), torch.from_numpy(arr[2990:]))  # still usable
    r.close()
    assert cf.handles == {} and not cf.open


def test_a_file_shorter_than_its_pool_is_refused_before_reading(fixed) -> None:
    ds, _ = fixed
    cf = StandInCuFile(gds=True)
    with gds.FileRangeReader(ds, "cpu", cufile=cf) as r:
        last = ds.store.spans(2999, 1)[0]
        r.file_bytes = last[0] + 10  # as if the file had been cut there
        with pytest.raises(gds.GDSError, match="shorter than its pool says"):
            r.read(0, 3000)
        assert cf.reads == []  # nothing was read


def test_only_file_pools(pool, tmp_path) -> None:
    np.save(tmp_path / "s.npy", np.zeros((10, 4), np.float32))
    ds = CXLDataset.ingest(pool, "s", tmp_path / "s.npy")
    with pytest.raises(ValueError, match="file: pool"):
        gds.FileRangeReader(ds, "cpu")


def test_the_driver_mode_is_shared_by_readers(fixed) -> None:
    """One driver per process: a second reader needing compatibility mode
    while the first holds a strict handle falls back to posix, not a reopen
    under the first reader's handle."""
    ds, arr = fixed
    cf = StandInCuFile(gds=True)
    a = gds.FileRangeReader(ds, "cpu", cufile=cf)
    b = gds.FileRangeReader(ds, "cpu", cufile=cf, mode="gds")
    assert a.mode == b.mode == "gds" and cf.opens == 1
    with pytest.raises(gds.GDSError, match="strict mode by another reader"):
        gds.FileRangeReader(ds, "cpu", cufile=cf, mode="compat")
    a.close()
    assert cf.open  # b still holds it
    b.close()
    assert not cf.open


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="needs a CUDA device and cuFile (none here): bench/gpu_check.py "
                           "runs this on one")
def test_cuda_reads_a_range_through_cufile(fixed) -> None:
    ds, arr = fixed
    with gds.FileRangeReader(ds, "cuda") as r:
        t = r.read(5, 2000)
        assert t.is_cuda and torch.equal(t.cpu(), torch.from_numpy(arr[5:2005]))
        print("cuFile mode:", r.stats()["mode"], r.stats()["why"])


def test_cuda_device_without_cuda_is_a_cxlerror(fixed, monkeypatch) -> None:
    """issue 34: FileRangeReader(ds, "cuda") (and a loader's device="cuda")
    where torch has no CUDA raise a CXLError that says so, not torch's
    AssertionError from its first CUDA call."""
    from cxl_dataloader import CXLDataLoader, CXLError
    ds, _ = fixed
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(CXLError, match="device='cuda'.*CUDA is not available") as e:
        gds.FileRangeReader(ds, "cuda")
    assert e.value.code == CXLError.ENODEV
    with pytest.raises(CXLError, match="device='cuda': CUDA is not available"):
        CXLDataLoader(ds, batch_size=4, device="cuda")
