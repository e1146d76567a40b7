#!/usr/bin/env bash
# Opt-in (CXLP_HOSTS3_TEST=1, root): issue 33's acceptance run on 3 emulated
# hosts. Each host is a network namespace (a veth pair to one bridge) and a
# mount namespace with its own /dev/shm (a private tmpfs) holding its pool
# shm:acc, with its own host id (CXLP_HOST_ID). Each pool's dram tier holds
# 40% of the dataset. The home is one file on an ext4 disk (a loop device)
# mounted in host 0's mount namespace only. Every host serves its pool
# (cxlpool serve) and its pool's remote tier names the other two servers:
# hosts 1 and 2 mirror host 0's dataset, host 0 gains them as holders. A
# 4-rank torchrun job (gloo over the bridge; ranks 2 + 1 + 1) reads it
# for 2 epochs with DistributedCXLSampler(topology="auto") and trains a
# toy model (tests/cli/hosts3_job.py).
# Checks: every id exactly once per epoch (where the world does not divide
# the records, the ids torch's padding repeats twice) and every record's words;
# the home disk's bytes read in epoch 1 <= 5% of the dataset; the peer
# fraction of each epoch (the records the loaders read in part from a
# peer that had them in memory: loader.stats()["peer_records"], over the
# dataset's) within 2 points of cxlpool order --stats's. The figures go to
# stdout and $CXLP_HOSTS3_OUT (JSON) when set.
# CXLP_HOSTS3_KEEP=1 / 0: keep_blocks=True / False (one deal for every
# epoch, the default of topology=; or a new deal each epoch).
# CXLP_HOSTS3_BUDGET: the loaders' memory_budget: "default" (the loader's:
# for this order the whole dram tier), "tier" (the same, given), "split"
# (the tier over the host's ranks) or bytes.
# CXLP_HOSTS3_RATE=1gbit: tc shapes every veth both ways. After the job,
# host 1 stages the whole dataset from host 0 into a second pool (cxlpool
# migrate: the whole process timed, and the migration's own figure with 1
# and 2 threads) and ucx_perftest ucp_am_bw runs between the same two
# namespaces with the shard's size as message: figures only.
# CXLP_HOSTS3_RANKS=2,1,1: the ranks of hosts 0, 1, 2.
# CXLP_HOSTS3_WEIGHTS=2,1,1: the order's host weights (default: the
# hosts' capability, equal here).
# CXLP_HOSTS3_WINDOW: the sampler's window, "auto" (the default: half the
# staging budget, as window="auto" for any tiered dataset) or "all" (every
# block of a host's share: a full shuffle within it, topology="auto"'s
# default without window= before it took "auto" on a pool of tiers).
# CXLP_HOSTS3_LOGS=DIR: the jobs' and server's logs copied there at exit.
# CXLP_HOSTS3_PYTHON: a Python whose cxl_dataloader is built with UCX
# (pip install -C cmake.define.CXLP_UCX=ON .): the wheel's has none.
source "$(dirname "$0")/lib.sh"
[ "${CXLP_HOSTS3_TEST:-0}" = 1 ] || { echo "SKIP: set CXLP_HOSTS3_TEST=1 (root)"; exit 77; }
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root"; exit 77; }
for c in ip unshare nsenter losetup mkfs.ext4 mount; do
  command -v "$c" >/dev/null || { echo "SKIP: needs $c"; exit 77; }
done
"$CXLPOOL" remote-cat "ucx://127.0.0.1:1/x" x --timeout 2s >/dev/null 2>"$T/ucx" </dev/null
grep -q "no UCX" "$T/ucx" && { echo "SKIP: no UCX in this build of cxlpool"; exit 77; }
PY=${CXLP_HOSTS3_PYTHON:-python3}
"$PY" -c "import torch, cxl_dataloader" 2>"$T/pyerr" ||
  { echo "SKIP: $PY has no torch or cxl_dataloader: $(tail -1 "$T/pyerr")"; exit 77; }
HERE=$(cd "$(dirname "$0")" && pwd)
CXLPOOL=$(cd "$(dirname "$CXLPOOL")" && pwd)/$(basename "$CXLPOOL")

