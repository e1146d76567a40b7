"""The CUDA side of the loader (cxl_dataloader/gpu.py): device="cuda",
prefetch_to_gpu, ring slots and the pool view registered with CUDA,
stats()["gpu"].

There is no GPU on the development machine, so the bookkeeping is tested
against a stand-in for CUDA (StandIn) that records every call and behaves
like an asynchronous DMA engine: a copy reads its source bytes only when the
event recorded after it completes, and events complete only as far as the
stand-in "GPU" has progressed. A slot handed back to the ring before its
copy completed is then refilled under the copy, and the batch that arrives
holds the wrong bytes: test_planted_early_release_is_caught shows the
harness catches that. The tests marked `cuda` run the same paths on a real
device and skip here with the reason.
"""
from __future__ import annotations

import ctypes
import gc
import itertools
import threading
from typing import Any, Optional

import numpy as np
import pytest
import torch

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool, gpu

needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA device (none here): bench/gpu_check.py "
                                       "runs these on one")


# -- the stand-in -------------------------------------------------------------
class Stream:
    def __init__(self, rt: "StandIn", name: str) -> None:
        self.rt, self.name = rt, name

    def wait_event(self, ev: "Event") -> None:
        """The consumer's later work (here: the test reading the tensor on
        the CPU) sees the copy: the stand-in completes it now."""
        assert ev.recorded, "waiting on an event that was never recorded"
        self.rt.log.append(("wait", self.name, ev.seq))
        if self.rt.complete_on_wait:
            self.rt.complete(ev)


class Event:
    def __init__(self, rt: "StandIn") -> None:
        self.rt = rt
        self.recorded = False
        self.done = False
        self.seq = -1

    def record(self, stream: Stream) -> None:
        rt = self.rt
        self.recorded = True
        self.seq = rt.n_events = rt.n_events + 1
        self.mark = rt.n_copies  # copies queued before this event on the stream
        self.stream = stream.name if stream is not None else "current"
        rt.events.append(self)
        rt.log.append(("record", self.stream, self.seq))

    def query(self) -> bool:
        rt = self.rt
        if self.done:
            return True
        if rt.lag is None or rt.n_events - self.seq >= rt.lag:
            rt.complete(self)
        return self.done

    def synchronize(self) -> None:
        self.rt.complete(self)


class StandIn:
    """Stands in for gpu.CudaRuntime. "Device" tensors are CPU tensors whose
    bytes are written when the copy's event completes, from the source
    address as it is then (a DMA), never from a reference to the source. The
    "GPU" is lag events behind the last event recorded (None: it keeps up;
    a large number: it completes nothing until synchronized), except that
    with complete_on_wait a batch's copy completes when it is handed out
    (so the test can read it at once, as the consumer's stream would);
    without it, nothing of a batch is there before the end of the pass."""

    def __init__(self, lag: Optional[int] = 2, fail: Any = None,
                 complete_on_wait: bool = True) -> None:
        self.lag = lag
        self.complete_on_wait = complete_on_wait
        self.fail = fail                    # fail(addr, size, flags) -> True: refuse
        self.registered: dict[int, tuple[int, int]] = {}  # addr -> (size, flags)
        self.log: list[tuple] = []
        self.events: list[Event] = []
        self.pending: list[tuple] = []      # (copy no, dst, src addr, nbytes)
        self.n_copies = 0
        self.n_events = 0
        self.consumer = Stream(self, "consumer")
        self.lock = threading.Lock()

    # registration
    def host_register(self, ptr: int, size: int, flags: int) -> Optional[str]:
        self.log.append(("register", ptr, size, flags))
        assert ptr % 4096 == 0 and size % 4096 == 0, "registrations are whole pages"
        for a, (n, _) in self.registered.items():
            assert ptr + size <= a or a + n <= ptr, "a page registered twice"
        if self.fail is not None and self.fail(ptr, size, flags):
            return f"cudaHostRegister({ptr:#x}, {size}, {flags:#x}): stand-in refused"
        self.registered[ptr] = (size, flags)
        return None

    def host_unregister(self, ptr: int) -> Optional[str]:
        self.log.append(("unregister", ptr))
        size, _ = self.registered.pop(ptr)
        for _, _, src, n in self.pending:
            assert not (ptr <= src < ptr + size), "unregistered under a queued copy"
        return None

    def covered(self, addr: int, n: int) -> bool:
        return any(a <= addr and addr + n <= a + s for a, (s, _) in self.registered.items())

    # streams and events
    def stream(self, device: Any) -> Stream:
        return Stream(self, "copy")

    def current_stream(self, device: Any) -> Stream:
        return self.consumer

    def event(self) -> Event:
        return Event(self)

    def copy(self, t: torch.Tensor, device: Any, stream: Stream) -> torch.Tensor:
        assert stream.name == "copy", "copies run on the copy stream"
        n = t.numel() * t.element_size()
        assert self.covered(t.data_ptr(), n) or getattr(t, "_staged", False), \
            "an asynchronous copy from memory that is neither registered nor staged"
        dst = torch.full_like(t, 0)
        self.n_copies += 1
        self.pending.append((self.n_copies, dst, t.data_ptr(), n))
        self.log.append(("copy", stream.name, self.n_copies))
        return dst

    def stage(self, t: torch.Tensor) -> torch.Tensor:
        s = t.clone()
        s._staged = True
        self.log.append(("stage", t.data_ptr()))
        return s

    def record_stream(self, t: torch.Tensor, stream: Stream) -> None:
        self.log.append(("record_stream", stream.name, t.data_ptr()))

    def complete(self, ev: Event) -> None:
        """The GPU reaches ev: every copy queued before it happens now."""
        for e in self.events:
            if e.seq <= ev.seq:
                e.done = True
        rest = []
        for no, dst, src, n in self.pending:
            if no <= ev.mark:
                ctypes.memmove(dst.data_ptr(), src, n)
            else:
                rest.append((no, dst, src, n))
        self.pending = rest

    def synchronize(self, device: Any = None) -> None:
        if self.events:
            self.complete(self.events[-1])
        self.log.append(("synchronize",))


