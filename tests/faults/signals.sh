#!/usr/bin/env bash
# Signals at every phase of a run (src/job/signals.c, docs/RELIABILITY.md):
#  - during set-up (the test hook SCALEOUT_JOB_TEST_SETUP_SLEEP_MS holds every
#    rank just before the checkpoint restore): SIGTERM or SIGINT ends the
#    process within a second, one line, status 128 + signo; under mpirun a
#    signal to one rank ends the whole job
#  - during training: the first SIGTERM stops after a step (exit 75); a
#    second one ends the process at once (steps made slow by the profiler's
#    test hook SCALEOUT_PROF_TEST_SLEEP)
#  - `ckpt verify` (held by SCALEOUT_CKPT_TEST_DELAY_MS): one line, 143
# Usage: signals.sh path/to/scaleout (a build with -DSCALEOUT_TEST_HOOKS=ON)
. "$(dirname "$0")/lib.sh" "$@"
[ "${SCALEOUT_TEST_HOOKS:-1}" = 1 ] || { echo "SKIP: needs a build with SCALEOUT_TEST_HOOKS=ON"; exit 77; }

small=(--model lenet5 --dataset synthetic --batch-size 8 --synthetic-samples 64 --progress none --eval-every -1)
setup_sleep=(env SCALEOUT_JOB_TEST_SETUP_SLEEP_MS=30000)

# wait_asleep: until every rank's main thread sleeps in a test hook (the
# set-up hold, or the profiler's slow step), so the signal lands in the phase
# the case is about however loaded the machine is (at most 15 s).
wait_asleep() {
  local p all w
  for _ in $(seq 150); do
    all=1
    find_ranks
    for p in "${ranks[@]}"; do
      w=
      { read -r w <"/proc/$p/wchan"; } 2>/dev/null
      [ "$w" = hrtimer_nanosleep ] || all=0
    done
    [ $all = 1 ] && [ ${#ranks[@]} -gt 0 ] && return 0
    nap 0.1
  done
  return 1
}

# During set-up: SIGTERM, then SIGINT (a shell without job control starts
# background commands with SIGINT ignored, which scaleout respects: env
# --default-signal gives it back its default).
fault_start setup-term "${setup_sleep[@]}" "$bin" train "${small[@]}" --steps 2
wait_ranks 1 10 && wait_asleep
signal_case TERM $(case_ranks)
fault_wait 20
expect_status setup-term 143
expect_line setup-term "^scaleout train: SIGTERM during set-up: ending now \(exit 143\)$"
expect_after_signal setup-term 1.5
expect_clean setup-term

fault_start setup-int env --default-signal=INT "${setup_sleep[@]}" "$bin" train "${small[@]}" --steps 2
wait_ranks 1 10 && wait_asleep
signal_case INT $(case_ranks)
fault_wait 20
expect_status setup-int 130
expect_line setup-int "^scaleout train: SIGINT during set-up: ending now \(exit 130\)$"
expect_after_signal setup-int 1.5
expect_clean setup-int

# 2 ranks held in set-up, SIGTERM to one of them: the launcher ends the job.
fault_start setup-mpi "${setup_sleep[@]}" "$mpirun" -np 2 "$bin" train "${small[@]}" --steps 2
wait_ranks 2 10 && wait_asleep
signal_case TERM $(case_ranks | awk '{print $1}')
fault_wait 30
[ "$st" != 0 ] && [ "$st" != 124 ] && ok "setup-mpi: the job ended, exit $st" || bad "setup-mpi: exit $st"
expect_msg setup-mpi "scaleout train: SIGTERM during set-up: ending now \(exit 143\)"
expect_after_signal setup-mpi 5
expect_clean setup-mpi

# taken PID: the SIGTERM sent to PID is no longer pending (its signal thread took it).
taken() {
  for _ in $(seq 200); do
    local p
    p=$(sed -n 's/^ShdPnd:[[:space:]]*//p' "/proc/$1/status" 2>/dev/null) || return 0
    [ -z "$p" ] || (( ! ((16#$p >> 14) & 1) )) && return 0
    sleep 0.005
  done
}

# Training with 1.5 s steps: the first SIGTERM stops after the step (75);
# a second one, sent as soon as the first was taken, ends the process at once.
slow=(env SCALEOUT_PROF_TEST_SLEEP=0:1500 "$bin" train "${small[@]}" --steps 50 --profile)
fault_start first-term "${slow[@]}" "$tmp/prof1"
wait_ranks 1 10 && wait_asleep
signal_case TERM $(case_ranks)
fault_wait 30
expect_status first-term 75
expect_line first-term "^scaleout train: SIGTERM: stopped after step [0-9]+; nothing saved"
expect_after_signal first-term 4
expect_clean first-term

fault_start second-term "${slow[@]}" "$tmp/prof2"
wait_ranks 1 10 && wait_asleep
r=$(case_ranks)
kill -TERM $r
taken $r
signal_case TERM $r
fault_wait 30
expect_status second-term 143
expect_line second-term "^scaleout train: SIGTERM a second time: ending now \(exit 143\)$"
expect_after_signal second-term 1.5
expect_clean second-term

# A command that is not training: ckpt verify held after reading a manifest.
"$bin" train "${small[@]}" --steps 2 --ckpt-every 2 --ckpt-dir "$tmp/ck" >/dev/null 2>&1 || bad "setup: train"
fault_start verify-term env SCALEOUT_CKPT_TEST_DELAY_MS=30000 "$bin" ckpt verify "$tmp/ck"
wait_ranks 1 10 && wait_asleep
signal_case TERM $(case_ranks)
fault_wait 20
expect_status verify-term 143
expect_line verify-term "^scaleout ckpt: SIGTERM: ending now \(exit 143\)$"
expect_after_signal verify-term 1.5
expect_clean verify-term

fault_finish
