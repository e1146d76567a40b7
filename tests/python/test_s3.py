"""Ingest from object storage: a real S3-compatible server (moto's server
mode: an HTTP server speaking the S3 protocol, on 127.0.0.1) serves a
bucket of Parquet files; the ingest reads s3:// through fsspec/s3fs with the
credentials and endpoint from the environment (AWS_ACCESS_KEY_ID,
AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL), is killed halfway, rerun, and the
result equals an ingest of the same files from local disk, field by field."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cxl_dataloader import CXLDataset, CXLMemoryPool
from cxl_dataloader import ingest as importers

def make_files(d: Path, n_files: int) -> pa.Table:
    rng = np.random.default_rng(11)
    n = 250 * n_files
    t = pa.table({
        "input_ids": pa.array([rng.integers(0, 50000, int(k), dtype=np.int32)
                               for k in rng.integers(1, 400, n)], type=pa.list_(pa.int32())),
        "label": pa.array(rng.integers(0, 100, n)),
        "text": [f"doc {i} \u00e9" for i in range(n)],
    })
    d.mkdir()
    for k in range(n_files):
        pq.write_table(t.slice(250 * k, 250), d / f"part-{k:03d}.parquet", row_group_size=100)
    return t


def upload(d: Path, bucket: str) -> None:
    import fsspec
    fs = fsspec.filesystem("s3")
    fs.mkdir(bucket)
    for f in sorted(d.iterdir()):
        fs.put_file(str(f), f"{bucket}/train/{f.name}")


INGEST = """
import sys
from cxl_dataloader import CXLMemoryPool
CXLMemoryPool(sys.argv[1]).ingest(sys.argv[2], sys.argv[3], format="parquet", progress=False)
"""


def same(a: CXLDataset, b: CXLDataset) -> None:
    assert len(a) == len(b) and a.schema == b.schema
    for i in range(len(a)):
        x, y = a[i], b[i]
        assert x["text"] == y["text"]
        assert x["label"].item() == y["label"].item()
        assert x["input_ids"].numpy().tobytes() == y["input_ids"].numpy().tobytes()


def test_s3_kill_rerun_equals_local(s3_server: dict, pool: CXLMemoryPool, tmp_path: Path) -> None:
    t = make_files(tmp_path / "local", 6)
    upload(tmp_path / "local", "bucket1")
    url = "s3://bucket1/train/*.parquet"
    env = dict(os.environ, CXLP_FAULT="ingest-part-3")
    r = subprocess.run([sys.executable, "-c", INGEST, pool.spec, "remote", url], env=env)
    assert r.returncode == -9  # killed after 3 of 6 files
    parts = [d["name"] for d in pool.datasets()]
    assert "remote" not in pool and len(parts) == 3
    stats = importers.ingest(pool._pool, "remote", url, "parquet", progress=False)
    assert stats == {"records": 1500, "files": 6, "skipped": 3}
    assert [d["name"] for d in pool.datasets()] == ["remote"]
    local = CXLDataset.ingest(pool, "local", tmp_path / "local", format="parquet")
    remote = CXLDataset(pool, "remote")
    same(remote, local)
    assert remote[777]["input_ids"].tolist() == t["input_ids"][777].as_py()


def test_s3_kill_at_any_instant(s3_server: dict, pool: CXLMemoryPool, tmp_path: Path) -> None:
    """A kill wherever the ingest happens to be (here: as soon as its first
    file is done, while the second is being read): the rerun finishes."""
    make_files(tmp_path / "local", 4)
    upload(tmp_path / "local", "bucket2")
    url = "s3://bucket2/train"
    p = subprocess.Popen([sys.executable, "-c", INGEST, pool.spec, "any", url])
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and p.poll() is None and \
            not any(d["name"].startswith("~") for d in pool.datasets()):
        time.sleep(0.01)
    p.kill()
    p.wait()
    assert "any" not in pool or p.returncode == 0
    importers.ingest(pool._pool, "any", url, "parquet", progress=False)
    same(CXLDataset(pool, "any"), CXLDataset.ingest(pool, "ref", tmp_path / "local",
                                                     format="parquet"))
    assert sorted(d["name"] for d in pool.datasets()) == ["any", "ref"]


def test_s3_missing(s3_server: dict, pool: CXLMemoryPool, tmp_path: Path) -> None:
    make_files(tmp_path / "local", 1)
    upload(tmp_path / "local", "bucket3")
    with pytest.raises(importers.IngestError, match="s3://bucket3/nothing: no such file"):
        importers.ingest(pool._pool, "x", "s3://bucket3/nothing", "parquet", progress=False)
    with pytest.raises(importers.IngestError, match="no parquet files"):
        importers.ingest(pool._pool, "x", "s3://bucket3/train/*.arrow", "parquet",
                         progress=False)
    assert not pool.datasets()
