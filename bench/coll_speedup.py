#!/usr/bin/env python3
"""Speedup table of scaleout's allreduce algorithms over the MPI library's
blocking MPI_Allreduce, from the CSVs of several `scaleout bench allreduce
--algo all` runs (each run has both, interleaved): per size the median over
runs of each algorithm's average, the best hand-written algorithm, `auto`,
and the ratios. Prints a markdown table. Usage:
    bench/coll_speedup.py run0.csv run1.csv run2.csv [--memcpy GBS]
"""
import argparse
import csv
import statistics

HAND = ["ring", "rd", "rabenseifner", "tree", "hier"]


def size_name(b):
    for unit, shift in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << shift and b % (1 << shift) == 0:
            return "%d %s" % (b >> shift, unit)
    return "%d B" % b


def load(paths):
    """{bytes: {algo: [avg_us per run]}}"""
    out = {}
    for p in paths:
        for row in csv.DictReader(open(p)):
            out.setdefault(int(row["bytes"]), {}).setdefault(row["algo"], []).append(float(row["avg_us"]))
    return out


def span(v):
    return "%.2f (%.2f–%.2f)" % (statistics.median(v), min(v), max(v))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv", nargs="+")
    ap.add_argument("--ranks", type=int, default=2, help="for busbw = algbw 2(n-1)/n")
    a = ap.parse_args()
    data = load(a.csv)
    print("| size | MPI_Allreduce µs | best scaleout | µs | speedup | auto µs | auto speedup | best busbw GB/s |")
    print("|---:|---:|---|---:|---:|---:|---:|---:|")
    worst_best = worst_auto = None
    for b in sorted(data):
        d = data[b]
        ref = statistics.median(d["MPI_Allreduce"])
        best = min((x for x in HAND if x in d), key=lambda x: statistics.median(d[x]))
        tb = statistics.median(d[best])
        ta = statistics.median(d["auto"]) if "auto" in d else float("nan")
        busbw = b / tb / 1e3 * 2 * (a.ranks - 1) / a.ranks if tb > 0 else 0
        print("| %s | %s | %s | %s | %.2fx | %.2f | %.2fx | %.3f |" % (
            size_name(b), span(d["MPI_Allreduce"]), best, span(d[best]), ref / tb, ta, ref / ta, busbw))
        if worst_best is None or ref / tb < worst_best[1]:
            worst_best = (b, ref / tb)
        if worst_auto is None or ref / ta < worst_auto[1]:
            worst_auto = (b, ref / ta)
    print()
    print("smallest speedup: best %.2fx at %s, auto %.2fx at %s" % (
        worst_best[1], size_name(worst_best[0]), worst_auto[1], size_name(worst_auto[0])))


if __name__ == "__main__":
    main()
