#!/usr/bin/env bash
# GPT-2 as pipeline stages, end to end under MPI (docs/PARALLELISM.md,
# "Tied weights"; docs/TRANSFORMERS.md, "Parallelism"): stages cut between
# transformer blocks, the tied token table on the first stage (the
# embedding) and the last (the LM head's copy), their gradients summed
# every step. Against one process with the same micro-batches accumulated
# (--accumulate M):
#  - momentum with weight decay, clipping, 2 micro-batches: losses and final
#    parameters within 1e-6 relative, cut between the blocks and right after
#    the embedding (the last stage then holds every block)
#  - AdamW with weight decay and clipping: losses 1e-6; the parameters 1e-5.
#    The token table's gradient is the same sum in another order (one
#    process adds the LM head's part first, then the embedding's row by row;
#    the stages add the two sums), and AdamW divides each gradient by its
#    own magnitude, so last-bit differences of the table's near-zero rows
#    (tokens the text never holds) reach ~1e-6 (the sharded strategies'
#    AdamW rows at np 3-4 in shard_matrix.sh have the same cause)
#  - 2 stages x 2 replicas (np 4, the data-parallel average after the tie's
#    sum) against one process at the same global batch
#  - `ckpt export --format llmc|hf` of the stages' checkpoint: the whole
#    model, the last stage's copy of the tied table dropped
# Usage: pipe_gpt2.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 200) >"$tmp/text.txt"
"$bin" tokenize "$tmp/text.txt" -o "$tmp" >"$tmp/tokenize.log" 2>&1 || { echo "FAIL: tokenize: $(cat "$tmp/tokenize.log")"; exit 1; }
common=(train --model gpt2:L=2,H=2,C=64,T=32,V=256 --dataset tokens --data-dir "$tmp" --seq-len 32 --shuffle off
  --eval-every -1 --progress none --seed 7 --steps 10 --weight-decay 0.1 --clip-norm 0.5)

run() { # run NP OUT args...: trains, dumps the parameters to $tmp/OUT.bin and --json to $tmp/OUT.json
  local np=$1 out=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common[@]}" --dump-params "$tmp/$out.bin" --json "$tmp/$out.json" "$@" \
    >"$tmp/$out.log" 2>&1 || { bad "np=$np $*: exit $?: $(tail -3 "$tmp/$out.log")"; return 1; }
}

same() { # same A B LOSS_TOL PARAM_TOL: per-step losses and final parameters, max |a-b| / max |a|
  /usr/bin/python3 - "$tmp/$1" "$tmp/$2" "$3" "$4" <<'PY'
import array, json, sys
a, b, lt, pt = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
la, lb = json.load(open(a + ".json"))["step_loss"], json.load(open(b + ".json"))["step_loss"]
pa, pb = array.array("f"), array.array("f")
pa.frombytes(open(a + ".bin", "rb").read()); pb.frombytes(open(b + ".bin", "rb").read())
assert len(la) == len(lb) == 10 and len(pa) == len(pb) > 0, (len(la), len(lb), len(pa), len(pb))
el = max(abs(x - y) / abs(x) for x, y in zip(la, lb))
ep = max(abs(x - y) for x, y in zip(pa, pb)) / max(abs(x) for x in pa)
print("losses %.3g, parameters %.3g" % (el, ep))
sys.exit(0 if el <= lt and ep <= pt else 1)
PY
}

mom=(--optimizer momentum --lr 0.01)
adamw=(--optimizer adamw --lr 0.001)
run 1 one-mom "${mom[@]}" --batch-size 2 --accumulate 2 &&
  for cut in transformer.h.1.ln_1 transformer.h.0.ln_1; do
    run 2 "pipe-mom-$cut" "${mom[@]}" --batch-size 4 --pipeline-stages 2 --microbatches 2 --partition "0,$cut" &&
      r=$(same one-mom "pipe-mom-$cut" 1e-6 1e-6) && ok || bad "momentum, 2 stages cut at $cut: $r"
  done
run 1 one-adamw "${adamw[@]}" --batch-size 2 --accumulate 2 &&
  run 2 pipe-adamw "${adamw[@]}" --batch-size 4 --pipeline-stages 2 --microbatches 2 --partition 0,transformer.h.1.ln_1 \
    --ckpt-every 10 --ckpt-dir "$tmp/pck" &&
  { r=$(same one-adamw pipe-adamw 1e-6 1e-5) && ok || bad "AdamW, 2 stages: $r"; }
# The stages' checkpoint exported whole (the last stage's copy of the tied
# table dropped): one process started from the llm.c file with lr 0 holds
# exactly the parameters the stages ended with.
if "$bin" ckpt export "$tmp/pck" --format llmc -o "$tmp/pipe.llmc" >"$tmp/export.log" 2>&1 &&
   "$bin" ckpt export "$tmp/pck" --format hf -o "$tmp/pipe.safetensors" >>"$tmp/export.log" 2>&1; then
  "$bin" "${common[@]}" --batch-size 2 --optimizer sgd --lr 0 --weight-decay 0 --steps 1 --init-from "$tmp/pipe.llmc" \
    --dump-params "$tmp/back.bin" >"$tmp/back.log" 2>&1 && cmp -s "$tmp/pipe-adamw.bin" "$tmp/back.bin" &&
    ok || bad "the llm.c export of the stages' checkpoint is not the model they trained: $(tail -2 "$tmp/back.log")"
else
  bad "ckpt export of the stages' checkpoint: $(cat "$tmp/export.log")"
fi
# 2 stages x 2 replicas: a global batch of 8 in micro-batches of 2
run 1 one-dp "${mom[@]}" --batch-size 4 --accumulate 2 &&
  run 4 pipe-dp "${mom[@]}" --batch-size 4 --pipeline-stages 2 --microbatches 2 --partition 0,transformer.h.1.ln_1 &&
  { r=$(same one-dp pipe-dp 1e-6 1e-6) && ok || bad "2 stages x 2 replicas: $r"; }

echo "pipe_gpt2: $pass passed, $fail failed"
[ $fail -eq 0 ]
