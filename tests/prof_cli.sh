#!/usr/bin/env bash
# `scaleout train --profile` end to end (docs/PROFILING.md):
#  - the merged timeline of 2 ranks is valid JSON, names every rank and track,
#    and its events nest per track (tests/prof_check_trace.py; checked to fail
#    on a crafted overlap); SCALEOUT_TIMELINE=FILE writes a timeline alone
#  - statistics match the run: steps x buckets gradient allreduces of
#    steps x parameters x 4 bytes in total, size-table counts add up
#  - the step window and detail levels shape the trace
#  - one rank sleeping per step (SCALEOUT_PROF_TEST_SLEEP) shows in load balance
#  - checkpoint stalls appear on the timeline of every rank
#  - bad flags exit 2 with a message
# Usage: prof_cli.sh path/to/scaleout
set -u
bin=$1
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
mpirun=$src/scripts/mpirun.sh
check=$src/tests/prof_check_trace.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

common=(train --model lenet5 --dataset synthetic --synthetic-samples 1024 --batch-size 32 --eval-every -1
  --progress none --bucket-mb 0.05 --first-bucket-mb 0.02)

# 1. Two ranks, 6 steps, window 2:4.
if "$mpirun" -np 2 "$bin" "${common[@]}" --steps 6 --profile "$tmp/p2" --timeline-steps 2:4 >"$tmp/p2.log" 2>&1; then
  ok
  python3 "$check" "$tmp/p2/timeline.json" 2 && ok || bad "2-rank timeline"
  grep -q "profile: 2 rank(s), 5 of 6 steps (the first 1 left out): parallel efficiency" "$tmp/p2.log" && ok || bad "no summary: $(cat "$tmp/p2.log")"
  python3 - "$tmp/p2" <<'PY' && ok || bad "2-rank statistics"
import json, sys
d = sys.argv[1]
p = json.load(open(d + "/profile.json"))
t = json.load(open(d + "/timeline.json"))
steps, buckets, params = p["throughput"]["steps"], p["throughput"]["gradient_buckets"], int(p["config"]["params"])
assert steps == 6 and buckets >= 3, (steps, buckets)
assert p["environment"]["statistics_skip_steps"] == 1
steps -= 1  # the first step is in the timeline only
assert len(p["ranks"]) == 2 and [r["rank"] for r in p["ranks"]] == [0, 1]
for r in p["ranks"]:
    g = [c for c in r["comm"] if c["use"] == "gradients"]
    assert len(g) == 1 and g[0]["collective"] == "allreduce" and g[0]["algorithm"] == "mpi", g
    g = g[0]
    assert g["calls"] == steps * buckets, (g["calls"], steps, buckets)
    assert g["bytes"] == steps * params * 4, (g["bytes"], params)
    assert sum(s["count"] for s in g["sizes"]) == g["calls"]
    for s in g["sizes"]:
        assert s["min_s"] <= s["avg_s"] <= s["max_s"]
    b = [c for c in r["comm"] if c["use"] == "params"]
    assert b and b[0]["collective"] == "bcast" and b[0]["bytes"] >= params * 4, b
    assert r["totals"]["steps"] == steps
    assert len(r["layers"]) >= 5 and r["layers"][0]["name"] == "conv1"
for k in ("load_balance", "comm_efficiency", "parallel_efficiency", "data_wait_share"):
    assert 0 <= p["pop"][k] <= 1, (k, p["pop"])
assert 0 <= p["pop"]["overlap_pct"] <= 100
assert 0 < p["pop"]["step_load_balance"] <= p["pop"]["load_balance"] + 1e-12  # sum of maxima >= maximum of sums
ev = [e for e in t["traceEvents"] if e["ph"] == "X"]
for pid in (0, 1):
    mine = [e for e in ev if e["pid"] == pid]
    # window steps 2 and 3 in detail: gradient allreduces per bucket, layers
    grads = [e for e in mine if e["cat"] == "gradients"]
    assert sorted({e["args"]["step"] for e in grads}) == [2, 3] and len(grads) == 2 * buckets, len(grads)
    assert all(e["args"]["bytes"] > 0 and e["args"]["algorithm"] == "mpi" for e in grads)
    assert sum(e["args"]["bytes"] for e in grads) == 2 * params * 4
    summ = [e for e in mine if e["name"] == "step (summary)"]
    assert sorted(e["args"]["step"] for e in summ) == [0, 1, 4, 5], summ
    fwd = [e for e in mine if e["cat"] == "forward"]
    assert {e["args"]["step"] for e in fwd} == {2, 3} and any(e["name"] == "conv1" for e in fwd)
    assert len([e for e in mine if e["name"] == "step" and e["cat"] == "phase"]) == 2
assert len(t["otherData"]["clock_offsets_us"]) == 2
PY
else
  bad "np=2 profile run: $(tail -5 "$tmp/p2.log")"
fi

