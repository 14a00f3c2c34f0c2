#!/usr/bin/python3
"""PyTorch DDP (gloo) peer of `mpirun -np N scaleout bench accuracy --compress M`:
time to a target test accuracy on Fashion-MNIST with DDP's communication
hooks: none (FP32 allreduce), fp16 (default_hooks.fp16_compress_hook) or
powersgd:R[:START] (powerSGD_hook.powerSGD_hook with matrix_approximation_rank
R, start_powerSGD_iter START (default 10), error feedback and warm start on:
torch's defaults). Or, the peer of `--sync local:H [--local-after S]`,
--local H[:S]: PyTorch's post-local SGD, post_localSGD_hook (gradients
averaged until step S, none after: post_local_gradient_allreduce off) and
PostLocalSGDOptimizer with a PeriodicModelAverager(period H, warmup_steps S)
that averages the parameters every H steps. Same model (bench/torch_models.py), per-rank batch, SGD
momentum 0.9, learning rate and normalisation as bench/torch_accuracy.py; each
rank trains on its share of every epoch's permutation and evaluates its share
of the test set (summed over ranks), as scaleout does. The clock starts after
data loading and model construction and stops after the evaluation that
reaches the target. Rank 0 prints one JSON line.

    /usr/bin/python3 bench/torch_ddp_tta.py --hook powersgd:2 --target 0.85 --np 2
    torch_ddp_tta.py ... --rank R --master 10.77.0.1:29500     (one rank per host)
"""
import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_env  # noqa: E402


def register_hook(model, spec, dist):
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks, powerSGD_hook
    name, _, arg = spec.partition(":")
    if name == "none":
        return
    if name == "fp16":
        model.register_comm_hook(dist.group.WORLD, default_hooks.fp16_compress_hook)
        return
    if name == "powersgd":
        rank, _, start = arg.partition(":")
        state = powerSGD_hook.PowerSGDState(process_group=None, matrix_approximation_rank=int(rank or 1),
                                            start_powerSGD_iter=int(start or 10))
        model.register_comm_hook(state, powerSGD_hook.powerSGD_hook)
        return
    raise SystemExit(f"torch_ddp_tta.py: unknown --hook {spec} (none, fp16, powersgd:R[:START])")


def local_sgd(model, opt, spec, dist):
    """--local H[:S]: PyTorch's post-local SGD around OPT; returns the optimizer to step."""
    from torch.distributed.algorithms.ddp_comm_hooks import post_localSGD_hook as pl
    from torch.distributed.algorithms.model_averaging import averagers
    from torch.distributed.optim import PostLocalSGDOptimizer
    period, _, after = spec.partition(":")
    state = pl.PostLocalSGDState(process_group=None, subgroup=None, start_localSGD_iter=int(after or 0),
                                 post_local_gradient_allreduce=False)
    model.register_comm_hook(state, pl.post_localSGD_hook)
    avg = averagers.PeriodicModelAverager(period=int(period), warmup_steps=int(after or 0))
    return PostLocalSGDOptimizer(optim=opt, averager=avg)


def join(rank, a, port, addr, pin):
    """This process as rank `rank` of a.np over gloo, 1 thread, pinned to a core when `pin`."""
    import datetime

    import torch
    import torch.distributed as dist
    os.environ.update(MASTER_ADDR=addr, MASTER_PORT=str(port))
    torch.set_num_threads(1)
    if pin:
        os.sched_setaffinity(0, {rank % os.cpu_count()})
    # a lost peer ends the run in 2 minutes, not gloo's 30
    dist.init_process_group("gloo", rank=rank, world_size=a.np, timeout=datetime.timedelta(seconds=120))


