"""One rank of test_ddp_pack.py's job, started by torchrun: DDP (gloo, CPU)
over packed Megatron rows from a pool, 3 epochs. Every rank must yield the
same number of batches per epoch, or the first missing all-reduce blocks
(here: fails after the process group's 60 s timeout). Writes, per epoch,
len(loader) before the epoch and the batches the epoch yielded."""
from __future__ import annotations

import datetime
import json
import sys

import torch
import torch.distributed as dist

from cxl_dataloader import CXLDataLoader, CXLDataset, DistributedCXLSampler


def main() -> None:
    spec, name, out = sys.argv[1:4]
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=60))
    torch.manual_seed(0)
    ds = CXLDataset(spec, name)
    sampler = DistributedCXLSampler(ds, seed=3)  # world size and rank from the group
    loader = CXLDataLoader(ds, batch_size=4, seq_len=33, sampler=sampler)
    model = torch.nn.parallel.DistributedDataParallel(
        torch.nn.Sequential(torch.nn.Embedding(65536, 8), torch.nn.Linear(8, 1)))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    epochs = []
    for epoch in range(3):
        loader.set_epoch(epoch)
        expected = len(loader)
        n = 0
        for batch in loader:
            loss = model(batch["tokens"].long()).float().mean()
            opt.zero_grad()
            loss.backward()  # all-reduce of the gradients: every rank must be here
            opt.step()
            n += 1
        epochs.append({"len": expected, "batches": n})
    dist.barrier()
    with open(f"{out}.{dist.get_rank()}", "w") as f:
        json.dump({"world": dist.get_world_size(), "epochs": epochs}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
