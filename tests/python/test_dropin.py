"""CXLDataLoader and DistributedCXLSampler beside torch's DataLoader and
DistributedSampler on the same data (issue 12). Each test backs a row of the
drop-in table in docs/python.md: torch's result and ours, computed here in
the same run."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from torch.utils.data import (ConcatDataset, DataLoader, DistributedSampler, RandomSampler,
                              Subset, TensorDataset)

from cxl_dataloader import (CXLDataLoader, CXLDataset, CXLMemoryPool, DistributedCXLSampler,
                            RandomCXLSampler)

N = 100


@pytest.fixture
def ds(pool: CXLMemoryPool, tmp_path) -> CXLDataset:
    """Record i is [2i, 2i+1] (int64)."""
    np.save(tmp_path / "f.npy", np.arange(N * 2, dtype=np.int64).reshape(N, 2))
    return CXLDataset.ingest(pool, "f", tmp_path / "f.npy")


def ids(batches) -> list[int]:
    out = []
    for b in batches:
        b = b if b.dim() == 2 else b.reshape(1, -1)
        out += (b[:, 0] // 2).tolist()
    return out


def epochs(loader, n: int = 3) -> list[list[int]]:
    return [ids(loader) for _ in range(n)]


# ---- order -----------------------------------------------------------------------

def test_generator_order_is_torchs_for_every_epoch(ds) -> None:
    """issue 12 item 5: shuffle=True with generator=g: torch draws a base seed
    from g per iter() before its permutation (and a second permutation at the
    end of RandomSampler's pass); ours draws the same, so every epoch's order
    and g's state afterwards are torch's."""
    g_torch, g_ours = torch.Generator().manual_seed(5), torch.Generator().manual_seed(5)
    theirs = epochs(DataLoader(ds, batch_size=7, shuffle=True, generator=g_torch))
    ours = epochs(CXLDataLoader(ds, batch_size=7, shuffle=True, generator=g_ours))
    assert ours == theirs and len({tuple(e) for e in ours}) == 3
    assert torch.equal(g_ours.get_state(), g_torch.get_state())


@pytest.mark.parametrize("batch_size,drop_last", [(10, False), (7, False), (7, True),
                                                   (10, True)])
def test_generator_after_a_break_is_torchs(ds, batch_size, drop_last) -> None:
    """issue 34: shuffle=True, generator=g, a pass broken off after k batches
    (itertools.islice), for every k from 0 to one past the last batch: g's
    state afterwards, and the next epoch's order, are those torch's
    DataLoader (num_workers=0) leaves. torch's RandomSampler draws the
    permutation of its pass when the first index is asked for and a second
    one (its tail) when an index past the last is, which a broken-off pass
    may never do."""
    import itertools
    nb = N // batch_size + (0 if drop_last or N % batch_size == 0 else 1)
    for k in range(nb + 2):
        got = []
        for cls in (DataLoader, CXLDataLoader):
            g = torch.Generator().manual_seed(11)
            dl = cls(ds, batch_size=batch_size, shuffle=True, generator=g, drop_last=drop_last)
            head = ids(itertools.islice(dl, k))
            got.append((head, g.get_state(), ids(dl), g.get_state()))
        (h0, s0, e0, t0), (h1, s1, e1, t1) = got
        assert h1 == h0 and e1 == e0, (k, batch_size, drop_last)
        assert torch.equal(s1, s0) and torch.equal(t1, t0), (k, batch_size, drop_last)


def test_state_before_the_first_batch_with_a_generator(ds) -> None:
    """A state_dict() taken between iter() and the first batch (the order not
    drawn yet) resumes that pass, and taking it does not move g."""
    g = torch.Generator().manual_seed(4)
    dl = CXLDataLoader(ds, batch_size=9, shuffle=True, generator=g)
    it = iter(dl)
    before = g.get_state()
    st = dl.state_dict()
    assert torch.equal(g.get_state(), before)
    whole = ids(it)
    again = CXLDataLoader(ds, batch_size=9, shuffle=True, generator=torch.Generator())
    again.load_state_dict(st)
    assert ids(again) == whole and sorted(whole) == list(range(N))


def test_shuffle_without_generator_follows_torch_manual_seed(ds) -> None:
    """issue 12 item 5: shuffle=True without a generator: torch's order comes
    from its default generator; ours is our keyed permutation seeded from that
    generator (so torch.manual_seed makes it reproducible, and another seed
    gives another order), and consumes it exactly as torch's DataLoader does:
    what the training loop draws afterwards is the same as under torch."""
    def run(loader_cls, seed):
        torch.manual_seed(seed)
        got = epochs(loader_cls(ds, batch_size=10, shuffle=True))
        return got, torch.rand(3)

    ours1, after_ours = run(CXLDataLoader, 1)
    theirs1, after_theirs = run(DataLoader, 1)
    assert torch.equal(after_ours, after_theirs)
    assert run(CXLDataLoader, 1)[0] == ours1 and run(CXLDataLoader, 2)[0] != ours1
    assert all(sorted(e) == list(range(N)) for e in ours1 + theirs1)
    assert ours1 != theirs1  # the permutation itself is ours, not torch.randperm's


def test_general_path_is_torchs_batch_for_batch(ds) -> None:
    """The general path is torch's DataLoader: with the same seed the same
    batches in every epoch, and torch's default generator advances alike."""
    def run(loader_cls):
        torch.manual_seed(3)
        got = epochs(loader_cls(ds, batch_size=8, shuffle=True, collate_fn=collate_stack))
        return got, torch.rand(2)

    ours, after_ours = run(CXLDataLoader)
    theirs, after_theirs = run(DataLoader)
    assert ours == theirs and torch.equal(after_ours, after_theirs)


def test_break_then_a_new_for_draws_a_fresh_order(ds) -> None:
    """issue 12 item 3: after a break, a new for loop starts a new order in
    torch (a fresh permutation per iter()) and in ours (each iter() without
    set_epoch advances the epoch); state_dict() after the break names the
    next pass (epoch 1, its start), not the position where the loop broke."""
    def head_then_next(loader):
        for i, b in enumerate(loader):
            if i == 2:
                break
        first = ids([b])
        return first, ids(loader)

    torch.manual_seed(0)
    t_first, t_next = head_then_next(DataLoader(ds, batch_size=10, shuffle=True))
    ours = CXLDataLoader(ds, batch_size=10, shuffle=True)
    o_first, _ = head_then_next(ours)
    assert t_next[20:30] != t_first and sorted(t_next) == list(range(N))
    ours2 = CXLDataLoader(ds, batch_size=10, shuffle=True, seed=4)
    for i, b in enumerate(ours2):
        if i == 2:
            break
    st = ours2.state_dict()
    assert st["epoch"] == 1 and st.get("start") and st["sampler"]["consumed"] == 0
    nxt = ids(ours2)
    assert ours2.epoch == 1 and sorted(nxt) == list(range(N))
    ref = RandomCXLSampler(N, seed=4)
    ref.set_epoch(1)
    assert nxt == list(ref)  # the next pass is epoch 1, from its start


def test_distributed_sampler_break_and_set_epoch(ds) -> None:
    """issue 12 item 3: DistributedCXLSampler: a pass broken off ends its
    epoch like one run out, and the state says the next epoch; set_epoch(e)
    gives epoch e's order as torch's DistributedSampler does (the orders are
    ours, the rule is torch's). Without set_epoch torch's sampler repeats one
    order every pass; ours moves to the next epoch (documented difference)."""
    t = DistributedSampler(ds, num_replicas=2, rank=0, seed=1)
    assert list(t) == list(t)  # torch: the same order while set_epoch is not called
    ours = DistributedCXLSampler(ds, num_replicas=2, rank=0, seed=1)
    it = iter(ours)
    head = [next(it) for _ in range(10)]
    assert ours.state_dict()["consumed"] == 20
    del it
    assert ours.state_dict() == {**ours.state_dict(), "epoch": 1, "consumed": 0}
    e1 = list(ours)
    assert e1[:10] != head
    for e in (0, 3):
        t.set_epoch(e)
        ours.set_epoch(e)
        again = DistributedCXLSampler(ds, num_replicas=2, rank=0, seed=1)
        again.set_epoch(e)
        assert list(ours) == list(again) and list(t) == list(t)


def test_len_matches_torch(ds) -> None:
    """len(loader) equals torch's for batch sizes and drop_last."""
    for bs in (1, 7, 10, 100, 101):
        for dl in (False, True):
            assert len(CXLDataLoader(ds, batch_size=bs, drop_last=dl)) == \
                len(DataLoader(ds, batch_size=bs, drop_last=dl))
            assert len(ids(CXLDataLoader(ds, batch_size=bs, drop_last=dl))) == \
                len(ids(DataLoader(ds, batch_size=bs, drop_last=dl)))


# ---- resume ------------------------------------------------------------------------

def test_resume_with_a_generator_in_a_later_epoch(ds) -> None:
    """issue 12 item 4a: a checkpoint in epoch 1 of shuffle=True with a
    generator (and of a torch RandomSampler with one) resumes that epoch:
    head + resumed tail is torch's epoch-1 order, nothing repeated or lost;
    the state survives JSON."""
    for make in (lambda g: dict(shuffle=True, generator=g),
                 lambda g: dict(sampler=RandomSampler(ds, generator=g))):
        g = torch.Generator().manual_seed(3)
        theirs = epochs(DataLoader(ds, batch_size=10, **make(g)), 2)[1]
        dl = CXLDataLoader(ds, batch_size=10, **make(torch.Generator().manual_seed(3)))
        ids(dl)  # epoch 0
        it = iter(dl)
        head = ids([next(it) for _ in range(3)])
        state = json.loads(json.dumps(dl.state_dict()))
        del it
        fresh = CXLDataLoader(ds, batch_size=10, **make(torch.Generator().manual_seed(3)))
        fresh.load_state_dict(state)
        assert head + ids(fresh) == theirs


def test_resume_of_a_torch_sampler_without_generator(ds) -> None:
    """issue 12 item 4a: a torch RandomSampler drawing from torch's default
    generator resumes exactly too (the generator's state at the pass start is
    in the state and replayed aside: the caller's default generator moves
    only by the base seed torch's DataLoader draws per iter())."""
    torch.manual_seed(7)
    dl = CXLDataLoader(ds, batch_size=10, sampler=RandomSampler(ds))
    it = iter(dl)
    head = ids([next(it) for _ in range(4)])
    state = dl.state_dict()
    full = head + ids(it)
    fresh = CXLDataLoader(ds, batch_size=10, sampler=RandomSampler(ds))
    fresh.load_state_dict(state)
    with torch.random.fork_rng(devices=[]):
        torch.empty((), dtype=torch.int64).random_()  # the base seed of one iter()
        expected = torch.get_rng_state()
    assert head + ids(fresh) == full
    assert torch.equal(torch.get_rng_state(), expected)


def collate_stack(xs):
    return torch.stack(xs)


def init_worker(worker_id: int) -> None:
    torch.utils.data.get_worker_info().dataset  # a worker_init_fn: the general path


@pytest.mark.parametrize("case", ["collate_fn", "worker_init_fn", "batch_sampler",
                                  "batch_size_none", "subset", "concat"])
def test_resume_on_the_general_path(ds, case) -> None:
    """issue 12 item 4b: the general path (torch's DataLoader inside) counts
    delivered batches and keeps what the pass drew from: a checkpoint mid-epoch
    1 resumes with exactly the rest, for collate_fn, worker_init_fn,
    batch_sampler, batch_size=None, Subset and ConcatDataset."""
    def make():
        g = torch.Generator().manual_seed(11)
        if case == "collate_fn":
            return CXLDataLoader(ds, batch_size=8, shuffle=True, generator=g,
                                 collate_fn=collate_stack)
        if case == "worker_init_fn":
            return CXLDataLoader(ds, batch_size=8, shuffle=True, generator=g, num_workers=2,
                                 worker_init_fn=init_worker)
        if case == "batch_sampler":
            bs = torch.utils.data.BatchSampler(RandomSampler(ds, generator=g), 8, False)
            return CXLDataLoader(ds, batch_sampler=bs)
        if case == "batch_size_none":
            return CXLDataLoader(ds, batch_size=None, shuffle=True, generator=g)
        if case == "subset":
            return CXLDataLoader(Subset(ds, range(10, 90)), batch_size=8, shuffle=True,
                                 generator=g)
        return CXLDataLoader(ConcatDataset([ds, ds]), batch_size=8, shuffle=True, generator=g)

    dl = make()
    assert not dl.fast
    ids(dl)
    it = iter(dl)
    head = ids([next(it) for _ in range(5)])
    state = json.loads(json.dumps(dl.state_dict()))
    assert state["batches"] == 5 and state["epoch"] == 1
    full = head + ids(it)
    fresh = make()
    ids(fresh)  # the same epoch 0: the generators move on alike
    fresh.load_state_dict(state)
    assert head + ids(fresh) == full


def test_general_path_resume_skips_without_loading(ds) -> None:
    """issue 12 item 4b: the resumed pass skips the delivered batches at the
    index level: no sample of a skipped batch is read."""
    class Counting(torch.utils.data.Dataset):
        def __init__(self) -> None:
            self.reads = 0

        def __len__(self) -> int:
            return N

        def __getitem__(self, i):
            self.reads += 1
            return ds[i]

    def make(data):
        return CXLDataLoader(data, batch_size=10, shuffle=True,
                             generator=torch.Generator().manual_seed(2))

    dl = make(Counting())
    it = iter(dl)
    head = ids([next(it) for _ in range(6)])
    state = dl.state_dict()
    data = Counting()
    fresh = make(data)
    fresh.load_state_dict(state)
    tail = ids(fresh)
    assert data.reads == N - 60 and sorted(head + tail) == list(range(N))


def test_resume_refuses_a_sampler_that_does_not_replay(ds) -> None:
    """issue 12 item 4: a sampler whose order depends on something the state
    cannot hold (here Python's random) is refused on resume with an error,
    never resumed into a different order silently."""
    import random

    class PySampler(torch.utils.data.Sampler):
        def __iter__(self):
            return iter(random.sample(range(N), N))

        def __len__(self):
            return N

    for kw in ({}, {"collate_fn": collate_stack}):
        dl = CXLDataLoader(ds, batch_size=10, sampler=PySampler(), **kw)
        it = iter(dl)
        [next(it) for _ in range(3)]
        state = dl.state_dict()
        fresh = CXLDataLoader(ds, batch_size=10, sampler=PySampler(), **kw)
        fresh.load_state_dict(state)
        with pytest.raises(ValueError, match="resume"):
            ids(fresh)


def test_state_of_an_iterable_dataset_is_refused() -> None:
    """issue 12 item 4: an iterable-style dataset has no index stream to
    replay: state_dict() raises instead of a state that would restart."""
    class It(torch.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(10))

    dl = CXLDataLoader(It(), batch_size=2)
    it = iter(dl)
    next(it)
    with pytest.raises(TypeError, match="iterable-style"):
        dl.state_dict()


# ---- arguments and attributes --------------------------------------------------------

BAD_ARGS = [dict(batch_size=0), dict(batch_size=-1), dict(batch_size=True),
            dict(batch_size=2.5), dict(num_workers=-1), dict(drop_last="yes"),
            dict(persistent_workers=True), dict(prefetch_factor=2), dict(timeout=-1),
            dict(shuffle=True, sampler=range(3)), dict(batch_sampler=[[0]], batch_size=4),
            dict(batch_size=None, drop_last=True), dict(multiprocessing_context="fork")]


@pytest.mark.parametrize("kw", BAD_ARGS, ids=lambda kw: ",".join(f"{k}={v!r}" for k, v in kw.items()))
def test_bad_arguments_raise_torchs_error(ds, kw) -> None:
    """issue 12 item 10: an argument torch refuses is refused with torch's
    exception type and message."""
    with pytest.raises(Exception) as theirs:
        DataLoader(ds, **kw)
    with pytest.raises(Exception) as ours:
        CXLDataLoader(ds, **kw)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)


