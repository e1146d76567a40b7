"""Docs that cannot drift (issue 34).

- Every ```python block of README.md and docs/*.md runs: PROGRAMS says how
  (the files it reads, written here; the values a machine decides, each
  substitution asserted to apply; the distributed ones in a one-rank gloo
  group; where CUDA is missing, the CUDA ones must raise the CXLError that
  says so). A block that no program runs fails, and so does a program
  whose block is gone. Pool names become names of this test's own
  (/dev/shm is shared).
- The README's quick start runs (its last four lines: scripts/wheel-check.sh
  runs all five with the wheel).
- The README's tour output is what a fresh run prints
  (scripts/readme_tour.py), but for timings, the machine's sizes, uuids,
  host ids and pids.
- docs/benchmarks.md is one page under 400 lines whose every table names
  its command, its machine and its date, and every JSON and PNG file of
  docs/benchmarks/ is named by a page there.
Each check is also run on a planted drift, and must fail (the test of the
test).
"""
from __future__ import annotations

import importlib.util
import inspect
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cxl_dataloader import CXLDataLoader, CXLError, CXLMemoryPool

from conftest import write_megatron

ROOT = Path(__file__).resolve().parents[2]
DOCS = ["README.md"] + sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))
POOL = "@POOL@"  # what a program's pool names become: the test's own name
TMP = "@TMP@"    # the program's scratch directory


def doc_texts() -> dict[str, str]:
    return {d: (ROOT / d).read_text() for d in DOCS}


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


@dataclass
class Program:
    """Blocks run as one program, in order, in one namespace."""
    name: str
    blocks: list[tuple[str, str]]          # (doc, a line only that block has)
    subs: list[tuple[str, str]] = field(default_factory=list)
    prelude: str = ""
    after: str = ""
    group: bool = False                    # RANK, WORLD_SIZE, MASTER_ADDR/PORT of one rank
    cuda: bool = False                     # needs CUDA: without it, the CXLError that says so
    s3: bool = False                       # the moto S3 server's environment
    run_by: Optional[str] = None           # another test runs it (and reads the block)


FIXED = """
import numpy as np
from cxl_dataloader import CXLMemoryPool, CXLDataset, CXLDataLoader
_pool = CXLMemoryPool("@POOL@", create=True, size="64M")
np.save("fixed.npy", np.arange(4000 * 16, dtype=np.float32).reshape(4000, 16))
ds = CXLDataset.ingest(_pool, "fixed", "fixed.npy")
"""

