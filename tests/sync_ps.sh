#!/usr/bin/env bash
# The parameter server (`--sync ssp:S|async --ps-ranks K`, docs/COMPRESSION.md):
#  - ssp:0 on 3 ranks (1 server + 2 workers) is sync on 2 ranks: equal to 1e-6 after 20 steps,
#    with SGD momentum and with AdamW; 2 servers on 4 ranks too
#  - ssp:2 and async train LeNet-5 (300 steps: the loss falls below 1.6 from 2.3) and report
#    their bytes and staleness in --json; ssp's staleness stays <= S
#  - with one worker slowed 30% (SCALEOUT_TEST_SLOW_RANK), ssp:3 observes a staleness above 1
#    and at most 3, and async runs to the end; twice as slow, ssp:8 above 4 and at most 8,
#    async above 8, and a SIGTERM under ssp:8 stops every rank after the checkpointed step
#  - bad input: --ps-ranks >= the world, and the combinations it does not run, exit 2 with one line
# Usage: sync_ps.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"

data=(--dataset synthetic --synthetic-samples 4096)
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && data=(--dataset fashion-mnist)
common=(train --model lenet5 "${data[@]}" --progress none --seed 7 --batch-size 32)

run() { # run NP OUT args...: trains, dumps the parameters to $tmp/OUT.bin
  local np=$1 out=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common[@]}" --dump-params "$tmp/$out.bin" "$@" >"$tmp/$out.log" 2>&1 ||
    { bad "np=$np $*: exit $?: $(tail -3 "$tmp/$out.log")"; return 1; }
}

compare() { # compare A B TOL: max |a-b| <= TOL * max |a|
  /usr/bin/python3 - "$tmp/$1.bin" "$tmp/$2.bin" "$3" <<'PY'
import sys, array
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[1], "rb").read()); b.frombytes(open(sys.argv[2], "rb").read())
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
err = max(abs(x - y) for x, y in zip(a, b))
sys.exit(0 if err <= float(sys.argv[3]) * max(abs(x) for x in a) else 1)
PY
}

short=(--steps 20 --eval-every -1)
run 2 sync-m "${short[@]}" && run 3 ssp0-m "${short[@]}" --sync ssp:0 &&
  { compare sync-m ssp0-m 1e-6 && ok || bad "ssp:0 (1 server + 2 workers) differs from sync on 2 ranks (momentum)"; }
adamw=(--optimizer adamw --lr 0.001 --weight-decay 0.01)
run 2 sync-a "${short[@]}" "${adamw[@]}" && run 3 ssp0-a "${short[@]}" "${adamw[@]}" --sync ssp:0 &&
  { compare sync-a ssp0-a 1e-6 && ok || bad "ssp:0 differs from sync on 2 ranks (AdamW)"; }
run 4 ssp0-k2 "${short[@]}" --sync ssp:0 --ps-ranks 2 &&
  { compare sync-m ssp0-k2 1e-6 && ok || bad "ssp:0 with 2 servers on 4 ranks differs from sync on 2 ranks"; }
grep -q "parameter server (--sync ssp:0): 2 worker(s), 2 server(s)" "$tmp/ssp0-k2.log" && ok ||
  bad "no parameter server summary: $(tail -2 "$tmp/ssp0-k2.log")"

for m in ssp:2 async; do
  run 3 "conv-$m" --steps 300 --sync "$m" --json "$tmp/$m.json" || continue
  /usr/bin/python3 - "$tmp/$m.json" "$m" <<'PY' && ok || bad "$m: $(tail -2 "$tmp/conv-$m.log")"
import json, sys
j = json.load(open(sys.argv[1])); ps = j["parameter_server"]
loss = j["epochs"][-1]["loss"]
assert loss < 1.6, f"loss {loss} not below 1.6"
assert ps["workers"] == 2 and ps["servers"] == 1 and ps["bytes_per_step"] > 0, ps
if sys.argv[2].startswith("ssp:"):
    assert ps["staleness_max"] <= int(sys.argv[2][4:]), ps
PY
done

# Staleness beyond 1: with worker 1 sleeping 30% of its compute every step,
# the fast worker runs ahead; ssp:3 observes a staleness above 1 and never
# above 3; async runs to the end with the slowed worker.
slowed=(ssp:3 async)
[ "${SCALEOUT_TEST_HOOKS:-1}" = 1 ] || { echo "skip: the slow worker needs a build with -DSCALEOUT_TEST_HOOKS=ON"; slowed=(); }
for m in "${slowed[@]}"; do
  SCALEOUT_TEST_SLOW_RANK=1:0.3 run 3 "slow-$m" --steps 200 --eval-every -1 --sync "$m" --json "$tmp/slow-$m.json" ||
    continue
  /usr/bin/python3 - "$tmp/slow-$m.json" "$m" <<'PY' && ok || bad "$m with a slow worker: $(tail -1 "$tmp/slow-$m.log")"
