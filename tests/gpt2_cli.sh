#!/usr/bin/env bash
# `scaleout generate` and `ckpt export --format llmc|hf` end to end on a tiny
# GPT-2: tokenize a Debian corpus (fortunes, or a generated text without it)
# with a trained byte-pair vocabulary, train briefly with a checkpoint,
# generate (greedy: the same text twice, from the checkpoint and from its llm.c
# export); the llm.c export read back by `train --init-from` is the same file
# bit for bit; the Hugging Face export has GPT2LMHeadModel's names, shapes and
# the checkpoint's values (tests/gpt2_hf_check.py, numpy); bad input is one
# line and exit 2.
set -uo pipefail
bin=$1
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
py=/usr/bin/python3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { :; }
bad() { echo "FAIL: $*"; fail=1; }
expect_usage() { # expect_usage TEXT ARGS...: exit 2 and one line containing TEXT
  local want=$1 out status
  shift
  out=$("$bin" "$@" 2>&1 >/dev/null)
  status=$?
  [ "$status" = 2 ] && [ "$(wc -l <<<"$out")" = 1 ] && grep -qF -- "$want" <<<"$out" ||
    bad "scaleout $*: exit $status, want 2 and one line with '$want': $out"
}

corpus=/usr/share/games/fortunes/fortunes
if [ ! -r "$corpus" ]; then
  corpus=$tmp/text.txt
  for i in $(seq 300); do echo "the quick brown fox $i jumps over the lazy dog."; echo %; done >"$corpus"
fi
spec=gpt2:L=2,H=2,C=64,T=32,V=320
"$bin" tokenize "$corpus" -o "$tmp/tok" --vocab 320 --doc-sep % >"$tmp/log" 2>&1 || bad "tokenize: $(cat "$tmp/log")"
[ -s "$tmp/tok/encoder.json" ] && [ -s "$tmp/tok/vocab.bpe" ] || bad "tokenize wrote no vocabulary"
# bytes are saved too, so generate can read any tokenize output
"$bin" tokenize "$corpus" -o "$tmp/bytes" --doc-sep % >"$tmp/log" 2>&1 || bad "tokenize (bytes): $(cat "$tmp/log")"
[ -s "$tmp/bytes/encoder.json" ] || bad "tokenize (bytes) wrote no vocabulary"

train() { # train OUT ARGS...
  local out=$1
  shift
  "$bin" train --model $spec --dataset tokens --data-dir "$tmp/tok" --seq-len 32 --batch-size 8 --optimizer adamw \
    --threads 2 --eval-every -1 --progress none "$@" >"$tmp/$out.log" 2>&1 || bad "train $out: $(tail -2 "$tmp/$out.log")"
}
train ck --lr 3e-3 --steps 60 --ckpt-every 60 --ckpt-dir "$tmp/ck"

# generate: the prompt, then new text; greedy is deterministic
gen() { "$bin" generate --tokenizer "$tmp/tok" --prompt "The" --tokens 24 "$@" 2>"$tmp/gen.err"; }
g1=$(gen --ckpt "$tmp/ck" --temperature 0) || bad "generate --ckpt: $(cat "$tmp/gen.err")"
g2=$(gen --ckpt "$tmp/ck" --temperature 0) || bad "generate again: $(cat "$tmp/gen.err")"
[ "$g1" = "$g2" ] || bad "greedy generation differs between two runs: '$g1' vs '$g2'"
[[ "$g1" == The* ]] || bad "the output does not start with the prompt: '$g1'"
grep -q "new in" "$tmp/gen.err" || bad "no rate line on stderr: $(cat "$tmp/gen.err")"
s1=$(gen --ckpt "$tmp/ck" --temperature 0.8 --top-k 20 --seed 5) &&
  s2=$(gen --ckpt "$tmp/ck" --temperature 0.8 --top-k 20 --seed 5) && [ "$s1" = "$s2" ] ||
  bad "sampling with one seed is not reproducible"

