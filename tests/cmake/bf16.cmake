# BF16 mixed precision from the command line (issue 38): refusals on any CPU,
# then resume, data parallel and accuracy where the CPU has AVX512_BF16 (skips,
# exit 77, elsewhere). The launcher (SO_MPIEXEC) is chosen in comm.cmake,
# included after this file, so the property is set at the end of the directory.
if(TARGET scaleout_comm)
  so_add_script_test(bf16_cli bf16_cli.sh LABELS "mpi;cli" TIMEOUT 300)
  function(so_bf16_set_launcher)
    set_property(TEST bf16_cli APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
  endfunction()
  cmake_language(DEFER CALL so_bf16_set_launcher)
endif()
