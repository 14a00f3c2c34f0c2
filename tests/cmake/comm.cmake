# MPI tests of libscaleout_comm (label mpi). Each test runs under mpiexec
# through scripts/mpirun.sh, which adds --allow-run-as-root / --oversubscribe
# for Open MPI, so the same registration works for Open MPI and MPICH.
if(NOT TARGET scaleout_comm)
  return()
endif()

# The launcher must belong to the MPI we compiled against: Debian's plain
# `mpiexec` follows the alternatives system, and the other MPI's launcher would
# start NP singletons of size 1 (the tests also check their size, argv[1]).
set(SO_MPIEXEC "${MPIEXEC_EXECUTABLE}")
if("${MPI_C_LIB_NAMES};${MPI_C_LIBRARIES}" MATCHES "mpich")
  set(_so_flavour mpich)
elseif("${MPI_C_LIB_NAMES};${MPI_C_LIBRARIES}" MATCHES "openmpi|(^|;)mpi(;|$)")
  set(_so_flavour openmpi)
endif()
if(_so_flavour)
  find_program(SO_MPIEXEC_FLAVOUR NAMES mpiexec.${_so_flavour} NO_CACHE)
  if(SO_MPIEXEC_FLAVOUR)
    set(SO_MPIEXEC "${SO_MPIEXEC_FLAVOUR}")
  endif()
endif()
set(SO_MPIRUN ${CMAKE_SOURCE_DIR}/scripts/mpirun.sh)
set(SO_MPI_TEST_ENV "MPIEXEC=${SO_MPIEXEC}")
if(SCALEOUT_SANITIZE)
  # Open MPI leaves its MPI_Init allocations to process exit. tests/lsan.supp
  # names its libraries, which only appear in the leak stacks with the slow
  # unwinder (the MPI libraries have no frame pointers).
  list(APPEND SO_MPI_TEST_ENV "ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0"
       "LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0")
endif()

# so_add_mpi_test(NAME NP n... [ARGS a...] [TIMEOUT s] [LABELS l...])
# builds tests/NAME.c against libscaleout_comm and registers NAME_np<n> for each
# n as `scripts/mpirun.sh -np n NAME n ARGS...` (argv[1] is the expected size).
function(so_add_mpi_test name)
  cmake_parse_arguments(T "" "TIMEOUT" "NP;ARGS;LABELS" ${ARGN})
  if(NOT TARGET ${name})
    add_executable(${name} ${name}.c)
    target_link_libraries(${name} PRIVATE scaleout_comm)
  endif()
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 60)
  endif()
  foreach(np ${T_NP})
    add_test(NAME ${name}_np${np}
             COMMAND bash ${SO_MPIRUN} -np ${np} $<TARGET_FILE:${name}> ${np} ${T_ARGS})
    set_tests_properties(${name}_np${np} PROPERTIES TIMEOUT ${T_TIMEOUT}
      LABELS "mpi;${T_LABELS}" ENVIRONMENT "${SO_MPI_TEST_ENV}" PROCESSORS ${np})
  endforeach()
endfunction()

# so_add_mpi_fail_test(NAME EXE NP MAX_S PATTERN ARGS...): a failure drill that
# must end non-zero within MAX_S seconds with PATTERN in its output.
function(so_add_mpi_fail_test name exe np max_s pattern)
  add_test(NAME ${name}
           COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/comm_expect_fail.sh ${max_s} ${pattern}
                   bash ${SO_MPIRUN} -np ${np} $<TARGET_FILE:${exe}> ${np} ${ARGN})
  math(EXPR ctest_timeout "${max_s} + 30")
  set_tests_properties(${name} PROPERTIES TIMEOUT ${ctest_timeout} LABELS mpi
    ENVIRONMENT "${SO_MPI_TEST_ENV}" PROCESSORS ${np})
endfunction()

so_add_mpi_test(test_comm NP 1 2 3 4)
so_add_mpi_test(test_comm_async NP 1 2 3 4)
# Rank 1 skips a bucket and hangs (120 s): the others' watchdog (3 s) must abort
# naming it. The 60 s bound includes MPI start-up of 3 ranks on a loaded node
# and stays well below the hang, so a watchdog that never fires still fails.
so_add_mpi_fail_test(comm_watchdog test_comm_async 3 60
  "timed out after 3 s.*no stall report from ranks 1" watchdog)
# The same in a group of world ranks 2 and 3: the message names world rank 3
# (what mpirun shows), not its rank in the group.
so_add_mpi_fail_test(comm_watchdog_group test_comm_async 4 60
  "on rank 2. stuck in it: ranks 2. no stall report from ranks 3 --" watchdog_group)
# Rank 1 dies by SIGKILL: the runtime (Open MPI names the rank, MPICH the PID)
# or else the watchdog (5 s) must end the job (60 s bound, as above).
so_add_mpi_fail_test(comm_kill test_comm_async 3 60
  "process rank 1 .*signal 9|timed out after|EXIT STRING: Killed .signal 9." kill)
# The collective vocabulary with handles (comm_async.h): every collective x
# algorithm x transport x element type, continuations, groups, messages.
so_add_mpi_test(test_handles NP 1 2 3 4 5 LABELS coll TIMEOUT 240)
# The comm module's files call one way, bottom to top (docs/ARCHITECTURE.md):
# checked on the symbols of the built library.
add_test(NAME comm_layers COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/comm_layers.sh $<TARGET_FILE:scaleout_comm>)
set_tests_properties(comm_layers PROPERTIES TIMEOUT 60 LABELS unit SKIP_RETURN_CODE 77)