PROGRAMS = [
    Program("readme-pytorch",
            [("README.md", 'dist.init_process_group("gloo")'),
             ("README.md", 'ds = CXLDataset.ingest(pool, "reviews"')],
            subs=[('"train"', '"@POOL@"')], group=True,
            after='assert state["epoch"] == 3 and len(ds) == 300\n'
                  'assert next(iter(loader))["input_ids"].shape == (16, 128)'),
    Program("readme-tiers", [("README.md", 'tiers=["dram=shm:1G", "nvme=file:/data/train.tier:2T"]')],
            subs=[('"train"', '"@POOL@"'), ("dram=shm:1G", "dram=shm:16M"),
                  ("nvme=file:/data/train.tier:2T", "nvme=file:@TMP@/train.tier:256M")],
            after="assert sum(len(b) for b in loader) == len(ds) == 20000\n"
                  "assert len(pool.tiers()) == 2"),
    Program("formats-parquet", [("docs/formats.md", 'format="parquet",\n')],
            subs=[('"demo"', '"@POOL@"')]),
    Program("formats-hf", [("docs/formats.md", 'datasets.load_from_disk("data/hf_saved")')],
            subs=[('"demo"', '"@POOL@"')]),
    Program("formats-webdataset", [("docs/formats.md", 'format="webdataset"')],
            subs=[('"demo"', '"@POOL@"')]),
    Program("formats-jsonl", [("docs/formats.md", '"data/corpus.jsonl", tokenizer="bytes"')],
            subs=[('"demo"', '"@POOL@"')]),
    Program("formats-s3", [("docs/formats.md", 'data_source="s3://bucket/train/*.parquet"')],
            subs=[('"demo"', '"@POOL@"')], s3=True),
    Program("gpu-device", [("docs/gpu.md", 'device="cuda", prefetch_to_gpu=2)')],
            prelude=FIXED + "model = lambda b: b.float().sum()\n", cuda=True),
    Program("gpu-gds", [("docs/gpu.md", "from cxl_dataloader.gds import FileRangeReader")],
            prelude=FIXED.replace('"@POOL@", create=True, size="64M"',
                                  '"file:@TMP@/gds.pool", create=True, size="64M"')
            + "first, count = 10, 100\n",
            cuda=True),
    Program("python-first", [("docs/python.md", 'with CXLMemoryPool("train", create=True')],
            run_by="test_api.py::test_the_manuals_example"),
    Program("python-signature", [("docs/python.md", "CXLDataLoader(dataset, batch_size=1,")],
            run_by="test_the_loader_signature_is_the_documented_one"),
    Program("python-design", [("docs/python.md", "pool_size=\"512TB\"")],
            run_by="test_constructor.py::test_the_designs_usage_runs_as_written"),
    Program("python-checkpoint", [("docs/python.md", 'json.dump(loader.state_dict(), open("ckpt.json.tmp"')],
            prelude="import json, os\n" + FIXED
            + "seen = []\ntrain = lambda b: seen.append(b[:, 0].tolist())\n",
            after="first = list(seen)\nseen.clear()\nexec(BLOCK)  # a restart\n"
                  "assert len(first) == 125 and seen == first[100:]"),
    Program("sampling-checkpoint", [("docs/sampling.md", "sampler = DistributedCXLSampler(ds, seed=1234")],
            group=True,
            prelude="import torch, torch.distributed as dist\n"
                    "from cxl_dataloader import DistributedCXLSampler\n"
                    'dist.init_process_group("gloo")\n' + FIXED
            + "B, start_epoch, epochs, want_checkpoint = 100, 0, 2, True\n"
              "ckpt = {}\nsave = ckpt.update\nstep = lambda b: None\n",
            after='assert ckpt["sampler"]["epoch"] == start_epoch == 2'),
    # docs/integrations.md: each block is an example file that
    # test_integrations_docs.py finds on the page and runs as written
    Program("integrations-megatron", [("docs/integrations.md", "# Megatron-core's GPTDataset over the pool")],
            run_by="test_integrations_docs.py::test_example_runs"),
    Program("integrations-lightning", [("docs/integrations.md", "# Lightning: a LightningDataModule")],
            run_by="test_integrations_docs.py::test_example_runs"),
    Program("integrations-hf", [("docs/integrations.md", "# Hugging Face Trainer fed from the pool")],
            run_by="test_integrations_docs.py::test_example_runs"),
    Program("integrations-titan", [("docs/integrations.md", "# torchtitan's data-loader hook")],
            run_by="test_integrations_docs.py::test_example_runs"),
    # torchtitan is not installed by our setup: its train_spec module is a
    # stand-in with the two functions the block calls; the registered
    # builder then runs as torchtitan would call it, over the pool
    Program("python-titan-hook", [("docs/python.md", "register_train_spec(\"llama3_cxl\"")],
            subs=[('TitanLoader("train"', 'TitanLoader("@POOL@"')],
            prelude=textwrap.dedent("""
                import sys, types, dataclasses
                from cxl_dataloader import CXLMemoryPool, CXLDataset
                @dataclasses.dataclass
                class _Spec:
                    name: str
                    build_dataloader_fn: object = None
                _specs = {}
                _m = types.ModuleType("torchtitan.protocols.train_spec")
                _m.get_train_spec = lambda name: _Spec(name)
                _m.register_train_spec = lambda name, spec: _specs.__setitem__(name, spec)
                for _n in ("torchtitan", "torchtitan.protocols"):
                    sys.modules[_n] = types.ModuleType(_n)
                sys.modules["torchtitan.protocols.train_spec"] = _m
                _pool = CXLMemoryPool("@POOL@", create=True, size="64M")
                CXLDataset.ingest(_pool, "tokens", "corpus_text_document", format="megatron")
                """),
            after=textwrap.dedent("""
                _cfg = types.SimpleNamespace(training=types.SimpleNamespace(local_batch_size=2,
                                                                            seq_len=16))
                _loader = _specs["llama3_cxl"].build_dataloader_fn(2, 0, None, _cfg)
                _inp, _labels = next(iter(_loader))
                assert _inp["input"].shape == (2, 16) and _labels.shape == (2, 16)
                """)),
    Program("tiers-create", [("docs/tiers.md", 'tiers=["dram=shm:1G", "cxl=numa:1:8G"')],
            prelude="from cxl_dataloader import CXLMemoryPool\n",
            subs=[('"train"', '"@POOL@"'), ("dram=shm:1G", "dram=shm:16M"),
                  ("cxl=numa:1:8G", "cxl=numa:0:16M"),  # a node this machine has
                  ("nvme=file:/data/train.tier:2T", "nvme=file:@TMP@/t.tier:64M")],
            after='assert [t["kind"] for t in pool.tiers()] == ["dram", "cxl", "nvme"]'),
]


