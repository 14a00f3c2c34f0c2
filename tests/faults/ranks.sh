#!/usr/bin/env bash
# A rank killed (kill -9) or frozen (SIGSTOP) in the middle of training, in
# data-parallel, pipeline and hybrid (2 stages x 2 replicas) runs over shared
# memory: the job ends within seconds (a frozen rank at --comm-timeout) with
# a non-zero status, the message of a frozen rank names what timed out (no
# checkpoint in a run without checkpoints), and nothing is left behind. The
# same across emulated nodes, over scaleout's TCP transport, is
# tests/faults/tcp.sh's (with the strangers on that transport).
# Usage: ranks.sh path/to/scaleout
. "$(dirname "$0")/lib.sh" "$@"

long=(train --model lenet5 --dataset synthetic --batch-size 8 --synthetic-samples 64 --progress none
      --eval-every -1 --steps 1000000 --stall-warning 1 --comm-timeout 2)
pipe=(--pipeline-stages 2 --microbatches 2)

# rank_case NAME SIG NP [LAUNCHER...] -- ARGS...: NP ranks train; once they
# have trained a second, SIG goes to the highest-numbered rank's process.
rank_case() {
  local name=$1 sig=$2 np=$3 victim
  shift 3
  fault_start "$name" "$@"
  wait_ranks "$np" 20 && nap 1
  find_ranks
  victim=
  [ ${#ranks[@]} -gt 0 ] && victim=${ranks[-1]}
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

fault_finish
