#!/usr/bin/env bash
# CLI tests of `scaleout bench` and `scaleout tune`: bench --check --algo all
# at np 2 and 3 (every algorithm correct, exit 0; also on registered buffers,
# where hier must run zero-copy), tune writing a table that auto then reads,
# and bad flags exiting 2 with a one-line message.
# Usage: coll_cli.sh SCALEOUT_BINARY MPIRUN_SH
set -uo pipefail
bin="$1"
mpirun="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail=0
ok() { echo "ok: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

for np in 2 3; do
  if bash "$mpirun" -np "$np" "$bin" bench allreduce --check --algo all --sizes 4,12,4100,1M+4 \
       --csv "$tmp/b$np.csv" >"$tmp/b$np.out" 2>&1; then
    bad "bench accepted a malformed size list"
  fi
  if bash "$mpirun" -np "$np" "$bin" bench allreduce --check --algo all -m 4:1M -i 3 -x 1 \
       --csv "$tmp/b$np.csv" --json "$tmp/b$np.json" >"$tmp/b$np.out" 2>&1; then
    ok "bench allreduce --check --algo all np $np"
  else
    bad "bench allreduce np $np"; cat "$tmp/b$np.out"
  fi
  # 19 sizes x 8 algorithms (reference + 7) rows, every #wrong 0.
  rows=$(tail -n +2 "$tmp/b$np.csv" | wc -l)
  wrong=$(tail -n +2 "$tmp/b$np.csv" | awk -F, '$10 != 0' | wc -l)
  [ "$rows" -eq 152 ] && [ "$wrong" -eq 0 ] && ok "csv rows $rows, none wrong" || bad "csv rows $rows wrong $wrong"
  grep -q '"speedup_vs_mpi"' "$tmp/b$np.json" && ok "json written" || bad "json missing"
done
# Registered buffers: every algorithm still correct on them, and hier above
# 64 KiB runs zero-copy (np 3 with emulated nodes of 2: one node has 1 rank,
# so hier falls back to the leader path there: no zero-copy calls).
for args in "2 0 [1-9]" "3 0 [1-9]" "3 2 0"; do
  set -- $args
  if bash "$mpirun" -np "$1" "$bin" bench allreduce --check --registered --algo all --ranks-per-node "$2" \
       --sizes 4,4100,65540,1048580 -i 3 -x 1 >"$tmp/r.out" 2>&1 &&
     grep -Eq "^# hier above the small-message size: $3[0-9]* zero-copy calls" "$tmp/r.out"; then
    ok "bench allreduce --registered np $1 rpn $2"
  else
    bad "bench allreduce --registered np $1 rpn $2"; cat "$tmp/r.out"
  fi
done
# hier's step across nodes as the ring over scaleout's tcp transport, forced on this one host
# (SCALEOUT_COLL_TCP=1; across real or emulated hosts it is the default, tests/cluster.sh):
# the leaders' ring of the copy path (2 nodes of 2), the node ranks' rings of the
# zero-copy path (--registered), a ring of 3 with uneven blocks, and =0 keeping MPI.
for args in "4 2 1 plain [1-9]" "4 2 1 registered [1-9]" "3 1 1 plain [1-9]" "4 2 0 plain 0"; do
  set -- $args
  reg=(); [ "$4" = registered ] && reg=(--registered)
  if SCALEOUT_COLL_TCP=$3 bash "$mpirun" -np "$1" "$bin" bench allreduce --check "${reg[@]}" --algo hier \
       --ranks-per-node "$2" --sizes 4,65540,1048580,4194308 -i 3 -x 1 >"$tmp/t.out" 2>&1 &&
     grep -Eq "^# hier across nodes: $5[0-9]* steps on scaleout's tcp ring" "$tmp/t.out"; then
    ok "hier across nodes, SCALEOUT_COLL_TCP=$3, np $1 rpn $2 $4"
  else
    bad "hier across nodes, SCALEOUT_COLL_TCP=$3, np $1 rpn $2 $4"; cat "$tmp/t.out"
  fi
done
for coll in reduce-scatter allgather bcast; do
  bash "$mpirun" -np 3 "$bin" bench "$coll" --check --algo all --sizes 4,1000,65540 -i 2 >"$tmp/c.out" 2>&1 \
    && ok "bench $coll --check np 3" || { bad "bench $coll"; cat "$tmp/c.out"; }
done

# The vocabulary through the communication thread: every algorithm on bf16 and
# f16 buffers, f32 on a bf16 wire, and the shm and tcp transports, each checked.
for args in "allreduce --dtype bf16" "allreduce --dtype f16 --transport shm" "allreduce --wire bf16" \
            "reduce-scatter --dtype bf16 --transport shm" "allgather --wire f16" "bcast --dtype bf16" \
            "allreduce --handles --transport shm" "reduce-scatter --dtype f16 --transport tcp" "allgather --handles --transport tcp" "bcast --wire bf16 --transport tcp"; do
  # shellcheck disable=SC2086
  if bash "$mpirun" -np 3 "$bin" bench $args --check --algo all --sizes 4,1000,65540 -i 2 >"$tmp/v.out" 2>&1 &&
     grep -q "through the communication thread" "$tmp/v.out"; then
    ok "bench $args --check np 3"
  else
    bad "bench $args"; cat "$tmp/v.out"
  fi
done

# tune -> table -> auto reads it (bench --tuning and SCALEOUT_TUNING).
if bash "$mpirun" -np 2 "$bin" tune --out "$tmp/t.tune" -m 4:64K -i 3 >"$tmp/t.out" 2>&1 &&
   head -1 "$tmp/t.tune" | grep -q '^scaleout-tuning v[12] p=2 ranks_per_node=0 gamma='; then
  ok "tune wrote a table"
else
  bad "tune"; cat "$tmp/t.out"
fi
grep -q '^fit ring alpha=' "$tmp/t.tune" && grep -q '^\* ' "$tmp/t.tune" && ok "table has fits and rules" || bad "table content"
SCALEOUT_TUNING="$tmp/t.tune" bash "$mpirun" -np 2 "$bin" bench allreduce --check --algo auto -m 4:64K -i 2 \
  >"$tmp/a.out" 2>&1 && ! grep -q "ignoring SCALEOUT_TUNING" "$tmp/a.out" && ok "auto reads SCALEOUT_TUNING" || { bad "auto with table"; cat "$tmp/a.out"; }
bash "$mpirun" -np 2 "$bin" bench allreduce --check --algo auto --tuning "$tmp/t.tune" --sizes 4,100K -i 2 \
  >"$tmp/a.out" 2>&1 && ok "bench --tuning" || { bad "bench --tuning"; cat "$tmp/a.out"; }

# --levels: 2 emulated nodes of 2 ranks; each level is fitted on its own group
# (2 ranks within a node, the 2 node leaders) and predict composes them.
if bash "$mpirun" -np 4 "$bin" tune --out "$tmp/l.tune" -m 4:64K -i 3 --ranks-per-node 2 --levels >"$tmp/l.out" 2>&1 &&
   head -1 "$tmp/l.tune" | grep -q '^scaleout-tuning v3 p=4 ranks_per_node=2' &&
   grep -q '^level node p=2$' "$tmp/l.tune" && grep -q '^level link p=2$' "$tmp/l.tune" &&
   grep -q '^node fit ring alpha=' "$tmp/l.tune" && grep -q '^link fit ring alpha=' "$tmp/l.tune"; then
  ok "tune --levels wrote both levels"
else
  bad "tune --levels"; cat "$tmp/l.out" "$tmp/l.tune"
fi
"$bin" predict --model lenet5 --nodes 1,2,4 --ranks-per-node 2 --steps 2 --tune "$tmp/l.tune" >"$tmp/lp.out" 2>&1 &&
  grep -q "allreduce per level from the tuning table .*(node: measured, link: measured on 2 nodes)" "$tmp/lp.out" &&
  ok "predict composes the levels" || { bad "predict with levels"; cat "$tmp/lp.out"; }

# Banded fit: tune prints per-algorithm in-sample counts (line / bands) and the
# table it writes loads; bench reports the model error per row and a summary.
if bash "$mpirun" -np 2 "$bin" tune --out "$tmp/b.tune" -m 4:1M -i 3 --repeat 2 --band-edges 4K,64K \
     >"$tmp/tb.out" 2>&1 && [ "$(grep -c 'line .*, bands .* within 25%' "$tmp/tb.out")" -eq 6 ]; then
  ok "tune --repeat --band-edges"
else
  bad "tune bands"; cat "$tmp/tb.out"
fi
# The fit is measured where the trainer's gradients live: registered buffers,
# so hier runs zero-copy above its small-message size; --plain measures the copy path.
grep -q ' memory=registered$' "$tmp/b.tune" &&
  grep -Eq '^# measured on registered buffers.* [1-9][0-9]* zero-copy calls, 0 through the window' "$tmp/tb.out" &&
  ok "tune measures on registered buffers" || { bad "tune registered"; cat "$tmp/tb.out"; head -1 "$tmp/b.tune"; }
if bash "$mpirun" -np 2 "$bin" tune --plain --out "$tmp/p.tune" -m 128K:256K -i 2 --band-edges none >"$tmp/tp.out" 2>&1 &&
   grep -q ' memory=plain$' "$tmp/p.tune" && grep -Eq ' 0 zero-copy calls, [1-9][0-9]* through the window' "$tmp/tp.out"; then
  ok "tune --plain measures the copy path"
else
  bad "tune --plain"; cat "$tmp/tp.out"
fi
if bash "$mpirun" -np 2 "$bin" bench allreduce --algo all --tuning "$tmp/b.tune" -m 4:1M -i 2 -x 1 \
     --csv "$tmp/m.csv" >"$tmp/m.out" 2>&1 && grep -q '^# model (.*) within 25% of the measured time: mpi [0-9]*/19 ring' "$tmp/m.out" &&
   head -1 "$tmp/m.csv" | grep -q ',model_us,model_err_pct$'; then
  ok "bench model error column and summary"
else
  bad "bench model summary"; cat "$tmp/m.out"
fi

# Bad input exits 2 with one line (no MPI needed to reject it).
for args in "bench allreduce --bogus" "bench allreduce -m 8:4" "bench allreduce --algo nope" \
            "bench gather" "bench" "tune --ranks-per-node -1" "tune -m x:y" "tune --band-edges 64K,4K" "tune --repeat 0" "bench bcast -i abc" \
            "bench allreduce --dtype f8" "bench allreduce --dtype bf16 --wire f16" "bench allreduce --transport udp" \
            "bench allreduce --dtype bf16 --algo MPI_Allreduce"; do
  # shellcheck disable=SC2086
  "$bin" $args >"$tmp/e.out" 2>&1
  rc=$?
  lines=$(wc -l <"$tmp/e.out")
  [ "$rc" -eq 2 ] && [ "$lines" -eq 1 ] && ok "'$args' exits 2" || { bad "'$args' exit $rc, $lines lines"; cat "$tmp/e.out"; }
done
exit $fail
