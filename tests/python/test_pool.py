"""CXLMemoryPool through the public API."""
from __future__ import annotations

import os
import uuid

import numpy as np
import pytest

from cxl_dataloader import CXLError, CXLMemoryPool


def test_create_attach_list_stat_remove(pool: CXLMemoryPool, tmp_path) -> None:
    st = pool.stat()
    assert st["media"] == "shm" and st["emulated"] is True
    assert st["n_datasets"] == 0 and st["size"] == 256 << 20
    np.save(tmp_path / "a.npy", np.arange(100, dtype=np.int32).reshape(10, 10))
    pool.ingest("a", tmp_path / "a.npy")
    assert "a" in pool and "b" not in pool
    (d,) = pool.datasets()
    assert d["name"] == "a" and d["records"] == 10 and d["fixed"] and d["record_size"] == 40
    with CXLMemoryPool(pool.spec) as other:  # a second attachment sees it
        assert [x["name"] for x in other.datasets()] == ["a"]
    assert any("a" in line for line in pool.verify()["checked"])
    pool.remove("a")
    assert pool.datasets() == []


def test_errors_carry_code_and_context(pool: CXLMemoryPool, tmp_path) -> None:
    with pytest.raises(CXLError) as e:
        CXLMemoryPool(pool.spec.split(":")[1], create=True, size=16 << 20)
    assert "exists" in str(e.value)
    with pytest.raises(CXLError) as e:
        CXLMemoryPool(f"nope-{uuid.uuid4().hex}")
    assert "no such pool" in str(e.value)
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"x" * 10)
    with pytest.raises(CXLError) as e:
        pool.ingest("r", bad, format="raw", record_size=3)
    assert str(bad) in str(e.value) and "multiple" in str(e.value)
    assert pool.datasets() == []  # nothing half-made is visible
    with pytest.raises(ValueError):
        CXLMemoryPool("x", backend="s3")


def test_exist_ok_attaches(pool: CXLMemoryPool) -> None:
    """exist_ok attaches the pool as it is; a size other than its own warns
    (issue 12 item 15), the same size does not."""
    import warnings
    name = pool.spec.split(":", 1)[1]
    with pytest.warns(UserWarning, match="not the 16777216 asked"):
        with CXLMemoryPool(name, create=True, size=16 << 20, exist_ok=True) as p:
            assert p.stat()["size"] == 256 << 20
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CXLMemoryPool(name, create=True, size="256M", exist_ok=True).close()


def test_new_pool_is_private(pool: CXLMemoryPool) -> None:
    path = pool.stat()["path"]
    assert os.stat(path).st_mode & 0o777 == 0o600
