#!/usr/bin/env bash
# BF16 against FP32 tensors between pipeline stages across 2 emulated nodes
# of scripts/cluster.sh (one stage per node, 1 thread), both computing in
# BF16 (--precision bf16): the stages' activations and diffs as BF16 (the
# default under bf16) or FP32 (SCALEOUT_PIPE_WIRE=f32). Repeats interleaved,
# each launch under the benchmark lock; prints a markdown table of medians
# (docs/PERFORMANCE.md, "Mixed precision"). Root, and a CPU with AVX512_BF16.
#   bench/cluster_pipe_bf16.sh [REPEATS] [RATE] [MODEL] [BATCH] [M] [STEPS]
#   defaults: 3 1gbit resnet20 64 4 6
set -euo pipefail

repeats="${1:-3}" rate="${2:-1gbit}" model="${3:-resnet20}" batch="${4:-64}" m="${5:-4}" steps="${6:-6}"
. "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh" cluster-pipe-bf16
common=(--model "$model" --dataset synthetic --synthetic-samples $((batch * (steps + 2))) --steps $((steps + 1))
        --warmup-steps 1 --eval-every -1 --progress none --comm-timeout 1200 --precision bf16
        --batch-size "$batch" --pipeline-stages 2 --microbatches "$m" --partition memory) # the same cut in every run

cluster_restart "$rate"
for ((r = 1; r <= repeats; r++)); do
  if [ $((r % 2)) -eq 1 ]; then order="bf16 f32"; else order="f32 bf16"; fi
  for wire in $order; do # the ranks inherit the launcher's environment (the table reads the wire from --json)
    SCALEOUT_PIPE_WIRE="$wire" cluster_train "$wire-$r" 2 1 train "${common[@]}"
  done
done
echo "# runs in $out; $model, batch $batch per step, 2 stages x $m micro-batches, --precision bf16, $rate"
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
runs = {}
for p in glob.glob(os.path.join(sys.argv[1], "*.json")):
    j = json.load(open(p))
    wire = j["pipeline"]["wire"]
    runs.setdefault(wire, []).append((statistics.median(j["step_seconds"][1:]) * 1e3, j["pipeline"]))
def med(v):
    return "%.1f (%.1f–%.1f)" % (statistics.median(v), min(v), max(v))
print("| tensors between stages | step ms | KB per step on the link | bubble measured |")
print("|---|---:|---:|---:|")
for wire in ("f32", "bf16"):
    r = runs[wire]
    print("| %s | %s | %.0f | %.3f |" % (wire, med([x[0] for x in r]), r[0][1]["bytes_per_step"] / 1e3,
          statistics.median(x[1]["bubble_measured"] for x in r)))
t = {w: statistics.median(x[0] for x in runs[w]) for w in runs}
print("\nbf16 / f32 step time: %.3f" % (t["bf16"] / t["f32"]))
PY
