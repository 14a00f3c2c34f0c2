#!/usr/bin/env bash
# The merged timeline of a 2-rank `scaleout train --profile` run opens in a
# real trace viewer (speedscope's Chrome trace importer in headless Chromium,
# tests/prof_viewer.py): no import warnings, one process per rank, threads
# compute and comm, every slice imported. A trace with a partial overlap on
# one track must make the same check fail. Skips (77) when the viewer or
# Chromium is missing (scripts/install-deps.sh installs both).
# Usage: prof_viewer.sh path/to/scaleout
set -u
bin=$1
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
viewer=$src/tests/prof_viewer.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

if ! "$src/scripts/mpirun.sh" -np 2 "$bin" train --model lenet5 --dataset synthetic --synthetic-samples 1024 \
  --batch-size 32 --eval-every -1 --progress none --bucket-mb 0.05 --first-bucket-mb 0.02 --steps 12 \
  --timeline-steps 2:8 --profile "$tmp/p2" >"$tmp/train.log" 2>&1; then
  echo "FAIL: profiled run: $(tail -3 "$tmp/train.log")"
  exit 1
fi
shots=${SCALEOUT_REPORT_SHOTS:-$tmp}
mkdir -p "$shots"
timeout 180 python3 "$viewer" "$tmp/p2/timeline.json" 2 --screenshot "$shots/timeline.png"
st=$?
[ $st -eq 77 ] && exit 77
[ $st -eq 0 ] && ok || bad "the 2-rank timeline in the viewer (exit $st)"
[ $st -ne 0 ] || [ -s "$shots/timeline.png" ] && ok || bad "no screenshot"

# The same check on a broken trace: b starts inside a and ends after it.
cat >"$tmp/overlap.json" <<'JSON'
{"traceEvents":[{"name":"process_name","ph":"M","pid":0,"args":{"name":"rank 0"}},
{"name":"thread_name","ph":"M","pid":0,"tid":0,"args":{"name":"compute"}},
{"name":"thread_name","ph":"M","pid":0,"tid":1,"args":{"name":"comm"}},
{"name":"a","ph":"X","pid":0,"tid":0,"ts":0,"dur":10},{"name":"b","ph":"X","pid":0,"tid":0,"ts":5,"dur":10},
{"name":"c","ph":"X","pid":0,"tid":1,"ts":0,"dur":10}]}
JSON
timeout 180 python3 "$viewer" "$tmp/overlap.json" 1 >"$tmp/overlap.log" 2>&1
st=$?
[ $st -eq 1 ] && grep -q "import warnings" "$tmp/overlap.log" && ok || bad "overlap not caught (exit $st): $(cat "$tmp/overlap.log")"

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
