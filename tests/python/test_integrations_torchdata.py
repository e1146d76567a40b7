"""torchdata's StatefulDataLoader protocol (issue 31 item 4): a CXLDataLoader
is Stateful for torchdata and for torch.distributed.checkpoint (what
torchtitan's checkpointer stores), its state survives a DCP save and load
mid-epoch, and the restored loader yields the rest of the epoch; the
torchtitan-shaped TitanLoader likewise."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool, DistributedCXLSampler

pytest.importorskip("torchdata")
import torch.distributed.checkpoint as dcp  # noqa: E402

from cxl_dataloader.integrations.torchdata import TitanLoader, is_stateful  # noqa: E402


class Holder:
    """What a trainer's checkpointer holds: {"dataloader": loader}."""

    def __init__(self, loader) -> None:
        self.loader = loader

    def state_dict(self) -> dict:
        return self.loader.state_dict()

    def load_state_dict(self, s: dict) -> None:
        self.loader.load_state_dict(s)


def _dcp_roundtrip(loader, fresh, path: Path) -> None:
    dcp.save({"dataloader": Holder(loader)}, checkpoint_id=str(path))
    dcp.load({"dataloader": Holder(fresh)}, checkpoint_id=str(path))


def test_a_loader_is_stateful_and_resumes_from_its_saved_state(pool: CXLMemoryPool,
                                                              tmp_path) -> None:
    arr = np.arange(200 * 4, dtype=np.int64).reshape(200, 4)
    np.save(tmp_path / "a.npy", arr)
    ds = CXLDataset.ingest(pool, "a", tmp_path / "a.npy")
    make = lambda: CXLDataLoader(ds, batch_size=8,  # noqa: E731
                                 sampler=DistributedCXLSampler(ds, num_replicas=2, rank=1, seed=3))
    loader = make()
    assert is_stateful(loader)
    ref = [b[:, 0].tolist() for b in make()]
    it = iter(loader)
    head = [next(it)[:, 0].tolist() for _ in range(5)]
    torch.save({"dataloader": loader.state_dict()}, tmp_path / "ckpt.pt")
    fresh = make()
    fresh.load_state_dict(torch.load(tmp_path / "ckpt.pt")["dataloader"])
    tail = [b[:, 0].tolist() for b in fresh]
    assert head + tail == ref and len(fresh) == len(ref)


def test_titan_loader(pool: CXLMemoryPool, tokens, tmp_path) -> None:
    prefix, _ = tokens
    CXLDataset.ingest(pool, "tok", prefix, format="megatron")
    make = lambda: TitanLoader(pool, "tok", dp_rank=0, dp_world_size=2,  # noqa: E731
                               batch_size=2, seq_len=16)
    loader = make()
    assert is_stateful(loader)
    it = iter(loader)
    inp, labels = next(it)
    assert inp["input"].shape == (2, 16) and labels.shape == (2, 16)
    assert inp["input"].dtype == torch.long
    assert torch.equal(inp["input"][:, 1:], labels[:, :-1])
    fresh = make()
    _dcp_roundtrip(loader, fresh, tmp_path / "ckpt")
    a, b = next(it), next(iter(fresh))
    assert torch.equal(a[0]["input"], b[0]["input"]) and torch.equal(a[1], b[1])
