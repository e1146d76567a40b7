"""The package as a user meets it (issue 12 item 15): help() and
docstrings, useful reprs, py.typed, sizes as the CLI writes them, the same
catalog keys as `cxlpool ls --json`."""
from __future__ import annotations

import inspect
import json
import os
import pydoc
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import os

import numpy as np
import pytest

import cxl_dataloader as cx
from cxl_dataloader import (CXLDataLoader, CXLDataset, CXLMemoryPool, DistributedCXLSampler,
                            RandomCXLSampler)

ROOT = Path(__file__).resolve().parents[2]


def cxlpool_bin() -> str:
    """The CLI built with the package under test: the in-tree build when the
    package is imported from the tree, else the one pip installed beside the
    interpreter."""
    in_tree = Path(cx.__file__).resolve().is_relative_to(ROOT / "python")
    for cand in ((ROOT / "build" / "cxlpool",) if in_tree else
                 (Path(sys.executable).parent / "cxlpool",)):
        if cand.exists():
            return str(cand)
    found = shutil.which("cxlpool")
    if not found:
        pytest.skip("no cxlpool binary")
    return found


def test_every_public_class_and_method_has_a_docstring() -> None:
    """issue 12 item 15: help() documents every public class and each of its
    public methods and properties."""
    missing = []
    for name in cx.__all__:
        obj = getattr(cx, name)
        if not inspect.getdoc(obj):
            missing.append(name)
        for attr, member in vars(obj).items() if inspect.isclass(obj) else ():
            if attr.startswith("_") or not (inspect.isfunction(member) or
                                            isinstance(member, (property, staticmethod,
                                                                classmethod))):
                continue
            if not inspect.getdoc(getattr(obj, attr)):
                missing.append(f"{name}.{attr}")
    assert not missing, missing
    text = pydoc.render_doc(cx.CXLDataLoader, renderer=pydoc.plaintext)
    assert "state_dict" in text and "Where the next batch comes from" in text


def test_reprs_say_what_an_object_is(pool, tmp_path) -> None:
    """issue 12 item 15: pool, dataset, loader and samplers print what they
    are: spec, dataset, records, path, collate, sampler, seed, epoch, rank."""
    np.save(tmp_path / "r.npy", np.zeros((50, 4), np.float32))
    ds = CXLDataset.ingest(pool, "r", tmp_path / "r.npy")
    assert repr(pool) == f"CXLMemoryPool({pool.spec!r})"
    assert repr(ds) == f"CXLDataset({pool.spec!r}, 'r', 50 records)"
    s = DistributedCXLSampler(ds, num_replicas=4, rank=1, seed=9)
    assert repr(s) == "DistributedCXLSampler(50 samples, seed 9, epoch 0, rank 1 of 4)"
    assert repr(RandomCXLSampler(7, seed=None)) == "RandomCXLSampler(7 samples, seed from torch, epoch 0)"
    dl = CXLDataLoader(ds, batch_size=8, sampler=s)
    # threads: what the engine runs by default (one less than the CPUs, at least 1)
    assert dl.threads == max(1, len(os.sched_getaffinity(0)) - 1)
    assert repr(dl) == (f"CXLDataLoader({ds!r}, batch_size=8, fast path, collate=stack, "
                        f"sampler={s!r}, threads={dl.threads}, epoch 0)")
    gen = CXLDataLoader(ds, batch_size=8, collate_fn=list)
    assert "general path" in repr(gen)


def test_package_is_typed() -> None:
    """issue 12 item 15: the package ships py.typed (PEP 561)."""
    assert (Path(cx.__file__).parent / "py.typed").exists()


@pytest.mark.parametrize("text", ["16M", "16MiB", "20MB", "0.5G", "33554432"])
def test_size_strings_are_parsed_as_the_cli_parses_them(text) -> None:
    """issue 12 item 15: size="512G"-style strings: a pool created from
    Python with a size string has the size `cxlpool create` gives it from the
    same text (both call cxlp_size_parse)."""
    cli = cxlpool_bin()
    a, b = f"pyt-sz-{uuid.uuid4().hex[:8]}", f"pyt-sz-{uuid.uuid4().hex[:8]}"
    try:
        with CXLMemoryPool(a, create=True, size=text) as p:
            mine = p.stat()["size"]
        subprocess.run([cli, "create", b, text], check=True, capture_output=True)
        with CXLMemoryPool(b) as p:
            theirs = p.stat()["size"]
        assert mine == theirs
    finally:
        for n in (a, b):
            try:
                CXLMemoryPool.destroy(n)
            except cx.CXLNotFoundError:
                pass


