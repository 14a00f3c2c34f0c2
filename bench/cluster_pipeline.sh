#!/usr/bin/env bash
# Pipeline stages against data parallelism across 2 emulated nodes of
# scripts/cluster.sh (one rank per node, 1 thread), at each link rate: the
# same global batch per step either as 2 data-parallel ranks x B/2 (every
# step allreduces every gradient across the link) or as 2 pipeline stages x
# M micro-batches (only activations and their diffs cross). Repeats
# interleaved, each launch under the benchmark lock; prints a markdown table
# of medians (docs/PERFORMANCE.md). Root only.
#   bench/cluster_pipeline.sh [REPEATS] [RATES] [MODEL] [BATCH] [M] [STEPS]
#   defaults: 3 "1gbit 10gbit" vgg16 8 4 3
set -euo pipefail

repeats="${1:-3}" rates="${2:-1gbit 10gbit}" model="${3:-vgg16}" batch="${4:-8}" m="${5:-4}" steps="${6:-3}"
. "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh" cluster-pipe
common=(train --model "$model" --dataset synthetic --synthetic-samples $((batch * (steps + 2) * 2)) --steps $((steps + 1))
        --warmup-steps 1 --eval-every -1 --progress none --comm-timeout 1200)

run() { # run NAME RATE REPEAT args...
  local name=$1 rate=$2 r=$3; shift 3
  cluster_train "$rate-$name-$r" 2 1 "${common[@]}" "$@"
}

for rate in $rates; do
  cluster_restart "$rate"
  for ((r = 1; r <= repeats; r++)); do
    if [ $((r % 2)) -eq 1 ]; then order="data pipeline"; else order="pipeline data"; fi
    for kind in $order; do
      if [ "$kind" = data ]; then run data "$rate" "$r" --batch-size $((batch / 2))
      else run pipeline "$rate" "$r" --batch-size "$batch" --pipeline-stages 2 --microbatches "$m"; fi
    done
  done
done
echo "# runs in $out; $model, global batch $batch per step, pipeline M=$m"
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
d = sys.argv[1]
runs = {}
for p in glob.glob(os.path.join(d, "*.json")):
    rate, kind, _ = os.path.basename(p)[:-5].split("-")
    j = json.load(open(p))
    runs.setdefault(rate, {}).setdefault(kind, []).append((j["images_per_sec"], j.get("pipeline", {})))
def med(v):
    return "%.2f (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))
print("| link | data parallel img/s | pipeline img/s | pipeline / data | pipeline bubble measured (formula) |")
print("|---|---:|---:|---:|---:|")
for rate in sorted(runs, key=lambda r: float(r.rstrip("gbit"))):
    dp = [x[0] for x in runs[rate]["data"]]
    pp = [x[0] for x in runs[rate]["pipeline"]]
    b = [x[1].get("bubble_measured", 0) for x in runs[rate]["pipeline"]]
    f = runs[rate]["pipeline"][0][1].get("bubble_formula", 0)
    print("| %s | %s | %s | %.2fx | %.3f (%.3f) |" % (rate, med(dp), med(pp), statistics.median(pp) / statistics.median(dp),
          statistics.median(b), f))
PY
