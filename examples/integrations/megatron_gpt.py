# Megatron-core's GPTDataset over the pool: a blend of two pool datasets.
import shutil
import tempfile

import numpy as np
import torch
from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
from megatron.core.datasets.gpt_dataset import GPTDatasetConfig
from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

from cxl_dataloader import CXLMemoryPool
from cxl_dataloader.integrations.megatron import CXLGPTDataset, GPTBatches


class Tokenizer:  # what GPTDatasetConfig reads of your tokenizer
    vocab_size, eod, pad = 1000, 0, 999
    unique_identifiers = {"class": "Tokenizer"}


pool = CXLMemoryPool(create=True, size="256M", exist_ok=True)  # $CXLP_POOL, else "default"
rng = np.random.default_rng(0)
tmp = tempfile.mkdtemp()
for name in ("web", "code"):  # two Megatron datasets, written by Megatron's own builder
    b = IndexedDatasetBuilder(f"{tmp}/{name}.bin", dtype=np.uint16)
    for doc in range(200):
        for _ in range(3):
            b.add_item(torch.from_numpy(rng.integers(1, 999, int(rng.integers(20, 200)))))
        b.end_document()
    b.finalize(f"{tmp}/{name}.idx")
    if name not in pool:
        pool.ingest(name, f"{tmp}/{name}", format="megatron")  # cxlpool ingest --format megatron

config = GPTDatasetConfig(
    random_seed=1234, sequence_length=128, split="100,0,0", tokenizer=Tokenizer(),
    blend=([f"cxl://{pool.spec}/web", f"cxl://{pool.spec}/code"], [0.7, 0.3]),  # pool datasets
    reset_position_ids=False, reset_attention_mask=False, eod_mask_loss=False,
    create_attention_mask=False)
train, _, _ = BlendedMegatronDatasetBuilder(
    CXLGPTDataset, [256, 0, 0], lambda: True, config).build()  # the one line: was GPTDataset

model = torch.nn.Sequential(torch.nn.Embedding(1000, 16), torch.nn.Linear(16, 1000))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for step, batch in enumerate(GPTBatches(train, micro_batch_size=8)):  # or a DataLoader over train
    loss = torch.nn.functional.cross_entropy(model(batch["tokens"]).flatten(0, 1),
                                             batch["labels"].flatten(), reduction="none")
    loss = (loss * batch["loss_mask"].flatten()).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"{step + 1} steps, loss {loss.item():.3f}")
pool.close()
shutil.rmtree(tmp)