def worker(rank, a, port, out, addr="127.0.0.1", pin=True):
    import torch
    import torch.distributed as dist
    import torch_accuracy
    import torch_models
    join(rank, a, port, addr, pin)
    torch.manual_seed(a.seed)
    d, idx = a.data_dir, torch_accuracy.idx
    norm = lambda x: (torch.from_numpy(x.astype("float32")) / 255.0 - 0.2860) / 0.3530  # noqa: E731
    xtr = norm(idx(f"{d}/train-images-idx3-ubyte.gz", 1))
    ytr = torch.from_numpy(idx(f"{d}/train-labels-idx1-ubyte.gz", 0).astype("int64"))
    xte = norm(idx(f"{d}/t10k-images-idx3-ubyte.gz", 1))
    yte = torch.from_numpy(idx(f"{d}/t10k-labels-idx1-ubyte.gz", 0).astype("int64"))
    if a.hook.startswith("powersgd"):
        # One bucket: with DDP's two (the first capped at 1 MiB) powerSGD_hook's
        # chained P and Q allreduces of one bucket interleave with the next
        # bucket's on gloo in a different order on each rank over a slow link,
        # and gloo aborts ("op.preamble.length <= op.nbytes", MLP at 1 Gbit/s).
        dist._DEFAULT_FIRST_BUCKET_BYTES = 1 << 30
    model = torch.nn.parallel.DistributedDataParallel(torch_models.build(a.model, 10),
                                                      bucket_cap_mb=1024 if a.hook.startswith("powersgd") else 25)
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=0.9)
    if a.local:
        opt = local_sgd(model, opt, a.local, dist)
    else:
        register_hook(model, a.hook, dist)
    loss_fn = torch.nn.CrossEntropyLoss()
    steps_per_epoch = len(xtr) // (a.batch * a.np)
    test_lo, test_hi = rank * len(xte) // a.np, (rank + 1) * len(xte) // a.np
    dist.barrier()
    start, acc, epochs, accs, epoch_seconds = time.perf_counter(), 0.0, 0, [], []
    for epoch in range(a.max_epochs):
        model.train()
        t0 = time.perf_counter()
        g = torch.Generator().manual_seed(a.seed + epoch)  # the same permutation on every rank
        perm = torch.randperm(len(xtr), generator=g)
        for s in range(steps_per_epoch):
            i = perm[(s * a.np + rank) * a.batch:(s * a.np + rank + 1) * a.batch]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(model(xtr[i]), ytr[i])  # in a variable: see bench/torch_accuracy.py
            loss.backward()
            opt.step()
        epoch_seconds.append(time.perf_counter() - t0)  # training only, as scaleout's epoch seconds
        model.eval()
        with torch.no_grad():
            correct = torch.tensor([sum(int((model(xte[k:min(k + 1000, test_hi)]).argmax(1) ==
                                             yte[k:min(k + 1000, test_hi)]).sum())
                                        for k in range(test_lo, test_hi, 1000))], dtype=torch.float64)
        dist.all_reduce(correct)
        acc, epochs = float(correct[0]) / len(xte), epoch + 1
        accs.append(acc)
        if acc >= a.target:
            break
    tta = time.perf_counter() - start
    if rank == 0:
        out.put({"reached": acc >= a.target, "time_to_accuracy_seconds": tta, "epochs": epochs, "accuracy": acc,
                 "accuracies": accs, "epoch_seconds": epoch_seconds, "steps_per_epoch": steps_per_epoch,
                 "hook": a.hook, "local": a.local, "np": a.np, "torch": torch.__version__})
    dist.barrier()  # every rank is past its last collective
    if pin:  # spawned on one host; across hosts the caller leaves at once (below)
        peer_env.leave_spawned(out)


def launch(worker, a):
    """Runs worker(rank, a, port, out[, addr, pin]) for a.np ranks and prints
    rank 0's result as one JSON line: a.rank >= 0 runs that one rank here
    (rendezvous at a.master, one rank per host), else a.np spawned processes
    on this host. torch_gpt2_tta.py launches its ranks the same way."""
    if a.rank >= 0:  # one rank of a job across hosts, not pinned (as scaleout's ranks there)
        import queue
        addr, port = a.master.rsplit(":", 1)
        out = queue.Queue()
        worker(a.rank, a, int(port), out, addr, pin=False)
        if a.rank == 0:
            print(json.dumps(out.get()), flush=True)
        # Leave at once, without destroy_process_group: once rank 0 (the
        # TCPStore's server) is gone, another rank's ~ProcessGroupGloo joins a
        # store thread that spins on recv of the closed socket, a core at 100%
        # until killed (seen twice at 1 Gbit/s, torch 1.13).
        sys.stdout.flush()
        os._exit(0)
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    import queue
    import random
    port = random.randint(20000, 40000)
    procs = [ctx.Process(target=worker, args=(r, a, port, out)) for r in range(a.np)]
    for p in procs:
        p.start()
    while True:  # a rank that died ends the run instead of leaving the other waiting
        try:
            res = out.get(timeout=1)
            break
        except queue.Empty:
            if any(p.exitcode not in (None, 0) for p in procs):
                for p in procs:
                    p.terminate()
                raise SystemExit(f"{os.path.basename(sys.argv[0])}: a rank failed: {[p.exitcode for p in procs]}")
    peer_env.join_spawned(procs)
    print(json.dumps(res))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="lenet5")
    ap.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--hook", default="none", help="none, fp16, powersgd:R[:START]")
    ap.add_argument("--local", default="", help="H[:S]: post-local SGD, average every H steps after step S")
    ap.add_argument("--target", type=float, required=True)
    ap.add_argument("--max-epochs", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32, help="per rank")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--rank", type=int, default=-1, help="run this one rank here (with --master)")
    ap.add_argument("--master", default="", help="ADDR:PORT of rank 0's rendezvous (with --rank)")
    a = ap.parse_args()
    peer_env.prepare(1)  # before torch loads (bench/peer_env.py)
    launch(worker, a)


if __name__ == "__main__":
    main()