@pytest.fixture
def standin(monkeypatch) -> Any:
    """Makes the loader see CUDA and use a fresh stand-in runtime."""
    made: list[StandIn] = []
    opts: dict = {}

    def factory() -> StandIn:
        rt = StandIn(**opts)
        made.append(rt)
        return rt

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu, "CudaRuntime", factory)

    class Handle:
        def configure(self, **kw: Any) -> None:
            opts.update(kw)

        @property
        def rt(self) -> StandIn:
            return made[-1]
    return Handle()


@pytest.fixture
def fixed(pool: CXLMemoryPool, tmp_path) -> tuple[CXLDataset, np.ndarray]:
    arr = np.arange(400 * 64, dtype=np.int32).reshape(400, 64)
    np.save(tmp_path / "g.npy", arr)
    return CXLDataset.ingest(pool, "g", tmp_path / "g.npy"), arr


# -- plan_chunks --------------------------------------------------------------
def test_chunks_are_whole_pages_merged_and_cut_below_the_limit() -> None:
    P = 4096
    # unaligned ends widen to pages; overlapping and touching ranges merge
    assert gpu.plan_chunks([(P + 10, 100)], max_chunk=1 << 20) == [(P, P)]
    assert gpu.plan_chunks([(0, P), (P, P), (3 * P, 1)], max_chunk=1 << 20) == \
        [(0, 2 * P), (3 * P, P)]
    assert gpu.plan_chunks([(2 * P, 10), (P + 5, P)], max_chunk=1 << 20) == [(P, 2 * P)]
    # two ranges sharing a page become one registration (CUDA refuses a page twice)
    assert gpu.plan_chunks([(0, 100), (200, 100)], max_chunk=P) == [(0, P)]
    # cut at max_chunk, the last piece shorter; empty ranges vanish
    assert gpu.plan_chunks([(0, 10 * P + 1), (50 * P, 0)], max_chunk=4 * P) == \
        [(0, 4 * P), (4 * P, 4 * P), (8 * P, 3 * P)]
    assert gpu.plan_chunks([]) == []
    with pytest.raises(ValueError, match="max_chunk"):
        gpu.plan_chunks([(0, P)], max_chunk=P + 1)
    # the default stays far below the 512 GiB single registration drivers refuse
    assert gpu.DEFAULT_MAX_CHUNK <= 1 << 30
    rng = np.random.default_rng(3)
    ranges = [(int(a), int(n)) for a, n in zip(rng.integers(0, 1 << 24, 200),
                                                rng.integers(0, 1 << 16, 200))]
    chunks = gpu.plan_chunks(ranges, max_chunk=16 * P)
    for a, n in chunks:
        assert a % P == 0 and 0 < n <= 16 * P and n % P == 0
    for (a, n), (b, _) in zip(chunks, chunks[1:]):
        assert a + n <= b  # disjoint, sorted
    for a, n in ranges:  # every byte covered
        if n:
            assert any(c <= a and a + n <= c + m for c, m in gpu.plan_chunks([(a, n)], 1 << 30))
            assert all(any(c <= x < c + m for c, m in chunks) for x in (a, a + n - 1))


