#!/usr/bin/env bash
# Fault suite, scaleout's TCP transport (issue 33; docs/COLLECTIVES.md, "Threat
# model"), across emulated nodes (scripts/cluster.sh): node1 and node2 run the
# job, node3 is an attacker's host on the same network, reaching only the
# nodes' addresses inside the test's namespaces.
#   set-up of hier's ring and of the pipeline's point-to-point mesh, widened by
#   SCALEOUT_TCP_TEST_DELAY_MS: a stranger with random bytes, one that connects
#   and says nothing, one that hangs up at once, a hello forged the old way
#   (the hash of the addresses and ports), a handshake recorded on the wire in
#   another job and replayed: each closed and counted, the job correct;
#   after set-up, a peer sending garbage (SCALEOUT_TCP_TEST_GARBAGE): one line
#   naming the peer and the violation, non-zero exit;
#   kill -9 of a rank, SIGSTOP of a rank: the job ends with a clear line.
# Every case checks the exit status, its line, the time to end and that
# nothing is left: no process in the nodes' namespaces, no /dev/shm segment
# of theirs, no namespace after `down`. Skips (77) without root, iproute2,
# Open MPI or the test hooks. Usage: tcp.sh path/to/scaleout
set -uo pipefail
bin=$1
. "$(dirname "$0")/../script_lib.sh"
cluster=$src/scripts/cluster.sh
py=/usr/bin/python3

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
for t in ip tc unshare timeout flock; do command -v $t >/dev/null || skip "no '$t' (install-deps: iproute2, util-linux, coreutils)"; done
[ -x $py ] || skip "no $py"
[ "${SCALEOUT_TEST_HOOKS:-1}" = 1 ] || skip "needs a build with -DSCALEOUT_TEST_HOOKS=ON (the set-up window, the garbage)"
grep -qE "Open ?MPI|OpenRTE" <<<"$("${MPIEXEC:-mpiexec}" --version 2>&1)" ||
  skip "MPI programs across emulated nodes run under Open MPI only (tests/cluster.sh: MPICH's ch4:ucx finalize hang)"

# A cluster of our own (namespaces sotcp<pid>-*), one at a time on this machine.
export SCALEOUT_CLUSTER="sotcp$$"
exec 9>/tmp/scaleout-cluster.lock
flock -w 900 9 || skip "the emulated cluster stayed busy (flock /tmp/scaleout-cluster.lock)"
ip netns add "$SCALEOUT_CLUSTER-probe" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "$SCALEOUT_CLUSTER-probe"
node() { echo "$SCALEOUT_CLUSTER-node$1"; }
in_nodes() { for i in 1 2 3; do ip netns pids "$(node $i)" 2>/dev/null; done; }
cleanup() {
  in_nodes | xargs -r kill -CONT 2>/dev/null
  in_nodes | xargs -r kill -KILL 2>/dev/null
  "$cluster" down >/dev/null 2>&1
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM # ctest's timeout, ^C: still run the EXIT trap

# ---- the stranger (Python, run inside node3) ----------------------------------------
cat >"$tmp/peer.py" <<'EOF'
# Attacker's tools: python3 peer.py MODE HOST PORT [ARG]. Connects from node3 to
# a listening member; prints one line: how the member treated the connection.
import os, socket, struct, sys, time

def connect(host, port):
    s = socket.create_connection((host, port), timeout=5)
    s.settimeout(20)
    return s

def wait_closed(s, t0):
    """Reads until the member closes the connection; how long it took."""
    try:
        while s.recv(4096):
            pass
        return "closed by the member after %.2f s" % (time.time() - t0)
    except socket.timeout:
        return "still open after %.0f s" % (time.time() - t0)
    except ConnectionResetError:
        return "closed by the member after %.2f s" % (time.time() - t0)

def old_token(cards):
    """The old hello's token: FNV-1a over every member's card (tcp_card: 9 IPv4
    addresses, their count, the port in network order, padding)."""
    h = 1469598103934665603
    for addrs, port in cards:
        raw = b"".join(socket.inet_aton(a) for a in addrs).ljust(36, b"\0")
        raw += struct.pack("<I", len(addrs)) + struct.pack(">H", port) + b"\0\0"
        for b in raw:
            h = ((h ^ b) * 1099511628211) & (2**64 - 1)
    return h

def sniff(port, out, seconds):
    """Records, on this node's eth0, what a caller sends to port: a hello and its proof."""
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3))
    s.bind(("eth0", 0))
    s.settimeout(0.5)
    streams, end = {}, time.time() + seconds
    print("listening", flush=True)
    while time.time() < end:
        try:
            pkt = s.recv(65535)
        except socket.timeout:
            continue
        if pkt[12:14] != b"\x08\x00" or pkt[23] != 6:
            continue
        ip = pkt[14:]
        ihl, total = (ip[0] & 15) * 4, struct.unpack(">H", ip[2:4])[0]
        tcp = ip[ihl:total]
        sport, dport, seq = struct.unpack(">HHI", tcp[:8])
        data = tcp[(tcp[12] >> 4) * 4:]
        if dport != port or not data:
            continue
        segs = streams.setdefault((ip[12:16], sport), {})
        segs[seq] = data
        stream = b"".join(segs[k] for k in sorted(segs))
        if stream[:4] == b"soTH" and len(stream) >= 72:
            open(out, "wb").write(stream[:72])
            print("recorded %d bytes" % len(stream[:72]))
            return
    print("nothing recorded")

mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "sniff":
    sniff(port, sys.argv[4], float(sys.argv[5]))
    sys.exit(0)
t0 = time.time()
s = connect(host, port)
if mode == "random":
    s.sendall(os.urandom(64))
elif mode == "early":
    s.close()
    print("hung up at once")
    sys.exit(0)
elif mode == "forged":  # ARG: "FROM MEMBERS" where MEMBERS = "a1,a2,..:port a1,..:port"
    frm, members = sys.argv[4].split(" ", 1)
    cards = [(m.split(":")[0].split(","), int(m.split(":")[1])) for m in members.split()]
    s.sendall(struct.pack("<IIQ", 0x5C7C9A11, int(frm), old_token(cards)))
elif mode == "replay":  # ARG: a file with a recorded hello (36 bytes) and proof (36)
    rec = open(sys.argv[4], "rb").read()
    s.sendall(rec[:36])
    got = b""
    while len(got) < 52:
        chunk = s.recv(52 - len(got))
        if not chunk:
            break
        got += chunk
    s.sendall(rec[36:72])
print(wait_closed(s, t0))
EOF
stranger() { # stranger NAME MODE HOST PORT [ARG]: in the background, from node3
  local name=$1; shift
  ip netns exec "$(node 3)" $py "$tmp/peer.py" "$@" >"$tmp/$name" 2>&1 &
}

