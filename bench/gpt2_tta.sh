#!/usr/bin/env bash
# Time to a validation loss for GPT-2 with gradient compression and local SGD
# (docs/COMPRESSION.md, "GPT-2 by validation loss"): the third workload of the
# time-to-accuracy matrix beside bench/compress_tta.sh's image models.
#   SPEC (gpt2:L=4,H=4,C=128,T=64,V=512, 0.87 M parameters: 3.5 MB of FP32 gradient a step) on the fortunes corpus with a byte-pair
#   vocabulary of 512 trained on it (`scaleout tokenize --vocab 512 --doc-sep %
#   --val-fraction 0.05`, FILES of /usr/share/games/fortunes), NP ranks x 1
#   thread, BATCH (8) sequences of SEQ (64) tokens per rank, AdamW lr LR (1e-3,
#   no weight decay), clipping at 1, evaluation of the whole validation shard
#   after every epoch until the loss is at most TARGET or MAX_EPOCHS (10).
# Both sides start from the same weights, GPT-2's initialisation drawn per seed
# (bench/torch_gpt2_tta.py --write-init: llm.c's model file, scaleout's
# --init-from), and read the same batches (llm.c's order, --shuffle off), so a
# seed is one initialisation. The peer is PyTorch 1.13 DDP over gloo with its
# hooks (bench/torch_gpt2_tta.py: none, fp16_compress_hook, powerSGD_hook).
# Links, OUT, SEEDS, NP, RPN, METHODS, HOOKS and --table as bench/compress_tta.sh
# (bench/tta_lib.sh); run it under the benchmark lock (/work/bin/so-bench).
#   bench/gpt2_tta.sh [REPEATS] [LINKS] [TARGET]    defaults: 3 "shm 1gbit" 3.90
#   bench/gpt2_tta.sh --table DIR                   medians of DIR's runs
#   OUT=/tmp/g SEEDS=42 METHODS="none powersgd:4" HOOKS="none" bench/gpt2_tta.sh 1 1gbit 3.9
set -euo pipefail

here="$(dirname "${BASH_SOURCE[0]}")"
if [ "${1:-}" = --table ]; then
  exec /usr/bin/python3 "$here/tta_table.py" "${2:?--table needs a directory}" --loss --acc-epoch "${ACC_EPOCH:-1}" "${@:3}"
fi
repeats="${1:-3}" links="${2:-shm 1gbit}" target="${3:-3.90}"
methods="${METHODS:-none fp16 powersgd:4 local:8 auto}"
hooks="${HOOKS-none fp16 powersgd:4}"
# shellcheck source=bench/tta_lib.sh
. "$here/tta_lib.sh" sogpt2 gpt2-tta
spec="${SPEC:-gpt2:L=4,H=4,C=128,T=64,V=512}" batch="${BATCH:-8}" seq="${SEQ:-64}" lr="${LR:-1e-3}"
epochs="${MAX_EPOCHS:-10}" fortunes=/usr/share/games/fortunes
read -r -a files <<<"${FILES:-fortunes literature riddles wisdom}"
export TTA_PEER="$src/bench/torch_gpt2_tta.py"

# The corpus, tokenized once per results directory.
tok="$out/tok"
if [ ! -s "$tok/fortunes_val.bin" ]; then
  "$src/build/scaleout" tokenize "${files[@]/#/$fortunes/}" -o "$tok" --name fortunes --vocab 512 --doc-sep % \
    --val-fraction 0.05 >"$out/tokenize.log"
fi

for link in $links; do
  tta_link_up "$link"
  for seed in $(tta_seeds "$repeats"); do
    init="$out/init-s$seed.bin" # GPT-2's initialisation for this seed, both sides
    [ -s "$init" ] || /usr/bin/python3 "$TTA_PEER" --write-init "$init" --spec "$spec" --seed "$seed"
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
          tta_scaleout "$link" "$name" bench accuracy --model "$spec" --dataset tokens --data-dir "$tok" \
            --seq-len "$seq" --batch-size "$batch" --optimizer adamw --lr "$lr" --weight-decay 0 --clip-norm 1 \
            --shuffle off --init-from "$init" --target-loss "$target" --max-epochs "$epochs" --seed "$seed" \
            $(tta_method_flags "$m") --mllog "$out/$name.mllog"
        else
          tta_torch "$link" "$name" --init "$init" --data-dir "$tok" --seq "$seq" --batch "$batch" --lr "$lr" \
            --clip 1 --target-loss "$target" --max-epochs "$epochs" $(tta_peer_flags "$m")
        fi
      done
    done
  done
  tta_link_down "$link"
done
echo "# runs in $out; $spec on fortunes (${files[*]}) to validation loss $target, $np ranks x 1 thread" \
  "($rpn per node across nodes), batch $batch x $seq tokens per rank, AdamW lr $lr, clip 1;" \
  "$(lscpu | sed -n 's/^Model name: *//p')"
/usr/bin/python3 "$src/bench/tta_table.py" "$out" --loss --acc-epoch "${ACC_EPOCH:-1}"
