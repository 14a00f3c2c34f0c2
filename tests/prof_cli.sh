#!/usr/bin/env bash
# `scaleout train --profile` end to end (docs/PROFILING.md):
#  - the merged timeline of 2 ranks is valid JSON, names every rank and track,
#    and its events nest per track (tests/prof_check_trace.py; checked to fail
#    on a crafted overlap); SCALEOUT_TIMELINE=FILE writes a timeline alone
#  - statistics match the run: steps x buckets gradient allreduces of
#    steps x parameters x 4 bytes in total, size-table counts add up
#  - the step window and detail levels shape the trace
#  - one rank sleeping per step (SCALEOUT_PROF_TEST_SLEEP) shows in load balance
#  - checkpoint stalls appear on the timeline of every rank, and the writer and
#    flush threads' work on two more tracks per rank: byte counts equal to the
#    shard files, the step window applied by checkpoint step, totals per kind
#    (also in `scaleout report`)
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
# Parts that need the test-only environment hooks skip without them.
hooks() { [ "${SCALEOUT_TEST_HOOKS:-1}" = 1 ] || { echo "skip: $1 needs a build with -DSCALEOUT_TEST_HOOKS=ON"; return 1; }; }

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
    # the default --allreduce auto resolves to the node's shared-memory algorithm on one node
    assert len(g) == 1 and g[0]["collective"] == "allreduce" and g[0]["algorithm"] == "hier", g
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
    assert all(e["args"]["bytes"] > 0 and e["args"]["algorithm"] == "hier" for e in grads)
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

# The checkpoint writer and flush threads on tracks 2 and 3 of every rank
# (smallcnn, 2 ranks on 2 emulated nodes, a checkpoint every 2 steps, each
# flushed): checkpoints 2 and 4 in detail, 6, 8, 10 as one summary per track.
shm=/dev/shm/scaleout-prof-cli-$$
if "$mpirun" -np 2 "$bin" train --model smallcnn --dataset synthetic --synthetic-samples 512 --batch-size 16 \
  --eval-every -1 --progress none --steps 10 --ckpt-every 2 --ckpt-local "$shm" --ckpt-dir "$tmp/ioshared" \
  --ckpt-flush-every 1 --ranks-per-node 1 --profile "$tmp/io" --timeline-steps 0:5 >"$tmp/io.log" 2>&1; then
  python3 "$check" "$tmp/io/timeline.json" 2 && python3 - "$tmp/io" "$shm" <<'PY' && ok || bad "checkpoint I/O tracks: $(tail -3 "$tmp/io.log")"
import glob, json, os, sys
d, shm = sys.argv[1:3]
ev = json.load(open(d + "/timeline.json"))["traceEvents"]
prof = json.load(open(d + "/profile.json"))
log = open(d + "/../io.log").read()
size = {}  # rank -> its shard's size on disk
for r in (0, 1):
    files = glob.glob(f"{shm}/node{r}/ckpt-*/shard-{r}.bin")
    assert files, (r, os.listdir(shm))
    size[r] = os.path.getsize(files[0])
for r in (0, 1):
    mine = [e for e in ev if e.get("pid") == r and e.get("tid") in (2, 3)]
    names = {e["tid"]: e["args"]["name"] for e in mine if e["ph"] == "M"}
    assert names == {2: "checkpoint I/O", 3: "checkpoint flush"}, names
    x = [e for e in mine if e["ph"] == "X"]
    def kind(name, tid=2):
        return [e for e in x if e["name"] == name and e["tid"] == tid]
    for name, want in (("snapshot", size[r]), ("shard write", size[r]), ("partner write", size[1 - r])):
        got = kind(name)
        assert sorted(e["args"]["step"] for e in got) == [2, 4], (r, name, got)
        assert all(e["args"]["bytes"] == want and e["args"]["MB/s"] > 0 for e in got), (r, name, want, got)
    assert sorted(e["args"]["step"] for e in kind("manifest")) == [2, 4]
    fl = kind("flush", 3)
    assert fl and all(e["args"]["bytes"] == size[r] for e in fl) and fl[0]["args"]["step"] == 2, (r, fl)
    summ = kind("checkpoint I/O (summary)")
    # per checkpoint (its summary is split where another checkpoint's work
    # comes in between): snapshot + shard write + partner write + manifest (a
    # few hundred bytes), for some also the shard files made ahead (file reserve)
    per = {}
    for e in summ:
        n, b = per.get(e["args"]["step"], (0, 0))
        per[e["args"]["step"]] = (n + e["args"]["events"], b + e["args"]["bytes"])
    assert sorted(per) == [6, 8, 10], summ
    lo, made = 2 * size[r] + size[1 - r], size[r] + size[1 - r]
    assert all((n == 4 and lo < b < lo + 4096) or (n == 5 and lo + made < b < lo + made + 4096)
               for n, b in per.values()), (per, summ)
    io = {k["kind"]: k for k in prof["ranks"][r]["checkpoint_io"]}
    assert io["shard write"]["count"] == 5 and io["shard write"]["bytes"] == 5 * size[r], io
    assert io["partner write"]["bytes"] == 5 * size[1 - r] and io["snapshot"]["count"] == 5, io
    assert io["flush"]["count"] >= 1 and io["flush"]["bytes"] == io["flush"]["count"] * size[r], io
    assert io["shard write"]["mb_per_s"] > 0 and io["shard write"]["seconds"] > 0, io
assert "profile: checkpoint I/O (all ranks): snapshot 10 x" in log, log
print("checkpoint I/O: shard %d / %d bytes, %d events on tracks 2-3" % (size[0], size[1],
      len([e for e in ev if e.get("tid") in (2, 3) and e["ph"] == "X"])))
PY
  # scaleout report: a "Checkpoint I/O" section (text and the page's data)
  "$bin" report "$tmp/io" --text >"$tmp/io.txt" 2>&1 && grep -q "== Checkpoint I/O: " "$tmp/io.txt" &&
    grep -Eq "^1 +shard write +5 " "$tmp/io.txt" && grep -Eq "^0 +flush " "$tmp/io.txt" &&
    "$bin" report "$tmp/io" -o "$tmp/io.html" >/dev/null 2>&1 && grep -q "partner write" "$tmp/io.html" &&
    ok || bad "report lacks checkpoint I/O: $(grep -A4 Checkpoint "$tmp/io.txt")"
else
  bad "profiled checkpoint I/O run: $(tail -3 "$tmp/io.log")"
fi
rm -rf "$shm"

# 4. Rank 1 sleeps 100 ms per step (well above compute noise on a loaded machine): load balance drops, rank 0 waits in communication.
# (both launchers pass the environment to ranks on the local machine)
if ! hooks "the imbalance check (SCALEOUT_PROF_TEST_SLEEP)"; then
  :
elif SCALEOUT_PROF_TEST_SLEEP=1:100 "$mpirun" -np 2 "$bin" "${common[@]}" --steps 8 \
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
