#!/usr/bin/env bash
# Slurm for real (issue 24), on a private one-node Slurm (scripts/slurm-local.sh)
# with its own directory and free ports, so a Slurm already running is untouched:
#  - start refuses taken ports (exit 2, nothing left behind)
#  - srun -n 2 scaleout train: rank and size from Slurm's PMI, no mpirun
#  - scaleout bench scaling --launcher srun
#  - examples/slurm/train.sbatch, its ranks sent SIGTERM (what --signal=TERM@
#    does before the time limit): exit 75, the job requeues itself, resumes
#    from that step and completes
#  - the same job scancel'ed: the checkpoint is intact, the job is not
#    requeued, and submitting it again resumes from the checkpoint
#  - the same job requeued by `scontrol requeue`: the script says Slurm
#    requeued it, and the next run resumes and completes
#  - the same job with its time limit cut to a minute once it trains: it
#    ends with the checkpoint of the step it stopped after intact, and a new
#    submission resumes from it
#  - a PMI mismatch (N singletons instead of one job) is refused, exit 2
# Skips (exit 77) naming what is missing when Slurm cannot be started here.
# Usage: slurm.sh path/to/scaleout
set -u
bin=$(realpath "$1")
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
skip() { echo "slurm.sh: SKIP: $*"; exit 77; }

