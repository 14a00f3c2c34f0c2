#!/usr/bin/env bash
# `scaleout report` (docs/PROFILING.md): text tables and one self-contained
# HTML page from profiles of a 1-rank and (with MPI) a 2-rank run; the page
# loads in headless Chromium without script errors and its charts render
# (the page script sets data-charts / data-errors on <body>); a screenshot
# is taken (kept in $SCALEOUT_REPORT_SHOTS if set). Bad input exits 2.
# Skips (77) only when chromium is not installed.
# Usage: report_cli.sh path/to/scaleout
set -u
bin=$1
. "$(dirname "$0")/script_lib.sh"

common=(train --model lenet5 --dataset synthetic --synthetic-samples 512 --batch-size 16 --eval-every -1
  --progress none --steps 4 --bucket-mb 0.05 --first-bucket-mb 0.02)
"$bin" "${common[@]}" --profile "$tmp/np1" >"$tmp/np1.log" 2>&1 || bad "np=1 run: $(tail -3 "$tmp/np1.log")"
runs=("$tmp/np1")
if [ -n "${MPIEXEC:-}" ] || command -v mpiexec >/dev/null; then
  "$mpirun" -np 2 "$bin" "${common[@]}" --profile "$tmp/np2" >"$tmp/np2.log" 2>&1 &&
    runs+=("$tmp/np2") || bad "np=2 run: $(tail -3 "$tmp/np2.log")"
fi

# Text: every section, the per-rank rows, the gradient size table.
"$bin" report "${runs[@]}" --text >"$tmp/report.txt" 2>&1 || bad "report --text: $(cat "$tmp/report.txt")"
for want in "== Runs ==" "== Efficiency (POP metrics) ==" "== Per rank: " "== Per-layer time: " "conv1" \
  "layers in graph order"; do
  grep -qF -- "$want" "$tmp/report.txt" && ok || bad "--text lacks '$want'"
