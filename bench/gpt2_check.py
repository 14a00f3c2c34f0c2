#!/usr/bin/python3
"""scaleout's GPT-2 against an independent PyTorch 1.13 GPT-2 (bench/torch_gpt2.py)
on the same llm.c-format weights and tokens:

  * the first forward's logits: max |error| <= 1e-4 x max |logit|
  * the first backward's gradient of every parameter tensor: ||error|| <= 1e-3 ||grad||
  * the losses of STEPS AdamW steps (decay on 2-D tensors, betas 0.9/0.95,
    optionally clipped to a global norm): each within 1e-4 relative
  * and, with several backends, the backends against each other the same way.

PyTorch writes the model file (its own initialisation) and the token file,
scaleout's side is tests/gpt2_check.c (built as build/tests/gpt2_check).

    /usr/bin/python3 bench/gpt2_check.py --spec gpt2:L=4,H=4,C=128,T=64,V=512 \\
        --check build/tests/gpt2_check --backends ref,onednn      # make test's tiny check
    /usr/bin/python3 bench/gpt2_check.py --spec gpt2 --batch 4 --seq 64 --steps 3 \\
        --check build/tests/gpt2_check --backends onednn          # GPT-2 124M

Exit status 1 when any figure is out of bounds.
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_gpt2 as tg  # noqa: E402

LOGIT_TOL, GRAD_TOL, LOSS_TOL = 1e-4, 1e-3, 1e-4


def torch_reference(model, tokens, a):
    """logits and llm.c-ordered gradients of step 0, and the loss of every step."""
    opt = model.optimizer(a.lr, a.wd)
    losses, logits0, grads0 = [], None, None
    for s in range(a.steps):
        x, y = tg.batch(tokens, s, a.batch, a.seq)
        opt.zero_grad(set_to_none=True)
        logits, loss = model(x, y)
        loss.backward()
        if s == 0:
            logits0 = logits.detach().double().numpy().ravel()
            grads0 = tg.grads_llmc(model)
        if a.clip > 0:
            tg.clip_grad_norm(model, a.clip)
        opt.step()
        losses.append(loss.item())
    return logits0, grads0, np.array(losses)


def run_scaleout(a, work, backend):
    out = os.path.join(work, backend)
    os.makedirs(out, exist_ok=True)
    cmd = [a.check, os.path.join(work, "model.bin"), os.path.join(work, "tokens.bin"), str(a.batch), str(a.seq),
           str(a.steps), backend, out, repr(a.lr), repr(a.wd), repr(a.clip)]
    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    subprocess.run(cmd, check=True, env=env)
    logits = np.fromfile(os.path.join(out, "logits.f32"), dtype=np.float32).astype(np.float64)
    grads = np.fromfile(os.path.join(out, "grads.f32"), dtype=np.float32).astype(np.float64)
    losses = np.loadtxt(os.path.join(out, "losses.txt"), ndmin=1)
    return logits, grads, losses


def compare(name, want, got, tensors):
    """Prints the three figures of `got` against `want`; returns the failures."""
    wl, wg, wloss = want
    gl, gg, gloss = got
    bad = 0
    err = np.abs(gl - wl).max() / np.abs(wl).max()
    bad += err > LOGIT_TOL
    print("%-18s logits   max|err|/max|logit| %.2e  (bound %.0e)%s" % (name, err, LOGIT_TOL,
                                                                         "  FAIL" if err > LOGIT_TOL else ""))
    worst, worst_name, at = 0.0, "", 0
    for tname, g in tensors:
        n = g.numel()
        w, s = wg[at:at + n], gg[at:at + n]
        at += n
        norm = np.linalg.norm(w)
        rel = np.linalg.norm(s - w) / norm if norm > 0 else np.linalg.norm(s)
        if rel > worst:
            worst, worst_name = rel, tname
    bad += worst > GRAD_TOL or at != gg.size
    print("%-18s gradients worst ||err||/||grad|| %.2e in %s  (bound %.0e)%s" % (
        name, worst, worst_name, GRAD_TOL, "  FAIL" if worst > GRAD_TOL or at != gg.size else ""))
    rel = np.abs(gloss - wloss) / np.abs(wloss)
    bad += rel.max() > LOSS_TOL or len(gloss) != len(wloss)
    print("%-18s losses   worst rel err %.2e over %d steps  (bound %.0e)%s" % (
        name, rel.max(), len(gloss), LOSS_TOL, "  FAIL" if rel.max() > LOSS_TOL else ""))
    return bad


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--spec", default="gpt2:L=4,H=4,C=128,T=64,V=512")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq", type=int, default=64)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--wd", type=float, default=0.1)
    p.add_argument("--clip", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--check", required=True, help="the built tests/gpt2_check")
    p.add_argument("--backends", default="ref,onednn")
    p.add_argument("--workdir", help="keep the files here (default: a temporary directory)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    cfg = tg.Config.parse(a.spec)
    work = a.workdir or tempfile.mkdtemp(prefix="gpt2_check.")
    os.makedirs(work, exist_ok=True)
    model = tg.GPT(cfg).init_weights(a.seed)
    tg.write_model(model, os.path.join(work, "model.bin"))
    rng = np.random.default_rng(a.seed)
    tokens = rng.integers(0, cfg.V, size=a.steps * a.batch * a.seq + 1)
    tg.write_tokens(os.path.join(work, "tokens.bin"), tokens)
    tensors = [(n, t.detach()) for n, t in tg.llmc_tensors(model)]
    want = torch_reference(model, tokens, a)
    want = (want[0], np.concatenate([g for _, g in want[1]]), want[2])
    print("%s, B=%d T=%d, %d AdamW steps (lr %g, wd %g, clip %g), %d thread(s)" % (
        cfg.spec(), a.batch, a.seq, a.steps, a.lr, a.wd, a.clip, a.threads))
    bad, results = 0, {}
    for backend in a.backends.split(","):
        results[backend] = run_scaleout(a, work, backend)
        bad += compare(backend + " vs torch", want, results[backend], tensors)
    names = list(results)
    for i in range(1, len(names)):
        bad += compare(names[i] + " vs " + names[0], results[names[0]], results[names[i]], tensors)
    print("FAIL" if bad else "ok")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