@pytest.mark.parametrize("kw,exc", [(dict(collate="bogus"), ValueError),
                                    (dict(seq_len=-5), ValueError),
                                    (dict(seq_len=2.5), TypeError),
                                    (dict(threads=-3), ValueError),
                                    (dict(threads=2**40), OverflowError),
                                    (dict(collate="pad"), ValueError),
                                    (dict(collate="pack"), ValueError),
                                    (dict(dtype="long"), TypeError)])
def test_our_arguments_are_checked(ds, kw, exc) -> None:
    """issue 12 items 10, 14: our own arguments are checked at construction,
    never wrapped or truncated; collate="pad" on fixed-size records raises."""
    with pytest.raises(exc):
        CXLDataLoader(ds, batch_size=4, **kw)


def test_integers_never_wrap(pool, ds) -> None:
    """issue 12 item 10: integers are refused, as numpy refuses them, where
    a C conversion would wrap or truncate them: a sampler of 2**64+5 or -1
    samples, a pool of size -1 or 2**80, ds[2.7], ds['3'], a sampler
    yielding 2.5."""
    arr = np.arange(10)
    for bad, exc in ((2 ** 64 + 5, OverflowError), (-1, ValueError), (2.5, TypeError)):
        with pytest.raises(exc):
            RandomCXLSampler(bad)
    with pytest.raises(ValueError):
        np.empty(-1)
    for size, exc in ((-1, ValueError), (2 ** 80, OverflowError)):
        with pytest.raises(exc):
            CXLMemoryPool("py-neverwrap", create=True, size=size)
    for i in (2.7, "3"):
        with pytest.raises(IndexError) as theirs:
            arr[i]
        with pytest.raises(IndexError, match="only integers"):
            ds[i]
    assert torch.equal(ds[np.int64(3)], ds[3]) and torch.equal(ds[torch.tensor(3)], ds[3])

    class Floats(torch.utils.data.Sampler):
        def __iter__(self):
            return iter([1, 2.5])

        def __len__(self):
            return 2

    with pytest.raises(IndexError, match="2.5"):
        list(CXLDataLoader(ds, batch_size=2, sampler=Floats()))
    with pytest.raises(IndexError):
        list(DataLoader(TensorDataset(torch.arange(10)), batch_size=2, sampler=Floats()))


