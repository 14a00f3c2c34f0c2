#!/usr/bin/env bash
# BF16 mixed precision from the command line (issue 38):
#  - refusals (any CPU): --precision bf16 under SCALEOUT_MAX_ISA=avx2, on the
#    ref backend, and an unknown value exit 2 with one line; `auto` says what it chose
#  - `version --cpu` and the --json environment carry the BF16 peak, "none" under a cap;
#    a BF16 run's MFU is against the BF16 peak, an FP32 run's against the FP32 one
#  - on a CPU with AVX512_BF16: a resume in BF16 is bitwise; data parallel np 2
#    equals one process with --accumulate 2 within the BF16 tolerance; LeNet-5
#    on Fashion-MNIST, 1 epoch, is within 1% test accuracy of FP32 from the same seed
# The BF16 parts skip (exit 77 after the rest) where the CPU lacks AVX512_BF16.
# Usage: bf16_cli.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"

data=(--dataset synthetic --synthetic-samples 512)
fm=/usr/share/datasets/fashion-mnist
[ -f "$fm/train-images-idx3-ubyte.gz" ] && data=(--dataset fashion-mnist)
common=(train --model lenet5 "${data[@]}" --batch-size 32 --eval-every -1 --progress none --seed 5)
# The run's header (with its precision line) is printed without --progress none.
auto=(train --model lenet5 "${data[@]}" --batch-size 32 --eval-every -1 --seed 5 --steps 2 --precision auto)

