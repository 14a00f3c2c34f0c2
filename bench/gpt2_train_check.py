#!/usr/bin/python3
"""`scaleout train` on GPT-2 against PyTorch, end to end: the trainer reads
llm.c's token shards in llm.c's order (--shuffle off) and llm.c's model file
(--init-from), runs data parallel over NP ranks, and its per-step losses
(--json's step_loss) must equal those of an independent PyTorch GPT-2
(bench/torch_gpt2.py) trained on the same weights and tokens at the global
batch NP x B with llm.c's own optimizer settings (AdamW, betas 0.9/0.999,
eps 1e-8, no weight decay; train_gpt2.c's gpt2_update).

Why the global batch: rank r's batch i is the B*T+1 tokens from
(i*NP + r)*B*T, so the NP ranks together read exactly the NP*B rows llm.c's
loader reads at batch NP*B, and the mean of their losses is its loss.

    /usr/bin/python3 bench/gpt2_train_check.py --scaleout build/scaleout \\
        --spec gpt2:L=2,H=4,C=64,T=32,V=300 --np 2 --batch 2 --seq 32 --steps 8

Exit status 1 when a step's loss is off by more than --tol (relative).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt2 as tg  # noqa: E402


def torch_losses(model, tokens, a):
    """Per-step losses of PyTorch at the global batch, llm.c's order."""
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0)
    losses = []
    for s in range(a.steps):
        x, y = tg.batch(tokens, s, a.np * a.batch, a.seq)
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        if a.clip > 0:
            tg.clip_grad_norm(model, a.clip)
        opt.step()
        losses.append(loss.item())
    return np.array(losses)


def scaleout_losses(a, work):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = os.path.join(work, "train.json")
    cmd = [a.scaleout, "train", "--model", a.spec, "--dataset", "tokens", "--data-dir", work, "--seq-len",
           str(a.seq), "--shuffle", "off", "--batch-size", str(a.batch), "--steps", str(a.steps), "--optimizer",
           "adamw", "--lr", repr(a.lr), "--weight-decay", "0", "--init-from", os.path.join(work, "model.bin"),
           "--backend", a.backend, "--eval-every", "-1", "--prefetch", "0", "--json", out]
    if a.clip > 0:
        cmd += ["--clip-norm", repr(a.clip)]
    if a.np > 1:
        cmd = [os.path.join(root, "scripts", "mpirun.sh"), "-np", str(a.np)] + cmd
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    with open(out) as f:
        return np.array(json.load(f)["step_loss"], dtype=np.float64)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--scaleout", required=True, help="the built scaleout binary")
    p.add_argument("--spec", default="gpt2:L=2,H=4,C=64,T=32,V=300")
    p.add_argument("--np", type=int, default=2)
    p.add_argument("--batch", type=int, default=2, help="sequences per rank")
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--clip", type=float, default=0.0)
    p.add_argument("--backend", default="onednn")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--workdir")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cfg = tg.Config.parse(a.spec)
    work = a.workdir or tempfile.mkdtemp(prefix="gpt2_train_check.")
    os.makedirs(work, exist_ok=True)
    model = tg.GPT(cfg).init_weights(a.seed)
    tg.write_model(model, os.path.join(work, "model.bin"))
    rng = np.random.default_rng(a.seed)
    # one token more than the steps read, and a small validation shard
    tokens = rng.integers(0, cfg.V, size=a.steps * a.np * a.batch * a.seq + 1)
    tg.write_tokens(os.path.join(work, "check_train.bin"), tokens)
    tg.write_tokens(os.path.join(work, "check_val.bin"), rng.integers(0, cfg.V, size=a.np * a.batch * a.seq + 1))
    want = torch_losses(model, tokens, a)
    got = scaleout_losses(a, work)
    print("%s, %d rank(s) x B=%d, T=%d, %d AdamW steps (lr %g, clip %g), backend %s" % (
        cfg.spec(), a.np, a.batch, a.seq, a.steps, a.lr, a.clip, a.backend))
    print("step  pytorch     scaleout    rel err")
    for s in range(min(len(want), len(got))):
        print("%4d  %.7f  %.7f  %.1e" % (s, want[s], got[s], abs(got[s] - want[s]) / abs(want[s])))
    rel = np.abs(got - want) / np.abs(want) if len(got) == len(want) else np.array([np.inf])
    bad = rel.max() > a.tol
    print("worst rel err %.2e over %d steps (bound %.0e): %s" % (rel.max(), len(got), a.tol, "FAIL" if bad else "ok"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
