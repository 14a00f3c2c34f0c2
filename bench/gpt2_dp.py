#!/usr/bin/python3
"""GPT-2 data parallel on this machine: `scaleout train` over NP MPI ranks
(1 thread each) against PyTorch DDP over gloo (bench/torch_gpt2_ddp.py) and
(--strategies: also ZeRO, each a row) against the compute ceiling of NP ranks here: NP independent one-process
trainings at the same time, one per core (what data parallelism would reach
if exchanging gradients cost nothing; docs/PERFORMANCE.md's DP figures).
Same llm.c model file, same tokens in llm.c's order, AdamW, FP32, each
program started REPEATS times in interleaved order. Prints global tokens/s,
medians (min-max) over the repeats, the two ratios the goals name, and where
a step's time goes on both scaleout sides (--json's phase_seconds: forward,
backward, exposed communication, optimizer; per rank for dp), so a gap to
the ceiling shows as slower compute in lockstep or as waiting.

    /usr/bin/python3 bench/gpt2_dp.py --scaleout build/scaleout --spec gpt2 --batch 4 --seq 64 \\
        --np 2 --steps 3 --repeats 3
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import torch_gpt2 as tg  # noqa: E402


def train_cmd(a, d, js):
    return [a.scaleout, "train", "--model", a.spec, "--dataset", "tokens", "--data-dir", d, "--seq-len", str(a.seq),
            "--shuffle", "off", "--batch-size", str(a.batch), "--steps", str(a.warmup + a.steps), "--optimizer",
            "adamw", "--lr", "1e-4", "--init-from", os.path.join(d, "model.bin"), "--eval-every", "-1",
            "--threads", "1", "--progress", "none", "--json", js]


def step_ms(a, js):
    with open(js) as f:
        return [s * 1e3 for s in json.load(f)["step_seconds"][a.warmup:]]


PHASES = ("forward", "backward", "comm_exposed", "optimizer")


def phases_ms(a, js):
    """ms per step of each phase, warm-up step included (--json sums them over the run);
    dp: exposed communication per rank ("comm_exposed_r0", ...)."""
    with open(js) as f:
        j = json.load(f)
    n = a.warmup + a.steps
    out = {k: j["phase_seconds"].get(k, 0.0) * 1e3 / n for k in PHASES}
    for r in j.get("ranks", []) if len(j.get("ranks", [])) > 1 else []:
        out["comm_exposed_r%d" % r["rank"]] = r["comm_exposed_seconds"] * 1e3 / n
    return out


def data_parallel(a, d, strategy):
    """Global tokens/s of NP ranks under --strategy STRATEGY (rank 0's median step)."""
    js = os.path.join(d, "dp.json")
    subprocess.run([os.path.join(ROOT, "scripts/mpirun.sh"), "-np", str(a.np)] + train_cmd(a, d, js) +
                   ["--strategy", strategy], check=True, stdout=subprocess.DEVNULL)
    PHASE_RUNS.setdefault("scaleout " + strategy, []).append(phases_ms(a, js))
    return a.np * a.batch * a.seq / np.median(step_ms(a, js)) * 1e3


def ceiling(a, d):
    """Tokens/s summed over NP one-process runs at once, run i pinned to core i."""
    files = [os.path.join(d, "one%d.json" % i) for i in range(a.np)]
    procs = [subprocess.Popen(["taskset", "-c", str(i % os.cpu_count())] + train_cmd(a, d, f),
                              stdout=subprocess.DEVNULL) for i, f in enumerate(files)]
    if any(p.wait() for p in procs):
        sys.exit("gpt2_dp: a one-process run failed")
    PHASE_RUNS.setdefault("ceiling", []).extend(phases_ms(a, f) for f in files)
    return sum(a.batch * a.seq / np.median(step_ms(a, f)) * 1e3 for f in files)


PHASE_RUNS = {}  # program -> [phases_ms of each process started]


def print_phases():
    """Median over the starts of each phase's ms per step."""
    print("ms per step (warm-up included), median over starts: " + ", ".join(PHASES))
    for name, runs in PHASE_RUNS.items():
        keys = sorted({k for r in runs for k in r}, key=lambda k: (PHASES.index(k) if k in PHASES else len(PHASES), k))
        print("%-16s " % name + "  ".join("%s %.1f" % (k, np.median([r.get(k, 0.0) for r in runs])) for k in keys))


def ddp(a, d):
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "torch_gpt2_ddp.py"), "--np", str(a.np), "--batch",
                          str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps), "--warmup", str(a.warmup),
                          "--model", os.path.join(d, "model.bin"), "--tokens", os.path.join(d, "bench_train.bin")],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out.strip().splitlines()[-1])
    return a.np * a.batch * a.seq / np.median(r["ms"]) * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scaleout", required=True)
    p.add_argument("--spec", default="gpt2")
    p.add_argument("--batch", type=int, default=4, help="sequences per rank")
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--steps", type=int, default=3, help="timed steps per run")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--strategies", default="dp",
                   help="comma-separated scaleout strategies to run (dp, zero1, zero2, zero3), each a row")
    p.add_argument("--json", help="write the figures here too")
    a = p.parse_args()
    cfg = tg.Config.parse(a.spec)
    d = tempfile.mkdtemp(prefix="gpt2_dp.")
    tg.write_model(tg.GPT(cfg).init_weights(1), os.path.join(d, "model.bin"))
    rng = np.random.default_rng(1)
    n = (a.warmup + a.steps + 1) * a.np * a.batch * a.seq + 1
    tg.write_tokens(os.path.join(d, "bench_train.bin"), rng.integers(0, cfg.V, n))
    tg.write_tokens(os.path.join(d, "bench_val.bin"), rng.integers(0, cfg.V, a.np * a.batch * a.seq + 1))
    runs = [("scaleout " + st, lambda a, d, st=st: data_parallel(a, d, st)) for st in a.strategies.split(",")]
    runs += [("ceiling", ceiling), ("PyTorch DDP", ddp)]
    tps = {name: [] for name, _ in runs}
    for r in range(a.repeats):
        for name, fn in (runs if r % 2 == 0 else runs[::-1]):
            tps[name].append(fn(a, d))
    med = {name: float(np.median(v)) for name, v in tps.items()}
    print("%s, np %d x 1 thread, B=%d per rank, T=%d, %d repeats x %d steps: global tokens/s, median (min-max)" % (
        cfg.spec(), a.np, a.batch, a.seq, a.repeats, a.steps))
    for name, v in tps.items():
        print("%-16s %9.1f (%.1f-%.1f)" % (name, med[name], min(v), max(v)))
    for st in a.strategies.split(","):
        name = "scaleout " + st
        print("%s / ceiling %.2f; %s / PyTorch DDP %.2fx" % (name, med[name] / med["ceiling"], name,
                                                             med[name] / med["PyTorch DDP"]))
    print_phases()
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"spec": cfg.spec(), "np": a.np, "batch": a.batch, "seq": a.seq, "tokens_per_sec": tps,
                       "phases_ms": PHASE_RUNS}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
