# Sourced by the CLI test scripts (tests/*.sh): the source tree, the MPI
# launcher wrapper that adds this machine's flags, a temporary directory
# removed at exit, and pass/fail counting (ok; bad MESSAGE prints FAIL).
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
mpirun=$src/scripts/mpirun.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
# full_only WHAT: false under the second MPI library (make test-mpich sets
# SCALEOUT_TEST_SECOND_MPI=1), which reruns only the cases whose MPI traffic
# the first pass's other cases do not already cover.
full_only() { [ "${SCALEOUT_TEST_SECOND_MPI:-0}" != 1 ] || { echo "skip under the second MPI: $1"; return 1; }; }
# refuse NP PATTERN args...: `train` with ${common[@]} (the caller's) for
# $refuse_steps steps (1) on NP ranks exits 2 with one message from scaleout
# (each rank may print it; the launcher's own lines aside) matching PATTERN.
refuse() {
  local np=$1 pat=$2; shift 2
  "$mpirun" -np "$np" "$bin" "${common[@]}" --steps "${refuse_steps:-1}" "$@" >"$tmp/out" 2>"$tmp/err"
  local st=$?
  if [ $st -eq 2 ] && [ "$(grep '^scaleout' "$tmp/err" | sort -u | wc -l)" -eq 1 ] && grep -q -- "$pat" "$tmp/err"; then ok
  else bad "np $np $*: exit $st, stderr: $(cat "$tmp/err")"; fi
}

# compare A B TOL: $tmp/A.bin and $tmp/B.bin (float32 dumps) agree: max |a-b|
# <= TOL * max |a|, printed; TOL 0 = bitwise. Status 0 when they do.
compare() {
  /usr/bin/python3 - "$tmp/$1.bin" "$tmp/$2.bin" "$3" <<'PY'
import sys, array
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[1], "rb").read()); b.frombytes(open(sys.argv[2], "rb").read())
tol = float(sys.argv[3])
assert len(a) == len(b) and len(a) > 0, (len(a), len(b))
if tol == 0:
    sys.exit(0 if a.tobytes() == b.tobytes() else 1)
scale = max(abs(x) for x in a)
err = max(abs(x - y) for x, y in zip(a, b))
print(f"max abs diff {err:.3g} = {err / scale:.3g} relative")
sys.exit(0 if err <= tol * scale else 1)
PY
}

# page_dom HTML OUT: the page as headless Chromium renders it (its DOM in
# OUT, the browser's log in OUT.log); leaves $chrome and ${flags[@]} set for
# screenshots. With no Chromium it prints the counts so far and exits the
# script: 77 (skip) when nothing failed, 1 otherwise.
page_dom() {
  chrome=$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)
  if [ -z "$chrome" ]; then
    echo "$pass passed, $fail failed (browser part skipped: chromium not installed)"
    [ $fail -eq 0 ] && exit 77 || exit 1
  fi
  flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$tmp/chrome-profile")
  timeout 120 "$chrome" "${flags[@]}" --enable-logging=stderr --v=0 --dump-dom "file://$1" >"$2" 2>"$2.log"
}

# page_checks HTML NAME (after page_dom HTML "$tmp/dom.html"): no console
# errors from the page's scripts (Chromium logs them as CONSOLE lines), and
# a screenshot NAME.png, kept in $SCALEOUT_REPORT_SHOTS when set.
page_checks() {
  grep -E 'CONSOLE.*(Uncaught|Error)|"Uncaught' "$tmp/dom.html.log" && bad "console errors" || ok
  local shots=${SCALEOUT_REPORT_SHOTS:-$tmp}
  mkdir -p "$shots"
  timeout 120 "$chrome" "${flags[@]}" --window-size=1300,2400 --screenshot="$shots/$2.png" "file://$1" >/dev/null 2>&1
  [ -s "$shots/$2.png" ] && ok || bad "no screenshot"
}
