# Sourced by the sharded-strategy tests (shard_cli.sh, shard_matrix.sh) after
# script_lib.sh: runs that dump their parameters, and comparisons of them.
# $bin is the scaleout binary.

common=(train --dataset synthetic --synthetic-samples 1280 --eval-every -1 --progress none --seed 7 --clip-norm 0.5)

# Under the second MPI library (make test-mpich: SCALEOUT_TEST_SECOND_MPI=1)
# only the cases whose collectives differ by library run again: blocks of
# uneven counts (reduce-scatter / allgather with counts), chunked units, the
# node and cross groups of HYBRID_SHARD. What the strategy computes alone
# (optimizers, checkpoint files, memory accounting) runs once.
# (full_only, script_lib.sh, says which.)

# resumes_like STEPS "NP STRATEGY BATCH"...: each run resumes ${rs[@]} from
# $tmp/ck for STEPS steps and must equal rs-whole: bitwise on 2 ranks (the
# checkpoint's world), to 1e-6 on others (the same global batch, summed in
# another order).
resumes_like() {
  local steps=$1 tol; shift
  for to in "$@"; do
    set -- $to
    run "$1" "rs-$1-$2" --strategy "$2" "${rs[@]}" --batch-size "$3" --steps "$steps" --ckpt-dir "$tmp/ck" \
      --resume auto || continue
    tol=1e-6
    [ "$1" = 2 ] && tol=0
    compare rs-whole "rs-$1-$2" "$tol" && ok || bad "resume -> np $1 $2: $(relerr rs-whole "rs-$1-$2")"
  done
}

run() { # run NP OUT args...: trains and dumps parameters to $tmp/OUT.bin
  local np=$1 out=$2 args=() dp=0; shift 2
  for a in "$@"; do [ "$a" = dp ] && dp=1; done
  while [ $# -gt 0 ]; do # dp refuses the shard flags (they would do nothing)
    if [ $dp = 1 ] && [ "$1" = --shard-unit ]; then shift 2; continue; fi
    args+=("$1"); shift
  done
  set -- "${args[@]}"
  "$mpirun" -np "$np" "$bin" "${common[@]}" --dump-params "$tmp/$out.bin" "$@" >"$tmp/$out.log" 2>&1 ||
    { bad "np=$np $*: exit $?: $(tail -3 "$tmp/$out.log")"; return 1; }
}


relerr() { # relerr A B: prints max |a-b| / max |a|
  /usr/bin/python3 - "$tmp/$1.bin" "$tmp/$2.bin" <<'PY'
import sys, array
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[1], "rb").read()); b.frombytes(open(sys.argv[2], "rb").read())
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
print(max(abs(x - y) for x, y in zip(a, b)) / max(abs(x) for x in a))
PY
}

# like_dp NAME NP TOL args...: dp and zero1/2/3 of one configuration.
like_dp() {
  local name=$1 np=$2 tol=$3; shift 3
  run "$np" "$name-dp" --strategy dp "$@" || return
  for z in zero1 zero2 zero3; do
    run "$np" "$name-$z" --strategy "$z" "$@" || continue
    compare "$name-dp" "$name-$z" "$tol" && ok || bad "$name: $z differs from dp at np $np: $(relerr "$name-dp" "$name-$z")"
  done
}

# exports_like CKPT PARAMS: `ckpt export` of checkpoint CKPT holds the
# parameters of dump PARAMS (1e-6).
exports_like() {
  "$bin" ckpt export "$1" -o "$tmp/export.safetensors" >"$tmp/export.log" 2>&1 &&
    /usr/bin/python3 - "$tmp/export.safetensors" "$tmp/$2.bin" <<'PY' && ok || bad "export of a sharded checkpoint: $(cat "$tmp/export.log")"
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
}

# refused NAME PATTERN NP args...: one line on stderr naming PATTERN, exit 2
# (refused_each: a line from each rank, for what every rank checks alone).
refused() { each=1 refused_by "$@"; }
refused_each() { each=$3 refused_by "$@"; }
refused_by() {
  local name=$1 pat=$2 np=$3; shift 3
  "$mpirun" -np "$np" "$bin" train --model lenet5 --dataset synthetic --steps 2 --progress none "$@" \
    >"$tmp/$name.out" 2>"$tmp/$name.err"
  local st=$? lines
  lines=$(grep -c "scaleout" "$tmp/$name.err")
  [ $st -eq 2 ] && [ "$lines" -ge 1 ] && [ "$lines" -le "$each" ] && grep -q "$pat" "$tmp/$name.err" && ok ||
    bad "$name: exit $st, $lines lines: $(cat "$tmp/$name.err")"
}
