# The installed tree used from outside the source tree (tests/install.sh):
# `install` checks the layout, scaleout.pc and the CMake package with a small
# engine program; `install_example` builds examples/ against the prefix and
# trains LeNet-5 on 2 ranks (skipped, 77, until scaleout_job exists, and in
# builds without MPI). RUN_SERIAL: both compile and configure CMake projects.
# Deferred: SO_MPIEXEC / SO_MPI_TEST_ENV come from comm.cmake.
function(so_install_register_tests)
  # The library files this build installs; $<TARGET_EXISTS> is decided once
  # every target exists, wherever scaleout_job is defined.
  set(expect "libscaleout.a libscaleout_core.a"
      "$<$<TARGET_EXISTS:scaleout_comm>: libscaleout_comm.a>"
      "$<$<TARGET_EXISTS:scaleout_pmpi>: libscaleout-prof.so>"
      "$<$<TARGET_EXISTS:scaleout_job>: libscaleout_job.a>")
  string(JOIN "" expect ${expect})
  set(env "SCALEOUT_SOURCE_DIR=${CMAKE_SOURCE_DIR}" "SO_CC=${CMAKE_C_COMPILER}" "SO_INSTALL_EXPECT=${expect}")
  if(SO_MPI_TEST_ENV)
    list(APPEND env ${SO_MPI_TEST_ENV})   # MPIEXEC, and the sanitizer build's leak settings for MPI
  elseif(SCALEOUT_SANITIZE)
    list(APPEND env "LSAN_OPTIONS=suppressions=${CMAKE_SOURCE_DIR}/tests/lsan.supp:print_suppressions=0")
  endif()
  foreach(mode lib example)
    set(name install_${mode})
    if(mode STREQUAL lib)
      set(name install)
    endif()
    add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install.sh ${CMAKE_BINARY_DIR} ${mode})
    set_tests_properties(${name} PROPERTIES TIMEOUT 180 LABELS cli SKIP_RETURN_CODE 77 RUN_SERIAL TRUE
      ENVIRONMENT "${env}")
  endforeach()
endfunction()
cmake_language(DEFER CALL so_install_register_tests)
