"""Multi-field records from Python: written column-wise through the Writer,
read back as dicts (zero-copy tensors, str as str), chosen with columns=,
collated by the fast path (stacked, padded, packed), compared with the
source arrays."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLError, CXLMemoryPool, _core


def offsets(lens: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)


@pytest.fixture
def sft(pool: CXLMemoryPool) -> tuple[CXLDataset, list, list, np.ndarray, list]:
    """input_ids uint16[var], labels int64[var] (same lengths), score
    float32, note str."""
    rng = np.random.default_rng(2)
    n = 500
    lens = [int(k) for k in rng.integers(0, 90, n)]
    ids = [rng.integers(0, 60000, k).astype(np.uint16) for k in lens]
    labels = [(-x.astype(np.int64)) for x in ids]
    score = rng.random(n).astype(np.float32)
    notes = [f"n{i}\u00e9" * (i % 4) for i in range(n)]
    w = _core.Writer(pool._pool, "sft", [("input_ids", "uint16", (None,)),
                                         ("labels", "int64", (None,)),
                                         ("score", "float32", ()),
                                         ("note", "str", (None,))], shard_bytes=32 << 10)
    for a in range(0, n, 128):
        b = min(n, a + 128)
        nb = [x.encode() for x in notes[a:b]]
        w.append_columns(b - a, [(np.concatenate(ids[a:b]), offsets(lens[a:b])),
                                 (np.concatenate(labels[a:b]), offsets(lens[a:b])),
                                 score[a:b],
                                 (b"".join(nb), offsets([len(x) for x in nb]))])
    w.commit()
    return CXLDataset(pool, "sft"), ids, labels, score, notes


def test_getitem_dict(sft: tuple) -> None:
    ds, ids, labels, score, notes = sft
    assert ds.fields == ["input_ids", "labels", "score", "note"]
    for i in (0, 1, 77, 499):
        r = ds[i]
        assert r["input_ids"].dtype == torch.uint16 and r["input_ids"].numpy().tolist() == ids[i].tolist()
        assert r["labels"].tolist() == labels[i].tolist()
        assert r["score"].item() == pytest.approx(float(score[i]))
        assert r["note"] == notes[i]
    # views of pool memory: the same address every time, read-only pages
    assert ds[5]["labels"].data_ptr() == ds[5]["labels"].data_ptr()
    sub = CXLDataset(ds.spec, "sft", columns=["note", "score"])
    assert list(sub[3]) == ["note", "score"]
    with pytest.raises(ValueError, match="no field 'nope'.*input_ids, labels, score, note"):
        CXLDataset(ds.spec, "sft", columns=["nope"])


def test_loader_pad_pack(sft: tuple) -> None:
    ds, ids, labels, score, _ = sft
    pad = CXLDataLoader(ds, batch_size=16, seq_len=48, collate="pad", pad_value=7,
                        columns=["input_ids", "labels", "score"])
    seen = 0
    for b in pad:
        assert set(b) == {"input_ids", "labels", "score", "lengths"}
        assert b["input_ids"].shape == b["labels"].shape == (b["score"].shape[0], 48)
        for r in range(b["score"].shape[0]):
            i = seen + r
            n = min(48, len(ids[i]))
            assert int(b["lengths"][r]) == n
            assert b["input_ids"][r, :n].numpy().tolist() == ids[i][:n].tolist()
            assert b["labels"][r, :n].tolist() == labels[i][:n].tolist()
            assert (b["labels"][r, n:] == 7).all()
            assert b["score"][r].item() == pytest.approx(float(score[i]))
        seen += b["score"].shape[0]
    assert seen == len(ds)
    assert set(next(iter(CXLDataLoader(ds, batch_size=4, seq_len=64,
                                       columns=["labels", "score"])))) == {"labels", "score",
                                                                           "lengths"}
    # two fields, the planned (variable-length) one first or second
    for cols in (["labels", "score"], ["score", "input_ids", "labels"]):
        pack = CXLDataLoader(ds, batch_size=4, seq_len=64, columns=cols, return_segments=True)
        total = 0
        for b in pack:
            # one score per segment: the record each piece of a row comes from
            assert b["score"].shape == b["seg_id"].shape
            for s in range(b["seg_id"].shape[0]):
                i = int(b["seg_id"][s])
                row, col = int(b["seg_row"][s]), int(b["seg_start"][s])
                n, off = int(b["seg_len"][s]), int(b["seg_offset"][s])
                assert b["labels"][row, col:col + n].tolist() == labels[i][off:off + n].tolist()
                if "input_ids" in b:
                    assert b["input_ids"][row, col:col + n].numpy().tolist() == \
                        ids[i][off:off + n].tolist()
                assert b["score"][s].item() == pytest.approx(float(score[i]))
                total += n
        assert total == sum(len(x) for x in ids)
    with pytest.raises(ValueError, match="no field"):
        CXLDataLoader(ds, batch_size=4, seq_len=8, columns=["x"])


def test_str_field_beside_a_token_field_is_refused_at_construction(
        pool: CXLMemoryPool, tmp_path) -> None:
    """issue 34: a Parquet dataset of an int list field and a str field, read
    with seq_len: the loader refuses it when it is built, naming the str
    field and the columns= that leaves it out (it used to build, and the
    first batch failed on "field 3 has 8 bytes"). With those columns it
    packs; two variable fields of unequal lengths (no str) still fail at
    the batch, naming both fields."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    t = pa.table({"ids": [[1, 2, 3], [4, 5], [6, 7, 8, 9]] * 8,
                  "text": ["abcdefgh", "de", "fghi"] * 8, "label": [1, 2, 3] * 8,
                  "mask": [[1], [1, 1], [1, 1, 1, 1]] * 8})
    pq.write_table(t, tmp_path / "t.parquet")
    ds = CXLDataset.ingest(pool, "t", tmp_path / "t.parquet")
    for collate in ("pack", "pad"):
        with pytest.raises(ValueError, match=r"field 'text' is str .* beside field 'ids' "
                                             r"\(int64\).*columns=\['ids', 'label', 'mask'\]"):
            CXLDataLoader(ds, batch_size=8, seq_len=64, collate=collate)
    b = next(iter(CXLDataLoader(ds, batch_size=8, seq_len=64, columns=["ids", "label"])))
    assert b["ids"][0, :9].tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    text = next(iter(CXLDataLoader(ds, batch_size=2, seq_len=8, columns=["text"])))
    assert bytes(text["text"][0].tolist()) == b"abcdefgh"
    with pytest.raises(CXLError, match=r"field 3 'mask' has 8 bytes, the padded/packed "
                                       r"fields have 3 elements \(as field 'ids'\)"):
        next(iter(CXLDataLoader(ds, batch_size=8, seq_len=64, columns=["ids", "mask"])))


