"""A training-like loop for test_resume_kill.py: iterates a shuffled
CXLDataLoader, appends the sample ids it consumed to IDS (one per line,
flushed per batch), and every K batches writes loader.state_dict() as JSON
to CKPT (atomically: temporary file, fsync, rename) and prints "ckpt N".
With --resume it loads CKPT first. Records are int64 rows whose first
element is the record's id.

    python resume_train.py SPEC NAME CKPT IDS [--every K] [--resume] [--sleep S]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

from cxl_dataloader import CXLDataLoader, CXLDataset


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("spec")
    ap.add_argument("name")
    ap.add_argument("ckpt")
    ap.add_argument("ids")
    ap.add_argument("--every", type=int, default=10)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--sleep", type=float, default=0.0)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--seed", type=int, default=11)
    a = ap.parse_args()
    ds = CXLDataset(a.spec, a.name)
    loader = CXLDataLoader(ds, batch_size=a.batch_size, shuffle=True, seed=a.seed, num_workers=2)
    if a.resume:
        with open(a.ckpt) as f:
            loader.load_state_dict(json.load(f))
    with open(a.ids, "a") as out:
        for step, batch in enumerate(loader, 1):
            out.write("".join(f"{int(i)}\n" for i in batch[:, 0]))
            out.flush()
            if step % a.every == 0:
                tmp = a.ckpt + ".tmp"
                with open(tmp, "w") as f:
                    json.dump(loader.state_dict(), f)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp, a.ckpt)
                print(f"ckpt {step}", flush=True)
            time.sleep(a.sleep)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