ATTRS = ("dataset", "batch_size", "num_workers", "drop_last", "timeout", "prefetch_factor",
         "pin_memory", "persistent_workers", "worker_init_fn", "generator", "in_order",
         "multiprocessing_context")


@pytest.mark.parametrize("kw", [dict(batch_size=8), dict(batch_size=8, num_workers=2,
                                                          prefetch_factor=3, drop_last=True),
                                dict(batch_size=8, shuffle=True),
                                dict(batch_size=8, collate_fn=collate_stack, num_workers=1),
                                dict(batch_size=None)])
def test_attributes_frameworks_read(ds, kw) -> None:
    """issue 12 item 12: the loader has the attributes frameworks read from a
    DataLoader, on both paths, with torch's values: dataset, batch_size,
    sampler, batch_sampler, num_workers, collate_fn, drop_last, timeout,
    prefetch_factor, pin_memory, persistent_workers; set_epoch works on both."""
    ours, theirs = CXLDataLoader(ds, **kw), DataLoader(ds, **kw)
    for a in ATTRS:
        assert getattr(ours, a) == getattr(theirs, a), a
    assert ours.collate_fn is theirs.collate_fn
    if kw.get("shuffle"):
        assert isinstance(ours.sampler, RandomCXLSampler)  # ours draws the keyed permutation
        assert isinstance(ours.batch_sampler, torch.utils.data.BatchSampler)
        assert ours.batch_sampler.sampler is ours.sampler
    else:
        assert type(ours.sampler) is type(theirs.sampler)
        assert type(ours.batch_sampler) is type(theirs.batch_sampler)
    assert len(list(ours.sampler)) == len(list(theirs.sampler)) == N
    ours.set_epoch(3)
    assert ours.epoch == 3


