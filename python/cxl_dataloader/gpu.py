"""Batches to a CUDA device without a second host copy.

torch's pin_memory copies every batch from pageable memory into a pinned
staging buffer before the device copy, so with a pool the data crosses host
memory twice. Here the memory the batches already live in is registered with
CUDA once (the gather engine's ring slots; optionally the dataset's mapping
of the pool), and each batch is copied to the device by DMA from its slot, on
a stream of its own, ahead of use.

Glossary:
  slot       a ring slot of the gather engine; a batch's tensors view it, and
             it returns to the ring when they are freed
  copy k     the host-to-device copy of batch k, queued on the copy stream
  ready[k]   the event recorded on the copy stream right after copy k
  depth d    ``prefetch_to_gpu``: copies queued ahead of the batch in use
  consumer   the stream current when the loop is handed a batch

Invariants (CopyPipeline):
  - when batch k is handed out, copies k+1..k+d are queued (fewer at the end
    of the pass), so the copy of k+d runs while the loop uses batch k;
  - batch k is handed out only after consumer.wait_event(ready[k]), and each
    of its device tensors is marked used on the consumer (record_stream), so
    the caching allocator, which saw it allocated on the copy stream, does
    not give its memory away while the consumer's queued work reads it;
  - the host batch k (so its slot) is referenced until ready[k] has
    completed: a DMA from registered memory reads it after the copy call
    returned, and a slot let go earlier could be refilled with the next
    batch under the copy (tests/python/test_gpu.py plants exactly that);
  - nothing registered is unregistered before every copy from it completed.

Registration (HostRegistry): cudaHostRegister through torch.cuda.cudart()
(whose wrapper clears CUDA's sticky last error on failure), never by linking
CUDA into the C core. Ranges are cut into page-aligned chunks of at most
``max_chunk`` bytes (drivers refuse single registrations of 512 GiB and more,
docs: /work/shared/CXL.md). A range that cannot be registered (limits, a
mapping type the driver refuses) is copied through a pinned staging buffer
(torch's pin_memory(), whose caching host allocator keeps the buffer until
its copy completed); stats say which path each byte took.

Rejected: copying on the consumer's stream (the copy of the next batch would
queue behind the loop's compute instead of overlapping it); one event per
pass with a device-wide synchronize before each slot is reused (it stalls the
loop on the GPU's progress); registering each batch's bytes per batch (a
registration costs far more than the copy).
"""
from __future__ import annotations

import bisect
import collections
import weakref
from typing import Any, Callable, Iterable, Iterator, Optional

import torch

from . import _core

#: cudaHostRegisterReadOnly: the device only reads the range. A private
#: (copy-on-write) mapping registered without it would be pinned for writing,
#: which copies every page.
HOST_REGISTER_READ_ONLY = 0x08
#: the largest single registration made (see the module docstring)
DEFAULT_MAX_CHUNK = 1 << 30
PAGE = 4096


def require_cuda(what: str, device: torch.device) -> None:
    """Nothing for a device that is not CUDA's or a CUDA that is there; else a
    CXLError (code ENODEV) saying that CUDA is not available and why (a CPU
    build of torch, or no device), instead of the AssertionError torch
    raises at the first CUDA call."""
    if device.type != "cuda" or torch.cuda.is_available():
        return
    why = ("a CPU build of torch" if torch.version.cuda is None
           else f"torch built for CUDA {torch.version.cuda}, but no CUDA device is visible")
    e = _core.CXLError(f"{what}: CUDA is not available (torch {torch.__version__}: {why})")
    e.code = _core.CXLError.ENODEV
    e.reason = _core.strerror(e.code)
    raise e


