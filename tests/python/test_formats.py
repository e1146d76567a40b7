"""The importers against files written by each ecosystem's own writers
(pyarrow, Hugging Face datasets, webdataset's TarWriter, json + tokenizers):
every field of every sample comes back byte- or value-exact; bad files are
refused with an error naming the file, the record and the field, and leave
nothing in the pool; a kill between files resumes where it stopped."""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLError, CXLMemoryPool
from cxl_dataloader import ingest as importers
from cxl_dataloader.ingest import IngestError


def names(pool: CXLMemoryPool) -> list[str]:
    return sorted(d["name"] for d in pool.datasets())


def clean(pool: CXLMemoryPool) -> bool:
    """verify() passed (it raises on the first problem) and reported none."""
    return not any("FAILED" in line for line in pool.verify()["checked"])


def table(n: int, seed: int = 0) -> pa.Table:
    """A table of every column type a record holds."""
    rng = np.random.default_rng(seed)
    toks = [rng.integers(0, 60000, size=int(k), dtype=np.int32) for k in rng.integers(0, 200, n)]
    return pa.table({
        "input_ids": pa.array(toks, type=pa.list_(pa.int32())),
        "scores": pa.array([rng.random(int(k)) for k in rng.integers(0, 5, n)],
                           type=pa.large_list(pa.float64())),
        "label": pa.array(rng.integers(-5, 1000, n)),
        "flag": pa.array(rng.integers(0, 2, n).astype(bool)),
        "caption": pa.array([f"caption {i}: \u00e9t\u00e9 \U0001f600" * (i % 3) for i in range(n)]),
        "doc": pa.array([f"long {i}" for i in range(n)], type=pa.large_string()),
        "image": pa.array([bytes(rng.integers(0, 256, int(k), dtype=np.uint8))
                           for k in rng.integers(0, 64, n)], type=pa.binary()),
        "emb": pa.array([rng.random(3).astype(np.float32) for _ in range(n)],
                        type=pa.list_(pa.float32(), 3)),
    })


def check_rows(ds: CXLDataset, t: pa.Table, first: int = 0) -> None:
    rows = t.to_pylist()
    assert len(ds) == first + len(rows)
    for i, r in enumerate(rows):
        got = ds[first + i]
        for k, v in r.items():
            g = got[k]
            if isinstance(v, str):
                assert g == v, (i, k)
            elif isinstance(v, bytes):
                assert g.dtype == torch.uint8 and bytes(g.numpy()) == v, (i, k)
            elif isinstance(v, list):
                assert g.numpy().tolist() == pytest.approx(v, abs=0) if v else g.numel() == 0, (i, k)
            else:
                assert g.item() == v, (i, k)


def test_parquet_files_every_type(pool: CXLMemoryPool, tmp_path: Path) -> None:
    t = table(1500)
    (tmp_path / "pq").mkdir()
    pq.write_table(t.slice(0, 600), tmp_path / "pq" / "part-0.parquet", row_group_size=128)
    pq.write_table(t.slice(600), tmp_path / "pq" / "part-1.parquet", row_group_size=500,
                   compression="zstd")
    ds = CXLDataset.ingest(pool, "pq", tmp_path / "pq", format="parquet")
    check_rows(ds, t)
    fields = {f["name"]: f for f in ds.schema["fields"]}
    assert fields["input_ids"]["variable"] and fields["input_ids"]["dtype"] == "int32"
    assert fields["caption"]["dtype"] == "str" and fields["image"]["dtype"] == "uint8"
    assert fields["emb"]["shape"] == (3,) and not fields["label"]["variable"]
    assert names(pool) == ["pq"]  # the parts are gone
    assert clean(pool)
    # columns= reads only those fields
    sub = CXLDataset(pool, "pq", columns=["label", "caption"])
    assert set(sub[7]) == {"label", "caption"} and sub[7]["label"].item() == t["label"][7].as_py()


