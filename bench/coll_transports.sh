#!/usr/bin/env bash
# The transports side by side: allreduce, reduce-scatter and allgather by the
# ring algorithm over each of scaleout's transports (mpi: MPI point-to-point,
# shm: channels in a shared window, tcp: scaleout's authenticated sockets),
# each launch timing the MPI library's own collective (MPI_Allreduce,
# MPI_Reduce_scatter, MPI_Allgatherv) interleaved with it. One rank per vCPU,
# one host; launches repeated, transports in rotating order, each launch
# through the benchmark lock (so-bench when present). Prints a markdown table
# of medians (min-max) over launches (docs/PERFORMANCE.md, "Transports").
#   bench/coll_transports.sh BUILD_DIR [REPEATS] [SIZES] [NP]   (3, 64K,1M,16M, 2)
# MPIEXEC=mpiexec.mpich with an MPICH build dir runs it under MPICH.
set -euo pipefail
build=$(cd "${1:?usage: coll_transports.sh BUILD_DIR [REPEATS] [SIZES] [NP]}" && pwd)
repeats=${2:-3} sizes=${3:-64K,1M,16M} np=${4:-2}
src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$(mktemp -d /tmp/coll_transports.XXXXXX)
lock=(flock /tmp/scaleout-bench.lock)
[ -x /work/bin/so-bench ] && lock=(/work/bin/so-bench)
declare -A ref=([allreduce]=MPI_Allreduce [reduce-scatter]=MPI_Reduce_scatter [allgather]=MPI_Allgatherv)
tps=(mpi shm tcp)
# One launch: the ring of one collective over one transport, the library's
# collective interleaved (the reference in every launch).
launch() { # launch COLL TRANSPORT REPEAT
  bash "$src/scripts/mpirun.sh" -np "$np" "$build/scaleout" bench "$1" --transport "$2" \
    --algo "${ref[$1]},ring" --sizes "$sizes" --check --csv "$out/$1-$2-$3.csv" >"$out/$1-$2-$3.log" 2>&1 ||
    { echo "coll_transports: $1 $2 run $3 failed: $(tail -2 "$out/$1-$2-$3.log")" >&2; return 1; }
}
# One repeat (nine launches, transports in rotating order) per benchmark lock:
# short holds of the shared machine.
repeat() {
  for coll in allreduce reduce-scatter allgather; do
    for k in 0 1 2; do
      launch "$coll" "${tps[$(((k + $1) % 3))]}" "$1" || return 1
    done
  done
}
export src build np sizes out
for ((r = 1; r <= repeats; r++)); do
  "${lock[@]}" bash -c "$(declare -p ref tps); $(declare -f launch repeat); repeat $r"
done
echo "# runs in $out; np $np, $("${MPIEXEC:-mpiexec}" --version 2>&1 | grep -m1 -iE "version|open ?mpi|openrte" | tr -s " ")"
/usr/bin/python3 - "$out" <<'PY'
import csv, glob, os, statistics, sys
rows = {}
for path in glob.glob(os.path.join(sys.argv[1], "*.csv")):
    coll, tp, _ = os.path.basename(path)[:-4].rsplit("-", 2)
    for row in csv.DictReader(open(path)):
        key = "lib" if row["algo"].startswith("MPI_") else tp
        rows.setdefault((coll, int(row["bytes"])), {}).setdefault(key, []).append(float(row["avg_us"]))
def size(b):
    for u, s in (("MiB", 20), ("KiB", 10)):
        if b >= 1 << s and b % (1 << s) == 0:
            return "%d %s" % (b >> s, u)
    return "%d B" % b
def cell(v):
    return "%.1f (%.1f–%.1f)" % (statistics.median(v), min(v), max(v))
order = {"allreduce": 0, "reduce-scatter": 1, "allgather": 2}
print("| collective | size | MPI library (µs) | ring over mpi | ring over shm | ring over tcp | best vs library |")
print("|---|---:|---:|---:|---:|---:|---:|")
for (coll, b) in sorted(rows, key=lambda k: (order[k[0]], k[1])):
    m = rows[(coll, b)]
    lib = statistics.median(m["lib"])
    best = min(("mpi", "shm", "tcp"), key=lambda t: statistics.median(m[t]))
    print("| %s | %s | %s | %s | %s | %s | %.2fx (%s) |" % (coll, size(b), cell(m["lib"]), cell(m["mpi"]),
          cell(m["shm"]), cell(m["tcp"]), lib / statistics.median(m[best]), best))
PY
