#!/usr/bin/env bash
# BF16 against FP32 at a fixed budget and to a target (issue 38), on
# Fashion-MNIST, same seed for both precisions:
#   lenet5     LeNet-5, 10 epochs, best test accuracy (goal: within 0.3%)
#   resnet20   ResNet-20, 3 epochs, best test accuracy (goal: within 0.5%);
#              one precision per invocation keeps each under 8 minutes:
#              resnet20-fp32, resnet20-bf16
#   tta        LeNet-5 time to 89.5% test accuracy (evaluated every 100 steps),
#              REPEATS (3) interleaved fp32/bf16 pairs, seeds 42.. (goal: BF16 <= 0.75 of FP32)
#   table      the results so far: best accuracies, their difference, TTA medians (min-max)
# Every part appends to OUT (default /tmp/scaleout-bf16acc) and skips runs already there.
#   bench/bf16_accuracy.sh build/scaleout lenet5
#   ... resnet20-fp32; ... resnet20-bf16; ... tta; bench/bf16_accuracy.sh build/scaleout table
set -eu
bin=$(realpath "$1") part=$2
out=${OUT:-/tmp/scaleout-bf16acc} threads=${THREADS:-1} repeats=${REPEATS:-3}
mkdir -p "$out"

run() { # run NAME ARGS...: `bench accuracy ARGS --json $out/NAME.json`, unless already there
  local name=$1; shift
  [ -s "$out/$name.json" ] && return 0
  "$bin" bench accuracy --model "$@" --threads "$threads" --mllog /dev/null --json "$out/$name.json.tmp" \
    >"$out/$name.log" 2>&1 && mv "$out/$name.json.tmp" "$out/$name.json" ||
    echo "bf16_accuracy: $name failed: $(tail -3 "$out/$name.log")" >&2
}

case $part in
lenet5)
  for p in fp32 bf16; do run "lenet5-$p" lenet5 --target 1 --max-epochs 10 --seed 42 --precision $p; done ;;
resnet20-fp32 | resnet20-bf16)
  run "$part" resnet20 --target 1 --max-epochs 3 --seed 42 --precision "${part#resnet20-}" ;;
tta)
  for ((s = 42; s < 42 + repeats; s++)); do
    for p in fp32 bf16; do
      run "tta-$p-$s" lenet5 --target 0.895 --max-epochs 10 --eval-steps 100 --seed $s --precision $p
    done
  done ;;
table) ;;
*) echo "bf16_accuracy: unknown part '$part' (lenet5, resnet20-fp32, resnet20-bf16, tta, table)" >&2; exit 2 ;;
esac

/usr/bin/python3 - "$out" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
def load(name):
    p = os.path.join(out, name + ".json")
    return json.load(open(p)) if os.path.exists(p) else None
env = None
for model, epochs, goal in (("lenet5", 10, 0.003), ("resnet20", 3, 0.005)):
    r = {p: load(f"{model}-{p}") for p in ("fp32", "bf16")}
    if not all(r.values()):
        continue
    env = env or r["fp32"].get("environment")
    best = {p: max(e["test_accuracy"] for e in r[p]["epochs"]) for p in r}
    d = best["bf16"] - best["fp32"]
    print(f"{model}, {epochs} epochs, seed 42: best test accuracy fp32 {best['fp32']:.4f}, bf16 {best['bf16']:.4f}, "
          f"bf16 - fp32 {d:+.4f} ({'within' if abs(d) <= goal else 'NOT within'} {goal:.1%})")
tta = {p: [] for p in ("fp32", "bf16")}
for f in sorted(glob.glob(os.path.join(out, "tta-*.json"))):
    r = json.load(open(f))
    env = env or r.get("environment")
    p = os.path.basename(f).split("-")[1]
    res = r["results"]
    tta[p].append(res["time_to_accuracy_seconds"] if res.get("reached") else float("inf"))
if tta["fp32"] and tta["bf16"]:
    fmt = lambda v: f"{statistics.median(v):.1f} s ({min(v):.1f}-{max(v):.1f}, {len(v)} seeds)"
    ratio = statistics.median(tta["bf16"]) / statistics.median(tta["fp32"])
    print(f"LeNet-5 to 89.5%: fp32 {fmt(tta['fp32'])}, bf16 {fmt(tta['bf16'])}, bf16/fp32 {ratio:.2f} (goal <= 0.75)")
if env:
    print(f"CPU: {env.get('cpu_model')}, kernels {env.get('isa')}, BF16 {env.get('bf16')}")
PY
