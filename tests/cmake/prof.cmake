# Profiler (src/prof/): synthetic spans, POP metrics, statistics, trace nesting.
include_guard(GLOBAL)
so_add_test(test_prof LABELS unit)
if(TARGET scaleout_comm)
  so_add_script_test(prof_cli prof_cli.sh LABELS "mpi;cli" TIMEOUT 300)
  set_property(TEST prof_cli APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
# Clock alignment with a skewed rank (offset + drift), and the merged trace in
# a real trace viewer (speedscope in headless Chromium; skips without them).
if(TARGET scaleout_comm)
  so_add_script_test(prof_clock prof_clock.sh LABELS "mpi;cli" TIMEOUT 120)
  so_add_script_test(prof_viewer prof_viewer.sh LABELS "mpi;cli" TIMEOUT 300)
  set_tests_properties(prof_viewer PROPERTIES SKIP_RETURN_CODE 77)
  set_property(TEST prof_clock prof_viewer APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
# The report: text, HTML, and the page in headless Chromium (skips without it).
so_add_script_test(report_cli report_cli.sh LABELS cli TIMEOUT 300)
set_tests_properties(report_cli PROPERTIES SKIP_RETURN_CODE 77)
if(TARGET scaleout_comm)
  set_property(TEST report_cli APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
# The pipeline schedule's lanes in profile.json and the report (gpipe, 1f1b,
# interleaved; the browser part skips without Chromium).
if(TARGET scaleout_comm)
  so_add_script_test(report_lanes report_lanes.sh LABELS "mpi;cli" TIMEOUT 300)
  set_tests_properties(report_lanes PROPERTIES SKIP_RETURN_CODE 77)
  set_property(TEST report_lanes APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
# libscaleout-prof.so on a small MPI program with known calls and on the
# collective benchmark. Not in sanitizer builds: an instrumented preload
# library cannot come before the ASan runtime.
if(TARGET scaleout_pmpi AND NOT SCALEOUT_SANITIZE)
  add_executable(pmpi_prog pmpi_prog.c)
  target_link_libraries(pmpi_prog PRIVATE MPI::MPI_C)
  add_test(NAME pmpi_cli COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/pmpi_cli.sh $<TARGET_FILE:scaleout_cli>
           $<TARGET_FILE:scaleout_pmpi> $<TARGET_FILE:pmpi_prog>)
  set_tests_properties(pmpi_cli PROPERTIES TIMEOUT 120 LABELS "mpi;cli"
    ENVIRONMENT "SCALEOUT_SOURCE_DIR=${CMAKE_SOURCE_DIR};MPIEXEC=${SO_MPIEXEC}")
endif()
# Not a test: the in-process A/B overhead benchmark (bench/prof_ab.c, run by
# bench/prof_overhead.py), built here beside the tests that share its libraries.
add_executable(prof_ab ${CMAKE_SOURCE_DIR}/bench/prof_ab.c)
target_link_libraries(prof_ab PRIVATE scaleout)
