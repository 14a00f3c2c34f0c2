#!/usr/bin/env bash
# Relaxed consistency against synchronous SGD (docs/COMPRESSION.md, "Relaxed
# consistency"): LeNet-5 on Fashion-MNIST, NP (2) ranks x 1 thread, batch 32
# per rank, evaluation after every epoch.
#  tta:   `scaleout bench accuracy --sync M` until --target, on shared memory
#         (shm) and across emulated nodes of scripts/cluster.sh at a `tc tbf`
#         rate (RPN ranks per node, 1): seconds to the target, epochs,
#         accuracy after epoch ACC_EPOCH (2), bytes per step. The methods in
#         PEERS (default "sync local:8") also run on PyTorch 1.13 DDP over gloo
#         (bench/torch_ddp_tta.py: sync = plain DDP, local:H[@S] = its
#         post-local SGD with PostLocalSGDOptimizer and PeriodicModelAverager),
#         interleaved. local:H@S is `--sync local:H --local-after S`.
#  slow:  `scaleout train` images/s of each method with rank 1 slowed by 30% of
#         its compute (SCALEOUT_TEST_SLOW_RANK, a test-hooks build) and without,
#         and the profiler's POP load balance and communication efficiency of
#         the slowed runs (--profile: where sync's stall shows).
# One seed per repeat. OUT=DIR appends to a results directory (runs already
# there are skipped), so a matrix splits into short invocations; `--table DIR`
# prints the time-to-accuracy medians (bench/tta_table.py). Takes
# /tmp/scaleout-cluster.lock while its cluster is up; run it under the
# benchmark lock (/work/bin/so-bench). Root only for the cluster links.
#   bench/sync_tta.sh [REPEATS] [LINKS] [TARGET] [PARTS]   defaults: 1 "shm 1gbit" 0.895 "tta slow"
#   bench/sync_tta.sh --table DIR
#   METHODS="sync local:8 diloco:8 gossip:ring" to choose; DILOCO_FLAGS (default
#   "--optimizer adamw --lr 0.001") for DiLoCo's inner optimizer
set -euo pipefail

if [ "${1:-}" = --table ]; then
  exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/tta_table.py" "${2:?--table needs a directory}" \
    --acc-epoch "${ACC_EPOCH:-2}" --baseline sync "${@:3}"
fi
repeats="${1:-1}" links="${2:-shm 1gbit}" target="${3:-0.895}" parts="${4:-tta slow}"
methods="${METHODS:-sync local:8 diloco:8 gossip:ring}"
peers="${PEERS-sync local:8}"
# shellcheck source=bench/tta_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/tta_lib.sh" sosync sync
common=(--model lenet5 --batch-size 32)

# The method's flags: DiLoCo's inner optimizer is AdamW (as in the paper),
# the others SGD with momentum 0.9 at lr 0.01.
flags() {
  case "$1" in
    diloco:*) echo "$(tta_method_flags "$1") ${DILOCO_FLAGS:---optimizer adamw --lr 0.001}" ;;
    *) echo "$(tta_method_flags "$1") --lr 0.01" ;;
  esac
}

tta() { # tta LINK NAME METHOD SEED WHO: one time-to-accuracy run of scaleout (so) or PyTorch (pt)
  tta_done "$2" && return 0
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$3" "$5" "$4" "$2.json" >>"$out/index.tsv"
  # shellcheck disable=SC2046
  if [ "$5" = so ]; then
    tta_scaleout "$1" "$2" bench accuracy "${common[@]}" --seed "$4" $(flags "$3") --target "$target" --max-epochs 12
  else
    tta_torch "$1" "$2" --model lenet5 --batch 32 --lr 0.01 --seed "$4" $(tta_peer_flags "$3") --target "$target" \
      --max-epochs 12
  fi
}

slow() { # slow LINK NAME METHOD SEED SLOW: 1500 steps, images/s in NAME.json
  tta_done "$2" && return 0
  # shellcheck disable=SC2046
  SCALEOUT_TEST_SLOW_RANK="$5" tta_scaleout "$1" "$2" train "${common[@]}" --seed "$4" $(flags "$3") \
    --steps 1504 --eval-every -1 --progress none --profile "$out/$2.prof"
}

for link in $links; do
  tta_link_up "$link"
  for seed in $(tta_seeds "$repeats"); do
    for m in $methods; do
      tag=$(tta_tag "$m")
      if [[ " $parts " == *" tta "* ]]; then
        if [ $((seed % 2)) -eq 0 ]; then order="so pt"; else order="pt so"; fi
        for who in $order; do
          [ "$who" = so ] || [[ " $peers " == *" $m "* ]] || continue
          tta "$link" "tta-$link-$tag-$who-s$seed" "$m" "$seed" "$who"
        done
      fi
      if [[ " $parts " == *" slow "* ]]; then
        slow "$link" "fast-$link-$tag-s$seed" "$m" "$seed" ""
        slow "$link" "slow-$link-$tag-s$seed" "$m" "$seed" "1:0.3"
      fi
    done
  done
  tta_link_down "$link"
done
echo "# runs in $out; LeNet-5 Fashion-MNIST, $np ranks x 1 thread ($rpn per node across nodes), batch 32 per rank;" \
  "$(lscpu | sed -n 's/^Model name: *//p')"
[ ! -s "$out/index.tsv" ] || /usr/bin/python3 "$src/bench/tta_table.py" "$out" --acc-epoch "${ACC_EPOCH:-2}" --baseline sync
/usr/bin/python3 - "$out" "$links" "$methods" <<'PY'
import glob, json, os, statistics, sys
d, links, methods = sys.argv[1], sys.argv[2].split(), sys.argv[3].split()
def runs(prefix):
    return [json.load(open(p)) for p in sorted(glob.glob(os.path.join(d, prefix + "-*.json")))]
def cell(v, fmt="%.1f"):
    if not v:
        return "–"
    m = fmt % statistics.median(v)
    return m if len(v) == 1 else "%s (%s–%s)" % (m, fmt % min(v), fmt % max(v))
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
