# Data-parallel training under MPI (after comm.cmake, which picks the launcher
# matching the MPI library: SO_MPIEXEC).
if(TARGET scaleout_comm)
  so_add_script_test(cli_dp cli_dp.sh LABELS "mpi;cli" TIMEOUT 900)
  set_property(TEST cli_dp APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
