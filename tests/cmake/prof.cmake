# Profiler (src/prof/): synthetic spans, POP metrics, statistics, trace nesting.
include_guard(GLOBAL)
so_add_test(test_prof LABELS unit)
if(TARGET scaleout_comm)
  so_add_script_test(prof_cli prof_cli.sh LABELS "mpi;cli" TIMEOUT 300)
  set_property(TEST prof_cli APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
