#!/usr/bin/env python3
"""The importers and multi-field batches against their references, each
pair in one run, rounds interleaved (the order alternates), medians.

  parquet  Parquet files -> pool (cxl_dataloader.ingest: pyarrow reads a row
           group at a time, the C writer copies) against
           pyarrow.parquet.read_table of the same files (all cores, into
           memory, nothing written). Files in the page cache. Throughput in
           Arrow bytes per second (the tables' nbytes).
  jsonl    JSONL -> pool (json + a trained BPE tokenizer in --procs
           processes, tokens written to the pool) against the tokenizer's
           own batch throughput with the same number of processes: a
           process pool of --procs running Tokenizer.encode_batch over the
           same texts, already in memory (no file, no JSON). Both pools are
           started inside the timed region (fork), as an ingest starts its
           own. Throughput in text bytes per second.
  fields   CXLDataLoader over a dataset of tokens alone against the same
           tokens with an int64 label beside them (two fields: the labels
           collated with them), packed (seq_len 2048) and padded, shuffled,
           batch 32, 2 threads. Records per second.

Each round records work per wall-clock second and work per CPU second (user
+ system of this process and of the worker processes it reaped): on a
machine shared with other jobs, the second moves far less. Both ratios are
printed and kept in the JSON.

    python3 bench/bench_formats.py [--only parquet,jsonl,fields] [--rounds 5]
                                   [--mib 256] [--text-mib 24] [--procs 2] [--json PATH]
"""
from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if list((ROOT / "python" / "cxl_dataloader").glob("_core*.so")):
    sys.path.insert(0, str(ROOT / "python"))  # an in-tree build; else the installed package

from cxl_dataloader import CXLDataLoader, CXLDataset, CXLMemoryPool, _core  # noqa: E402
from cxl_dataloader import ingest as importers  # noqa: E402


def cpu_seconds() -> float:
    """CPU time of this process and its reaped children (the tokenizer
    pools are joined inside each timed call), user + system."""
    import resource
    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime


def interleave(paths: dict, rounds: int, label: str) -> list[dict]:
    """Each path returns (work done, wall seconds); the round records work
    per wall second and work per CPU second (cpu_seconds around the call):
    on a machine shared by other jobs the second is the steadier figure."""
    out = []
    names = list(paths)
    for r in range(rounds):
        res = {}
        for k in names[r % len(names):] + names[:r % len(names)]:
            c0 = cpu_seconds()
            work, wall = paths[k]()
            cpu = cpu_seconds() - c0
            res[k] = work / wall
            res[k + "_per_cpu_s"] = work / cpu
        out.append(res)
        print(f"{label} round {r}: " + ", ".join(f"{k} {v:.4g}" for k, v in res.items()),
              file=sys.stderr)
    return out


def summarize(rounds: list[dict], ours: str, ref: str) -> dict:
    out = {}
    for suffix in ("", "_per_cpu_s"):
        a, b = ours + suffix, ref + suffix
        ratios = [r[a] / r[b] for r in rounds]
        out.update({a: statistics.median(r[a] for r in rounds),
                    b: statistics.median(r[b] for r in rounds),
                    "ratio" + suffix: statistics.median(ratios),
                    "ratio_min" + suffix: min(ratios), "ratio_max" + suffix: max(ratios)})
    return out


# ---------------------------------------------------------------- parquet

def bench_parquet(pool: CXLMemoryPool, d: Path, mib: int, rounds: int) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq
    rng = np.random.default_rng(3)
    files = 8
    per = mib * (1 << 20) // files
    src = d / "pq"
    src.mkdir()
    nbytes = 0
    for k in range(files):
        rows, size = [], 0
        while size < per:
            n = int(rng.integers(64, 2048))
            rows.append(rng.integers(0, 50000, n, dtype=np.int32))
            size += 4 * n + 8
        t = pa.table({"input_ids": pa.array(rows, type=pa.list_(pa.int32())),
                      "label": pa.array(rng.integers(0, 1000, len(rows)))})
        pq.write_table(t, src / f"part-{k:03d}.parquet", row_group_size=4096)
    paths = sorted(src.iterdir())
    for p in paths:  # page cache; the bytes as read_table returns them
        p.read_bytes()
        nbytes += pq.read_table(p).nbytes
    n = [0]

    def ours() -> float:
        name = f"pq{n[0]}"
        n[0] += 1
        t0 = time.perf_counter()
        importers.ingest(pool._pool, name, str(src), "parquet", progress=False)
        el = time.perf_counter() - t0
        pool.remove(name)
        return nbytes / 1e9, el

    def ref() -> float:
        t0 = time.perf_counter()
        tabs = [pq.read_table(p) for p in paths]
        el = time.perf_counter() - t0
        assert sum(t.nbytes for t in tabs) == nbytes
        return nbytes / 1e9, el

    ours()  # warm-up: imports, the pool's pages
    r = interleave({"ingest_gb_s": ours, "read_table_gb_s": ref}, rounds, "parquet")
    s = summarize(r, "ingest_gb_s", "read_table_gb_s")
    s.update(files=files, arrow_bytes=nbytes, parquet_bytes=sum(p.stat().st_size for p in paths))
    return {"summary": s, "rounds": r}


