#!/usr/bin/env bash
# `scaleout bench` under MPI (docs/BENCHMARKS.md):
#  - bench train on 2 ranks: tf_cnn total images/sec over both ranks, a valid record with 2 ranks
#  - a 2-point strong scaling sweep (np 1,2) with a tiny model, end to end: the command launches
#    mpiexec itself (honouring $MPIEXEC), keeps the global batch, prints the table, valid record
#  - a weak sweep keeps the per-rank batch
#  - bench tta: methods x seeds launched interleaved, the table against the first method, a
#    valid record and MLLOG per run; by validation loss on token data (--target-loss)
#  - plot draws the scaling curve, the collective benchmark's latency/bandwidth curves and the
#    tta curves (one per method)
# Usage: bench_mpi.sh path/to/scaleout
set -u
bin=$1
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
mpirun=$src/scripts/mpirun.sh
schema="/usr/bin/python3 $src/tests/bench_schema.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
tiny=(--model lenet5 --synthetic-samples 1024 --num-warmup-batches 2 --num-batches 8)

if "$mpirun" -np 2 "$bin" bench train "${tiny[@]}" --batch-size 16 --display-every 4 --json "$tmp/train2.json" \
  >"$tmp/train2.log" 2>&1; then
  [ "$(grep -c '^total images/sec:' "$tmp/train2.log")" -eq 1 ] && grep -q "^per-rank images/sec: [0-9.]* [0-9.]*$" "$tmp/train2.log" &&
    ok || bad "np=2 output (rank 0 only, both ranks listed): $(cat "$tmp/train2.log")"
  $schema "$tmp/train2.json" >/dev/null && grep -q '"world_size": 2' "$tmp/train2.json" && ok || bad "np=2 record"
else bad "bench train np=2 failed: $(tail -3 "$tmp/train2.log")"; fi

if "$bin" bench scaling "${tiny[@]}" --np 1,2 --mode strong --batch-size 32 --repeat 2 --json "$tmp/strong.json" \
  >"$tmp/strong.log" 2>&1; then
  grep -qE "^ +1 +32 +32 .* 1\.00x +100\.0%$" "$tmp/strong.log" && grep -qE "^ +2 +16 +32 " "$tmp/strong.log" &&
    ok || bad "strong table: $(cat "$tmp/strong.log")"
  $schema "$tmp/strong.json" >/dev/null && ok || bad "strong scaling record"
else bad "strong sweep failed: $(tail -5 "$tmp/strong.log")"; fi

"$bin" bench scaling "${tiny[@]}" --np 1,2 --mode weak --batch-size 16 --repeat 1 --json "$tmp/weak.json" \
  >"$tmp/weak.log" 2>&1 && grep -qE "^ +2 +16 +32 " "$tmp/weak.log" && $schema "$tmp/weak.json" >/dev/null && ok ||
  bad "weak sweep: $(tail -5 "$tmp/weak.log")"

# A failing child is reported with its log, and the sweep exits non-zero.
"$bin" bench scaling "${tiny[@]}" --np 1 --repeat 1 --launcher-args "--no-such-launcher-flag" >"$tmp/badl.log" 2>&1
[ $? -ne 0 ] && grep -q "np=1 run 1 failed" "$tmp/badl.log" && ok || bad "failed child not reported: $(cat "$tmp/badl.log")"

# bench tta: every method x seed launched (interleaved), the table against the
# first method, a valid record; a data set cut to 1024 training and 256 test
# images of Fashion-MNIST keeps each run under a second.
fm=/usr/share/datasets/fashion-mnist
if [ -f "$fm/train-images-idx3-ubyte.gz" ]; then
  mkdir -p "$tmp/fm"
  /usr/bin/python3 - "$fm" "$tmp/fm" <<'PY'
import gzip, struct, sys
for name, n in [("train-images-idx3-ubyte.gz", 1024), ("train-labels-idx1-ubyte.gz", 1024),
                ("t10k-images-idx3-ubyte.gz", 256), ("t10k-labels-idx1-ubyte.gz", 256)]:
    d = gzip.open(f"{sys.argv[1]}/{name}").read()
    nd = d[3]
    dims = struct.unpack(">" + "I" * nd, d[4:4 + 4 * nd])
    per = 1
    for x in dims[1:]:
        per *= x
    head = d[:4] + struct.pack(">" + "I" * nd, n, *dims[1:])
    gzip.open(f"{sys.argv[2]}/{name}", "wb").write(head + d[4 + 4 * nd:4 + 4 * nd + n * per])
