#!/usr/bin/env bash
# Damaged checkpoints and `ckpt verify`: a checkpoint that cannot be restored
# exactly makes verify exit 1 and name what is missing or wrong (a MANIFEST
# that fails its checksum or is cut short, a damaged shard, a pipeline stage's
# directory deleted, a damaged partition file); an unfinished checkpoint (no
# MANIFEST: a run killed while writing it) is listed but is no damage while an
# older one is intact. `ckpt export` of a pipeline with a stage missing names it.
# Usage: ckpt_damage.sh path/to/scaleout
. "$(dirname "$0")/lib.sh" "$@"

small=(--model lenet5 --dataset synthetic --batch-size 8 --synthetic-samples 64 --progress none --eval-every -1
       --steps 4 --ckpt-every 2)
"$bin" train "${small[@]}" --ckpt-dir "$tmp/one" >"$tmp/setup1.log" 2>&1 ||
  { bad "setup: train with checkpoints: $(tail -3 "$tmp/setup1.log")"; fault_finish; }
"$mpirun" -np 3 "$bin" train "${small[@]}" --ckpt-dir "$tmp/pipe" --ckpt-local "$tmp/pipe-local" --ckpt-flush-every 1 \
  --pipeline-stages 3 --microbatches 2 \
  >"$tmp/setup3.log" 2>&1 || { bad "setup: 3-stage pipeline with checkpoints: $(tail -3 "$tmp/setup3.log")"; fault_finish; }
last=ckpt-0000000004

# damaged NAME FROM: a fresh copy of checkpoint FROM (one|pipe) in $tmp/NAME; the case then damages it.
damaged() { rm -rf "$tmp/$1"; cp -r "$tmp/$2" "$tmp/$1"; }
# flip FILE OFFSET: one byte of FILE changed in place.
flip() { printf '\x01' | dd of="$1" bs=1 seek="$2" conv=notrunc status=none; }

# verify_case NAME STATUS REGEX: `ckpt verify $tmp/NAME` ends within 10 s with STATUS and prints a line matching REGEX.
verify_case() {
  fault_run "$1" 10 "$bin" ckpt verify "$tmp/$1"
  expect_status "$1" "$2"
  grep -qE -- "$3" "$out" "$err" && ok "$1: names it: $(grep -hE -- "$3" "$out" "$err" | head -1 | tr -s ' ')" ||
    bad "$1: no line matching /$3/: $(cat "$out" "$err" | tail -8)"
  expect_clean "$1"
}

damaged intact one
verify_case intact 0 "$last .* OK"
damaged manifest-crc one
sed -i 's/^epoch_step 4$/epoch_step 5/' "$tmp/manifest-crc/$last/MANIFEST"
verify_case manifest-crc 1 "$last.*DAMAGED.*checksum mismatch"
damaged manifest-cut one
truncate -s 100 "$tmp/manifest-cut/$last/MANIFEST"
verify_case manifest-cut 1 "$last.*DAMAGED.*incomplete manifest"
damaged shard-flip one
flip "$tmp/shard-flip/$last/shard-0.bin" 100
verify_case shard-flip 1 "$last.*DAMAGED.*shard 0 has no intact copy"
damaged shard-gone one
rm "$tmp/shard-gone/$last/shard-0.bin"
verify_case shard-gone 1 "$last.*DAMAGED.*shard 0 has no intact copy"
# Killed while writing the newest: unfinished, the older one restores.
damaged unfinished one
rm "$tmp/unfinished/$last/MANIFEST"
verify_case unfinished 0 "$last.*unfinished"
damaged none-complete one
rm "$tmp"/none-complete/ckpt-*/MANIFEST
verify_case none-complete 1 "no complete checkpoint"

# A 3-stage pipeline: stage<s>/ per stage, DIR/partition.
damaged pipe-intact pipe
verify_case pipe-intact 0 "step 4 intact in every stage"
# The node-local level of the same run: stage<s>/node<id>/ckpt-N.
fault_run pipe-local-export 10 "$bin" ckpt export "$tmp/pipe-local" -o "$tmp/local.safetensors"
expect_status pipe-local-export 0
expect_clean pipe-local-export
grep -q "exported step 4 of lenet5 .* from 3 pipeline stages" "$out" && ok "pipe-local-export: $(cat "$out")" ||
  bad "pipe-local-export: $(cat "$out")"
damaged pipe-stage1-gone pipe
rm -rf "$tmp/pipe-stage1-gone/stage1"
verify_case pipe-stage1-gone 1 "stage1.*missing.*3 pipeline stages"
fault_case pipe-stage1-export 10 2 "stage1.*missing.*3 pipeline stages" \
  "$bin" ckpt export "$tmp/pipe-stage1-gone" -o "$tmp/x.safetensors"
damaged pipe-stage2-gone pipe
rm -rf "$tmp/pipe-stage2-gone/stage2"
verify_case pipe-stage2-gone 1 "stage2.*missing.*3 pipeline stages"
fault_case pipe-stage2-export 10 2 "stage2.*missing.*3 pipeline stages" \
  "$bin" ckpt export "$tmp/pipe-stage2-gone" -o "$tmp/x.safetensors"
damaged pipe-manifest-crc pipe
sed -i 's/^epoch_step 4$/epoch_step 5/' "$tmp/pipe-manifest-crc/stage1/$last/MANIFEST"
verify_case pipe-manifest-crc 1 "stage1/$last.*DAMAGED.*checksum mismatch"
# One stage unfinished at step 4: the pipeline restores step 2, verify says so.
damaged pipe-unfinished pipe
rm "$tmp/pipe-unfinished/stage1/$last/MANIFEST"
verify_case pipe-unfinished 0 "step 4 not in every stage \(stage 1 "
damaged pipe-partition pipe
echo "0,3,x" >"$tmp/pipe-partition/partition"
verify_case pipe-partition 1 "partition.*not a list"
fault_case pipe-partition-export 10 2 "partition.*not a list" \
  "$bin" ckpt export "$tmp/pipe-partition" -o "$tmp/x.safetensors"
# A partition of 4 stages over the 3 ranks' directories (was "61706 values from 3 devices, the model has
# 61706 in 4 stages").
damaged pipe-partition-ranks pipe
echo "0,1,3,4" >"$tmp/pipe-partition-ranks/partition"
verify_case pipe-partition-ranks 1 "partition.*4 stages cannot be spread over the 3 pipeline ranks"
fault_case pipe-partition-ranks-export 10 2 "partition: 4 stages cannot be spread over the 3 pipeline ranks" \
  "$bin" ckpt export "$tmp/pipe-partition-ranks" -o "$tmp/x.safetensors"

fault_finish
