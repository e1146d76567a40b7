"""Lightning: a ``LightningDataModule`` whose loaders read the pool.

``CXLDataModule(pool, "train", batch_size=32)`` returns ``CXLDataLoader``s
from ``train_dataloader()`` (and ``val_dataloader()`` with ``val=``), each
over a ``DistributedCXLSampler`` of the trainer's world size and rank.

Why Lightning leaves them alone, with ``use_distributed_sampler=True`` (its
default): Lightning re-creates a loader with its own ``DistributedSampler``
only when the loader is a ``torch.utils.data.DataLoader``
(``_DataConnector._prepare_dataloader``); a ``CXLDataLoader`` is not one, so
it is passed through as made, and the ranks' equal, disjoint shares are our
sampler's. Lightning calls the sampler's ``set_epoch`` each epoch, as it
does for its own; each pass of the loader is the trainer's current epoch.

Checkpoints: a ``CXLDataLoader`` has ``state_dict()``/``load_state_dict()``,
which is what Lightning's stateful dataloader support looks for (the
``_Stateful`` protocol): the fit loop stores the loader's state in the
checkpoint (``"loops"/"fit_loop"/"state_dict"/"combined_loader"``) and, on
``Trainer.fit(ckpt_path=...)``, hands it back before the first batch, so a
mid-epoch checkpoint resumes with exactly the remaining batches (a loader
with a length is not pre-fetched by Lightning, so the state is the
training loop's). tests/python/test_integrations_lightning.py kills a
2-rank run after a mid-epoch checkpoint and checks the resumed batches.
"""
from __future__ import annotations

from typing import Any, Optional, Union

try:
    import lightning.pytorch as pl
except ImportError:  # the standalone package
    import pytorch_lightning as pl  # type: ignore[no-redef]

from ..dataset import CXLDataset
from ..loader import CXLDataLoader
from ..pool import CXLMemoryPool
from ..samplers import DistributedCXLSampler


class _EpochLoader(CXLDataLoader):
    """A CXLDataLoader whose passes are the trainer's epochs: Lightning
    calls iter() on a loader that is not a torch DataLoader once to check
    that it is iterable (``_check_dataloader_iterable``) and starts the first
    epoch's pass before it calls the sampler's set_epoch; a CXLDataLoader
    counts every pass as an epoch, so here each iter() is the trainer's
    current epoch instead (a restored state's pass is left as restored)."""

    trainer: Any = None

    def __iter__(self) -> Any:
        if self.trainer is not None and self._resume is None:
            self.set_epoch(self.trainer.current_epoch)
        return super().__iter__()


class CXLDataModule(pl.LightningDataModule):
    """Loaders over pool datasets for a Lightning ``Trainer``.

    pool, train: the pool (object or name/spec) and the training dataset's
    name; val: a validation dataset's name (optional). batch_size, seed,
    shuffle (the training order; validation is in order) and drop_last go
    to the sampler and loader; any other keyword (seq_len, collate, columns,
    num_workers: gather threads, dtype, ...) to every ``CXLDataLoader``.
    """

    def __init__(self, pool: Union[CXLMemoryPool, str], train: str, *, batch_size: int = 32,
                 val: Optional[str] = None, seed: int = 0, shuffle: bool = True,
                 drop_last: bool = False, **loader_kwargs: Any) -> None:
        super().__init__()
        self.spec = pool.spec if isinstance(pool, CXLMemoryPool) else pool
        self.train_name, self.val_name = train, val
        self.batch_size, self.seed, self.shuffle = batch_size, seed, shuffle
        self.drop_last = drop_last
        self.loader_kwargs = loader_kwargs
        self._loaders: dict[str, CXLDataLoader] = {}

    def _world(self) -> tuple[int, int]:
        t = getattr(self, "trainer", None)
        if t is not None:
            return t.world_size, t.global_rank
        return 1, 0

    def _loader(self, name: str, shuffle: bool) -> CXLDataLoader:
        # one loader per dataset for the module's life: Lightning hands a
        # restored state to the loader it got, and asks again each epoch only
        # when reload_dataloaders_every_n_epochs is set
        if name not in self._loaders:
            ds = CXLDataset(self.spec, name)
            world, rank = self._world()
            sampler = DistributedCXLSampler(ds, num_replicas=world, rank=rank, shuffle=shuffle,
                                            seed=self.seed, drop_last=self.drop_last)
            loader = _EpochLoader(ds, batch_size=self.batch_size, sampler=sampler,
                                  drop_last=self.drop_last, **self.loader_kwargs)
            loader.trainer = getattr(self, "trainer", None)
            self._loaders[name] = loader
        return self._loaders[name]

    def train_dataloader(self) -> CXLDataLoader:
        return self._loader(self.train_name, self.shuffle)

    def val_dataloader(self) -> Any:
        return self._loader(self.val_name, False) if self.val_name else []

    def teardown(self, stage: str) -> None:
        for loader in self._loaders.values():
            loader.close()
        self._loaders.clear()
