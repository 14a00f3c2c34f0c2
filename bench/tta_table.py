#!/usr/bin/python3
"""Medians of the time-to-accuracy runs in a results directory of
bench/compress_tta.sh or bench/sync_tta.sh, as markdown (docs/COMPRESSION.md).

The directory's index.tsv has one line per run: link, method, who (so =
scaleout, pt = the PyTorch peer), seed, JSON file. Runs of several
invocations add up; a cell's figures are the median over its seeds (min-max).

    bench/tta_table.py DIR [--acc-epoch E] [--baseline METHOD] [--accuracy-only] [--loss]

Per link and method: seconds to the target, epochs, step time, bytes per step
and rank, compression time per step, test accuracy after epoch E (and its
difference to the baseline's, in points), the peer's seconds and epochs, the
ratio, and --compress auto's pick. Then per link: the fastest method against
the baseline, the fastest scaleout against the fastest PyTorch, and auto's
picks against the fastest measured. Runs that evaluated within epochs
(`bench accuracy --eval-steps`) count the training seconds to the target,
evaluations left out, and fractional epochs.
"""
import argparse
import json
import os
import statistics

ap = argparse.ArgumentParser()
ap.add_argument("dir")
ap.add_argument("--acc-epoch", type=int, default=1, help="report test accuracy after this epoch")
ap.add_argument("--baseline", default="", help="method the others are compared to (default: none or sync)")
ap.add_argument("--accuracy-only", action="store_true", help="only the accuracy columns (runs to a fixed epoch count)")
ap.add_argument("--loss", action="store_true", help="validation loss in place of test accuracy (token data)")
a = ap.parse_args()
# the per-epoch figure: test accuracy in points, or validation loss in nats per token (--loss)
SO_KEY, PT_KEY, SCALE = ("test_loss", "losses", 1) if a.loss else ("test_accuracy", "accuracies", 100)

runs = {}  # (link, method, who) -> [json]
order = []  # (link, method) in the order first run
seen = set()
with open(os.path.join(a.dir, "index.tsv")) as f:
    for line in f:
        link, method, who, seed, name = line.rstrip("\n").split("\t")
        path = os.path.join(a.dir, name)
        if not os.path.exists(path) or name in seen:
            continue  # a failed run, or one run again after it failed
        seen.add(name)
        j = json.load(open(path))
        j["_seed"] = seed  # pairs a method's run with the baseline's of the same seed
        runs.setdefault((link, method, who), []).append(j)
        if (link, method) not in order:
            order.append((link, method))
links = list(dict.fromkeys(lk for lk, _ in order))


def med(v, fmt="%.1f", spread=True):
    if not v:
        return "–"
    m = fmt % statistics.median(v)
    return m if len(v) == 1 or not spread else "%s (%s–%s)" % (m, fmt % min(v), fmt % max(v))


def mean2(x=None, y=None):
    """The mean of the last two epochs' accuracies: steadier than one epoch's."""
    return (x + y) / 2 if x is not None and y is not None else None


def so_fields(js):
    """Per-run figures of scaleout's `bench accuracy` records."""
    out = []
    for j in js:
        r, eps = j["results"], j.get("epochs", [])
        accs = {e["epoch"]: e[SO_KEY] for e in eps if e.get(SO_KEY) is not None}
        # with evaluations inside epochs (--eval-steps) the training seconds
        # up to the first evaluation past the target, evaluations left out
        within = j["config"].get("eval_steps", 0) > 0 and "train_seconds_to_target" in r
        spe = r["steps_to_target"] / r["epochs_to_target"] if within else r["steps"] / max(r["epochs"], 1)
        tta = r["train_seconds_to_target"] if within else r.get("time_to_accuracy_seconds")
        epochs = "%.3g" % r["epochs_to_target"] if within else str(r["epochs"])
        out.append({"tta": tta if r["reached"] else None,
                    "epochs": epochs + ("" if r["reached"] else "✗"),
                    "step_ms": 1e3 * statistics.median([e["seconds"] for e in eps]) / spe if eps else None,
                    "bytes": r.get("compress_bytes_per_step", r.get("sync_bytes_per_step")),
                    "dense": r.get("dense_bytes_per_step"),
                    "codec_ms": 1e3 * (r.get("compress_seconds", 0) + r.get("decompress_seconds", 0)) / r["steps"]
                    if r.get("compress_seconds", 0) + r.get("decompress_seconds", 0) > 0 else None,
                    "seed": j["_seed"],
                    "acc": accs.get(a.acc_epoch),
                    "acc2": mean2(accs.get(a.acc_epoch - 1), accs.get(a.acc_epoch)),
                    "auto": r["compress_auto"]["picked"] if "compress_auto" in r else None})
    return out


def pt_fields(js):
    out = []
    for j in js:
        accs = j.get(PT_KEY, [])
        es = j.get("epoch_seconds", [])
        out.append({"tta": j["time_to_accuracy_seconds"] if j["reached"] else None,
                    "epochs": str(j["epochs"]) + ("" if j["reached"] else "✗"),
                    "step_ms": 1e3 * statistics.median(es) / j["steps_per_epoch"] if es else None,
                    "seed": j["_seed"],
                    "acc": accs[a.acc_epoch - 1] if len(accs) >= a.acc_epoch else None,
                    "acc2": mean2(*accs[a.acc_epoch - 2:a.acc_epoch]) if a.acc_epoch >= 2 and
                    len(accs) >= a.acc_epoch else None})
    return out


