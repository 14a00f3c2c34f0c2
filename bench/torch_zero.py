#!/usr/bin/python3
"""PyTorch peers of `mpirun -np N scaleout train --strategy zero1|zero3`: N
processes x 1 thread over gloo on this machine, the same model, per-rank
batch and AdamW; prints one JSON line with the total images/sec (all ranks,
warm-up excluded) and every rank's peak resident set (ru_maxrss).

    /usr/bin/python3 bench/torch_zero.py --mode zero --model resnet20 --batch 64 --np 2 --steps 20
    /usr/bin/python3 bench/torch_zero.py --mode fsdp --sharding FULL_SHARD ...

--mode zero: DistributedDataParallel with torch.distributed.optim.ZeroRedundancyOptimizer
(AdamW), PyTorch's ZeRO-1 (optimizer state sharded, gradients allreduced by
DDP, parameters broadcast by their owners after the step).
--mode ddp: DistributedDataParallel with AdamW (what scaleout's dp is).
--mode fsdp --sharding FULL_SHARD|SHARD_GRAD_OP: FullyShardedDataParallel on
the CPU (ZeRO-3 / ZeRO-2); when PyTorch cannot run it here the JSON line
carries the error instead of a rate. PyTorch 1.13 under Python 3.11 cannot
even import FSDP (a dataclass with a mutable default in torch.distributed.
_shard); the harness makes those classes hashable first, so the error
reported is FSDP's own on this machine.
"""
import argparse
import json
import os
import resource
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_env  # noqa: E402


def importable_fsdp():
    """torch.distributed.fsdp as Python 3.11 can import it: its dataclasses
    with instances of unhashable dataclasses as defaults get object's hash
    (Python 3.11 refuses such defaults; PyTorch fixed this after 1.13)."""
    import dataclasses
    plain = dataclasses.dataclass

    def hashable(cls=None, **kw):
        def wrap(c):
            r = plain(**kw)(c)
            if r.__hash__ is None and c.__module__.startswith("torch.distributed"):
                r.__hash__ = object.__hash__
            return r
        return wrap if cls is None else wrap(cls)
    dataclasses.dataclass = hashable
    try:
        import torch.distributed.fsdp as fsdp
    finally:
        dataclasses.dataclass = plain
    return fsdp


def wrap(a, model):
    """The model and its optimizer as --mode asks."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP
    if a.mode == "ddp":
        model = DDP(model)
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3)
    if a.mode == "fsdp":
        fsdp = importable_fsdp()
        model = fsdp.FullyShardedDataParallel(model, sharding_strategy=getattr(fsdp.ShardingStrategy, a.sharding))
        return model, torch.optim.AdamW(model.parameters(), lr=1e-3)
    from torch.distributed.optim import ZeroRedundancyOptimizer
    model = DDP(model)
    return model, ZeroRedundancyOptimizer(model.parameters(), optimizer_class=torch.optim.AdamW, lr=1e-3)


def worker(rank, a, port, out):
    import torch
    import torch.distributed as dist
    import torch_models
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    os.sched_setaffinity(0, {rank % os.cpu_count()})
    dist.init_process_group("gloo", rank=rank, world_size=a.np)
    torch.manual_seed(42)
    c, h, w, classes = torch_models.defaults(a.model)
    loss_fn = torch.nn.CrossEntropyLoss()
    xs = [torch.randn(a.batch, c, h, w) for _ in range(2)]
    ys = [torch.randint(0, classes, (a.batch,)) for _ in range(2)]

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(xs[i % 2]), ys[i % 2])
        loss.backward()
        opt.step()
    try:  # the set-up and the first step: where a peer that cannot run here says so
        model, opt = wrap(a, torch_models.build(a.model, classes))
        step(0)
    except Exception as e:  # noqa: BLE001 -- the peer's own refusal is the result
        out.put({"rank": rank, "error": f"{type(e).__name__}: {e}".splitlines()[0]})
        return
    t0 = time.perf_counter()
    for i in range(1, a.warmup + a.steps):
        if i == a.warmup:
            dist.barrier()
            t0 = time.perf_counter()
        step(i)
    dist.barrier()
    elapsed = time.perf_counter() - t0
    out.put({"rank": rank, "images_per_sec": a.np * a.steps * a.batch / elapsed,
             "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024})
    dist.barrier()
    peer_env.leave_spawned(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["ddp", "zero", "fsdp"], default="zero")
    ap.add_argument("--sharding", choices=["FULL_SHARD", "SHARD_GRAD_OP"], default="FULL_SHARD")
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=5)
    a = ap.parse_args()
    a.warmup = max(1, a.warmup)  # the first step is the set-up's check
    peer_env.prepare(1)  # before torch loads (bench/peer_env.py)
    import torch.multiprocessing as mp
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    port = 29500 + os.getpid() % 1000
    procs = [ctx.Process(target=worker, args=(r, a, port, out)) for r in range(a.np)]
    for p in procs:
        p.start()
    res = [out.get(timeout=3600) for _ in procs]
    peer_env.join_spawned(procs)
    errors = [r["error"] for r in res if "error" in r]
    if errors:
        print(json.dumps({"mode": a.mode, "sharding": a.sharding, "np": a.np, "error": errors[0]}))
        return
    res.sort(key=lambda r: r["rank"])
    print(json.dumps({"mode": a.mode, "np": a.np, "images_per_sec": res[0]["images_per_sec"],
                      "peak_rss_bytes": [r["peak_rss_bytes"] for r in res]}))


if __name__ == "__main__":
    main()
