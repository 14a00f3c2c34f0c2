#!/usr/bin/python3
"""Sharded data parallelism on this machine: scaleout `--strategy dp, zero1,
zero2, zero3` at np 2 (1 thread per rank, AdamW, synthetic data) beside
PyTorch 1.13 over gloo: DDP, ZeRO-1 (DDP + ZeroRedundancyOptimizer) and
FSDP (FULL_SHARD, SHARD_GRAD_OP) when it runs here, repeats interleaved in
one invocation. Prints medians (min-max) of the step time and images/s,
each strategy's ratio to dp and to PyTorch's ZeRO, and the peak resident
set per rank (the largest rank's, largest over repeats).

    /usr/bin/python3 bench/shard.py --bin build/scaleout [--repeat 3] [--rows resnet20:64:20:5,resnet50:16:4:1]
        [--np 2] [--scaleout-args "--bucket-mb auto"] [--strategies zero1,zero3] [--peers torch-zero]

A long row can be split over several invocations by --strategies and
--peers (dp always runs, so every invocation has its own reference).

Rows are MODEL:BATCH:TIMED_STEPS:WARMUP_STEPS.
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

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
STRATEGIES = ["dp", "zero1", "zero2", "zero3"]
PHASES = ["forward", "backward", "comm_exposed", "optimizer"]  # --json phase_seconds, rank 0, ms per step


def scaleout(binary, np, model, batch, steps, warmup, strategy, extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [os.path.join(ROOT, "scripts/mpirun.sh"), "-np", str(np), binary, "train", "--model", model,
               "--dataset", "synthetic", "--batch-size", str(batch), "--steps", str(steps + warmup),
               "--warmup-steps", str(warmup), "--synthetic-samples", str(batch * (steps + warmup + 1)),
               "--optimizer", "adamw", "--lr", "0.001", "--eval-every", "-1", "--progress", "none",
               "--strategy", strategy, "--json", f.name] + extra
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        r = json.load(open(f.name))
    n = r["steps"]
    phases = {k: 1e3 * r["phase_seconds"][k] / n for k in PHASES}
    return r["images_per_sec"], max(k["peak_rss_bytes"] for k in r["ranks"]), phases


def torch_peer(mode, np, model, batch, steps, warmup, sharding="FULL_SHARD"):
    cmd = ["/usr/bin/python3", os.path.join(HERE, "torch_zero.py"), "--mode", mode, "--sharding", sharding,
           "--model", model,
           "--batch", str(batch), "--np", str(np), "--steps", str(steps), "--warmup", str(warmup)]
    env = dict(os.environ)
    env.update(peer_env.blas_cap_env())
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout
    r = json.loads(out.strip().splitlines()[-1])
    if "error" in r:
        return None, None, r["error"]
    return r["images_per_sec"], max(r["peak_rss_bytes"]), None


def med(v):
    return f"{statistics.median(v):,.1f} ({min(v):,.1f}-{max(v):,.1f})"


PEERS = {"torch-ddp": "ddp", "torch-zero": "zero"}
FSDP = {"torch-fsdp-full": "FULL_SHARD", "torch-fsdp-grad-op": "SHARD_GRAD_OP"}


def measure_row(a, model, batch, steps, warmup, extra):
    """Every strategy and peer a.repeat times, the order reversed every other
    repeat; FSDP once per row, to learn whether it runs here at all."""
    mine = ["dp"] + [s for s in a.strategies.split(",") if s in STRATEGIES and s != "dp"]
    who_all = mine + [p for p in PEERS if p in a.peers]
    ips = {s: [] for s in who_all + list(FSDP)}
    rss = {s: [] for s in ips}
    phases = {s: {k: [] for k in PHASES} for s in STRATEGIES}
    errors = {}
    for r in range(a.repeat):
        for who in (who_all if r % 2 == 0 else who_all[::-1]):
            if who in PEERS:
                v, m, _ = torch_peer(PEERS[who], a.np, model, batch, steps, warmup)
            else:
                v, m, ph = scaleout(a.bin, a.np, model, batch, steps, warmup, who, extra)
                for k in PHASES:
                    phases[who][k].append(ph[k])
            ips[who].append(v)
            rss[who].append(m)
        for who, sharding in FSDP.items():
            if r == 0 and "torch-fsdp" in a.peers:
                v, m, err = torch_peer("fsdp", a.np, model, batch, steps, warmup, sharding)
                if err:
                    errors[who] = err
                else:
                    ips[who].append(v)
                    rss[who].append(m)
    return ips, rss, phases, errors


def print_phases(phases):
    """Where rank 0's step goes, per strategy: medians over the repeats of
    each phase's ms per step (warm-up steps included), so a strategy's
    deficit shows as compute or as communication it did not hide."""
    print("| who | " + " | ".join(f"{k} ms" for k in PHASES) + " |")
    print("|---|" + "---:|" * len(PHASES))
    for who, ph in phases.items():
        if ph[PHASES[0]]:
            print(f"| {who} | " + " | ".join(med(ph[k]) for k in PHASES) + " |")


def print_row(a, model, batch, steps, warmup, ips, rss, errors):
    dp = statistics.median(ips["dp"])
    tz = statistics.median(ips["torch-zero"]) if ips.get("torch-zero") else None
    print(f"\n{model} b{batch} per rank, {steps} timed steps after {warmup}, {a.repeat} repeats")
    print("| who | step ms | img/s | / dp | / PyTorch ZeRO-1 (per-repeat range) | peak RSS per rank MB |")
    print("|---|---:|---:|---:|---:|---:|")
    for who, v in ips.items():
        if not v:
            continue
        m = statistics.median(v)
        step_ms = [1e3 * batch * a.np / x for x in v]
        vs_t = ""
        if tz and who in STRATEGIES:  # and the range of the ratios within each repeat (same slot of the VM)
            paired = [x / y for x, y in zip(v, ips["torch-zero"])]
            vs_t = f"{m / tz:.2f} ({min(paired):.2f}-{max(paired):.2f})"
        print(f"| {who} | {med(step_ms)} | {med(v)} | {m / dp:.3f} | {vs_t} | {max(rss[who]) / 1e6:,.0f} |")
    for who, err in errors.items():
        print(f"{who}: does not run here: {err}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/scaleout"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rows", default="resnet20:64:20:5,resnet50:16:4:1")
    ap.add_argument("--scaleout-args", default="")
    ap.add_argument("--no-torch", action="store_true", help="no PyTorch peer (--peers none)")
    ap.add_argument("--peers", default="torch-ddp,torch-zero,torch-fsdp",
                    help="PyTorch peers to run: torch-ddp, torch-zero, torch-fsdp (tried once per row), or none")
    ap.add_argument("--raw", help="append every run's figures to this file (one JSON line per row)")
    ap.add_argument("--strategies", default=",".join(STRATEGIES), help="scaleout strategies to run (dp is always run)")
    a = ap.parse_args()
    a.peers = [] if a.no_torch or a.peers == "none" else a.peers.split(",")
    unknown = [p for p in a.peers if p not in list(PEERS) + ["torch-fsdp"]]
    if unknown:
        ap.error(f"--peers: unknown peer {unknown[0]} (torch-ddp, torch-zero, torch-fsdp, none)")
    extra = a.scaleout_args.split()
    isa, ghz, _ = peer_env.cpu_peak()
    print(f"# {a.np} ranks x 1 thread, AdamW, synthetic data; CPU ISA {isa}, {ghz:.2f} GHz")
    for row in a.rows.split(","):
        model, batch, steps, warmup = row.split(":")
        batch, steps, warmup = int(batch), int(steps), int(warmup)
        ips, rss, phases, errors = measure_row(a, model, batch, steps, warmup, extra)
        print_row(a, model, batch, steps, warmup, ips, rss, errors)
        print_phases(phases)
        if a.raw:
            with open(a.raw, "a") as f:
                f.write(json.dumps({"row": row, "images_per_sec": ips, "peak_rss": rss, "phases": phases}) + "\n")


if __name__ == "__main__":
    main()
