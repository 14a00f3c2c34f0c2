#!/usr/bin/env bash
# `bench allreduce` (MPI_Allreduce vs auto) across 2 emulated nodes of
# scripts/cluster.sh, one rank per node, at each link rate, with the waits
# yielding (the default) and spinning (SCALEOUT_COLL_YIELD=0, Open MPI's
# mpi_yield_when_idle 0); repeats interleaved, each launch under the benchmark
# lock. Prints a markdown table of medians (docs/PERFORMANCE.md). Root only.
#   bench/cluster_allreduce.sh [REPEATS] [RATES] [SIZES]   (3, "1gbit 10gbit", 4,64K,1M,16M)
set -euo pipefail

repeats="${1:-3}" rates="${2:-1gbit 10gbit}" sizes="${3:-4,64K,1M,16M}"
. "$(dirname "${BASH_SOURCE[0]}")/cluster_lib.sh" cluster-bench

for rate in $rates; do
  cluster_restart "$rate"
  for ((r = 1; r <= repeats; r++)); do
    for mode in yield spin; do # interleaved, the order alternating per repeat
      [ $((r % 2)) -eq 0 ] && mode=$([ "$mode" = yield ] && echo spin || echo yield)
      env=()
      [ "$mode" = spin ] && env=(SCALEOUT_COLL_YIELD=0 OMPI_MCA_mpi_yield_when_idle=0)
      env "${env[@]}" flock /tmp/scaleout-bench.lock "$cluster" mpirun -np 2 --ranks-per-node 1 \
        "$src/build/scaleout" bench allreduce --algo MPI_Allreduce,auto --sizes "$sizes" \
        --csv "$out/$rate-$mode-$r.csv" >"$out/$rate-$mode-$r.log" 2>&1 ||
        { echo "cluster_allreduce: $rate $mode run $r failed: $(tail -2 "$out/$rate-$mode-$r.log")" >&2; exit 1; }
    done
  done
done
echo "# runs in $out"
/usr/bin/python3 - "$out" <<'PY'
import csv, glob, os, statistics, sys
d = sys.argv[1]
rows = {}
for p in glob.glob(os.path.join(d, "*.csv")):
    rate, mode, _ = os.path.basename(p)[:-4].split("-")
    for row in csv.DictReader(open(p)):
        rows.setdefault((rate, int(row["bytes"])), {}).setdefault((row["algo"], mode), []).append(float(row["avg_us"]))
def size(b):
    for u, s in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return "%d %s" % (b >> s, u)
    return "%d B" % b
print("| link | size | MPI_Allreduce spin (µs) | MPI_Allreduce yield | auto spin | auto yield | auto vs MPI (yield) | link GB/s (auto yield) | of tbf rate |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for (rate, b) in sorted(rows, key=lambda k: (float(k[0].rstrip("gbit")), k[1])):
    m = {k: statistics.median(v) for k, v in rows[(rate, b)].items()}
    ay, my = m[("auto", "yield")], m[("MPI_Allreduce", "yield")]
    gbs = b / (ay * 1e-6) / 1e9  # 2 ranks: each sends n bytes per allreduce (ring / halving)
    tbf = float(rate.rstrip("gbit")) / 8
    print("| %s | %s | %.1f | %.1f | %.1f | %.1f | %.2fx | %.3f | %.0f %% |" % (
        rate, size(b), m[("MPI_Allreduce", "spin")], my, m[("auto", "spin")], ay, my / ay, gbs, 100 * gbs / tbf))
PY
