#!/usr/bin/python3
"""PyTorch 1.13 DDP (gloo) peer of `mpirun -np N scaleout train --model gpt2`:
N processes x 1 thread on this machine, each pinned to one core, the GPT-2
twin of bench/torch_gpt2.py from the same llm.c model file, AdamW (decay on
2-D tensors), llm.c's batch order over the ranks (batch i of rank r is the
B*T+1 tokens from (i*N + r)*B*T, as `scaleout train --shuffle off`). Prints
one JSON line from rank 0: ms per timed step (each, between barriers),
global tokens/s over them, the peak RSS of rank 0.

    /usr/bin/python3 bench/torch_gpt2_ddp.py --np 2 --batch 4 --seq 64 --steps 3 --warmup 1 \\
        --model model.bin --tokens tokens.bin
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import peer_env  # noqa: E402


def worker(rank, a, port, out):
    import resource
    import time

    import torch
    import torch.distributed as dist
    import torch_gpt2 as tg
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    os.sched_setaffinity(0, {rank % os.cpu_count()})
    dist.init_process_group("gloo", rank=rank, world_size=a.np)
    model = tg.read_model(a.model)
    opt = model.optimizer(1e-4, 0.0)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    tokens = tg.read_tokens(a.tokens)
    batches = max(1, (len(tokens) - 1) // (a.batch * a.seq))
    ms = []
    for s in range(a.warmup + a.steps):
        x, y = tg.batch(tokens, (s * a.np + rank) % batches, a.batch, a.seq)
        dist.barrier()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        _, loss = ddp(x, y)  # the loss kept in a variable, as training scripts do
        loss.backward()
        opt.step()
        dist.barrier()
        if s >= a.warmup:
            ms.append((time.perf_counter() - t0) * 1e3)
    if rank == 0:
        out.put({"ms": ms, "tokens_per_sec": a.np * a.batch * a.seq * len(ms) / (sum(ms) / 1e3),
                 "loss": loss.item(), "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024})
    dist.barrier()
    peer_env.leave_spawned(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--batch", type=int, default=4, help="sequences per rank")
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--model", required=True, help="llm.c model file")
    ap.add_argument("--tokens", required=True, help="llm.c token file")
    ap.add_argument("--port", type=int, default=29517)
    a = ap.parse_args()
    peer_env.prepare(1)
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, a, a.port, out)) for r in range(a.np)]
    for p in procs:
        p.start()
    res = out.get()
    peer_env.join_spawned(procs)
    if any(p.exitcode for p in procs):
        sys.exit("torch_gpt2_ddp: a rank failed (%s)" % [p.exitcode for p in procs])
    print(json.dumps(res))


if __name__ == "__main__":
    main()
