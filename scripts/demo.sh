#!/usr/bin/env bash
# The README's `make demo`: trains LeNet-5 on Fashion-MNIST, distributed over
# NP MPI processes when MPI is available (one thread each), else on one process.
set -euo pipefail
bin=${1:-build/scaleout}
data=${2:-/usr/share/datasets/fashion-mnist}
np=${3:-2}
here=$(cd "$(dirname "$0")" && pwd)
args=(train --model lenet5 --dataset fashion-mnist --data-dir "$data" --epochs "${EPOCHS:-3}"
      --batch-size 64 --lr 0.01 --momentum 0.9 --json "${DEMO_JSON:-demo.json}")
if [ "$np" -gt 1 ] && [ -x "$here/mpirun.sh" ] && command -v mpiexec >/dev/null; then
  echo "== scaleout demo: LeNet-5 on Fashion-MNIST, $np MPI processes =="
  exec "$here/mpirun.sh" -np "$np" "$bin" "${args[@]}" --scale-lr linear
fi
echo "== scaleout demo: LeNet-5 on Fashion-MNIST, 1 process =="
exec "$bin" "${args[@]}"
