#!/usr/bin/python3
"""Overhead of the profiler (docs/PROFILING.md): ResNet-20 training step time
with profiling off and on at each detail level (step, block, layer; every step
in the timeline window, the worst case), interleaved in one run with the
order rotated every repeat, at np=1 and np=2. Optionally a second binary
(--base, e.g. built from the commit before the profiler) measures what
"off" costs against no profiler at all. Prints medians (min-max) of the
per-step time after the warm-up, and the overhead against "off".

Run it alone on the machine:
    flock /tmp/scaleout-bench.lock /usr/bin/python3 bench/prof_overhead.py \
        --bin build/scaleout [--base /tmp/prof-base/build/scaleout] [--repeat 5] \
        [--np 2] [--configs off,step,block]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
CONFIGS = [("off", []), ("step", ["step"]), ("block", ["block"]), ("layer", ["layer"])]


def step_ms(binary, np, detail, batch, steps, warmup):
    """Milliseconds per step of one run after the warm-up (from the --json images/sec)."""
    tmp = tempfile.mkdtemp(prefix="prof-overhead-")
    try:
        out = os.path.join(tmp, "r.json")
        cmd = [os.path.join(ROOT, "scripts/mpirun.sh"), "-np", str(np), binary, "train", "--model", "resnet20",
               "--dataset", "synthetic", "--batch-size", str(batch), "--steps", str(steps + warmup),
               "--warmup-steps", str(warmup), "--eval-every", "-1", "--progress", "none", "--json", out]
        if detail:
            cmd += ["--profile", os.path.join(tmp, "prof"), "--profile-detail", detail[0], "--timeline-steps", "all"]
        env = dict(os.environ)
        env.pop("SCALEOUT_TIMELINE", None)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        r = json.load(open(out))
        return 1e3 * batch * np / r["images_per_sec"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def fmt(v):
    return f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/scaleout"))
    ap.add_argument("--base", help="a scaleout binary without the profiler, for the cost of 'off'")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--np", default="1,2")
    ap.add_argument("--configs", default="off,step,block,layer", help="which of off,step,block,layer to run")
    a = ap.parse_args()
    configs = [c for c in CONFIGS if c[0] in a.configs.split(",")]
    if "off" not in [name for name, _ in configs]:
        ap.error("--configs must include off (the reference)")
    if a.base:
        configs.insert(0, ("base (no profiler)", None))
    for np in [int(x) for x in a.np.split(",")]:
        res = {name: [] for name, _ in configs}
        for rep in range(a.repeat):
            order = configs[rep % len(configs):] + configs[:rep % len(configs)]  # rotate: no fixed position
            for name, detail in order:
                binary = a.base if detail is None else a.bin
                res[name].append(step_ms(binary, np, detail, a.batch, a.steps, a.warmup))
        off = statistics.median(res["off"])
        print(f"\nResNet-20, batch {a.batch}/rank, np={np}, {a.steps} steps after {a.warmup} warm-up, "
              f"{a.repeat} interleaved repeats: ms per step, median (min-max)")
        print("| profiling | ms/step | vs off |")
        print("|---|---:|---:|")
        for name, _ in configs:
            m = statistics.median(res[name])
            print(f"| {name} | {fmt(res[name])} | {100 * (m - off) / off:+.1f}% |")


if __name__ == "__main__":
    main()