def test_bad_size_strings_are_refused_like_the_cli() -> None:
    """issue 12 item 15: text the CLI refuses is a ValueError here, with the
    parser's message."""
    cli = cxlpool_bin()
    for text in ("-1", " 1G", "1e3", "12Q", "99999999999999999999"):
        name = f"pyt-sz-{uuid.uuid4().hex[:8]}"
        with pytest.raises(ValueError, match=r"size: size '"):
            CXLMemoryPool(name, create=True, size=text)
        r = subprocess.run([cli, "create", name, text], capture_output=True, text=True)
        if r.returncode == 0:
            CXLMemoryPool.destroy(name)
        assert r.returncode == 2, (text, r.stderr)


def test_catalog_keys_are_the_clis(pool, tmp_path) -> None:
    """issue 12 item 15: pool.datasets() and ds.info() have exactly the keys
    (and values) of `cxlpool ls --json`."""
    np.save(tmp_path / "k.npy", np.zeros((10, 3), np.int16))
    ds = CXLDataset.ingest(pool, "k", tmp_path / "k.npy")
    r = subprocess.run([cxlpool_bin(), "ls", pool.spec, "--json"], check=True,
                       capture_output=True, text=True)
    cli = json.loads(r.stdout)
    cli = cli["datasets"] if isinstance(cli, dict) else cli
    assert pool.datasets() == cli
    assert ds.info() == cli[0]


def test_the_manuals_example(tmp_path, tokens, monkeypatch) -> None:
    """docs/python.md's first example runs as written (its pool name made
    unique, its corpus the test's Megatron files)."""
    text = (ROOT / "docs" / "python.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    name = f"pyt-manual-{uuid.uuid4().hex[:8]}"
    prefix, seqs = tokens
    code = code.replace('"train"', repr(name)).replace('"corpus_text_document"', repr(str(prefix)))
    try:
        exec(compile(code, "docs/python.md", "exec"), {})
        with CXLMemoryPool(name) as p:
            assert [d["records"] for d in p.datasets()] == [len(seqs)]
    finally:
        CXLMemoryPool.destroy(name)


def test_record_size_as_a_size_string(pool, tmp_path) -> None:
    """ingest(record_size="4K") is 4096 bytes, as the CLI's --record-size 4K."""
    (tmp_path / "r.bin").write_bytes(bytes(range(256)) * 64)
    pool.ingest("r", tmp_path / "r.bin", format="raw", record_size="4K")
    assert pool.datasets()[0]["record_size"] == 4096 and pool.datasets()[0]["records"] == 4


def test_verify_rewrite_migrate_report_as_the_cli(tmp_path) -> None:
    """issue 34: verify(), rewrite() and migrate() (and migrate_to) follow one
    convention: a dict with the keys of `cxlpool verify|rewrite|migrate
    --json`, and the same values where the two runs must agree."""
    name = f"pyt-report-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    tier_file = tmp_path / "r.tier"
    pool = CXLMemoryPool(name, create=True, meta_bytes="4M",
                         tiers=["dram=shm:6M", f"nvme=file:{tier_file}:32M"])

    def cli(*args: str) -> dict:
        r = subprocess.run([cxlpool_bin(), *args, "--json"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)
    try:
        np.save(tmp_path / "a.npy", np.arange(4096, dtype=np.int64).reshape(512, 8))
        for ds in ("a", "b"):
            pool.ingest(ds, tmp_path / "a.npy")
        mine, theirs = pool.verify(), cli("verify", name)
        assert mine.keys() == theirs.keys() and mine["ok"] is theirs["ok"] is True
        assert mine["items"] == len(mine["checked"]) == theirs["items"]
        assert [x for x in mine["checked"] if x.startswith("dataset ")] == \
            [x for x in theirs["checked"] if x.startswith("dataset ")]
        mine, theirs = pool.rewrite("a", progress=False), cli("rewrite", name, "b")
        assert mine.keys() == theirs.keys() and mine["dataset"] == "a"
        assert mine["after"] == theirs["after"] and mine["before"] == theirs["before"]
        assert mine["after"]["version"] == 4 and mine["seconds"] >= 0
        mine = CXLDataset(pool, "a").migrate_to("dram")
        theirs = cli("migrate", name, "b", "dram")
        assert mine.keys() == theirs.keys() == pool.migrate("a", 1).keys()
        assert (mine["dataset"], mine["tier"], mine["shards"]) == ("a", "dram", theirs["shards"])
    finally:
        pool.close()
        CXLMemoryPool.destroy(name)
