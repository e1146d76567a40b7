# torchtitan's data-loader hook (TrainSpec.build_dataloader_fn) fed by the pool.
import dataclasses

import numpy as np
import pyarrow as pa

from cxl_dataloader import CXLMemoryPool
from cxl_dataloader.integrations.torchdata import TitanLoader

pool = CXLMemoryPool(create=True, size="64M", exist_ok=True)  # $CXLP_POOL, else "default"
if "docs" not in pool:  # documents of token ids (a Megatron or JSONL ingest is the same)
    rng = np.random.default_rng(0)
    docs = [rng.integers(0, 32000, int(n), dtype=np.uint16) for n in rng.integers(50, 900, 400)]
    pool.ingest("docs", pa.table({"tokens": pa.array(docs, type=pa.list_(pa.uint16()))}))


def build_cxl_dataloader(dp_world_size, dp_rank, tokenizer=None, job_config=None, **kw):
    """What torchtitan calls to build its loader: a BaseDataLoader-shaped
    iterable of ({"input": ...}, labels) with state_dict/load_state_dict."""
    return TitanLoader(pool, "docs", dp_rank=dp_rank, dp_world_size=dp_world_size,
                       batch_size=8, seq_len=512)


try:  # with torchtitan installed: a train spec whose loader is the pool's
    from torchtitan.protocols.train_spec import get_train_spec
    spec = dataclasses.replace(get_train_spec("llama3"),
                               build_dataloader_fn=build_cxl_dataloader)  # the one line
except ImportError:
    pass
loader = build_cxl_dataloader(dp_world_size=1, dp_rank=0)
for step, (inputs, labels) in zip(range(3), loader):
    print(step, inputs["input"].shape, labels.shape)
state = loader.state_dict()  # what torchtitan's checkpointer saves
pool.close()
