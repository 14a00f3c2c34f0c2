#!/usr/bin/env bash
# Units finer than a layer (docs/PARALLELISM.md, "Units"): with --shard-unit N
# a dense layer above N MiB is cut into units of row chunks that the model
# computes one at a time. The MLP's two large layers (3.1 and 4 MiB) at
# --shard-unit 1 become 4 chunks each:
#  - zero2 and zero3 train like dp (1e-6): momentum at np 3 (uneven blocks
#    of every chunk; the one case run again under the second MPI library),
#    AdamW at np 2 (test_shard checks the chunked gradients and AdamW on 1
#    to 3 ranks in one process)
#  - a resume at the same N is bit for bit; np 2 -> np 3 re-shards (1e-6)
#  - memory_accounted is lower than with a unit per layer by about the
#    layers the chunks replace, and zero3 holds fewer gathered parameters
# Usage: shard_chunks.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"
. "$(dirname "$0")/shard_lib.sh"

mlp=(--model mlp --steps 8 --batch-size 8 --accumulate 2)
run 3 mom-3-dp --strategy dp "${mlp[@]}" --momentum 0.9 &&
  for z in zero2 zero3; do
    run 3 "mom-3-$z" --strategy "$z" "${mlp[@]}" --momentum 0.9 --shard-unit 1 || continue
    compare mom-3-dp "mom-3-$z" 1e-6 && ok || bad "momentum np 3: chunked $z differs from dp: $(relerr mom-3-dp "mom-3-$z")"
  done
full_only "AdamW, resume and memory (the library's part is the case above)" || {
  echo "shard_chunks: $pass passed, $fail failed"
  [ $fail -eq 0 ]
  exit
}
# AdamW with weight decay on LeNet-5 (its 192 KiB fc1 in 4 chunks at --shard-unit 0.05)
like_dp adamw-2 2 1e-6 --model lenet5 --steps 10 --batch-size 8 --optimizer adamw --weight-decay 0.05 \
  --lr 0.001 --shard-unit 0.05

# Resume: np 2 zero3 for 4 steps, then on at np 2 (bitwise) and at np 3 with
# the same global batch of 24 (1e-6).
rs=(--model mlp --shard-unit 1 --momentum 0.9)
run 2 rs-whole --strategy zero3 "${rs[@]}" --batch-size 12 --steps 8 &&
  run 2 rs-first --strategy zero3 "${rs[@]}" --batch-size 12 --steps 4 --ckpt-every 4 --ckpt-dir "$tmp/ck"
resumes_like 8 "2 zero3 12" "3 zero3 8" "3 zero2 8"

# Memory: chunks against a unit per layer, per rank at np 2 (AdamW). The
# largest layer (fc2, 1024x1024 + 1024 floats) was gathered whole (zero3)
# and its gradient held whole (zero2/3); now one or two 1 MiB chunks are.
for z in zero2 zero3; do
  for u in layer 1; do
    run 2 "mem-$z-$u" --strategy "$z" --model mlp --steps 1 --batch-size 8 --optimizer adamw --shard-unit "$u" \
      --json "$tmp/mem-$z-$u.json"
  done
  /usr/bin/python3 - "$tmp/mem-$z-layer.json" "$tmp/mem-$z-1.json" "$z" <<'PY' && ok || bad "$z: chunks do not lower memory_accounted"
import json, sys
whole, chunked = (json.load(open(f)) for f in sys.argv[1:3])
fc2 = 4 * (1024 * 1024 + 1024)
for a, b in zip(whole["ranks"], chunked["ranks"]):
    ma, mb = a["memory_accounted"], b["memory_accounted"]
    saved = (ma["weights"] + ma["gradients"]) - (mb["weights"] + mb["gradients"])
    assert saved >= 0.75 * fc2, (a["rank"], saved, fc2)
    assert mb["total"] < ma["total"], (ma["total"], mb["total"])
PY
done

echo "shard_chunks: $pass passed, $fail failed"
[ $fail -eq 0 ]
