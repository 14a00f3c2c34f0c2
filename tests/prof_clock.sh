#!/usr/bin/env bash
# Clock alignment of the merged timeline (docs/PROFILING.md, "Clocks"): rank
# 1's profiler clock is skewed by +0.5 s and runs 5% fast
# (SCALEOUT_PROF_TEST_CLOCK, a test-only variable). The gradient allreduces of
# a step end at the same moment on both ranks (up to latency), so in the
# merged trace their ends must agree with the offset + drift correction, and
# visibly disagree with the start offset only (drift uncorrected) and with no
# correction at all. The measured drift must be the injected one.
# Usage: prof_clock.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"
[ "${SCALEOUT_TEST_HOOKS:-1}" = 1 ] || { echo "SKIP: the clock test needs a build with -DSCALEOUT_TEST_HOOKS=ON (SCALEOUT_PROF_TEST_CLOCK)"; exit 77; }

args=(train --model lenet5 --dataset synthetic --synthetic-samples 4096 --batch-size 32 --eval-every -1
  --progress none --bucket-mb 0.05 --first-bucket-mb 0.02 --steps 200 --timeline-steps all)
# misalign MODE: prints the median of rank 1's minus rank 0's allreduce end (ms),
# the run's length (ms) and rank 1's measured offset (s) and drift.
misalign() {
  python3 - "$1" <<'PY'
import json, statistics, sys
t = json.load(open(sys.argv[1]))
ends = {}
for e in t["traceEvents"]:
    if e.get("ph") == "X" and e["name"] == "allreduce" and e["args"].get("use") == "gradients":
        ends.setdefault((e["args"]["step"], e["args"]["bucket"]), {})[e["pid"]] = e["ts"] + e["dur"]
d = [v[1] - v[0] for v in ends.values() if len(v) == 2]
assert len(d) >= 199 * 3, len(d)
# the skew reaches per-layer spans too (else they fall outside their phase and are dropped)
layers = [sum(1 for e in t["traceEvents"] if e.get("cat") == "forward" and e["pid"] == r) for r in (0, 1)]
assert layers[0] == layers[1] > 0, layers
steps = [e["ts"] for e in t["traceEvents"] if e.get("ph") == "X" and e["name"] == "step" and e["pid"] == 0]
print("%.4f %.1f %.6f %.6f" % (statistics.median(d) / 1e3, (max(steps) - min(steps)) / 1e3,
      t["otherData"]["clock_offsets_us"][1] / 1e6, t["otherData"]["clock_drift_ppm"][1] / 1e6))
PY
}
check="$src/tests/prof_check_trace.py"
declare -A med len off drift
for mode in drift offset none; do
  if SCALEOUT_PROF_TEST_CLOCK=1:0.5:0.05:$mode "$mpirun" -np 2 "$bin" "${args[@]}" --profile "$tmp/$mode" \
    >"$tmp/$mode.log" 2>&1 && python3 "$check" "$tmp/$mode/timeline.json" 2 >/dev/null &&
    read -r med[$mode] len[$mode] off[$mode] drift[$mode] < <(misalign "$tmp/$mode/timeline.json") &&
    [ -n "${med[$mode]}" ]; then
    ok
    echo "$mode: allreduce ends differ by ${med[$mode]} ms (median), run ${len[$mode]} ms," \
      "rank 1 offset ${off[$mode]} s, drift ${drift[$mode]}"
  else
    bad "$mode run: $(tail -3 "$tmp/$mode.log")"
    med[$mode]=nan
  fi
done
# rank 0 = rank 1's clock - 0.5 - 0.05 (t - start) ... per second of rank 1's clock: -0.05 / 1.05
awk -v m="${med[drift]}" -v o="${off[drift]:-0}" -v d="${drift[drift]:-0}" 'BEGIN {
  exit !(m == m + 0 && m < 1 && m > -1 && o < -0.499 && o > -0.501 && d < -0.05 / 1.05 * 0.95 && d > -0.05 / 1.05 * 1.05) }' &&
  ok || bad "corrected: ends differ by ${med[drift]} ms (want |x| < 1), offset ${off[drift]:-?} (want -0.5), drift ${drift[drift]:-?} (want -0.0476)"
# Drift uncorrected: the error grows to 5% of the time since the start; the median is about 5% of half the run.
awk -v m="${med[offset]}" -v l="${len[offset]:-0}" 'BEGIN { exit !(m == m + 0 && m > 0.01 * l && m > 5) }' &&
  ok || bad "offset only: ends differ by ${med[offset]} ms, want > max(5, 1% of ${len[offset]:-?}) ms"
awk -v m="${med[none]}" 'BEGIN { exit !(m == m + 0 && m > 400) }' && ok || bad "uncorrected: ends differ by ${med[none]} ms, want > 400"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
