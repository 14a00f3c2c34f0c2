# Pipeline partitions (src/pipe/) and `scaleout plan`.
include_guard(GLOBAL)
so_add_test(test_pipe LABELS unit TIMEOUT 60)
so_add_test(test_pipe_parts LABELS unit TIMEOUT 60)
so_add_script_test(plan_cli plan_cli.sh LABELS cli TIMEOUT 120)
# Training with pipeline stages under MPI (after comm.cmake: SO_MPIEXEC).
if(TARGET scaleout_comm)
  so_add_script_test(pipe_cli pipe_cli.sh LABELS "mpi;cli" TIMEOUT 900)
  set_property(TEST pipe_cli APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
# BF16 tensors between pipeline stages under --precision bf16 (issue 38); the
# BF16 parts skip (exit 77) on a CPU without AVX512_BF16.
if(TARGET scaleout_comm)
  so_add_script_test(pipe_bf16 pipe_bf16.sh LABELS "mpi;cli" TIMEOUT 120)
  set_property(TEST pipe_bf16 APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
