# The fault suite's TCP cases (label faults; tests/faults/tcp.sh): strangers
# during the set-up of hier's ring and of the pipeline's mesh, garbage after
# set-up, kill -9 and SIGSTOP of a rank, across emulated nodes. Skips (77)
# without root, namespaces, Open MPI or the test hooks.
if(NOT TARGET scaleout_comm)
  return()
endif()
# SO_MPIEXEC comes from comm.cmake, which the glob includes after this file.
function(so_faults_tcp_register_test)
  add_test(NAME faults_tcp COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/faults/tcp.sh $<TARGET_FILE:scaleout_cli>)
  # RUN_SERIAL: its time bounds and the emulated cluster want the machine to themselves.
  set_tests_properties(faults_tcp PROPERTIES TIMEOUT 240 LABELS "faults;mpi;cluster" SKIP_RETURN_CODE 77
    RUN_SERIAL TRUE ENVIRONMENT
    "SCALEOUT_SOURCE_DIR=${CMAKE_SOURCE_DIR};MPIEXEC=${SO_MPIEXEC};SCALEOUT_TEST_HOOKS=$<BOOL:${SCALEOUT_TEST_HOOKS}>")
endfunction()
cmake_language(DEFER CALL so_faults_tcp_register_test)
