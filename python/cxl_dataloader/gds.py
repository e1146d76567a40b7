"""Records of a file: pool read straight into device memory with GPUDirect
Storage (cuFile), for the archive (NVMe) tier.

What the tier layer calls:

    r = FileRangeReader(ds, device="cuda")   # ds: a CXLDataset of a file: pool
    t = r.read(first, count)                 # records [first, first+count) on the device
    r.stats(); r.close()

A pool is mapped whole from file offset 0, so the bytes of a record range
are known without touching the mapping: one span per shard crossed
(``store.spans``, cxlp_store_spans). Each span is cut into reads of at most
``chunk`` bytes at file offsets that are multiples of ``chunk`` (so every
read but a span's first and last starts and ends 4 KiB aligned, which GDS
needs for a DMA without bounce buffers); the reads land back to back in one
device allocation and are issued by ``threads`` threads at once (cuFileRead
is synchronous). Every read is checked against the file's size before it is
issued: a file shorter than its catalog says is an error naming the file and
offset, never a short read into device memory.

Modes, tried in this order at open; ``stats()["mode"]`` says which ran and
``stats()["why"]`` why an earlier one did not:
  "gds"     cuFile with compatibility mode refused: DMA from the storage to
            device memory (nvidia-fs, or PCIe P2PDMA); the file opened O_DIRECT
  "compat"  cuFile's compatibility mode, where the machine or the file system
            has no GDS support: cuFile reads with POSIX I/O through its own
            pinned bounce buffers, then copies to the device
  "posix"   no cuFile (cuda.bindings.cufile or libcufile missing): buffered
            pread into a pinned buffer, then a copy to the device
The cuFile calls go through cuda.bindings.cufile (cuda-python, with the
nvidia-cufile library); nothing here links CUDA into the C core.

Rejected: kvikio (a second binding of the same library, with its own thread
pool and compatibility logic, for the four calls used here); reading through
the pool mapping (page cache, then a pageable copy: the two host copies GDS
exists to avoid); one cuFileRead per span (a 256 MiB shard read by one thread
leaves the device's queues nearly empty).
"""
from __future__ import annotations

import errno
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Optional

import torch

from .gpu import require_cuda

ALIGN = 4096
DEFAULT_CHUNK = 8 << 20


class GDSError(OSError):
    """A read of the file tier failed; str() names the file, the file offset
    and the byte count, and what cuFile or the system said."""


