#!/usr/bin/env python3
"""Writes the seed corpora of fuzz_npy and fuzz_megatron_idx.

npy seeds are written by numpy itself (versions 1.0, 2.0, 3.0, every
supported dtype, 0-d to 4-d). Megatron seeds follow _IndexWriter of
megatron/core/datasets/indexed_dataset.py byte for byte; fuzz_megatron_idx
reads the first 8 bytes of a seed as the length of a fake .bin.
Run from the repository root: python3 fuzz/gen_corpus.py
"""
import io
import os
import struct

import numpy as np
from numpy.lib import format as npformat

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    d = os.path.join(root, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def npy_bytes(arr, version=None):
    b = io.BytesIO()
    npformat.write_array(b, arr, version=version, allow_pickle=False)
    return b.getvalue()


rng = np.random.default_rng(7)
for dt in ["u1", "i1", "?", "<u2", "<i2", "<u4", "<i4", "<u8", "<i8", "<f2", "<f4", "<f8"]:
    a = (rng.integers(0, 100, size=(3, 2)) % (2 if dt == "?" else 100)).astype(dt)
    put("fuzz_npy", "dtype_%s.npy" % np.dtype(dt).str.replace("<", "le").replace("|", "na"),
        npy_bytes(a))
put("fuzz_npy", "v2.npy", npy_bytes(np.arange(6, dtype="<i4").reshape(2, 3), (2, 0)))
put("fuzz_npy", "v3.npy", npy_bytes(np.arange(4, dtype="<f4"), (3, 0)))
put("fuzz_npy", "scalar.npy", npy_bytes(np.array(3.5)))
put("fuzz_npy", "empty.npy", npy_bytes(np.zeros((0, 4), dtype="<u2")))
put("fuzz_npy", "4d.npy", npy_bytes(np.zeros((2, 1, 2, 3), dtype="<i2")))
put("fuzz_npy", "fortran.npy", npy_bytes(np.asfortranarray(np.zeros((2, 3), dtype="<f4"))))
put("fuzz_npy", "structured.npy",
    npy_bytes(np.zeros(2, dtype=[("a", "<i4"), ("b", "<f8", (2,))])))


DTYPE_CODES = {np.uint8: 1, np.int8: 2, np.int16: 3, np.int32: 4, np.int64: 5,
               np.float64: 6, np.float32: 7, np.uint16: 8}


def megatron_idx(dtype, lengths, doc_idx, modes=None):
    itemsize = np.dtype(dtype).itemsize
    out = io.BytesIO()
    out.write(b"MMIDIDX\x00\x00")
    out.write(struct.pack("<Q", 1))
    out.write(struct.pack("<B", DTYPE_CODES[dtype]))
    ptrs, cur = [], 0
    for n in lengths:
        ptrs.append(cur)
        cur += n * itemsize
    out.write(struct.pack("<Q", len(lengths)))
    out.write(struct.pack("<Q", len(doc_idx)))
    out.write(np.array(lengths, dtype=np.int32).tobytes(order="C"))
    out.write(np.array(ptrs, dtype=np.int64).tobytes(order="C"))
    out.write(np.array(doc_idx, dtype=np.int64).tobytes(order="C"))
    if modes is not None:
        out.write(np.array(modes, dtype=np.int8).tobytes(order="C"))
    return cur, out.getvalue()


for dtype in DTYPE_CODES:
    bin_len, idx = megatron_idx(dtype, [3, 0, 5, 2], [0, 1, 3, 4])
    put("fuzz_megatron_idx", "%s.seed" % np.dtype(dtype).name,
        struct.pack("<Q", bin_len) + idx)
bin_len, idx = megatron_idx(np.uint16, [], [0])
put("fuzz_megatron_idx", "empty.seed", struct.pack("<Q", bin_len) + idx)
bin_len, idx = megatron_idx(np.int32, [4, 4, 1], [0, 3], modes=[0, 1, 0])
put("fuzz_megatron_idx", "multimodal.seed", struct.pack("<Q", bin_len) + idx)
