#!/usr/bin/env bash
# A rank killed (kill -9) or frozen (SIGSTOP) in the middle of training, in
# data-parallel, pipeline and hybrid (2 stages x 2 replicas) runs over shared
# memory, and across 2 emulated nodes (scaleout's TCP transport between them;
# strangers on that transport are tests/faults/tcp.sh's): the job ends within
# seconds (a frozen rank at --comm-timeout) with a non-zero status, the
# message of a frozen rank names what timed out (no checkpoint in a run
# without checkpoints), and nothing is left behind.
# Usage: ranks.sh path/to/scaleout
. "$(dirname "$0")/lib.sh" "$@"

long=(train --model lenet5 --dataset synthetic --batch-size 8 --synthetic-samples 64 --progress none
      --eval-every -1 --steps 1000000 --stall-warning 1 --comm-timeout 2)
pipe=(--pipeline-stages 2 --microbatches 2)

# wait_ranks N: until N processes named scaleout run in the case (20 s at most).
wait_ranks() {
  for _ in $(seq 200); do
    [ "$(case_ranks | wc -w)" -ge "$1" ] && return 0
    sleep 0.1
  done
  return 1
}

# rank_case NAME SIG NP [LAUNCHER...] -- ARGS...: NP ranks train; once they
# have trained a second, SIG goes to the highest-numbered rank's process.
rank_case() {
  local name=$1 sig=$2 np=$3 victim
  shift 3
  fault_start "$name" "$@"
  wait_ranks "$np" && sleep 1
  victim=$(case_ranks | awk '{print $NF}')
  signal_case "$sig" "$victim"
  fault_wait 30
  [ "$st" != 0 ] && [ "$st" != 124 ] && ok "$name: the job ended, exit $st" || bad "$name: exit $st"
  if [ "$sig" = STOP ]; then
    expect_msg "$name" "timed out after"
    grep -q "checkpoint" "$err" && bad "$name: a run without checkpoints blames a checkpoint: $(grep checkpoint "$err" | head -1)" ||
      ok "$name: no checkpoint named"
    expect_after_signal "$name" 8 # --comm-timeout 2, then the abort
  else
    expect_after_signal "$name" 6
  fi
  expect_clean "$name"
}

rank_case dp-kill KILL 2 "$mpirun" -np 2 "$bin" "${long[@]}"
rank_case dp-stop STOP 2 "$mpirun" -np 2 "$bin" "${long[@]}"
rank_case pipe-kill KILL 2 "$mpirun" -np 2 "$bin" "${long[@]}" "${pipe[@]}"
rank_case pipe-stop STOP 2 "$mpirun" -np 2 "$bin" "${long[@]}" "${pipe[@]}"
rank_case hybrid-kill KILL 4 "$mpirun" -np 4 "$bin" "${long[@]}" "${pipe[@]}"
rank_case hybrid-stop STOP 4 "$mpirun" -np 4 "$bin" "${long[@]}" "${pipe[@]}"

# Across 2 emulated nodes (scripts/cluster.sh: network namespaces, root only),
# one rank per node: the gradients cross over scaleout's TCP ring.
cluster=$src/scripts/cluster.sh
if [ "$(id -u)" -ne 0 ] || ! ip netns add "$SCALEOUT_CLUSTER-probe" 2>/dev/null; then
  echo "note: the emulated-node cases need root and network namespaces: skipped"
else
  ip netns del "$SCALEOUT_CLUSTER-probe"
  exec 9>/tmp/scaleout-cluster.lock
  flock -w 120 9 || echo "note: /tmp/scaleout-cluster.lock still held after 120 s: going on"
  trap '"$cluster" down >/dev/null 2>&1; fault_cleanup' EXIT
  if "$cluster" up 2 >"$tmp/cluster.log" 2>&1; then
    cluster_up=1
    rank_case nodes-kill KILL 2 "$cluster" mpirun -np 2 --ranks-per-node 1 "$bin" "${long[@]}"
    rank_case nodes-stop STOP 2 "$cluster" mpirun -np 2 --ranks-per-node 1 "$bin" "${long[@]}"
  else
    bad "cluster.sh up 2: $(cat "$tmp/cluster.log")"
  fi
  "$cluster" down >/dev/null 2>&1
  cluster_up=0
  flock -u 9
  [ -z "$(ip netns list | grep "^$SCALEOUT_CLUSTER-")" ] && ok "cluster down: no namespace left" ||
    bad "namespaces left: $(ip netns list | grep "^$SCALEOUT_CLUSTER-")"
fi

fault_finish
