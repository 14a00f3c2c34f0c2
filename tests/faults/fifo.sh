#!/usr/bin/env bash
# FIFOs where a command expects a regular file: a checkpoint's MANIFEST or
# shard, weights for --init-from, a profile, a tuning table, a data set
# file, a pipeline's partition file. open() of a FIFO without a writer
# blocks forever; every reader now opens without blocking and checks
# fstat, so each case ends at once with a line naming the file (exit 2; a
# checkpoint that `ckpt verify` finds so is damaged: exit 1). The deadline
# turns a regression into a failure instead of a hang.
# Usage: fifo.sh path/to/scaleout
. "$(dirname "$0")/lib.sh" "$@"

fifo_re="is not a regular file \(a FIFO\)"
small=(--model lenet5 --dataset synthetic --batch-size 8 --synthetic-samples 64 --progress none --eval-every -1)

# A checkpoint to damage: steps 2 and 4 at the shared level.
"$bin" train "${small[@]}" --steps 4 --ckpt-every 2 --ckpt-dir "$tmp/good" >"$tmp/setup.log" 2>&1 ||
  { bad "setup: train with checkpoints failed: $(tail -3 "$tmp/setup.log")"; fault_finish; }
"$bin" ckpt export "$tmp/good" -o "$tmp/w.safetensors" >/dev/null 2>&1 || bad "setup: export failed"

# copy_with_fifo NAME FILE: a copy of the checkpoint with FILE (relative) replaced by a FIFO.
copy_with_fifo() {
  rm -rf "$tmp/$1"
  cp -r "$tmp/good" "$tmp/$1"
  rm -f "$tmp/$1/$2"
  mkfifo "$tmp/$1/$2"
}
last=ckpt-0000000004

# ckpt export / resume of the checkpoint whose MANIFEST is a FIFO.
copy_with_fifo man "$last/MANIFEST"
fault_case export-manifest 10 2 "$last/MANIFEST.*$fifo_re" "$bin" ckpt export "$tmp/man/$last" -o "$tmp/x.st"
fault_case resume-path-manifest 10 2 "$last/MANIFEST.*$fifo_re" \
  "$bin" train "${small[@]}" --steps 6 --resume "$tmp/man/$last"
# auto: the damaged one is named in a warning and the older step resumed.
fault_run resume-auto-manifest 10 "$bin" train "${small[@]}" --steps 6 --ckpt-dir "$tmp/man" --ckpt-every 100 \
  --resume auto
expect_status resume-auto-manifest 0
expect_msg resume-auto-manifest "$last/MANIFEST.*$fifo_re"
grep -q "resuming from the checkpoint at step 2" "$out" && ok "resume-auto-manifest: resumed from step 2" ||
  bad "resume-auto-manifest: did not resume from step 2: $(cat "$out")"
expect_clean resume-auto-manifest
fault_run verify-manifest 10 "$bin" ckpt verify "$tmp/man"
expect_status verify-manifest 1
grep -qE "$last.*$fifo_re" "$out" && ok "verify-manifest: names the FIFO" ||
  bad "verify-manifest: no line naming the FIFO: $(cat "$out")"
expect_clean verify-manifest

# A shard that is a FIFO: no intact copy of it.
copy_with_fifo shard "$last/shard-0.bin"
fault_run verify-shard 10 "$bin" ckpt verify "$tmp/shard"
expect_status verify-shard 1
expect_msg verify-shard "shard-0.bin.*$fifo_re"
expect_clean verify-shard
fault_run export-shard 10 "$bin" ckpt export "$tmp/shard/$last" -o "$tmp/x.st"
expect_status export-shard 2
expect_msg export-shard "shard 0 has no intact copy"
expect_clean export-shard
fault_run resume-shard 10 "$bin" train "${small[@]}" --steps 6 --resume "$tmp/shard/$last"
expect_status resume-shard 2
expect_msg resume-shard "shard-0.bin.*$fifo_re"
expect_clean resume-shard

# Weights, a profile, a tuning table, a data file, report and compare inputs.
mkfifo "$tmp/fifo"
fault_case init-from 10 2 "init-from.*fifo.*$fifo_re" "$bin" train "${small[@]}" --steps 2 --init-from "$tmp/fifo"
fault_case compute-from 10 2 "compute-from.*fifo.*$fifo_re" \
  "$bin" predict --model lenet5 --compute-from "$tmp/fifo" --nodes 1,2
fault_case predict-tune 10 2 "fifo.*$fifo_re" "$bin" predict --model lenet5 --tune "$tmp/fifo" --nodes 1,2 \
  --rank-images-per-sec 1000 --layer-costs flops
# SCALEOUT_TUNING is optional: a bad table is ignored with a warning (2 ranks: read by `auto`).
fault_run tuning-env 30 env SCALEOUT_TUNING="$tmp/fifo" "$mpirun" -np 2 "$bin" train "${small[@]}" --steps 2
expect_status tuning-env 0
expect_msg tuning-env "ignoring SCALEOUT_TUNING=.*fifo.*$fifo_re"
expect_clean tuning-env
fault_case report 10 2 "fifo.*$fifo_re" "$bin" report "$tmp/fifo" --text
fault_case compare 10 2 "fifo.*$fifo_re" "$bin" bench compare "$tmp/fifo" "$tmp/fifo"
mkdir -p "$tmp/data"
for f in train-images-idx3-ubyte train-labels-idx1-ubyte t10k-images-idx3-ubyte t10k-labels-idx1-ubyte; do
  mkfifo "$tmp/data/$f"
done
fault_case data-file 10 2 "train-images-idx3-ubyte.*$fifo_re" \
  "$bin" train --model lenet5 --dataset fashion-mnist --data-dir "$tmp/data" --steps 2 --progress none

fault_finish
