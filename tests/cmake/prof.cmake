# Profiler (src/prof/): synthetic spans, POP metrics, statistics, trace nesting.
include_guard(GLOBAL)
so_add_test(test_prof LABELS unit)
if(TARGET scaleout_comm)
  so_add_script_test(prof_cli prof_cli.sh LABELS "mpi;cli" TIMEOUT 300)
  set_property(TEST prof_cli APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
# The report: text, HTML, and the page in headless Chromium (skips without it).
so_add_script_test(report_cli report_cli.sh LABELS cli TIMEOUT 300)
set_tests_properties(report_cli PROPERTIES SKIP_RETURN_CODE 77)
if(TARGET scaleout_comm)
  set_property(TEST report_cli APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