import json, sys
ps = json.load(open(sys.argv[1]))["parameter_server"]
assert ps["staleness_max"] > 1, ps
if sys.argv[2].startswith("ssp:"):
    assert ps["staleness_max"] <= int(sys.argv[2][4:]), ps
PY
done

# ssp:S holds a fast worker back at S clocks, not sooner: the job's step-end
# agreements complete S + 2 steps after they are posted (so_strategy.lead).
# With worker 1 twice as slow, ssp:8 observes a staleness above 4 (where the
# agreements stopped it when they completed 2 steps on) and at most 8, and
# async above 8. A SIGTERM still stops every rank after the same step, with
# the checkpoint of that step complete.
if [ ${#slowed[@]} -gt 0 ]; then
  for m in ssp:8 async; do
    SCALEOUT_TEST_SLOW_RANK=1:1.0 run 3 "lead-$m" --steps 100 --eval-every -1 --sync "$m" --json "$tmp/lead-$m.json" ||
      continue
    /usr/bin/python3 - "$tmp/lead-$m.json" "$m" <<'PY' && ok || bad "$m, worker 1 twice as slow: $(tail -1 "$tmp/lead-$m.log")"
import json, sys
ps = json.load(open(sys.argv[1]))["parameter_server"]
if sys.argv[2] == "ssp:8":
    assert 4 < ps["staleness_max"] <= 8, ps
else:
    assert ps["staleness_max"] > 8, ps
PY
  done
  SCALEOUT_TEST_SLOW_RANK=1:1.0 "$mpirun" -np 3 "$bin" "${common[@]}" --steps 100000 --eval-every -1 --sync ssp:8 \
    --ckpt-every 50 --ckpt-dir "$tmp/lead-ck" >"$tmp/lead-term.log" 2>&1 &
  job=$!
  for _ in $(seq 300); do compgen -G "$tmp/lead-ck/ckpt-*/MANIFEST" >/dev/null && break; sleep 0.1; done
  pkill -TERM -f "^$bin .*$tmp/lead-ck"
  for _ in $(seq 400); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
  kill -0 $job 2>/dev/null && { bad "ssp:8: still running 40 s after SIGTERM"; pkill -KILL -f "^$bin .*$tmp/lead-ck"; }
  wait $job
  step=$(sed -n 's/.*SIGTERM: stopped after step \([0-9]*\) and checkpointed it.*/\1/p' "$tmp/lead-term.log")
  [ -n "$step" ] && "$bin" ckpt verify "$tmp/lead-ck" >"$tmp/lead-verify" 2>&1 &&
    grep -qE "ckpt-0*$step .* OK" "$tmp/lead-verify" && ok ||
    bad "ssp:8 SIGTERM: no checkpoint of the stop step ($step): $(tail -2 "$tmp/lead-term.log") $(cat "$tmp/lead-verify")"
fi

refuse() { # refuse NP PATTERN args...: exit 2 and one line from scaleout (mpiexec adds its own) matching PATTERN
  local np=$1 pat=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common[@]}" --steps 2 "$@" >"$tmp/out" 2>"$tmp/err"
  local st=$?
  if [ $st -eq 2 ] && [ "$(grep -c "^scaleout" "$tmp/err")" -eq 1 ] && grep -q -- "$pat" "$tmp/err"; then ok
  else bad "$*: exit $st, stderr: $(cat "$tmp/err")"; fi
}
refuse 3 "--ps-ranks 3: --sync ssp:1 needs fewer server ranks than the 3 rank(s)" --sync ssp:1 --ps-ranks 3
refuse 1 "--ps-ranks 1: --sync async needs fewer server ranks than the 1 rank(s)" --sync async
refuse 3 "--sync async runs a parameter server, which does not take --compress" --sync async --compress fp16
refuse 3 "--sync ssp:1 runs a parameter server, which does not take --clip-norm" --sync ssp:1 --clip-norm 1
refuse 3 "which does not take --ckpt-mode naive" --sync ssp:1 --ckpt-every 5 --ckpt-dir "$tmp/ck" --ckpt-mode naive
refuse 3 "runs under --strategy dp only" --sync ssp:1 --strategy zero1

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
