"""Runs every Python example of docs/formats.md as written, in a directory
holding the small files the examples read (data/reviews/*.parquet,
data/hf_saved, data/shards/*.tar, data/corpus.jsonl) and with a local S3
server (moto in server mode) serving s3://bucket/train/*.parquet. The pool
the examples call "demo" gets a name of this test's own (/dev/shm is
shared)."""
from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cxl_dataloader import CXLMemoryPool

DOC = Path(__file__).resolve().parents[2] / "docs" / "formats.md"


def examples() -> list[tuple[str, str]]:
    """(heading, code) of each python block, under the ### heading it is in."""
    out = []
    for sec in re.split(r"^### ", DOC.read_text(), flags=re.M)[1:]:
        title = sec.split("\n", 1)[0]
        out += [(title, code) for code in re.findall(r"```python\n(.*?)```", sec, re.S)]
    return out


def make_data(root: Path) -> None:
    rng = np.random.default_rng(0)
    n = 300
    t = pa.table({"input_ids": pa.array([rng.integers(0, 50000, int(k), dtype=np.int32)
                                         for k in rng.integers(1, 300, n)],
                                        type=pa.list_(pa.int32())),
                  "label": pa.array(rng.integers(0, 5, n)),
                  "text": [f"review {i}" for i in range(n)]})
    (root / "data" / "reviews").mkdir(parents=True)
    pq.write_table(t.slice(0, 150), root / "data" / "reviews" / "a.parquet")
    pq.write_table(t.slice(150), root / "data" / "reviews" / "b.parquet")
    pq.write_table(t, root / "train.parquet")
    import datasets
    datasets.Dataset.from_dict({
        "input_ids": [rng.integers(0, 30000, int(k)).tolist() for k in rng.integers(1, 40, 120)],
        "label": rng.integers(0, 3, 120).tolist(),
        "text": [f"t{i}" for i in range(120)]}).save_to_disk(str(root / "data" / "hf_saved"))
    import webdataset as wds
    (root / "data" / "shards").mkdir()
    for s in range(2):
        with wds.TarWriter(str(root / "data" / "shards" / f"{s:03d}.tar")) as sink:
            for i in range(64):
                sink.write({"__key__": f"s{s}_{i:04d}",
                            "pixels": bytes(rng.integers(0, 256, 192, dtype=np.uint8)),
                            "txt": f"a picture {i}", "cls": int(rng.integers(0, 10))})
    with open(root / "data" / "corpus.jsonl", "w") as f:
        for i in range(200):
            f.write('{"text": "%s"}\n' % (" ".join(["word"] * int(rng.integers(1, 80)) + [str(i)])))


@pytest.fixture(scope="module")
def world(s3_server: dict, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("docs")
    make_data(root)
    import fsspec
    fs = fsspec.filesystem("s3")
    fs.mkdir("bucket")
    fs.put_file(str(root / "train.parquet"), "bucket/train/part-0.parquet")
    pool = f"docs-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    cwd = os.getcwd()
    os.chdir(root)
    try:
        yield pool
    finally:
        os.chdir(cwd)
        try:
            CXLMemoryPool.destroy(pool)
        except Exception:
            pass


@pytest.mark.parametrize("title,code", examples(), ids=[t for t, _ in examples()])
def test_example_runs(world: str, title: str, code: str) -> None:
    assert 'CXLMemoryPool("demo"' in code
    exec(compile(code.replace('CXLMemoryPool("demo"', f'CXLMemoryPool("{world}"'),
                 f"docs/formats.md: {title}", "exec"), {"__name__": "__docs__"})


def test_every_example_collected() -> None:
    assert len(examples()) == 5
