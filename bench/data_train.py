#!/usr/bin/python3
"""Training on JPEGs against training on synthetic data, interleaved run by
run: `scaleout bench train` (tf_cnn_benchmarks style) with --data-dir on an
imagefolder tree (decoded and augmented on --decode-threads threads per rank)
and with --synthetic, the same model, batch, threads and ranks. Prints the
medians (min-max), their ratio and the data wait share; --json writes them.

    bench/image_tree.py imagenet /tmp/in --count 800
    bench/data_train.py build/scaleout /tmp/in --threads 2 --repeat 3
    bench/data_train.py build/scaleout /tmp/in --np 2 --threads 1 --repeat 3
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def run(a, real):
    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        cmd = [a.binary, "bench", "train", "--model", a.model, "--batch-size", str(a.batch), "--threads",
               str(a.threads), "--num-warmup-batches", str(a.warmup), "--num-batches", str(a.batches),
               "--display-every", "0", "--json", f.name]
        cmd += ["--data-dir", a.tree, "--decode-threads", str(a.decode_threads)] if real else ["--synthetic"]
        if a.np > 1:
            cmd = [os.path.join(HERE, "..", "scripts", "mpirun.sh"), "-np", str(a.np)] + cmd
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        res = json.load(open(f.name))["results"]
        return res["total_images_per_sec"], res["phase_share"]["data_wait"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("tree")
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--decode-threads", type=int, default=1)
    ap.add_argument("--np", type=int, default=1)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--batches", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    jpeg, synth, waits = [], [], []
    for _ in range(a.repeat):
        ips, wait = run(a, True)
        jpeg.append(ips)
        waits.append(wait)
        synth.append(run(a, False)[0])
    mj, ms = statistics.median(jpeg), statistics.median(synth)
    print("%s b%d, %d rank(s) x %d thread(s), %d decode thread(s) per rank: JPEG %.2f img/s (%.2f-%.2f), synthetic "
          "%.2f img/s (%.2f-%.2f): %.3f of synthetic; data wait %.2f%% of the step" % (
              a.model, a.batch, a.np, a.threads, a.decode_threads, mj, min(jpeg), max(jpeg), ms, min(synth),
              max(synth), mj / ms, 100 * statistics.median(waits)))
    if a.json:
        json.dump({"model": a.model, "batch": a.batch, "np": a.np, "threads": a.threads,
                   "decode_threads": a.decode_threads, "jpeg": jpeg, "synthetic": synth, "ratio": mj / ms,
                   "data_wait_share": waits}, open(a.json, "w"), indent=1)


if __name__ == "__main__":
    main()
