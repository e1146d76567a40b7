"""Writing into what CXLDataset hands out (issue 12 item 1).

ds[i] views the pool through a private copy-on-write mapping: a write gives
the writing process its own copy of the page, never reaches the pool or
another process, and never faults; numpy's flags.writeable says so. Each
case runs in a child process, so that a fault fails the test instead of
killing pytest."""
from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from cxl_dataloader import CXLDataset, CXLMemoryPool


def run(code: str) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, f"child died (rc {r.returncode}): {r.stderr[-2000:]}"
    return r


@pytest.fixture
def ones(pool: CXLMemoryPool, tmp_path) -> CXLDataset:
    np.save(tmp_path / "ones.npy", np.ones((64, 1024), dtype=np.float32))
    return CXLDataset.ingest(pool, "ones", tmp_path / "ones.npy")


def unchanged(pool: CXLMemoryPool) -> None:
    """The pool still holds the stored bytes: for a fresh reader, and by checksum."""
    ds = CXLDataset(pool.spec, "ones")
    assert all(torch.equal(ds[i], torch.ones(1024)) for i in range(len(ds)))
    pool.verify()


def test_in_place_write_into_a_sample_stays_in_the_process(pool, ones) -> None:
    """issue 12 item 1: `t = ds[0]; t += 1` neither kills the interpreter nor
    reaches the pool; numpy's flags.writeable is True and writes through it
    work; the writing process sees its own write (like a TensorDataset
    view), a neighbouring record and every other process do not."""
    r = run(f"""
        import torch
        from cxl_dataloader import CXLDataset
        ds = CXLDataset({pool.spec!r}, "ones")
        t = ds[3]
        t += 1
        a = ds[5].numpy()
        assert a.flags.writeable
        a[:] = 7
        assert torch.equal(ds[3], torch.full((1024,), 2.0))  # this process's copy
        assert torch.equal(ds[5], torch.full((1024,), 7.0))
        assert torch.equal(ds[4], torch.ones(1024))
        print("wrote")
    """)
    assert "wrote" in r.stdout
    unchanged(pool)


@pytest.mark.parametrize("workers", [0, 2])
def test_torch_dataloader_batch_size_none_samples_are_writable(pool, ones, workers) -> None:
    """issue 12 item 1: torch's own DataLoader over a CXLDataset with
    batch_size=None (and CXLDataLoader with batch_size=None, its general
    path) hands out samples a loop may modify in place."""
    run(f"""
        import torch
        from cxl_dataloader import CXLDataLoader, CXLDataset
        ds = CXLDataset({pool.spec!r}, "ones")
        for dl in (torch.utils.data.DataLoader(ds, batch_size=None, num_workers={workers}),
                   CXLDataLoader(ds, batch_size=None, num_workers={workers})):
            n = 0
            for x in dl:
                before = x.clone()
                x.mul_(3)
                assert torch.equal(x, before * 3)
                n += 1
            assert n == 64
    """)
    unchanged(pool)


def test_reading_samples_shares_the_pool_pages(pool, tmp_path) -> None:
    """issue 12 item 1: the private mapping costs no memory for reads: 16 MiB
    of records held as tensors add (almost) no anonymous memory to the
    process; writing one record then costs about one record's pages."""
    np.save(tmp_path / "big.npy", np.arange(2048 * 2048, dtype=np.int32).reshape(2048, 2048))
    CXLDataset.ingest(pool, "big", tmp_path / "big.npy")
    r = run(f"""
        from cxl_dataloader import CXLDataset

        def anonymous_kib():
            for line in open("/proc/self/smaps_rollup"):
                if line.startswith("Anonymous:"):
                    return int(line.split()[1])

        ds = CXLDataset({pool.spec!r}, "big")
        before = anonymous_kib()
        held = [ds[i] for i in range(len(ds))]
        assert sum(int(t[0]) for t in held) == sum(i * 2048 for i in range(2048))
        read = anonymous_kib() - before
        held[10] += 1
        written = anonymous_kib() - before - read
        print(read, written)
    """)
    read, written = map(int, r.stdout.split())
    print(f"anonymous memory: +{read} KiB after reading 16384 KiB, +{written} KiB after "
          f"writing one 8 KiB record")
    assert read < 2048 and 4 <= written < 1024


def test_without_a_private_mapping_records_are_copied(pool, ones) -> None:
    """issue 12 item 1: where no private mapping can be made (here: the
    address space is capped just above what the process uses; on devdax the
    driver refuses private mappings) records are copies, a warning says so
    once, and writes still never reach the pool."""
    r = run(f"""
        import resource, warnings
        import torch
        from cxl_dataloader import CXLDataset
        ds = CXLDataset({pool.spec!r}, "ones")
        vm = int(open("/proc/self/status").read().split("VmSize:")[1].split()[0]) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (64 << 20), resource.RLIM_INFINITY))
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            t = ds[3]
            t += 1
            u = ds[3]
        assert len(w) == 1 and "copied" in str(w[0].message), w
        assert torch.equal(u, torch.ones(1024)) and u.data_ptr() != t.data_ptr()
        print(w[0].message)
    """)
    assert "records are copied for Python" in r.stdout
    unchanged(pool)


def test_fast_path_batches_are_the_loaders_own_memory(pool, ones) -> None:
    """A fast-path batch views a ring slot: writing into it is allowed and
    changes neither the pool nor the dataset's view."""
    from cxl_dataloader import CXLDataLoader
    for b in CXLDataLoader(ones, batch_size=16):
        b.mul_(5)
        assert torch.equal(b, torch.full((16, 1024), 5.0))
    unchanged(pool)
    assert torch.equal(ones[0], torch.ones(1024))


def test_dict_records_are_dicts_of_writable_views(pool) -> None:
    """A dataset of several fields gives a dict of tensors per record, each a
    view of its field (no copy), writable as a single field's is."""
    import ctypes
    from test_errors_doc import C, F32, LIB, schema
    if not LIB.exists():
        pytest.skip(f"{LIB} not built")
    lib = ctypes.CDLL(str(LIB))
    lib.cxlp_errmsg.restype = ctypes.c_char_p
    c = C(lib, pool.spec[4:].encode())
    p = c.open()
    rec = np.concatenate([np.arange(4, dtype=np.float32), np.full(6, 7, np.float32)]).tobytes()
    c.write(p, "two", schema(True, (("a", F32, (4,)), ("b", F32, (2, 3)))), [rec] * 5)
    lib.cxlp_pool_close.argtypes = [ctypes.c_void_p]
    lib.cxlp_pool_close(p)
    ds = CXLDataset(pool.spec, "two")
    r = ds[2]
    assert sorted(r) == ["a", "b"] and r["b"].shape == (2, 3)
    assert torch.equal(r["a"], torch.arange(4.0)) and torch.equal(r["b"], torch.full((2, 3), 7.0))
    # each field views its own column (format 2): no copy, the same address
    # every time
    assert ds[2]["b"].data_ptr() == r["b"].data_ptr() != r["a"].data_ptr()
    r["a"] += 1
    assert torch.equal(ds[2]["a"], torch.arange(4.0) + 1)  # this dataset's own copy
    assert torch.equal(CXLDataset(pool.spec, "two")[2]["a"], torch.arange(4.0))  # a new one: the pool's
