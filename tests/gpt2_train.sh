#!/usr/bin/env bash
# `scaleout train` on GPT-2, end to end, against PyTorch (bench/gpt2_train_check.py):
# llm.c's model file (--init-from) and token shards in llm.c's order
# (--shuffle off), data parallel over 2 ranks with clipping, the per-step
# losses of --json's step_loss against an independent PyTorch GPT-2 at the
# global batch (1e-4 relative); and `scaleout models`' two GPT-2 counts.
# (GPT-2 under the sharded strategies: shard_gpt2.sh.) The PyTorch part
# skips without Debian's torch.
set -euo pipefail
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
py=/usr/bin/python3
# `scaleout models`: llm.c's count (vocabulary padded to 50304) and Hugging Face's (50257)
models=$("$1" models)
grep -Eq '^gpt2 .* 124475904 ' <<<"$models" || { echo "FAIL: models does not give gpt2 124475904"; exit 1; }
grep -Eq '^gpt2 +124439808$' <<<"$models" || { echo "FAIL: models does not give gpt2's unpadded 124439808"; exit 1; }
if ! "$py" -c 'import torch, numpy' 2>/dev/null; then
    echo "skipped: $py cannot import torch and numpy"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$src/bench/gpt2_train_check.py" --scaleout "$1" --spec gpt2:L=2,H=4,C=64,T=32,V=300 --np 2 --batch 2 \
    --seq 32 --steps 8 --lr 1e-3 --clip 1.0 --workdir "$work"
