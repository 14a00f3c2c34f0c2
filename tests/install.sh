#!/usr/bin/env bash
# The installed scaleout, used from outside the source tree (cmake/install.cmake).
#   install.sh BUILD_DIR lib      cmake --install into a fresh prefix; the headers, libraries,
#                                 command, scaleout.pc and CMake package are there and name no
#                                 source-tree path; a small engine program (tests/install_probe)
#                                 builds through pkg-config and through find_package(scaleout),
#                                 and its LeNet-5 parameter count is the installed `scaleout models`'.
#   install.sh BUILD_DIR example  the same install; examples/ builds with its Makefile and its
#                                 CMakeLists.txt, and train_lenet5 trains 20 steps on 2 ranks to a
#                                 finite loss. Skipped (77) while the installed tree has no
#                                 scaleout/job.h, and in builds without MPI.
# Sources are copied out of the tree first, and only the prefix's headers may be included.
# Environment (tests/cmake/install.cmake): SCALEOUT_SOURCE_DIR, SO_CC (the build's compiler),
# SO_INSTALL_EXPECT (library files the build installs), MPIEXEC (MPI builds).
set -euo pipefail

build="${1:?usage: install.sh BUILD_DIR lib|example}"
mode="${2:?usage: install.sh BUILD_DIR lib|example}"
src="${SCALEOUT_SOURCE_DIR:?}"
cc="${SO_CC:-cc}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/scaleout-install.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
t0=$SECONDS

fail() { echo "install: FAIL: $*" >&2; exit 1; }
skip() { echo "install: SKIP: $*"; exit 77; }
say() { echo "install: $* [$((SECONDS - t0)) s]"; }
# run LOG CMD...: CMD's output goes to LOG, shown if it fails.
run() {
    local log="$1"; shift
    local rc=0
    "$@" >"$log" 2>&1 || rc=$?
    [ "$rc" = 0 ] || { cat "$log" >&2; fail "$* (exit $rc)"; }
}

prefix="$tmp/prefix"
run "$tmp/install.log" cmake --install "$build" --prefix "$prefix"
pc="$(find "$prefix" -path '*/pkgconfig/scaleout.pc')"
[ -n "$pc" ] || fail "no pkgconfig/scaleout.pc under $prefix"
libdir="$(dirname "$(dirname "$pc")")"
say "installed into $prefix (libdir ${libdir#"$prefix"/})"

# pkg-config sees this prefix's scaleout.pc and nothing else.
export PKG_CONFIG_LIBDIR="$libdir/pkgconfig"
unset PKG_CONFIG_PATH
cp -r "$src/examples" "$tmp/examples"
cp -r "$src/tests/install_probe" "$tmp/probe"

