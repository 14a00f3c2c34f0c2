# Pipeline partitions (src/pipe/) and `scaleout plan`.
include_guard(GLOBAL)
so_add_test(test_pipe LABELS unit TIMEOUT 60)
