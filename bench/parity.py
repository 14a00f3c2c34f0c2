#!/usr/bin/python3
"""Same recipe, same accuracy: the best test accuracy in --epochs epochs over
several seeds, scaleout against PyTorch 1.13, as mean and sample standard
deviation per side; parity when the means differ by at most one standard
deviation (the larger side's). Results accumulate in --json (one entry per
side and seed, so runs can be split across invocations).

    lenet5:   LeNet-5 on Fashion-MNIST, lr 0.01, momentum 0.9, batch 64
              (scaleout train vs bench/torch_accuracy.py)
    resnet20: ResNet-20 on an image tree (bench/image_tree.py fmnist), the
              ImageNet recipe at --image-size 32 (scaleout train --dataset
              imagefolder vs bench/torch_image_train.py)

    bench/parity.py build/scaleout lenet5 --seeds 1,2 --json parity-lenet5.json
    bench/parity.py build/scaleout resnet20 --tree /tmp/tree --seeds 1 --json parity-r20.json
    bench/parity.py build/scaleout lenet5 --json parity-lenet5.json --report      # the summary only
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PY = "/usr/bin/python3"


def scaleout_best(a, seed):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [a.binary, "train", "--model", a.model, "--epochs", str(a.epochs), "--seed", str(seed),
               "--batch-size", "64", "--lr", str(a.lr), "--momentum", "0.9", "--init", a.init, "--progress", "none",
               "--json", f.name]
        if a.model == "resnet20":
            cmd += ["--dataset", "imagefolder", "--data-dir", a.tree, "--image-size", "32", "--crop-scale",
                    str(a.crop_scale)]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return [e["test_accuracy"] for e in json.load(open(f.name))["epochs"]]


def torch_best(a, seed):
    if a.model == "lenet5":
        cmd = [PY, os.path.join(HERE, "torch_accuracy.py"), "--model", "lenet5", "--target", "2", "--max-epochs",
               str(a.epochs), "--lr", str(a.lr), "--seed", str(seed)]
    else:
        cmd = [PY, os.path.join(HERE, "torch_image_train.py"), a.tree, "--model", a.model, "--image-size", "32",
               "--crop-scale", str(a.crop_scale), "--epochs", str(a.epochs), "--lr", str(a.lr), "--seed", str(seed)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["accuracies"]


def report(results):
    sides = {}
    for r in results:
        sides.setdefault(r["side"], []).append(max(r["accuracies"]))
    for side, v in sides.items():
        sd = statistics.stdev(v) if len(v) > 1 else 0.0
        print("%-8s best accuracy over %d seeds: mean %.4f, sd %.4f (%s)" % (
            side, len(v), statistics.mean(v), sd, ", ".join("%.4f" % x for x in v)))
    if len(sides) == 2 and all(len(v) > 1 for v in sides.values()):
        s, t = sides["scaleout"], sides["pytorch"]
        diff = statistics.mean(s) - statistics.mean(t)
        sd = max(statistics.stdev(s), statistics.stdev(t))
        print("difference of the means %+.4f, one standard deviation %.4f: %s" % (
            diff, sd, "parity" if abs(diff) <= sd else "NOT within one standard deviation"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("model", choices=["lenet5", "resnet20"])
    ap.add_argument("--tree", help="image tree (resnet20)")
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--sides", default="scaleout,pytorch")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--crop-scale", type=float, default=0.25)
    ap.add_argument("--init", default="torch")
    ap.add_argument("--json", required=True)
    ap.add_argument("--report", action="store_true", help="only summarise --json")
    a = ap.parse_args()
    results = json.load(open(a.json)) if os.path.exists(a.json) else []
    if not a.report:
        for seed in (int(s) for s in a.seeds.split(",")):
            for side in a.sides.split(","):
                accs = scaleout_best(a, seed) if side == "scaleout" else torch_best(a, seed)
                results.append({"side": side, "seed": seed, "model": a.model, "init": a.init, "accuracies": accs})
                print(side, seed, "best %.4f" % max(accs), flush=True)
                json.dump(results, open(a.json, "w"), indent=1)
    report([r for r in results if r["model"] == a.model])


if __name__ == "__main__":
    main()
