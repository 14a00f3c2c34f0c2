#!/usr/bin/env bash
# Sharded data parallelism under MPI (docs/PARALLELISM.md, "Sharding"):
#  - zero1, zero2 and zero3 train like dp: the parameters after 20 steps within
#    1e-6 relative, N = 1..4 ranks, units cut inside tensors with uneven last
#    blocks, clipping, accumulation 2, momentum and AdamW with weight decay,
#    LeNet-5 and ResNet-20 (batchnorm), HYBRID_SHARD on 2 (emulated) nodes
#  - a resume at np 4 -> np 2 (zero2, and dp) continues like the np 4 run; at
#    the same N bit for bit; `ckpt export` of a sharded checkpoint is the model
#  - each strategy's memory_accounted against ZeRO's formulas (10%)
#  - bad input: one line, exit 2
# Usage: shard_cli.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"

common=(train --dataset synthetic --synthetic-samples 1280 --eval-every -1 --progress none --seed 7 --clip-norm 0.5)

run() { # run NP OUT args...: trains and dumps parameters to $tmp/OUT.bin
  local np=$1 out=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common[@]}" --dump-params "$tmp/$out.bin" "$@" >"$tmp/$out.log" 2>&1 ||
    { bad "np=$np $*: exit $?: $(tail -3 "$tmp/$out.log")"; return 1; }
}

compare() { # compare A B TOL: max |a-b| <= TOL * max |a| (TOL 0 = bitwise)
  /usr/bin/python3 - "$tmp/$1.bin" "$tmp/$2.bin" "$3" <<'PY'
import sys, array
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[1], "rb").read()); b.frombytes(open(sys.argv[2], "rb").read())
tol = float(sys.argv[3])
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
if tol == 0:
    sys.exit(0 if a.tobytes() == b.tobytes() else 1)
scale = max(abs(x) for x in a)
err = max(abs(x - y) for x, y in zip(a, b))
sys.exit(0 if err <= tol * scale else 1)
PY
}

# like_dp NAME NP TOL args...: dp and zero1/2/3 of one configuration.
like_dp() {
  local name=$1 np=$2 tol=$3; shift 3
  run "$np" "$name-dp" --strategy dp "$@" || return
  for z in zero1 zero2 zero3; do
    run "$np" "$name-$z" --strategy "$z" "$@" || continue
    compare "$name-dp" "$name-$z" "$tol" && ok || bad "$name: $z differs from dp at np $np"
  done
}

# LeNet-5 with momentum, a unit per layer (blocks cut inside weight tensors;
# 3 ranks give uneven blocks), accumulation 2: 20 steps at 1 to 4 ranks.
for np in 1 2 3 4; do
  like_dp "lenet-mom-$np" "$np" 1e-6 --model lenet5 --steps 20 --batch-size 8 --accumulate 2 --shard-unit layer
done

# AdamW with weight decay. At 1 and 2 ranks the reduce-scatter adds what the
# allreduce adds, in the same order: 1e-6 holds. At 3 and 4 the ring
# reduce-scatter associates each block's sum from another rank than the
# ring allreduce, and AdamW divides every gradient by its own magnitude, so
# the last-bit differences of near-zero gradients become visible (dp with
# --allreduce rd against ring differs by as much): there the strategies must
# agree with each other bit for bit and with dp within 1e-5.
for np in 1 2 3 4; do
  tol=1e-6
  [ "$np" -gt 2 ] && tol=1e-5
  like_dp "lenet-adamw-$np" "$np" "$tol" --model lenet5 --steps 20 --batch-size 8 --accumulate 2 \
    --optimizer adamw --weight-decay 0.05 --lr 0.001 --bucket-mb 0.05 --first-bucket-mb 0.01
  [ "$np" -gt 2 ] && for z in zero2 zero3; do
    compare "lenet-adamw-$np-zero1" "lenet-adamw-$np-$z" 0 && ok || bad "adamw np $np: $z differs from zero1"
  done
done

# ResNet-20 (batchnorm: running statistics stay per rank) by blocks.
for np in 2 3; do
  like_dp "resnet-$np" "$np" 1e-6 --model resnet20 --steps 20 --batch-size 4 --accumulate 2 --shard-unit block
done

# HYBRID_SHARD on 2 emulated nodes of 2 ranks: sharded within the node,
# averaged across nodes, as hier's allreduce adds (node sums first).
run 4 hyb-dp --model lenet5 --steps 20 --batch-size 8 --ranks-per-node 2 --allreduce hier &&
  for z in zero1 zero2 zero3; do
    run 4 "hyb-$z" --model lenet5 --steps 20 --batch-size 8 --ranks-per-node 2 --strategy "$z" \
      --shard-group node --shard-unit layer || continue
    compare hyb-dp "hyb-$z" 1e-6 && ok || bad "hybrid $z differs from dp"
  done

