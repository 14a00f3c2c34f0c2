#!/usr/bin/env bash
# mpiexec with the flags this machine needs, so users and tests never add them:
#   scripts/mpirun.sh -np 4 ./build/scaleout train ...
# Detects Open MPI vs MPICH from `mpiexec --version` (scripts/mpirun-flags.sh).
# The launcher is $MPIEXEC if set (CMake sets it to the one matching the MPI the
# tests were built with, e.g. mpiexec.mpich), else `mpiexec` from PATH.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
launcher="${MPIEXEC:-mpiexec}"

# Find the rank count among the arguments (-np N, -n N, --np N, -np=N).
np=1
args=("$@")
for ((i = 0; i < ${#args[@]}; i++)); do
  case "${args[i]}" in
    -np | -n | --np | --n) np="${args[i + 1]:-1}"; break ;;
    -np=* | -n=* | --np=* | --n=*) np="${args[i]#*=}"; break ;;
  esac
done
case "$np" in
  '' | *[!0-9]*) echo "mpirun.sh: bad rank count '$np'" >&2; exit 2 ;;
esac

read -r -a flags <<<"$("$here/mpirun-flags.sh" "$np" "$launcher")"
exec "$launcher" "${flags[@]}" "$@"
