#!/usr/bin/env bash
# The GPT-2 workload of the time-to-accuracy matrix (bench/gpt2_tta.sh), end to
# end on a tiny spec: `bench accuracy --dataset tokens --init-from --shuffle off
# --target-loss` over 2 MPI ranks and its PyTorch DDP peer
# (bench/torch_gpt2_tta.py) from the same llm.c model file must give the same
# validation loss after each epoch (1e-4 relative: same weights, same batches,
# same evaluation), and scaleout must stop at the epoch that reaches the target.
# Skips without Debian's torch.
set -euo pipefail
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
py=/usr/bin/python3
text=/usr/share/games/fortunes/riddles
if ! "$py" -c 'import torch, numpy' 2>/dev/null || [ ! -r "$text" ]; then
  echo "skipped: needs $py with torch and numpy, and $text (fortunes)"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
spec=gpt2:L=1,H=2,C=32,T=16,V=300
"$1" tokenize "$text" -o "$work/tok" --name riddles --vocab 300 --doc-sep % --val-fraction 0.05 >/dev/null
"$py" "$src/bench/torch_gpt2_tta.py" --write-init "$work/init.bin" --spec "$spec" --seed 7
common=(--seq-len 16 --batch-size 4 --optimizer adamw --lr 3e-3 --weight-decay 0 --clip-norm 1)
# the peer's 3 epochs; scaleout's target is then set between its epoch 1's and epoch 2's loss
timeout -k 5 90 "$py" "$src/bench/torch_gpt2_tta.py" --np 2 --init "$work/init.bin" --data-dir "$work/tok" --seq 16 --batch 4 \
  --lr 3e-3 --clip 1 --target-loss 0.01 --max-epochs 3 >"$work/pt.log" 2>&1 ||
  { tail -5 "$work/pt.log"; echo "FAIL: torch_gpt2_tta.py"; exit 1; }
target=$("$py" -c 'import json, sys; e = json.loads([l for l in open(sys.argv[1]) if l.startswith("{")][-1])["losses"]
print("%.6f" % ((e[0] + e[1]) / 2))' "$work/pt.log")
"$src/scripts/mpirun.sh" -np 2 "$1" bench accuracy --model "$spec" --dataset tokens --data-dir "$work/tok" \
  "${common[@]}" --shuffle off --init-from "$work/init.bin" --target-loss "$target" --max-epochs 3 \
  --mllog /dev/null --json "$work/so.json" >"$work/so.log" 2>&1 || { tail -5 "$work/so.log"; echo "FAIL: bench accuracy"; exit 1; }
"$py" - "$work/so.json" "$work/pt.log" <<'PY'
import json, sys
so = json.load(open(sys.argv[1]))
losses = [e["test_loss"] for e in so["epochs"]]
pt = json.loads([l for l in open(sys.argv[2]) if l.startswith("{")][-1])["losses"]
print("validation loss per epoch: scaleout", losses, "PyTorch", pt)
bad = []
if not (so["results"]["reached"] and so["results"]["epochs"] == 2):
    bad.append("scaleout should stop at epoch 2, the first below the target")
for i, (a, b) in enumerate(zip(losses, pt)):
    if abs(a - b) > 1e-4 * abs(b):
        bad.append("epoch %d: scaleout %.6f, PyTorch %.6f" % (i + 1, a, b))
if not pt[1] < pt[0]:
    bad.append("the validation loss did not fall")
sys.exit("FAIL: " + "; ".join(bad) if bad else 0)
PY
echo "PASS: bench accuracy --target-loss and its PyTorch peer agree epoch by epoch"
