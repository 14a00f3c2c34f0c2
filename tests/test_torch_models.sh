#!/usr/bin/env bash
# The PyTorch twins of the zoo (bench/torch_models.py) must reproduce
# tests/data/zoo_params.txt (parameter counts) and tests/data/zoo_keys.txt
# (state_dict keys and shapes), which test_zoo checks against the C models:
# torch == files == C. Skips when Debian's torch/torchvision are not installed.
set -euo pipefail
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
py=/usr/bin/python3
if ! "$py" -c 'import torch, torchvision' 2>/dev/null; then
    echo "skipped: $py cannot import torch and torchvision"
    exit 0
fi
got=$(mktemp)
trap 'rm -f "$got"' EXIT
check() { # check FILE ARGS...: torch_models.py ARGS must print exactly tests/data/FILE
    local file=$1
    shift
    "$py" "$src/bench/torch_models.py" "$@" >"$got"
    if ! diff -u "$src/tests/data/$file" "$got"; then
        echo "FAIL: bench/torch_models.py $* differs from tests/data/$file" >&2
        exit 1
    fi
    echo "ok: $file ($(wc -l <"$got") lines)"
}
check zoo_params.txt --check
check zoo_keys.txt --keys all
check resnet50_keys.txt --keys resnet50
