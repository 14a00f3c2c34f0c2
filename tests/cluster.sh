#!/usr/bin/env bash
# Emulated nodes (scripts/cluster.sh, docs/CLUSTER.md): up / refusals / mpirun with a
# hostname per node, scaleout's node discovery (2 nodes x 2 ranks), the veth bytes of
# one ring allreduce against what the algorithm sends, a 20-step LeNet-5 data-parallel
# run across 2 nodes, zero2's collectives on scaleout's tcp, then down with nothing left.
# Skips (77) without root or iproute2.
# Usage: cluster.sh path/to/scaleout path/to/cluster_probe
set -uo pipefail
bin=$1 probe=$2
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
cluster=$src/scripts/cluster.sh

skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root"
for t in ip tc unshare; do command -v $t >/dev/null || skip "no '$t' (install-deps: iproute2, util-linux)"; done
# A cluster of our own, beside any a user has up (namespaces named after it).
export SCALEOUT_CLUSTER="sotest$$"
ip netns add "$SCALEOUT_CLUSTER-probe" 2>/dev/null || skip "cannot create network namespaces here"
ip netns del "$SCALEOUT_CLUSTER-probe"

tmp=$(mktemp -d)
trap '"$cluster" down >/dev/null 2>&1; SCALEOUT_CLUSTER=sotestbad$$ "$cluster" down >/dev/null 2>&1; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM # ctest's timeout, ^C: still run the EXIT trap
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
leftovers() { ip netns list | awk '{print $1}' | grep -E "^$1-" || true; }
finish() { # down leaves nothing; a second down is fine. Then the verdict.
  "$cluster" down && "$cluster" down && [ -z "$(leftovers "$SCALEOUT_CLUSTER")" ] && ok ||
    bad "down left: $(leftovers "$SCALEOUT_CLUSTER")"
  echo "cluster: $pass passed, $fail failed"
  exit $((fail > 0))
}
run() { # run NP RPN OUT cmd...: mpirun across the nodes (60 s at most), output in $tmp/OUT
  local np=$1 rpn=$2 out=$3; shift 3
  timeout -k 5 60 "$cluster" mpirun -np "$np" --ranks-per-node "$rpn" "$@" >"$tmp/$out" 2>&1 ||
    { bad "$out: exit $?: $(tail -3 "$tmp/$out")"; return 1; }
}

# up, and the refusals: already up; a rate tc refuses (nothing of it left behind).
"$cluster" up 2 --rate 10gbit >"$tmp/up" 2>&1 || { bad "up: $(cat "$tmp/up")"; exit 1; }
ok
"$cluster" up 2 >"$tmp/up2" 2>&1
[ $? -eq 2 ] && [ "$(wc -l <"$tmp/up2")" -eq 1 ] && ok || bad "up twice: want one line and exit 2: $(cat "$tmp/up2")"
SCALEOUT_CLUSTER=sotestbad$$ "$cluster" up 2 --rate 12parsecs >"$tmp/bad" 2>&1
st=$?
[ $st -eq 2 ] && [ "$(wc -l <"$tmp/bad")" -eq 1 ] && [ -z "$(leftovers sotestbad$$)" ] && ok ||
  bad "bad rate: want one line, exit 2, nothing left: exit $st: $(cat "$tmp/bad") $(leftovers sotestbad$$)"
st="$("$cluster" status)"
grep -q "up, 2 node(s)" <<<"$st" && ok || bad "status: $st"

# One hostname per node, from the UTS namespaces.
run 2 1 hosts hostname && { [ "$(sort "$tmp/hosts" | tr '\n' ' ')" = "node1 node2 " ] && ok ||
  bad "hostnames: $(tr '\n' ' ' <"$tmp/hosts")"; }

# The same through MPICH's hydra, when it is installed.
if command -v mpiexec.mpich >/dev/null; then
  run 2 1 hosts_mpich --mpich hostname && { [ "$(sort "$tmp/hosts_mpich" | tr '\n' ' ')" = "node1 node2 " ] && ok ||
    bad "hostnames (MPICH): $(tr '\n' ' ' <"$tmp/hosts_mpich")"; }
fi

# MPICH 4.0's ch4:ucx can hang in MPI_Finalize over TCP (a rank finishing its UCX
# disconnects while the others wait in the PMI barrier; fixed upstream by
# pmodels/mpich#6596): seen here after the bench, the training run and the 4-rank
# probe alike, so MPI programs run across the nodes under Open MPI only; MPICH's
# launcher is still checked above with a program that does not use MPI.
openmpi=0
grep -qE "Open ?MPI|OpenRTE" <<<"$("${MPIEXEC:-mpiexec}" --version 2>&1)" && openmpi=1
if [ "$openmpi" -eq 0 ]; then
  echo "note: MPI programs across the nodes skipped under MPICH (ch4:ucx finalize hang, pmodels/mpich#6596)"
  finish
fi

# Node discovery: 2 nodes x 2 ranks are 2 nodes to scaleout, and hier across them is right.
run 4 2 nodes "$probe" && {
  [ "$(grep -c "of 2 nodes, node rank [01] of 2" "$tmp/nodes")" -eq 4 ] && ok || bad "node discovery: $(cat "$tmp/nodes")"
}
run 4 2 hier "$bin" bench allreduce --algo hier --sizes 4,256K -i 5 --check && {
  grep -q "4 ranks, 2 node(s)" "$tmp/hier" && ok || bad "bench header: $(head -1 "$tmp/hier")"
}

