#!/usr/bin/python3
"""Joint choice of gradient bucket sizes and allreduce algorithm vs the
defaults of DDP (25 MiB buckets, 1 MiB first) over MPI_Allreduce, in one run,
interleaved, on 2 ranks with synthetic data. The tuned run uses the table that
`scaleout tune` fits at the start of this script (same layout), so the
algorithm per bucket and the bucket sizes come from measured alpha/beta.

    /usr/bin/python3 bench/bucket_auto.py --bin build/scaleout [--repeat 3] [--rows resnet20:64:40,resnet50:16:6]

Prints per row: images/sec median (min-max) of both, the ratio, exposed
communication per step and the plan the automatic choice made.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
MPIRUN = os.path.join(HERE, "..", "scripts", "mpirun.sh")


def train(binary, model, batch, steps, extra, env):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [MPIRUN, "-np", "2", binary, "train", "--model", model, "--dataset", "synthetic",
               "--synthetic-samples", str(8 * batch), "--batch-size", str(batch), "--steps", str(steps),
               "--warmup-steps", str(max(4, steps // 5)), "--eval-every", "-1", "--progress", "none",
               "--json", f.name] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env)
        r = json.load(open(f.name))
    exposed = max(k["comm_exposed_seconds"] for k in r["ranks"]) / max(r["steps"], 1)
    return r["images_per_sec"], exposed, r["bucket_plan"], r["gradient_buckets"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/scaleout")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", default="resnet20:64:40,resnet50:16:6")
    a = ap.parse_args()
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        table = os.path.join(tmp, "scaleout.tune")
        subprocess.run([MPIRUN, "-np", "2", a.bin, "tune", "--out", table], check=True, stdout=subprocess.DEVNULL)
        tuned = dict(env, SCALEOUT_TUNING=table)
        print("model     batch | default 25 MiB + mpi img/s | auto buckets + auto algo img/s | ratio | "
              "exposed ms/step def/auto | auto plan")
        for row in a.rows.split(","):
            model, batch, steps = row.split(":")
            batch, steps = int(batch), int(steps)
            d, t, ed, et = [], [], [], []
            plan = ""
            for _ in range(a.repeat):
                v, e, _, _ = train(a.bin, model, batch, steps, ["--allreduce", "mpi"], env)
                d.append(v)
                ed.append(e)
                v, e, p, n = train(a.bin, model, batch, steps, ["--bucket-mb", "auto", "--allreduce", "auto"], tuned)
                t.append(v)
                et.append(e)
                plan = f"{n} buckets: first {p['first_bucket_bytes'] / 2**20:g} MiB, then {p['bucket_bytes'] / 2**20:g} MiB"

            def fmt(v):
                return f"{statistics.median(v):,.1f} ({min(v):,.1f}-{max(v):,.1f})"
            print(f"{model:9s} {batch:5d} | {fmt(d):>26s} | {fmt(t):>30s} | "
                  f"{statistics.median(t) / statistics.median(d):5.2f} | "
                  f"{statistics.median(ed) * 1e3:8.2f} / {statistics.median(et) * 1e3:6.2f} | {plan}", flush=True)


if __name__ == "__main__":
    main()
