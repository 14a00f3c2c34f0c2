#!/usr/bin/python3
"""Out-of-sample check of the banded alpha-beta model (issue 4): for each
process count, `scaleout tune` fits the table and the allreduce benchmark runs
`--repeat` times right after it with that table, all inside ONE hold of
/tmp/scaleout-bench.lock, so fit and check see the same core placement (the
two vCPUs move between "near" and "far" within minutes). The core-to-core
probe (/work/shared/tools/c2c_probe.c) runs before and after each block.

Reported per algorithm: sizes whose prediction is within +-25 % of the median
of the benchmark runs, and for every miss the evidence: the runs' own
min-max spread, how far the time moved between tune and benchmark, whether the
fit already missed that size in-sample, and the nearest band edge.

    flock -n /tmp/scaleout-bench.lock true   # the lock is taken per block inside
    /usr/bin/python3 bench/model_check.py --bin build/scaleout --np 2,4 --out /tmp/mc-ompi
    MPIEXEC=mpiexec.mpich /usr/bin/python3 bench/model_check.py --bin build-mpich/scaleout --np 2 --out /tmp/mc-mpich
"""
import argparse
import csv
import fcntl
import json
import os
import re
import statistics
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = os.path.join(HERE, "..", "scripts", "mpirun.sh")
PROBE_SRC = "/work/shared/tools/c2c_probe.c"
ALGOS = ["mpi", "ring", "rd", "rabenseifner", "tree", "hier", "auto"]


def probe(binary):
    if not binary:
        return float("nan")
    out = subprocess.run([binary], capture_output=True, text=True).stdout
    m = re.search(r"median=([\d.]+)", out)
    return float(m.group(1)) if m else float("nan")


def build_probe(out_dir):
    if not os.path.exists(PROBE_SRC):
        return None
    exe = os.path.join(out_dir, "c2c_probe")
    subprocess.run(["gcc", "-O2", "-pthread", PROBE_SRC, "-o", exe], check=True)
    return exe


def run(cmd, path):
    with open(path, "w") as f:
        subprocess.run(cmd, check=True, stdout=f, stderr=subprocess.STDOUT)


def block(a, np, d, probe_exe):
    """tune, then the benchmark --repeat times; returns the conditions."""
    table = os.path.join(d, "table.tune")
    cond = {"load": os.getloadavg()[0], "c2c_before": probe(probe_exe), "start": time.strftime("%H:%M:%S")}
    run([MPIRUN, "-np", str(np), a.bin, "tune", "--out", table, "-m", a.range, "--repeat", str(a.tune_repeat)],
        os.path.join(d, "tune.txt"))
    for r in range(a.repeat):
        run([MPIRUN, "-np", str(np), a.bin, "bench", "allreduce", "--algo", "all", "--tuning", table,
             "-m", a.range, "--csv", os.path.join(d, "run%d.csv" % r)], os.path.join(d, "bench%d.txt" % r))
    cond["c2c_after"] = probe(probe_exe)
    cond["end"] = time.strftime("%H:%M:%S")
    return cond


def tune_figures(d):
    """From tune.txt: per algorithm the in-sample counts, and per (algo, size)
    the tune's measured us and its banded model error (%)."""
    counts, meas = {}, {}
    for line in open(os.path.join(d, "tune.txt")):
        m = re.match(r"\s+(\w+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+line\s+(\d+)/(\d+), bands\s+(\d+)/(\d+)", line)
        if m:
            counts[m.group(1)] = (int(m.group(2)), int(m.group(4)), int(m.group(5)))
            continue
        m = re.match(r"\s+(\d+)((?:\s+[\d.]+\s+[+-]?\d+%)+)\s*$", line)
        if m:
            vals = re.findall(r"([\d.]+)\s+([+-]?\d+)%", m.group(2))
            for algo, (us, err) in zip(ALGOS, vals):
                meas[(algo, int(m.group(1)))] = (float(us), float(err))
    return counts, meas


def coef(algo, p):
    """The model's (a, b, g) for one node of p ranks, p a power of two (src/comm/tune.c)."""
    lg = p.bit_length() - 1
    return {"ring": (2 * (p - 1), 2 * (p - 1) / p, (p - 1) / p), "rd": (lg, lg, lg),
            "tree": (2 * lg, 2 * lg, lg), "hier": (1, 2 * (p - 1) / p, (p - 1) / p)}.get(
        algo, (2 * lg, 2 * (p - 1) / p, (p - 1) / p))


