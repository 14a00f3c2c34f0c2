#!/usr/bin/env bash
# GPT-2 against an independent PyTorch 1.13 GPT-2 (bench/gpt2_check.py) on
# the tiny spec: logits, every parameter's gradient and the losses of 10
# AdamW steps with decay on 2-D tensors and clipping by global norm, on both
# backends, and the backends against each other. Skips without Debian's torch.
# The unoptimised sanitizer build (SCALEOUT_TEST_SANITIZED=1) looks for memory
# errors, not numerics: 3 steps take the same code paths as 10.
set -euo pipefail
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
check=$(dirname "$1")/tests/gpt2_check
py=/usr/bin/python3
if ! "$py" -c 'import torch, numpy' 2>/dev/null; then
    echo "skipped: $py cannot import torch and numpy"
    exit 77
fi
steps=10
[ "${SCALEOUT_TEST_SANITIZED:-0}" = 1 ] && steps=3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$src/bench/gpt2_check.py" --spec gpt2:L=4,H=4,C=128,T=64,V=512 --batch 4 --seq 64 --steps "$steps" \
    --lr 1e-3 --wd 0.1 --clip 1.0 --check "$check" --backends ref,onednn --workdir "$work"
