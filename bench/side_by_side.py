#!/usr/bin/python3
"""Two independent one-process `scaleout train` runs at the same time, pinned
to cores 0 and 1: the sum of their images/sec is what two ranks reach on
this machine with nothing exchanged between them (no gradients, no
pipeline messages). It includes what the two do to each other through the
shared L3, memory and host, so it is the ceiling a 2-rank run is measured
against beside 2 x one process alone (bench/dp_scaling.py, bench/pipeline.py).
"""
import json
import subprocess
import tempfile


def at_once(binary, train_args):
    """Images/sec summed over the two runs; train_args follow `train`."""
    files = [tempfile.NamedTemporaryFile(suffix=".json") for _ in range(2)]
    procs = [subprocess.Popen(["taskset", "-c", str(core), binary, "train"] + train_args +
                              ["--eval-every", "-1", "--progress", "none", "--json", f.name],
                              stdout=subprocess.DEVNULL) for core, f in enumerate(files)]
    for p in procs:
        if p.wait() != 0:
            raise SystemExit("concurrent one-process run failed")
    total = sum(json.load(open(f.name))["images_per_sec"] for f in files)
    for f in files:
        f.close()
    return total
