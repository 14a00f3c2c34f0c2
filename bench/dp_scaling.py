#!/usr/bin/python3
"""Data-parallel scaling on this machine: scaleout np=1 vs np=2 (1 thread per
rank, synthetic data, per-rank batch fixed = weak scaling) beside PyTorch DDP
with gloo at np=1 and np=2, interleaved in one run. Prints medians (min-max),
speedup np2/np1, scaling efficiency, the ratio to DDP, the share of
communication hidden behind backward (from scaleout's --json), and the
compute ceiling of np=2 here: two independent 1-rank trainings at once, one
per core ("2 x np1 at once"; its ratio to np1 is the best speedup np=2 could
show if communication were free), and scale-up beside scale-out (the shape
of the Horovod/Dell comparison): one process with 2 threads at the global
batch 2B against np=2 x 1 thread x B.

    /usr/bin/python3 bench/dp_scaling.py --bin build/scaleout [--repeat 3] [--rows lenet5:64:300,...]
        [--scaleout-args "--bucket-mb auto --allreduce auto"]

--scaleout-args adds flags to every scaleout run (np1 and np2 alike), e.g.
the joint bucket/algorithm choice; its bucket plan is measured at steps 2-3,
so give such rows >= 4 warm-up steps.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_env  # noqa: E402
import side_by_side  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
ROWS = [("lenet5", 64, 300, 10), ("resnet20", 64, 30, 5), ("resnet50", 16, 3, 1)]  # model, batch, steps, warm-up


def scaleout(binary, model, batch, steps, warmup, np, extra=()):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [os.path.join(ROOT, "scripts/mpirun.sh"), "-np", str(np), binary, "train", "--model", model,
               "--dataset", "synthetic", "--batch-size", str(batch), "--steps", str(steps + warmup),
               "--warmup-steps", str(warmup),
               "--eval-every", "-1", "--progress", "none", "--json", f.name] + list(extra)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        r = json.load(open(f.name))
    ranks = r.get("ranks", [])
    comm = sum(k["comm_exposed_seconds"] + k["comm_overlapped_seconds"] for k in ranks)
    hidden = sum(k["comm_overlapped_seconds"] for k in ranks)
    return r["images_per_sec"], (100 * hidden / comm if comm > 0 else None)


def pair(binary, model, batch, steps, warmup):
    """The compute ceiling of np=2 here: two 1-rank trainings at once
    (side_by_side.at_once), what np=2 would reach if communication cost nothing."""
    return side_by_side.at_once(binary, ["--model", model, "--dataset", "synthetic", "--batch-size", str(batch),
                                         "--steps", str(steps + warmup), "--warmup-steps", str(warmup)])


def scale_up(binary, model, batch, steps, warmup):
    """Scale-up: one process, both cores as 2 compute threads, global batch 2B."""
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([binary, "train", "--model", model, "--dataset", "synthetic", "--batch-size", str(2 * batch),
                        "--steps", str(steps + warmup), "--warmup-steps", str(warmup), "--threads", "2",
                        "--eval-every", "-1", "--progress", "none", "--json", f.name],
                       check=True, stdout=subprocess.DEVNULL)
        return json.load(open(f.name))["images_per_sec"]


def ddp(model, batch, steps, warmup, np):
    cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_ddp.py"), "--model", model, "--batch", str(batch),
           "--np", str(np), "--steps", str(steps), "--warmup", str(warmup)]
    env = dict(os.environ)
    env.update(peer_env.blas_cap_env())  # under an AVX2 cap, the peer's OpenBLAS too
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    return json.loads(out.strip().splitlines()[-1])["images_per_sec"]


def med(v):
    return f"{statistics.median(v):,.1f} ({min(v):,.1f}-{max(v):,.1f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/scaleout"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", help="comma list of model:batch:steps:warmup")
    ap.add_argument("--scaleout-args", default="", help="extra flags for every scaleout run")
    a = ap.parse_args()
    extra = a.scaleout_args.split()
    if extra:
        print("scaleout flags:", " ".join(extra))
    rows = ROWS if not a.rows else [(p[0], int(p[1]), int(p[2]), int(p[3]))
                                    for p in (r.split(":") for r in a.rows.split(","))]
    print(f"{'model':9} {'batch':>5} | {'scaleout np1':>24} {'scaleout np2':>24} {'speedup':>7} {'eff':>5} "
          f"{'overlap':>7} | {'2 x np1 at once':>24} {'ceiling':>7} | {'DDP np1':>22} {'DDP np2':>22} {'speedup':>7} | "
          f"{'np2 vs DDP':>10} | {'1 proc x 2 thr, 2B':>24} {'np2 / it':>8}")
    for model, batch, steps, warmup in rows:
        s1, s2, d1, d2, ov, pr, up = [], [], [], [], [], [], []
        for _ in range(a.repeat):
            s1.append(scaleout(a.bin, model, batch, steps, warmup, 1, extra)[0])
            v, o = scaleout(a.bin, model, batch, steps, warmup, 2, extra)
            s2.append(v)
            if o is not None:
                ov.append(o)
            pr.append(pair(a.bin, model, batch, steps, warmup))
            d1.append(ddp(model, batch, steps, warmup, 1))
            d2.append(ddp(model, batch, steps, warmup, 2))
            up.append(scale_up(a.bin, model, batch, steps, warmup))
        m = statistics.median
        sp, dsp = m(s2) / m(s1), m(d2) / m(d1)
        print(f"{model:9} {batch:5} | {med(s1):>24} {med(s2):>24} {sp:7.2f} {sp / 2:5.2f} "
              f"{(f'{m(ov):.0f}%' if ov else '-'):>7} | {med(pr):>24} {m(pr) / m(s1):7.2f} | "
              f"{med(d1):>22} {med(d2):>22} {dsp:7.2f} | "
              f"{m(s2) / m(d2):10.2f} | {med(up):>24} {m(s2) / m(up):8.2f}", flush=True)


if __name__ == "__main__":
    main()
