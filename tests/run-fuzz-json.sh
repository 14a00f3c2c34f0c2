#!/usr/bin/env bash
# Fuzz smoke test for the JSON reader of the benchmark records
# (src/cli/jread.c, fuzz/fuzz_json.c): builds the libFuzzer target directly
# with clang (the reader has no dependencies), seeds it with a benchmark-like
# record, runs FUZZ_SECONDS (20) and fails on any crash. Exits 77 (skip) where
# clang or libFuzzer is not available.
set -euo pipefail
src=${SCALEOUT_SOURCE_DIR:?SCALEOUT_SOURCE_DIR is not set}
work=${SCALEOUT_FUZZ_DIR:-$PWD/fuzz-json-run}
secs=${FUZZ_SECONDS:-20}
command -v clang >/dev/null || { echo "SKIP: clang not found"; exit 77; }
mkdir -p "$work/corpus" "$work/artifacts"
clang -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -g -O1 \
  -I"$src/include" -I"$src/src" "$src/fuzz/fuzz_json.c" "$src/src/cli/jread.c" "$src/src/core/file.c" "$src/src/core/err.c" -o "$work/fuzz_json" 2>"$work/build.log" ||
  { grep -q "fuzzer" "$work/build.log" && { echo "SKIP: clang cannot link -fsanitize=fuzzer"; exit 77; }; cat "$work/build.log"; exit 1; }
cat >"$work/corpus/record.json" <<'JSON'
{"schema": "scaleout-bench-1", "kind": "train", "config": {"model": "lenet5", "batch_size": 32, "pin": true},
 "results": {"total_images_per_sec": 1.5e4, "step_seconds": {"median": 0.0021, "sd": -1E-3}},
 "points": [{"np": 1, "s": "a\"b\\c\u0041\n"}, null, false, [], {}], "raw": {"step_seconds": [1,2,3.5e-1]}}
JSON
"$work/fuzz_json" -max_total_time="$secs" -max_len=4096 -artifact_prefix="$work/artifacts/" "$work/corpus" \
  >"$work/fuzz.log" 2>&1 || { tail -30 "$work/fuzz.log"; exit 1; }
tail -2 "$work/fuzz.log"
