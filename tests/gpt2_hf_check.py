#!/usr/bin/env python3
"""Checks `scaleout ckpt export --format hf` without `transformers`.

usage: gpt2_hf_check.py HF_DIR/model.safetensors PLAIN.safetensors

HF_DIR holds the export and its config.json; PLAIN is `ckpt export` of the
same checkpoint in scaleout's own layout (PyTorch state_dict names, Linear's
(out, in) weights, the padded token table). The safetensors header is read
with json and the tensors with numpy. Checked:
  - config.json is a GPT2Config (model_type gpt2, n_layer, n_head, n_embd,
    n_positions, vocab_size) matching the tensors;
  - the names are exactly GPT2LMHeadModel's parameters (lm_head.weight left
    out: tied to transformer.wte.weight, as from_pretrained ties it), with
    its shapes: Conv1D weights (in, out), wte (vocab_size, n_embd);
  - dtype F32, the data offsets tile the body without gaps or overlap;
  - every value equals the checkpoint's bit for bit (Conv1D weights as the
    transpose, wte as its first vocab_size rows).
Exit 0 when all hold, 1 with one line per problem otherwise."""
import json
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    body = raw[8 + n:]
    return header, body


def tensors(header, body):
    out = {}
    for name, h in header.items():
        a, b = h["data_offsets"]
        out[name] = np.frombuffer(body[a:b], dtype="<f4").reshape(h["shape"])
    return out


def expected_shapes(cfg):
    C, L, V, P = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"]
    s = {"transformer.wte.weight": [V, C], "transformer.wpe.weight": [P, C],
         "transformer.ln_f.weight": [C], "transformer.ln_f.bias": [C]}
    for l in range(L):
        p = "transformer.h.%d." % l
        s.update({p + "ln_1.weight": [C], p + "ln_1.bias": [C],
                  p + "attn.c_attn.weight": [C, 3 * C], p + "attn.c_attn.bias": [3 * C],
                  p + "attn.c_proj.weight": [C, C], p + "attn.c_proj.bias": [C],
                  p + "ln_2.weight": [C], p + "ln_2.bias": [C],
                  p + "mlp.c_fc.weight": [C, 4 * C], p + "mlp.c_fc.bias": [4 * C],
                  p + "mlp.c_proj.weight": [4 * C, C], p + "mlp.c_proj.bias": [C]})
    return s


CONV1D = ("attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight")


def main():
    hf_path, plain_path = sys.argv[1], sys.argv[2]
    cfg = json.load(open(os.path.join(os.path.dirname(hf_path) or ".", "config.json")))
    bad = []
    if cfg.get("model_type") != "gpt2" or "GPT2LMHeadModel" not in cfg.get("architectures", []):
        bad.append("config.json is not a GPT2LMHeadModel's: %s" % cfg)
    header, body = read_safetensors(hf_path)
    want = expected_shapes(cfg)
    if set(header) != set(want):
        bad.append("names: missing %s, unexpected %s" % (sorted(set(want) - set(header))[:5],
                                                         sorted(set(header) - set(want))[:5]))
    spans = []
    for name, h in header.items():
        if h["dtype"] != "F32":
            bad.append("%s: dtype %s" % (name, h["dtype"]))
        if name in want and h["shape"] != want[name]:
            bad.append("%s: shape %s, GPT2LMHeadModel's is %s" % (name, h["shape"], want[name]))
        a, b = h["data_offsets"]
        if b - a != 4 * int(np.prod(h["shape"])):
            bad.append("%s: %d bytes for shape %s" % (name, b - a, h["shape"]))
        spans.append((a, b))
    spans.sort()
    at = 0
    for a, b in spans:
        if a != at:
            bad.append("data offsets leave a gap or overlap at byte %d" % at)
            break
        at = b
    if at != len(body):
        bad.append("the tensors cover %d of the body's %d bytes" % (at, len(body)))
    if bad:
        print("\n".join("FAIL: " + b for b in bad))
        return 1
    hf = tensors(header, body)
    ph, pb = read_safetensors(plain_path)
    plain = tensors({k: v for k, v in ph.items() if k in want}, pb)
    V = cfg["vocab_size"]
    for name, x in hf.items():
        ref = plain[name]
        if name.endswith(CONV1D) and name.startswith("transformer.h."):
            ref = ref.T
        elif name == "transformer.wte.weight":
            ref = ref[:V]
        if x.shape != ref.shape or not np.array_equal(x.view(np.uint32), np.ascontiguousarray(ref).view(np.uint32)):
            bad.append("%s: values differ from the checkpoint's" % name)
    print("\n".join("FAIL: " + b for b in bad) if bad else
          "hf export: %d tensors, GPT2LMHeadModel's names and shapes, values equal the checkpoint's" % len(hf))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