# check_headers_from_prefix FILE CFLAGS...: every scaleout header FILE includes
# resolves inside the prefix (not the source tree's include/).
check_headers_from_prefix() {
    local file="$1"; shift
    local deps
    deps="$("$cc" -std=c11 "$@" -M "$file" | tr -d '\\' | tr ' ' '\n' | grep 'scaleout/' || true)"
    [ -n "$deps" ] || fail "$file includes no scaleout header?"
    local d
    for d in $deps; do
        case "$(realpath "$d")" in
        "$(realpath "$prefix")"/*) ;;
        *) fail "$file includes $d, outside the installed prefix" ;;
        esac
    done
}

# models_lenet5: LeNet-5's parameter count in `scaleout models`.
models_lenet5() { "$prefix/bin/scaleout" models | awk '$1 == "lenet5" { print $4 }'; }

if [ "$mode" = lib ]; then
    for h in "$src"/include/scaleout/*.h; do
        [ -f "$prefix/include/scaleout/${h##*/}" ] || fail "header ${h##*/} not installed"
    done
    for f in ${SO_INSTALL_EXPECT:?}; do
        [ -f "$libdir/$f" ] || fail "$f not installed in $libdir"
    done
    [ -x "$prefix/bin/scaleout" ] || fail "bin/scaleout not installed"
    for f in scaleoutConfig.cmake scaleoutConfigVersion.cmake scaleoutTargets.cmake; do
        [ -f "$libdir/cmake/scaleout/$f" ] || fail "cmake/scaleout/$f not installed"
    done
    # Relocatable and self-contained: no file of the package names the source or build tree.
    if grep -rlF -e "$src" -e "$(realpath "$build")" "$libdir/pkgconfig" "$libdir/cmake/scaleout"; then
        fail "the installed package files above name the source or build tree"
    fi
    want="$(models_lenet5)"
    [ -n "$want" ] || fail "the installed 'scaleout models' lists no lenet5"

    # pkg-config: the static link line lists the libraries in order, then their dependencies.
    read -r -a cflags <<<"$(pkg-config --cflags scaleout)"
    read -r -a libs <<<"$(pkg-config --libs --static scaleout)"
    [ "$(realpath "$(pkg-config --variable=includedir scaleout)")" = "$(realpath "$prefix/include")" ] ||
        fail "scaleout.pc's includedir is not $prefix/include: $(pkg-config --variable=includedir scaleout)"
    [[ "${libs[*]}" =~ -lscaleout\ .*-lscaleout_core\ .*-ldnnl\ .*-lz\ .*-lm ]] ||
        fail "pkg-config --libs --static scaleout: ${libs[*]}"
    say "pkg-config: ${cflags[*]} | ${libs[*]}"
    check_headers_from_prefix "$tmp/probe/probe.c" "${cflags[@]}"
    run "$tmp/probe/cc.log" "$cc" -std=c11 -Wall -Wextra -Werror "${cflags[@]}" "$tmp/probe/probe.c" \
        -o "$tmp/probe/probe" "${libs[@]}"
    got="$("$tmp/probe/probe" | awk '/^lenet5 parameters/ { print $3 }')"
    [ "$got" = "$want" ] || fail "probe (pkg-config) counts '$got' LeNet-5 parameters, scaleout models $want"
    say "probe through pkg-config: $got parameters, as scaleout models"

    # The CMake package: find_package(scaleout) from this prefix only.
    run "$tmp/probe/cmake.log" cmake -S "$tmp/probe" -B "$tmp/probe/build" -DCMAKE_C_COMPILER="$cc" \
        -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
    dir="$(sed -n 's/^scaleout_DIR:PATH=//p' "$tmp/probe/build/CMakeCache.txt")"
    [ "$(realpath "$dir")" = "$(realpath "$libdir/cmake/scaleout")" ] || fail "find_package(scaleout) found $dir"
    run "$tmp/probe/build.log" cmake --build "$tmp/probe/build"
    got="$("$tmp/probe/build/probe" | awk '/^lenet5 parameters/ { print $3 }')"
    [ "$got" = "$want" ] || fail "probe (CMake package) counts '$got' LeNet-5 parameters, scaleout models $want"
    say "probe through find_package(scaleout): $got parameters"
    say "ok"
    exit 0
fi

[ "$mode" = example ] || fail "unknown mode $mode (lib or example)"
if [ ! -f "$prefix/include/scaleout/job.h" ] || [ ! -f "$libdir/libscaleout_job.a" ]; then
    skip "the installed tree has no scaleout/job.h and libscaleout_job.a (so_job not in this build yet): examples/ not built"
fi
if [ ! -f "$libdir/libscaleout_comm.a" ]; then
    skip "built without MPI (SCALEOUT_MPI=OFF): the data-parallel example is not built"
fi
: "${MPIEXEC:?MPIEXEC must name the launcher of the MPI scaleout was built with}"
mpicc="$(pkg-config --variable=mpicc scaleout)"
[ -x "$mpicc" ] || fail "scaleout.pc's mpicc '$mpicc' is not an executable"
read -r -a cflags <<<"$(pkg-config --cflags scaleout)"
check_headers_from_prefix "$tmp/examples/train_lenet5.c" "${cflags[@]}"

# The Makefile finds scaleout.pc from SCALEOUT_PREFIX alone when the libdir is
# lib/ or lib64/ (a multiarch libdir, for the /usr prefix, is searched anyway).
export PKG_CONFIG_LIBDIR="$tmp/no-system-pc"
case "${libdir#"$prefix"/}" in
lib | lib64) ;;
*) export PKG_CONFIG_PATH="$libdir/pkgconfig" ;;
esac
run "$tmp/make.log" make -C "$tmp/examples" SCALEOUT_PREFIX="$prefix" CFLAGS="-O2 -Wall -Wextra -Werror"
say "examples/Makefile built train_lenet5 with $mpicc"

read -r -a flags2 <<<"$(bash "$src/scripts/mpirun-flags.sh" 2 "$MPIEXEC")"
# check_run LOG NP: one summary, from rank 0 of NP ranks, with a finite final loss.
check_run() {
    local log="$1" np="$2" loss ips
    grep -q "^training lenet5 on .*: $np ranks" "$log" || { cat "$log" >&2; fail "no banner for $np ranks"; }
    [ "$(grep -c '^final loss:' "$log")" = 1 ] || { cat "$log" >&2; fail "not one 'final loss' line"; }
    loss="$(awk '/^final loss:/ { print $3 }' "$log")"
    ips="$(awk '/^images\/s:/ { print $2 }' "$log")"
    awk -v l="$loss" -v i="$ips" 'BEGIN { exit !(l ~ /^[0-9.]+$/ && l > 0 && l < 100 && i > 0) }' ||
        { cat "$log" >&2; fail "final loss '$loss', images/s '$ips'"; }
}
timeout 120 "$MPIEXEC" "${flags2[@]}" -np 2 "$tmp/examples/train_lenet5" --steps 20 >"$tmp/run2.log" 2>&1 ||
    { cat "$tmp/run2.log" >&2; fail "mpiexec -np 2 train_lenet5 --steps 20"; }
check_run "$tmp/run2.log" 2
say "2 ranks, 20 steps: $(grep -E '^(training|final loss|images/s|test accuracy)' "$tmp/run2.log" | paste -sd ' ')"

# The same program through the CMake package, on 2 ranks again (with another MPI's library
# they would be 2 singletons); synthetic data, 5 steps: the build is what is checked.
run "$tmp/examples/cmake.log" cmake -S "$tmp/examples" -B "$tmp/examples/build" -DCMAKE_C_COMPILER="$cc" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF \
    -DCMAKE_C_FLAGS="-Wall -Wextra -Werror"
run "$tmp/examples/build.log" cmake --build "$tmp/examples/build"
timeout 60 "$MPIEXEC" "${flags2[@]}" -np 2 "$tmp/examples/build/train_lenet5" --dataset synthetic --steps 5 \
    >"$tmp/run-cmake.log" 2>&1 || { cat "$tmp/run-cmake.log" >&2; fail "train_lenet5 (CMake build), 2 ranks"; }
check_run "$tmp/run-cmake.log" 2
say "examples/CMakeLists.txt: built; 2 ranks, 5 synthetic steps ok"
say "ok"
