#!/usr/bin/env bash
# Flags that do nothing in the run given are refused (exit 2, one line naming
# what they need), `predict` says why no pipeline layout fits, and `plan` and
# `train` share one rule for --max-memory. Also messages that misled: a
# partition list's error (formatted from the buffer it read), a profile
# without a model or batch, a memory cap of a few bytes shown as "0.0 MB".
# Usage: flags.sh path/to/scaleout
. "$(dirname "$0")/lib.sh" "$@"

t=(train --model lenet5 --dataset synthetic --steps 1 --batch-size 8 --synthetic-samples 16 --progress none)
# refused NAME REGEX ARGS...: `scaleout ARGS` exits 2 at once with one line matching REGEX.
refused() {
  local name=$1 re=$2
  shift 2
  fault_case "$name" 15 2 "$re" "$bin" "$@"
}

refused microbatches "^scaleout train: --microbatches does nothing without --pipeline-stages P \(P > 1\)$" \
  "${t[@]}" --microbatches 4
# The neutral value is no surprise: --microbatches 1, --virtual-stages 1 pass.
fault_run neutral 20 "$bin" "${t[@]}" --microbatches 1 --virtual-stages 1
expect_status neutral 0
refused schedule "^scaleout train: --schedule does nothing without --pipeline-stages" "${t[@]}" --schedule gpipe
refused interleaved "^scaleout train: --schedule interleaved does nothing without --virtual-stages V" \
  "${t[@]}" --pipeline-stages 2 --schedule interleaved
refused placement "^scaleout train: --placement does nothing without --pipeline-stages" "${t[@]}" --placement replica-major
refused ckpt-keep "^scaleout train: --ckpt-keep does nothing without --ckpt-every$" "${t[@]}" --ckpt-keep 3
refused ckpt-dir "^scaleout train: --ckpt-dir does nothing without --ckpt-every or --resume$" \
  "${t[@]}" --ckpt-dir "$tmp/ck"
refused flush-every "^scaleout train: --ckpt-flush-every does nothing without --ckpt-every and --ckpt-dir$" \
  "${t[@]}" --ckpt-every 5 --ckpt-local "$tmp/ck" --ckpt-flush-every 2
refused mtbf "^scaleout train: --mtbf does nothing without --ckpt-every auto$" \
  "${t[@]}" --ckpt-every 5 --ckpt-dir "$tmp/ck" --mtbf 2
refused lr-gamma "^scaleout train: --lr-gamma does nothing without --lr-schedule step$" "${t[@]}" --lr-gamma 0.5
refused momentum "^scaleout train: --momentum does nothing without --optimizer momentum or nesterov$" \
  "${t[@]}" --optimizer adam --momentum 0.5
refused timeline "^scaleout train: --timeline-steps does nothing without --profile DIR" "${t[@]}" --timeline-steps 0:5
refused synthetic-samples "^scaleout train: --synthetic-samples does nothing without --dataset synthetic$" \
  train --model lenet5 --steps 1 --synthetic-samples 16
refused data-dir "^scaleout train: --data-dir does nothing without a --dataset read from files" \
  "${t[@]}" --data-dir "$tmp"
refused predict-microbatches "^scaleout predict: --microbatches does nothing without --pipeline-stages" \
  predict --model lenet5 --microbatches 4 --rank-images-per-sec 1000 --layer-costs flops --nodes 1,2
# P stages never fit 1 or 2 ranks: say so instead of an empty table.
refused predict-no-layout "^scaleout predict: --pipeline-stages 3: no layout fits --nodes 1,2 with --ranks-per-node 1: the ranks .* must be a multiple of 3" \
  predict --model lenet5 --pipeline-stages 3 --nodes 1,2 --rank-images-per-sec 1000 --layer-costs flops
# One rule for --max-memory in plan and train (plan took 0 as "no cap").
refused plan-max-memory-0 "^scaleout plan: --max-memory: '0' is not a size above 0" \
  plan --model lenet5 --pipeline-stages 2 --partition memory --max-memory 0
refused train-max-memory-0 "^scaleout train: --max-memory: '0' is not a size above 0" "${t[@]}" --max-memory 0

# Messages that misled.
refused partition-list "^scaleout plan: --partition: '99' is neither a node index \(0\.\.[0-9]+\) nor a node name" \
  plan --model lenet5 --partition 0,99
printf '{}' >"$tmp/empty.json"
refused compute-from-empty "^scaleout predict: --compute-from: .*empty.json is not a profile of .train --profile. \(it names no model and no batch\)$" \
  predict --model lenet5 --compute-from "$tmp/empty.json" --nodes 1,2
refused max-memory-1 "^scaleout train: --max-memory 1 B: rank 0 needs [0-9.]+ [KM]iB" "${t[@]}" --max-memory 1
refused sync-unknown "^scaleout train: --sync: unknown method .lokal:8. \(sync, local:H" "${t[@]}" --sync lokal:8
refused local-after "^scaleout train: --local-after does nothing without --sync local:H$" "${t[@]}" --local-after 10
refused ps-ranks "^scaleout train: --ps-ranks does nothing without --sync ssp:S or async$" "${t[@]}" --ps-ranks 1
refused sync-zero "^scaleout train: --sync local:4 runs under --strategy dp only" "${t[@]}" --sync local:4 --strategy zero1
# A run resumed at its last step trains nothing: no "final loss 0.0000".
"$bin" "${t[@]}" --steps 3 --ckpt-every 3 --ckpt-dir "$tmp/end" >/dev/null 2>&1 || bad "setup: 3 steps"
fault_run resumed-at-end 20 "$bin" "${t[@]}" --steps 3 --ckpt-every 3 --ckpt-dir "$tmp/end" --resume auto \
  --json "$tmp/end.json"
expect_status resumed-at-end 0
grep -q "^trained 0 steps: the checkpoint resumed is at step 3, where the run ends" "$out" &&
  ! grep -q "final loss" "$out" && grep -q '"final_loss": null' "$tmp/end.json" &&
  ok "resumed-at-end: $(grep trained "$out")" || bad "resumed-at-end: $(cat "$out"; grep final_loss "$tmp/end.json")"
expect_clean resumed-at-end

fault_finish
