#!/usr/bin/env bash
# Runs every benchmark recorded in docs/PERFORMANCE.md, one after another
# (never two at once: the machine has 2 cores), with the core-placement probe
# before and after. Usage: bench/run-all.sh [build/scaleout] [repeats]
set -euo pipefail
bin=${1:-build/scaleout}
rep=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
probe() {
  local p=/tmp/scaleout-c2c-probe
  [ -x $p ] || gcc -O2 -pthread "$here/../../shared/tools/c2c_probe.c" -o $p 2>/dev/null || return 0
  echo "core-to-core probe: $($p | tail -1)"
}
probe
echo "== single process: scaleout vs PyTorch =="
/usr/bin/python3 "$here/train_vs_pytorch.py" --bin "$bin" --repeat "$rep"
probe
echo "== data parallel np=1 vs np=2: scaleout vs PyTorch DDP (gloo) =="
/usr/bin/python3 "$here/dp_scaling.py" --bin "$bin" --repeat "$rep"
probe
echo "== benchmark suite record: every zoo model np=1/np=2, scaling, time to accuracy, overhead (vs PyTorch) =="
/usr/bin/python3 "$here/perf_record.py" --bin "$bin" --repeat "$rep" --out "${SCALEOUT_RECORD_DIR:-/tmp/scaleout-record}"
probe