def registry_errors(texts: dict[str, str], programs: list[Program]) -> list[str]:
    """What keeps the programs from running every block exactly once."""
    errors, used = [], set()
    for p in programs:
        for doc, key in p.blocks:
            hits = [i for i, b in enumerate(python_blocks(texts[doc])) if key in b]
            if len(hits) != 1:
                errors.append(f"{p.name}: {len(hits)} blocks of {doc} have {key!r}")
            used.update((doc, i) for i in hits)
    for doc, text in texts.items():
        for i, b in enumerate(python_blocks(text)):
            if (doc, i) not in used:
                errors.append(f"{doc}: the python block starting {b.splitlines()[0]!r} runs "
                              "in no program of tests/python/test_docs.py")
    return errors


def block(texts: dict[str, str], doc: str, key: str) -> str:
    (b,) = [b for b in python_blocks(texts[doc]) if key in b]
    return b


def program_code(p: Program, texts: dict[str, str]) -> str:
    code = "\n".join(block(texts, d, k) for d, k in p.blocks)
    for old, new in p.subs:
        assert old in code, f"{p.name}: {old!r} is no longer in the block (update PROGRAMS)"
        code = code.replace(old, new)
    return code


WRAPPER = r"""
import json, re, sys
spec = json.load(open(sys.argv[1]))
ns = {"__name__": "__main__", "BLOCK": compile(spec["code"], spec["where"], "exec")}
exec(compile(spec["prelude"], "prelude", "exec"), ns)
try:
    exec(ns["BLOCK"], ns)
except Exception as e:
    import torch
    from cxl_dataloader import CXLError
    if spec["cuda"] and not torch.cuda.is_available() and isinstance(e, CXLError) \
            and e.code == CXLError.ENODEV and "CUDA is not available" in str(e):
        print("no CUDA here: the block raised the documented CXLError:", e)
        sys.exit(0)
    raise
if spec["cuda"] and not __import__("torch").cuda.is_available():
    sys.exit("the block ran without CUDA, where docs/gpu.md says it raises")
exec(compile(spec["after"], "after", "exec"), ns)
print("ok")
"""


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def run_program(p: Program, texts: dict[str, str], data: Path, tmp: Path,
                env_extra: Optional[dict] = None) -> subprocess.CompletedProcess:
    """Runs p in a new process in a copy of the data directory; its pool is
    destroyed afterwards."""
    pool = f"pyt-docs-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    work = tmp / p.name
    shutil.copytree(data, work, symlinks=True)
    fill = lambda s: s.replace(POOL, pool).replace(TMP, str(work))  # noqa: E731
    spec = {"code": fill(program_code(p, texts)), "where": f"{p.name} ({p.blocks[0][0]})",
            "prelude": fill(p.prelude), "after": fill(p.after), "cuda": p.cuda}
    (work / "spec.json").write_text(json.dumps(spec))
    env = dict(os.environ, CXLP_POOL=pool, **(env_extra or {}))
    if p.group:
        env.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(free_port()))
    try:
        return subprocess.run([sys.executable, "-c", WRAPPER, str(work / "spec.json")],
                              cwd=work, env=env, capture_output=True, text=True, timeout=600)
    finally:
        for spec_ in (pool, f"file:{work}/gds.pool"):
            try:
                CXLMemoryPool.destroy(spec_)
            except CXLError:
                pass


