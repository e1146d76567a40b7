"""Exceptions fit Python (issue 12 item 11): each failure is a CXLError
subclass that is also the builtin exception Python code catches for it;
str(e) is the library's message; the code is an attribute."""
from __future__ import annotations

import os
import pickle
import uuid

import numpy as np
import pytest

import cxl_dataloader as cx
from cxl_dataloader import (CXLCorruptError, CXLDataset, CXLDatasetNotFoundError, CXLError,
                            CXLExistsError, CXLMemoryPool, CXLNotFoundError,
                            CXLPermissionError)


def test_missing_pool_is_a_file_not_found_error() -> None:
    """issue 12 item 11: a missing pool is FileNotFoundError (errno ENOENT),
    and a CXLError carrying the library's code and message."""
    name = f"nope-{uuid.uuid4().hex}"
    with pytest.raises(FileNotFoundError) as e:
        CXLMemoryPool(name)
    err = e.value
    assert isinstance(err, CXLNotFoundError) and isinstance(err, CXLError)
    assert str(err) == f"/dev/shm/cxlp.{name}: no such pool"
    assert err.code == CXLError.ENOTFOUND and err.errno == 2 and err.reason == "not found"
    with pytest.raises(FileNotFoundError):
        CXLMemoryPool.destroy(name)


def test_missing_source_file_is_a_file_not_found_error(pool, tmp_path) -> None:
    """issue 12 item 11: a source file that is not there is FileNotFoundError
    (-ENOENT), its message naming the file."""
    with pytest.raises(FileNotFoundError) as e:
        pool.ingest("x", tmp_path / "absent.npy")
    assert isinstance(e.value, CXLNotFoundError) and e.value.code == -2
    assert str(e.value).startswith(str(tmp_path / "absent.npy"))


def test_missing_dataset_is_a_key_error(pool) -> None:
    """issue 12 item 11: a dataset the pool does not hold is a KeyError (and
    a CXLNotFoundError), whose str() is the message, not its repr."""
    with pytest.raises(KeyError) as e:
        CXLDataset(pool, "absent")
    assert isinstance(e.value, CXLDatasetNotFoundError)
    assert str(e.value) == f"/dev/shm/cxlp.{pool.spec[4:]}: no dataset 'absent'"
    with pytest.raises(KeyError):
        pool.remove("absent")


def test_existing_names_are_file_exists_errors(pool, tmp_path) -> None:
    """issue 12 item 11: creating an existing pool, or ingesting a dataset
    name that is taken, is FileExistsError (errno EEXIST)."""
    with pytest.raises(FileExistsError) as e:
        CXLMemoryPool(pool.spec, create=True, size="16M")
    assert isinstance(e.value, CXLExistsError) and e.value.errno == 17
    assert "pool already exists" in str(e.value) and e.value.code == CXLError.EEXIST
    np.save(tmp_path / "a.npy", np.zeros((4, 4), np.float32))
    pool.ingest("a", tmp_path / "a.npy")
    with pytest.raises(FileExistsError, match="dataset a already exists"):
        pool.ingest("a", tmp_path / "a.npy")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_permission_is_a_permission_error(tmp_path) -> None:
    """issue 12 item 11: no permission is PermissionError."""
    src = tmp_path / "locked.npy"
    np.save(src, np.zeros(4))
    src.chmod(0)
    name = f"pyt-perm-{uuid.uuid4().hex[:8]}"
    with CXLMemoryPool(name, create=True, size="16M") as p:
        try:
            with pytest.raises(PermissionError) as e:
                p.ingest("x", src)
            assert isinstance(e.value, CXLPermissionError)
        finally:
            CXLMemoryPool.destroy(name)


def test_another_users_pool_is_a_permission_error(pool) -> None:
    """issue 12 item 11: attaching another user's pool to write is a
    PermissionError (CXLError.EOWNER); read-only it attaches."""
    path = pool.stat()["path"]
    if os.geteuid() != 0:
        pytest.skip("needs root to give the pool to another user")
    os.chown(path, 65534, 65534)
    try:
        with pytest.raises(PermissionError) as e:
            CXLMemoryPool(pool.spec)
        assert isinstance(e.value, CXLPermissionError) and e.value.code == CXLError.EOWNER
        assert path in str(e.value)
        CXLMemoryPool(pool.spec, readonly=True).close()
    finally:
        os.chown(path, 0, 0)


def test_read_only_handle_write_is_a_permission_error(pool, tmp_path) -> None:
    """issue 12 item 11: a write through a read-only handle is a
    PermissionError (CXLError.EREADONLY)."""
    np.save(tmp_path / "a.npy", np.zeros((4, 4), np.float32))
    with CXLMemoryPool(pool.spec, readonly=True) as ro:
        with pytest.raises(PermissionError) as e:
            ro.ingest("a", tmp_path / "a.npy")
    assert isinstance(e.value, CXLPermissionError) and e.value.code == CXLError.EREADONLY


def test_corruption_is_a_corrupt_error(pool, tmp_path) -> None:
    """issue 12 item 11: a flipped byte found by verify is CXLCorruptError,
    whose message names dataset, shard and offset."""
    arr = np.arange(4096, dtype=np.int64)
    np.save(tmp_path / "c.npy", arr)
    pool.ingest("c", tmp_path / "c.npy")
    path = pool.stat()["path"]
    data = bytearray(open(path, "rb").read())
    at = data.find(arr[1000:1002].tobytes())
    assert at > 0
    with open(path, "r+b") as f:
        f.seek(at)
        f.write(b"\xff")
    with pytest.raises(CXLCorruptError) as e:
        pool.verify()
    assert "dataset c shard 0" in str(e.value) and "checksum mismatch" in str(e.value)
    assert e.value.code == CXLError.ECORRUPT and isinstance(e.value, CXLError)


def test_exceptions_are_exported_and_pickle() -> None:
    """issue 12 item 11: the classes are exported from the package; an error
    crosses a DataLoader worker's pickling with its message and code."""
    for n in ("CXLError", "CXLNotFoundError", "CXLDatasetNotFoundError", "CXLExistsError",
              "CXLPermissionError", "CXLCorruptError"):
        assert n in cx.__all__ and getattr(cx, n).__module__ == "cxl_dataloader"
    try:
        CXLMemoryPool(f"nope-{uuid.uuid4().hex}")
    except CXLNotFoundError as e:
        back = pickle.loads(pickle.dumps(e))
        assert type(back) is CXLNotFoundError and str(back) == str(e) and back.code == e.code
