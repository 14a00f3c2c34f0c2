#!/usr/bin/python3
"""Checks `scaleout bench` result files against the schema in docs/FORMATS.md
(scaleout-bench-1: train, scaling, accuracy, tta and collective records), and MLLOG lines.

    bench_schema.py FILE.json...        every record
    bench_schema.py --mllog LOG         every ':::MLLOG' line parses and the required keys appear
Exits 1 naming the file and the first problem."""
import json
import math
import sys

NUM = (int, float)


def need(obj, path, types, where):
    cur = obj
    for part in path.split("."):
        if not isinstance(cur, dict) or part not in cur:
            raise ValueError(f"{where}: missing {path}")
        cur = cur[part]
    if types is not None and not isinstance(cur, types) or isinstance(cur, bool) and types == NUM:
        raise ValueError(f"{where}: {path} is {type(cur).__name__}, want {types}")
    return cur


ENV = {"hostname": str, "date": str, "kernel": str, "cpu_model": str, "cpu_count": int, "cpu_online": int,
       "mpi_library": str, "onednn": str, "compiler": str, "compiler_flags": str, "build_type": str,
       "scaleout_version": str, "git": str, "threads.compute_threads": int, "threads.pinned": bool}


def common(d, f):
    if need(d, "schema", str, f) != "scaleout-bench-1":
        raise ValueError(f"{f}: schema is {d['schema']!r}")
    need(d, "config", dict, f)
    for k, t in ENV.items():
        need(d, "environment." + k, t, f)
    if d["environment"]["cpu_count"] < 1:
        raise ValueError(f"{f}: cpu_count < 1")


def stats(d, path, f):
    s = need(d, path, dict, f)
    for k in ("n", "mean", "sd", "median", "min", "max"):
        need(s, k, NUM, f"{f}:{path}")
    if not s["min"] <= s["median"] <= s["max"] or not s["min"] <= s["mean"] <= s["max"]:
        raise ValueError(f"{f}: {path}: not min <= median, mean <= max: {s}")


def raw(d, f, nsteps):
    r = need(d, "raw", dict, f)
    for k in ("step_seconds", "data_wait", "forward", "backward", "comm_exposed", "optimizer"):
        a = need(r, k, list, f)
        if len(a) != nsteps or not all(isinstance(x, NUM) and x >= 0 for x in a):
            raise ValueError(f"{f}: raw.{k}: want {nsteps} non-negative numbers, got {len(a)}")


def train(d, f):
    for k in ("model", "dataset", "backend", "optimizer"):
        need(d, "config." + k, str, f)
    for k in ("batch_size", "global_batch_size", "world_size", "num_warmup_batches", "num_batches", "threads"):
        need(d, "config." + k, int, f)
    c, r = d["config"], need(d, "results", dict, f)
    if c["global_batch_size"] != c["batch_size"] * c["world_size"]:
        raise ValueError(f"{f}: global_batch_size != batch_size x world_size")
    if need(r, "timed_steps", int, f) != c["num_batches"] or need(r, "warmup_steps", int, f) != c["num_warmup_batches"]:
        raise ValueError(f"{f}: timed/warm-up steps differ from the configuration")
    ips, el = need(r, "total_images_per_sec", NUM, f), need(r, "elapsed_seconds", NUM, f)
    want = c["world_size"] * c["num_batches"] * c["batch_size"] / el
    if not math.isclose(ips, want, rel_tol=1e-6):
        raise ValueError(f"{f}: total_images_per_sec {ips} != workers x steps x batch / elapsed = {want}")
    stats(d, "results.step_seconds", f)
    share = need(r, "phase_share", dict, f)
    total = sum(need(share, k, NUM, f) for k in
                ("data_wait", "forward", "backward", "comm_exposed", "optimizer", "other"))
    if not math.isclose(total, 1.0, abs_tol=1e-6):
        raise ValueError(f"{f}: phase shares sum to {total}")
    need(r, "overhead_fraction", NUM, f)
    ranks = need(d, "ranks", list, f)
    if len(ranks) != c["world_size"]:
        raise ValueError(f"{f}: {len(ranks)} ranks for world_size {c['world_size']}")
    for k in ranks:
        need(k, "images_per_sec", NUM, f)
    raw(d, f, c["num_warmup_batches"] + c["num_batches"])


def scaling(d, f):
    need(d, "config.model", str, f)
    mode = need(d, "config.mode", str, f)
    nps = need(d, "config.np", list, f)
    rep = need(d, "config.repeat", int, f)
    pts = need(d, "points", list, f)
    if [p["np"] for p in pts] != nps:
        raise ValueError(f"{f}: points do not follow config.np")
    for p in pts:
        w = f"{f}:np={p['np']}"
        stats(p, "images_per_sec", w)
        for k in ("speedup", "efficiency"):
            need(p, k, NUM, w)
        runs = need(p, "runs", list, w)
        if len(runs) != rep:
            raise ValueError(f"{w}: {len(runs)} runs, want {rep}")
        b, gb = need(p, "batch_size", int, w), need(p, "global_batch_size", int, w)
        if gb != b * p["np"]:
            raise ValueError(f"{w}: global batch != batch x np")
        if mode == "strong" and gb != d["config"]["batch_size"]:
            raise ValueError(f"{w}: strong scaling changed the global batch")
        if mode == "weak" and b != d["config"]["batch_size"]:
            raise ValueError(f"{w}: weak scaling changed the per-rank batch")