# llm.c export: generate from it gives the same text; train --init-from it (lr 0) exports the same file
"$bin" ckpt export "$tmp/ck" --format llmc -o "$tmp/m.bin" >"$tmp/log" 2>&1 || bad "export llmc: $(cat "$tmp/log")"
g3=$(gen --init-from "$tmp/m.bin" --temperature 0) || bad "generate --init-from: $(cat "$tmp/gen.err")"
[ "$g1" = "$g3" ] || bad "generate from the llm.c export differs: '$g1' vs '$g3'"
train back --init-from "$tmp/m.bin" --lr 0 --weight-decay 0 --steps 1 --ckpt-every 1 --ckpt-dir "$tmp/back"
"$bin" ckpt export "$tmp/back" --format llmc -o "$tmp/back.bin" >"$tmp/log" 2>&1 || bad "export llmc again: $(cat "$tmp/log")"
cmp -s "$tmp/m.bin" "$tmp/back.bin" || bad "--init-from of the llm.c export does not give its parameters back"

# Hugging Face export against the checkpoint's own safetensors
mkdir -p "$tmp/hf"
"$bin" ckpt export "$tmp/ck" --format hf -o "$tmp/hf/model.safetensors" >"$tmp/log" 2>&1 || bad "export hf: $(cat "$tmp/log")"
"$bin" ckpt export "$tmp/ck" -o "$tmp/plain.safetensors" >"$tmp/log" 2>&1 || bad "export: $(cat "$tmp/log")"
if "$py" -c 'import numpy' 2>/dev/null; then
  "$py" "$src/tests/gpt2_hf_check.py" "$tmp/hf/model.safetensors" "$tmp/plain.safetensors" >"$tmp/hf.log" ||
    bad "hf export: $(cat "$tmp/hf.log")"
else
  echo "note: numpy missing, the Hugging Face layout check skipped"
fi

# Bad input: one line naming the flag or file, exit 2
"$bin" train --model lenet5 --dataset synthetic --steps 1 --batch-size 4 --eval-every -1 --progress none \
  --ckpt-every 1 --ckpt-dir "$tmp/lenet" >"$tmp/log" 2>&1 || bad "train lenet5: $(tail -2 "$tmp/log")"
expect_usage "is not a GPT-2" ckpt export "$tmp/lenet" --format llmc -o "$tmp/x.bin"
expect_usage "is not a GPT-2" ckpt export "$tmp/lenet" --format hf -o "$tmp/x.st"
expect_usage "--format: unknown value" ckpt export "$tmp/ck" --format onnx -o "$tmp/x"
expect_usage "is not a GPT-2" generate --ckpt "$tmp/lenet" --tokenizer "$tmp/tok"
expect_usage "--ckpt DIR or --init-from FILE" generate --tokenizer "$tmp/tok"
expect_usage "give the vocabulary" generate --ckpt "$tmp/ck"
expect_usage "$tmp/nothing" generate --ckpt "$tmp/nothing" --tokenizer "$tmp/tok"
expect_usage "no encoder.json" generate --ckpt "$tmp/ck" --tokenizer "$tmp"
expect_usage "needs --model" generate --init-from "$tmp/plain.safetensors" --tokenizer "$tmp/tok"
expect_usage "--encoder and --bpe" generate --ckpt "$tmp/ck" --encoder "$tmp/tok/encoder.json"
expect_usage "--temperature" generate --ckpt "$tmp/ck" --tokenizer "$tmp/tok" --temperature -1
expect_usage "context is 32" generate --ckpt "$tmp/ck" --tokenizer "$tmp/tok" --prompt "$(head -c 400 "$corpus")"
head -c 1000 "$tmp/m.bin" >"$tmp/short.bin"
expect_usage "short.bin" generate --init-from "$tmp/short.bin" --tokenizer "$tmp/tok"
# a vocabulary smaller than the model's: the bytes (256) cannot decode what a 320-token model draws
expect_usage "the vocabulary has 256 tokens, the model draws from 320" generate --ckpt "$tmp/ck" --tokenizer "$tmp/bytes"
exit $fail
