#!/usr/bin/env bash
# Compression state in checkpoints (docs/COMPRESSION.md, docs/CHECKPOINT.md),
# np 2 on 2 emulated nodes, LeNet-5:
#  - top-k 5% with error feedback and PowerSGD rank 2 (compressing from step
#    2, warm start): checkpoint at step 6, resume, and the parameters after
#    12 steps equal an uninterrupted 12-step run BITWISE; the manifest
#    records the residuals and Q's (rank_state), `ckpt verify` passes
#  - --compress auto (a slow link by test hook): the resume takes the
#    checkpoint's choice and state instead of choosing again: bitwise
#  - the same checkpoint resumed on 3 ranks or with another --compress:
#    one logged line says the state was dropped, training goes on
# Usage: compress_ckpt.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"

common=(train --model lenet5 --dataset synthetic --synthetic-samples 1024 --batch-size 32 --eval-every -1
        --progress none --seed 5 --bucket-mb 0.05 --first-bucket-mb 0.01 --ranks-per-node 1)
run() { # run NP NAME args...: output in $tmp/NAME.log; fails the check on a non-zero exit
  local np=$1 name=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common[@]}" "$@" >"$tmp/$name.log" 2>&1 ||
    { bad "$name: exit $?: $(tail -3 "$tmp/$name.log")"; return 1; }
}
same() { cmp -s "$tmp/$1" "$tmp/$2" && ok || bad "$3 ($1 != $2)"; }
keep_only() { # keep_only STEP DIR: deletes checkpoints newer than STEP
  for c in $(find "$2" -maxdepth 3 -type d -name 'ckpt-*'); do
    [ "$((10#${c##*ckpt-}))" -gt "$1" ] && rm -rf "$c"
  done
}

# resumes NAME METHOD: uninterrupted 12 steps; 12 steps checkpointing every
# 6; the step-12 checkpoint deleted, resumed from step 6: bitwise.
resumes() {
  local name=$1 method=$2 ck=(--ckpt-every 6 --ckpt-dir "$tmp/$1.ck" --ckpt-keep 5)
  run 2 "$name.full" --steps 12 --compress "$method" --dump-params "$tmp/$name.full.bin" || return
  run 2 "$name.ck" --steps 12 --compress "$method" "${ck[@]}" --dump-params "$tmp/$name.ck.bin" || return
  same "$name.full.bin" "$name.ck.bin" "$method: checkpointing changed training"
  grep -q "^rank_state compress=$method,error_feedback=on$" "$tmp/$name.ck/ckpt-0000000006/MANIFEST" && ok ||
    bad "$method: the manifest has no rank_state line: $(grep rank_ "$tmp/$name.ck/ckpt-0000000006/MANIFEST")"
  "$bin" ckpt verify "$tmp/$name.ck" >"$tmp/$name.verify" 2>&1 && grep -q "ckpt-0000000006 .*OK" "$tmp/$name.verify" &&
    ok || bad "$method: ckpt verify: $(cat "$tmp/$name.verify")"
  keep_only 6 "$tmp/$name.ck"
  cp -r "$tmp/$name.ck" "$tmp/$name.ck6"
  run 2 "$name.res" --steps 12 --compress "$method" "${ck[@]}" --resume auto --dump-params "$tmp/$name.res.bin" &&
    grep -q "resum.* 6" "$tmp/$name.res.log" && ! grep -q "state dropped" "$tmp/$name.res.log" &&
    same "$name.full.bin" "$name.res.bin" "$method: resume at step 6 is not bitwise the uninterrupted run"
}
resumes topk topk:0.05
resumes psgd powersgd:2:2

# --compress auto on a link it is told is 0.05 Gbit/s (a test hook: on one
# host it would keep FP32) chooses a compressing method after step 3; the
# run checkpointed at step 6 and resumed takes that method and its state
# from the checkpoint instead of choosing again: bitwise the uninterrupted
# run, whichever method it was.
auto_ck=(--ckpt-every 6 --ckpt-dir "$tmp/auto.ck" --ckpt-keep 5)
export SCALEOUT_COMPRESS_TEST_LINK_GBPS=0.05
if [ "${SCALEOUT_TEST_HOOKS:-1}" != 1 ]; then
  echo "skip: the auto resume needs a build with -DSCALEOUT_TEST_HOOKS=ON"
elif run 2 auto.ck --steps 12 --compress auto "${auto_ck[@]}" --json "$tmp/auto.json" --dump-params "$tmp/auto.ck.bin"; then
  picked=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["compress_auto"]["picked"])' \
    "$tmp/auto.json")
  [ -n "$picked" ] && [ "$picked" != none ] && ok || bad "auto on a 0.05 Gbit/s link kept FP32 ($picked)"
  grep -q "^rank_state compress=auto,error_feedback=default$" "$tmp/auto.ck/ckpt-0000000006/MANIFEST" && ok ||
    bad "auto: the manifest has no rank_state line"
  keep_only 6 "$tmp/auto.ck"
  run 2 auto.res --steps 12 --compress auto "${auto_ck[@]}" --resume auto --json "$tmp/auto.res.json" \
      --dump-params "$tmp/auto.res.bin" &&
    grep -q "compress auto: $picked, as chosen before the checkpoint" "$tmp/auto.res.log" &&
    ! grep -q "after step" "$tmp/auto.res.log" && same auto.ck.bin auto.res.bin "auto ($picked): resume at step 6" ||
    bad "auto: the resume did not take $picked from the checkpoint: $(grep -i "compress auto" "$tmp/auto.res.log")"
fi
unset SCALEOUT_COMPRESS_TEST_LINK_GBPS

# Another world size, method or error-feedback setting: one line, no crash.
dropped() { # dropped NAME WHAT: exactly one line in NAME's log says the state was dropped
  [ "$(grep -c "per-rank strategy state dropped" "$tmp/$1.log")" = 1 ] && grep -q "$2" "$tmp/$1.log" && ok ||
    bad "$1: no single 'dropped' line naming $2: $(grep -i "checkpoint" "$tmp/$1.log")"
}
run 3 np3 --steps 12 --compress topk:0.05 --resume "$tmp/topk.ck6/ckpt-0000000006" && dropped np3 "by 2 ranks.*on 3 ranks"
run 2 fp16 --steps 12 --compress fp16 --resume "$tmp/topk.ck6/ckpt-0000000006" && dropped fp16 "this run is none"
run 2 ef0 --steps 12 --compress topk:0.05 --error-feedback off --resume "$tmp/topk.ck6/ckpt-0000000006" \
  && dropped ef0 "this run is none"
run 2 psgd3 --steps 12 --compress powersgd:3:2 --resume "$tmp/psgd.ck6/ckpt-0000000006" &&
  dropped psgd3 "powersgd:3:2"
# A run without compression resumes a compressed checkpoint: dropped too.
run 2 none --steps 12 --resume "$tmp/topk.ck6/ckpt-0000000006" && dropped none "this run is none"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
