#!/usr/bin/env bash
# PyTorch equivalence of `scaleout ckpt export`: trains a model with
# batchnorm a few steps with checkpoints, exports the checkpoint as
# safetensors, loads it into the PyTorch twin (bench/torch_models.py) with a
# hand-written safetensors reader (the python package is not needed) using
# load_state_dict(strict=True), and compares the logits on the same input with
# scaleout's (tests/ckpt_logits.c, which loads the file like --init-from).
# resnet164 checks the pre-activation structure (shared BN-ReLU before the
# projection, stride on the first 1x1) numerically, not only by names (+4 s).
# Skips (77) when /usr/bin/python3 cannot import torch.
# Usage: ckpt_torch.sh path/to/scaleout path/to/ckpt_logits
set -u
bin=$1 logits=$2
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
py=/usr/bin/python3
"$py" -c 'import torch, torchvision' 2>/dev/null || { echo "SKIP: $py cannot import torch"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for model in smallcnn resnet20 resnet164; do
  "$bin" train --model "$model" --dataset synthetic --synthetic-samples 64 --batch-size 16 --steps 6 \
    --eval-every -1 --progress none --ckpt-every 6 --ckpt-dir "$tmp/$model" >"$tmp/train.log" 2>&1 ||
    { echo "FAIL: train $model: $(tail -3 "$tmp/train.log")"; fail=1; continue; }
  "$bin" ckpt export "$tmp/$model" -o "$tmp/$model.safetensors" >/dev/null || { fail=1; continue; }
  "$logits" "$model" "$tmp/$model.safetensors" 4 >"$tmp/$model.c.txt" || { fail=1; continue; }
  "$py" - "$src/bench" "$model" "$tmp/$model.safetensors" "$tmp/$model.c.txt" <<'PY' || fail=1
import json, struct, sys
sys.path.insert(0, sys.argv[1])
import torch, torch_models
name, path, cfile = sys.argv[2:5]
raw = open(path, "rb").read()
(hl,) = struct.unpack("<Q", raw[:8])
header = json.loads(raw[8:8 + hl])
data = raw[8 + hl:]
dtypes = {"F32": torch.float32, "I64": torch.int64}
state = {}
for key, t in header.items():
    if key == "__metadata__":
        continue
    b, e = t["data_offsets"]
    state[key] = torch.frombuffer(bytearray(data[b:e]), dtype=dtypes[t["dtype"]]).reshape(t["shape"])
model = torch_models.build(name)
model.load_state_dict(state, strict=True)
model.eval()
c, h, w, k = torch_models.DEFAULTS[name]
n = 4
idx = torch.arange(n * c * h * w, dtype=torch.int64)
x = (((idx * 7919) % 1000).to(torch.float32) / 500.0 - 1.0).reshape(n, c, h, w)
with torch.no_grad():
    want = model(x)
got = torch.tensor([[float(v) for v in line.split()] for line in open(cfile)])
err = (got - want).abs().max().item()
scale = want.abs().max().item()
print(f"{name}: max |scaleout - torch| = {err:.3g} (logits up to {scale:.3g})")
sys.exit(0 if err <= 1e-4 * max(scale, 1.0) else 1)
PY
done
[ $fail -eq 0 ] && echo "ok" || echo "FAIL"
exit $fail
