#!/usr/bin/env bash
# Sharded data parallelism end to end under MPI, quick (docs/PARALLELISM.md,
# "Sharding"; the wider matrix is shard_matrix.sh):
#  - zero1, zero2, zero3 train like dp at np 2: LeNet-5, AdamW with weight
#    decay, clipping, accumulation 2, units cut inside tensors: 1e-6 relative
#  - --compress bf16|fp16 (the reduce-scatter on a 16-bit wire) like dp's, bitwise
#  - resume: np 2 zero2 -> np 2 zero2 bit for bit; -> np 3 zero3 and -> np 1
#    dp re-shard (same global batch) and continue like the whole run (1e-6);
#    `ckpt export` of the sharded checkpoint is the model
#  - --init-from into zero3 at np 2 and 3 holds the file's values (bitwise)
#    and trains like dp from them; --resume's checkpoint wins over it
#  - `plan --strategy all --max-memory` names the stage that fits, with the
#    memory the trainer then accounts; dp is refused under that cap, zero3
#    trains under it
#  - bad input: one line, exit 2
# Usage: shard_cli.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"
. "$(dirname "$0")/shard_lib.sh"

# Like dp at np 2 (the reduce-scatter adds what the allreduce adds).
like_dp adamw 2 1e-6 --model lenet5 --steps 20 --batch-size 8 --accumulate 2 --optimizer adamw \
  --weight-decay 0.05 --lr 0.001 --shard-unit 0.05

# --compress fp16|bf16 put the reduce-scatter on the 16-bit wire: like dp's
# compressor on its allreduce, bit for bit at np 2 (each block's two values
# rounded once, added in FP32, rounded once); not the FP32 run's values;
# half the FP32 bytes counted per step.
for w in bf16 fp16; do
  like_dp "wire-$w" 2 0 --model lenet5 --steps 10 --batch-size 8 --optimizer adamw --lr 0.001 --compress "$w" \
    --json "$tmp/wire-$w.json"
done
run 2 wire-f32 --strategy zero2 --model lenet5 --steps 10 --batch-size 8 --optimizer adamw --lr 0.001 &&
  ! compare wire-f32 wire-bf16-zero2 1e-4 && ok || bad "zero2 --compress bf16 trains as FP32: the wire is not used"
/usr/bin/python3 - "$tmp/wire-bf16.json" <<'PY' && ok || bad "zero3 --compress bf16: bytes per step are not half FP32's"
import json, sys
c = json.load(open(sys.argv[1]))["compression"]
assert c["method"] == "bf16" and not c["error_feedback"] and c["bytes_per_step"] * 2 == c["dense_bytes_per_step"] > 0, c
PY

# --shard-gather bf16: zero3's parameter allgathers on a 16-bit wire (the
# layers compute with BF16 weights, the optimizer steps the FP32 shard): the
# run is near the FP32 gathers' (10 momentum steps: 1e-3 of the largest
# weight measured, 5e-3 allowed) but not equal to it, and the dump holds the
# FP32 shard, not BF16 values (test_shard checks the rounding per layer).
# With a unit per layer LeNet-5's units leave the prefetch window between
# forward and backward: --json counts the gathers' bytes, each on its wire
# (BF16's exactly half FP32's, FP32's over one model per step and at most
# two), one model's reduce-scatter per step, and the BF16 wire's conversion
# scratch (the largest unit) in the accounted messages.
g3=(--strategy zero3 --model lenet5 --steps 10 --batch-size 8 --shard-unit layer)
run 2 gather-f32 "${g3[@]}" --json "$tmp/gather-f32.json" &&
  run 2 gather-bf16 "${g3[@]}" --shard-gather bf16 --json "$tmp/gather-bf16.json" &&
  compare gather-f32 gather-bf16 5e-3 >/dev/null && ! compare gather-f32 gather-bf16 0 &&
  /usr/bin/python3 - "$tmp/gather-bf16.bin" <<'PY' && ok || bad "zero3 --shard-gather bf16: $(relerr gather-f32 gather-bf16)"
import array, sys
a = array.array("I")
a.frombytes(open(sys.argv[1], "rb").read())
assert sum(1 for x in a if x & 0xFFFF) > len(a) // 2, "the dump holds BF16 values"
PY
/usr/bin/python3 - "$tmp/gather-f32.json" "$tmp/gather-bf16.json" <<'PY' && ok || bad "zero3 --json: gather bytes or wire scratch"
import json, sys
f, b = (json.load(open(a)) for a in sys.argv[1:])
model = 4 * f["config"]["parameters"]
fs, bs = f["shards"], b["shards"]
assert fs["gradient_bytes_per_step"] == bs["gradient_bytes_per_step"] == model, (fs, model)
assert model < fs["gather_bytes_per_step"] <= 2 * model and bs["gather_bytes_per_step"] * 2 == fs["gather_bytes_per_step"], (fs, bs)
assert (fs["gather_wire"], bs["gather_wire"]) == ("fp32", "bf16"), (fs, bs)
extra = b["memory_accounted"]["messages"] - f["memory_accounted"]["messages"]
assert extra == 2 * fs["largest_unit_parameters"], (extra, fs)
PY
# plan --shard-gather: the same scratch in the plan's messages as train
# accounted, and the gathers' time in the cost model at half the bytes.
for w in fp32 bf16; do
  "$bin" plan --model lenet5 --strategy zero3 --world 2 --batch-size 8 --shard-unit layer --shard-gather $w \
    --json "$tmp/plan-g-$w.json" >"$tmp/plan-g-$w.log" 2>&1 || bad "plan --shard-gather $w: $(tail -2 "$tmp/plan-g-$w.log")"
