#!/usr/bin/env bash
# Pipeline stages x data-parallel replicas under MPI (`train --pipeline-stages`):
#  - equivalence: P stages x D replicas with M micro-batches computes what D
#    data-parallel ranks with --batch-size B/M --accumulate M compute (one
#    process when D = 1): the loss of every step and the parameters after 10
#    steps within 1e-5 relative, for P in {2,3,4}, D in {1,2}, gpipe and 1f1b,
#    and interleaved with 2 chunks per rank (D = 1, and P = 2 with D = 2),
#    M in {1,4}, on LeNet-5 (a chain) and ResNet-8 (cuts across residual
#    connections, batchnorm), on the onednn and ref backends
#  - on one host the stages' buffers are shared (no bytes in the messages);
#    SCALEOUT_PIPE_SHARED=0 and the TCP transport copy them, with the same result
#  - evaluation through the stages gives the same accuracy
#  - bad layouts and options end every rank with one line and exit 2
# Usage: pipe_cli.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"

. "$(dirname "$0")/pipe_lib.sh"

expect() { # expect NP MESSAGE args...: every rank stops with exit 2, and MESSAGE is printed
  local np=$1 msg=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common[@]}" --model lenet5 "$@" >"$tmp/bad.log" 2>&1
  local st=$?
  if [ $st -eq 2 ] && grep -q -- "$msg" "$tmp/bad.log"; then ok
  else bad "$* (np $np): exit $st, wanted 2 and '$msg': $(tail -2 "$tmp/bad.log")"; fi
}

same() { # same A B: parameters and every step's loss of runs A and B within 1e-5 relative
  /usr/bin/python3 - "$tmp/$1" "$tmp/$2" <<'PY'
import array, json, math, sys
a, b = (array.array("f", open(p + ".bin", "rb").read()) for p in sys.argv[1:])
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
scale = max(abs(x) for x in a)
err = max(abs(x - y) for x, y in zip(a, b))
la, lb = (json.load(open(p + ".json"))["step_loss"] for p in sys.argv[1:])
assert len(la) == len(lb) == 10, (len(la), len(lb))
lerr = max(abs(x - y) / abs(x) for x, y in zip(la, lb))
sys.exit(0 if err <= 1e-5 * scale and lerr <= 1e-5 and all(map(math.isfinite, lb)) else 1)
PY
}

# One model, backend and M: the references (one process, two data-parallel
# ranks), then every P x D x schedule against them. SCHEDULES and REPLICAS
# narrow a call to the schedules and replica counts it adds a shape for.
matrix() { # [SCHEDULES="..."] [REPLICAS="..."] matrix MODEL BACKEND M BATCH PS...
  local model=$1 be=$2 m=$3 batch=$4; shift 4
  local tag=$model-$be-m$m d
  for d in ${REPLICAS:-1 2}; do
    run "$d" "$tag-d$d" --model "$model" --backend "$be" --batch-size $((batch / m)) --accumulate "$m" || return
  done
  for p in "$@"; do
    for d in ${REPLICAS:-1 2}; do
      [ $((p * d)) -le 6 ] || continue
      for sc in ${SCHEDULES:-gpipe 1f1b interleaved}; do
        local v=1
        if [ "$sc" = interleaved ]; then
          [ "$d" = 1 ] || [ "$p" = 2 ] || continue
          v=2
        fi
        run $((p * d)) "$tag-p$p-d$d-$sc" --model "$model" --backend "$be" --batch-size "$batch" \
          --pipeline-stages "$p" --microbatches "$m" --schedule "$sc" --virtual-stages $v || continue
        if same "$tag-d$d" "$tag-p$p-d$d-$sc"; then ok
        else bad "$tag: $p stages x $d replicas ($sc) differs from $d data-parallel rank(s)"; fi
      done
    done
  done
}

if [ "${SCALEOUT_TEST_SECOND_MPI:-0}" = 1 ]; then
  # The second MPI library (make test-mpich) runs the messages' shapes once:
  # a chain and residual cuts, every schedule, 2 and 3 stages, 1 and 2 replicas.
  matrix lenet5 onednn 4 32 2 3
  matrix resnet8 onednn 4 16 2 3
