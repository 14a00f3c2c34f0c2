#!/usr/bin/env bash
# Hybrid layouts across 2 emulated nodes of scripts/cluster.sh: 4 ranks, 2 per
# node, as 2 pipeline stages x 2 data-parallel replicas placed both ways
# (stage-major: a replica's stages on one node, so gradients cross the link;
# replica-major: a stage's replicas on one node, so activations cross), and
# as 4 data-parallel ranks, at the same global batch. Repeats interleaved in
# rotating order, each launch under the benchmark lock; prints a markdown
# table of medians (docs/PERFORMANCE.md). With fewer than 4 cores the ranks
# share cores: compare the layouts with each other, not with other tables.
# Root only.
#   bench/cluster_hybrid.sh [REPEATS] [RATE] [MODEL] [BATCH] [M] [STEPS]
#   defaults: 3 1gbit vgg16 8 4 2   (BATCH: per replica of the pipeline)
set -euo pipefail

repeats="${1:-3}" rate="${2:-1gbit}" model="${3:-vgg16}" batch="${4:-8}" m="${5:-4}" steps="${6:-2}"
. "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh" cluster-hybrid
common=(train --model "$model" --dataset synthetic --synthetic-samples $((batch * (steps + 2) * 4)) --steps $((steps + 1))
        --warmup-steps 1 --eval-every -1 --progress none --comm-timeout 1200)

run() { # run NAME REPEAT args...
  local name=$1 r=$2; shift 2
  cluster_train "$name-$r" 4 2 "${common[@]}" "$@"
}

cluster_restart "$rate"
kinds=(data stage-major replica-major)
for ((r = 1; r <= repeats; r++)); do
  for ((i = 0; i < 3; i++)); do
    kind=${kinds[$(((i + r) % 3))]}
    if [ "$kind" = data ]; then run data "$r" --batch-size $((batch / 2))
    else run "$kind" "$r" --batch-size "$batch" --pipeline-stages 2 --microbatches "$m" --placement "$kind"; fi
  done
done
echo "# runs in $out; $model at $rate, global batch $((2 * batch)) per step, pipeline 2 stages x 2 replicas, M=$m"
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
d = sys.argv[1]
runs = {}
for p in glob.glob(os.path.join(d, "*.json")):
    kind = os.path.basename(p)[:-5].rsplit("-", 1)[0]
    j = json.load(open(p))
    runs.setdefault(kind, []).append((j["images_per_sec"], j.get("pipeline", {})))
def med(v):
    return "%.2f (%.2f-%.2f)" % (statistics.median(v), min(v), max(v))
dp = statistics.median(x[0] for x in runs["data"])
print("| layout | img/s | / data parallel | bubble measured (formula) |")
print("|---|---:|---:|---:|")
for kind in ("data", "stage-major", "replica-major"):
    v = [x[0] for x in runs[kind]]
    b = [x[1].get("bubble_measured") for x in runs[kind] if x[1]]
    bub = "%.3f (%.3f)" % (statistics.median(b), runs[kind][0][1]["bubble_formula"]) if b else "-"
    print("| %s | %s | %.2fx | %s |" % (kind if kind != "data" else "4 data-parallel ranks", med(v),
          statistics.median(v) / dp, bub))
PY