def col(fs, key):
    return [f[key] for f in fs if f[key] is not None]


dense = next((f["dense"] for (lk, m, w), js in runs.items() if w == "so" for f in so_fields(js) if f["dense"]), None)


def delta(fs, base, key):
    """The median over seeds of each seed's difference to the baseline's run
    of the same seed (same initial weights and data order), in points."""
    b = {f["seed"]: f[key] for f in base if f[key] is not None}
    d = [f[key] - b[f["seed"]] for f in fs if f[key] is not None and f["seed"] in b]
    return "%+.2f" % (SCALE * statistics.median(d)) if d else "–"


def accuracy_table():
    """Runs to a fixed epoch count: accuracy after epoch E (and the mean of
    epochs E-1 and E) against the baseline; PyTorch's beside when it ran."""
    pt = any(w == "pt" for (_, _, w) in runs)
    e = a.acc_epoch
    head = f"| link | method | test accuracy after epoch {e} (%) | Δ vs baseline (points, paired) | mean of epochs {e - 1}-{e} | Δ"
    rule = "|---|---|---:|---:|---:|---:"
    if pt:
        head += f" | PyTorch after epoch {e} | PyTorch Δ | PyTorch mean {e - 1}-{e} | PyTorch Δ"
        rule += "|---:|---:|---:|---:"
    print(head + " | KB/step/rank | runs |")
    print(rule + "|---:|---:|")
    for link in links:
        methods = [m for lk, m in order if lk == link]
        base = a.baseline or next((m for m in methods if m in ("none", "sync")), methods[0])
        bs, bp = so_fields(runs.get((link, base, "so"), [])), pt_fields(runs.get((link, base, "pt"), []))
        for m in methods:
            s = so_fields(runs.get((link, m, "so"), []))
            acc, kb = col(s, "acc"), col(s, "bytes") or ([dense] if dense and s else [])
            row = (f"| {link} | {m} | {med([SCALE * x for x in acc], '%.2f')} | {delta(s, bs, 'acc')} "
                   f"| {med([SCALE * x for x in col(s, 'acc2')], '%.2f')} | {delta(s, bs, 'acc2')} ")
            if pt:
                p = pt_fields(runs.get((link, m, "pt"), []))
                row += (f"| {med([SCALE * x for x in col(p, 'acc')], '%.2f')} | {delta(p, bp, 'acc')} "
                        f"| {med([SCALE * x for x in col(p, 'acc2')], '%.2f')} | {delta(p, bp, 'acc2')} ")
            print(row + f"| {med([b / 1e3 for b in kb], spread=False)} | {len(acc)} |")


if a.accuracy_only:
    accuracy_table()
    raise SystemExit(0)
print(f"| link | method | scaleout s to target | epochs | step ms | KB/step/rank | codec ms/step "
      f"| {'val. loss' if a.loss else 'acc.'} after epoch {a.acc_epoch} | Δ vs baseline ({'nats' if a.loss else 'points'}, paired) | PyTorch DDP s | PyTorch epochs | PyTorch step ms "
      f"| PyTorch / scaleout | auto picked |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
summary = []
for link in links:
    methods = [m for lk, m in order if lk == link]
    base = a.baseline or next((m for m in methods if m in ("none", "sync")), methods[0])
    so = {m: so_fields(runs.get((link, m, "so"), [])) for m in methods}
    pt = {m: pt_fields(runs.get((link, m, "pt"), [])) for m in methods}
    for m in methods:
        s, p = so[m], pt[m]
        st, pts = col(s, "tta"), col(p, "tta")
        kb = col(s, "bytes") or ([dense] if dense and s and m in ("none", "sync") else [])
        acc = col(s, "acc")
        ratio = "%.2f" % (statistics.median(pts) / statistics.median(st)) if st and pts else "–"
        print(f"| {link} | {m} | {med(st)} | {'/'.join(f['epochs'] for f in s) or '–'} "
              f"| {med(col(s, 'step_ms'), spread=False)} | {med([b / 1e3 for b in kb], spread=False)} "
              f"| {med(col(s, 'codec_ms'), '%.2f', spread=False)} | {med([SCALE * x for x in acc], '%.2f')} | {delta(s, so[base], 'acc')} "
              f"| {med(pts)} | {'/'.join(f['epochs'] for f in p) or '–'} | {med(col(p, 'step_ms'), spread=False)} "
              f"| {ratio} | {'/'.join(col(s, 'auto'))} |")
    best = lambda d: min(((statistics.median(col(v, "tta")), m) for m, v in d.items() if col(v, "tta")), default=None)
    bs, bp = best(so), best(pt)
    base_t = col(so[base], "tta")
    line = f"- {link}:"
    if bs and base_t:
        line += f" fastest scaleout method {bs[1]} {bs[0]:.1f} s, {statistics.median(base_t) / bs[0]:.2f}x sooner than {base};"
    if bs and bp:
        line += f" fastest PyTorch {bp[1]} {bp[0]:.1f} s, PyTorch / scaleout {bp[0] / bs[0]:.2f}x;"
    picks = [f["auto"] for v in so.values() for f in v if f["auto"]]
    if picks:
        line += f" auto picked {'/'.join(picks)}"
    summary.append(line)
print()
print("\n".join(summary))
