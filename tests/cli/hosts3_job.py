"""One rank of the 3-host acceptance job (tests/cli/test_hosts3.sh starts it
under torchrun inside an emulated host's network and mount namespaces).

Reads dataset NAME of this host's pool (shm:POOL in the host's own /dev/shm)
through CXLDataLoader with DistributedCXLSampler(topology="auto"), trains a
toy model (DDP over gloo) for --epochs epochs, checks every record's words
(records carry their id and words derived from it, as bench/bench_tiers.py's
records() makes them) and, at each epoch's end, gathers to rank 0: every id
read (each must come exactly once per epoch across the ranks), each host's
pool tier counters, the sampler's own host_reads prediction, and on host 0
the home disk's read sectors (/sys/block/DEV/stat) and the server's
/metrics. Rank 0 writes it all as JSON to --out.
"""
from __future__ import annotations

import argparse
import json
import os
import time
import urllib.request

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

from cxl_dataloader import CXLDataLoader, CXLDataset
from cxl_dataloader import _core
from cxl_dataloader.samplers import DistributedCXLSampler

K1 = np.uint64(0x9E3779B97F4A7C15)
K2 = np.uint64(0xBF58476D1CE4E5B9)


def records(ids: np.ndarray, words: int) -> np.ndarray:
    """As bench/bench_tiers.py's records(): id, id * K1 + j, mix(id)."""
    ids = ids.astype(np.uint64)
    w = np.empty((len(ids), words), dtype=np.uint64)
    with np.errstate(over="ignore"):
        w[:, 1:-1] = ids[:, None] * K1 + np.arange(1, words - 1, dtype=np.uint64)
        w[:, -1] = (ids * K2) ^ (ids >> np.uint64(31))
    w[:, 0] = ids
    return w


def tier_counters(spec: str) -> list[dict]:
    pool = _core.Pool(spec, readonly=True)
    try:
        return pool.tiers()
    finally:
        pool.close()


def disk_read_bytes(dev: str) -> int:
    """Bytes read from block device dev since boot (sectors of 512 bytes)."""
    with open(f"/sys/block/{dev}/stat") as f:
        return int(f.read().split()[2]) * 512