def test_parquet_columns_and_loader(pool: CXLMemoryPool, tmp_path: Path) -> None:
    t = table(400, seed=3)
    pq.write_table(t, tmp_path / "one.parquet")
    ds = CXLDataset.ingest(pool, "two", tmp_path / "one.parquet", columns=["input_ids", "label"])
    assert ds.fields == ["input_ids", "label"]
    loader = CXLDataLoader(ds, batch_size=8, seq_len=64, collate="pad", pad_value=-1)
    seen = 0
    for b in loader:
        assert set(b) == {"input_ids", "label", "lengths"}
        assert b["input_ids"].shape == (b["label"].shape[0], 64)
        for r in range(b["label"].shape[0]):
            i = seen + r
            want = t["input_ids"][i].as_py()[:64]
            n = int(b["lengths"][r])
            assert n == len(want) and b["input_ids"][r, :n].tolist() == want
            assert (b["input_ids"][r, n:] == -1).all()
            assert b["label"][r].item() == t["label"][i].as_py()
        seen += b["label"].shape[0]
    assert seen == 400


def test_arrow_in_memory_and_ipc(pool: CXLMemoryPool, tmp_path: Path) -> None:
    t = table(300, seed=5)
    check_rows(CXLDataset.ingest(pool, "mem", t), t)
    with pa.ipc.new_file(tmp_path / "f.arrow", t.schema) as w:
        for b in t.to_batches(max_chunksize=77):
            w.write_batch(b)
    with pa.ipc.new_stream(tmp_path / "s.arrow", t.schema) as w:
        w.write_table(t)
    check_rows(CXLDataset.ingest(pool, "ipcfile", tmp_path / "f.arrow"), t)
    check_rows(CXLDataset.ingest(pool, "ipcstream", tmp_path / "s.arrow", format="arrow"), t)


def test_hf_datasets(pool: CXLMemoryPool, tmp_path: Path) -> None:
    datasets = pytest.importorskip("datasets")
    rng = np.random.default_rng(1)
    d = datasets.Dataset.from_dict({
        "input_ids": [rng.integers(0, 30000, int(k)).tolist() for k in rng.integers(1, 50, 700)],
        "text": [f"row {i}" for i in range(700)],
        "label": rng.integers(0, 5, 700).tolist(),
    })
    d.save_to_disk(tmp_path / "saved", max_shard_size="20KB")
    assert len(list((tmp_path / "saved").glob("data-*.arrow"))) > 1
    d.to_parquet(tmp_path / "hf.parquet")
    want = d.data.table
    check_rows(CXLDataset.ingest(pool, "saved", tmp_path / "saved", format="arrow"), want)
    check_rows(CXLDataset.ingest(pool, "hfpq", tmp_path / "hf.parquet"), want)
    check_rows(CXLDataset.ingest(pool, "hfmem", d), want)
    # a Dataset with an indices mapping (select/shuffle) goes in its own order
    sh = d.shuffle(seed=3).select(range(100))
    check_rows(CXLDataset.ingest(pool, "hfshuf", sh), sh.with_format("arrow")[:])


def test_arrow_refused(pool: CXLMemoryPool, tmp_path: Path) -> None:
    t = table(200)
    pq.write_table(t, tmp_path / "good.parquet")
    raw = (tmp_path / "good.parquet").read_bytes()
    (tmp_path / "trunc.parquet").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(IngestError, match="trunc.parquet"):
        CXLDataset.ingest(pool, "x", tmp_path / "trunc.parquet")
    bad = pa.table({"ok": [1, 2], "when": pa.array([1, 2], type=pa.timestamp("s")),
                    "nested": [{"a": 1}, {"a": 2}]})
    pq.write_table(bad, tmp_path / "types.parquet")
    with pytest.raises(IngestError, match=r"column 'when' has type timestamp"):
        CXLDataset.ingest(pool, "x", tmp_path / "types.parquet")
    with pytest.raises(IngestError, match=r"column 'nested' has type struct"):
        CXLDataset.ingest(pool, "x", tmp_path / "types.parquet", columns=["ok", "nested"])
    nulls = pa.table({"v": pa.array([1, None, 3]), "s": ["a", "b", "c"]})
    pq.write_table(nulls, tmp_path / "nulls.parquet")
    with pytest.raises(IngestError, match=r"column 'v' is null at row 1"):
        CXLDataset.ingest(pool, "x", tmp_path / "nulls.parquet")
    with pytest.raises(IngestError, match="no column 'nope'"):
        CXLDataset.ingest(pool, "x", tmp_path / "good.parquet", columns=["nope"])
    # a directory whose second file is bad: the first file's part goes too
    (tmp_path / "mixed").mkdir()
    (tmp_path / "mixed" / "a.parquet").write_bytes(raw)
    (tmp_path / "mixed" / "b.parquet").write_bytes(raw[:100])
    with pytest.raises(IngestError, match="b.parquet"):
        CXLDataset.ingest(pool, "x", tmp_path / "mixed", format="parquet")
    assert names(pool) == []
    assert clean(pool)
    # the selected columns of the bad file are fine
    ds = CXLDataset.ingest(pool, "ok", tmp_path / "types.parquet", columns=["ok"])
    assert [ds[i].item() for i in range(2)] == [1, 2]  # one field: the value itself


