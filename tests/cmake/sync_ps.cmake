# The parameter server (--sync ssp:S, async) under MPI: after comm.cmake (SO_MPIEXEC).
if(TARGET scaleout_comm)
  so_add_script_test(sync_ps sync_ps.sh LABELS "mpi;cli" TIMEOUT 600)
  set_property(TEST sync_ps APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
