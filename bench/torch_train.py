#!/usr/bin/python3
"""PyTorch side of the training-throughput benchmark: the same model
(bench/torch_models.py), batch, thread count and optimizer (SGD momentum 0.9,
lr 0.01) as `scaleout train --dataset synthetic`, timed the same way
(warm-up steps excluded). Prints one JSON line. --autocast bf16 runs the
forward and the loss under PyTorch's CPU autocast (BF16 convolutions and
linear layers, FP32 master weights), the peer of `--precision bf16`.

    OMP_PROC_BIND=true /usr/bin/python3 bench/torch_train.py --model resnet20 --batch 64 --steps 50 --threads 2
"""
import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_env  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--autocast", choices=["off", "bf16"], default="off",
                    help="bf16: forward and loss under torch.autocast('cpu', dtype=torch.bfloat16)")
    a = ap.parse_args()

    peer_env.prepare(a.threads)  # before torch loads (bench/peer_env.py)
    import torch
    import torch_models

    torch.set_num_threads(a.threads)
    torch.manual_seed(42)
    c, h, w, classes = torch_models.defaults(a.model)
    model = torch_models.build(a.model, classes)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    # 4 batches of random data cycled; bench/train_vs_pytorch.py gives scaleout the same 4.
    xs = [torch.randn(a.batch, c, h, w) for _ in range(4)]
    ys = [torch.randint(0, classes, (a.batch,)) for _ in range(4)]
    times = []
    for step in range(a.warmup + a.steps):
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.autocast == "bf16"):
            loss = loss_fn(model(xs[step % 4]), ys[step % 4])
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
    timed = times[a.warmup:]
    print(json.dumps({
        "images_per_sec": a.batch * len(timed) / sum(timed),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
        "torch": torch.__version__,
        "loss": float(loss),
    }))


if __name__ == "__main__":
    main()
