#!/usr/bin/env bash
# GPT-2 trained in BF16 against FP32 (issue 38): a tiny spec, 200 AdamW steps
# on Debian's fortunes from the same seed; the validation loss under
# --precision bf16 must be within 1% of --precision fp32's, and both must
# have fallen well below the initial ln(vocab). Skips where the CPU (or a
# SCALEOUT_MAX_ISA cap) has no AVX-512 BF16, or without the fortunes.
set -euo pipefail
py=/usr/bin/python3
dir=/usr/share/games/fortunes
files=("$dir/fortunes" "$dir/riddles" "$dir/computers" "$dir/science")
for f in "${files[@]}"; do
  [ -r "$f" ] || { echo "skipped: needs $f (Debian's fortunes)"; exit 77; }
done
if ! "$1" train --help >/dev/null 2>&1 || ! "$py" -c 'import json' 2>/dev/null; then
  echo "FAIL: cannot run $1 or $py"; exit 1
fi
work=$(mktemp -d /tmp/scaleout-bf16train.XXXXXX)
trap 'rm -rf "$work"' EXIT
cat "${files[@]}" >"$work/text"
"$1" tokenize "$work/text" -o "$work/tok" --name fortunes --vocab 512 --doc-sep % --val-fraction 0.05 >/dev/null
spec=gpt2:L=4,H=4,C=128,T=64,V=512
run() {
  "$1" train --model "$spec" --dataset tokens --data-dir "$work/tok" --seq-len 64 --batch-size 8 --steps 200 \
    --optimizer adamw --lr 1e-3 --seed 3 --eval-every 0 --threads 2 --precision "$2" --json "$work/$2.json" \
    >"$work/$2.log" 2>&1
}
run "$1" fp32 || { tail -5 "$work/fp32.log"; echo "FAIL: train --precision fp32"; exit 1; }
set +e
run "$1" bf16
rc=$?
set -e
if [ $rc -eq 2 ] && grep -qi "bf16" "$work/bf16.log"; then
  echo "skipped: $(tail -1 "$work/bf16.log")"
  exit 77
fi
[ $rc -eq 0 ] || { tail -5 "$work/bf16.log"; echo "FAIL: train --precision bf16"; exit 1; }
"$py" - "$work/fp32.json" "$work/bf16.json" <<'PY'
import json, math, sys
fp, bf = (json.load(open(p)) for p in sys.argv[1:3])
assert fp["precision"] == "fp32" and bf["precision"] == "bf16", (fp["precision"], bf["precision"])
a, b = (next(e["test_loss"] for e in reversed(r["epochs"]) if "test_loss" in e) for r in (fp, bf))
print("validation loss after 200 steps: fp32 %.5f, bf16 %.5f (%.2f%% apart)" % (a, b, 100 * abs(b - a) / a))
bad = []
if a == b:
    bad.append("bf16 gave fp32's loss to the bit: did it compute in BF16?")
if abs(b - a) > 0.01 * a:
    bad.append("bf16's validation loss is more than 1% from fp32's")
if not a < 0.75 * math.log(512):
    bad.append("fp32 did not learn (%.3f against ln 512 = %.3f)" % (a, math.log(512)))
sys.exit("FAIL: " + "; ".join(bad) if bad else 0)
PY
echo "PASS: GPT-2 in BF16 within 1% of FP32's validation loss"
