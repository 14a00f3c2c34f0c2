# Emulated nodes (label mpi;cluster): scripts/cluster.sh builds network
# namespaces joined by shaped veth links and launches across them; the test
# skips (77) where namespaces cannot be made (not root, no iproute2).
if(NOT TARGET scaleout_comm)
  return()
endif()
add_executable(cluster_probe cluster_probe.c)
target_link_libraries(cluster_probe PRIVATE scaleout_comm)

# SO_MPIEXEC comes from comm.cmake, which the glob includes after this file.
function(so_cluster_register_test)
  add_test(NAME cluster COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cluster.sh
           $<TARGET_FILE:scaleout_cli> $<TARGET_FILE:cluster_probe>)
  # RUN_SERIAL: the nodes share the machine's cores, and the byte count wants a quiet link.
  set_tests_properties(cluster PROPERTIES TIMEOUT 180 LABELS "mpi;cluster" SKIP_RETURN_CODE 77
    RUN_SERIAL TRUE ENVIRONMENT "SCALEOUT_SOURCE_DIR=${CMAKE_SOURCE_DIR};MPIEXEC=${SO_MPIEXEC}")
endfunction()
cmake_language(DEFER CALL so_cluster_register_test)