N=${CXLP_HOSTS3_N:-65536}   # records of 1 KiB
REC=1024
SHARD=${CXLP_HOSTS3_SHARD:-512K}
MEM=0.4
P=cx3$(( $$ % 100000 ))     # interface names: at most 15 characters
BR=${P}br
NET=10.234.$(( $$ % 250 ))
HOSTPID=(); BG=(); LOOP=""
hosts3_cleanup() {
  local p i
  for p in "${BG[@]}"; do kill "$p" 2>/dev/null; done
  for p in "${BG[@]}"; do wait "$p" 2>/dev/null; done
  for p in "${HOSTPID[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
  # host 0's mount of the home disk went with its mount namespace
  if [ -n "$LOOP" ]; then
    for i in $(seq 50); do losetup -d "$LOOP" 2>/dev/null; losetup -j "$T/disk.img" | grep -q . || break; sleep 0.1; done
  fi
  for h in 0 1 2; do ip link del "${P}h$h" 2>/dev/null; ip netns del "${P}n$h" 2>/dev/null; done
  ip link del "$BR" 2>/dev/null
  [ -n "${CXLP_HOSTS3_LOGS:-}" ] && mkdir -p "$CXLP_HOSTS3_LOGS" &&
    cp "$T"/*.log "$T"/*.json "$CXLP_HOSTS3_LOGS"/ 2>/dev/null
  cleanup
}
trap hosts3_cleanup EXIT
trap 'exit 143' TERM INT HUP  # the EXIT trap cleans up after a signal too

# on H CMD...: runs CMD in host H's network and mount namespaces
on() { local h=$1; shift; nsenter -t "${HOSTPID[$h]}" -m -n -- env CXLP_HOST_ID=a$h "$@"; }
# onbg H CMD... &: the same, the background job's pid that of CMD itself
onbg() { local h=$1; shift; exec nsenter -t "${HOSTPID[$h]}" -m -n -- env CXLP_HOST_ID=a$h "$@"; }

# the disk of the home: an ext4 image on a loop device, mounted by host 0 only
truncate -s $(( N * REC * 3 + (128 << 20) )) "$T/disk.img"
mkfs.ext4 -q -F "$T/disk.img" && LOOP=$(losetup -f --show "$T/disk.img") && ok ||
  { fail "loop device"; finish; }
DEV=$(basename "$LOOP")
mkdir -p "$T/home" "$T/run"

ip link add "$BR" type bridge && ip addr add "$NET.254/24" dev "$BR" && ip link set "$BR" up ||
  { fail "bridge"; finish; }
for h in 0 1 2; do
  ip netns add "${P}n$h" && ip link add "${P}h$h" type veth peer name "${P}p$h" &&
    ip link set "${P}p$h" netns "${P}n$h" && ip link set "${P}h$h" master "$BR" &&
    ip link set "${P}h$h" up &&
    ip netns exec "${P}n$h" ip addr add "$NET.$((h + 1))/24" dev "${P}p$h" &&
    ip netns exec "${P}n$h" ip link set "${P}p$h" up &&
    ip netns exec "${P}n$h" ip link set lo up || { fail "host $h network"; finish; }
  if [ "$h" = 0 ]; then
    mnt="mount $LOOP $T/home"
  else  # the others do not see the home's directory
    mnt="mount -t tmpfs -o size=1M tmpfs $T/home"
  fi
  ip netns exec "${P}n$h" unshare --mount --propagation private sh -c \
    "mount -t tmpfs -o size=$(( N * REC / 1048576 * 3 + 256 ))m tmpfs /dev/shm && $mnt &&
     touch $T/run/ready$h && exec sleep 100000" </dev/null &
  HOSTPID[$h]=$!
done
if [ -n "${CXLP_HOSTS3_RATE:-}" ]; then  # e.g. 1gbit: every veth shaped, both ways
  for h in 0 1 2; do
    tc qdisc add dev "${P}h$h" root tbf rate "$CXLP_HOSTS3_RATE" burst 1mb latency 50ms &&
      ip netns exec "${P}n$h" tc qdisc add dev "${P}p$h" root tbf rate "$CXLP_HOSTS3_RATE" \
        burst 1mb latency 50ms && ok || fail "tc on host $h"
  done
fi
for _ in $(seq 100); do [ -e "$T/run/ready0" ] && [ -e "$T/run/ready1" ] && [ -e "$T/run/ready2" ] && break; sleep 0.1; done
[ -e "$T/run/ready2" ] && [ -e "$T/run/ready1" ] && [ -e "$T/run/ready0" ] && ok ||
  { fail "host namespaces"; finish; }
[ -z "$(on 1 ls "$T/home")" ] && [ -n "$(on 0 ls "$T/home")" ] && ok || fail "home visible off host 0"

# the dataset: records carry their id and derived words (bench_tiers' records())
"$PY" - "$T/src.bin" "$N" "$REC" <<'EOF'
import sys
import numpy as np
K1, K2 = np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9)
n, rec = int(sys.argv[2]), int(sys.argv[3])
words = rec // 8
with open(sys.argv[1], "wb") as f:
    for lo in range(0, n, 8192):
        ids = np.arange(lo, min(n, lo + 8192), dtype=np.uint64)
        w = np.empty((len(ids), words), dtype=np.uint64)
        with np.errstate(over="ignore"):
            w[:, 1:-1] = ids[:, None] * K1 + np.arange(1, words - 1, dtype=np.uint64)
            w[:, -1] = (ids * K2) ^ (ids >> np.uint64(31))
        w[:, 0] = ids
        f.write(w.tobytes())
EOF
[ "$(stat -c %s "$T/src.bin")" = $((N * REC)) ] && ok || { fail "dataset file"; finish; }

# the dataset's stored bytes and a dram tier's overhead, from a throwaway
# pool, so that each dram tier's capacity is 40% of the stored bytes
expect 0 "" on 0 "$CXLPOOL" create shm:probe --tier "dram=shm:probed:$((N * REC / 2))" \
  --tier "nvme=file:$T/home/probe.tier:$((N * REC * 5 / 4 + (32 << 20)))"
expect 0 "" on 0 "$CXLPOOL" ingest shm:probe data "$T/src.bin" --format raw --record-size $REC \
  --shard-bytes "$SHARD" --no-progress
STORED=$(on 0 "$CXLPOOL" ls shm:probe --json | "$PY" -c \
  'import json,sys; print(json.load(sys.stdin)[0]["stored_bytes"])')
OVER=$(on 0 "$CXLPOOL" stat shm:probe --json | "$PY" -c \
  "import json,sys; print($((N * REC / 2)) - json.load(sys.stdin)['tiers'][0]['capacity'])")
on 0 "$CXLPOOL" destroy shm:probe --yes >/dev/null
DRAM=$("$PY" -c "print(int($STORED * $MEM) + $OVER)")
[ "$DRAM" -gt "$OVER" ] && ok || { fail "stored bytes: '$STORED', overhead '$OVER'"; finish; }

printf 'hosts3-secret\n' >"$T/tok"; chmod 600 "$T/tok"
export CXLPOOL_TOKEN_FILE="$T/tok" UCX_TLS=tcp
# every host's pool names the other hosts' servers: a host reads a block
# another host has in memory from that host (docs/remote.md)
expect 0 "" on 0 "$CXLPOOL" create shm:acc --tier "dram=shm:accd:$DRAM" \
  --tier "remote=ucx://$NET.2:7300/acc,ucx://$NET.3:7300/acc" \
  --tier "nvme=file:$T/home/home.tier:$(( STORED * 5 / 4 + (32 << 20) ))"
expect 0 "" on 0 "$CXLPOOL" ingest shm:acc data "$T/src.bin" --format raw --record-size $REC \
  --shard-bytes "$SHARD" --no-progress
rm -f "$T/src.bin"
onbg 0 "$CXLPOOL" serve shm:acc --listen "$NET.1:7300" --token-file "$T/tok" --metrics-port 9300 \
  >"$T/serve.out" 2>"$T/serve.log" </dev/null &
BG+=($!)
[ -n "$(listen_port "$T/serve.out")" ] && ok || { fail "serve: $(cat "$T/serve.log")"; finish; }
for h in 1 2; do
  expect 0 "" on $h "$CXLPOOL" create shm:acc --tier "dram=shm:accd:$DRAM" \
    --tier "remote=ucx://$NET.1:7300/acc,ucx://$NET.$(( 4 - h )):7300/acc"
  expect 0 "" on $h "$CXLPOOL" ls shm:acc
  grep -Eq "^data +$N " "$T/out" && ok || fail "host $h lists: $(cat "$T/out")"
done
for h in 1 2; do  # hosts 1 and 2 serve their pools (the mirror: from memory only)
  onbg $h "$CXLPOOL" serve shm:acc --listen "$NET.$((h + 1)):7300" --token-file "$T/tok" \
    --metrics-port $((9300 + h)) >"$T/serve$h.out" 2>"$T/serve$h.log" </dev/null &
  BG+=($!)
  [ -n "$(listen_port "$T/serve$h.out")" ] && ok ||
    { fail "serve on $h: $(cat "$T/serve$h.log")"; finish; }
done
# host 0 lists them: hosts 1 and 2 become holders of its dataset's shards
expect 0 "" on 0 "$CXLPOOL" ls shm:acc
on 1 "$PY" -c "from cxl_dataloader import CXLDataset; CXLDataset('shm:acc', 'data')" \
  2>"$T/pyerr" </dev/null
if grep -q "no UCX" "$T/pyerr"; then
  echo "SKIP: $PY's cxl_dataloader has no UCX (set CXLP_HOSTS3_PYTHON)"; exit 77
fi
[ ! -s "$T/pyerr" ] && ok || fail "host 1 opens the dataset: $(tail -3 "$T/pyerr")"

# the job: torchrun on each host, ranks 2 + 1 + 1, rendezvous on host 0
KEEP=(); case ${CXLP_HOSTS3_KEEP:-} in 1) KEEP=(--keep-blocks yes) ;; 0) KEEP=(--keep-blocks no) ;; esac
BUDGET=${CXLP_HOSTS3_BUDGET:-default}
RES="$T/result.json"
RANKS=${CXLP_HOSTS3_RANKS:-2,1,1}
IFS=, read -r -a NPROC <<<"$RANKS"
for h in 0 1 2; do
  extra=(); [ "$h" = 0 ] && extra=(--home-dev "$DEV" --home-file "$T/home/home.tier" --metrics-url "http://$NET.1:9300/metrics")
  onbg $h GLOO_SOCKET_IFNAME="${P}p$h" OMP_NUM_THREADS=1 \
    timeout "${CXLP_HOSTS3_TIMEOUT:-200}" "$PY" -m torch.distributed.run \
    --nnodes 3 --node-rank $h --nproc-per-node "${NPROC[$h]}" --master-addr "$NET.1" \
    --master-port 29533 "$HERE/hosts3_job.py" --pool acc --name data --epochs 2 \
    --memory $MEM --budget "$BUDGET" --window "${CXLP_HOSTS3_WINDOW:-auto}" --out "$RES" \
    ${CXLP_HOSTS3_WEIGHTS:+--host-weights "$CXLP_HOSTS3_WEIGHTS"} \
    "${KEEP[@]}" "${extra[@]}" >"$T/job$h.log" 2>&1 </dev/null &
  BG+=($!)
  eval "JOB$h=\$!"
done
t0=$(date +%s)
rcs=()
for h in 0 1 2; do
  v=JOB$h
  wait "${!v}"; rcs+=($?)
done
secs=$(( $(date +%s) - t0 ))
[ "${rcs[*]}" = "0 0 0" ] && [ -s "$RES" ] && ok ||
  { fail "job exit codes ${rcs[*]}: $(tail -n 15 "$T/job0.log" "$T/job1.log" "$T/job2.log")"; finish; }

# the prediction, for the job's blocks and seed
PS=$("$PY" -c "import json; print(json.load(open('$RES'))['shards']['per_shard'])")
"$CXLPOOL" order --n "$N" --stats --shard-size "$PS" --hosts 3 --memory $MEM \
  --ranks-per-host "$RANKS" --epochs 2 --seed 3 ${CXLP_HOSTS3_WEIGHTS:+--weights "$CXLP_HOSTS3_WEIGHTS"} \
  $(grep -q '"keep_blocks": true' "$RES" &&
  echo --keep-blocks) --json >"$T/pred.json" 2>"$T/err" &&
  ok || fail "order --stats: $(cat "$T/err")"

"$PY" - "$RES" "$T/pred.json" "$STORED" "$secs" "${CXLP_HOSTS3_OUT:-}" >"$T/verdict" <<'EOF'
import json, sys
res, pred = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))["stats"]
stored, secs, outp = int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
n, rec = res["n"], res["record_size"]
ds_bytes = n * rec
out, fails = {"n": n, "record_size": rec, "stored_bytes": stored, "job_seconds": secs,
              "keep_blocks": res["keep_blocks"], "budget": res["budget"], "epochs": []}, []
print(f"keep_blocks {res['keep_blocks']}, loader budget {res['budget'] or 'default'} bytes, "
      f"dataset {n} records of {rec} bytes in {res['shards']['n_shards']} shards")
for e in res["epochs"]:
    ranks = e["ranks"]
    # the records ranks read in part from a peer that had them in memory
    peer_records = sum(r["loader"].get("peer_records", 0) for r in ranks)  # per epoch
    r0 = next(r for r in ranks if "home_read_bytes" in r["after"])
    home = r0["after"]["home_read_bytes"] - r0["before"]["home_read_bytes"]
    m0, m1 = r0["before"].get("metrics", {}), r0["after"].get("metrics", {})
    served = m1.get("cxlpool_serve_bytes_total", 0) - m0.get("cxlpool_serve_bytes_total", 0)
    hosts = []
    for r in ranks:
        if "tiers" not in r["after"]:
            continue
        t0, t1 = r["before"]["tiers"], r["after"]["tiers"]
        hosts.append({"rank": r["rank"], "host_id": f"{r['after']['host_id']:x}",
                      "dram_capacity": t1[0]["capacity"],
                      "dram_bytes_in": t1[0]["bytes_in"] - t0[0]["bytes_in"],
                      "dram_hits": t1[0]["hits"] - t0[0]["hits"],
                      "dram_misses": t1[0]["misses"] - t0[0]["misses"]})
    h0 = next(h for h in hosts if h["rank"] == r0["rank"])
    # host 0's engine reads the home only (it has no remote tier): its dram's
    # bytes in came from the disk; the rest of the disk's reads were the
    # server's, and what the server sent beyond those came from its memory
    server_home = max(0, home - h0["dram_bytes_in"])
    peer_fraction = peer_records / n
    staged = sum(h["dram_bytes_in"] for h in hosts)
    p = pred["epochs"][e["epoch"]]
    predicted = {"local": p["local"], "peer": p["peer"], "home": p["home"],
                 "staged_peer": p["staged_peer"], "staged_home": p["staged_home"]}
    sampler = {k: sum(r["predicted"][k] for r in ranks) for k in ("local", "peer", "home")}
    tot = sum(sampler.values()) or 1
    row = {"epoch": e["epoch"], "samples": e["samples"], "bad_records": e["bad"],
           "ids_missing": e["ids_missing"], "ids_repeated": e["ids_repeated"],
           "home_bytes": home, "home_fraction": home / ds_bytes,
           "served_bytes": served, "served_from_home_bytes": server_home,
           "peer_records": peer_records, "peer_fraction": peer_fraction,
           "staged_bytes": staged, "staged_fraction": staged / ds_bytes,
           "predicted": predicted,
           "sampler_host_reads": {k: v / tot for k, v in sampler.items()},
           "hosts": hosts, "seconds": max(r["seconds"] for r in ranks),
           "next_pass_bytes": sum(r["loader"].get("next_pass_bytes", 0) for r in ranks),
           "partial_reads": sum(r["loader"].get("partial_reads", 0) for r in ranks),
           "loader_hits": sum(r["loader"].get("hits", 0) for r in ranks),
           "loader_misses": sum(r["loader"].get("misses", 0) for r in ranks)}
    out["epochs"].append(row)
    # drop_last=False pads the epoch to a multiple of the world, as torch's
    # DistributedSampler: those ids come twice, no id more
    pad = -n % res["world"]
    if (e["bad"] or e["ids_missing"] or e["ids_repeated"] != pad or e["samples"] != n + pad
            or e["max_count"] > (2 if pad else 1)):
        fails.append(f"epoch {e['epoch']}: {e['samples']} samples, {e['bad']} bad records, "
                     f"{e['ids_missing']} ids missing, {e['ids_repeated']} repeated")
    if e["epoch"] == 1 and home > 0.05 * ds_bytes:
        fails.append(f"epoch 1 read {home / ds_bytes:.3f} of the dataset from the home (> 0.05)")
    if abs(peer_fraction - p["peer"]) > 0.02:
        fails.append(f"epoch {e['epoch']}: peer fraction {peer_fraction:.4f} "
                     f"measured, {p['peer']:.4f} predicted")
    print(f"epoch {e['epoch']}: {e['samples']} samples ({e['ids_missing']} missing, "
          f"{e['ids_repeated']} repeated, {e['bad']} bad) in {row['seconds']:.1f} s; home "
          f"{home / ds_bytes:.3f}, staged into memories {staged / ds_bytes:.3f}, served by "
          f"host 0 {served / ds_bytes:.3f} (from its home {server_home / ds_bytes:.3f}) of "
          f"the dataset; samples read from a peer's memory {peer_fraction:.4f}; predicted local "
          f"{p['local']:.4f} peer {p['peer']:.4f} home {p['home']:.4f} (the ranks' samplers: "
          + ", ".join(f"{k} {v:.4f}" for k, v in row["sampler_host_reads"].items())
          + f"); loaders: {row['loader_hits']} hits, {row['loader_misses']} misses, "
          f"{row['partial_reads']} partial reads, next pass staged "
          f"{row['next_pass_bytes'] / ds_bytes:.3f}")
    for h in hosts:
        print(f"  host {h['host_id']}: dram {h['dram_capacity'] / stored:.3f} of the stored "
              f"bytes; bytes in {h['dram_bytes_in'] / ds_bytes:.3f}, hits {h['dram_hits']}, "
              f"misses {h['dram_misses']}")
out["fails"] = fails
if outp:
    json.dump(out, open(outp, "w"), indent=1)
for f in fails:
    print("CHECK FAILED: " + f)
EOF
cat "$T/verdict"
while read -r line; do
  case $line in "CHECK FAILED: "*) fail "${line#CHECK FAILED: }" ;; esac
done <"$T/verdict"
grep -q "^epoch 1:" "$T/verdict" && ok || fail "no verdict"

# remote staging against ucx_perftest on the same link (figures only)
if command -v ucx_perftest >/dev/null; then
  expect 0 "" on 1 "$CXLPOOL" create shm:bw --tier "dram=shm:bwd:$((STORED * 5 / 4 + OVER))" \
    --tier "remote=ucx://$NET.1:7300/acc"
  ta=$(date +%s.%N)
  expect 0 "" on 1 "$CXLPOOL" migrate shm:bw data dram --no-progress
  tb=$(date +%s.%N)
  own() { awk '{for (i = 1; i < NF; i++) if ($i == "copied" && $(i+1) == "in") s = $(i+2)}
               END {printf "%.0f", '"$STORED"' / s / 1e6}' "$T/out"; }
  m1=$(own)
  expect 0 "" on 1 "$CXLPOOL" migrate shm:bw data remote --no-progress
  expect 0 "" on 1 "$CXLPOOL" migrate shm:bw data dram --threads 2 --no-progress
  m2=$(own)
  on 1 "$CXLPOOL" destroy shm:bw --yes >/dev/null
  onbg 0 ucx_perftest -p 29600 >/dev/null 2>&1 </dev/null &
  BG+=($!)
  sleep 0.5
  SB=$("$PY" -c "import json; print(json.load(open('$RES'))['shards']['max_bytes'])")
  perf=$(on 1 timeout 60 ucx_perftest "$NET.1" -p 29600 -t ucp_am_bw -s "$SB" -n 500 -w 20 -f \
         2>/dev/null </dev/null | awk '$1 ~ /^[0-9]+$/ && NF == 8 {print $(NF-2)}' | tail -1)
  echo "link${CXLP_HOSTS3_RATE:+ shaped to $CXLP_HOSTS3_RATE}: host 1 staged the dataset" \
       "($STORED bytes) from host 0 at" \
       "$("$PY" -c "print('%.0f' % ($STORED / ($tb - $ta) / 1e6))") MB/s (cxlpool migrate," \
       "whole process; the migration's own figure $m1 MB/s, $m2 with 2 threads);" \
       "ucx_perftest ucp_am_bw, $SB-byte messages: ${perf:-?} MB/s"
fi
finish
