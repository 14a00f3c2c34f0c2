# GPT-2: the sequence ops (src/nn, src/backend), the model (src/models/gpt2.c)
# and its checks against an independent PyTorch GPT-2 (bench/torch_gpt2.py).
include_guard(GLOBAL)
so_add_test(test_seq_ops LABELS unit TIMEOUT 300)
# Not a test: scaleout's side of bench/gpt2_check.py (the check against PyTorch).
add_executable(gpt2_check ${CMAKE_SOURCE_DIR}/tests/gpt2_check.c)
target_link_libraries(gpt2_check PRIVATE scaleout m)
so_add_test(test_seq_onednn LABELS unit TIMEOUT 300 ISA_CAPS avx2 sse4.2)
# Not a test: GPT-2 training steps on the engine with a per-operator profile (bench/gpt2_step.c).
add_executable(gpt2_step ${CMAKE_SOURCE_DIR}/bench/gpt2_step.c)
target_link_libraries(gpt2_step PRIVATE scaleout)
# Not a test: scaleout's GEMM alone on GPT-2's linear-layer products (bench/gemm_bench.c).
add_executable(gemm_bench ${CMAKE_SOURCE_DIR}/bench/gemm_bench.c)
target_include_directories(gemm_bench PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(gemm_bench PRIVATE scaleout)
so_add_script_test(gpt2_torch gpt2_torch.sh LABELS unit TIMEOUT 300)
# End to end: `scaleout train` over 2 MPI ranks against PyTorch's per-step losses.
if(TARGET scaleout_comm)
  so_add_script_test(gpt2_train gpt2_train.sh LABELS "mpi;cli" TIMEOUT 300)
  function(so_gpt2_set_launcher)
    set_property(TEST gpt2_train APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
  endfunction()
  cmake_language(DEFER CALL so_gpt2_set_launcher)
endif()
# GPT-2 as pipeline stages (the tied token table on the first and the last
# stage, its gradient summed between them) against one process.
if(TARGET scaleout_comm)
  so_add_script_test(pipe_gpt2 pipe_gpt2.sh LABELS "mpi;cli" TIMEOUT 300)
  set_property(TEST pipe_gpt2 APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