else
  # Each dimension once where it adds a shape: P = 4 on the chain, residual
  # cuts at P = 2 and 3, M = 1 and the ref backend at one P each. With one
  # micro-batch every schedule runs the same order, and the backend changes
  # the kernels, not the messages: those run one schedule.
  matrix lenet5 onednn 4 32 2 3 4
  SCHEDULES=1f1b matrix lenet5 onednn 1 8 2
  SCHEDULES="1f1b interleaved" REPLICAS=1 matrix lenet5 ref 4 32 4
  matrix resnet8 onednn 4 16 2 3
  SCHEDULES=1f1b matrix resnet8 onednn 1 4 2
  SCHEDULES=1f1b REPLICAS=1 matrix resnet8 ref 4 8 3
fi

# Stage messages over scaleout's TCP connections (SCALEOUT_COLL_TCP=1 puts them there on one
# host too): the same training, with every message on the sockets. P = 3: the middle stage
# talks to both sides; interleaved: the last rank also sends back to the first.
for sc in 1f1b interleaved; do
  v=1; [ $sc = interleaved ] && v=2
  SCALEOUT_COLL_TCP=1 run 3 "tcp-$sc" --model resnet8 --backend onednn --batch-size 16 --pipeline-stages 3 \
    --microbatches 4 --schedule $sc --virtual-stages $v || continue
  if same resnet8-onednn-m4-d1 "tcp-$sc" && grep -q "over scaleout's tcp connections" "$tmp/tcp-$sc.log"; then ok
  else bad "3 stages ($sc) over tcp differ from one process, or did not use tcp: $(grep -c tcp "$tmp/tcp-$sc.log")"; fi
done

# On one host the stages pass tensors through shared memory (messages carry no bytes);
# SCALEOUT_PIPE_SHARED=0 sends every byte through MPI instead: the same training.
[ "$(grep -cE "pipeline: ([0-9]+) of \1 edge\(s\) of this stage through shared memory" \
  "$tmp/resnet8-onednn-m4-p3-d1-1f1b.log")" = 3 ] && ok || bad "3 stages on one host did not share their buffers: $(grep -c shared "$tmp/resnet8-onednn-m4-p3-d1-1f1b.log")"
for sc in 1f1b interleaved; do
  v=1; [ $sc = interleaved ] && v=2
  SCALEOUT_PIPE_SHARED=0 run 3 "copied-$sc" --model resnet8 --backend onednn --batch-size 16 --pipeline-stages 3 \
    --microbatches 4 --schedule $sc --virtual-stages $v || continue
  if same resnet8-onednn-m4-d1 "copied-$sc" && ! grep -q "through shared memory" "$tmp/copied-$sc.log"; then ok
  else bad "3 stages ($sc) with SCALEOUT_PIPE_SHARED=0 differ from one process, or still shared"; fi
done

grep -q "pipeline: 3 stages x 1 replicas (stage-major), 1f1b, 4 micro-batches of 8" "$tmp/lenet5-onednn-m4-p3-d1-1f1b.log" &&
  grep -q "stage 2: activation memory" "$tmp/lenet5-onednn-m4-p3-d1-1f1b.log" &&
  ok || bad "no pipeline line in the report: $(cat "$tmp/lenet5-onednn-m4-p3-d1-1f1b.log")"

# Replica-major placement (a stage's replicas on neighbouring ranks) computes the same.
run 4 placement --model resnet8 --batch-size 16 --pipeline-stages 2 --microbatches 4 --placement replica-major &&
  { same resnet8-onednn-m4-d2 placement && ok || bad "replica-major placement changed the result"; }

# --sync-bn: a stage's batchnorm statistics over its replicas, as data parallelism's over its ranks.
run 2 syncbn-d2 --model resnet8 --batch-size 4 --accumulate 4 --sync-bn &&
  run 4 syncbn-p2d2 --model resnet8 --batch-size 16 --pipeline-stages 2 --microbatches 4 --sync-bn &&
  { same syncbn-d2 syncbn-p2d2 && ok || bad "--sync-bn: 2 stages x 2 replicas differ from 2 data-parallel ranks"; }

