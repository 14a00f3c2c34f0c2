#!/usr/bin/env bash
# `scaleout plan`: bad input exits 2 with one line naming the flag; plans of
# LeNet-5 and ResNet-20 (memory balance and lists of first nodes, no
# measurement) cover every node once, add up to the model's parameters
# (PyTorch's counts), list the tensors crossing each cut (ResNet-20's
# residual connections included) and the schedule's bubble; one time-balanced
# plan measured here.
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"

expect_usage() { # pattern args...
  local pat=$1; shift
  "$bin" plan "$@" >"$tmp/out" 2>"$tmp/err"
  local st=$?
  if [ $st -ne 2 ]; then bad "plan $* exited $st, want 2"; return; fi
  if [ "$(wc -l <"$tmp/err")" -ne 1 ] || ! grep -qF -- "$pat" "$tmp/err"; then
    bad "plan $*: stderr does not say '$pat' in one line: $(cat "$tmp/err")"; return
  fi
  ok
}
expect_usage "--model: unknown model 'nosuch'" --model nosuch --pipeline-stages 2
expect_usage "--pipeline-stages is required" --model lenet5 --partition memory
expect_usage "--pipeline-stages 9: the model has 8 layers" --model lenet5 --pipeline-stages 9 --partition memory
expect_usage "--microbatches 3: does not divide --batch-size 64" --model lenet5 --pipeline-stages 2 --microbatches 3
expect_usage "--virtual-stages 3: 3 x 4 stages, but the model has 8 layers" --model lenet5 --pipeline-stages 4 \
  --schedule interleaved --virtual-stages 3 --partition memory
expect_usage "--virtual-stages 2: only with --schedule interleaved" --model lenet5 --pipeline-stages 2 \
  --virtual-stages 2 --partition memory
expect_usage "--schedule: unknown value 'pipedream'" --model lenet5 --pipeline-stages 2 --schedule pipedream
expect_usage "--partition: unknown value 'fastest'" --model lenet5 --pipeline-stages 2 --partition fastest
expect_usage "--partition: stage 2 starts at node 3, not after stage 1's start 5" --model lenet5 --partition 0,5,3
expect_usage "--partition: 'fc9' is neither" --model lenet5 --partition 0,fc9
expect_usage "--partition: 2 stage starts, but --pipeline-stages 3 needs 3" --model lenet5 --pipeline-stages 3 \
  --partition 0,fc1
expect_usage "--max-memory: no split into 2 stages" --model lenet5 --pipeline-stages 2 --partition memory \
  --max-memory 1K
expect_usage "--max-memory: '12 parsecs'" --model lenet5 --pipeline-stages 2 --max-memory "12 parsecs"

run() { # name args...
  local name=$1; shift
  "$bin" plan "$@" --json "$tmp/$name.json" >"$tmp/$name.log" 2>&1 || { bad "plan $*: $(tail -3 "$tmp/$name.log")"; return 1; }
}
check() { # name python-assertions-on-plan-p
  local name=$1 code=$2
  if /usr/bin/python3 - "$tmp/$name.json" "$code" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
torch_params = {"lenet5": 61706, "resnet20": 272474}  # as tests/test_zoo.c
st, P = p["stages"], p["pipeline_stages"] * p["virtual_stages"]
assert len(st) == P, (len(st), P)
assert st[0]["first"] == 0 and st[-1]["last"] == p["nodes"] - 1, st
assert all(a["last"] + 1 == b["first"] and a["first"] <= a["last"] for a, b in zip(st, st[1:])), st
assert sum(s["parameters"] for s in st) == torch_params[p["model"]] == p["parameters"], p["parameters"]
def crossing(cut):
    return [t["name"] for t in p["tensors"] if t["from_stage"] <= cut < t["to_last"]]
for cut in range(P - 1):
    assert crossing(cut), cut  # something always crosses a cut
exec(sys.argv[2])
PY
  then ok; else bad "$name: $(head -3 "$tmp/$name.log")"; fi
}

for P in 2 3 4; do
  run lenet5_$P --model lenet5 --pipeline-stages $P --partition memory &&
    check lenet5_$P 'assert all(len(crossing(c)) == 1 for c in range(P - 1)), p["tensors"]'
  run resnet20_$P --model resnet20 --pipeline-stages $P --partition memory --microbatches 8 &&
    check resnet20_$P "assert abs(p['bubble'] - ($P - 1) / (8 + $P - 1)) < 1e-8, p['bubble']"
done
# Lists by name: block boundaries send one tensor, a cut inside a block sends the block input too.
run blocks --model resnet20 --partition 0,layer1.1.conv1,layer2.0.conv1,layer3.0.conv1 --schedule gpipe &&
  check blocks 'assert [crossing(c) for c in range(3)] == [["add9"], ["add23"], ["add46"]], p["tensors"]
assert [s["in_flight"] for s in st] == [4] * 4 and abs(p["bubble"] - 3 / 7) < 1e-8, p'
run inside --model resnet20 --partition 0,layer1.0.conv2 &&
  check inside 'assert crossing(0) == ["bn1", "layer1.0.bn1"], crossing(0)
assert [s["in_flight"] for s in st] == [2, 1] and not p["measured"], p'
if grep -q "^cut 0 | 1: 2 tensors, 2048.0 KiB per micro-batch" "$tmp/inside.log" &&
   grep -q "bn1  *(16,32,32)  *1048576 B   from stage 0 to stage 1" "$tmp/inside.log"; then ok
else bad "inside: the cut is not printed as expected: $(cat "$tmp/inside.log")"; fi
run lenet_list --model lenet5 --pipeline-stages 3 --partition conv1,conv2,fc1 &&
  check lenet_list 'assert [s["first_name"] for s in st] == ["input", "conv2", "fc1"], st'
# Time balance measured here (a couple of steps at the micro-batch).
run timed --model resnet20 --pipeline-stages 2 --partition time --steps 2 --batch-size 32 &&
  check timed 'assert p["measured"] and all(s["seconds_per_microbatch"] > 0 for s in st), st
assert 1 < p["ideal_speedup"] < 2, p["ideal_speedup"]
assert p["measured_batch"] == 8 and p["check_batch"] == 0, p'
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