# -- device="cuda" ------------------------------------------------------------
def handed_out(log: list[tuple]) -> list[int]:
    """Positions in the log where a batch was handed out (its wait)."""
    return [i for i, e in enumerate(log) if e[0] == "wait"]


def test_device_batches_arrive_in_order_copied_ahead_and_ordered_by_events(
        fixed, standin) -> None:
    ds, arr = fixed
    dl = CXLDataLoader(ds, batch_size=16, num_workers=2, device="cuda", prefetch_to_gpu=2)
    got = []
    for b in dl:
        rt = standin.rt
        waits = handed_out(rt.log)
        k = len(waits) - 1  # this is batch k (0-based)
        # batch k was handed out after the consumer waited on its own event...
        seq = rt.log[waits[-1]][2]
        assert rt.log[waits[-1]][1] == "consumer" and seq == k + 1
        # ...with copies k..k+2 queued (prefetch_to_gpu=2), fewer at the end
        copies = sum(1 for e in rt.log[:waits[-1]] if e[0] == "copy")
        assert copies == min(k + 3, 25)
        # its bytes arrive only when its event completes (the stand-in is 2 behind)
        got.append(b)
    rt = standin.rt
    assert torch.equal(torch.cat(got), torch.from_numpy(arr))  # every copy completed, in order
    assert len(got) == 25
    # each device batch was marked used on the consumer's stream
    assert sum(1 for e in rt.log if e[0] == "record_stream" and e[1] == "consumer") == 25
    # copies only on the copy stream, events recorded there
    assert all(e[1] == "copy" for e in rt.log if e[0] in ("copy", "record"))
    st = dl.stats()["gpu"]
    assert st["path"] == "registered" and st["staged_bytes"] == 0
    assert st["direct_bytes"] == arr.nbytes and st["batches"] == 25
    assert st["device"] == "cuda" and st["prefetch_to_gpu"] == 2
    # every slot registered once, all unregistered at the end of the pass
    assert rt.registered == {} and not rt.pending
    regs = [e for e in rt.log if e[0] == "register"]
    assert len(regs) == sum(1 for e in rt.log if e[0] == "unregister") == st["slots"]["register_calls"]
    assert st["slots"]["failures"] == 0 and st["slots"]["chunks"] == 0


@pytest.mark.parametrize("depth", [0, 1, 4])
def test_prefetch_to_gpu_is_the_copies_queued_ahead(fixed, standin, depth) -> None:
    ds, arr = fixed
    dl = CXLDataLoader(ds, batch_size=40, device="cuda", prefetch_to_gpu=depth)
    got = []
    for k, b in enumerate(dl):
        log = standin.rt.log
        copies = sum(1 for e in log[:handed_out(log)[-1]] if e[0] == "copy")
        assert copies == min(k + 1 + depth, 10)
        got.append(b)
    assert torch.equal(torch.cat(got), torch.from_numpy(arr))


def test_a_slot_goes_back_only_after_its_copy_completed(fixed, standin) -> None:
    """The stand-in GPU completes nothing until synchronized: the pipeline
    then keeps every batch's slot, so the ring grows (and its new slots are
    registered before a copy reads them), and every batch arrives intact."""
    ds, arr = fixed
    standin.configure(lag=10 ** 9, complete_on_wait=False)
    dl = CXLDataLoader(ds, batch_size=10, num_workers=1, prefetch_factor=1, device="cuda")
    it = iter(dl)
    got = [next(it)]
    n0 = dl._engine.n_slots
    got += list(it)
    rt = standin.rt
    assert torch.equal(torch.cat(got), torch.from_numpy(arr))
    st = dl.stats()["gpu"]
    assert st["slots"]["register_calls"] > n0 // 4  # the grown ring's slots too
    assert st["path"] == "registered" and rt.registered == {}


