#!/usr/bin/python3
"""Single-process training throughput: scaleout vs PyTorch (Debian torch 1.13,
CPU, same oneDNN), side by side and interleaved in one run because this
machine is shared and noisy. For each row and repeat it runs scaleout, then
PyTorch, with synthetic data, same model, batch, threads and optimizer.
Prints medians (min-max), the ratio, model-FLOP utilisation and peak memory.

    /usr/bin/python3 bench/train_vs_pytorch.py --bin build/scaleout [--repeat 3] [--rows lenet5:64:1,...]
        [--scaleout-args "..."] [--also "--conv-algo direct"]
--also runs scaleout a second time per repeat with those extra arguments (e.g.
the direct-convolution baseline), interleaved, as one more column.
MFU = images/s x 3 x forward FLOPs per sample / (peak per core x threads), the
peak being the ISA's FP32 FMA peak at the core's clock (bench/peer_env.py
cpu_peak: 64 FLOP/cycle with AVX-512, 32 with AVX2+FMA, 16 for SSE4.2), taken
from scaleout's --json environment when it has it, else from /proc/cpuinfo
capped by SCALEOUT_MAX_ISA / ONEDNN_MAX_CPU_ISA. The line above the table names
the ISA, clock and peak used.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_env  # noqa: E402  (no torch here: only the CPU peak helper)

# model, batch, threads, timed steps, warm-up steps. Matches the foundation issue's table.
ROWS = [
    ("lenet5", 64, 1, 300, 10), ("lenet5", 256, 1, 100, 10), ("resnet20", 64, 1, 30, 5),
    ("resnet20", 128, 1, 20, 5), ("mlp", 256, 1, 200, 10), ("resnet50", 16, 1, 4, 2), ("vgg16", 8, 1, 3, 2),
    ("lenet5", 64, 2, 300, 10), ("lenet5", 256, 2, 100, 10), ("resnet20", 64, 2, 30, 5),
    ("resnet20", 128, 2, 20, 5), ("mlp", 256, 2, 200, 10), ("resnet50", 16, 2, 4, 2), ("vgg16", 8, 2, 3, 2),
]


def run_scaleout(binary, model, batch, threads, steps, warmup, flops, extra=(), envs=None):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [binary, "train", "--model", model, "--dataset", "synthetic", "--batch-size", str(batch),
               "--steps", str(steps + warmup), "--warmup-steps", str(warmup), "--threads", str(threads),
               "--synthetic-samples", str(4 * batch),  # the 4 batches the PyTorch twin cycles
               "--optimizer", "momentum",
               "--lr", "0.01", "--eval-every", "-1", "--progress", "none", "--json", f.name] + list(extra)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        r = json.load(open(f.name))
        flops[model] = r["config"]["flops_per_sample"]
        if envs is not None and isinstance(r.get("environment"), dict):
            envs.append(r["environment"])
        return r["images_per_sec"], r["peak_rss_bytes"]


def run_torch(model, batch, threads, steps, warmup, autocast="off"):
    env = dict(os.environ)
    if threads > 1:
        env["OMP_PROC_BIND"] = "true"  # PyTorch's best 2-thread setting here
    env.update(peer_env.blas_cap_env())
    cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_train.py"), "--model", model, "--batch", str(batch),
           "--steps", str(steps), "--warmup", str(warmup), "--threads", str(threads), "--autocast", autocast]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return r["images_per_sec"], r["peak_rss_bytes"]


def fmt(vals):
    return f"{statistics.median(vals):,.1f} ({min(vals):,.1f}-{max(vals):,.1f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/scaleout")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", help="comma list of model:batch:threads[:steps[:warmup]]")
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--scaleout-args", default="", help="extra arguments for every scaleout run")
    ap.add_argument("--also", default=None, help="extra arguments of a second scaleout configuration")
    a = ap.parse_args()
    rows = ROWS
    if a.rows:
        rows = []
        for r in a.rows.split(","):
            p = r.split(":")
            rows.append((p[0], int(p[1]), int(p[2]), int(p[3]) if len(p) > 3 else 20, int(p[4]) if len(p) > 4 else 10))
    flops, results = {}, []
    extra = a.scaleout_args.split()
    also = extra + a.also.split() if a.also is not None else None
    also_hdr = f" {'scaleout ' + a.also:>26} | {'ratio':>5} | {'RSS MB':>6} |" if also is not None else ""
    header = (f"{'model':9} {'batch':>5} {'thr':>3} | {'scaleout img/s':>26} | {'PyTorch img/s':>26} | "
              f"{'ratio':>5} | {'MFU so':>6} {'MFU pt':>6} | {'RSS so MB':>9} {'RSS pt MB':>9} |{also_hdr}")
    envs, peak_info = [], None
    for model, batch, threads, steps, warmup in rows:
        so, pt, so_rss, pt_rss, al, al_rss = [], [], 0, 0, [], 0
        for _ in range(a.repeat):
            v, rss = run_scaleout(a.bin, model, batch, threads, steps, warmup, flops, extra, envs)
            so.append(v)
            so_rss = max(so_rss, rss)
            if also is not None:
                v, rss = run_scaleout(a.bin, model, batch, threads, steps, warmup, flops, also)
                al.append(v)
                al_rss = max(al_rss, rss)
            v, rss = run_torch(model, batch, threads, steps, warmup)
            pt.append(v)
            pt_rss = max(pt_rss, rss)
        if peak_info is None:  # after the first scaleout run: its --json environment, if any
            peak_info = peer_env.cpu_peak(envs[0] if envs else None)
            print(peer_env.peak_line(*peak_info))
            print(header, flush=True)
        peak = peak_info[2] * 1e9 * threads
        mfu = lambda v: 100 * statistics.median(v) * 3 * flops[model] / peak
        ratio = statistics.median(so) / statistics.median(pt)
        also_col = ""
        if also is not None:
            also_col = (f" {fmt(al):>26} | {statistics.median(al) / statistics.median(pt):5.2f} |"
                        f" {al_rss / 2**20:6.0f} |")
        print(f"{model:9} {batch:5} {threads:3} | {fmt(so):>26} | {fmt(pt):>26} | {ratio:5.2f} | "
              f"{mfu(so):5.1f}% {mfu(pt):5.1f}% | {so_rss / 2**20:9.0f} {pt_rss / 2**20:9.0f} |{also_col}",
              flush=True)
        results.append(dict(model=model, batch=batch, threads=threads, scaleout=so, pytorch=pt, ratio=ratio,
                            scaleout_rss=so_rss, pytorch_rss=pt_rss, flops_per_sample=flops[model],
                            also_args=a.also, also=al, also_rss=al_rss, isa=peak_info[0],
                            cpu_clock_ghz=peak_info[1], peak_gflops_per_core=peak_info[2]))
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    sys.exit(main())
