# Lightning: a LightningDataModule whose loaders read the pool.
import lightning.pytorch as pl
import numpy as np
import pyarrow as pa
import torch

from cxl_dataloader import CXLMemoryPool
from cxl_dataloader.integrations.lightning import CXLDataModule

pool = CXLMemoryPool(create=True, size="64M", exist_ok=True)  # $CXLP_POOL, else "default"
if "points" not in pool:
    x = np.random.default_rng(0).normal(size=4096).astype(np.float32)
    pool.ingest("points", pa.table({"x": x, "y": 3 * x + 1}))


class Line(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(1, 1)

    def training_step(self, batch, batch_idx):
        loss = torch.nn.functional.mse_loss(self.lin(batch["x"][:, None])[:, 0], batch["y"])
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


data = CXLDataModule(pool, "points", batch_size=64)  # the one line: was your DataModule
trainer = pl.Trainer(max_epochs=2, accelerator="cpu", logger=False, enable_progress_bar=False,
                     enable_checkpointing=False)
trainer.fit(Line(), datamodule=data)
print(f"{trainer.global_step} steps, loss {trainer.callback_metrics['train_loss']:.3f}")
pool.close()