# Checkpoints: each stage writes its shard under stage<s>/ (over its
# replicas); a run stopped at step 10 and resumed with --resume auto ends
# bit for bit where an uninterrupted 15-step run ends; `ckpt export`
# gathers the stages into one safetensors file that --init-from loads into
# any partition (3 stages, or one process) with the same result.
ck=(--model resnet8 --batch-size 16 --pipeline-stages 2 --microbatches 4)
common15=(train --dataset synthetic --synthetic-samples 640 --eval-every -1 --progress none --seed 7)
ckrun() { # ckrun NP OUT args...
  local np=$1 out=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common15[@]}" "$@" >"$tmp/$out.log" 2>&1 ||
    { bad "np=$np $*: exit $?: $(tail -3 "$tmp/$out.log")"; return 1; }
}
if ckrun 4 ck-full "${ck[@]}" --steps 15 --dump-params "$tmp/ck-full.bin" &&
  ckrun 4 ck-a "${ck[@]}" --steps 10 --ckpt-every 5 --ckpt-dir "$tmp/ck" &&
  ckrun 4 ck-b "${ck[@]}" --steps 15 --ckpt-every 5 --ckpt-dir "$tmp/ck" --resume auto \
    --dump-params "$tmp/ck-resumed.bin"; then
  cmp -s "$tmp/ck-full.bin" "$tmp/ck-resumed.bin" && grep -q "resuming from the checkpoint at step 10" \
    "$tmp/ck-b.log" && ok || bad "stages resumed at step 10 differ from an uninterrupted run"
  [ -d "$tmp/ck/stage0" ] && [ -d "$tmp/ck/stage1" ] && "$bin" ckpt verify "$tmp/ck" >"$tmp/verify.log" 2>&1 &&
    ok || bad "ckpt verify of stage checkpoints: $(tail -3 "$tmp/verify.log")"
  if "$bin" ckpt export "$tmp/ck" -o "$tmp/whole.safetensors" >"$tmp/export.log" 2>&1 &&
    grep -q "exported step 15 of resnet8 (78042 parameters) from 2 pipeline stages" "$tmp/export.log" &&
    ckrun 1 init1 --model resnet8 --batch-size 4 --accumulate 4 --steps 3 --init-from "$tmp/whole.safetensors" \
      --dump-params "$tmp/init1.bin" &&
    ckrun 3 init3 --model resnet8 --batch-size 16 --pipeline-stages 3 --microbatches 4 --steps 3 \
      --init-from "$tmp/whole.safetensors" --dump-params "$tmp/init3.bin" &&
    cmp -s "$tmp/init1.bin" "$tmp/init3.bin"; then ok
  else bad "ckpt export / --init-from across partitions: $(tail -2 "$tmp/export.log")"; fi
  # One stage's newest checkpoint lost: the stages would resume from different steps.
  rm -rf "$tmp/ck/stage1/ckpt-0000000015"
  "$mpirun" -np 4 "$bin" "${common15[@]}" "${ck[@]}" --steps 20 --ckpt-dir "$tmp/ck" --resume auto \
    >"$tmp/ck-c.log" 2>&1
  st=$?
  [ $st -eq 2 ] && grep -q "newest complete checkpoints are of different steps (10 to 15)" "$tmp/ck-c.log" &&
    ok || bad "stages at different steps: exit $st: $(tail -2 "$tmp/ck-c.log")"
fi
# --resume PATH: one stage's checkpoint names the step every stage resumes
# from (each from its own stage<s>/ckpt-N), with the cuts recorded beside them.
if [ -d "$tmp/ck/stage1/ckpt-0000000010" ]; then
  ckrun 4 ck-path "${ck[@]}" --steps 15 --resume "$tmp/ck/stage0/ckpt-0000000010/" --dump-params "$tmp/ck-path.bin" &&
    { cmp -s "$tmp/ck-full.bin" "$tmp/ck-path.bin" && grep -q "resuming from the checkpoint at step 10" \
      "$tmp/ck-path.log" && ok || bad "--resume PATH of a stage's checkpoint: not the uninterrupted run"; }
fi
expect 2 "no pipeline checkpoints there" --pipeline-stages 2 --resume "$tmp/nothing/stage0/ckpt-0000000010"

