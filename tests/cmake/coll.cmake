# Tests of the collective-algorithm library (label mpi, coll): every
# algorithm of allreduce / reduce-scatter / allgather / bcast at np 1-8
# (oversubscribed on small machines; np 7 and 8 keep the multi-MiB count for
# a subset only), and the bench / tune command lines.
if(NOT TARGET scaleout_comm)
  return()
endif()

# Not a test: hier's zero copy in a training-like loop (bench/zc_loop.c,
# numbers in docs/COLLECTIVES.md).
add_executable(zc_loop ${CMAKE_SOURCE_DIR}/bench/zc_loop.c)
target_link_libraries(zc_loop PRIVATE scaleout_comm)

# so_add_mpi_test and SO_MPIRUN come from comm.cmake, which the glob includes
# after this file: register at the end of the directory instead.
function(so_coll_register_tests)
so_add_mpi_test(test_coll NP 1 2 3 4 5 LABELS coll TIMEOUT 120)
add_test(NAME test_coll_quick_np7 COMMAND bash ${SO_MPIRUN} -np 7 $<TARGET_FILE:test_coll> 7 quick)
add_test(NAME test_coll_quick_np8 COMMAND bash ${SO_MPIRUN} -np 8 $<TARGET_FILE:test_coll> 8 quick)
set_tests_properties(test_coll_quick_np7 test_coll_quick_np8 PROPERTIES TIMEOUT 180
  LABELS "mpi;coll" ENVIRONMENT "${SO_MPI_TEST_ENV}")
# hier's window copies with plain stores (SCALEOUT_SHM_NT=0; streaming is the
# default) and a chunk that does not divide the multi-MiB count's slices.
add_test(NAME test_coll_cached_np3 COMMAND bash ${SO_MPIRUN} -np 3 $<TARGET_FILE:test_coll> 3 quick)
set_tests_properties(test_coll_cached_np3 PROPERTIES TIMEOUT 180 LABELS "mpi;coll"
  ENVIRONMENT "${SO_MPI_TEST_ENV};SCALEOUT_SHM_NT=0;SCALEOUT_SHM_CHUNK=200000")

# Every algorithm again over the shm transport (channels in a shared window
# instead of MPI point-to-point): SCALEOUT_COLL_TRANSPORT=shm.
foreach(np 3 4)
  add_test(NAME test_coll_shm_np${np} COMMAND bash ${SO_MPIRUN} -np ${np} $<TARGET_FILE:test_coll> ${np})
  set_tests_properties(test_coll_shm_np${np} PROPERTIES TIMEOUT 180 LABELS "mpi;coll"
    ENVIRONMENT "${SO_MPI_TEST_ENV};SCALEOUT_COLL_TRANSPORT=shm")
endforeach()
# And over scaleout's tcp transport (authenticated sockets on loopback here).
add_test(NAME test_coll_tcp_np3 COMMAND bash ${SO_MPIRUN} -np 3 $<TARGET_FILE:test_coll> 3)
set_tests_properties(test_coll_tcp_np3 PROPERTIES TIMEOUT 180 LABELS "mpi;coll"
  ENVIRONMENT "${SO_MPI_TEST_ENV};SCALEOUT_COLL_TRANSPORT=tcp")

# CLI: bench --check at np 2 and 3, tune -> auto, bad flags exit 2.
add_test(NAME coll_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/coll_cli.sh
         $<TARGET_FILE:scaleout_cli> ${SO_MPIRUN})
set_tests_properties(coll_cli PROPERTIES TIMEOUT 240 LABELS "mpi;coll;cli"
  ENVIRONMENT "${SO_MPI_TEST_ENV}")
endfunction()
cmake_language(DEFER CALL so_coll_register_tests)
