#!/usr/bin/env bash
# The comm module's files call one way (docs/ARCHITECTURE.md, "The comm
# module's layers"): from the symbols each object of libscaleout_comm.a
# defines and uses (nm), every call must go to a file of the same or a lower
# layer, and the calls must form no cycle, not even within a layer. A file
# missing from the table below is an error too, so a new file gets a layer.
# Usage: comm_layers.sh LIBSCALEOUT_COMM.A
set -u
lib=${1:?usage: comm_layers.sh libscaleout_comm.a}
command -v nm > /dev/null || { echo "skipped: no nm"; exit 77; }
# layer: files, bottom first (the table docs/ARCHITECTURE.md shows)
layers='
0 tune_text names comm_env wait reduce cost_model version tcp_wire
1 tp_wait tp_mpi tp_shm tcp_conn tcp_p2p tp_tcp shm regbuf tp_get
2 hier_share coll_util allreduce_ring allreduce_rd allreduce_rabenseifner allreduce_tree allreduce_mpi allreduce_hier_across allreduce_hier_zc allreduce_hier reduce_scatter_ring reduce_scatter_mpi reduce_scatter_hier allgather_ring allgather_mpi allgather_hier bcast_binomial bcast_pipeline bcast_mpi
3 tune dispatch coll
4 engine
5 comm p2p gather
6 vocab async config_check measure
'
nm -A "$lib" 2> /dev/null | python3 -c '
import sys, collections
layer = {}
for line in sys.argv[1].strip().splitlines():
    k, *files = line.split()
    for f in files:
        layer[f] = int(k)
defs, uses = collections.defaultdict(set), collections.defaultdict(set)
for l in sys.stdin:
    parts = l.rstrip("\n").split(":", 2)
    if len(parts) < 3:
        continue
    f, p = parts[1].replace(".c.o", ""), parts[2].split()
    if len(p) == 3 and p[1] in "TDBR":
        defs[f].add(p[2])
    elif len(p) == 2 and p[0] == "U":
        uses[f].add(p[1])
owner = {s: f for f, d in defs.items() for s in d}
files = set(defs) | set(uses)
calls = {f: {owner[s] for s in uses[f] if s in owner and owner[s] != f} for f in files}
bad = 0 if files else 1  # no objects read: the wrong file, not a clean library
for f in sorted(files):
    if f not in layer:
        print("FAIL: %s.c has no layer in tests/comm_layers.sh" % f); bad += 1
for f in sorted(files):
    for g in sorted(calls[f]):
        if f in layer and g in layer and layer[g] > layer[f]:
            print("FAIL: %s.c (layer %d) calls up into %s.c (layer %d)" % (f, layer[f], g, layer[g])); bad += 1
# Cycles: Tarjan strongly connected components.
index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(10000)
def visit(v):
    index[v] = low[v] = n[0]; n[0] += 1; stack.append(v); on.add(v)
    for w in calls[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        sccs.append(comp)
for v in sorted(files):
    if v not in index:
        visit(v)
for comp in sccs:
    if len(comp) > 1:
        print("FAIL: a call cycle among %s" % ", ".join(sorted(c + ".c" for c in comp))); bad += 1
print("%d files, %d calls between them, %d problems" % (len(files), sum(len(c) for c in calls.values()), bad))
sys.exit(1 if bad else 0)
' "$layers"
