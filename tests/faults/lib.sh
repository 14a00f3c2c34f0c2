# Shared helpers of the fault suite (tests/faults/*.sh, docs/RELIABILITY.md):
# each case runs under a deadline in a process group of its own, and is checked for
# its exit status, its one-line message, the time it took to end, and for
# what it left behind (its processes, MPI's shared-memory files, the network
# namespaces of its emulated cluster). A case that hangs is killed at its
# deadline and fails; it never hangs the suite. A case's processes are those
# whose environment carries its marker SO_FAULTS_CASE: it reaches every rank,
# also those an MPI daemon started on an emulated node in a session of its own.
#
# A family script does:  . "$(dirname "$0")/lib.sh" "$@"   (argument: the scaleout binary)
#   fault_run NAME DEADLINE_S CMD...   run CMD; sets st (exit status, 124 when killed at
#                                      the deadline), took (seconds), out/err (files)
#   expect_status NAME CODE...         st is one of the codes
#   expect_line NAME REGEX             stderr is exactly one line, and it matches REGEX
#   expect_within NAME SECONDS         the case ended in less than SECONDS
#   expect_clean NAME                  nothing of the case is left (waits up to 5 s)
#   fault_case NAME DEADLINE CODE REGEX CMD...   all four of the above
#   fault_finish                       prints the counts; exit 1 if anything failed
set -u
bin=$(realpath "$1")
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
mpirun=$src/scripts/mpirun.sh
family=$(basename "$0" .sh)
tmp=$(mktemp -d "/tmp/so-faults-$family.XXXXXX")
# Open MPI's shared-memory files (the vader BTL's segments, the MPI shared
# windows of hier and the pipeline) go to a directory of the suite, so that
# what a case leaves there is known to be its own (other jobs on this
# machine write /dev/shm too).
shm=/dev/shm/so-faults-$family.$$
mkdir -p "$shm"
# The emulated cluster of a case (scripts/cluster.sh) is named after the
# suite, so its namespaces are told from other jobs' (the check is by name).
export SCALEOUT_CLUSTER=sof$$
pass=0 fail=0
pgid=

