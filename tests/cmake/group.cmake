# Process groups (label mpi, coll): so_comm_split into groups of every size
# 1..np-1 with every collective algorithm, the async engine, isend/irecv,
# registered buffers and per-group tuning on each (tests/test_group.c).
if(NOT TARGET scaleout_comm)
  return()
endif()

# so_add_mpi_test comes from comm.cmake, which the glob includes after this
# file: register at the end of the directory instead.
function(so_group_register_tests)
  so_add_mpi_test(test_group NP 1 3 8 LABELS coll TIMEOUT 120)
endfunction()
cmake_language(DEFER CALL so_group_register_tests)
