#!/usr/bin/env bash
# Prints the extra mpiexec flags this machine needs for NP ranks, one line:
#   Open MPI: --allow-run-as-root when root, --oversubscribe when NP > cores;
#   MPICH (Hydra) and others: nothing.
# Usage: scripts/mpirun-flags.sh NP [MPIEXEC]   (MPIEXEC defaults to $MPIEXEC, then mpiexec)
set -euo pipefail

np="${1:?usage: mpirun-flags.sh NP [MPIEXEC]}"
launcher="${2:-${MPIEXEC:-mpiexec}}"

# Open MPI answers "mpiexec (OpenRTE) 4.1.4" / "(Open MPI)"; Hydra prints "HYDRA build details".
version="$("$launcher" --version 2>&1 || true)"
flags=()
if grep -qE "Open ?MPI|OpenRTE" <<<"$version"; then
  if [ "$(id -u)" -eq 0 ]; then
    flags+=(--allow-run-as-root)
  fi
  cores="$(nproc 2>/dev/null || echo 1)"
  if [ "$np" -gt "$cores" ]; then
    flags+=(--oversubscribe)
  fi
fi
echo "${flags[*]:-}"
