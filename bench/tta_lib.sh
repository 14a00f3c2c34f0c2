# shellcheck shell=bash
# Shared by bench/compress_tta.sh and bench/sync_tta.sh (sourced): a results
# directory that several invocations append to, the link (shared memory or an
# emulated cluster of scripts/cluster.sh at a tc tbf rate), and one launch of
# scaleout or of a PyTorch peer on it. Split a matrix into short invocations
# with the same OUT, then print the medians with `--table OUT`.
#   . bench/tta_lib.sh CLUSTER_NAME RESULTS_PREFIX
# Environment: OUT (results directory, made if missing; default a new
# /tmp/scaleout-PREFIX.XXXXXX), NP (ranks, 2), RPN (ranks per emulated node, 1),
# SEEDS (default 42, 43, ... one per repeat).
src="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export SCALEOUT_CLUSTER="${SCALEOUT_CLUSTER:-$1}"
cluster="$src/scripts/cluster.sh"
np="${NP:-2}" rpn="${RPN:-1}"
out="${OUT:-$(mktemp -d "/tmp/scaleout-$2.XXXXXX")}"
mkdir -p "$out"
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT

# tta_seeds REPEATS: the seeds to run, $SEEDS or 42 .. 42 + REPEATS - 1.
tta_seeds() { if [ -n "${SEEDS:-}" ]; then echo "$SEEDS"; else seq 42 $((41 + $1)); fi; }

# tta_link_up LINK / tta_link_down LINK: the emulated nodes for a rate (none for shm),
# under /tmp/scaleout-cluster.lock while they are up.
tta_link_up() {
  [ "$1" != shm ] || return 0
  exec 9>/tmp/scaleout-cluster.lock
  flock 9
  "$cluster" down >/dev/null 2>&1 || true
  "$cluster" up $(((np + rpn - 1) / rpn)) --rate "$1" >/dev/null
}
tta_link_down() {
  [ "$1" != shm ] || return 0
  "$cluster" down >/dev/null
  flock -u 9
}

# tta_done NAME: the run is in $out already (a repeated invocation skips it).
tta_done() { [ -s "$out/$1.json" ]; }

# tta_scaleout LINK NAME ARGS...: `scaleout ARGS --json $out/NAME.json` on LINK.
# A failed run is reported and left out (the matrix goes on).
tta_scaleout() {
  local link=$1 name=$2 launch=("$src/scripts/mpirun.sh" -np "$np")
  shift 2
  [ "$link" = shm ] || launch=("$cluster" mpirun -np "$np" --ranks-per-node "$rpn")
  timeout 900 "${launch[@]}" "$src/build/scaleout" "$@" --json "$out/$name.json.tmp" >"$out/$name.log" 2>&1 &&
    mv "$out/$name.json.tmp" "$out/$name.json" ||
    echo "$(basename "$0"): $name failed: $(tail -3 "$out/$name.log")" >&2
}

# tta_torch LINK NAME ARGS...: bench/torch_ddp_tta.py (or $TTA_PEER) ARGS on LINK, its JSON line
# in $out/NAME.json. On shm the script spawns its NP ranks; across the nodes
# each rank is one process in its node's namespace, gloo on eth0.
tta_torch() {
  local link=$1 name=$2 port=$((29500 + RANDOM % 1000)) pids=() r ok=1
  shift 2
  local peer=("${TTA_PEER:-$src/bench/torch_ddp_tta.py}" --np "$np" "$@") # TTA_PEER: bench/torch_gpt2_tta.py
  if [ "$link" = shm ]; then
    timeout 600 /usr/bin/python3 "${peer[@]}" >"$out/$name.log" 2>&1 || ok=0
  else
    for ((r = 0; r < np; r++)); do
      GLOO_SOCKET_IFNAME=eth0 timeout 600 ip netns exec "$SCALEOUT_CLUSTER-node$((r / rpn + 1))" \
        /usr/bin/python3 "${peer[@]}" --rank $r --master 10.77.0.1:$port >"$out/$name.r$r.log" 2>&1 &
      pids+=($!)
    done
    # Rank 0 holds the result; a rank that lingers 30 s after it is ended.
    wait "${pids[0]}" || ok=0
    for ((r = 0; r < 30; r++)); do kill -0 "${pids[@]:1}" 2>/dev/null || break; sleep 1; done
    kill "${pids[@]:1}" 2>/dev/null || true
    for r in "${pids[@]:1}"; do wait "$r" || true; done
    cp "$out/$name.r0.log" "$out/$name.log"
  fi
  if [ $ok = 1 ] && grep -q "^{" "$out/$name.log"; then
    grep "^{" "$out/$name.log" | tail -1 >"$out/$name.json"
  else
    echo "$(basename "$0"): $name failed: $(tail -n 3 "$out/$name"*.log)" >&2
  fi
}

# A method's name in the matrices: a --compress method, or a --sync one (sync,
# local:H, local:H@S for post-local SGD from step S, diloco:H, gossip:*).
# tta_method_flags M: scaleout's flags; tta_peer_flags M: bench/torch_ddp_tta.py's
# (--hook for compression, --local H[:S] for local SGD); tta_tag M: M in a file name.
tta_method_flags() {
  case "$1" in
    local:*@*) local h=${1%@*}; echo "--sync $h --local-after ${1#*@}" ;;
    sync | local:* | diloco:* | gossip:*) echo "--sync $1" ;;
    *) echo "--compress $1" ;;
  esac
}
tta_peer_flags() {
  case "$1" in
    sync) echo "--hook none" ;;
    local:*) local h=${1#local:}; echo "--local ${h/@/:}" ;;
    *) echo "--hook $1" ;;
  esac
}
tta_tag() { local t=${1//:/_}; echo "${t//@/-after}"; }
