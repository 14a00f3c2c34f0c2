#!/usr/bin/env bash
# Non-finite values (docs/RELIABILITY.md): weights from --init-from that hold
# a NaN or an infinity are refused at set-up (exit 2, naming the file and the
# tensor); a loss that becomes NaN or infinite stops training at that step
# (exit 1, one line naming the step and the first non-finite tensor), on one
# process and across 2 ranks; --allow-nonfinite keeps training as before.
# Usage: nonfinite.sh path/to/scaleout
. "$(dirname "$0")/lib.sh" "$@"

small=(--model lenet5 --dataset synthetic --batch-size 8 --synthetic-samples 64 --progress none --eval-every -1 --init he)
"$bin" train "${small[@]}" --steps 2 --ckpt-every 2 --ckpt-dir "$tmp/ck" >/dev/null 2>&1 &&
  "$bin" ckpt export "$tmp/ck" -o "$tmp/good.safetensors" >/dev/null 2>&1 ||
  { bad "setup: a checkpoint to export"; fault_finish; }

# poison IN OUT WHAT [TENSOR]: a copy of IN with every F32 value of every tensor
# (or of TENSOR only) set to WHAT (nan or inf).
poison() {
  /usr/bin/python3 - "$@" <<'PY'
import json, struct, sys
src, dst, what = sys.argv[1:4]
only = sys.argv[4] if len(sys.argv) > 4 else None
b = bytearray(open(src, "rb").read())
n = struct.unpack("<Q", b[:8])[0]
hdr = json.loads(b[8:8 + n])
bad = struct.pack("<f", float(what))
for name, t in hdr.items():
    if name == "__metadata__" or t["dtype"] != "F32" or (only and name != only):
        continue
    lo, hi = t["data_offsets"]
    for off in range(8 + n + lo, 8 + n + hi, 4):
        b[off:off + 4] = bad
open(dst, "wb").write(b)
PY
}
poison "$tmp/good.safetensors" "$tmp/nan.safetensors" nan
poison "$tmp/good.safetensors" "$tmp/inf.safetensors" inf fc3.bias

fault_case init-nan 20 2 "init-from .*nan.safetensors: weights of conv1.weight \\(nan at element 0\\) hold non-finite values" \
  "$bin" train "${small[@]}" --steps 3 --init-from "$tmp/nan.safetensors"
fault_case init-inf 20 2 "init-from .*inf.safetensors: weights of fc3.bias \\(inf at element 0\\) hold non-finite values" \
  "$bin" train "${small[@]}" --steps 3 --init-from "$tmp/inf.safetensors"
fault_run init-nan-allowed 20 "$bin" train "${small[@]}" --steps 3 --init-from "$tmp/nan.safetensors" \
  --allow-nonfinite
expect_status init-nan-allowed 0
grep -q "final loss nan" "$out" && ok "init-nan-allowed: trains to final loss nan as asked" ||
  bad "init-nan-allowed: $(cat "$out")"
expect_clean init-nan-allowed

# --lr 1000 diverges: the loss of step 3 overflows (seed 42).
fault_case diverge 20 1 "^scaleout train: step 3: loss inf; first non-finite tensor: none, every value is finite; the largest weight" \
  "$bin" train "${small[@]}" --steps 20 --lr 1000
fault_run diverge-allowed 20 "$bin" train "${small[@]}" --steps 20 --lr 1000 --allow-nonfinite
expect_status diverge-allowed 0
expect_clean diverge-allowed
# 2 ranks: the rank that sees it ends the job.
fault_run diverge-mpi 30 "$mpirun" -np 2 "$bin" train "${small[@]}" --steps 20 --lr 1000
expect_status diverge-mpi 1
expect_msg diverge-mpi "scaleout train: step [0-9]+: loss (nan|inf); first non-finite tensor: "
expect_within diverge-mpi 20
expect_clean diverge-mpi
# 2 pipeline stages: the first computes no loss (a NaN there is no alarm: pipe_cli's
# runs would fail otherwise), the last stops the job.
fault_run pipe-diverge 30 "$mpirun" -np 2 "$bin" train "${small[@]}" --steps 20 --lr 1000 --pipeline-stages 2 \
  --microbatches 2
expect_status pipe-diverge 1
expect_msg pipe-diverge "scaleout train: step [0-9]+: loss (nan|inf); first non-finite tensor: "
expect_clean pipe-diverge

fault_finish
