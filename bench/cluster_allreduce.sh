#!/usr/bin/env bash
# `bench allreduce` across emulated nodes of scripts/cluster.sh, one rank per
# node, at each link rate: MPI_Allreduce against `auto` (hier) with its step
# across nodes by the ring over scaleout's tcp transport (the default across hosts) and on MPI
# point-to-point (SCALEOUT_COLL_TCP=0). The two launches alternate per repeat,
# each under the benchmark lock. Prints a markdown table of medians
# (docs/PERFORMANCE.md, "Across emulated nodes"). Root only.
#   bench/cluster_allreduce.sh [REPEATS] [RATES] [SIZES] [NODES]
#                              (3, "1gbit 10gbit", 4,64K,1M,4M,16M,64M, 2)
set -euo pipefail

repeats="${1:-3}" rates="${2:-1gbit 10gbit}" sizes="${3:-4,64K,1M,4M,16M,64M}" nodes="${4:-2}"
. "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh" cluster-bench

lock=(flock /tmp/scaleout-bench.lock)
[ -x /work/bin/so-bench ] && lock=(/work/bin/so-bench) # the shared machine's gate, when there is one
[ -n "${SCALEOUT_BENCH_LOCK_HELD:-}" ] && lock=()      # the caller holds it around the whole run
for rate in $rates; do
  cluster_restart "$rate" "$nodes"
  for ((r = 1; r <= repeats; r++)); do
    for mode in tcp mpi; do # interleaved, the order alternating per repeat
      [ $((r % 2)) -eq 0 ] && mode=$([ "$mode" = tcp ] && echo mpi || echo tcp)
      algos=auto
      [ "$mode" = tcp ] && algos=MPI_Allreduce,auto # the reference once per repeat
      SCALEOUT_COLL_TCP=$([ "$mode" = tcp ] && echo auto || echo 0) "${lock[@]}" \
        "$cluster" mpirun -np "$nodes" --ranks-per-node 1 \
        "$src/build/scaleout" bench allreduce --algo "$algos" --sizes "$sizes" --check \
        --csv "$out/$rate-$mode-$r.csv" >"$out/$rate-$mode-$r.log" 2>&1 ||
        { echo "cluster_allreduce: $rate $mode run $r failed: $(tail -2 "$out/$rate-$mode-$r.log")" >&2; exit 1; }
      grep -q "steps on scaleout's tcp ring" "$out/$rate-$mode-$r.log" || [ "$mode" = mpi ] ||
        { echo "cluster_allreduce: $rate run $r: the tcp ring did not run" >&2; exit 1; }
    done
  done
done
echo "# runs in $out; $nodes nodes x 1 rank"
/usr/bin/python3 - "$out" "$nodes" <<'PY'
import csv, glob, os, statistics, sys
d, p = sys.argv[1], int(sys.argv[2])
rows = {}
for path in glob.glob(os.path.join(d, "*.csv")):
    rate, mode, _ = os.path.basename(path)[:-4].split("-")
    for row in csv.DictReader(open(path)):
        key = row["algo"] if row["algo"] == "MPI_Allreduce" else "auto-" + mode
        rows.setdefault((rate, int(row["bytes"])), {}).setdefault(key, []).append(float(row["avg_us"]))
def size(b):
    for u, s in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return "%d %s" % (b >> s, u)
    return "%d B" % b
def cell(v):
    return "%.1f (%.1f–%.1f)" % (statistics.median(v), min(v), max(v))
print("| link | size | MPI_Allreduce (µs) | auto, MPI p2p | auto, tcp ring | tcp ring vs MPI_Allreduce | link GB/s (tcp ring) | of tbf rate |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for (rate, b) in sorted(rows, key=lambda k: (float(k[0].rstrip("gbit")), k[1])):
    m = rows[(rate, b)]
    ref, tcp = statistics.median(m["MPI_Allreduce"]), statistics.median(m["auto-tcp"])
    gbs = 2 * (p - 1) / p * b / (tcp * 1e-6) / 1e9  # bytes each rank sends per allreduce (ring)
    tbf = float(rate.rstrip("gbit")) / 8
    print("| %s | %s | %s | %s | %s | %.2fx | %.3f | %.0f %% |" % (
        rate, size(b), cell(m["MPI_Allreduce"]), cell(m["auto-mpi"]), cell(m["auto-tcp"]), ref / tcp, gbs,
        100 * gbs / tbf))
PY