def test_distributed_sampler_needs_a_process_group_like_torchs(ds) -> None:
    """issue 12 item 13: made before init_process_group, DistributedCXLSampler
    raises torch's error instead of silently being world 1; a bad rank gets
    torch's message."""
    assert not torch.distributed.is_initialized()
    with pytest.raises(Exception) as theirs:
        DistributedSampler(ds)
    with pytest.raises(Exception) as ours:
        DistributedCXLSampler(ds)
    assert type(ours.value) is type(theirs.value) and str(ours.value) == str(theirs.value)
    with pytest.raises(ValueError) as theirs:
        DistributedSampler(ds, num_replicas=2, rank=2)
    with pytest.raises(ValueError) as ours:
        DistributedCXLSampler(ds, num_replicas=2, rank=2)
    assert str(ours.value) == str(theirs.value)


# ---- variable-size records -------------------------------------------------------------

@pytest.fixture
def tok(pool, tokens) -> tuple[CXLDataset, list]:
    prefix, seqs = tokens
    return CXLDataset.ingest(pool, "tok", prefix, format="megatron"), seqs


def test_variable_records_batch_size_one_without_seq_len(tok) -> None:
    """issue 12 item 14: batch_size=1 over variable-size records without
    seq_len yields what torch's DataLoader yields: one [1, length] record per
    batch."""
    ds, seqs = tok
    ours, theirs = CXLDataLoader(ds, batch_size=1), DataLoader(ds, batch_size=1)
    assert len(ours) == len(theirs) == len(seqs)
    for a, b in zip(ours, theirs):
        assert a.shape == b.shape and torch.equal(a, b)
    with pytest.raises(ValueError, match="seq_len"):
        CXLDataLoader(ds, batch_size=2)


