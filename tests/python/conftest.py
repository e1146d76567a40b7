"""Shared fixtures: a fresh shm pool per test, small datasets written here."""
from __future__ import annotations

import os
import socket
import struct
import uuid
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest

from cxl_dataloader import CXLError, CXLMemoryPool


@pytest.fixture
def pool() -> Iterator[CXLMemoryPool]:
    name = f"pyt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    p = CXLMemoryPool(name, create=True, size=256 << 20)
    try:
        yield p
    finally:
        p.close()
        try:
            CXLMemoryPool.destroy(name)
        except CXLError:
            pass


def write_megatron(prefix: Path, seqs: list[np.ndarray], docs: list[int], dtype_code: int = 8) -> None:
    """A Megatron-LM indexed dataset (MMIDIDX version 1), as its _IndexWriter
    writes it: lengths int32, byte pointers int64, document indices int64."""
    itemsize = seqs[0].dtype.itemsize if seqs else 2
    lens = np.array([len(s) for s in seqs], dtype=np.int32)
    ptrs = np.zeros(len(seqs), dtype=np.int64)
    if len(seqs) > 1:
        ptrs[1:] = np.cumsum(lens[:-1].astype(np.int64) * itemsize)
    with open(f"{prefix}.bin", "wb") as f:
        for s in seqs:
            f.write(s.tobytes())
    with open(f"{prefix}.idx", "wb") as f:
        f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", dtype_code))
        f.write(struct.pack("<Q", len(seqs)) + struct.pack("<Q", len(docs)))
        f.write(lens.tobytes() + ptrs.tobytes() + np.array(docs, dtype=np.int64).tobytes())


@pytest.fixture
def tokens(tmp_path: Path) -> tuple[Path, list[np.ndarray]]:
    """300 uint16 token sequences of lengths 0..199 in 30 documents."""
    rng = np.random.default_rng(7)
    seqs = [rng.integers(0, 60000, size=int(n), dtype=np.uint16) for n in rng.integers(0, 200, 300)]
    prefix = tmp_path / "tok_text_document"
    write_megatron(prefix, seqs, list(range(0, 301, 10)))
    return prefix, seqs


@pytest.fixture(scope="module")
def s3_server() -> Iterator[dict]:
    """A real S3-compatible server on 127.0.0.1 (moto in server mode, an
    HTTP server speaking the S3 protocol) and the environment that points
    boto3/s3fs at it (AWS_ENDPOINT_URL and credentials), restored after."""
    moto_server = pytest.importorskip("moto.server")
    s3fs = pytest.importorskip("s3fs")
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    srv = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    srv.start()
    env = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
           "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}"}
    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    s3fs.S3FileSystem.clear_instance_cache()  # fsspec caches clients with their endpoint
    try:
        yield env
    finally:
        srv.stop()
        s3fs.S3FileSystem.clear_instance_cache()
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