def make_data(root: Path) -> None:
    """The files the blocks read, in the directory they run in."""
    rng = np.random.default_rng(0)
    n = 300
    t = pa.table({"input_ids": pa.array([rng.integers(0, 50000, int(k), dtype=np.int32)
                                         for k in rng.integers(1, 300, n)],
                                        type=pa.list_(pa.int32())),
                  "label": pa.array(rng.integers(0, 5, n)),
                  "text": [f"review {i}" for i in range(n)]})
    (root / "data" / "reviews").mkdir(parents=True)
    pq.write_table(t.slice(0, 150), root / "data" / "reviews" / "a.parquet")
    pq.write_table(t.slice(150), root / "data" / "reviews" / "b.parquet")
    pq.write_table(t, root / "train.parquet")
    import datasets
    datasets.Dataset.from_dict({
        "input_ids": [rng.integers(0, 30000, int(k)).tolist() for k in rng.integers(1, 40, 120)],
        "label": rng.integers(0, 3, 120).tolist(),
        "text": [f"t{i}" for i in range(120)]}).save_to_disk(str(root / "data" / "hf_saved"))
    import webdataset as wds
    (root / "data" / "shards").mkdir()
    for s in range(2):
        with wds.TarWriter(str(root / "data" / "shards" / f"{s:03d}.tar")) as sink:
            for i in range(64):
                sink.write({"__key__": f"s{s}_{i:04d}",
                            "pixels": bytes(rng.integers(0, 256, 192, dtype=np.uint8)),
                            "txt": f"a picture {i}", "cls": int(rng.integers(0, 10))})
    with open(root / "data" / "corpus.jsonl", "w") as f:
        for i in range(200):
            f.write('{"text": "%s"}\n' % (" ".join(["word"] * int(rng.integers(1, 80)) + [str(i)])))
    seqs = [rng.integers(0, 60000, int(k), dtype=np.uint16) for k in rng.integers(1, 3000, 300)]
    write_megatron(root / "corpus_text_document", seqs, list(range(0, 301, 10)))
    np.save(root / "train.npy", rng.integers(0, 1 << 30, (20000, 64), dtype=np.int32))
    np.save(root / "tokens.npy", rng.integers(0, 60000, (1000, 128), dtype=np.uint16))


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("docs-data")
    make_data(root)
    return root


# -- the python blocks ---------------------------------------------------------

def test_every_python_block_runs_in_a_program() -> None:
    assert registry_errors(doc_texts(), PROGRAMS) == []


def test_a_new_or_lost_block_is_found() -> None:
    """The test of the test: a block no program runs, and a program whose
    block is gone, are errors."""
    texts = doc_texts()
    texts["docs/cli.md"] += "\n```python\nprint('new')\n```\n"
    texts["docs/gpu.md"] = texts["docs/gpu.md"].replace("from cxl_dataloader.gds import", "from x import")
    errs = registry_errors(texts, PROGRAMS)
    assert any("docs/cli.md: the python block starting \"print('new')\"" in e for e in errs)
    assert any(e.startswith("gpu-gds: 0 blocks of docs/gpu.md") for e in errs)


