# The fault suite (tests/faults/, docs/RELIABILITY.md): every injected fault
# ends with the documented status, message and time, leaving nothing behind.
# One ctest per family, label `faults` (ctest -L faults: about two minutes).
# The families start MPI jobs (after comm.cmake: SO_MPIEXEC).
include_guard(GLOBAL)
if(TARGET scaleout_comm)
  foreach(family fifo ckpt_damage signals nonfinite flags ranks)
    so_add_script_test(faults_${family} faults/${family}.sh LABELS faults TIMEOUT 180)
    set_property(TEST faults_${family} APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
  endforeach()
  # The kill -9 cases time how fast the launcher ends the job: alone, as a
  # parallel MPI test beside them held Open MPI's mpirun past the bound.
  set_tests_properties(faults_ranks PROPERTIES RUN_SERIAL TRUE)
endif()
