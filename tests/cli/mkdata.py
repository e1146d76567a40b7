#!/usr/bin/env python3
"""Writes the input files the CLI shell tests ingest, good and bad.

usage: mkdata.py DIR   (writes every file below into DIR)

Megatron files follow _IndexWriter of megatron/core/datasets/indexed_dataset.py:
magic MMIDIDX\\0\\0, version <Q 1, dtype code <B, sequence count <Q, document
count <Q, int32 lengths, int64 byte pointers, int64 document indices (leading 0).
"""
import io
import os
import struct
import sys

import numpy as np
from numpy.lib import format as npformat

out = sys.argv[1]
rng = np.random.default_rng(1234)


def write(name, data):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)


def npy(arr):
    b = io.BytesIO()
    npformat.write_array(b, arr, allow_pickle=False)
    return b.getvalue()


def megatron(prefix, seqs, doc_idx, code=4, dtype=np.int32, version=1):
    bin_ = b"".join(np.asarray(s, dtype=dtype).tobytes() for s in seqs)
    itemsize = np.dtype(dtype).itemsize
    ptrs, cur = [], 0
    for s in seqs:
        ptrs.append(cur)
        cur += len(s) * itemsize
    idx = io.BytesIO()
    idx.write(b"MMIDIDX\x00\x00")
    idx.write(struct.pack("<Q", version))
    idx.write(struct.pack("<B", code))
    idx.write(struct.pack("<Q", len(seqs)))
    idx.write(struct.pack("<Q", len(doc_idx)))
    idx.write(np.array([len(s) for s in seqs], dtype=np.int32).tobytes())
    idx.write(np.array(ptrs, dtype=np.int64).tobytes())
    idx.write(np.array(doc_idx, dtype=np.int64).tobytes())
    write(prefix + ".bin", bin_)
    write(prefix + ".idx", idx.getvalue())
    return bin_, idx.getvalue()


# Good inputs.
a = rng.integers(-1000, 1000, size=(100, 3, 4)).astype("<i4")
write("good.npy", npy(a))
write("good_f32.npy", npy(rng.standard_normal((50, 8)).astype("<f4")))
seqs = [rng.integers(0, 50000, size=n).astype(np.int32) for n in (5, 1, 17, 3, 9, 12)]
megatron("good_mt", seqs, [0, 2, 3, 6])
write("good.raw", bytes(range(256)) * 64)  # 16 KiB, 64 records of 256 B

# Bad inputs.
bin_, idx = megatron("trunc_idx", seqs, [0, 2, 3, 6])
write("trunc_idx.idx", idx[: len(idx) - 20])
bin_, idx = megatron("magic_idx", seqs, [0, 2, 3, 6])
write("magic_idx.idx", b"MMIDIDY" + idx[7:])
megatron("version_idx", seqs, [0, 2, 3, 6], version=2)
bin_, idx = megatron("short_bin", seqs, [0, 2, 3, 6])
write("short_bin.bin", bin_[: len(bin_) - 8])
megatron("baddoc_idx", seqs, [0, 4, 3, 6])  # document indices go backwards
write("complex.npy", npy(np.zeros((4, 2), dtype="<c16")))
write("fortran.npy", npy(np.asfortranarray(np.zeros((4, 3), dtype="<f4"))))
write("object_hdr.npy", npy(np.zeros(4, dtype="<f8"))[:8] + b"\xff\xff" + b"{bad")
write("odd.raw", os.urandom(1000))  # not a multiple of 64
