#!/usr/bin/env python3
"""Writes an llm.c GPT-2 model file the way llm.c's train_gpt2.py write_model
does -- a 256-int32 header, then the state dict's tensors in write_tensors'
order, wte padded to Vp rows -- for tests/test_llmc.c, which reads it back
with scaleout. Each element is a known function of the tensor's Hugging Face
name (the layer in it) and its flat index, so the reader's offsets, shapes
and per-layer slices are all checked.

  llmc_model_ref.py OUT L NH C maxT V Vp [bf16]
"""
import sys

import numpy as np

ORDER = ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias", "attn.c_proj.weight",
         "attn.c_proj.bias", "ln_2.weight", "ln_2.bias", "mlp.c_fc.weight", "mlp.c_fc.bias",
         "mlp.c_proj.weight", "mlp.c_proj.bias"]


def value(k, layer, n):
    """Element i of tensor k (0..15 in llm.c's order) of a layer: integers of
    magnitude below 256, exact in BF16 too."""
    i = np.arange(n, dtype=np.int64)
    return (k * 15 + layer * 3 + (i % 5) - 100).astype(np.float32)


def main():
    out = sys.argv[1]
    L, NH, C, T, V, Vp = (int(a) for a in sys.argv[2:8])
    bf16 = len(sys.argv) > 8 and sys.argv[8] == "bf16"
    shapes = {"ln_1.weight": (C,), "ln_1.bias": (C,), "attn.c_attn.weight": (3 * C, C), "attn.c_attn.bias": (3 * C,),
              "attn.c_proj.weight": (C, C), "attn.c_proj.bias": (C,), "ln_2.weight": (C,), "ln_2.bias": (C,),
              "mlp.c_fc.weight": (4 * C, C), "mlp.c_fc.bias": (4 * C,), "mlp.c_proj.weight": (C, 4 * C),
              "mlp.c_proj.bias": (C,)}
    tensors = [value(0, 0, Vp * C).reshape(Vp, C), value(1, 0, T * C).reshape(T, C)]
    for j, name in enumerate(ORDER):  # layer-major inside each kind, as write_tensors loops
        for layer in range(L):
            n = int(np.prod(shapes[name]))
            tensors.append(value(2 + j, layer, n))
    tensors += [value(14, 0, C), value(15, 0, C)]
    header = np.zeros(256, dtype=np.int32)
    header[:8] = [20240326, 5 if bf16 else 3, T, V, L, NH, C, Vp]
    with open(out, "wb") as f:
        f.write(header.tobytes())
        for t in tensors:
            t = np.ascontiguousarray(t, dtype=np.float32)
            if bf16:
                f.write((t.view(np.uint32) >> 16).astype(np.uint16).tobytes())
            else:
                f.write(t.tobytes())


if __name__ == "__main__":
    main()
