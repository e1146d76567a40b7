"""cxl_dataloader: PyTorch data loading from a CXL memory pool.

One copy of a dataset lives in a pool (shared memory by default: emulated
CXL; a NUMA node, a device-dax device or a file otherwise) and every process
on the host reads it in place. ``CXLDataset`` returns zero-copy tensors;
``CXLDataLoader`` builds batches in C threads.
"""
from ._core import (CXLCorruptError, CXLDatasetNotFoundError, CXLError, CXLExistsError,
                    CXLNotFoundError, CXLPermissionError)
from .pool import CXLMemoryPool
from .dataset import CXLDataset
from .loader import CXLDataLoader
from .kinds import (CXLArrowDataset, CXLDistributedDataLoader, CXLMemmapDataset,
                    CXLNestedDataset, CXLWebDataset)
from .samplers import (BalancedCXLSampler, BlendedCXLDataset, BlendedCXLSampler,
                       CurriculumCXLSampler, DistributedCXLSampler, HostsCXLSampler,
                       RandomCXLSampler)

__all__ = ["CXLError", "CXLNotFoundError", "CXLDatasetNotFoundError", "CXLExistsError",
           "CXLPermissionError", "CXLCorruptError", "CXLMemoryPool", "CXLDataset",
           "CXLDataLoader", "RandomCXLSampler", "DistributedCXLSampler", "BlendedCXLSampler",
           "BlendedCXLDataset", "CurriculumCXLSampler", "BalancedCXLSampler", "HostsCXLSampler",
           "CXLMemmapDataset", "CXLArrowDataset", "CXLNestedDataset", "CXLWebDataset", "CXLDistributedDataLoader"]
__version__ = "0.1.0"
