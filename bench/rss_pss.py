#!/usr/bin/env python3
"""Peak resident set against peak proportional set of every scaleout rank.

A rank's peak RSS (`--json` peak_rss_bytes) counts in full each page it
shares with another rank: dp's and zero1's gradient buffers are registered
shared memory that the peers read in place (hier's zero-copy reduce). The
proportional set size (Pss, /proc/PID/smaps_rollup) counts a page shared by
k processes as 1/k, so the ranks' Pss add up to the memory they really use.
This runs one launch and samples every scaleout process every 0.2 s.

  bench/rss_pss.py NP -- TRAIN-ARGS...
  e.g. bench/rss_pss.py 2 -- --model vgg16 --dataset synthetic --batch-size 2 --steps 4 \\
         --eval-every -1 --optimizer adamw --strategy dp
"""
import glob
import os
import subprocess
import sys
import time

FIELDS = ("Rss", "Pss", "Shared_Dirty", "Shared_Clean")


def sample(peak):
    for d in glob.glob("/proc/[0-9]*"):
        try:
            if open(d + "/comm").read().strip() != "scaleout":
                continue
            pk = peak.setdefault(int(d[6:]), {})
            for line in open(d + "/smaps_rollup"):
                key, _, rest = line.partition(":")
                if key in FIELDS:
                    pk[key] = max(pk.get(key, 0), int(rest.split()[0]) * 1024)
        except (OSError, ValueError, IndexError):
            pass  # the process ended between the listing and the read


def main():
    if len(sys.argv) < 3 or sys.argv[2] != "--":
        sys.exit(__doc__)
    src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cmd = [src + "/scripts/mpirun.sh", "-np", sys.argv[1], src + "/build/scaleout", "train"] + sys.argv[3:]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak = {}
    while p.poll() is None:
        sample(peak)
        time.sleep(0.2)
    if p.returncode:
        sys.exit(f"rss_pss: the launch failed ({p.returncode}): {p.stderr.read()[-400:]}")
    print("| pid | peak RSS MB | peak Pss MB | shared dirty MB |")
    print("|---|---:|---:|---:|")
    for pid, v in sorted(peak.items()):
        print(f"| {pid} | {v.get('Rss', 0) / 1e6:,.0f} | {v.get('Pss', 0) / 1e6:,.0f} | {v.get('Shared_Dirty', 0) / 1e6:,.0f} |")


if __name__ == "__main__":
    main()
