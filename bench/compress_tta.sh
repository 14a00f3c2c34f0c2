#!/usr/bin/env bash
# Time to accuracy with gradient compression (docs/COMPRESSION.md): MODEL
# (default LeNet-5; MODEL=mlp is the bandwidth-heavy 784-1024-1024-10, 1.9M
# parameters) on Fashion-MNIST, 2 ranks x 1 thread, per-rank batch BATCH
# (32), SGD momentum 0.9, lr LR (0.01), evaluation after every epoch until
# --target: `scaleout bench
# accuracy --compress M` for each method against PyTorch 1.13 DDP over gloo
# with its hooks (bench/torch_ddp_tta.py: none, fp16_compress_hook,
# powerSGD_hook), on shared memory (shm: one node) and across 2 emulated
# nodes of scripts/cluster.sh at a `tc tbf` rate (one rank per node).
# Repeats interleaved (scaleout and PyTorch alternate); prints a markdown
# table of medians (min-max). Takes /tmp/scaleout-cluster.lock while its
# cluster is up; on a shared machine run it under a benchmark lock (e.g.
# flock /tmp/scaleout-bench.lock), which it does not take itself. Root only
# for the cluster links.
#   bench/compress_tta.sh [REPEATS] [LINKS] [TARGET]     defaults: 3 "shm 1gbit" 0.85
#   METHODS="none fp16 topk:0.01 powersgd:2:10 auto" HOOKS="none fp16 powersgd:2:10" to choose
#   MODEL=mlp BATCH=128 LR=0.05 bench/compress_tta.sh 3 1gbit 0.85   (the bandwidth-heavy workload)
# The table adds each method's accuracy after epoch 1 and, for auto, the
# method it picked.
set -euo pipefail

repeats="${1:-3}" links="${2:-shm 1gbit}" target="${3:-0.85}"
methods="${METHODS:-none fp16 topk:0.01 powersgd:2:10}"
hooks="${HOOKS:-none fp16 powersgd:2:10}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SCALEOUT_CLUSTER="${SCALEOUT_CLUSTER:-sotta}"
cluster="$src/scripts/cluster.sh"
out="$(mktemp -d /tmp/scaleout-tta.XXXXXX)"
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
model="${MODEL:-lenet5}" batch="${BATCH:-32}" lr="${LR:-0.01}"
common=(bench accuracy --model "$model" --batch-size "$batch" --lr "$lr" --target "$target" --max-epochs 8 --seed 42)
peer=(--model "$model" --batch "$batch" --lr "$lr" --target "$target" --max-epochs 8 --np 2)

scaleout() { # scaleout LINK NAME METHOD
  local link=$1 name=$2 m=$3 launch=("$src/scripts/mpirun.sh" -np 2)
  [ "$link" = shm ] || launch=("$cluster" mpirun -np 2 --ranks-per-node 1)
  "${launch[@]}" "$src/build/scaleout" "${common[@]}" --compress "$m" --json "$out/$name.json" \
    --mllog "$out/$name.mllog" >"$out/$name.log" 2>&1 || { echo "compress_tta: $name failed: $(tail -3 "$out/$name.log")" >&2; exit 1; }
}