@pytest.mark.parametrize("prog", [p for p in PROGRAMS if p.run_by is None], ids=lambda p: p.name)
def test_block_runs(prog: Program, data: Path, tmp_path: Path,
                    request: pytest.FixtureRequest) -> None:
    env = None
    if prog.s3:
        env = request.getfixturevalue("s3_server")
        import fsspec
        fs = fsspec.filesystem("s3")
        fs.mkdir("bucket")
        fs.put_file(str(data / "train.parquet"), "bucket/train/part-0.parquet")
    r = run_program(prog, doc_texts(), data, tmp_path, env)
    out = r.stdout[-2000:] + r.stderr[-4000:]
    assert r.returncode == 0, out
    assert r.stdout.rstrip().endswith("ok") or (prog.cuda and "documented CXLError" in r.stdout), out


def test_a_planted_drift_in_a_block_fails(data: Path, tmp_path: Path) -> None:
    """The test of the test: the README's tiers block with a policy name
    that does not exist fails its program."""
    texts = doc_texts()
    texts["README.md"] = texts["README.md"].replace('memory_policy="lookahead"',
                                                    'memory_policy="lookahed"')
    (prog,) = [p for p in PROGRAMS if p.name == "readme-tiers"]
    r = run_program(prog, texts, data, tmp_path)
    assert r.returncode != 0 and "lookahed" in r.stderr


def test_the_loader_signature_is_the_documented_one() -> None:
    """docs/python.md's signature block is CXLDataLoader's: the same
    parameters, kinds and defaults."""
    (p,) = [p for p in PROGRAMS if p.name == "python-signature"]
    text = program_code(p, doc_texts())
    args = text.strip()[len("CXLDataLoader("):-1]
    ns: dict = {}
    exec(f"def documented({args}): pass", ns)
    want = inspect.signature(CXLDataLoader.__init__)
    want = want.replace(parameters=list(want.parameters.values())[1:])
    have = inspect.signature(ns["documented"])
    assert [(q.name, q.kind, q.default) for q in have.parameters.values()] == \
        [(q.name, q.kind, q.default) for q in want.parameters.values()]


# -- the quick start -----------------------------------------------------------

def quick_start(readme: str) -> list[str]:
    sec = readme.split("## Quick start", 1)[1]
    lines = re.search(r"\n\n((?:    .*\n)+)", sec).group(1).splitlines()
    return [x[4:] for x in lines]


def test_the_quick_start_runs(data: Path, tmp_path: Path) -> None:
    """Its last four lines, in a directory holding a tokens.npy, with the
    cxlpool pip installed beside this python: a pool made, the array
    ingested, a shuffled pass printed batch by batch."""
    lines = quick_start((ROOT / "README.md").read_text())
    assert len(lines) == 5 and lines[0].startswith("pip install")
    pool = f"pyt-quick-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    script = "set -e\n" + "\n".join(lines[1:]).replace("train", pool) + "\n"
    shutil.copy(data / "tokens.npy", tmp_path / "tokens.npy")
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
    try:
        r = subprocess.run(["bash", "-c", script], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=300)
    finally:
        try:
            CXLMemoryPool.destroy(pool)
        except CXLError:
            pass
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    shapes = r.stdout.split()
    assert r.stdout.count("torch.Size([32, 128])") == 31 and "torch.Size([8, 128])" in r.stdout, \
        shapes[:10]


# -- the README's tour ------------------------------------------------------------