def plan_chunks(ranges: Iterable[tuple[int, int]], max_chunk: int = DEFAULT_MAX_CHUNK,
                page: int = PAGE) -> list[tuple[int, int]]:
    """The registrations covering host ranges [(addr, bytes)]: each range
    widened to whole pages, overlapping or touching ones merged (two
    registrations may not share a page), then cut into chunks of at most
    max_chunk bytes (a multiple of page). Sorted by address."""
    if max_chunk < page or max_chunk % page:
        raise ValueError(f"max_chunk={max_chunk}: should be a positive multiple of {page}")
    spans = sorted((a - a % page, -(-(a + n) // page) * page) for a, n in ranges if n > 0)
    merged: list[list[int]] = []
    for lo, hi in spans:
        if merged and lo <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    out = []
    for lo, hi in merged:
        for a in range(lo, hi, max_chunk):
            out.append((a, min(max_chunk, hi - a)))
    return out


class CudaRuntime:
    """What the copy pipeline and the registries ask of CUDA, through torch.
    One object so that the bookkeeping can be tested against a stand-in that
    records the calls (tests/python/test_gpu.py)."""

    def host_register(self, ptr: int, size: int, flags: int) -> Optional[str]:
        """None, or why the range could not be registered."""
        rt = torch.cuda.cudart()
        rc = rt.cudaHostRegister(ptr, size, flags)
        if int(rc) == 0:
            return None
        return f"cudaHostRegister({ptr:#x}, {size}, {flags:#x}): {rt.cudaGetErrorString(rc)}"

    def host_unregister(self, ptr: int) -> Optional[str]:
        rt = torch.cuda.cudart()
        rc = rt.cudaHostUnregister(ptr)
        return None if int(rc) == 0 else f"cudaHostUnregister({ptr:#x}): {rt.cudaGetErrorString(rc)}"

    def stream(self, device: torch.device) -> Any:
        return torch.cuda.Stream(device)

    def current_stream(self, device: torch.device) -> Any:
        return torch.cuda.current_stream(device)

    def event(self) -> Any:
        return torch.cuda.Event()

    def copy(self, t: torch.Tensor, device: torch.device, stream: Any) -> torch.Tensor:
        """t on device, queued on stream (asynchronous from page-locked memory)."""
        with torch.cuda.stream(stream):
            return t.to(device, non_blocking=True)

    def stage(self, t: torch.Tensor) -> torch.Tensor:
        """A page-locked copy of t (torch's caching host allocator)."""
        return t.pin_memory()

    def record_stream(self, t: torch.Tensor, stream: Any) -> None:
        t.record_stream(stream)

    def synchronize(self, device: Optional[torch.device] = None) -> None:
        torch.cuda.synchronize(device)


def _tensors(batch: Any) -> list[torch.Tensor]:
    return list(batch.values()) if isinstance(batch, dict) else [batch]


def _map(batch: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> Any:
    if isinstance(batch, dict):
        return {k: fn(v) for k, v in batch.items()}
    return fn(batch)


class HostRegistry:
    """Host memory registered with CUDA: each page at most once, every
    registration undone by unregister_all(). A failed registration is kept
    as the reason (``failure``) and its bytes are not covered, so copies
    from them go through a pinned staging buffer."""

    def __init__(self, rt: Any, flags: int = 0, max_chunk: int = DEFAULT_MAX_CHUNK) -> None:
        self.rt = rt
        self.flags = flags
        self.max_chunk = max_chunk
        self._starts: list[int] = []     # registered chunks, sorted by address
        self._ends: list[int] = []
        self.bytes = 0
        self.calls = 0                   # cudaHostRegister calls made
        self.failures = 0
        self.failure: Optional[str] = None
        self.unregistered = 0            # cudaHostUnregister calls made

    @property
    def chunks(self) -> int:
        """Registrations held now."""
        return len(self._starts)

    def register(self, ranges: Iterable[tuple[int, int]]) -> bool:
        """Registers what of ranges is not registered yet; True when all of
        it is registered now."""
        ok = True
        for addr, size in plan_chunks(ranges, self.max_chunk):
            if self.covers(addr, size):
                continue
            self.calls += 1
            err = self.rt.host_register(addr, size, self.flags)
            if err is not None:
                self.failures += 1
                self.failure = err
                ok = False
                continue
            i = bisect.bisect(self._starts, addr)
            self._starts.insert(i, addr)
            self._ends.insert(i, addr + size)
            self.bytes += size
        return ok

    def covers(self, addr: int, nbytes: int) -> bool:
        """[addr, addr+nbytes) lies inside one registration."""
        i = bisect.bisect(self._starts, addr) - 1
        return i >= 0 and addr + nbytes <= self._ends[i]

    def unregister_all(self) -> None:
        """Undoes every registration (the caller has waited for every copy
        from them)."""
        starts, self._starts, self._ends = self._starts, [], []
        for a in starts:
            self.unregistered += 1
            err = self.rt.host_unregister(a)
            if err is not None and self.failure is None:
                self.failure = err
        self.bytes = 0

    def stats(self) -> dict:
        return {"chunks": self.chunks, "bytes": self.bytes, "register_calls": self.calls,
                "unregister_calls": self.unregistered, "failures": self.failures,
                "failure": self.failure}


class CopyStats:
    """What the copies of a loader did, summed over its passes."""

    def __init__(self) -> None:
        self.batches = 0
        self.direct_bytes = 0    # copied by DMA from registered memory
        self.staged_bytes = 0    # copied through a pinned staging buffer

    def path(self) -> Optional[str]:
        if self.direct_bytes and self.staged_bytes:
            return "mixed"
        if self.direct_bytes:
            return "registered"
        if self.staged_bytes:
            return "staging"
        return None


class CopyPipeline:
    """Copies host batches to the device on a stream of its own, depth
    batches ahead of the one handed out (see the module's invariants)."""

    def __init__(self, rt: Any, device: torch.device, depth: int, registry: HostRegistry,
                 stats: CopyStats) -> None:
        self.rt = rt
        self.device = device
        self.depth = depth
        self.registry = registry
        self.stats = stats
        self.stream = rt.stream(device)

    def _issue(self, host: Any) -> tuple[Any, Any, Any]:
        """Queues the copy of one batch; (ready event, what must stay alive
        until it completed, the device batch)."""
        rt, reg, st = self.rt, self.registry, self.stats

        def src(t: torch.Tensor) -> torch.Tensor:
            n = t.numel() * t.element_size()
            if reg.covers(t.data_ptr(), n):
                st.direct_bytes += n
                return t
            st.staged_bytes += n
            return rt.stage(t)

        srcs = _map(host, src)
        out = _map(srcs, lambda t: rt.copy(t, self.device, self.stream))
        ev = rt.event()
        ev.record(self.stream)
        st.batches += 1
        return ev, (host, srcs), out

    def run(self, take: Callable[[], Optional[tuple[Any, Any]]]) -> Iterator[tuple[Any, Any]]:
        """Yields (device batch, meta) for each (host batch, meta) take()
        returns, in order, until it returns None."""
        rt = self.rt
        ahead: collections.deque = collections.deque()  # (ready, keep, out, meta): not handed out
        lent: collections.deque = collections.deque()   # (ready, keep): handed out
        done = False
        try:
            while True:
                while not done and len(ahead) <= self.depth:
                    while lent and lent[0][0].query():  # copies done: their slots go back
                        lent.popleft()
                    got = take()
                    if got is None:
                        done = True
                        break
                    host, meta = got
                    ev, keep, out = self._issue(host)
                    ahead.append((ev, keep, out, meta))
                if not ahead:
                    return
                ev, keep, out, meta = ahead.popleft()
                consumer = rt.current_stream(self.device)  # the loop's, as it is now
                consumer.wait_event(ev)
                for t in _tensors(out):
                    rt.record_stream(t, consumer)
                lent.append((ev, keep))
                del keep
                yield out, meta
        finally:
            # end, break or exception: the host memory of every queued copy
            # must outlive its DMA (and its registration)
            for ev, *_ in list(lent) + list(ahead):
                ev.synchronize()
            lent.clear()
            ahead.clear()


class SlotRegistrar:
    """Registers a pass's ring slots as they appear (the ring only grows)."""

    def __init__(self, engine: Any, registry: HostRegistry) -> None:
        self.engine = engine
        self.registry = registry
        self.seen = 0

    def update(self) -> None:
        n = self.engine.n_slots
        if n != self.seen:
            self.registry.register(self.engine.slots(self.seen))
            self.seen = n


class LoaderGPU:
    """A CXLDataLoader's CUDA side: per pass, its ring slots registered and
    either each batch copied to ``device`` through a CopyPipeline, or
    (pin_memory=True without a CUDA device) batches handed out from their
    registered slots and held until the current stream is past them; for the
    loader's lifetime, the dataset's pool mapping when asked (pin_to_cxl)."""

    def __init__(self, device: Optional[torch.device], depth: int, dataset: Any = None,
                 rt: Any = None) -> None:
        self.rt = rt if rt is not None else CudaRuntime()
        self.device = device
        self.depth = depth
        self.copies = CopyStats()
        self.slots_last: dict = {}       # the last pass's slot registration figures
        self.slot_passes = 0
        self.pool: Optional[PoolRegistration] = None
        if dataset is not None:
            self.pool = PoolRegistration(dataset, rt=self.rt)

    def device_pass(self, engine: Any, take: Callable[[], Any]) -> Iterator[tuple[Any, Any]]:
        """(device batch, engine resume point after it) per batch of the pass."""
        reg = HostRegistry(self.rt)
        slots = SlotRegistrar(engine, reg)

        def take_registered() -> Optional[tuple[Any, Any]]:
            out = take()
            if out is None:
                return None
            slots.update()  # the ring may have grown: register before the copy
            return out, (engine.resume_records, engine.resume_offset)

        pipe = CopyPipeline(self.rt, self.device, self.depth, reg, self.copies)
        try:
            yield from pipe.run(take_registered)
        finally:
            reg.unregister_all()
            self._fold(reg)

    def pinned_pass(self, engine: Any, take: Callable[[], Any]) -> Iterator[tuple[Any, Any]]:
        """pin_memory=True without a device: batches from registered slots. A
        batch is held (its slot stays lent) until an event recorded on the
        current stream when the next batch is asked for has completed: the
        loop's non_blocking copies from it are queued before that event.
        Copies on other streams are the caller's to synchronize."""
        reg = HostRegistry(self.rt)
        slots = SlotRegistrar(engine, reg)
        held: collections.deque = collections.deque()  # [event or None, batch]
        try:
            while True:
                if held and held[-1][0] is None:
                    ev = self.rt.event()
                    ev.record(self.rt.current_stream(None))
                    held[-1][0] = ev
                while held and held[0][0].query():
                    held.popleft()
                out = take()
                if out is None:
                    return
                slots.update()
                held.append([None, out])
                yield out, (engine.resume_records, engine.resume_offset)
        finally:
            self.rt.synchronize()
            held.clear()
            reg.unregister_all()
            self._fold(reg)

    def _fold(self, reg: HostRegistry) -> None:
        self.slots_last = reg.stats()
        self.slot_passes += 1

    def stats(self) -> dict:
        c = self.copies
        out: dict[str, Any] = {
            "device": str(self.device) if self.device is not None else None,
            "prefetch_to_gpu": self.depth if self.device is not None else None,
            "path": c.path(), "batches": c.batches, "direct_bytes": c.direct_bytes,
            "staged_bytes": c.staged_bytes, "passes": self.slot_passes,
            "slots": dict(self.slots_last)}
        if self.pool is not None:
            out["pool"] = self.pool.stats()
        return out

    def close(self) -> None:
        if self.pool is not None:
            self.pool.close()


class PoolRegistration:
    """A dataset's view of its pool registered with CUDA in chunks, read-only
    (cudaHostRegisterReadOnly: the view is copy-on-write, and a registration
    for writing would copy every page), so ``ds[i].to("cuda",
    non_blocking=True)`` is a DMA from the pool's own pages with no staging
    copy. What is registered is the bytes of the dataset's records (one range
    per shard: ``store.spans``), as the process's private view maps them.
    Caveat: a record this process wrote into (its own copy of the page, see
    docs/python.md) is not what the registration pinned; the device then
    reads the stored bytes of that page.

    Undone by close() (or when the object is collected). ``ok`` says whether
    every chunk registered; ``stats()`` how many, and why not."""

    def __init__(self, dataset: Any, rt: Any = None, max_chunk: int = DEFAULT_MAX_CHUNK) -> None:
        self.rt = rt if rt is not None else CudaRuntime()
        self.registry = HostRegistry(self.rt, flags=HOST_REGISTER_READ_ONLY, max_chunk=max_chunk)
        self.name = getattr(dataset, "name", "?")
        self.reason: Optional[str] = None
        try:
            spans = dataset.store.spans(0, len(dataset)) if len(dataset) else []
        except _core.CXLError as e:  # several fields in columns: no one byte range a record
            spans, self.reason = None, str(e)
        if spans is None:
            self.ok = False
        elif any(addr == 0 for *_, addr in spans):
            # no private view of this pool (devdax, address space): ds[i]
            # are copies, and there is nothing of the pool to register
            self.reason = ("the dataset's records are copies (the pool has no private "
                           "mapping): nothing to register")
            self.ok = False
        else:
            self.ok = self.registry.register((addr, n) for _, n, _, _, addr in spans)
            if not self.ok:
                self.reason = self.registry.failure
        self._finalizer = weakref.finalize(self, self.registry.unregister_all)

    def close(self) -> None:
        """Unregisters (once). Copies still queued from the pool must have
        completed: synchronize first."""
        self._finalizer()

    def __enter__(self) -> "PoolRegistration":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def stats(self) -> dict:
        out = self.registry.stats()
        out.update(ok=self.ok, reason=self.reason)
        return out

    def __repr__(self) -> str:
        st = self.registry
        return (f"PoolRegistration({self.name!r}, {st.chunks} chunks, {st.bytes} bytes"
                f"{'' if self.ok else ', incomplete: ' + str(self.reason)})")


def register_dataset(dataset: Any, max_chunk: int = DEFAULT_MAX_CHUNK) -> PoolRegistration:
    """Registers a CXLDataset's records with CUDA (see PoolRegistration);
    a context manager."""
    return PoolRegistration(dataset, max_chunk=max_chunk)
