#!/usr/bin/env bash
# Checks the layering rules of docs/ARCHITECTURE.md on the sources:
# the engine (nn, backend, models, optim, data, train, pipe, core) never includes MPI,
# comm never includes the neural-network or data headers, the CLI never
# includes MPI (it reaches other ranks through the library), and the
# libraries (the job layer included) never exit and never print results.
set -u
src=${SCALEOUT_SOURCE_DIR:?}/src
pass=0 fail=0
check() { # check DESCRIPTION PATTERN DIRS...
  local what=$1 pat=$2; shift 2
  local hits
  hits=$(grep -rEn "^[[:space:]]*#[[:space:]]*include[[:space:]]*[<\"]($pat)" "$@" 2>/dev/null)
  if [ -n "$hits" ]; then fail=$((fail + 1)); echo "FAIL: $what:"; echo "$hits"; else pass=$((pass + 1)); fi
}
check "engine includes MPI" "mpi\.h|scaleout/comm" "$src/core" "$src/nn" "$src/backend" "$src/models" \
  "$src/optim" "$src/data" "$src/train" "$src/ckpt" "$src/prof" "$src/pipe" "$src/compress"
check "comm includes NN code" "scaleout/(graph|model|backend|zoo|optim|data|train)\.h" "$src/comm"
check "library code includes CLI headers" "cli\.h|dist\.h|progress\.h" "$src/core" "$src/nn" "$src/backend" \
  "$src/models" "$src/optim" "$src/data" "$src/train" "$src/comm" "$src/pipe"
check "CLI includes MPI" "mpi\.h" "$src/cli"
check "the job layer includes CLI headers" "cli\.h|progress\.h|kernels\.h|bench\.h" "$src/job"
# Results are printed by the CLI only (files a library is asked to write use fprintf).
hits=$(grep -rEn "\b(printf|puts)[[:space:]]*\(" "$src/job" "$src/train" "$src/ckpt" "$src/pipe" "$src/nn" \
  "$src/optim" "$src/data" "$src/models" 2>/dev/null)
if [ -n "$hits" ]; then fail=$((fail + 1)); echo "FAIL: library prints:"; echo "$hits"; else pass=$((pass + 1)); fi
# Libraries never exit: only the CLI decides (abort paths go through so_comm_abort / MPI_Abort).
hits=$(grep -rEn "\bexit[[:space:]]*\(" "$src/core" "$src/nn" "$src/backend" "$src/models" "$src/optim" "$src/data" \
  "$src/train" "$src/pipe" "$src/job" "$src/ckpt" "$src/prof" 2>/dev/null)
if [ -n "$hits" ]; then fail=$((fail + 1)); echo "FAIL: library calls exit():"; echo "$hits"; else pass=$((pass + 1)); fi
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
