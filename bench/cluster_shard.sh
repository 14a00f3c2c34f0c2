#!/usr/bin/env bash
# Sharded data parallelism across 2 emulated nodes of scripts/cluster.sh, one
# rank per node, 1 thread, AdamW: scaleout --strategy dp, zero1, zero2, zero3
# at each link rate, repeats interleaved; prints a markdown table of medians
# and each strategy's ratio to dp (docs/PERFORMANCE.md). Root only; takes
# /tmp/scaleout-cluster.lock. Run it whole under a benchmark lock on a shared machine (it takes
# no benchmark lock itself, unlike cluster_train's launches).
#   [STRATEGIES="dp zero1 zero2 zero3"] bench/cluster_shard.sh [REPEATS] [RATES] [MODELS]
#   defaults: 3 "1gbit 10gbit" "resnet20:64:20 resnet50:16:4"   (NAME:BATCH:TIMED_STEPS)
# A strategy may name a --compress method after a plus: zero2+bf16 is
# --strategy zero2 --compress bf16 (its ratio is still to plain dp), and
# zero3's parameter gather wire after an at: zero3@bf16 is --shard-gather bf16.
set -euo pipefail

repeats="${1:-3}" rates="${2:-1gbit 10gbit}" models="${3:-resnet20:64:20 resnet50:16:4}"
exec 9>/tmp/scaleout-cluster.lock
flock 9
. "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh" cluster-shard
warm=2
strategies="${STRATEGIES:-dp zero1 zero2 zero3}"

for rate in $rates; do
  cluster_restart "$rate"
  for ((r = 1; r <= repeats; r++)); do
    for spec in $models; do
      IFS=: read -r model batch steps <<<"$spec"
      order=$strategies
      [ $((r % 2)) -eq 0 ] && order=$(echo "$strategies" | tr ' ' '\n' | tac | tr '\n' ' ')
      for who in $order; do
        s=${who%%[+@]*} compress=none gather=fp32
        case $who in *+*) compress=${who#*+} ;; *@*) gather=${who#*@} ;; esac
        gopt=()
        [ "$gather" != fp32 ] && gopt=(--shard-gather "$gather")
        name="$rate-$model-$who-$r"
        "$cluster" mpirun -np 2 --ranks-per-node 1 "$src/build/scaleout" train --model "$model" \
          --dataset synthetic --batch-size "$batch" --synthetic-samples $((batch * (steps + warm + 1))) \
          --steps $((steps + warm)) --warmup-steps $warm --eval-every -1 --progress none --optimizer adamw \
          --lr 0.001 --strategy "$s" --compress "$compress" "${gopt[@]}" --json "$out/$name.json" >"$out/$name.log" 2>&1 ||
          { echo "cluster_shard: $name failed: $(tail -3 "$out/$name.log")" >&2; exit 1; }
      done
    done
  done
done
echo "# runs in $out; 2 nodes x 1 rank, 1 thread, AdamW"
/usr/bin/python3 - "$out" $strategies <<'PY'
import glob, json, os, statistics, sys
d = sys.argv[1]
cells = {}
for path in glob.glob(os.path.join(d, "*-*-*-*.json")):
    rate, model, who, _ = os.path.basename(path)[:-5].split("-")
    j = json.load(open(path))
    c = cells.setdefault((model, rate), {}).setdefault(who, {"ips": [], "rss": []})
    c["ips"].append(j["images_per_sec"])
    c["rss"].append(max(r["peak_rss_bytes"] for r in j["ranks"]))
def cell(v):
    return "%s (%s–%s)" % tuple(f"{x:,.1f}" for x in (statistics.median(v), min(v), max(v)))
print("| model | link | strategy | img/s | / dp | peak RSS per rank MB |")
print("|---|---|---|---:|---:|---:|")
for (model, rate) in sorted(cells, key=lambda k: (k[0], float(k[1].rstrip("gbit")))):
    dp = statistics.median(cells[(model, rate)]["dp"]["ips"])
    for who in sys.argv[2:]:
        c = cells[(model, rate)].get(who)
        if c:
            print(f"| {model} | {rate} | {who} | {cell(c['ips'])} | {statistics.median(c['ips']) / dp:.3f} | "
                  f"{max(c['rss']) / 1e6:,.0f} |")
PY
