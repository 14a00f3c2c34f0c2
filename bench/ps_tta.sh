#!/usr/bin/env bash
# The parameter server against synchronous training with one slow worker
# (docs/COMPRESSION.md, "Parameter server"): LeNet-5 on Fashion-MNIST,
# EPOCHS epochs (default 3), evaluation after each, batch 64 per worker; 2
# workers (+ 1 server for the --sync ssp/async rows). World rank 1 (a worker)
# computes 30% slower through the test-only hook SCALEOUT_TEST_SLOW_RANK=1:0.3
# (a build with -DSCALEOUT_TEST_HOOKS=ON; it sleeps 0.3 x the step's compute
# under every strategy). ssp:0 is sync over the same workers, through the server.
# Usage: bench/ps_tta.sh [REPEATS] [TARGET] [EPOCHS]   (prints medians, min-max;
# the configurations of one repeat run back to back, repeats interleaved)
set -u
reps=${1:-3} target=${2:-0.85} epochs=${3:-3}
src=$(cd "$(dirname "$0")/.." && pwd)
bin=${SCALEOUT_BIN:-$src/build/scaleout}
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
common=(train --model lenet5 --dataset fashion-mnist --epochs "$epochs" --eval-every 1 --batch-size 64 --progress none --seed 42)
configs=("sync (dp)|2||" "sync (dp), slow worker|2||1:0.3" "ssp:0, slow worker|3|--sync ssp:0|1:0.3"
         "ssp:3, slow worker|3|--sync ssp:3|1:0.3" "async, slow worker|3|--sync async|1:0.3")
for r in $(seq "$reps"); do
  for i in "${!configs[@]}"; do
    IFS='|' read -r name np flags slow <<<"${configs[$i]}"
    # shellcheck disable=SC2086
    SCALEOUT_TEST_SLOW_RANK=$slow "$src/scripts/mpirun.sh" -np "$np" "$bin" "${common[@]}" $flags \
      --json "$out/$i-$r.json" >"$out/$i-$r.log" 2>&1 || echo "FAILED: $name (run $r): $(tail -2 "$out/$i-$r.log")"
  done
done
/usr/bin/python3 - "$out" "$target" "$epochs" "${configs[@]}" <<'PY'
import glob, json, statistics as st, sys
out, target, epochs, configs = sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4:]
print(f"| run | img/s | s to {target:.0%} | epochs | accuracy after {epochs} epochs | staleness mean / max |")
print("|---|---:|---:|---:|---:|---:|")
def med(v, f):
    return f"{f % st.median(v)} ({f % min(v)}–{f % max(v)})" if v else "–"
for i, c in enumerate(configs):
    ips, tta, eps, acc, stale = [], [], [], [], ""
    for f in sorted(glob.glob(f"{out}/{i}-*.json")):
        j = json.load(open(f))
        ips.append(j["images_per_sec"])
        t = 0
        for k, e in enumerate(j["epochs"]):
            t += e["seconds"]
            if e["test_accuracy"] >= target:
                tta.append(t); eps.append(k + 1)
                break
        acc.append(j["epochs"][-1]["test_accuracy"])
        ps = j.get("parameter_server")
        stale = f"{ps['staleness_mean']:.2f} / {ps['staleness_max']:.0f}" if ps else "–"
    print(f"| {c.split('|')[0]} | {med(ips, '%.0f')} | {med(tta, '%.2f')} | {st.median(eps) if eps else '–'} | "
          f"{st.median(acc):.4f} | {stale} |")
PY
