#!/usr/bin/python3
"""PyTorch 1.13 eager training steps of the GPT-2 twin (bench/torch_gpt2.py):
the peer of bench/gpt2_bench.py. Forward, backward and AdamW (decay on 2-D
tensors, as nanoGPT and llm.c's train_gpt2.py configure it) on llm.c's batch
order of a token file, or random tokens. Prints one JSON line: ms per timed
step (each), tokens/s over them, the peak RSS.

    /usr/bin/python3 bench/torch_gpt2_train.py --spec gpt2 --batch 4 --seq 64 --threads 1 \\
        --steps 3 --warmup 1 [--model model.bin] [--tokens tokens.bin] [--autocast]

--autocast runs the forward (and so the backward's matching products) under
torch.autocast("cpu", dtype=torch.bfloat16): PyTorch's CPU mixed precision,
the peer of scaleout's --precision bf16.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_env  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--spec", default="gpt2")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--model", help="llm.c model file (else the twin's own initialisation)")
    ap.add_argument("--tokens", help="llm.c token file (else random tokens)")
    ap.add_argument("--autocast", action="store_true", help="forward under CPU autocast to bfloat16")
    a = ap.parse_args()
    peer_env.prepare(a.threads)
    import json
    import resource
    import time

    import numpy as np
    import torch
    import torch_gpt2 as tg
    torch.set_num_threads(a.threads)
    model = tg.read_model(a.model) if a.model else tg.GPT(tg.Config.parse(a.spec)).init_weights(1)
    cfg = model.cfg
    n = (a.steps + a.warmup) * a.batch * a.seq + 1
    tokens = tg.read_tokens(a.tokens) if a.tokens else np.random.default_rng(1).integers(0, cfg.V, n)
    opt = model.optimizer(1e-4, 0.0)
    ms = []
    for s in range(a.warmup + a.steps):
        x, y = tg.batch(tokens, s % max(1, (len(tokens) - 1) // (a.batch * a.seq)), a.batch, a.seq)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast):
            _, loss = model(x, y)
        loss.backward()
        opt.step()
        if s >= a.warmup:
            ms.append((time.perf_counter() - t0) * 1e3)
    print(json.dumps({"ms": ms, "tokens_per_sec": a.batch * a.seq * len(ms) / (sum(ms) / 1e3),
                      "loss": loss.item(), "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


if __name__ == "__main__":
    main()
