#!/usr/bin/env bash
# `make demo-gpt2`: a small GPT-2 trained from scratch on a Debian corpus (the
# fortunes package's plain-text files), then text generated from its
# checkpoint. Three steps, all `scaleout` commands:
#   tokenize  a byte-pair vocabulary of 512 tokens trained on the text, 5% held out
#   train     gpt2:L=4,H=4,C=128,T=64 with AdamW, clipping and a cosine schedule (~3 minutes)
#   generate  from the checkpoint, through the key/value cache
# and a check that the validation loss ends below the figure docs/TRANSFORMERS.md
# states (exit 1 otherwise). QUICK=1 is the end-to-end check `make test` runs
# (tests/demo_gpt2): a smaller model and corpus, under a minute.
#
# usage: scripts/demo-gpt2.sh [BIN] [OUT_DIR]     (defaults: build/scaleout, demo-gpt2/)
set -euo pipefail
bin=${1:-build/scaleout}
out=${2:-demo-gpt2}
fortunes=/usr/share/games/fortunes
threads=${THREADS:-2}
if [ ! -r "$fortunes/fortunes" ]; then
  echo "demo-gpt2: $fortunes/fortunes is missing: install Debian's fortunes (scripts/install-deps.sh does)" >&2
  [ "${QUICK:-0}" = 1 ] && exit 77 # skipped in make test
  exit 2
fi
if [ "${QUICK:-0}" = 1 ]; then
  # four files (0.16 MB), a 2-layer model, 300 steps
  texts=("$fortunes"/{fortunes,literature,riddles,wisdom})
  vocab=384 spec=gpt2:L=2,H=2,C=64,T=64,V=384 steps=300 batch=16 lr=3e-3 target=${TARGET:-4.3}
else
  # every plain-text file of the package (43 files, 2.6 MB: not the .dat indexes, not the .u8 duplicates)
  mapfile -t texts < <(find "$fortunes" -maxdepth 1 -type f ! -name '*.dat' ! -name '*.u8' | sort)
  vocab=512 spec=gpt2:L=4,H=4,C=128,T=64,V=512 steps=${STEPS:-1000} batch=16 lr=2e-3 target=${TARGET:-3.9}
fi
rm -rf "$out"
mkdir -p "$out"

echo "== tokenize: ${#texts[@]} fortune files, a byte-pair vocabulary of $vocab tokens trained on them =="
"$bin" tokenize "${texts[@]}" -o "$out/tok" --name fortunes --vocab "$vocab" --doc-sep % --val-fraction 0.05

echo "== train: $spec, $steps steps of $batch x 64 tokens, $threads threads =="
"$bin" train --model "$spec" --dataset tokens --data-dir "$out/tok" --seq-len 64 --batch-size "$batch" \
  --optimizer adamw --lr "$lr" --weight-decay 0.1 --clip-norm 1 --lr-schedule cosine --steps "$steps" \
  --eval-every 0 --threads "$threads" --ckpt-every "$steps" --ckpt-dir "$out/ckpt" --json "$out/train.json" \
  --progress lines

# the validation loss of the last evaluation, from --json
val=$(/usr/bin/python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["epochs"]; print(e[-1]["test_loss"])' \
  "$out/train.json")

echo "== generate: 3 samples from the checkpoint (temperature 0.8, top-k 40) =="
for seed in 1 2 3; do
  "$bin" generate --ckpt "$out/ckpt" --tokenizer "$out/tok" --tokens 120 --temperature 0.8 --top-k 40 \
    --seed "$seed" --threads 1
  echo "--"
done
if /usr/bin/python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)' "$val" "$target"; then
  echo "demo-gpt2: validation loss $val < $target (nats per token): ok"
else
  echo "demo-gpt2: validation loss $val is not below $target" >&2
  exit 1
fi
