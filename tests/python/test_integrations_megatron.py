"""Megatron-core over the pool (issue 31 item 1): IndexedDataset's interface,
GPTDataset and BlendedMegatronDatasetBuilder unchanged over cxl:// blends,
token for token against Megatron's own files, the index caches built once
per pool, and GPT batches gathered in C equal to torch's DataLoader's."""
from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import write_megatron

pytest.importorskip("megatron.core")
from megatron.core.datasets.blended_megatron_dataset_builder import (  # noqa: E402
    BlendedMegatronDatasetBuilder)
from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig  # noqa: E402
from megatron.core.datasets.indexed_dataset import IndexedDataset  # noqa: E402

from cxl_dataloader import CXLMemoryPool  # noqa: E402
from cxl_dataloader.integrations.megatron import (CXLIndexedDataset, GPTBatches,  # noqa: E402
                                                  on_pool)

SIZES = [500, 50, 0]


class Tok:
    """What GPTDatasetConfig reads of a tokenizer."""
    vocab_size, eod, pad = 60000, 0, 59999
    unique_identifiers = {"class": "Tok"}


def _config(prefixes: list[str], cache, **kw) -> GPTDatasetConfig:
    return GPTDatasetConfig(random_seed=1234, sequence_length=64,
                            blend=(prefixes, [0.6, 0.4]), split="90,10,0", tokenizer=Tok(),
                            reset_position_ids=False, reset_attention_mask=False,
                            eod_mask_loss=False, path_to_cache=cache, **kw)


@pytest.fixture(scope="module")
def group(tmp_path_factory):
    # Megatron's BlendedDataset asks the process group for its rank when it
    # caches to files (the reference side)
    made = not torch.distributed.is_initialized()
    if made:
        f = tmp_path_factory.mktemp("pg") / "store"
        torch.distributed.init_process_group("gloo", init_method=f"file://{f}", rank=0,
                                             world_size=1)
    yield
    if made:
        torch.distributed.destroy_process_group()


@pytest.fixture
def two(pool: CXLMemoryPool, tmp_path: Path) -> Path:
    """Two Megatron datasets (documents of several sequences) as files and
    as pool datasets "web" and "code"."""
    rng = np.random.default_rng(1)
    for name, n in (("web", 400), ("code", 300)):
        seqs = [rng.integers(1, 50000, size=int(k), dtype=np.uint16)
                for k in rng.integers(1, 300, n)]
        write_megatron(tmp_path / name, seqs, list(range(0, n + 1, 10)))
        pool.ingest(name, str(tmp_path / name), format="megatron")
    return tmp_path


def test_indexed_dataset_interface_matches_megatrons(pool: CXLMemoryPool, two: Path) -> None:
    theirs = IndexedDataset(str(two / "web"))
    ours = CXLIndexedDataset(pool, "web")
    assert len(ours) == len(theirs) == 400
    assert np.array_equal(ours.sequence_lengths, theirs.sequence_lengths)
    assert ours.sequence_lengths.dtype == np.int32
    assert np.array_equal(ours.document_indices, theirs.document_indices)
    for i in (0, 7, 399):
        assert np.array_equal(ours[i], theirs[i]) and ours[i].dtype == theirs[i].dtype
        assert np.array_equal(ours.get(i, 1, 3), theirs.get(i, 1, 3))
        assert np.array_equal(ours.get(i, 2), theirs.get(i, 2))
    assert all(np.array_equal(a, b) for a, b in zip(ours[5:9], theirs[5:9]))
    with pytest.raises(ValueError):
        ours[0:10:2]
    with pytest.raises(IndexError):
        ours.get(3, 0, int(ours.sequence_lengths[3]) + 1)
    with pytest.raises(ValueError):
        ours.sequence_modes
    # zero copy: the same pool address every time
    assert ours[7].__array_interface__["data"][0] == ours[7].__array_interface__["data"][0]
    assert CXLIndexedDataset.exists(ours.path_prefix)
    assert not CXLIndexedDataset.exists(ours.path_prefix + "x")


