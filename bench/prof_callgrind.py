#!/usr/bin/env python3
"""Profiler overhead in instructions (docs/PERFORMANCE.md, "Profiler overhead",
instructions per step): reads callgrind files DIR/cg.CFG.3 and DIR/cg.CFG.4 (the
same `scaleout train` run for 3 and 4 steps, CFG = off and profile details)
and prints Ir per step = Ir(4) - Ir(3) without the data loader's prefetch
thread (how many batches it prefetches before the run ends depends on thread
scheduling), the difference to off, and where it goes per function: the
recorder during the step vs writing the timeline/profile at the end.
Usage: prof_callgrind.py DIR [CFG...]   (default: off step block layer)"""
import re
import subprocess
import sys

WRITE = ("stdio-common", "libio", "mpn", "strchrnul", "so_prof_write", "escaped", "lround", "_itoa", "strlen",
         "mempcpy", "prof_io_write", "printf", "./stdlib/")


def annotate(path, inclusive=False):
    out = subprocess.run(["callgrind_annotate", "--inclusive=" + ("yes" if inclusive else "no"), "--threshold=100", "--auto=no",
                          path], capture_output=True, text=True, check=True, cwd="/").stdout
    total, funcs = 0, {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+)\s+(\(\s*[\d.]+%\)\s+)?(.*)", line)
        if not m:
            continue
        ir, rest = int(m.group(1).replace(",", "")), m.group(3)
        if rest.startswith("PROGRAM TOTALS"):
            total = ir
        elif re.match(r"^\S+:\S+( \[.*\])?$", rest):  # not the call-tree lines ("=> f (3x)")
            f, fn = rest.split(" [")[0].rsplit(":", 1)
            key = (re.sub(r"^.*?\bsrc/", "", f), fn)
            funcs[key] = funcs.get(key, 0) + ir
    return total, funcs


def main():
    d = sys.argv[1]
    cfgs = sys.argv[2:] or ["off", "step", "block", "layer"]
    runs = {}
    for c in cfgs:
        r = []
        for n in (3, 4):
            total, self_ir = annotate(f"{d}/cg.{c}.{n}")
            _, incl = annotate(f"{d}/cg.{c}.{n}", inclusive=True)
            r.append((total - incl.get(("data/loader.c", "producer_main"), 0), self_ir))
        runs[c] = r
    off = runs[cfgs[0]]
    base = off[1][0] - off[0][0]
    print(f"{'config':8} {'Ir/step':>13} {'vs ' + cfgs[0]:>11} {'%':>8} {'during step':>12} {'writing':>10}")
    for c in cfgs:
        (t3, f3), (t4, f4) = runs[c]
        per = t4 - t3
        keys = set(f3) | set(f4) | set(off[0][1]) | set(off[1][1])
        delta = {k: (f4.get(k, 0) - f3.get(k, 0)) - (off[1][1].get(k, 0) - off[0][1].get(k, 0)) for k in keys}
        writing = sum(v for k, v in delta.items() if any(w in k[0] + ":" + k[1] for w in WRITE))
        during = sum(v for k, v in delta.items() if not any(w in k[0] + ":" + k[1] for w in WRITE)
                     and "memcpy_avx" not in k[1])
        print(f"{c:8} {per:>13,} {per - base:>+11,} {100 * (per - base) / base:>+7.3f}% {during:>+12,} {writing:>+10,}")
        rec = sorted(((v, k) for k, v in delta.items() if k[0].startswith(("prof/", "cli/prof")) and v), reverse=True)
        for v, k in rec[:6]:
            print(f"{'':10}{v:>+8,}  {k[1]} ({k[0]})")


main()
