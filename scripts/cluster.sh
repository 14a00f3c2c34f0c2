#!/usr/bin/env bash
# Emulated cluster on one machine: N network namespaces (the nodes) joined by
# shaped veth links to a bridge in a namespace of its own, and mpirun across them
# (docs/CLUSTER.md). Nothing is created in, or routed from, the host namespace.
#   scripts/cluster.sh up N [--rate 10gbit] | down | status
#   scripts/cluster.sh mpirun -np P --ranks-per-node K [--mpich|--openmpi] PROGRAM ARGS...
# The launcher is $MPIEXEC (else mpiexec); --mpich / --openmpi pick mpiexec.mpich / .openmpi.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# Namespace names: $name-br (the bridge) and $name-node1..N. SCALEOUT_CLUSTER
# lets a test run its own cluster beside a user's (the namespaces keep them apart).
name="${SCALEOUT_CLUSTER:-scaleout}"
br_ns="$name-br"
# The test range: these addresses exist only on the nodes' veth ends inside the
# namespaces, and no namespace has a default route, so nothing can leave.
subnet_prefix="10.77.0"
subnet="$subnet_prefix.0/24"

die() { echo "cluster.sh: $*" >&2; exit 2; }

node_ns() { echo "$name-node$1"; }

# Nodes of the cluster that is up, in order (node1 node2 ...).
nodes() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$name-node[0-9]+$" | sort -V || true
}

is_up() { ip netns list 2>/dev/null | awk '{print $1}' | grep -qx "$br_ns"; }

# tbf burst: 1 ms of traffic at the rate, at least 64 KiB (one GSO packet):
# small enough that a multi-MiB message feels the rate, large enough that the
# qdisc's timer (hrtimer) keeps the link busy.
burst_for() {
  local r="$1" num unit bps
  num="${r%%[a-zA-Z]*}"
  unit="${r#"$num"}"
  case "$unit" in
    gbit) bps=$((num * 1000000000)) ;; mbit) bps=$((num * 1000000)) ;;
    kbit) bps=$((num * 1000)) ;; bit | '') bps=$num ;;
    *) echo 65536; return ;;
  esac
  local b=$((bps / 8 / 1000))
  [ "$b" -lt 65536 ] && b=65536
  echo "$b"
}

shape() { # shape NS DEV RATE: tbf on DEV's egress inside NS
  local burst
  burst="$(burst_for "$3")"
  ip -n "$1" link set "$2" txqueuelen 1000
  tc -n "$1" qdisc add dev "$2" root tbf rate "$3" burst "$burst" latency 20ms 2>/dev/null
}

make_node() { # make_node I RATE: returns 1 if the node cannot be made, 3 if tc refuses RATE
  local i="$1" rate="$2" ns
  ns="$(node_ns "$i")"
  # The pair is born inside the node and its peer moved to the bridge namespace:
  # neither end ever exists in the host namespace.
  { ip netns add "$ns" && ip -n "$ns" link set lo up &&
    ip -n "$ns" link add eth0 type veth peer name "veth$i" netns "$br_ns" &&
    ip -n "$ns" addr add "$subnet_prefix.$i/24" dev eth0 && ip -n "$ns" link set eth0 up &&
    ip -n "$br_ns" link set "veth$i" master br0 up; } >/dev/null 2>&1 || return 1
  { shape "$ns" eth0 "$rate" && shape "$br_ns" "veth$i" "$rate"; } || return 3
}

down() {
  local ns
  for ns in $(nodes); do ip netns del "$ns" 2>/dev/null || true; done
  if is_up; then ip netns del "$br_ns" 2>/dev/null || true; fi
  return 0
}

up() {
  local n="${1:-}" rate=10gbit i
  [ $# -gt 0 ] && shift
  while [ $# -gt 0 ]; do
    case "$1" in
      --rate) rate="${2:?--rate needs a value}"; shift 2 ;;
      --rate=*) rate="${1#*=}"; shift ;;
      *) die "up: unknown argument '$1'" ;;
    esac
  done
  case "$n" in '' | *[!0-9]*) die "up: node count must be a number 1-250, got '$n'" ;; esac
  [ "$n" -ge 1 ] && [ "$n" -le 250 ] || die "up: node count must be 1-250, got $n"
  [ "$(id -u)" -eq 0 ] || die "up: needs root (network namespaces)"
  command -v ip >/dev/null && command -v tc >/dev/null || die "up: needs ip and tc (iproute2)"
  if is_up || [ -n "$(nodes)" ]; then die "up: cluster '$name' is already up (cluster.sh down first)"; fi
  # Any failure from here on removes what was made: never a half-made cluster.
  { ip netns add "$br_ns" && ip -n "$br_ns" link set lo up &&
    ip -n "$br_ns" link add br0 type bridge && ip -n "$br_ns" link set br0 up; } >/dev/null 2>&1 ||
    { down; die "up: cannot create network namespaces here"; }
  for ((i = 1; i <= n; i++)); do
    local st=0
    make_node "$i" "$rate" || st=$?
    [ "$st" -ne 3 ] || { down; die "up: tc refused rate '$rate'"; }
    [ "$st" -eq 0 ] || { down; die "up: could not make node $i"; }
  done
  echo "cluster.sh: $n node(s) up, $subnet, tbf rate $rate per link direction"
}