pytorch() { # pytorch LINK NAME HOOK
  local link=$1 name=$2 h=$3 pids=() port=$((29500 + RANDOM % 1000))
  if [ "$link" = shm ]; then
    timeout 600 /usr/bin/python3 "$src/bench/torch_ddp_tta.py" "${peer[@]}" --hook "$h" >"$out/$name.log" 2>&1 || pids=(x)
  else
    for r in 0 1; do
      GLOO_SOCKET_IFNAME=eth0 timeout 600 ip netns exec "$SCALEOUT_CLUSTER-node$((r + 1))" /usr/bin/python3 \
        "$src/bench/torch_ddp_tta.py" "${peer[@]}" --hook "$h" --rank $r --master 10.77.0.1:$port \
        >"$out/$name.r$r.log" 2>&1 &
      pids+=($!)
    done
    wait "${pids[@]}" && pids=() || pids=(x)
    cp "$out/$name.r0.log" "$out/$name.log"
  fi
  [ ${#pids[@]} -eq 0 ] || { echo "compress_tta: $name failed: $(tail -3 "$out/$name"*.log)" >&2; exit 1; }
  grep "^{" "$out/$name.log" | tail -1 >"$out/$name.peer.json"
}

for link in $links; do
  if [ "$link" != shm ]; then
    exec 9>/tmp/scaleout-cluster.lock
    flock 9
    "$cluster" down >/dev/null 2>&1 || true
    "$cluster" up 2 --rate "$link" >/dev/null
  fi
  for ((r = 1; r <= repeats; r++)); do
    for m in $methods; do
      tag=${m//:/_}
      if [ $((r % 2)) -eq 1 ]; then order="so pt"; else order="pt so"; fi
      for who in $order; do
        if [ $who = so ]; then scaleout "$link" "$link-$tag-so-$r" "$m"
        elif [[ " $hooks " == *" $m "* ]]; then pytorch "$link" "$link-$tag-pt-$r" "$m"; fi
      done
    done
  done
  if [ "$link" != shm ]; then
    "$cluster" down >/dev/null
    flock -u 9
  fi
done
echo "# runs in $out; $model Fashion-MNIST to $target, 2 ranks x 1 thread, batch $batch per rank, lr $lr; $(lscpu | sed -n 's/^Model name: *//p')"
/usr/bin/python3 - "$out" "$links" "$methods" <<'PY'
import glob, json, os, statistics, sys
d, links, methods = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def load(link, tag, who):
    so, pt = [], []
    for p in sorted(glob.glob(os.path.join(d, f"{link}-{tag}-{who}-*.json"))):
        if p.endswith(".peer.json"):
            continue
        if who == "so":
            j = json.load(open(p)); so.append(j)
    for p in sorted(glob.glob(os.path.join(d, f"{link}-{tag}-{who}-*.peer.json"))):
        pt.append(json.load(open(p)))
    return so if who == "so" else pt
def cell(v):
    if not v:
        return "–"
    return "%.1f (%.1f–%.1f)" % (statistics.median(v), min(v), max(v))
dense = next((j["results"]["dense_bytes_per_step"] for p in glob.glob(os.path.join(d, "*-so-*.json"))
              for j in [json.load(open(p))] if "dense_bytes_per_step" in j["results"]), 0)
print("| link | method | scaleout s to target | epochs | acc. after epoch 1 | KB/step/rank | PyTorch DDP s | PyTorch epochs | PyTorch / scaleout | auto picked |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
for link in links:
    for m in methods:
        tag = m.replace(":", "_")
        so = [j["results"] for j in load(link, tag, "so")]
        pt = load(link, tag, "pt")
        st = [r["time_to_accuracy_seconds"] for r in so if r["reached"]]
        pts = [r["time_to_accuracy_seconds"] for r in pt if r["reached"]]
        ep = "/".join(str(r["epochs"]) + ("" if r["reached"] else "✗") for r in so)
        pep = "/".join(str(r["epochs"]) + ("" if r["reached"] else "✗") for r in pt) or "–"
        kb = so[0].get("compress_bytes_per_step", dense) / 1e3 if so else 0
        ratio = "%.2f" % (statistics.median(pts) / statistics.median(st)) if st and pts else "–"
        acc1 = [e["test_accuracy"] for j in load(link, tag, "so") for e in j.get("epochs", [])[:1] if e.get("test_accuracy") is not None]
        acc = "%.4f" % statistics.median(acc1) if acc1 else "–"
        picks = "/".join(r["compress_auto"]["picked"] for r in so if "compress_auto" in r) or ""
        print(f"| {link} | {m} | {cell(st)} | {ep} | {acc} | {kb:.1f} | {cell(pts)} | {pep} | {ratio} | {picks} |")
PY