def plan_reads(spans: list[tuple[int, int]], chunk: int = DEFAULT_CHUNK,
               align: int = ALIGN) -> list[tuple[int, int, int]]:
    """Reads [(file offset, bytes, device offset)] that put the spans
    [(file offset, bytes)] back to back in device memory, the first at
    device offset (its file offset % align), so that a buffer whose start is
    aligned has the first span in the same 4 KiB phase as the file: each
    span is cut at file offsets that are multiples of chunk (a multiple of
    align), and only its first and last read can be unaligned (a later span
    keeps the phase when the spans before it are whole multiples of
    align)."""
    if chunk < align or chunk % align:
        raise ValueError(f"chunk={chunk}: should be a positive multiple of {align}")
    out = []
    dev = spans[0][0] % align if spans else 0
    for off, n in spans:
        end = off + n
        while off < end:
            stop = min(end, (off // chunk + 1) * chunk)
            out.append((off, stop - off, dev))
            dev += stop - off
            off = stop
    return out


def _aligned(read: tuple[int, int, int], align: int = ALIGN) -> bool:
    return all(v % align == 0 for v in read)


def _load_cufile() -> tuple[Any, Optional[str]]:
    """(cuda.bindings.cufile, None), or (None, why it cannot be used)."""
    try:
        from cuda.bindings import cufile  # type: ignore[import-not-found]
    except ImportError as e:
        return None, f"no cuFile binding (cuda.bindings.cufile): {e}"
    try:
        cufile.get_version()
    except Exception as e:  # the binding loads libcufile lazily: absent here
        return None, f"no cuFile library (nvidia-cufile): {e}"
    return cufile, None


class _Driver:
    """cuFile's driver, one per process: opened for the first reader, in
    strict mode (compatibility refused) or in compatibility mode, and
    closed when the last reader closes. Its mode can change only while no
    reader holds a handle (the setting is read when the driver opens)."""
    lock = threading.Lock()
    mode: Optional[str] = None   # "strict" or "compat" while open
    users = 0

    @classmethod
    def acquire(cls, cf: Any, strict: bool) -> None:
        want = "strict" if strict else "compat"
        with cls.lock:
            if cls.mode != want:
                if cls.users:
                    raise GDSError(errno.EBUSY, f"cuFile is open in {cls.mode} mode by another "
                                   f"reader; {want} mode needs it reopened")
                if cls.mode is not None:
                    cf.driver_close()
                    cls.mode = None
                cf.set_parameter_bool(cf.BoolConfigParameter.PROPERTIES_ALLOW_COMPAT_MODE,
                                      not strict)
                cf.driver_open()
                cls.mode = want
            cls.users += 1

    @classmethod
    def release(cls, cf: Any) -> None:
        with cls.lock:
            cls.users -= 1
            if cls.users == 0 and cls.mode is not None:
                cls.mode = None
                cf.driver_close()


class _CuFileIO:
    """One registered cuFile handle on path."""

    def __init__(self, cf: Any, path: str, strict: bool) -> None:
        self.cf = cf
        self.path = path
        _Driver.acquire(cf, strict)
        self.fd = -1
        try:
            try:
                self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_DIRECT)
            except OSError:
                if strict:  # GDS needs O_DIRECT (tmpfs and some others refuse it)
                    raise
                self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            d = cf.Descr()
            d.type = cf.FileHandleType.OPAQUE_FD
            d.handle.fd = self.fd
            d.fs_ops = 0
            self.fh = cf.handle_register(d.ptr)
        except BaseException:
            if self.fd >= 0:
                os.close(self.fd)
            _Driver.release(cf)
            raise

    def read(self, base: int, n: int, off: int, dev_off: int) -> None:
        cf = self.cf
        try:
            r = cf.read(self.fh, base, n, off, dev_off)
        except cf.cuFileError as e:
            raise _error(self.path, n, off, f"cuFileRead: {e}") from e
        # older bindings return the count (negative: -1 with errno, or a
        # negated cuFile code); newer ones raise and return None
        if r is not None and r != n:
            if r == -1:
                detail = "cuFileRead: a system error (-1)"
            elif r < 0:
                detail = f"cuFileRead: {_op_name(cf, -r)} ({r})"
            else:
                detail = f"cuFileRead: {r} bytes read"
            raise _error(self.path, n, off, detail)

    def register(self, base: int, n: int) -> Optional[str]:
        try:
            self.cf.buf_register(base, n, 0)
            return None
        except self.cf.cuFileError as e:
            return f"cuFileBufRegister({n} bytes): {e}"

    def deregister(self, base: int) -> None:
        self.cf.buf_deregister(base)

    def close(self) -> None:
        self.cf.handle_deregister(self.fh)
        os.close(self.fd)
        _Driver.release(self.cf)


class _PosixIO:
    """No cuFile: pread into a pinned buffer per thread, then a copy to the
    device on that thread's stream (straight into the destination when it
    is host memory)."""

    def __init__(self, path: str, device: torch.device, chunk: int) -> None:
        self.path = path
        self.device = device
        self.chunk = chunk
        self.fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self.local = threading.local()

    def read_into(self, dst: torch.Tensor, n: int, off: int, dev_off: int) -> None:
        if dst.device.type == "cpu":
            view = memoryview(dst.numpy())[dev_off:dev_off + n]
            self._pread(view, n, off)
            return
        loc = self.local
        if not hasattr(loc, "buf"):
            loc.buf = torch.empty(self.chunk, dtype=torch.uint8, pin_memory=True)
            loc.stream = torch.cuda.Stream(dst.device)
        self._pread(memoryview(loc.buf.numpy())[:n], n, off)
        with torch.cuda.stream(loc.stream):
            dst[dev_off:dev_off + n].copy_(loc.buf[:n], non_blocking=True)
        loc.stream.synchronize()  # the buffer is reused by this thread's next read

    def _pread(self, view: memoryview, n: int, off: int) -> None:
        got = 0
        while got < n:
            try:
                k = os.preadv(self.fd, [view[got:]], off + got)
            except OSError as e:
                raise _error(self.path, n, off, f"pread: {e.strerror}", e.errno) from e
            if k == 0:
                raise _error(self.path, n, off, f"end of file after {got} bytes")
            got += k

    def close(self) -> None:
        os.close(self.fd)


def _op_name(cf: Any, code: int) -> str:
    try:
        return cf.OpError(code).name
    except Exception:
        return f"cuFile error {code}"


def _error(path: str, n: int, off: int, detail: str, code: int = errno.EIO) -> GDSError:
    return GDSError(code, f"{path}: reading {n} bytes at file offset {off}: {detail}")


class FileRangeReader:
    """Reads record ranges of a dataset in a ``file:`` pool into device
    memory (see the module docstring for the modes and the plan).

    device: where the records go (a CUDA device; "cpu" works too, for the
    posix mode and for tests). threads: reads in flight. chunk: the largest
    read. register_buffer: register each destination with cuFile before the
    reads (GDS mode: DMA without cuFile's internal bounce buffers).
    mode: force "gds", "compat" or "posix" (default: the first that opens)."""

    def __init__(self, dataset: Any, device: Any = "cuda", *, threads: int = 8,
                 chunk: int = DEFAULT_CHUNK, register_buffer: bool = True,
                 mode: Optional[str] = None, cufile: Any = None) -> None:
        spec = dataset.spec
        if not spec.startswith("file:"):
            raise ValueError(f"{dataset!r}: GPUDirect Storage reads a file: pool; this "
                             f"pool is {spec!r}")
        fields = dataset.schema["fields"]
        if len(fields) != 1:
            raise ValueError(f"{dataset!r}: has {len(fields)} fields; the file tier reads "
                             "single-field datasets")
        if mode not in (None, "gds", "compat", "posix"):
            raise ValueError(f"mode={mode!r}: expected None, 'gds', 'compat' or 'posix'")
        if chunk < ALIGN or chunk % ALIGN:
            raise ValueError(f"chunk={chunk}: should be a positive multiple of {ALIGN}")
        self.dataset = dataset
        self.path = spec[len("file:"):]
        self.device = torch.device(device)
        require_cuda(f"FileRangeReader({dataset!r}, device={device!r})", self.device)
        self.threads = max(1, int(threads))
        self.chunk = chunk
        self.register_buffer = register_buffer
        self.field = fields[0]
        self.dtype = getattr(torch, self.field["dtype"])
        self.file_bytes = os.stat(self.path).st_size
        self._st = {"reads": 0, "bytes": 0, "aligned_reads": 0, "unaligned_reads": 0,
                    "seconds": 0.0, "buffer_registered": 0, "buffer_failure": None}
        self.why: list[str] = []
        self._io: Any = None
        cf, why = (cufile, None) if cufile is not None else _load_cufile()
        for m in ("gds", "compat") if mode is None else (mode,):
            if m == "posix":
                break
            if cf is None:
                self.why.append(str(why))
                if mode is not None:
                    raise GDSError(errno.ENOSYS, f"{self.path}: mode={mode!r}: {why}")
                break
            try:
                self._io = _CuFileIO(cf, self.path, strict=(m == "gds"))
                self.mode = m
                break
            except Exception as e:  # cuFileError, OSError: the next mode
                if mode is not None:
                    raise GDSError(errno.EIO, f"{self.path}: mode={mode!r}: {e}") from e
                self.why.append(f"{m}: {e}")
        if self._io is None:
            self._io = _PosixIO(self.path, self.device, chunk)
            self.mode = "posix"
        self._pool = ThreadPoolExecutor(self.threads, thread_name_prefix="cxlp-gds")

    def plan(self, first: int, count: int) -> list[tuple[int, int, int]]:
        """The reads of records [first, first+count), each checked against
        the file's size."""
        spans = self.dataset.store.spans(first, count)
        for off, n, *_ in spans:
            if off + n > self.file_bytes:
                raise GDSError(errno.EIO, f"{self.path}: records need bytes [{off}, {off + n}) "
                               f"but the file holds {self.file_bytes}: shorter than its pool "
                               "says")
        return plan_reads([(off, n) for off, n, *_ in spans], self.chunk)

    def read(self, first: int, count: int) -> torch.Tensor:
        """Records [first, first+count) on the device: [count, *shape] for
        fixed-size records, the records' elements back to back (1-D) for
        variable-size ones (their lengths are the dataset's)."""
        reads = self.plan(first, count)
        total = sum(n for _, n, _ in reads)
        head = reads[0][2] if reads else 0  # the first span's phase (plan_reads)
        buf = torch.empty(head + total, dtype=torch.uint8, device=self.device)
        if buf.is_cuda:
            # the allocator hands out memory that is free in stream order; the
            # reads below are not stream-ordered, so work still queued on the
            # stream (on what the memory held before) must be done first
            torch.cuda.current_stream(buf.device).synchronize()
        t0 = time.perf_counter()
        if total:
            self._run(buf, reads)
        st = self._st
        st["seconds"] += time.perf_counter() - t0
        st["reads"] += len(reads)
        st["bytes"] += total
        aligned = sum(1 for r in reads if _aligned(r))
        st["aligned_reads"] += aligned
        st["unaligned_reads"] += len(reads) - aligned
        out = buf[head:].view(self.dtype)
        if self.dataset.schema["fixed"]:
            out = out.reshape(count, *self.field["shape"])
        return out

    def _run(self, buf: torch.Tensor, reads: list[tuple[int, int, int]]) -> None:
        io = self._io
        if isinstance(io, _PosixIO):
            def one(r: tuple[int, int, int]) -> None:
                io.read_into(buf, r[1], r[0], r[2])
        else:
            base = buf.data_ptr()
            registered = False
            if self.register_buffer and self.mode == "gds":
                err = io.register(base, buf.numel())
                registered = err is None
                self._st["buffer_registered"] += registered
                if err is not None:
                    self._st["buffer_failure"] = err

            def one(r: tuple[int, int, int]) -> None:
                io.read(base, r[1], r[0], r[2])
        try:
            # every read is waited for, also after a failure, before the
            # buffer can go away; the first error is raised
            futs = [self._pool.submit(one, r) for r in reads]
            errs = [f.exception() for f in futs]
        finally:
            if not isinstance(io, _PosixIO) and registered:
                io.deregister(base)
        for e in errs:
            if e is not None:
                raise e

    def stats(self) -> dict:
        """mode ("gds", "compat", "posix"), why the modes before it did not
        open, reads and bytes so far, how many reads were 4 KiB aligned,
        seconds spent reading, destination buffers registered with cuFile."""
        return dict(self._st, mode=self.mode, why=list(self.why), threads=self.threads,
                    chunk=self.chunk, path=self.path)

    def close(self) -> None:
        if self._io is not None:
            self._pool.shutdown(wait=True)
            self._io.close()
            self._io = None

    def __enter__(self) -> "FileRangeReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FileRangeReader({self.path!r}, mode={self.mode!r}, device={self.device})"
