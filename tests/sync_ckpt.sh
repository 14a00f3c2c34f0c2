#!/usr/bin/env bash
# Checkpoints under every --sync method (docs/CHECKPOINT.md, "Relaxed
# consistency and the parameter server"), LeNet-5 on synthetic data:
#  - local:4 and diloco:4 (np 2), gossip:ring (np 3), ssp:0 (np 3: 2 workers
#    + 1 server) and async (np 2: 1 worker + 1 server): 12 steps checkpointing
#    every 6 (local:4 saves mid-round, when the ranks' models differ), the
#    step-12 checkpoint deleted, resumed from step 6: the parameters and the
#    per-step losses of steps 7-12 equal an uninterrupted run's BITWISE; the
#    manifest names the method (rank_state), `ckpt verify` passes, and
#    `ckpt export` of a local:4 checkpoint holds the ranks' average
#  - a resume on another number of ranks or with another method: one line,
#    exit 2; --ckpt-mode naive: one line, exit 2
# Under the second MPI library only the parameter server cases run.
# Usage: sync_ckpt.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"

common=(train --model lenet5 --dataset synthetic --synthetic-samples 1024 --batch-size 32 --eval-every -1
        --progress none --seed 5)
run() { # run NP NAME args...: output in $tmp/NAME.log, --json in NAME.json, parameters in NAME.bin
  local np=$1 name=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common[@]}" --json "$tmp/$name.json" --dump-params "$tmp/$name.bin" "$@" \
    >"$tmp/$name.log" 2>&1 || { bad "$name: exit $?: $(tail -3 "$tmp/$name.log")"; return 1; }
}
same() { cmp -s "$tmp/$1" "$tmp/$2" && ok || bad "$3 ($1 != $2)"; }
keep_only() { # keep_only STEP DIR: deletes checkpoints newer than STEP
  for c in $(find "$2" -maxdepth 3 -type d -name 'ckpt-*'); do
    [ "$((10#${c##*ckpt-}))" -gt "$1" ] && rm -rf "$c"
  done
}
losses_tail() { # losses_tail FULL RESUMED: the resumed run's step losses are the full run's last ones, bitwise
  /usr/bin/python3 - "$tmp/$1.json" "$tmp/$2.json" <<'PY'
import json, sys
a, b = (json.load(open(p))["step_loss"] for p in sys.argv[1:3])
assert 0 < len(b) < len(a) and a[-len(b):] == b, (a, b)
PY
}

# resumes NAME NP METHOD args...: uninterrupted 12 steps; 12 steps
# checkpointing every 6; resumed from step 6: bitwise.
resumes() {
  local name=$1 np=$2 method=$3; shift 3
  local ck=(--ckpt-every 6 --ckpt-dir "$tmp/$name.ck" --ckpt-keep 5)
  run "$np" "$name.full" --steps 12 --sync "$method" "$@" || return
  run "$np" "$name.ck" --steps 12 --sync "$method" "$@" "${ck[@]}" || return
  same "$name.full.bin" "$name.ck.bin" "$method: checkpointing changed training"
  grep -q "^rank_state sync=$method\(,ps_ranks=1\)\?$" "$tmp/$name.ck/ckpt-0000000006/MANIFEST" && ok ||
    bad "$method: the manifest has no rank_state line: $(grep rank_ "$tmp/$name.ck/ckpt-0000000006/MANIFEST")"
  "$bin" ckpt verify "$tmp/$name.ck" >"$tmp/$name.verify" 2>&1 && grep -q "ckpt-0000000006 .*OK" "$tmp/$name.verify" &&
    ok || bad "$method: ckpt verify: $(cat "$tmp/$name.verify")"
  keep_only 6 "$tmp/$name.ck"
  cp -r "$tmp/$name.ck" "$tmp/$name.ck6"
  run "$np" "$name.res" --steps 12 --sync "$method" "$@" "${ck[@]}" --resume auto &&
    grep -q "resum.* 6" "$tmp/$name.res.log" && ! grep -q "state dropped" "$tmp/$name.res.log" &&
    same "$name.full.bin" "$name.res.bin" "$method: resume at step 6 is not bitwise the uninterrupted run" &&
    { losses_tail "$name.full" "$name.res" && ok || bad "$method: the resumed run's step losses differ"; }
}
resumes ssp0 3 ssp:0 --momentum 0.9
resumes async 2 async --optimizer adamw --lr 0.001
refuse_steps=12 # refuse (script_lib.sh): runs as long as the checkpoints
refuse 2 "by 3 ranks, this run is sync=ssp:0,ps_ranks=1 on 2 ranks" --sync ssp:0 --resume "$tmp/ssp0.ck6/ckpt-0000000006"
# The parameter server's point-to-point traffic is the part the second MPI
# library must carry; the averaging methods use the collectives other tests run.
if full_only "local, diloco and gossip resumes"; then
resumes local 2 local:4 --momentum 0.9
resumes diloco 2 diloco:4 --optimizer adamw --lr 0.001
resumes gossip 3 gossip:ring --momentum 0.9

# The replicated part of a local:4 checkpoint saved mid-round is the ranks'
# average: exported, it is what --dump-params (the average) gives after 6 steps.
run 2 local6 --steps 6 --sync local:4 --momentum 0.9 &&
  "$bin" ckpt export "$tmp/local.ck6/ckpt-0000000006" -o "$tmp/local6.safetensors" >"$tmp/export.log" 2>&1 &&
  /usr/bin/python3 - "$tmp/local6.safetensors" "$tmp/local6.bin" <<'PY' && ok || bad "ckpt export of local:4 is not the average"
import json, struct, sys, array
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n]); body = raw[8 + n:]
got = array.array("f")
for name, t in sorted(((k, v) for k, v in hdr.items() if k != "__metadata__"), key=lambda kv: kv[1]["data_offsets"][0]):
    got.frombytes(body[t["data_offsets"][0]:t["data_offsets"][1]])
want = array.array("f"); want.frombytes(open(sys.argv[2], "rb").read())
assert len(got) >= len(want) > 0, (len(got), len(want))
assert sorted(got.tolist()) == sorted(want.tolist())
PY

refuse 3 "written as sync=local:4 by 2 ranks, this run is sync=local:4 on 3 ranks" --sync local:4 --resume "$tmp/local.ck6/ckpt-0000000006"
refuse 2 "this run is sync=gossip:ring on 2 ranks: each rank resumes its own" --sync gossip:ring --resume "$tmp/local.ck6/ckpt-0000000006"
refuse 2 "use --ckpt-mode scaleout" --sync local:4 --ckpt-every 6 --ckpt-dir "$tmp/naive" --ckpt-mode naive
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
