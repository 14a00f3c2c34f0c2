#!/usr/bin/env bash
# `scaleout train` on GPT-2, end to end, against PyTorch (bench/gpt2_train_check.py):
# llm.c's model file (--init-from) and token shards in llm.c's order
# (--shuffle off), data parallel over 2 ranks with clipping, the per-step
# losses of --json's step_loss against an independent PyTorch GPT-2 at the
# global batch (1e-4 relative); and `scaleout models`' two GPT-2 counts.
# zero3 on GPT-2 is refused (tied LM head). The PyTorch part skips without
# Debian's torch.
set -euo pipefail
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
py=/usr/bin/python3
# `scaleout models`: llm.c's count (vocabulary padded to 50304) and Hugging Face's (50257)
models=$("$1" models)
grep -Eq '^gpt2 .* 124475904 ' <<<"$models" || { echo "FAIL: models does not give gpt2 124475904"; exit 1; }
grep -Eq '^gpt2 +124439808$' <<<"$models" || { echo "FAIL: models does not give gpt2's unpadded 124439808"; exit 1; }
# zero3 refuses a tied LM head with one line and exit 2 (one process: no launcher lines)
toks=$(mktemp -d)
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 200) >"$toks/text.txt"
"$1" tokenize "$toks/text.txt" -o "$toks" >/dev/null
set +e
out=$("$1" train --model gpt2:L=2,H=4,C=64,T=32,V=256 --dataset tokens --data-dir "$toks" --seq-len 32 \
    --strategy zero3 --steps 1 --batch-size 2 --eval-every -1 --progress none 2>&1)
status=$?
set -e
rm -rf "$toks"
[ "$status" = 2 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -q "zero3: the model ties weights" <<<"$out" ||
    { echo "FAIL: zero3 on GPT-2: exit $status, want 2 and one line: $out"; exit 1; }
if ! "$py" -c 'import torch, numpy' 2>/dev/null; then
    echo "skipped: $py cannot import torch and numpy"
    exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$py" "$src/bench/gpt2_train_check.py" --scaleout "$1" --spec gpt2:L=2,H=4,C=64,T=32,V=300 --np 2 --batch 2 \
    --seq 32 --steps 8 --lr 1e-3 --clip 1.0 --workdir "$work"
