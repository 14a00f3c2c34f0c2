#!/usr/bin/python3
"""Training throughput of two scaleout builds, interleaved in one run: A then
B for every row and repeat, so machine drift hits both alike. Made for the
portable default build (x86-64-v2 + run-time dispatch) against
-DSCALEOUT_NATIVE=ON, but any two binaries work (two commits, two compilers).
Prints, per row, medians (min-max) of img/s and B/A - 1 with the spread of
the per-repeat pairs; names the CPU and the ISA the kernels ran.

    /usr/bin/python3 bench/build_ab.py --a build/scaleout --b build-native/scaleout \\
        [--rows lenet5:64:1,resnet20:64:1,lenet5:64:1:2] [--repeat 5] [--env SCALEOUT_MAX_ISA=avx2]
A row is model:batch:threads[:np]; np > 1 runs data-parallel under $MPIEXEC
(else mpiexec) with scripts/mpirun-flags.sh, images/sec over all ranks.
--allreduce SIZES[:NP] times `bench allreduce` of both binaries instead
(median avg_us per size and algorithm, interleaved the same way):
    /usr/bin/python3 bench/build_ab.py --a A --b B --allreduce 4K,256K,4M,64M:2 --algo auto,ring
Holds /tmp/scaleout-bench.lock for the whole run (no other benchmark at once).
"""
import argparse
import fcntl
import json
import os
import statistics
import subprocess
import tempfile

# model, batch, threads, timed steps, warm-up steps
DEFAULT_ROWS = "lenet5:64:1,resnet20:64:1,lenet5:64:2,resnet20:64:2"
STEPS = {"lenet5": (300, 10), "mlp": (200, 10), "resnet20": (30, 5), "resnet50": (4, 2)}


ENV = dict(os.environ)


def launcher(np):
    if np <= 1:
        return []
    mpiexec = os.environ.get("MPIEXEC", "mpiexec")
    here = os.path.dirname(os.path.abspath(__file__))
    flags = subprocess.run([os.path.join(here, "..", "scripts", "mpirun-flags.sh"), str(np), mpiexec],
                           check=True, capture_output=True, text=True).stdout.split()
    return [mpiexec] + flags + ["-np", str(np)]


def run(binary, model, batch, threads, np=1):
    steps, warmup = STEPS.get(model, (20, 3))
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = launcher(np) + [binary, "bench", "train", "--model", model, "--dataset", "synthetic", "--batch-size", str(batch),
               "--num-batches", str(steps), "--num-warmup-batches", str(warmup), "--threads", str(threads),
               "--synthetic-samples", str(4 * batch), "--display-every", "0", "--json", f.name]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ENV)
        r = json.load(open(f.name))
        return r["results"]["total_images_per_sec"], r["environment"]


def run_coll(binary, sizes, np, algos):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = launcher(np) + [binary, "bench", "allreduce", "--sizes", sizes, "--algo", algos, "--json", f.name]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=ENV)
        r = json.load(open(f.name))
        return {(x["algo"], x["bytes"]): x["avg_us"] for x in r["results"]}


def allreduce_ab(args):
    sizes, _, np = args.allreduce.partition(":")
    np = int(np or 2)
    res = {}
    with open("/tmp/scaleout-bench.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for rep in range(args.repeat):
            for which, binary in (("a", args.a), ("b", args.b)):
                for k, us in run_coll(binary, sizes, np, args.algo).items():
                    res.setdefault(k, {"a": [], "b": []})[which].append(us)
    print(f"bench allreduce, np {np}, {args.repeat} interleaved repeats; A = {args.a}, B = {args.b}; "
          f"median avg_us (min-max), B/A-1 < 0 means B is faster")
    print(f"{'algo':<14} {'bytes':>10} | {'A us':>26} | {'B us':>26} | {'B/A-1':>8}")
    for (algo, nbytes), v in sorted(res.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        d = statistics.median(v["b"]) / statistics.median(v["a"]) - 1
        print(f"{algo:<14} {nbytes:>10} | {fmt(v['a']):>26} | {fmt(v['b']):>26} | {100 * d:+7.1f}%")


def fmt(v):
    return f"{statistics.median(v):,.1f} ({min(v):,.1f}-{max(v):,.1f})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", required=True, help="first binary (the baseline)")
    ap.add_argument("--b", required=True, help="second binary")
    ap.add_argument("--rows", default=DEFAULT_ROWS, help="model:batch:threads,...")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--env", action="append", default=[], help="KEY=VALUE for both binaries (e.g. an ISA cap)")
    ap.add_argument("--allreduce", help="SIZES[:NP]: compare bench allreduce instead of training")
    ap.add_argument("--algo", default="auto,MPI_Allreduce", help="with --allreduce: the algorithms")
    args = ap.parse_args()
    ENV.update(kv.split("=", 1) for kv in args.env)
    if args.allreduce:
        return allreduce_ab(args)
    rows = [tuple(int(x) if i else x for i, x in enumerate((r + ":1").split(":")[:4]))
            for r in args.rows.split(",")]
    with open("/tmp/scaleout-bench.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        res = {r: ([], []) for r in rows}
        env = None
        for rep in range(args.repeat):
            for r in rows:
                a, env = run(args.a, *r)
                b, _ = run(args.b, *r)
                res[r][0].append(a)
                res[r][1].append(b)
    print(f"CPU: {env['cpu_model']}, kernels: {env['isa']} (detected {env['isa_detected']}), "
          f"clock {env['cpu_clock_ghz']:.2f} GHz{' ' + ' '.join(args.env) if args.env else ''}; A = {args.a}, B = {args.b}; {args.repeat} interleaved repeats")
    print(f"{'row':<20} | {'A img/s':>24} | {'B img/s':>24} | {'B/A-1 median (pairs min..max)':>30}")
    for (m, bs, t, np), (a, b) in res.items():
        pairs = [y / x - 1 for x, y in zip(a, b)]
        d = statistics.median(b) / statistics.median(a) - 1
        name = f"{m} b{bs} {t}t" + (f" np{np}" if np > 1 else "")
        print(f"{name:<20} | {fmt(a):>24} | {fmt(b):>24} | "
              f"{100 * d:+6.1f}% ({100 * min(pairs):+.1f}..{100 * max(pairs):+.1f}%)")


if __name__ == "__main__":
    main()