# Interleaved checkpoints: each rank's stage<d>/ holds its two chunks; the
# resume is bit for bit, and `ckpt export` puts the chunks back in the
# model's order (the exported parameters are the run's, tensor by tensor).
il=(--model resnet8 --batch-size 16 --pipeline-stages 2 --microbatches 4 --schedule interleaved --virtual-stages 2)
if ckrun 2 il-full "${il[@]}" --steps 15 --dump-params "$tmp/il-full.bin" &&
  ckrun 2 il-a "${il[@]}" --steps 10 --ckpt-every 5 --ckpt-dir "$tmp/ilck" &&
  ckrun 2 il-b "${il[@]}" --steps 15 --ckpt-every 5 --ckpt-dir "$tmp/ilck" --resume auto \
    --dump-params "$tmp/il-resumed.bin"; then
  cmp -s "$tmp/il-full.bin" "$tmp/il-resumed.bin" && ok || bad "interleaved: resumed at step 10 differs"
  if "$bin" ckpt export "$tmp/ilck" -o "$tmp/il.safetensors" >"$tmp/il-export.log" 2>&1 &&
    /usr/bin/python3 - "$tmp/il.safetensors" "$tmp/il-full.bin" <<'PY'
import array, json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
head, data = json.loads(b[8:8 + n]), b[8 + n:]
params = array.array("f")
for off, name, t in sorted((t["data_offsets"][0], k, t) for k, t in head.items() if k != "__metadata__"):
    if t["dtype"] == "F32" and not name.endswith(("running_mean", "running_var")):
        params.frombytes(data[t["data_offsets"][0]:t["data_offsets"][1]])
sys.exit(0 if params.tobytes() == open(sys.argv[2], "rb").read() else 1)
PY
  then ok; else bad "interleaved: ckpt export is not the run's parameters: $(tail -2 "$tmp/il-export.log")"; fi
fi

# --max-memory: ResNet-56 at batch 32 does not fit one rank under a cap of
# 0.6 x what one rank holds (exit 2, the parts named); 2 stages x 4
# micro-batches of 8 fit (1f1b keeps 2 and 1 micro-batches of half the
# layers). The accounting is checked against the peak RSS it implies: at
# least 0.9 x the accounted bytes are resident, and at most 400 MB more
# (oneDNN, MPI and the data set).
mm=(train --model resnet56 --dataset synthetic --synthetic-samples 256 --batch-size 32 --steps 2 --eval-every -1
    --progress none --warmup-steps 0)
if "$bin" "${mm[@]}" --json "$tmp/mm1.json" >"$tmp/mm1.log" 2>&1; then
  cap=$(/usr/bin/python3 -c 'import json,sys; print(int(0.6 * json.load(open(sys.argv[1]))["memory_accounted"]["total"]))' \
    "$tmp/mm1.json")
  "$bin" "${mm[@]}" --max-memory "$cap" >"$tmp/mm-over.log" 2>&1
  st=$?
  [ $st -eq 2 ] && grep -q "max-memory .*: rank 0 needs .* [KMG]\?i\?B: weights .* activations .* (1 micro-batch(es) in flight)" \
    "$tmp/mm-over.log" && ok || bad "one rank over --max-memory: exit $st: $(tail -2 "$tmp/mm-over.log")"
  if "$mpirun" -np 2 "$bin" "${mm[@]}" --max-memory "$cap" --pipeline-stages 2 --microbatches 4 \
    --json "$tmp/mm2.json" >"$tmp/mm2.log" 2>&1 &&
    /usr/bin/python3 - "$tmp/mm1.json" "$tmp/mm2.json" "$cap" <<'PY'
import json, sys
one, two = (json.load(open(f)) for f in sys.argv[1:3])
cap = float(sys.argv[3])
for r in (one, two):
    acc, rss = r["memory_accounted"]["total"], r["peak_rss_bytes"]
    assert 0.9 * acc <= rss <= acc + 400e6, (acc, rss)
assert two["memory_accounted"]["total"] <= cap and two["memory_accounted"]["slots"] == 1  # rank 0: the last stage
PY
  then ok; else bad "2 stages under --max-memory: $(tail -3 "$tmp/mm2.log")"; fi
else bad "resnet56 one rank: $(tail -3 "$tmp/mm1.log")"; fi

# --partition auto under a cap too tight to time the whole model on rank 0
# (the MLP's 1.06 M parameters with gradients and momentum: ~23 MB at one
# micro-batch, each half ~12 MB): the cuts balance FLOPs instead, said in the
# banner; under a looser cap they balance measured time.
mlp=(train --model mlp --dataset synthetic --synthetic-samples 64 --batch-size 2 --steps 2 --eval-every -1
     --pipeline-stages 2 --microbatches 2)
