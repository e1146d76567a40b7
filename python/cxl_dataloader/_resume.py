"""What a CXLDataLoader pass depends on, so that a checkpoint resumes it exactly.

A pass's order is a function of the sampler's own state and of the random
generators it draws from: torch's default generator, the ``torch.Generator``
objects a sampler holds (RandomSampler, SubsetRandomSampler and
WeightedRandomSampler with ``generator=``; a BatchSampler passes its
sampler's through) and, for our samplers, their few integers. ``snapshot``
takes those at the start of a pass; ``replaying`` puts them back while the
resumed pass draws its order, inside ``torch.random.fork_rng`` so that the
caller's default generator is left as it was. A CRC of the order drawn is
kept with the state and checked on resume: a sampler whose order depends on
anything else (Python's ``random``, numpy's) is refused with an error instead
of a resume that silently repeats or loses samples.

This is how torchdata's StatefulDataLoader resumes torch's samplers too
(generator state plus a count of what was yielded); we do not depend on
torchdata, whose loader is a DataLoader subclass and not our fast path.
"""
from __future__ import annotations

import base64
import contextlib
import itertools
import zlib
from array import array
from typing import Any, Iterator, Optional

import torch

from .samplers import CXLSamplerBase


def _enc(t: torch.Tensor) -> str:
    return base64.b64encode(t.numpy().tobytes()).decode("ascii")


def _dec(s: str) -> torch.Tensor:
    return torch.frombuffer(bytearray(base64.b64decode(s)), dtype=torch.uint8)


def _parts(index: Any) -> list:
    """The index object and what it wraps (a BatchSampler's sampler)."""
    out = [index]
    inner = getattr(index, "sampler", None)
    if inner is not None and inner is not index:
        out.append(inner)
    return out


def _generators(index: Any) -> list[torch.Generator]:
    gens: list[torch.Generator] = []
    for p in _parts(index):
        g = getattr(p, "generator", None)
        if isinstance(g, torch.Generator) and all(g is not h for h in gens):
            gens.append(g)
    return gens


def snapshot(index: Any) -> dict:
    """What the next pass of index (a sampler or batch sampler) draws from."""
    return {"cpu": _enc(torch.get_rng_state()),
            "generators": [_enc(g.get_state()) for g in _generators(index)],
            "samplers": [p.state_dict() for p in _parts(index) if isinstance(p, CXLSamplerBase)]}


@contextlib.contextmanager
def replaying(index: Any, snap: dict) -> Iterator[None]:
    """Puts back what snapshot took; the default generator is restored at exit
    (the sampler's own generators keep the replayed state, as they would
    have after the original pass)."""
    gens = _generators(index)
    samplers = [p for p in _parts(index) if isinstance(p, CXLSamplerBase)]
    if len(gens) != len(snap["generators"]) or len(samplers) != len(snap["samplers"]):
        raise ValueError("loader state was saved with another sampler (its generators or "
                         "CXL samplers differ)")
    with torch.random.fork_rng(devices=[]):
        torch.set_rng_state(_dec(snap["cpu"]))
        for g, st in zip(gens, snap["generators"]):
            g.set_state(_dec(st))
        for s, st in zip(samplers, snap["samplers"]):
            s.load_state_dict(st)
        yield


def crc(data: bytes, prev: int = 0) -> int:
    return zlib.crc32(data, prev)


def mismatch(what: str, index: Any) -> ValueError:
    return ValueError(f"resume: {what} is not the one the checkpoint was taken in, so the "
                      f"rest of it cannot be found exactly; the sampler ({type(index).__name__}) "
                      f"must draw only from torch's generators or its own state (and "
                      f"set_epoch, where it has one, must be called as before)")


class PassIndex(torch.utils.data.Sampler):
    """The general path's index stream: the sampler (batch_size=None) or batch
    sampler torch would iterate, wrapped so that each pass records what it
    drew from (snapshot) and a running CRC of what it yielded, and a resumed
    pass replays the checkpointed one, skipping its first k items at the
    index level (no sample of a skipped batch is loaded). Iterated by torch's
    DataLoader in the main process, ahead of what the loop has consumed."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.snap: Optional[dict] = None
        self.crcs = array("L")
        self.replay: Optional[tuple[dict, int, int]] = None  # (snapshot, items, crc)

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self) -> Iterator[Any]:
        replay, self.replay = self.replay, None
        crcs = self.crcs = array("L")
        if replay is None:
            self.snap = snapshot(self.inner)
            it: Iterator[Any] = iter(self.inner)
            skip, want = 0, 0
        else:
            self.snap, skip, want = replay
            with replaying(self.inner, self.snap):
                it = iter(self.inner)
                head = list(itertools.islice(it, 1))  # lazy samplers draw their order now
            it = itertools.chain(head, it)
        c = 0
        for item in it:
            c = crc(repr(item).encode(), c)
            crcs.append(c)
            if len(crcs) <= skip:
                if len(crcs) == skip and c != want:
                    raise mismatch("the order of the replayed pass", self.inner)
                continue
            yield item
        if len(crcs) < skip:
            raise mismatch(f"a pass of {len(crcs)} items (the checkpoint is at {skip})",
                           self.inner)
