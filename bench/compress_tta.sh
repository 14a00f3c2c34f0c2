#!/usr/bin/env bash
# Time to accuracy with gradient compression (docs/COMPRESSION.md): MODEL
# (default LeNet-5; MODEL=mlp is the bandwidth-heavy 784-1024-1024-10, 1.9M
# parameters) on Fashion-MNIST, NP ranks x 1 thread, per-rank batch BATCH
# (32), SGD momentum 0.9, lr LR (0.01), evaluation after every epoch until
# TARGET or MAX_EPOCHS (8): `scaleout bench accuracy --compress M` for each
# method against PyTorch 1.13 DDP over gloo with its hooks
# (bench/torch_ddp_tta.py: none, fp16_compress_hook, powerSGD_hook), on shared
# memory (shm: one node) and across emulated nodes of scripts/cluster.sh at a
# `tc tbf` rate (RPN ranks per node, default 1). One seed per repeat; scaleout
# runs first on even seeds, PyTorch on odd ones.
#
# Composable: OUT=DIR appends to a results directory (a run already there is
# skipped), so a matrix can be split into short invocations (one link, a few
# methods, one seed each) and printed at the end with `--table DIR`
# (bench/tta_table.py: medians over seeds). Accuracy at a fixed epoch count:
# TARGET 1 never stops early; ACC_EPOCH=E reports the accuracy after epoch E.
# Methods sync, local:H[@S], diloco:H and gossip:* run as --sync (bench/tta_lib.sh).
# EVAL_STEPS=N also evaluates every N steps within an epoch (`bench accuracy
# --eval-steps`): the time to the target is then the training seconds up to
# the first evaluation past it, evaluations left out (the table says which).
# Takes /tmp/scaleout-cluster.lock while its cluster is up; run it under the
# benchmark lock (/work/bin/so-bench or flock /tmp/scaleout-bench.lock), which
# it does not take itself. Root only for the cluster links.
#   bench/compress_tta.sh [REPEATS] [LINKS] [TARGET]     defaults: 3 "shm 1gbit" 0.85
#   bench/compress_tta.sh --table DIR [--accuracy-only]  medians of DIR's runs
# auto across nodes reads a tuning table `scaleout tune` measures on the link
# once per results directory (AUTO_TUNE=off: the built-in model).
#   METHODS="none fp16 topk:0.01 powersgd:4 auto" HOOKS="none fp16 powersgd:4" to choose
#   OUT=/tmp/mlp SEEDS=42 MODEL=mlp BATCH=128 LR=0.05 METHODS="none fp16" bench/compress_tta.sh 1 1gbit 0.865
set -euo pipefail

if [ "${1:-}" = --table ]; then
  exec /usr/bin/python3 "$(dirname "${BASH_SOURCE[0]}")/tta_table.py" "${2:?--table needs a directory}" \
    --acc-epoch "${ACC_EPOCH:-1}" ${BASELINE:+--baseline "$BASELINE"} "${@:3}"
fi
repeats="${1:-3}" links="${2:-shm 1gbit}" target="${3:-0.85}"
methods="${METHODS:-none fp16 topk:0.01 powersgd:4}"
hooks="${HOOKS-none fp16 powersgd:4}"
# shellcheck source=bench/tta_lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/tta_lib.sh" sotta tta
model="${MODEL:-lenet5}" batch="${BATCH:-32}" lr="${LR:-0.01}" epochs="${MAX_EPOCHS:-8}"

# tta_tuning LINK METHOD: sets $tuning, the tuning table auto's run reads
# (SCALEOUT_TUNING): across nodes `scaleout tune` on the link, made once per
# results directory, so auto's link model is the measured one (the built-in
# model is one node's; docs/COMPRESSION.md). Empty for the other methods.
tta_tuning() {
  tuning=""
  [ "$2" = auto ] && [ "$1" != shm ] && [ "${AUTO_TUNE:-on}" = on ] || return 0
  tuning="$out/$1.tune"
  [ -s "$tuning" ] || "$cluster" mpirun -np "$np" --ranks-per-node "$rpn" "$src/build/scaleout" tune \
    --out "$tuning" --message-size 4K:16M >"$out/$1-tune.log" 2>&1 ||
    { echo "compress_tta: tune on $1 failed: $(tail -n 3 "$out/$1-tune.log")" >&2; tuning=""; }
}

for link in $links; do
  tta_link_up "$link"
  for seed in $(tta_seeds "$repeats"); do
    for m in $methods; do
      tag=$(tta_tag "$m")
      if [ $((seed % 2)) -eq 0 ]; then order="so pt"; else order="pt so"; fi
      for who in $order; do
        [ "$who" = so ] || [[ " $hooks " == *" $m "* ]] || continue
        name="$link-$tag-$who-s$seed"
        tta_done "$name" && continue
        printf '%s\t%s\t%s\t%s\t%s\n' "$link" "$m" "$who" "$seed" "$name.json" >>"$out/index.tsv"
        # shellcheck disable=SC2046
        if [ "$who" = so ]; then
          tta_tuning "$link" "$m"
          SCALEOUT_TUNING="$tuning" tta_scaleout "$link" "$name" bench accuracy --model "$model" --batch-size "$batch" --lr "$lr" \
            --target "$target" --max-epochs "$epochs" --seed "$seed" $(tta_method_flags "$m") --mllog "$out/$name.mllog" \
            ${EVAL_STEPS:+--eval-steps "$EVAL_STEPS"}
        else
          tta_torch "$link" "$name" --model "$model" --batch "$batch" --lr "$lr" --target "$target" \
            --max-epochs "$epochs" --seed "$seed" $(tta_peer_flags "$m")
        fi
      done
    done
  done
  tta_link_down "$link"
done
echo "# runs in $out; $model Fashion-MNIST to $target, $np ranks x 1 thread ($rpn per node across nodes), batch $batch per rank, lr $lr;" \
  "$(lscpu | sed -n 's/^Model name: *//p')"
/usr/bin/python3 "$src/bench/tta_table.py" "$out" --acc-epoch "${ACC_EPOCH:-1}" ${BASELINE:+--baseline "$BASELINE"}
