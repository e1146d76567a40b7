# Hugging Face Trainer fed from the pool; the loader's state in every checkpoint.
import tempfile

import numpy as np
import pyarrow as pa
import torch
from transformers import Trainer, TrainingArguments

from cxl_dataloader import CXLDataset, CXLMemoryPool
from cxl_dataloader.integrations.hf import CXLTrainerMixin

pool = CXLMemoryPool(create=True, size="64M", exist_ok=True)  # $CXLP_POOL, else "default"
if "pairs" not in pool:
    x = np.random.default_rng(0).normal(size=4096).astype(np.float32)
    pool.ingest("pairs", pa.table({"x": x, "labels": 3 * x + 1}))


class Line(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)

    def forward(self, x, labels):
        return {"loss": torch.nn.functional.mse_loss(self.lin(x[:, None])[:, 0], labels)}


class CXLTrainer(CXLTrainerMixin, Trainer):  # the one line: was Trainer
    pass


out = tempfile.mkdtemp()
args = TrainingArguments(output_dir=out, per_device_train_batch_size=64, num_train_epochs=1,
                         save_steps=40, report_to=[], use_cpu=True, disable_tqdm=True)
CXLTrainer(model=Line(), args=args, train_dataset=CXLDataset(pool, "pairs")).train()
# resume from the checkpoint at step 40 (of 64): O(1), the rest of the epoch
trainer = CXLTrainer(model=Line(), args=args, train_dataset=CXLDataset(pool, "pairs"))
trainer.train(resume_from_checkpoint=f"{out}/checkpoint-40")
print(f"{trainer.state.global_step} steps")
pool.close()
