# Sharded data parallelism under MPI (after comm.cmake: SO_MPIEXEC):
# shard_cli the quick end-to-end cases (like dp at np 2, resume at the same
# and other N, plan --max-memory, bad input), shard_matrix N = 1..4, AdamW,
# ResNet-20, HYBRID_SHARD, resume from np 4, the memory formulas.
if(TARGET scaleout_comm)
  so_add_script_test(shard_cli shard_cli.sh LABELS "mpi;cli" TIMEOUT 300)
  so_add_script_test(shard_matrix shard_matrix.sh LABELS "mpi;cli" TIMEOUT 900)
  set_property(TEST shard_cli shard_matrix APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
# GPT-2's tied token table under zero1/2/3 (like dp at np 2 and 3, resume
# bitwise and re-sharded): shard_gpt2.
if(TARGET scaleout_comm)
  so_add_script_test(shard_gpt2 shard_gpt2.sh LABELS "mpi;cli" TIMEOUT 300)
  set_property(TEST shard_gpt2 APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
# Units finer than a layer (row chunks of a large dense layer): shard_chunks.
if(TARGET scaleout_comm)
  so_add_script_test(shard_chunks shard_chunks.sh LABELS "mpi;cli" TIMEOUT 400)
  set_property(TEST shard_chunks APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
