#!/usr/bin/python3
"""Where the time of a training step goes, by oneDNN primitive: runs scaleout
and its PyTorch twin (bench/torch_train.py) with ONEDNN_VERBOSE=1 and sums the
execution times oneDNN prints per primitive kind and propagation
(convolution forward / backward_data / backward_weights, batch
normalisation, reorders, ...), per training step, next to the step time.
What oneDNN does not run (PyTorch's own batch-norm, ReLU and SGD kernels,
scaleout's fused loops) is the step time minus the oneDNN sum, "other".

    flock /tmp/scaleout-bench.lock /usr/bin/python3 bench/onednn_breakdown.py \\
        --bin build/scaleout --model resnet20 --batch 64 --steps 10 --warmup 5

Verbose mode adds a little time per primitive call; both sides pay it, and
the figures are for finding where time goes, not for throughput.
"""
import argparse
import collections
import os
import re
import subprocess
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def run(cmd, env_extra):
    env = dict(os.environ, ONEDNN_VERBOSE="1", DNNL_VERBOSE="1", **env_extra)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit("failed: %s\n%s" % (" ".join(cmd), p.stdout[-2000:]))
    return p.stdout, wall


def breakdown(text):
    """Per (kind, propagation): total ms and call count of the 'exec' lines."""
    tot = collections.defaultdict(float)
    calls = collections.Counter()
    for line in text.splitlines():
        if not (line.startswith("onednn_verbose,exec") or line.startswith("dnnl_verbose,exec")):
            continue
        f = line.split(",")
        # onednn_verbose,exec,cpu,<kind>,<impl>,<prop>,...,<time ms>
        kind, prop = f[3], f[5]
        key = kind if kind in ("reorder", "sum", "concat") else "%s %s" % (kind, prop.replace("forward_", "fwd_"))
        tot[key] += float(f[-1])
        calls[key] += 1
    return tot, calls


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(HERE, "..", "build", "scaleout"))
    ap.add_argument("--model", default="resnet20")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=10, help="steps counted (after the warm-up)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1, help="both sides; PyTorch gets OMP_PROC_BIND=true above 1")
    ap.add_argument("--scaleout-args", default="", help="extra scaleout train flags, e.g. '--conv-algo direct'")
    a = ap.parse_args()
    # Two runs per side, warm-up only and warm-up + steps: the difference is
    # the steady-state cost of `steps` steps (primitive creation excluded).
    so = lambda n: [a.bin, "train", "--model", a.model, "--dataset", "synthetic", "--batch-size", str(a.batch),
                    "--synthetic-samples", str(a.batch * 4), "--steps", str(n), "--eval-every", "-1",
                    "--progress", "none", "--threads", str(a.threads)] + a.scaleout_args.split()
    pt = lambda n: ["/usr/bin/python3", os.path.join(HERE, "torch_train.py"), "--model", a.model, "--batch",
                    str(a.batch), "--steps", str(n), "--warmup", "0", "--threads", str(a.threads)]
    rows, step = {}, {}
    for side, cmd in (("scaleout", so), ("pytorch", pt)):
        env = {"OMP_PROC_BIND": "true"} if side == "pytorch" and a.threads > 1 else {}
        (out_w, wall_w), (out_a, wall_a) = [run(cmd(n), env) for n in (a.warmup, a.warmup + a.steps)]
        (t_w, _), (t_a, _) = breakdown(out_w), breakdown(out_a)
        rows[side] = {k: (t_a[k] - t_w.get(k, 0.0)) / a.steps for k in t_a}
        step[side] = 1e3 * (wall_a - wall_w) / a.steps
    keys = sorted(set(rows["scaleout"]) | set(rows["pytorch"]),
                  key=lambda k: -(rows["scaleout"].get(k, 0) + rows["pytorch"].get(k, 0)))
    print("| oneDNN primitive | scaleout ms/step | PyTorch ms/step |")
    print("|---|---:|---:|")
    for k in keys:
        print("| %s | %.2f | %.2f |" % (k, rows["scaleout"].get(k, 0.0), rows["pytorch"].get(k, 0.0)))
    tot = {k: sum(v.values()) for k, v in rows.items()}
    print("| **oneDNN total** | %.2f | %.2f |" % (tot["scaleout"], tot["pytorch"]))
    print("| other (step time - oneDNN total) | %.2f | %.2f |" % (step["scaleout"] - tot["scaleout"],
                                                                  step["pytorch"] - tot["pytorch"]))
    print("| **step time** (wall difference of the two runs / steps) | %.2f | %.2f |" % (step["scaleout"],
                                                                                      step["pytorch"]))


if __name__ == "__main__":
    main()
