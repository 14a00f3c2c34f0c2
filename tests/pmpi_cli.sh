#!/usr/bin/env bash
# libscaleout-prof.so (PMPI interposition, LD_PRELOAD): the counts and sizes
# it records must match what the program ran:
#  - tests/pmpi_prog.c at np=3: a known number of calls of each kind and size,
#    including requests completed by Waitany/Waitsome/Testany/Testsome and
#    persistent requests (MPI_Send_init/MPI_Recv_init; with MPI 4, as in
#    MPICH, persistent collectives) started with MPI_Start/MPI_Startall
#  - `scaleout bench allreduce --algo mpi` at np=2: warm-up + iterations
#    MPI_Iallreduce per message size
# and `scaleout report` reads its output.
# Usage: pmpi_cli.sh path/to/scaleout path/to/libscaleout-prof.so path/to/pmpi_prog
set -u
bin=$1 lib=$2 prog=$3
. "$(dirname "$0")/script_lib.sh"

# `env` inside the launcher: only the ranks get the library, with either MPI.
if SCALEOUT_PMPI_OUT=$tmp/prog.json "$mpirun" -np 3 env LD_PRELOAD="$lib" "$prog" >"$tmp/prog.log" 2>&1; then
  ok
  persistent=0
  grep -q "persistent collectives: yes" "$tmp/prog.log" && persistent=1
  python3 - "$tmp/prog.json" $persistent <<'PY' && ok || bad "pmpi_prog counts"
import json, sys
p = json.load(open(sys.argv[1]))
assert p["format"] == "scaleout-profile" and len(p["ranks"]) == 3
want = {  # call: (calls, bytes per call, size class)
    "MPI_Allreduce": (5, 400, 512), "MPI_Bcast": (3, 1000, 1024), "MPI_Iallreduce": (2, 64, 64),
    "MPI_Sendrecv": (4, 16, 16), "MPI_Isend": (1, 32, 32), "MPI_Irecv": (1, 32, 32), "MPI_Barrier": (1, 0, 1),
    "MPI_Alltoall": (1, 24, 32), "MPI_Allgather": (1, 36, 64), "MPI_Reduce_scatter_block": (1, 48, 64),
    # completed by Waitany, Waitsome, Testany, Testsome
    "MPI_Ibcast": (2, 200, 256), "MPI_Iallgather": (2, 60, 64), "MPI_Ialltoall": (2, 12, 16),
    "MPI_Ireduce_scatter_block": (2, 24, 32),
    # persistent: one call per MPI_Start(all) completed
    "MPI_Send_init": (3, 48, 64), "MPI_Recv_init": (3, 48, 64)}
if sys.argv[2] == "1":  # MPI 4: persistent collectives
    want.update({"MPI_Allreduce_init": (4, 80, 128), "MPI_Bcast_init": (2, 300, 512), "MPI_Barrier_init": (1, 0, 1)})
for r in p["ranks"]:
    got = {c["collective"]: c for c in r["comm"]}
    assert set(got) == set(want), (r["rank"], sorted(got))
    for name, (calls, size, cls) in want.items():
        c = got[name]
        assert c["calls"] == calls and c["bytes"] == calls * size, (name, c["calls"], c["bytes"])
        assert [(s["max_bytes"], s["count"]) for s in c["sizes"]] == [(cls, calls)], (name, c["sizes"])
print("pmpi_prog: all", len(want), "call kinds match on 3 ranks", "(with" if sys.argv[2] == "1" else "(without",
      "persistent collectives)")
PY
  grep -q "^MPI_Allreduce  *512  *5 " "$tmp/prog.json.txt" && ok || bad "text table: $(cat "$tmp/prog.json.txt")"
  "$bin" report "$tmp/prog.json" --text >"$tmp/report.txt" 2>&1 && grep -q "MPI_Reduce_scatter_block" "$tmp/report.txt" &&
    ok || bad "report of the PMPI profile: $(head -5 "$tmp/report.txt")"
else
  bad "pmpi_prog under the library: $(tail -5 "$tmp/prog.log")"
fi

# The OSU-style benchmark: 3 sizes x (2 warm-up + 10 timed) MPI_Iallreduce per rank.
if SCALEOUT_PMPI_OUT=$tmp/bench.json "$mpirun" -np 2 env LD_PRELOAD="$lib" "$bin" bench allreduce --algo mpi \
  -m 1K:4K --warmup 2 --iterations 10 >"$tmp/bench.log" 2>&1; then
  python3 - "$tmp/bench.json" <<'PY' && ok || bad "bench counts"
import json, sys
p = json.load(open(sys.argv[1]))
for r in p["ranks"]:
    ia = [c for c in r["comm"] if c["collective"] == "MPI_Iallreduce"][0]
    sizes = {s["max_bytes"]: s["count"] for s in ia["sizes"]}
    assert all(sizes.get(b) == 12 for b in (1024, 2048, 4096)), sizes
print("bench allreduce: 12 MPI_Iallreduce per size on both ranks")
PY
else
  bad "bench under the library: $(tail -5 "$tmp/bench.log")"
fi

echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
