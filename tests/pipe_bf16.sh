#!/usr/bin/env bash
# Pipeline stages under --precision bf16 (issue 38, docs/PRECISION.md "Between
# pipeline stages"): tensors copied between stages travel as BF16.
#  - any CPU: --precision auto under SCALEOUT_MAX_ISA=avx2 resolves to FP32 and
#    the stages send FP32; --precision bf16 there exits 2 with one line
#  - on a CPU with AVX512_BF16, 2 stages of LeNet-5 with the messages copied
#    (SCALEOUT_PIPE_SHARED=0): the bytes per step are half the FP32 wire's; the
#    first step's loss is bitwise the one-process BF16 run's (the cut feeds a
#    layer, fc1, that rounds its input to BF16 anyway), every loss within 2^-9 and
#    the parameters after 10 steps within 2^-8 relative (the diffs are rounded);
#    the FP32 wire (SCALEOUT_PIPE_WIRE=f32), shared memory, and an FP32 run
#    are bitwise the one-process runs; ResNet-8 on 3 stages, the last starting
#    at a residual add (an FP32 reader), stays within the same tolerance;
#    evaluation through the stages within 0.005 test accuracy (Fashion-MNIST)
# The BF16 parts skip (exit 77 after the rest) where the CPU lacks AVX512_BF16.
# Usage: pipe_bf16.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"

. "$(dirname "$0")/pipe_lib.sh"

check() { # check PYTHON-EXPRESSION WHAT: evaluated with j(NAME) (a run's --json), p(NAME) (its parameters)
  /usr/bin/python3 - "$tmp" "$1" <<'PY' && ok || bad "$2"
import array, json, sys
tmp, expr = sys.argv[1:]
def j(name): return json.load(open(f"{tmp}/{name}.json"))
def p(name): return array.array("f", open(f"{tmp}/{name}.bin", "rb").read())
def loss_err(a, b):
    la, lb = j(a)["step_loss"], j(b)["step_loss"]
    assert len(la) == len(lb) == 10
    return max(abs(x - y) / abs(x) for x, y in zip(la, lb))
def param_err(a, b):
    pa, pb = p(a), p(b)
    assert len(pa) == len(pb) > 0
    return max(abs(x - y) for x, y in zip(pa, pb)) / max(abs(x) for x in pa)
def same(a, b): return j(a)["step_loss"] == j(b)["step_loss"] and p(a).tobytes() == p(b).tobytes()
ok = eval("(" + expr + ")")  # an expression over several lines
if not ok:
    print("failed:", expr)
sys.exit(0 if ok else 1)
PY
}

lenet=(--model lenet5 --batch-size 32 --pipeline-stages 2 --microbatches 4 --partition memory) # the same cut every run

# ---- any CPU: no BF16 within the cap, so FP32 on the wire ----
if SCALEOUT_MAX_ISA=avx2 ONEDNN_MAX_CPU_ISA=AVX2 run 2 capped-auto "${lenet[@]}" --precision auto; then
  check 'j("capped-auto")["pipeline"]["wire"] == "f32" and j("capped-auto")["precision"] == "fp32"' \
    "auto under an avx2 cap: the stages should send FP32"
fi
SCALEOUT_MAX_ISA=avx2 "$mpirun" -np 2 "$bin" "${common[@]}" "${lenet[@]}" --precision bf16 >"$tmp/out" 2>"$tmp/err"
st=$?
if [ $st -eq 2 ] && [ "$(grep '^scaleout' "$tmp/err" | sort -u | wc -l)" -eq 1 ]; then ok
else bad "2 stages, --precision bf16 under an avx2 cap: exit $st, stderr: $(cat "$tmp/err")"; fi

if ! "$bin" version --cpu 2>&1 | grep -q "^BF16 peak per core: [0-9]"; then
  echo "$pass passed, $fail failed; BF16 parts skipped: this CPU has no AVX512_BF16 ($("$bin" version --cpu | tail -1))"
  [ $fail -eq 0 ] && exit 77 || exit 1
fi

# ---- AVX512_BF16: LeNet-5, 2 stages ----
run 1 one-bf16 --model lenet5 --batch-size 8 --accumulate 4 --precision bf16
run 1 one-fp32 --model lenet5 --batch-size 8 --accumulate 4 --precision fp32
SCALEOUT_PIPE_SHARED=0 run 2 wire-bf16 "${lenet[@]}" --precision bf16
SCALEOUT_PIPE_SHARED=0 SCALEOUT_PIPE_WIRE=f32 run 2 wire-f32 "${lenet[@]}" --precision bf16
SCALEOUT_PIPE_SHARED=0 run 2 pipe-fp32 "${lenet[@]}" --precision fp32
run 2 shared-bf16 "${lenet[@]}" --precision bf16

