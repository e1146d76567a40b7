"""Framework integrations, one module per framework, each imported only when
used (``from cxl_dataloader.integrations.lightning import CXLDataModule``),
each framework an optional extra of the package (pyproject.toml):

- ``megatron``: Megatron-core's ``IndexedDataset`` over a pool dataset
  (``CXLIndexedDataset``), ``GPTDataset`` and
  ``BlendedMegatronDatasetBuilder`` over ``cxl://POOL/NAME`` blends, their
  index caches in the pool, and GPT batches gathered in C.
- ``lightning``: ``CXLDataModule``, whose loaders Lightning neither wraps nor
  re-samples, and whose state goes into Lightning's checkpoints.
- ``hf``: ``CXLTrainerMixin`` and ``CXLStateCallback`` for Hugging Face's
  ``Trainer``: loader state in each checkpoint, an O(1) resume.
- ``torchdata``: the ``StatefulDataLoader`` protocol check, and a loader
  state that torchdata's and torchtitan's checkpointers carry.

docs/integrations.md has one runnable example per framework.
"""
