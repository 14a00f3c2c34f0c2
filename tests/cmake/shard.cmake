# Sharded data parallelism under MPI: zero1/2/3 against dp, resume across
# rank counts, memory accounting, bad input (after comm.cmake: SO_MPIEXEC).
if(TARGET scaleout_comm)
  so_add_script_test(shard_cli shard_cli.sh LABELS "mpi;cli" TIMEOUT 900)
  set_property(TEST shard_cli APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