PY
  if "$bin" bench tta --methods none,fp16,local:4 --seeds 1,2 --target 0.3 --json "$tmp/tta.json" --keep "$tmp/ttak" \
      -- --model lenet5 --data-dir "$tmp/fm" --batch-size 32 --max-epochs 3 >"$tmp/tta.log" 2>&1; then
    [ "$(grep -cE '^  (none|fp16|local:4), seed [12]: ' "$tmp/tta.log")" -eq 6 ] &&
      grep -qE '^none +[0-3]/2 .* 1\.00x ' "$tmp/tta.log" && grep -qE '^fp16 +[0-3]/2 .* 2\.0x' "$tmp/tta.log" &&
      ls "$tmp/ttak"/local_4-seed2.json "$tmp/ttak"/fp16-seed1.mllog >/dev/null &&
      ok || bad "tta table or kept files: $(cat "$tmp/tta.log"; ls "$tmp/ttak")"
    $schema "$tmp/tta.json" >/dev/null && $schema --mllog "$tmp/ttak/local_4-seed1.mllog" >/dev/null &&
      ok || bad "tta record or MLLOG: $($schema "$tmp/tta.json" 2>&1)"
  else bad "bench tta failed: $(tail -5 "$tmp/tta.log")"; fi
fi

# bench tta by validation loss on token data (a tiny GPT-2): the loss column, a valid record.
printf 'the quick brown fox jumps over the lazy dog. %.0s' $(seq 300) >"$tmp/text.txt"
if "$bin" tokenize "$tmp/text.txt" -o "$tmp/tok" >"$tmp/tok.log" 2>&1 &&
   "$bin" bench tta --methods none,local:2 --seeds 1 --target-loss 2.5 --json "$tmp/ttal.json" -- \
     --model gpt2:L=1,H=2,C=32,T=16,V=256 --dataset tokens --data-dir "$tmp/tok" --seq-len 16 --batch-size 8 \
     --optimizer adamw --lr 0.003 --max-epochs 3 >"$tmp/ttal.log" 2>&1; then
  grep -q "loss @ ep" "$tmp/ttal.log" && grep -qE '^local:2 +[01]/1 ' "$tmp/ttal.log" &&
    $schema "$tmp/ttal.json" >/dev/null && grep -q '"target_loss": 2.5' "$tmp/ttal.json" &&
    ok || bad "tta by loss: $(cat "$tmp/ttal.log"; $schema "$tmp/ttal.json" 2>&1)"
else bad "bench tta --target-loss failed: $(tail -5 "$tmp/tok.log" "$tmp/ttal.log")"; fi

"$mpirun" -np 2 "$bin" bench allreduce -m 4:64K --json "$tmp/coll.json" >/dev/null 2>&1 && $schema "$tmp/coll.json" >/dev/null &&
  ok || bad "bench allreduce --json failed or is not a valid record"
if command -v gnuplot >/dev/null && [ -f "$tmp/strong.json" ]; then
  tta=(); [ -f "$tmp/tta.json" ] && tta=("$tmp/tta.json")
  "$bin" bench plot "$tmp/strong.json" "$tmp/coll.json" "$tmp/train2.json" "${tta[@]}" -o "$tmp/plots" \
    >"$tmp/plot.log" 2>&1 &&
    ls "$tmp/plots"/scaling-lenet5-strong-1.png "$tmp/plots"/allreduce-np2-2-latency.svg \
      "$tmp/plots"/allreduce-np2-2-bandwidth.png "$tmp/plots"/throughput.svg >/dev/null &&
    { [ ${#tta[@]} -eq 0 ] || [ "$(grep -c '^1 ' "$tmp/plots"/tta-4-*.dat | grep -c ':1$')" -eq 3 ]; } && ok ||
    bad "plot: $(cat "$tmp/plot.log"; ls "$tmp/plots")"
  /usr/bin/python3 - "$tmp/plots" <<'PY' && ok || bad "plot files invalid"
import glob, sys, xml.etree.ElementTree as ET
pngs, svgs = glob.glob(sys.argv[1] + "/*.png"), glob.glob(sys.argv[1] + "/*.svg")
want = 5 if glob.glob(sys.argv[1] + "/tta-*.dat") else 4
assert len(pngs) == want and len(svgs) == want, (pngs, svgs)
for p in pngs:
    assert open(p, "rb").read(8) == b"\x89PNG\r\n\x1a\n", p
for s in svgs:
    assert ET.parse(s).getroot().tag.endswith("svg"), s
PY
fi

echo "bench_mpi: $pass passed, $fail failed"
[ $fail -eq 0 ]
