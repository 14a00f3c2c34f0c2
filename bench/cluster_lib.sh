# Shared by the bench/cluster_*.sh benchmarks (sourced): the emulated cluster
# of scripts/cluster.sh under its own name, a results directory, the cluster
# taken down on exit, and one training launch under the benchmark lock.
#   . bench/cluster_lib.sh NAME      (results in /tmp/scaleout-NAME.XXXXXX)
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SCALEOUT_CLUSTER="${SCALEOUT_CLUSTER:-sobench}"
cluster="$src/scripts/cluster.sh"
out="$(mktemp -d "/tmp/scaleout-$1.XXXXXX")"
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT

# cluster_train NAME NP RANKS_PER_NODE args...: `scaleout` args over the
# cluster, JSON in $out/NAME.json, output in $out/NAME.log; exits on failure.
cluster_train() {
  local name=$1 np=$2 rpn=$3; shift 3
  flock /tmp/scaleout-bench.lock "$cluster" mpirun -np "$np" --ranks-per-node "$rpn" "$src/build/scaleout" "$@" \
    --json "$out/$name.json" >"$out/$name.log" 2>&1 ||
    { echo "$(basename "$0"): $name failed: $(tail -3 "$out/$name.log")" >&2; exit 1; }
}

# cluster_restart RATE [NODES]: the cluster brought up again with NODES (2) nodes at RATE.
cluster_restart() {
  "$cluster" down
  "$cluster" up "${2:-2}" --rate "$1" >/dev/null
}
