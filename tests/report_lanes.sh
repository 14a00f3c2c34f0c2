#!/usr/bin/env bash
# The pipeline schedule in profile.json and `scaleout report` (docs/PROFILING.md,
# "Pipeline schedule"): 2-rank LeNet-5 runs with 2 stages x 4 micro-batches
# under gpipe, 1f1b and interleaved (2 chunks). On every stage: each
# micro-batch's forward and backward exactly once (per chunk), spans that do
# not overlap, in the order the schedule runs them (exact, no clocks
# involved), and on the common clock stage 1's forward of k after stage 0's
# (generous tolerance: only a mis-mapped clock fails it). The report draws
# the lanes as text rows and as a chart that renders without script errors
# in headless Chromium (skips, 77, without it).
# Usage: report_lanes.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"

common=(train --model lenet5 --dataset synthetic --synthetic-samples 512 --batch-size 16 --eval-every -1
  --progress none --steps 6 --pipeline-stages 2 --microbatches 4)
for sc in gpipe 1f1b interleaved; do
  extra=()
  [ $sc = interleaved ] && extra=(--virtual-stages 2)
  "$mpirun" -np 2 "$bin" "${common[@]}" --schedule $sc "${extra[@]}" --profile "$tmp/$sc" >"$tmp/$sc.log" 2>&1 &&
    ok || bad "$sc run: $(tail -3 "$tmp/$sc.log")"
done

# profile.json: the lanes' content against the schedules' rules.
check=$(python3 - "$tmp" <<'PY'
import json, sys
P, M, TOL_MS = 2, 4, 5.0
def expected(sc, d, v):
    """The passes a stage runs (src/pipe/exec.c): warm-up forwards, then one forward and one backward."""
    if sc == "interleaved":
        return None  # checked per (micro-batch, chunk) below
    warm = M if sc == "gpipe" else P - d - 1
    ops, f = [], 0
    while f < warm and f < M:
        ops.append("F%d" % f); f += 1
    for b in range(M):
        if f < M:
            ops.append("F%d" % f); f += 1
        ops.append("B%d" % b)
    return ops
problems = []
for sc, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2)):
    doc = json.load(open("%s/%s/profile.json" % (sys.argv[1], sc)))
    ps = doc.get("pipeline_schedule")
    if not ps:
        problems.append(sc + ": no pipeline_schedule"); continue
    if ps["schedule"] != sc or ps["microbatches"] != M or ps["stages"] != P or len(ps["ranks"]) != 2:
        problems.append(sc + ": header %r" % {k: ps[k] for k in ps if k != "ranks"})
    if ps["step"] < 1:
        problems.append(sc + ": step %d is the first" % ps["step"])
    by_stage = {}
    for r in ps["ranks"]:
        by_stage[r["stage"]] = r
        passes = [s for s in r["spans"] if s["kind"] in "FB"]
        for kind in "FB":
            got = sorted((s["micro_batch"], s.get("chunk", 0)) for s in passes if s["kind"] == kind)
            want = sorted((k, c) for k in range(M) for c in range(v))
            if got != want:
                problems.append("%s stage %d: %s spans %r" % (sc, r["stage"], kind, got))
        spans = r["spans"]
        for a, b in zip(spans, spans[1:]):
            if not (a["t0_ms"] <= a["t1_ms"] <= b["t0_ms"] + 0.002):
                problems.append("%s stage %d: %r overlaps %r" % (sc, r["stage"], a, b))
        want = expected(sc, r["stage"], v)
        got = ["%s%d" % (s["kind"], s["micro_batch"]) for s in passes]
        if want and got != want:
            problems.append("%s stage %d: order %s, want %s" % (sc, r["stage"], got, want))
        if sc == "gpipe" and got.index("B0") != M:
            problems.append("gpipe stage %d: a backward before the last forward" % r["stage"])
        if sc == "1f1b" and r["stage"] == 0 and got[:P] != ["F%d" % k for k in range(P)]:
            problems.append("1f1b stage 0: warm-up %s" % got[:P])
    if sorted(by_stage) != list(range(P)) or sc == "interleaved":
        continue
    def span(stage, kind, k):
        return next(s for s in by_stage[stage]["spans"] if s["kind"] == kind and s["micro_batch"] == k)
    for k in range(M):  # stage 1 computes k's forward from stage 0's output, stage 0 its backward from stage 1's
        if span(1, "F", k)["t0_ms"] < span(0, "F", k)["t1_ms"] - TOL_MS or \
           span(0, "B", k)["t0_ms"] < span(1, "B", k)["t1_ms"] - TOL_MS:
            problems.append("%s micro-batch %d: stages out of order on the common clock" % (sc, k))
print("\n".join(problems) if problems else "ok")
PY
)
[ "$check" = ok ] && ok || bad "profile.json: $check"

# Text: the lanes, one row of 100 columns per stage, with forwards and backwards.
"$bin" report "$tmp/1f1b" --text >"$tmp/report.txt" 2>&1 || bad "report --text: $(cat "$tmp/report.txt")"
grep -q "== Pipeline schedule: " "$tmp/report.txt" && ok || bad "--text lacks the pipeline schedule"
rows=$(grep -cE '^stage [01] \(rank [01]\) +\|[^|]{100}\|$' "$tmp/report.txt")
[ "$rows" -eq 2 ] && ok || bad "--text: $rows lane rows of 100 columns, want 2: $(grep -A4 '^Step ' "$tmp/report.txt")"
grep -E '^stage 0 .*\|.*F.*B.*\|$' "$tmp/report.txt" >/dev/null && ok || bad "--text: stage 0 has no F then B"
"$bin" report "$tmp/interleaved" --text | grep -q "interleaved schedule" && ok || bad "--text: interleaved lanes"

# HTML: the lanes chart of each run renders, no script errors.
"$bin" report "$tmp/gpipe" "$tmp/1f1b" "$tmp/interleaved" -o "$tmp/report.html" >"$tmp/html.log" 2>&1 && ok ||
  bad "report -o: $(cat "$tmp/html.log")"
page_dom "$tmp/report.html" "$tmp/dom.html"
lanes=$(grep -o 'data-lanes="[0-9]*"' "$tmp/dom.html" | head -1 | tr -dc 0-9)
errors=$(grep -o 'data-errors="[0-9]*"' "$tmp/dom.html" | head -1 | tr -dc 0-9)
if [ "${lanes:-0}" -eq 3 ] && [ "${errors:-1}" -eq 0 ]; then ok
else bad "browser: lane charts=${lanes:-none} (want 3) errors=${errors:-none}: $(grep -o '<pre id="report-errors">[^<]*' "$tmp/dom.html")"; fi
page_checks "$tmp/report.html" lanes

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