def write_wds(path: Path, n: int, seed: int = 0) -> list[dict]:
    wds = pytest.importorskip("webdataset")
    rng = np.random.default_rng(seed)
    samples = [{"__key__": f"dir/s{i:05d}", "jpg": bytes(rng.integers(0, 256, int(k), dtype=np.uint8)),
                "txt": f"caption {i} \u00e9", "cls": int(rng.integers(0, 1000)),
                "seg.png": bytes([i % 256]) * (i % 5)}
               for i, k in enumerate(rng.integers(0, 3000, n))]
    with wds.TarWriter(str(path)) as sink:
        for s in samples:
            sink.write(s)
    return samples


def test_webdataset(pool: CXLMemoryPool, tmp_path: Path) -> None:
    (tmp_path / "shards").mkdir()
    a = write_wds(tmp_path / "shards" / "train-000.tar", 150, seed=1)
    b = write_wds(tmp_path / "shards" / "train-001.tar", 90, seed=2)
    ds = CXLDataset.ingest(pool, "wds", tmp_path / "shards", format="webdataset")
    assert ds.fields == ["__key__", "cls", "jpg", "seg.png", "txt"]
    for i, s in enumerate(a + b):
        r = ds[i]
        assert r["__key__"] == s["__key__"] and r["txt"] == s["txt"] and r["cls"].item() == s["cls"]
        assert bytes(r["jpg"].numpy()) == s["jpg"] and bytes(r["seg.png"].numpy()) == s["seg.png"]
    assert len(ds) == 240
    # a tar read straight from a URL-like path with columns
    ds2 = CXLDataset.ingest(pool, "wds2", tmp_path / "shards" / "train-001.tar",
                            columns=["jpg", "cls"])
    assert ds2.fields == ["__key__", "jpg", "cls"] and bytes(ds2[5]["jpg"].numpy()) == b[5]["jpg"]