# Across hosts the leaders' step runs on scaleout's tcp ring by default; =0 keeps MPI.
for mode in auto 0; do
  want="[1-9]"; [ $mode = 0 ] && want=0
  SCALEOUT_COLL_TCP=$mode run 2 1 tcp_$mode "$bin" bench allreduce --algo hier --sizes 4,256K,4M -i 5 --check && {
    grep -Eq "^# hier across nodes: $want[0-9]* steps on scaleout's tcp ring" "$tmp/tcp_$mode" && ok ||
      bad "SCALEOUT_COLL_TCP=$mode: $(grep -E 'across|wrong|error' "$tmp/tcp_$mode")"
  }
done
# No address of the other node offered (an interface that does not exist): every leader
# agrees to stay on MPI, with a warning, and the results are still right.
SCALEOUT_TCP_IF=so-none run 2 1 tcp_none "$bin" bench allreduce --algo hier --sizes 256K -i 3 --check && {
  grep -Eq "^# hier across nodes: 0 steps on scaleout's tcp ring" "$tmp/tcp_none" &&
    grep -q "steps across nodes stay on MPI" "$tmp/tcp_none" && ok || bad "SCALEOUT_TCP_IF=so-none: $(grep -E 'across|tcp' "$tmp/tcp_none")"
}

# Bytes on the links: one ring allreduce of 4 MiB sends 2(p-1)/p * 4 MiB = 4 MiB per rank.
# Bound: TCP/IP + Ethernet headers (66 B per segment of >= 1448 B of payload: 4.6 %),
# the ACKs of the reverse stream (66 B per 2 segments: 2.3 %) and MPI headers, plus
# 64 KiB for the two one-int allreduces around it: algo <= tx <= 1.08 algo + 64 KiB.
run 2 1 bytes "$probe" bytes 1048576 && {
  n=0
  while read -r _ _ rank _ algo _ tx _ rx; do
    n=$((n + 1))
    awk -v a="$algo" -v t="$tx" 'BEGIN { exit !(t >= a && t <= 1.08 * a + 65536) }' && ok ||
      bad "rank $rank sent $tx bytes on its veth, the ring sends $algo (bound: algo .. 1.08 algo + 64 KiB)"
    echo "bytes rank $rank: algorithm $algo B, veth tx $tx B, rx $rx B"
  done < <(grep "^bytes rank" "$tmp/bytes" | tr -d ':')
  [ "$n" -eq 2 ] || bad "byte probe: want 2 ranks' lines: $(cat "$tmp/bytes")"
}

# A 20-step LeNet-5 data-parallel train across the 2 nodes.
data=(--dataset synthetic --synthetic-samples 2048)
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] && data=(--dataset fashion-mnist)
if run 2 1 train "$bin" train --model lenet5 "${data[@]}" --steps 20 --eval-every -1 --progress none \
  --allreduce auto --json "$tmp/train.json"; then
  /usr/bin/python3 -c 'import json,math,sys; j=json.load(open(sys.argv[1])); l=j["epochs"][-1]["loss"]; sys.exit(0 if math.isfinite(l) else 1)' \
    "$tmp/train.json" 2>"$tmp/train.err" && ok || bad "train: no finite loss in the JSON: $(cat "$tmp/train.err")"
fi

# zero2 across the nodes: its reduce-scatters and allgathers (LeNet-5's units are
# above 64 KiB) run on scaleout's tcp and train like dp across the same nodes
# (1e-6); with no interface tcp may use they stay on MPI, say so, and train alike.
same() { # same A B: max |a-b| <= 1e-6 max |a| of two --dump-params files in $tmp
  /usr/bin/python3 - "$tmp/$1" "$tmp/$2" <<'PY'
import array, sys
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[1], "rb").read()); b.frombytes(open(sys.argv[2], "rb").read())
sys.exit(0 if len(a) == len(b) > 0 and max(abs(x - y) for x, y in zip(a, b)) <= 1e-6 * max(map(abs, a)) else 1)
PY
}
zero=(train --model lenet5 --dataset synthetic --synthetic-samples 1280 --steps 10 --eval-every -1 --progress none
  --seed 7 --optimizer adamw --lr 0.001)
if run 2 1 z_dp "$bin" "${zero[@]}" --strategy dp --dump-params "$tmp/z_dp.bin" &&
  run 2 1 z_tcp "$bin" "${zero[@]}" --strategy zero2 --dump-params "$tmp/z_tcp.bin"; then
  same z_dp.bin z_tcp.bin && ! grep -q "stay on MPI" "$tmp/z_tcp" && ok ||
    bad "zero2 across nodes on tcp: not like dp, or not on tcp: $(grep -i -E 'tcp|MPI' "$tmp/z_tcp")"
fi
if SCALEOUT_TCP_IF=so-none run 2 1 z_mpi "$bin" "${zero[@]}" --strategy zero2 --dump-params "$tmp/z_mpi.bin"; then
  same z_dp.bin z_mpi.bin && grep -q "reduce-scatters and allgathers stay on MPI" "$tmp/z_mpi" && ok ||
    bad "zero2 across nodes without tcp: $(grep -i -E 'tcp|MPI' "$tmp/z_mpi")"
fi

# Two pipeline stages, one per node: their messages go over scaleout's TCP connections.
if run 2 1 pipe "$bin" train --model lenet5 "${data[@]}" --steps 10 --eval-every -1 --progress none \
  --batch-size 32 --pipeline-stages 2 --microbatches 4 --json "$tmp/pipe.json"; then
  grep -q "point-to-point with 1 rank(s) over scaleout's tcp connections" "$tmp/pipe" && ok ||
    bad "pipeline across nodes: stage messages not on tcp: $(grep -i tcp "$tmp/pipe")"
fi

finish