def test_padded_len_and_token_dtype(tok) -> None:
    """issue 12 item 14: collate="pad" puts one record per row, so len() is
    ceil(n / batch_size) (floor with drop_last), as torch's for n samples;
    dtype=torch.long gives batches nn.Embedding takes as they are."""
    ds, seqs = tok
    for bs, dl in ((4, False), (4, True), (7, False), (300, True)):
        loader = CXLDataLoader(ds, batch_size=bs, seq_len=16, collate="pad", drop_last=dl)
        assert len(loader) == len(DataLoader(range(len(seqs)), batch_size=bs, drop_last=dl))
        assert len(loader) == sum(1 for _ in loader)
    emb = torch.nn.Embedding(65536, 4)
    for collate in ("pad", "pack"):
        loader = CXLDataLoader(ds, batch_size=4, seq_len=16, collate=collate, dtype=torch.long)
        b = next(iter(loader))
        assert b["tokens"].dtype == torch.long and emb(b["tokens"]).shape == (4, 16, 4)
        assert len(loader) == sum(1 for _ in loader)


def test_packed_ranks_yield_equal_batch_counts(tok) -> None:
    """issue 12 item 2: packed rows under DistributedCXLSampler (and torch's
    DistributedSampler): every rank yields the same number of batches, equal
    to len(loader), in every epoch and for every collate mode; torch's
    DistributedSampler gives equal sample counts the same way."""
    ds, _ = tok
    for sampler_cls in (DistributedCXLSampler, DistributedSampler):
        for collate in ("pack", "pad"):
            for drop_last in (False, True):
                for epoch in range(3):
                    counts = set()
                    for rank in range(3):
                        s = sampler_cls(ds, num_replicas=3, rank=rank, seed=2)
                        s.set_epoch(epoch)
                        dl = CXLDataLoader(ds, batch_size=3, seq_len=40, sampler=s,
                                           collate=collate, drop_last=drop_last)
                        counts.add((len(dl), sum(1 for _ in dl)))
                    assert len(counts) == 1, (sampler_cls, collate, drop_last, epoch, counts)
                    n, m = counts.pop()
                    assert n == m > 0


