# Benchmark suite (`scaleout bench train|scaling|accuracy|compare|plot`):
# validation, record schema, warm-up exclusion, compare, MLLOG and plots
# without MPI; the scaling sweep and 2-rank runs under MPI; the JSON reader's
# fuzz smoke run. (The file name sorts after comm.cmake, which sets SO_MPIEXEC.)
so_add_script_test(bench_cli bench_cli.sh LABELS cli TIMEOUT 300)
if(TARGET scaleout_comm)
  so_add_script_test(bench_mpi bench_mpi.sh LABELS "mpi;cli" TIMEOUT 300)
  set_property(TEST bench_mpi APPEND PROPERTY ENVIRONMENT "MPIEXEC=${SO_MPIEXEC}")
endif()
so_add_script_test(fuzz_json run-fuzz-json.sh LABELS fuzz TIMEOUT 300)
set_tests_properties(fuzz_json PROPERTIES SKIP_RETURN_CODE 77)