# Needs no Slurm: a process that srun says is one of 2 tasks but that MPI
# started alone (srun's PMI not the MPI library's) stops: one line, exit 2.
out=$(SLURM_STEP_NUM_TASKS=2 timeout 60 "$bin" train --model lenet5 --dataset synthetic --steps 2 --progress none 2>&1)
st=$?
[ $st -eq 2 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "one of 2 processes" <<<"$out" ||
  { echo "FAIL: PMI mismatch: exit $st: $out"; exit 1; }
echo "ok: PMI mismatch (N singletons) refused: exit 2, one line"

missing=()
for t in munged mungekey slurmctld slurmd srun sbatch scancel scontrol sinfo squeue; do
  command -v "$t" >/dev/null || missing+=("$t")
done
[ ${#missing[@]} -eq 0 ] ||
  skip "missing ${missing[*]} (Debian's slurm-wlm: make deps SLURM=1; make test installs it)"
[ "$(id -u)" -eq 0 ] || skip "slurmd must run as root to start jobs as the user (run as root, as CI does)"

# Open MPI speaks PMIx (the local Slurm's MpiDefault), MPICH only PMI-2:
# srun reads SLURM_MPI_TYPE as --mpi, in the job scripts too.
if ldd "$bin" 2>/dev/null | grep -q libmpich; then export SLURM_MPI_TYPE=pmi2; fi

tmp=$(mktemp -d /tmp/scaleout-slurm-test.XXXXXX)
export SLURM_LOCAL_DIR=$tmp/slurm SLURM_LOCAL_KILLWAIT=10 SLURM_CONF=$tmp/slurm/slurm.conf
# Two free ports, chosen by the kernel; a race with another program is
# reported by start as "port ... is taken".
SLURM_LOCAL_PORTS=$(python3 -c 'import socket
s=[socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
export SLURM_LOCAL_PORTS
cleanup() {
  [ -s "$SLURM_CONF" ] && scancel --quiet $(squeue -h -o %i 2>/dev/null) 2>/dev/null
  "$src/scripts/slurm-local.sh" stop >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

"$src/scripts/slurm-local.sh" start >"$tmp/start.log" 2>&1 ||
  skip "scripts/slurm-local.sh start failed: $(tail -2 "$tmp/start.log")"
ok "local Slurm up: $(head -1 "$tmp/start.log")"

# A second Slurm on the same ports: one line, exit 2, nothing made.
SLURM_LOCAL_DIR=$tmp/second "$src/scripts/slurm-local.sh" start >"$tmp/second.log" 2>&1
st=$?
[ $st -eq 2 ] && [ "$(wc -l <"$tmp/second.log")" -eq 1 ] && [ ! -e "$tmp/second" ] &&
  ok "start on taken ports: exit 2, $(cat "$tmp/second.log")" || bad "start on taken ports: exit $st: $(cat "$tmp/second.log")"

# srun -n 2: two ranks from Slurm's PMI (no mpirun in sight).
cd "$tmp" || exit 1
timeout 60 srun -n 2 "$bin" train --model lenet5 --dataset synthetic --steps 20 --progress none --json "$tmp/srun.json" \
  >"$tmp/srun.log" 2>&1
st=$?
grep -q '"world_size": 2' "$tmp/srun.json" 2>/dev/null && [ $st -eq 0 ] &&
  ok "srun -n 2 train: world size 2 ($(grep -o 'trained.*images/sec' "$tmp/srun.log"))" ||
  bad "srun -n 2 train: exit $st: $(tail -3 "$tmp/srun.log")"

# bench scaling --launcher srun: the 2-process point really ran 2 ranks.
timeout 90 "$bin" bench scaling --launcher srun --model lenet5 --np 1,2 --repeat 1 --num-warmup-batches 2 \
  --num-batches 10 --keep "$tmp/scaling" --json "$tmp/scaling.json" >"$tmp/scaling.log" 2>&1
st=$?
[ $st -eq 0 ] && grep -q '"launcher": "srun"' "$tmp/scaling.json" && grep -lq '"world_size": 2' "$tmp"/scaling/*.json &&
  ok "bench scaling --launcher srun: $(grep -A3 '^processes' "$tmp/scaling.log" | tail -1 | tr -s ' ')" ||
  bad "bench scaling --launcher srun: exit $st: $(tail -3 "$tmp/scaling.log")"

# The job script, small: 2000 LeNet-5 steps (~8 s: the signal must land
# before the end also when the machine is loaded), a checkpoint every 50.
steps=2000
export SCALEOUT=$bin CKPT_EVERY=50 TRAIN_ARGS="--model lenet5 --dataset synthetic --steps $steps --eval-every -1"
state() { scontrol show job -o "$1" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p'; }
wait_state() { # wait_state JOB SECONDS STATE...: 0 once the job is in one of them
  local j=$1 n=$(($2 * 10)) s
  shift 2
  for _ in $(seq "$n"); do
    s=$(state "$j")
    for w in "$@"; do [ "$s" = "$w" ] && return 0; done
    sleep 0.1
  done
  return 1
}
wait_ckpt() { # wait_ckpt DIR [SECONDS]: the first node-local checkpoint is complete
  for _ in $(seq $((${2:-30} * 10))); do compgen -G "$1/node0/ckpt-*/MANIFEST" >/dev/null && return 0; sleep 0.1; done
  return 1
}
submit() { # submit NAME: the job id
  CKPT_DIR=$tmp/$1/shared CKPT_LOCAL=$tmp/$1/local sbatch --parsable --job-name "$1" -o "$tmp/$1.out" \
    "$src/examples/slurm/train.sbatch"
}
stop_step() { sed -n 's/.*stopped after step \([0-9]*\).*/\1/p' "$1" | tail -1; }

# 1. The ranks signalled: exit 75, requeued by the script, resumed, completed.
job=$(submit requeue)
wait_ckpt "$tmp/requeue/local" && scancel --signal=TERM "$job"
wait_state "$job" 60 COMPLETED FAILED CANCELLED TIMEOUT
step=$(stop_step "$tmp/requeue.out")
if [ "$(state "$job")" = COMPLETED ] && [ -n "$step" ] && grep -q "Exited with exit code 75" "$tmp/requeue.out" &&
   grep -q "resuming from the checkpoint at step $step" "$tmp/requeue.out" &&
   grep -q "trained $((steps - step)) steps" "$tmp/requeue.out"; then
  ok "sbatch, ranks signalled after step $step: exit 75, requeued, resumed at $step, completed"
else
  bad "sbatch requeue (state $(state "$job")): $(cat "$tmp/requeue.out")"
fi

# 2. scancel: an intact checkpoint, no requeue; sbatch again resumes from it.
job=$(submit cancel)
wait_ckpt "$tmp/cancel/local" && scancel "$job"
wait_state "$job" 30 CANCELLED COMPLETED FAILED
sleep 1 # the batch script's last lines after the step ended
step=$(stop_step "$tmp/cancel.out")
"$bin" ckpt verify "$tmp/cancel/shared" >"$tmp/verify.log" 2>&1
if [ -n "$step" ] && grep -qE "ckpt-0*$step .* OK" "$tmp/verify.log" && [ "$(state "$job")" = CANCELLED ] &&
   ! grep -q requeueing "$tmp/cancel.out"; then
  ok "scancel after step $step: checkpoint intact on the shared level, job stays cancelled"
else
  bad "scancel (state $(state "$job")): $(tail -4 "$tmp/cancel.out"); verify: $(cat "$tmp/verify.log")"
fi
rm -rf "$tmp/cancel/local" # as if the job came back on another node
job=$(submit cancel)
wait_state "$job" 60 COMPLETED FAILED CANCELLED TIMEOUT
grep -q "resuming from the checkpoint at step ${step:-X}" "$tmp/cancel.out" && [ "$(state "$job")" = COMPLETED ] &&
  ok "sbatch again after scancel: resumed at step $step from the shared level, completed" ||
  bad "sbatch after scancel (state $(state "$job")): $(tail -4 "$tmp/cancel.out")"

# 2b. scontrol requeue (what an admin or preemption does): the script says
# Slurm requeued it (not "submit again"), and the requeued run resumes.
job=$(submit requeue2)
wait_ckpt "$tmp/requeue2/local" && scontrol requeue "$job"
for _ in $(seq 600); do grep -q "resuming from the checkpoint" "$tmp/requeue2.out" 2>/dev/null && break; sleep 0.1; done
wait_state "$job" 60 COMPLETED FAILED CANCELLED TIMEOUT
step=$(stop_step "$tmp/requeue2.out")
if [ "$(state "$job")" = COMPLETED ] && grep -q "Slurm requeued job $job; it resumes" "$tmp/requeue2.out" &&
   ! grep -q "submitted again" "$tmp/requeue2.out" && grep -q "resuming from the checkpoint at step ${step:-X}" "$tmp/requeue2.out"; then
  ok "scontrol requeue after step $step: the script says Slurm requeued it, the job resumed at $step and completed"
else
  bad "scontrol requeue (state $(state "$job")): $(grep -v 'step [0-9]*/' "$tmp/requeue2.out" | tail -8)"
fi

# 3. The time limit: Slurm signals the step before it (the script's
# --signal=TERM@120), then SIGTERM and SIGKILL after KillWait at the limit;
# the ranks checkpoint the step they stop after, and a new submission resumes
# from it. The controller checks limits every 30 s and may send the warning
# up to a check early, so a job submitted with a 1-minute limit can be
# signalled within its first second: during the ranks' set-up, which ends them
# without a checkpoint (nothing to save yet; src/job/signals.c). So the job
# starts with a long limit and, once its first checkpoint shows it training,
# is cut to one minute (as an administrator may): the warning then comes at
# the next check, the limit itself 60-90 s after the start.
TRAIN_ARGS="--model lenet5 --dataset synthetic --steps 1000000 --eval-every -1"
# --no-requeue: whether the ranks' exit 75 reaches the script before its own
# SIGTERM is a race (then it would requeue, docs/SLURM.md); here it must not.
job=$(CKPT_DIR=$tmp/limit/shared CKPT_LOCAL=$tmp/limit/local sbatch --parsable --job-name limit --time=10:00 \
  --no-requeue -o "$tmp/limit.out" "$src/examples/slurm/train.sbatch")
wait_ckpt "$tmp/limit/local" 90 && scontrol update JobId="$job" TimeLimit=1:00
wait_state "$job" 150 TIMEOUT COMPLETED FAILED CANCELLED
for _ in $(seq 50); do [ -n "$(stop_step "$tmp/limit.out")" ] && break; sleep 0.1; done
step=$(stop_step "$tmp/limit.out")
st=$(state "$job")
"$bin" ckpt verify "$tmp/limit/shared" >"$tmp/limit.verify" 2>&1
# Slurm signals the step at the limit; the script's requeue is refused
# (--no-requeue), so the job ends FAILED (exit 75) or TIMEOUT.
if { [ "$st" = TIMEOUT ] || [ "$st" = FAILED ]; } && [ -n "$step" ] && grep -qE "ckpt-0*$step .* OK" "$tmp/limit.verify"; then
  ok "time limit: stopped after step $step with its checkpoint intact on the shared level, job $st"
else
  bad "time limit (state $st, stop step $step, $(grep -c 'step [0-9]*/' "$tmp/limit.out") progress lines): $(grep -v 'step [0-9]*/' "$tmp/limit.out" | tail -8); verify: $(cat "$tmp/limit.verify")"
fi
job=$(CKPT_DIR=$tmp/limit/shared CKPT_LOCAL=$tmp/limit/local sbatch --parsable --job-name limit -o "$tmp/limit2.out" \
  "$src/examples/slurm/train.sbatch")
for _ in $(seq 300); do grep -q "resuming from the checkpoint" "$tmp/limit2.out" 2>/dev/null && break; sleep 0.1; done
scancel "$job"
wait_state "$job" 30 CANCELLED COMPLETED FAILED
grep -q "resuming from the checkpoint at step ${step:-X}" "$tmp/limit2.out" &&
  ok "sbatch again after the time limit: resumed at step $step" ||
  bad "sbatch after the time limit: $(tail -4 "$tmp/limit2.out")"

pids=$(cat "$SLURM_LOCAL_DIR"/slurmctld.pid "$SLURM_LOCAL_DIR"/slurmd.pid "$SLURM_LOCAL_DIR"/munge/munged.pid)
"$src/scripts/slurm-local.sh" stop >"$tmp/stop.log" 2>&1
left=$(for p in $pids; do kill -0 "$p" 2>/dev/null && echo "$p"; done)
[ -z "$left" ] && ok "slurm-local.sh stop: munged, slurmctld, slurmd gone" || bad "slurm-local.sh stop left pids $left running"

echo "slurm: $pass passed, $fail failed"
[ $fail -eq 0 ]
