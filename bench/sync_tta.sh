#!/usr/bin/env bash
# Relaxed consistency against synchronous SGD (docs/COMPRESSION.md, "Relaxed
# consistency"): LeNet-5 on Fashion-MNIST, 2 ranks x 1 thread, batch 32 per
# rank, evaluation after every epoch.
#  tta:   `scaleout bench accuracy --sync M` until --target, on shared memory
#         (shm) and across 2 emulated nodes of scripts/cluster.sh at a `tc tbf`
#         rate (one rank per node): seconds to the target, epochs, accuracy
#         after epoch 2, bytes per step.
#  slow:  `scaleout train` images/s of each method with rank 1 slowed by 30% of
#         its compute (SCALEOUT_TEST_SLOW_RANK, a test-hooks build) and without,
#         and the profiler's POP load balance and communication efficiency of
#         the slowed runs (--profile: where sync's stall shows).
# Repeats interleave the methods; prints markdown tables of medians (min-max).
# Takes /tmp/scaleout-cluster.lock while its cluster is up; on a shared
# machine run it under a benchmark lock. Root only for the cluster links.
#   bench/sync_tta.sh [REPEATS] [LINKS] [TARGET] [PARTS]   defaults: 1 "shm 1gbit" 0.895 "tta slow"
#   METHODS="sync local:8 diloco:8 gossip:ring" to choose; DILOCO_FLAGS (default
#   "--optimizer adamw --lr 0.001") for DiLoCo's inner optimizer
set -euo pipefail

repeats="${1:-1}" links="${2:-shm 1gbit}" target="${3:-0.895}" parts="${4:-tta slow}"
methods="${METHODS:-sync local:8 diloco:8 gossip:ring}"
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SCALEOUT_CLUSTER="${SCALEOUT_CLUSTER:-sosync}"
cluster="$src/scripts/cluster.sh"
out="$(mktemp -d /tmp/scaleout-sync.XXXXXX)"
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
common=(--model lenet5 --batch-size 32 --seed 42)

# The method's flags: DiLoCo's inner optimizer is AdamW (as in the paper),
# the others SGD with momentum 0.9 at lr 0.01.
flags() {
  case "$1" in
    diloco:*) echo "--sync $1 ${DILOCO_FLAGS:---optimizer adamw --lr 0.001}" ;;
    *) echo "--sync $1 --lr 0.01" ;;
  esac
}

launch() { # launch LINK: the launcher for 2 ranks on LINK
  if [ "$1" = shm ]; then echo "$src/scripts/mpirun.sh -np 2"
  else echo "$cluster mpirun -np 2 --ranks-per-node 1"; fi
}

tta() { # tta LINK NAME METHOD
  # shellcheck disable=SC2046
  $(launch "$1") "$src/build/scaleout" bench accuracy "${common[@]}" $(flags "$3") --target "$target" \
    --max-epochs 12 --json "$out/$2.json" >"$out/$2.log" 2>&1 ||
    { echo "sync_tta: $2 failed: $(tail -3 "$out/$2.log")" >&2; exit 1; }
}

slow() { # slow LINK NAME METHOD SLOW: 1500 steps, images/s in NAME.json
  # shellcheck disable=SC2046
  SCALEOUT_TEST_SLOW_RANK="$4" $(launch "$1") "$src/build/scaleout" train "${common[@]}" $(flags "$3") \
    --steps 1504 --eval-every -1 --progress none --json "$out/$2.json" --profile "$out/$2.prof" \
    >"$out/$2.log" 2>&1 ||
    { echo "sync_tta: $2 failed: $(tail -3 "$out/$2.log")" >&2; exit 1; }
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
      [[ " $parts " == *" tta "* ]] && tta "$link" "tta-$link-$tag-$r" "$m"
      if [[ " $parts " == *" slow "* ]]; then
        slow "$link" "fast-$link-$tag-$r" "$m" ""
        slow "$link" "slow-$link-$tag-$r" "$m" "1:0.3"
      fi
    done
  done
  if [ "$link" != shm ]; then
    "$cluster" down >/dev/null
    flock -u 9
  fi
done
echo "# runs in $out; LeNet-5 Fashion-MNIST, 2 ranks x 1 thread, batch 32 per rank; $(lscpu | sed -n 's/^Model name: *//p')"
/usr/bin/python3 - "$out" "$links" "$methods" "$target" <<'PY'
import glob, json, os, statistics, sys
d, links, methods, target = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), float(sys.argv[4])
def runs(prefix):
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, prefix + "-*.json")))]
def cell(v, fmt="%.1f"):
    if not v:
        return "–"
    m = fmt % statistics.median(v)
    return m if len(v) == 1 else "%s (%s–%s)" % (m, fmt % min(v), fmt % max(v))
def acc_at(j, e):
    return next((x["test_accuracy"] for x in j["epochs"] if x["epoch"] == e and x["test_accuracy"] is not None), None)
if runs("tta-*"):
    print(f"\n| link | method | s to {target:.1%} | epochs | accuracy after epoch 2 | KB sent/step/rank |")
    print("|---|---|---:|---:|---:|---:|")
    for link in links:
        for m in methods:
            rs = runs(f"tta-{link}-{m.replace(':', '_')}")
            if not rs:
                continue
            res = [j["results"] for j in rs]
            st = [r["time_to_accuracy_seconds"] for r in res if r["reached"]]
            ep = "/".join(str(r["epochs"]) + ("" if r["reached"] else "✗") for r in res)
            acc = [a * 100 for a in (acc_at(j, 2) for j in rs) if a is not None]
            kb = res[0].get("sync_bytes_per_step", 61706 * 4) / 1e3
            print(f"| {link} | {m} | {cell(st)} | {ep} | {cell(acc, '%.2f')}% | {kb:.1f} |")
if runs("fast-*"):
    print("\n| link | method | images/s | images/s, rank 1 30% slower | kept | load balance (slowed) | "
          "communication efficiency (slowed) |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for link in links:
        for m in methods:
            tag = m.replace(":", "_")
            f = [j["images_per_sec"] for j in runs(f"fast-{link}-{tag}")]
            s = [j["images_per_sec"] for j in runs(f"slow-{link}-{tag}")]
            pop = [json.load(open(p))["pop"] for p in sorted(glob.glob(os.path.join(d, f"slow-{link}-{tag}-*.prof",
                                                                                   "profile.json")))]
            lb = [p["load_balance"] for p in pop]
            ce = [p["comm_efficiency"] for p in pop]
            if f and s:
                print(f"| {link} | {m} | {cell(f, '%.0f')} | {cell(s, '%.0f')} | "
                      f"{statistics.median(s) / statistics.median(f):.2f} | {cell(lb, '%.2f')} | {cell(ce, '%.2f')} |")
PY