def test_webdataset_refused(pool: CXLMemoryPool, tmp_path: Path) -> None:
    write_wds(tmp_path / "ok.tar", 20)
    # a sample missing a member
    with tarfile.open(tmp_path / "ok.tar") as src, tarfile.open(tmp_path / "miss.tar", "w") as dst:
        for m in src:
            if m.name != "dir/s00007.txt":
                dst.addfile(m, src.extractfile(m))
    with pytest.raises(IngestError, match=r"miss.tar: sample 'dir/s00007'.* has no member \.txt"):
        CXLDataset.ingest(pool, "x", tmp_path / "miss.tar")
    raw = (tmp_path / "ok.tar").read_bytes()
    (tmp_path / "cut.tar").write_bytes(raw[: len(raw) // 2 + 100])
    with pytest.raises(IngestError, match="cut.tar: truncated or damaged tar"):
        CXLDataset.ingest(pool, "x", tmp_path / "cut.tar")
    # a caption that is not UTF-8, a class that is not a number
    for member, data, msg in [("dir/s00003.txt", b"\xff\xfe", "s00003.txt is not valid UTF-8"),
                              ("dir/s00004.cls", b"cat", "s00004.cls is not an integer")]:
        with tarfile.open(tmp_path / "ok.tar") as src, tarfile.open(tmp_path / "bad.tar", "w") as dst:
            for m in src:
                if m.name == member:
                    m.size = len(data)
                    dst.addfile(m, io.BytesIO(data))
                else:
                    dst.addfile(m, src.extractfile(m))
        with pytest.raises(IngestError, match=msg):
            CXLDataset.ingest(pool, "x", tmp_path / "bad.tar")
    assert names(pool) == []


def write_jsonl(path: Path, n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    words = ["the", "cxl", "pool", "h\u00e9llo", "\u4e16\u754c", "tokens", "\U0001f600", "a"]
    texts = [" ".join(rng.choice(words, int(k))) for k in rng.integers(0, 60, n)]
    with open(path, "w", encoding="utf-8") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": i, "text": t}) + "\n")
            if i % 17 == 0:
                f.write("\n")  # blank lines are skipped
    return texts


def test_jsonl_deep_nesting_and_a_corrupt_gz_name_file_and_line(pool: CXLMemoryPool,
                                                                 tmp_path: Path) -> None:
    """issue 34: a line nested 100,000 levels deep and a .jsonl.gz cut in
    the middle are IngestErrors naming the file and the line (they were a
    RecursionError and an EOFError traceback), also in worker processes, and
    the CLI prints one line for them, not a traceback."""
    import gzip
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"text": "ok"}\n{"text": "ok"}\n{"text": ' + "[" * 100_000
                    + "]" * 100_000 + "}\n")
    for workers in (1, 2):
        with pytest.raises(IngestError, match=r"deep.jsonl:3: bad JSON: nested more deeply "
                                              r"than the parser allows"):
            CXLDataset.ingest(pool, "x", deep, tokenizer="bytes", workers=workers)
    data = gzip.compress(b"".join(b'{"text": "line %d"}\n' % i for i in range(5000)))
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(data[:len(data) // 2])
    with pytest.raises(IngestError, match=r"cut.jsonl.gz:\d+: the compressed stream is corrupt "
                                          r"or cut short \(EOFError"):
        CXLDataset.ingest(pool, "x", cut, tokenizer="bytes")
    exe = Path(sys.executable).parent / "cxlpool"
    if exe.exists():
        for src, msg in ((deep, "deep.jsonl:3: bad JSON"), (cut, "the compressed stream")):
            r = subprocess.run([str(exe), "ingest", pool.spec, "x", str(src), "--tokenizer",
                                "bytes", "--no-progress"], capture_output=True, text=True)
            assert r.returncode == 1 and msg in r.stderr, r.stderr
            assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert names(pool) == []


def test_jsonl_byte_tokenizer(pool: CXLMemoryPool, tmp_path: Path) -> None:
    texts = write_jsonl(tmp_path / "a.jsonl", 500)
    ds = CXLDataset.ingest(pool, "bytes", tmp_path / "a.jsonl", tokenizer="bytes", workers=1)
    assert ds.fields == ["tokens"] and ds.schema["fields"][0]["dtype"] == "uint16"
    for i, t in enumerate(texts):
        assert ds[i].tolist() == list(t.encode("utf-8"))
    tok = importers.byte_tokenizer()
    assert tok.decode(ds[3].tolist()) == texts[3]


def test_jsonl_bpe_multiprocess(pool: CXLMemoryPool, tmp_path: Path) -> None:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    texts = write_jsonl(tmp_path / "a.jsonl", 1200, seed=4)
    texts += write_jsonl(tmp_path / "b.jsonl", 300, seed=5)
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(texts, trainers.BpeTrainer(vocab_size=300, special_tokens=["[UNK]"]))
    tok.save(str(tmp_path / "tokenizer.json"))
    one = CXLDataset.ingest(pool, "w1", tmp_path / "*.jsonl", format="jsonl",
                            tokenizer=str(tmp_path / "tokenizer.json"), workers=1,
                            batch_bytes=4096)
    two = CXLDataset.ingest(pool, "w2", tmp_path / "*.jsonl", format="jsonl",
                            tokenizer=str(tmp_path / "tokenizer.json"), workers=2,
                            batch_bytes=4096, eod=0)
    assert len(one) == len(two) == 1500
    for i, t in enumerate(texts):
        ids = tok.encode(t, add_special_tokens=False).ids
        assert one[i].tolist() == ids and two[i].tolist() == ids + [0]
    # packed rows carry the document (= line) boundaries when asked
    b = next(iter(CXLDataLoader(one, batch_size=2, seq_len=128, return_segments=True)))
    assert {"tokens", "lengths", "seg_row", "seg_id"} <= set(b)


def test_jsonl_refused(pool: CXLMemoryPool, tmp_path: Path) -> None:
    write_jsonl(tmp_path / "ok.jsonl", 30)
    lines = (tmp_path / "ok.jsonl").read_bytes().split(b"\n")
    cases = [(b'{"text": "caf\xe9"}', r"bad.jsonl:4: not valid UTF-8"),
             (b'{"text": "open', r"bad.jsonl:4: bad JSON"),
             (b'{"body": "x"}', r"bad.jsonl:4: no field 'text'"),
             (b'{"text": 5}', r"bad.jsonl:4: field 'text' is int")]
    for k, (line, msg) in enumerate(cases):
        (tmp_path / "bad.jsonl").write_bytes(b"\n".join(lines[:3] + [line] + lines[3:]))
        for workers in (1, 2) if k == 0 else (1,):  # worker processes report alike
            with pytest.raises(IngestError, match=msg):
                CXLDataset.ingest(pool, "x", tmp_path / "bad.jsonl", tokenizer="bytes",
                                  workers=workers)
    with pytest.raises(IngestError, match="tokenizer"):
        CXLDataset.ingest(pool, "x", tmp_path / "ok.jsonl")
    with pytest.raises(IngestError, match="no such file"):
        CXLDataset.ingest(pool, "x", tmp_path / "ok.jsonl", tokenizer=str(tmp_path / "none.json"))
    assert names(pool) == []


RESUME = """
import sys
from cxl_dataloader import CXLMemoryPool
pool = CXLMemoryPool(sys.argv[1])
pool.ingest(sys.argv[2], sys.argv[3], format=sys.argv[4], progress=False)
"""


def test_resume_after_kill(pool: CXLMemoryPool, tmp_path: Path) -> None:
    t = table(800, seed=9)
    (tmp_path / "d").mkdir()
    for k in range(4):
        pq.write_table(t.slice(200 * k, 200), tmp_path / "d" / f"f{k}.parquet")
    env = dict(os.environ, CXLP_FAULT="ingest-part-2")
    r = subprocess.run([sys.executable, "-c", RESUME, pool.spec, "resumed", str(tmp_path / "d"),
                        "parquet"], env=env)
    assert r.returncode == -9
    left = names(pool)
    assert "resumed" not in left and len(left) == 2 and all(n.startswith("~") for n in left)
    assert clean(pool)
    # a finished file that changed since is done again: its old part goes
    t2 = table(800, seed=10)
    pq.write_table(t2.slice(0, 200), tmp_path / "d" / "f0.parquet")
    os.utime(tmp_path / "d" / "f0.parquet", (1, 1))  # another modification time
    want = pa.concat_tables([t2.slice(0, 200), t.slice(200)])
    stats = importers.ingest(pool._pool, "resumed", str(tmp_path / "d"), "parquet", progress=False)
    assert stats["skipped"] == 1 and stats["files"] == 4 and stats["records"] == 800
    assert names(pool) == ["resumed"]
    check_rows(CXLDataset(pool, "resumed"), want)


def test_cli_runs_the_importers(pool: CXLMemoryPool, tmp_path: Path) -> None:
    """`cxlpool ingest --format parquet|jsonl` hands over to this package
    (the python3 installed beside the cxlpool binary)."""
    exe = Path(sys.executable).parent / "cxlpool"
    if not exe.exists():
        pytest.skip("no cxlpool installed beside this python (pip install . puts it there)")
    t = table(50)
    pq.write_table(t, tmp_path / "t.parquet")
    r = subprocess.run([str(exe), "ingest", pool.spec, "cli", str(tmp_path / "t.parquet"),
                        "--columns", "label,caption", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["records"] == 50
    ds = CXLDataset(pool, "cli")
    assert ds.fields == ["label", "caption"] and ds[9]["caption"] == t["caption"][9].as_py()
    # cat: str fields as strings; raw: each field's bytes in field order
    r = subprocess.run([str(exe), "cat", pool.spec, "cli", "9", "--format", "json"],
                       capture_output=True, text=True)
    fields = json.loads(r.stdout)["fields"]
    assert fields == [{"name": "label", "dtype": "int64", "values": t["label"][9].as_py()},
                      {"name": "caption", "dtype": "str", "values": t["caption"][9].as_py()}]
    r = subprocess.run([str(exe), "cat", pool.spec, "cli", "9", "--format", "raw"],
                       capture_output=True)
    assert r.stdout == np.int64(t["label"][9].as_py()).tobytes() + \
        t["caption"][9].as_py().encode()
    r = subprocess.run([str(exe), "cat", pool.spec, "cli", "9", "--format", "hex"],
                       capture_output=True, text=True)
    assert r.stdout.startswith("label:\n00000000  ") and "\ncaption:\n" in r.stdout
    texts = write_jsonl(tmp_path / "x.jsonl", 20)
    r = subprocess.run([str(exe), "ingest", pool.spec, "clitok", str(tmp_path / "x.jsonl"),
                        "--tokenizer", "bytes", "--workers", "1"], capture_output=True, text=True)
    assert r.returncode == 0 and "ingested clitok: 20 records" in r.stdout, r.stderr
    assert CXLDataset(pool, "clitok")[4].tolist() == list(texts[4].encode())
    r = subprocess.run([str(exe), "ingest", pool.spec, "bad", str(tmp_path / "x.jsonl"),
                        "--format", "jsonl"], capture_output=True, text=True)
    assert r.returncode == 1 and "tokenizer" in r.stderr


def test_columns_land_on_2mib_pages(pool: CXLMemoryPool, tmp_path: Path) -> None:
    """Every column of a dataset the Python importers write lands on 2 MiB
    pages, as the C importers' records do (the column written straight into
    the pool and the ones copied in at seal alike); --no-hugepages (CLI) and
    hugepages=False keep them on 4 KiB pages."""
    rng = np.random.default_rng(4)
    n = 6000
    toks = [rng.integers(0, 60000, size=int(k), dtype=np.int32)
            for k in rng.integers(256, 1024, n)]
    t = pa.table({"input_ids": pa.array(toks, type=pa.list_(pa.int32())),
                  "emb": pa.array(list(rng.random((n, 256), dtype=np.float32)),
                                  type=pa.list_(pa.float32(), 256))})
    pq.write_table(t, tmp_path / "c.parquet")  # ~14.6 MiB of tokens, 5.9 MiB of emb
    exe = Path(sys.executable).parent / "cxlpool"
    if exe.exists():
        r = subprocess.run([str(exe), "ingest", pool.spec, "small", str(tmp_path / "c.parquet"),
                            "--no-hugepages", "--no-progress"], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        small = CXLDataset(pool, "small")
    else:
        small = CXLDataset.ingest(pool, "small", tmp_path / "c.parquet", hugepages=False)
    assert small.pages()["huge_bytes"] == 0
    assert CXLDataset.ingest(pool, "small2", tmp_path / "c.parquet",
                             hugepages=False).pages()["huge_bytes"] == 0
    ds = CXLDataset.ingest(pool, "huge", tmp_path / "c.parquet")
    pg = ds.pages()
    if pg["huge_bytes"] == 0:
        pytest.skip("this kernel gave shm no 2 MiB pages")
    # all but each shard's partial 2 MiB ends: both columns
    assert pg["huge_bytes"] >= pg["bytes"] - ds.info()["shards"] * (4 << 20)
    assert pg["bytes"] >= 20 << 20
    for i in (0, 2999, n - 1):
        assert ds[i]["input_ids"].tolist() == toks[i].tolist()
        assert torch.equal(ds[i]["emb"], torch.tensor(t["emb"][i].as_py()))


RANK = """
import json, sys
from cxl_dataloader import CXLDataset
ds = CXLDataset(data_source=sys.argv[2], cxl_pool=sys.argv[1], format="parquet")
print(json.dumps({"name": ds.name, "n": len(ds), "did": not ds.ingested.get("existed"),
                  "x": ds[123]["label"].item()}))
"""


def test_data_source_once_per_pool(pool: CXLMemoryPool, tmp_path: Path) -> None:
    """Four processes open the same data_source at once: one ingests, the
    others wait on the lock and attach; all see the same records."""
    t = table(3000, seed=8)
    (tmp_path / "src").mkdir()
    for k in range(3):
        pq.write_table(t.slice(1000 * k, 1000), tmp_path / "src" / f"{k}.parquet")
    procs = [subprocess.Popen([sys.executable, "-c", RANK, pool.spec, str(tmp_path / "src")],
                              stdout=subprocess.PIPE, text=True) for _ in range(4)]
    outs = [json.loads(p.communicate()[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert sum(o["did"] for o in outs) == 1
    assert {o["name"] for o in outs} == {CXLDataset(pool, outs[0]["name"]).name}
    assert all(o["n"] == 3000 and o["x"] == t["label"][123].as_py() for o in outs)
    assert names(pool) == [outs[0]["name"]] and outs[0]["name"].startswith("src.")
    again = CXLDataset(data_source=tmp_path / "src", cxl_pool=pool, format="parquet")
    assert again.ingested == {"existed": True} and len(again) == 3000
    with pytest.raises(TypeError, match="pool"):
        CXLDataset(data_source=tmp_path / "src")


def test_http_source_and_progress(pool: CXLMemoryPool, tmp_path: Path,
                                  capsys: pytest.CaptureFixture) -> None:
    """An http:// URL (a local HTTP server) goes through fsspec like s3://;
    progress=True draws the tqdm bar on stderr, up to the sources' bytes."""
    import http.server
    import threading
    t = table(120, seed=12)
    pq.write_table(t, tmp_path / "web.parquet")
    body = (tmp_path / "web.parquet").read_bytes()

    class Ranges(http.server.BaseHTTPRequestHandler):
        """Serves web.parquet with Range requests, as object stores and
        CDNs do (Parquet is read footer first)."""

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()

        def do_GET(self) -> None:
            a, b = 0, len(body) - 1
            m = re.match(r"bytes=(\d*)-(\d*)", self.headers.get("Range", ""))
            if m:
                a, b = int(m.group(1) or 0), min(int(m.group(2) or b), b)
            self.send_response(206 if m else 200)
            self.send_header("Content-Length", str(b - a + 1))
            if m:
                self.send_header("Content-Range", f"bytes {a}-{b}/{len(body)}")
            self.end_headers()
            self.wfile.write(body[a:b + 1])

        def log_message(self, *a: object) -> None:
            pass
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Ranges)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    try:
        url = f"http://127.0.0.1:{srv.server_address[1]}/web.parquet"
        ds = CXLDataset.ingest(pool, "web", url, progress=True)
    finally:
        srv.shutdown()
    check_rows(ds, t)
    err = capsys.readouterr().err
    assert "ingest web" in err and "100%" in err


@pytest.mark.parametrize("fname,fmt", [("f.jsonl", "jsonl"), ("f.parquet", "parquet"),
                                       ("f.tar", "webdataset"), ("f.arrow", "auto"),
                                       ("f.jsonl", "auto")])
def test_a_fifo_source_is_refused_at_once(pool: CXLMemoryPool, tmp_path: Path, fname,
                                          fmt) -> None:
    """issue 34: a FIFO as the source of a jsonl, parquet, webdataset or
    auto-detected ingest is refused at once, naming it (opening it waited for
    a writer for ever), from Python and from the CLI, as raw and npy are."""
    fifo = tmp_path / fname
    os.mkfifo(fifo)
    code = (f"from cxl_dataloader import CXLMemoryPool\n"
            f"p = CXLMemoryPool({pool.spec!r})\n"
            f"p.ingest('f', {str(fifo)!r}, format={fmt!r}, tokenizer='bytes')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and f"{fifo}: not a regular file (a FIFO)" in r.stderr, r.stderr
    exe = Path(sys.executable).parent / "cxlpool"
    if exe.exists():
        r = subprocess.run([str(exe), "ingest", pool.spec, "f", str(fifo), "--format", fmt,
                            "--tokenizer", "bytes", "--no-progress"],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 1 and f"{fifo}: not a regular file (a FIFO)" in r.stderr, r.stderr
    assert names(pool) == []


HOLD = """
import sys, time
from cxl_dataloader import CXLMemoryPool
from cxl_dataloader.ingest import ingest_lock
pool = CXLMemoryPool(sys.argv[1])
with ingest_lock(pool._pool, sys.argv[2]):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
print("released", flush=True)
"""


def test_ingest_lock_leaves_nothing_behind(pool: CXLMemoryPool, tmp_path: Path) -> None:
    """issue 34: the ingest lock is a lock on a byte of the pool's own
    backing object, not a file: a holder excludes the next ingest of the
    same name (not of another), a killed holder lets it pass on, and no
    cxlp.ingest-lock.* file is made, so none stays after the pool (they
    used to pile up in /dev/shm when their holder was killed)."""
    import hashlib
    import signal
    import time
    path = Path(pool.stat()["path"])
    old = hashlib.sha1(f"{pool.spec}\0x".encode()).hexdigest()[:16]  # the old scheme's file
    before = set(os.listdir(path.parent))

    def hold(name: str, secs: float) -> subprocess.Popen:
        p = subprocess.Popen([sys.executable, "-c", HOLD, pool.spec, name, str(secs)],
                             stdout=subprocess.PIPE, text=True)
        return p

    a = hold("x", 600)
    assert a.stdout.readline() == "held\n"
    other = hold("y", 0)      # another dataset name: not blocked
    assert other.communicate(timeout=60)[0] == "held\nreleased\n"
    b = hold("x", 0)          # the same name: waits for a
    time.sleep(2)
    assert b.poll() is None
    a.send_signal(signal.SIGKILL)
    a.wait()
    assert b.communicate(timeout=60)[0] == "held\nreleased\n"
    made = {f for f in set(os.listdir(path.parent)) - before if "ingest-lock" in f}
    assert not made and not (path.parent / f"cxlp.ingest-lock.{old}").exists()


def test_empty_input_one_rule_for_every_format(pool: CXLMemoryPool, tmp_path: Path) -> None:
    """issue 34: a source of no records is refused in every format ("no
    records", nothing left in the pool) unless allow_empty=True, which makes
    an empty dataset; an empty file beside others adds no records. (Empty
    Parquet and JSONL used to make 0-record datasets, an empty tar was
    refused, and the C importers refused without allow_empty.)"""
    none = table(10).slice(0, 0)  # every column type, no rows
    pq.write_table(none, tmp_path / "e.parquet")
    (tmp_path / "e.jsonl").write_text("\n\n")
    with tarfile.open(tmp_path / "e.tar", "w"):
        pass
    np.save(tmp_path / "e.npy", np.zeros((0, 4), dtype=np.float32))
    empty = {"parquet": tmp_path / "e.parquet", "jsonl": tmp_path / "e.jsonl",
             "npy": tmp_path / "e.npy", "arrow": none}
    def kw(fmt: str) -> dict:
        return {"tokenizer": "bytes"} if fmt == "jsonl" else {}
    for fmt, src in empty.items():
        with pytest.raises((IngestError, CXLError), match="no records"):
            pool.ingest(f"e_{fmt}", src, format=fmt, **kw(fmt))
    assert names(pool) == []
    for fmt, src in empty.items():
        pool.ingest(f"e_{fmt}", src, format=fmt, allow_empty=True, **kw(fmt))
        assert len(CXLDataset(pool, f"e_{fmt}")) == 0
    # a tar of no samples says no fields: not even an empty dataset
    for allow in (False, True):
        with pytest.raises(IngestError, match="no samples in any tar"):
            pool.ingest("e_tar", tmp_path / "e.tar", format="webdataset", allow_empty=allow)
    # an empty file among others adds nothing
    (tmp_path / "mix").mkdir()
    with tarfile.open(tmp_path / "mix" / "a.tar", "w"):
        pass
    s = write_wds(tmp_path / "mix" / "b.tar", 20)
    ds = CXLDataset.ingest(pool, "mix", tmp_path / "mix", format="webdataset")
    assert len(ds) == 20 and ds[3]["txt"] == s[3]["txt"]
    exe = Path(sys.executable).parent / "cxlpool"
    if exe.exists():  # --allow-empty reaches the Python importers
        for extra, code in (([], 1), (["--allow-empty"], 0)):
            r = subprocess.run([str(exe), "ingest", pool.spec, "cli_e", str(empty["parquet"]),
                                "--no-progress", *extra], capture_output=True, text=True)
            assert r.returncode == code, r.stderr
            assert code == 0 or "e.parquet: no records (the file is empty); allow_empty=True " \
                "(--allow-empty) makes an empty dataset" in r.stderr, r.stderr
    assert clean(pool)