# ---- jobs ---------------------------------------------------------------------------
# job NAME LIMIT ENV... -- ARGS...: scaleout ARGS on 2 ranks, one per node, in the
# background (LIMIT seconds at most); job_end NAME: its exit status in $st, seconds in $secs.
declare -A started
job() {
  local name=$1 limit=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  started[$name]=$(date +%s.%N)
  env "${envs[@]}" timeout -k 5 "$limit" "$cluster" mpirun -np 2 --ranks-per-node 1 "$bin" "$@" \
    >"$tmp/$name.log" 2>&1 &
  eval "pid_$name=$!"
}
job_end() {
  local p
  eval "p=\$pid_$1"
  wait "$p"
  st=$?
  secs=$(awk -v a="${started[$1]}" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
}
# announced FILE KIND N: the first N members of a KIND set-up ("tcp transport", ...) listen;
# prints their lines (member I of N world W port P addrs A,B).
announced() {
  for _ in $(seq 150); do
    [ "$(cat "$1" 2>/dev/null | grep -c "^$2 member")" -ge "$3" ] && { grep "^$2 member" "$1"; return 0; }
    sleep 0.2
  done
  return 1
}
field() { awk -v k="$2" '{ for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' <<<"$1"; }
# The members' cards as an attacker sees them: "addrs:port" per member, in order.
cards() { sort -k3n <<<"$1" | awk '{ print $NF ":" $(NF - 2) }' | tr '\n' ' '; }

# Nothing left of a job: no process in the nodes, no shared-memory segment of theirs.
shm_before=$(ls /dev/shm)
left_behind() {
  local p s
  sleep 0.5
  p=$(in_nodes | xargs -r ps -o comm= -p 2>/dev/null | sort | uniq -c | tr '\n' ' ')
  s=$(comm -13 <(sort <<<"$shm_before") <(ls /dev/shm | sort) | grep -E '\.node[0-9]+\.' | tr '\n' ' ')
  [ -z "$p$s" ] && return 1
  echo "processes: ${p:-none}; /dev/shm: ${s:-none}"
}
# check NAME WANT_STATUS MAX_S PATTERN [MAX_LINES]: the job's status (0, or "fail":
# non-zero, and not the time limit's), its time, its line (one line matching
# PATTERN; up to MAX_LINES where both the runtime and scaleout may say it), nothing left.
check() {
  local name=$1 want=$2 max=$3 pat=$4 most=${5:-1} n leftover
  job_end "$name"
  if [ "$want" = 0 ]; then [ "$st" -eq 0 ]; else [ "$st" -ne 0 ] && [ "$st" -ne 124 ]; fi &&
    ok || bad "$name: exit $st, want $want: $(tail -5 "$tmp/$name.log")"
  awk -v s="$secs" -v m="$max" 'BEGIN { exit !(s <= m) }' && ok || bad "$name: ended after $secs s, bound $max s"
  n=$(grep -cE "$pat" "$tmp/$name.log")
  [ "$n" -ge 1 ] && [ "$n" -le "$most" ] && ok ||
    bad "$name: want 1..$most line(s) matching '$pat', got $n: $(grep -E 'tcp|fatal|signal' "$tmp/$name.log" | head -5)"
  leftover=$(left_behind) && bad "$name: left behind: $leftover" || ok
  echo "$name: exit $st in $secs s: $(grep -E "$pat" "$tmp/$name.log" | head -1 | cut -c1-220)"
}
# strangers_closed FILES...: every stranger saw the member close its connection.
strangers_closed() {
  local f
  for f in "$@"; do
    grep -qE "closed by the member|hung up at once" "$tmp/$f" && ok || bad "stranger $f: $(cat "$tmp/$f")"
  done
}

"$cluster" up 3 --rate 10gbit >"$tmp/up" 2>&1 || { bad "up: $(cat "$tmp/up")"; exit 1; }
n1=10.77.0.1
ring_args=(bench allreduce --algo hier --sizes 256K -i 3 --check)
pipe_args=(train --model lenet5 --dataset synthetic --synthetic-samples 256 --steps 4 --batch-size 16
  --pipeline-stages 2 --microbatches 2 --eval-every -1 --progress none)
window=(SCALEOUT_TCP_TEST_DELAY_MS=2500)

# ---- (a, b, c) strangers during set-up ------------------------------------------------
# Rank 0 (node1) is attacked while its real caller waits out the window: random
# bytes, a silent connection, one hung up at once, the old forged hello, and
# (REC, when not -) a handshake recorded in another job. A sniffer on node1
# records this job's real handshake into $tmp/NAME.rec for a later job.
attack() { # attack NAME KIND REC ARGS...: the job, attacked during its set-up
  local name=$1 kind=$2 rec=$3 lines port pids=(); shift 3
  job "$name" 60 "${window[@]}" SCALEOUT_TCP_TEST_ANNOUNCE="$tmp/$name.ann" "${extra_env[@]}" -- "$@"
  lines=$(announced "$tmp/$name.ann" "$kind" 2) || { bad "$name: no set-up announced"; return 1; }
  port=$(field "$(grep 'member 0 ' <<<"$lines")" port)
  ip netns exec "$(node 1)" $py "$tmp/peer.py" sniff 0 "$port" "$tmp/$name.rec" 10 >"$tmp/$name.sniff" 2>&1 &
  pids+=($!)
  if [ "$rec" = - ]; then
    stranger "$name.random" random $n1 "$port"; pids+=($!)
    stranger "$name.silent" silent $n1 "$port"; pids+=($!)
    stranger "$name.early" early $n1 "$port"; pids+=($!)
    stranger "$name.forged" forged $n1 "$port" "1 $(cards "$lines")"; pids+=($!)
  else
    stranger "$name.replay" replay $n1 "$port" "$rec"; pids+=($!)
  fi
  wait "${pids[@]}"
}
extra_env=()

# The ring of hier's step across nodes, then the pipeline's point-to-point mesh.
attack ring_setup "tcp transport" - "${ring_args[@]}"
check ring_setup 0 30 "tcp transport: rank 0 closed 4 connection"
# --check: exit 1 on any wrong result. The random bytes and the old hello are
# malformed; the silent connection is closed when set-up ends (or at its own
# 5 s deadline, were set-up still waiting).
grep -qE "2 malformed hello, 1 closed before proving, 1 (unfinished|silent)" "$tmp/ring_setup.log" &&
  grep -qE "^# hier across nodes: [1-9][0-9]* steps on scaleout's tcp ring" "$tmp/ring_setup.log" && ok ||
  bad "ring_setup: strangers not told apart, or the ring not used: $(grep -E 'across|tcp' "$tmp/ring_setup.log")"
strangers_closed ring_setup.random ring_setup.silent ring_setup.early ring_setup.forged
grep -q "recorded 72 bytes" "$tmp/ring_setup.sniff" && ok || bad "ring_setup: no handshake recorded: $(cat "$tmp/ring_setup.sniff")"

# Here the window outlasts a connection's 5 s handshake deadline: the silent
# stranger is closed at its deadline while set-up goes on waiting.
window=(SCALEOUT_TCP_TEST_DELAY_MS=6500)
attack mesh_setup "tcp point-to-point" - "${pipe_args[@]}"
window=(SCALEOUT_TCP_TEST_DELAY_MS=2500)
check mesh_setup 0 30 "tcp point-to-point: rank 0 closed 4 connection"
grep -qE "2 malformed hello, 1 closed before proving, 1 silent past the handshake time-out" "$tmp/mesh_setup.log" &&
  grep -qE "closed by the member after [56]\.[0-9]+ s" "$tmp/mesh_setup.silent" &&
  grep -q "point-to-point with 1 rank(s) over scaleout's tcp connections" "$tmp/mesh_setup.log" &&
  grep -q "trained 4 steps" "$tmp/mesh_setup.log" && ok ||
  bad "mesh_setup: strangers not told apart, the silent one not closed at its deadline, or not trained over tcp: $(grep -E 'tcp|trained' "$tmp/mesh_setup.log") $(cat "$tmp/mesh_setup.silent")"
strangers_closed mesh_setup.random mesh_setup.silent mesh_setup.early mesh_setup.forged
grep -q "recorded 72 bytes" "$tmp/mesh_setup.sniff" && ok || bad "mesh_setup: no handshake recorded: $(cat "$tmp/mesh_setup.sniff")"

# ---- (c) a replayed handshake, then (d) garbage after set-up ----------------------------
# The handshake recorded above replayed into the next job's set-up: refused for
# its MAC. Then rank 1 sends garbage instead of its first header: rank 0 ends the
# job with one line naming rank 1, its address and the violation.
extra_env=(SCALEOUT_TCP_TEST_GARBAGE=1)
attack ring_garbage "tcp transport" "$tmp/ring_setup.rec" "${ring_args[@]}"
check ring_garbage fail 30 "tcp: rank 1 \(10\.77\.0\.2:[0-9]+\) sent bytes of another protocol \(bad magic\) instead of a message header: protocol violation"
grep -q "tcp transport: rank 0 closed 1 connection(s) during set-up .*1 wrong MAC" "$tmp/ring_garbage.log" && ok ||
  bad "ring_garbage: the replayed handshake was not refused for its MAC: $(grep tcp "$tmp/ring_garbage.log")"
strangers_closed ring_garbage.replay

extra_env=(SCALEOUT_TCP_TEST_GARBAGE=1:size)
attack mesh_garbage "tcp point-to-point" "$tmp/mesh_setup.rec" "${pipe_args[@]}"
check mesh_garbage fail 30 "tcp: rank 1 \(10\.77\.0\.2:[0-9]+\) sent a message of 2147483648 bytes for a receive of [0-9]+ \(tag [0-9]+\): protocol violation"
grep -q "tcp point-to-point: rank 0 closed 1 connection(s) during set-up .*1 wrong MAC" "$tmp/mesh_garbage.log" && ok ||
  bad "mesh_garbage: the replayed handshake was not refused for its MAC: $(grep tcp "$tmp/mesh_garbage.log")"
strangers_closed mesh_garbage.replay
! grep -qi "cannot allocate" "$tmp/mesh_garbage.log" && ok || bad "mesh_garbage: an allocation failure"

# ---- (e) kill -9 and SIGSTOP of a rank over TCP ---------------------------------------------
# rank1_of: the scaleout process of rank 1 (node2). running NAME PATTERN: its log shows PATTERN.
rank1_of() { ip netns pids "$(node 2)" | xargs -r ps -o pid=,comm= -p | awk '$2 == "scaleout" { print $1 }'; }
running() { for _ in $(seq 150); do grep -q "$2" "$tmp/$1.log" && return 0; sleep 0.2; done; return 1; }
long=(--steps 100000 --synthetic-samples 256 --dataset synthetic --model lenet5 --batch-size 16 --eval-every -1
  --progress none --comm-timeout 4 --stall-warning 2)

# kill -9 of stage 1 of a pipeline whose stages talk over the mesh.
job pipe_kill 60 SCALEOUT_TCP_TEST_ANNOUNCE="$tmp/pipe_kill.ann" -- train "${long[@]}" --pipeline-stages 2 --microbatches 2
announced "$tmp/pipe_kill.ann" "tcp point-to-point" 2 >/dev/null && sleep 1.5 || bad "pipe_kill: no mesh set up"
kill -KILL $(rank1_of) 2>/dev/null
started[pipe_kill]=$(date +%s.%N) # the bound counts from the kill
# Open MPI's line for the dead rank, scaleout's for the closed connection, or both.
check pipe_kill fail 15 "process rank 1 with PID [0-9]+ on node 10\.77\.0\.2 exited on signal 9|connection to rank 1 \(10\.77\.0\.2:[0-9]+\) closed by peer" 2

# SIGSTOP of rank 1 of data parallelism over the ring: the comm time-out (4 s)
# ends the job, naming world rank 1.
job dp_stop 60 SCALEOUT_TCP_TEST_ANNOUNCE="$tmp/dp_stop.ann" -- train "${long[@]}" --allreduce hier
announced "$tmp/dp_stop.ann" "tcp transport" 2 >/dev/null && sleep 1.5 || bad "dp_stop: no ring set up"
kill -STOP $(rank1_of) 2>/dev/null
started[dp_stop]=$(date +%s.%N)
check dp_stop fail 20 "timed out after 4 s .*no stall report from ranks 1 "

finish() {
  "$cluster" down >/dev/null 2>&1
  leftover=$(ip netns list | awk '{print $1}' | grep -E "^$SCALEOUT_CLUSTER-" || true)
  [ -z "$leftover" ] && ok || bad "namespaces left: $leftover"
  echo "faults tcp: $pass passed, $fail failed"
  exit $((fail > 0))
}
finish
