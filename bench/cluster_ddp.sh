#!/usr/bin/env bash
# Data-parallel training across 2 emulated nodes of scripts/cluster.sh, one
# rank per node, 1 thread: scaleout (`train --allreduce auto`: hier, its step
# across the nodes on scaleout's TCP ring) against PyTorch DDP over gloo, the
# same model, per-rank batch and optimizer on synthetic data (bench/torch_ddp.py,
# one process per node, gloo on the nodes' eth0). Repeats interleaved, each
# launch under the benchmark lock; prints a markdown table of medians
# (docs/PERFORMANCE.md). Root only.
#   bench/cluster_ddp.sh [REPEATS] [RATES] [MODELS]
#   defaults: 3 "1gbit 10gbit" "resnet20:64:30 resnet50:16:6"   (NAME:BATCH:TIMED_STEPS)
set -euo pipefail

repeats="${1:-3}" rates="${2:-1gbit 10gbit}" models="${3:-resnet20:64:30 resnet50:16:6}"
. "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh" cluster-ddp
warm=3

ddp() { # ddp NAME MODEL BATCH STEPS: PyTorch DDP, rank r in node r+1
  local name=$1 model=$2 batch=$3 steps=$4 port=$((29500 + RANDOM % 1000)) pids=()
  for r in 0 1; do
    GLOO_SOCKET_IFNAME=eth0 ip netns exec "$SCALEOUT_CLUSTER-node$((r + 1))" /usr/bin/python3 \
      "$src/bench/torch_ddp.py" --model "$model" --batch "$batch" --np 2 --steps "$steps" --warmup "$warm" \
      --rank $r --master 10.77.0.1:$port >"$out/$name.r$r.log" 2>&1 &
    pids+=($!)
  done
  wait "${pids[@]}" || { echo "cluster_ddp: $name failed: $(tail -3 "$out/$name".r*.log)" >&2; exit 1; }
  tail -1 "$out/$name.r0.log" >"$out/$name.json"
}

for rate in $rates; do
  cluster_restart "$rate"
  for ((r = 1; r <= repeats; r++)); do
    for spec in $models; do
      IFS=: read -r model batch steps <<<"$spec"
      if [ $((r % 2)) -eq 1 ]; then order="scaleout ddp"; else order="ddp scaleout"; fi
      for who in $order; do
        if [ "$who" = scaleout ]; then
          cluster_train "$rate-$model-scaleout-$r" 2 1 train --model "$model" --dataset synthetic \
            --batch-size "$batch" --synthetic-samples $((batch * (steps + warm + 1))) --steps $((steps + warm)) \
            --warmup-steps $warm --eval-every -1 --progress none --allreduce auto
        else
          flock /tmp/scaleout-bench.lock bash -c "$(declare -f ddp); src='$src' out='$out' warm=$warm \
            SCALEOUT_CLUSTER='$SCALEOUT_CLUSTER' ddp '$rate-$model-ddp-$r' $model $batch $steps"
        fi
      done
    done
  done
done
echo "# runs in $out; 2 nodes x 1 rank, 1 thread"
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
d = sys.argv[1]
cells = {}
for path in glob.glob(os.path.join(d, "*-*-*-*.json")):
    rate, model, who, _ = os.path.basename(path)[:-5].split("-")
    cells.setdefault((model, rate), {}).setdefault(who, []).append(json.load(open(path))["images_per_sec"])
def cell(v):
    return "%s (%s–%s)" % tuple(f"{x:,.1f}" for x in (statistics.median(v), min(v), max(v)))
print("| model | link | scaleout img/s | PyTorch DDP (gloo) img/s | ratio |")
print("|---|---|---:|---:|---:|")
for (model, rate) in sorted(cells, key=lambda k: (k[0], float(k[1].rstrip("gbit")))):
    c = cells[(model, rate)]
    print("| %s | %s | %s | %s | %.2fx |" % (model, rate, cell(c["scaleout"]), cell(c["ddp"]),
                                             statistics.median(c["scaleout"]) / statistics.median(c["ddp"])))
PY
