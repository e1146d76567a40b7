#!/bin/bash
# What `cxlpool serve` reads from its pool's home while a loader on another
# pool stages a dataset through a remote tier, for one or more builds of
# the server side by side:
#
#   bash bench/remote_server_reads.sh PYTHON CXLPOOL_A [CXLPOOL_B ...]
#
# Pool A: a dram tier of 64 MiB and an nvme home (a file under $DIR,
# default /var/tmp), 640 MiB of 8 KiB records in 10 shards of 64 MiB, all
# at home. For each server build in turn: the build serves A on loopback
# (UCX_TLS=tcp), pool B (a 256 MiB dram tier and a remote tier naming the
# server) reads one epoch through CXLDataLoader(memory_policy="lookahead",
# RandomCXLSampler(window="auto")), which stages units of A's shards (a
# few MiB each) from the server; the page cache is dropped first (root),
# and the server process's disk reads (/proc/PID/io read_bytes) over the
# epoch are printed as a multiple of the dataset. PYTHON is a Python whose
# cxl_dataloader is built with UCX. Removes every pool and file it made.
set -euo pipefail
PY=$1; shift
NEWEST=${@: -1}
D=${DIR:-/var/tmp}/remote-server-reads.$$
mkdir -p "$D"
trap '"$NEWEST" destroy rsrB --yes >/dev/null 2>&1 || true; "$NEWEST" destroy rsrA --yes >/dev/null 2>&1 || true; rm -rf "$D"' EXIT
printf 'remote-server-reads' > "$D/tok"; chmod 600 "$D/tok"
export CXLPOOL_TOKEN_FILE=$D/tok UCX_TLS=tcp
N=81920
"$PY" -c "
import numpy as np
a = np.zeros(($N, 8192), dtype=np.uint8)
a[:, :8] = np.arange($N, dtype=np.uint64).view(np.uint8).reshape($N, 8)
a.tofile('$D/recs.raw')"
"$NEWEST" create rsrA --tier dram=shm:rsrA.d:64M --tier "nvme=file:$D/home.tier:1G" >/dev/null
"$NEWEST" ingest rsrA d "$D/recs.raw" --format raw --record-size 8192 --shard-bytes 64M >/dev/null
"$NEWEST" migrate rsrA d nvme >/dev/null
for BIN in "$@"; do
  port=$((7400 + RANDOM % 500))
  "$BIN" serve rsrA --listen "127.0.0.1:$port" --token-file "$D/tok" > "$D/serve.log" 2>&1 &
  SP=$!
  sleep 1.5
  "$NEWEST" create rsrB --tier dram=shm:rsrB.d:256M --tier "remote=ucx://127.0.0.1:$port/rsrA" >/dev/null
  sync; echo 3 > /proc/sys/vm/drop_caches
  r0=$(awk '/read_bytes/{print $2}' /proc/$SP/io)
  "$PY" - <<PYEOF
from cxl_dataloader import CXLMemoryPool, CXLDataset, CXLDataLoader, RandomCXLSampler
p = CXLMemoryPool("rsrB")
ds = CXLDataset(p, "d")
l = CXLDataLoader(ds, batch_size=256, sampler=RandomCXLSampler(ds, seed=3, window="auto"),
                  memory_policy="lookahead")
n = sum(len(b) for b in l)
st = l.stats()
print(f"  loader on B: {n} records, staging units of {st['unit_bytes']} bytes, "
      f"{st['bytes_staged'] / ($N * 8192):.3f}x the dataset staged")
l.close()
PYEOF
  r1=$(awk '/read_bytes/{print $2}' /proc/$SP/io)
  echo "$BIN serve: the server read $("$PY" -c "print(f'{($r1 - $r0) / ($N * 8192):.3f}')")x the dataset from its home"
  kill "$SP"; wait "$SP" 2>/dev/null || true
  "$NEWEST" destroy rsrB --yes >/dev/null
done
