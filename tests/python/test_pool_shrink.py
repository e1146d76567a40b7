"""issue 12 item 6: shrinking the pool file (`truncate -s 8M
/dev/shm/cxlp.NAME`, any process with write permission) while a loader
reads must give the reader an error, not kill it with SIGBUS.

The reader runs in a child interpreter, so that the death this guards
against would fail the test instead of taking pytest down with it."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import numpy as np

CHILD = textwrap.dedent(
    """
    import os, sys
    import numpy as np
    from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool
    name, path = sys.argv[1], sys.argv[2]
    ds = CXLDataset(CXLMemoryPool(name), "d")
    last = ds[len(ds) - 1]              # a sample: a view of the pool
    assert (last.numpy() == len(ds) - 1).all()
    os.truncate(path, 8 << 20)          # the hostile writer
    print("touched:", int(last.sum()))  # its pages are gone: zeros, not SIGBUS
    try:
        ds[0]
        sys.exit(3)
    except Exception as e:              # the next read is told
        print("getitem error:", type(e).__name__, e)
    try:
        for batch in CXLDataLoader(ds, batch_size=64):
            pass
    except Exception as e:              # and so is the loader
        print("loader error:", type(e).__name__, e)
        sys.exit(0)
    sys.exit(4)
    """
)


def test_shrunk_pool_is_an_error_not_sigbus(tmp_path: Path) -> None:
    from cxl_dataloader import CXLError, CXLMemoryPool

    name = f"pyt-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    pool = CXLMemoryPool(name, create=True, size=64 << 20)
    try:
        rows = np.repeat(np.arange(2048, dtype=np.int64)[:, None], 512, axis=1)
        np.save(tmp_path / "d.npy", rows)  # 8 MiB of records, past the first 8 MiB of the pool
        pool.ingest("d", tmp_path / "d.npy")
        script = tmp_path / "child.py"
        script.write_text(CHILD)
        r = subprocess.run([sys.executable, str(script), name, f"/dev/shm/cxlp.{name}"],
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
        assert "touched: 0" in r.stdout and r.stdout.count("shrank") == 2, r.stdout
    finally:
        pool.close()
        try:
            CXLMemoryPool.destroy(name)
        except CXLError:
            pass