# (a) the bytes: half on the BF16 wire, none through shared memory; the staging in the memory accounting
check 'j("wire-bf16")["pipeline"]["wire"] == "bf16" and j("wire-f32")["pipeline"]["wire"] == "f32"
       and j("pipe-fp32")["pipeline"]["wire"] == "f32"' "the wire dtype in --json"
check 'j("wire-bf16")["pipeline"]["bytes_per_step"] > 0
       and 2 * j("wire-bf16")["pipeline"]["bytes_per_step"] == j("wire-f32")["pipeline"]["bytes_per_step"]
       == j("pipe-fp32")["pipeline"]["bytes_per_step"] and j("shared-bf16")["pipeline"]["bytes_per_step"] == 0' \
  "bytes per step on the BF16 wire should be half the FP32 wire's"
check '[s["message_buffer_bytes"] for s in j("wire-bf16")["pipeline"]["stages"]]
       == [1.25 * j("wire-f32")["pipeline"]["stages"][0]["message_buffer_bytes"],
           j("wire-f32")["pipeline"]["stages"][1]["message_buffer_bytes"]]' \
  "message buffers: stage 0 should add its half-size BF16 staging, stage 1 nothing"
grep -q "messages between stages: .* kB per step .*tensors as bf16" "$tmp/wire-bf16.log" && ok ||
  bad "no messages line in the report: $(grep pipeline -A3 "$tmp/wire-bf16.log")"

# (b) the losses: step 1 exact (forward only), the rest within the tolerance of the rounded diffs
check 'j("wire-bf16")["step_loss"][0] == j("one-bf16")["step_loss"][0]' \
  "the first step's loss on the BF16 wire should be bitwise the one-process BF16 run's"
check 'loss_err("one-bf16", "wire-bf16") <= 2**-9 and param_err("one-bf16", "wire-bf16") <= 2**-8' \
  "2 stages on the BF16 wire should be within 2^-9 (losses) and 2^-8 (parameters) of one process"
# (c) FP32 on the wire, in shared memory, and FP32 runs: bitwise as one process
check 'same("one-bf16", "wire-f32") and same("one-bf16", "shared-bf16")' \
  "BF16 compute with FP32 tensors between stages should be bitwise one process"
check 'same("one-fp32", "pipe-fp32")' "an FP32 pipeline should be bitwise one process"

# ---- ResNet-8, 3 stages: the last receives the two inputs of a residual add (an FP32 reader) ----
run 1 r-one --model resnet8 --batch-size 4 --accumulate 4 --precision bf16
SCALEOUT_PIPE_SHARED=0 run 3 r-wire --model resnet8 --batch-size 16 --pipeline-stages 3 --microbatches 4 --partition memory \
  --precision bf16
check 'loss_err("r-one", "r-wire") <= 2**-9 and param_err("r-one", "r-wire") <= 2**-8' \
  "ResNet-8, 3 stages on the BF16 wire, should be within 2^-9 (losses) and 2^-8 (parameters) of one process"

# Evaluation passes the test set through the stages on the BF16 wire too:
# within 0.005 of one process (the parameters differ by the rounded diffs).
if [ -f /usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz ]; then
  ev=(train --model lenet5 --steps 20 --eval-every 0 --progress none --seed 3 --precision bf16)
  "$mpirun" -np 1 "$bin" "${ev[@]}" --batch-size 16 --accumulate 2 >"$tmp/ev1.log" 2>&1
  SCALEOUT_PIPE_SHARED=0 "$mpirun" -np 2 "$bin" "${ev[@]}" --batch-size 32 --pipeline-stages 2 --microbatches 2 \
    --partition memory >"$tmp/ev2.log" 2>&1
  a1=$(grep -o "test accuracy [0-9.]*" "$tmp/ev1.log" | cut -d' ' -f3)
  a2=$(grep -o "test accuracy [0-9.]*" "$tmp/ev2.log" | cut -d' ' -f3)
  if [ -n "$a1" ] && [ -n "$a2" ] && /usr/bin/python3 -c "import sys; sys.exit(abs($a1 - $a2) > 0.005)"; then ok
  else bad "evaluation on the BF16 wire: '$a1' on one process, '$a2' on 2 stages"; fi
else
  echo "SKIP: evaluation through the stages (no Fashion-MNIST test set)"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
