#!/usr/bin/env bash
# A private one-node Slurm on this host (Debian's slurm-wlm 22.05), for trying
# and testing scaleout under srun/sbatch without touching any system Slurm:
# its own munged, slurmctld and slurmd, configuration, state and logs in DIR.
#   scripts/slurm-local.sh start|stop|status|env [DIR]
#     DIR           $SLURM_LOCAL_DIR, else /tmp/scaleout-slurm-$(id -u)
#     ports         $SLURM_LOCAL_PORTS="CTLD SLURMD" (default "6817 6818", Slurm's)
#     KillWait      $SLURM_LOCAL_KILLWAIT seconds between SIGTERM and SIGKILL (default 30)
#   eval "$(scripts/slurm-local.sh env)"   # sets SLURM_CONF for srun, sbatch, sinfo ...
# start: exit 2 with one line when the ports are taken or this DIR's Slurm
# already runs (nothing is left behind); 1 when a daemon does not come up.
# stop: cancels the jobs, stops the daemons, leaves nothing running.
set -euo pipefail

cmd=${1:-}
dir=${2:-${SLURM_LOCAL_DIR:-/tmp/scaleout-slurm-$(id -u)}}
read -r cport dport <<<"${SLURM_LOCAL_PORTS:-6817 6818}"
killwait=${SLURM_LOCAL_KILLWAIT:-30}
node=$(hostname -s)
conf=$dir/slurm.conf
export SLURM_CONF=$conf

die() { echo "slurm-local: $2" >&2; exit "$1"; }

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

need() {
  local missing=()
  for t in munged mungekey slurmctld slurmd srun sinfo; do
    command -v "$t" >/dev/null || missing+=("$t")
  done
  [ ${#missing[@]} -eq 0 ] ||
    die 2 "missing ${missing[*]}: install slurm-wlm (make deps SLURM=1, or scripts/install-deps.sh with SLURM=1)"
}

# The PMI srun offers that this host's MPI accepts: Debian's Open MPI 4.1 is
# built against PMIx (its ext3x component), so pmix when srun has it; else
# pmi2 (MPICH's Hydra-free mode).
pick_mpi() {
  local list
  list=$(srun --mpi=list 2>&1 || true)
  if grep -qw pmix <<<"$list" && { ! command -v ompi_info >/dev/null || ompi_info 2>/dev/null | grep -q "MCA pmix: ext"; }; then
    echo pmix
  elif grep -qw pmi2 <<<"$list"; then
    echo pmi2
  else
    echo none
  fi
}

write_conf() { # write_conf MPI
  cat >"$conf" <<EOF
# Written by scripts/slurm-local.sh: one node ($node), one partition, private state.
ClusterName=scaleout
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$cport
SlurmdPort=$dport
SlurmUser=$(id -un)
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# cred_expire: also how long a requeued job waits before it may start again (Slurm: 120 s).
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=${SLURM_LOCAL_CRED_EXPIRE:-10}
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/log/slurmctld.log
SlurmdLogFile=$dir/log/slurmd.log
# No cgroups needed (containers, CI): processes tracked by parentage; binding by task/affinity.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
SwitchType=switch/none
SchedulerType=sched/backfill
# Scheduling passes every 1-2 s (Slurm: 60 s main, 30 s backfill): a requeued
# job starts as soon as it is eligible, not up to half a minute later.
SchedulerParameters=sched_interval=2,bf_interval=1
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
MpiDefault=$1
# SIGTERM, then SIGKILL after KillWait s: the time scaleout train has to checkpoint (docs/SLURM.md).
KillWait=$killwait
JobRequeue=0
ReturnToService=2
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
InactiveLimit=0
MinJobAge=600
SlurmdTimeout=60
NodeName=$node NodeAddr=127.0.0.1 CPUs=$(nproc) State=UNKNOWN
PartitionName=local Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
}

start_munge() {
  mkdir -p "$dir/munge"
  chmod 700 "$dir/munge"
  [ -s "$dir/munge/munge.key" ] || mungekey -c -k "$dir/munge/munge.key" >/dev/null 2>&1 ||
    { dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none; chmod 600 "$dir/munge/munge.key"; }
  # --force: the private directory may lie under a world-writable /tmp.
  munged --force --socket="$dir/munge/munge.socket" --key-file="$dir/munge/munge.key" \
    --pid-file="$dir/munge/munged.pid" --log-file="$dir/log/munged.log" --seed-file="$dir/munge/munged.seed" \
    >>"$dir/log/munged.log" 2>&1
}

wait_idle() {
  local state=""
  for _ in $(seq 60); do
    state=$(sinfo -h -N -n "$node" -o %t 2>/dev/null || true)
    [ "$state" = idle ] && return 0
    sleep 0.5
  done
  echo "slurm-local: node $node is '${state:-unreachable}', not idle, after 30 s (logs: $dir/log)" >&2
  return 1
}

undo() { # undo MESSAGE: stops what start started, exit 1
  [ -z "$1" ] || echo "slurm-local: $1" >&2
  stop >/dev/null 2>&1
  exit 1
}

start() {
  need
  alive "$dir/slurmctld.pid" || alive "$dir/slurmd.pid" || alive "$dir/munge/munged.pid" &&
    die 2 "already running in $dir (scripts/slurm-local.sh stop $dir)"
  for p in "$cport" "$dport"; do
    port_busy "$p" && die 2 "port $p is taken (another Slurm?): set SLURM_LOCAL_PORTS=\"CTLD SLURMD\""
  done
  mkdir -p "$dir/state" "$dir/spool" "$dir/log"
  write_conf none
  write_conf "$(pick_mpi)"
  # Anything failing from here on is undone: nothing half-made stays running.
  start_munge || undo "munged did not start (log: $dir/log/munged.log)"
  slurmctld -f "$conf" -i || undo "slurmctld did not start (log: $dir/log/slurmctld.log)"
  slurmd -f "$conf" -N "$node" || undo "slurmd did not start (log: $dir/log/slurmd.log)"
  wait_idle || undo ""
  echo "slurm-local: running in $dir (node $node, $(nproc) CPUs, MpiDefault=$(sed -n 's/^MpiDefault=//p' "$conf"), ports $cport $dport)"
  echo "slurm-local: eval \"\$($0 env $dir)\" to use it"
}

stop_pid() { # stop_pid PIDFILE: TERM, wait up to 10 s, then KILL
  local f=$1 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$f"
}

stop() {
  if alive "$dir/slurmctld.pid"; then
    # Jobs first, so no slurmstepd or task outlives the daemons.
    scancel --full --quiet $(squeue -h -o %i 2>/dev/null) 2>/dev/null || true
    for _ in $(seq $((killwait * 10 + 50))); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
  stop_pid "$dir/slurmd.pid"
  stop_pid "$dir/slurmctld.pid"
  stop_pid "$dir/munge/munged.pid"
  echo "slurm-local: stopped ($dir)"
}

status() {
  local s=0
  for d in munge/munged slurmctld slurmd; do
    if alive "$dir/$d.pid"; then echo "${d#munge/}: running (pid $(cat "$dir/$d.pid"))"; else echo "${d#munge/}: stopped"; s=3; fi
  done
  [ $s -eq 0 ] && sinfo -N -o "%N %t %c %P" 2>/dev/null
  return $s
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  env) echo "export SLURM_CONF=$conf" ;;
  *) die 2 "usage: slurm-local.sh start|stop|status|env [DIR]" ;;
esac