def test_planted_early_release_is_caught(fixed, standin, monkeypatch) -> None:
    """A pipeline that lets a slot go as soon as its copy is queued (not
    when the copy completed): with 6 copies queued ahead and a ring of 4
    slots, the engine must refill a released slot before that slot's DMA
    runs, and the batches that arrive are wrong. The same run with the real
    pipeline is right, so the harness tells the two apart."""
    ds, arr = fixed
    real = gpu.CopyPipeline._issue

    def early(self: gpu.CopyPipeline, host: Any) -> tuple:
        ev, keep, out = real(self, host)
        return ev, None, out  # nothing keeps the slot lent
    standin.configure(lag=10 ** 9, complete_on_wait=False)
    args = dict(batch_size=10, num_workers=1, prefetch_factor=1, device="cuda", prefetch_to_gpu=6)
    right = torch.cat(list(CXLDataLoader(ds, **args)))  # (complete once the pass ended)
    assert torch.equal(right, torch.from_numpy(arr))
    monkeypatch.setattr(gpu.CopyPipeline, "_issue", early)
    dl = CXLDataLoader(ds, **args)
    got = torch.cat(list(dl))
    assert not torch.equal(got, torch.from_numpy(arr)), "an early release went unnoticed"


def test_registration_refused_falls_back_to_staging_and_says_so(fixed, standin) -> None:
    ds, arr = fixed
    standin.configure(fail=lambda a, n, f: True)
    dl = CXLDataLoader(ds, batch_size=50, device="cuda")
    assert torch.equal(torch.cat(list(dl)), torch.from_numpy(arr))
    st = dl.stats()["gpu"]
    assert st["path"] == "staging" and st["direct_bytes"] == 0
    assert st["staged_bytes"] == arr.nbytes
    assert st["slots"]["failures"] >= 1 and "stand-in refused" in st["slots"]["failure"]
    assert not any(e[0] == "unregister" for e in standin.rt.log)  # nothing to undo


def test_some_slots_refused_is_the_mixed_path(fixed, standin) -> None:
    """The ring's first slots (one arena: one registration) are refused;
    the GPU lags, so the ring grows, and the new slots (mappings of their
    own) register: batches from both kinds arrive intact."""
    ds, arr = fixed
    calls: list = []

    def first_only(a: int, n: int, f: int) -> bool:
        calls.append(a)
        return len(calls) == 1
    standin.configure(fail=first_only, lag=10 ** 9, complete_on_wait=False)
    dl = CXLDataLoader(ds, batch_size=8, num_workers=1, prefetch_factor=1, device="cuda")
    assert torch.equal(torch.cat(list(dl)), torch.from_numpy(arr))
    st = dl.stats()["gpu"]
    assert len(calls) > 1
    assert st["path"] == "mixed" and st["direct_bytes"] + st["staged_bytes"] == arr.nbytes
    assert st["direct_bytes"] > 0 and st["staged_bytes"] > 0
    assert standin.rt.registered == {}


def test_break_and_exception_unregister_and_wait_for_queued_copies(fixed, standin) -> None:
    ds, arr = fixed
    standin.configure(lag=10 ** 9)
    dl = CXLDataLoader(ds, batch_size=20, device="cuda", prefetch_to_gpu=3)
    for i, b in enumerate(dl):
        if i == 2:
            break
    rt = standin.rt
    assert rt.registered == {} and not rt.pending  # copies ahead completed, then unregistered
    assert torch.equal(b, torch.from_numpy(arr[40:60]))

    class Boom(Exception):
        pass
    with pytest.raises(Boom):
        for i, b in enumerate(dl):
            if i == 1:
                raise Boom
    gc.collect()
    rt = standin.rt
    assert rt.registered == {} and not rt.pending

    # an error of the engine itself (a record id past the end) mid-pass
    bad = CXLDataLoader(ds, batch_size=20, device="cuda", sampler=[0, 1, 2, 10 ** 6])
    with pytest.raises(Exception):
        list(bad)
    rt = standin.rt
    assert rt.registered == {} and not rt.pending


def test_resume_point_is_the_handed_out_batch_not_the_prefetched_one(fixed, standin) -> None:
    ds, arr = fixed
    ref = CXLDataLoader(ds, batch_size=16, shuffle=True, seed=4)
    dl = CXLDataLoader(ds, batch_size=16, shuffle=True, seed=4, device="cuda", prefetch_to_gpu=3)
    for (a, b) in itertools.islice(zip(ref, dl), 5):
        assert torch.equal(a, b)
    assert dl.state_dict() == ref.state_dict()
    nxt = CXLDataLoader(ds, batch_size=16, shuffle=True, seed=4, device="cuda")
    nxt.load_state_dict(dl.state_dict())
    rest = [b for b in ref]
    assert all(torch.equal(x, y) for x, y in zip(rest, nxt))