status() {
  if ! is_up; then echo "cluster '$name': down"; return 0; fi
  local list ns i
  list="$(nodes)"
  echo "cluster '$name': up, $(wc -w <<<"$list") node(s), bridge namespace $br_ns"
  for ns in $list; do
    i="${ns##*-node}"
    printf '  node%-3s %-16s %s; %s\n' "$i" "$subnet_prefix.$i" \
      "$(tc -n "$ns" qdisc show dev eth0 | grep -o 'tbf.*rate [^ ]*' | sed 's/ root.*rate/ rate/')" \
      "$(ip -n "$ns" -s link show eth0 | awk '/RX:/{getline; rx=$1} /TX:/{getline; tx=$1} END{printf "rx %d B, tx %d B", rx, tx}')"
  done
}

# ---- mpirun across the nodes ------------------------------------------------------

# Writes the rsh agent: `agent [opts] HOST CMD...` runs CMD (joined and given to
# sh, as ssh does) in HOST's namespace under its own hostname (UTS namespace).
write_agent() {
  cat >"$1" <<EOF
#!/bin/sh
# Generated by scripts/cluster.sh: ssh stand-in for the launchers.
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host="\$1"; shift
i="\${host##*.}"
exec ip netns exec "$name-node\$i" unshare --uts sh -c "hostname node\$i; \$*"
EOF
  chmod +x "$1"
}

mpirun_cmd() {
  local np="" rpn="" launcher="${MPIEXEC:-mpiexec}"
  while [ $# -gt 0 ]; do
    case "$1" in
      -np | -n) np="${2:-}"; shift 2 ;;
      --ranks-per-node) rpn="${2:-}"; shift 2 ;;
      --mpich) launcher=mpiexec.mpich; shift ;;
      --openmpi) launcher=mpiexec.openmpi; shift ;;
      --) shift; break ;;
      *) break ;;
    esac
  done
  [ $# -gt 0 ] || die "mpirun: no program given"
  case "$np" in '' | *[!0-9]* | 0) die "mpirun: -np must be a positive number" ;; esac
  case "$rpn" in '' | *[!0-9]* | 0) die "mpirun: --ranks-per-node must be a positive number" ;; esac
  is_up || die "mpirun: cluster '$name' is down (cluster.sh up N first)"
  local have need=$(((np + rpn - 1) / rpn))
  have="$(nodes | wc -l)"
  [ "$need" -le "$have" ] || die "mpirun: $np ranks at $rpn per node need $need nodes, $have are up"
  tmp="$(mktemp -d /tmp/scaleout-cluster.XXXXXX)" # global: the EXIT trap runs after return
  trap 'rm -rf "$tmp"' EXIT
  write_agent "$tmp/agent"
  local i hosts=()
  for ((i = 1; i <= need; i++)); do
    echo "$subnet_prefix.$i slots=$rpn" >>"$tmp/hostfile"
    hosts+=("$subnet_prefix.$i:$rpn")
  done
  local flavour=mpich version
  version="$("$launcher" --version 2>&1 || true)"
  if grep -qE "Open ?MPI|OpenRTE" <<<"$version"; then flavour=openmpi; fi
  launch "$flavour" "$launcher" "$np" "$(IFS=,; echo "${hosts[*]}")" "$@" &
  # A signal (timeout, ^C) stops the launcher, which stops its ranks; then the EXIT trap.
  lpid=$!
  trap 'kill -TERM "$lpid" 2>/dev/null; wait "$lpid"; exit 143' TERM INT
  wait "$lpid"
}

launch() { # launch FLAVOUR LAUNCHER NP HOST:K,HOST:K,... PROGRAM ARGS...
  local flavour="$1" launcher="$2" np="$3" hosts="$4"
  shift 4
  # mpiexec runs on node1 (its daemons must reach the others over the test range).
  local on1=(ip netns exec "$(node_ns 1)" unshare --uts sh -c 'hostname node1; exec "$@"' sh)
  if [ "$flavour" = openmpi ]; then
    # Idle MPI waits yield the core (docs/CLUSTER.md), unless the caller set it.
    local yield=(--mca mpi_yield_when_idle 1)
    [ -z "${OMPI_MCA_mpi_yield_when_idle:-}" ] || yield=()
    # --bind-to none: every emulated node's daemon sees the machine's cores as
    # its own and would bind its first rank to core 0, all nodes' ranks on one core.
    exec "${on1[@]}" "$launcher" --allow-run-as-root --oversubscribe -np "$np" \
      --hostfile "$tmp/hostfile" --map-by slot --bind-to none \
      --mca plm_rsh_agent "$tmp/agent" --mca plm_rsh_no_tree_spawn 1 \
      --mca oob_tcp_if_include "$subnet" --mca btl_tcp_if_include "$subnet" \
      --mca btl self,vader,tcp "${yield[@]}" "$@"
  fi
  # UCX (MPICH's ch4:ucx) judges "same host" by the boot id, which every
  # namespace shares, and would move inter-node data through shared memory:
  # between nodes it may only use TCP on eth0. Within a node MPICH's own shm
  # module serves, by hydra's node map. FI_*: the same for a ch4:ofi build.
  exec "${on1[@]}" "$launcher" -launcher ssh -launcher-exec "$tmp/agent" -iface eth0 \
    -hosts "$hosts" -n "$np" -genv UCX_TLS self,tcp -genv UCX_NET_DEVICES eth0 \
    -genv FI_PROVIDER tcp -genv FI_TCP_IFACE eth0 "$@"
}

cmd="${1:-}"
[ $# -gt 0 ] && shift
case "$cmd" in
  up) up "$@" ;;
  down) down ;;
  status) status ;;
  mpirun) mpirun_cmd "$@" ;;
  *) die "usage: cluster.sh up N [--rate R] | down | status | mpirun -np P --ranks-per-node K [--mpich] PROG ARGS..." ;;
esac
