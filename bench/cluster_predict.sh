#!/usr/bin/env bash
# `scaleout predict` against data-parallel training measured across emulated
# nodes of scripts/cluster.sh (one rank per node, 1 thread), at each link
# rate and node count. Each run writes a profile; predict is asked twice: with
# the per-layer times it measures here in one process (its default) and with
# those of the run's own profile (rank 0), which carry the slowdown of ranks
# sharing the VM's cores, so that column's error is the communication and
# overlap model's alone. Repeats interleaved, each launch under the benchmark
# lock; prints a markdown table of medians (docs/PERFORMANCE.md). Root only.
#   bench/cluster_predict.sh [REPEATS] [RATES] [NODES] [MODELS] [LATENCY]
#   defaults: 3 "1gbit 10gbit" "2 4" "lenet5:64:60 resnet20:64:20 resnet50:16:6" 30us
#   (a model is NAME:BATCH:TIMED_STEPS; 2 warm-up steps before them)
set -euo pipefail

repeats="${1:-3}" rates="${2:-1gbit 10gbit}" node_counts="${3:-2 4}"
models="${4:-lenet5:64:60 resnet20:64:20 resnet50:16:6}" latency="${5:-30us}"
. "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh" cluster-predict
warm=2

predict() { # predict NAME MODEL BATCH NODES RATE [predict args...]
  local name=$1 model=$2 batch=$3 n=$4 rate=$5; shift 5
  flock /tmp/scaleout-bench.lock "$src/build/scaleout" predict --model "$model" --batch-size "$batch" \
    --nodes "$n" --link "$rate" --latency "$latency" --json "$out/$name.json" "$@" >"$out/$name.log" 2>&1 ||
    { echo "cluster_predict: $name failed: $(tail -3 "$out/$name.log")" >&2; exit 1; }
}

for rate in $rates; do
  for n in $node_counts; do
    cluster_restart "$rate" "$n"
    for ((r = 1; r <= repeats; r++)); do
      for spec in $models; do
        IFS=: read -r model batch steps <<<"$spec"
        run="$rate-$n-$model-$r"
        cluster_train "$run" "$n" 1 train --model "$model" --dataset synthetic --batch-size "$batch" \
          --synthetic-samples $((batch * (steps + warm + 1))) --steps $((steps + warm)) --warmup-steps $warm \
          --eval-every -1 --progress none --profile "$out/$run.prof"
        predict "pred-here-$run" "$model" "$batch" "$n" "$rate"
        predict "pred-prof-$run" "$model" "$batch" "$n" "$rate" --compute-from "$out/$run.prof/profile.json"
      done
    done
  done
done
echo "# runs in $out; 1 rank per node, latency given as $latency"
/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
d = sys.argv[1]
cells = {}
for path in glob.glob(os.path.join(d, "*-*-*-*.json")):
    base = os.path.basename(path)[:-5]
    if base.startswith("pred-"):
        continue
    rate, n, model, _ = base.split("-")
    c = cells.setdefault((model, rate, int(n)), {"run": [], "here": [], "prof": []})
    c["run"].append(json.load(open(path))["images_per_sec"])
    for kind in ("here", "prof"):
        p = json.load(open(os.path.join(d, "pred-%s-%s.json" % (kind, base))))
        c[kind].append(p["points"][-1]["images_per_sec"])
def cell(v):
    return "%s (%s–%s)" % tuple(f"{x:,.1f}" for x in (statistics.median(v), min(v), max(v)))
print("| model | link | nodes | measured img/s | predicted (layers timed here) | error | predicted (layers from the run's profile) | error |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
errs = {"here": [], "prof": []}
order = {"lenet5": 0, "resnet20": 1, "resnet50": 2}
for key in sorted(cells, key=lambda k: (order.get(k[0], 9), k[0], float(k[1].rstrip("gbit")), k[2])):
    model, rate, n = key
    c = cells[key]
    m = statistics.median(c["run"])
    e = {k: statistics.median(c[k]) / m - 1 for k in ("here", "prof")}
    for k in e:
        errs[k].append(abs(e[k]))
    print("| %s | %s | %d | %s | %s | %+.1f%% | %s | %+.1f%% |" % (
        model, rate, n, cell(c["run"]), cell(c["here"]), 100 * e["here"], cell(c["prof"]), 100 * e["prof"]))
for k, name in (("here", "layers timed here"), ("prof", "layers from the profile")):
    print("# %s: median |error| %.1f%%, worst %.1f%%" % (name, 100 * statistics.median(errs[k]), 100 * max(errs[k])))
PY