def test_packed_batches_and_their_lengths_go_to_the_device(pool, tokens, standin) -> None:
    prefix, seqs = tokens
    ds = CXLDataset.ingest(pool, "tok", prefix)
    ref = [{k: v.clone() for k, v in b.items()} for b in CXLDataLoader(ds, batch_size=4, seq_len=64)]
    got = list(CXLDataLoader(ds, batch_size=4, seq_len=64, device="cuda",
                             dtype=torch.long))
    assert len(got) == len(ref)
    for a, b in zip(ref, got):
        assert torch.equal(a["tokens"].long(), b["tokens"]) and torch.equal(a["lengths"], b["lengths"])


def test_many_epochs_leave_nothing_registered_or_queued(fixed, standin) -> None:
    ds, arr = fixed
    dl = CXLDataLoader(ds, batch_size=100, num_workers=1, device="cuda")
    gc.collect()
    threads0 = threading.active_count()
    for epoch in range(300):
        n = sum(int(b.shape[0]) for b in dl)
        assert n == 400
    rt = standin.rt
    assert rt.registered == {} and not rt.pending
    regs = sum(1 for e in rt.log if e[0] == "register")
    assert regs == sum(1 for e in rt.log if e[0] == "unregister")
    assert dl.stats()["gpu"]["passes"] == 300 and dl.stats()["gpu"]["batches"] == 1200
    gc.collect()
    assert threading.active_count() <= threads0 + 1


# -- pin_memory=True without a device -----------------------------------------
def test_pin_memory_registers_slots_and_holds_batches_until_the_gpu_is_past_them(
        fixed, standin) -> None:
    """Batches from registered slots: a batch's slot stays lent while the
    event recorded (on the current stream) when the next batch was asked
    for has not completed; everything is unregistered when the pass ends."""
    ds, arr = fixed
    standin.configure(lag=10 ** 9)  # the GPU is behind: nothing may be released
    dl = CXLDataLoader(ds, batch_size=10, num_workers=1, prefetch_factor=1, pin_memory=True)
    it = iter(dl)
    got = [next(it).clone()]
    eng, rt = dl._engine, standin.rt
    n0 = eng.n_slots
    assert rt.covered(*eng.slots()[0]) and all(rt.covered(a, n) for a, n in eng.slots())
    for _ in range(n0 + 2):  # the loop drops each batch, but the GPU holds them
        got.append(next(it).clone())
    assert eng.n_slots > n0  # so the ring had to grow...
    assert all(rt.covered(a, n) for a, n in eng.slots())  # ...and the new slots were registered
    rt.lag = None
    rt.synchronize()  # the GPU caught up: held batches go back
    n1 = eng.n_slots
    got += [b.clone() for b in it]
    assert eng.n_slots == n1  # a GPU that keeps up never makes the ring grow
    assert torch.equal(torch.cat(got), torch.from_numpy(arr))
    assert rt.registered == {}  # the pass ended: all unregistered
    st = dl.stats()["gpu"]
    assert st["device"] is None and st["slots"]["register_calls"] == \
        sum(1 for e in rt.log if e[0] == "unregister")