def test_gpt_blend_over_the_pool_is_megatrons_token_for_token(pool, two, group) -> None:
    name = pool.spec.split(":", 1)[1]
    theirs = BlendedMegatronDatasetBuilder(
        GPTDataset, SIZES, lambda: True,
        _config([str(two / "web"), str(two / "code")], str(two / "cache"))).build()
    ours = BlendedMegatronDatasetBuilder(
        on_pool(GPTDataset), SIZES, lambda: True,
        _config([f"cxl://{name}/web", f"cxl://{name}/code"], None)).build()
    for a, b in zip(theirs[:2], ours[:2]):
        assert len(a) == len(b) > 0
        for i in range(len(a)):
            x, y = a[i], b[i]
            assert x.keys() == y.keys()
            for k in x:
                assert torch.equal(torch.as_tensor(x[k]), torch.as_tensor(y[k])), (i, k)
    # the index caches are in the pool (no cache directory beside the data)
    names = [d["name"] for d in pool.datasets()]
    for split in ("train", "valid"):
        for k in ("doc", "sample", "shuffle"):
            assert sum(n.startswith("web.gpt-") and n.endswith(f"{split[:5]}-{k}")
                       for n in names) == 1
    assert not any(p.name == "cache" for p in Path.cwd().glob("cxl:*"))


def _build(spec: str, q) -> None:
    name = spec.split(":", 1)[1]
    ds = on_pool(GPTDataset)
    out = BlendedMegatronDatasetBuilder(
        ds, [2000, 0, 0], lambda: True,
        _config([f"cxl://{name}/web", f"cxl://{name}/code"], None, mmap_bin_files=True)).build()
    q.put([(d.index_cache["built"], d.index_cache["seconds"]) for d in out[0].datasets])


def test_index_caches_are_built_once_per_pool(pool, two) -> None:
    """Two processes (two ranks of a host) build the same datasets at once:
    one builds each index, the other waits and maps the same pool copy."""
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    procs = [ctx.Process(target=_build, args=(pool.spec, q)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [q.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    for d in range(2):  # web, code: built by exactly one process
        assert sorted(g[d][0] for g in got) == [False, True]
    names = [d["name"] for d in pool.datasets() if ".gpt-" in d["name"]]
    # one copy of each index: 2 datasets x 2 splits (train, valid) x 3 indices
    assert len(names) == len(set(names)) == 2 * 2 * 3


def test_gpt_batches_are_torch_dataloaders_per_rank(pool, two, group) -> None:
    name = pool.spec.split(":", 1)[1]
    for attention in (False, True):
        (ours,) = BlendedMegatronDatasetBuilder(
            on_pool(GPTDataset), [200, 0, 0], lambda: True,
            _config([f"cxl://{name}/web", f"cxl://{name}/code"], None,
                    create_attention_mask=attention)).build()[:1]
        mbs, world = 4, 2
        for rank in range(world):
            gb = GPTBatches(ours, mbs, rank=rank, world_size=world)
            assert len(gb) == len(ours) // (mbs * world)
            n = 0
            for step, batch in enumerate(gb):
                start = step * mbs * world + rank * mbs
                ref = torch.utils.data.default_collate([ours[i] for i in range(start, start + mbs)])
                assert ref.keys() == batch.keys()
                for k in ref:
                    assert torch.equal(ref[k], batch[k]), (rank, step, k)
                n += 1
            assert n == len(ours) // (mbs * world)
        # resume: a state after 3 global batches continues with the 4th
        gb = GPTBatches(ours, mbs, rank=1, world_size=world)
        it = iter(gb)
        for _ in range(3):
            next(it)
        again = GPTBatches(ours, mbs, rank=1, world_size=world)
        again.load_state_dict(gb.state_dict())
        assert torch.equal(next(iter(again))["tokens"], next(it)["tokens"])