def metrics(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    out: dict = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        k, v = line.rsplit(" ", 1)
        if k in ("cxlpool_serve_bytes_total", "cxlpool_serve_requests_total{op=\"read\"}",
                 "cxlpool_serve_errors_total", "cxlpool_serve_clients_total"):
            out[k] = float(v)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pool", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--keep-blocks", choices=["default", "yes", "no"], default="default",
                    help="keep_blocks= of the sampler: its default, True or False")
    ap.add_argument("--memory", type=float, default=0.4)
    ap.add_argument("--host-weights", default="",
                    help="host_weights= of the sampler, one per host (default: topology's)")
    ap.add_argument("--hosts", type=int, default=3)
    ap.add_argument("--home-dev", default="", help="host 0: the home's block device (loopN)")
    ap.add_argument("--home-file", default="", help="host 0: the home tier's file")
    ap.add_argument("--metrics-url", default="", help="host 0: the server's /metrics")
    ap.add_argument("--budget", default="default",
                    help='the loader\'s memory_budget: "default", "tier" (the dram tier\'s capacity), '
                         '"split" (that over the host\'s ranks) or bytes')
    ap.add_argument("--window", default="auto",
                    help='the sampler\'s window: "auto" (half the staging budget, as for any '
                         'tiered dataset) or "all" (every block of a host\'s share: a full '
                         'shuffle within it)')
    ap.add_argument("--out", required=True)
    a = ap.parse_args()

    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local = int(os.environ.get("LOCAL_RANK", "0"))
    host_first = local == 0  # the first rank of its host reads the host's counters
    spec = f"shm:{a.pool}"
    ds = CXLDataset(spec, a.name)
    n, rec = len(ds), int(ds.info()["record_size"])
    words = rec // 8
    cap = tier_counters(spec)[0]["capacity"]
    lws = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    budget = {"default": None, "tier": cap, "split": cap // lws}.get(a.budget) or (
        None if a.budget == "default" else int(a.budget))
    per = ds.shards()["per_shard"]
    win = {"auto": {"window": "auto", "memory_budget": budget},
           "all": {"shard_size": per, "window": -(-n // per)}}[a.window]
    keep = {"default": None, "yes": True, "no": False}[a.keep_blocks]
    weights = [int(w) for w in a.host_weights.split(",")] if a.host_weights else None
    sampler = DistributedCXLSampler(ds, seed=a.seed, topology="auto", keep_blocks=keep,
                                    host_weights=weights,
                                    **win)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)
    on_home = bool(a.home_dev)

    def snapshot() -> dict:
        s: dict = {"rank": rank, "host_id": _core.Pool(spec, readonly=True).stat()["host_id"]}
        if host_first:
            s["tiers"] = tier_counters(spec)
        if on_home and host_first:
            s["home_read_bytes"] = disk_read_bytes(a.home_dev)
            if a.metrics_url:
                s["metrics"] = metrics(a.metrics_url)
        return s

    # counters from before the loader exists: what it stages ahead of the
    # first epoch counts in epoch 0, what it stages for epoch e + 1 during
    # epoch e in epoch e (the loader's next_pass_bytes says how much)
    dist.barrier()
    prev = snapshot()
    loader = CXLDataLoader(ds, batch_size=a.batch, sampler=sampler, drop_last=False,
                           memory_budget=budget)
    result: dict = {"n": n, "record_size": rec, "world": world, "shards": ds.shards(),
                    "keep_blocks": sampler.base.keep_blocks, "seed": a.seed, "budget": budget,
                    "epochs": []}
    for epoch in range(a.epochs):
        loader.set_epoch(epoch)
        pred = sampler.host_reads([a.memory] * a.hosts)
        if on_home and host_first and a.home_file:
            # the home file's cached pages dropped, so the disk counts every read of it
            fd = os.open(a.home_file, os.O_RDONLY)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            os.close(fd)
        dist.barrier()
        before = prev
        t0 = time.monotonic()
        ids_read, bad, samples, loss_sum = [], 0, 0, 0.0
        for batch in loader:
            rows = batch.numpy().view(np.uint64).reshape(-1, words)
            ids = rows[:, 0].copy()
            if (ids >= n).any():
                bad += int((ids >= n).sum())
                ids = ids[ids < n]
                rows = rows[rows[:, 0] < n]
            bad += int((rows != records(ids, words)).any(axis=1).sum())
            ids_read.append(ids)
            samples += len(rows)
            x = torch.from_numpy((rows[:, :16] & np.uint64(0xFFFF)).astype(np.float32) / 65536.0)
            y = torch.from_numpy((ids.astype(np.float64) / n).astype(np.float32))[:, None]
            loss = nn.functional.mse_loss(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += float(loss)
        secs = time.monotonic() - t0
        dist.barrier()
        after = prev = snapshot()
        mine = {"rank": rank, "samples": samples, "bad": bad, "seconds": secs,
                "ids": np.concatenate(ids_read).tolist() if ids_read else [],
                "predicted": pred, "before": before, "after": after,
                "loader": {k: v for k, v in loader.stats().items()
                           if isinstance(v, (int, float, str))}}
        allr: list = [None] * world
        dist.all_gather_object(allr, mine)
        if rank == 0:
            seen = np.zeros(n, dtype=np.int64)
            for r in allr:
                np.add.at(seen, np.asarray(r["ids"], dtype=np.int64), 1)
                r.pop("ids")
            result["epochs"].append({
                "epoch": epoch, "ranks": allr, "bad": sum(r["bad"] for r in allr),
                "samples": sum(r["samples"] for r in allr),
                "ids_missing": int((seen == 0).sum()), "ids_repeated": int((seen > 1).sum()),
                "max_count": int(seen.max())})
    result["budget"] = loader.stats().get("budget") or budget  # the engine's, in bytes
    if rank == 0:
        with open(a.out, "w") as f:
            json.dump(result, f, indent=1)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
