# Relaxed consistency (--sync): the grammar.
so_add_test(test_sync_spec LABELS unit)
# Training with --sync local, diloco, gossip over MPI: bad input, the
# synchronous phase bitwise, local:1 / gossip on 3 ranks / diloco:1 against
# sync to 1e-6, bytes per step (after comm.cmake: SO_MPIEXEC).
if(TARGET scaleout_comm)
  so_add_script_test(sync_cli sync_cli.sh LABELS "mpi;cli" TIMEOUT 400)
  set_property(TEST sync_cli APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
# Checkpoints under every --sync method: resumed bitwise (local, diloco,
# gossip, ssp:0, async), the average exported, refusals (after comm.cmake: SO_MPIEXEC).
if(TARGET scaleout_comm)
  so_add_script_test(sync_ckpt sync_ckpt.sh LABELS "mpi;cli" TIMEOUT 400)
  set_property(TEST sync_ckpt APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