def accuracy(d, f):
    by_loss = "target_loss" in d.get("config", {})
    t = need(d, "config.target_loss" if by_loss else "config.target", NUM, f)
    if not 0 < t <= (math.inf if by_loss else 1):
        raise ValueError(f"{f}: target {t}")
    r = need(d, "results", dict, f)
    st = need(r, "status", str, f)
    if st not in ("success", "aborted") or need(r, "reached", bool, f) != (st == "success"):
        raise ValueError(f"{f}: status {st!r} / reached disagree")
    if st == "success":
        need(r, "time_to_accuracy_seconds", NUM, f)
        if by_loss and need(r, "final_loss", NUM, f) > t or not by_loss and r["final_accuracy"] < t:
            raise ValueError(f"{f}: success short of the target")
    for k in ("epochs", "steps"):
        need(r, k, int, f)
    need(r, "images_per_sec", NUM, f)
    eps = need(d, "epochs", list, f)
    if len(eps) != r["epochs"]:
        raise ValueError(f"{f}: {len(eps)} epoch entries for {r['epochs']} epochs")
    raw(d, f, r["steps"])


def tta(d, f):
    by_loss = "target_loss" in d.get("config", {})
    t = need(d, "config.target_loss" if by_loss else "config.target", NUM, f)
    seeds = need(d, "config.seeds", list, f)
    ms = need(d, "methods", list, f)
    if not 0 < t <= (math.inf if by_loss else 1) or not seeds or not ms:
        raise ValueError(f"{f}: target {t}, {len(seeds)} seeds, {len(ms)} methods")
    for m in ms:
        w = f"{f}:{need(m, 'method', str, f)}"
        if need(m, "flag", str, w) not in ("baseline", "compress", "sync"):
            raise ValueError(f"{w}: flag {m['flag']!r}")
        stats(m, "time_to_accuracy_seconds", w)
        stats(m, "loss_at_epoch" if by_loss else "accuracy_at_epoch", w)
        runs = need(m, "runs", list, w)
        if [r["seed"] for r in runs] != seeds:
            raise ValueError(f"{w}: runs do not follow config.seeds")
        if need(m, "reached", int, w) != sum(1 for r in runs if need(r, "reached", bool, w)):
            raise ValueError(f"{w}: reached disagrees with the runs")
        for r in runs:
            if r["reached"] and not isinstance(r.get("time_to_accuracy_seconds"), NUM):
                raise ValueError(f"{w}: a run reached the target without a time")
            if len(need(r, "curve", list, w)) != need(r, "epochs", int, w):
                raise ValueError(f"{w}: the curve has {len(r['curve'])} points for {r['epochs']} epochs")


def collective(d, f):
    need(d, "collective", str, f)
    need(d, "ranks", int, f)
    res = need(d, "results", list, f)
    if not res:
        raise ValueError(f"{f}: no results")
    for r in res:
        for k in ("bytes", "avg_us", "min_us", "max_us", "busbw_gbs"):
            need(r, k, NUM, f)
        need(r, "algo", str, f)
        if not r["min_us"] <= r["avg_us"] <= r["max_us"]:
            raise ValueError(f"{f}: not min <= avg <= max: {r}")


REQUIRED_MLLOG = ["init_start", "init_stop", "run_start", "run_stop", "epoch_start", "epoch_stop", "eval_start",
                  "eval_stop", "eval_accuracy", "global_batch_size", "seed", "opt_name", "opt_base_learning_rate",
                  "submission_benchmark"]


def mllog(path):
    seen, n = {}, 0
    for line in open(path):
        if not line.startswith(":::MLLOG "):
            continue
        n += 1
        e = json.loads(line[len(":::MLLOG "):])
        for k in ("namespace", "time_ms", "event_type", "key", "value", "metadata"):
            if k not in e:
                raise ValueError(f"{path}: MLLOG line {n} lacks {k}")
        if e["event_type"] not in ("POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"):
            raise ValueError(f"{path}: event_type {e['event_type']}")
        for k in ("file", "lineno"):
            if k not in e["metadata"]:
                raise ValueError(f"{path}: metadata lacks {k}")
        if e["key"] in ("epoch_start", "epoch_stop", "eval_accuracy") and "epoch_num" not in e["metadata"]:
            raise ValueError(f"{path}: {e['key']} without epoch_num")
        seen.setdefault(e["key"], e)
    missing = [k for k in REQUIRED_MLLOG if k not in seen]
    if missing:
        raise ValueError(f"{path}: MLLOG keys missing: {missing}")
    if seen["run_stop"]["metadata"].get("status") not in ("success", "aborted"):
        raise ValueError(f"{path}: run_stop status {seen['run_stop']['metadata']}")
    print(f"{path}: {n} MLLOG lines, run_stop status {seen['run_stop']['metadata']['status']}")


def main(args):
    try:
        if args[:1] == ["--mllog"]:
            for p in args[1:]:
                mllog(p)
            return 0
        for f in args:
            d = json.load(open(f))
            common(d, f)
            {"train": train, "scaling": scaling, "accuracy": accuracy, "tta": tta,
             "collective": collective}[need(d, "kind", str, f)](d, f)
            print(f"{f}: valid {d['kind']} record")
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        print(f"schema: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