fault_cleanup() {
  [ -n "$pgid" ] && kill_case
  rm -rf "$shm"
  [ -n "${KEEP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap fault_cleanup EXIT

ok() { pass=$((pass + 1)); echo "ok: $*"; }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }

# What polls a running case starts no process, not even a subshell: while
# its ranks keep both cores busy, a process the harness starts can wait
# seconds for a core (0.2 to 12 s were measured for a subshell), and a poll
# made of pipelines outlived the deadline. So the clock is bash's, /proc is
# read with builtins, results come back in variables, and naps are read
# timeouts. The case is a process group, not a session: a session is a
# scheduler group of its own (autogroup), and on the 2-core CI guest ranks
# in their own group, beside other tests, kept the harness off the cores
# for 7 to 170 s, past every deadline.

# stamp VAR: microseconds since the epoch into VAR.
stamp() { printf -v "$1" '%s' "${EPOCHREALTIME//[.,]/}"; }
# since T: seconds (2 decimals) from the stamp T until now.
since() {
  local t d
  stamp t
  d=$((t - $1))
  printf '%d.%02d' $((d / 1000000)) $((d % 1000000 / 10000))
}

# nap SECONDS: sleeps without starting sleep(1) (a read from a FIFO that
# never gets data, opened read-write so that the open does not block).
mkfifo "$tmp/nap"
exec {nap_fd}<>"$tmp/nap"
nap() { read -r -t "$1" -u "$nap_fd" _ || true; }

# Exited (a zombie until waited for) or gone.
ended() {
  local line rest
  { IFS= read -r line <"/proc/$1/stat"; } 2>/dev/null || return 0
  rest=${line##*) } # the state follows the command name's closing parenthesis
  [ "${rest:0:1}" = Z ]
}

# find_procs: the case's processes into the array procs (pids, ascending),
# by its marker; zombies have no environment.
find_procs() {
  local f v
  local -a found=()
  for f in /proc/[0-9]*/environ; do
    while IFS= read -r -d '' v; do
      [ "$v" = "SO_FAULTS_CASE=$marker" ] && { f=${f#/proc/}; found[${f%/environ}]=1; break; }
    done 2>/dev/null <"$f"
  done
  procs=("${!found[@]}")
}

# find_ranks: into the array ranks, the ranks (or the one process) of the
# running case, ascending: its processes named scaleout.
find_ranks() {
  local p c
  ranks=()
  find_procs
  for p in "${procs[@]}"; do
    { IFS= read -r c <"/proc/$p/comm"; } 2>/dev/null && [ "$c" = scaleout ] && ranks+=("$p")
  done
  return 0
}

# The same two lists printed, for commands that take them as arguments.
case_procs() { find_procs; echo "${procs[*]}"; }
case_ranks() { find_ranks; echo "${ranks[*]}"; }

# wait_ranks N SECONDS: until N processes named scaleout run in the case
# (then in ranks).
wait_ranks() {
  local i
  for ((i = 0; i < $2 * 10; i++)); do
    find_ranks
    [ ${#ranks[@]} -ge "$1" ] && return 0
    nap 0.1
  done
  return 1
}

kill_case() {
  kill -KILL -- -"$pgid" 2>/dev/null
  local p
  find_procs
  for p in "${procs[@]}"; do kill -KILL "$p" 2>/dev/null; done
}

# fault_run NAME DEADLINE CMD...: CMD in its own process group (whose id is
# CMD's pid), marked (SO_FAULTS_CASE), stdout in
# $tmp/NAME.out, stderr in $tmp/NAME.err. After DEADLINE seconds every
# process of the case is killed and st is 124. The case's pid is in
# $case_pid while it runs (fault_start / fault_wait split the two halves for
# cases that act on the running job).
fault_start() {
  local name=$1
  shift
  out=$tmp/$name.out err=$tmp/$name.err
  mkdir -p "$shm/$name"
  marker=$family.$$.$name
  stamp t0
  SO_FAULTS_CASE=$marker OMPI_MCA_btl_vader_backing_directory=$shm/$name \
    OMPI_MCA_osc_sm_backing_directory=$shm/$name \
    perl -e 'setpgrp(0, 0); exec { $ARGV[0] } @ARGV or die "$ARGV[0]: $!\n"' "$@" >"$out" 2>"$err" &
  case_pid=$!
  pgid=$case_pid
}

fault_wait() {
  local deadline=$1 end t
  end=$((t0 + deadline * 1000000))
  while ! ended "$case_pid"; do
    stamp t
    if [ "$t" -gt "$end" ]; then
      kill_case
      { wait "$case_pid"; } 2>/dev/null
      st=124
      took=$(since "$t0")
      stamp t_end
      echo "   (killed at the ${deadline} s deadline; last output: $(tail -c 300 "$err" | tr '\n' ' '))"
      return
    fi
    nap 0.05
  done
  stamp t_end
  wait "$case_pid"
  st=$?
  took=$(since "$t0")
}

# signal_case SIG PIDS...: sends SIG and notes when (t_sig), for expect_after_signal.
signal_case() {
  local sig=$1
  shift
  stamp t_sig
  kill -"$sig" "$@" 2>/dev/null
}

# The case ended less than SECONDS after the last signal_case.
expect_after_signal() {
  local name=$1 secs=$2 d
  d=$((t_end - t_sig))
  d=$(printf '%d.%02d' $((d / 1000000)) $((d % 1000000 / 10000)))
  awk -v a="$d" -v b="$secs" 'BEGIN { exit !(a < b) }' && ok "$name: ended $d s after the signal (< $secs s)" ||
    bad "$name: ended $d s after the signal, want < $secs s"
}

fault_run() {
  local name=$1 deadline=$2
  shift 2
  fault_start "$name" "$@"
  fault_wait "$deadline"
}

expect_status() {
  local name=$1 c
  shift
  for c in "$@"; do
    [ "$st" = "$c" ] && { ok "$name: exit $st"; return 0; }
  done
  bad "$name: exit $st, want $*: $(tail -c 400 "$err")"
  return 1
}

# The message on stderr: exactly one line, matching REGEX (grep -E).
expect_line() {
  local name=$1 re=$2 n
  n=$(grep -c '' "$err")
  if [ "$n" -eq 1 ] && grep -qE -- "$re" "$err"; then
    ok "$name: one line: $(cat "$err")"
  else
    bad "$name: want one line matching /$re/, got $n: $(head -c 600 "$err")"
  fi
}

# Some line of stderr matches REGEX (for MPI jobs, where the launcher adds its own lines).
expect_msg() {
  local name=$1 re=$2
  grep -qE -- "$re" "$err" && ok "$name: says $(grep -E -- "$re" "$err" | head -1)" ||
    bad "$name: no line matching /$re/ in: $(head -c 600 "$err")"
}

expect_within() {
  local name=$1 secs=$2
  awk -v a="$took" -v b="$secs" 'BEGIN { exit !(a < b) }' && ok "$name: ended in $took s (< $secs s)" ||
    bad "$name: took $took s, want < $secs s"
}

# No process of the case, no file in its shared-memory directory, no
# namespace of the suite's emulated cluster. Leftover processes are killed
# (and reported).
expect_clean() {
  local name=$1 left files ns=
  for _ in {1..50}; do
    find_procs
    left=${procs[*]}
    [ -z "$left" ] && break
    nap 0.1
  done
  files=$(ls -A "$shm/$name" 2>/dev/null | tr '\n' ' ')
  ns=$(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$SCALEOUT_CLUSTER-" | tr '\n' ' ')
  if [ -z "$left" ] && [ -z "$files" ] && [ -z "$ns" ]; then
    ok "$name: nothing left behind"
  else
    bad "$name: left behind: processes [$left] /dev/shm [$files] netns [$ns]"
    [ -n "$left" ] && ps -o pid,stat,args -p "${left// /,}" | head -5
    kill_case
  fi
  rm -rf "${shm:?}/$name"
  pgid=
}

# fault_case NAME DEADLINE CODE REGEX CMD...: one command, every check. The
# time bound is the deadline (a case that needs a tighter one checks it itself).
fault_case() {
  local name=$1 deadline=$2 code=$3 re=$4
  shift 4
  fault_run "$name" "$deadline" "$@"
  expect_status "$name" "$code"
  expect_line "$name" "$re"
  expect_within "$name" "$deadline"
  expect_clean "$name"
}

fault_finish() {
  echo "$family: $pass passed, $fail failed"
  [ "$fail" -eq 0 ]
  exit $?
}
