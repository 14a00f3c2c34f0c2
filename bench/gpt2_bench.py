#!/usr/bin/python3
"""GPT-2 training steps side by side: `scaleout train` (token shards in llm.c's
order, --init-from llm.c's model file) against llm.c's train_gpt2.c and
PyTorch 1.13 eager (bench/torch_gpt2_train.py), same weights, same tokens,
same threads, each program started REPEATS times in interleaved order.
--precision fp32,bf16 runs scaleout once per precision (rows scaleout and
scaleout-bf16); --torch fp32,bf16 likewise PyTorch, bf16 being
torch.autocast("cpu", dtype=torch.bfloat16) (row pytorch-bf16).
Per program: ms per step (median, min-max over every timed step of every
repeat), tokens/s, MFU and peak RSS. MFU counts 6 x parameters x tokens plus
the attention's 12 x L x C x T per token (forward + backward of QK^T and AV,
PaLM's formula) against THREADS x 32 FLOP/cycle (AVX2+FMA; 64 with AVX-512)
at the clock `scaleout version --cpu` measures in FMA chains; BF16 rows
against the BF16 peak, twice that (vdpbf16ps: 32 products per 512-bit
instruction, two per cycle like the FMA).

llm.c is a peer program built outside this repository: pass --llmc, the path
of a driver that includes llm.c's train_gpt2.c (with TESTING defined), runs
its gpt2_forward / gpt2_zero_grad / gpt2_backward / gpt2_update(lr 1e-4,
0.9, 0.999, 1e-8, 0) on its DataLoader and prints "step N: loss X ms Y" per
step; docs/PERFORMANCE.md says how it was built. Without --llmc that column
is left out.

    /usr/bin/python3 bench/gpt2_bench.py --scaleout build/scaleout --spec gpt2 \\
        --batch 4 --seq 64 --threads 2 --steps 4 --repeats 3 --llmc llm.c/step_bench
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import torch_gpt2 as tg  # noqa: E402


def run(cmd, env):
    """stdout of cmd and its peak RSS in bytes (the child's own, from wait4)."""
    with tempfile.TemporaryFile(mode="w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, env=env, text=True)
        out = p.stdout.read()
        _, status, ru = os.wait4(p.pid, 0)
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode:
            err.seek(0)
            sys.exit("%s failed (%d): %s" % (" ".join(cmd[:3]), p.returncode, err.read().strip()[-400:]))
    return out, ru.ru_maxrss * 1024


def scaleout(a, d, env, precision="fp32"):
    js = os.path.join(d, "so.json")
    cmd = [a.scaleout, "train", "--model", a.spec, "--dataset", "tokens", "--data-dir", d, "--seq-len", str(a.seq),
           "--shuffle", "off", "--batch-size", str(a.batch), "--steps", str(a.warmup + a.steps), "--optimizer",
           "adamw", "--lr", "1e-4", "--init-from", os.path.join(d, "model.bin"), "--eval-every", "-1", "--threads",
           str(a.threads), "--json", js, "--precision", precision]
    _, rss = run(cmd, env)
    with open(js) as f:
        r = json.load(f)
    return [s * 1e3 for s in r["step_seconds"][a.warmup:]], r["step_loss"][0], rss


def llmc(a, d, env):
    out, rss = run([a.llmc, os.path.join(d, "model.bin"), os.path.join(d, "bench_train.bin"), str(a.batch), str(a.seq),
                  str(a.warmup + a.steps)], env)
    steps = re.findall(r"step (\d+): loss ([0-9.]+) ms ([0-9.]+)", out)
    return [float(ms) for _, _, ms in steps[a.warmup:]], float(steps[0][1]), rss


def pytorch(a, d, env, autocast=False):
    out, rss = run(["/usr/bin/python3", os.path.join(HERE, "torch_gpt2_train.py"), "--spec", a.spec, "--batch",
                  str(a.batch), "--seq", str(a.seq), "--threads", str(a.threads), "--steps", str(a.steps), "--warmup",
                  str(a.warmup), "--model", os.path.join(d, "model.bin"), "--tokens",
                  os.path.join(d, "bench_train.bin")] + (["--autocast"] if autocast else []), env)
    r = json.loads(out.strip().splitlines()[-1])
    return r["ms"], None, rss


def peak_gflops(a):
    """THREADS cores x FLOP/cycle x the clock measured in FMA chains."""
    out = subprocess.run([a.scaleout, "version", "--cpu"], capture_output=True, text=True).stdout
    m = re.search(r"(\d+) FLOP/cycle.*?([0-9.]+) GFLOP/s measured", out)
    isa = re.search(r"kernels: (\S+)", out)
    return a.threads * float(m.group(2)), int(m.group(1)), float(m.group(2)) / int(m.group(1)), isa.group(1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scaleout", required=True)
    p.add_argument("--llmc", help="llm.c step driver (see the docstring)")
    p.add_argument("--spec", default="gpt2")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=4, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--no-torch", action="store_true")
    p.add_argument("--precision", default="fp32", help="scaleout's precisions, comma-separated: fp32,bf16")
    p.add_argument("--torch", default="fp32", help="PyTorch's precisions, comma-separated: fp32,bf16 (CPU autocast)")
    p.add_argument("--json", help="write the figures here too")
    a = p.parse_args()
    cfg = tg.Config.parse(a.spec)
    d = tempfile.mkdtemp(prefix="gpt2_bench.")
    import torch
    torch.set_num_threads(a.threads)
    model = tg.GPT(cfg).init_weights(1)
    tg.write_model(model, os.path.join(d, "model.bin"))
    nparams = sum(t.numel() for t in model.parameters())
    del model
    rng = np.random.default_rng(1)
    tg.write_tokens(os.path.join(d, "bench_train.bin"), rng.integers(0, cfg.V, (a.warmup + a.steps + 1) * a.batch * a.seq + 1))
    tg.write_tokens(os.path.join(d, "bench_val.bin"), rng.integers(0, cfg.V, a.batch * a.seq + 1))
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    precisions = a.precision.split(",")
    peers = [("scaleout" if pr == "fp32" else "scaleout-" + pr, lambda a, d, env, pr=pr: scaleout(a, d, env, pr))
             for pr in precisions]
    peers += [("llm.c", llmc)] if a.llmc else []
    for pr in [] if a.no_torch else a.torch.split(","):
        peers += [("pytorch" if pr == "fp32" else "pytorch-" + pr, lambda a, d, env, pr=pr: pytorch(a, d, env, pr == "bf16"))]
    ms = {n: [] for n, _ in peers}
    rss = {n: 0 for n, _ in peers}
    first_loss = {}
    for r in range(a.repeats):
        for name, fn in (peers if r % 2 == 0 else peers[::-1]):
            steps, loss0, peak_rss = fn(a, d, env)
            ms[name] += steps
            rss[name] = max(rss[name], peak_rss)
            if loss0 is not None:
                first_loss[name] = loss0
    peak, fpc, ghz, isa = peak_gflops(a)
    tokens = a.batch * a.seq
    flops = 6.0 * nparams * tokens + 12.0 * cfg.L * cfg.C * a.seq * tokens
    print("%s (%d parameters), B=%d T=%d, %d thread(s), %d repeats x %d steps; %s, peak %d x %d FLOP/cycle x %.2f GHz"
          " = %.0f GFLOP/s" % (cfg.spec(), nparams, a.batch, a.seq, a.threads, a.repeats, a.steps, isa, a.threads, fpc,
                               ghz, peak))
    print("%-12s %10s %19s %10s %7s %8s %9s" % ("program", "ms/step", "(min-max)", "tokens/s", "MFU", "vs it",
                                                "peak RSS"))
    base = float(np.median(ms[peers[0][0]]))
    res = {}
    for name, _ in peers:
        med = float(np.median(ms[name]))
        res[name] = {"ms_median": med, "ms_min": min(ms[name]), "ms_max": max(ms[name]), "tokens_per_sec": tokens / med * 1e3,
                     "mfu": flops / (med / 1e3) / 1e9 / (2 * peak if name.endswith("-bf16") else peak),
                     "mfu_peak": "bf16" if name.endswith("-bf16") else "fp32", "scaleout_speedup": med / base,
                     "peak_rss_bytes": rss[name]}
        print("%-12s %10.1f %9.1f-%-9.1f %10.1f %6.1f%% %7.2fx %8s" % (
            name, med, min(ms[name]), max(ms[name]), tokens / med * 1e3, 100 * res[name]["mfu"], med / base,
            "%.2f GB" % (rss[name] / 1e9) if rss[name] else "-"))
    for name, peer in (("scaleout", "scaleout fp32"), ("pytorch-bf16", "PyTorch autocast bf16")):
        if "scaleout-bf16" in res and name in res:
            print("scaleout bf16 against %s: %.2fx faster" % (peer, res[name]["ms_median"] /
                                                              res["scaleout-bf16"]["ms_median"]))
    if "llm.c" in first_loss:
        print("first-step loss: scaleout %.6f, llm.c %.6f (same weights and tokens)" % (first_loss["scaleout"],
                                                                                         first_loss["llm.c"]))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"spec": cfg.spec(), "batch": a.batch, "seq": a.seq, "threads": a.threads, "isa": isa,
                       "peak_gflops": peak, "results": res}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
