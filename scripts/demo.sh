#!/usr/bin/env bash
# The main job, end to end on this machine: builds the tool if needed, creates
# a pool (default: shm, i.e. shared memory standing in for CXL memory),
# tokenizes a real text corpus (the license texts Debian ships in
# /usr/share/common-licenses) into a Megatron-LM indexed dataset (.bin/.idx,
# one document per file, one sequence per paragraph, byte-level tokens) and a
# NumPy array of fixed 129-token training windows, ingests both, lists,
# verifies, prints a record, runs the gather benchmark, trains a small
# transformer from the pool for STEPS steps (examples/train_tiny.py, through
# CXLDataLoader), and destroys the pool.
#
# Environment: POOL (default cxlp-demo), CORPUS (default
# /usr/share/common-licenses), POOL_SIZE (default: sized from the tokenized
# data, e.g. 1G), STEPS (default 300), KEEP=1 keeps the pool, SKIP_SETUP=1
# skips scripts/setup.sh, PYTHON (default python3). The datasets are named
# after the corpus directory (NAME and NAME.windows). Whether it finishes or
# fails, the run removes what it created (work directory, and the pool unless
# KEEP=1).
set -euo pipefail
cd "$(dirname "$0")/.."
POOL=${POOL:-cxlp-demo}
CORPUS=${CORPUS:-/usr/share/common-licenses}
PY=${PYTHON:-python3}
# dataset names: the corpus directory's name, in the characters names allow
DS=$(basename "$(realpath "$CORPUS")")
DS=$(printf '%s' "$DS" | tr -c 'A-Za-z0-9._-' '_' | cut -c1-48)

need_setup=0
for t in cmake ninja pkg-config clang-14; do command -v "$t" >/dev/null || need_setup=1; done
"$PY" -c 'import numpy, torch, tqdm' 2>/dev/null || need_setup=1
pkg-config --exists numa liburing 2>/dev/null || need_setup=1
if [ "$need_setup" = 1 ] && [ "${SKIP_SETUP:-0}" != 1 ]; then bash scripts/setup.sh; fi

if [ ! -x build/cxlpool ] || [ -n "$(find src tools include -newer build/cxlpool -name '*.[ch]' 2>/dev/null | head -1)" ]; then
  echo "== building (build/)"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  ninja -C build -j2 cxlpool_cli >/dev/null
fi
X=build/cxlpool
run() { echo; echo "\$ cxlpool $*"; "$X" "$@"; }

WORK=$(mktemp -d "${TMPDIR:-/tmp}/cxlp-demo.XXXXXX")
created=0
cleanup() {
  rm -rf "$WORK"
  if [ "$created" = 1 ] && [ "${KEEP:-0}" != 1 ]; then
    echo; echo "\$ cxlpool destroy $POOL --yes"; "$X" destroy "$POOL" --yes
  fi
}
trap cleanup EXIT

echo "== tokenizing $CORPUS (byte-level tokens, uint16)"
"$PY" - "$CORPUS" "$WORK" "$DS" <<'PY'
import os, struct, sys
import numpy as np

corpus, out, name = sys.argv[1], sys.argv[2], sys.argv[3]
docs = []
for root, _, files in os.walk(corpus):
    for f in sorted(files):
        p = os.path.join(root, f)
        if os.path.islink(p) or not os.path.isfile(p):
            continue
        text = open(p, "rb").read()
        paras = [s.strip() for s in text.split(b"\n\n") if s.strip()]
        if paras:
            docs.append(paras)
# Megatron-LM indexed dataset: one sequence per paragraph, documents = files.
seqs = [np.frombuffer(s, dtype=np.uint8).astype(np.uint16) for d in docs for s in d]
doc_idx = [0]
for d in docs:
    doc_idx.append(doc_idx[-1] + len(d))
with open(os.path.join(out, f"{name}_text_document.bin"), "wb") as f:
    for s in seqs:
        f.write(s.tobytes())
ptrs = np.zeros(len(seqs), dtype=np.int64)
lens = np.array([len(s) for s in seqs], dtype=np.int32)
ptrs[1:] = np.cumsum(lens[:-1].astype(np.int64) * 2)
with open(os.path.join(out, f"{name}_text_document.idx"), "wb") as f:
    f.write(b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + struct.pack("<B", 8))  # 8: uint16
    f.write(struct.pack("<Q", len(seqs)) + struct.pack("<Q", len(doc_idx)))
    f.write(lens.tobytes()); f.write(ptrs.tobytes())
    f.write(np.array(doc_idx, dtype=np.int64).tobytes())
# Fixed-size training windows: 128 context tokens + 1 target, stride 128.
stream = np.concatenate(seqs)
n = (len(stream) - 1) // 128
win = np.lib.stride_tricks.sliding_window_view(stream, 129)[::128][:n].copy()
np.save(os.path.join(out, "windows.npy"), win)
print(f"{len(docs)} documents, {len(seqs)} sequences, {len(stream)} tokens; "
      f"{n} windows of 129 tokens")
PY

# The pool is sized from the data: what the two ingests store (records,
# plus ~1/8 for shard headers, indexes and extent rounding) and 64 MiB for
# the header, both catalog slots and the lease table.
data=$(du -cb "$WORK/${DS}_text_document.bin" "$WORK/${DS}_text_document.idx" \
       "$WORK/windows.npy" | tail -1 | cut -f1)
SIZE=${POOL_SIZE:-$(( (data + data / 8 + (64 << 20) + (1 << 20) - 1) >> 20 ))M}
"$X" destroy "$POOL" --yes >/dev/null 2>&1 || true
run create "$POOL" "$SIZE"
created=1
run ingest "$POOL" "$DS" "$WORK/${DS}_text_document" --format megatron
run ingest "$POOL" "$DS.windows" "$WORK/windows.npy"
run ls "$POOL"
run stat "$POOL"
run verify "$POOL" --quiet && echo "verify: ok"
echo; echo "\$ cxlpool cat $POOL $DS 3 --format raw | (decode uint16 byte tokens)"
"$X" cat "$POOL" "$DS" 3 --format raw | "$PY" -c '
import sys, numpy as np
t = np.frombuffer(sys.stdin.buffer.read(), dtype=np.uint16)
print(bytes(t.astype(np.uint8)).decode("utf-8", "replace")[:400])'
run cat "$POOL" "$DS.windows" 0 --format dtype
run bench gather "$POOL" "$DS.windows" --batch 32 --threads 1,2 --rounds 5

# Train from the pool: the Python package over the same C sources.
if ! "$PY" -c 'import cxl_dataloader' 2>/dev/null || \
   [ -n "$(find python src include -newer "$("$PY" -c 'import cxl_dataloader, os; print(os.path.dirname(cxl_dataloader.__file__))' 2>/dev/null || echo /)" -name '*.[chy]*' 2>/dev/null | head -1)" ]; then
  echo; echo "== installing the Python package (pip install .)"
  pipx=()
  stdlib=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
  [ -f "$stdlib/EXTERNALLY-MANAGED" ] && pipx+=(--break-system-packages)
  "$PY" -m pip install -q --no-build-isolation --no-deps "${pipx[@]}" .
fi
echo; echo "\$ python3 examples/train_tiny.py --pool $POOL --dataset $DS --steps ${STEPS:-300}"
"$PY" examples/train_tiny.py --pool "$POOL" --dataset "$DS" --steps "${STEPS:-300}"

if [ "${KEEP:-0}" = 1 ]; then
  echo; echo "kept pool $POOL (cxlpool destroy $POOL --yes to remove)"
fi
