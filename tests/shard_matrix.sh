#!/usr/bin/env bash
# Sharded data parallelism under MPI, the wider matrix (docs/PARALLELISM.md,
# "What is checked"; the quick end-to-end cases are shard_cli.sh):
#  - zero1, zero2 and zero3 train like dp: the parameters after 20 steps,
#    N = 3 and 4 (HYBRID_SHARD, resume, memory) ranks (2: shard_cli; 1 to
#    4 threads of one process: test_shard), units cut inside tensors with
#    uneven last blocks,
#    clipping, accumulation 2, momentum and AdamW with weight decay, LeNet-5
#    and ResNet-20 (batchnorm), HYBRID_SHARD on 2 (emulated) nodes
#  - a resume at np 4 zero2 -> np 2 zero2 and -> np 2 dp continues like the
#    np 4 run
#  - each strategy's memory_accounted against ZeRO's formulas (10%)
# Under the second MPI library only LeNet-5 at np 3 (uneven blocks) and
# HYBRID_SHARD (the node and cross groups) run again (shard_lib.sh, full_only).
# Usage: shard_matrix.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"
. "$(dirname "$0")/shard_lib.sh"

# LeNet-5 with momentum, a unit per layer (blocks cut inside weight tensors;
# 3 ranks give uneven blocks), accumulation 2: 20 steps (np 2: shard_cli).
like_dp lenet-mom-3 3 1e-6 --model lenet5 --steps 20 --batch-size 8 --accumulate 2 --shard-unit layer

# HYBRID_SHARD on 2 emulated nodes of 2 ranks: sharded within the node,
# averaged across nodes, as hier's allreduce adds (node sums first).
run 4 hyb-dp --model lenet5 --steps 20 --batch-size 8 --ranks-per-node 2 --allreduce hier &&
  for z in zero1 zero2 zero3; do
    run 4 "hyb-$z" --model lenet5 --steps 20 --batch-size 8 --ranks-per-node 2 --strategy "$z" \
      --shard-group node --shard-unit layer || continue
    compare hyb-dp "hyb-$z" 1e-6 && ok || bad "hybrid $z differs from dp: $(relerr hyb-dp "hyb-$z")"
  done
full_only "AdamW, ResNet-20, resume, memory (the library's part is above)" || {
  echo "shard_matrix: $pass passed, $fail failed"
  [ $fail -eq 0 ]
  exit
}

# AdamW with weight decay at 3 ranks (2: 1e-6, shard_cli). The
# ring reduce-scatter associates each block's sum from another rank than
# the allreduce dp uses, and AdamW divides every gradient by its own
# magnitude, so last-bit differences of near-zero gradients become visible
# (dp with --allreduce rd against ring differs by as much): the strategies,
# with the same units (--shard-unit 0.05), agree with each other bit for bit
# and with dp within 1e-5.
like_dp lenet-adamw-3 3 1e-5 --model lenet5 --steps 20 --batch-size 8 --accumulate 2 \
  --optimizer adamw --weight-decay 0.05 --lr 0.001 --bucket-mb 0.05 --first-bucket-mb 0.01 --shard-unit 0.05
for z in zero2 zero3; do
  compare lenet-adamw-3-zero1 "lenet-adamw-3-$z" 0 && ok || bad "adamw np 3: $z differs from zero1"
done

# ResNet-20 (batchnorm: running statistics stay per rank) by blocks. At 2
# ranks 1e-6. At 3, dp's allreduce and the strategies' reduce-scatter add
# in different orders and 20 steps of batchnorm and clipping amplify the
# last bits to ~1e-4: the strategies agree with each other bit for bit and
# differ from dp by at most twice what dp's own two allreduce algorithms
# (rd, ring) differ by.
like_dp resnet-2 2 1e-6 --model resnet20 --steps 20 --batch-size 4 --accumulate 2 --shard-unit block
rn=(--model resnet20 --steps 20 --batch-size 4 --accumulate 2)
run 3 resnet-3-dp --strategy dp "${rn[@]}" --allreduce rd &&
  run 3 resnet-3-ring --strategy dp "${rn[@]}" --allreduce ring &&
  ref=$(relerr resnet-3-dp resnet-3-ring) &&
  for z in zero1 zero2 zero3; do
    run 3 "resnet-3-$z" --strategy "$z" "${rn[@]}" --shard-unit block || continue
    err=$(relerr resnet-3-dp "resnet-3-$z")
    /usr/bin/python3 -c "import sys; sys.exit(not $err <= max(1e-6, 2 * $ref))" && ok ||
      bad "resnet np 3: $z differs from dp by $err, dp rd from ring by $ref"
    [ $z = zero1 ] || { compare resnet-3-zero1 "resnet-3-$z" 0 && ok || bad "resnet np 3: $z differs from zero1"; }
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

echo "shard_matrix: $pass passed, $fail failed"
[ $fail -eq 0 ]
