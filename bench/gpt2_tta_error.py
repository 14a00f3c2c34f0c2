#!/usr/bin/python3
"""What PowerSGD rank 4 and top-k 1% lose of GPT-2's gradient along training
(docs/COMPRESSION.md, "GPT-2 by validation loss": why --compress auto's
steps factor, measured at step 3, is too low there).

The FP32 run of bench/gpt2_tta.sh's cell, on one process: the model from the
seed's llm.c file (bench/torch_gpt2_tta.py --write-init), NP ranks' batches of
llm.c's order averaged as DDP would, clipped to norm 1, AdamW lr 1e-3 (no
weight decay). At the chosen steps it prints, for the step's gradient g:
  e      = ||g - C(g)|| / ||g||, what the message loses (auto's measure);
  SGD x  = 1 / (1 - e^2), auto's steps factor from it;
  kept   = <g, w C(g)> / <g, w g> with w = 1 / (sqrt(v_hat) + eps), AdamW's
           step per unit of gradient: the share of the optimizer's descent
           the message keeps; Adam x = 1 / kept.
PowerSGD is computed as torch's powerSGD_hook does in training: one power
iteration per step with Q warm from the previous step's gradient
(orthonormalised first), P orthonormalised; matrices with
(rows + cols) r 2 >= rows cols and vectors uncompressed. Top-k per tensor.
No error feedback: C compresses g itself, as auto's calibration does. This
is not a timing; run it under /work/bin/so-heavy on a shared machine.

    bench/gpt2_tta_error.py --init DIR/init-s42.bin --data-dir DIR/tok [--steps 3,74,148,...]
"""
import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_env  # noqa: E402


def powersgd(g, q_prev, rank, torch):
    """(C(g), the warm Q for the next step) as the hook computes them."""
    if g.dim() < 2:
        return g.clone(), None
    m = g.reshape(g.shape[0], -1)
    rows, cols = m.shape
    if (rows + cols) * rank * 2 >= rows * cols:
        return g.clone(), None
    q = q_prev if q_prev is not None else torch.randn(cols, rank, generator=torch.Generator().manual_seed(0))
    q = torch.linalg.qr(q.double())[0].float()
    p = torch.linalg.qr((m @ q).double())[0].float()
    q = m.t() @ p
    return (p @ q.t()).reshape(g.shape), q


def topk(g, ratio, torch):
    flat = g.reshape(-1)
    idx = flat.abs().topk(max(1, round(ratio * flat.numel()))).indices
    out = torch.zeros_like(flat)
    out[idx] = flat[idx]
    return out.reshape(g.shape)


def shares(g, c, w):
    e = float((g - c).norm() / g.norm())
    kept = float((g * w * c).sum() / (g * w * g).sum())
    return e, kept


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", required=True, help="llm.c model file (bench/torch_gpt2_tta.py --write-init)")
    ap.add_argument("--data-dir", required=True, help="scaleout tokenize's output: one *_train.bin")
    ap.add_argument("--steps", default="3,10,30,74,148,222,296,370,444", help="steps to print (1-based)")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--rank", type=int, default=4, help="PowerSGD's")
    ap.add_argument("--ratio", type=float, default=0.01, help="top-k's")
    a = ap.parse_args()
    peer_env.prepare(2)
    import torch
    import torch_gpt2 as tg
    train = tg.read_tokens(sorted(glob.glob(os.path.join(a.data_dir, "*_train.bin")))[0])
    model = tg.read_model(a.init)
    opt = model.optimizer(1e-3, 0.0, betas=(0.9, 0.999))
    params = list(model.parameters())
    per_epoch = (len(train) - 1) // (a.np * a.batch * a.seq)
    checks = sorted(int(s) for s in a.steps.split(","))
    warm = [None] * len(params)
    for step in range(1, checks[-1] + 1):
        i = (step - 1) % per_epoch
        avg, mean_loss = [torch.zeros_like(p) for p in params], 0.0
        for r in range(a.np):
            x, y = tg.batch(train, i * a.np + r, a.batch, a.seq)
            model.zero_grad(set_to_none=True)
            _, loss = model(x, y)
            loss.backward()
            mean_loss += float(loss) / a.np
            for s, p in zip(avg, params):
                s += p.grad / a.np
        for s, p in zip(avg, params):
            p.grad = s
        tg.clip_grad_norm(model, 1.0)
        opt.step()
        psgd = []
        for k, p in enumerate(params):  # every step: the hook's warm start follows the gradient
            c, warm[k] = powersgd(p.grad, warm[k], a.rank, torch)
            psgd.append(c)
        if step not in checks:
            continue
        w = []
        for p in params:  # AdamW's step per unit of gradient after this step
            st = opt.state[p]
            w.append(1 / ((st["exp_avg_sq"] / (1 - 0.999 ** int(st["step"]))).sqrt() + 1e-8))
        flat = [torch.cat([t.reshape(-1) for t in ts]).double() for ts in ([p.grad for p in params], w)]
        out = []
        for name, c in (("powersgd:%d" % a.rank, psgd), ("topk:%g" % a.ratio, [topk(p.grad, a.ratio, torch)
                                                                               for p in params])):
            e, kept = shares(flat[0], torch.cat([t.reshape(-1) for t in c]).double(), flat[1])
            out.append("%s e %.3f SGD x%.2f kept %.3f Adam x%.2f" % (name, e, 1 / (1 - e * e), kept,
                                                                     1 / max(kept, 0.01)))
        print("step %d (epoch %.1f) train loss %.3f | %s" % (step, step / per_epoch, mean_loss, " | ".join(out)),
              flush=True)


if __name__ == "__main__":
    main()