# Resume with another number of ranks, the same global batch (LeNet-5, no
# batchnorm): np 4 zero2 for 10 steps, then np 2 zero2 and np 2 dp, against
# the uninterrupted np 4 run; np 4 again is bit for bit.
rs=(--model lenet5 --batch-size 8 --shard-unit layer)
run 4 rs-whole --strategy zero2 "${rs[@]}" --steps 20 &&
  run 4 rs-first --strategy zero2 "${rs[@]}" --steps 10 --ckpt-every 10 --ckpt-dir "$tmp/ck" &&
  grep -q "^layout " "$tmp"/ck/ckpt-*/MANIFEST && ok || bad "the sharded checkpoint has no layout"
for to in "4 zero2 8" "2 zero2 16" "2 dp 16"; do
  set -- $to
  run "$1" "rs-$1-$2" --strategy "$2" --model lenet5 --batch-size "$3" --shard-unit layer --steps 20 \
    --ckpt-dir "$tmp/ck" --resume auto || continue
  tol=1e-6
  [ "$1" = 4 ] && tol=0
  compare rs-whole "rs-$1-$2" "$tol" && ok || bad "resume np 4 zero2 -> np $1 $2 differs from the whole run"
done
run 4 rs-10 --strategy dp "${rs[@]}" --steps 10 &&
  "$bin" ckpt export "$tmp/ck" -o "$tmp/ck.safetensors" >"$tmp/export.log" 2>&1 &&
  /usr/bin/python3 - "$tmp/ck.safetensors" "$tmp/rs-10.bin" <<'PY' && ok || bad "export of a sharded checkpoint: $(cat "$tmp/export.log")"
import json, struct, sys, array
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
want = array.array("f"); want.frombytes(open(sys.argv[2], "rb").read())
got = array.array("f")
for k, v in sorted(h.items(), key=lambda kv: kv[1]["data_offsets"][0] if kv[0] != "__metadata__" else -1):
    if k != "__metadata__" and v["dtype"] == "F32":
        got.frombytes(b[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]])
scale = max(abs(x) for x in want)
assert len(got) == len(want) and max(abs(x - y) for x, y in zip(got, want)) <= 1e-6 * scale
PY

# memory_accounted per rank against ZeRO's formulas for AdamW in FP32 (P
# parameters, N ranks, bytes): dp 16P, zero1 8P + 8P/N, zero2 4P + 12P/N plus
# the gradients of two consecutive units (the one written, one reduced),
# zero3 16P/N plus those and K gathered units (the buffers docs/PARALLELISM.md
# names; --json's shards says how large), within 10%.
for s in dp zero1 zero2 zero3; do
  run 4 "mem-$s" --model resnet20 --steps 2 --batch-size 4 --optimizer adamw --strategy "$s" \
    --shard-unit 0.05 --json "$tmp/mem-$s.json" || continue
  /usr/bin/python3 - "$tmp/mem-$s.json" "$s" <<'PY' && ok || bad "memory_accounted of $s"
import json, sys
j = json.load(open(sys.argv[1])); s = sys.argv[2]
P = j["config"]["parameters"]; N = j["config"]["world_size"]
sh = j.get("shards", {}); w = 4.0 * sh.get("in_flight_parameters", 0); g = 4.0 * sh.get("gathered_parameters", 0)
want = {"dp": 16 * P, "zero1": 8 * P + 8 * P / N, "zero2": 4 * P + 12 * P / N + w, "zero3": 16 * P / N + g + w}[s]
assert len(j["ranks"]) == N
for r in j["ranks"]:
    m = r["memory_accounted"]
    got = m["weights"] + m["gradients"] + m["optimizer"]
    assert abs(got - want) <= 0.1 * want, (r["rank"], got, want)
    assert m["total"] >= got + m["activations"] and r["peak_rss_bytes"] > 0
PY
done

# Bad input: one line on stderr, exit 2.
refused() { # refused NAME PATTERN NP args...
  local name=$1 pat=$2 np=$3; shift 3
  "$mpirun" -np "$np" "$bin" train --model lenet5 --dataset synthetic --steps 2 --progress none "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err"
  local st=$? lines
  lines=$(grep -c "scaleout" "$tmp/$name.err")
  [ $st -eq 2 ] && [ "$lines" -eq 1 ] && grep -q "$pat" "$tmp/$name.err" && ok ||
    bad "$name: exit $st, $lines lines: $(cat "$tmp/$name.err")"
}
refused unknown "unknown strategy 'zero9'" 2 --strategy zero9
refused node-size "does not divide\|do not divide" 4 --strategy zero2 --shard-group node --ranks-per-node 3
refused zero3-pipe "pipeline" 2 --strategy zero3 --pipeline-stages 2
refused zero3-naive "naive" 2 --strategy zero3 --ckpt-mode naive --ckpt-every 1 --ckpt-dir "$tmp/naive"
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
refused cover "do not cover the model" 2 --strategy zero2 --batch-size 16 --resume "$tmp/cover/ckpt-0000000010"

echo "shard_cli: $pass passed, $fail failed"
[ $fail -eq 0 ]