done
/usr/bin/python3 - "$tmp/plan-g-fp32.json" "$tmp/plan-g-bf16.json" "$tmp/gather-bf16.json" <<'PY' && ok ||
import json, sys
f, b = (json.load(open(a))["strategies"][0] for a in sys.argv[1:3])
t = json.load(open(sys.argv[3]))["memory_accounted"]
assert f["messages"] == 0 and b["messages"] == t["messages"] > 0, (f, b, t)
assert b["comm_seconds"] < f["comm_seconds"], (f, b)
PY
  bad "plan --shard-gather bf16: messages or gather time not as train's wire"

# On one node every stage's reduce-scatters and allgathers read the peer's
# send buffers in place (zero1/2's parameters and gradients, zero2/3's
# gradient slots, zero3's parameter shard in registered memory): no hier
# call copies through its window.
for st in zero1 zero2 zero3; do
  "$mpirun" -np 2 "$bin" "${common[@]}" --model lenet5 --steps 4 --batch-size 8 --strategy $st --shard-unit layer \
    >"$tmp/zc-$st.log" 2>&1 && grep -Eq "^hier: [1-9][0-9]* collectives zero-copy on registered buffers, 0 copied" \
    "$tmp/zc-$st.log" && ok || bad "$st: hier copied through its window: $(grep hier "$tmp/zc-$st.log")"
done

# Resume with the same global batch of 24: np 2 zero2 for 10 steps, then on.
rs=(--model lenet5 --shard-unit layer)
run 2 rs-whole --strategy zero2 "${rs[@]}" --batch-size 12 --steps 20 &&
  run 2 rs-first --strategy zero2 "${rs[@]}" --batch-size 12 --steps 10 --ckpt-every 10 --ckpt-dir "$tmp/ck" &&
  grep -q "^layout " "$tmp"/ck/ckpt-*/MANIFEST && ok || bad "the sharded checkpoint has no layout"
resumes_like 20 "2 zero2 12" "3 zero3 8" "1 dp 24"
run 2 rs-10 --strategy dp --model lenet5 --batch-size 12 --steps 10 && exports_like "$tmp/ck/ckpt-0000000010" rs-10

# --init-from is loaded before the strategy is made (parts.c): zero3's shards
# hold the file's values on every rank (at lr 0 the run dumps them back bit
# for bit at np 2 and 3, as dp on one process does) and the strategies train
# from them like dp; a checkpoint that --resume finds still wins over it.
init=(--model lenet5 --init-from "$tmp/export.safetensors" --batch-size 8)
if run 1 init-dp --strategy dp "${init[@]}" --steps 1 --lr 0; then
  for np in 2 3; do
    run $np init-z3-$np --strategy zero3 "${init[@]}" --steps 1 --lr 0 && compare init-dp init-z3-$np 0 && ok ||
      bad "--init-from into zero3 at np $np: not the file's values: $(relerr init-dp init-z3-$np)"
  done
fi
like_dp from-file 3 1e-6 "${init[@]}" --steps 4 --shard-unit 0.05
/usr/bin/python3 - "$tmp/export.safetensors" "$tmp/other.safetensors" <<'PY' # the same tensors, other values
import json, struct, sys, array
b = bytearray(open(sys.argv[1], "rb").read())
n = struct.unpack("<Q", b[:8])[0]
v = array.array("f"); v.frombytes(bytes(b[8 + n:]))
v = array.array("f", (x * 0.5 + 0.01 for x in v))
open(sys.argv[2], "wb").write(bytes(b[:8 + n]) + v.tobytes())
PY
run 2 rs-2-init --strategy zero2 "${rs[@]}" --batch-size 12 --steps 20 --ckpt-dir "$tmp/ck" --resume auto \
  --init-from "$tmp/other.safetensors" && compare rs-whole rs-2-init 0 && ok ||
  bad "--resume with --init-from: the checkpoint does not win: $(relerr rs-whole rs-2-init)"