one_line_exit2() { # one_line_exit2 WHAT PATTERN cmd...: exit 2, one stderr line matching PATTERN
  local what=$1 pat=$2; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"
  local st=$?
  if [ $st -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q -- "$pat" "$tmp/err"; then ok
  else bad "$what: exit $st, stderr: $(cat "$tmp/err")"; fi
}

# ---- any CPU ----
SCALEOUT_MAX_ISA=avx2 one_line_exit2 "bf16 under an avx2 cap" "AVX-512 BF16\|AVX512_BF16\|avx512" \
  "$bin" "${common[@]}" --steps 1 --precision bf16
# Without BF16 the CPU's refusal comes first; with it, the backend's.
has_bf16=0
"$bin" version --cpu 2>&1 | grep -q "^BF16 peak per core: [0-9]" && has_bf16=1
ref_pat="ref"; [ $has_bf16 = 1 ] || ref_pat="AVX-512 BF16"
one_line_exit2 "bf16 on the ref backend" "$ref_pat" "$bin" "${common[@]}" --steps 1 --backend ref --precision bf16
one_line_exit2 "an unknown precision" "precision" "$bin" "${common[@]}" --steps 1 --precision fp16
SCALEOUT_MAX_ISA=avx2 "$bin" version --cpu >"$tmp/v" 2>&1 && grep -q "^BF16 peak per core: none" "$tmp/v" && ok ||
  bad "version --cpu under an avx2 cap: $(cat "$tmp/v")"
# auto under the cap chooses fp32 and says so, in the header and the JSON.
SCALEOUT_MAX_ISA=avx2 "$bin" "${auto[@]}" --json "$tmp/a2.json" >"$tmp/a2" 2>&1 &&
  grep -q "^precision: fp32" "$tmp/a2" &&
  /usr/bin/python3 -c "
import json,sys; r=json.load(open('$tmp/a2.json'))
assert r['precision'] == 'fp32' and r['config']['precision_requested'] == 'auto', r['precision']
assert r['environment']['bf16'] is False and r['environment']['bf16_peak_gflops_per_core'] == 0
assert r['mfu_peak'] == 'FP32' and r['mfu'] > 0, (r['mfu_peak'], r['mfu'])
" && ok || bad "auto under an avx2 cap: $(cat "$tmp/a2")"

# Export: --dtype bf16 writes every float tensor as "BF16", the FP32 master
# weights rounded to nearest even (PyTorch's .to(torch.bfloat16) gives the same
# bits), loadable by the PyTorch twin; a bad --dtype exits 2.
"$bin" "${common[@]}" --steps 3 --model smallcnn --ckpt-every 3 --ckpt-dir "$tmp/ex" >"$tmp/ex.log" 2>&1 &&
  "$bin" ckpt export "$tmp/ex" -o "$tmp/f32.st" >/dev/null 2>&1 &&
  "$bin" ckpt export "$tmp/ex" -o "$tmp/bf16.st" --dtype bf16 >"$tmp/exb.log" 2>&1 &&
  grep -q "BF16" "$tmp/exb.log" && ok || bad "ckpt export --dtype bf16: $(cat "$tmp/ex.log" "$tmp/exb.log")"
one_line_exit2 "a bad --dtype" "dtype" "$bin" ckpt export "$tmp/ex" -o "$tmp/x.st" --dtype f16
one_line_exit2 "--dtype bf16 with llmc" "dtype" "$bin" ckpt export "$tmp/ex" -o "$tmp/x.bin" --format llmc --dtype bf16
if /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  /usr/bin/python3 - "$src/bench" "$tmp/f32.st" "$tmp/bf16.st" <<'PY' && ok || bad "the BF16 export against PyTorch's rounding"
import json, struct, sys
sys.path.insert(0, sys.argv[1])
import torch, torch_models
def read(path):
    raw = open(path, "rb").read()
    (hl,) = struct.unpack("<Q", raw[:8])
    header, data = json.loads(raw[8:8 + hl]), raw[8 + hl:]
    dtypes = {"F32": torch.float32, "BF16": torch.bfloat16, "I64": torch.int64}
    return {k: (t["dtype"], torch.frombuffer(bytearray(data[t["data_offsets"][0]:t["data_offsets"][1]]),
                                              dtype=dtypes[t["dtype"]]).reshape(t["shape"]))
            for k, t in header.items() if k != "__metadata__"}
f, b = read(sys.argv[2]), read(sys.argv[3])
assert f.keys() == b.keys()
for k, (dt, t) in f.items():
    if dt == "I64":
        assert b[k][0] == "I64" and torch.equal(b[k][1], t), k
        continue
    assert b[k][0] == "BF16", (k, b[k][0])
    assert torch.equal(b[k][1].view(torch.int16), t.to(torch.bfloat16).view(torch.int16)), k
model = torch_models.build("smallcnn")
model.load_state_dict({k: t for k, (_, t) in b.items()}, strict=True)
PY
else
  echo "skipped: /usr/bin/python3 cannot import torch (the BF16 export against PyTorch)"
fi

if [ $has_bf16 = 0 ]; then
  echo "$pass passed, $fail failed; BF16 parts skipped: this CPU has no AVX512_BF16 ($("$bin" version --cpu | tail -1))"
  [ $fail -eq 0 ] && exit 77 || exit 1
fi

# ---- AVX512_BF16 ----
# The BF16 line is there with both rates positive. How close the measured
# rate comes to the nominal one is a timing (the clock probe and the chains
# run beside other tests), so it is a benchmark's to say, not this test's.
"$bin" version --cpu >"$tmp/v" 2>&1 && /usr/bin/python3 - "$tmp/v" <<'PY' && ok || bad "version --cpu: $(cat "$tmp/v")"
import re, sys
m = re.search(r"BF16 peak per core: 128 FLOP/cycle = (\d+) GFLOP/s nominal, (\d+) GFLOP/s measured", open(sys.argv[1]).read())
assert m, "no BF16 peak line"
nominal, measured = float(m.group(1)), float(m.group(2))
assert nominal > 0 and measured > 0, (nominal, measured)
PY

"$bin" "${auto[@]}" --json "$tmp/a.json" >"$tmp/a" 2>&1 &&
  grep -q "^precision: bf16 (auto" "$tmp/a" &&
  /usr/bin/python3 -c "
import json; r=json.load(open('$tmp/a.json'))
assert r['precision'] == 'bf16' and r['config']['precision_requested'] == 'auto', r['precision']
e = r['environment']; assert e['bf16'] is True and e['bf16_peak_gflops_per_core'] > e['peak_gflops_per_core']
assert r['mfu_peak'] == 'BF16' and r['mfu_peak_gflops_per_core'] == e['bf16_peak_gflops_per_core'], r['mfu_peak']
" && grep -q '^MFU: .* of the BF16 peak' "$tmp/a" && ok || bad "auto with AVX512_BF16: $(cat "$tmp/a")"

train() { # train NAME args...: runs ${common[@]} in BF16 with the arguments, parameters in $tmp/NAME.bin
  local name=$1; shift
  "$bin" "${common[@]}" --precision bf16 --dump-params "$tmp/$name.bin" "$@" >"$tmp/$name.log" 2>&1 ||
    { bad "$name: exit $?: $(tail -3 "$tmp/$name.log")"; return 1; }
}

# A resume in BF16 continues bitwise: the checkpoint holds the FP32 master
# weights and the BF16 copies are made from them after every update.
train full --steps 12 &&
  train ck --steps 12 --ckpt-every 5 --ckpt-dir "$tmp/ck" &&
  rm -rf "$tmp/ck/ckpt-0000000010" &&
  train res --steps 12 --ckpt-every 5 --ckpt-dir "$tmp/ck" --resume auto &&
  grep -q "step 5" "$tmp/res.log" &&
  { compare full res 0 && ok || bad "bf16: the resume at step 5 is not bitwise"; }

# Data parallel: 2 ranks x 32 against one process accumulating 2 x 32. The
# per-sample arithmetic is the same; only the FP32 sums of the gradients are
# ordered differently, and two master weights an FP32 ulp apart can round to
# BF16 copies a BF16 ulp (2^-8 relative) apart, which the next steps carry on
# (scaled by the learning rate). 1e-4 of the largest weight after 15 steps:
# 10x FP32's 1e-5 (tests/cli_dp.sh) for such flips; Zen 5 gives 1.3e-6.
if full_only "BF16 data parallel"; then
  "$mpirun" -np 2 "$bin" "${common[@]}" --steps 15 --precision bf16 --dump-params "$tmp/dp2.bin" >"$tmp/dp2.log" 2>&1 ||
    bad "np 2 bf16: $(tail -3 "$tmp/dp2.log")"
  train acc2 --steps 15 --accumulate 2 &&
    { compare dp2 acc2 1e-4 && ok || bad "bf16: np 2 x 32 differs from 1 process --accumulate 2 x 32"; }
fi

# LeNet-5, 1 epoch of Fashion-MNIST: BF16 test accuracy within 1% of FP32's
# from the same seed (the 10-epoch 0.3% check is bench/bf16_accuracy.sh).
if [ -f "$fm/train-images-idx3-ubyte.gz" ]; then
  for p in fp32 bf16; do
    "$bin" train --model lenet5 --dataset fashion-mnist --batch-size 64 --epochs 1 --eval-every 0 --progress none \
      --seed 11 --precision $p --json "$tmp/e1-$p.json" >"$tmp/e1-$p.log" 2>&1 || bad "1 epoch $p: $(tail -3 "$tmp/e1-$p.log")"
  done
  /usr/bin/python3 - "$tmp/e1-fp32.json" "$tmp/e1-bf16.json" <<'PY' && ok || bad "1 epoch: bf16 accuracy not within 1% of fp32"
import json, sys
f, b = (json.load(open(p))["test_accuracy"] for p in sys.argv[1:])
print(f"LeNet-5 1 epoch: fp32 {f:.4f}, bf16 {b:.4f}")
assert f > 0.8 and abs(f - b) <= 0.01, (f, b)
PY
else
  echo "skipped: Fashion-MNIST not installed (the 1-epoch accuracy check)"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