def test_packed_resume_keeps_the_rank_count(tok) -> None:
    """issue 12 item 2: a packed distributed pass resumed mid-epoch yields the
    rest of the same count (the state carries the batches delivered)."""
    ds, _ = tok

    def make(rank):
        return CXLDataLoader(ds, batch_size=2, seq_len=50, sampler=DistributedCXLSampler(
            ds, num_replicas=2, rank=rank, seed=6))

    for rank in range(2):
        dl = make(rank)
        total = len(dl)
        full = [b["tokens"].clone() for b in dl]
        dl = make(rank)
        it = iter(dl)
        head = [next(it)["tokens"].clone() for _ in range(5)]
        state = json.loads(json.dumps(dl.state_dict()))
        fresh = make(rank)
        fresh.load_state_dict(state)
        tail = [b["tokens"].clone() for b in fresh]
        assert len(head) + len(tail) == total == len(full)
        assert all(torch.equal(a, b) for a, b in zip(head + tail, full))


# ---- samples written in place ------------------------------------------------------------

def test_in_place_writes_behave_as_with_a_tensor_dataset(ds) -> None:
    """issue 12 item 1: writing into a sample: torch's TensorDataset hands
    out views of its tensor, so the write is seen by later reads in the
    process; ours likewise (a private copy-on-write page), and no other
    process sees it. (In a child process: a fault must fail the test, not
    kill pytest.)"""
    code = f"""
        import torch
        from torch.utils.data import TensorDataset
        from cxl_dataloader import CXLDataset
        ds = CXLDataset({ds.spec!r}, "f")
        td = TensorDataset(torch.arange({N} * 2, dtype=torch.int64).reshape({N}, 2))
        a, b = td[4][0], ds[4]
        a += 1000
        b += 1000
        assert torch.equal(td[4][0], ds[4]) and int(ds[4][0]) == 1008
        assert ds[4].numpy().flags.writeable
        print("ok")
    """
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]
    assert int(ds[4][0]) == 8  # this process, and the pool, never saw the write
