#!/usr/bin/env python3
"""Instructions of the fast path's per-batch call, load-independent.

    valgrind --tool=callgrind --toggle-collect=pass_next \\
        --callgrind-out-file=OUT python3 bench/take_instructions.py pack|stack

pass_next is the per-batch C call of a pass (take(): the batch's tensors
made from the slot's descriptors through torch's DLPack import, the loop's
bookkeeping); callgrind counts only inside it ("Collected", over BATCHES
batches). Two builds of the extension compared this way (e.g. the limited
API against the full one: docs/benchmarks.md) differ only in what they
execute, not in what the machine's other tenants did meanwhile. Needs a
build with symbols (pip install -C cmake.build-type=RelWithDebInfo .).
pack: documents of 100 B .. 32 KiB log-uniform in rows of 1024 tokens,
batch 16; stack: 4 KiB records, batch 16. One gather thread.
"""
from __future__ import annotations

import os
import sys
import tempfile
import uuid
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_sweep as sw  # noqa: E402
from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool  # noqa: E402

BATCHES = 400


def main() -> int:
    kind = sys.argv[1] if len(sys.argv) > 1 else "pack"
    name = f"takeins-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    pool = CXLMemoryPool(name, create=True, size="96M")
    rng = np.random.default_rng(1)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            if kind == "pack":
                lens = sw.doc_lengths("logu", 16 << 20, rng)
                sw.write_megatron(Path(tmp) / "d", lens, rng)
                pool.ingest("d", str(Path(tmp) / "d"), format="megatron")
                kw = {"seq_len": 1024}
            else:
                np.save(Path(tmp) / "d.npy", rng.integers(0, 255, (8192, 4096), dtype=np.uint8))
                pool.ingest("d", Path(tmp) / "d.npy")
                kw = {}
        dl = CXLDataLoader(CXLDataset(pool, "d"), batch_size=16, shuffle=True, threads=1, **kw)
        n = 0
        for _ in dl:
            n += 1
            if n == BATCHES:
                break
        print(f"{kind}: {n} batches")
    finally:
        pool.close()
        CXLMemoryPool.destroy(name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
