#!/usr/bin/env bash
# Installs the Debian packages scaleout needs to build, test and benchmark.
# Idempotent: packages already present are skipped, and apt-get runs only when
# something is missing. Uses sudo when not root.
set -euo pipefail

PACKAGES=(
  # pkg-config (Debian 12: the pkgconf implementation) reads the installed
  # scaleout.pc for examples/Makefile and tests/install.sh.
  build-essential cmake pkg-config
  libdnnl-dev zlib1g-dev libcmocka-dev
  # JPEG decoding of image data sets (--dataset imagefolder|tfrecord, docs/DATA.md)
  libturbojpeg0-dev
  openmpi-bin libopenmpi-dev mpich libmpich-dev
  dataset-fashion-mnist
  clang libclang-rt-dev libomp-dev
  python3-torch python3-torchvision
  # The PyTorch peer's BLAS: Debian's torch calls the libblas.so.3 alternative,
  # which without this is netlib's reference BLAS (3 GFLOP/s GEMM: every
  # Linear layer 10-30x slow). The OpenMP build follows torch.set_num_threads.
  libopenblas0-openmp
  gnuplot-nox
  chromium # tests/report_cli.sh renders `scaleout report` pages headless
  # tests/cluster.sh: network namespaces, veth, bridge and tbf (ip, tc); unshare
  # for the per-node hostname comes with util-linux (essential, always there).
  iproute2
)
# Optional extras (MPICH variant, profiling, browser tests) are asked for with
# SCALEOUT_DEPS_EXTRA="mpich libmpich-dev ..." so the default set stays small.
read -r -a EXTRA <<< "${SCALEOUT_DEPS_EXTRA:-}"
# SLURM=1 (make deps SLURM=1; make test sets it): Debian's Slurm 22.05 --
# slurmctld, slurmd, the clients and munge -- for scripts/slurm-local.sh and
# tests/slurm.sh. Its services are not used: slurm-local.sh runs private ones.
if [ "${SLURM:-0}" = 1 ]; then
  EXTRA+=(slurm-wlm)
fi

missing=()
for p in "${PACKAGES[@]}" "${EXTRA[@]}"; do
  [ -n "$p" ] || continue
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
# A real trace viewer for the timeline test (tests/prof_viewer.py): speedscope
# from the npm registry (a pinned version; Debian has none, and Debian's
# Chromium cannot open chrome://tracing headless). npm comes with nodejs.
npm_tools() {
  command -v npm >/dev/null || return 0
  [ -f "$(npm root -g)/speedscope/dist/release/index.html" ] && return 0
  local s=""
  [ "$(id -u)" -eq 0 ] || s=sudo
  echo "install-deps: npm install -g speedscope@1.25.0"
  $s npm install -g --no-audit --no-fund speedscope@1.25.0 >/dev/null
}
command -v npm >/dev/null || missing+=(nodejs npm)
npm_tools
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all packages present"
  exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
npm_tools
