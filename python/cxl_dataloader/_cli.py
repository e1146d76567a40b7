"""`cxlpool`, the command-line tool, as the wheel carries it.

The built binary is package data (cxl_dataloader/bin/cxlpool); the
console entry point `cxlpool` runs it in this process's place, with this
interpreter named (CXLPOOL_PYTHON) for the formats the tool hands to
Python (arrow, parquet, webdataset, jsonl: python -m cxl_dataloader.ingest).
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


def binary() -> Path:
    """The cxlpool binary of this package."""
    return Path(__file__).resolve().with_name("bin") / "cxlpool"


def main() -> None:
    exe = binary()
    if not os.access(exe, os.X_OK):
        sys.exit(f"cxlpool: {exe}: not installed with this package (a build without the CLI?)")
    env = dict(os.environ)
    env.setdefault("CXLPOOL_PYTHON", sys.executable)
    os.execve(exe, ["cxlpool", *sys.argv[1:]], env)


if __name__ == "__main__":
    main()
