# Command-line behaviour tests.
so_add_script_test(cli_train cli_train.sh LABELS cli TIMEOUT 300)
if(SCALEOUT_MPI)
  so_add_script_test(cli_dp cli_dp.sh LABELS "mpi;cli" TIMEOUT 600)
endif()
