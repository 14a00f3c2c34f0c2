# Sourced by the CLI test scripts (tests/*.sh): the source tree, the MPI
# launcher wrapper that adds this machine's flags, a temporary directory
# removed at exit, and pass/fail counting (ok; bad MESSAGE prints FAIL).
src=${SCALEOUT_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
mpirun=$src/scripts/mpirun.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*"; }