# -- the pool view (pin_to_cxl) -----------------------------------------------
def test_pin_to_cxl_registers_the_datasets_view_in_read_only_chunks(pool, tmp_path,
                                                                   standin) -> None:
    arr = np.arange(3000 * 256, dtype=np.int16).reshape(3000, 256)  # 512 B records
    np.save(tmp_path / "p.npy", arr)
    pool._pool.import_("p", str(tmp_path / "p.npy"), shard_bytes=256 << 10)
    ds = CXLDataset(pool, "p")
    spans = ds.store.spans(0, len(ds))
    assert len(spans) > 3  # several shards: several ranges
    for off, n, first, count, addr in spans:  # the address is where ds[i] views the bytes
        assert ds[first].data_ptr() == addr and n == count * 512
    dl = CXLDataLoader(ds, batch_size=100, device="cuda", pin_to_cxl=True)
    rt = standin.rt
    st = dl.stats()["gpu"]["pool"]
    assert st["ok"] and st["failures"] == 0 and st["chunks"] >= 1
    flags = {f for a, (n, f) in rt.registered.items()}
    assert flags == {gpu.HOST_REGISTER_READ_ONLY}
    for i in (0, 1, 511, 512, 2999):  # every record's bytes are inside a registration
        t = ds[i]
        assert rt.covered(t.data_ptr(), t.numel() * t.element_size())
    b = next(iter(dl))  # the pass registers its slots beside the pool's
    assert torch.equal(b, torch.from_numpy(arr[:100]))
    dl.close()
    assert rt.registered == {}
    dl.close()  # once only
    assert sum(1 for e in rt.log if e[0] == "unregister") == \
        sum(1 for e in rt.log if e[0] == "register")

    # chunked below a limit: many registrations, none larger
    with gpu.PoolRegistration(ds, rt=rt, max_chunk=64 << 10) as reg:
        assert reg.ok and reg.registry.chunks >= len(spans)
        assert all(n <= 64 << 10 for a, (n, f) in rt.registered.items())
    assert rt.registered == {}

    # refused: the reason is in the stats, ds[i] still works (copied by torch)
    rt.fail = lambda a, n, f: True
    reg = gpu.PoolRegistration(ds, rt=rt)
    assert not reg.ok and "refused" in reg.stats()["reason"]
    del reg
    gc.collect()


def test_pin_to_cxl_over_fields_in_columns_registers_nothing(pool, standin) -> None:
    # several fields stored in columns: a record is no one byte range of the
    # pool, so nothing is registered, the reason says why, batches still come
    from cxl_dataloader import _core
    n = 400
    w = _core.Writer(pool._pool, "xy", [("x", "float32", (4,)), ("y", "int64", ())])
    x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    w.append_columns(n, [x, np.arange(n, dtype=np.int64)])
    w.commit()
    ds = CXLDataset(pool, "xy")
    dl = CXLDataLoader(ds, batch_size=100, device="cuda", pin_to_cxl=True)
    st = dl.stats()["gpu"]["pool"]
    assert not st["ok"] and "columns" in st["reason"]
    assert standin.rt.registered == {}
    b = next(iter(dl))
    assert torch.equal(b["x"].cpu(), torch.from_numpy(x[:100]))
    assert b["y"].cpu().tolist() == list(range(100))
    dl.close()


def test_pin_to_cxl_without_cuda_keeps_its_old_meaning(fixed) -> None:
    ds, _ = fixed
    with pytest.warns(UserWarning, match="pin_to_cxl"):
        dl = CXLDataLoader(ds, batch_size=30, pin_to_cxl=True)
    assert "gpu" not in dl.stats()


def test_prefetch_to_gpu_is_validated(fixed) -> None:
    ds, _ = fixed
    for bad in (-1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="prefetch_to_gpu"):
            CXLDataLoader(ds, batch_size=10, prefetch_to_gpu=bad)


# -- on a real device (skipped here) ------------------------------------------
@needs_cuda
@pytest.mark.parametrize("depth", [0, 2])
def test_cuda_batches_equal_the_host_batches(fixed, depth) -> None:
    ds, arr = fixed
    dl = CXLDataLoader(ds, batch_size=32, device="cuda", prefetch_to_gpu=depth)
    got = []
    for b in dl:
        assert b.is_cuda
        got.append(b * 1)  # work on the consumer's stream, ordered after the copy
    assert torch.equal(torch.cat(got).cpu(), torch.from_numpy(arr))
    assert dl.stats()["gpu"]["path"] == "registered"


@needs_cuda
def test_cuda_pool_registration_makes_samples_dma_able(fixed) -> None:
    ds, arr = fixed
    with gpu.register_dataset(ds) as reg:
        assert reg.ok, reg.reason
        out = [ds[i].to("cuda", non_blocking=True) for i in range(0, 400, 37)]
        torch.cuda.synchronize()
        assert all(torch.equal(o.cpu(), torch.from_numpy(arr[i]))
                   for o, i in zip(out, range(0, 400, 37)))


@needs_cuda
def test_cuda_epochs_do_not_grow_device_memory(fixed) -> None:
    ds, _ = fixed
    dl = CXLDataLoader(ds, batch_size=50, device="cuda")
    for _ in range(3):
        list(dl)
    torch.cuda.synchronize()
    m0 = torch.cuda.memory_allocated()
    for _ in range(50):
        for b in dl:
            pass
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() <= m0 + (1 << 20)
    assert dl.stats()["gpu"]["slots"]["chunks"] == 0
