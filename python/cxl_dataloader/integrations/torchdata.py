"""torchdata's ``StatefulDataLoader`` protocol, and torchtitan's loader hook.

What torchdata and torchtitan ask of a data loader is the ``Stateful``
protocol: ``state_dict()`` returning a dict, ``load_state_dict(state)``
taking it back, the next ``iter()`` continuing where the state was taken.
``torchdata.stateful_dataloader.Stateful`` and
``torch.distributed.checkpoint.stateful.Stateful`` (what torchtitan's
``BaseDataLoader`` derives from and its checkpointer stores) are both
runtime-checkable protocols that a ``CXLDataLoader`` satisfies as it is
(``is_stateful`` below). Its state is a dict of ints, strings and such
dicts (``torch.save`` and JSON take it). ``torch.distributed.checkpoint``
(DCP) loads a state into the key set of the fresh object's
``state_dict()``, and a loader's keys differ between the start of a pass
and its middle, so under DCP the state travels serialized, as torchtitan's
own loader pickles its state under ``dp_rank_N``: ``TitanLoader`` does
that (tests/python/test_integrations_torchdata.py round-trips it through
DCP mid-epoch).

torchtitan builds its loader through ``TrainSpec.build_dataloader_fn``
(called with ``dp_world_size``, ``dp_rank``, ``tokenizer`` and
``job_config``), which must return a ``BaseDataLoader``: an iterable of
``(input_dict, labels)`` with ``state_dict``/``load_state_dict``.
``TitanLoader`` is that over a pool dataset of token sequences: packed rows
of ``seq_len + 1`` tokens, ``({"input": row[:, :-1]}, row[:, 1:])``, each
dp rank its own ``DistributedCXLSampler`` share. docs/python.md shows the
train spec that uses it.
"""
from __future__ import annotations

import json
from typing import Any, Iterator, Union

import torch

from ..dataset import CXLDataset
from ..loader import CXLDataLoader
from ..pool import CXLMemoryPool
from ..samplers import DistributedCXLSampler


def is_stateful(loader: Any) -> bool:
    """True when loader satisfies both Stateful protocols (torchdata's, and
    torch.distributed.checkpoint's, which torchtitan's checkpointer takes)."""
    from torch.distributed.checkpoint.stateful import Stateful as DCPStateful
    from torchdata.stateful_dataloader import Stateful
    return isinstance(loader, Stateful) and isinstance(loader, DCPStateful)


class TitanLoader:
    """torchtitan's data loader shape over a pool dataset of token sequences:
    batches ``({"input": tokens[:, :-1]}, tokens[:, 1:])`` (int64) of packed
    rows of ``seq_len + 1`` tokens, dp rank ``dp_rank`` of
    ``dp_world_size``; the state is the ``CXLDataLoader``'s, under the key
    torchtitan's own loader uses (``dp_rank_N``), with the world size."""

    def __init__(self, pool: Union[CXLMemoryPool, str], name: str, *, dp_rank: int,
                 dp_world_size: int, batch_size: int, seq_len: int, seed: int = 0) -> None:
        ds = CXLDataset(pool, name)
        sampler = DistributedCXLSampler(ds, num_replicas=dp_world_size, rank=dp_rank, seed=seed)
        self.loader = CXLDataLoader(ds, batch_size=batch_size, sampler=sampler,
                                    seq_len=seq_len + 1, dtype=torch.long)
        self.dp_rank, self.dp_world_size = dp_rank, dp_world_size
        self._key = f"dp_rank_{dp_rank}"

    def __iter__(self) -> Iterator[tuple[dict, torch.Tensor]]:
        # torchtitan iterates its loader once and takes batches until the
        # training steps end: epochs follow each other here
        while True:
            n = 0
            for batch in self.loader:
                n += 1
                rows = batch["tokens"]
                yield {"input": rows[:, :-1]}, rows[:, 1:]
            if n == 0:
                return

    def state_dict(self) -> dict[str, Any]:
        # serialized, as torchtitan's own loader pickles its state: DCP
        # loads into the key set of the fresh loader's state_dict(), and a
        # loader's keys differ between a pass's start and its middle
        return {self._key: json.dumps(self.loader.state_dict()), "world_size": self.dp_world_size}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if not state:
            return
        if self._key not in state:
            raise KeyError(f"TitanLoader: no state for {self._key} (keys: {sorted(state)})")
        self.loader.load_state_dict(json.loads(state[self._key]))