# 2. The checker itself rejects a partial overlap on one track.
cat >"$tmp/badtrace.json" <<'JSON'
{"traceEvents":[{"name":"process_name","ph":"M","pid":0,"args":{"name":"rank 0"}},
{"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"compute"}},
{"name":"a","ph":"X","pid":0,"tid":0,"ts":0,"dur":10},{"name":"b","ph":"X","pid":0,"tid":0,"ts":5,"dur":10}]}
JSON
python3 "$check" "$tmp/badtrace.json" >/dev/null && bad "checker accepted overlapping events" || ok

# 3. SCALEOUT_TIMELINE alone, block detail, one process; step detail has no layers.
SCALEOUT_TIMELINE=$tmp/tl.json "$bin" train --model resnet20 --dataset synthetic --synthetic-samples 64 \
  --batch-size 8 --steps 2 --eval-every -1 --progress none --profile-detail block >"$tmp/tl.log" 2>&1 &&
  python3 "$check" "$tmp/tl.json" 1 >/dev/null && [ ! -e "$tmp/profile.json" ] &&
  python3 -c "
import json, sys
ev = json.load(open(sys.argv[1]))['traceEvents']
names = {e['name'] for e in ev if e.get('cat') == 'forward'}
assert 'layer2.1' in names and 'layer2.1.conv1' not in names, names
" "$tmp/tl.json" && ok || bad "SCALEOUT_TIMELINE / block detail: $(tail -3 "$tmp/tl.log")"
"$bin" "${common[@]}" --steps 3 --profile "$tmp/step" --profile-detail step >"$tmp/step.log" 2>&1 &&
  python3 -c "
import json, sys
ev = json.load(open(sys.argv[1] + '/timeline.json'))['traceEvents']
assert not [e for e in ev if e.get('cat') in ('forward', 'backward')]
assert len([e for e in ev if e.get('name') == 'step']) == 3
" "$tmp/step" && ok || bad "step detail: $(tail -3 "$tmp/step.log")"

# Checkpoints show on the timeline: the training thread's checkpoint stalls,
# named "checkpoint" on the compute track, inside properly nested tracks.
if "$mpirun" -np 2 "$bin" "${common[@]}" --steps 9 --ckpt-every 3 --ckpt-local "$tmp/ck" \
  --profile "$tmp/ckp" --timeline-steps all >"$tmp/ckp.log" 2>&1; then
  python3 "$check" "$tmp/ckp/timeline.json" 2 && python3 -c "
import json, sys
ev = json.load(open(sys.argv[1]))['traceEvents']
marks = [e for e in ev if e.get('name') == 'checkpoint' and e.get('ph') == 'X']
assert len({e['pid'] for e in marks}) == 2, marks
" "$tmp/ckp/timeline.json" && ok || bad "no checkpoint events on the timeline: $(tail -3 "$tmp/ckp.log")"
else
  bad "profiled checkpointing run: $(tail -3 "$tmp/ckp.log")"
fi

# 4. Rank 1 sleeps 40 ms per step: load balance drops, rank 0 waits in communication.
# (both launchers pass the environment to ranks on the local machine)
if SCALEOUT_PROF_TEST_SLEEP=1:40 "$mpirun" -np 2 "$bin" "${common[@]}" --steps 8 \
  --profile "$tmp/slow" --profile-detail step >"$tmp/slow.log" 2>&1; then
  python3 - "$tmp/slow/profile.json" <<'PY' && ok || bad "imbalance not visible: $(grep profile: "$tmp/slow.log")"
import json, sys
p = json.load(open(sys.argv[1]))
r0, r1 = (r["totals"] for r in p["ranks"])
print("imbalance run: load balance %.3f, rank useful %.3f / %.3f s, rank 0 comm wait %.3f s"
      % (p["pop"]["load_balance"], r0["useful_s"], r1["useful_s"], r0["comm_wait_s"]))
assert r1["useful_s"] > r0["useful_s"] + 7 * 0.03
assert p["pop"]["load_balance"] < 0.95  # 0.6 in a Release build; compute is slow under ASan
assert r0["comm_wait_s"] > 7 * 0.02
PY
else
  bad "imbalance run: $(tail -3 "$tmp/slow.log")"
fi

# 5. Bad input: exit 2 with one line naming the flag.
expect2() { # expect2 PATTERN args...
  local pat=$1; shift
  "$bin" "$@" >"$tmp/bad.log" 2>&1
  local st=$?
  if [ $st -eq 2 ] && grep -q -- "$pat" "$tmp/bad.log"; then ok; else bad "$*: exit $st: $(cat "$tmp/bad.log")"; fi
}
expect2 "timeline-steps" "${common[@]}" --steps 1 --profile "$tmp/x" --timeline-steps 5:2
expect2 "profile-detail" "${common[@]}" --steps 1 --profile "$tmp/x" --profile-detail layers
expect2 "cannot create directory" "${common[@]}" --steps 1 --profile /proc/no/such/dir

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
