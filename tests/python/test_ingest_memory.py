"""Streaming ingest keeps its memory bounded: the private memory (RssAnon:
heap and anonymous mappings, not the pool's shared pages) of an ingest of
~1 GiB of Parquet and of ~256 MiB of JSONL grows by no more than a bound
that does not depend on the data's size. Slow (it writes the data first):
runs with CXLP_SLOW_TESTS=1 only; CXLP_INGEST_MEMORY_MIB sizes the Parquet
data (default 1024)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from cxl_dataloader import CXLMemoryPool

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(os.environ.get("CXLP_SLOW_TESTS") != "1",
                                 reason="slow: set CXLP_SLOW_TESTS=1")]

# The child first ingests a small file of the same format (imports pyarrow,
# fsspec, tokenizers and warms their allocators: memory that does not grow
# with the data), says ready, then ingests the big source.
RUN = """
import sys
from cxl_dataloader import _core
from cxl_dataloader.ingest import ingest
p = _core.Pool(sys.argv[1])
kw = dict(tokenizer=sys.argv[5] or None, workers=1, progress=False)
ingest(p, sys.argv[2] + "-warm", sys.argv[6], sys.argv[4], **kw)
sys.stdout.write("ready\\n"); sys.stdout.flush(); sys.stdin.readline()
ingest(p, sys.argv[2], sys.argv[3], sys.argv[4], **kw)
"""


def rss_anon_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def peak_growth(pool: str, name: str, src: Path, small: Path, fmt: str, tok: str = "") -> int:
    """RssAnon of the ingest process at its peak, minus before it started
    (after a small ingest of the same format), sampled every 20 ms, in MiB."""
    p = subprocess.Popen([sys.executable, "-c", RUN, pool, name, str(src), fmt, tok, str(small)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    base = rss_anon_kib(p.pid)
    peak = [base]
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                peak[0] = max(peak[0], rss_anon_kib(p.pid))
            except (FileNotFoundError, ProcessLookupError):
                return
            time.sleep(0.02)
    t = threading.Thread(target=sample)
    t.start()
    p.stdin.write("\n")
    p.stdin.flush()
    assert p.wait(timeout=1800) == 0
    stop.set()
    t.join()
    return (peak[0] - base) // 1024


def test_parquet_and_jsonl_memory_bounded(pool: CXLMemoryPool, tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq
    mib = int(os.environ.get("CXLP_INGEST_MEMORY_MIB", "1024"))
    big = CXLMemoryPool(f"{pool.spec.split(':')[1]}-big", create=True, size=(mib + 512) << 20)
    try:
        rng = np.random.default_rng(0)
        (tmp_path / "pq").mkdir()
        per_file = 128
        for k in range(mib // per_file):
            rows, size = [], 0
            while size < per_file << 20:
                n = int(rng.integers(256, 4096))
                rows.append(rng.integers(0, 50000, n, dtype=np.int32))
                size += 4 * n
            pq.write_table(pa.table({"input_ids": pa.array(rows, type=pa.list_(pa.int32())),
                                     "label": pa.array(np.arange(len(rows)))}),
                           tmp_path / "pq" / f"{k:03d}.parquet", row_group_size=2048)
        small = pa.table({"input_ids": pa.array([np.arange(9, dtype=np.int32)] * 100,
                                                type=pa.list_(pa.int32())),
                          "label": pa.array(np.arange(100))})
        pq.write_table(small, tmp_path / "small.parquet")
        grown = peak_growth(big.spec, "pq", tmp_path / "pq", tmp_path / "small.parquet",
                            "parquet")
        print(f"parquet: {mib} MiB of tokens, peak private memory growth {grown} MiB")
        assert grown < 384
        big.remove("pq")
        big.remove("pq-warm")
        with open(tmp_path / "big.jsonl", "w") as f:
            line = json.dumps({"text": "the quick brown fox " * 200}) + "\n"
            for _ in range((256 << 20) // len(line)):
                f.write(line)
        (tmp_path / "small.jsonl").write_text(line * 10)
        grown = peak_growth(big.spec, "js", tmp_path / "big.jsonl", tmp_path / "small.jsonl",
                            "jsonl", "bytes")
        print(f"jsonl: 256 MiB of text, peak private memory growth {grown} MiB")
        assert grown < 384
    finally:
        big.close()
        CXLMemoryPool.destroy(big.spec)
