#!/usr/bin/env bash
# What only sharding makes possible: VGG-16 with AdamW on 4 ranks under
# --max-memory per rank. `scaleout plan --strategy all` first (memory per rank
# and step time of dp, zero1, zero2, zero3 and the fastest that fits), then
# dp under the cap (refused at set-up, exit 2), zero3 under the cap, and dp
# without it (the throughput zero3 is held to), repeats interleaved; prints
# the plan's memory table beside the one each run accounted (--json), with
# the peak resident sets. 4 ranks on this 2-core VM are oversubscribed (two
# ranks per core). Run it alone on the machine. A run's step time is the
# median of its timed steps, img/s the global batch over it; the table gives
# the median (min-max) over the repeats.
#   bench/shard_vgg.sh [CAP] [BATCH] [STEPS] [REPEATS]     defaults: 1800M 2 3 2
#   WORLD=2 runs 2 ranks instead of 4; SHARDED="zero1 zero3" (default) chooses the sharded strategies run under the cap
#   UNIT=32 cuts dense layers above 32 MiB into row chunks (--shard-unit; default layer); UNIT=default
#   passes no --shard-unit (the strategies' own units: buckets, zero3's auto, 32 MiB chunks)
#   MODEL=gpt2-medium another zoo model (a GPT-2 on synthetic token ids at train's --seq-len 64)
set -euo pipefail
world="${WORLD:-4}" model="${MODEL:-vgg16}" unit="${UNIT:-layer}"
cap="${1:-1800M}" batch="${2:-2}" steps="${3:-3}" repeats="${4:-2}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$src/build/scaleout"
out="$(mktemp -d /tmp/scaleout-shard-vgg.XXXXXX)"
warm=1
unit_flag=(--shard-unit "$unit")
[ "$unit" = default ] && unit_flag=()
common=(train --model "$model" --dataset synthetic --batch-size "$batch" --synthetic-samples $((world * batch * (steps + warm + 1)))
        --steps $((steps + warm)) --warmup-steps $warm --eval-every -1 --progress none --optimizer adamw --lr 0.0001)

"$bin" plan --model "$model" --strategy all --world "$world" --batch-size "$batch" --optimizer adamw --max-memory "$cap" \
  "${unit_flag[@]}" --json "$out/plan.json" | tee "$out/plan.txt"

"$src/scripts/mpirun.sh" -np "$world" "$bin" "${common[@]}" --strategy dp --max-memory "$cap" >"$out/dp-capped.log" 2>&1 &&
  { echo "shard_vgg: dp trained under --max-memory $cap: choose a smaller cap" >&2; exit 1; }
grep -q -- "--max-memory" "$out/dp-capped.log" ||
  { echo "shard_vgg: dp under the cap failed for another reason: $(head -3 "$out/dp-capped.log")" >&2; exit 1; }
echo "dp under --max-memory $cap: exit 2: $(grep -m1 -- '--max-memory' "$out/dp-capped.log")"

for ((r = 1; r <= repeats; r++)); do
  for who in ${SHARDED:-zero1 zero3} dp; do
    extra=()
    [ "$who" != dp ] && extra=(--max-memory "$cap" "${unit_flag[@]}")
    "$src/scripts/mpirun.sh" -np "$world" "$bin" "${common[@]}" --strategy "$who" "${extra[@]}" \
      --json "$out/$who-$r.json" >"$out/$who-$r.log" 2>&1 ||
      { echo "shard_vgg: $who failed: $(tail -3 "$out/$who-$r.log")" >&2; exit 1; }
  done
done
echo "# runs in $out; $world ranks x 1 thread on 2 cores, $model b$batch per rank, AdamW, --shard-unit $unit"
WARM=$warm /usr/bin/python3 - "$out" "$repeats" "$cap" "$((world * batch))" ${SHARDED:-zero1 zero3} <<'PY'
import json, os, statistics, sys
d, repeats, cap, per_step, sharded = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), sys.argv[5:]
plan = {r["strategy"]: r for r in json.load(open(os.path.join(d, "plan.json")))["strategies"]}
runs = {w: [json.load(open(os.path.join(d, f"{w}-{r}.json"))) for r in range(1, repeats + 1)] for w in sharded + ["dp"]}
# A run's step time is the median of its timed steps (step_seconds after the
# warm-up): stalls of the VM of several seconds hit single steps of any strategy.
warm = int(os.environ.get("WARM", "1"))
ms = {w: [1000 * statistics.median(j["step_seconds"][warm:]) for j in runs[w]] for w in runs}
ips = {w: [1000 * per_step / v for v in ms[w]] for w in ms}
mb = lambda x: f"{x / 1e6:,.0f}"
print(f"| strategy | plan: weights / grads / optim / act / total MB | measured rank 0 (accounted) | peak RSS max rank MB |")
print("|---|---|---|---:|")
for s in ("dp", "zero1", "zero2", "zero3"):
    p = plan[s]
    row = f"| {s} | {mb(p['weights'])} / {mb(p['gradients'])} / {mb(p['optimizer'])} / {mb(p['activations'])} / {mb(p['total'])}"
    if s in runs:
        m = runs[s][0]["ranks"][0]["memory_accounted"]
        rss = max(k["peak_rss_bytes"] for j in runs[s] for k in j["ranks"])
        row += f" | {mb(m['weights'])} / {mb(m['gradients'])} / {mb(m['optimizer'])} / {mb(m['activations'])} / {mb(m['total'])} | {mb(rss)} |"
    else:
        row += " | | |"
    print(row)
med = lambda v: f"{statistics.median(v):.3f} ({min(v):.3f}-{max(v):.3f})"
msf = lambda v: f"{statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f})"
print(f"dp without the cap: {med(ips['dp'])} img/s, step {msf(ms['dp'])} ms")
for s in sharded:
    print(f"{s} under --max-memory {cap}: {med(ips[s])} img/s, step {msf(ms[s])} ms, ratio to dp {statistics.median(ips[s]) / statistics.median(ips['dp']):.3f}")
PY
