#!/usr/bin/python3
"""Decode + augment throughput, side by side: `scaleout data bench` against
PyTorch 1.13's DataLoader with torchvision 0.14's ImageFolder (PIL)
(bench/torch_data.py), the same recipe (RandomResizedCrop 224 + flip +
normalise, or with --eval Resize 256 + CenterCrop 224), the same number of
threads / worker processes, interleaved run by run. Prints medians (min-max)
and the ratio of images/s per core; --json writes them.

    bench/image_tree.py imagenet /tmp/in --count 1200       # ~500x375 q90 JPEGs
    bench/data_throughput.py build/scaleout /tmp/in --threads 1,2 --repeat 3
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def ours(binary, tree, threads, images, extra):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        subprocess.run([binary, "data", "bench", tree, "--decode-threads", str(threads), "--images", str(images),
                        "--json", f.name] + extra, check=True, stdout=subprocess.DEVNULL)
        return json.load(open(f.name))["images_per_sec"]


def peer(tree, threads, images, extra):
    out = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "torch_data.py"), tree, "--workers", str(threads),
                          "--images", str(images)] + extra, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["images_per_sec"]


def summary(v):
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("tree")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--images", type=int, default=768)
    ap.add_argument("--eval", action="store_true")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    for t in (int(x) for x in a.threads.split(",")):
        s, p = [], []
        for _ in range(a.repeat):
            s.append(ours(a.binary, a.tree, t, a.images, ["--eval"] if a.eval else []))
            p.append(peer(a.tree, t, a.images, ["--eval"] if a.eval else []))
        row = {"threads": t, "scaleout": summary(s), "pytorch": summary(p)}
        row["ratio"] = row["scaleout"]["median"] / row["pytorch"]["median"]
        rows.append(row)
        print("%d thread(s): scaleout %.0f img/s (%.0f-%.0f), %.0f per core | PyTorch DataLoader+PIL %.0f img/s "
              "(%.0f-%.0f), %.0f per core | %.2fx" % (t, row["scaleout"]["median"], min(s), max(s),
                                                      row["scaleout"]["median"] / t, row["pytorch"]["median"],
                                                      min(p), max(p), row["pytorch"]["median"] / t, row["ratio"]))
        sys.stdout.flush()
    if a.json:
        json.dump({"benchmark": "data_throughput", "transform": "eval" if a.eval else "train", "rows": rows},
                  open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
