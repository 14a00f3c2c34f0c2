#!/usr/bin/python3
"""BF16 mixed precision side by side (issue 38): for each row and repeat, in
turn, scaleout --precision fp32, scaleout --precision bf16, PyTorch 1.13 FP32
and PyTorch under torch.autocast("cpu", dtype=torch.bfloat16), same model,
batch, threads, optimizer (SGD momentum) and synthetic data
(bench/train_vs_pytorch.py's runners, bench/torch_train.py --autocast bf16).
Prints medians (min-max) of the interleaved repeats, the ratios bf16/fp32 and
bf16/PyTorch-autocast, the peak RSS of each, and MFU: FP32 runs against the
FP32 peak, BF16 runs against the BF16 peak (128 FLOP/cycle of vdpbf16ps x the
clock, scaleout's --json environment `bf16_peak_gflops_per_core`).

    /usr/bin/python3 bench/bf16.py --bin build/scaleout [--repeat 3]
        [--rows mlp:256:1,resnet50:16:1:4:2,resnet20:64:1,lenet5:64:1] [--json out.json]

Rows are model:batch:threads[:steps[:warmup]]. Needs a CPU with AVX512_BF16:
elsewhere `--precision bf16` exits 2 and so does this script.
"""
import argparse
import json
import statistics
import subprocess
import sys

import train_vs_pytorch as tvp

# model, batch, threads, timed steps, warm-up steps: the rows, 1 thread.
ROWS = [("mlp", 256, 1, 200, 10), ("resnet50", 16, 1, 4, 2), ("resnet20", 64, 1, 30, 5), ("lenet5", 64, 1, 300, 10)]
CONFIGS = ["so_fp32", "so_bf16", "pt_fp32", "pt_bf16"]
LABELS = {"so_fp32": "scaleout fp32", "so_bf16": "scaleout bf16", "pt_fp32": "PyTorch fp32",
          "pt_bf16": "PyTorch autocast"}


def parse_rows(spec):
    rows = []
    for r in spec.split(","):
        p = r.split(":")
        rows.append((p[0], int(p[1]), int(p[2]), int(p[3]) if len(p) > 3 else 20, int(p[4]) if len(p) > 4 else 10))
    return rows


def run_one(a, cfg, row, flops, envs):
    """(images/s, peak RSS bytes) of one configuration of one row."""
    model, batch, threads, steps, warmup = row
    if cfg.startswith("so_"):
        extra = ["--precision", cfg[3:]] + a.scaleout_args.split()
        return tvp.run_scaleout(a.bin, model, batch, threads, steps, warmup, flops, extra, envs)
    return tvp.run_torch(model, batch, threads, steps, warmup, autocast="bf16" if cfg == "pt_bf16" else "off")


def peaks(env):
    """(FP32, BF16) GFLOP/s per core from scaleout's --json environment."""
    fp32 = env.get("fma_gflops_measured") or 0
    fp32 = fp32 if 0 < fp32 < 0.8 * env["peak_gflops_per_core"] else env["peak_gflops_per_core"]
    return fp32, env.get("bf16_peak_gflops_per_core") or 0


def fmt(v):
    return f"{statistics.median(v):,.1f} ({min(v):,.1f}-{max(v):,.1f})"


def print_row(row, res, rss, flops, peak):
    model, batch, threads = row[:3]
    med = {c: statistics.median(res[c]) for c in CONFIGS}
    mfu = {c: 100 * med[c] * 3 * flops[model] / (peak[c.endswith("bf16")] * 1e9 * threads) for c in CONFIGS}
    print(f"{model:9} {batch:5} {threads:3} | " + " | ".join(f"{fmt(res[c]):>28}" for c in CONFIGS) +
          f" | {med['so_bf16'] / med['so_fp32']:5.2f} {med['so_bf16'] / med['pt_bf16']:5.2f} | " +
          " ".join(f"{mfu[c]:5.1f}%" for c in CONFIGS) + " | " +
          " ".join(f"{rss[c] / 2**20:6.0f}" for c in CONFIGS), flush=True)
    return dict(model=model, batch=batch, threads=threads, flops_per_sample=flops[model], images_per_sec=res,
                peak_rss_bytes=rss, mfu_percent=mfu, bf16_over_fp32=med["so_bf16"] / med["so_fp32"],
                bf16_over_autocast=med["so_bf16"] / med["pt_bf16"], peak_fp32_gflops=peak[0],
                peak_bf16_gflops=peak[1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default="build/scaleout")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rows", help="comma list of model:batch:threads[:steps[:warmup]]")
    ap.add_argument("--json", help="write the raw results here")
    ap.add_argument("--scaleout-args", default="", help="extra arguments for every scaleout run")
    a = ap.parse_args()
    rows = parse_rows(a.rows) if a.rows else ROWS
    probe = subprocess.run([a.bin, "version", "--cpu"], capture_output=True, text=True)
    print(probe.stdout.strip(), flush=True)
    if "BF16 peak per core: none" in probe.stdout:
        print("bf16.py: this CPU (or its cap) has no AVX512_BF16; --precision bf16 would exit 2", file=sys.stderr)
        return 2
    flops, envs, results, peak = {}, [], [], None
    for row in rows:
        res, rss = {c: [] for c in CONFIGS}, {c: 0 for c in CONFIGS}
        for _ in range(a.repeat):
            for c in CONFIGS:  # interleaved: each repeat runs all four in turn
                v, m = run_one(a, c, row, flops, envs)
                res[c].append(v)
                rss[c] = max(rss[c], m)
        if peak is None:
            peak = peaks(envs[0])
            print(f"MFU peaks per core: FP32 {peak[0]:.0f} GFLOP/s, BF16 {peak[1]:.0f} GFLOP/s "
                  f"({envs[0]['cpu_model']}, {envs[0]['isa']}, {envs[0]['cpu_clock_ghz']:.2f} GHz)")
            print(f"{'model':9} {'batch':>5} {'thr':>3} | " + " | ".join(f"{LABELS[c] + ' img/s':>28}" for c in CONFIGS) +
                  " | bf16/ bf16/ | MFU: so fp32, so bf16, pt fp32, pt autocast | RSS MB (same order)")
            print(f"{'':19} | {'':28} | {'':28} | {'':28} | {'':28} | fp32  pt-ac |", flush=True)
        results.append(print_row(row, res, rss, flops, peak))
    if a.json:
        json.dump(results, open(a.json, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