def test_loader_stack_fields(pool: CXLMemoryPool) -> None:
    n = 300
    x = np.arange(n * 6, dtype=np.float32).reshape(n, 2, 3)
    y = np.arange(n, dtype=np.int16) * 3
    w = _core.Writer(pool._pool, "xy", [("x", "float32", (2, 3)), ("y", "int16", ())])
    w.append_columns(n, [x, y])
    w.commit()
    ds = CXLDataset(pool, "xy")
    assert torch.equal(ds[7]["x"], torch.from_numpy(x[7])) and ds[7]["y"].item() == 21
    got_x, got_y = [], []
    for b in CXLDataLoader(ds, batch_size=64, shuffle=False):
        got_x.append(b["x"])
        got_y.append(b["y"])
    assert torch.equal(torch.cat(got_x), torch.from_numpy(x))
    assert torch.equal(torch.cat(got_y), torch.from_numpy(y))
    only = next(iter(CXLDataLoader(ds, batch_size=8, columns=["y"])))
    assert list(only) == ["y"] and only["y"].tolist() == (np.arange(8) * 3).tolist()


def test_writer_refuses(pool: CXLMemoryPool) -> None:
    w = _core.Writer(pool._pool, "r", [("t", "int32", (None,)), ("s", "str", (None,))])
    with pytest.raises(_core.CXLError, match="field s: record 1 is not valid UTF-8"):
        w.append_columns(2, [(np.zeros(3, np.int32), offsets([1, 2])),
                             (b"ok\xff", offsets([2, 1]))])
    with pytest.raises(ValueError, match="offsets must be 3 int64"):
        w.append_columns(2, [(np.zeros(3, np.int32), offsets([1])), (b"ab", offsets([1, 1]))])
    with pytest.raises(TypeError, match="variable-length field takes"):
        w.append_columns(2, [np.zeros(3, np.int32), (b"ab", offsets([1, 1]))])
    w.abort()
    assert "r" not in pool
    with pytest.raises(ValueError, match="9 fields"):
        _core.Writer(pool._pool, "r", [(f"f{k}", "int8", ()) for k in range(9)])
    with pytest.raises(ValueError, match="unknown dtype 'int9'"):
        _core.Writer(pool._pool, "r", [("f", "int9", ())])
