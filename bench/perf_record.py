#!/usr/bin/python3
"""The benchmark-suite record of docs/PERFORMANCE.md, made in one run on this
machine, every scaleout figure beside PyTorch's from the same run
(interleaved: scaleout, PyTorch, scaleout, PyTorch ... so drift hits both):

  1. every zoo model's training images/sec at np=1 and np=2 (tf_cnn_benchmarks
     formula; `scaleout bench train` under scripts/mpirun.sh vs
     bench/torch_ddp.py), short runs and small batches for the big models;
  2. strong and weak scaling efficiency np 1 -> 2 (`scaleout bench scaling`
     vs DDP);
  3. time to accuracy on Fashion-MNIST (`scaleout bench accuracy` vs
     bench/torch_accuracy.py);
  4. the benchmark's own overhead (timing hooks, display) as a share of the
     run time, and `scaleout train` vs `scaleout bench train` interleaved;
  5. plots of the results (`scaleout bench plot`).
Prints markdown tables (also OUT/record.md) and keeps every result file in OUT.

    flock /tmp/scaleout-bench.lock /usr/bin/python3 bench/perf_record.py --bin build/scaleout --out /tmp/record
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MPIRUN = os.path.join(ROOT, "scripts/mpirun.sh")

# Per model: per-rank batch, timed steps, warm-up steps. Small batches and
# few steps for the 224x224 models so the whole table fits in minutes on
# 2 cores; the figures say so beside them. Two warm-up steps at least:
# after one, PyTorch's ResNet-50/101 still ran 10x slower than in steady state.
# ResNet-50/101 run at batch 16: below it PyTorch 1.13 on one thread sends
# their 1x1 convolutions to its slow THNN kernel (its use_mkldnn rule), which
# made the batch-4 ratios (12-14x) say nothing about either library.
SHAPES = {
    "mlp": (64, 100, 10), "lenet5": (64, 100, 10), "smallcnn": (64, 40, 5),
    "resnet20": (32, 30, 5), "resnet32": (32, 20, 5), "resnet56": (32, 10, 3), "resnet110": (32, 6, 2),
    "alexnet": (8, 5, 2), "resnet18": (4, 4, 2), "resnet34": (4, 3, 2), "resnet50": (16, 3, 2),
    "resnet101": (16, 2, 2), "vgg11": (2, 3, 2), "vgg16": (2, 2, 2), "vgg19": (2, 2, 2),
}


def sh(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def med(v):
    return statistics.median(v) if v else float("nan")


def fmt(v, d=1):
    if not v:
        return "-"
    return f"{med(v):,.{d}f} ({min(v):,.{d}f}–{max(v):,.{d}f})"


def so_train(a, model, batch, steps, warm, np, tag):
    out = os.path.join(a.out, f"train-{model}-np{np}-{tag}.json")
    sh([MPIRUN, "-np", str(np), a.bin, "bench", "train", "--model", model, "--batch-size", str(batch),
        "--num-batches", str(steps), "--num-warmup-batches", str(warm), "--display-every", "0", "--json", out])
    return json.load(open(out))


def pt_ddp(model, batch, steps, warm, np):
    out = sh(["/usr/bin/python3", os.path.join(HERE, "torch_ddp.py"), "--model", model, "--batch", str(batch),
              "--np", str(np), "--steps", str(steps), "--warmup", str(warm)])
    return json.loads(out.strip().splitlines()[-1])["images_per_sec"]


def throughput(a, models, md, raw):
    md.append("### Training throughput, every zoo model (total images/sec, median (min–max) of "
              f"{a.repeat} interleaved runs)\n")
    md.append("| model | batch/rank | timed+warm-up steps | scaleout np=1 | PyTorch np=1 | ratio | "
              "scaleout np=2 | PyTorch DDP np=2 | ratio | scaleout speedup | overhead |")
    md.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for model in models:
        batch, steps, warm = SHAPES.get(model, (8, 5, 2))
        r = {k: [] for k in ("so1", "pt1", "so2", "pt2", "ovh")}
        for rep in range(a.repeat):
            for np in (1, 2):
                d = so_train(a, model, batch, steps, warm, np, f"r{rep + 1}")
                r[f"so{np}"].append(d["results"]["total_images_per_sec"])
                r["ovh"].append(100 * max(k["overhead_fraction"] for k in d["ranks"]))
                r[f"pt{np}"].append(pt_ddp(model, batch, steps, warm, np))
        raw["throughput"][model] = dict(batch=batch, steps=steps, warmup=warm, **r)
        md.append(f"| {model} | {batch} | {steps}+{warm} | {fmt(r['so1'])} | {fmt(r['pt1'])} | "
                  f"{med(r['so1']) / med(r['pt1']):.2f} | {fmt(r['so2'])} | {fmt(r['pt2'])} | "
                  f"{med(r['so2']) / med(r['pt2']):.2f} | {med(r['so2']) / med(r['so1']):.2f}x | "
                  f"{max(r['ovh']):.3f}% |")
        print(md[-1], flush=True)


def scaling(a, md, raw):
    md.append("\n### Scaling efficiency np 1 → 2 (speedup / 2; median of "
              f"{a.repeat} interleaved sweeps, each point min–max in brackets)\n")
    md.append("| model | mode | batch | scaleout np=1 img/s | scaleout np=2 img/s | scaleout efficiency | "
              "DDP np=1 img/s | DDP np=2 img/s | DDP efficiency |")
    md.append("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for model, steps, warm in (("lenet5", 100, 10), ("resnet20", 30, 5)):
        for mode, batch in (("strong", 64), ("weak", 32)):
            s1, s2, d1, d2 = [], [], [], []
            for rep in range(a.repeat):
                out = os.path.join(a.out, f"scaling-{model}-{mode}-r{rep + 1}.json")
                sh([a.bin, "bench", "scaling", "--model", model, "--np", "1,2", "--mode", mode, "--batch-size",
                    str(batch), "--repeat", "1", "--num-batches", str(steps), "--num-warmup-batches", str(warm),
                    "--json", out])
                pts = json.load(open(out))["points"]
                s1.append(pts[0]["images_per_sec"]["median"])
                s2.append(pts[1]["images_per_sec"]["median"])
                d1.append(pt_ddp(model, batch, steps, warm, 1))
                d2.append(pt_ddp(model, batch // 2 if mode == "strong" else batch, steps, warm, 2))
            raw["scaling"][f"{model}-{mode}"] = dict(batch=batch, so1=s1, so2=s2, pt1=d1, pt2=d2)
            bdesc = f"{batch} global" if mode == "strong" else f"{batch} per rank"
            md.append(f"| {model} | {mode} | {bdesc} | {fmt(s1)} | {fmt(s2)} | {med(s2) / med(s1) / 2:.0%} | "
                      f"{fmt(d1)} | {fmt(d2)} | {med(d2) / med(d1) / 2:.0%} |")
            print(md[-1], flush=True)


def accuracy(a, md, raw):
    md.append(f"\n### Time to accuracy, Fashion-MNIST, lenet5, target {a.target} (batch 64, SGD momentum 0.9, "
              f"lr 0.01, 1 process, 1 thread; median (min–max) of {a.tta_repeat} interleaved runs)\n")
    md.append("| | time to accuracy (s) | epochs | training images/sec | reached |")
    md.append("|---|---:|---:|---:|---|")
    so, pt = {"t": [], "e": [], "i": [], "ok": []}, {"t": [], "e": [], "i": [], "ok": []}
    for rep in range(a.tta_repeat):
        out = os.path.join(a.out, f"accuracy-lenet5-r{rep + 1}.json")
        log = sh([a.bin, "bench", "accuracy", "--model", "lenet5", "--target", str(a.target), "--max-epochs",
                  "10", "--json", out])
        open(os.path.join(a.out, f"accuracy-lenet5-r{rep + 1}.mllog"), "w").write(log)
        r = json.load(open(out))["results"]
        so["t"].append(r["time_to_accuracy_seconds"] or float("nan"))
        so["e"].append(r["epochs"])
        so["i"].append(r["images_per_sec"])
        so["ok"].append(r["reached"])
        p = json.loads(sh(["/usr/bin/python3", os.path.join(HERE, "torch_accuracy.py"), "--model", "lenet5",
                           "--target", str(a.target), "--max-epochs", "10"]).strip().splitlines()[-1])
        pt["t"].append(p["time_to_accuracy_seconds"])
        pt["e"].append(p["epochs"])
        pt["i"].append(p["images_per_sec"])
        pt["ok"].append(p["reached"])
    raw["accuracy"] = dict(scaleout=so, pytorch=pt, target=a.target)
    for name, v in (("scaleout", so), ("PyTorch", pt)):
        md.append(f"| {name} | {fmt(v['t'])} | {fmt(v['e'], 0)} | {fmt(v['i'], 0)} | "
                  f"{sum(v['ok'])}/{len(v['ok'])} |")
        print(md[-1], flush=True)


def overhead(a, md, raw):
    md.append(f"\n### Benchmark overhead: `scaleout train` vs `scaleout bench train`, lenet5 batch 64, "
              f"200 timed steps after 10, {a.repeat} interleaved runs\n")
    t, b, f = [], [], []
    for rep in range(a.repeat):
        out = os.path.join(a.out, f"overhead-train-r{rep + 1}.json")
        sh([a.bin, "train", "--model", "lenet5", "--dataset", "synthetic", "--batch-size", "64", "--steps", "210",
            "--warmup-steps", "10", "--eval-every", "-1", "--progress", "none", "--json", out])
        t.append(json.load(open(out))["images_per_sec"])
        out = os.path.join(a.out, f"overhead-bench-r{rep + 1}.json")
        sh([a.bin, "bench", "train", "--model", "lenet5", "--batch-size", "64", "--num-batches", "200",
            "--num-warmup-batches", "10", "--display-every", "10", "--json", out])
        d = json.load(open(out))
        b.append(d["results"]["total_images_per_sec"])
        f.append(100 * d["results"]["overhead_fraction"])
    raw["overhead"] = dict(train=t, bench=b, fraction_percent=f)
    md.append("| | images/sec |\n|---|---:|")
    md.append(f"| `scaleout train` (sum of step times) | {fmt(t)} |")
    md.append(f"| `scaleout bench train` (elapsed after warm-up, display every 10) | {fmt(b)} |")
    md.append(f"\nbench/train ratio {med(b) / med(t):.3f}; time measured inside the benchmark's own hooks and "
              f"display: {fmt(f, 4)}% of the run (lenet5 has the shortest step of the zoo, so this is the worst case).")
    print("\n".join(md[-4:]), flush=True)


def plots(a):
    files = [os.path.join(a.out, f) for f in sorted(os.listdir(a.out))
             if f.endswith("-r1.json") and (f.startswith("scaling-") or f.startswith("accuracy-") or
                                            (f.startswith("train-") and "-np" in f))]
    if files:
        print(sh([a.bin, "bench", "plot", *files, "-o", os.path.join(a.out, "plots")]).strip())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "build/scaleout"))
    ap.add_argument("--out", default="/tmp/scaleout-record")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tta-repeat", type=int, default=3)
    ap.add_argument("--target", type=float, default=0.85)
    ap.add_argument("--models", default="all", help="comma list, or all (`scaleout models`)")
    ap.add_argument("--parts", default="throughput,scaling,accuracy,overhead,plots")
    a = ap.parse_args()
    a.bin = os.path.abspath(a.bin)
    os.makedirs(a.out, exist_ok=True)
    models = a.models.split(",") if a.models != "all" else \
        [l.split()[0] for l in sh([a.bin, "models"]).splitlines()[1:] if l.strip()]
    parts = a.parts.split(",")
    t0 = time.time()
    md, raw = [], {"throughput": {}, "scaling": {}}
    print(f"# scaleout benchmark record: {sh([a.bin, 'version']).strip()}, {os.cpu_count()} cores, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\n", flush=True)
    steps = {"throughput": lambda: throughput(a, models, md, raw), "scaling": lambda: scaling(a, md, raw),
             "accuracy": lambda: accuracy(a, md, raw), "overhead": lambda: overhead(a, md, raw),
             "plots": lambda: plots(a)}
    for part in parts:  # in the order given; the record is saved after each part
        steps[part]()
        open(os.path.join(a.out, "record.md"), "w").write("\n".join(md) + "\n")
        json.dump(raw, open(os.path.join(a.out, "record.json"), "w"), indent=1)
    md.append(f"\n(record made in {(time.time() - t0) / 60:.0f} min)")
    open(os.path.join(a.out, "record.md"), "w").write("\n".join(md) + "\n")
    json.dump(raw, open(os.path.join(a.out, "record.json"), "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
