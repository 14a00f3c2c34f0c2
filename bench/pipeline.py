#!/usr/bin/python3
"""Pipeline stages on this machine: `train --pipeline-stages 2` (one rank per
core, 1 thread each) against one process training the same micro-batches
(--batch-size b --accumulate M), interleaved repeats in one run. For each
row it prints images/sec (median, min-max), the ideal of two stages with the
schedule's bubble (2 x one process x (1 - formula)) and the ratio to it, the
same against two one-process runs at once (what two ranks reach here
without a pipeline, pinned one per core),
and the bubble the run measured (1 - forward+backward+optimizer seconds
summed over ranks / (ranks x step seconds)) beside the formula
(P - 1) / (M + P - 1), (P - 1) / (v M + P - 1) interleaved, for equal
stages and the same schedule with the
stages' measured times (the part of the bubble that is imbalance), and
stage 0's activation memory (every micro-batch slot it keeps).

    /usr/bin/python3 bench/pipeline.py --bin build/scaleout [--repeat 3]
        [--rows resnet20:8:4:1f1b,resnet110:4:16:1f1b] [--steps 12] [--warmup 3]

A row is model:micro-batch:M:schedule[:v] (v chunks per rank with
interleaved). With 2 cores, P = 2 is the largest
pipeline that runs without oversubscription here.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import side_by_side  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROWS = (["resnet20:8:%d:%s" % (m, s) for s in ("gpipe", "1f1b", "interleaved:2") for m in (4, 8, 16, 32)] +
        ["resnet110:4:16:1f1b", "resnet110:4:16:interleaved:2"])


def train(binary, np, args):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [os.path.join(ROOT, "scripts/mpirun.sh"), "-np", str(np), binary, "train", "--dataset", "synthetic",
               "--eval-every", "-1", "--progress", "none", "--json", f.name] + args
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return json.load(open(f.name))


def med(xs):
    return "%.1f (%.1f-%.1f)" % (statistics.median(xs), min(xs), max(xs))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/scaleout"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", default=",".join(ROWS))
    ap.add_argument("--steps", type=int, default=12, help="timed steps per run")
    ap.add_argument("--warmup", type=int, default=3, help="untimed steps first")
    a = ap.parse_args()
    rows = [r.split(":") for r in a.rows.split(",")]
    res = {tuple(r): {"one": [], "two": [], "pipe": [], "bubble": [], "staged": [], "formula": None, "act": []}
           for r in rows}
    for rep in range(a.repeat):
        for r in rows:
            model, mb, m, sched = r[0], int(r[1]), int(r[2]), r[3]
            v = r[4] if len(r) > 4 else "1"
            common = ["--model", model, "--steps", str(a.steps + a.warmup), "--warmup-steps", str(a.warmup),
                      "--synthetic-samples", str(mb * m * (a.steps + a.warmup + 1) * 2)]
            one = train(a.bin, 1, common + ["--batch-size", str(mb), "--accumulate", str(m)])
            two = side_by_side.at_once(a.bin, ["--dataset", "synthetic"] + common +
                                       ["--batch-size", str(mb), "--accumulate", str(m)])
            pipe = train(a.bin, 2, common + ["--batch-size", str(mb * m), "--pipeline-stages", "2", "--microbatches",
                                             str(m), "--schedule", sched, "--virtual-stages", v])
            e = res[tuple(r)]
            e["one"].append(one["images_per_sec"])
            e["two"].append(two)
            e["pipe"].append(pipe["images_per_sec"])
            e["bubble"].append(pipe["pipeline"]["bubble_measured"])
            e["formula"] = pipe["pipeline"]["bubble_formula"]
            e["staged"].append(pipe["pipeline"]["bubble_with_stage_times"])
            e["act"].append(pipe["pipeline"]["stages"][0]["activation_bytes"] / 1e6)
            print("repeat %d %s: one %.1f pipeline %.1f img/s, bubble %.3f" % (rep + 1, ":".join(r), e["one"][-1],
                  e["pipe"][-1], e["bubble"][-1]), flush=True)
    print("\n| model | micro-batch | M | schedule | one process img/s | 2 at once img/s | P=2 img/s | ideal "
          "| P=2 / ideal | P=2 / ideal at once | bubble measured | formula | with stage times "
          "| stage 0 activations MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        e = res[tuple(r)]
        m = int(r[2])
        ideal = 2 * statistics.median(e["one"]) * (1 - e["formula"])
        at_once = statistics.median(e["two"]) * (1 - e["formula"])
        pipe = statistics.median(e["pipe"])
        print("| %s | %s | %d | %s | %s | %s | %s | %.1f | %.2f | %.2f | %s | %.3f | %.3f | %.1f |" % (
            r[0], r[1], m, r[3] + (" v=" + r[4] if len(r) > 4 else ""), med(e["one"]), med(e["two"]), med(e["pipe"]),
            ideal, pipe / ideal, pipe / at_once,
            "%.3f (%.3f-%.3f)" % (statistics.median(e["bubble"]), min(e["bubble"]), max(e["bubble"])), e["formula"],
            statistics.median(e["staged"]), statistics.median(e["act"])))


if __name__ == "__main__":
    main()