# ------------------------------------------------------------------ jsonl

WORDS = None


def corpus(rng: np.random.Generator, mib: int) -> list[str]:
    """English-like text: words drawn Zipf-like from a vocabulary of made-up
    words, with punctuation, in documents of 20..2000 words."""
    letters = np.array(list("etaoinshrdlcumwfgypbvkjxqz"))
    p = 1 / np.arange(1, 27)
    vocab = ["".join(rng.choice(letters, int(k), p=p / p.sum())) for k in rng.integers(1, 10, 20000)]
    zipf = 1 / np.arange(1, len(vocab) + 1)
    zipf /= zipf.sum()
    out, size = [], 0
    while size < mib << 20:
        words = rng.choice(len(vocab), int(rng.integers(20, 2000)), p=zipf)
        t = " ".join(vocab[w] + ("." if w % 17 == 0 else "") for w in words)
        out.append(t)
        size += len(t)
    return out


_tok = None


def _init(js: str) -> None:
    global _tok
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from tokenizers import Tokenizer
    _tok = Tokenizer.from_str(js)


def _encode(texts: list[str]) -> int:
    return sum(len(e.ids) for e in _tok.encode_batch(texts, add_special_tokens=False))


def bench_jsonl(pool: CXLMemoryPool, d: Path, mib: int, procs: int, rounds: int) -> dict:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    rng = np.random.default_rng(5)
    texts = corpus(rng, mib)
    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator(texts[: max(1, len(texts) // 8)],
                            trainers.BpeTrainer(vocab_size=8192, special_tokens=["[UNK]"],
                                                initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(d / "tokenizer.json"))
    js = tok.to_str()
    path = d / "corpus.jsonl"
    with open(path, "w") as f:
        for i, t in enumerate(texts):
            f.write(json.dumps({"id": i, "text": t}) + "\n")
    nbytes = sum(len(t.encode()) for t in texts)
    path.read_bytes()
    # the same chunking the ingest uses: about BATCH_BYTES of text per task
    chunks, cur, size = [], [], 0
    for t in texts:
        cur.append(t)
        size += len(t)
        if size >= importers.BATCH_BYTES // 8:
            chunks.append(cur)
            cur, size = [], 0
    if cur:
        chunks.append(cur)
    n = [0]

    def ours() -> float:
        name = f"tok{n[0]}"
        n[0] += 1
        t0 = time.perf_counter()
        importers.ingest(pool._pool, name, str(path), "jsonl", tokenizer=str(d / "tokenizer.json"),
                         workers=procs, batch_bytes=importers.BATCH_BYTES // 8, progress=False)
        el = time.perf_counter() - t0
        pool.remove(name)
        return nbytes / 1e6, el

    def ref() -> float:
        t0 = time.perf_counter()
        with mp.get_context("fork").Pool(procs, _init, (js,)) as p:
            ntok = sum(p.imap(_encode, chunks))
        el = time.perf_counter() - t0
        assert ntok > 0
        return nbytes / 1e6, el

    r = interleave({"ingest_mb_s": ours, "encode_batch_mb_s": ref}, rounds, "jsonl")
    s = summarize(r, "ingest_mb_s", "encode_batch_mb_s")
    s.update(procs=procs, documents=len(texts), text_bytes=nbytes, vocab=8192)
    return {"summary": s, "rounds": r}


# ----------------------------------------------------------------- fields

def bench_fields(pool: CXLMemoryPool, mib: int, rounds: int) -> dict:
    rng = np.random.default_rng(7)
    lens, total = [], 0
    while total < mib << 20:
        k = int(rng.integers(128, 2048))
        lens.append(k)
        total += 4 * k
    n = len(lens)
    toks = rng.integers(0, 50000, sum(lens), dtype=np.int32)
    offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    labels = rng.integers(0, 1000, n).astype(np.int64)
    one = _core.Writer(pool._pool, "tokens", [("tokens", "int32", (None,))])
    two = _core.Writer(pool._pool, "tokens_labels", [("tokens", "int32", (None,)),
                                                      ("label", "int64", ())])
    step = 4096
    for a in range(0, n, step):
        b = min(n, a + step)
        o = offs[a:b + 1] - offs[a]
        vals = toks[offs[a]:offs[b]]
        one.append_columns(b - a, [(vals, o)])
        two.append_columns(b - a, [(vals, o), labels[a:b]])
    one.commit()
    two.commit()
    d1, d2 = CXLDataset(pool, "tokens"), CXLDataset(pool, "tokens_labels")
    out = {}
    for collate in ("pack", "pad"):
        def run(ds: CXLDataset) -> tuple[float, float]:
            dl = CXLDataLoader(ds, batch_size=32, shuffle=True, seq_len=2048, collate=collate,
                               num_workers=2)
            seen = 0
            t0 = time.perf_counter()
            for b in dl:
                seen += b["tokens"].shape[0]
            el = time.perf_counter() - t0
            return seen, el

        run(d1), run(d2)  # warm-up
        r = interleave({"two_fields_rows_s": lambda: run(d2), "one_field_rows_s": lambda: run(d1)},
                       rounds, f"fields/{collate}")
        s = summarize(r, "two_fields_rows_s", "one_field_rows_s")
        s.update(records=n, token_bytes=int(toks.nbytes))
        out[collate] = {"summary": s, "rounds": r}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="parquet,jsonl,fields")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--mib", type=int, default=256, help="Parquet data and token data (MiB)")
    ap.add_argument("--text-mib", type=int, default=24, help="JSONL text (MiB)")
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--dir", default="/var/tmp/formats")
    ap.add_argument("--json", default=str(ROOT / "build" / "bench_formats.json"))
    a = ap.parse_args()
    only = set(a.only.split(","))
    d = Path(a.dir) / f"bench-{os.getpid()}"
    d.mkdir(parents=True)
    name = f"bench-formats-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    pool = CXLMemoryPool(name, create=True, size=(3 * a.mib + 512) << 20)
    doc: dict = {"loadavg_start": os.getloadavg(), "cpus": os.cpu_count(), "rounds": a.rounds}
    try:
        if "parquet" in only:
            doc["parquet"] = bench_parquet(pool, d, a.mib, a.rounds)
        if "jsonl" in only:
            doc["jsonl"] = bench_jsonl(pool, d, a.text_mib, a.procs, a.rounds)
        if "fields" in only:
            doc["fields"] = bench_fields(pool, a.mib, a.rounds)
    finally:
        pool.close()
        CXLMemoryPool.destroy(name)
        shutil.rmtree(d, ignore_errors=True)
    doc["loadavg_end"] = os.getloadavg()
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(doc, indent=1))
    la = f"load average {doc['loadavg_start'][0]:.1f} -> {doc['loadavg_end'][0]:.1f} on {os.cpu_count()} CPUs"
    print(f"bench_formats: median of {a.rounds} interleaved rounds ({la})")
    def fmt(s: dict, a_: str, b_: str) -> str:
        c = "_per_cpu_s"
        return (f"{s[a_]:.3g} vs {s[b_]:.3g}: {100 * s['ratio']:.1f}% (rounds "
                f"{100 * s['ratio_min']:.1f}..{100 * s['ratio_max']:.1f}%); per CPU second "
                f"{s[a_ + c]:.3g} vs {s[b_ + c]:.3g}: {100 * s['ratio' + c]:.1f}% (rounds "
                f"{100 * s['ratio_min' + c]:.1f}..{100 * s['ratio_max' + c]:.1f}%)")
    if "parquet" in doc:
        print("parquet -> pool vs read_table (GB/s):", fmt(doc["parquet"]["summary"],
                                                           "ingest_gb_s", "read_table_gb_s"))
    if "jsonl" in doc:
        print(f"jsonl + tokenizer -> pool vs encode_batch, {a.procs} processes (MB/s):",
              fmt(doc["jsonl"]["summary"], "ingest_mb_s", "encode_batch_mb_s"))
    if "fields" in doc:
        for c, v in doc["fields"].items():
            print(f"fast path {c}, tokens+label vs tokens (rows/s):",
                  fmt(v["summary"], "two_fields_rows_s", "one_field_rows_s"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