def line_model(d, p):
    """Predict(algo, bytes) in us from the table's single `fit` lines (the one-line control)."""
    txt = open(os.path.join(d, "table.tune")).read()
    gamma = float(re.search(r"gamma=(\S+)", txt).group(1))
    fits = {m.group(1): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^fit (\w+) alpha=(\S+) beta=(\S+)", txt, re.M)}

    def predict(algo, n):
        if algo not in fits or p & (p - 1):
            return float("nan")
        a, b, g = coef(algo, p)
        return 1e6 * (a * fits[algo][0] + n * (b * fits[algo][1] + g * gamma))
    return predict


def read_table(d):
    """Band edges per algorithm and the rules (max bytes, algorithm) of the table."""
    edges, rules = {}, []
    for line in open(os.path.join(d, "table.tune")):
        m = re.match(r"band (\w+) max_bytes=(\d+) ", line)
        if m:
            edges.setdefault(m.group(1), []).append(int(m.group(2)))
        m = re.match(r"(\d+|\*) (\w+)$", line.strip())
        if m:
            rules.append((float("inf") if m.group(1) == "*" else int(m.group(1)), m.group(2)))
    return edges, rules


def picked(rules, size):
    return next((algo for lim, algo in rules if size <= lim), "auto")


def analyse(a, np, d, cond):
    runs = {}
    for r in range(a.repeat):
        for row in csv.DictReader(open(os.path.join(d, "run%d.csv" % r))):
            runs.setdefault((row["algo"], int(row["bytes"])), []).append(row)
    counts, meas = tune_figures(d)
    edges, rules = read_table(d)
    print("\n### np %d (%s)\n" % (np, a.label))
    print("%s–%s UTC, load %.2f before, c2c %.0f ns before / %.0f ns after; tune `--repeat %d`, %d benchmark runs.\n"
          % (cond["start"], cond["end"], cond["load"], cond["c2c_before"], cond["c2c_after"], a.tune_repeat,
             a.repeat))
    line = line_model(d, np)
    print("| algorithm | in-sample, one line | in-sample, bands | band edges | out of sample, one line | "
          "**out of sample, bands** (median of %d runs) |" % a.repeat)
    print("|---|---:|---:|---|---:|---:|")
    misses = []
    for algo in ALGOS:
        sizes = sorted(s for (al, s) in runs if al == algo)
        ok = ok_line = 0
        for s in sizes:
            rs = runs[(algo, s)]
            t = [float(x["avg_us"]) for x in rs]
            med, pred = statistics.median(t), float(rs[0]["model_us"])
            err = pred / med - 1
            ok_line += abs(line(picked(rules, s) if algo == "auto" else algo, s) / med - 1) <= 0.25
            if abs(err) <= 0.25:
                ok += 1
                continue
            misses.append((algo, s, med, min(t), max(t), pred, err))
        c = counts.get(algo)
        e = ",".join(human(x) for x in edges.get(algo, [])) or "—"
        print("| %s | %s | %s | %s | %d/%d | **%d/%d** |" % (
            algo, "%d/%d" % (c[0], c[2]) if c else "—", "%d/%d" % (c[1], c[2]) if c else "—", e, ok_line,
            len(sizes), ok, len(sizes)))
    if not misses:
        return
    print("\nMisses (|model / median − 1| > 25 %):\n")
    print("| algorithm | size | bench µs median (min–max) | spread | model µs | error | tune µs (fit error) "
          "| moved since tune | why |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for algo, s, med, lo, hi, pred, err in misses:
        spread = (hi - lo) / med
        fit_algo = picked(rules, s) if algo == "auto" else algo  # auto: the algorithm its rules pick
        tus, terr = meas.get((fit_algo, s), (float("nan"), float("nan")))
        moved = med / tus - 1 if tus == tus and tus > 0 else float("nan")
        why = []
        if spread > 0.25:
            why.append("runs spread %.0f%% > 25%%" % (100 * spread))
        if abs(moved) > 0.25:
            why.append("time moved %+.0f%% since tune" % (100 * moved))
        if abs(terr) > 25:
            near = [x for x in edges.get(fit_algo, []) if x / 2 <= s <= 2 * x]
            why.append("fit misses in-sample too" + (" (band edge %s)" % human(near[0]) if near else ""))
        if not why:
            why.append("fit error %+.0f%% in-sample and drift %+.0f%% since tune add up" % (terr, 100 * moved))
        if algo == "auto":
            why.insert(0, "auto = %s here" % fit_algo)
        print("| %s | %s | %.2f (%.2f–%.2f) | %.0f%% | %.2f | %+.0f%% | %.2f (%+.0f%%) | %+.0f%% | %s |" % (
            algo, human(s), med, lo, hi, 100 * spread, pred, 100 * err, tus, terr, 100 * moved, "; ".join(why)))


def human(n):
    for unit, div in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d %s" % (n // div, unit)
    return "%d B" % n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/scaleout")
    ap.add_argument("--np", default="2,4")
    ap.add_argument("--repeat", type=int, default=3, help="benchmark runs after the tune")
    ap.add_argument("--tune-repeat", type=int, default=3, help="tune --repeat")
    ap.add_argument("-m", dest="range", default="4:64M")
    ap.add_argument("--out", default="/tmp/scaleout-model-check")
    ap.add_argument("--label", default=os.environ.get("MPIEXEC", "mpiexec"))
    ap.add_argument("--analyse-only", action="store_true", help="re-read the files in --out")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    probe_exe = build_probe(a.out)
    lock = open("/tmp/scaleout-bench.lock", "a")
    for np in map(int, a.np.split(",")):
        d = os.path.join(a.out, "np%d" % np)
        os.makedirs(d, exist_ok=True)
        if a.analyse_only:
            cond = json.load(open(os.path.join(d, "cond.json")))
        else:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                cond = block(a, np, d, probe_exe)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
            json.dump(cond, open(os.path.join(d, "cond.json"), "w"))
        analyse(a, np, d, cond)


if __name__ == "__main__":
    main()
