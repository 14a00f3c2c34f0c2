#!/usr/bin/env bash
# Failure-drill test: runs an MPI job that must END (not hang) with a non-zero
# status within MAX_S seconds and with PATTERN (grep -E) in its output.
# Usage: comm_expect_fail.sh MAX_S PATTERN command...   (ctest's TIMEOUT bounds a hang)
set -uo pipefail

max_s="$1"
pattern="$2"
shift 2
log="$(mktemp)"
trap 'rm -f "$log"' EXIT

start=$(date +%s)
"$@" >"$log" 2>&1
status=$?
elapsed=$(($(date +%s) - start))
cat "$log"

fail=0
if [ "$status" -eq 0 ]; then
  echo "comm_expect_fail: the job exited 0, expected a failure" >&2
  fail=1
fi
if [ "$elapsed" -gt "$max_s" ]; then
  echo "comm_expect_fail: the job took ${elapsed} s, more than ${max_s} s" >&2
  fail=1
fi
if ! grep -qE "$pattern" "$log"; then
  echo "comm_expect_fail: no line matches /$pattern/" >&2
  fail=1
fi
[ "$fail" -eq 0 ] && echo "comm_expect_fail: ok (status $status after ${elapsed} s)"
exit "$fail"
