#!/usr/bin/python3
"""PyTorch DDP (gloo) peer of `mpirun -np N scaleout bench accuracy --model gpt2:...
--dataset tokens --target-loss L --shuffle off --init-from FILE --compress M`:
time to a target validation loss with DDP's communication hooks (none,
fp16_compress_hook, powerSGD_hook: bench/torch_ddp_tta.py's register_hook).

The same run as scaleout's: bench/torch_gpt2.py's GPT-2 read from the same
llm.c model file; llm.c's batch order over the ranks (batch i of rank r is the
B*T+1 tokens from (i*N + r)*B*T of the training shard, as `--shuffle off`),
(n-1)/(N*B*T) batches an epoch; AdamW (betas 0.9/0.999, eps 1e-8, decay on the
2-D tensors), the gradient clipped to global norm --clip after the hook's
average; after every epoch the mean per-token cross-entropy over the
validation shard read in the same order (each rank its batches, summed over
ranks), as scaleout's evaluation. The clock starts after the model is built
and stops after the evaluation that reaches the target. Rank 0 prints one
JSON line (bench/tta_table.py reads it).

    /usr/bin/python3 bench/torch_gpt2_tta.py --init model.bin --data-dir DIR --target-loss 3.5 --hook fp16
    torch_gpt2_tta.py ... --rank R --master 10.77.0.1:29500       (one rank per host)
    torch_gpt2_tta.py --write-init model.bin --spec gpt2:L=4,... --seed 42   (GPT-2's init, llm.c's file)
"""
import argparse
import glob
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_env  # noqa: E402


def shard(data_dir, split):
    """The one *_SPLIT.bin token shard of DATA_DIR (scaleout tokenize writes one per split)."""
    files = sorted(glob.glob(os.path.join(data_dir, "*_%s.bin" % split)))
    if len(files) != 1:
        raise SystemExit("torch_gpt2_tta.py: %s: expected one *_%s.bin, found %d" % (data_dir, split, len(files)))
    return files[0]


def evaluate(model, tokens, a, rank, dist, torch, tg):
    """Validation loss and next-token accuracy over the batches every rank reads, summed over ranks."""
    nb = (len(tokens) - 1) // (a.np * a.batch * a.seq)
    if a.eval_batches > 0:
        nb = min(nb, a.eval_batches)
    sums = torch.zeros(3, dtype=torch.float64)  # loss x tokens, correct tokens, tokens
    with torch.no_grad():
        for i in range(nb):
            x, y = tg.batch(tokens, i * a.np + rank, a.batch, a.seq)
            logits, loss = model(x, y)
            sums += torch.tensor([float(loss) * y.numel(),
                                  float((logits[..., :model.cfg.V].argmax(-1) == y).sum()), y.numel()],
                                 dtype=torch.float64)
    dist.all_reduce(sums)
    return float(sums[0] / sums[2]), float(sums[1] / sums[2])


def worker(rank, a, port, out, addr="127.0.0.1", pin=True):
    import torch
    import torch.distributed as dist
    import torch_ddp_tta
    import torch_gpt2 as tg
    torch_ddp_tta.join(rank, a, port, addr, pin)
    train, val = tg.read_tokens(shard(a.data_dir, "train")), tg.read_tokens(shard(a.data_dir, "val"))
    model = tg.read_model(a.init)
    one_bucket = a.hook.startswith("powersgd")  # as bench/torch_ddp_tta.py: gloo and chained allreduces
    if one_bucket:
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
    ddp = torch.nn.parallel.DistributedDataParallel(model, bucket_cap_mb=1024 if one_bucket else 25)
    torch_ddp_tta.register_hook(ddp, a.hook, dist)
    opt = model.optimizer(a.lr, a.weight_decay, betas=(0.9, 0.999))
    steps_per_epoch = (len(train) - 1) // (a.np * a.batch * a.seq)
    dist.barrier()
    start, loss_v, epochs, losses, accs, epoch_seconds = time.perf_counter(), float("inf"), 0, [], [], []
    for epoch in range(a.max_epochs):
        model.train()
        t0 = time.perf_counter()
        for i in range(steps_per_epoch):
            x, y = tg.batch(train, i * a.np + rank, a.batch, a.seq)
            opt.zero_grad(set_to_none=True)
            _, loss = ddp(x, y)
            loss.backward()
            if a.clip > 0:
                tg.clip_grad_norm(model, a.clip)
            opt.step()
        epoch_seconds.append(time.perf_counter() - t0)  # training only, as scaleout's epoch seconds
        model.eval()
        loss_v, acc = evaluate(model, val, a, rank, dist, torch, tg)
        losses.append(loss_v)
        accs.append(acc)
        epochs = epoch + 1
        if loss_v <= a.target_loss:
            break
    tta = time.perf_counter() - start
    if rank == 0:
        out.put({"reached": loss_v <= a.target_loss, "time_to_accuracy_seconds": tta, "epochs": epochs,
                 "final_loss": loss_v, "losses": losses, "accuracies": accs, "epoch_seconds": epoch_seconds,
                 "steps_per_epoch": steps_per_epoch, "hook": a.hook, "np": a.np, "torch": torch.__version__})
    dist.barrier()  # every rank is past its last collective
    if pin:  # spawned on one host; across hosts the caller leaves at once (torch_ddp_tta.py says why)
        peer_env.leave_spawned(out)


def write_init(a):
    import torch_gpt2 as tg
    tg.write_model(tg.GPT(tg.Config.parse(a.spec)).init_weights(a.seed), a.write_init)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--init", help="llm.c model file: the initial weights (scaleout's --init-from)")
    ap.add_argument("--data-dir", help="llm.c token shards: one *_train.bin and one *_val.bin")
    ap.add_argument("--hook", default="none", help="none, fp16, powersgd:R[:START]")
    ap.add_argument("--target-loss", type=float)
    ap.add_argument("--max-epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=8, help="sequences per rank")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--clip", type=float, default=1.0)
    ap.add_argument("--eval-batches", type=int, default=0, help="at most this many per rank (0: the whole split)")
    ap.add_argument("--seed", type=int, default=42, help="--write-init's")
    ap.add_argument("--spec", default="gpt2:L=4,H=4,C=128,T=64,V=512", help="--write-init's model")
    ap.add_argument("--write-init", default="", help="write GPT-2's initialisation of --spec (seed --seed) here")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rank", type=int, default=-1, help="run this one rank here (with --master)")
    ap.add_argument("--master", default="", help="ADDR:PORT of rank 0's rendezvous (with --rank)")
    a = ap.parse_args()
    peer_env.prepare(1)  # before torch loads (bench/peer_env.py)
    if a.write_init:
        return write_init(a)
    if not (a.init and a.data_dir and a.target_loss):
        ap.error("--init, --data-dir and --target-loss are required")
    import torch_ddp_tta
    torch_ddp_tta.launch(worker, a)


if __name__ == "__main__":
    main()