def tour_module():
    spec = importlib.util.spec_from_file_location("readme_tour", ROOT / "scripts" / "readme_tour.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def fresh_tour() -> dict[str, str]:
    tour = tour_module()
    cli = Path(sys.executable).parent / "cxlpool"
    if not cli.exists():
        cli = ROOT / "build" / "cxlpool"
    if not cli.exists():
        pytest.skip("no cxlpool binary (pip install . puts one beside python)")
    return tour.run_steps(cli, f"pyt-tour-{os.getpid()}-{uuid.uuid4().hex[:6]}")


def test_the_readme_tour_is_a_fresh_run(fresh_tour: dict[str, str]) -> None:
    diffs = tour_module().differences((ROOT / "README.md").read_text(), fresh_tour)
    assert diffs == [], "\n".join(diffs) + "\n(python3 scripts/readme_tour.py --write README.md)"


def test_a_planted_drift_in_the_tour_fails(fresh_tour: dict[str, str]) -> None:
    """The test of the test: an old format version, a changed line of
    verify and a changed ingest line are each found; a timing is not."""
    tour = tour_module()
    readme = (ROOT / "README.md").read_text()
    for old, new in (("format:     v3", "format:     v2"),
                     ("checksums match", "checksums ok"),
                     ("ingested arr: 100 records", "ingested arr: 101 records")):
        assert old in readme
        diffs = tour.differences(readme.replace(old, new, 1), fresh_tour)
        assert len(diffs) == 1 and new in diffs[0], (old, diffs)
    timing = re.search(r"ingested tokens: .* in (\d+\.\d+) s", readme)
    assert timing is not None
    shifted = readme.replace(timing.group(0), timing.group(0).replace(timing.group(1), "99.999"))
    assert tour.differences(shifted, fresh_tour) == []


# -- docs/benchmarks.md ------------------------------------------------------------

def benchmark_page_errors(page: str, files: list[str], pages: list[str]) -> list[str]:
    """What is wrong with docs/benchmarks.md: over 400 lines; a table
    without a command, machine or date before it in its section; a file of
    docs/benchmarks/ that no page names; a link to a file that is not there."""
    errors = []
    lines = page.count("\n")
    if lines >= 400:
        errors.append(f"docs/benchmarks.md has {lines} lines (one page: < 400)")
    for sec in re.split(r"^## ", page, flags=re.M)[1:]:
        title = sec.split("\n", 1)[0]
        if title == "Machines":
            continue
        for m in re.finditer(r"^\|.*\|\n\|[-|: ]+\|$", sec, re.M):
            before = sec[:m.start()]
            c = before.rfind("Command")
            if c < 0:
                errors.append(f"{title}: a table without a command before it")
                continue
            if "Machine" not in before:
                errors.append(f"{title}: a table without its machine")
            if not re.search(r"\b20\d\d-\d\d-\d\d\b", before[c:]):
                errors.append(f"{title}: a table without the date of its command")
    named = "\n".join([page] + pages)
    for f in files:  # "X.json and .png" names both
        if Path(f).stem not in named:
            errors.append(f"docs/benchmarks/{f}: named by no page")
    for link in re.findall(r"\]\((benchmarks/[^)#]+)\)", page):
        if not (ROOT / "docs" / link).exists():
            errors.append(f"docs/benchmarks.md links {link}, which is not there")
    return errors


def benchmark_inputs() -> tuple[str, list[str], list[str]]:
    d = ROOT / "docs" / "benchmarks"
    files = sorted(p.name for p in d.iterdir() if p.suffix in (".json", ".png"))
    return ((ROOT / "docs" / "benchmarks.md").read_text(), files,
            [p.read_text() for p in sorted(d.glob("*.md"))])


def test_the_benchmarks_page_is_one_page_of_named_figures() -> None:
    page, files, pages = benchmark_inputs()
    assert benchmark_page_errors(page, files, pages) == []


def test_a_planted_drift_in_the_benchmarks_page_fails() -> None:
    """The test of the test: a table whose date is gone, a page too long,
    a data file no page names."""
    page, files, pages = benchmark_inputs()
    undated = page.replace("Date: 2026-11-29.", "", 1)
    assert undated != page
    assert any("without the date" in e for e in benchmark_page_errors(undated, files, pages))
    assert any("lines" in e for e in benchmark_page_errors(page + "x\n" * 400, files, pages))
    assert any("named by no page" in e
               for e in benchmark_page_errors(page, files + ["tiers-2099-01-01T0000.json"],
                                              pages))
