# The GPT-2 workload of the time-to-accuracy matrix (bench/gpt2_tta.sh):
# `bench accuracy --target-loss` from an llm.c file against its PyTorch peer.
include_guard(GLOBAL)
if(TARGET scaleout_comm)
  so_add_script_test(gpt2_tta gpt2_tta.sh LABELS "mpi;cli" TIMEOUT 120)
  set_property(TEST gpt2_tta APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