"$mpirun" -np 2 "$bin" "${mlp[@]}" --max-memory 16M >"$tmp/mm-flops.log" 2>&1 &&
  grep -q "^cuts by FLOPs within --max-memory (timing the whole model .*): stages start at " "$tmp/mm-flops.log" &&
  grep -q "^trained 2 steps" "$tmp/mm-flops.log" && ok ||
  bad "auto under a tight cap: $(grep -E 'cuts|max-memory|rror' "$tmp/mm-flops.log" | head -2)"
"$mpirun" -np 2 "$bin" "${mlp[@]}" --max-memory 64M >"$tmp/mm-time.log" 2>&1 &&
  grep -q "^cuts by measured time within --max-memory: stages start at " "$tmp/mm-time.log" && ok ||
  bad "auto under a loose cap: $(grep -E 'cuts|max-memory|rror' "$tmp/mm-time.log" | head -2)"

# The profiler: forward and backward spans of every micro-batch on every
# stage in the timeline, and the report's bubble beside the formula.
if "$mpirun" -np 2 "$bin" "${common[@]}" --model lenet5 --batch-size 32 --pipeline-stages 2 --microbatches 4 --warmup-steps 2 \
  --profile "$tmp/prof" >"$tmp/prof.log" 2>&1 &&
  /usr/bin/python3 - "$tmp/prof/timeline.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
ev = t["traceEvents"] if isinstance(t, dict) else t
for name in ("forward", "backward"):
    per_rank = {}
    for e in ev:
        if e.get("name") == name and e.get("ph") == "X":
            per_rank[e["pid"]] = per_rank.get(e["pid"], 0) + 1
    assert len(per_rank) == 2 and all(n >= 4 * 9 for n in per_rank.values()), (name, per_rank)
PY
then ok; else bad "pipeline timeline: $(tail -3 "$tmp/prof.log")"; fi
"$bin" report "$tmp/prof/profile.json" --text >"$tmp/report.txt" 2>&1 &&
  grep -A9 "== Pipeline stages ==" "$tmp/report.txt" | grep -q "  2 *4 *1f1b *0\.[0-9]* *0\.200" &&
  ok || bad "report: no pipeline bubble: $(grep -A8 Pipeline "$tmp/report.txt")"

# Evaluation passes the test set through the stages: the same accuracy as one process.
if [ -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ]; then
  ev=(train --model lenet5 --steps 20 --eval-every 0 --progress none --seed 3)
  "$mpirun" -np 1 "$bin" "${ev[@]}" --batch-size 16 --accumulate 2 >"$tmp/ev1.log" 2>&1
  "$mpirun" -np 3 "$bin" "${ev[@]}" --batch-size 32 --pipeline-stages 3 --microbatches 2 >"$tmp/ev3.log" 2>&1
  a1=$(grep -o "test accuracy [0-9.]*" "$tmp/ev1.log") a3=$(grep -o "test accuracy [0-9.]*" "$tmp/ev3.log")
  if [ -n "$a1" ] && [ "$a1" = "$a3" ]; then ok; else bad "evaluation: '$a1' on one process, '$a3' on 3 stages"; fi
else
  echo "SKIP: evaluation through the stages (no Fashion-MNIST test set)"
fi

expect 3 "3 ranks do not split into 2 stages" --pipeline-stages 2
expect 2 "does not divide --batch-size 64" --pipeline-stages 2 --microbatches 3
expect 2 "use --microbatches" --pipeline-stages 2 --accumulate 2
expect 9 "the model has 8 layers" --pipeline-stages 9 --microbatches 1 --batch-size 9
expect 3 "stage 2 starts at node 3, not after stage 1's start 3" --pipeline-stages 3 --partition 0,3,3
expect 2 "is neither" --pipeline-stages 2 --partition 0,nosuchlayer
expect 2 "only with --schedule interleaved" --pipeline-stages 2 --virtual-stages 2
expect 2 "--pipeline-stages 2 x --virtual-stages 5: .*the model has 8 layers" --pipeline-stages 2 --microbatches 1 \
  --batch-size 8 --schedule interleaved --virtual-stages 5
expect 1 "needs at least 2 ranks, this job has 1" --pipeline-stages 2

echo "pipe_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
