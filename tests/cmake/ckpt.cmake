# Checkpoint/restart (src/ckpt/, src/cli/ckpt_glue.c, src/cli/cmd_ckpt.c).
include_guard(GLOBAL)
so_add_test(test_ckpt LABELS unit)

# PyTorch equivalence of the safetensors export (skipped without torch).
add_executable(ckpt_logits ckpt_logits.c)
target_link_libraries(ckpt_logits PRIVATE scaleout)
add_test(NAME ckpt_torch COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/ckpt_torch.sh $<TARGET_FILE:scaleout_cli>
         $<TARGET_FILE:ckpt_logits>)
set_tests_properties(ckpt_torch PROPERTIES TIMEOUT 300 LABELS cli SKIP_RETURN_CODE 77
                     ENVIRONMENT "SCALEOUT_SOURCE_DIR=${CMAKE_SOURCE_DIR}")

# The overhead benchmark's in-run attribution against synthetic runs of known cost.
add_test(NAME ckpt_attrib COMMAND python3 ${CMAKE_SOURCE_DIR}/bench/ckpt_attrib.py --self-test)
set_tests_properties(ckpt_attrib PROPERTIES LABELS unit TIMEOUT 60)

# End to end: resume, levels, faults, refusals, commands (MPI, 2 emulated nodes).
# The launcher (SO_MPIEXEC) is chosen in comm.cmake, which is included after
# this file (alphabetical glob), so the property is set at the end of the directory.
if(TARGET scaleout_comm)
  so_add_script_test(ckpt_cli ckpt.sh LABELS "mpi;cli" TIMEOUT 600)
  # SIGTERM (scancel, time limit, requeue) -> checkpoint -> exit 75 -> --resume auto; no Slurm needed.
  so_add_script_test(ckpt_sigterm ckpt_sigterm.sh LABELS "mpi;cli" TIMEOUT 120)
  function(so_ckpt_set_launcher)
    set_property(TEST ckpt_cli ckpt_sigterm APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
  endfunction()
  cmake_language(DEFER CALL so_ckpt_set_launcher)
endif()