done
if [ ${#runs[@]} -eq 2 ]; then
  grep -q "== Scaling ==" "$tmp/report.txt" && grep -q "^allreduce .* gradients" "$tmp/report.txt" &&
    grep -q "latency by message size" "$tmp/report.txt" && ok || bad "--text lacks scaling / communication"
fi

# Per-layer figures of a pipelined run are keyed by layer, from the ranks that
# run it: LeNet-5 in 2 stages (rank 0 holds the last), every layer once in
# graph order (conv1 of stage 0 first, fc3 of stage 1 last), each row the
# mean of the ranks holding the layer, none empty.
if [ ${#runs[@]} -eq 2 ]; then
  if "$mpirun" -np 2 "$bin" "${common[@]}" --pipeline-stages 2 --microbatches 2 --profile "$tmp/pipe" \
    >"$tmp/pipe.log" 2>&1 && "$bin" report "$tmp/pipe" --text >"$tmp/pipe.txt" 2>&1 &&
    /usr/bin/python3 - "$tmp/pipe/profile.json" "$tmp/pipe.txt" <<'PY'
import json, sys
prof, text = json.load(open(sys.argv[1])), open(sys.argv[2]).read().splitlines()
at = next(i for i, l in enumerate(text) if l.startswith("layers in graph order")) + 2
rows = {}
order = []
for l in text[at:]:
    if not l.strip():
        break
    f = l.split()
    order.append(f[0])
    rows[f[0]] = f
want = {}  # name -> per-step forward ms, mean over the ranks that ran it
for r in prof["ranks"]:
    for l in r["layers"]:
        want.setdefault(l["name"], []).append(1e3 * l["forward_s"] / r["totals"]["steps"])
assert set(order) == set(want) and len(order) == len(want), (order, sorted(want))
real = [n for n in order if ":" not in n]
assert real[0] == "conv1" and real[-1].startswith("softmax"), real
assert real.index("conv2") < real.index("fc1") < real.index("fc3"), real
for n, v in want.items():
    assert rows[n][2] != "-" and abs(float(rows[n][2]) - sum(v) / len(v)) <= 0.0015, (n, rows[n], v)
PY
  then ok; else bad "per-layer report of 2 pipeline stages: $(tail -n 5 "$tmp/pipe.txt" "$tmp/pipe.log")"; fi
fi

# BF16 (issue 38): LeNet-5 under --precision bf16 runs its dense layers and
# its small convolutions (the direct kernel's BF16 instance) in BF16. Each
# layer with FLOPs names its precision in profile.json and the report, its
# MFU is its own FLOPs / time / peak, and the peak is the BF16 one (the run's
# MFU peak, `--json` mfu_peak_gflops_per_core); the FP32 run's same layers
# name fp32 and are held to the FP32 peak (half of it, or the measured
# FMA rate). Skipped where the CPU (or a SCALEOUT_MAX_ISA cap) lacks BF16.
"$bin" "${common[@]}" --threads 1 --precision bf16 --profile "$tmp/bf16" --json "$tmp/bf16.json" \
  >"$tmp/bf16.log" 2>&1
st=$?
if [ $st -eq 2 ] && grep -qi bf16 "$tmp/bf16.log"; then
  echo "skipped the BF16 part: $(tail -1 "$tmp/bf16.log")"
elif [ $st -ne 0 ]; then
  bad "bf16 run: $(tail -3 "$tmp/bf16.log")"
elif "$bin" report "$tmp/bf16" --text >"$tmp/bf16.txt" 2>&1 &&
  /usr/bin/python3 - "$tmp/bf16/profile.json" "$tmp/bf16.json" "$tmp/bf16.txt" "$tmp/np1/profile.json" <<'PY'
import json, sys
prof, run, text = json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), open(sys.argv[3]).read().splitlines()
fp32 = {l["name"]: l for l in json.load(open(sys.argv[4]))["ranks"][0]["layers"]}
assert run["mfu_peak"] == "BF16", run["mfu_peak"]
bf16_peak = run["mfu_peak_gflops_per_core"]  # --threads 1
layers = {l["name"]: l for l in prof["ranks"][0]["layers"]}
at = next(i for i, l in enumerate(text) if l.startswith("layers in graph order"))
assert text[at + 1].split()[-4:] == ["precision", "GFLOP/s", "MFU", "%"], text[at + 1]
rows = {}
for l in text[at + 2:]:
    if not l.strip():
        break
    rows[l.split()[0]] = l.split()
col = lambda name, key: rows[name][{"precision": 6, "MFU": 8}[key]]  # layer block fw bw total share precision GFLOP/s MFU
for n in ["conv1", "conv2", "fc1", "fc2", "fc3"]:
    f = fp32[n]
    # another process: its clock probe may read a few % apart
    assert f["precision"] == "fp32" and 0 < f["peak_gflops"] <= 0.6 * bf16_peak, (n, f, bf16_peak)
    for want in ["bf16"]:
        l = layers[n]
        secs = l["forward_s"] + l["backward_s"]
        assert l["precision"] == want and col(n, "precision") == want, (n, l, rows[n])
        assert abs(l["gflops_per_s"] - l["flops"] / secs / 1e9) <= 1e-6 * l["gflops_per_s"], (n, l)
        assert abs(l["mfu"] - l["gflops_per_s"] / l["peak_gflops"]) <= 1e-6 * l["mfu"], (n, l)
        assert (abs(l["peak_gflops"] - bf16_peak) <= 1e-6 * bf16_peak) == (want == "bf16"), (n, l, bf16_peak)
        assert abs(float(col(n, "MFU")) - 100 * l["mfu"]) <= 0.05 + 1e-3 * 100 * l["mfu"], (n, l, rows[n])
PY
then ok; else bad "per-layer BF16 figures: $(tail -n 5 "$tmp/bf16.txt")"; fi

# HTML: self-contained (no external scripts, styles or fetches).
"$bin" report "${runs[@]}" -o "$tmp/report.html" >"$tmp/html.log" 2>&1 && [ -s "$tmp/report.html" ] && ok ||
  bad "report -o: $(cat "$tmp/html.log")"
grep -Eiq '<(script|link|img)[^>]+(src|href)=' "$tmp/report.html" && bad "page loads external resources" || ok

# Bad input: one line naming the file or flag, exit 2.
expect2() { # expect2 PATTERN args...
  local pat=$1; shift
  "$bin" report "$@" >"$tmp/bad.log" 2>&1
  local st=$?
  if [ $st -eq 2 ] && grep -q -- "$pat" "$tmp/bad.log" && [ "$(wc -l <"$tmp/bad.log")" -eq 1 ]; then ok
  else bad "report $*: exit $st: $(cat "$tmp/bad.log")"; fi
}
printf '{"format":"scaleout-profile","ranks":[' >"$tmp/trunc.json"
echo '{"traceEvents":[]}' >"$tmp/other.json"
expect2 "no profile given" --text
expect2 "cannot open" "$tmp/missing.json" --text
expect2 "trunc.json: not valid JSON: line 1" "$tmp/trunc.json" --text
expect2 "other.json: not a scaleout profile" "$tmp/other.json" --text
expect2 "say where the report goes" "$tmp/np1"
expect2 "unknown option" "$tmp/np1" --html
expect2 "unknown option '--bogus'" --bogus "$tmp/np1" -o "$tmp/never.html"
expect2 "needs a value" "$tmp/np1" -o
[ ! -e "$tmp/never.html" ] && ok || bad "a bad option still wrote the page"

# Options before or after the paths (and paths after --).
rm -f "$tmp/order1.html" "$tmp/order2.html"
"$bin" report -o "$tmp/order1.html" "${runs[@]}" >"$tmp/order1.log" 2>&1 && cmp -s "$tmp/order1.html" "$tmp/report.html" &&
  ok || bad "report -o FILE DIR...: $(cat "$tmp/order1.log")"
"$bin" report "${runs[@]}" -o "$tmp/order2.html" --text >"$tmp/order2.txt" 2>&1 &&
  cmp -s "$tmp/order2.html" "$tmp/report.html" && cmp -s "$tmp/order2.txt" "$tmp/report.txt" &&
  ok || bad "report DIR... -o FILE --text: $(head -3 "$tmp/order2.txt")"
"$bin" report --text -- "${runs[@]}" >"$tmp/order3.txt" 2>&1 && cmp -s "$tmp/order3.txt" "$tmp/report.txt" &&
  ok || bad "report --text -- DIR...: $(head -3 "$tmp/order3.txt")"

# The page in a real browser.
page_dom "$tmp/report.html" "$tmp/dom.html"
charts=$(grep -o 'data-charts="[0-9]*"' "$tmp/dom.html" | head -1 | tr -dc 0-9)
errors=$(grep -o 'data-errors="[0-9]*"' "$tmp/dom.html" | head -1 | tr -dc 0-9)
want=2 # np1: phases and layers; np2: phases, overlap, layers, message sizes; scaling: two
[ ${#runs[@]} -eq 2 ] && want=8
if [ "${charts:-0}" -eq $want ] && [ "${errors:-1}" -eq 0 ]; then ok
else bad "browser: charts=${charts:-none} (want $want) errors=${errors:-none}: $(grep -o '<pre id="report-errors">[^<]*' "$tmp/dom.html")"; fi
grep -q '<canvas' "$tmp/dom.html" && ok || bad "no canvas in the page"
page_checks "$tmp/report.html" report

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