# plan: each strategy's memory per rank; under a cap between zero3's and the
# others' totals it names zero3, whose memory the trainer then accounts.
pl=(plan --model resnet20 --strategy all --world 2 --batch-size 2 --optimizer adamw --shard-unit layer)
"$bin" "${pl[@]}" --json "$tmp/plan.json" >"$tmp/plan.log" 2>&1 || bad "plan: $(tail -2 "$tmp/plan.log")"
cap=$(/usr/bin/python3 - "$tmp/plan.json" <<'PY'
import json, sys
r = {s["strategy"]: s["total"] for s in json.load(open(sys.argv[1]))["strategies"]}
assert r["dp"] > r["zero1"] > r["zero3"] and min(v for k, v in r.items() if k != "zero3") > r["zero3"], r
print(int((r["zero3"] + min(v for k, v in r.items() if k != "zero3")) / 2))
PY
) || bad "plan: the strategies' memory is not ordered: $cap"
"$bin" "${pl[@]}" --max-memory "$cap" --json "$tmp/plan-cap.json" >"$tmp/plan-cap.log" 2>&1 &&
  grep -q "fastest that fits --max-memory: zero3" "$tmp/plan-cap.log" && ok ||
  bad "plan --max-memory $cap does not name zero3: $(cat "$tmp/plan-cap.log")"
# Ranks x threads beyond a node's cores take turns: 8 ranks on 2 cores
# compute at a quarter of the speed measured alone, 8 on 8 at all of it.
for k in 2 8; do
  "$bin" plan --model resnet20 --strategy dp --world 8 --cores $k --batch-size 2 --json "$tmp/plan-c$k.json" \
    >"$tmp/plan-c$k.log" 2>&1 || bad "plan --cores $k: $(tail -2 "$tmp/plan-c$k.log")"
done
grep -q "share 2 core(s): the layers' times are 4.00x" "$tmp/plan-c2.log" && ! grep -q "share" "$tmp/plan-c8.log" &&
  /usr/bin/python3 - "$tmp/plan-c2.json" "$tmp/plan-c8.json" <<'PY' && ok || bad "plan --cores: $(cat "$tmp/plan-c2.log")"
import json, sys
assert [json.load(open(a))["compute_slowdown_sharing_cores"] for a in sys.argv[1:]] == [4, 1]
PY
"$bin" plan --model resnet20 --cores 2 >"$tmp/plan-cores.out" 2>"$tmp/plan-cores.err"
[ $? -eq 2 ] && grep -q -- "--cores.*--strategy" "$tmp/plan-cores.err" && ok ||
  bad "plan --cores without --strategy: $(cat "$tmp/plan-cores.err")"
tr=(--model resnet20 --batch-size 2 --optimizer adamw --max-memory "$cap")
refused_each dp-capped "max-memory" 2 "${tr[@]}" --strategy dp
run 2 capped --strategy zero3 --shard-unit layer "${tr[@]}" --steps 2 --json "$tmp/capped.json" &&
  /usr/bin/python3 - "$tmp/plan-cap.json" "$tmp/capped.json" <<'PY' && ok || bad "zero3's memory: plan and train disagree"
import json, sys
p = {s["strategy"]: s for s in json.load(open(sys.argv[1]))["strategies"]}["zero3"]
for r in json.load(open(sys.argv[2]))["ranks"]:
    m = r["memory_accounted"]
    for k in ("weights", "gradients", "optimizer"):
        assert abs(m[k] - p[k]) <= 0.01 * p[k], (r["rank"], k, m[k], p[k])
PY

# Bad input: one line on stderr, exit 2.
refused unknown "unknown strategy 'zero9'" 2 --strategy zero9
refused node-size "does not divide\|do not divide" 3 --strategy zero2 --shard-group node --ranks-per-node 2
refused zero3-pipe "pipeline" 2 --strategy zero3 --pipeline-stages 2
refused zero3-naive "naive" 2 --strategy zero3 --ckpt-mode naive --ckpt-every 1 --ckpt-dir "$tmp/naive"
refused_each dp-unit "shard-unit" 2 --strategy dp --shard-unit layer
refused_each gather-zero2 "shard-gather" 2 --strategy zero2 --shard-gather bf16
refused_each gather-fp8 "shard-gather" 2 --strategy zero3 --shard-gather fp8
refused init-missing "init-from.*$tmp/none.safetensors" 2 --strategy zero3 --init-from "$tmp/none.safetensors"
refused init-other-model "init-from" 3 --model resnet20 --strategy zero3 --init-from "$tmp/export.safetensors"
mkdir -p "$tmp/cover" && cp -r "$tmp"/ck/ckpt-0000000010 "$tmp/cover/" &&
  /usr/bin/python3 - "$tmp/cover/ckpt-0000000010/MANIFEST" <<'PY'
import sys
p = sys.argv[1]
lines = open(p).read().rsplit("end ", 1)[0].splitlines(True)
for i, l in enumerate(lines): # the last unit no longer reaches the last parameter
    if l.startswith("units "):
        last = i
f = lines[last].split()
f[-1] = str(int(f[-1]) - 1)
lines[last] = " ".join(f) + "\n"
body = "".join(lines)
def crc32c(b):
    c = 0xffffffff
    for x in b:
        c ^= x
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 & -(c & 1))
    return c ^ 0xffffffff
open(p, "w").write(body + "end %08x\n" % crc32c(body.encode()))
PY
refused cover "do not cover the model" 2 --strategy zero2 --batch-size 12 --resume "$tmp/cover/ckpt-0000000010"

echo "shard_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
