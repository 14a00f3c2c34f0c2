# The two commands of the README: `make demo` and `make test`. Everything else
# is CMake; this file only chains install -> configure -> build -> run.
BUILD ?= build
ASAN_BUILD ?= build-asan
MPICH_BUILD ?= build-mpich
CLANG_BUILD ?= build-clang
JOBS ?= 2
CMAKE_FLAGS ?=
ifeq ($(CI),true)
  CMAKE_FLAGS += -DSCALEOUT_WERROR=ON
endif
DATA ?= /usr/share/datasets/fashion-mnist
NP ?= 2

.PHONY: all deps build demo demo-gpt2 test test-asan test-mpich test-clang bench clean

all: build

# SLURM=1 also installs Debian's Slurm (scripts/slurm-local.sh, tests/slurm.sh).
SLURM ?= 0
# The test-only environment hooks (src/core/test_hooks.h): on for the test
# builds only, so `make` and `make demo` build a binary without them.
TEST_HOOKS ?= OFF

deps:
	@SLURM=$(SLURM) scripts/install-deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DSCALEOUT_TEST_HOOKS=$(TEST_HOOKS) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)

demo: build
	scripts/demo.sh $(BUILD)/scaleout $(DATA) $(NP)

# A small GPT-2 trained on Debian's fortunes for a few minutes, then text generated from it.
demo-gpt2: build
	scripts/demo-gpt2.sh $(BUILD)/scaleout demo-gpt2

# With Slurm installed, so the ctest `slurm` runs instead of skipping.
test: SLURM = 1
test: TEST_HOOKS = ON
test: build test-asan test-mpich test-clang
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# Sanitizer build: the unit tests (not the long end-to-end runs) under ASan+UBSan,
# at -O1 as ASan's authors advise (asserts stay on): the reference kernels at -O0
# made this pass 220 s instead of 100.
test-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_C_FLAGS_DEBUG=-g -O1" -DSCALEOUT_SANITIZE=ON \
	  -DSCALEOUT_WERROR=ON -DSCALEOUT_TEST_HOOKS=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS) -L unit

# The MPI layer and data-parallel tests again against MPICH instead of Open MPI;
# SCALEOUT_TEST_SECOND_MPI=1 lets the long end-to-end scripts skip what runs
# in one process or repeats a case (tests/ckpt.sh, tests/pipe_cli.sh). The
# collectives run on 1-5 ranks there; 7 and 8 oversubscribed ranks of MPICH,
# which busy-polls, add minutes and no path the smaller worlds do not take.
test-mpich: deps
	cmake -S . -B $(MPICH_BUILD) -DCMAKE_BUILD_TYPE=Release -DSCALEOUT_WERROR=ON \
	  -DSCALEOUT_TEST_HOOKS=ON -DMPI_C_COMPILER=/usr/bin/mpicc.mpich >/dev/null
	cmake --build $(MPICH_BUILD) -j $(JOBS)
	SCALEOUT_TEST_SECOND_MPI=1 ctest --test-dir $(MPICH_BUILD) --output-on-failure -L mpi -E '_np[78]$$'

# The kernels per ISA (and the BF16 ones) again with clang (AOCC, icx and the fuzz build are
# clang-based): built through SO_ISA_BEGIN, checked against the ref backend.
# The CLI is built too: this is also the build without MPI.
test-clang: deps
	CC=clang cmake -S . -B $(CLANG_BUILD) -DCMAKE_BUILD_TYPE=Release -DSCALEOUT_WERROR=ON -DSCALEOUT_MPI=OFF >/dev/null
	cmake --build $(CLANG_BUILD) -j $(JOBS) --target scaleout_cli test_onednn test_onednn_wino test_onednn_bf16
	ctest --test-dir $(CLANG_BUILD) --output-on-failure -R '^test_onednn'

bench: build
	bench/run-all.sh $(BUILD)/scaleout

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(MPICH_BUILD) $(CLANG_BUILD)
